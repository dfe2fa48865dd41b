//! Table annotations: opaque text kept with a table's definition, logged,
//! checkpointed and recovered like the rest of it; changed transactionally.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{config, open};
use pgtier_engine::{Change, ColumnDef, DataType, Database, StreamStart, TableDef, TableId};

fn annotation(db: &Database, table: TableId) -> Option<String> {
    db.catalog().table(table).unwrap().annotation.clone()
}

fn create(db: &Database, name: &str, note: Option<&str>) -> TableId {
    let mut t = db.begin().unwrap();
    let def = TableDef {
        annotation: note.map(str::to_owned),
        ..TableDef::new(name, vec![ColumnDef::new("id", DataType::Int4)], &["id"])
    };
    let id = t.create_table(&def).unwrap();
    t.commit().unwrap();
    id
}

fn set(db: &Database, table: TableId, note: Option<&str>) {
    let mut t = db.begin().unwrap();
    t.set_annotation(table, note.map(str::to_owned)).unwrap();
    t.commit().unwrap();
}

#[test]
fn created_with_an_annotation_it_survives_restarts_with_and_without_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = {
        let db = open(dir.path());
        let a = create(&db, "a", Some("group g1: root"));
        let b = create(&db, "b", None);
        assert_eq!(annotation(&db, a).as_deref(), Some("group g1: root"));
        assert_eq!(annotation(&db, b), None);
        db.close().unwrap();
        (a, b)
    };
    // WAL only (no checkpoint on close in the test config).
    let db = open(dir.path());
    assert!(db.recovery_report().checkpoint_lsn.is_none());
    assert_eq!(annotation(&db, a).as_deref(), Some("group g1: root"));
    assert_eq!(annotation(&db, b), None);
    set(&db, b, Some("group g1: child of a"));
    db.checkpoint().unwrap();
    set(&db, a, Some("group g1: root, v2"));
    db.close().unwrap();
    // Checkpoint (b's annotation) + WAL after it (a's new one).
    let db = open(dir.path());
    assert!(db.recovery_report().checkpoint_lsn.is_some());
    assert_eq!(annotation(&db, a).as_deref(), Some("group g1: root, v2"));
    assert_eq!(annotation(&db, b).as_deref(), Some("group g1: child of a"));
    set(&db, a, None);
    db.checkpoint().unwrap();
    db.close().unwrap();
    // Checkpoint alone.
    let db = open(dir.path());
    assert_eq!(annotation(&db, a), None);
    assert_eq!(annotation(&db, b).as_deref(), Some("group g1: child of a"));
    // Rows still work after the schema value was replaced.
    let mut t = db.begin().unwrap();
    t.insert(a, &[pgtier_engine::Value::Int4(1)]).unwrap();
    t.commit().unwrap();
}

#[test]
fn set_and_clear_are_transactional() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let a = create(&db, "a", Some("one"));
    let mut t = db.begin().unwrap();
    t.set_annotation(a, Some("two".into())).unwrap();
    // The writer sees its own change, others the committed value.
    assert_eq!(t.catalog().table(a).unwrap().annotation.as_deref(), Some("two"));
    assert_eq!(annotation(&db, a).as_deref(), Some("one"));
    t.rollback();
    assert_eq!(annotation(&db, a).as_deref(), Some("one"));
    set(&db, a, None);
    assert_eq!(annotation(&db, a), None);
    set(&db, a, Some("three"));
    assert_eq!(annotation(&db, a).as_deref(), Some("three"));
    // Unknown table: 42P01, and the transaction is aborted.
    let mut t = db.begin().unwrap();
    let e = t.set_annotation(TableId(999), Some("x".into())).unwrap_err();
    assert_eq!(e.sqlstate(), "42P01");
    assert_eq!(t.set_annotation(a, None).unwrap_err().sqlstate(), "25P02");
    drop(t);
    // A rolled-back change is not in the log either.
    db.close().unwrap();
    let db = open(dir.path());
    assert_eq!(annotation(&db, a).as_deref(), Some("three"));
}

#[test]
fn the_commit_stream_carries_the_change() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), config()).unwrap();
    let a = create(&db, "a", Some("x"));
    db.register_consumer("c", StreamStart::Now).unwrap();
    set(&db, a, Some("y"));
    let mut s = db.stream("c").unwrap();
    let txn = s.next(Duration::from_secs(5)).unwrap().unwrap();
    assert!(
        matches!(&txn.changes[..], [Change::SetAnnotation { table, annotation: Some(n) }] if *table == a && n == "y")
    );
}

#[test]
fn a_dropped_table_with_an_annotation_replays() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path());
        let a = create(&db, "a", Some("x"));
        set(&db, a, Some("y"));
        let mut t = db.begin().unwrap();
        t.drop_table("a").unwrap();
        t.commit().unwrap();
        create(&db, "a", Some("z"));
        db.close().unwrap();
    }
    let db = open(dir.path());
    let a = db.catalog().table_by_name("a").unwrap().id;
    assert_eq!(annotation(&db, a).as_deref(), Some("z"));
}
