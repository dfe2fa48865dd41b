//! ALTER TABLE beyond the differential corpus: what pgtier refuses (0A000
//! naming it, or 55000 for a cache group's table, whose definition mirrors
//! PostgreSQL's), and that an ALTER committed through SQL survives a
//! restart with its rows, constraints and attribute-number gaps.
#![allow(clippy::unwrap_used)]

use pgtier_engine::{ColumnDef, CommitMode, DataType, Database, EngineConfig, TableDef};
use pgtier_sql::Connection;

fn config() -> EngineConfig {
    // No checkpoint at close: the restart replays the ALTERs from the WAL.
    EngineConfig {
        commit_mode: CommitMode::Sync,
        background: false,
        checkpoint_on_close: false,
        ..EngineConfig::default()
    }
}

fn rows(conn: &mut Connection, sql: &str) -> Vec<String> {
    let r = conn.execute_sql(sql).unwrap();
    r.rows
        .unwrap()
        .iter()
        .map(|row| (0..row.len()).map(|k| row.text(k).unwrap_or_else(|| "NULL".into())).collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn refused_alterations_name_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = Connection::new(Database::open(dir.path(), config()).unwrap());
    conn.execute_sql("CREATE TABLE p (id int PRIMARY KEY, v int)").unwrap();
    conn.execute_sql("CREATE TABLE c (id int PRIMARY KEY, pid int REFERENCES p)").unwrap();
    conn.execute_sql("CREATE TABLE one (only_col int)").unwrap();
    conn.execute_sql("CREATE SEQUENCE s").unwrap();
    conn.execute_sql("CREATE TABLE under_view (id int PRIMARY KEY, v int)").unwrap();
    conn.execute_sql("CREATE VIEW over_it AS SELECT id, v FROM under_view").unwrap();
    for (sql, names) in [
        // A view keeps its query's text, so the columns it reads must stay
        // (PostgreSQL follows a rename, and refuses drops and type changes).
        ("ALTER TABLE under_view ALTER COLUMN v TYPE bigint", "view \"over_it\" depends on it"),
        ("ALTER TABLE under_view RENAME COLUMN v TO w", "view \"over_it\" depends on it"),
        ("ALTER TABLE over_it RENAME TO over_that", "view \"over_it\""),
        ("ALTER TABLE p ADD COLUMN s serial", "serial or identity"),
        ("ALTER TABLE p ENABLE ROW LEVEL SECURITY", "ROW LEVEL SECURITY"),
        ("ALTER TABLE p ADD CONSTRAINT v_pos CHECK (v > 0) NOT VALID", "NOT VALID"),
        ("ALTER TABLE one DROP COLUMN only_col", "without columns"),
        ("ALTER TABLE p ALTER COLUMN v ADD GENERATED ALWAYS AS IDENTITY", "ADD GENERATED"),
        ("ALTER INDEX p_pkey RENAME TO p_key2", "primary key"),
        ("ALTER TABLE s RENAME TO s2", "renaming a sequence"),
        ("ALTER TABLE p RENAME CONSTRAINT p_pkey TO p_key2", "primary key"),
    ] {
        let e = conn.execute_sql(sql).unwrap_err();
        assert_eq!(e.sqlstate, "0A000", "{sql}: {e:?}");
        assert!(e.message.contains(names), "{sql}: {} (should name {names})", e.message);
    }
    // Nothing changed.
    assert_eq!(rows(&mut conn, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'p'"), ["2"]);
}

#[test]
fn a_cache_group_table_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), config()).unwrap();
    // The cache keeps its group definition in the table's annotation.
    let mut t = db.begin().unwrap();
    let def = TableDef {
        annotation: Some("group g: root".into()),
        ..TableDef::new("cached", vec![ColumnDef::new("id", DataType::Int4)], &["id"])
    };
    t.create_table(&def).unwrap();
    t.commit().unwrap();
    let mut conn = Connection::new(db);
    let e = conn.execute_sql("ALTER TABLE cached ADD COLUMN v int").unwrap_err();
    assert_eq!(e.sqlstate, "55000");
    assert!(e.message.contains("cache group") && e.message.contains("PostgreSQL"), "{}", e.message);
    assert!(e.hint.is_some());
    let e = conn.execute_sql("ALTER TABLE cached RENAME TO other").unwrap_err();
    assert_eq!(e.sqlstate, "55000");
}

#[test]
fn a_committed_alter_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut conn = Connection::new(Database::open(dir.path(), config()).unwrap());
        conn.execute_sql("CREATE TABLE p (id int PRIMARY KEY, code text UNIQUE)").unwrap();
        conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY, gone text, pid int REFERENCES p, v text)").unwrap();
        conn.execute_sql("INSERT INTO p VALUES (1, 'a'), (2, 'b')").unwrap();
        conn.execute_sql("INSERT INTO t VALUES (1, 'x', 1, '10'), (2, 'y', 2, '20')").unwrap();
        conn.database().checkpoint().unwrap();
        conn.execute_sql(
            "ALTER TABLE t DROP COLUMN gone, ADD COLUMN n int DEFAULT 7 NOT NULL, ALTER COLUMN v TYPE int USING v::int",
        )
        .unwrap();
        // Rows written earlier in the ALTER's own transaction are logged
        // before the rewrite: replay applies them to the old table first.
        conn.execute_sql("BEGIN").unwrap();
        conn.execute_sql("INSERT INTO p VALUES (3, 'c')").unwrap();
        conn.execute_sql("ALTER TABLE p ADD COLUMN w int DEFAULT 0").unwrap();
        conn.execute_sql("UPDATE p SET w = 9 WHERE id = 3").unwrap();
        conn.execute_sql("COMMIT").unwrap();
        conn.execute_sql("BEGIN").unwrap();
        conn.execute_sql("ALTER TABLE t RENAME TO never").unwrap();
        // Dropped uncommitted with the connection.
    }
    let mut conn = Connection::new(Database::open(dir.path(), config()).unwrap());
    assert_eq!(rows(&mut conn, "SELECT * FROM t ORDER BY id"), ["1 1 10 7", "2 2 20 7"]);
    assert_eq!(
        rows(
            &mut conn,
            "SELECT column_name, ordinal_position FROM information_schema.columns WHERE table_name = 't' ORDER BY ordinal_position"
        ),
        ["id 1", "pid 3", "v 4", "n 5"]
    );
    assert!(conn.execute_sql("SELECT * FROM never").is_err());
    assert_eq!(rows(&mut conn, "SELECT * FROM p ORDER BY id"), ["1 a 0", "2 b 0", "3 c 9"]);
    assert_eq!(conn.execute_sql("DELETE FROM p WHERE id = 1").unwrap_err().sqlstate, "23503");
    assert_eq!(conn.execute_sql("INSERT INTO t (id, pid, v) VALUES (3, 9, 1)").unwrap_err().sqlstate, "23503");
    conn.execute_sql("INSERT INTO t (id, pid, v) VALUES (3, 2, 30)").unwrap();
    assert_eq!(rows(&mut conn, "SELECT n FROM t WHERE id = 3"), ["7"]);
}
