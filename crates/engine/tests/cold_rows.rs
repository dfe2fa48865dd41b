//! Cold rows (cold.rs): rows whose images moved to a store outside memory
//! stay in their table as stubs, and every way of reading or writing them
//! gives what it gave before the move. Each test compares against the
//! values written, and checks the store was really asked (a stub that was
//! never made, or a read that never fetched, fails them).
#![allow(clippy::unwrap_used)]

mod common;

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use common::{MemCold, int, text};
use pgtier_engine::{ColumnDef, DataType, Database, IndexDef, IndexId, RowBuf, TableDef, TableId, Value};

const ROWS: i32 = 400;

/// acct(id int PK, email varchar(40) UNIQUE, region smallint indexed,
/// balance bigint NOT NULL, note text): balance and note are what a stub drops.
fn create(db: &Database) -> (TableId, IndexId, IndexId) {
    let mut t = db.begin().unwrap();
    let mut def = TableDef::new(
        "acct",
        vec![
            ColumnDef::new("id", DataType::Int4),
            ColumnDef::new("email", DataType::Varchar(40)),
            ColumnDef::new("region", DataType::Int2),
            ColumnDef::new("balance", DataType::Int8).not_null(),
            ColumnDef::new("note", DataType::Text),
        ],
        &["id"],
    );
    def.unique.push((Some("acct_email_key".into()), vec!["email".into()]));
    let id = t.create_table(&def).unwrap();
    let region = t.create_index(&index("acct_region", &["region"])).unwrap();
    t.commit().unwrap();
    let email = db.catalog().index_by_name("acct_email_key").unwrap().id;
    (id, email, region)
}

fn index(name: &str, columns: &[&str]) -> IndexDef {
    IndexDef {
        name: name.into(),
        table: "acct".into(),
        columns: columns.iter().map(|c| (*c).into()).collect(),
        unique: false,
        include: Vec::new(),
        options: Default::default(),
    }
}

fn row(k: i32) -> Vec<Value> {
    vec![
        int(k),
        text(&format!("user{k}@example.com")),
        Value::Int2((k % 7) as i16),
        Value::Int8(i64::from(k) * 100),
        text(&"n".repeat(usize::try_from(k % 50).unwrap() + 20)),
    ]
}

fn fill(db: &Database, table: TableId) {
    let mut t = db.begin().unwrap();
    for k in 0..ROWS {
        t.insert(table, &row(k)).unwrap();
    }
    t.commit().unwrap();
}

fn keys(range: std::ops::Range<i32>) -> Vec<Vec<Value>> {
    range.map(|k| vec![int(k)]).collect()
}

fn attach(db: &Database, table: TableId) -> Arc<MemCold> {
    let cold = Arc::new(MemCold::default());
    db.set_cold_rows(table, Some(cold.clone()));
    cold
}

/// Every row of the table, by id, read through `scan_table`.
fn all_rows(db: &Database, table: TableId) -> Vec<Vec<Value>> {
    let mut t = db.begin().unwrap();
    let mut rows = Vec::new();
    t.scan_table(table, |r| {
        rows.push(r.values());
        Ok(true)
    })
    .unwrap();
    t.commit().unwrap();
    rows.sort_by_key(|r| match r[0] {
        Value::Int4(k) => k,
        _ => unreachable!(),
    });
    rows
}

#[test]
fn demoted_rows_read_and_write_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::open(dir.path());
    let (table, email, region) = create(&db);
    fill(&db, table);
    let cold = attach(&db, table);
    let before = db.table_memory(table);
    let moved = db.demote_rows(table, &keys(0..ROWS)).unwrap();
    assert_eq!(moved, ROWS as usize);
    assert_eq!(cold.held(), ROWS as usize);
    // A stub drops its var columns' bytes (note) and gains an 8-byte
    // reference; fixed-width slots (balance) stay, NULL.
    let after = db.table_memory(table);
    let dropped: u64 = (0..ROWS).map(|k| u64::try_from(k % 50 + 20 - 8).unwrap()).sum();
    assert!(after <= before - dropped * 9 / 10, "stubs hold {before} -> {after} bytes, {dropped} expected to go");
    // Demoting again moves nothing: they are stubs already.
    assert_eq!(db.demote_rows(table, &keys(0..ROWS)).unwrap(), 0);

    let fetches = MemCold::count(&cold.fetches);
    let mut t = db.begin().unwrap();
    let mut buf = RowBuf::new();
    assert!(t.get(table, &[int(17)], &mut buf).unwrap());
    assert_eq!(buf.values(), row(17));
    let with = t.get_with(table, &[int(18)], |r| r.values()).unwrap();
    assert_eq!(with, Some(row(18)));
    // Through the unique index's probe and through the ordered index.
    let mut found = Vec::new();
    t.scan_prefix(email, &[text("user19@example.com")], |r| {
        found.push(r.values());
        Ok(true)
    })
    .unwrap();
    assert_eq!(found, vec![row(19)]);
    let mut in_region = Vec::new();
    t.scan(region, Bound::Included(&[Value::Int2(3)][..]), Bound::Included(&[Value::Int2(3)][..]), |r| {
        in_region.push(r.values());
        Ok(true)
    })
    .unwrap();
    let want: Vec<Vec<Value>> = (0..ROWS).filter(|k| k % 7 == 3).map(row).collect();
    assert_eq!(in_region, want);
    t.commit().unwrap();
    assert!(MemCold::count(&cold.fetches) >= fetches + 3 + want.len() as u64);
    assert_eq!(all_rows(&db, table), (0..ROWS).map(row).collect::<Vec<_>>());

    // Writes: an update of a dropped column, a delete, a lock.
    let mut t = db.begin().unwrap();
    assert!(t.update(table, &[int(20)], &[(3, Value::Int8(-1))]).unwrap());
    assert!(t.delete(table, &[int(21)]).unwrap());
    assert!(t.get_for_update(table, &[int(22)], &mut buf).unwrap());
    assert_eq!(buf.values(), row(22));
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    assert!(t.get(table, &[int(20)], &mut buf).unwrap());
    let mut want20 = row(20);
    want20[3] = Value::Int8(-1);
    assert_eq!(buf.values(), want20);
    assert!(!t.get(table, &[int(21)], &mut buf).unwrap());
    // UNIQUE against a stub: decided from the stub's kept column.
    let mut dup = row(1000);
    dup[1] = text("user30@example.com");
    assert_eq!(t.insert(table, &dup).unwrap_err().sqlstate(), "23505");
    t.rollback();

    // GC frees the superseded stub of 20 and the deleted 21: both released.
    db.vacuum();
    assert_eq!(MemCold::count(&cold.releases), 2);
    assert_eq!(cold.held(), ROWS as usize - 2);
    assert_eq!(MemCold::count(&cold.bad_releases), 0);
    let check = db.verify().unwrap();
    assert_eq!(check.iter().find(|c| c.table == "acct").unwrap().rows, ROWS as u64 - 1);
}

#[test]
fn a_row_under_change_is_not_demoted() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::open(dir.path());
    let (table, _, _) = create(&db);
    fill(&db, table);
    let cold = attach(&db, table);
    // A reader older than the update keeps 5's old version alive.
    let mut reader = db.begin().unwrap();
    reader.begin_statement().unwrap();
    let mut writer = db.begin().unwrap();
    assert!(writer.update(table, &[int(5)], &[(3, Value::Int8(7))]).unwrap());
    // 5 is locked; 6 has only its committed version.
    assert_eq!(db.demote_rows(table, &keys(5..7)).unwrap(), 1);
    writer.commit().unwrap();
    // 5 now has two versions until GC: still not demoted.
    db.vacuum();
    assert_eq!(db.demote_rows(table, &keys(5..6)).unwrap(), 0);
    reader.end_statement();
    reader.commit().unwrap();
    db.vacuum();
    assert_eq!(db.demote_rows(table, &keys(5..6)).unwrap(), 1);
    let mut t = db.begin().unwrap();
    let mut buf = RowBuf::new();
    assert!(t.get(table, &[int(5)], &mut buf).unwrap());
    assert_eq!(buf.values()[3], Value::Int8(7));
    t.commit().unwrap();
    assert_eq!(cold.held(), 2);
}

#[test]
fn a_reader_at_an_old_snapshot_reads_the_stub_it_saw() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::open(dir.path());
    let (table, _, _) = create(&db);
    fill(&db, table);
    let cold = attach(&db, table);
    assert_eq!(db.demote_rows(table, &keys(0..10)).unwrap(), 10);
    let mut old = db.begin().unwrap();
    old.begin_statement().unwrap();
    let mut t = db.begin().unwrap();
    assert!(t.update(table, &[int(3)], &[(4, text("changed"))]).unwrap());
    t.commit().unwrap();
    db.vacuum();
    // The old statement still sees the stub's version: fetched, not pruned.
    let mut buf = RowBuf::new();
    assert!(old.get(table, &[int(3)], &mut buf).unwrap());
    assert_eq!(buf.values(), row(3));
    old.end_statement();
    old.commit().unwrap();
    assert_eq!(MemCold::count(&cold.releases), 0);
    db.vacuum();
    assert_eq!(MemCold::count(&cold.releases), 1);
}

#[test]
fn stubs_survive_a_restart_and_a_backup_stands_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config();
    config.checkpoint_on_close = true;
    let db = Database::open(dir.path(), config.clone()).unwrap();
    let (table, _, _) = create(&db);
    fill(&db, table);
    let cold = attach(&db, table);
    assert_eq!(db.demote_rows(table, &keys(0..ROWS / 2)).unwrap(), (ROWS / 2) as usize);
    let stubbed_memory = db.table_memory(table);
    db.close().unwrap();

    // Reopened from the checkpoint: the stubs are back, naming the same images.
    let db = Database::open(dir.path(), config.clone()).unwrap();
    assert_eq!(db.table_memory(table), stubbed_memory);
    let mut named = Vec::new();
    db.for_each_stub(table, |_, cold_ref| named.push(cold_ref.0));
    named.sort_unstable();
    let mut held: Vec<u64> = cold.images.lock().unwrap().keys().copied().collect();
    held.sort_unstable();
    assert_eq!(named, held);
    // Before the store is attached a stub is an error, never a short row.
    let mut t = db.begin().unwrap();
    let mut buf = RowBuf::new();
    assert_eq!(t.get(table, &[int(1)], &mut buf).unwrap_err().sqlstate(), "XX001");
    t.rollback();
    db.set_cold_rows(table, Some(cold.clone()));
    assert_eq!(all_rows(&db, table), (0..ROWS).map(row).collect::<Vec<_>>());
    db.verify().unwrap();

    // A backup holds whole rows: restored and opened with no store at all.
    let backup = tempfile::tempdir().unwrap();
    let dest = backup.path().join("b");
    db.backup(&dest, &mut |_| ()).unwrap();
    db.close().unwrap();
    let restored = tempfile::tempdir().unwrap();
    let data = restored.path().join("data");
    pgtier_engine::restore(&dest, &data, &mut |_| ()).unwrap();
    let copy = Database::open(&data, config).unwrap();
    let mut none = 0;
    copy.for_each_stub(table, |_, _| none += 1);
    assert_eq!(none, 0);
    assert_eq!(all_rows(&copy, table), (0..ROWS).map(row).collect::<Vec<_>>());
}

#[test]
fn create_index_brings_stubs_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::open(dir.path());
    let (table, _, _) = create(&db);
    fill(&db, table);
    let cold = attach(&db, table);
    assert_eq!(db.demote_rows(table, &keys(0..ROWS)).unwrap(), ROWS as usize);
    // balance is not in any stub: the index over it must see real values.
    db.checkpoint().unwrap();
    let mut t = db.begin().unwrap();
    let by_balance = t.create_index(&index("acct_balance", &["balance"])).unwrap();
    t.commit().unwrap();
    let mut stubs = 0;
    db.for_each_stub(table, |_, _| stubs += 1);
    assert_eq!(stubs, 0);
    db.vacuum();
    assert_eq!(MemCold::count(&cold.releases), ROWS as u64);
    assert_eq!(cold.held(), 0);
    let mut t = db.begin().unwrap();
    let mut got = Vec::new();
    let (lo, hi) = ([Value::Int8(1000)], [Value::Int8(1500)]);
    t.scan(by_balance, Bound::Included(&lo[..]), Bound::Included(&hi[..]), |r| {
        got.push(r.values());
        Ok(true)
    })
    .unwrap();
    assert_eq!(got, (10..=15).map(row).collect::<Vec<_>>());
    t.commit().unwrap();
    // Demoted again, the new stubs keep balance too.
    assert_eq!(db.demote_rows(table, &keys(0..ROWS)).unwrap(), ROWS as usize);
    db.verify().unwrap();
    // A crash now: the checkpoints CREATE INDEX took hold whole rows, and
    // the WAL's CREATE INDEX replays over them, not over the older stubs.
    drop(db);
    let db = common::open(dir.path());
    db.set_cold_rows(table, Some(cold.clone()));
    db.verify().unwrap();
    let mut t = db.begin().unwrap();
    let mut got = Vec::new();
    t.scan(by_balance, Bound::Included(&lo[..]), Bound::Included(&hi[..]), |r| {
        got.push(r.values());
        Ok(true)
    })
    .unwrap();
    assert_eq!(got, (10..=15).map(row).collect::<Vec<_>>());
}

#[test]
fn a_failed_or_wrong_fetch_is_an_error_not_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::open(dir.path());
    let (table, _, region) = create(&db);
    fill(&db, table);
    let cold = attach(&db, table);
    assert_eq!(db.demote_rows(table, &keys(0..4)).unwrap(), 4);
    cold.fail_fetch.store(true, Relaxed);
    let mut buf = RowBuf::new();
    let mut t = db.begin().unwrap();
    assert_eq!(t.get(table, &[int(2)], &mut buf).unwrap_err().sqlstate(), "XX001");
    t.rollback();
    let mut t = db.begin().unwrap();
    assert_eq!(t.scan_table(table, |_| Ok(true)).unwrap_err().sqlstate(), "XX001");
    t.rollback();
    let mut t = db.begin().unwrap();
    let r = t.scan(region, Bound::Unbounded, Bound::Unbounded, |_| Ok(true));
    assert_eq!(r.unwrap_err().sqlstate(), "XX001");
    t.rollback();
    let mut t = db.begin().unwrap();
    assert_eq!(t.update(table, &[int(1)], &[(3, Value::Int8(0))]).unwrap_err().sqlstate(), "XX001");
    t.rollback();
    cold.fail_fetch.store(false, Relaxed);
    // The store answering with another row's image: refused.
    let mut refs = Vec::new();
    db.for_each_stub(table, |_, r| refs.push(r.0));
    refs.sort_unstable();
    *cold.swap_images.lock().unwrap() = Some((refs[0], refs[1]));
    let mut t = db.begin().unwrap();
    let mut failed = 0;
    for k in 0..4 {
        match t.get(table, &[int(k)], &mut buf) {
            Ok(true) => assert_eq!(buf.values(), row(k)),
            Ok(false) => panic!("row {k} lost"),
            Err(e) => {
                assert_eq!(e.sqlstate(), "XX001");
                failed += 1;
                t.rollback();
                t = db.begin().unwrap();
            }
        }
    }
    assert_eq!(failed, 1);
    t.rollback();
}

#[test]
fn idle_rows_move_and_a_dropped_table_releases_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::open(dir.path());
    let (table, _, _) = create(&db);
    db.set_access_tracking(table, true);
    fill(&db, table);
    let cold = attach(&db, table);
    let tick = db.advance_access_tick();
    // Rows 0..50 are used at the new tick; the others stay older.
    let mut t = db.begin().unwrap();
    let mut buf = RowBuf::new();
    for k in 0..50 {
        assert!(t.get(table, &[int(k)], &mut buf).unwrap());
    }
    t.commit().unwrap();
    let mut moved = 0;
    let mut shard = 0;
    loop {
        let (n, next) = db.demote_idle(table, tick, 64, shard).unwrap();
        moved += n;
        shard = next;
        if n == 0 {
            break;
        }
    }
    assert_eq!(moved, (ROWS - 50) as usize);
    let mut stubbed = Vec::new();
    db.for_each_stub(table, |_, _| stubbed.push(()));
    assert_eq!(stubbed.len(), moved);
    assert_eq!(all_rows(&db, table), (0..ROWS).map(row).collect::<Vec<_>>());
    // A dropped table's images are its store's to purge: the engine
    // releases none of them (a crash could undo the drop).
    let mut t = db.begin().unwrap();
    t.drop_table("acct").unwrap();
    t.commit().unwrap();
    db.vacuum();
    assert_eq!(cold.held(), moved);
    assert_eq!(MemCold::count(&cold.releases), 0);
}

#[test]
fn demotion_without_a_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::open(dir.path());
    let (table, _, _) = create(&db);
    fill(&db, table);
    assert_eq!(db.demote_rows(table, &keys(0..3)).unwrap_err().sqlstate(), "55000");
}

#[test]
fn promoting_a_table_brings_every_row_back_and_then_releases_the_images() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::open(dir.path());
    let (table, _, _) = create(&db);
    fill(&db, table);
    let cold = attach(&db, table);
    let whole = db.table_memory(table);
    assert_eq!(db.demote_rows(table, &keys(0..ROWS)).unwrap(), ROWS as usize);
    db.checkpoint().unwrap();
    assert_eq!(db.promote_cold(table).unwrap(), ROWS as usize);
    assert_eq!(db.table_memory(table), whole);
    assert_eq!(cold.held(), 0);
    assert_eq!(MemCold::count(&cold.bad_releases), 0);
    // No retained checkpoint names a stub any more: a crash reopens whole.
    drop(db);
    let db = common::open(dir.path());
    let mut stubs = 0;
    db.for_each_stub(table, |_, _| stubs += 1);
    assert_eq!(stubs, 0);
    assert_eq!(all_rows(&db, table), (0..ROWS).map(row).collect::<Vec<_>>());
}

#[test]
fn an_image_is_released_only_once_the_change_that_freed_its_stub_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config();
    config.wal.async_flush_interval = std::time::Duration::from_secs(30);
    let db = Database::open(dir.path(), config).unwrap();
    let (table, _, _) = create(&db);
    fill(&db, table);
    let cold = attach(&db, table);
    assert_eq!(db.demote_rows(table, &keys(0..10)).unwrap(), 10);
    let mut t = db.begin_with(pgtier_engine::CommitMode::Async).unwrap();
    assert!(t.update(table, &[int(3)], &[(3, Value::Int8(-3))]).unwrap());
    t.commit().unwrap();
    // GC frees the stub (no snapshot sees it), but the update is not
    // durable: a crash now would bring the stub back, so its image stays.
    db.collect_garbage();
    let mut stubs = 0;
    db.for_each_stub(table, |_, _| stubs += 1);
    assert_eq!(stubs, 9, "GC freed the superseded stub");
    assert_eq!(MemCold::count(&cold.releases), 0);
    db.flush_wal().unwrap();
    db.collect_garbage();
    assert_eq!(MemCold::count(&cold.releases), 1);
    assert_eq!(MemCold::count(&cold.bad_releases), 0);
}
