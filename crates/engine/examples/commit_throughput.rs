//! Group-commit throughput: N threads each run single-row update
//! transactions and commit in the chosen mode, for a fixed time.
//!
//! `cargo run --release -p pgtier-engine --example commit_throughput -- [threads] [seconds] [sync|async] [dir]`
//! Prints commits/s, commits per fsync and commit latency percentiles.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use pgtier_engine::{ColumnDef, CommitMode, DataType, Database, EngineConfig, TableDef, Value};
use rand::{Rng, SeedableRng};

const ROWS: i64 = 100_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = args.get(1).map_or(64, |s| s.parse().unwrap());
    let seconds: u64 = args.get(2).map_or(5, |s| s.parse().unwrap());
    let mode = if args.get(3).map(String::as_str) == Some("async") { CommitMode::Async } else { CommitMode::Sync };
    let tmp = tempfile::tempdir().unwrap();
    let dir = args.get(4).map_or_else(|| tmp.path().to_path_buf(), std::path::PathBuf::from);
    let config = EngineConfig { checkpoint_interval: None, checkpoint_on_close: false, ..EngineConfig::default() };
    let db = Database::open(&dir, config).unwrap();
    let mut t = db.begin().unwrap();
    let table = t
        .create_table(&TableDef::new(
            "acct",
            vec![ColumnDef::new("id", DataType::Int8), ColumnDef::new("bal", DataType::Int8)],
            &["id"],
        ))
        .unwrap();
    t.commit().unwrap();
    for chunk in 0..ROWS / 10_000 {
        let mut t = db.begin_with(CommitMode::Async).unwrap();
        for id in chunk * 10_000..(chunk + 1) * 10_000 {
            t.insert(table, &[Value::Int8(id), Value::Int8(0)]).unwrap();
        }
        t.commit().unwrap();
    }
    let before = db.stats();
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(Mutex::new(Vec::<u64>::new()));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|n| {
            let (db, stop, commits, latencies, barrier) =
                (db.clone(), stop.clone(), commits.clone(), latencies.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(n as u64);
                let mut mine = Vec::with_capacity(1 << 16);
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    let id = rng.random_range(0..ROWS);
                    let started = Instant::now();
                    let mut t = db.begin_with(mode).unwrap();
                    match t.update_with(table, &[Value::Int8(id)], |r| {
                        Ok(Some(vec![(1, Value::Int8(r.get_i64(1).unwrap() + 1))]))
                    }) {
                        Ok(_) => {
                            t.commit().unwrap();
                            mine.push(started.elapsed().as_nanos() as u64);
                        }
                        Err(e) => assert_eq!(e.sqlstate(), "40P01"),
                    }
                }
                commits.fetch_add(mine.len() as u64, Ordering::Relaxed);
                latencies.lock().unwrap().extend(mine);
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let after = db.stats();
    let n = commits.load(Ordering::Relaxed);
    let fsyncs = after.wal.fsyncs - before.wal.fsyncs;
    let flushes = after.wal.flushes - before.wal.flushes;
    let mut lat = std::mem::take(&mut *latencies.lock().unwrap());
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0) as f64
            / 1000.0
    };
    println!(
        "mode={mode:?} threads={threads} seconds={elapsed:.1} commits={n} commits/s={:.0} fsyncs={fsyncs} flushes={flushes} commits/fsync={:.1} latency_us p50={:.1} p90={:.1} p99={:.1} mean={:.1}",
        n as f64 / elapsed,
        n as f64 / fsyncs.max(1) as f64,
        pct(0.5),
        pct(0.9),
        pct(0.99),
        lat.iter().sum::<u64>() as f64 / lat.len().max(1) as f64 / 1000.0
    );
    db.close().unwrap();
}
