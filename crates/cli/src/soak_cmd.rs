//! `pgtier bench soak`: an hour (by default) of TATP over the wire with
//! cache-group cycles, connection churn and cancels beside it, against a
//! `pgtier serve` this command spawns (pgtier_bench::soak does the work).
//!
//! Why a spawned server and not one in this process: the soak judges the
//! server's RSS, open file descriptors and threads, and this process also
//! holds the client sessions (their sockets, threads and buffers), the
//! histograms and the private PostgreSQL's harness. In a process of its
//! own, `/proc/<pid>` shows the server alone, as an operator would see it.
//! This layer owns the private PostgreSQL, the server process, Ctrl-C and
//! the exit status.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::soak::{self, ServerUnderTest, SoakControl, SoakOptions, SoakReport};

use crate::bench_cmd::CommitArg;
use crate::demo_cmd::{INTERRUPT, install_interrupt_handler};

#[derive(clap::Args)]
pub struct SoakArgs {
    /// How long the load runs: seconds, or with a unit (90s, 2m, 1h)
    #[arg(long, value_name = "TIME", default_value = "1h")]
    duration: String,
    /// Sampling interval of RSS, fds, threads, throughput and p99 (90s, 10s, ...)
    #[arg(long, value_name = "TIME", default_value = "10s")]
    sample_every: String,
    /// Share of the run before growth's baseline: growth is judged over the rest (0.25: the last 45 minutes of an hour)
    #[arg(long, value_name = "F", default_value_t = 0.25)]
    warmup_fraction: f64,
    /// Growth goal of RSS, fds and threads, percent
    #[arg(long, value_name = "PERCENT", default_value_t = 5.0)]
    growth_goal: f64,
    /// Report growth without letting it decide the exit status (short runs, where warm-up growth dominates)
    #[arg(long)]
    no_growth_gate: bool,
    /// TATP subscribers populated in PostgreSQL, all in the AWT cache group
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    subscribers: u64,
    /// TATP client sessions (one thread each)
    #[arg(long, value_name = "N", default_value_t = 4)]
    threads: u32,
    /// Offered TATP load over all sessions, transactions/s (open loop, Poisson arrivals)
    #[arg(long, value_name = "TXN_PER_S", default_value_t = 2000.0)]
    rate: f64,
    /// Roots of the READONLY cache group the cycles load and unload (4 child rows each)
    #[arg(long, value_name = "N", default_value_t = 2000)]
    cycle_accounts: u64,
    /// One cache-group cycle (LOAD, REFRESH, UNLOAD half, UNLOAD rest) this often
    #[arg(long, value_name = "TIME", default_value = "30s")]
    cycle_every: String,
    /// Pause between two churn sessions (one in ten a wrong password, one in ten abandoned mid-transaction)
    #[arg(long, value_name = "TIME", default_value = "0.5s")]
    churn_pause: String,
    /// One cancelled long statement this often
    #[arg(long, value_name = "TIME", default_value = "5s")]
    cancel_every: String,
    /// Leave activities out, to find which one makes the server grow: cycles, churn, cancels (comma-separated)
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    without: Vec<String>,
    /// The server's commit mode
    #[arg(long, value_enum, default_value_t = CommitArg::Async)]
    commit_mode: CommitArg,
    /// report.md, soak.json, charts and server.log go here
    #[arg(long, value_name = "DIR", default_value = "results/soak")]
    out: PathBuf,
    /// The server's data directory and configuration (emptied first)
    #[arg(long, value_name = "DIR", default_value = ".pgtier/soak")]
    work_dir: PathBuf,
    /// Use this PostgreSQL instead of starting a private one (its TATP tables and soak_* tables are dropped and reloaded)
    #[arg(long, value_name = "URL", env = "PGTIER_SOAK_BACKEND", hide_env_values = true)]
    backend: Option<String>,
    /// Seed of population and transactions [default: a fresh one, printed]
    #[arg(long)]
    seed: Option<u64>,
}

/// "90", "90s", "2m", "1h", "0.5s" as a duration.
pub fn parse_time(name: &str, text: &str) -> anyhow::Result<Duration> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => bail!("invalid --{name} '{text}': the unit must be ms, s, m or h"),
    };
    let value: f64 =
        number.trim().parse().map_err(|_| anyhow!("invalid --{name} '{text}': expected e.g. 90s, 2m, 1h"))?;
    let seconds = value * scale;
    if !(seconds.is_finite() && seconds > 0.0 && seconds < 1e7) {
        bail!("invalid --{name} '{text}': must be more than 0");
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn options(args: &SoakArgs) -> anyhow::Result<SoakOptions> {
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let options = SoakOptions {
        duration: parse_time("duration", &args.duration)?,
        sample_every: parse_time("sample-every", &args.sample_every)?,
        warmup_fraction: args.warmup_fraction,
        subscribers: args.subscribers,
        threads: args.threads,
        rate_per_s: args.rate,
        cycle_accounts: args.cycle_accounts,
        cycle_every: parse_time("cycle-every", &args.cycle_every)?,
        churn_pause: parse_time("churn-pause", &args.churn_pause)?,
        cancel_every: parse_time("cancel-every", &args.cancel_every)?,
        without: args.without.iter().map(|w| w.trim().to_owned()).collect(),
        growth_goal_percent: args.growth_goal,
        seed: args.seed.unwrap_or_else(pgtier_bench::driver::fresh_seed),
        populate_streams: cpus + 1,
    };
    if !(args.growth_goal.is_finite() && args.growth_goal > 0.0) {
        bail!("invalid --growth-goal {}: must be more than 0", args.growth_goal);
    }
    options.check().map_err(|e| anyhow!("invalid soak settings: {e}"))?;
    Ok(options)
}

/// The spawned `pgtier serve`.
struct Server {
    child: Child,
    under_test: ServerUnderTest,
}

/// 32 hex digits from the OS's randomness (through the bench's seed source).
fn secret() -> String {
    format!("{:016x}{:016x}", pgtier_bench::driver::fresh_seed(), pgtier_bench::driver::fresh_seed())
}

fn start_server(args: &SoakArgs, backend: &str) -> anyhow::Result<Server> {
    let work = &args.work_dir;
    if work.exists() {
        std::fs::remove_dir_all(work).with_context(|| format!("emptying {}", work.display()))?;
    }
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let work = std::fs::canonicalize(work)?;
    let password = secret();
    let mode = match args.commit_mode {
        CommitArg::Sync => "sync",
        CommitArg::Async => "async",
    };
    // A node name of its own: PostgreSQL (`--backend`, used before) may
    // hold an earlier run's write-through progress under another directory.
    let node = format!("soak{:012x}", pgtier_bench::driver::fresh_seed() & 0xffff_ffff_ffff);
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {data:?}\ncommit_mode = \"{mode}\"\nmax_connections = 200\n\
         [auth]\nmethod = \"scram-sha-256\"\n[[auth.users]]\nname = \"app\"\npassword = \"{password}\"\n\
         [backend]\nurl = {backend:?}\n[cache]\nmemory_budget = \"16GB\"\nawt_node = \"{node}\"\n",
        data = work.join("data").display().to_string(),
    );
    let config = work.join("pgtier.toml");
    let mut file = std::fs::File::create(&config)?;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600))?;
    file.write_all(toml.as_bytes())?;
    let log_path = args.out.join("server.log");
    let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let exe = std::env::current_exe().context("finding the pgtier binary")?;
    let mut child = Command::new(exe)
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(Stdio::piped())
        // Its own process group: Ctrl-C reaches the soak, which then stops
        // the server cleanly, instead of both at once.
        .process_group(0)
        .spawn()
        .context("starting pgtier serve")?;
    let stderr = child.stderr.take().ok_or_else(|| anyhow!("no stderr pipe"))?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    // Drains the server's stderr into server.log for the whole run (a full
    // pipe would stop the server) and hands over the listen address.
    std::thread::Builder::new().name("soak-server-log".into()).spawn(move || {
        let mut log = log;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("pgtier: listening on ") {
                let _ = tx.send(addr.split_whitespace().next().unwrap_or("").to_owned());
            }
            let _ = writeln!(log, "{line}");
        }
    })?;
    let addr = match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(addr) => addr,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("pgtier serve did not start listening (see {})", log_path.display());
        }
    };
    let pid = child.id();
    let under_test = ServerUnderTest {
        url: format!("postgresql://app:{password}@{addr}/app"),
        wrong_password_url: format!("postgresql://app:not-{password}@{addr}/app"),
        pid,
        describe: format!("pgtier serve (spawned, commit_mode {mode}, SCRAM auth) on {addr}"),
    };
    Ok(Server { child, under_test })
}

/// SIGTERM, then up to 60 s for the clean shutdown (checkpoint, WAL flush).
fn stop_server(mut server: Server) -> String {
    let Ok(pid) = libc::pid_t::try_from(server.child.id()) else { return "no pid".to_owned() };
    // SAFETY: sends a signal to our own child, whose pid we hold (not reaped yet).
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match server.child.try_wait() {
            Ok(Some(status)) if status.success() => return "clean".to_owned(),
            Ok(Some(status)) => return format!("exited with {status} after SIGTERM"),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                let _ = server.child.kill();
                let _ = server.child.wait();
                return "did not stop within 60 s of SIGTERM; killed".to_owned();
            }
            Err(e) => return format!("waiting for it: {e}"),
        }
    }
}

pub fn run(args: SoakArgs) -> anyhow::Result<()> {
    let options = options(&args)?;
    install_interrupt_handler();
    eprintln!(
        "pgtier bench soak: {} s, sample every {} s, {} subscribers, {} txn/s over {} sessions, seed {} (Ctrl-C stops and writes a partial report)",
        options.duration.as_secs_f64(),
        options.sample_every.as_secs_f64(),
        options.subscribers,
        options.rate_per_s,
        options.threads,
        options.seed
    );
    let (cluster, backend) = match &args.backend {
        Some(url) => (None, url.clone()),
        None => {
            eprintln!("pgtier bench soak: starting a private PostgreSQL");
            let cluster =
                PrivateCluster::start(ClusterOptions::for_benchmark()).context("starting the private PostgreSQL")?;
            let url = cluster.create_database("tatp").context("creating database tatp")?;
            (Some(cluster), url)
        }
    };
    let outcome = soak_on(&args, &options, &backend);
    if let Some(cluster) = cluster
        && let Err(e) = cluster.stop()
    {
        eprintln!("pgtier: warning: stopping the private PostgreSQL: {e}");
    }
    let report = outcome?;
    let failures = report.verdict.as_ref().map(|v| v.all_failures(!args.no_growth_gate)).unwrap_or_default();
    if report.interrupted {
        eprintln!("pgtier bench soak: interrupted; partial report written");
        std::process::exit(130);
    }
    if !failures.is_empty() {
        bail!("the soak failed: {}", failures.join("; "));
    }
    Ok(())
}

/// Population, the server, the run, its stop and the report; the report
/// is written whatever happened after the server started.
fn soak_on(args: &SoakArgs, options: &SoakOptions, backend: &str) -> anyhow::Result<SoakReport> {
    eprintln!("pgtier bench soak: populating PostgreSQL");
    soak::prepare_postgres(options, backend).context("populating PostgreSQL")?;
    let server = start_server(args, backend)?;
    eprintln!("pgtier bench soak: {} (pid {})", server.under_test.describe, server.under_test.pid);
    let control = SoakControl {
        backend_url: backend.to_owned(),
        server: server.under_test.clone(),
        interrupt: &INTERRUPT,
        progress: true,
    };
    let mut report = SoakReport::default();
    let outcome = soak::run(options, &control, &mut report);
    if let Err(e) = &outcome {
        report.stopped_by = Some(e.to_string());
    }
    report.interrupted |= INTERRUPT.load(Ordering::Relaxed);
    report.server_stop =
        Some(if report.server_died.is_some() { "died during the run".to_owned() } else { stop_server(server) });
    report.verdict = Some(soak::verdict::judge(&report, options.growth_goal_percent));
    let (path, text) = soak::write_report(&report, &args.out, !args.no_growth_gate).context("writing the report")?;
    print_summary(&text);
    eprintln!("pgtier bench soak: report {} (soak.json, charts and server.log beside it)", path.display());
    outcome?;
    Ok(report)
}

/// The report's verdict section on stdout.
fn print_summary(text: &str) {
    let end = text.find("\n## Settings").unwrap_or(text.len());
    println!("{}", &text[..end]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        let ok = |t: &str| parse_time("x", t).ok();
        assert_eq!(ok("90"), Some(Duration::from_secs(90)));
        assert_eq!(ok("90s"), Some(Duration::from_secs(90)));
        assert_eq!(ok("2m"), Some(Duration::from_secs(120)));
        assert_eq!(ok("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(ok("0.5s"), Some(Duration::from_millis(500)));
        assert_eq!(ok("250ms"), Some(Duration::from_millis(250)));
        for bad in ["", "x", "0", "-1s", "2d", "1e9h"] {
            assert!(parse_time("x", bad).is_err(), "{bad:?} accepted");
        }
    }
}
