//! `pgtier demo htap`: study 004 at laptop scale (pgtier_bench::htap_demo
//! does the work). This layer owns what a library must not: the private
//! PostgreSQL, the Ctrl-C handler and the exit status.

use std::path::PathBuf;

use anyhow::{Context, bail};
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::htap_demo::{self, HtapControl, HtapError, HtapOptions, HtapReport};

use crate::bench_cmd::seconds;
use crate::demo_cmd::{INTERRUPT, install_interrupt_handler};

const HELP: &str = "\
What it does, in order (about 11 minutes at the defaults on 2 shared cores; PostgreSQL's Q17 and Q20
take about 50 s each at SF 0.1 without TPC-H's optional indexes, a third of the time):
  1. starts a private PostgreSQL (fsync on) with a database for TPC-H and one for CH-benCHmark;
  2. TPC-H at --tpch-scale into PostgreSQL and pgtier's embedded engine, the columnar copy of the 8
     tables enabled (ALTER TABLE ... SET ANALYTICS ON; compression per table beside study 004's
     1.53x / 1.84x), then the 22 queries on PostgreSQL, pgtier's row path (pgtier.analytics = off)
     and pgtier columnar (= on), every answer compared with PostgreSQL's, the path each query took
     (EXPLAIN); DuckDB's times beside them when the Python package duckdb is importable (a reference);
  3. freshness: --freshness-queries analytic queries, each right after an insert committed through
     another session, each must count the row (zero stale answers), latency p50/p99;
  4. CH-benCHmark on PostgreSQL and pgtier (columnar copies of every table, analytic sessions with
     pgtier.analytics = on): OLTP alone, OLAP alone, both at once, OLAP alone again, OLTP alone
     again; NOPM kept % (of the two OLTP-alone phases' mean) and query time change % (of the two
     OLAP-alone phases' mean) beside study 004's 84-93 % and 6-33 %.
One Markdown report with charts (PNG, SVG) and htap.json in --out. A pgtier built without the cargo
feature 'analytics' has no analytic executor: the report then says so at the top, and the columnar
figures are the row path's (scripts/demo-htap.sh builds it with the feature). Exit status 1 when an
answer differs from PostgreSQL's, an analytic read is stale, or TPC-C's consistency fails.

Ctrl-C stops at the next query or phase, writes the partial report and stops PostgreSQL.

Examples:
  pgtier demo htap                                     # the defaults
  pgtier demo htap --tpch-scale 0.01 --ch-test-scale --ch-duration 5 --freshness-queries 100   # a quick look";

#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct HtapArgs {
    /// TPC-H scale factor (0.1 = 600,000 lineitems)
    #[arg(long, value_name = "SF", default_value_t = 0.1)]
    tpch_scale: f64,
    /// Timed runs per TPC-H query and side, after a warm-up (each more adds PostgreSQL's ~100 s at SF 0.1)
    #[arg(long, value_name = "N", default_value_t = 1)]
    tpch_runs: u32,
    /// statement_timeout of every TPC-H query, seconds
    #[arg(long, value_name = "S", default_value_t = 60.0)]
    tpch_timeout: f64,
    /// CH-benCHmark warehouses
    #[arg(long, value_name = "N", default_value_t = 1)]
    ch_warehouses: u32,
    /// CH-benCHmark's test-only scale: 1,000 items and 300 customers per district instead of 100,000 and 3,000
    #[arg(long)]
    ch_test_scale: bool,
    /// CH-benCHmark TPC-C client sessions (the and study 004's "one OLTP and one analytic stream"; 2
    /// oversubscribes 2 CPUs with the analytic stream beside them)
    #[arg(long, value_name = "N", default_value_t = 1)]
    ch_clients: u32,
    /// CH-benCHmark analytic streams
    #[arg(long, value_name = "N", default_value_t = 1)]
    ch_streams: u32,
    /// CH-benCHmark ramp-up before each phase's window, seconds
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    ch_rampup: f64,
    /// CH-benCHmark measure window of each phase, seconds
    #[arg(long, value_name = "S", default_value_t = 40.0)]
    ch_duration: f64,
    /// statement_timeout of every CH-benCHmark analytic query, seconds
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    ch_query_timeout: f64,
    /// Analytic queries of the freshness proof, each right after a commit (0 skips it)
    #[arg(long, value_name = "N", default_value_t = 1000)]
    freshness_queries: u32,
    /// Do not look for DuckDB
    #[arg(long)]
    no_duckdb: bool,
    /// DuckDB's threads; 0 for DuckDB's default (every CPU)
    /// [default: as many as pgtier's analytic executor runs, the comparison on equal threads]
    #[arg(long, value_name = "N")]
    duckdb_threads: Option<u32>,
    /// Report, charts and htap.json go here
    #[arg(long, value_name = "DIR", default_value = "results/demo-htap")]
    out: PathBuf,
    /// The engines' directories and DuckDB's export (emptied first, removed after)
    #[arg(long, value_name = "DIR", default_value = ".pgtier/demo-htap")]
    work_dir: PathBuf,
    /// Seed of CH-benCHmark's population and clients [default: a fresh one, printed]
    #[arg(long)]
    seed: Option<u64>,
}

fn options(args: &HtapArgs) -> anyhow::Result<HtapOptions> {
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let options = HtapOptions {
        tpch_scale: args.tpch_scale,
        tpch_runs: args.tpch_runs,
        tpch_timeout: seconds("tpch-timeout", args.tpch_timeout, false)?,
        ch_warehouses: args.ch_warehouses,
        ch_test_scale: args.ch_test_scale,
        ch_clients: args.ch_clients,
        ch_streams: args.ch_streams,
        ch_rampup: seconds("ch-rampup", args.ch_rampup, true)?,
        ch_measure: seconds("ch-duration", args.ch_duration, false)?,
        ch_query_timeout: seconds("ch-query-timeout", args.ch_query_timeout, false)?,
        freshness_queries: args.freshness_queries,
        duckdb: !args.no_duckdb,
        duckdb_threads: args.duckdb_threads,
        load_streams: cpus,
        seed: args.seed.unwrap_or_else(pgtier_bench::driver::fresh_seed),
        work_dir: args.work_dir.clone(),
        out_dir: args.out.clone(),
    };
    options.check()?;
    Ok(options)
}

pub fn run(args: HtapArgs) -> anyhow::Result<()> {
    let options = options(&args)?;
    install_interrupt_handler();
    eprintln!(
        "pgtier demo htap: TPC-H SF {}, CH-benCHmark {} warehouse(s), {} freshness queries, seed {} (Ctrl-C stops \
         and writes a partial report)",
        options.tpch_scale, options.ch_warehouses, options.freshness_queries, options.seed
    );
    std::fs::create_dir_all(&options.work_dir).with_context(|| format!("creating {}", options.work_dir.display()))?;
    eprintln!("pgtier demo htap: starting a private PostgreSQL (fsync on, synchronous_commit on)");
    let cluster = PrivateCluster::start(ClusterOptions::for_benchmark()).context("starting the private PostgreSQL")?;
    let mut report = HtapReport::default();
    let outcome = match (cluster.create_database("tpch"), cluster.create_database("ch")) {
        (Ok(tpch_url), Ok(ch_url)) => {
            let control = HtapControl { tpch_url, ch_url, interrupt: &INTERRUPT, progress: true };
            htap_demo::run(&options, &control, &mut report)
        }
        (Err(e), _) | (_, Err(e)) => {
            Err(HtapError::Failed { phase: "creating the databases".into(), message: e.to_string() })
        }
    };
    // The report first: whatever happened, what was measured is kept.
    let written = htap_demo::write_report(&report, &options.out_dir);
    match cluster.stop() {
        Ok(()) => eprintln!("pgtier demo htap: private PostgreSQL stopped"),
        Err(e) => eprintln!("pgtier: warning: stopping the private PostgreSQL: {e}"),
    }
    let _ = std::fs::remove_dir_all(&options.work_dir);
    let (path, text) = written.context("writing the report")?;
    println!("{text}");
    eprintln!("pgtier demo htap: report {} (charts and htap.json beside it)", path.display());
    match outcome {
        Err(HtapError::Interrupted { phase }) => {
            eprintln!("pgtier demo htap: interrupted during {phase}; partial report written");
            std::process::exit(130);
        }
        Err(e) => Err(e.into()),
        Ok(()) => {
            let failures = report.failures();
            if !failures.is_empty() {
                bail!("{} failures:\n  {}", failures.len(), failures.join("\n  "));
            }
            Ok(())
        }
    }
}
