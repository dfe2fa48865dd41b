//! Functions made with CREATE FUNCTION are catalog state like tables:
//! they survive a restart (the WAL and checkpoint carry their engine
//! table) and roll back with their transaction. What they answer is
//! tests/slt/90_sql_functions.slt, against PostgreSQL.
#![allow(clippy::unwrap_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

fn open(dir: &std::path::Path) -> Connection {
    let config = EngineConfig { commit_mode: CommitMode::Sync, background: false, ..EngineConfig::default() };
    Connection::new(Database::open(dir, config).unwrap())
}

fn one(conn: &mut Connection, sql: &str) -> String {
    let rows = conn.execute_sql(sql).unwrap().rows.unwrap();
    rows.get(0).unwrap().text(0).unwrap()
}

#[test]
fn functions_survive_a_restart_and_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut conn = open(dir.path());
        conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY, v text)").unwrap();
        conn.execute_sql("INSERT INTO t VALUES (1, 'one')").unwrap();
        conn.execute_sql(
            "CREATE FUNCTION label(k int) RETURNS text LANGUAGE sql STABLE AS $$ SELECT v FROM t WHERE id = k $$",
        )
        .unwrap();
        conn.execute_sql("CREATE FUNCTION twice(int) RETURNS int RETURN $1 * 2").unwrap();
        conn.execute_sql("CREATE OR REPLACE FUNCTION twice(int) RETURNS int RETURN $1 * 3").unwrap();
        // Made and dropped inside transactions that roll back.
        conn.execute_sql("BEGIN").unwrap();
        conn.execute_sql("CREATE FUNCTION gone() RETURNS int RETURN 1").unwrap();
        conn.execute_sql("DROP FUNCTION label").unwrap();
        conn.execute_sql("ROLLBACK").unwrap();
        assert_eq!(conn.execute_sql("SELECT gone()").unwrap_err().sqlstate, "42883");
        assert_eq!(one(&mut conn, "SELECT label(1)"), "one");
    }
    let mut conn = open(dir.path());
    assert_eq!(one(&mut conn, "SELECT label(1)"), "one");
    assert_eq!(one(&mut conn, "SELECT twice(7)"), "21");
    assert_eq!(conn.execute_sql("SELECT gone()").unwrap_err().sqlstate, "42883");
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pg_proc"), "2");
    conn.execute_sql("DROP FUNCTION label(int), twice(int)").unwrap();
    drop(conn);
    let mut conn = open(dir.path());
    assert_eq!(conn.execute_sql("SELECT twice(1)").unwrap_err().sqlstate, "42883");
}
