//! `pgtier demo htap`: study 004 (Oracle Database In-Memory beside OLTP on
//! one server) at laptop scale, on this machine:
//!
//! 1. TPC-H ([`crate::tpch`]) loaded into a private PostgreSQL and the
//!    embedded engine, the columnar copy of the 8 tables enabled
//!    (compression per table beside the study's 1.53x / 1.84x), then the 22
//!    queries on PostgreSQL, pgtier's row path (`pgtier.analytics = off`)
//!    and pgtier columnar (`on`), every answer compared with PostgreSQL's;
//!    DuckDB's times beside them when its Python package is importable
//!    ([`duckdb`], a reference only);
//! 2. freshness ([`freshness`]): on the same engine, N analytic queries
//!    each right after an insert committed through another session; each
//!    must count the row (zero stale answers);
//! 3. CH-benCHmark ([`crate::ch`]) on PostgreSQL and the embedded engine
//!    with columnar copies of every table: OLTP alone, OLAP alone, both at
//!    once, OLTP alone again; NOPM kept % and query time change % beside the study's 84-93 %
//!    and 6-33 %.
//!
//! Everything measured goes into an [`HtapReport`] as it is measured; an
//! interrupted run keeps what it had. The command line (crates/cli
//! `demo_htap_cmd.rs`) owns the private PostgreSQL and the signal handler.

pub mod duckdb;
pub mod freshness;
mod markdown;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pgtier_engine::CommitMode;
use serde::{Deserialize, Serialize};

use crate::ch::{self, ChOptions, ChProgress, ChReport, PhaseKind, PhaseResult};
use crate::demo::monitor::Monitor;
use crate::report;
use crate::result::MachineInfo;
use crate::target::{DbError, Target};
use crate::targets::embedded::EmbeddedTarget;
use crate::targets::postgres::{CopyFormat, PgTarget};
use crate::tpcc::Scale;
use crate::tpch::{self, QueryResult, Side, SideKind, TpchOptions, TpchProgress, TpchReport};

pub use markdown::{REPORT_FILE, SECTIONS, write_report};

/// Study 004: OLTP kept this share of its stand-alone NOPM with the
/// analytic load beside it (%).
pub const STUDY_004_NOPM_KEPT: (f64, f64) = (84.0, 93.0);
/// Study 004: analytic queries this much slower beside OLTP than alone (%).
pub const STUDY_004_QUERY_CHANGE: (f64, f64) = (6.0, 33.0);

/// What the command line decides.
#[derive(Clone, Debug)]
pub struct HtapOptions {
    pub tpch_scale: f64,
    /// Timed runs per TPC-H query and side, after a warm-up.
    pub tpch_runs: u32,
    pub tpch_timeout: Duration,
    pub ch_warehouses: u32,
    /// CH-benCHmark's test-only scale (1,000 items, 300 customers a district).
    pub ch_test_scale: bool,
    pub ch_clients: u32,
    pub ch_streams: u32,
    pub ch_rampup: Duration,
    pub ch_measure: Duration,
    pub ch_query_timeout: Duration,
    /// Analytic queries of the freshness proof (0 skips it).
    pub freshness_queries: u32,
    /// Look for DuckDB (the Python package); false skips it.
    pub duckdb: bool,
    /// DuckDB's threads: None, as many as pgtier's analytic executor
    /// runs (the comparison on equal threads); Some(0), DuckDB's default
    /// (every CPU); Some(n), n.
    pub duckdb_threads: Option<u32>,
    pub load_streams: usize,
    pub seed: u64,
    pub work_dir: PathBuf,
    pub out_dir: PathBuf,
}

impl HtapOptions {
    pub fn check(&self) -> Result<(), HtapError> {
        let bad = |m: String| Err(HtapError::Invalid(m));
        if !(tpch::schema::SCALE_MIN..=tpch::schema::SCALE_MAX).contains(&self.tpch_scale) {
            return bad(format!("TPC-H scale {}", self.tpch_scale));
        }
        if self.tpch_runs > tpch::RUNS_MAX || self.tpch_timeout.is_zero() {
            return bad(format!("TPC-H runs {} (at most {}) and a timeout above 0", self.tpch_runs, tpch::RUNS_MAX));
        }
        if self.ch_measure.is_zero() || self.ch_query_timeout.is_zero() || self.ch_clients == 0 {
            return bad("CH-benCHmark needs a measure window, a query timeout and a client".into());
        }
        Ok(())
    }

    /// Seconds each phase is expected to take, for the progress ETA: from
    /// a debug build's run on the 2-core VM at SF 0.1 (load and copies
    /// 80 s; per run of the 22 queries PostgreSQL 100 s, most of it Q17 and
    /// Q20, pgtier's row path 41 s, columnar 15 s; CH-benCHmark's load 50 s).
    /// The monitor corrects the ETA as phases finish.
    fn estimates(&self) -> Vec<(&'static str, f64)> {
        let tpch_load = 10.0 + 700.0 * self.tpch_scale;
        // Superlinear on PostgreSQL (Q17, Q20: about 100x from SF 0.01 to 0.1).
        let per_run = 2.0 + 160.0 * self.tpch_scale + 15_000.0 * self.tpch_scale * self.tpch_scale;
        let tpch_queries = (1.0 + f64::from(self.tpch_runs)) * per_run;
        let ch_load = if self.ch_test_scale { 10.0 } else { 50.0 } * f64::from(self.ch_warehouses);
        let ch_phases = 10.0 * (self.ch_rampup + self.ch_measure).as_secs_f64();
        vec![
            (Phase::Tpch.name(), tpch_load + tpch_queries),
            (Phase::Duckdb.name(), if self.duckdb { 10.0 + 100.0 * self.tpch_scale } else { 0.0 }),
            (Phase::Freshness.name(), f64::from(self.freshness_queries) * 0.01),
            (Phase::Ch.name(), ch_load + ch_phases + 30.0),
        ]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Tpch,
    Duckdb,
    Freshness,
    Ch,
}

impl Phase {
    const ALL: [Phase; 4] = [Phase::Tpch, Phase::Duckdb, Phase::Freshness, Phase::Ch];

    fn name(self) -> &'static str {
        match self {
            Phase::Tpch => "TPC-H: PostgreSQL, pgtier row path, pgtier columnar",
            Phase::Duckdb => "TPC-H on DuckDB (a reference, when installed)",
            Phase::Freshness => "freshness: analytic queries right after commits",
            Phase::Ch => "CH-benCHmark: OLTP alone, OLAP alone, both at once, OLAP and OLTP alone again",
        }
    }
}

/// What the caller hands the demo besides its options.
pub struct HtapControl<'a> {
    /// PostgreSQL databases for TPC-H and for CH-benCHmark (their tables
    /// share names: region, nation, supplier).
    pub tpch_url: String,
    pub ch_url: String,
    pub interrupt: &'a AtomicBool,
    pub progress: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum HtapError {
    #[error("interrupted during {phase}")]
    Interrupted { phase: String },
    #[error("{phase}: {message}")]
    Failed { phase: String, message: String },
    #[error("invalid demo settings: {0}")]
    Invalid(String),
}

/// Whether this build of pgtier has the analytic executor, as EXPLAIN
/// said on the columnar side.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecutorFigures {
    /// None: not asked yet (the run stopped before).
    pub present: Option<bool>,
    /// The EXPLAIN line that told.
    pub evidence: String,
}

/// Everything the demo measured, written as `htap.json` beside the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HtapReport {
    pub started_at: String,
    pub machine: MachineInfo,
    pub settings: Vec<(String, String)>,
    pub executor: ExecutorFigures,
    pub tpch: Option<TpchReport>,
    pub duckdb: Option<duckdb::DuckdbFigures>,
    pub freshness: Option<freshness::FreshnessFigures>,
    pub ch: Option<ChReport>,
    pub deviations: Vec<String>,
    /// (phase, wall seconds), in order.
    pub phases: Vec<(String, f64)>,
    pub finished: bool,
    pub stopped_by: Option<String>,
    pub total_s: f64,
}

impl HtapReport {
    /// What must fail the command: a wrong answer, a stale read, a stopped
    /// OLTP run or a failed consistency check.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(t) = &self.tpch {
            for (q, side, status) in t.not_identical() {
                if matches!(status, tpch::Status::Different { .. }) {
                    out.push(format!("TPC-H Q{q} on {}: {}", side.label(), status.describe()));
                }
            }
        }
        if let Some(f) = self.freshness.as_ref().filter(|f| f.stale > 0 || f.failed > 0) {
            out.push(format!("freshness: {} stale, {} failed of {} queries", f.stale, f.failed, f.queries));
        }
        if let Some(c) = &self.ch {
            out.extend(c.failures().into_iter().map(|f| format!("CH-benCHmark: {f}")));
        }
        out
    }
}

/// Runs the demo, filling `report` as it goes.
pub fn run(options: &HtapOptions, control: &HtapControl<'_>, report: &mut HtapReport) -> Result<(), HtapError> {
    options.check()?;
    let started = Instant::now();
    report.started_at = report::now_rfc3339();
    report.machine = report::machine_info();
    report.settings = settings(options);
    report.deviations = deviations(options);
    let monitor = Monitor::start(options.estimates(), control.progress);
    let outcome = Demo { o: options, control, report, monitor: &monitor }.all();
    let _ = monitor.finish();
    report.total_s = started.elapsed().as_secs_f64();
    match &outcome {
        Ok(()) => report.finished = true,
        Err(e) => report.stopped_by = Some(e.to_string()),
    }
    outcome
}

struct Demo<'a, 'c> {
    o: &'a HtapOptions,
    control: &'a HtapControl<'c>,
    report: &'a mut HtapReport,
    monitor: &'a Monitor,
}

impl Demo<'_, '_> {
    fn all(&mut self) -> Result<(), HtapError> {
        let dir = self.o.work_dir.join("tpch");
        let _ = std::fs::remove_dir_all(&dir);
        let embedded = EmbeddedTarget::open(&dir, CommitMode::Async).map_err(failed(Phase::Tpch))?;
        let outcome = self.tpch_phases(&embedded);
        // The copies' threads belong to this engine: stopped before it goes.
        pgtier_sql::stop_analytics(embedded.database());
        drop(embedded);
        let _ = std::fs::remove_dir_all(&dir);
        outcome?;
        self.step(Phase::Ch, Demo::ch)
    }

    fn tpch_phases(&mut self, embedded: &EmbeddedTarget) -> Result<(), HtapError> {
        self.step(Phase::Tpch, |d| d.tpch(embedded))?;
        self.step(Phase::Duckdb, Demo::duckdb)?;
        self.step(Phase::Freshness, |d| d.freshness(embedded))
    }

    fn step(&mut self, phase: Phase, body: impl FnOnce(&mut Self) -> Result<(), HtapError>) -> Result<(), HtapError> {
        self.interrupted(phase)?;
        let index = Phase::ALL.iter().position(|p| *p == phase).unwrap_or(0);
        let monitor = self.monitor;
        let (result, seconds) = monitor.phase(index, || body(self));
        self.report.phases.push((phase.name().to_owned(), seconds));
        result?;
        // A phase that saw Ctrl-C stopped early: said as an interruption.
        self.interrupted(phase)
    }

    fn interrupted(&self, phase: Phase) -> Result<(), HtapError> {
        if self.control.interrupt.load(Ordering::Relaxed) {
            return Err(HtapError::Interrupted { phase: phase.name().to_owned() });
        }
        Ok(())
    }

    fn postgres(&self, url: &str, phase: Phase) -> Result<PgTarget, HtapError> {
        PgTarget::open(url)
            .map(|t| t.with_copy_format(CopyFormat::Text))
            .map_err(|e| HtapError::Failed { phase: phase.name().to_owned(), message: e.to_string() })
    }

    fn tpch(&mut self, embedded: &EmbeddedTarget) -> Result<(), HtapError> {
        let pg = self.postgres(&self.control.tpch_url, Phase::Tpch)?;
        let sides = [
            Side { kind: SideKind::Postgresql, target: &pg as &dyn Target },
            Side { kind: SideKind::Embedded, target: embedded },
            Side { kind: SideKind::Columnar, target: embedded },
        ];
        let options = TpchOptions {
            scale: self.o.tpch_scale,
            runs: self.o.tpch_runs,
            timeout: self.o.tpch_timeout,
            load_streams: self.o.load_streams,
            queries: (1..=22).collect(),
            skip_load: false,
            analytics: true,
        };
        let mut progress = TpchMonitor { monitor: self.monitor, interrupt: self.control.interrupt, done: 0 };
        let report = tpch::run(&options, &sides, &mut progress)
            .map_err(|e| HtapError::Failed { phase: Phase::Tpch.name().to_owned(), message: e.to_string() })?;
        self.report.executor = executor(&report);
        self.report.tpch = Some(report);
        Ok(())
    }

    fn duckdb(&mut self) -> Result<(), HtapError> {
        if !self.o.duckdb {
            self.report.duckdb = Some(duckdb::DuckdbFigures::skipped("not asked for (--no-duckdb)"));
            return Ok(());
        }
        let pg = self.postgres(&self.control.tpch_url, Phase::Duckdb)?;
        self.monitor.detail("exporting PostgreSQL's TPC-H tables, then DuckDB runs the 22 queries".into());
        let dir = self.o.work_dir.join("duckdb");
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let pgtier_threads = pgtier_sql::session::analytics_executor_threads(cpus);
        let threads = match self.o.duckdb_threads {
            None => Some(u32::try_from(pgtier_threads).unwrap_or(u32::MAX)),
            Some(0) => None,
            Some(n) => Some(n),
        };
        let mut figures =
            duckdb::run(&pg, &dir, self.o.tpch_scale, self.o.tpch_runs.max(1), self.o.tpch_timeout, threads);
        figures.pgtier_threads = Some(pgtier_threads);
        self.report.duckdb = Some(figures);
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }

    fn freshness(&mut self, embedded: &EmbeddedTarget) -> Result<(), HtapError> {
        if self.o.freshness_queries == 0 {
            return Ok(());
        }
        let monitor = self.monitor;
        let interrupt = self.control.interrupt;
        let figures = freshness::run(embedded, self.o.freshness_queries, &mut |done, of| {
            monitor.detail(format!("{done} of {of} queries"));
            !interrupt.load(Ordering::Relaxed)
        })
        .map_err(failed(Phase::Freshness))?;
        self.report.freshness = Some(figures);
        Ok(())
    }

    fn ch(&mut self) -> Result<(), HtapError> {
        let pg = self.postgres(&self.control.ch_url, Phase::Ch)?;
        let dir = self.o.work_dir.join("ch");
        let _ = std::fs::remove_dir_all(&dir);
        // Sync commit: OLTP's NOPM as an application would see it, the
        // same durability as PostgreSQL's synchronous_commit.
        let embedded = EmbeddedTarget::open(&dir, CommitMode::Sync).map_err(failed(Phase::Ch))?;
        let sides = [
            Side { kind: SideKind::Postgresql, target: &pg as &dyn Target },
            Side { kind: SideKind::Embedded, target: &embedded },
        ];
        let scale =
            if self.o.ch_test_scale { Scale::small(self.o.ch_warehouses) } else { Scale::spec(self.o.ch_warehouses) };
        let options = ChOptions {
            scale,
            clients: self.o.ch_clients,
            analytic_streams: self.o.ch_streams,
            rampup: self.o.ch_rampup,
            measure: self.o.ch_measure,
            query_timeout: self.o.ch_query_timeout,
            load_streams: self.o.load_streams,
            seed: self.o.seed,
            analytics: true,
        };
        let mut progress = ChMonitor { monitor: self.monitor, interrupt: self.control.interrupt };
        let outcome = ch::run(&options, &sides, &mut progress);
        pgtier_sql::stop_analytics(embedded.database());
        drop(embedded);
        let _ = std::fs::remove_dir_all(&dir);
        let report =
            outcome.map_err(|e| HtapError::Failed { phase: Phase::Ch.name().to_owned(), message: e.to_string() })?;
        self.report.ch = Some(report);
        Ok(())
    }
}

fn failed(phase: Phase) -> impl Fn(DbError) -> HtapError {
    move |e| HtapError::Failed { phase: phase.name().to_owned(), message: e.to_string() }
}

/// Whether the columnar side's EXPLAIN named the columnar path anywhere,
/// or said the build has no executor.
fn executor(report: &TpchReport) -> ExecutorFigures {
    let paths: Vec<&str> = report.queries.iter().filter_map(|q| q.side(SideKind::Columnar)?.path.as_deref()).collect();
    if let Some(p) = paths.iter().find(|p| tpch::is_columnar_path(p)) {
        return ExecutorFigures { present: Some(true), evidence: format!("Analytics: {p}") };
    }
    match paths.iter().find(|p| tpch::lacks_executor(p)) {
        Some(p) => ExecutorFigures { present: Some(false), evidence: format!("Analytics: {p}") },
        None => ExecutorFigures {
            present: None,
            evidence: paths.first().map_or("no query was explained".to_owned(), |p| format!("Analytics: {p}")),
        },
    }
}

/// TPC-H's progress into the monitor's detail; Ctrl-C ends the queries.
struct TpchMonitor<'a> {
    monitor: &'a Monitor,
    interrupt: &'a AtomicBool,
    done: usize,
}

impl TpchProgress for TpchMonitor<'_> {
    fn loading(&mut self, side: SideKind, rows: u64, expected: u64) {
        let pct = if expected == 0 { 0.0 } else { rows as f64 * 100.0 / expected as f64 };
        self.monitor.detail(format!("loading {}: {pct:.0} %", side.label()));
    }

    fn query_run(&mut self, query: u8, side: SideKind, run: u32, runs: u32) {
        let what = if run == 0 { "warm-up".to_owned() } else { format!("run {run}/{runs}") };
        self.monitor.detail(format!("{} of 22 done; Q{query} on {} {what}", self.done, side.label()));
    }

    fn query_done(&mut self, _result: &QueryResult) {
        self.done += 1;
    }

    fn cancelled(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed)
    }
}

/// CH-benCHmark's progress into the monitor's detail; Ctrl-C ends the
/// run before its next phase.
struct ChMonitor<'a> {
    monitor: &'a Monitor,
    interrupt: &'a AtomicBool,
}

impl ChProgress for ChMonitor<'_> {
    fn loading(&mut self, side: SideKind, rows: u64, expected: u64) {
        let pct = if expected == 0 { 0.0 } else { rows as f64 * 100.0 / expected as f64 };
        self.monitor.detail(format!("loading {}: {pct:.0} %", side.label()));
    }

    fn answer_checked(&mut self, result: &QueryResult) {
        self.monitor.detail(format!("answers compared: Q{}", result.query));
    }

    fn phase_running(&mut self, side: SideKind, phase: PhaseKind, elapsed: Duration, counts: (u64, u64)) {
        self.monitor.detail(format!(
            "{} {} {:.0} s: {} transactions, {} queries",
            side.label(),
            phase.label(),
            elapsed.as_secs_f64(),
            counts.0,
            counts.1
        ));
    }

    fn phase_done(&mut self, _side: SideKind, _result: &PhaseResult) {}

    fn cancelled(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed)
    }
}

fn settings(o: &HtapOptions) -> Vec<(String, String)> {
    let secs = |d: Duration| format!("{} s", d.as_secs_f64());
    vec![
        ("TPC-H scale factor".into(), o.tpch_scale.to_string()),
        ("TPC-H timed runs per query and side".into(), format!("{} after a warm-up", o.tpch_runs)),
        ("TPC-H statement_timeout".into(), secs(o.tpch_timeout)),
        (
            "CH-benCHmark scale".into(),
            format!(
                "{} warehouse(s){}",
                o.ch_warehouses,
                if o.ch_test_scale { ", test scale (1,000 items, 300 customers a district)" } else { "" }
            ),
        ),
        ("CH-benCHmark OLTP clients / analytic streams".into(), format!("{} / {}", o.ch_clients, o.ch_streams)),
        ("CH-benCHmark ramp-up / measure per phase".into(), format!("{} / {}", secs(o.ch_rampup), secs(o.ch_measure))),
        ("CH-benCHmark query timeout".into(), secs(o.ch_query_timeout)),
        ("freshness queries".into(), o.freshness_queries.to_string()),
        ("pgtier commit mode".into(), "async for TPC-H and freshness (loads), sync for CH-benCHmark".into()),
        ("seed".into(), o.seed.to_string()),
    ]
}

fn deviations(o: &HtapOptions) -> Vec<String> {
    let mut out: Vec<String> = vec![
        format!(
            "scale: TPC-H SF {} and CH-benCHmark {} warehouse(s){} on this machine, not the study's data sizes on a \
             multi-socket server",
            o.tpch_scale,
            o.ch_warehouses,
            if o.ch_test_scale { " at the test-only scale" } else { "" }
        ),
        crate::ch::analytic_resources(),
        "the analytic engine is DataFusion over pgtier's Arrow copies, not Oracle Database In-Memory; compression \
         is the Arrow memory's (dictionaries, offsets), not MEMCOMPRESS FOR QUERY LOW"
            .into(),
        "pgtier is the embedded engine (in this process, no network hop); PostgreSQL is reached over loopback".into(),
        "a query the columnar path cannot compute exactly runs on pgtier's row path (EXPLAIN says which; the \
         TPC-H table gives each query's path)"
            .into(),
        "freshness is proven on the embedded engine with one writer and one reader session, not under the \
         study's load"
            .into(),
    ];
    out.extend(crate::report::idle_wakeup_deviation());
    if o.duckdb {
        out.push(
            "DuckDB (when installed) is a reference only: the same rows, exported from PostgreSQL, its own \
                  process and threads; its answers are not compared"
                .into(),
        );
    }
    out
}
