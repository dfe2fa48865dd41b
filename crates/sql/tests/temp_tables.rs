//! Temporary tables across sessions and restarts: invisible to other
//! sessions, gone at session end, and gone after a crash (a child process
//! killed with its temporary table committed), with the name free again.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use pgtier_engine::{Database, EngineConfig};
use pgtier_sql::Connection;

fn rows(conn: &mut Connection, sql: &str) -> Vec<String> {
    let res = conn.execute_sql(sql).unwrap_or_else(|e| panic!("{sql}: {} {}", e.sqlstate, e.message));
    res.rows
        .map(|rows| {
            rows.iter()
                .map(|r| (0..r.len()).map(|k| r.text(k).unwrap_or_else(|| "NULL".into())).collect::<Vec<_>>().join(" "))
                .collect()
        })
        .unwrap_or_default()
}

fn sqlstate(conn: &mut Connection, sql: &str) -> String {
    conn.execute_sql(sql).map_or_else(|e| e.sqlstate.to_owned(), |_| "00000".into())
}

const TEMP_RELATIONS: &str = "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname LIKE 'pg\\_temp\\_%'";

#[test]
fn temp_tables_are_private_to_their_session() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut a = Connection::new(db.clone());
    let mut b = Connection::new(db.clone());
    rows(&mut a, "CREATE TABLE t (a int)");
    rows(&mut a, "CREATE TEMP TABLE t (secret text)");
    rows(&mut a, "INSERT INTO t VALUES ('a only')");
    assert_eq!(rows(&mut a, "SELECT * FROM t"), ["a only"]);
    // Session b sees the permanent table, not a's temporary one.
    assert_eq!(sqlstate(&mut b, "SELECT secret FROM t"), "42703");
    assert_eq!(rows(&mut b, "SELECT count(*) FROM t"), ["0"]);
    let a_schema = rows(
        &mut a,
        "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname LIKE 'pg\\_temp\\_%' AND c.relname = 't'",
    );
    assert_eq!(a_schema.len(), 1);
    assert_eq!(sqlstate(&mut b, &format!("SELECT * FROM {}.t", a_schema[0])), "0A000");
    assert_eq!(sqlstate(&mut b, "SELECT * FROM pg_temp.t"), "42P01");
    rows(&mut b, "CREATE TEMP TABLE t (mine int)");
    rows(&mut b, "INSERT INTO t VALUES (2)");
    assert_eq!(rows(&mut b, "SELECT * FROM t"), ["2"]);
    assert_eq!(rows(&mut a, "SELECT * FROM t"), ["a only"]);
    assert_eq!(rows(&mut b, TEMP_RELATIONS), ["2"]);
    drop(a);
    assert_eq!(rows(&mut b, TEMP_RELATIONS), ["1"]);
    drop(b);
    let mut c = Connection::new(db);
    assert_eq!(rows(&mut c, TEMP_RELATIONS), ["0"]);
    assert_eq!(rows(&mut c, "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'pg\\_temp\\_%'"), ["0"]);
}

/// The child: commits a temporary table and dies without closing anything.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("PGTIER_TEMP_CRASH_DIR") else { return };
    let db = Database::open(Path::new(&dir), EngineConfig::default()).unwrap();
    let mut c = Connection::new(db);
    rows(&mut c, "CREATE TEMP TABLE leftover (id int PRIMARY KEY, v text)");
    rows(&mut c, "INSERT INTO leftover VALUES (1, 'x')");
    rows(&mut c, "CREATE TEMP TABLE leftover_seq (id serial)");
    assert_eq!(rows(&mut c, TEMP_RELATIONS), ["4"]);
    std::process::abort();
}

#[test]
fn temp_tables_are_gone_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    drop(Database::open(dir.path(), EngineConfig::default()).unwrap());
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env("PGTIER_TEMP_CRASH_DIR", dir.path())
        .status()
        .unwrap();
    assert!(!status.success(), "the child must die, not finish");
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    // The child's schema was committed and recovered: the engine still has it
    // until a session starts.
    assert!(pgtier_sql::catalog::user_schemas(&db.catalog()).iter().any(|s| s.name.starts_with("pg_temp_")));
    let mut c = Connection::new(db);
    assert_eq!(rows(&mut c, TEMP_RELATIONS), ["0"]);
    assert_eq!(sqlstate(&mut c, "SELECT * FROM leftover"), "42P01");
    rows(&mut c, "CREATE TABLE leftover (a int)");
    rows(&mut c, "CREATE TEMP TABLE leftover (b int)");
    rows(&mut c, "CREATE SEQUENCE leftover_seq_id_seq");
}
