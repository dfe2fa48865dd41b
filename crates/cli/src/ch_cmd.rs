//! `pgtier bench ch`: CH-benCHmark (TPC-C's OLTP stream and the 22
//! analytic queries at once) on PostgreSQL, the pgtier server and the
//! embedded engine, one after another (crates/bench/src/ch). This file
//! turns flags into targets and options, shows progress and writes the
//! outputs; the targets open as `bench tpcc` opens them.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use pgtier_bench::ch::{self, ChOptions, ChProgress, PhaseKind, PhaseResult, QueryResult, SideKind, SideLoad};
use pgtier_bench::driver::fresh_seed;
use pgtier_bench::tpcc::{self, Scale};
use pgtier_bench::tpch::output::ms;

use crate::tpcc_cmd::{CommitArg, OpenedTargets, TargetFlags, Targets};

const HELP: &str = "\
CH-benCHmark (Cole et al. 2011): TPC-C's nine tables populated as `pgtier bench tpcc` does
(--warehouses), plus supplier (10,000 rows), nation (62) and region (5), loaded from --seed on
every target. Right after the load, each of the 22 analytic queries runs once on every target and
its answer is compared with PostgreSQL's (identical / DIFFERENT / refused / timeout). Then, on each
target in turn, five phases of --rampup + --duration seconds:
  a. OLTP alone      --clients TPC-C clients (no keying or thinking time): NOPM
  b. OLAP alone      --analytic-streams streams, each running Q1..Q22 in order, over and over:
                     per-query median time, queries per hour
  c. both at once    the clients and the streams together: NOPM kept (% of the mean of a and
                     e), each query's median change (% of the mean of its medians in b and d)
  d. OLAP alone again, as b, on the tables c's OLTP grew
  e. OLTP alone again, as a
Each stream's alone phases bracket c, so the tables' growth and the machine's drift weigh on
alone and together alike; their differences (e / a, d / b) are reported as drift.
Every analytic query is bounded by statement_timeout = --query-timeout (timeouts counted). After
the last phase TPC-C's consistency conditions are checked. The data is not reloaded between
phases (the report gives order_line's rows at each phase's start).

Targets (--targets; PostgreSQL always runs first: it is the answers' reference):
  postgresql   --url, else $PGTIER_BENCH_URL, else the cluster of `pgtier backend start`
  server       --pgtier-url, else a pgtier server this command starts in-process
               (loopback, trust auth, --pgtier-commit, data in --work-dir)
  embedded     the engine in this process (--pgtier-commit), data in --work-dir
pgtier answers the analytic queries on its row store unless --analytics: then every table gets
its columnar copy on the pgtier targets after the load and their analytic sessions run with
pgtier.analytics = on (the path EXPLAIN names is given per query in the answers section).

Output: a one-screen summary on stdout (per target NOPM alone (a / e) / together / kept, analytic total
alone (b / d) / together / change, per query), and report.md + ch.json in --out. Exit status 1 when an
answer is DIFFERENT, an OLTP run stops on an error or a consistency check fails; 2 for bad flags.

Examples:
  pgtier bench ch
  pgtier bench ch --targets postgresql,server,embedded --warehouses 2 --clients 4 --duration 120
  pgtier bench ch --analytics --test-scale --duration 20   # pgtier's analytic side columnar
  pgtier bench ch --analytic-streams 2 --query-timeout 30 --pgtier-commit async --out results/ch-2s";

#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct ChArgs {
    /// Warehouses to populate (the scale)
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(tpcc::WAREHOUSES_MAX)))]
    warehouses: u32,
    /// TPC-C client sessions in phases a, c and e
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=256))]
    clients: u32,
    /// Analytic streams in phases b, c and d
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(ch::STREAMS_MAX)))]
    analytic_streams: u32,
    /// Measure window of each phase, seconds
    #[arg(long, value_name = "S", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration: u64,
    /// Ramp-up before each phase's measure window, seconds
    #[arg(long, value_name = "S", default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    rampup: u64,
    /// statement_timeout of every analytic query, seconds
    #[arg(long, value_name = "S", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    query_timeout: u64,
    /// Targets to run, comma-separated: postgresql, server, embedded (PostgreSQL is always added)
    #[arg(long, value_name = "LIST", default_value = "postgresql,embedded", value_parser = parse_ch_targets)]
    targets: Targets,
    /// PostgreSQL URL [default: $PGTIER_BENCH_URL, else the cluster of `pgtier backend start`]
    #[arg(long, env = "PGTIER_BENCH_URL", hide_env_values = true)]
    url: Option<String>,
    /// A running pgtier server [default: one started in-process]
    #[arg(long, value_name = "URL")]
    pgtier_url: Option<String>,
    /// Commit mode of the in-process server and the embedded engine
    #[arg(long, value_enum, default_value_t = CommitArg::Sync)]
    pgtier_commit: CommitArg,
    /// Where the in-process server and the embedded engine keep their data [default: a temporary directory, removed after]
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Parallel bulk-load streams per target [default: CPUs]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    load_streams: Option<u16>,
    /// Seed of the population and the OLTP clients' random streams [default: a fresh one, printed]
    #[arg(long)]
    seed: Option<u64>,
    /// After the load, enable the columnar copy (ALTER TABLE ... SET ANALYTICS ON) of every table on the pgtier targets and run their analytic sessions with pgtier.analytics = on (OLTP sessions keep the default)
    #[arg(long)]
    analytics: bool,
    /// Run pgtier's analytic executor and the copies' merger under SCHED_IDLE instead of nice (`[analytics] sched_idle`)
    #[arg(long)]
    analytic_sched_idle: bool,
    /// Test-only scale: 1,000 items and 300 customers per district instead of 100,000 and 3,000
    #[arg(long)]
    test_scale: bool,
    /// Report directory: report.md and ch.json
    #[arg(long, value_name = "DIR", default_value = "results/ch")]
    out: PathBuf,
}

/// `bench tpcc`'s target list, with PostgreSQL added (the reference).
fn parse_ch_targets(list: &str) -> Result<Targets, String> {
    let mut targets = crate::tpcc_cmd::parse_targets(list)?;
    if !targets.0.contains(&SideKind::Postgresql) {
        targets.0.insert(0, SideKind::Postgresql);
    }
    Ok(targets)
}

/// A bar on stderr (hidden when stderr is not a terminal) and one plain
/// line per load, query checked and phase either way.
struct Bars {
    bar: Option<ProgressBar>,
    total: Duration,
}

impl Bars {
    fn bar(&mut self, len: u64, prefix: String, template: &str) -> &ProgressBar {
        self.bar.get_or_insert_with(|| {
            let bar = ProgressBar::new(len.max(1));
            bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
            bar.set_prefix(prefix);
            bar
        })
    }

    fn clear(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl ChProgress for Bars {
    fn loading(&mut self, side: SideKind, rows: u64, expected: u64) {
        let prefix = format!("loading {:<14}", side.label());
        let bar = self.bar(expected, prefix, "{prefix} {bar:30} {pos}/~{len} rows {per_sec}");
        bar.set_length(expected.max(1));
        bar.set_position(rows);
    }

    fn loaded(&mut self, side: SideKind, load: &SideLoad) {
        self.clear();
        let rows: u64 = load.tpcc.rows.iter().chain(&load.ch_rows).map(|(_, n)| n).sum();
        eprintln!(
            "pgtier: {} loaded: {rows} rows in {:.1} s, keys and indexes {:.1} s{}",
            side.label(),
            load.tpcc.load_s + load.ch_load_s,
            load.tpcc.build_s,
            if load.tpcc.refused.is_empty() {
                String::new()
            } else {
                format!("; refused: {}", load.tpcc.refused.join("; "))
            }
        );
    }

    fn answer_checked(&mut self, result: &QueryResult) {
        let cells: Vec<String> = result
            .sides
            .iter()
            .map(|s| {
                let time = s.warmup_ms.map_or(String::new(), |m| format!("{} ms ", ms(m)));
                format!("{} {time}{}", s.side.label(), s.status.short())
            })
            .collect();
        eprintln!("pgtier: answers Q{} {}: {}", result.query, result.title, cells.join(", "));
    }

    fn phase_running(&mut self, side: SideKind, phase: PhaseKind, elapsed: Duration, counts: (u64, u64)) {
        let total = self.total;
        let prefix = format!("{:<14} {:<12}", side.label(), phase.label());
        let bar = self.bar(total.as_millis() as u64, prefix, "{prefix} {bar:30} {msg}");
        bar.set_position(elapsed.as_millis() as u64);
        bar.set_message(format!("{} transactions, {} queries", counts.0, counts.1));
    }

    fn phase_done(&mut self, side: SideKind, result: &PhaseResult) {
        self.clear();
        let oltp = result.oltp.as_ref().map_or(String::new(), |o| match &o.error {
            Some(e) => format!(" OLTP STOPPED: {e}"),
            None => format!(" NOPM {:.0}", o.nopm),
        });
        let olap = result.analytic.as_ref().map_or(String::new(), |a| {
            format!(
                " {} queries ({:.0}/h), {} timeouts, {} refused",
                a.completed, a.queries_per_hour, a.timeouts, a.refused
            )
        });
        eprintln!("pgtier: {} {}:{oltp}{olap}", side.label(), result.kind.label());
    }
}

pub fn run(args: ChArgs) -> anyhow::Result<()> {
    if args.analytic_sched_idle {
        ch::use_sched_idle();
    }
    let mut opened = OpenedTargets::open(&TargetFlags {
        kinds: &args.targets.0,
        url: args.url.as_deref(),
        pgtier_url: args.pgtier_url.as_deref(),
        work_dir: args.work_dir.as_deref(),
        commit: args.pgtier_commit,
        name: "ch",
        embedded_dir: None,
        keep_data: false,
    })?;
    let sides = opened.sides();
    let scale = if args.test_scale { Scale::small(args.warehouses) } else { Scale::spec(args.warehouses) };
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let options = ChOptions {
        scale,
        clients: args.clients,
        analytic_streams: args.analytic_streams,
        rampup: Duration::from_secs(args.rampup),
        measure: Duration::from_secs(args.duration),
        query_timeout: Duration::from_secs(args.query_timeout),
        load_streams: args.load_streams.map_or(cpus, usize::from),
        seed: args.seed.unwrap_or_else(fresh_seed),
        analytics: args.analytics,
    };
    eprintln!(
        "pgtier: bench ch: {} warehouses, {} OLTP clients, {} analytic stream(s), 5 phases of {} + {} s per target, \
         query timeout {} s, seed {}; targets: {}",
        args.warehouses,
        args.clients,
        args.analytic_streams,
        args.rampup,
        args.duration,
        args.query_timeout,
        options.seed,
        sides.iter().map(|s| s.target.describe()).collect::<Vec<_>>().join("; ")
    );
    let mut bars = Bars { bar: None, total: options.rampup + options.measure };
    let report = ch::run(&options, &sides, &mut bars);
    bars.clear();
    drop(sides);
    opened.shutdown_server();
    let report = report.context("bench ch")?;
    print!("{}", ch::output::summary(&report));
    for f in ch::output::write_files(&args.out, &report)? {
        println!("wrote {}", f.display());
    }
    let failures = report.failures();
    if !failures.is_empty() {
        bail!("{} failures:\n  {}", failures.len(), failures.join("\n  "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgresql_is_always_a_target_and_first() {
        assert_eq!(parse_ch_targets("embedded").map(|t| t.0), Ok(vec![SideKind::Postgresql, SideKind::Embedded]));
        assert!(parse_ch_targets("oracle").is_err());
    }
}
