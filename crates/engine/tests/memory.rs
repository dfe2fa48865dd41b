//! Per-table memory accounting and per-row access stamps (aging under a
//! memory budget).
#![allow(clippy::unwrap_used)]

mod common;

use common::{config, int, text};
use pgtier_engine::{
    ColumnDef, CommitMode, DataType, Database, EngineConfig, IndexDef, Origin, RowBuf, TableDef, TableId, Value,
};

/// GC only when a test says so (`vacuum`), so what it measures is settled.
fn open(dir: &std::path::Path) -> Database {
    Database::open(dir, EngineConfig { background: false, ..config() }).unwrap()
}

/// t(id int PK, u int UNIQUE, c int (indexed), s text).
fn create(db: &Database) -> TableId {
    let mut t = db.begin().unwrap();
    let mut def = TableDef::new(
        "t",
        vec![
            ColumnDef::new("id", DataType::Int4),
            ColumnDef::new("u", DataType::Int4),
            ColumnDef::new("c", DataType::Int4),
            ColumnDef::new("s", DataType::Text),
        ],
        &["id"],
    );
    def.unique.push((None, vec!["u".into()]));
    let id = t.create_table(&def).unwrap();
    t.create_index(&IndexDef {
        name: "t_c".into(),
        table: "t".into(),
        columns: vec!["c".into()],
        unique: false,
        include: Vec::new(),
        options: Default::default(),
    })
    .unwrap();
    t.commit().unwrap();
    id
}

fn row(i: i32) -> Vec<Value> {
    vec![int(i), int(i + 1_000_000), int(i % 7), text(&"x".repeat((i % 40) as usize))]
}

fn insert(db: &Database, table: TableId, ids: std::ops::Range<i32>) {
    let mut t = db.begin().unwrap();
    for i in ids {
        t.insert(table, &row(i)).unwrap();
    }
    t.commit().unwrap();
}

fn meta_sum(db: &Database, table: TableId, ids: std::ops::Range<i32>) -> u64 {
    let mut t = db.begin().unwrap();
    ids.map(|i| t.row_meta(table, &[int(i)]).unwrap().map_or(0, |m| m.bytes)).sum()
}

#[test]
fn memory_grows_with_rows_and_returns_to_zero_when_they_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create(&db);
    assert_eq!(db.table_memory(table), 0);
    insert(&db, table, 0..1000);
    let full = db.table_memory(table);
    // Each row: version (>= 20-byte header + row), hash slot, 4 index entries.
    assert!(full > 1000 * 60, "{full}");
    insert(&db, table, 1000..2000);
    let twice = db.table_memory(table);
    assert!(twice > full + full / 2, "{full} -> {twice}");
    assert_eq!(db.memory_total(), twice);
    let mut t = db.begin().unwrap();
    for i in 0..1500 {
        assert!(t.delete(table, &[int(i)]).unwrap());
    }
    t.commit().unwrap();
    db.vacuum();
    let quarter = db.table_memory(table);
    assert!(quarter < twice / 3, "{twice} -> {quarter}");
    assert_eq!(quarter, meta_sum(&db, table, 0..2000));
    let mut t = db.begin().unwrap();
    for i in 1500..2000 {
        assert!(t.delete(table, &[int(i)]).unwrap());
    }
    t.commit().unwrap();
    db.vacuum();
    assert_eq!(db.table_memory(table), 0);
    assert_eq!(db.table_memory(TableId(999)), 0);
}

#[test]
fn row_shares_add_up_to_the_table_memory() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create(&db);
    insert(&db, table, 0..500);
    assert_eq!(meta_sum(&db, table, 0..500), db.table_memory(table));
    // Updates leave old versions until GC: each row's share covers them.
    let mut reader = db.begin().unwrap();
    reader.begin_statement().unwrap(); // holds the old versions
    let mut t = db.begin().unwrap();
    for i in 0..500 {
        t.update(table, &[int(i)], &[(2, int(i % 5 + 100)), (3, text("a longer value than before"))]).unwrap();
    }
    t.commit().unwrap();
    db.vacuum();
    let with_old = db.table_memory(table);
    assert_eq!(meta_sum(&db, table, 0..500), with_old);
    reader.end_statement();
    drop(reader);
    db.vacuum();
    let pruned = db.table_memory(table);
    assert!(pruned < with_old, "{with_old} -> {pruned}");
    assert_eq!(meta_sum(&db, table, 0..500), pruned);
    // After a restart (bulk-built indexes) the two still agree.
    db.close().unwrap();
    let db = open(dir.path());
    assert_eq!(db.table_memory(table), pruned);
    assert_eq!(meta_sum(&db, table, 0..500), pruned);
}

fn stamp(db: &Database, table: TableId, id: i32) -> u32 {
    let mut t = db.begin().unwrap();
    t.row_meta(table, &[int(id)]).unwrap().unwrap().last_access
}

#[test]
fn application_reads_stamp_rows_of_tracked_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create(&db);
    insert(&db, table, 0..10);
    assert_eq!(db.access_tick(), 1);
    assert_eq!(stamp(&db, table, 1), 0, "inserted while untracked");
    db.set_access_tracking(table, true);
    insert(&db, table, 10..12);
    assert_eq!(stamp(&db, table, 10), 1, "a new row starts as used now");
    assert_eq!(db.advance_access_tick(), 2);
    let pk = db.catalog().table(table).unwrap().primary_index;
    let by_u = db.catalog().index_by_name("t_u_key").unwrap().id;
    let by_c = db.catalog().index_by_name("t_c").unwrap().id;
    let mut buf = RowBuf::new();
    // Reads by the cache's own transactions do not count.
    for origin in [Origin::Load, Origin::Refresh, Origin::Evict, Origin::Autorefresh] {
        let mut t = db.begin_with_origin(CommitMode::Sync, origin).unwrap();
        assert!(t.get(table, &[int(1)], &mut buf).unwrap());
        assert_eq!(t.scan_prefix(pk, &[int(2)], |_| Ok(true)).unwrap(), 1);
        assert!(t.update(table, &[int(3)], &[(3, text("r"))]).unwrap());
        t.commit().unwrap();
    }
    for id in 1..=3 {
        assert_eq!(stamp(&db, table, id), 0);
    }
    let mut t = db.begin().unwrap();
    assert!(t.get(table, &[int(1)], &mut buf).unwrap());
    assert!(t.get_with(table, &[int(2)], |_| ()).unwrap().is_some());
    assert_eq!(t.scan_prefix(pk, &[int(3)], |_| Ok(true)).unwrap(), 1);
    assert_eq!(t.scan_prefix(by_u, &[int(1_000_004)], |_| Ok(true)).unwrap(), 1); // the probe path
    assert!(t.get_for_update(table, &[int(5)], &mut buf).unwrap());
    assert!(t.update(table, &[int(6)], &[(3, text("u"))]).unwrap());
    t.commit().unwrap();
    for id in [1, 2, 3, 4, 5, 6] {
        assert_eq!(stamp(&db, table, id), 2, "row {id}");
    }
    assert_eq!(stamp(&db, table, 7), 0);
    // A scan over an index stamps what it returns; a table scan, all.
    db.advance_access_tick();
    let mut t = db.begin().unwrap();
    assert_eq!(t.scan_prefix(by_c, &[int(0)], |_| Ok(true)).unwrap(), 2); // ids 0 and 7
    t.commit().unwrap();
    assert_eq!((stamp(&db, table, 0), stamp(&db, table, 7), stamp(&db, table, 8)), (3, 3, 0));
    db.advance_access_tick();
    let mut t = db.begin().unwrap();
    assert_eq!(t.scan_table(table, |_| Ok(true)).unwrap(), 12);
    t.commit().unwrap();
    assert!((0..12).all(|id| stamp(&db, table, id) == 4));
    // The stamp survives updates and GC of the old versions.
    db.advance_access_tick();
    let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Refresh).unwrap();
    assert!(t.update(table, &[int(9)], &[(3, text("refreshed, a longer text"))]).unwrap());
    t.commit().unwrap();
    db.vacuum();
    assert_eq!(stamp(&db, table, 9), 4);
    // Off again: nothing moves.
    db.set_access_tracking(table, false);
    let mut t = db.begin().unwrap();
    assert!(t.get(table, &[int(9)], &mut buf).unwrap());
    t.commit().unwrap();
    assert_eq!(stamp(&db, table, 9), 4);
    let mut t = db.begin().unwrap();
    assert_eq!(t.row_meta(table, &[int(99)]).unwrap(), None);
}

#[test]
fn background_gc_returns_the_memory_of_deleted_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::open(dir.path());
    let table = create(&db);
    insert(&db, table, 0..1000);
    assert!(db.table_memory(table) > 0);
    let mut t = db.begin().unwrap();
    for i in 0..1000 {
        assert!(t.delete(table, &[int(i)]).unwrap());
    }
    t.commit().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.table_memory(table) > 0 {
        assert!(std::time::Instant::now() < deadline, "{} bytes left", db.table_memory(table));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn access_ages_count_rows_by_their_last_use() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create(&db);
    insert(&db, table, 0..5); // never stamped: the oldest bucket
    db.set_access_tracking(table, true);
    insert(&db, table, 5..20); // stamped 1
    for _ in 0..5 {
        db.advance_access_tick(); // now 6
    }
    let mut buf = RowBuf::new();
    let mut t = db.begin().unwrap();
    for id in 5..8 {
        assert!(t.get(table, &[int(id)], &mut buf).unwrap()); // stamped 6
    }
    t.commit().unwrap();
    db.advance_access_tick(); // now 7
    let mut t = db.begin().unwrap();
    assert!(t.get(table, &[int(8)], &mut buf).unwrap()); // stamped 7
    assert!(t.delete(table, &[int(19)]).unwrap());
    t.commit().unwrap();
    db.vacuum();
    // Within 0 ticks: 8; within 1: 5, 6, 7; within 10: 9..=18; the rest: 0..5.
    assert_eq!(db.access_ages(table, &[0, 1, 10]), vec![1, 3, 10, 5]);
    assert_eq!(db.access_ages(table, &[]), vec![19]);
    assert_eq!(db.access_ages(TableId(9999), &[1]), vec![0, 0]);
}

#[test]
fn shard_scans_part_the_table_and_garbage_collection_frees_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create(&db);
    insert(&db, table, 0..2000);
    let empty = db.table_memory(table);
    let mut seen = Vec::new();
    let mut t = db.begin().unwrap();
    let mut parts = 0;
    for start in (0..pgtier_engine::TABLE_SHARDS).step_by(16) {
        let before = seen.len();
        t.scan_table_shards(table, start..start + 16, |row| {
            seen.push(row.get(0).to_owned_value());
            Ok(true)
        })
        .unwrap();
        parts += usize::from(seen.len() > before);
    }
    t.commit().unwrap();
    seen.sort_by_key(|v| if let Value::Int4(i) = v { *i } else { -1 });
    assert_eq!(seen, (0..2000).map(int).collect::<Vec<_>>(), "every row exactly once");
    assert!(parts > 8, "2,000 rows fell in {parts} of 16 parts");
    // Deletes leave old versions; collecting what commits queued frees them.
    let mut t = db.begin().unwrap();
    for id in 0..1000 {
        assert!(t.delete(table, &[int(id)]).unwrap());
    }
    t.commit().unwrap();
    let after_delete = db.table_memory(table);
    assert!(after_delete >= empty, "{after_delete} < {empty}");
    db.collect_garbage();
    let collected = db.table_memory(table);
    assert!(collected < empty * 6 / 10, "{collected} of {empty} left after collecting 1,000 of 2,000 deletes");
}

/// `collect_garbage_committed` returns once every commit before it is
/// pruned: not while a snapshot older than the deletes is open (false
/// after its timeout), at once after it closes. Aging measures memory right
/// after its evictions with it, and with a plain collection it counted its
/// own deletes (held by sessions' snapshots) and evicted again for them.
#[test]
fn collecting_committed_garbage_waits_for_older_snapshots() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create(&db);
    insert(&db, table, 0..2000);
    let full = db.table_memory(table);
    let mut reader = db.begin().unwrap();
    reader.begin_statement().unwrap();
    assert!(reader.get(table, &[int(5)], &mut pgtier_engine::RowBuf::new()).unwrap());
    let mut t = db.begin().unwrap();
    for id in 0..1000 {
        assert!(t.delete(table, &[int(id)]).unwrap());
    }
    t.commit().unwrap();
    let started = Instant::now();
    assert!(!db.collect_garbage_committed(Duration::from_millis(50)), "a snapshot older than the deletes is open");
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert!(db.table_memory(table) >= full, "the open snapshot still sees the deleted rows");
    reader.commit().unwrap();
    assert!(db.collect_garbage_committed(Duration::from_secs(5)));
    let collected = db.table_memory(table);
    assert!(collected < full * 6 / 10, "{collected} of {full} left");
}
