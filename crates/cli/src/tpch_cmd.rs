//! `pgtier bench tpch`: TPC-H's 22 queries on PostgreSQL, the pgtier server
//! and the embedded engine, each answer compared with PostgreSQL's
//! (crates/bench/src/tpch). This file turns flags into targets and
//! options, shows progress and writes the outputs.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use pgtier_bench::tpch::schema::{SCALE_MAX, SCALE_MIN};
use pgtier_bench::tpch::{self, LoadReport, QueryResult, SideKind, Status, TpchOptions, TpchProgress};

use crate::tpcc_cmd::{CommitArg, OpenedTargets, TargetFlags};

const HELP: &str = "\
Each target gets the 8 TPC-H tables (the spec's types and primary keys, the same DDL everywhere),
loaded at --scale from the tpchgen crate (dbgen's rows; COPY text format on PostgreSQL and the
pgtier server, the engine's loader for the embedded target), then ANALYZE where accepted. Then
each of the 22 queries (the spec's validation parameters) runs on each target: one warm-up run,
whose answer is compared with PostgreSQL's, then --runs timed runs (min / median / max). Every
run is bounded by statement_timeout = --timeout; a query that times out or is refused is
reported as such and the run goes on.

Answers are compared value for value in PostgreSQL's text form, no rounding: row order where the
ORDER BY decides it, rows tied on the ORDER BY values as multisets. Each query and pgtier target
is 'identical', 'DIFFERENT (first differing row ...)', 'timeout' or 'refused'.

Targets (--targets, PostgreSQL always first: it is the reference):
  postgresql   --url, else $PGTIER_BENCH_URL, else the cluster of `pgtier backend start`
  server       --pgtier-url, else a pgtier server this command starts in-process
               (loopback, trust auth, async commit, data in --work-dir)
  embedded     the engine in this process, data in --embedded-dir or --work-dir

Output: a one-screen summary on stdout (median ms per target, pgtier / PostgreSQL ratio,
answers), and report.md + tpch.json in --out. Exit status 1 when an answer is DIFFERENT.

--analytics adds the side 'pgtier columnar' (the embedded target's columnar copies, pgtier.analytics
= on; the embedded side runs with it off): per query the path its EXPLAIN names (columnar, or the
row path and why), and the ratio PostgreSQL / columnar of the totals. A pgtier built without the
cargo feature 'analytics' has no analytic executor: its columnar side runs the row path, and the
summary says so.

Examples:
  pgtier bench tpch --scale 0.01
  pgtier bench tpch --scale 0.1 --runs 5 --timeout 120 --targets postgresql,embedded
  pgtier bench tpch --scale 0.1 --targets embedded --analytics   # + pgtier columnar, compression
  pgtier bench tpch --url postgres://postgres@127.0.0.1:5432/tpch \\
      --pgtier-url postgres://app@127.0.0.1:5433/pgtier --queries 13,19";

#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct TpchArgs {
    /// Scale factor (fractional allowed: 0.01 = 60,000 lineitems)
    #[arg(long, value_name = "SF", default_value_t = 0.01, value_parser = parse_scale)]
    scale: f64,
    /// Timed runs per query and target, after one warm-up run
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(tpch::RUNS_MAX)))]
    runs: u32,
    /// Per-query timeout (statement_timeout), seconds
    #[arg(long, value_name = "S", default_value_t = 60.0, allow_negative_numbers = true, value_parser = parse_timeout)]
    timeout: f64,
    /// Targets to run, comma-separated: postgresql, server, embedded
    #[arg(long, value_name = "LIST", default_value = "postgresql,server,embedded", value_parser = parse_targets)]
    targets: Targets,
    /// PostgreSQL URL [default: $PGTIER_BENCH_URL, else the cluster of `pgtier backend start`]
    #[arg(long, env = "PGTIER_BENCH_URL", hide_env_values = true)]
    url: Option<String>,
    /// A running pgtier server [default: one started in-process]
    #[arg(long, value_name = "URL")]
    pgtier_url: Option<String>,
    /// The embedded engine's data directory (emptied first) [default: in --work-dir]
    #[arg(long, value_name = "DIR")]
    embedded_dir: Option<PathBuf>,
    /// Where the in-process server and the embedded engine keep their data [default: a temporary directory, removed after]
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Queries to run, comma-separated numbers [default: 1 to 22]
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = clap::value_parser!(u8).range(1..=22))]
    queries: Vec<u8>,
    /// Use the tables the targets already hold (from an earlier run at the same --scale; pass --work-dir to keep the pgtier targets' data) instead of reloading
    #[arg(long)]
    skip_load: bool,
    /// After the load, enable the columnar copy (ALTER TABLE ... SET ANALYTICS ON) of the 8 tables on the embedded target, report each table's compression and enable rate beside study 004's, and add the side 'pgtier columnar': the embedded target with pgtier.analytics = on (the embedded side's sessions then run with pgtier.analytics = off, the row path)
    #[arg(long)]
    analytics: bool,
    /// Parallel bulk-load streams per target [default: CPUs]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    load_streams: Option<u16>,
    /// Report directory: report.md and tpch.json
    #[arg(long, value_name = "DIR", default_value = "results/tpch")]
    out: PathBuf,
}

#[derive(Clone, Debug, PartialEq)]
struct Targets(Vec<SideKind>);

fn parse_targets(list: &str) -> Result<Targets, String> {
    let mut out = vec![SideKind::Postgresql];
    for name in list.split(',').map(str::trim) {
        let kind = match name {
            "postgresql" | "postgres" | "pg" => SideKind::Postgresql,
            "server" | "pgtier" => SideKind::PgtierServer,
            "embedded" => SideKind::Embedded,
            _ => return Err(format!("'{name}' is not a target (postgresql, server, embedded)")),
        };
        if !out.contains(&kind) {
            out.push(kind);
        }
    }
    Ok(Targets(out))
}

fn parse_scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (SCALE_MIN..=SCALE_MAX).contains(&v) => Ok(v),
        _ => Err(format!("must be a number from {SCALE_MIN} to {SCALE_MAX}")),
    }
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        // statement_timeout counts whole ms.
        Ok(v) if v.is_finite() && (0.001..=86_400.0).contains(&v) => Ok(v),
        _ => Err("must be from 0.001 to 86400 seconds".to_owned()),
    }
}

/// Progress on stderr (indicatif hides it when stderr is not a terminal),
/// and one line per load and per query either way, so a log shows how far
/// a run got.
struct Bars {
    bar: Option<ProgressBar>,
}

impl Bars {
    fn replace(&mut self, bar: ProgressBar, template: &str) {
        bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
        if let Some(old) = self.bar.replace(bar) {
            old.finish_and_clear();
        }
    }

    fn clear(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl TpchProgress for Bars {
    fn loading(&mut self, side: SideKind, rows: u64, expected: u64) {
        if self.bar.is_none() {
            let bar = ProgressBar::new(expected.max(1));
            bar.set_prefix(format!("loading {:<14}", side.label()));
            self.replace(bar, "{prefix} {bar:30} {pos}/~{len} rows {per_sec}");
        }
        if let Some(b) = &self.bar {
            b.set_position(rows);
        }
    }

    fn loaded(&mut self, side: SideKind, report: &LoadReport) {
        self.clear();
        let rows: u64 = report.rows.iter().map(|(_, n)| n).sum();
        eprintln!("pgtier: {} loaded: {rows} rows in {:.1} s; ANALYZE {}", side.label(), report.load_s, report.analyze);
    }

    fn query_run(&mut self, query: u8, side: SideKind, run: u32, runs: u32) {
        if self.bar.is_none() {
            self.replace(ProgressBar::new_spinner(), "{spinner} {prefix} {msg} {elapsed}");
            if let Some(b) = &self.bar {
                b.enable_steady_tick(Duration::from_millis(200));
            }
        }
        if let Some(b) = &self.bar {
            b.set_prefix(format!("Q{query:<2} {:<14}", side.label()));
            b.set_message(if run == 0 { "warm-up".to_owned() } else { format!("run {run}/{runs}") });
            b.reset_elapsed();
        }
    }

    fn query_done(&mut self, result: &QueryResult) {
        self.clear();
        let cells: Vec<String> = result
            .sides
            .iter()
            .map(|s| {
                let time =
                    s.timing.as_ref().map_or(String::new(), |t| format!("{} ms ", tpch::output::ms(t.median_ms)));
                format!("{} {time}{}", s.side.label(), s.status.short())
            })
            .collect();
        eprintln!("pgtier: Q{} {}: {}", result.query, result.title, cells.join(", "));
    }
}

pub fn run(args: TpchArgs) -> anyhow::Result<()> {
    // The in-process server and the embedded engine commit asynchronously:
    // the load is re-runnable and the queries only read.
    let mut opened = OpenedTargets::open(&TargetFlags {
        kinds: &args.targets.0,
        url: args.url.as_deref(),
        pgtier_url: args.pgtier_url.as_deref(),
        work_dir: args.work_dir.as_deref(),
        commit: CommitArg::Async,
        name: "tpch",
        embedded_dir: args.embedded_dir.as_deref(),
        keep_data: args.skip_load,
    })?;
    let mut sides = opened.sides();
    // The columnar side: the embedded target again, its sessions on the
    // copies (tpch::SideKind::analytics_setting).
    if let (true, Some(embedded)) = (args.analytics, &opened.embedded) {
        sides.push(tpch::Side { kind: SideKind::Columnar, target: embedded });
    }
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let options = TpchOptions {
        scale: args.scale,
        runs: args.runs,
        timeout: Duration::from_secs_f64(args.timeout),
        load_streams: args.load_streams.map_or(cpus, usize::from),
        queries: if args.queries.is_empty() { (1..=22).collect() } else { args.queries.clone() },
        skip_load: args.skip_load,
        analytics: args.analytics,
    };
    eprintln!(
        "pgtier: bench tpch SF {}: {} timed runs per query after a warm-up, timeout {} s; targets: {}",
        args.scale,
        args.runs,
        args.timeout,
        sides.iter().map(|s| s.target.describe()).collect::<Vec<_>>().join("; ")
    );
    let mut bars = Bars { bar: None };
    let report = tpch::run(&options, &sides, &mut bars);
    bars.clear();
    drop(sides);
    opened.shutdown_server();
    let report = report.context("bench tpch")?;
    print!("{}", tpch::output::summary(&report));
    let files = tpch::output::write_files(&args.out, &report)?;
    for f in files {
        println!("wrote {}", f.display());
    }
    let different: Vec<String> = report
        .not_identical()
        .into_iter()
        .filter(|(_, _, s)| matches!(s, Status::Different { .. }))
        .map(|(q, side, s)| format!("Q{q} on {}: {}", side.label(), s.describe()))
        .collect();
    if !different.is_empty() {
        bail!("{} wrong answers:\n  {}", different.len(), different.join("\n  "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_lists_start_with_postgresql() {
        assert_eq!(parse_targets("embedded").map(|t| t.0), Ok(vec![SideKind::Postgresql, SideKind::Embedded]));
        assert_eq!(
            parse_targets("server,postgresql,server").map(|t| t.0),
            Ok(vec![SideKind::Postgresql, SideKind::PgtierServer])
        );
        assert!(parse_targets("oracle").is_err());
        assert!(parse_scale("0.01").is_ok() && parse_scale("0").is_err() && parse_scale("1000").is_err());
        assert!(parse_timeout("60").is_ok() && parse_timeout("-1").is_err());
    }
}
