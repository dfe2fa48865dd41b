//! TATP in direct mode on a DYNAMIC cache group larger than its memory
//! budget, three ways side by side in one process (issue 32's figure):
//!   all-dram  the budget holds every instance (the group warmed up first);
//!   no-flash  the small budget, evicted instances reload from PostgreSQL;
//!   flash     the small budget, evicted instances go to the flash tier;
//!   dram-tier (optional) as all-dram, with the tier configured and unused.
//! Every side runs the same TATP mix with the same seeds on the same
//! PostgreSQL population, with the same commit mode (`--commit`, async by
//! default: with sync every write waits for an fdatasync, which then
//! dominates all three sides alike); only the budget and the tier differ. Each side is measured after a warm-up pass over the key
//! range so that aging has reached its steady state, and once write-through
//! has caught up with that pass. Each line gives the measured rate and the
//! rate with write-through caught up: the measure's transactions over the
//! measure plus the time PostgreSQL then took to receive the rest. A side
//! whose writes outrun what PostgreSQL applies (all-dram, where nothing
//! waits on a device) grows a backlog it cannot keep growing: its sustained
//! rate is at most that second figure (the drain runs with the clients
//! stopped, so faster than under load).
//!
//! PostgreSQL must hold the TATP population first:
//!   pgtier backend start
//!   pgtier bench tatp --populate-only --subscribers 1000000
//! then (release build; the figures go to stdout, one line per side and repetition):
//!   cargo run --release -p pgtier-bench --example flash_tatp -- \
//!     --url "$(pgtier backend url)" --subscribers 1000000 --budget-fraction 0.2 --seconds 30 --threads 2
//! `--wire true` runs the same sides through an in-process `pgtier serve`
//! (trust auth on loopback), the clients over the PostgreSQL protocol.
//! `--tier-mode write-back` (study 002): instances with changes PostgreSQL
//! does not have yet go to flash too, durably; the line then shows the
//! dirty demotions, the durable records and the write amplification.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

/// Errors of every kind, reported as their text.
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;
use std::time::Duration;

use pgtier_bench::driver::{LiveCounters, LoadSpec, run_repetition};
use pgtier_bench::targets::cached::{
    cache_call, caught_up_rate, drop_node_origins, load_when_ready, open_cache, tatp_group, write_through_drained,
};
use pgtier_bench::tatp::TatpWorkload;
use pgtier_bench::tatp::random::SubscriberKeys;
use pgtier_bench::warmup::{SteadyShare, share_of};
use pgtier_cache::{Admission, Aging, CacheConfig, DirectIo, TierConfig, TierMode};
use pgtier_engine::CommitMode;

struct Args {
    url: String,
    subscribers: u64,
    budget_fraction: f64,
    seconds: u64,
    threads: u32,
    repetitions: u32,
    work_dir: PathBuf,
    sides: Vec<String>,
    wire: bool,
    commit: CommitMode,
    aging_ms: u64,
    write_back: bool,
}

fn args() -> Result<Args> {
    let mut out = Args {
        url: String::new(),
        subscribers: 100_000,
        budget_fraction: 0.2,
        seconds: 20,
        threads: 2,
        repetitions: 2,
        work_dir: std::env::temp_dir().join("pgtier-flash-tatp"),
        sides: vec!["all-dram".into(), "no-flash".into(), "flash".into()],
        wire: false,
        commit: CommitMode::Async,
        aging_ms: 1000,
        write_back: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url" => out.url = value,
            "--subscribers" => out.subscribers = value.parse()?,
            "--budget-fraction" => out.budget_fraction = value.parse()?,
            "--seconds" => out.seconds = value.parse()?,
            "--threads" => out.threads = value.parse()?,
            "--repetitions" => out.repetitions = value.parse()?,
            "--work-dir" => out.work_dir = value.into(),
            "--sides" => out.sides = value.split(',').map(str::to_owned).collect(),
            "--wire" => out.wire = value.parse()?,
            "--aging-ms" => out.aging_ms = value.parse()?,
            "--tier-mode" => {
                out.write_back = match value.as_str() {
                    "clean" => false,
                    "write-back" => true,
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

fn main() -> Result<()> {
    let args = args()?;
    // Memory one instance takes, measured: a scratch cache loads 2,000.
    let per_instance = {
        let dir = args.work_dir.join("probe");
        let _ = std::fs::remove_dir_all(&dir);
        let mut config = CacheConfig { takeover: true, ..CacheConfig::default() };
        config.awt.node = NODE.into();
        let (cache, _target) = open_cache(&dir, CommitMode::Sync, &args.url, config)?;
        let mut group = tatp_group("probe", false, Aging::Off);
        group.root_predicate = Some("s_id <= 2000".into());
        cache_call(cache.create_group(&group))?;
        load_when_ready(&cache, "probe", &pgtier_cache::LoadOptions::default())?;
        let bytes = cache.stats()[0].memory_bytes / 2000;
        drop(cache);
        drop(_target);
        // Its replication origins go too: PostgreSQL keeps few of them.
        std::thread::sleep(Duration::from_secs(2));
        drop_node_origins(&args.url, NODE)?;
        bytes
    };
    let all = per_instance * args.subscribers;
    let small = (all as f64 * args.budget_fraction) as u64;
    println!(
        "instance {per_instance} B in memory; all {} MB; small budget {} MB ({}%)",
        all >> 20,
        small >> 20,
        args.budget_fraction * 100.0
    );
    for repetition in 1..=args.repetitions {
        for side in &args.sides {
            run_side(&args, side, repetition, all, small)?;
        }
    }
    Ok(())
}

/// The node name of the probe; each side gets its own (`node_of`), so no
/// side takes over another's while that one's write-through winds down.
const NODE: &str = "flashtatp";

fn node_of(side: &str, repetition: u32) -> String {
    let side = side.chars().filter(char::is_ascii_alphanumeric).collect::<String>();
    format!("ft{}{side}{repetition}", std::process::id() % 100_000)
}

fn run_side(args: &Args, side: &str, repetition: u32, all: u64, small: u64) -> Result<()> {
    let dir = args.work_dir.join(side);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    // dram-tier: all in memory, with the tier configured (what it costs when unused).
    let flash = side == "flash" || side == "dram-tier";
    // all-dram and dram-tier: headroom over the instances so aging never runs.
    let budget = if side == "all-dram" || side == "dram-tier" { all * 2 } else { small };
    let tier = flash.then(|| TierConfig {
        path: dir.join("flash.tier"),
        size: (all * 2).max(256 << 20),
        region_size: 16 << 20,
        direct_io: DirectIo::Auto,
        mean_record_bytes: 512,
        admission: Admission::All,
    });
    let workload = TatpWorkload { keys: SubscriberKeys::new(1, args.subscribers, false) };
    if args.wire {
        let node = node_of(side, repetition);
        let server = start_wire(&dir, &args.url, budget, tier.as_ref(), args.write_back, args.commit, &node)?;
        let cache = server.cache().ok_or("the server runs no cache")?.clone();
        prepare(&cache, flash, budget, args.subscribers)?;
        let url = format!("postgresql://bench@{}/pgtier", server.local_addr());
        let target = pgtier_bench::targets::postgres::PgTarget::open(&url)?;
        measure(args, side, repetition, &target, &workload, &cache)?;
        drop(target);
        drop(cache);
        server.shutdown_checked()?;
    } else {
        let mut config = CacheConfig {
            memory_budget: Some(budget),
            aging_interval: Duration::from_millis(args.aging_ms),
            tier,
            tier_mode: if args.write_back { TierMode::WriteBack } else { TierMode::Clean },
            ..CacheConfig::default()
        };
        config.awt.node = node_of(side, repetition);
        let (cache, target) = open_cache(&dir.join("db"), args.commit, &args.url, config)?;
        prepare(&cache, flash, budget, args.subscribers)?;
        measure(args, side, repetition, &target, &workload, &cache)?;
        drop(target);
        drop(cache);
    }
    // Write-through of the side just dropped winds down before its directory
    // goes, and its replication origins (PostgreSQL keeps at most
    // max_replication_slots of them) go with it.
    std::thread::sleep(Duration::from_secs(2));
    drop_node_origins(&args.url, &node_of(side, repetition))?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// An in-process server over `dir` with this budget and tier.
fn start_wire(
    dir: &std::path::Path,
    url: &str,
    budget: u64,
    tier: Option<&TierConfig>,
    write_back: bool,
    commit: CommitMode,
    node: &str,
) -> Result<pgtier_server::RunningServer> {
    let commit = if commit == CommitMode::Sync { "sync" } else { "async" };
    let mut toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\ncommit_mode = \"{commit}\"\nmax_connections = 200\n[auth]\nmethod = \"trust\"\n\
         [backend]\nurl = {url:?}\n[cache]\nmemory_budget = \"{}kB\"\naging_interval_ms = 1000\nawt_node = {node:?}\n",
        dir.join("db").display().to_string(),
        budget >> 10,
    );
    if let Some(tier) = tier {
        toml.push_str(&format!(
            "[tier]\npath = {:?}\nsize = \"{}MB\"\nadmission = \"all\"\nmode = \"{}\"\n",
            tier.path.display().to_string(),
            tier.size >> 20,
            if write_back { "write-back" } else { "clean" }
        ));
    }
    let config = pgtier_server::ServerConfig::from_toml_str(&toml)?;
    Ok(pgtier_server::start(config)?)
}

/// The group, every instance loaded, aging down to the budget.
fn prepare(cache: &pgtier_cache::Cache, flash: bool, budget: u64, subscribers: u64) -> Result<()> {
    let mut group = tatp_group("tatp", true, Aging::Lru);
    if !flash {
        group.flash = pgtier_cache::FlashPolicy::None;
    }
    cache_call(cache.create_group(&group))?;
    // Every side starts from every instance loaded; aging then brings the
    // small budgets down (to flash, or away), so the warm-up starts near
    // the steady state instead of a cold cache.
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

fn measure(
    args: &Args,
    side: &str,
    repetition: u32,
    target: &dyn pgtier_bench::target::Target,
    workload: &TatpWorkload,
    cache: &pgtier_cache::Cache,
) -> Result<()> {
    let live = LiveCounters::default();
    let spec = |measure: u64, seed: u64| LoadSpec {
        threads: args.threads,
        rate_per_s: None,
        ramp_up: Duration::from_secs(2),
        measure: Duration::from_secs(measure),
        ramp_down: Duration::from_secs(1),
        seed,
    };
    // Warm-up: windows until the share of transactions that miss memory is
    // steady (`pgtier_bench::warmup`; no-flash: the share PostgreSQL serves).
    let mut warm = SteadyShare::new(WARM_WINDOWS_MAX);
    while !warm.done() {
        let before = misses_served(cache);
        let window = spec(WARM_WINDOW_SECONDS, 100_000 + 100 * u64::from(repetition) + warm.shares().len() as u64);
        let tally = run_repetition(target, workload, &window, &live, &mut |_, _| {})?;
        let txns = tally.attempts_per_s() * (window.ramp_up + window.measure + window.ramp_down).as_secs_f64();
        warm.push(share_of(misses_served(cache) - before, txns));
    }
    // Write-through starts the measure caught up, and the time it takes to
    // catch up after it is part of the rate: a side whose writes outrun
    // PostgreSQL is not sustaining its figure (it grows a backlog).
    awt_drained(cache)?;
    let group_before = group_tier_row(cache);
    let tally =
        run_repetition(target, workload, &spec(args.seconds, 1000 + u64::from(repetition)), &live, &mut |_, _| {})?;
    let backlog = cache.awt_backlog_bytes();
    let drain = awt_drained(cache)?;
    let mut latency = pgtier_bench::stats::LatencyHistogram::new();
    for txn in &tally.txns {
        latency.merge(&txn.latency);
    }
    let tier = cache.tier_stats();
    let group_row = tier.iter().find(|r| r.group.is_some()).cloned().unwrap_or_default();
    // Misses flash served per transaction, over the measure and its ramps
    // (the counters run through them; the ramps add a sixth to the window).
    let window = spec(args.seconds, 0);
    let window_txns = tally.attempts_per_s() * (window.ramp_up + window.measure + window.ramp_down).as_secs_f64();
    let flash_per_txn = (group_row.flash_hits - group_before.flash_hits) as f64 / window_txns.max(1.0);
    let promoted_per_txn = (group_row.promotions - group_before.promotions) as f64 / window_txns.max(1.0);
    let store = &tier[0];
    let stats = &cache.stats()[0];
    let errors: u64 = tally.txns.iter().map(|t| t.acceptable_errors).sum();
    let sustained = caught_up_rate(tally.attempts_per_s(), Duration::from_secs(args.seconds), drain);
    println!(
        "rep {repetition} {}{side:>8}: {:>9.0} txn/s ({sustained:.0} with write-through caught up: {} MB behind at the end, {:.1} s to drain)  p50 {:>7.1} µs  p99 {:>8.1} µs  p99.9 {:>8.1} µs  acceptable errors {errors} | flash per txn {flash_per_txn:.3} (promotions {promoted_per_txn:.3}; warm-up windows {:?}) | memory {} MB, {} instances | flash hits {} (promotions {}) backend loads {} demotions {} (dirty {}) records {:?} (durable {:?}) index {:?} B read p50 {:?} µs p99 {:?} µs wamp {:?} | rows hot {} warm {} cold {}",
        if args.wire { "wire " } else { "direct " },
        tally.attempts_per_s(),
        backlog >> 20,
        drain.as_secs_f64(),
        latency.quantile_us(0.5),
        latency.quantile_us(0.99),
        latency.quantile_us(0.999),
        warm.shares().iter().map(|share| (share * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
        stats.memory_bytes >> 20,
        stats.instances,
        group_row.flash_hits,
        group_row.promotions,
        group_row.backend_loads,
        group_row.demotions,
        group_row.dirty_demotions,
        store.flash_records,
        store.durable_records,
        store.index_bytes,
        store.read_p50_us.map(|v| v.round()),
        store.read_p99_us.map(|v| v.round()),
        store.write_amplification.map(|v| (v * 100.0).round() / 100.0),
        group_row.hot_rows,
        group_row.warm_rows,
        group_row.cold_rows,
    );
    Ok(())
}

/// Seconds of one warm-up window, and how many run at most.
const WARM_WINDOW_SECONDS: u64 = 10;
const WARM_WINDOWS_MAX: usize = 12;

/// The tier's row for the (only) group.
fn group_tier_row(cache: &pgtier_cache::Cache) -> pgtier_cache::TierInfo {
    cache.tier_stats().into_iter().find(|r| r.group.is_some()).unwrap_or_default()
}

/// Misses in memory served so far, by flash or by PostgreSQL.
fn misses_served(cache: &pgtier_cache::Cache) -> u64 {
    let row = group_tier_row(cache);
    row.flash_hits + row.backend_loads
}

/// Waits (at most two minutes) until write-through has propagated
/// everything committed so far; how long that took, or an error when it
/// did not catch up (then no sustained figure exists to print).
fn awt_drained(cache: &pgtier_cache::Cache) -> Result<Duration> {
    write_through_drained(cache, Duration::from_secs(120), &|| false)
        .ok_or_else(|| "write-through did not catch up within 120 s".into())
}
