//! `pgtier bench micro`: study 002's micro-benchmark library (sequential
//! scan, random read, insert 2 rows/commit, update 32 rows/transaction,
//! index build) with its metrics table, on PostgreSQL, a pgtier server or
//! the embedded engine. The measuring is `pgtier_bench::micro`; this file
//! turns flags into options, shows progress and writes the outputs.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use pgtier_bench::micro::output::{self, num};
use pgtier_bench::micro::{self, MicroOptions, MicroProgress, MicroResult, MicroTest, Probes};

use crate::bench_cmd::{Chosen, CommitArg, TargetSpec, open_target, parse_thread_list};

/// Rows loaded when `--rows` is not given: about 120 MB of row data, so a
/// run at the defaults takes a few minutes on two cores.
const DEFAULT_ROWS: u64 = 1_000_000;
/// Most rows accepted (bounds the load's time and the engine's memory).
const ROWS_MAX: u64 = 1_000_000_000;

const HELP: &str = "\
Each test runs for --duration seconds at each thread count (one session per thread, closed
loop), except the index build, which is one CREATE INDEX per thread count. The table shows, per
test and thread count, study 002's columns: rows/s, ops/s, CPU % of this process and of the
server, read/write IOPS and MB/s of the device holding the target's data (/proc/diskstats), and
WAL MB/s from the target's own counter. A figure without a source says 'unknown'.

Where the figures come from:
  PostgreSQL      WAL: pg_stat_wal; server CPU: its processes (local only);
                  device: of SHOW data_directory (local only), else --device
  pgtier server   WAL: --metrics-url (its [metrics] listen); server CPU: the process
                  listening on the URL's port (local only); device: --device
  embedded:DIR    WAL: the engine's counter; CPU: this process; device: of DIR

Examples:
  pgtier bench micro --url postgres://postgres@127.0.0.1:5432/postgres --json micro-pg.json
  pgtier bench micro --url postgres://app:pw@127.0.0.1:5433/postgres \\
      --metrics-url http://127.0.0.1:9187/metrics --device /path/to/pgtier-data
  pgtier bench micro --target embedded:/tmp/micro --rows 200000 --threads 1,2,4";

#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct MicroArgs {
    /// Target URL: PostgreSQL or a pgtier server [default: $PGTIER_BENCH_URL, else the cluster of `pgtier backend start`]
    #[arg(long, env = "PGTIER_BENCH_URL", hide_env_values = true)]
    url: Option<String>,
    /// Run against the embedded engine in this process instead: `embedded:<dir>`
    #[arg(long, value_name = "embedded:DIR", conflicts_with = "url", value_parser = parse_embedded)]
    target: Option<String>,
    /// Commit mode of the embedded target: sync (after WAL fsync) or async (WAL buffer)
    #[arg(long, value_enum, default_value_t = CommitArg::Sync)]
    commit_mode: CommitArg,
    /// Rows of the table the tests work on (dropped, recreated and loaded by the run)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_ROWS, value_parser = parse_rows)]
    rows: u64,
    /// Thread counts to sweep, one session per thread
    #[arg(long, value_name = "LIST", default_value = "1,2", value_parser = parse_threads)]
    threads: ThreadList,
    /// Measure window per test and thread count, seconds
    #[arg(long, value_name = "S", default_value_t = 10.0, allow_negative_numbers = true, value_parser = parse_duration)]
    duration: f64,
    /// Tests to run, comma-separated: seq_scan, random_read, insert, update, index_build [default: all]
    #[arg(long = "tests", value_name = "LIST", value_delimiter = ',', value_parser = parse_test)]
    tests: Vec<MicroTest>,
    /// A path on the device under test (a file, a directory, or the block device itself)
    #[arg(long, value_name = "PATH", value_parser = parse_existing)]
    device: Option<PathBuf>,
    /// A pgtier server's metrics endpoint, for its WAL figure: http://HOST:PORT/metrics
    #[arg(long, value_name = "URL", conflicts_with = "target", value_parser = parse_metrics_url)]
    metrics_url: Option<String>,
    /// Write the result file (JSON)
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write one CSV row per test and thread count
    #[arg(long, value_name = "PATH")]
    csv: Option<PathBuf>,
    /// Seed of the population and of the keys the tests pick [default: a fresh one, printed]
    #[arg(long)]
    seed: Option<u64>,
    /// Parallel bulk-load streams [default: CPUs]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    load_streams: Option<u16>,
}

#[derive(Clone)]
struct ThreadList(Vec<u32>);

fn parse_threads(list: &str) -> Result<ThreadList, String> {
    parse_thread_list(list).map(ThreadList).map_err(|e| e.to_string())
}

fn parse_rows(s: &str) -> Result<u64, String> {
    let n: u64 = s.replace('_', "").parse().map_err(|_| format!("'{s}' is not a whole number"))?;
    if !(micro::ROWS_MIN..=ROWS_MAX).contains(&n) {
        return Err(format!("must be between {} and {ROWS_MAX}", micro::ROWS_MIN));
    }
    Ok(n)
}

fn parse_duration(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("'{s}' is not a number of seconds"))?;
    crate::bench_cmd::seconds("duration", v, false).map_err(|e| e.to_string())?;
    Ok(v)
}

fn parse_test(s: &str) -> Result<MicroTest, String> {
    MicroTest::parse(s.trim()).ok_or_else(|| {
        let names: Vec<&str> = MicroTest::ALL.iter().map(|t| t.name()).collect();
        format!("unknown test '{s}' (one of {})", names.join(", "))
    })
}

fn parse_existing(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    std::fs::metadata(&path).map_err(|e| format!("{s}: {e}"))?;
    Ok(path)
}

fn parse_metrics_url(s: &str) -> Result<String, String> {
    if !s.starts_with("http://") {
        return Err("expected http://HOST:PORT/metrics".to_owned());
    }
    Ok(s.to_owned())
}

fn parse_embedded(s: &str) -> Result<String, String> {
    if s.strip_prefix("embedded:").is_none_or(str::is_empty) {
        return Err("expected embedded:<dir>".to_owned());
    }
    Ok(s.to_owned())
}

/// Progress bars on stderr (hidden when it is not a terminal), and one
/// line per finished window either way so logs show how far a run got.
struct Bars {
    bar: Option<ProgressBar>,
    terminal: bool,
}

impl Bars {
    fn replace(&mut self, bar: ProgressBar, template: &str) {
        bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
        if let Some(old) = self.bar.replace(bar) {
            old.finish_and_clear();
        }
    }
}

impl MicroProgress for Bars {
    fn population(&mut self, loaded: u64, total: u64) {
        if self.bar.is_none() {
            self.replace(ProgressBar::new(total), "loading {bar:30} {pos}/{len} rows {per_sec}");
        }
        if let Some(b) = &self.bar {
            b.set_position(loaded);
        }
    }

    fn population_done(&mut self, seconds: f64) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        eprintln!("pgtier: loaded in {seconds:.1} s");
    }

    fn window_started(&mut self, test: MicroTest, threads: u32, duration: Option<Duration>) {
        let len = duration.map_or(1, |d| d.as_millis().max(1) as u64);
        let bar = ProgressBar::new(len);
        bar.set_prefix(format!("{:<12} {threads:>3} threads", test.name()));
        self.replace(bar, "{prefix} {bar:30} {msg}");
        if duration.is_none()
            && let Some(b) = &self.bar
        {
            b.set_message("building...");
        }
    }

    fn window_tick(&mut self, elapsed: Duration, ops: u64) {
        if let Some(b) = &self.bar {
            b.set_position(elapsed.as_millis() as u64);
            b.set_message(format!("{:>10.0} ops/s", ops as f64 / elapsed.as_secs_f64().max(1e-3)));
        }
    }

    fn window_finished(&mut self, r: &MicroResult) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        let what = match (&r.figures, &r.refused) {
            (Some(f), _) => {
                format!("{} rows/s, {} {} in {:.2} s", num(f.rows_per_s), num(f.ops_per_s), r.test.op_unit(), f.seconds)
            }
            (None, refused) => format!("refused: {}", refused.as_deref().unwrap_or("?")),
        };
        if !self.terminal || r.refused.is_some() {
            eprintln!("pgtier: {} at {} threads: {what}", r.test.name(), r.threads);
        }
    }
}

/// Bad flags found only once the target is known: one line and exit 2,
/// as clap does for the flags it checks itself.
fn usage_error(message: &str) -> ! {
    eprintln!("pgtier: error: {message} (see `pgtier bench micro --help`)");
    std::process::exit(2);
}

pub fn run(args: MicroArgs) -> anyhow::Result<()> {
    let (chosen, spec) = open_target(args.url.as_deref(), args.target.as_deref(), args.commit_mode)?;
    let device = args.device.as_deref();
    let probes = match (&chosen, &spec) {
        (Chosen::Embedded(t), TargetSpec::Embedded(dir)) => Probes::embedded(t.database(), dir, device),
        (Chosen::Pg(t), TargetSpec::Url(url)) if t.is_pgtier() => {
            Probes::pgtier_server(url, args.metrics_url.as_deref(), device)
        }
        (Chosen::Pg(_), TargetSpec::Url(url)) => {
            if args.metrics_url.is_some() {
                usage_error("--metrics-url is for a pgtier server; PostgreSQL's WAL figure comes from pg_stat_wal");
            }
            Probes::postgres(url, device)
        }
        _ => anyhow::bail!("internal: target and its spec disagree"),
    };
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let seed = args.seed.unwrap_or_else(pgtier_bench::driver::fresh_seed);
    let options = MicroOptions {
        rows: args.rows,
        threads: args.threads.0.clone(),
        duration: Duration::from_secs_f64(args.duration),
        tests: if args.tests.is_empty() { MicroTest::ALL.to_vec() } else { args.tests.clone() },
        seed,
        load_streams: args.load_streams.map_or(cpus, usize::from),
        probes,
    };
    let target = chosen.target();
    eprintln!(
        "pgtier: bench micro at {}: {} rows, threads {:?}, {} s per window, seed {seed}",
        target.describe(),
        options.rows,
        options.threads,
        args.duration
    );
    let mut bars = Bars { bar: None, terminal: std::io::stderr().is_terminal() };
    let report = micro::run_micro(target, &options, &mut bars).context("bench micro")?;
    print!("{}", output::markdown(&report));
    if let Some(path) = &args.json {
        output::write_json(path, &report)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &args.csv {
        output::write_csv(path, &report)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
