//! `synchronous_commit` per session, as PostgreSQL has it: `off` commits
//! without waiting for the WAL to be durable, anything else waits; the
//! value at commit time decides, and the default is the database's mode.
#![allow(clippy::unwrap_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig, Value};
use pgtier_sql::Connection;

fn durable_commits(db: &Database) -> u64 {
    db.stats().commits_sync
}

#[test]
fn synchronous_commit_chooses_each_commits_durability() {
    let dir = tempfile::tempdir().unwrap();
    let db =
        Database::open(dir.path(), EngineConfig { commit_mode: CommitMode::Sync, ..EngineConfig::default() }).unwrap();
    let mut conn = Connection::new(db.clone());
    assert_eq!(conn.setting("synchronous_commit"), Some("on"), "the database's mode is the default");
    conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    let insert = conn.prepare("INSERT INTO t VALUES ($1)").unwrap();

    let before = durable_commits(&db);
    conn.execute(&insert, &[Value::Int4(1)]).unwrap();
    assert_eq!(durable_commits(&db), before + 1, "on: the commit waited for the WAL");

    conn.execute_sql("SET synchronous_commit = off").unwrap();
    conn.execute(&insert, &[Value::Int4(2)]).unwrap();
    conn.execute_sql("BEGIN").unwrap();
    conn.execute(&insert, &[Value::Int4(3)]).unwrap();
    conn.execute_sql("COMMIT").unwrap();
    assert_eq!(durable_commits(&db), before + 1, "off: neither commit waited");

    // The value at commit time decides, even when set inside the block.
    conn.execute_sql("BEGIN").unwrap();
    conn.execute(&insert, &[Value::Int4(4)]).unwrap();
    conn.execute_sql("SET synchronous_commit TO local").unwrap();
    conn.execute_sql("COMMIT").unwrap();
    assert_eq!(durable_commits(&db), before + 2, "local waits for the local WAL");
    assert_eq!(conn.setting("synchronous_commit"), Some("local"));

    let err = conn.execute_sql("SET synchronous_commit = sometimes").unwrap_err();
    assert_eq!(err.sqlstate, "22023");
    conn.execute_sql("SET synchronous_commit TO DEFAULT").unwrap();
    assert_eq!(conn.setting("synchronous_commit"), Some("on"));

    // Another session is not affected; an async database defaults to off.
    let other = Connection::new(db);
    assert_eq!(other.setting("synchronous_commit"), Some("on"));
    let dir2 = tempfile::tempdir().unwrap();
    let db2 = Database::open(dir2.path(), EngineConfig { commit_mode: CommitMode::Async, ..EngineConfig::default() })
        .unwrap();
    let mut conn2 = Connection::new(db2);
    assert_eq!(conn2.setting("synchronous_commit"), Some("off"));
    conn2.execute_sql("SET synchronous_commit = on").unwrap();
    conn2.execute_sql("SET synchronous_commit TO DEFAULT").unwrap();
    assert_eq!(conn2.setting("synchronous_commit"), Some("off"));
}
