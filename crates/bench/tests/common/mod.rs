//! Shared by the ignored measurements (`cache_groups.rs`, `write_through.rs`):
//! knobs from the environment, the machine and its load for the printout,
//! the private PostgreSQL with the benchmark settings and TATP populated
//! by the kit.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::targets::postgres::PgTarget;
use pgtier_bench::tatp::population::{PopulateOptions, populate};
use pgtier_cache::CacheConfig;
use pgtier_engine::CommitMode;

/// One population seed for PostgreSQL and any local engine: identical data.
pub const SEED: u64 = 14;

pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.replace('_', "").parse().unwrap_or_else(|e| panic!("{name}={v}: {e}")))
}

pub fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name).map_or(default, |v| v.parse().unwrap_or_else(|e| panic!("{name}={v}: {e}")))
}

/// `PGTIER_MEASURE_COMMIT`: the engine's commit mode (async by default, as `scripts/ab-tatp.sh`).
pub fn commit_mode() -> CommitMode {
    match std::env::var("PGTIER_MEASURE_COMMIT").as_deref() {
        Ok("async") | Err(_) => CommitMode::Async,
        Ok("sync") => CommitMode::Sync,
        Ok(other) => panic!("PGTIER_MEASURE_COMMIT={other}: sync or async"),
    }
}

/// The 1-minute load average (the machine is shared: printed with each figure).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "?".into(), |l| l.split_whitespace().next().unwrap_or("?").to_owned())
}

pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    format!("{cores} cores ({cpu})")
}

/// `PGTIER_MEASURE_OUT`, else the target's tmp dir: where CSVs and charts go.
pub fn out_dir() -> PathBuf {
    let dir =
        std::env::var("PGTIER_MEASURE_OUT").map_or_else(|_| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A private PostgreSQL with `options` and TATP populated by the kit
/// (`subscribers`, [`SEED`]) in database `tatp`. Returns the cluster (stops
/// on drop) and the URL.
pub fn tatp_postgres(options: ClusterOptions, subscribers: u64) -> (PrivateCluster, String) {
    let cluster = PrivateCluster::start(options).unwrap();
    let url = cluster.create_database("tatp").unwrap();
    populate_postgres(&url, subscribers);
    (cluster, url)
}

/// [`tatp_postgres`] with the benchmark settings.
pub fn benchmark_postgres(subscribers: u64) -> (PrivateCluster, String) {
    tatp_postgres(ClusterOptions::for_benchmark(), subscribers)
}

pub fn populate_postgres(url: &str, subscribers: u64) {
    let started = Instant::now();
    let report = populate(
        &PgTarget::open(url).unwrap(),
        &PopulateOptions { subscribers, streams: 2, seed: SEED, progress: false },
    )
    .unwrap();
    let rows: u64 = report.tables.iter().map(|t| t.rows).sum();
    println!(
        "PostgreSQL: {subscribers} subscribers, {rows} rows populated in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// `config` with a write-through node name of its own: the tests of one
/// binary share a PostgreSQL, whose replication origins (named after the
/// node) are the whole cluster's, and a node name belongs to one data
/// directory (every cache a test opens here has a fresh one).
pub fn own_node(mut config: CacheConfig) -> CacheConfig {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    config.awt.node = format!("bench{}n{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    config
}
