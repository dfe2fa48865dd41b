//! Data-modifying WITH queries, which PostgreSQL runs once, to their end,
//! whether read or not, while the rest of the statement reads the tables
//! as they were before it: pgtier refuses each with 0A000 at planning
//! (never runs it per reference, or not at all), and changes nothing.
//! PostgreSQL must really answer each (else it belongs in tests/slt).
//!
//! Likewise a WITH query or a subquery that advances a sequence, read by a
//! statement that may stop reading it early (LIMIT, EXISTS, IN, a scalar
//! subquery):
//! PostgreSQL runs it only as far as it is read, pgtier whole, and the
//! sequence would show the difference.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

const SETUP: &[&str] = &[
    "CREATE TABLE cr_t (id int PRIMARY KEY, v int)",
    "CREATE TABLE cr_log (id int PRIMARY KEY, note text)",
    "INSERT INTO cr_t VALUES (1, 10), (2, 20), (3, 30)",
    "CREATE SEQUENCE cr_seq",
];

/// (statement, words the refusal names)
const REFUSED: &[(&str, &str)] = &[
    ("WITH ins AS (INSERT INTO cr_log VALUES (1, 'a') RETURNING id) SELECT id FROM ins", "data-modifying"),
    // Not read by the query: PostgreSQL still inserts the row.
    ("WITH ins AS (INSERT INTO cr_log VALUES (1, 'a') RETURNING id) SELECT 1", "data-modifying"),
    ("WITH ins AS (INSERT INTO cr_log VALUES (1, 'a')) SELECT count(*) FROM cr_log", "data-modifying"),
    ("WITH upd AS (UPDATE cr_t SET v = v + 1 RETURNING v) SELECT sum(v) FROM upd", "data-modifying"),
    ("WITH del AS (DELETE FROM cr_t WHERE id = 1 RETURNING id) SELECT count(*) FROM cr_t", "data-modifying"),
    (
        "WITH moved AS (DELETE FROM cr_t RETURNING id, v) INSERT INTO cr_log SELECT id, v::text FROM moved",
        "data-modifying",
    ),
    // Unreferenced, before an INSERT: PostgreSQL still deletes.
    ("WITH gone AS (DELETE FROM cr_t WHERE id = 2) INSERT INTO cr_log VALUES (7, 'x')", "data-modifying"),
    // PostgreSQL advances the sequence by 1 (one row read), not 10.
    ("WITH q AS (SELECT nextval('cr_seq') AS v FROM generate_series(1, 10)) SELECT v FROM q LIMIT 1", "sequence"),
    (
        "WITH q AS (SELECT nextval('cr_seq') AS v FROM generate_series(1, 10)) SELECT EXISTS (SELECT 1 FROM q)",
        "sequence",
    ),
    ("WITH q AS MATERIALIZED (SELECT nextval('cr_seq') AS v) SELECT (SELECT v FROM q) + (SELECT v FROM q)", "sequence"),
    // The same in a subquery: PostgreSQL reads 1 row of 10, 1 of 5, and
    // stops at the match.
    ("SELECT * FROM (SELECT nextval('cr_seq') AS v FROM generate_series(1, 10)) t LIMIT 1", "sequence"),
    ("SELECT EXISTS (SELECT nextval('cr_seq') FROM generate_series(1, 5))", "sequence"),
    ("SELECT 1 WHERE 3 IN (SELECT nextval('cr_seq') FROM generate_series(1, 10))", "sequence"),
];

#[test]
fn data_modifying_with_queries_are_refused_and_change_nothing() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("cte_refusals_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let mut conn = Connection::new(Database::open(dir.path(), config).unwrap());
    for sql in SETUP {
        pg.simple_query(sql).unwrap();
        conn.execute_sql(sql).unwrap();
    }
    let state = |conn: &mut Connection| {
        let r = conn
            .execute_sql(
                "SELECT (SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM cr_t), (SELECT count(*) FROM cr_log)",
            )
            .unwrap();
        let rows = r.rows.unwrap();
        format!("{:?}", rows.get(0).unwrap().values())
    };
    let before = state(&mut conn);
    for (sql, names) in REFUSED {
        pg.simple_query("BEGIN").unwrap();
        if let Err(e) = pg.simple_query(sql) {
            panic!("PostgreSQL refuses {sql} ({e}): it belongs in tests/slt");
        }
        pg.simple_query("ROLLBACK").unwrap();
        let e = conn.execute_sql(sql).expect_err(sql);
        assert_eq!(e.sqlstate, "0A000", "{sql}: {e:?}");
        assert!(e.message.contains(names), "{sql}: {}", e.message);
        assert_eq!(state(&mut conn), before, "{sql} changed the tables");
    }
    let next = conn.execute_sql("SELECT nextval('cr_seq')").unwrap().rows.unwrap();
    assert_eq!(format!("{:?}", next.get(0).unwrap().values()), format!("{:?}", [pgtier_engine::Value::Int8(1)]));
}
