//! An online backup taken while TATP runs (issue 36: "backup under TATP
//! load, restore, compare: equal at the backup point").
//!
//! The expected state is derived apart from the backup's own mechanism
//! (checkpoint plus WAL cut at the end point): the tables as they were
//! before the load, plus every transaction the commit stream delivers whose
//! record lies before the backup's end point, applied in commit order. The
//! restored database must equal it table by table, row by row, while the
//! source has moved on past it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pgtier_bench::driver::{LiveCounters, LoadSpec, run_repetition};
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::tatp::TatpWorkload;
use pgtier_bench::tatp::population::{PopulateOptions, populate};
use pgtier_bench::tatp::random::SubscriberKeys;
use pgtier_engine::{Change, CommitMode, Database, Lsn, RowOp, StreamStart, Value};

const SUBSCRIBERS: u64 = 2_000;
const TABLES: [&str; 4] = ["subscriber", "access_info", "special_facility", "call_forwarding"];

type Rows = BTreeMap<Vec<String>, Vec<String>>;

fn text(values: &[Value]) -> Vec<String> {
    values.iter().map(ToString::to_string).collect()
}

/// Every TATP table's rows by primary key, as text.
fn dump(db: &Database) -> BTreeMap<&'static str, Rows> {
    let catalog = db.catalog();
    let mut t = db.begin().unwrap();
    let mut out = BTreeMap::new();
    for name in TABLES {
        let schema = catalog.table_by_name(name).unwrap();
        let mut rows = Rows::new();
        t.scan_table(schema.id, |row| {
            let values = row.values();
            let key = schema.primary_key.iter().map(|&c| values[c].to_string()).collect();
            rows.insert(key, text(&values));
            Ok(true)
        })
        .unwrap();
        out.insert(name, rows);
    }
    t.commit().unwrap();
    out
}

/// Applies to `state` every transaction of `db`'s stream `consumer` whose
/// record lies before `end`; the counts of transactions before and after it.
fn replay_until(db: &Database, consumer: &str, end: Lsn, state: &mut BTreeMap<&'static str, Rows>) -> (u64, u64) {
    let mut stream = db.stream(consumer).unwrap();
    let (mut before, mut after) = (0, 0);
    while let Some(txn) = stream.next(Duration::from_secs(2)).unwrap() {
        if txn.lsn >= end {
            after += 1;
            continue;
        }
        before += 1;
        for change in &txn.changes {
            let Change::Row(row) = change else { panic!("DDL during the load: {change:?}") };
            let table = TABLES.iter().find(|t| **t == row.table.name).expect("a TATP table");
            let rows = state.get_mut(table).unwrap();
            let key = text(&row.key_values());
            match row.op {
                RowOp::Insert | RowOp::Update => rows.insert(key, text(&row.row().values())),
                RowOp::Delete => rows.remove(&key),
            };
        }
    }
    (before, after)
}

#[test]
fn a_backup_under_tatp_load_restores_exactly_its_end_point() {
    let dir = tempfile::tempdir().unwrap();
    let target = EmbeddedTarget::open(&dir.path().join("source"), CommitMode::Sync).unwrap();
    populate(&target, &PopulateOptions { subscribers: SUBSCRIBERS, streams: 2, seed: 36, progress: false }).unwrap();
    let db = target.database().clone();
    let mut expected = dump(&db);
    // Nothing writes between the dump and the registration: the stream
    // starts exactly at the dumped state.
    db.register_consumer("backup_check", StreamStart::Now).unwrap();

    let load_done = Arc::new(AtomicBool::new(false));
    let load = {
        let target = EmbeddedTarget::from_database(db.clone(), &dir.path().join("source"), CommitMode::Sync);
        let load_done = Arc::clone(&load_done);
        std::thread::spawn(move || {
            let workload = TatpWorkload { keys: SubscriberKeys::new(1, SUBSCRIBERS, false) };
            let spec = LoadSpec {
                threads: 3,
                rate_per_s: None,
                ramp_up: Duration::from_millis(200),
                measure: Duration::from_secs(4),
                ramp_down: Duration::from_millis(100),
                seed: 36,
            };
            let tally = run_repetition(&target, &workload, &spec, &LiveCounters::default(), &mut |_, _| {}).unwrap();
            load_done.store(true, Ordering::Release);
            tally
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let backup_dir = dir.path().join("backup");
    let report = db.backup(&backup_dir, &mut |_| {}).unwrap();
    assert!(!load_done.load(Ordering::Acquire), "the backup ran while TATP did");
    let tally = load.join().unwrap();
    let executed: u64 = tally.txns.iter().map(|t| t.executed).sum();

    let end = report.manifest.end_lsn;
    let (before, after) = replay_until(&db, "backup_check", end, &mut expected);
    println!(
        "backup of {} bytes in {:?} under TATP ({executed} transactions in the measure window); \
         {before} write transactions before the end point, {after} after",
        report.bytes, report.duration
    );
    assert!(before > 100 && after > 100, "writes before ({before}) and after ({after}) the end point");
    let source_now = dump(&db);
    assert_ne!(source_now, expected, "the source moved on past the end point");

    let restored_dir = dir.path().join("restored");
    pgtier_engine::restore(&backup_dir, &restored_dir, &mut |_| {}).unwrap();
    let restored = EmbeddedTarget::open(&restored_dir, CommitMode::Sync).unwrap();
    let got = dump(restored.database());
    for name in TABLES {
        assert_eq!(got[name].len(), expected[name].len(), "{name}: rows at the end point");
        assert!(got[name] == expected[name], "{name}: the restored rows differ from the state at the end point");
    }
    restored.database().verify().unwrap();
}
