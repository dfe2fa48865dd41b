//! UPDATE ... FROM and DELETE ... USING at size: 10,000 target rows joined
//! on an unindexed equality to 10,000 source rows, on pgtier (direct mode)
//! and on the private PostgreSQL. The final tables must be equal; the
//! times are printed for a human (`-- --nocapture`), never asserted.
//! A nested loop would compare 10^8 pairs; the join's inner level is
//! hashed instead (exec/hash_join.rs), as PostgreSQL hashes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

const ROWS: u32 = 10_000;

fn setup() -> Vec<String> {
    vec![
        "CREATE TABLE big_t (id int PRIMARY KEY, k int, v int)".into(),
        "CREATE TABLE big_s (sid int PRIMARY KEY, k int, nv int)".into(),
        format!("INSERT INTO big_t SELECT g, {ROWS} + 1 - g, 0 FROM generate_series(1, {ROWS}) g"),
        format!("INSERT INTO big_s SELECT g, g, g * 3 FROM generate_series(1, {ROWS}) g"),
    ]
}

const UPDATE: &str = "UPDATE big_t t SET v = s.nv FROM big_s s WHERE s.k = t.k";
const DELETE: &str = "DELETE FROM big_t t USING big_s s WHERE s.k = t.k AND s.nv % 2 = 0";
const CHECK: &str = "SELECT count(*)::text, sum(v)::text, sum(v * id::bigint)::text FROM big_t";

fn pgtier_run() -> (Vec<String>, Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let mut conn = Connection::new(Database::open(dir.path(), config).unwrap());
    for s in setup() {
        conn.execute_sql(&s).unwrap();
    }
    let start = Instant::now();
    let n = conn.execute_sql(UPDATE).unwrap().rows_affected;
    let update = start.elapsed();
    assert_eq!(n, u64::from(ROWS));
    let after_update = conn.execute_sql(CHECK).unwrap().rows.unwrap();
    let after_update: String = (0..3).map(|k| after_update.iter().next().unwrap().text(k).unwrap().to_string()).collect::<Vec<_>>().join(" ");
    let start = Instant::now();
    let n = conn.execute_sql(DELETE).unwrap().rows_affected;
    let delete = start.elapsed();
    assert_eq!(n, u64::from(ROWS / 2));
    let after_delete = conn.execute_sql(CHECK).unwrap().rows.unwrap();
    let after_delete: String = (0..3).map(|k| after_delete.iter().next().unwrap().text(k).unwrap().to_string()).collect::<Vec<_>>().join(" ");
    (vec![after_update, after_delete], update, delete)
}

fn postgres_run() -> (Vec<String>, Duration, Duration) {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("dml_join_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    for s in setup() {
        pg.batch_execute(&s).unwrap();
    }
    pg.batch_execute("ANALYZE big_t; ANALYZE big_s").unwrap();
    let check = |pg: &mut postgres::Client| {
        let row = pg.query_one(CHECK, &[]).unwrap();
        (0..3).map(|k| row.get::<_, String>(k)).collect::<Vec<_>>().join(" ")
    };
    let start = Instant::now();
    assert_eq!(pg.execute(UPDATE, &[]).unwrap(), u64::from(ROWS));
    let update = start.elapsed();
    let after_update = check(&mut pg);
    let start = Instant::now();
    assert_eq!(pg.execute(DELETE, &[]).unwrap(), u64::from(ROWS / 2));
    let delete = start.elapsed();
    let after_delete = check(&mut pg);
    (vec![after_update, after_delete], update, delete)
}

#[test]
fn ten_thousand_by_ten_thousand_matches_postgres() {
    let (tier, tier_update, tier_delete) = pgtier_run();
    let (pg, pg_update, pg_delete) = postgres_run();
    assert_eq!(tier, pg);
    println!("UPDATE ... FROM 10k x 10k: pgtier {tier_update:?}, PostgreSQL {pg_update:?}");
    println!("DELETE ... USING 10k x 10k (5k deleted): pgtier {tier_delete:?}, PostgreSQL {pg_delete:?}");
}
