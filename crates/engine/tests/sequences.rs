#![allow(clippy::unwrap_used)]

mod common;

use common::open;
use pgtier_engine::{
    CheckDef, ColumnDef, DataType, Database, SequenceDefault, SequenceOptions, TableDef, TableId, Value,
};

fn ascending() -> SequenceOptions {
    SequenceOptions::new(DataType::Int8, 1, None, None, None, false).unwrap()
}

fn row(db: &Database, seq: TableId) -> (i64, i64, bool) {
    let mut t = db.begin().unwrap();
    let mut out = None;
    t.scan_table(seq, |r| {
        out = Some((r.get_i64(0).unwrap(), r.get_i64(1).unwrap(), r.get(2) == pgtier_engine::ValueRef::Bool(true)));
        Ok(true)
    })
    .unwrap();
    t.commit().unwrap();
    out.unwrap()
}

#[test]
fn values_are_never_handed_out_twice_even_across_rollbacks_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut t = db.begin().unwrap();
    let seq = t.create_sequence("s", ascending()).unwrap();
    // Inside the creating transaction the sequence advances in it.
    assert_eq!(t.nextval(seq).unwrap(), 1);
    t.commit().unwrap();
    assert_eq!(row(&db, seq), (1, 32, true));

    let mut t = db.begin().unwrap();
    assert_eq!(t.nextval(seq).unwrap(), 2);
    t.rollback(); // not transactional: 2 stays used
    let mut t = db.begin().unwrap();
    assert_eq!(t.nextval(seq).unwrap(), 3);
    t.commit().unwrap();
    assert_eq!(row(&db, seq), (3, 30, true));

    // A sequence created by a rolled-back transaction is gone.
    let mut t = db.begin().unwrap();
    let gone = t.create_sequence("gone", ascending()).unwrap();
    t.nextval(gone).unwrap();
    t.rollback();
    assert!(db.catalog().table_by_name("gone").is_none());

    // Survives a checkpoint plus WAL replay, and WAL replay alone.
    db.checkpoint().unwrap();
    let mut t = db.begin().unwrap();
    assert_eq!(t.nextval(seq).unwrap(), 4);
    t.commit().unwrap();
    db.close().unwrap();
    let db = open(dir.path());
    db.verify().unwrap();
    let mut t = db.begin().unwrap();
    assert_eq!(t.nextval(seq).unwrap(), 5);
    assert_eq!(t.setval(seq, 100, false).unwrap(), 100);
    assert_eq!(t.nextval(seq).unwrap(), 100);
    assert_eq!(t.nextval(seq).unwrap(), 101);
    t.commit().unwrap();
    db.close().unwrap();
}

#[test]
fn limits_cycles_and_setval_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut t = db.begin().unwrap();
    let capped = t
        .create_sequence("capped", SequenceOptions::new(DataType::Int4, 5, None, Some(12), Some(3), false).unwrap())
        .unwrap();
    let cyc = t
        .create_sequence("cyc", SequenceOptions::new(DataType::Int2, -1, Some(-2), None, None, true).unwrap())
        .unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    assert_eq!((t.nextval(capped).unwrap(), t.nextval(capped).unwrap()), (3, 8));
    let e = t.nextval(capped).unwrap_err();
    assert_eq!(
        (e.sqlstate(), e.to_string().as_str()),
        ("2200H", "nextval: reached maximum value of sequence \"capped\" (12)")
    );
    assert_eq!([t.nextval(cyc).unwrap(), t.nextval(cyc).unwrap(), t.nextval(cyc).unwrap()], [-1, -2, -1]);
    let e = t.setval(capped, 13, true).unwrap_err();
    assert_eq!(e.sqlstate(), "22003");
    assert_eq!(e.to_string(), "setval: value 13 is out of bounds for sequence \"capped\" (1..12)");
}

#[test]
fn owned_sequences_go_with_their_table_and_used_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut t = db.begin().unwrap();
    t.create_sequence("t_id_seq", ascending()).unwrap();
    t.create_sequence("shared", ascending()).unwrap();
    let mut id = ColumnDef::new("id", DataType::Int8).not_null();
    id.sequence = Some(("t_id_seq".into(), SequenceDefault::Serial));
    let mut other = ColumnDef::new("other", DataType::Int4);
    other.sequence = Some(("shared".into(), SequenceDefault::Nextval));
    let mut at = ColumnDef::new("at", DataType::Timestamp(None));
    at.default_sql = Some("now()".into());
    let mut def = TableDef::new("t", vec![id, other, at], &["id"]);
    def.checks = vec![
        CheckDef { name: "t_other_check".into(), sql: "other > 0".into() },
        CheckDef { name: "a_check".into(), sql: "id > 0".into() },
    ];
    let table = t.create_table(&def).unwrap();
    t.commit().unwrap();
    let cat = db.catalog();
    let schema = cat.table(table).unwrap();
    assert_eq!(
        schema.columns[0].sequence.map(|(s, how)| (cat.table(s).unwrap().name.clone(), how)),
        Some(("t_id_seq".into(), SequenceDefault::Serial))
    );

    // Neither sequence can go while the table uses it.
    let mut t = db.begin().unwrap();
    let e = t.drop_table("shared").unwrap_err();
    assert_eq!(e.sqlstate(), "2BP01");
    assert_eq!(
        e.to_string(),
        "cannot drop sequence shared because other objects depend on it (default value for column other of table t)"
    );
    t.rollback();

    // The schema (with its sequence links) survives a restart.
    db.checkpoint().unwrap();
    db.close().unwrap();
    let db = open(dir.path());
    assert_eq!(
        db.catalog().table_by_name("t").unwrap().columns[1].sequence.map(|(_, how)| how),
        Some(SequenceDefault::Nextval)
    );
    assert_eq!(db.catalog().table_by_name("t").unwrap().columns[2].default_sql.as_deref(), Some("now()"));
    let names: Vec<String> =
        db.catalog().table_by_name("t").unwrap().checks.iter().map(|c| format!("{}: {}", c.name, c.sql)).collect();
    assert_eq!(names, ["a_check: id > 0", "t_other_check: other > 0"], "kept, in name order");
    let mut t = db.begin().unwrap();
    t.drop_table("t").unwrap();
    t.commit().unwrap();
    let cat = db.catalog();
    assert!(cat.table_by_name("t_id_seq").is_none(), "the owned sequence went with the table");
    assert!(cat.table_by_name("shared").is_some(), "a DEFAULT nextval sequence stays");
    let mut t = db.begin().unwrap();
    t.drop_table("shared").unwrap();
    t.commit().unwrap();
    db.close().unwrap();
    let db = open(dir.path());
    assert!(db.catalog().table_by_name("shared").is_none());
    // A column may only draw from a sequence.
    let mut t = db.begin().unwrap();
    let mut bad = ColumnDef::new("id", DataType::Int8);
    bad.sequence = Some(("nope".into(), SequenceDefault::Serial));
    assert_eq!(t.create_table(&TableDef::new("u", vec![bad], &[])).unwrap_err().sqlstate(), "42P01");
    // One default per column.
    t.rollback();
    let mut t = db.begin().unwrap();
    let mut two = ColumnDef::new("id", DataType::Int8).default_value(Value::Int8(1));
    two.default_sql = Some("now()".into());
    assert_eq!(t.create_table(&TableDef::new("w", vec![two], &[])).unwrap_err().sqlstate(), "42601");
    t.rollback();
    let mut t = db.begin().unwrap();
    let mut dup = TableDef::new("w", vec![ColumnDef::new("id", DataType::Int4)], &["id"]);
    dup.checks =
        vec![CheckDef { name: "c".into(), sql: "id > 0".into() }, CheckDef { name: "c".into(), sql: "id < 9".into() }];
    assert_eq!(t.create_table(&dup).unwrap_err().sqlstate(), "42710");
}

/// A read-only transaction that drew a value commits, in Sync mode, only
/// once that value's log record is durable: the value it returned is never
/// handed out again, even if the server crashes right after.
#[test]
fn a_sync_read_only_commit_waits_for_the_values_it_drew() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path()); // common::config: Sync, 5 ms async flushes
    let mut t = db.begin().unwrap();
    let seq = t.create_sequence("s", ascending()).unwrap();
    t.commit().unwrap();
    for _ in 0..20 {
        let mut t = db.begin().unwrap();
        t.nextval(seq).unwrap();
        let drawn_end = db.stats().wal_end;
        t.commit().unwrap();
        let durable = db.stats().wal_durable_end;
        assert!(durable >= drawn_end, "committed before the drawn value was durable ({durable:?} < {drawn_end:?})");
    }
}

/// ON DELETE CASCADE / SET NULL survive a restart (catalog format V2) and
/// act after it: deleting a parent deletes or detaches its children.
#[test]
fn foreign_key_actions_are_kept_and_applied() {
    use pgtier_engine::{FkAction, ForeignKeyDef, RowBuf};
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut t = db.begin().unwrap();
    let parent = t.create_table(&TableDef::new("p", vec![ColumnDef::new("id", DataType::Int4)], &["id"])).unwrap();
    let mut child = TableDef::new(
        "c",
        vec![
            ColumnDef::new("id", DataType::Int4),
            ColumnDef::new("pid", DataType::Int4),
            ColumnDef::new("qid", DataType::Int4),
        ],
        &["id"],
    );
    let fk = |col: &str, on_delete| ForeignKeyDef {
        name: None,
        columns: vec![col.into()],
        parent_table: "p".into(),
        parent_columns: vec![],
        on_delete,
        timing: Default::default(),
    };
    child.foreign_keys = vec![fk("pid", FkAction::Cascade), fk("qid", FkAction::SetNull)];
    let child = t.create_table(&child).unwrap();
    for id in 1..=3 {
        t.insert(parent, &[Value::Int4(id)]).unwrap();
    }
    t.insert(child, &[Value::Int4(10), Value::Int4(1), Value::Int4(2)]).unwrap();
    t.insert(child, &[Value::Int4(20), Value::Int4(3), Value::Int4(3)]).unwrap();
    t.commit().unwrap();
    db.checkpoint().unwrap();
    db.close().unwrap();
    let db = open(dir.path());
    let actions: Vec<FkAction> = db.catalog().foreign_keys_of(child).iter().map(|f| f.on_delete).collect();
    assert_eq!(actions, [FkAction::Cascade, FkAction::SetNull]);
    let mut t = db.begin().unwrap();
    assert!(t.delete(parent, &[Value::Int4(2)]).unwrap(), "row 10 loses its qid");
    assert!(t.delete(parent, &[Value::Int4(3)]).unwrap(), "row 20 goes (pid) though it also refers by qid");
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    let mut row = RowBuf::new();
    assert!(t.get(child, &[Value::Int4(10)], &mut row).unwrap());
    assert_eq!(row.values(), [Value::Int4(10), Value::Int4(1), Value::Null]);
    assert!(!t.get(child, &[Value::Int4(20)], &mut row).unwrap());
    t.commit().unwrap();
    db.verify().unwrap();
}
