//! ALTER TABLE (`Transaction::alter_table`): the table is rewritten under a
//! new id inside the DDL transaction; others see the old definition until
//! commit, rollback leaves no trace, other tables' foreign keys follow it,
//! and a committed ALTER survives a SIGKILL (WAL replay, then a checkpoint)
//! while one in flight at the kill leaves nothing.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{create_parent_child, open};
use pgtier_engine::{AlterTableDef, ColumnDef, DataType, Database, IndexDef, RowBuf, TableDef, TableId, Value};

const ENV_DIR: &str = "PGTIER_ALTER_CHILD";

/// t(id int PK, a text, b bigint) with rows (i, 'v<i>', i*10), i in 1..=n.
fn create_t(db: &Database, n: i32) -> TableId {
    let mut t = db.begin().unwrap();
    let id = t
        .create_table(&TableDef::new(
            "t",
            vec![
                ColumnDef::new("id", DataType::Int4),
                ColumnDef::new("a", DataType::Text),
                ColumnDef::new("b", DataType::Int8),
            ],
            &["id"],
        ))
        .unwrap();
    t.create_index(&IndexDef {
        name: "t_b_idx".into(),
        table: "t".into(),
        columns: vec!["b".into()],
        unique: false,
        include: Vec::new(),
        options: Default::default(),
    })
    .unwrap();
    for i in 1..=n {
        t.insert(id, &[Value::Int4(i), Value::Text(format!("v{i}")), Value::Int8(i64::from(i) * 10)]).unwrap();
    }
    t.commit().unwrap();
    id
}

/// ALTER TABLE t RENAME a TO aa, DROP b, ADD c int NOT NULL DEFAULT 7,
/// ADD UNIQUE (aa), RENAME TO t2 (t_b_idx goes with b).
fn altered_def() -> AlterTableDef {
    let mut def = TableDef::new(
        "t2",
        vec![
            ColumnDef::new("id", DataType::Int4),
            ColumnDef::new("aa", DataType::Text),
            ColumnDef::new("c", DataType::Int4).not_null().default_value(Value::Int4(7)),
        ],
        &["id"],
    );
    def.unique.push((None, vec!["aa".into()]));
    // b (attribute 3) is dropped: c takes attribute 4, as in PostgreSQL.
    AlterTableDef {
        def,
        indexes: Vec::new(),
        sources: vec![Some(0), Some(1), None],
        primary_key_name: None,
        dropped_attnums: vec![3],
    }
}

/// The rows of `table` as (id, aa, c), read at a fresh snapshot.
fn rows_of(db: &Database, table: TableId) -> Vec<(i32, String, i32)> {
    let mut t = db.begin().unwrap();
    let mut out = Vec::new();
    t.scan_table(table, |r| {
        out.push((r.get_i64(0).unwrap() as i32, r.get_str(1).unwrap().to_owned(), r.get_i64(2).unwrap() as i32));
        Ok(true)
    })
    .unwrap();
    t.commit().unwrap();
    out.sort();
    out
}

/// Reads t's rows and alters it with `altered_def`, leaving `txn` open.
fn alter_t(txn: &mut pgtier_engine::Transaction, old: TableId) -> TableId {
    let mut rows = Vec::new();
    txn.scan_table(old, |r| {
        rows.push(vec![r.get(0).to_owned_value(), r.get(1).to_owned_value(), Value::Int4(7)]);
        Ok(true)
    })
    .unwrap();
    txn.alter_table(old, &altered_def(), rows).unwrap()
}

#[test]
fn alter_rewrites_rows_under_a_new_id_visible_at_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let old = create_t(&db, 3);
    let mut reader = db.begin().unwrap();
    let mut txn = db.begin().unwrap();
    let new = alter_t(&mut txn, old);
    assert_ne!(new, old);
    // Others still see the old definition and rows until commit.
    reader.begin_statement().unwrap();
    assert!(reader.catalog().table_by_name("t").is_some());
    assert!(reader.catalog().table_by_name("t2").is_none());
    reader.end_statement();
    reader.rollback();
    txn.commit().unwrap();
    let cat = db.catalog();
    assert!(cat.table_by_name("t").is_none() && cat.table(old).is_none());
    let t2 = cat.table_by_name("t2").unwrap();
    assert_eq!(t2.id, new);
    let names: Vec<&str> = t2.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["id", "aa", "c"]);
    assert!(cat.index_by_name("t_b_idx").is_none());
    assert!(cat.index_by_name("t2_aa_key").is_some());
    assert_eq!(rows_of(&db, new), vec![(1, "v1".into(), 7), (2, "v2".into(), 7), (3, "v3".into(), 7)]);
    // The UNIQUE constraint the ALTER added holds for later writes.
    let mut t = db.begin().unwrap();
    let e = t.insert(new, &[Value::Int4(4), Value::Text("v1".into()), Value::Int4(1)]).unwrap_err();
    assert_eq!(e.sqlstate(), "23505");
    t.rollback();
    db.verify().unwrap();
}

#[test]
fn a_rolled_back_alter_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let old = create_t(&db, 2);
    let mut txn = db.begin().unwrap();
    alter_t(&mut txn, old);
    txn.rollback();
    let cat = db.catalog();
    assert!(cat.table_by_name("t2").is_none());
    assert_eq!(cat.table_by_name("t").unwrap().id, old);
    assert!(cat.index_by_name("t_b_idx").is_some());
    let mut t = db.begin().unwrap();
    let mut buf = RowBuf::default();
    assert!(t.get(old, &[Value::Int4(2)], &mut buf).unwrap());
    assert_eq!(buf.get_i64(2), Some(20));
    t.insert(old, &[Value::Int4(3), Value::Text("x".into()), Value::Int8(1)]).unwrap();
    t.commit().unwrap();
    db.verify().unwrap();
}

#[test]
fn rows_breaking_the_new_definition_fail_the_alter() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let old = create_t(&db, 2);
    let mut txn = db.begin().unwrap();
    // SET NOT NULL over a NULL; UNIQUE over duplicates.
    let rows = vec![vec![Value::Int4(1), Value::Text("x".into()), Value::Null]];
    assert_eq!(txn.alter_table(old, &altered_def(), rows).unwrap_err().sqlstate(), "23502");
    txn.rollback();
    let mut txn = db.begin().unwrap();
    let dup = |i: i32| vec![Value::Int4(i), Value::Text("same".into()), Value::Int4(7)];
    assert_eq!(txn.alter_table(old, &altered_def(), vec![dup(1), dup(2)]).unwrap_err().sqlstate(), "23505");
    txn.rollback();
    assert_eq!(db.catalog().table_by_name("t").unwrap().id, old);
}

#[test]
fn foreign_keys_of_other_tables_follow_the_altered_parent() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    t.insert(parent, &[Value::Int4(1), Value::Text("p".into()), Value::Int8(0)]).unwrap();
    t.insert(child, &[Value::Int4(1), Value::Int2(1), Value::Text("c".into())]).unwrap();
    t.commit().unwrap();
    // ALTER TABLE parent ADD extra int (the referenced key stays).
    let mut def = TableDef::new(
        "parent",
        vec![
            ColumnDef::new("id", DataType::Int4),
            ColumnDef::new("name", DataType::Text),
            ColumnDef::new("v", DataType::Int8).not_null().default_value(Value::Int8(0)),
            ColumnDef::new("extra", DataType::Int4),
        ],
        &["id"],
    );
    def.primary_key_ordered = true;
    let alter = AlterTableDef {
        def,
        indexes: Vec::new(),
        sources: vec![Some(0), Some(1), Some(2), None],
        primary_key_name: None,
        dropped_attnums: Vec::new(),
    };
    let mut t = db.begin().unwrap();
    let row = vec![Value::Int4(1), Value::Text("p".into()), Value::Int8(0), Value::Null];
    let parent2 = t.alter_table(parent, &alter, vec![row]).unwrap();
    t.commit().unwrap();
    let fk = db.catalog().foreign_keys_of(child).pop().unwrap();
    assert_eq!(fk.parent, parent2);
    // Both sides are enforced against the new table.
    let mut t = db.begin().unwrap();
    assert_eq!(t.delete(parent2, &[Value::Int4(1)]).unwrap_err().sqlstate(), "23503");
    t.rollback();
    let mut t = db.begin().unwrap();
    assert_eq!(t.insert(child, &[Value::Int4(9), Value::Int2(1), Value::Null]).unwrap_err().sqlstate(), "23503");
    t.rollback();
    // Dropping the referenced column is refused.
    let def = TableDef::new("parent", vec![ColumnDef::new("name", DataType::Text)], &[]);
    let alter = AlterTableDef {
        def,
        indexes: Vec::new(),
        sources: vec![Some(1)],
        primary_key_name: None,
        dropped_attnums: Vec::new(),
    };
    let mut t = db.begin().unwrap();
    assert_eq!(t.alter_table(parent2, &alter, Vec::new()).unwrap_err().sqlstate(), "2BP01");
    t.rollback();
    db.close().unwrap();
    let db = open(dir.path());
    assert_eq!(db.catalog().foreign_keys_of(child).pop().unwrap().parent, parent2);
    let mut t = db.begin().unwrap();
    assert_eq!(t.delete(parent2, &[Value::Int4(1)]).unwrap_err().sqlstate(), "23503");
    t.rollback();
    db.verify().unwrap();
}

#[test]
#[ignore = "the child process of `a_committed_alter_survives_a_kill` (run by it with --ignored)"]
fn alter_child_entry() {
    let Ok(dir) = std::env::var(ENV_DIR) else { return };
    let db = open(Path::new(&dir));
    let old = create_t(&db, 50);
    let mut txn = db.begin().unwrap();
    let new = alter_t(&mut txn, old);
    txn.commit().unwrap();
    println!("COMMITTED {} {}", old.0, new.0);
    // A second ALTER (t2 -> t3), never committed: the kill lands while it is open.
    let mut txn = db.begin().unwrap();
    let mut def = altered_def();
    def.def.name = "t3".into();
    def.def.unique.clear();
    def.sources = vec![Some(0), Some(1), Some(2)];
    let mut rows = Vec::new();
    txn.scan_table(new, |r| {
        rows.push((0..3).map(|c| r.get(c).to_owned_value()).collect());
        Ok(true)
    })
    .unwrap();
    txn.alter_table(new, &def, rows).unwrap();
    println!("PENDING");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_committed_alter_survives_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "alter_child_entry", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ENV_DIR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut ids = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // libtest prints "test alter_child_entry ... " before the first line.
        if let Some(rest) = line.split_once("COMMITTED ").map(|(_, r)| r) {
            let v: Vec<u32> = rest.split(' ').map(|x| x.parse().unwrap()).collect();
            ids = Some((TableId(v[0]), TableId(v[1])));
        }
        if line.ends_with("PENDING") {
            break;
        }
    }
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let (old, new) = ids.expect("the child committed its ALTER");
    let expected: Vec<(i32, String, i32)> = (1..=50).map(|i| (i, format!("v{i}"), 7)).collect();
    let check = |db: &Database| {
        let cat = db.catalog();
        assert!(cat.table(old).is_none() && cat.table_by_name("t").is_none(), "the old definition is gone");
        assert!(cat.table_by_name("t3").is_none(), "the uncommitted ALTER left nothing");
        let t2 = cat.table_by_name("t2").unwrap();
        assert_eq!(t2.id, new);
        assert_eq!((t2.attnum(1), t2.attnum(2)), (2, 4), "dropped attribute numbers are kept");
        assert_eq!(rows_of(db, new), expected);
        db.verify().unwrap();
    };
    // WAL replay alone.
    let db = open(dir.path());
    assert!(db.recovery_report().checkpoint_lsn.is_none());
    check(&db);
    db.checkpoint().unwrap();
    db.close().unwrap();
    // From the checkpoint, then a write that the new UNIQUE index refuses.
    let db = open(dir.path());
    assert!(db.recovery_report().checkpoint_lsn.is_some());
    check(&db);
    let mut t = db.begin().unwrap();
    assert_eq!(
        t.insert(new, &[Value::Int4(99), Value::Text("v3".into()), Value::Int4(1)]).unwrap_err().sqlstate(),
        "23505"
    );
    t.rollback();
}
