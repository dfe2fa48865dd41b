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

/// PL/pgSQL functions and triggers too: a trigger made before a restart
/// fires after it, one made in a rolled-back transaction never does, and
/// a prepared INSERT planned before CREATE TRIGGER fires it.
#[test]
fn triggers_survive_a_restart_and_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut conn = open(dir.path());
        conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY, v text)").unwrap();
        conn.execute_sql("CREATE TABLE log (id int, op text)").unwrap();
        let ins = conn.prepare_text("INSERT INTO t VALUES ($1, 'x')").unwrap();
        conn.execute(&ins, &[pgtier_engine::Value::Int4(1)]).unwrap();
        conn.execute_sql(
            "CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN INSERT INTO log VALUES (NEW.id, TG_OP); NEW.v := upper(NEW.v); RETURN NEW; END $$",
        )
        .unwrap();
        conn.execute_sql("CREATE TRIGGER a BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION audit()").unwrap();
        conn.execute(&ins, &[pgtier_engine::Value::Int4(2)]).unwrap();
        conn.execute_sql("BEGIN").unwrap();
        conn.execute_sql("CREATE TRIGGER b BEFORE UPDATE ON t FOR EACH ROW EXECUTE FUNCTION audit()").unwrap();
        conn.execute_sql("DROP TRIGGER a ON t").unwrap();
        conn.execute_sql("ROLLBACK").unwrap();
        assert_eq!(one(&mut conn, "SELECT string_agg(id || v, ',' ORDER BY id) FROM t"), "1x,2X");
    }
    let mut conn = open(dir.path());
    conn.execute_sql("INSERT INTO t VALUES (3, 'y')").unwrap();
    conn.execute_sql("UPDATE t SET v = 'z' WHERE id = 3").unwrap();
    assert_eq!(one(&mut conn, "SELECT string_agg(id || op, ',' ORDER BY id) FROM log"), "2INSERT,3INSERT");
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pg_trigger"), "1");
}
