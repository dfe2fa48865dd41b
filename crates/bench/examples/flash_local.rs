//! Rows of a plain local table on the flash tier (`[tier] local_tables`,
//! write-back), against the same rows in memory, in one process: the
//! memory a row takes each way, then random point reads by primary key
//! (closed loop, `--threads` sessions, each call timed from its start) and
//! a full scan, first with every row in memory, then after aging moved
//! them to flash. The reads on flash are one record read each (O_DIRECT
//! where the filesystem allows it), under the row's shard lock.
//!   cargo run --release -p pgtier-bench --example flash_local -- \
//!     --rows 1000000 --seconds 10 --threads 4 --repetitions 3 [--dir /path/on/the/device]
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pgtier_bench::stats::LatencyHistogram;
use pgtier_cache::{Admission, Cache, CacheConfig, DirectIo, TierConfig, TierMode};
use pgtier_engine::{ColumnDef, DataType, Database, EngineConfig, IndexDef, TableDef, TableId, Value};
use rand::{Rng, SeedableRng};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

struct Args {
    rows: i32,
    seconds: u64,
    threads: u32,
    repetitions: u32,
    dir: Option<PathBuf>,
}

fn args() -> Result<Args> {
    let mut args = Args { rows: 1_000_000, seconds: 10, threads: 4, repetitions: 3, dir: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--rows" => args.rows = value.parse()?,
            "--seconds" => args.seconds = value.parse()?,
            "--threads" => args.threads = value.parse()?,
            "--repetitions" => args.repetitions = value.parse()?,
            "--dir" => args.dir = Some(value.into()),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    Ok(args)
}

fn row(id: i32) -> Vec<Value> {
    vec![
        Value::Int4(id),
        Value::Int4(id % 1000),
        Value::Int8(i64::from(id) * 3),
        Value::Text(format!("{id:010}-{}", "p".repeat(180))),
    ]
}

/// Random point reads for `seconds`: (reads/s, latency).
fn point_reads(db: &Database, table: TableId, rows: i32, threads: u32, seconds: u64) -> (f64, LatencyHistogram) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|n| {
            let (db, stop, done) = (db.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(u64::from(n) + 7);
                let mut latency = LatencyHistogram::new();
                let mut t = db.begin().expect("begin");
                while !stop.load(Ordering::Relaxed) {
                    let id = rng.random_range(0..rows);
                    let started = Instant::now();
                    let len = t
                        .get_with(table, &[Value::Int4(id)], |r| r.values().len())
                        .expect("read")
                        .expect("every row is there");
                    latency.record(started.elapsed());
                    assert_eq!(len, 4);
                    done.fetch_add(1, Ordering::Relaxed);
                }
                t.commit().expect("commit");
                latency
            })
        })
        .collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut all = LatencyHistogram::new();
    for h in handles {
        all.merge(&h.join().expect("reader"));
    }
    (done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64(), all)
}

/// A full scan: (rows, seconds).
fn scan(db: &Database, table: TableId) -> (u64, f64) {
    let started = Instant::now();
    let mut t = db.begin().expect("begin");
    let n = t.scan_table(table, |_| Ok(true)).expect("scan");
    t.commit().expect("commit");
    (n, started.elapsed().as_secs_f64())
}

fn line(side: &str, rep: u32, rate: f64, latency: &LatencyHistogram, scan: (u64, f64)) {
    println!(
        "{side:>6} rep {rep}: {rate:>10.0} reads/s  p50 {:>7.1} us  p99 {:>8.1} us  p99.9 {:>8.1} us  | scan {} rows in {:.2} s ({:.0} rows/s)",
        latency.quantile_us(0.5),
        latency.quantile_us(0.99),
        latency.quantile_us(0.999),
        scan.0,
        scan.1,
        scan.0 as f64 / scan.1
    );
}

fn main() -> Result<()> {
    let args = args()?;
    let temp = tempfile::tempdir_in(args.dir.clone().unwrap_or_else(std::env::temp_dir))?;
    let db = Database::open(&temp.path().join("db"), EngineConfig::default())?;
    // A budget far below the rows' size: every row not used lately moves.
    let config = CacheConfig {
        aging_interval: Duration::from_secs(3600),
        tier: Some(TierConfig {
            path: temp.path().join("flash.tier"),
            size: 4 << 30,
            region_size: 16 << 20,
            direct_io: DirectIo::Auto,
            mean_record_bytes: 256,
            admission: Admission::All,
        }),
        tier_mode: TierMode::WriteBack,
        local_tables_budget: Some(1 << 20),
        ..CacheConfig::default()
    };
    let cache = Cache::open(db.clone(), None, config)?;
    println!("tier I/O: {}", cache.tier_stats()[0].policy);
    let mut t = db.begin()?;
    let table = t.create_table(&TableDef::new(
        "acct",
        vec![
            ColumnDef::new("id", DataType::Int4),
            ColumnDef::new("owner", DataType::Int4),
            ColumnDef::new("balance", DataType::Int8).not_null(),
            ColumnDef::new("body", DataType::Text),
        ],
        &["id"],
    ))?;
    t.create_index(&IndexDef {
        name: "acct_owner".into(),
        table: "acct".into(),
        columns: vec!["owner".into()],
        unique: false,
        include: Vec::new(),
        options: Default::default(),
    })?;
    t.commit()?;
    for chunk in (0..args.rows).collect::<Vec<_>>().chunks(10_000) {
        let mut t = db.begin()?;
        for &id in chunk {
            t.insert(table, &row(id))?;
        }
        t.commit()?;
    }
    db.vacuum();
    let whole = db.table_memory(table);
    println!(
        "{} rows of {} bytes (image); in memory whole: {} bytes, {:.1} per row",
        args.rows,
        row_image_bytes(&db, table),
        whole,
        whole as f64 / f64::from(args.rows)
    );
    let mut memory_sides = Vec::new();
    for rep in 1..=args.repetitions {
        let (rate, latency) = point_reads(&db, table, args.rows, args.threads, args.seconds);
        let s = scan(&db, table);
        line("memory", rep, rate, &latency, s);
        memory_sides.push(rate);
    }
    // Aging: the reads stamped every row; two rounds later none is recent.
    let started = Instant::now();
    loop {
        cache.age_now()?;
        let mut stubs = 0u64;
        db.for_each_stub(table, |_, _| stubs += 1);
        if stubs == u64::try_from(args.rows)? || started.elapsed() > Duration::from_secs(600) {
            break;
        }
    }
    let local = cache.tier_stats().into_iter().find(|r| r.group.as_deref() == Some("(local tables)"));
    let stubbed = db.table_memory(table);
    let flash = cache.tier_stats()[0].clone();
    println!(
        "moved {} rows to flash in {:.1} s; in memory now: {} bytes, {:.1} per row; flash: {} records, {} live bytes, write amplification {:.2}",
        local.map_or(0, |l| l.demotions),
        started.elapsed().as_secs_f64(),
        stubbed,
        stubbed as f64 / f64::from(args.rows),
        flash.flash_records.unwrap_or(0),
        flash.flash_live_bytes.unwrap_or(0),
        flash.write_amplification.unwrap_or(0.0)
    );
    for rep in 1..=args.repetitions {
        let (rate, latency) = point_reads(&db, table, args.rows, args.threads, args.seconds);
        let s = scan(&db, table);
        line("flash", rep, rate, &latency, s);
        println!("        flash / memory reads: {:.3}", rate / memory_sides[(rep - 1) as usize]);
    }
    cache.shutdown();
    Ok(())
}

/// The stored size of one row (its image), for the header line.
fn row_image_bytes(db: &Database, table: TableId) -> usize {
    let mut t = db.begin().expect("begin");
    let mut n = 0;
    t.get_with(table, &[Value::Int4(0)], |r| n = r.bytes().len()).expect("read");
    t.commit().expect("commit");
    n
}
