//! `pgtier demo`: study 000 end to end (pgtier_bench::demo does the work).
//! This layer owns what a library must not: the private PostgreSQL, the
//! in-process wire server, the Ctrl-C handler and the exit status.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::demo::{self, AwtConfig, DemoControl, DemoError, DemoOptions, DemoReport, StartWire, WireServer};
use pgtier_engine::CommitMode;

use crate::bench_cmd::{CommitArg, parse_thread_list, seconds};

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DemoArgs {
    #[command(subcommand)]
    command: Option<DemoCommand>,
    /// Subscribers populated in PostgreSQL
    #[arg(long, value_name = "N", default_value_t = 500_000)]
    subscribers: u64,
    /// Subscribers cached (ids 1..=N) and targeted by every run [default: --cached-fraction of --subscribers]
    #[arg(long, value_name = "N")]
    cached_subscribers: Option<u64>,
    /// Share of the subscribers cached when --cached-subscribers is not given (study 000's Use Case 1: 16 %)
    #[arg(long, value_name = "F", default_value_t = 0.16)]
    cached_fraction: f64,
    /// Thread counts of the sweeps
    #[arg(long, value_name = "LIST", default_value = "1,2,4,8")]
    threads: String,
    /// Measure window per point, seconds
    #[arg(long, value_name = "S", default_value_t = 8.0)]
    duration: f64,
    /// Ramp-up before each measure window, seconds
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    ramp_up: f64,
    /// Ramp-down after each measure window, seconds
    #[arg(long, value_name = "S", default_value_t = 0.5)]
    ramp_down: f64,
    /// Measure window of one rate-search step, seconds
    #[arg(long, value_name = "S", default_value_t = 4.0)]
    search_step: f64,
    /// Most rate-search steps
    #[arg(long, value_name = "N", default_value_t = 8)]
    search_steps: u32,
    /// The capped rate is at most this share of PostgreSQL's best closed-loop throughput (open loop near 1 is mostly queueing)
    #[arg(long, value_name = "F", default_value_t = 0.5)]
    cap_fraction: f64,
    /// Runs of every side at the capped rate (the report gives their median and spread)
    #[arg(long, value_name = "N", default_value_t = 3)]
    repeats: u32,
    /// Longest wait for write-through to catch up between runs, seconds
    #[arg(long, value_name = "S", default_value_t = 120.0)]
    drain_timeout: f64,
    /// Commit mode of the cache's engine for the sweeps, the search and the wire runs: async (acknowledged before the WAL flush, which follows within 10 ms: the study's TimesTen DurableCommits=0) or sync (after fdatasync, PostgreSQL's durability); the direct capped runs are measured in both
    #[arg(long, value_enum, default_value_t = CommitArg::Async)]
    commit_mode: CommitArg,
    /// Write-through apply lanes (PostgreSQL connections) of the AWT group
    #[arg(long, value_name = "N", default_value_t = 1)]
    awt_lanes: usize,
    /// How long an AWT batch collects transactions after its first, ms (study 000: TimesTen applies a batch once about 256 KB accumulated, a few ms behind)
    #[arg(long, value_name = "MS", default_value_t = 10)]
    awt_batch_delay: u64,
    /// Report, charts and demo.json go here
    #[arg(long, value_name = "DIR", default_value = "results/demo")]
    out: PathBuf,
    /// The cache's engine directory (emptied first)
    #[arg(long, value_name = "DIR", default_value = ".pgtier/demo-engine")]
    work_dir: PathBuf,
    /// Use this PostgreSQL instead of starting a private one (its TATP tables are dropped and reloaded)
    #[arg(long, value_name = "URL", env = "PGTIER_DEMO_BACKEND", hide_env_values = true)]
    backend: Option<String>,
    /// Skip the runs over the wire
    #[arg(long)]
    no_wire: bool,
    /// Seed of population and transactions [default: a fresh one, printed]
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(clap::Subcommand)]
enum DemoCommand {
    /// The flash studies (001, 002, 003, 000's use case 2): cache size table, warm-up, DRAM vs flash, write-back, device.
    Flash(Box<crate::demo_flash_cmd::FlashArgs>),
    /// Study 004 (analytics beside OLTP): TPC-H on PostgreSQL, pgtier row path and columnar, compression, freshness, CH-benCHmark.
    Htap(Box<crate::demo_htap_cmd::HtapArgs>),
}

pub(crate) static INTERRUPT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: libc::c_int) {
    INTERRUPT.store(true, Ordering::SeqCst);
    // A second Ctrl-C ends the process at once. SAFETY: signal() is
    // async-signal-safe.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
    }
}

fn options(args: &DemoArgs) -> anyhow::Result<DemoOptions> {
    if !(args.cached_fraction > 0.0 && args.cached_fraction <= 1.0) {
        bail!("invalid --cached-fraction {}: must be in (0, 1]", args.cached_fraction);
    }
    let cached = args
        .cached_subscribers
        .unwrap_or_else(|| ((args.subscribers as f64 * args.cached_fraction).round() as u64).max(1));
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    if !(1..=64).contains(&args.awt_lanes) {
        bail!("invalid --awt-lanes {}: must be 1 to 64", args.awt_lanes);
    }
    if args.awt_batch_delay > 1000 {
        bail!("invalid --awt-batch-delay {}: must be at most 1000 ms", args.awt_batch_delay);
    }
    Ok(DemoOptions {
        subscribers: args.subscribers,
        cached_subscribers: cached,
        threads: parse_thread_list(&args.threads)?,
        ramp_up: seconds("ramp-up", args.ramp_up, true)?,
        measure: seconds("duration", args.duration, false)?,
        ramp_down: seconds("ramp-down", args.ramp_down, true)?,
        search_step: seconds("search-step", args.search_step, false)?,
        search_steps_max: args.search_steps,
        cap_fraction: args.cap_fraction,
        repeats: args.repeats,
        drain_timeout: seconds("drain-timeout", args.drain_timeout, false)?,
        commit_mode: args.commit_mode.mode(),
        awt: AwtConfig {
            // Every run's engine directory is new, so its node name is too:
            // PostgreSQL (`--backend`, used before) may hold an earlier
            // run's write-through progress, which belongs to that
            // directory and would refuse this one under the same name.
            node: format!("demo{:012x}", pgtier_bench::driver::fresh_seed() & 0xffff_ffff_ffff),
            apply_connections: args.awt_lanes,
            batch_delay: std::time::Duration::from_millis(args.awt_batch_delay),
            ..AwtConfig::default()
        },
        load_parallel: cpus.min(4),
        populate_streams: cpus + 1,
        seed: args.seed.unwrap_or_else(pgtier_bench::driver::fresh_seed),
        work_dir: args.work_dir.clone(),
        out_dir: args.out.clone(),
    })
}

/// pgtier's server in this process, over the demo's engine directory.
struct InProcessServer(pgtier_server::RunningServer);

impl WireServer for InProcessServer {
    fn url(&self) -> String {
        format!("postgresql://app@{}/app", self.0.local_addr())
    }

    fn cache(&self) -> Option<std::sync::Arc<demo::Cache>> {
        self.0.cache().cloned()
    }

    fn stop(self: Box<Self>) -> Result<(), String> {
        self.0.shutdown_checked().map_err(|e| e.to_string())
    }
}

fn start_server(dir: &Path, backend: &str, mode: CommitMode, awt: &AwtConfig) -> Result<Box<dyn WireServer>, String> {
    let mode = match mode {
        CommitMode::Sync => "sync",
        CommitMode::Async => "async",
    };
    // Loopback only, trust: the demo's own sessions are the only clients.
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {dir:?}\ncommit_mode = \"{mode}\"\nmax_connections = 1000\n\
         [auth]\nmethod = \"trust\"\n[backend]\nurl = {backend:?}\n[cache]\nmemory_budget = \"64GB\"\n\
         awt_node = {node:?}\nawt_apply_connections = {lanes}\nawt_batch_delay_ms = {delay}\n",
        node = awt.node,
        dir = dir.display().to_string(),
        lanes = awt.apply_connections,
        delay = awt.batch_delay.as_millis(),
    );
    let config = pgtier_server::ServerConfig::from_toml_str(&toml).map_err(|e| e.to_string())?;
    let server = pgtier_server::start(config).map_err(|e| e.to_string())?;
    Ok(Box::new(InProcessServer(server)))
}

/// Ctrl-C and SIGTERM set [`INTERRUPT`]; a second one ends the process.
pub(crate) fn install_interrupt_handler() {
    // SAFETY: installs an async-signal-safe handler (an atomic store and signal()).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
}

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    match args.command {
        Some(DemoCommand::Flash(flash)) => return crate::demo_flash_cmd::run(*flash),
        Some(DemoCommand::Htap(htap)) => return crate::demo_htap_cmd::run(*htap),
        None => {}
    }
    let options = options(&args)?;
    demo::check(&options)?;
    install_interrupt_handler();
    eprintln!(
        "pgtier demo: {} subscribers, {} cached, threads {}, seed {} (Ctrl-C stops and writes a partial report)",
        options.subscribers, options.cached_subscribers, args.threads, options.seed
    );
    let (cluster, url) = match &args.backend {
        Some(url) => (None, url.clone()),
        None => {
            eprintln!("pgtier demo: starting a private PostgreSQL (fsync on, synchronous_commit on)");
            let cluster =
                PrivateCluster::start(ClusterOptions::for_benchmark()).context("starting the private PostgreSQL")?;
            let url = cluster.create_database("tatp").context("creating database tatp")?;
            (Some(cluster), url)
        }
    };
    let start_wire: StartWire<'_> = &start_server;
    let control = DemoControl {
        backend_url: url,
        start_wire: if args.no_wire { None } else { Some(start_wire) },
        interrupt: &INTERRUPT,
        progress: true,
    };
    let mut report = DemoReport::default();
    let outcome = demo::run(&options, &control, &mut report);
    // The report first: whatever happened, what was measured is kept.
    let written = demo::write_report(&report, &options.out_dir);
    if let Some(cluster) = cluster {
        match cluster.stop() {
            Ok(()) => eprintln!("pgtier demo: private PostgreSQL stopped"),
            Err(e) => eprintln!("pgtier: warning: stopping the private PostgreSQL: {e}"),
        }
    }
    let (path, text) = written.context("writing the report")?;
    println!("{text}");
    eprintln!("pgtier demo: report {} (charts and demo.json beside it)", path.display());
    match outcome {
        Err(DemoError::Interrupted { phase }) => {
            eprintln!("pgtier demo: interrupted during {phase}; partial report written");
            std::process::exit(130);
        }
        Err(e) => Err(e.into()),
        Ok(()) if report.verify.as_ref().is_some_and(|v| !v.clean) => {
            bail!("verify found the cache group different from PostgreSQL (see the report's Verify section)")
        }
        Ok(()) => Ok(()),
    }
}
