//! The commit participant: at the commit of an application transaction that
//! changed its tables it sees the final changes (in first-write order), may
//! add bookkeeping rows that commit with the transaction, and its refusal
//! rolls everything back with its error. Tables without one, and other
//! origins, never call it.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::{create_parent_child, int, open, text};
use parking_lot::Mutex;
use pgtier_engine::{
    ColumnDef, CommitMode, CommitParticipant, DataType, EngineError, Origin, Result, RowChange, RowOp, TableDef,
    TableId, Transaction, Value,
};

/// Records what it is handed; refuses while `refuse`; counts its commits in
/// a bookkeeping table.
struct Recorder {
    refuse: AtomicBool,
    ledger: TableId,
    seen: Mutex<Vec<(RowOp, String, Vec<Value>)>>,
    finished: Mutex<Vec<(u64, bool)>>,
    next_ticket: AtomicU64,
}

impl CommitParticipant for Recorder {
    fn commit_first(&self, txn: &mut Transaction, changes: &[RowChange]) -> Result<u64> {
        let mut seen = self.seen.lock();
        for change in changes {
            seen.push((change.op, change.table.name.clone(), change.row().values()));
        }
        if self.refuse.load(Ordering::SeqCst) {
            return Err(EngineError::hook("23514", "new row violates check constraint \"positive\"", None));
        }
        let ticket = self.next_ticket.fetch_add(1, Ordering::SeqCst) + 1;
        txn.insert(self.ledger, &[Value::Int8(i64::try_from(ticket).unwrap())])?;
        Ok(ticket)
    }

    fn finished(&self, ticket: u64, committed: bool) {
        self.finished.lock().push((ticket, committed));
    }
}

fn ledger_rows(db: &pgtier_engine::Database, ledger: TableId) -> u64 {
    let mut t = db.begin().unwrap();
    let n = t.scan_table(ledger, |_| Ok(true)).unwrap();
    t.commit().unwrap();
    n
}

#[test]
fn the_participant_commits_first_and_its_refusal_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    let ledger =
        t.create_table(&TableDef::new("ledger", vec![ColumnDef::new("ticket", DataType::Int8)], &["ticket"])).unwrap();
    t.insert(parent, &[int(1), text("a"), Value::Int8(1)]).unwrap();
    t.commit().unwrap();
    let recorder = Arc::new(Recorder {
        refuse: AtomicBool::new(false),
        ledger,
        seen: Mutex::new(Vec::new()),
        finished: Mutex::new(Vec::new()),
        next_ticket: AtomicU64::new(0),
    });
    db.set_commit_participant(parent, Some(recorder.clone()));

    // Final changes only, in first-write order; the child table has no participant.
    let mut t = db.begin().unwrap();
    t.update(parent, &[int(1)], &[(1, text("b"))]).unwrap();
    t.insert(parent, &[int(2), text("c"), Value::Int8(2)]).unwrap();
    t.insert(child, &[int(2), Value::Int2(1), text("x")]).unwrap();
    t.update(parent, &[int(1)], &[(1, text("d"))]).unwrap();
    t.insert(parent, &[int(3), text("e"), Value::Int8(3)]).unwrap();
    t.delete(parent, &[int(3)]).unwrap();
    t.commit().unwrap();
    let seen = std::mem::take(&mut *recorder.seen.lock());
    assert_eq!(
        seen,
        vec![
            (RowOp::Update, "parent".to_owned(), vec![int(1), text("d"), Value::Int8(1)]),
            (RowOp::Insert, "parent".to_owned(), vec![int(2), text("c"), Value::Int8(2)]),
        ]
    );
    assert_eq!(*recorder.finished.lock(), vec![(1, true)]);
    assert_eq!(ledger_rows(&db, ledger), 1, "the participant's bookkeeping row commits with the transaction");

    // A refusal: nothing of the transaction stays, and the error is the participant's.
    recorder.refuse.store(true, Ordering::SeqCst);
    let mut t = db.begin().unwrap();
    t.update(parent, &[int(1)], &[(1, text("refused"))]).unwrap();
    t.insert(parent, &[int(4), text("f"), Value::Int8(4)]).unwrap();
    let error = t.commit().unwrap_err();
    assert_eq!(error.sqlstate(), "23514");
    let mut t = db.begin().unwrap();
    let name = t.get_with(parent, &[int(1)], |row| row.values()[1].clone()).unwrap();
    assert_eq!(name, Some(text("d")));
    assert!(t.get_with(parent, &[int(4)], |_| ()).unwrap().is_none());
    t.commit().unwrap();
    assert_eq!(recorder.seen.lock().len(), 2);
    assert_eq!(ledger_rows(&db, ledger), 1);
    assert_eq!(recorder.finished.lock().len(), 1, "finished is called only after a participant's commit");

    // Other origins and reads never call it.
    recorder.seen.lock().clear();
    let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    t.insert(parent, &[int(9), text("loaded"), Value::Int8(9)]).unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    t.get_with(parent, &[int(9)], |_| ()).unwrap();
    t.commit().unwrap();
    assert!(recorder.seen.lock().is_empty());

    // Removed: commits go straight through.
    db.set_commit_participant(parent, None);
    let mut t = db.begin().unwrap();
    t.update(parent, &[int(1)], &[(1, text("free"))]).unwrap();
    t.commit().unwrap();
    assert!(recorder.seen.lock().is_empty());
}
