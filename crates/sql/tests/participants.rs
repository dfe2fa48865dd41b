//! Commit participants and implicit blocks, as session/block.rs documents
//! them: a participant commits before the local commit and its failure
//! rolls the local part back with its error; a participant's part ends with
//! the block; a run of Executes up to its end is one transaction.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use pgtier_engine::{Database, EngineConfig, Value};
use pgtier_sql::session::{CommitParticipant, TransactionStatus, Via};
use pgtier_sql::{Connection, Result, SqlError};

/// Records the calls it gets; fails `before_commit` while `fail` is set.
#[derive(Default)]
struct Recorder {
    calls: Arc<Mutex<Vec<&'static str>>>,
    fail: bool,
}

impl CommitParticipant for Recorder {
    fn before_commit(&mut self) -> Result<()> {
        self.calls.lock().unwrap().push("before_commit");
        if self.fail { Err(SqlError::new("40001", "the other side refused")) } else { Ok(()) }
    }

    fn after_commit(&mut self) {
        self.calls.lock().unwrap().push("after_commit");
    }

    fn abort(&mut self) {
        self.calls.lock().unwrap().push("abort");
    }
}

fn setup() -> (tempfile::TempDir, Connection, Arc<Mutex<Vec<&'static str>>>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut conn = Connection::new(db);
    conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    let recorder = Recorder::default();
    let calls = recorder.calls.clone();
    conn.add_participant(Box::new(recorder));
    (dir, conn, calls)
}

fn taken(calls: &Mutex<Vec<&'static str>>) -> Vec<&'static str> {
    std::mem::take(&mut *calls.lock().unwrap())
}

fn count(conn: &mut Connection) -> i64 {
    match conn.execute_sql("SELECT count(*) FROM t").unwrap().rows.unwrap().get(0).unwrap().get(0) {
        Some(Value::Int8(n)) => *n,
        other => panic!("count(*) gave {other:?}"),
    }
}

#[test]
fn participants_commit_first_and_their_failure_rolls_back() {
    let (_dir, mut conn, calls) = setup();
    conn.execute_sql("INSERT INTO t VALUES (1)").unwrap();
    assert_eq!(taken(&calls), ["before_commit", "after_commit"], "autocommit");

    conn.participant_mut::<Recorder>().unwrap().fail = true;
    conn.execute_sql("BEGIN").unwrap();
    conn.execute_sql("INSERT INTO t VALUES (2)").unwrap();
    let e = conn.commit().unwrap_err();
    assert_eq!(e.sqlstate, "40001");
    assert_eq!(taken(&calls), ["before_commit", "abort"]);
    assert_eq!(conn.transaction_status(), TransactionStatus::Idle, "the block is over");
    conn.participant_mut::<Recorder>().unwrap().fail = false;
    assert_eq!(count(&mut conn), 1, "the local part was rolled back");
    taken(&calls);

    conn.execute_sql("BEGIN").unwrap();
    conn.execute_sql("INSERT INTO t VALUES (3)").unwrap();
    conn.execute_sql("ROLLBACK").unwrap();
    assert_eq!(taken(&calls), ["abort"]);
}

#[test]
fn an_error_in_a_block_aborts_participants_when_the_block_ends() {
    let (_dir, mut conn, calls) = setup();
    conn.execute_sql("BEGIN").unwrap();
    assert!(conn.execute_sql("INSERT INTO t VALUES (1), (1)").is_err());
    assert_eq!(conn.transaction_status(), TransactionStatus::Failed);
    assert!(taken(&calls).is_empty(), "not before the block ends");
    conn.execute_sql("COMMIT").unwrap();
    assert_eq!(taken(&calls), ["abort"], "COMMIT of a failed block rolls back");
}

#[test]
fn executes_up_to_the_end_of_their_run_are_one_transaction() {
    let (_dir, mut conn, calls) = setup();
    let insert = conn.prepare_stmt("INSERT INTO t VALUES ($1)", &[]).unwrap();
    for id in 1..=2 {
        conn.execute_stmt(&insert, &[Value::Int4(id)], Via::Execute { sync_next: false }, |_| ()).unwrap();
    }
    assert_eq!(conn.transaction_status(), TransactionStatus::InBlock);
    assert!(conn.execute_stmt(&insert, &[Value::Int4(1)], Via::Execute { sync_next: false }, |_| ()).is_err());
    conn.end_implicit_block().unwrap();
    assert_eq!(conn.transaction_status(), TransactionStatus::Idle);
    assert_eq!(taken(&calls), ["abort"]);
    assert_eq!(count(&mut conn), 0, "a failed run leaves nothing");

    taken(&calls);
    conn.execute_stmt(&insert, &[Value::Int4(1)], Via::Execute { sync_next: false }, |_| ()).unwrap();
    conn.execute_stmt(&insert, &[Value::Int4(2)], Via::Execute { sync_next: true }, |_| ()).unwrap();
    conn.end_implicit_block().unwrap();
    assert_eq!(taken(&calls), ["before_commit", "after_commit"], "one commit at the end of the run");
    assert_eq!(count(&mut conn), 2);

    taken(&calls);
    conn.execute_stmt(&insert, &[Value::Int4(3)], Via::Execute { sync_next: true }, |_| ()).unwrap();
    assert_eq!(conn.transaction_status(), TransactionStatus::Idle, "a lone Execute autocommits");
    assert_eq!(taken(&calls), ["before_commit", "after_commit"]);
}
