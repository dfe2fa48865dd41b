//! UPDATE ... FROM and DELETE ... USING at size: 10,000 target rows joined
//! to 10,000 source rows (a table on an unindexed equality, a subquery, a
//! VALUES list by primary key), on pgtier (direct mode) and on the private
//! PostgreSQL. Counts and the final tables must be equal; the times are
//! printed for a human (`-- --nocapture`), never asserted. A nested loop
//! would compare 10^8 pairs: the inner level is hashed or found by key
//! instead (exec/hash_join.rs), and a subquery or VALUES source is the
//! outer level, evaluated once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
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

/// (what, statement, rows it affects)
fn statements() -> Vec<(&'static str, String, u64)> {
    let mut values = String::new();
    for id in 1..=ROWS {
        let _ = write!(values, "{}({id}, {})", if id == 1 { "" } else { ", " }, id * 7);
    }
    vec![
        ("UPDATE ... FROM table", "UPDATE big_t t SET v = s.nv FROM big_s s WHERE s.k = t.k".into(), u64::from(ROWS)),
        (
            "DELETE ... USING table",
            "DELETE FROM big_t t USING big_s s WHERE s.k = t.k AND s.nv % 2 = 0".into(),
            u64::from(ROWS / 2),
        ),
        (
            "UPDATE ... FROM subquery",
            format!(
                "UPDATE big_t t SET v = d.nv FROM (SELECT g AS k, g * 5 AS nv FROM generate_series(1, {ROWS}) g) d WHERE d.k = t.k"
            ),
            u64::from(ROWS / 2),
        ),
        (
            "UPDATE ... FROM VALUES by key",
            format!("UPDATE big_t t SET v = t.v + d.nv FROM (VALUES {values}) AS d(id, nv) WHERE d.id = t.id"),
            u64::from(ROWS / 2),
        ),
    ]
}

const CHECK: &str = "SELECT count(*)::text, sum(v)::text, sum(v * id::bigint)::text FROM big_t";

fn pgtier_run() -> (Vec<String>, Vec<Duration>) {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let mut conn = Connection::new(Database::open(dir.path(), config).unwrap());
    for s in setup() {
        conn.execute_sql(&s).unwrap();
    }
    let (mut states, mut times) = (Vec::new(), Vec::new());
    for (what, sql, n) in statements() {
        let start = Instant::now();
        assert_eq!(conn.execute_sql(&sql).unwrap().rows_affected, n, "{what}");
        times.push(start.elapsed());
        let rows = conn.execute_sql(CHECK).unwrap().rows.unwrap();
        let row = rows.iter().next().unwrap();
        states.push((0..3).map(|k| row.text(k).unwrap()).collect::<Vec<_>>().join(" "));
    }
    (states, times)
}

fn postgres_run() -> (Vec<String>, Vec<Duration>) {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("dml_join_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    for s in setup() {
        pg.batch_execute(&s).unwrap();
    }
    pg.batch_execute("ANALYZE big_t; ANALYZE big_s").unwrap();
    let (mut states, mut times) = (Vec::new(), Vec::new());
    for (what, sql, n) in statements() {
        let start = Instant::now();
        assert_eq!(pg.execute(sql.as_str(), &[]).unwrap(), n, "{what}");
        times.push(start.elapsed());
        let row = pg.query_one(CHECK, &[]).unwrap();
        states.push((0..3).map(|k| row.get::<_, String>(k)).collect::<Vec<_>>().join(" "));
    }
    (states, times)
}

#[test]
fn ten_thousand_by_ten_thousand_matches_postgres() {
    let (tier, tier_times) = pgtier_run();
    let (pg, pg_times) = postgres_run();
    assert_eq!(tier, pg);
    for (((what, _, _), t), p) in statements().iter().zip(&tier_times).zip(&pg_times) {
        println!("{what}, 10k x 10k: pgtier {t:?}, PostgreSQL {p:?}");
    }
}
