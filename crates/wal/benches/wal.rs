//! WAL throughput and latency. A plain main that prints numbers (it measures
//! fdatasync-bound group commit, which per-iteration harnesses distort).
//!
//!   cargo bench -p pgtier-wal --bench wal
//!
//! Env: PGTIER_WAL_BENCH_DIR (default: a temp dir under /var/tmp, i.e. the
//! real disk, not tmpfs), PGTIER_WAL_BENCH_SECS (default 3 per case),
//! PGTIER_WAL_BENCH_RECORD_BYTES (default 150, a TATP-update-sized record),
//! PGTIER_WAL_BENCH_ONLY (comma list of cases: a,b1,b8,b64,c1,c8),
//! PGTIER_WAL_BENCH_CHECKPOINT=1 (a thread truncates all but the last two
//! segments every 250 ms, like checkpoints, so new segments are recycled
//! spares instead of zero fills).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pgtier_wal::{Wal, WalConfig, WalStats};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn bench_dir() -> tempfile::TempDir {
    let base = std::env::var("PGTIER_WAL_BENCH_DIR").unwrap_or_else(|_| "/var/tmp".into());
    tempfile::tempdir_in(base).unwrap()
}

/// Opens a log and waits until the background preallocator has created the
/// next segment, so its 64 MiB of zero writes do not land inside the
/// measurement.
fn open_quiet(dir: &std::path::Path) -> Wal {
    let wal = Wal::open(dir, WalConfig::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while wal.stats().segments_created < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    wal
}

/// (CPU µs, voluntary + involuntary context switches) of this process so
/// far. CPU per commit is a steadier efficiency measure than commits/s on a
/// shared 2-core machine.
fn rusage() -> (f64, u64) {
    // SAFETY: getrusage only writes the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    (us(ru.ru_utime) + us(ru.ru_stime), (ru.ru_nvcsw + ru.ru_nivcsw) as u64)
}

fn pct(sorted_ns: &[u64], q: f64) -> f64 {
    let i = ((sorted_ns.len() as f64 - 1.0) * q).round() as usize;
    sorted_ns[i] as f64 / 1000.0
}

fn single_committer_latency(secs: u64, record_bytes: usize) {
    let dir = bench_dir();
    let wal = open_quiet(dir.path());
    let payload = vec![0x5a_u8; record_bytes];
    let mut lat_ns = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        let t = Instant::now();
        let lsn = wal.append(&payload).unwrap();
        wal.wait_durable(lsn).unwrap();
        lat_ns.push(t.elapsed().as_nanos() as u64);
    }
    lat_ns.sort_unstable();
    let s = wal.stats();
    println!(
        "(a) 1 committer sync latency: n={} p50={:.1}us p99={:.1}us p99.9={:.1}us max={:.1}us  segment_waits={}",
        lat_ns.len(),
        pct(&lat_ns, 0.50),
        pct(&lat_ns, 0.99),
        pct(&lat_ns, 0.999),
        pct(&lat_ns, 1.0),
        s.segment_waits
    );
}

/// `committers` threads each append + wait_durable in a loop (sync) or only
/// append (async) for `secs`; returns (records/s, stats delta).
fn run(committers: usize, sync: bool, secs: u64, record_bytes: usize) -> (f64, WalStats, Vec<u64>, (f64, f64)) {
    let dir = bench_dir();
    let wal = Arc::new(open_quiet(dir.path()));
    let (cpu0_us, csw0) = rusage();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let handles: Vec<_> = (0..committers)
        .map(|t| {
            let wal = Arc::clone(&wal);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let payload = vec![t as u8; record_bytes];
                let mut lat_ns = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    let lsn = wal.append(&payload).unwrap();
                    if sync {
                        wal.wait_durable(lsn).unwrap();
                        lat_ns.push(t0.elapsed().as_nanos() as u64);
                    }
                }
                lat_ns
            })
        })
        .collect();
    let checkpointer = std::env::var("PGTIER_WAL_BENCH_CHECKPOINT").is_ok_and(|v| v == "1").then(|| {
        let wal = Arc::clone(&wal);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let keep_bytes = 2 * WalConfig::default().segment_bytes;
                wal.truncate_before(pgtier_wal::Lsn(wal.durable_end().0.saturating_sub(keep_bytes))).unwrap();
            }
        })
    });
    if std::env::var("PGTIER_WAL_BENCH_TIMELINE").is_ok() {
        // Per-interval rate and segment creations: shows whether background
        // preallocation of the next segment dents commit throughput.
        let mut last = wal.stats();
        let tick = Duration::from_millis(250);
        for _ in 0..(secs * 4) {
            std::thread::sleep(tick);
            let now = wal.stats();
            println!(
                "    t={:>5.2}s {:>8.0}/s segments_created={} flushes/s={:.0}",
                start.elapsed().as_secs_f64(),
                (now.records_appended - last.records_appended) as f64 / tick.as_secs_f64(),
                now.segments_created,
                (now.flushes - last.flushes) as f64 / tick.as_secs_f64(),
            );
            last = now;
        }
    } else {
        std::thread::sleep(Duration::from_secs(secs));
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(c) = checkpointer {
        c.join().unwrap();
    }
    let mut lat_ns: Vec<u64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let elapsed = start.elapsed().as_secs_f64();
    let stats = wal.stats();
    let (cpu1_us, csw1) = rusage();
    let n = stats.records_appended.max(1) as f64;
    lat_ns.sort_unstable();
    (stats.records_appended as f64 / elapsed, stats, lat_ns, ((cpu1_us - cpu0_us) / n, (csw1 - csw0) as f64 / n))
}

fn selected(case: &str) -> bool {
    std::env::var("PGTIER_WAL_BENCH_ONLY").map_or(true, |only| only.split(',').any(|c| c.trim() == case))
}

fn main() {
    // `cargo bench` passes --bench; ignore arguments.
    let secs = env_u64("PGTIER_WAL_BENCH_SECS", 3);
    let record_bytes = env_u64("PGTIER_WAL_BENCH_RECORD_BYTES", 150) as usize;
    println!("pgtier-wal bench: {secs}s per case, {record_bytes}-byte records, 64 MiB segments");
    if selected("a") {
        single_committer_latency(secs, record_bytes);
    }
    for n in [1usize, 8, 64] {
        if !selected(&format!("b{n}")) {
            continue;
        }
        let (rate, s, lat, (cpu_us, csw)) = run(n, true, secs, record_bytes);
        println!(
            "(b) sync  {n:>2} committers: {rate:>9.0} commits/s  commits/flush={:>6.1}  commits/fsync={:>6.1}  \
             p50={:.0}us p99={:.0}us  cpu/commit={cpu_us:.1}us ctxsw/commit={csw:.1}  segments={} segment_waits={}",
            s.records_appended as f64 / s.flushes.max(1) as f64,
            s.records_appended as f64 / s.fsyncs.max(1) as f64,
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            s.segments_created,
            s.segment_waits
        );
    }
    for n in [1usize, 8] {
        if !selected(&format!("c{n}")) {
            continue;
        }
        let (rate, s, _, _) = run(n, false, secs, record_bytes);
        println!(
            "(c) async {n:>2} appenders:  {rate:>9.0} appends/s  ({:.0} MB/s)  flushes={} backpressure_waits={} \
             segments={} recycled={} segment_waits={}",
            rate * (s.bytes_appended as f64 / s.records_appended.max(1) as f64) / 1e6,
            s.flushes,
            s.backpressure_waits,
            s.segments_created,
            s.segments_recycled,
            s.segment_waits
        );
    }
}
