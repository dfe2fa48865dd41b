//! The columnar copy against the row store: a reader at snapshot S must see
//! exactly the rows a row-store scan at S sees, while writers commit and
//! merges run.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use pgtier_engine::{ColumnDef, CommitMode, DATE_INFINITY, DataType, TableDef, Value};
use pgtier_olap::{OlapEngine, OlapError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seed() -> u64 {
    std::env::var("OLAP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        use rand::TryRngCore;
        rand::rngs::OsRng.try_next_u64().unwrap_or(1)
    })
}

/// Rows in one list and not the other, for a readable failure.
fn diff(row: &[String], col: &[String]) -> String {
    let only_row: Vec<&String> = row.iter().filter(|r| col.binary_search(r).is_err()).take(5).collect();
    let only_col: Vec<&String> = col.iter().filter(|r| row.binary_search(r).is_err()).take(5).collect();
    format!(
        "{} rows vs {} columnar; only in the row store: {only_row:?}; only in the copy: {only_col:?}",
        row.len(),
        col.len()
    )
}

/// One writer: random inserts, updates and deletes over ids 0..ID_SPACE,
/// 1..=4 per transaction, sync or async commits, some rolled back.
fn writer(db: &pgtier_engine::Database, table: pgtier_engine::TableId, seed: u64, txns: usize) {
    const ID_SPACE: i64 = 800;
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..txns {
        let mode = if rng.random() { CommitMode::Sync } else { CommitMode::Async };
        let mut t = db.begin_with(mode).unwrap();
        let mut ok = true;
        for _ in 0..rng.random_range(1..=4) {
            let id = rng.random_range(0..ID_SPACE);
            let key = [Value::Int8(id)];
            let r = match rng.random_range(0..10) {
                0..=3 => {
                    let row = random_order(&mut rng, id);
                    match t.update(table, &key, &[(1, row[1].clone()), (2, row[2].clone()), (3, row[3].clone())]) {
                        Ok(true) => Ok(()),
                        Ok(false) => t.insert(table, &row),
                        Err(e) => Err(e),
                    }
                }
                4..=6 => t.delete(table, &key).map(|_| ()),
                _ => {
                    let row = random_order(&mut rng, id);
                    let col = rng.random_range(1..row.len());
                    t.update(table, &key, &[(col, row[col].clone())]).map(|_| ())
                }
            };
            if r.is_err() {
                // A deadlock or a lost race for the key: the transaction is aborted.
                ok = false;
                break;
            }
        }
        if ok && rng.random_range(0..10) != 0 {
            let _ = t.commit();
        } else {
            t.rollback();
        }
    }
}

#[test]
fn differential_random_writes_concurrent_reads() {
    let seed = seed();
    eprintln!("OLAP_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create_orders(&db, "orders");
    let mut rng = StdRng::seed_from_u64(seed);
    insert_rows(&db, table, 0..400, &mut rng);
    let olap = start(&db);
    let mut progress = Vec::new();
    olap.enable(table, |done, total| progress.push((done, total))).unwrap();
    assert_eq!(progress.last().copied(), Some((400, 400)), "progress ends at rows done = total");
    let writers_done = AtomicU64::new(0);
    let compared = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (db, writers_done) = (&db, &writers_done);
            s.spawn(move || {
                writer(db, table, seed.wrapping_add(w + 1), 1500);
                writers_done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for r in 0..2u64 {
            let (db, olap, writers_done, compared, failed) = (&db, &olap, &writers_done, &compared, &failed);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_add(100 + r));
                while writers_done.load(Ordering::SeqCst) < 2 && !failed.load(Ordering::SeqCst) {
                    let mut t = db.begin().unwrap();
                    t.begin_statement().unwrap();
                    let snapshot = t.snapshot_ts();
                    let rows = row_store(&mut t, table);
                    if rng.random_range(0..4) == 0 {
                        // A merge while this snapshot is held: it must stop at or below it.
                        olap.merge_now().unwrap();
                    }
                    let cols = columnar(olap, table, snapshot);
                    if rows != cols {
                        failed.store(true, Ordering::SeqCst);
                        panic!("snapshot {snapshot}: {}", diff(&rows, &cols));
                    }
                    compared.fetch_add(1, Ordering::Relaxed);
                    t.commit().unwrap();
                }
            });
        }
    });
    // Quiet now: the last state, then once more after everything merged.
    for merge in [false, true] {
        if merge {
            olap.merge_now().unwrap();
        }
        let mut t = db.begin().unwrap();
        t.begin_statement().unwrap();
        let snapshot = t.snapshot_ts();
        let rows = row_store(&mut t, table);
        let cols = columnar(&olap, table, snapshot);
        assert!(rows == cols, "final, merged {merge}: {}", diff(&rows, &cols));
        t.commit().unwrap();
    }
    let stats = olap.stats();
    let copy = olap.table_stats(table).unwrap();
    eprintln!(
        "compared {} snapshots; merges {} ({} rows); chunks {}, delta {}; reader waits {} (avg {} us, max {} us, {} flushed)",
        compared.load(Ordering::Relaxed),
        stats.merges,
        stats.merged_rows,
        copy.chunks,
        copy.delta_rows,
        stats.waits,
        stats.wait_total_us / stats.waits.max(1),
        stats.wait_max_us,
        stats.wait_flushes
    );
    assert!(compared.load(Ordering::Relaxed) >= 20, "too few comparisons to mean anything");
    assert!(stats.merges > 0, "no merge ran");
    assert!(copy.chunks > 1, "the test should span several chunks");
}

/// Merges held off: the delta grows to thousands of entries (many full
/// blocks, whose converted columns views share), keys changed again and
/// again; snapshots taken along the way are read again after more writes,
/// each against the row store at the same snapshot, then after a merge.
#[test]
fn a_long_delta_read_at_old_and_new_snapshots() {
    let seed = seed();
    eprintln!("OLAP_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create_orders(&db, "orders");
    let mut rng = StdRng::seed_from_u64(seed);
    insert_rows(&db, table, 0..600, &mut rng);
    // The merger wakes as often as elsewhere (a dropped engine joins it)
    // but finds nothing due.
    let config =
        pgtier_olap::OlapConfig { merge_delta_rows: usize::MAX, merge_age: Duration::from_secs(3600), ..olap_config() };
    let olap = OlapEngine::start(&db, config).unwrap();
    olap.enable(table, |_, _| {}).unwrap();
    let mut held = Vec::new();
    for round in 0..6u64 {
        writer(&db, table, seed.wrapping_add(round), 700);
        let mut t = db.begin().unwrap();
        t.begin_statement().unwrap();
        held.push(t);
        // Every snapshot held so far, the new one and the old ones.
        for t in &mut held {
            let snapshot = t.snapshot_ts();
            let (rows, cols) = (row_store(t, table), columnar(&olap, table, snapshot));
            assert!(rows == cols, "round {round}, snapshot {snapshot}: {}", diff(&rows, &cols));
        }
    }
    let delta = olap.table_stats(table).unwrap().delta_rows;
    assert!(delta > 3 * 1024, "the delta should span several blocks: {delta} entries");
    for t in held.drain(..) {
        t.commit().unwrap();
    }
    olap.merge_now().unwrap();
    assert_eq!(olap.table_stats(table).unwrap().delta_rows, 0);
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let snapshot = t.snapshot_ts();
    let (rows, cols) = (row_store(&mut t, table), columnar(&olap, table, snapshot));
    assert!(rows == cols, "merged: {}", diff(&rows, &cols));
    t.commit().unwrap();
}

/// Enabling while writers commit (sync and async): the scan and the stream
/// must meet without a gap or a double, whatever commits in between.
#[test]
fn enable_during_concurrent_writes() {
    let seed = seed();
    eprintln!("OLAP_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create_orders(&db, "orders");
    let mut rng = StdRng::seed_from_u64(seed);
    insert_rows(&db, table, 0..400, &mut rng);
    let olap = start(&db);
    let writers_done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (db, writers_done) = (&db, &writers_done);
            s.spawn(move || {
                writer(db, table, seed.wrapping_add(w + 1), 1500);
                writers_done.fetch_add(1, Ordering::SeqCst);
            });
        }
        let mut rounds = 0;
        while writers_done.load(Ordering::SeqCst) < 2 {
            // Each round enables afresh (a rebuild) and compares at once.
            olap.enable(table, |_, _| {}).unwrap();
            for _ in 0..5 {
                let mut t = db.begin().unwrap();
                t.begin_statement().unwrap();
                let snapshot = t.snapshot_ts();
                let rows = row_store(&mut t, table);
                match olap.view(table, snapshot) {
                    Ok(view) => {
                        let cols = sorted(view.rows().unwrap());
                        assert!(rows == cols, "round {rounds}, snapshot {snapshot}: {}", diff(&rows, &cols));
                    }
                    // Only a snapshot taken before the scan's, which this one is not.
                    Err(e) => panic!("round {rounds}: {e}"),
                }
                t.commit().unwrap();
            }
            rounds += 1;
        }
        eprintln!("{rounds} enables during writes");
        assert!(rounds >= 2);
    });
}

/// An `Evict` transaction's deletes leave PostgreSQL's rows alone but do
/// remove them from the row store: the copy mirrors the row store.
#[test]
fn evict_deletes_are_applied() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create_orders(&db, "orders");
    let mut rng = StdRng::seed_from_u64(17);
    insert_rows(&db, table, 0..100, &mut rng);
    let olap = start(&db);
    olap.enable(table, |_, _| {}).unwrap();
    let mut t = db.begin_with_origin(CommitMode::Sync, pgtier_engine::Origin::Evict).unwrap();
    for id in 0..40 {
        assert!(t.delete(table, &[Value::Int8(id)]).unwrap());
    }
    t.commit().unwrap();
    let mut t = db.begin_with_origin(CommitMode::Sync, pgtier_engine::Origin::Load).unwrap();
    insert_origin_rows(&mut t, table, 0..10, &mut rng);
    t.commit().unwrap();
    let mut r = db.begin().unwrap();
    r.begin_statement().unwrap();
    let snapshot = r.snapshot_ts();
    let rows = row_store(&mut r, table);
    assert_eq!(rows.len(), 70);
    assert_eq!(columnar(&olap, table, snapshot), rows);
}

fn insert_origin_rows(
    t: &mut pgtier_engine::Transaction,
    table: pgtier_engine::TableId,
    ids: std::ops::Range<i64>,
    rng: &mut StdRng,
) {
    for id in ids {
        t.insert(table, &random_order(rng, id)).unwrap();
    }
}

/// A change committed and read at once through the columnar path is seen,
/// sync and async commits alike (an async one needs the WAL flushed).
#[test]
fn freshness_every_commit_is_seen_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create_orders(&db, "orders");
    let mut rng = StdRng::seed_from_u64(7);
    insert_rows(&db, table, 0..100, &mut rng);
    let olap = start(&db);
    olap.enable(table, |_, _| {}).unwrap();
    let mut waits = Vec::with_capacity(1000);
    for i in 0..1000i64 {
        let mode = if i % 2 == 0 { CommitMode::Sync } else { CommitMode::Async };
        let mut t = db.begin_with(mode).unwrap();
        let id = i % 150;
        let row = random_order(&mut rng, id);
        let mut changes: Vec<(usize, Value)> = (1..row.len()).map(|c| (c, row[c].clone())).collect();
        // A marker no earlier state of the row holds.
        changes.push((1, Value::Int4(1_000_000 + i as i32)));
        if !t.update(table, &[Value::Int8(id)], &changes).unwrap() {
            let mut row = row.clone();
            row[1] = Value::Int4(1_000_000 + i as i32);
            t.insert(table, &row).unwrap();
        }
        t.commit().unwrap();
        let mut r = db.begin().unwrap();
        r.begin_statement().unwrap();
        let snapshot = r.snapshot_ts();
        let started = Instant::now();
        let view = olap.view(table, snapshot).unwrap();
        waits.push(started.elapsed());
        let rows = view.rows().unwrap();
        let found = rows.iter().find(|v| v[0] == Value::Int8(id)).expect("row present");
        assert_eq!(found[1], Value::Int4(1_000_000 + i as i32), "iteration {i} ({mode:?}): change not seen");
        r.commit().unwrap();
    }
    waits.sort_unstable();
    let stats = olap.stats();
    eprintln!(
        "freshness: 1000 reads, view (wait + build) p50 {:?} p99 {:?} max {:?}; catch-up waits avg {} us, max {} us, {} flushed the WAL",
        waits[500],
        waits[990],
        waits[999],
        stats.wait_total_us / stats.waits.max(1),
        stats.wait_max_us,
        stats.wait_flushes
    );
}

/// The consumer acknowledges what it read: its position follows the WAL
/// end, and a restart moves a stale position forward.
#[test]
fn consumer_acknowledges_and_restart_moves_position() {
    let dir = tempfile::tempdir().unwrap();
    let position = |db: &pgtier_engine::Database| {
        db.consumers().into_iter().find(|c| c.name == "olap").map(|c| c.position).unwrap()
    };
    let stale = {
        let db = open(dir.path());
        let table = create_orders(&db, "orders");
        let mut rng = StdRng::seed_from_u64(3);
        let olap = start(&db);
        olap.enable(table, |_, _| {}).unwrap();
        for i in 0..20 {
            insert_rows(&db, table, i * 10..i * 10 + 10, &mut rng);
        }
        let end = db.wal_end();
        let deadline = Instant::now() + Duration::from_secs(5);
        while position(&db) < end {
            assert!(Instant::now() < deadline, "position {:?} never reached the WAL end {end:?}", position(&db));
            std::thread::sleep(Duration::from_millis(20));
        }
        // Stopped: later commits leave the position behind.
        drop(olap);
        insert_rows(&db, table, 1000..1100, &mut rng);
        let stale = position(&db);
        assert!(stale < db.wal_end());
        db.close().unwrap();
        stale
    };
    let db = open(dir.path());
    assert_eq!(position(&db), stale, "the position survives a restart");
    let olap = start(&db);
    assert!(position(&db) >= db.wal_end(), "a start moves the position to the WAL end: nothing old is needed");
    assert!(position(&db) > stale);
    drop(olap);
}

#[test]
fn unsupported_types_are_refused_by_column() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let olap = start(&db);
    for (ty, name) in [
        (DataType::Numeric { precision: 0, scale: 0 }, "free"),
        (DataType::Numeric { precision: 60, scale: 2 }, "wide"),
        (DataType::Array(pgtier_engine::ElemType::of(DataType::Int4).unwrap()), "list"),
    ] {
        let mut t = db.begin().unwrap();
        let table = t
            .create_table(&TableDef::new(
                format!("t_{name}"),
                vec![ColumnDef::new("id", DataType::Int4).not_null(), ColumnDef::new(name, ty)],
                &["id"],
            ))
            .unwrap();
        t.commit().unwrap();
        match olap.enable(table, |_, _| {}) {
            Err(e @ OlapError::UnsupportedType { .. }) => {
                assert!(e.to_string().contains(&format!("\"{name}\"")), "{e}");
                assert_eq!(e.sqlstate(), "0A000");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert!(!olap.is_enabled(table));
    }
}

/// A value without an exact Arrow form fails enable, or (committed later)
/// every read of the copy: never a wrong value.
#[test]
fn unrepresentable_values_fail_never_mislead() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create_orders(&db, "orders");
    let mut rng = StdRng::seed_from_u64(5);
    insert_rows(&db, table, 0..10, &mut rng);
    let olap = start(&db);
    olap.enable(table, |_, _| {}).unwrap();
    let mut t = db.begin().unwrap();
    t.update(table, &[Value::Int8(3)], &[(4, Value::Date(DATE_INFINITY))]).unwrap();
    t.commit().unwrap();
    let mut r = db.begin().unwrap();
    r.begin_statement().unwrap();
    match olap.view(table, r.snapshot_ts()) {
        Err(e @ OlapError::ValueNotRepresentable { .. }) => assert!(e.to_string().contains("\"day\""), "{e}"),
        other => panic!("{:?}", other.map(|v| v.row_count())),
    }
    r.commit().unwrap();
    // Enabling again meets the value in the scan.
    match olap.enable(table, |_, _| {}) {
        Err(OlapError::ValueNotRepresentable { column, .. }) => assert_eq!(column, "day"),
        other => panic!("{other:?}"),
    }
}

/// A table without a primary key: the hidden row id is the identity.
#[test]
fn table_without_primary_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut t = db.begin().unwrap();
    let table = t
        .create_table(&TableDef::new(
            "events",
            vec![ColumnDef::new("kind", DataType::Text), ColumnDef::new("n", DataType::Int8)],
            &[],
        ))
        .unwrap();
    for i in 0..300 {
        t.insert(table, &[Value::Text(format!("k{}", i % 3)), Value::Int8(i % 7), Value::Null]).unwrap();
    }
    t.commit().unwrap();
    let olap = start(&db);
    olap.enable(table, |_, _| {}).unwrap();
    let mut t = db.begin().unwrap();
    for rowid in (1..300).step_by(4) {
        t.delete(table, &[Value::Int8(rowid)]).unwrap();
    }
    for i in 0..50 {
        t.insert(table, &[Value::Text("k1".into()), Value::Int8(i % 7), Value::Null]).unwrap();
    }
    t.commit().unwrap();
    for merge in [false, true] {
        if merge {
            olap.merge_now().unwrap();
        }
        let mut r = db.begin().unwrap();
        r.begin_statement().unwrap();
        let snapshot = r.snapshot_ts();
        assert_eq!(row_store(&mut r, table), columnar(&olap, table, snapshot));
        let view = olap.view(table, snapshot).unwrap();
        assert_eq!(view.visible_columns(), &[0, 1], "the row id is not shown to queries");
        r.commit().unwrap();
    }
}

/// A key column's type and the range its values are drawn from.
type KeyColumn = (DataType, (i64, i64));

/// An enable leaves the rows in primary key order, negative values
/// before positive ones and column by column: integer and date keys
/// (sorted packed into one number when they fit 128 bits) and others
/// (sorted by Arrow) alike.
#[test]
fn enable_builds_chunks_in_key_order() {
    let seed = seed();
    eprintln!("OLAP_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut rng = StdRng::seed_from_u64(seed);
    let olap = start(&db);
    // (name, key columns' types and ranges): few values in the leading
    // columns, so every column decides the order of some rows.
    let full = (i64::MIN, i64::MAX);
    let shapes: [(&str, Vec<KeyColumn>); 4] = [
        ("packed_int2_int4_int8", vec![(DataType::Int2, (-2, 2)), (DataType::Int4, (-3, 3)), (DataType::Int8, full)]),
        ("packed_date_int2_int8", vec![(DataType::Date, (-2, 2)), (DataType::Int2, (-3, 3)), (DataType::Int8, full)]),
        (
            "wide_int8_int8_int4",
            vec![
                (DataType::Int8, (-2, 2)),
                (DataType::Int8, (-3, 3)),
                (DataType::Int4, (i32::MIN.into(), i32::MAX.into())),
            ],
        ),
        ("text_int8", vec![(DataType::Text, (0, 100_000)), (DataType::Int8, full)]),
    ];
    for (name, key) in shapes {
        let mut columns: Vec<ColumnDef> =
            key.iter().enumerate().map(|(i, (ty, _))| ColumnDef::new(format!("k{i}"), *ty).not_null()).collect();
        columns.push(ColumnDef::new("v", DataType::Int4));
        let names: Vec<String> = (0..key.len()).map(|i| format!("k{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut t = db.begin().unwrap();
        let table = t.create_table(&TableDef::new(name, columns, &names)).unwrap();
        let mut seen = std::collections::HashSet::new();
        while seen.len() < 3000 {
            let values: Vec<i64> = key.iter().map(|&(_, (lo, hi))| rng.random_range(lo..hi)).collect();
            if !seen.insert(values.clone()) {
                continue;
            }
            let mut row: Vec<Value> = key
                .iter()
                .zip(&values)
                .map(|(&(ty, _), &v)| match ty {
                    DataType::Int2 => Value::Int2(v as i16),
                    DataType::Int4 => Value::Int4(v as i32),
                    DataType::Date => Value::Date(v as i32),
                    DataType::Text => Value::Text(format!("k{v}")),
                    _ => Value::Int8(v),
                })
                .collect();
            row.push(Value::Null);
            t.insert(table, &row).unwrap();
        }
        t.commit().unwrap();
        olap.enable(table, |_, _| {}).unwrap();
        let mut r = db.begin().unwrap();
        r.begin_statement().unwrap();
        let snapshot = r.snapshot_ts();
        assert_eq!(row_store(&mut r, table), columnar(&olap, table, snapshot), "{name}");
        let keys: Vec<Vec<String>> = olap
            .view(table, snapshot)
            .unwrap()
            .rows()
            .unwrap()
            .into_iter()
            .map(|row| {
                row[..key.len()]
                    .iter()
                    .map(|v| match v {
                        // Zero-padded and offset, so text order is numeric order.
                        Value::Int2(x) => format!("{:020}", i128::from(*x) - i128::from(i64::MIN)),
                        Value::Int4(x) | Value::Date(x) => format!("{:020}", i128::from(*x) - i128::from(i64::MIN)),
                        Value::Int8(x) => format!("{:020}", i128::from(*x) - i128::from(i64::MIN)),
                        Value::Text(s) => s.clone(),
                        other => panic!("{other:?}"),
                    })
                    .collect()
            })
            .collect();
        assert_eq!(keys.len(), 3000, "{name}");
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{name}: keys out of order");
        r.commit().unwrap();
    }
}

/// Low-cardinality text is dictionary encoded and smaller than plain.
#[test]
fn compression_figures_per_column_and_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create_orders(&db, "orders");
    let mut rng = StdRng::seed_from_u64(11);
    insert_rows(&db, table, 0..5000, &mut rng);
    let olap = OlapEngine::start(&db, pgtier_olap::OlapConfig::default()).unwrap();
    olap.enable(table, |_, _| {}).unwrap();
    let rows = olap.compression();
    for r in &rows {
        eprintln!(
            "{:>8} {:>8} {:>10} rows {:>6} plain {:>8} arrow {:>8} ratio {:.2}",
            r.table,
            r.column.as_deref().unwrap_or("(table)"),
            r.encoding,
            r.rows,
            r.plain_bytes,
            r.arrow_bytes,
            r.ratio()
        );
    }
    let status = rows.iter().find(|r| r.column.as_deref() == Some("status")).unwrap();
    assert_eq!(status.encoding, "dictionary");
    assert!(status.ratio() > 2.0, "4 distinct strings in 5000 rows: {status:?}");
    let note = rows.iter().find(|r| r.column.as_deref() == Some("note")).unwrap();
    assert_eq!(note.encoding, "plain", "mostly distinct strings stay plain");
    // The plain sizes, counted from the row store's values: a text's bytes,
    // 16 per numeric, 8 per timestamp, nothing for NULL.
    let mut expected = [0u64; 3];
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    t.scan_table(table, |row| {
        let v = row.values();
        if let Value::Text(s) = &v[2] {
            expected[0] += s.len() as u64;
        }
        expected[1] += if v[3] == Value::Null { 0 } else { 16 };
        if let Value::Text(s) = &v[7] {
            expected[2] += s.len() as u64;
        }
        Ok(true)
    })
    .unwrap();
    t.rollback();
    let plain = |name: &str| rows.iter().find(|r| r.column.as_deref() == Some(name)).unwrap().plain_bytes;
    assert_eq!([plain("status"), plain("amount"), plain("note")], expected);
    let total = rows.iter().find(|r| r.column.is_none()).unwrap();
    assert_eq!(total.rows, 5000);
    assert_eq!(total.plain_bytes, rows.iter().filter(|r| r.column.is_some()).map(|r| r.plain_bytes).sum::<u64>());
}

/// A snapshot older than the merged chunks is refused (72000), never
/// answered from newer data; a live statement's snapshot is never merged past.
#[test]
fn merges_stop_at_live_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create_orders(&db, "orders");
    let mut rng = StdRng::seed_from_u64(13);
    insert_rows(&db, table, 0..50, &mut rng);
    let olap = start(&db);
    olap.enable(table, |_, _| {}).unwrap();
    let mut held = db.begin().unwrap();
    held.begin_statement().unwrap();
    let old = held.snapshot_ts();
    let old_rows = row_store(&mut held, table);
    insert_rows(&db, table, 50..100, &mut rng);
    // The applier is past the held snapshot: only the horizon stops a merge.
    let mut r = db.begin().unwrap();
    r.begin_statement().unwrap();
    olap.catch_up(r.snapshot_ts()).unwrap();
    r.commit().unwrap();
    assert!(olap.stats().applied_ts > old.get());
    olap.merge_now().unwrap();
    assert_eq!(columnar(&olap, table, old), old_rows, "the held snapshot is still served");
    held.commit().unwrap();
    insert_rows(&db, table, 100..110, &mut rng);
    let mut r = db.begin().unwrap();
    r.begin_statement().unwrap();
    olap.catch_up(r.snapshot_ts()).unwrap();
    r.commit().unwrap();
    olap.merge_now().unwrap();
    match olap.view(table, old) {
        Err(e @ OlapError::SnapshotTooOld { .. }) => assert_eq!(e.sqlstate(), "72000"),
        other => panic!("{:?}", other.map(|v| v.row_count())),
    }
}

/// DROP TABLE (and ALTER TABLE, which rewrites under a new id) ends the copy.
#[test]
fn dropped_table_is_no_longer_served() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create_orders(&db, "orders");
    let olap = start(&db);
    olap.enable(table, |_, _| {}).unwrap();
    let mut t = db.begin().unwrap();
    t.drop_table("orders").unwrap();
    t.commit().unwrap();
    let mut r = db.begin().unwrap();
    r.begin_statement().unwrap();
    olap.catch_up(r.snapshot_ts()).unwrap();
    assert!(!olap.is_enabled(table));
    assert!(matches!(olap.view(table, r.snapshot_ts()), Err(OlapError::NotEnabled { .. })));
}
