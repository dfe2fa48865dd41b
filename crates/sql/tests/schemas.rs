//! Schemas beyond the differential corpus (tests/slt/51_schemas.slt): they
//! survive a restart, a rolled-back one does not; relations in them, or
//! created while one leads the search path, are refused with 0A000 (pgtier
//! keeps every relation in public), never made somewhere else.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use pgtier_engine::{Database, EngineConfig};
use pgtier_sql::Connection;

fn open(dir: &Path) -> Connection {
    Connection::new(Database::open(dir, EngineConfig::default()).unwrap())
}

fn rows(conn: &mut Connection, sql: &str) -> Vec<String> {
    let res = conn.execute_sql(sql).unwrap_or_else(|e| panic!("{sql}: {} {}", e.sqlstate, e.message));
    res.rows.map(|rows| rows.iter().map(|r| (0..r.len()).map(|k| r.text(k).unwrap_or_else(|| "NULL".into())).collect::<Vec<_>>().join(" ")).collect()).unwrap_or_default()
}

fn sqlstate(conn: &mut Connection, sql: &str) -> String {
    match conn.execute_sql(sql) {
        Ok(_) => "00000".into(),
        Err(e) => e.sqlstate.to_owned(),
    }
}

const LIST: &str = "SELECT string_agg(nspname, ',' ORDER BY nspname) FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'";

#[test]
fn schemas_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut c = open(dir.path());
        rows(&mut c, "CREATE SCHEMA kept");
        rows(&mut c, "CREATE SCHEMA gone");
        rows(&mut c, "DROP SCHEMA gone");
        rows(&mut c, "BEGIN");
        rows(&mut c, "CREATE SCHEMA never");
        rows(&mut c, "ROLLBACK");
        assert_eq!(rows(&mut c, LIST), ["kept,public"]);
        c.database().checkpoint().unwrap();
        rows(&mut c, "CREATE SCHEMA after_checkpoint");
    }
    let mut c = open(dir.path());
    assert_eq!(rows(&mut c, LIST), ["after_checkpoint,kept,public"]);
    assert_eq!(sqlstate(&mut c, "CREATE SCHEMA kept"), "42P06");
    // Schemas are not relations: nothing of them shows in pg_class or the table lists.
    assert_eq!(rows(&mut c, "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace"), ["0"]);
    assert_eq!(rows(&mut c, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"), ["0"]);
    rows(&mut c, "DROP SCHEMA kept, after_checkpoint");
    drop(c);
    let mut c = open(dir.path());
    assert_eq!(rows(&mut c, LIST), ["public"]);
}

#[test]
fn relations_in_a_schema_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path());
    rows(&mut c, "CREATE SCHEMA s");
    rows(&mut c, "CREATE TABLE t (a int)");
    for sql in [
        "CREATE TABLE s.t (a int)",
        "CREATE VIEW s.v AS SELECT 1 AS one",
        "CREATE SEQUENCE s.q",
        "SELECT * FROM s.t",
        "INSERT INTO s.t VALUES (1)",
        "DROP TABLE s.t",
    ] {
        assert_eq!(sqlstate(&mut c, sql), "0A000", "{sql}");
    }
    rows(&mut c, "SET search_path = s, public");
    for sql in ["CREATE TABLE u (a int)", "CREATE VIEW v AS SELECT 1 AS one", "CREATE SEQUENCE q", "CREATE TABLE u AS SELECT 1 AS one"] {
        assert_eq!(sqlstate(&mut c, sql), "0A000", "{sql}");
    }
    // Reading an unqualified name still finds public's table, as PostgreSQL does with s empty.
    assert_eq!(rows(&mut c, "SELECT count(*) FROM t"), ["0"]);
    rows(&mut c, "RESET search_path");
    rows(&mut c, "CREATE TABLE u (a int)");
    assert_eq!(sqlstate(&mut c, "SELECT 'schema s' FROM pg_namespace WHERE nspname = 's'"), "00000");
}
