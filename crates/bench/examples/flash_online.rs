//! Online management of the flash tier under load (issue 32): TATP in direct
//! mode on a DYNAMIC cache group larger than its memory budget runs for the
//! whole time while a control thread issues `ALTER CACHE TIER DISABLE`,
//! `ENABLE` and `RESIZE '<size>'` through a SQL session of the cache (the
//! path a client's statement takes), `--cycles` times each, `--gap-seconds`
//! apart: DISABLE, ENABLE, RESIZE per cycle, the resizes alternately down
//! (to half of what flash holds, below it) and up (past the configured
//! size). The first ENABLE, on a tier DISABLE has just emptied, is followed
//! by `--warmup-seconds` of load: the warm-up curve.
//!
//! Reported:
//! - every management command: when, how long it took, its answer;
//! - client errors per phase (a phase runs from one command to the next),
//!   by SQLSTATE and message; TATP's "not found" outcomes and its acceptable
//!   errors (23505, 23503) are not errors (`tatp::transactions::is_acceptable`);
//! - the warm-up curve: per second from 5 s before the first ENABLE to
//!   `--warmup-seconds` after, transactions and where their instance came
//!   from: memory (transactions without a miss), flash (answers and promotions),
//!   PostgreSQL (dynamic loads), from the cache's group counters;
//! - after the load stops and write-through drains: `VERIFY CACHE GROUP`
//!   (memory against PostgreSQL), then `--read-check` distinct subscribers
//!   drawn as the clients draw them, read through the cache (answered from flash where it holds them)
//!   and compared row by row with PostgreSQL's.
//!
//! PostgreSQL must hold the TATP population first:
//!   pgtier backend start
//!   pgtier bench tatp --populate --populate-only --subscribers 500000
//! then:
//!   cargo run --release -p pgtier-bench --example flash_online -- \
//!     --url "$(pgtier backend url)" --budget-fraction 0.2 --threads 2
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pgtier_bench::driver::{Outcome, Workload};
use pgtier_bench::target::{DbError, Target};
use pgtier_bench::targets::cached::{cache_call, drop_node_origins, load_when_ready, open_cache, tatp_group};
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::tatp::TatpWorkload;
use pgtier_bench::tatp::random::SubscriberKeys;
use pgtier_cache::{Admission, Aging, Cache, CacheConfig, DirectIo, TierConfig, TierMode};
use pgtier_engine::CommitMode;
use pgtier_sql::Connection;

/// Errors of every kind, reported as their text.
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

struct Args {
    url: String,
    subscribers: u64,
    budget_fraction: f64,
    threads: u32,
    cycles: u32,
    gap_seconds: u64,
    warmup_seconds: u64,
    lead_seconds: u64,
    tail_seconds: u64,
    region_mb: u32,
    read_check: u64,
    work_dir: PathBuf,
    commit: CommitMode,
    aging_ms: u64,
    tier_mode: TierMode,
}

fn args() -> Result<Args> {
    let mut out = Args {
        url: String::new(),
        subscribers: 0,
        budget_fraction: 0.2,
        threads: 2,
        cycles: 10,
        gap_seconds: 5,
        warmup_seconds: 60,
        lead_seconds: 90,
        tail_seconds: 60,
        region_mb: 1,
        read_check: 20_000,
        work_dir: std::env::temp_dir().join("pgtier-flash-online"),
        commit: CommitMode::Async,
        aging_ms: 1000,
        tier_mode: TierMode::Clean,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url" => out.url = value,
            "--subscribers" => out.subscribers = value.parse()?,
            "--budget-fraction" => out.budget_fraction = value.parse()?,
            "--threads" => out.threads = value.parse()?,
            "--cycles" => out.cycles = value.parse()?,
            "--gap-seconds" => out.gap_seconds = value.parse()?,
            "--warmup-seconds" => out.warmup_seconds = value.parse()?,
            "--lead-seconds" => out.lead_seconds = value.parse()?,
            "--tail-seconds" => out.tail_seconds = value.parse()?,
            "--region-mb" => out.region_mb = value.parse()?,
            "--read-check" => out.read_check = value.parse()?,
            "--work-dir" => out.work_dir = value.into(),
            "--aging-ms" => out.aging_ms = value.parse()?,
            "--tier-mode" => {
                out.tier_mode = match value.as_str() {
                    "clean" => TierMode::Clean,
                    "write-back" => TierMode::WriteBack,
                    _ => return Err(format!("--tier-mode clean|write-back, not {value}").into()),
                }
            }
            "--commit" => {
                out.commit = match value.as_str() {
                    "sync" => CommitMode::Sync,
                    "async" => CommitMode::Async,
                    _ => return Err(format!("--commit sync|async, not {value}").into()),
                }
            }
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    if out.url.is_empty() {
        return Err("--url (PostgreSQL holding the TATP population) is required".into());
    }
    Ok(out)
}

/// What the clients and the control thread share.
struct Shared {
    stop: AtomicBool,
    /// Index into `phases` of the phase now running.
    phase: AtomicUsize,
    phases: Mutex<Vec<String>>,
    /// Transactions that ran (found or not), acceptable errors, per phase.
    txns: Vec<AtomicU64>,
    acceptable: Vec<AtomicU64>,
    /// (phase, SQLSTATE, message) -> count.
    errors: Mutex<BTreeMap<(usize, String, String), u64>>,
    /// All transactions so far (for the per-second samples).
    finished: AtomicU64,
    error_total: AtomicU64,
}

const MAX_PHASES: usize = 256;

impl Shared {
    fn new() -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            phase: AtomicUsize::new(0),
            phases: Mutex::new(vec!["start (tier enabled by the configuration)".into()]),
            txns: (0..MAX_PHASES).map(|_| AtomicU64::new(0)).collect(),
            acceptable: (0..MAX_PHASES).map(|_| AtomicU64::new(0)).collect(),
            errors: Mutex::new(BTreeMap::new()),
            finished: AtomicU64::new(0),
            error_total: AtomicU64::new(0),
        }
    }

    fn begin_phase(&self, name: String) -> usize {
        let mut phases = self.phases.lock().unwrap_or_else(|e| e.into_inner());
        phases.push(name);
        let index = (phases.len() - 1).min(MAX_PHASES - 1);
        self.phase.store(index, Ordering::SeqCst);
        index
    }

    fn error(&self, error: &DbError) {
        let phase = self.phase.load(Ordering::SeqCst);
        let key = (phase, error.sqlstate.clone().unwrap_or_else(|| "-----".into()), error.message.clone());
        *self.errors.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_insert(0) += 1;
        self.error_total.fetch_add(1, Ordering::Relaxed);
    }
}

/// One TATP client: runs until `stop`; an error is counted and the client
/// starts over on a new session (its transaction was rolled back or the
/// session may be in an unknown state).
fn client(target: &EmbeddedTarget, workload: &TatpWorkload, thread: u32, shared: &Shared) {
    let mut attempt = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        attempt += 1;
        let seed = (u64::from(thread) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ attempt;
        let opened = target.connect().and_then(|session| workload.open_client(session, thread, seed));
        let mut client = match opened {
            Ok(client) => client,
            Err(error) => {
                shared.error(&error);
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        while !shared.stop.load(Ordering::Relaxed) {
            match client.run_next() {
                Ok((_, outcome)) => {
                    let phase = shared.phase.load(Ordering::Relaxed);
                    if outcome == Outcome::AcceptableError {
                        shared.acceptable[phase].fetch_add(1, Ordering::Relaxed);
                    } else {
                        shared.txns[phase].fetch_add(1, Ordering::Relaxed);
                    }
                    shared.finished.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => {
                    shared.error(&error);
                    break;
                }
            }
        }
    }
}

/// The cache's counters at one instant.
#[derive(Clone, Debug, Default)]
struct Sample {
    at: f64,
    txns: u64,
    errors: u64,
    flash_hits: u64,
    backend_loads: u64,
    absent: u64,
    demotions: u64,
    rejections: u64,
    flash_records: Option<u64>,
    flash_live_bytes: Option<u64>,
    memory_bytes: u64,
    load1: f64,
}

fn sample(cache: &Cache, shared: &Shared, start: Instant) -> Sample {
    let tier = cache.tier_stats();
    let store = &tier[0];
    let groups = cache.stats();
    Sample {
        at: start.elapsed().as_secs_f64(),
        txns: shared.finished.load(Ordering::Relaxed),
        errors: shared.error_total.load(Ordering::Relaxed),
        flash_hits: store.flash_hits,
        backend_loads: store.backend_loads,
        absent: groups.iter().map(|g| g.dynamic_absent).sum(),
        demotions: store.demotions,
        rejections: store.rejections,
        flash_records: store.flash_records,
        flash_live_bytes: store.flash_live_bytes,
        memory_bytes: store.memory_bytes,
        load1: load_average(),
    }
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// A management command as it went.
struct Command {
    phase: usize,
    at: f64,
    sql: String,
    took_ms: f64,
    answer: String,
    flash_before: Option<u64>,
    flash_after: Option<u64>,
    capacity_after: Option<u64>,
}

/// Runs `sql` on the control session: the NOTICE on success, `SQLSTATE message` on failure.
fn run_sql(conn: &mut Connection, sql: &str) -> (std::result::Result<String, String>, f64) {
    let began = Instant::now();
    let result = conn.execute_sql(sql);
    let took = began.elapsed().as_secs_f64() * 1000.0;
    let notices: Vec<String> = conn.take_notices().into_iter().map(|n| n.message).collect();
    match result {
        Ok(done) => (Ok(if notices.is_empty() { done.tag } else { notices.join("; ") }), took),
        Err(error) => (Err(format!("{} {}", error.sqlstate, error.message)), took),
    }
}

fn main() -> Result<()> {
    let args = args()?;
    let mut pg = pgtier_backend::connect::connect(&args.url)?;
    let in_pg: i64 = pg.query_one("SELECT count(*) FROM subscriber", &[])?.get(0);
    let subscribers = if args.subscribers == 0 { in_pg as u64 } else { args.subscribers };
    println!("PostgreSQL holds {in_pg} subscribers; the run uses {subscribers}; tier mode {:?}", args.tier_mode);
    let _ = std::fs::remove_dir_all(&args.work_dir);
    std::fs::create_dir_all(&args.work_dir)?;
    let node = format!("fo{}", std::process::id() % 100_000);

    // Memory one instance takes, measured: a scratch cache loads 2,000.
    let per_instance = {
        let dir = args.work_dir.join("probe");
        let mut config = CacheConfig { takeover: true, ..CacheConfig::default() };
        config.awt.node = format!("{node}p");
        let (cache, _target) = open_cache(&dir, CommitMode::Sync, &args.url, config)?;
        let mut group = tatp_group("probe", false, Aging::Off);
        group.root_predicate = Some("s_id <= 2000".into());
        cache_call(cache.create_group(&group))?;
        load_when_ready(&cache, "probe", &pgtier_cache::LoadOptions::default())?;
        cache.stats()[0].memory_bytes / 2000
    };
    std::thread::sleep(Duration::from_secs(2));
    drop_node_origins(&args.url, &format!("{node}p"))?;
    let all = per_instance * subscribers;
    let budget = (all as f64 * args.budget_fraction) as u64;
    let region = args.region_mb << 20;
    let flash_size = (all * 2).max(256 << 20);
    println!(
        "instance {per_instance} B in memory; all {} MB; budget {} MB ({}%); flash {} MB in {} MB regions",
        all >> 20,
        budget >> 20,
        args.budget_fraction * 100.0,
        flash_size >> 20,
        args.region_mb
    );
    let dir = args.work_dir.join("run");
    let tier = TierConfig {
        path: dir.join("flash.tier"),
        size: flash_size,
        region_size: region,
        direct_io: DirectIo::Auto,
        mean_record_bytes: 512,
        admission: Admission::All,
    };
    let mut config = CacheConfig {
        memory_budget: Some(budget),
        aging_interval: Duration::from_millis(args.aging_ms),
        tier: Some(tier),
        tier_mode: args.tier_mode,
        ..CacheConfig::default()
    };
    config.awt.node = node.clone();
    let (cache, target) = open_cache(&dir.join("db"), args.commit, &args.url, config)?;
    cache_call(cache.create_group(&tatp_group("tatp", true, Aging::Lru)))?;
    // A budget's worth of instances to start from; misses bring the rest.
    let options = pgtier_cache::LoadOptions {
        parallel: 2,
        predicate: Some(format!("s_id <= {}", (budget / per_instance.max(1)).min(subscribers))),
        ..Default::default()
    };
    load_when_ready(&cache, "tatp", &options)?;
    println!("loaded {} instances, {} MB", cache.stats()[0].instances, cache.stats()[0].memory_bytes >> 20);

    let shared = Arc::new(Shared::new());
    let workload = TatpWorkload { keys: SubscriberKeys::new(1, subscribers, false) };
    let mut conn = Connection::new(target.database().clone());
    conn.attach_cache(cache.clone());
    let start = Instant::now();
    let samples = Mutex::new(Vec::<Sample>::new());
    let sampler_stop = AtomicBool::new(false);
    let mut commands = Vec::<Command>::new();
    let mut first_enable_at = None;

    std::thread::scope(|scope| -> Result<()> {
        for thread in 0..args.threads {
            let (target, workload, shared) = (&target, &workload, &shared);
            scope.spawn(move || client(target, workload, thread, shared));
        }
        {
            let (cache, shared, samples, sampler_stop) = (&cache, &shared, &samples, &sampler_stop);
            scope.spawn(move || {
                let mut next = start;
                while !sampler_stop.load(Ordering::Relaxed) {
                    let s = sample(cache, shared, start);
                    samples.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                    next += Duration::from_secs(1);
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            });
        }
        let wait = |seconds: u64| std::thread::sleep(Duration::from_secs(seconds));
        wait(args.lead_seconds);
        let mut issue = |sql: String, shared: &Shared, commands: &mut Vec<Command>| {
            let flash_before = cache.tier_stats()[0].flash_live_bytes;
            let phase = shared.begin_phase(sql.clone());
            let at = start.elapsed().as_secs_f64();
            let (answer, took_ms) = run_sql(&mut conn, &sql);
            let answer = match answer {
                Ok(notice) => format!("ok: {notice}"),
                Err(error) => format!("FAILED: {error}"),
            };
            let after = cache.tier_stats()[0].clone();
            let (flash_after, capacity_after) = (after.flash_live_bytes, after.flash_capacity_bytes);
            println!("{at:7.1} s  {sql:<40} {took_ms:8.1} ms  {answer}");
            commands.push(Command { phase, at, sql, took_ms, answer, flash_before, flash_after, capacity_after });
            at
        };
        for cycle in 1..=args.cycles {
            issue("ALTER CACHE TIER DISABLE".into(), &shared, &mut commands);
            wait(args.gap_seconds);
            let at = issue("ALTER CACHE TIER ENABLE".into(), &shared, &mut commands);
            if cycle == 1 {
                first_enable_at = Some(at);
                wait(args.warmup_seconds);
            } else {
                wait(args.gap_seconds);
            }
            let held = cache.tier_stats()[0].flash_live_bytes.unwrap_or(0);
            let size = if cycle % 2 == 1 {
                // Down: half of what flash holds, at least 6 regions (rounded to MB).
                ((held / 2).max(6 * u64::from(region)) >> 20).max(1) << 20
            } else {
                flash_size + flash_size / 2
            };
            let direction = if cycle % 2 == 1 { "down" } else { "up" };
            println!("         resize {cycle} {direction}: flash holds {} MB now", held >> 20);
            issue(format!("ALTER CACHE TIER RESIZE '{}MB'", size >> 20), &shared, &mut commands);
            wait(args.gap_seconds);
        }
        shared.begin_phase("tail (after the last command)".into());
        wait(args.tail_seconds);
        shared.stop.store(true, Ordering::SeqCst);
        sampler_stop.store(true, Ordering::SeqCst);
        Ok(())
    })?;
    let run_seconds = start.elapsed().as_secs_f64();
    let samples = samples.into_inner().unwrap_or_else(|e| e.into_inner());
    let phases = shared.phases.lock().unwrap_or_else(|e| e.into_inner()).clone();

    // Commands.
    println!("\n== management commands ({:.0} s of load, {} client threads)", run_seconds, args.threads);
    println!(
        "{:>5} {:>7}  {:<40} {:>9} {:>10} {:>10} {:>8}  answer",
        "phase", "at s", "command", "ms", "flash MB<", "flash MB>", "size MB"
    );
    for c in &commands {
        let mb = |v: Option<u64>| v.map_or("-".to_owned(), |v| format!("{:.1}", v as f64 / 1048576.0));
        println!(
            "{:>5} {:>7.1}  {:<40} {:>9.1} {:>10} {:>10} {:>8}  {}",
            c.phase,
            c.at,
            c.sql,
            c.took_ms,
            mb(c.flash_before),
            mb(c.flash_after),
            c.capacity_after.map_or("-".to_owned(), |v| (v >> 20).to_string()),
            c.answer
        );
    }

    // Errors per phase.
    println!("\n== client errors per phase (TATP's not-found outcomes and 23505/23503 are not errors)");
    let errors = shared.errors.lock().unwrap_or_else(|e| e.into_inner()).clone();
    // A cache fault surfacing as 23505 would hide among the acceptable
    // errors: their share per phase should stay TATP's (~1 %).
    println!("{:>5}  {:<40} {:>10} {:>10} {:>6} {:>7}", "phase", "phase", "txns", "acceptable", "acc %", "errors");
    let mut total_errors = 0;
    for (index, name) in phases.iter().enumerate().take(MAX_PHASES) {
        let count: u64 = errors.iter().filter(|((p, _, _), _)| *p == index).map(|(_, n)| n).sum();
        total_errors += count;
        let txns = shared.txns[index].load(Ordering::Relaxed);
        let acceptable = shared.acceptable[index].load(Ordering::Relaxed);
        let share = if txns + acceptable == 0 { 0.0 } else { 100.0 * acceptable as f64 / (txns + acceptable) as f64 };
        println!("{index:>5}  {name:<40} {txns:>10} {acceptable:>10} {share:>6.2} {count:>7}");
    }
    println!("total client errors: {total_errors}");
    for ((phase, sqlstate, message), count) in errors.iter().take(40) {
        println!("  phase {phase} {sqlstate} x{count}: {message}");
    }

    // The warm-up curve.
    if let Some(enable_at) = first_enable_at {
        warmup_table(&samples, enable_at, args.warmup_seconds);
    }
    let loads: Vec<f64> = samples.iter().map(|s| s.load1).collect();
    if !loads.is_empty() {
        println!(
            "\nload average (1 min) during the run: min {:.2} mean {:.2} max {:.2}",
            loads.iter().copied().fold(f64::MAX, f64::min),
            loads.iter().sum::<f64>() / loads.len() as f64,
            loads.iter().copied().fold(0.0, f64::max)
        );
    }

    timeline(&samples);

    // Write-through drains, then the comparisons.
    println!("\n== after the load");
    let drained = Instant::now();
    loop {
        let backlog = cache.propagation_info().map_or(0, |p| p.backlog_bytes);
        if backlog == 0 || drained.elapsed() > Duration::from_secs(300) {
            println!("write-through backlog {backlog} B after {:.1} s", drained.elapsed().as_secs_f64());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if let Some(p) = cache.propagation_info() {
        println!("write-through: applied {} txns, errors {}, state {}", p.applied_txns, p.errors, p.state);
    }
    print_store("flash before VERIFY", &cache);
    let (verify, took) = run_sql(&mut conn, "VERIFY CACHE GROUP tatp");
    println!("VERIFY CACHE GROUP tatp ({:.1} s): {}", took / 1000.0, verify.unwrap_or_else(|e| format!("FAILED: {e}")));
    print_store("flash after VERIFY", &cache);
    read_check(&mut conn, &mut pg, &cache, subscribers, args.read_check)?;
    print_store("flash after the read check", &cache);

    drop(conn);
    drop(target);
    drop(cache);
    std::thread::sleep(Duration::from_secs(2));
    drop_node_origins(&args.url, &node)?;
    let _ = std::fs::remove_dir_all(&args.work_dir);
    Ok(())
}

fn print_store(what: &str, cache: &Cache) {
    let row = cache.tier_stats()[0].clone();
    println!(
        "{what}: {}; {:?} records, {:?} B live of {:?} B; flash hits {} backend loads {} demotions {} rejections {}",
        row.state,
        row.flash_records,
        row.flash_live_bytes,
        row.flash_capacity_bytes,
        row.flash_hits,
        row.backend_loads,
        row.demotions,
        row.rejections
    );
}

/// The whole run every 10 s: throughput and where the misses went.
fn timeline(samples: &[Sample]) {
    println!("\n== the whole run, 10 s steps");
    println!(
        "{:>6} {:>8} {:>7} {:>7} {:>9} {:>9} {:>8} {:>5}",
        "t s", "txn/s", "fl/s", "PG/s", "fl recs", "fl MB", "mem MB", "errs"
    );
    for pair in samples.iter().step_by(10).collect::<Vec<_>>().windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let dt = (b.at - a.at).max(1e-6);
        println!(
            "{:>6.0} {:>8.0} {:>7.0} {:>7.0} {:>9} {:>9} {:>8} {:>5}",
            b.at,
            (b.txns - a.txns) as f64 / dt,
            (b.flash_hits - a.flash_hits) as f64 / dt,
            (b.backend_loads - a.backend_loads) as f64 / dt,
            b.flash_records.map_or("-".into(), |v| v.to_string()),
            b.flash_live_bytes.map_or("-".into(), |v| format!("{:.1}", v as f64 / 1048576.0)),
            b.memory_bytes >> 20,
            b.errors - a.errors,
        );
    }
}

/// Per second around the first ENABLE: throughput and where the
/// transactions' instances came from.
fn warmup_table(samples: &[Sample], enable_at: f64, seconds: u64) {
    println!("\n== warm-up after the first ENABLE (t = 0 at the ENABLE; per-second deltas of the cache's counters)");
    println!(
        "memory = transactions that missed nothing (txns - flash - PostgreSQL - absent); flash = answers from flash and promotions; PostgreSQL = dynamic loads"
    );
    println!(
        "{:>5} {:>9} {:>9} {:>8} {:>8} {:>6} {:>6} {:>6} {:>8} {:>6} {:>9} {:>9} {:>8} {:>5}",
        "t s",
        "txn/s",
        "memory/s",
        "flash/s",
        "PG/s",
        "mem%",
        "fl%",
        "PG%",
        "demote/s",
        "rej/s",
        "fl recs",
        "fl MB",
        "mem MB",
        "errs"
    );
    let window: Vec<&Sample> =
        samples.iter().filter(|s| s.at >= enable_at - 6.0 && s.at <= enable_at + seconds as f64 + 1.0).collect();
    let mut rows = Vec::new();
    for pair in window.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let dt = (b.at - a.at).max(1e-6);
        let txns = b.txns - a.txns;
        let flash = b.flash_hits - a.flash_hits;
        let pg = b.backend_loads - a.backend_loads;
        let absent = b.absent.saturating_sub(a.absent);
        let memory = txns.saturating_sub(flash + pg + absent);
        let pct = |v: u64| if txns == 0 { 0.0 } else { 100.0 * v as f64 / txns as f64 };
        let t = b.at - enable_at;
        println!(
            "{t:>5.0} {:>9.0} {:>9.0} {:>8.0} {:>8.0} {:>6.1} {:>6.1} {:>6.1} {:>8.0} {:>6.0} {:>9} {:>9} {:>8} {:>5}",
            txns as f64 / dt,
            memory as f64 / dt,
            flash as f64 / dt,
            pg as f64 / dt,
            pct(memory),
            pct(flash),
            pct(pg),
            (b.demotions - a.demotions) as f64 / dt,
            (b.rejections - a.rejections) as f64 / dt,
            b.flash_records.map_or("-".into(), |v| v.to_string()),
            b.flash_live_bytes.map_or("-".into(), |v| format!("{:.1}", v as f64 / 1048576.0)),
            b.memory_bytes >> 20,
            b.errors - a.errors,
        );
        rows.push((t, txns as f64 / dt, pct(memory), pct(flash), pct(pg)));
    }
    // ASCII chart: throughput as a bar, the split as letters M / F / P.
    let peak = rows.iter().map(|r| r.1).fold(1.0, f64::max);
    println!("\n  t s  txn/s   bar length = txn/s (peak {peak:.0}); M memory, F flash, P PostgreSQL share of it");
    for (t, rate, mem, fl, pg) in rows {
        let width = (60.0 * rate / peak).round() as usize;
        let m = (width as f64 * mem / 100.0).round() as usize;
        let f = (width as f64 * fl / 100.0).round() as usize;
        let p = if pg > 0.0 { width.saturating_sub(m + f) } else { 0 };
        println!("{t:>5.0} {rate:>6.0} |{}{}{}", "M".repeat(m), "F".repeat(f), "P".repeat(p));
    }
}

/// `count` distinct subscribers drawn as the clients draw them, read through the cache
/// (an instance on flash is answered from there, one nowhere loaded) and compared
/// with PostgreSQL's rows.
fn read_check(
    conn: &mut Connection,
    pg: &mut postgres::Client,
    cache: &Cache,
    subscribers: u64,
    count: u64,
) -> Result<()> {
    if count == 0 {
        return Ok(());
    }
    let before = cache.tier_stats()[0].clone();
    // The keys the clients draw (NURand), distinct: the ones aging moved to flash.
    let keys = SubscriberKeys::new(1, subscribers, false);
    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(4242);
    let mut ids = std::collections::BTreeSet::new();
    for _ in 0..count * 20 {
        if ids.len() as u64 >= count.min(subscribers) {
            break;
        }
        ids.insert(keys.next(&mut rng));
    }
    let tables = ["subscriber", "access_info", "special_facility", "call_forwarding"];
    let (mut checked, mut differing, mut failed) = (0u64, 0u64, 0u64);
    let began = Instant::now();
    for s_id in ids {
        let mut same = true;
        for table in tables {
            let sql = format!("SELECT * FROM {table} WHERE s_id = {s_id}");
            let ours = match conn.execute_sql(&sql) {
                Ok(result) => {
                    let mut lines: Vec<String> = result
                        .rows
                        .map(|rows| {
                            rows.iter()
                                .map(|row| {
                                    (0..row.len())
                                        .map(|i| row.text(i).unwrap_or_else(|| "\\N".into()))
                                        .collect::<Vec<_>>()
                                        .join("\t")
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    lines.sort();
                    lines
                }
                Err(error) => {
                    failed += 1;
                    if failed <= 10 {
                        println!("  read check: {sql}: {} {}", error.sqlstate, error.message);
                    }
                    continue;
                }
            };
            let mut theirs: Vec<String> = pg
                .simple_query(&sql)?
                .into_iter()
                .filter_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(row) => Some(
                        (0..row.len()).map(|i| row.get(i).unwrap_or("\\N").to_owned()).collect::<Vec<_>>().join("\t"),
                    ),
                    _ => None,
                })
                .collect();
            theirs.sort();
            if ours != theirs {
                same = false;
                if differing < 10 {
                    println!("  read check: {table} s_id {s_id} differs:\n    cache: {ours:?}\n    pg:    {theirs:?}");
                }
            }
        }
        checked += 1;
        if !same {
            differing += 1;
        }
    }
    let after = cache.tier_stats()[0].clone();
    println!(
        "read check ({:.1} s): {checked} subscribers read through the cache, {differing} differ from PostgreSQL, {failed} reads failed; of them {} came from flash, {} from PostgreSQL",
        began.elapsed().as_secs_f64(),
        after.flash_hits - before.flash_hits,
        after.backend_loads - before.backend_loads
    );
    Ok(())
}
