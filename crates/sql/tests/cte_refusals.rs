//! Data-modifying WITH queries pgtier refuses where PostgreSQL answers:
//! each part of such a statement reads the tables as they were before it
//! (the engine would show one part another's changes), foreign keys are
//! checked at the statement's end (the engine checks each row as it is
//! written), and calls of one sequence interleave as readers pull rows.
//! Each is 0A000 at planning, naming the reason, and changes nothing.
//! PostgreSQL must really answer each (else it belongs in tests/slt); what
//! pgtier answers is tests/slt/89_with_data_modifying.slt.
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
    "CREATE TABLE cr_child (id int PRIMARY KEY, t int REFERENCES cr_t ON DELETE CASCADE)",
    "INSERT INTO cr_child VALUES (1, 1)",
    "CREATE FUNCTION cr_v(k int) RETURNS int LANGUAGE sql AS 'SELECT v FROM cr_t WHERE id = k'",
];

/// (statement, words the refusal names)
const REFUSED: &[(&str, &str)] = &[
    // PostgreSQL counts the rows as they were before the DELETE (3).
    ("WITH del AS (DELETE FROM cr_t WHERE id = 1 RETURNING id) SELECT count(*) FROM cr_t", "after changing it"),
    ("WITH ins AS (INSERT INTO cr_log VALUES (1, 'a')) SELECT count(*) FROM cr_log", "after changing it"),
    // The old values, not the new ones.
    ("WITH upd AS (UPDATE cr_t SET v = v * 2 RETURNING v) SELECT sum(v) FROM cr_t", "after changing it"),
    (
        "WITH upd AS (UPDATE cr_t SET v = v * 2 RETURNING v) SELECT u.v, t.v FROM upd u JOIN cr_t t ON t.v = u.v / 2",
        "after changing it",
    ),
    // PostgreSQL updates no row twice in one statement: UPDATE 0.
    (
        "WITH upd AS (UPDATE cr_t SET v = v RETURNING id) UPDATE cr_t SET v = 0 WHERE id IN (SELECT id FROM upd)",
        "after changing it",
    ),
    ("WITH d AS (DELETE FROM cr_t WHERE id = 1) DELETE FROM cr_t WHERE id = 1", "after changing it"),
    // ON CONFLICT sees the row the first part updated (with.sql's case).
    (
        "WITH u AS (INSERT INTO cr_t VALUES (2, 0) ON CONFLICT (id) DO UPDATE SET v = 5 RETURNING id, v) \
         INSERT INTO cr_t VALUES (2, 1) ON CONFLICT (id) DO UPDATE SET v = (SELECT v FROM u) RETURNING id, v",
        "after changing it",
    ),
    // The cascade runs at PostgreSQL's statement end: the child row is still read.
    ("WITH d AS (DELETE FROM cr_t WHERE id = 1 RETURNING id) SELECT count(*) FROM cr_child", "after changing it"),
    // PostgreSQL checks the child's key at the statement's end, when the parent is there.
    ("WITH c AS (INSERT INTO cr_child VALUES (2, 4)) INSERT INTO cr_t VALUES (4, 40)", "foreign key"),
    // with.sql: the rows t2 inserts are not in the y t2 is joined to.
    (
        "WITH RECURSIVE t(a) AS (SELECT 0 UNION ALL SELECT a + 1 FROM t WHERE a + 1 < 5), \
         t2 AS (INSERT INTO cr_t SELECT a + 10, a FROM t RETURNING *) SELECT * FROM t2 JOIN cr_t USING (id)",
        "after changing it",
    ),
    // PostgreSQL inserts (5, 'b') first (nothing reads u, so it runs last),
    // and u's ON CONFLICT then does nothing; in the other order the second
    // INSERT would fail with 23505.
    (
        "WITH u AS (INSERT INTO cr_log VALUES (5, 'a') ON CONFLICT DO NOTHING) INSERT INTO cr_log VALUES (5, 'b')",
        "unique",
    ),
    // Whether the new key meets the old row depends on the parts' order.
    ("WITH d AS (DELETE FROM cr_log WHERE id = 1 RETURNING id) INSERT INTO cr_log SELECT id, 'z' FROM d", "unique"),
    // PostgreSQL interleaves the two parts' nextval calls as it reads a.
    (
        "WITH a AS (INSERT INTO cr_log SELECT nextval('cr_seq'), 'a' FROM generate_series(1, 3) RETURNING id) \
         SELECT id, nextval('cr_seq') FROM a",
        "sequence",
    ),
    // A SQL function's body reads cr_t for its caller: PostgreSQL's 10, the old value.
    ("WITH u AS (UPDATE cr_t SET v = v + 1 WHERE id = 1 RETURNING id) SELECT cr_v(1) FROM u", "after changing it"),
    // PostgreSQL answers these; pgtier does not show or keep such a plan.
    ("EXPLAIN WITH d AS (DELETE FROM cr_t WHERE id = 9 RETURNING id) SELECT * FROM d", "data-modifying"),
    ("CREATE TABLE cr_x AS WITH d AS (DELETE FROM cr_t WHERE id = 9 RETURNING id) SELECT * FROM d", "data-modifying"),
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
fn refused_data_modifying_with_queries_change_nothing() {
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
                "SELECT (SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM cr_t), (SELECT count(*) FROM cr_log), \
                 (SELECT count(*) FROM cr_child)",
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
