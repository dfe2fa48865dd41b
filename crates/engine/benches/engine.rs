//! Micro-benchmarks of the typed API (divan). Run:
//! `CARGO_TARGET_DIR=/work/target-engine cargo bench -p pgtier-engine --bench engine`
//!
//! Table `b(id bigint PK, a bigint, c integer, s varchar(20))`, 100k rows,
//! secondary index on `c`. Sync commits hit the real WAL (group commit,
//! fdatasync on a preallocated segment).
#![allow(clippy::unwrap_used)]

use std::ops::Bound;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};

use pgtier_engine::{
    ColumnDef, CommitMode, DataType, Database, EngineConfig, IndexDef, IndexId, RowBuf, TableDef, TableId, Value,
};

const ROWS: i64 = 100_000;

struct Fixture {
    db: Database,
    table: TableId,
    pk: IndexId,
    by_c: IndexId,
    next_insert: AtomicI64,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let config = EngineConfig { checkpoint_interval: None, checkpoint_on_close: false, ..EngineConfig::default() };
        let db = Database::open(dir.path(), config).unwrap();
        let mut t = db.begin().unwrap();
        let table = t
            .create_table(&TableDef::new(
                "b",
                vec![
                    ColumnDef::new("id", DataType::Int8),
                    ColumnDef::new("a", DataType::Int8),
                    ColumnDef::new("c", DataType::Int4),
                    ColumnDef::new("s", DataType::Varchar(20)),
                ],
                &["id"],
            ))
            .unwrap();
        let by_c = t
            .create_index(&IndexDef {
                name: "b_c".into(),
                table: "b".into(),
                columns: vec!["c".into()],
                unique: false,
                include: Vec::new(),
                options: Default::default(),
            })
            .unwrap();
        t.commit().unwrap();
        for chunk in 0..ROWS / 1000 {
            let mut t = db.begin_with(CommitMode::Async).unwrap();
            for i in chunk * 1000..(chunk + 1) * 1000 {
                t.insert(
                    table,
                    &[Value::Int8(i), Value::Int8(i), Value::Int4((i % 1000) as i32), Value::Text(format!("row{i}"))],
                )
                .unwrap();
            }
            t.commit().unwrap();
        }
        let pk = db.catalog().table(table).unwrap().primary_index;
        Fixture { db, table, pk, by_c, next_insert: AtomicI64::new(ROWS), _dir: dir }
    })
}

fn main() {
    divan::main();
}

#[divan::bench]
fn point_read(bencher: divan::Bencher) {
    let f = fixture();
    let mut t = f.db.begin().unwrap();
    let mut row = RowBuf::new();
    let mut i = 0i64;
    bencher.bench_local(|| {
        i = (i + 7919) % ROWS;
        let key = [Value::Int8(i)];
        assert!(t.get(f.table, &key, &mut row).unwrap());
        row.get_i64(1)
    });
}

#[divan::bench]
fn point_read_in_place(bencher: divan::Bencher) {
    let f = fixture();
    let mut t = f.db.begin().unwrap();
    let mut i = 0i64;
    bencher.bench_local(|| {
        i = (i + 7919) % ROWS;
        t.get_with(f.table, &[Value::Int8(i)], |r| r.get_i64(1)).unwrap()
    });
}

/// `point_read` with access stamps on (every read stamps its row; the tick
/// moves every 1000 reads, so about one read in a thousand writes a stamp).
#[divan::bench]
fn point_read_tracked(bencher: divan::Bencher) {
    let f = fixture();
    f.db.set_access_tracking(f.table, true);
    let mut t = f.db.begin().unwrap();
    let mut row = RowBuf::new();
    let mut i = 0i64;
    let mut n = 0u32;
    bencher.bench_local(|| {
        i = (i + 7919) % ROWS;
        n += 1;
        if n.is_multiple_of(1000) {
            f.db.advance_access_tick();
        }
        let key = [Value::Int8(i)];
        assert!(t.get(f.table, &key, &mut row).unwrap());
        row.get_i64(1)
    });
    f.db.set_access_tracking(f.table, false);
}

/// `point_read` of keys that are absent, on a table with a miss hook that
/// finds nothing: the whole miss path (hook call, absence check).
#[divan::bench]
fn point_miss_hooked(bencher: divan::Bencher) {
    struct Nothing;
    impl pgtier_engine::MissHook for Nothing {
        fn on_miss(
            &self,
            _: &Database,
            _: pgtier_engine::Miss<'_>,
            _: pgtier_engine::MissIntent,
        ) -> pgtier_engine::Result<pgtier_engine::MissResolution> {
            Ok(pgtier_engine::MissResolution::NotFound)
        }
    }
    let f = fixture();
    f.db.set_miss_hook(f.table, Some(std::sync::Arc::new(Nothing)));
    let mut t = f.db.begin().unwrap();
    let mut row = RowBuf::new();
    let mut i = 0i64;
    bencher.bench_local(|| {
        i = (i + 7919) % ROWS;
        assert!(!t.get(f.table, &[Value::Int8(ROWS * 10 + i)], &mut row).unwrap());
    });
    f.db.set_miss_hook(f.table, None);
}

fn update_commit(bencher: divan::Bencher, mode: CommitMode) {
    let f = fixture();
    let mut i = 0i64;
    bencher.bench_local(|| {
        i = (i + 7919) % ROWS;
        let mut t = f.db.begin_with(mode).unwrap();
        assert!(t.update(f.table, &[Value::Int8(i)], &[(1, Value::Int8(i + 1))]).unwrap());
        t.commit().unwrap()
    });
}

#[divan::bench]
fn update_commit_async(bencher: divan::Bencher) {
    update_commit(bencher, CommitMode::Async);
}

#[divan::bench(sample_count = 20, sample_size = 50)]
fn update_commit_sync(bencher: divan::Bencher) {
    update_commit(bencher, CommitMode::Sync);
}

#[divan::bench]
fn insert_commit_async(bencher: divan::Bencher) {
    let f = fixture();
    bencher.bench_local(|| {
        let id = f.next_insert.fetch_add(1, Ordering::Relaxed);
        let mut t = f.db.begin_with(CommitMode::Async).unwrap();
        t.insert(
            f.table,
            &[Value::Int8(id), Value::Int8(id), Value::Int4((id % 1000) as i32), Value::Text("inserted".into())],
        )
        .unwrap();
        t.commit().unwrap()
    });
}

/// Per-row cost of inserting 1000 rows in one transaction.
#[divan::bench(sample_count = 20)]
fn insert_1000_per_txn(bencher: divan::Bencher) {
    let f = fixture();
    bencher.counter(divan::counter::ItemsCount::new(1000usize)).bench_local(|| {
        let base = f.next_insert.fetch_add(1000, Ordering::Relaxed);
        let mut t = f.db.begin_with(CommitMode::Async).unwrap();
        for id in base..base + 1000 {
            t.insert(
                f.table,
                &[Value::Int8(id), Value::Int8(id), Value::Int4((id % 1000) as i32), Value::Text("bulk".into())],
            )
            .unwrap();
        }
        t.commit().unwrap()
    });
}

/// 100 consecutive primary keys through the ordered primary-key index.
#[divan::bench]
fn range_scan_pk_100(bencher: divan::Bencher) {
    let f = fixture();
    let mut t = f.db.begin().unwrap();
    let mut i = 0i64;
    bencher.counter(divan::counter::ItemsCount::new(100usize)).bench_local(|| {
        i = (i + 7919) % (ROWS - 100);
        let (lo, hi) = ([Value::Int8(i)], [Value::Int8(i + 99)]);
        let mut sum = 0;
        let n = t
            .scan(f.pk, Bound::Included(&lo[..]), Bound::Included(&hi[..]), |r| {
                sum += r.get_i64(1).unwrap_or(0);
                Ok(true)
            })
            .unwrap();
        assert_eq!(n, 100);
        sum
    });
}

/// All rows with one `c` value through the secondary index (100 rows at start).
#[divan::bench]
fn prefix_scan_secondary(bencher: divan::Bencher) {
    let f = fixture();
    let mut t = f.db.begin().unwrap();
    let mut c = 0i32;
    bencher.bench_local(|| {
        c = (c + 7) % 1000;
        t.scan_prefix(f.by_c, &[Value::Int4(c)], |_| Ok(true)).unwrap()
    });
}
