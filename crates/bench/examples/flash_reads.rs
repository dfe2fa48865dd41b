//! Flash-hit point reads against fio's 4 KB random read on the same device
//! (issue 32's figure: p50, p99, p99.9 at 10k, 50k and the maximum
//! sustainable reads/s; goal: p50 within 20 µs of fio's, max rate at least
//! 80% of fio's IOPS per record fetched).
//!
//! The record is a TATP subscriber instance: the `tatp` DYNAMIC group
//! (`tatp_group`: subscriber, access_info, special_facility,
//! call_forwarding), `Aging::Lru`, over the TATP population in PostgreSQL.
//! The cache runs in direct mode (the embedded engine in this process, as
//! `flash_tatp`), with a memory budget of `--budget-fraction` (1%) of what
//! every instance takes and the flash tier with `Admission::All`.
//! `--prepare touch` (the default) reads every key once through 4 sessions
//! (each a miss loaded from PostgreSQL) while aging demotes to flash;
//! `--prepare load` LOADs every instance, then ages down to the budget
//! (much slower here, and it leaves the engine's tables sized for the whole
//! population, which every later aging round then sweeps: aging falls
//! behind the promotions and the share of flash hits decays run after run).
//! Either way the run checks that flash holds at least 95% of the
//! instances before measuring.
//!
//! A read is GET_SUBSCRIBER_DATA of a uniformly random s_id through the
//! same session path TATP uses: a miss in memory that finds the instance on
//! flash is answered from the record, which stays there (a second read of
//! it soon after would promote it, as in production; uniform keys over a
//! large population rarely do).
//! For each Q (workers, one session each) it runs
//!   - open loop at each `--rates` (total reads/s, fixed spacing, worker w
//!     of Q issuing every Q/rate s), latency from each read's *intended*
//!     start, so queueing behind a slow read counts;
//!   - closed loop (`max`): each worker back to back;
//!
//! and fio right after each, on a file next to the tier file:
//! `--rw=randread --bs=4096 --direct=1 --ioengine=psync --numjobs=Q`
//! (`pgtier bench io`'s job), `--rate_iops=rate/Q` per job for the open
//! loop points. fio's latency is its completion latency per I/O (from its
//! submission; fio does not count its own schedule lag).
//!
//! Per read the run also counts, from deltas over the run: flash hits and
//! PostgreSQL loads (the cache's tier stats), read syscalls and bytes read
//! by this process (`/proc/self/io`: O_DIRECT reads count there) and the
//! device's completed reads (`/proc/diskstats`, shared with everything else
//! on the machine).
//!
//! PostgreSQL must hold the TATP population first:
//!   pgtier backend start
//!   pgtier bench tatp --populate --populate-only --subscribers 1000000
//! then (release build):
//!   cargo run --release -p pgtier-bench --example flash_reads -- \
//!     --url "$(pgtier backend url)" --subscribers 1000000 --seconds 10 --repetitions 3
#![allow(clippy::print_stdout)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pgtier_bench::io::fio::{self, FioFigures, FioStatus};
use pgtier_bench::io::spec::{FioUse, IoPlan, Mode, Point};
use pgtier_bench::stats::LatencyHistogram;
use pgtier_bench::target::{Target, Value};
use pgtier_bench::targets::cached::{cache_call, drop_node_origins, load_when_ready, open_cache, tatp_group};
use pgtier_bench::tatp::random::SubscriberKeys;
use pgtier_bench::tatp::transactions::GET_SUBSCRIBER_DATA;
use pgtier_cache::{Admission, Aging, Cache, CacheConfig, DirectIo, TierConfig, TierInfo};
use pgtier_engine::CommitMode;
use rand::SeedableRng;
use rand::rngs::SmallRng;

/// Errors of every kind, reported as their text.
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

struct Args {
    url: String,
    subscribers: u64,
    budget_fraction: f64,
    seconds: u64,
    warmup: u64,
    queues: Vec<u32>,
    rates: Vec<u64>,
    repetitions: u32,
    work_dir: PathBuf,
    aging_ms: u64,
    /// `load`: LOAD every instance, then age down to the budget; `touch`:
    /// read every key once (each a load from PostgreSQL) with the small
    /// budget from the start.
    prepare: String,
    fio: bool,
    fio_size: Option<u64>,
}

fn list<T: std::str::FromStr>(value: &str) -> Result<Vec<T>>
where
    T::Err: std::error::Error + 'static,
{
    value.split(',').map(|v| v.trim().parse::<T>().map_err(|e| format!("{v}: {e}").into())).collect()
}

fn args() -> Result<Args> {
    let mut out = Args {
        url: String::new(),
        subscribers: 1_000_000,
        budget_fraction: 0.01,
        seconds: 10,
        warmup: 2,
        queues: vec![1, 2, 4],
        rates: vec![10_000, 50_000],
        repetitions: 3,
        work_dir: std::env::temp_dir().join("pgtier-flash-reads"),
        aging_ms: 1000,
        prepare: "touch".into(),
        fio: true,
        fio_size: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url" => out.url = value,
            "--subscribers" => out.subscribers = value.parse()?,
            "--budget-fraction" => out.budget_fraction = value.parse()?,
            "--seconds" => out.seconds = value.parse()?,
            "--warmup" => out.warmup = value.parse()?,
            "--queues" => out.queues = list(&value)?,
            "--rates" => out.rates = list(&value)?,
            "--repetitions" => out.repetitions = value.parse()?,
            "--work-dir" => out.work_dir = value.into(),
            "--aging-ms" => out.aging_ms = value.parse()?,
            "--fio" => out.fio = value.parse()?,
            "--prepare" if value == "load" || value == "touch" => out.prepare = value,
            "--fio-size-mb" => out.fio_size = Some(value.parse::<u64>()? << 20),
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    if out.url.is_empty() {
        return Err("--url (PostgreSQL holding the TATP population) is required".into());
    }
    if out.queues.contains(&0) || out.rates.contains(&0) {
        return Err("--queues and --rates take positive numbers".into());
    }
    Ok(out)
}

/// The node name of the probe and of the measured cache.
const NODE: &str = "flashreads";

fn node() -> String {
    format!("fr{}", std::process::id() % 100_000)
}

fn main() -> Result<()> {
    let args = args()?;
    let _ = std::fs::remove_dir_all(&args.work_dir);
    std::fs::create_dir_all(&args.work_dir)?;
    // Memory one instance takes, measured: a scratch cache loads 2,000.
    let per_instance = {
        let dir = args.work_dir.join("probe");
        let mut config = CacheConfig { takeover: true, ..CacheConfig::default() };
        config.awt.node = NODE.into();
        let (cache, _target) = open_cache(&dir, CommitMode::Sync, &args.url, config)?;
        let mut group = tatp_group("probe", false, Aging::Off);
        group.root_predicate = Some("s_id <= 2000".into());
        cache_call(cache.create_group(&group))?;
        load_when_ready(&cache, "probe", &pgtier_cache::LoadOptions::default())?;
        cache.stats()[0].memory_bytes / 2000
    };
    let _ = std::fs::remove_dir_all(args.work_dir.join("probe"));
    let all = per_instance * args.subscribers;
    let budget = (all as f64 * args.budget_fraction) as u64;
    let dir = args.work_dir.join("cache");
    std::fs::create_dir_all(&dir)?;
    let tier = TierConfig {
        path: dir.join("flash.tier"),
        size: (all * 2).max(256 << 20),
        region_size: 16 << 20,
        direct_io: DirectIo::Auto,
        mean_record_bytes: 512,
        admission: Admission::All,
    };
    println!(
        "instance {per_instance} B in memory; all {} MB; budget {} MB ({}%); tier file {} ({} MB)",
        all >> 20,
        budget >> 20,
        args.budget_fraction * 100.0,
        tier.path.display(),
        tier.size >> 20
    );
    let tier_size = tier.size;
    let mut config = CacheConfig {
        memory_budget: Some(budget),
        aging_interval: Duration::from_millis(args.aging_ms),
        tier: Some(tier),
        ..CacheConfig::default()
    };
    config.awt.node = node();
    let (cache, target) = open_cache(&dir.join("db"), CommitMode::Async, &args.url, config)?;
    let started = Instant::now();
    if args.prepare == "load" {
        prepare(&cache, budget, args.subscribers)?;
    } else {
        touch_all(&cache, &target, budget, args.subscribers)?;
    }
    let store = cache.tier_stats()[0].clone();
    let on_flash = store.flash_records.unwrap_or(0);
    println!(
        "prepared in {:.0} s: {} instances in memory ({} MB), {on_flash} records on flash ({:.1}% of {}), \
         {} MB live on flash (mean record {} B), I/O: {}, state {}",
        started.elapsed().as_secs_f64(),
        store.memory_instances,
        store.memory_bytes >> 20,
        on_flash as f64 * 100.0 / args.subscribers as f64,
        args.subscribers,
        store.flash_live_bytes.unwrap_or(0) >> 20,
        mean_record(&store),
        store.policy,
        store.state
    );
    if (on_flash as f64) < 0.95 * args.subscribers as f64 {
        return Err(
            format!("flash holds {on_flash} of {} instances, under 95%: not measuring", args.subscribers).into()
        );
    }
    let record = mean_record(&store);
    println!(
        "mean record on flash {record} B: expected 4 KiB blocks per record read ≈ {:.3} (1 + (size - 8) / 4096)",
        1.0 + (record as f64 - 8.0) / 4096.0
    );

    let fio = if args.fio { prepare_fio(&args, tier_size)? } else { None };
    let mut rows = Vec::new();
    for repetition in 1..=args.repetitions {
        for &q in &args.queues {
            let loads: Vec<Option<u64>> = args.rates.iter().copied().map(Some).chain([None]).collect();
            for rate in loads {
                let seed = u64::from(repetition) * 1000 + u64::from(q) * 10 + rate.map_or(0, |r| r / 10_000);
                let pg = run_pgtier(&args, &cache, &target, q, rate, seed)?;
                let fio_figures = fio.as_ref().map(|(fio, plan, io_target)| run_fio(fio, plan, io_target, q, rate));
                let row = Row { repetition, q, rate, pg, fio: fio_figures };
                row.print();
                rows.push(row);
            }
        }
    }
    summary(&args, &rows, record);
    let store = cache.tier_stats()[0].clone();
    println!(
        "tier at the end: {} records, {} MB live, I/O {}, device read p50 {:?} µs p99 {:?} µs (log2 buckets, since open), \
         write amplification {:?}, rejections {}, state {}",
        store.flash_records.unwrap_or(0),
        store.flash_live_bytes.unwrap_or(0) >> 20,
        store.policy,
        store.read_p50_us,
        store.read_p99_us,
        store.write_amplification.map(|v| (v * 100.0).round() / 100.0),
        store.rejections,
        store.state
    );
    drop(target);
    drop(cache);
    std::thread::sleep(Duration::from_secs(2));
    // Write-through may still hold them a while after the cache is dropped:
    // say so rather than fail a finished run.
    for node in [node(), NODE.to_owned()] {
        if let Err(error) = drop_node_origins(&args.url, &node) {
            println!("note: {error}; drop them later with pg_replication_origin_drop");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn mean_record(store: &TierInfo) -> u64 {
    store.flash_live_bytes.unwrap_or(0) / store.flash_records.unwrap_or(0).max(1)
}

/// The group, every instance loaded, aging down to the budget (to flash).
fn prepare(cache: &Cache, budget: u64, subscribers: u64) -> Result<()> {
    let group = tatp_group("tatp", true, Aging::Lru);
    cache_call(cache.create_group(&group))?;
    let options = pgtier_cache::LoadOptions {
        parallel: 2,
        predicate: Some(format!("s_id <= {subscribers}")),
        ..Default::default()
    };
    load_when_ready(cache, "tatp", &options)?;
    for _ in 0..600 {
        if cache.stats()[0].memory_bytes <= budget {
            break;
        }
        cache_call(cache.age_now())?;
    }
    Ok(())
}

/// The group, and every key read once by 4 sessions (each a miss loaded
/// from PostgreSQL; aging demotes to flash meanwhile), then aging down to
/// the budget. Memory never holds much more than the budget, so the
/// engine's tables never grow to the whole population.
fn touch_all(cache: &Cache, target: &dyn Target, budget: u64, subscribers: u64) -> Result<()> {
    let group = tatp_group("tatp", true, Aging::Lru);
    cache_call(cache.create_group(&group))?;
    let workers = 4u64;
    let started = Instant::now();
    let results: Vec<std::result::Result<u64, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                scope.spawn(move || -> std::result::Result<u64, String> {
                    let mut session = target.connect().map_err(|e| e.to_string())?;
                    let statement = session.prepare(GET_SUBSCRIBER_DATA).map_err(|e| e.to_string())?;
                    let mut out = Vec::new();
                    let mut found = 0;
                    let mut key = 1 + w;
                    while key <= subscribers {
                        found += session
                            .query(statement, &[Value::Int(key as i64)], &mut out)
                            .map_err(|e| e.to_string())? as u64;
                        if w == 0 && key % 100_000 < workers {
                            println!("  touched {key} of {subscribers} in {:.0} s", started.elapsed().as_secs_f64());
                        }
                        key += workers;
                    }
                    Ok(found)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".to_owned()))).collect()
    });
    let mut found = 0;
    for result in results {
        found += result?;
    }
    println!("touched every key once in {:.0} s: {found} found", started.elapsed().as_secs_f64());
    for _ in 0..600 {
        if cache.stats()[0].memory_bytes <= budget {
            break;
        }
        cache_call(cache.age_now())?;
    }
    Ok(())
}

/// Counters of this process and the device, read before and after a run.
#[derive(Clone, Copy, Debug, Default)]
struct IoCounters {
    /// `/proc/self/io`: read syscalls, bytes the block layer read for us.
    syscr: u64,
    read_bytes: u64,
    /// `/proc/diskstats` of the device under the work directory: reads completed, sectors read.
    disk_reads: u64,
    disk_sectors: u64,
    flash_hits: u64,
    backend_loads: u64,
}

impl IoCounters {
    fn now(cache: &Cache, device: Option<(u64, u64)>) -> IoCounters {
        let mut out = IoCounters::default();
        if let Ok(text) = std::fs::read_to_string("/proc/self/io") {
            for line in text.lines() {
                let mut parts = line.split(':');
                let (Some(key), Some(value)) = (parts.next(), parts.next()) else { continue };
                let value = value.trim().parse().unwrap_or(0);
                match key {
                    "syscr" => out.syscr = value,
                    "read_bytes" => out.read_bytes = value,
                    _ => {}
                }
            }
        }
        if let (Some((major, minor)), Ok(text)) = (device, std::fs::read_to_string("/proc/diskstats")) {
            for line in text.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() > 6 && f[0].parse() == Ok(major) && f[1].parse() == Ok(minor) {
                    out.disk_reads = f[3].parse().unwrap_or(0);
                    out.disk_sectors = f[5].parse().unwrap_or(0);
                }
            }
        }
        let store = &cache.tier_stats()[0];
        out.flash_hits = store.flash_hits;
        out.backend_loads = store.backend_loads;
        out
    }

    fn minus(self, before: IoCounters) -> IoCounters {
        IoCounters {
            syscr: self.syscr.saturating_sub(before.syscr),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            disk_reads: self.disk_reads.saturating_sub(before.disk_reads),
            disk_sectors: self.disk_sectors.saturating_sub(before.disk_sectors),
            flash_hits: self.flash_hits.saturating_sub(before.flash_hits),
            backend_loads: self.backend_loads.saturating_sub(before.backend_loads),
        }
    }
}

/// The device (major, minor) holding `path`, as /proc/diskstats names it.
fn device_of(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    Some((major, minor))
}

/// One pgtier point: every worker's reads merged.
struct PgRun {
    /// Reads with an intended start inside the measure window, completed.
    measured: u64,
    /// Reads per second over the window (to the last one's completion).
    achieved: f64,
    /// Reads completed per second over the whole run, warm-up included: an
    /// overloaded open loop spends part of its window on the warm-up's
    /// backlog, so `achieved` understates what it got through.
    throughput: f64,
    latency: LatencyHistogram,
    /// How late each read started against its intended start (the client's timer and queueing).
    late: LatencyHistogram,
    /// The last read's start behind its intended start, worst worker (µs).
    final_lag_us: f64,
    /// Open loop reads never issued: the run stopped at twice its window.
    abandoned: u64,
    /// Every read of the run, warm-up included, and those that found no row or failed.
    issued: u64,
    not_found: u64,
    errors: u64,
    first_error: Option<String>,
    io: IoCounters,
    load_average: String,
}

#[derive(Default)]
struct WorkerTally {
    latency: LatencyHistogram,
    late: LatencyHistogram,
    measured: u64,
    issued: u64,
    not_found: u64,
    errors: u64,
    first_error: Option<String>,
    last_done: Option<Instant>,
    /// The last completion of any read, warm-up included.
    last_any: Option<Instant>,
    final_lag: Duration,
    abandoned: u64,
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn run_pgtier(args: &Args, cache: &Cache, target: &dyn Target, q: u32, rate: Option<u64>, seed: u64) -> Result<PgRun> {
    let device = device_of(&args.work_dir);
    let before = IoCounters::now(cache, device);
    let keys = SubscriberKeys::new(1, args.subscribers, true);
    let t0 = Instant::now() + Duration::from_millis(20);
    let warm_end = t0 + Duration::from_secs(args.warmup);
    let end = warm_end + Duration::from_secs(args.seconds);
    // Open loop behind schedule stops issuing at twice the window.
    let give_up = end + Duration::from_secs(args.seconds);
    let tallies: Vec<std::result::Result<WorkerTally, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..q)
            .map(|w| {
                let keys = &keys;
                scope.spawn(move || -> std::result::Result<WorkerTally, String> {
                    // Timer slack 1 ns: a sleep to the intended start wakes within a few µs.
                    // SAFETY: prctl(PR_SET_TIMERSLACK) reads only its integer argument.
                    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
                    let mut session = target.connect().map_err(|e| e.to_string())?;
                    let statement = session.prepare(GET_SUBSCRIBER_DATA).map_err(|e| e.to_string())?;
                    let mut rng = SmallRng::seed_from_u64(seed * 64 + u64::from(w));
                    let mut params = [Value::Int(0)];
                    let mut out = Vec::new();
                    let mut tally = WorkerTally::default();
                    let interval = rate.map(|r| f64::from(q) / r as f64);
                    let offset = rate.map_or(0.0, |r| f64::from(w) / r as f64);
                    let mut k: u64 = 0;
                    loop {
                        let now = Instant::now();
                        let intended = match interval {
                            Some(every) => t0 + Duration::from_secs_f64(offset + k as f64 * every),
                            None => now.max(t0),
                        };
                        if intended >= end {
                            break;
                        }
                        if now > give_up {
                            // Reads still due before `end`, never issued.
                            let every = interval.unwrap_or(1.0);
                            let left = (end - intended).as_secs_f64() / every;
                            tally.abandoned = left.ceil() as u64;
                            break;
                        }
                        if now < intended {
                            std::thread::sleep(intended - now);
                        }
                        let start = Instant::now();
                        params[0] = Value::Int(keys.next(&mut rng) as i64);
                        match session.query(statement, &params, &mut out) {
                            Ok(0) => tally.not_found += 1,
                            Ok(_) => {}
                            Err(error) => {
                                tally.errors += 1;
                                tally.first_error.get_or_insert(error.to_string());
                            }
                        }
                        let done = Instant::now();
                        tally.issued += 1;
                        tally.last_any = Some(done);
                        if intended >= warm_end {
                            tally.measured += 1;
                            tally.latency.record(done - intended);
                            tally.late.record(start - intended);
                            tally.last_done = Some(done);
                            tally.final_lag = start - intended;
                        }
                        k += 1;
                    }
                    Ok(tally)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".to_owned()))).collect()
    });
    let after = IoCounters::now(cache, device);
    let mut run = PgRun {
        measured: 0,
        achieved: 0.0,
        throughput: 0.0,
        latency: LatencyHistogram::new(),
        late: LatencyHistogram::new(),
        final_lag_us: 0.0,
        abandoned: 0,
        issued: 0,
        not_found: 0,
        errors: 0,
        first_error: None,
        io: after.minus(before),
        load_average: load_average(),
    };
    let mut last_done = end;
    let mut last_any = t0;
    for tally in tallies {
        let tally = tally?;
        run.measured += tally.measured;
        run.latency.merge(&tally.latency);
        run.late.merge(&tally.late);
        run.final_lag_us = run.final_lag_us.max(tally.final_lag.as_secs_f64() * 1e6);
        run.abandoned += tally.abandoned;
        run.issued += tally.issued;
        run.not_found += tally.not_found;
        run.errors += tally.errors;
        if run.first_error.is_none() {
            run.first_error = tally.first_error;
        }
        if let Some(done) = tally.last_done {
            last_done = last_done.max(done);
        }
        if let Some(done) = tally.last_any {
            last_any = last_any.max(done);
        }
    }
    run.achieved = run.measured as f64 / (last_done - warm_end).as_secs_f64();
    run.throughput = run.issued as f64 / (last_any - t0).as_secs_f64().max(1e-9);
    Ok(run)
}

/// fio, its plan and the prepared file next to the tier file.
type FioSetup = (fio::Fio, IoPlan, pgtier_bench::io::target::Target);

fn prepare_fio(args: &Args, tier_size: u64) -> Result<Option<FioSetup>> {
    let fio = match fio::detect() {
        FioStatus::Found(fio) => fio,
        other => {
            println!("fio: {}", other.describe());
            return Ok(None);
        }
    };
    let size = args.fio_size.unwrap_or(tier_size) / 4096 * 4096;
    let plan = IoPlan {
        file: args.work_dir.join("cache").join("fio-randread.dat"),
        size_bytes: size,
        modes: vec![Mode::RandRead],
        read_pct: 100,
        block_sizes: vec![4096],
        queue_depths: args.queues.clone(),
        duration: Duration::from_secs(args.seconds),
        warmup: Duration::from_secs(args.warmup),
        direct: true,
        fsync_every: None,
        fio: FioUse::IfInstalled,
        device_writes: false,
        seed: 1,
    };
    plan.check()?;
    let target = pgtier_bench::io::target::prepare(&plan, &mut |_, _| {})?;
    println!(
        "fio: {}; file {} ({} MB, {}), O_DIRECT {}{}, on {}",
        fio.version,
        target.path.display(),
        target.size_bytes >> 20,
        target.prepared,
        target.direct,
        target.direct_refused.as_deref().map(|why| format!(" (refused: {why})")).unwrap_or_default(),
        target.device
    );
    Ok(Some((fio, plan, target)))
}

fn fio_args(fio_setup: (&IoPlan, &pgtier_bench::io::target::Target), q: u32, rate: Option<u64>) -> Vec<String> {
    let (plan, target) = fio_setup;
    let point = Point { mode: Mode::RandRead, block_size: 4096, queue_depth: q };
    let mut args = fio::job_args(target, plan, &point);
    if let Some(rate) = rate {
        // fio's rate is per job.
        args.push(format!("--rate_iops={}", rate.div_ceil(u64::from(q))));
    }
    args
}

fn run_fio(
    fio: &fio::Fio,
    plan: &IoPlan,
    target: &pgtier_bench::io::target::Target,
    q: u32,
    rate: Option<u64>,
) -> std::result::Result<FioFigures, String> {
    let job = fio_args((plan, target), q, rate);
    let limit = plan.duration + plan.warmup + Duration::from_secs(30);
    fio::run(fio, &job, limit, &mut |_| {})
}

struct Row {
    repetition: u32,
    q: u32,
    rate: Option<u64>,
    pg: PgRun,
    fio: Option<std::result::Result<FioFigures, String>>,
}

impl Row {
    fn load(&self) -> String {
        self.rate.map_or_else(|| "max".to_owned(), |r| format!("{}k/s", r / 1000))
    }

    /// Open loop: sustained when it achieved 97% of the target, and neither
    /// the last read nor 1% of all started 10 ms or more late (a run can
    /// fall behind and catch up before its end).
    fn sustained(&self) -> bool {
        match self.rate {
            Some(rate) => {
                self.pg.achieved >= 0.97 * rate as f64
                    && self.pg.final_lag_us < 10_000.0
                    && self.pg.late.quantile_us(0.99) < 10_000.0
                    && self.pg.abandoned == 0
            }
            None => true,
        }
    }

    fn flash_fraction(&self) -> f64 {
        self.pg.io.flash_hits as f64 / self.pg.issued.max(1) as f64
    }

    fn print(&self) {
        let pg = &self.pg;
        let hits = pg.io.flash_hits.max(1) as f64;
        println!(
            "rep {} Q{} {:>7} pgtier: {:>8.0} reads/s{} (whole run {:.0}/s) p50 {:>7.1} p99 {:>8.1} p99.9 {:>8.1} max {:>9.1} µs | start late p50 {:.1} p99 {:.1} µs, last {:.0} µs{} | \
             flash hits {:.1}% backend loads {} not found {} errors {}{} | per flash hit: {:.2} read syscalls, {:.2} KiB read, device {:.2} reads {:.2} KiB | load {}",
            self.repetition,
            self.q,
            self.load(),
            pg.achieved,
            if self.sustained() { "" } else { " NOT SUSTAINED" },
            pg.throughput,
            pg.latency.quantile_us(0.5),
            pg.latency.quantile_us(0.99),
            pg.latency.quantile_us(0.999),
            pg.latency.max_us(),
            pg.late.quantile_us(0.5),
            pg.late.quantile_us(0.99),
            pg.final_lag_us,
            if pg.abandoned > 0 { format!(", {} never issued", pg.abandoned) } else { String::new() },
            self.flash_fraction() * 100.0,
            pg.io.backend_loads,
            pg.not_found,
            pg.errors,
            pg.first_error.as_deref().map(|e| format!(" (first: {e})")).unwrap_or_default(),
            pg.io.syscr as f64 / hits,
            pg.io.read_bytes as f64 / 1024.0 / hits,
            pg.io.disk_reads as f64 / hits,
            pg.io.disk_sectors as f64 * 512.0 / 1024.0 / hits,
            pg.load_average,
        );
        match &self.fio {
            Some(Ok(f)) => println!(
                "rep {} Q{} {:>7} fio:    {:>8.0} IOPS    p50 {:>7.1} p99 {:>8.1} p99.9 {:>8.1} max {:>9.1} µs | load {}",
                self.repetition,
                self.q,
                self.load(),
                f.iops,
                f.latency_us.p50,
                f.latency_us.p99,
                f.latency_us.p999,
                f.latency_us.max,
                load_average()
            ),
            Some(Err(why)) => println!("rep {} Q{} {:>7} fio: failed: {why}", self.repetition, self.q, self.load()),
            None => {}
        }
        let _ = std::io::stdout().flush();
    }
}

/// "median [min–max]" of `values`.
fn spread(values: &[f64], digits: usize) -> String {
    if values.is_empty() {
        return "-".to_owned();
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let median = v[v.len() / 2];
    format!("{median:.digits$} [{:.digits$}–{:.digits$}]", v[0], v[v.len() - 1])
}

fn summary(args: &Args, rows: &[Row], record: u64) {
    println!();
    println!(
        "summary over {} repetitions, median [min–max]; latency µs (pgtier from the intended start, fio per I/O)",
        args.repetitions
    );
    println!(
        "{:<3} {:<7} | {:<24} {:<22} {:<22} {:<24} {:<10} | {:<24} {:<22} {:<22} {:<24} | {:<12} {:<12}",
        "Q",
        "load",
        "pgtier reads/s",
        "p50",
        "p99",
        "p99.9",
        "flash hit",
        "fio IOPS",
        "p50",
        "p99",
        "p99.9",
        "p50 − fio",
        "rate/IOPS"
    );
    let blocks_per_record = 1.0 + (record as f64 - 8.0) / 4096.0;
    for &q in &args.queues {
        let loads: Vec<Option<u64>> = args.rates.iter().copied().map(Some).chain([None]).collect();
        for rate in loads {
            let these: Vec<&Row> = rows.iter().filter(|r| r.q == q && r.rate == rate).collect();
            let Some(first) = these.first() else { continue };
            let pg = |f: &dyn Fn(&PgRun) -> f64| these.iter().map(|r| f(&r.pg)).collect::<Vec<_>>();
            let fios: Vec<&FioFigures> =
                these.iter().filter_map(|r| r.fio.as_ref().and_then(|f| f.as_ref().ok())).collect();
            let fv = |f: &dyn Fn(&FioFigures) -> f64| fios.iter().map(|x| f(x)).collect::<Vec<_>>();
            let p50_gap: Vec<f64> = these
                .iter()
                .filter_map(|r| match &r.fio {
                    Some(Ok(f)) => Some(r.pg.latency.quantile_us(0.5) - f.latency_us.p50),
                    _ => None,
                })
                .collect();
            let ratio: Vec<f64> = these
                .iter()
                .filter_map(|r| match &r.fio {
                    Some(Ok(f)) if f.iops > 0.0 => Some(r.pg.achieved / f.iops),
                    _ => None,
                })
                .collect();
            let unsustained = these.iter().filter(|r| !r.sustained()).count();
            println!(
                "{:<3} {:<7} | {:<24} {:<22} {:<22} {:<24} {:<10} | {:<24} {:<22} {:<22} {:<24} | {:<12} {:<12}{}",
                q,
                first.load(),
                spread(&pg(&|p| p.achieved), 0),
                spread(&pg(&|p| p.latency.quantile_us(0.5)), 1),
                spread(&pg(&|p| p.latency.quantile_us(0.99)), 1),
                spread(&pg(&|p| p.latency.quantile_us(0.999)), 1),
                spread(&these.iter().map(|r| r.flash_fraction() * 100.0).collect::<Vec<_>>(), 1),
                spread(&fv(&|f| f.iops), 0),
                spread(&fv(&|f| f.latency_us.p50), 1),
                spread(&fv(&|f| f.latency_us.p99), 1),
                spread(&fv(&|f| f.latency_us.p999), 1),
                spread(&p50_gap, 1),
                spread(&ratio, 2),
                if unsustained > 0 {
                    format!("  NOT SUSTAINED in {unsustained} of {}", these.len())
                } else {
                    String::new()
                },
            );
        }
    }
    let reads: Vec<f64> = rows.iter().map(|r| r.pg.io.syscr as f64 / r.pg.io.flash_hits.max(1) as f64).collect();
    println!(
        "rate/IOPS is records/s over fio's 4 KiB IOPS; per device read (× {blocks_per_record:.3} expected 4 KiB blocks per record, \
         × {} measured read syscalls per flash hit) multiply it by that",
        spread(&reads, 2)
    );
}
