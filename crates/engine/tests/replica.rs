//! A hot standby (replica.rs): seeded by `restore_standby` from the
//! active's online backup, fed the active's durable WAL records one by one.
//! Checked: the standby's rows, indexes and catalog equal the active's
//! after every kind of op (DML, primary-key changes, ON DELETE CASCADE,
//! tables without a primary key, sequences, runs split over several
//! records, CREATE/DROP INDEX and TABLE); its log ends where the active's
//! does (same LSNs) and it keeps the active's identity; its own writes
//! are refused with 25006 until `promote`, after which it writes on at the
//! next LSN; and a restart of it reads back the same state.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use pgtier_engine::{
    ColumnDef, CommitMode, DataType, Database, EngineConfig, FkAction, ForeignKeyDef, IndexDef, SequenceOptions,
    TableDef, Value, WalConfig,
};

fn config() -> EngineConfig {
    EngineConfig {
        commit_mode: CommitMode::Sync,
        // Small records: a transaction of a few hundred rows is a run.
        wal: WalConfig { segment_bytes: 1 << 20, record_bytes_max: 8192, ..WalConfig::default() },
        checkpoint_interval: None,
        checkpoint_wal_bytes: u64::MAX,
        checkpoint_on_close: false,
        ..EngineConfig::default()
    }
}

/// Every table's rows, by name, each as its debug text, sorted.
fn dump(db: &Database) -> Vec<(String, Vec<String>)> {
    let catalog = db.catalog();
    let mut tables: Vec<_> = catalog.tables().map(|t| (t.name.clone(), t.id)).collect();
    tables.sort();
    let mut t = db.begin().unwrap();
    let out = tables
        .into_iter()
        .map(|(name, id)| {
            let mut rows = Vec::new();
            t.scan_table(id, |r| {
                rows.push(format!("{:?}", r.values()));
                Ok(true)
            })
            .unwrap();
            rows.sort();
            (name, rows)
        })
        .collect();
    t.commit().unwrap();
    out
}

fn schema(db: &Database) {
    let mut t = db.begin().unwrap();
    t.create_table(&TableDef::new(
        "parent",
        vec![ColumnDef::new("id", DataType::Int4), ColumnDef::new("name", DataType::Text)],
        &["id"],
    ))
    .unwrap();
    let mut child = TableDef::new(
        "child",
        vec![ColumnDef::new("pid", DataType::Int4), ColumnDef::new("n", DataType::Int4)],
        &["pid", "n"],
    );
    child.foreign_keys.push(ForeignKeyDef {
        name: None,
        columns: vec!["pid".into()],
        parent_table: "parent".into(),
        parent_columns: vec![],
        on_delete: FkAction::Cascade,
        timing: Default::default(),
    });
    t.create_table(&child).unwrap();
    t.create_table(&TableDef::new(
        "heap",
        vec![ColumnDef::new("v", DataType::Int8), ColumnDef::new("pad", DataType::Text)],
        &[],
    ))
    .unwrap();
    t.commit().unwrap();
}

/// Writes on the active after the backup: every kind of op.
fn workload(db: &Database) {
    let cat = db.catalog();
    let parent = cat.table_by_name("parent").unwrap().id;
    let child = cat.table_by_name("child").unwrap().id;
    let heap = cat.table_by_name("heap").unwrap().id;
    let mut t = db.begin().unwrap();
    for i in 0..400 {
        t.insert(parent, &[Value::Int4(i), Value::Text(format!("p{i}-{}", "x".repeat(40)))]).unwrap();
        t.insert(child, &[Value::Int4(i), Value::Int4(1)]).unwrap();
    }
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    t.create_index(&IndexDef {
        name: "parent_name".into(),
        table: "parent".into(),
        columns: vec!["name".into()],
        unique: true,
        include: vec![],
        options: Default::default(),
    })
    .unwrap();
    let s = t.create_sequence("s", SequenceOptions::new(DataType::Int8, 1, None, None, None, false).unwrap()).unwrap();
    t.commit().unwrap();
    for i in 0..50 {
        let mut t = db.begin().unwrap();
        t.update(parent, &[Value::Int4(i)], &[(1, Value::Text(format!("u{i}")))]).unwrap();
        // A primary-key change: the old row goes, a new one comes.
        t.update(child, &[Value::Int4(i), Value::Int4(1)], &[(1, Value::Int4(2))]).unwrap();
        let v = t.nextval(s).unwrap();
        // The hidden row id last: NULL draws the next one.
        t.insert(heap, &[Value::Int8(v), Value::Text("h".into()), Value::Null]).unwrap();
        t.commit().unwrap();
    }
    let mut t = db.begin().unwrap();
    for i in 100..200 {
        // Cascades to the child rows: logged as their own deletes.
        t.delete(parent, &[Value::Int4(i)]).unwrap();
    }
    t.commit().unwrap();
    // DDL and rows in one transaction.
    let mut t = db.begin().unwrap();
    let gone = t.create_table(&TableDef::new("gone", vec![ColumnDef::new("k", DataType::Int4)], &["k"])).unwrap();
    t.insert(gone, &[Value::Int4(1)]).unwrap();
    let kept = t.create_table(&TableDef::new("kept", vec![ColumnDef::new("k", DataType::Int4)], &["k"])).unwrap();
    t.insert(kept, &[Value::Int4(2)]).unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    t.drop_table("gone").unwrap();
    t.drop_index("parent_name").unwrap();
    t.commit().unwrap();
}

fn ship(active: &Database, standby: &Database) -> u64 {
    let mut applier = standby.replica_applier();
    let reader = active.wal_reader(applier.wal_end()).unwrap();
    for next in reader {
        let (lsn, payload) = next.unwrap();
        applier.push(lsn, payload).unwrap();
    }
    applier.sync().unwrap();
    applier.applied()
}

fn seed(active: &Database, root: &Path) -> Database {
    let backup = root.join("backup");
    active.backup(&backup, &mut |_| {}).unwrap();
    let dir = root.join("standby");
    pgtier_engine::restore_standby(&backup, &dir, &mut |_| {}).unwrap();
    let standby = Database::open(&dir, config()).unwrap();
    standby.set_standby(true);
    standby
}

#[test]
fn a_standby_fed_the_active_wal_holds_its_rows_and_log() {
    let root = tempfile::tempdir().unwrap();
    let active = Database::open(&root.path().join("active"), config()).unwrap();
    schema(&active);
    let standby = seed(&active, root.path());
    assert_eq!(standby.incarnation().id, active.incarnation().id, "the standby is the active's directory");
    assert_eq!(dump(&standby), dump(&active), "seeded from the backup");
    workload(&active);
    active.flush_wal().unwrap();
    let applied = ship(&active, &standby);
    assert!(applied >= 55, "{applied} transactions applied");
    assert_eq!(standby.wal_end(), active.wal_end(), "same log, same LSNs");
    let d = dump(&active);
    assert_eq!(dump(&standby), d);
    assert!(d.iter().any(|(n, rows)| n == "child" && rows.len() == 300), "the cascade happened: {:?}", d[0].0);
    assert!(standby.catalog().index_by_name("parent_name").is_none());
    assert!(standby.catalog().table_by_name("gone").is_none());
    let rows = |db: &Database| db.verify().unwrap().into_iter().map(|c| (c.table, c.rows)).collect::<Vec<_>>();
    assert_eq!(rows(&standby), rows(&active), "storage invariants hold on the standby");
    assert!(active.catalog().table_by_name("heap").is_some());

    // Read-only until promoted.
    let parent = standby.catalog().table_by_name("parent").unwrap().id;
    let mut t = standby.begin().unwrap();
    let e = t.insert(parent, &[Value::Int4(10_000), Value::Text("no".into())]).unwrap_err();
    assert_eq!(e.sqlstate(), "25006");
    t.rollback();
    let mut t = standby.begin().unwrap();
    let e = t.create_table(&TableDef::new("x", vec![ColumnDef::new("k", DataType::Int4)], &["k"])).unwrap_err();
    assert_eq!(e.sqlstate(), "25006");
    t.rollback();

    // Promoted: writes go on at the next LSN of the shared log.
    let end = active.wal_end();
    drop(active);
    standby.promote();
    let heap = standby.catalog().table_by_name("heap").unwrap().id;
    let mut t = standby.begin().unwrap();
    t.insert(parent, &[Value::Int4(10_000), Value::Text("yes".into())]).unwrap();
    t.insert(heap, &[Value::Int8(-1), Value::Text("after".into()), Value::Null]).unwrap();
    let info = t.commit().unwrap();
    assert!(info.lsn.unwrap() >= end, "{:?} continues after {end:?}", info.lsn);
    let before = dump(&standby);
    let heap_rows = before.iter().find(|(n, _)| n == "heap").unwrap().1.len();
    assert_eq!(heap_rows, 51, "no row id collided with a received one");
    let dir = root.path().join("standby");
    standby.close().unwrap();
    let reopened = Database::open(&dir, config()).unwrap();
    assert_eq!(dump(&reopened), before, "a restart reads back what the standby applied and wrote");
    std::thread::sleep(Duration::from_millis(1));
}

/// A pair member's lease (server replication/failover.rs) acts on the
/// engine through three seams, checked here: a fenced database refuses a
/// transaction's first write and DDL with 25006 until unfenced (a standby
/// stays a standby); the commit gate's error is the commit's, which is
/// durable all the same; a limited stream delivers nothing past its limit.
#[test]
fn fence_commit_gate_and_stream_limit() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use pgtier_engine::{CommitGate, EngineError, Lsn, StreamStart};

    struct Refuse(AtomicBool);
    impl CommitGate for Refuse {
        fn before_ack(&self, _lsn: Lsn, _sync_commit: bool) -> pgtier_engine::Result<()> {
            if self.0.load(Ordering::Acquire) {
                return Err(EngineError::hook("08007", "lease lost", None));
            }
            Ok(())
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), config()).unwrap();
    schema(&db);
    let parent = db.catalog().table_by_name("parent").unwrap().id;
    let insert = |i: i32| -> pgtier_engine::Result<()> {
        let mut t = db.begin()?;
        t.insert(parent, &[Value::Int4(i), Value::Text("p".into())])?;
        t.commit().map(|_| ())
    };
    insert(1).unwrap();

    db.set_fenced(true);
    assert!(db.is_fenced());
    let e = insert(2).unwrap_err();
    assert_eq!(e.sqlstate(), "25006", "{e}");
    let mut t = db.begin().unwrap();
    let e = t.create_table(&TableDef::new("nope", vec![ColumnDef::new("k", DataType::Int4)], &["k"])).unwrap_err();
    assert_eq!(e.sqlstate(), "25006", "{e}");
    t.rollback();
    db.set_fenced(false);
    insert(2).unwrap();
    // Fencing never turns a standby into a writer, nor unfencing.
    db.set_standby(true);
    db.set_fenced(false);
    assert!(db.is_standby());
    db.set_fenced(true);
    assert!(db.is_standby() && !db.is_fenced());
    db.set_standby(false);

    // The stream of a limited consumer stops at the limit.
    let limit = Arc::new(AtomicU64::new(db.wal_end().0));
    db.register_consumer("limited", StreamStart::Now).unwrap();
    db.limit_stream("limited", Arc::clone(&limit));
    let mut stream = db.stream("limited").unwrap();

    let gate = Arc::new(Refuse(AtomicBool::new(true)));
    assert!(db.set_commit_gate(gate.clone()));
    let e = insert(3).unwrap_err();
    assert_eq!(e.sqlstate(), "08007", "{e}");
    gate.0.store(false, Ordering::Release);
    // Committed and durable despite the gate's error.
    let mut t = db.begin().unwrap();
    let mut keys = Vec::new();
    t.scan_table(parent, |r| {
        keys.push(format!("{:?}", r.values()[0]));
        Ok(true)
    })
    .unwrap();
    t.commit().unwrap();
    assert_eq!(keys.len(), 3, "{keys:?}");

    assert!(stream.next(Duration::from_millis(100)).unwrap().is_none(), "delivered past its limit");
    limit.store(db.wal_end().0, Ordering::Release);
    let txn = stream.next(Duration::from_secs(5)).unwrap().expect("delivered once the limit moved");
    assert_eq!(txn.changes.len(), 1);

    // A limit inside a transaction: it is read (it starts before the
    // limit) but held until the limit reaches its end; position() stays
    // before it.
    let start = db.wal_end();
    limit.store(start.0 + 1, Ordering::Release);
    insert(4).unwrap();
    assert!(
        stream.next(Duration::from_millis(100)).unwrap().is_none(),
        "delivered a transaction ending past its limit"
    );
    assert_eq!(stream.position(), start, "position moved past a transaction not delivered");
    limit.store(db.wal_end().0, Ordering::Release);
    let txn =
        stream.next(Duration::from_secs(5)).unwrap().expect("the held transaction once the limit reached its end");
    assert_eq!((txn.lsn, txn.next_lsn), (start, db.wal_end()));
    assert_eq!(stream.position(), db.wal_end());
}

/// The active restarts while its standby runs on: recovery numbers commit
/// timestamps again from its checkpoint, so its next commits carry
/// timestamps the standby has passed. The standby applies them all the
/// same, in log order, and its readers see them.
#[test]
fn a_standby_follows_its_active_across_the_active_s_restart() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("active");
    let active = Database::open(&dir, config()).unwrap();
    schema(&active);
    let standby = seed(&active, root.path());
    workload(&active);
    active.flush_wal().unwrap();
    ship(&active, &standby);
    // A checkpoint, then a restart: nothing to replay after it.
    active.checkpoint().unwrap();
    active.close().unwrap();
    let active = Database::open(&dir, config()).unwrap();
    let parent = active.catalog().table_by_name("parent").unwrap().id;
    let mut t = active.begin().unwrap();
    t.insert(parent, &[Value::Int4(20_000), Value::Text("after the restart".into())]).unwrap();
    t.commit().unwrap();
    let mut t = active.begin().unwrap();
    t.update(parent, &[Value::Int4(20_000)], &[(1, Value::Text("updated after the restart".into()))]).unwrap();
    t.commit().unwrap();
    active.flush_wal().unwrap();
    assert_eq!(ship(&active, &standby), 2, "both commits after the restart applied");
    assert_eq!(dump(&standby), dump(&active));
}

/// A consumer behind the checkpoint (write-through waiting for PostgreSQL)
/// when the standby is seeded: `backup_keeping_wal_for` copies the WAL it
/// still needs, so the standby, once promoted, can read from its position;
/// a plain backup starts at the checkpoint, and reading from there is
/// refused (the records are not in the copy), never skipped over.
#[test]
fn a_backup_keeps_the_wal_a_lagging_consumer_needs() {
    let root = tempfile::tempdir().unwrap();
    let active = Database::open(&root.path().join("active"), config()).unwrap();
    schema(&active);
    active.register_consumer("awt", pgtier_engine::StreamStart::Now).unwrap();
    let behind = active.consumers()[0].position;
    let heap = active.catalog().table_by_name("heap").unwrap().id;
    // Several 1 MiB segments past the consumer, then a checkpoint.
    for round in 0..40 {
        let mut t = active.begin().unwrap();
        for i in 0..20 {
            t.insert(heap, &[Value::Int8(round * 100 + i), Value::Text("w".repeat(5000)), Value::Null]).unwrap();
        }
        t.commit().unwrap();
    }
    let ckpt = active.checkpoint().unwrap();
    assert!(ckpt.start_lsn.0 > behind.0 + (2 << 20), "the checkpoint is segments past the consumer");
    let restored = |name: &str, keep: &[&str]| {
        let backup = root.path().join(format!("{name}.backup"));
        active.backup_keeping_wal_for(&backup, keep, &mut |_| {}).unwrap();
        let dir = root.path().join(name);
        pgtier_engine::restore_standby(&backup, &dir, &mut |_| {}).unwrap();
        Database::open(&dir, config()).unwrap()
    };
    let kept = restored("kept", &["awt"]);
    let first = kept.wal_reader(behind).unwrap().next().unwrap().unwrap().0;
    assert_eq!(first, behind, "the copy reads on from the consumer's position");
    assert_eq!(dump(&kept), dump(&active));
    let plain = restored("plain", &[]);
    assert!(plain.wal_reader(behind).is_err(), "a copy without that WAL read from the consumer's position");
    assert_eq!(dump(&plain), dump(&active));
}
