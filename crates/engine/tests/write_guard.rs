//! The write guard: an installed guard decides, once per application
//! transaction and table, whether the transaction may write the table; its
//! error fails the statement. Other origins (loads, evictions) are never
//! asked; without a guard nothing is checked.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::{create_parent_child, int, open, text};
use pgtier_engine::{CommitMode, EngineError, Origin, Result, TableSchema, Value, WriteGuard};

struct Guard {
    refuse: AtomicBool,
    calls: AtomicUsize,
}

impl WriteGuard for Guard {
    fn check_write(&self, table: &TableSchema) -> Result<()> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.refuse.load(Ordering::SeqCst) {
            return Err(EngineError::hook(
                "25006",
                format!("cannot change table \"{}\": read-only", table.name),
                Some("it is cached read-only".into()),
            ));
        }
        Ok(())
    }
}

#[test]
fn a_guard_refuses_application_writes_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _child) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(1), text("a"), Value::Int8(1)]).unwrap();
    t.commit().unwrap();
    let guard = Arc::new(Guard { refuse: AtomicBool::new(true), calls: AtomicUsize::new(0) });
    db.set_write_guard(parent, Some(guard.clone()));

    let mut t = db.begin().unwrap();
    let error = t.insert(parent, &[int(2), text("b"), Value::Int8(2)]).unwrap_err();
    assert_eq!(error.sqlstate(), "25006");
    assert_eq!(error.hint(), Some("it is cached read-only"));
    t.rollback();
    let mut t = db.begin().unwrap();
    assert_eq!(t.update(parent, &[int(1)], &[(1, text("x"))]).unwrap_err().sqlstate(), "25006");
    t.rollback();
    let mut t = db.begin().unwrap();
    assert_eq!(t.delete(parent, &[int(1)]).unwrap_err().sqlstate(), "25006");
    t.rollback();
    // Reads are not writes.
    let mut t = db.begin().unwrap();
    assert!(t.get_with(parent, &[int(1)], |_| ()).unwrap().is_some());
    t.commit().unwrap();
    // A load writes regardless.
    let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    t.insert(parent, &[int(3), text("c"), Value::Int8(3)]).unwrap();
    t.commit().unwrap();
    let refused_calls = guard.calls.load(Ordering::SeqCst);
    assert_eq!(refused_calls, 3);

    // Allowed: asked once per transaction and table, however many writes.
    guard.refuse.store(false, Ordering::SeqCst);
    let mut t = db.begin().unwrap();
    for id in 10..20 {
        t.insert(parent, &[int(id), text("d"), Value::Int8(0)]).unwrap();
    }
    t.commit().unwrap();
    assert_eq!(guard.calls.load(Ordering::SeqCst), refused_calls + 1);

    // Removed: not asked.
    db.set_write_guard(parent, None);
    guard.refuse.store(true, Ordering::SeqCst);
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(30), text("e"), Value::Int8(0)]).unwrap();
    t.commit().unwrap();
    assert_eq!(guard.calls.load(Ordering::SeqCst), refused_calls + 1);
}
