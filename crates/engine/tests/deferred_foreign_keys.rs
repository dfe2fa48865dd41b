//! Deferred foreign keys in the engine: a queued check runs at commit
//! against the rows the transaction left, sees other transactions' commits,
//! and the declared timing survives recovery from the WAL and from a
//! checkpoint.
#![allow(clippy::unwrap_used)]

mod common;

use common::{int, open};
use pgtier_engine::{ColumnDef, DataType, Database, FkTiming, ForeignKeyDef, TableDef, TableId};

fn create(db: &Database, timing: FkTiming) -> (TableId, TableId) {
    let mut t = db.begin().unwrap();
    let parent = t.create_table(&TableDef::new("p", vec![ColumnDef::new("id", DataType::Int4)], &["id"])).unwrap();
    let mut child =
        TableDef::new("c", vec![ColumnDef::new("id", DataType::Int4), ColumnDef::new("p", DataType::Int4)], &["id"]);
    child.foreign_keys.push(ForeignKeyDef {
        name: Some("c_p".into()),
        columns: vec!["p".into()],
        parent_table: "p".into(),
        parent_columns: vec![],
        on_delete: Default::default(),
        timing,
    });
    let child = t.create_table(&child).unwrap();
    t.commit().unwrap();
    (parent, child)
}

fn timing_of(db: &Database, child: TableId) -> FkTiming {
    db.catalog().foreign_keys_of(child)[0].timing
}

#[test]
fn a_deferred_check_runs_at_commit_and_fails_it_only_if_still_orphaned() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create(&db, FkTiming::DeferrableDeferred);

    // Child first: the parent arrives before commit.
    let mut t = db.begin().unwrap();
    t.insert(child, &[int(1), int(10)]).unwrap();
    t.insert(parent, &[int(10)]).unwrap();
    t.commit().unwrap();

    // Orphaned at commit: 23503, and nothing of it stays.
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(11)]).unwrap();
    t.insert(child, &[int(2), int(99)]).unwrap();
    let e = t.commit().unwrap_err();
    assert_eq!(e.sqlstate(), "23503");
    let mut t = db.begin().unwrap();
    assert!(t.get_with(parent, &[int(11)], |_| ()).unwrap().is_none(), "the failed commit left its parent row");
    t.rollback();

    // The parent another transaction commits before ours does counts.
    let mut t = db.begin().unwrap();
    t.insert(child, &[int(3), int(12)]).unwrap();
    let mut other = db.begin().unwrap();
    other.insert(parent, &[int(12)]).unwrap();
    other.commit().unwrap();
    t.commit().unwrap();

    // SET CONSTRAINTS ALL IMMEDIATE runs what is queued, and checks at once after.
    let mut t = db.begin().unwrap();
    t.insert(child, &[int(4), int(98)]).unwrap();
    assert_eq!(t.set_constraints(None, false).unwrap_err().sqlstate(), "23503");
    t.rollback();

    // Immediate timing is not deferred by SET CONSTRAINTS ALL DEFERRED.
    let (_, immediate_child) = {
        let mut t = db.begin().unwrap();
        let mut def = TableDef::new(
            "ci",
            vec![ColumnDef::new("id", DataType::Int4), ColumnDef::new("p", DataType::Int4)],
            &["id"],
        );
        def.foreign_keys.push(ForeignKeyDef {
            name: None,
            columns: vec!["p".into()],
            parent_table: "p".into(),
            parent_columns: vec![],
            on_delete: Default::default(),
            timing: FkTiming::Immediate,
        });
        let id = t.create_table(&def).unwrap();
        t.commit().unwrap();
        ((), id)
    };
    let mut t = db.begin().unwrap();
    t.set_constraints(None, true).unwrap();
    assert_eq!(t.insert(immediate_child, &[int(1), int(97)]).unwrap_err().sqlstate(), "23503");
    t.rollback();
}

#[test]
fn the_timing_survives_recovery_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let child = {
        let db = open(dir.path());
        let (_, child) = create(&db, FkTiming::DeferrableImmediate);
        db.close().unwrap();
        child
    };
    // From the WAL.
    let db = open(dir.path());
    assert_eq!(timing_of(&db, child), FkTiming::DeferrableImmediate);
    db.checkpoint().unwrap();
    db.close().unwrap();
    // From the checkpoint.
    let db = open(dir.path());
    assert_eq!(timing_of(&db, child), FkTiming::DeferrableImmediate);
    // And it is deferrable, not deferred: immediate until SET CONSTRAINTS.
    let parent = db.catalog().table_by_name("p").unwrap().id;
    let mut t = db.begin().unwrap();
    assert_eq!(t.insert(child, &[int(1), int(5)]).unwrap_err().sqlstate(), "23503");
    t.rollback();
    let mut t = db.begin().unwrap();
    t.set_constraints(Some(&[db.catalog().foreign_keys_of(child)[0].id]), true).unwrap();
    t.insert(child, &[int(1), int(5)]).unwrap();
    t.insert(parent, &[int(5)]).unwrap();
    t.commit().unwrap();
}
