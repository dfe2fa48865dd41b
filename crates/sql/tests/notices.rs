//! NOTICEs PostgreSQL sends for IF [NOT] EXISTS that skips: the same text
//! and SQLSTATE, collected per statement for the server to forward.
#![allow(clippy::unwrap_used)]

use pgtier_engine::{Database, EngineConfig};
use pgtier_sql::{Connection, SqlNotice};

#[test]
fn if_exists_skips_raise_postgres_notices() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut conn = Connection::new(db);
    conn.execute_sql("DROP TABLE IF EXISTS nosuch").unwrap();
    assert_eq!(
        conn.take_notices(),
        vec![SqlNotice { sqlstate: "00000", message: "table \"nosuch\" does not exist, skipping".into() }]
    );
    assert!(conn.take_notices().is_empty(), "taken once");
    conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    assert!(conn.take_notices().is_empty(), "no notice when the table is created");
    conn.execute_sql("CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY)").unwrap();
    conn.execute_sql("CREATE INDEX IF NOT EXISTS t_pkey ON t (id)").unwrap();
    conn.execute_sql("DROP INDEX IF EXISTS no_idx").unwrap();
    let notices: Vec<(&str, String)> = conn.take_notices().into_iter().map(|n| (n.sqlstate, n.message)).collect();
    assert_eq!(
        notices,
        vec![
            ("42P07", "relation \"t\" already exists, skipping".to_owned()),
            ("42P07", "relation \"t_pkey\" already exists, skipping".to_owned()),
            ("00000", "index \"no_idx\" does not exist, skipping".to_owned()),
        ]
    );
}
