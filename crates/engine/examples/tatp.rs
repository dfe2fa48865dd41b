//! TATP in the engine: memory per row at N subscribers, and recovery time.
//!
//! `cargo run --release -p pgtier-engine --example tatp -- memory [subscribers] [dir]`
//!   creates the four TATP tables (spec population rules, the bench crate's
//!   PostgreSQL types), loads them, prints rows, bytes and bytes/row per table
//!   and the process RSS.
//! `cargo run --release -p pgtier-engine --example tatp -- recovery [subscribers] [seconds] [dir]`
//!   loads, checkpoints, runs `seconds` of TATP update transactions (async
//!   commits, 2 threads), closes without a checkpoint, and times `open`.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pgtier_engine::{ColumnDef, CommitMode, DataType, Database, EngineConfig, ForeignKeyDef, TableDef, TableId, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

struct Tables {
    subscriber: TableId,
    access_info: TableId,
    special_facility: TableId,
    call_forwarding: TableId,
}

fn fk(cols: &[&str], parent: &str) -> ForeignKeyDef {
    ForeignKeyDef {
        name: None,
        columns: cols.iter().map(|c| (*c).to_owned()).collect(),
        parent_table: parent.into(),
        parent_columns: vec![],
        on_delete: Default::default(),
        timing: Default::default(),
    }
}

fn create(db: &Database) -> Tables {
    let mut t = db.begin().unwrap();
    let mut cols = vec![
        ColumnDef::new("s_id", DataType::Int4).not_null(),
        ColumnDef::new("sub_nbr", DataType::Varchar(15)).not_null(),
    ];
    for prefix in ["bit", "hex", "byte2"] {
        for i in 1..=10 {
            cols.push(ColumnDef::new(format!("{prefix}_{i}"), DataType::Int2));
        }
    }
    cols.push(ColumnDef::new("msc_location", DataType::Int8));
    cols.push(ColumnDef::new("vlr_location", DataType::Int8));
    let mut sub = TableDef::new("subscriber", cols, &["s_id"]);
    sub.unique.push((Some("subscriber_sub_nbr_key".into()), vec!["sub_nbr".into()]));
    // Point lookups only on subscriber's key: hash index alone (PostgreSQL
    // keeps a btree for it; see the report for both variants).
    sub.primary_key_ordered = std::env::var("TATP_SUBSCRIBER_ORDERED_PK").is_ok();
    let subscriber = t.create_table(&sub).unwrap();
    let mut ai = TableDef::new(
        "access_info",
        vec![
            ColumnDef::new("s_id", DataType::Int4).not_null(),
            ColumnDef::new("ai_type", DataType::Int2).not_null(),
            ColumnDef::new("data1", DataType::Int2),
            ColumnDef::new("data2", DataType::Int2),
            ColumnDef::new("data3", DataType::Char(3)),
            ColumnDef::new("data4", DataType::Char(5)),
        ],
        &["s_id", "ai_type"],
    );
    ai.foreign_keys.push(fk(&["s_id"], "subscriber"));
    let access_info = t.create_table(&ai).unwrap();
    let mut sf = TableDef::new(
        "special_facility",
        vec![
            ColumnDef::new("s_id", DataType::Int4).not_null(),
            ColumnDef::new("sf_type", DataType::Int2).not_null(),
            ColumnDef::new("is_active", DataType::Int2).not_null(),
            ColumnDef::new("error_cntrl", DataType::Int2),
            ColumnDef::new("data_a", DataType::Int2),
            ColumnDef::new("data_b", DataType::Char(5)),
        ],
        &["s_id", "sf_type"],
    );
    sf.foreign_keys.push(fk(&["s_id"], "subscriber"));
    let special_facility = t.create_table(&sf).unwrap();
    let mut cf = TableDef::new(
        "call_forwarding",
        vec![
            ColumnDef::new("s_id", DataType::Int4).not_null(),
            ColumnDef::new("sf_type", DataType::Int2).not_null(),
            ColumnDef::new("start_time", DataType::Int2).not_null(),
            ColumnDef::new("end_time", DataType::Int2),
            ColumnDef::new("numberx", DataType::Varchar(15)),
        ],
        &["s_id", "sf_type", "start_time"],
    );
    cf.foreign_keys.push(fk(&["s_id", "sf_type"], "special_facility"));
    let call_forwarding = t.create_table(&cf).unwrap();
    t.commit().unwrap();
    Tables { subscriber, access_info, special_facility, call_forwarding }
}

fn letters(rng: &mut SmallRng, n: usize) -> String {
    (0..n).map(|_| char::from(b'A' + rng.random_range(0..26u8))).collect()
}

fn digits(rng: &mut SmallRng, n: usize) -> String {
    (0..n).map(|_| char::from(b'0' + rng.random_range(0..10u8))).collect()
}

/// Distinct random values from `pool`, between 1 and `pool.len()` of them.
fn pick(rng: &mut SmallRng, pool: &[i16], min: usize) -> Vec<i16> {
    let n = rng.random_range(min..=pool.len());
    let mut v = pool.to_vec();
    for i in 0..n {
        let j = rng.random_range(i..v.len());
        v.swap(i, j);
    }
    v.truncate(n);
    v
}

fn load(db: &Database, t: &Tables, subscribers: i32) -> u64 {
    let mut rng = SmallRng::seed_from_u64(42);
    let mut rows = 0u64;
    let batch = 1000;
    for start in (1..=subscribers).step_by(batch) {
        let mut tx = db.begin_with(CommitMode::Async).unwrap();
        for s_id in start..(start + batch as i32).min(subscribers + 1) {
            let mut row = vec![Value::Int4(s_id), Value::Text(format!("{s_id:015}"))];
            row.extend((0..10).map(|_| Value::Int2(rng.random_range(0..2))));
            row.extend((0..10).map(|_| Value::Int2(rng.random_range(0..16))));
            row.extend((0..10).map(|_| Value::Int2(rng.random_range(0..256))));
            row.push(Value::Int8(rng.random_range(1..u32::MAX as i64)));
            row.push(Value::Int8(rng.random_range(1..u32::MAX as i64)));
            tx.insert(t.subscriber, &row).unwrap();
            rows += 1;
            for ai_type in pick(&mut rng, &[1, 2, 3, 4], 1) {
                let (d3, d4) = (letters(&mut rng, 3), letters(&mut rng, 5));
                tx.insert(
                    t.access_info,
                    &[
                        Value::Int4(s_id),
                        Value::Int2(ai_type),
                        Value::Int2(rng.random_range(0..256)),
                        Value::Int2(rng.random_range(0..256)),
                        Value::Text(d3),
                        Value::Text(d4),
                    ],
                )
                .unwrap();
                rows += 1;
            }
            for sf_type in pick(&mut rng, &[1, 2, 3, 4], 1) {
                let active = i16::from(rng.random_range(0..100) < 85);
                let data_b = letters(&mut rng, 5);
                tx.insert(
                    t.special_facility,
                    &[
                        Value::Int4(s_id),
                        Value::Int2(sf_type),
                        Value::Int2(active),
                        Value::Int2(rng.random_range(0..256)),
                        Value::Int2(rng.random_range(0..256)),
                        Value::Text(data_b),
                    ],
                )
                .unwrap();
                rows += 1;
                for start_time in pick(&mut rng, &[0, 8, 16], 0) {
                    let end = start_time + rng.random_range(1..=8);
                    let numberx = digits(&mut rng, 15);
                    tx.insert(
                        t.call_forwarding,
                        &[
                            Value::Int4(s_id),
                            Value::Int2(sf_type),
                            Value::Int2(start_time),
                            Value::Int2(end),
                            Value::Text(numberx),
                        ],
                    )
                    .unwrap();
                    rows += 1;
                }
            }
        }
        tx.commit().unwrap();
    }
    rows
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn config() -> EngineConfig {
    EngineConfig {
        checkpoint_interval: None,
        checkpoint_wal_bytes: u64::MAX,
        checkpoint_on_close: false,
        ..EngineConfig::default()
    }
}

fn report_memory(db: &Database) {
    let stats = db.stats();
    let mut total = 0;
    println!(
        "{:<18} {:>10} {:>12} {:>12} {:>12} {:>9} {:>9}",
        "table", "rows", "row_bytes", "used_bytes", "index_bytes", "B/row", "used/row"
    );
    for t in &stats.tables {
        let all = t.row_bytes + t.index_bytes;
        total += all;
        println!(
            "{:<18} {:>10} {:>12} {:>12} {:>12} {:>9.1} {:>9.1}",
            t.name,
            t.rows,
            t.row_bytes,
            t.row_bytes_used,
            t.index_bytes,
            all as f64 / t.rows.max(1) as f64,
            (t.row_bytes_used + t.index_bytes) as f64 / t.rows.max(1) as f64
        );
    }
    println!(
        "accounted total: {:.1} MiB; process RSS: {:.1} MiB",
        total as f64 / 1048576.0,
        rss_bytes() as f64 / 1048576.0
    );
}

fn update_load(db: &Database, t: &Tables, subscribers: i32, seconds: u64, threads: usize) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|n| {
            let (db, stop, done) = (db.clone(), stop.clone(), done.clone());
            let (sub, sf) = (t.subscriber, t.special_facility);
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(n as u64 + 7);
                while !stop.load(Ordering::Relaxed) {
                    let s_id = rng.random_range(1..=subscribers);
                    let mut tx = db.begin_with(CommitMode::Async).unwrap();
                    let r = if rng.random_range(0..2) == 0 {
                        // UPDATE_SUBSCRIBER_DATA: subscriber.bit_1 and special_facility.data_a.
                        tx.update(sub, &[Value::Int4(s_id)], &[(2, Value::Int2(rng.random_range(0..2)))]).and_then(
                            |_| {
                                tx.update(
                                    sf,
                                    &[Value::Int4(s_id), Value::Int2(rng.random_range(1..=4))],
                                    &[(4, Value::Int2(rng.random_range(0..256)))],
                                )
                            },
                        )
                    } else {
                        // UPDATE_LOCATION.
                        tx.update(sub, &[Value::Int4(s_id)], &[(33, Value::Int8(rng.random_range(1..u32::MAX as i64)))])
                    };
                    if r.is_ok() {
                        tx.commit().unwrap();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    done.load(Ordering::Relaxed)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map_or("memory", String::as_str);
    let subscribers: i32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let tmp = tempfile::tempdir().unwrap();
    match what {
        "memory" => {
            let dir = args.get(3).map_or_else(|| tmp.path().to_path_buf(), std::path::PathBuf::from);
            let db = Database::open(&dir, config()).unwrap();
            let t = create(&db);
            let started = Instant::now();
            let rows = load(&db, &t, subscribers);
            println!("loaded {rows} rows for {subscribers} subscribers in {:.1} s", started.elapsed().as_secs_f64());
            db.vacuum();
            if std::env::var("TATP_DEBUG").is_ok() {
                debug_indexes(&db);
            }
            report_memory(&db);
        }
        "recovery" => {
            let seconds: u64 = args.get(3).map_or(60, |s| s.parse().unwrap());
            let dir = args.get(4).map_or_else(|| tmp.path().to_path_buf(), std::path::PathBuf::from);
            run_recovery(&dir, subscribers, seconds);
        }
        "open" => {
            let dir = std::path::PathBuf::from(args.get(2).unwrap());
            let started = Instant::now();
            let db = Database::open(&dir, config()).unwrap();
            println!("open took {:.2} s: {:?}", started.elapsed().as_secs_f64(), db.recovery_report());
            std::mem::forget(db); // keep the directory as it is (no close work)
        }
        other => panic!("unknown mode {other}: memory | recovery | open"),
    }
}

fn run_recovery(dir: &Path, subscribers: i32, seconds: u64) {
    let db = Database::open(dir, config()).unwrap();
    let t = create(&db);
    let started = Instant::now();
    let rows = load(&db, &t, subscribers);
    println!("loaded {rows} rows in {:.1} s", started.elapsed().as_secs_f64());
    let ck = db.checkpoint().unwrap();
    println!(
        "checkpoint: {} rows, {:.1} MiB, {:.2} s",
        ck.rows,
        ck.bytes as f64 / 1048576.0,
        ck.duration.as_secs_f64()
    );
    let wal_before = db.stats().wal_end;
    let txns = update_load(&db, &t, subscribers, seconds, 2);
    let wal_after = db.stats().wal_end;
    println!(
        "{seconds} s of TATP updates: {txns} transactions ({:.0}/s), {:.1} MiB of WAL after the checkpoint",
        txns as f64 / seconds as f64,
        (wal_after.0 - wal_before.0) as f64 / 1048576.0
    );
    db.close().unwrap();
    let started = Instant::now();
    let db = Database::open(dir, config()).unwrap();
    let open_s = started.elapsed().as_secs_f64();
    let r = db.recovery_report();
    println!(
        "recovery: open took {open_s:.2} s (checkpoint load {:.2} s, {} rows; WAL replay {:.2} s, {} records / {} ops; index build {:.2} s)",
        r.load_duration.as_secs_f64(),
        r.checkpoint_rows,
        r.replay_duration.as_secs_f64(),
        r.wal_records_replayed,
        r.wal_ops_replayed,
        r.index_build_duration.as_secs_f64()
    );
    report_memory(&db);
}

#[allow(dead_code)]
fn debug_indexes(db: &Database) {
    for t in db.catalog().tables() {
        for i in db.catalog().indexes_of(t.id) {
            println!(
                "{} {} cols={:?} unique={} primary={} ordered={}",
                t.name, i.name, i.columns, i.unique, i.primary, i.ordered
            );
        }
    }
}
