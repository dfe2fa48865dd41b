//! `pgtier bench tatp`: the TATP (HLR) benchmark with the knobs of study
//! 000's HLR tool — population size, targeted id range, a thread-count sweep,
//! an optional rate cap (open loop), ramp-up / measure / ramp-down,
//! repetitions — printing a table per iteration and writing JSON, CSV and
//! charts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::ValueEnum;
use pgtier_backend::managed;
use pgtier_bench::driver::Workload;
use pgtier_bench::driver::{self, LiveCounters, LoadSpec, RepetitionTally};
use pgtier_bench::progress::RunProgress;
use pgtier_bench::report::{self, PopulationSummary, RunFile, TatpExtras};
use pgtier_bench::result::{RunConfig, RunResult};
use pgtier_bench::target::Target;
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::targets::postgres::{ClientKind, CopyFormat, PgTarget};
use pgtier_bench::tatp::population::{self, PopulateOptions};
use pgtier_bench::tatp::random::SubscriberKeys;
use pgtier_bench::tatp::transactions::TxnType;
use pgtier_bench::tatp::{self, RoutedTatpWorkload, RunFacts, TatpWorkload};

/// Subscribers loaded by `--populate` when `--subscribers` is not given.
const DEFAULT_SUBSCRIBERS: u64 = 100_000;
/// Longest thread list / most threads accepted (bounds memory and sessions).
const THREADS_MAX: u32 = 1024;

#[derive(clap::Args)]
pub struct TatpArgs {
    /// Target PostgreSQL URL [default: $PGTIER_BENCH_URL, else the cluster of `pgtier backend start`]
    #[arg(long, env = "PGTIER_BENCH_URL", hide_env_values = true)]
    url: Option<String>,
    /// Run against the embedded engine in this process instead of PostgreSQL: `embedded:<dir>`
    #[arg(long, value_name = "embedded:DIR", conflicts_with = "url")]
    target: Option<String>,
    /// Route over pgtier's node partitions: read the map of --shard-group
    /// from this PostgreSQL (pgtier.node_partitions) and send each
    /// transaction to the node owning its subscriber (--url gives the user,
    /// password and database; each node's host:port comes from the map).
    /// Needs --subscribers (a node cannot count every subscriber)
    #[arg(long, value_name = "POSTGRES_URL", requires = "subscribers", conflicts_with_all = ["target", "populate"])]
    shard_map: Option<String>,
    /// The cache group whose node partitions --shard-map reads
    #[arg(long, default_value = "tatp", requires = "shard_map")]
    shard_group: String,
    /// Commit mode of the embedded target: sync (after WAL fsync) or async (WAL buffer)
    #[arg(long, value_enum, default_value_t = CommitArg::Sync)]
    commit_mode: CommitArg,
    /// Number of subscribers (population size) [default with --populate: 100000; without: what the database holds]
    #[arg(long, value_name = "N")]
    subscribers: Option<u64>,
    /// Drop, recreate and load the TATP tables before running
    #[arg(long)]
    populate: bool,
    /// Populate (with --populate) and exit without running transactions
    #[arg(long, requires = "populate")]
    populate_only: bool,
    /// Smallest subscriber id transactions target [default: 1]
    #[arg(long, value_name = "ID")]
    min_id: Option<u64>,
    /// Largest subscriber id transactions target [default: --subscribers]
    #[arg(long, value_name = "ID")]
    max_id: Option<u64>,
    /// Thread counts to sweep, one client connection per thread
    #[arg(long, value_name = "LIST", default_value = "1,2,4,8,16")]
    threads: String,
    /// Open loop: total transactions/s over all threads, Poisson arrivals, latency from the intended start [default: closed loop]
    #[arg(long, value_name = "TXN_PER_S", allow_negative_numbers = true)]
    rate: Option<f64>,
    /// Measure window per iteration, seconds
    #[arg(long, value_name = "S", allow_negative_numbers = true, default_value_t = 60.0)]
    duration: f64,
    /// Ramp-up before the measure window, seconds
    #[arg(long, value_name = "S", allow_negative_numbers = true, default_value_t = 10.0)]
    ramp_up: f64,
    /// Ramp-down after the measure window, seconds
    #[arg(long, value_name = "S", allow_negative_numbers = true, default_value_t = 5.0)]
    ramp_down: f64,
    /// Repetitions per thread count (averaged; spread shown)
    #[arg(long, value_name = "N", default_value_t = 1)]
    repetitions: u32,
    /// Uniform subscriber keys instead of the spec's NURand (not comparable)
    #[arg(long)]
    uniform: bool,
    /// Print and write per-thread figures
    #[arg(long)]
    per_thread: bool,
    /// Write one CSV row per iteration x transaction (and per thread with --per-thread)
    #[arg(long, value_name = "PATH")]
    csv: Option<PathBuf>,
    /// Write the result file (JSON)
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Short name of this run in charts and comparisons
    #[arg(long, default_value = "postgresql")]
    label: String,
    /// Draw PNG and SVG charts into this directory
    #[arg(long, value_name = "DIR")]
    charts: Option<PathBuf>,
    /// Seed of every random choice (population and transactions) [default: a fresh one, printed]
    #[arg(long)]
    seed: Option<u64>,
    /// Parallel COPY streams for --populate [default: CPUs + 1]
    #[arg(long, value_name = "N")]
    load_streams: Option<usize>,
    /// COPY format for --populate
    #[arg(long, value_enum, default_value_t = CopyArg::Binary)]
    copy_format: CopyArg,
    /// Client library of the measured sessions: the built-in blocking protocol client, or the `postgres` crate
    #[arg(long, value_enum, default_value_t = ClientArg::Native)]
    client: ClientArg,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum CommitArg {
    Sync,
    Async,
}

impl CommitArg {
    pub fn mode(self) -> pgtier_engine::CommitMode {
        match self {
            CommitArg::Sync => pgtier_engine::CommitMode::Sync,
            CommitArg::Async => pgtier_engine::CommitMode::Async,
        }
    }
}

/// The system under test: PostgreSQL by URL, or the engine in-process.
pub(crate) enum Chosen {
    Pg(PgTarget),
    Embedded(EmbeddedTarget),
}

impl Chosen {
    pub(crate) fn target(&self) -> &dyn Target {
        match self {
            Chosen::Pg(t) => t,
            Chosen::Embedded(t) => t,
        }
    }

    fn server_settings(&self) -> anyhow::Result<Vec<(String, String)>> {
        match self {
            Chosen::Pg(t) => Ok(t.server_settings()?),
            Chosen::Embedded(t) => Ok(vec![(
                "commit_mode".to_owned(),
                match t.commit_mode() {
                    pgtier_engine::CommitMode::Sync => "sync",
                    pgtier_engine::CommitMode::Async => "async",
                }
                .to_owned(),
            )]),
        }
    }

    /// How population writes rows, for the report.
    fn load_format(&self) -> &'static str {
        match self {
            Chosen::Pg(t) => match t.copy_format() {
                CopyFormat::Text => "text",
                CopyFormat::Binary => "binary",
            },
            Chosen::Embedded(_) => "engine insert",
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum ClientArg {
    Native,
    PostgresCrate,
}

#[derive(Clone, Copy, ValueEnum)]
enum CopyArg {
    Text,
    Binary,
}

/// Parses "1,2,4" into thread counts; every entry a whole number ≥ 1.
pub fn parse_thread_list(list: &str) -> anyhow::Result<Vec<u32>> {
    let mut out = Vec::new();
    for (i, entry) in list.split(',').enumerate() {
        let entry = entry.trim();
        if entry.is_empty() {
            bail!("invalid --threads '{list}': entry {} is empty (expected e.g. 1,2,4,8)", i + 1);
        }
        let n: u32 = entry.parse().map_err(|_| {
            anyhow!("invalid --threads '{list}': '{entry}' is not a whole number (expected e.g. 1,2,4,8)")
        })?;
        if n == 0 {
            bail!("invalid --threads '{list}': thread counts must be at least 1");
        }
        if n > THREADS_MAX {
            bail!("invalid --threads '{list}': at most {THREADS_MAX} threads");
        }
        out.push(n);
    }
    Ok(out)
}

pub fn seconds(name: &str, value: f64, allow_zero: bool) -> anyhow::Result<Duration> {
    let ok = value.is_finite() && value >= 0.0 && (allow_zero || value > 0.0) && value < 1e7;
    if !ok {
        let need = if allow_zero { "0 or more" } else { "more than 0" };
        bail!("invalid --{name} {value}: must be {need} seconds");
    }
    Ok(Duration::from_secs_f64(value))
}

/// Everything checked before touching the network.
struct Plan {
    threads: Vec<u32>,
    ramp_up: Duration,
    measure: Duration,
    ramp_down: Duration,
}

fn check_args(args: &TatpArgs) -> anyhow::Result<Plan> {
    let threads = parse_thread_list(&args.threads)?;
    if let Some(rate) = args.rate
        && !(rate.is_finite() && rate >= 1.0)
    {
        bail!("invalid --rate {rate}: must be at least 1 transaction/s (omit it for closed loop)");
    }
    if args.repetitions == 0 {
        bail!("invalid --repetitions 0: must be at least 1");
    }
    if args.subscribers == Some(0) {
        bail!("invalid --subscribers 0: must be at least 1");
    }
    if args.min_id == Some(0) {
        bail!("invalid --min-id 0: subscriber ids start at 1");
    }
    if let (Some(min), Some(max)) = (args.min_id, args.max_id)
        && min > max
    {
        bail!("invalid id range: --min-id {min} is greater than --max-id {max}");
    }
    if let (Some(max), Some(n)) = (args.max_id, args.subscribers)
        && max > n
    {
        bail!("invalid --max-id {max}: only {n} subscribers (--subscribers)");
    }
    if args.load_streams == Some(0) {
        bail!("invalid --load-streams 0: must be at least 1");
    }
    Ok(Plan {
        threads,
        ramp_up: seconds("ramp-up", args.ramp_up, true)?,
        measure: seconds("duration", args.duration, false)?,
        ramp_down: seconds("ramp-down", args.ramp_down, true)?,
    })
}

/// Where a bench command runs: `--target embedded:DIR`, else `--url`,
/// else the cluster of `pgtier backend start`.
pub(crate) enum TargetSpec {
    Url(String),
    Embedded(PathBuf),
}

/// A directory removed when dropped: a bench command's default `--work-dir`.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `pgtier-<name>-<pid>` under the system's temporary directory, created.
    pub fn new(name: &str) -> anyhow::Result<TempDir> {
        let dir = std::env::temp_dir().join(format!("pgtier-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The in-process pgtier server of a bench command's `--targets server`
/// without `--pgtier-url`: loopback, trust, `commit_mode` ("sync" or
/// "async"); with the URL to reach it.
pub fn start_bench_server(
    data_dir: &Path,
    commit_mode: &str,
) -> anyhow::Result<(pgtier_server::RunningServer, String)> {
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\ncommit_mode = \"{commit_mode}\"\n[auth]\nmethod = \"trust\"\n",
        data_dir.display().to_string()
    );
    let config = pgtier_server::ServerConfig::from_toml_str(&toml).context("server config")?;
    let server = pgtier_server::start(config).context("starting the pgtier server")?;
    let addr = server.local_addr();
    Ok((server, format!("postgresql://bench@{}:{}/pgtier", addr.ip(), addr.port())))
}

/// `--url` when given, else the cluster of `pgtier backend start`.
pub fn url_or_managed(url: Option<&str>) -> anyhow::Result<String> {
    if let Some(url) = url {
        return Ok(url.to_owned());
    }
    managed::url(Path::new(managed::DEFAULT_DIR)).map_err(|e| {
        anyhow!("no target: pass --url, set PGTIER_BENCH_URL, or start one with `pgtier backend start` ({e})")
    })
}

/// Opens the target of a bench command's `--url` / `--target` flags
/// (shared by `bench tatp` and `bench micro`).
pub(crate) fn open_target(
    url: Option<&str>,
    target: Option<&str>,
    commit_mode: CommitArg,
) -> anyhow::Result<(Chosen, TargetSpec)> {
    if let Some(spec) = target {
        let Some(dir) = spec.strip_prefix("embedded:").filter(|d| !d.is_empty()) else {
            bail!("invalid --target '{spec}': expected embedded:<dir>");
        };
        let embedded = EmbeddedTarget::open(Path::new(dir), commit_mode.mode())?;
        return Ok((Chosen::Embedded(embedded), TargetSpec::Embedded(PathBuf::from(dir))));
    }
    let url = url_or_managed(url)?;
    Ok((Chosen::Pg(PgTarget::open(&url)?), TargetSpec::Url(url)))
}

pub fn run(args: TatpArgs) -> anyhow::Result<()> {
    let plan = check_args(&args)?;
    let copy_format = match args.copy_format {
        CopyArg::Text => CopyFormat::Text,
        CopyArg::Binary => CopyFormat::Binary,
    };
    let client = match args.client {
        ClientArg::Native => ClientKind::Native,
        ClientArg::PostgresCrate => ClientKind::PostgresCrate,
    };
    let seed = args.seed.unwrap_or_else(driver::fresh_seed);
    let (chosen, _) = open_target(args.url.as_deref(), args.target.as_deref(), args.commit_mode)?;
    let chosen = match chosen {
        Chosen::Pg(t) => Chosen::Pg(t.with_copy_format(copy_format).with_client(client)),
        embedded => embedded,
    };
    let target = chosen.target();
    let started_at = report::now_rfc3339();

    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let load_streams = args.load_streams.unwrap_or(cpus + 1);
    let subscribers = if args.populate {
        args.subscribers.unwrap_or(DEFAULT_SUBSCRIBERS)
    } else if let (Some(_), Some(n)) = (&args.shard_map, args.subscribers) {
        n
    } else {
        let found = tatp::check_population(target)?;
        if let Some(n) = args.subscribers
            && n != found
        {
            bail!(
                "the TATP tables at {} hold {found} subscribers, not {n} (--subscribers); \
                 run with --populate to reload, or drop --subscribers",
                target.describe()
            );
        }
        found
    };
    if args.populate_only {
        populate(&chosen, seed, subscribers, load_streams)?;
        return Ok(());
    }
    let min_id = args.min_id.unwrap_or(1);
    let max_id = args.max_id.unwrap_or(subscribers);
    if max_id > subscribers {
        bail!("invalid --max-id {max_id}: the database holds only {subscribers} subscribers");
    }
    if min_id > max_id {
        bail!("invalid id range: --min-id {min_id} is greater than --max-id {max_id}");
    }

    let keys = SubscriberKeys::new(min_id, max_id, args.uniform);
    let durability = target.durability()?;
    let server_settings = chosen.server_settings()?;
    let isolation = server_settings
        .iter()
        .find(|(k, _)| k == "default_transaction_isolation")
        .map_or_else(|| "read committed".to_owned(), |(_, v)| v.clone());
    let deviations = tatp::deviations(&RunFacts {
        uniform: args.uniform,
        populated_now: args.populate,
        parallel_load_streams: load_streams,
        load_method: target.bulk_load_method(),
        keys_with_tables: target.keys_with_tables(),
        windows_per_population: plan.threads.len() as u32 * args.repetitions,
        open_loop: args.rate.is_some(),
        measure_s: plan.measure.as_secs_f64(),
        durability: durability.clone(),
    });
    let config = RunConfig {
        workload: "tatp".to_owned(),
        target: target.describe(),
        subscribers,
        min_subscriber_id: min_id,
        max_subscriber_id: max_id,
        key_distribution: if args.uniform { "uniform" } else { "nurand" }.to_owned(),
        rate_per_s: args.rate,
        duration_s: plan.measure.as_secs_f64(),
        ramp_up_s: plan.ramp_up.as_secs_f64(),
        ramp_down_s: plan.ramp_down.as_secs_f64(),
        repetitions: args.repetitions,
        durability,
        isolation,
        deviations,
    };
    let client_name = match (&chosen, client) {
        (Chosen::Embedded(_), _) => "pgtier-sql Connection in-process (direct mode, one per thread)",
        (_, ClientKind::Native) => "native protocol client (blocking, one thread per connection)",
        (_, ClientKind::PostgresCrate) => "postgres crate (sync, Tokio underneath)",
    };
    print_header(&config, &plan, &keys, &server_settings, client_name, seed);
    let population = if args.populate { Some(populate(&chosen, seed, subscribers, load_streams)?) } else { None };

    let workload: Box<dyn Workload> = match &args.shard_map {
        Some(map_url) => {
            let url = url_or_managed(args.url.as_deref())?;
            Box::new(routed_workload(map_url, &args.shard_group, &url, client, keys)?)
        }
        None => Box::new(TatpWorkload { keys }),
    };
    let mut run = RunResult {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_at,
        label: args.label.clone(),
        config,
        machine: report::machine_info(),
        iterations: Vec::new(),
    };
    let mut extras = TatpExtras {
        population,
        server_settings,
        repetitions: Vec::new(),
        keys: keys.describe(),
        seed,
        client: client_name.to_owned(),
    };
    for &threads in &plan.threads {
        let mut tallies = Vec::with_capacity(args.repetitions as usize);
        for rep in 1..=args.repetitions {
            let spec = LoadSpec {
                threads,
                rate_per_s: args.rate,
                ramp_up: plan.ramp_up,
                measure: plan.measure,
                ramp_down: plan.ramp_down,
                seed: seed ^ (u64::from(threads) << 32) ^ u64::from(rep),
            };
            let tally = measure(target, workload.as_ref(), &spec, rep, args.repetitions)?;
            extras.repetitions.push(report::repetition_extra(&tally, rep));
            tallies.push(tally);
        }
        let iteration =
            report::iteration_result(threads, &tallies, &TxnType::NAMES, &TxnType::SPEC_SUCCESS, args.per_thread);
        print_iteration(&iteration, &tallies, args.per_thread);
        run.iterations.push(iteration);
        // Written after every iteration, so a long sweep that is interrupted
        // still leaves its results.
        write_outputs(&args, &run, &extras, false)?;
    }
    println!("\nSummary ({}):", run.label);
    println!("{}", report::summary_table(&run));
    write_outputs(&args, &run, &extras, true)?;
    Ok(())
}

fn populate(chosen: &Chosen, seed: u64, subscribers: u64, streams: usize) -> anyhow::Result<PopulationSummary> {
    let target = chosen.target();
    eprintln!(
        "populating {subscribers} subscribers at {} ({streams} load streams, {})...",
        target.describe(),
        chosen.load_format()
    );
    let options = PopulateOptions { subscribers, streams, seed, progress: true };
    let report = population::populate(target, &options)?;
    println!("\nPopulation: {subscribers} subscribers in {:.1} s", report.total.as_secs_f64());
    let phases: Vec<String> = report.phases.iter().map(|(p, d)| format!("{p} {:.1} s", d.as_secs_f64())).collect();
    println!("  phases: {}", phases.join(", "));
    for t in &report.tables {
        println!(
            "  {:<17} {:>11} rows  (spec expects {:>11.0}, {:+.2} %)",
            t.table,
            t.rows,
            t.expected_rows,
            t.deviation_percent()
        );
    }
    Ok(PopulationSummary::of(&report, &options, chosen.load_format()))
}

/// The routed workload: one target per node of `group`'s map in the
/// PostgreSQL at `map_url`, each `url` with the node's host:port.
fn routed_workload(
    map_url: &str,
    group: &str,
    url: &str,
    client: ClientKind,
    keys: SubscriberKeys,
) -> anyhow::Result<RoutedTatpWorkload> {
    let mut pg = pgtier_backend::connect(map_url).with_context(|| "--shard-map".to_owned())?;
    let rows = pg
        .query(
            "SELECT node, addr, lo, hi FROM pgtier.node_partitions WHERE grp = $1 ORDER BY lo NULLS FIRST",
            &[&group],
        )
        .with_context(|| format!("reading the node partitions of {group} (pgtier.node_partitions)"))?;
    if rows.is_empty() {
        bail!("cache group {group} has no node partitions in pgtier.node_partitions");
    }
    let mut nodes: Vec<tatp::RoutedNode> = Vec::new();
    for row in &rows {
        let (node, addr): (String, String) = (row.get(0), row.get(1));
        let node_url = with_host_port(url, &addr)?;
        let target = PgTarget::open(&node_url).with_context(|| format!("node {node} at {addr}"))?.with_client(client);
        println!("  node {node:<10} {addr:<22} s_id in {}", range_text(row.get(2), row.get(3)));
        nodes.push((row.get(2), row.get(3), Box::new(target)));
    }
    Ok(RoutedTatpWorkload { keys, nodes })
}

fn range_text(lo: Option<i64>, hi: Option<i64>) -> String {
    format!("[{}, {})", lo.map_or("-inf".into(), |v| v.to_string()), hi.map_or("+inf".into(), |v| v.to_string()))
}

/// `url` (postgres://user:pw@host:port/db?...) with `addr` as its host:port.
fn with_host_port(url: &str, addr: &str) -> anyhow::Result<String> {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else { bail!("--url is not a postgres:// URL") };
    let rest = &url[scheme_end..];
    let host_start = rest.find('@').map_or(0, |i| i + 1);
    let host_end = rest[host_start..].find(['/', '?']).map_or(rest.len(), |i| host_start + i);
    Ok(format!("{}{}{addr}{}", &url[..scheme_end], &rest[..host_start], &rest[host_end..]))
}

fn measure(
    target: &dyn Target,
    workload: &dyn Workload,
    spec: &LoadSpec,
    rep: u32,
    reps: u32,
) -> anyhow::Result<RepetitionTally> {
    let live = LiveCounters::default();
    let title = format!("{:>3} threads, rep {rep}/{reps}", spec.threads);
    let mut progress = RunProgress::new(spec.ramp_up + spec.measure + spec.ramp_down, &title);
    let result = driver::run_repetition(target, workload, spec, &live, &mut |phase, elapsed| {
        progress.tick(phase, elapsed, live.finished.load(std::sync::atomic::Ordering::Relaxed));
    });
    progress.finish();
    let tally = result.with_context(|| format!("TATP at {} threads, repetition {rep}", spec.threads))?;
    if let Some(e) = &tally.sampler_error {
        eprintln!("pgtier: warning: backend figures unavailable: {e}");
    }
    Ok(tally)
}

fn print_header(
    config: &RunConfig,
    plan: &Plan,
    keys: &SubscriberKeys,
    settings: &[(String, String)],
    client: &str,
    seed: u64,
) {
    println!("TATP benchmark (HLR) — pgtier bench tatp");
    println!("  target        {}", config.target);
    println!("  client        {client}");
    let server: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("  server        {}", server.join(", "));
    println!(
        "  subscribers   {} (targeting ids {}..={})",
        config.subscribers, config.min_subscriber_id, config.max_subscriber_id
    );
    println!("  keys          {} (seed {seed}; --seed {seed} draws the same ones again)", keys.describe());
    let threads: Vec<String> = plan.threads.iter().map(u32::to_string).collect();
    println!("  threads       {}", threads.join(","));
    match config.rate_per_s {
        Some(r) => println!("  load          open loop, {r} txn/s total (Poisson), latency from intended start"),
        None => println!("  load          closed loop (flooding)"),
    }
    println!(
        "  windows       ramp-up {} s, measure {} s, ramp-down {} s, {} repetition(s)",
        config.ramp_up_s, config.duration_s, config.ramp_down_s, config.repetitions
    );
    println!("  mix           35/10/35/2/14/2/2 (GSD/GND/GAD/USD/UL/ICF/DCF)");
    println!("  durability    {}; isolation {}", config.durability, config.isolation);
    println!("Deviations from the TATP specification:");
    for d in &config.deviations {
        println!("  - {d}");
    }
}

fn print_iteration(iteration: &pgtier_bench::result::Iteration, tallies: &[RepetitionTally], per_thread: bool) {
    println!("\n== {} threads: {}", iteration.threads, report::mqth_line(iteration));
    let notes = [("GET_NEW_DESTINATION", "*")];
    println!("{}", report::transactions_table(&iteration.transactions, &notes));
    println!(
        "  * spec 23.9 %; the population rules give {:.1} % (the spec leaves out the 62.5 % chance that the facility exists)",
        100.0 * tatp::derived_new_destination_success()
    );
    for (i, t) in tallies.iter().enumerate() {
        let prefix = if tallies.len() > 1 { format!("  rep {}: ", i + 1) } else { "  ".to_owned() };
        let acceptable: u64 = t.txns.iter().map(|x| x.acceptable_errors).sum();
        println!(
            "{prefix}MQTh {:.1} txn/s; attempts {:.1}/s including {acceptable} acceptable errors (what pgbench would count)",
            t.mqth(),
            t.attempts_per_s()
        );
        if let Some(b) = &t.backend {
            println!("{prefix}{}", report::backend_line(b));
        }
        if let Some(s) = &t.schedule {
            println!(
                "{prefix}open loop: {} intended in window, {} completed, {} missed; max start lag {:.1} ms; \
                 load generator woke late (>{} µs; charged, latency runs from the intended start) {} times, at most {:.1} ms",
                s.intended,
                s.completed,
                s.missed,
                s.max_start_lag_us as f64 / 1000.0,
                pgtier_bench::driver::LATE_WAKE.as_micros(),
                s.late_wakes,
                s.max_wake_delay_us as f64 / 1000.0
            );
        }
    }
    if per_thread {
        println!("{}", report::per_thread_table(iteration));
    }
}

fn write_outputs(args: &TatpArgs, run: &RunResult, extras: &TatpExtras, last: bool) -> anyhow::Result<()> {
    if let Some(path) = &args.json {
        report::write_json(path, &RunFile { run: run.clone(), tatp: extras.clone() })?;
        if last {
            println!("wrote {}", path.display());
        }
    }
    if let Some(path) = &args.csv {
        report::write_csv(path, run, args.per_thread)?;
        if last {
            println!("wrote {}", path.display());
        }
    }
    if let (Some(dir), true) = (&args.charts, last) {
        let files = pgtier_bench::chart::draw_run_charts(run, dir).context("drawing charts")?;
        for f in files {
            println!("wrote {}", f.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_lists() {
        assert_eq!(parse_thread_list("1,2,4").ok(), Some(vec![1, 2, 4]));
        assert_eq!(parse_thread_list(" 8 ").ok(), Some(vec![8]));
        for bad in ["1,,x", "0", "", "1,x", "-1", "2000"] {
            assert!(parse_thread_list(bad).is_err(), "{bad:?} accepted");
        }
    }
}
