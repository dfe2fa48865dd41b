//! `pgtier demo flash`: the flash studies end to end (pgtier_bench::flash_demo
//! does the work). This layer owns what a library must not: the private
//! PostgreSQL and its memory cgroup, the in-process servers, the device
//! table of `pgtier bench io`, the Ctrl-C handler and the exit status.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::flash_demo::{
    self, FlashControl, FlashError, FlashOptions, FlashReport, FlashServer, MemoryLimitFigures, PostgresLimits,
    ServerSpec,
};
use pgtier_engine::CommitMode;

use crate::bench_cmd::CommitArg;
use crate::bench_cmd::seconds;
use crate::demo_cmd::{INTERRUPT, install_interrupt_handler};

const HELP: &str = "\
What it does, in order (about 15 minutes at the defaults on 2 cores):
  1. starts a private PostgreSQL (fsync on) and populates TATP;
  2. restarts it in a memory cgroup of pgtier's DRAM budget plus --postgres-headroom,
     shared_buffers a quarter of the budget, and drops its files from the page cache: the fair
     baseline (PostgreSQL alone with the memory pgtier's DRAM has, page cache included);
  3. study 003: TATP against PostgreSQL alone, then against pgtier with DRAM + flash at each --sizes
     share of the data, over the wire and in direct mode (embedded), the tier resized online from the
     largest size down; the gain per size beside the study's 2.4x/3.2x/4.6x/5.2x;
  4. the warm-up curve: the tier enabled online (ALTER CACHE TIER ENABLE) while the load runs;
  5. study 000 use case 2: all subscribers in DRAM against a fifth in DRAM with flash under it;
  6. study 002: write-back against clean flash under TATP's two updates by key;
  7. `pgtier bench io`'s device table (fio beside it when installed);
every measure follows a warm-up that runs until the share of transactions missing memory is
steady; after every pgtier run: write-through drained, VERIFY CACHE GROUP, and subscribers read back
through the cache compared row by row with PostgreSQL's. Exit status 1 when a check differs.

Ctrl-C stops the current run, writes the partial report and stops PostgreSQL.

Examples:
  pgtier demo flash                                   # the defaults
  pgtier demo flash --subscribers 50000 --duration 5 --warm 3 --sizes 10,40   # a quick look";

#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct FlashArgs {
    /// Subscribers populated in PostgreSQL
    #[arg(long, value_name = "N", default_value_t = 300_000)]
    subscribers: u64,
    /// pgtier's DRAM budget in % of PostgreSQL's size of the data (study 003: 62 GB RAM beside 1.2 TB)
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    dram_percent: f64,
    /// Cache sizes (DRAM + flash) in % of the data, study 003's Table 3
    #[arg(long, value_name = "LIST", default_value = "10,20,40,60")]
    sizes: String,
    /// Closed-loop sessions of every run
    #[arg(long, value_name = "N", default_value_t = 8)]
    threads: u32,
    /// Warm-up window, seconds: before each measure, unmeasured windows run until the share of transactions missing memory moves less than 5 % between two (at most 12 windows; 0: no warm-up)
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    warm: f64,
    /// Measure window of each run, seconds
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    duration: f64,
    /// Load before the tier is enabled in the warm-up curve, seconds
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    curve_lead: f64,
    /// Load after the tier is enabled in the warm-up curve, seconds
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    curve_after: f64,
    /// Use case 2's DRAM budget in % of all instances (20: TATP over 5x the DRAM budget)
    #[arg(long, value_name = "PCT", default_value_t = 20.0)]
    uc2_dram_percent: f64,
    /// PostgreSQL's memory limit is the DRAM budget plus its processes' memory (measured under load) plus this, for the connections pgtier's runs add
    #[arg(long, value_name = "SIZE", default_value = "48MB")]
    postgres_headroom: String,
    /// Commit mode of pgtier's engine (async: acknowledged before the WAL flush, which follows within 10 ms)
    #[arg(long, value_enum, default_value_t = CommitArg::Async)]
    commit_mode: CommitArg,
    /// Hold PostgreSQL's reads from its disk to N a second during study 003's runs (baseline, sizes, warm-up), standing in for the study's slower primary storage (spinning disks); pgtier's flash file is not held, and the ceiling is lifted before use case 2 and study 002. Needs root (a block I/O cgroup) [default: the disk as it is]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    primary_read_iops: Option<u64>,
    /// Subscribers read back through the cache and compared with PostgreSQL after each pgtier run
    #[arg(long, value_name = "N", default_value_t = 1000)]
    read_check: u64,
    /// Report, charts and flash.json go here
    #[arg(long, value_name = "DIR", default_value = "results/demo-flash")]
    out: PathBuf,
    /// The engines' directories and the flash files (emptied first)
    #[arg(long, value_name = "DIR", default_value = ".pgtier/demo-flash")]
    work_dir: PathBuf,
    /// Use this PostgreSQL instead of starting a private one (its TATP tables are dropped and reloaded; its memory is not limited)
    #[arg(long, value_name = "URL", env = "PGTIER_DEMO_BACKEND", hide_env_values = true)]
    backend: Option<String>,
    /// Skip `pgtier bench io`'s device table
    #[arg(long)]
    no_io: bool,
    /// Seed of population and transactions [default: a fresh one, printed]
    #[arg(long)]
    seed: Option<u64>,
}

fn percent(name: &str, value: f64) -> anyhow::Result<f64> {
    if !(value > 0.0 && value <= 400.0) {
        bail!("invalid --{name} {value}: a percentage above 0 and at most 400");
    }
    Ok(value / 100.0)
}

fn options(args: &FlashArgs) -> anyhow::Result<FlashOptions> {
    let sizes = args
        .sizes
        .split(',')
        .map(|s| {
            let value: f64 = s.trim().parse().with_context(|| format!("invalid --sizes entry {s:?}: a percentage"))?;
            percent("sizes", value)
        })
        .collect::<anyhow::Result<Vec<f64>>>()?;
    let headroom = pgtier_cache::CreateGroup::parse_memory_size(&args.postgres_headroom)
        .map_err(|e| anyhow::anyhow!("invalid --postgres-headroom: {e}"))?;
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let options = FlashOptions {
        subscribers: args.subscribers,
        dram_fraction: percent("dram-percent", args.dram_percent)?,
        sizes,
        threads: args.threads,
        warm: seconds("warm", args.warm, true)?,
        measure: seconds("duration", args.duration, false)?,
        curve_lead: seconds("curve-lead", args.curve_lead, false)?,
        curve_after: seconds("curve-after", args.curve_after, false)?,
        uc2_dram_share: percent("uc2-dram-percent", args.uc2_dram_percent)?,
        postgres_headroom_bytes: headroom,
        commit_mode: args.commit_mode.mode(),
        primary_read_iops: args.primary_read_iops,
        read_check: args.read_check,
        seed: args.seed.unwrap_or_else(pgtier_bench::driver::fresh_seed),
        populate_streams: cpus + 1,
        // Absolute: the servers resolve a relative flash file against their
        // own data directories.
        work_dir: std::path::absolute(&args.work_dir)
            .with_context(|| format!("resolving --work-dir {}", args.work_dir.display()))?,
        out_dir: args.out.clone(),
    };
    options.check()?;
    Ok(options)
}

/// A pgtier server in this process over one run's directory.
struct InProcessServer(pgtier_server::RunningServer);

impl FlashServer for InProcessServer {
    fn url(&self) -> String {
        format!("postgresql://app@{}/app", self.0.local_addr())
    }

    fn cache(&self) -> Arc<pgtier_cache::Cache> {
        // start_server refuses a server without a cache.
        self.0.cache().cloned().unwrap_or_else(|| unreachable!("checked at start"))
    }

    fn database(&self) -> pgtier_engine::Database {
        self.0.database().clone()
    }

    fn stop(self: Box<Self>) -> Result<(), String> {
        self.0.shutdown_checked().map_err(|e| e.to_string())
    }
}

fn start_server(spec: &ServerSpec) -> Result<Box<dyn FlashServer>, String> {
    let mode = match spec.commit_mode {
        CommitMode::Sync => "sync",
        CommitMode::Async => "async",
    };
    // Loopback only, trust: the demo's own sessions are the only clients.
    let mut toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {dir:?}\ncommit_mode = \"{mode}\"\nmax_connections = 300\n\
         [auth]\nmethod = \"trust\"\n[backend]\nurl = {backend:?}\n[cache]\nmemory_budget = \"{budget}kB\"\n\
         aging_interval_ms = 1000\nawt_node = {node:?}\n",
        dir = spec.dir.join("db").display().to_string(),
        backend = spec.backend_url,
        budget = (spec.memory_budget >> 10).max(1),
        node = spec.node,
    );
    if let Some((size, region, write_back)) = spec.tier {
        toml.push_str(&format!(
            "[tier]\npath = {path:?}\nsize = \"{size}kB\"\nregion_size = \"{region}kB\"\nadmission = \"all\"\nmode = \"{mode}\"\n",
            path = spec.dir.join("flash.tier").display().to_string(),
            size = size >> 10,
            region = region >> 10,
            mode = if write_back { "write-back" } else { "clean" },
        ));
    }
    let config = pgtier_server::ServerConfig::from_toml_str(&toml).map_err(|e| e.to_string())?;
    let server = pgtier_server::start(config).map_err(|e| e.to_string())?;
    if server.cache().is_none() {
        let _ = server.shutdown_checked();
        return Err("the server started without a cache".into());
    }
    Ok(Box::new(InProcessServer(server)))
}

/// The private cluster's memory limit: a cgroup, then a restart so that
/// every page PostgreSQL touches from then on is charged inside, then its
/// files dropped from the page cache (the population's pages).
struct ClusterLimiter<'a>(&'a mut PrivateCluster, String);

impl ClusterLimiter<'_> {
    fn restart_limited(&mut self, bytes: u64, shared_buffers: &str) -> anyhow::Result<()> {
        let mut client = pgtier_backend::connect::connect(&self.1)?;
        // One statement each: ALTER SYSTEM refuses a transaction block,
        // which a multi-statement simple query is.
        client.batch_execute(&format!("ALTER SYSTEM SET shared_buffers = '{shared_buffers}'"))?;
        client.batch_execute(&format!("ALTER SYSTEM SET effective_cache_size = '{}kB'", bytes >> 10))?;
        // Per sort or hash, per backend: the benchmark's 16MB would let a
        // few sessions' plans reach the limit and be killed by the kernel;
        // the benchmark's 64MB of WAL buffers are shared memory the limit
        // counts (PostgreSQL's own default is a 32nd of shared_buffers).
        client.batch_execute("ALTER SYSTEM SET work_mem = '4MB'")?;
        client.batch_execute("ALTER SYSTEM SET wal_buffers = '4MB'")?;
        drop(client);
        self.0.limit_memory(bytes);
        self.0.stop_fast()?;
        self.0.restart()?;
        self.0.checkpoint_and_evict_page_cache()?;
        Ok(())
    }
}

impl PostgresLimits for ClusterLimiter<'_> {
    fn limit(&mut self, bytes: u64, shared_buffers: &str) -> MemoryLimitFigures {
        let restarted = self.restart_limited(bytes, shared_buffers);
        let mut figures = self.read();
        figures.shared_buffers = shared_buffers.to_owned();
        if let Err(e) = restarted {
            figures.unavailable = Some(format!("{e:#}"));
            figures.limit_bytes = None;
        }
        figures
    }

    fn set_limit(&mut self, bytes: u64) -> Result<(), String> {
        match self.0.memory_limit_mut() {
            Some(cgroup) => cgroup.set_limit(bytes).map_err(|e| e.to_string()),
            None => Err("no memory cgroup".into()),
        }
    }

    fn read(&self) -> MemoryLimitFigures {
        match self.0.memory_limit() {
            Ok(Some(cgroup)) => MemoryLimitFigures {
                limit_bytes: Some(cgroup.limit_bytes()),
                page_cache_bytes: cgroup.page_cache_bytes(),
                usage_bytes: cgroup.usage_bytes(),
                peak_bytes: cgroup.peak_bytes(),
                limit_hits: cgroup.limit_hits(),
                ..MemoryLimitFigures::default()
            },
            Ok(None) => MemoryLimitFigures { unavailable: Some("no limit was asked for".into()), ..Default::default() },
            Err(why) => MemoryLimitFigures { unavailable: Some(why.to_owned()), ..Default::default() },
        }
    }

    fn throttle_reads(&mut self, read_iops: u64) -> Result<String, String> {
        self.0.throttle_reads(read_iops).map(|throttle| throttle.disk().to_string()).map_err(|e| e.to_string())
    }

    fn lift_read_ceiling(&mut self) {
        self.0.lift_read_ceiling();
    }
}

pub fn run(args: FlashArgs) -> anyhow::Result<()> {
    let options = options(&args)?;
    install_interrupt_handler();
    eprintln!(
        "pgtier demo flash: {} subscribers, DRAM {} % of the data, sizes {}, {} sessions, seed {} (Ctrl-C stops and writes a partial report)",
        options.subscribers, args.dram_percent, args.sizes, options.threads, options.seed
    );
    std::fs::create_dir_all(&options.work_dir).with_context(|| format!("creating {}", options.work_dir.display()))?;
    let (mut cluster, url) = match &args.backend {
        Some(url) => (None, url.clone()),
        None => {
            eprintln!("pgtier demo flash: starting a private PostgreSQL (fsync on, synchronous_commit on)");
            let cluster =
                PrivateCluster::start(ClusterOptions::for_benchmark()).context("starting the private PostgreSQL")?;
            let url = cluster.create_database("tatp").context("creating database tatp")?;
            (Some(cluster), url)
        }
    };
    let mut report = FlashReport::default();
    let outcome = {
        let mut limiter = cluster.as_mut().map(|c| ClusterLimiter(c, url.clone()));
        let mut control = FlashControl {
            backend_url: url.clone(),
            start_server: &start_server,
            limiter: limiter.as_mut().map(|l| l as &mut dyn PostgresLimits),
            interrupt: &INTERRUPT,
            progress: true,
        };
        flash_demo::run(&options, &mut control, &mut report)
    };
    if outcome.is_ok() && !args.no_io {
        eprintln!("pgtier demo flash: the device table (pgtier bench io, fio beside it when installed)");
        match io_table(&options.work_dir, &options.out_dir) {
            Ok((table, notes)) => {
                report.io_table = Some(format!("```\n{table}\n```"));
                report.io_notes = notes;
            }
            Err(e) => report.io_notes = vec![format!("not measured: {e:#}")],
        }
    }
    // The report first: whatever happened, what was measured is kept.
    let written = flash_demo::write_report(&report, &options.out_dir);
    if let Some(cluster) = cluster {
        match cluster.stop() {
            Ok(()) => eprintln!("pgtier demo flash: private PostgreSQL stopped"),
            Err(e) => eprintln!("pgtier: warning: stopping the private PostgreSQL: {e}"),
        }
    }
    let _ = std::fs::remove_dir_all(&options.work_dir);
    let (path, text) = written.context("writing the report")?;
    println!("{text}");
    eprintln!("pgtier demo flash: report {} (charts and flash.json beside it)", path.display());
    match outcome {
        Err(FlashError::Interrupted { phase }) => {
            eprintln!("pgtier demo flash: interrupted during {phase}; partial report written");
            std::process::exit(130);
        }
        Err(e) => Err(e.into()),
        Ok(()) if !report.checks_clean() => {
            // Also here, not only in the report: a CI log keeps stderr.
            for side in &report.sides {
                let Some(c) = side.check.as_ref().filter(|c| !c.clean) else { continue };
                eprintln!(
                    "pgtier demo flash: check of {}: drained {}, VERIFY {} compared / {} differing, read {} checked / {} differing / {} failed",
                    side.label,
                    c.drained,
                    c.verified,
                    c.verify_differing,
                    c.read_checked,
                    c.read_differing,
                    c.read_failed
                );
                for d in &c.differences {
                    eprintln!("  {d}");
                }
            }
            bail!("a check found the cache different from PostgreSQL (see the report's checks section)")
        }
        Ok(()) => Ok(()),
    }
}

fn io_table(work_dir: &Path, out_dir: &Path) -> anyhow::Result<(String, Vec<String>)> {
    let file = work_dir.join("io.bench");
    let table = crate::io_cmd::device_table(&file, &out_dir.join("io"));
    let _ = std::fs::remove_file(&file);
    table
}
