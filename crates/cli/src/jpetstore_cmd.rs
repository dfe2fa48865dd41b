//! `pgtier bench jpetstore`: study 001's JPetStore-shaped OLTP swept over
//! search range × threads on PostgreSQL alone and on pgtier with and
//! without the flash tier; a table per point, the crossover, a check of the
//! answers against PostgreSQL, and the result as JSON
//! (crates/bench/src/jpetstore).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use pgtier_bench::driver;
use pgtier_bench::jpetstore::population::{self, SCALE_MAX};
use pgtier_bench::jpetstore::transactions::TxnType;
use pgtier_bench::jpetstore::{self, CacheConfig, CacheOpener, Direct, OpenedCache, Report, Side, SweepConfig};
use pgtier_bench::target::DbError;
use pgtier_bench::targets::postgres::PgTarget;
use pgtier_engine::CommitMode;

use crate::bench_cmd::{CommitArg, parse_thread_list, seconds, url_or_managed};

/// Scale `--populate` loads when `--scale` is not given: 10,000 items.
const DEFAULT_SCALE: u64 = 100;

/// Every argument is checked by clap while parsing, so a bad one is a
/// usage error: one line and exit status 2, before anything connects.
#[derive(clap::Args)]
pub struct JpetstoreArgs {
    /// PostgreSQL URL [default: $PGTIER_BENCH_URL, else the cluster of `pgtier backend start`]
    #[arg(long, env = "PGTIER_BENCH_URL", hide_env_values = true)]
    url: Option<String>,
    /// Drop, recreate and load the JPetStore tables before running
    #[arg(long)]
    populate: bool,
    /// Populate (with --populate) and exit without running transactions
    #[arg(long, requires = "populate")]
    populate_only: bool,
    /// Size with --populate: per unit 1 category, 25 products, 100 items (with inventory), 50 accounts [default: 100]
    #[arg(long, value_name = "N", requires = "populate",
          value_parser = clap::value_parser!(u64).range(1..=SCALE_MAX))]
    scale: Option<u64>,
    /// Search ranges to sweep: % of the items (with their products and inventory) the transactions touch
    #[arg(long, value_name = "LIST", default_value = "10,25,50,100", value_parser = ranges)]
    search_range: Ranges,
    /// Thread counts to sweep, one client connection per thread
    #[arg(long, value_name = "LIST", default_value = "1,2,4,8", value_parser = threads)]
    threads: Threads,
    /// Sides to run: postgresql, pgtier, pgtier-flash
    #[arg(long, value_name = "LIST", default_value = "postgresql,pgtier,pgtier-flash", value_parser = sides)]
    sides: Sides,
    /// Measure window per point, seconds
    #[arg(long, value_name = "S", allow_negative_numbers = true, default_value = "10", value_parser = window)]
    duration: Duration,
    /// Unmeasured warm-up on each side and search range before its first point (largest thread count), seconds
    #[arg(long, value_name = "S", allow_negative_numbers = true, default_value = "5", value_parser = pause)]
    warmup: Duration,
    /// Ramp-up before each measure window, seconds
    #[arg(long, value_name = "S", allow_negative_numbers = true, default_value = "3", value_parser = pause)]
    ramp_up: Duration,
    /// Ramp-down after each measure window, seconds
    #[arg(long, value_name = "S", allow_negative_numbers = true, default_value = "0.5", value_parser = pause)]
    ramp_down: Duration,
    /// Open loop: total transactions/s over all threads, latency from the intended start [default: closed loop]
    #[arg(long, value_name = "TXN_PER_S", allow_negative_numbers = true, value_parser = rate)]
    rate: Option<f64>,
    /// Memory budget of the item group: a size (64m, 512k) or a share of the whole item group (25%)
    #[arg(long, value_name = "SIZE|N%", default_value = "25%", value_parser = budget)]
    memory_budget: Budget,
    /// Size of the flash tier file of pgtier-flash, a multiple of 4k [default: twice the item group, at least 256m]
    #[arg(long, value_name = "SIZE", value_parser = flash_size)]
    flash_size: Option<u64>,
    /// Run pgtier sides behind an in-process pgtier server, the workload its PostgreSQL clients [default: direct mode, the engine in-process]
    #[arg(long)]
    wire: bool,
    /// Commit mode of pgtier: sync (after WAL fsync) or async (WAL buffer)
    #[arg(long, value_enum, default_value_t = CommitArg::Sync)]
    commit_mode: CommitArg,
    /// Where pgtier sides keep their data directories and flash files (removed after each side) [default: a temporary directory]
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Write the result file (JSON)
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Seed of the transactions' random choices [default: a fresh one, printed]
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
struct Ranges(Vec<u32>);
#[derive(Clone, Debug, PartialEq)]
struct Threads(Vec<u32>);
#[derive(Clone, Debug, PartialEq)]
struct Sides(Vec<Side>);
/// `--memory-budget`: bytes, or a share of the whole item group.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Budget {
    Bytes(u64),
    Share(f64),
}

fn ranges(list: &str) -> Result<Ranges, String> {
    list.split(',')
        .map(|entry| {
            let entry = entry.trim().trim_end_matches('%');
            match entry.parse::<u32>() {
                Ok(n) if (1..=100).contains(&n) => Ok(n),
                _ => Err(format!("'{entry}' is not a percentage from 1 to 100 (expected e.g. 10,25,50,100)")),
            }
        })
        .collect::<Result<_, _>>()
        .map(Ranges)
}

fn threads(list: &str) -> Result<Threads, String> {
    // The shared parser names the flag; clap's line names it already.
    let prefix = format!("invalid --threads '{list}': ");
    parse_thread_list(list).map(Threads).map_err(|e| e.to_string().trim_start_matches(&prefix).to_owned())
}

fn sides(list: &str) -> Result<Sides, String> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim) {
        let side =
            Side::parse(name).ok_or_else(|| format!("'{name}' is not a side (postgresql, pgtier, pgtier-flash)"))?;
        if !out.contains(&side) {
            out.push(side);
        }
    }
    Ok(Sides(out))
}

fn budget(text: &str) -> Result<Budget, String> {
    if let Some(percent) = text.trim().strip_suffix('%') {
        return match percent.trim().parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 1000.0 => Ok(Budget::Share(p / 100.0)),
            _ => Err("the share must be more than 0 % (e.g. 25%)".to_owned()),
        };
    }
    match pgtier_bench::io::spec::parse_bytes(text)? {
        0 => Err("the budget must be more than 0".to_owned()),
        bytes => Ok(Budget::Bytes(bytes)),
    }
}

fn flash_size(text: &str) -> Result<u64, String> {
    pgtier_bench::io::spec::parse_size(text)
}

fn window(text: &str) -> Result<Duration, String> {
    let value: f64 = text.trim().parse().map_err(|_| format!("'{text}' is not a number of seconds"))?;
    seconds("duration", value, false).map_err(|e| e.to_string())
}

fn pause(text: &str) -> Result<Duration, String> {
    let value: f64 = text.trim().parse().map_err(|_| format!("'{text}' is not a number of seconds"))?;
    seconds("ramp", value, true).map_err(|_| format!("{value} must be 0 or more seconds"))
}

fn rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 1.0 => Ok(r),
        _ => Err("must be at least 1 transaction/s (omit it for closed loop)".to_owned()),
    }
}

pub fn run(args: JpetstoreArgs) -> anyhow::Result<()> {
    let (memory_budget, budget_fraction) = match args.memory_budget {
        Budget::Bytes(bytes) => (Some(bytes), 0.0),
        Budget::Share(share) => (None, share),
    };
    let url = url_or_managed(args.url.as_deref())?;
    let seed = args.seed.unwrap_or_else(driver::fresh_seed);

    if args.populate {
        let scale = args.scale.unwrap_or(DEFAULT_SCALE);
        let target = PgTarget::open(&url)?;
        let report = population::populate(&target, scale)?;
        let s = report.sizes;
        println!(
            "Population: scale {scale}: {} categories, {} products, {} items with inventory, {} accounts ({:.1} s)",
            s.categories,
            s.products,
            s.items,
            s.accounts,
            report.total.as_secs_f64()
        );
        if args.populate_only {
            return Ok(());
        }
    }

    let temp;
    let work_dir = match &args.work_dir {
        Some(dir) => dir.clone(),
        None => {
            temp = crate::bench_cmd::TempDir::new("jpetstore")?;
            temp.0.clone()
        }
    };
    let config = SweepConfig {
        url,
        search_ranges: args.search_range.0,
        threads: args.threads.0,
        sides: args.sides.0,
        ramp_up: args.ramp_up,
        measure: args.duration,
        ramp_down: args.ramp_down,
        warmup: args.warmup,
        rate_per_s: args.rate,
        seed,
        memory_budget,
        budget_fraction,
        flash_size: args.flash_size,
        commit_mode: args.commit_mode.mode(),
        work_dir,
    };
    let names = TxnType::NAMES;
    let mix: Vec<String> = names.iter().zip(TxnType::MIX_PERCENT).map(|(n, p)| format!("{n} {p} %")).collect();
    println!("JPetStore (study 001): mix {}; seed {seed}", mix.join(", "));
    println!("Deviations:");
    for line in jpetstore::deviations(config.rate_per_s.is_some()) {
        println!("  - {line}");
    }
    let opener: &dyn CacheOpener = if args.wire { &Wire } else { &Direct };
    println!("pgtier sides: {} mode, commit {:?}", opener.mode(), config.commit_mode);
    let result = jpetstore::run_sweep(&config, opener, &mut |event| match event {
        Report::Note(line) => println!("{line}"),
        Report::Point(point) => print!("{}", jpetstore::format_point(point)),
        Report::Check(_) => {}
    })?;
    println!(
        "\nscale {}: {} products, {} items; item group {} KiB in memory when all cached; budget {} KiB",
        result.scale,
        result.products,
        result.items,
        result.item_group_bytes.map_or("-".to_owned(), |b| (b >> 10).to_string()),
        result.memory_budget_bytes.map_or("-".to_owned(), |b| (b >> 10).to_string()),
    );
    print!("{}", jpetstore::format_summary(&result));
    if let Some(path) = &args.json {
        jpetstore::write_json(&result, path).with_context(|| format!("writing {}", path.display()))?;
        println!("result file: {}", path.display());
    }
    if !result.all_clean() {
        bail!("the answers are dirty: PostgreSQL does not hold what the run committed (see the checks above)");
    }
    Ok(())
}

fn failed(what: &'static str) -> impl Fn(pgtier_server::ServerError) -> DbError {
    move |e| DbError::new(None, format!("{what}: {e}"))
}

/// pgtier sides behind an in-process server (`pgtier serve`, trust auth on
/// loopback): the workload's sessions are PostgreSQL clients of it, the
/// groups are created on its cache directly.
struct Wire;

impl CacheOpener for Wire {
    fn mode(&self) -> &'static str {
        "wire"
    }

    fn open(&self, dir: &Path, config: CacheConfig, commit: CommitMode, url: &str) -> Result<OpenedCache, DbError> {
        let commit = if commit == CommitMode::Sync { "sync" } else { "async" };
        let mut toml = format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\ncommit_mode = \"{commit}\"\nmax_connections = 200\n\
             [auth]\nmethod = \"trust\"\n[backend]\nurl = {url:?}\n[cache]\nawt_node = {:?}\n",
            dir.join("db").display().to_string(),
            config.awt.node,
        );
        if let Some(tier) = &config.tier {
            toml.push_str(&format!(
                "[tier]\npath = {:?}\nsize = \"{}MB\"\nadmission = \"all\"\n",
                tier.path.display().to_string(),
                tier.size >> 20
            ));
        }
        let server_config = pgtier_server::ServerConfig::from_toml_str(&toml).map_err(failed("server config"))?;
        let server = pgtier_server::start(server_config).map_err(failed("starting the server"))?;
        let cache = server.cache().cloned().ok_or_else(|| DbError::new(None, "the server runs no cache"))?;
        let target = PgTarget::open(&format!("postgresql://bench@{}/pgtier", server.local_addr()))
            .map_err(|e| DbError::new(Some("08001"), e.to_string()))?;
        Ok(OpenedCache {
            cache,
            target: Box::new(target),
            close: Box::new(move || server.shutdown_checked().map_err(failed("stopping the server"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_budgets() {
        assert_eq!(ranges("10,25%,100"), Ok(Ranges(vec![10, 25, 100])));
        assert!(ranges("0").is_err() && ranges("101").is_err() && ranges("a").is_err());
        assert_eq!(sides("pgtier,postgresql,pgtier"), Ok(Sides(vec![Side::Pgtier, Side::PostgreSql])));
        assert!(sides("oracle").is_err());
        assert_eq!(budget("25%"), Ok(Budget::Share(0.25)));
        assert_eq!(budget("4m"), Ok(Budget::Bytes(4 << 20)));
        assert!(budget("0").is_err() && budget("x%").is_err());
    }
}
