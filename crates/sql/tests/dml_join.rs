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

/// READ COMMITTED: a target row that a concurrent writer moved out of the
/// join while UPDATE ... FROM, DELETE ... USING or MERGE waited for its
/// lock is left alone; one still in the join is written from its latest
/// version (as PostgreSQL's EvalPlanQual does).
#[test]
fn a_target_row_that_left_the_join_while_waiting_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut mover = Connection::new(db.clone());
    mover.execute_sql("CREATE TABLE k (id int PRIMARY KEY, g int, v int)").unwrap();
    mover.execute_sql("CREATE TABLE src (g int, w int)").unwrap();
    mover.execute_sql("INSERT INTO k VALUES (1, 10, 0), (2, 20, 0), (3, 30, 0), (4, 40, 0)").unwrap();
    mover.execute_sql("INSERT INTO src VALUES (10, 1), (20, 2), (30, 3), (40, 4)").unwrap();
    for (mover_sql, waiter_sql, expected) in [
        ("UPDATE k SET g = 11 WHERE id = 1", "UPDATE k SET v = s.w FROM src s WHERE s.g = k.g AND k.id = 1", "UPDATE 0"),
        ("UPDATE k SET g = 21 WHERE id = 2", "DELETE FROM k USING src s WHERE s.g = k.g AND k.id = 2", "DELETE 0"),
        ("UPDATE k SET g = 31 WHERE id = 3", "MERGE INTO k USING src s ON s.g = k.g AND k.id = 3 WHEN MATCHED THEN UPDATE SET v = 9", "MERGE 0"),
        ("UPDATE k SET v = 5 WHERE id = 4", "UPDATE k SET v = k.v + s.w FROM src s WHERE s.g = k.g AND k.id = 4", "UPDATE 1"),
    ] {
        mover.execute_sql("BEGIN").unwrap();
        mover.execute_sql(mover_sql).unwrap();
        let waits_before = db.stats().lock_waits;
        let db2 = db.clone();
        let sql = waiter_sql.to_owned();
        let waiter = std::thread::spawn(move || {
            let mut c = Connection::new(db2);
            let r = c.execute_sql(&sql).unwrap();
            format!("{} {}", r.tag.split(' ').next().unwrap_or(""), r.rows_affected)
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while db.stats().lock_waits == waits_before {
            assert!(Instant::now() < deadline, "the waiter never waited for the row lock: {waiter_sql}");
            std::thread::sleep(Duration::from_millis(1));
        }
        mover.execute_sql("COMMIT").unwrap();
        assert_eq!(waiter.join().unwrap(), expected, "{waiter_sql}");
    }
    let r = mover.execute_sql("SELECT id, g, v FROM k ORDER BY id").unwrap();
    let rows: Vec<String> = r.rows.unwrap().iter().map(|row| (0..3).map(|k| row.text(k).unwrap()).collect::<Vec<_>>().join(" ")).collect();
    assert_eq!(rows, ["1 11 0", "2 21 0", "3 31 0", "4 40 9"]);
}
