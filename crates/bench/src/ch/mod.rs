//! CH-benCHmark (Cole et al. 2011; study 004's mixed side): TPC-C's OLTP
//! stream and the 22 analytic queries adapted to its schema, at once, on
//! every target the kit knows (PostgreSQL, the pgtier server, the embedded
//! engine), one after another.
//!
//! Method.
//! 1. Population: TPC-C's nine tables exactly as `tpcc` loads them (every
//!    population timestamp the same on every target), plus `region`,
//!    `nation` and `supplier` ([`schema`]), from the run's seed through the
//!    same bulk path; then ANALYZE where accepted. Every target is loaded
//!    before any runs, so all hold the same rows for step 2.
//! 2. Answers: each of the 22 queries ([`queries`]) once on every target,
//!    each answer compared with PostgreSQL's by `tpch::answers` (text
//!    values, ORDER BY-aware): identical / DIFFERENT / refused / timeout.
//! 3. Phases, per target in turn, each a ramp-up then the same measure
//!    window: (a) OLTP alone, `clients` TPC-C clients (`tpcc::run_oltp`) →
//!    NOPM; (b) OLAP alone, `analytic_streams` streams each running
//!    Q1..Q22 in order over and over ([`stream`]) → per-query median and
//!    queries per hour; (c) both at once; (d) OLAP alone again; (e) OLTP
//!    alone again. NOPM kept is c's NOPM over the mean of a and e, each
//!    query's change its median in c over the mean of its medians in b and
//!    d: the alone phases bracket c, so the tables' growth (c's OLTP adds
//!    orders while its queries run) and drift over the run weigh on both
//!    sides alike. A query counts when it starts and
//!    ends inside the window (the driver's measure window in c); every run
//!    is bounded by statement_timeout (timeouts counted). The data is not
//!    reloaded between phases (see [`deviations`]); order_line's rows at
//!    each phase's start are reported.
//! 4. TPC-C's consistency checks on each target after its last phase.
//!
//! With `analytics`, after the load every CH table on each pgtier target
//! gets its columnar copy (`ALTER TABLE t SET ANALYTICS ON`, timed), and
//! the analytic sessions there (step 2's and the streams') run with
//! `pgtier.analytics = on`; the OLTP sessions keep the default. Step 2
//! records the path EXPLAIN names for each query on those targets.

pub mod output;
pub mod queries;
pub mod schema;
pub mod stream;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::driver::{LiveCounters, Phase};
use crate::result::MachineInfo;
use crate::target::{AnalyticRoute, DbError, Target};
use crate::tpcc::consistency::{self, Check};
use crate::tpcc::{self, OltpFigures, Scale, population};
use crate::tpch::{Query, QuerySession, answers, failed};
pub use crate::tpch::{QueryResult, Side, SideKind, Status};
use stream::{AnalyticFigures, Window};

/// Most analytic streams a run may start.
pub const STREAMS_MAX: u32 = 16;

pub struct ChOptions {
    pub scale: Scale,
    /// TPC-C client sessions in phases a, c and e.
    pub clients: u32,
    /// Analytic streams in phases b, c and d.
    pub analytic_streams: u32,
    pub rampup: Duration,
    pub measure: Duration,
    /// statement_timeout of every analytic query.
    pub query_timeout: Duration,
    pub load_streams: usize,
    /// Seeds population and the OLTP clients' random streams.
    pub seed: u64,
    /// Columnar copies of every table on the pgtier targets, analytic
    /// sessions there with `pgtier.analytics = on`.
    pub analytics: bool,
}

impl ChOptions {
    /// The `pgtier.analytics` of the analytic sessions on `kind`.
    fn analytics_setting(&self, kind: SideKind) -> Option<&'static str> {
        (self.analytics && kind != SideKind::Postgresql).then_some("on")
    }
}

/// Every table of the run: TPC-C's nine and CH-benCHmark's three.
pub fn table_names() -> Vec<&'static str> {
    tpcc::schema::TABLES.iter().chain(schema::TABLES.iter()).map(|t| t.name).collect()
}

/// What enabling the columnar copies took on one target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CopiesEnabled {
    /// Wall time of all the ALTER TABLEs, s.
    pub enable_s: f64,
    /// (table, error) of the tables whose copy was refused.
    pub refused: Vec<(String, String)>,
}

/// `ALTER TABLE t SET ANALYTICS ON` for every table of the run.
fn enable_copies(target: &dyn Target) -> Result<CopiesEnabled, DbError> {
    let mut session = target.connect()?;
    let started = Instant::now();
    let mut refused = Vec::new();
    for table in table_names() {
        if let Err(e) = session.simple_query(&format!("ALTER TABLE {table} SET ANALYTICS ON")) {
            refused.push((table.to_owned(), e.to_string()));
        }
    }
    Ok(CopiesEnabled { enable_s: started.elapsed().as_secs_f64(), refused })
}

#[derive(Debug, thiserror::Error)]
pub enum ChError {
    #[error("{side}: {error}")]
    Db { side: &'static str, error: DbError },
    #[error("invalid options: {0}")]
    Options(String),
}

/// The phases of a target's run, in the order they run. Each stream runs
/// alone before and after the phase they share, so that what changes over
/// the run shows as a difference between the two alone phases (drift)
/// instead of as a gain or loss beside the other stream: OLTP's first
/// phase runs on tables fresh from the load, and the analytic queries of
/// c read tables c's OLTP grows while they run (1 warehouse, embedded,
/// 58,000 NOPM: order_line from 581,000 to 816,000 rows in one 25 s
/// phase), which d's read once grown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    OltpAlone,
    OlapAlone,
    Together,
    OlapAloneAgain,
    OltpAloneAgain,
}

impl PhaseKind {
    pub const ALL: [PhaseKind; 5] = [
        PhaseKind::OltpAlone,
        PhaseKind::OlapAlone,
        PhaseKind::Together,
        PhaseKind::OlapAloneAgain,
        PhaseKind::OltpAloneAgain,
    ];

    /// The phase's letter in the reports (a to e, in the order they run).
    pub fn letter(self) -> char {
        match self {
            PhaseKind::OltpAlone => 'a',
            PhaseKind::OlapAlone => 'b',
            PhaseKind::Together => 'c',
            PhaseKind::OlapAloneAgain => 'd',
            PhaseKind::OltpAloneAgain => 'e',
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            PhaseKind::OltpAlone => "OLTP alone",
            PhaseKind::OlapAlone => "OLAP alone",
            PhaseKind::Together => "OLTP + OLAP",
            PhaseKind::OlapAloneAgain => "OLAP alone again",
            PhaseKind::OltpAloneAgain => "OLTP alone again",
        }
    }
}

/// Told what the run is doing; every method has a do-nothing default.
pub trait ChProgress {
    fn loading(&mut self, _side: SideKind, _rows: u64, _expected: u64) {}
    fn loaded(&mut self, _side: SideKind, _load: &SideLoad) {}
    fn answer_checked(&mut self, _result: &QueryResult) {}
    /// `transactions` and `queries` finished so far in the phase.
    fn phase_running(&mut self, _side: SideKind, _phase: PhaseKind, _elapsed: Duration, _counts: (u64, u64)) {}
    fn phase_done(&mut self, _side: SideKind, _result: &PhaseResult) {}
    /// Asked before each phase: true ends the run there, its report
    /// holding the phases done (a demo's Ctrl-C).
    fn cancelled(&self) -> bool {
        false
    }
}

pub struct NoProgress;
impl ChProgress for NoProgress {}

/// What populating one target took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideLoad {
    /// TPC-C's nine tables (rows, load and build time, refusals).
    pub tpcc: population::LoadReport,
    /// region, nation, supplier.
    pub ch_rows: Vec<(String, u64)>,
    pub ch_load_s: f64,
    /// ANALYZE after the three tables, or its refusal.
    pub analyze: String,
}

/// One phase on one target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub kind: PhaseKind,
    /// Rows of order_line when the phase began (the OLTP stream adds some).
    pub order_lines_before: Option<u64>,
    pub oltp: Option<OltpFigures>,
    pub analytic: Option<AnalyticFigures>,
    /// The analytic SELECTs of the phase by path and the copies' upkeep,
    /// where the target says (a query that went back to the row path is
    /// timed there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<AnalyticRoute>,
}

/// One target's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideResult {
    pub side: SideKind,
    pub target: String,
    pub durability: String,
    pub settings: Vec<(String, String)>,
    pub load: SideLoad,
    /// The columnar copies (`analytics`, pgtier targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<CopiesEnabled>,
    /// How the analytic queries are bounded (statement_timeout or not).
    pub timeout_method: String,
    pub phases: Vec<PhaseResult>,
    /// TPC-C's consistency conditions after the last phase.
    pub checks: Vec<Check>,
    pub process_rss_mib: Option<f64>,
}

/// The analytic totals of a target: the sums of the per-query medians
/// over the queries timed in every analytic phase, and how many those are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnalyticTotals {
    /// The mean of b's and d's.
    pub alone_ms: f64,
    pub together_ms: f64,
    pub queries: usize,
    /// Phase b's and d's (b's again when the run stopped before d).
    pub before_ms: f64,
    pub after_ms: f64,
}

impl AnalyticTotals {
    pub fn change_pct(&self) -> Option<f64> {
        (self.alone_ms > 0.0).then(|| (self.together_ms / self.alone_ms - 1.0) * 100.0)
    }

    /// d over b, % of b: the analytic side's drift (the tables c grew,
    /// the machine's noise).
    pub fn drift_pct(&self) -> Option<f64> {
        (self.before_ms > 0.0).then(|| (self.after_ms / self.before_ms - 1.0) * 100.0)
    }
}

impl SideResult {
    pub fn phase(&self, kind: PhaseKind) -> Option<&PhaseResult> {
        self.phases.iter().find(|p| p.kind == kind)
    }

    pub fn nopm(&self, kind: PhaseKind) -> Option<f64> {
        self.phase(kind)?.oltp.as_ref().filter(|o| o.error.is_none()).map(|o| o.nopm)
    }

    /// NOPM alone: the mean of the phases before and after the other two
    /// (the first one alone when the run stopped before the last).
    pub fn nopm_alone(&self) -> Option<f64> {
        let before = self.nopm(PhaseKind::OltpAlone)?;
        Some(self.nopm(PhaseKind::OltpAloneAgain).map_or(before, |after| (before + after) / 2.0))
    }

    /// How far the second OLTP-alone phase is from the first, % of the
    /// first: the run's own noise and drift, the yardstick for "kept".
    pub fn nopm_alone_drift_pct(&self) -> Option<f64> {
        let before = self.nopm(PhaseKind::OltpAlone).filter(|n| *n > 0.0)?;
        Some((self.nopm(PhaseKind::OltpAloneAgain)? / before - 1.0) * 100.0)
    }

    /// NOPM with the analytic streams beside it, % of NOPM alone.
    pub fn nopm_kept_pct(&self) -> Option<f64> {
        let alone = self.nopm_alone().filter(|n| *n > 0.0)?;
        Some(self.nopm(PhaseKind::Together)? / alone * 100.0)
    }

    pub fn median_ms(&self, kind: PhaseKind, query: u8) -> Option<f64> {
        self.phase(kind)?.analytic.as_ref()?.query(query)?.timing.as_ref().map(|t| t.median_ms)
    }

    /// Query `query`'s median alone: the mean of its medians in b and d
    /// (b's alone when d did not time it).
    pub fn alone_median_ms(&self, query: u8) -> Option<f64> {
        let before = self.median_ms(PhaseKind::OlapAlone, query)?;
        Some(self.median_ms(PhaseKind::OlapAloneAgain, query).map_or(before, |after| (before + after) / 2.0))
    }

    /// Query `query`'s median with OLTP beside it, % change from alone.
    pub fn query_change_pct(&self, query: u8) -> Option<f64> {
        let alone = self.alone_median_ms(query).filter(|m| *m > 0.0)?;
        Some((self.median_ms(PhaseKind::Together, query)? / alone - 1.0) * 100.0)
    }

    /// Sums of the per-query medians over the queries timed in b, c and d
    /// (in b and c when the run stopped before d).
    pub fn analytic_totals(&self) -> AnalyticTotals {
        let d_ran = self.phase(PhaseKind::OlapAloneAgain).is_some();
        let mut t = AnalyticTotals { alone_ms: 0.0, together_ms: 0.0, queries: 0, before_ms: 0.0, after_ms: 0.0 };
        for q in 1..=22 {
            let before = self.median_ms(PhaseKind::OlapAlone, q);
            let after = self.median_ms(PhaseKind::OlapAloneAgain, q);
            let (Some(before), Some(together)) = (before, self.median_ms(PhaseKind::Together, q)) else { continue };
            if d_ran && after.is_none() {
                continue;
            }
            t.before_ms += before;
            t.after_ms += after.unwrap_or(before);
            t.alone_ms += self.alone_median_ms(q).unwrap_or(before);
            t.together_ms += together;
            t.queries += 1;
        }
        t
    }

    pub fn checks_passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(Check::passed)
    }
}

/// A whole run: what `pgtier bench ch` writes as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChReport {
    pub tool_version: String,
    pub started_at: String,
    pub scale: Scale,
    pub clients: u32,
    pub analytic_streams: u32,
    pub rampup_s: f64,
    pub measure_s: f64,
    pub query_timeout_s: f64,
    pub seed: u64,
    /// The pgtier targets' analytic sessions ran with `pgtier.analytics =
    /// on` over columnar copies of every table.
    #[serde(default)]
    pub analytics: bool,
    /// Step 2: each query once on every target after population.
    pub answers: Vec<QueryResult>,
    pub sides: Vec<SideResult>,
    pub deviations: Vec<String>,
    pub machine: MachineInfo,
    pub load_average_before: String,
}

impl ChReport {
    /// Lines saying what failed: a stopped OLTP run, a failed consistency
    /// check, an answer different from PostgreSQL's.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.sides {
            for p in &s.phases {
                if let Some(e) = p.oltp.as_ref().and_then(|o| o.error.as_ref()) {
                    out.push(format!("{}: {}: OLTP stopped: {e}", s.side.label(), p.kind.label()));
                }
            }
            for c in s.checks.iter().filter(|c| !c.passed()) {
                out.push(format!(
                    "{}: consistency {} ({}) FAILED: {}",
                    s.side.label(),
                    c.clause,
                    c.condition,
                    c.violations.join("; ")
                ));
            }
            if s.checks.is_empty() {
                out.push(format!("{}: consistency not checked", s.side.label()));
            }
        }
        for q in &self.answers {
            for s in q.sides.iter().filter(|s| matches!(s.status, Status::Different { .. })) {
                out.push(format!("Q{} on {}: {}", q.query, s.side.label(), s.status.describe()));
            }
        }
        out
    }
}

/// Runs the analytic executor and the copies' merger of every pgtier
/// engine opened from now on in this process under SCHED_IDLE
/// (`[analytics] sched_idle`; `--analytic-sched-idle`).
pub fn use_sched_idle() {
    let mut config = pgtier_sql::session::analytics_config();
    config.sched_idle = true;
    pgtier_sql::session::set_analytics_config(config);
}

/// The analytic executor's resource control as configured for this run
/// (the `[analytics]` defaults unless set), and what is not measured.
pub fn analytic_resources() -> String {
    let c = pgtier_sql::session::analytics_config();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let threads = pgtier_sql::session::analytics_executor_threads(cpus);
    let priority = if c.sched_idle { "SCHED_IDLE (with the merger)".to_owned() } else { format!("nice {:+}", c.nice) };
    format!(
        "one socket, {cpus} CPUs: pgtier's analytic executor ran with cpu_share {} ({threads} worker thread(s)), \
         {priority}, placement {}; the study's placement policies (round robin, fill first, pack) across sockets are \
         not measured, and pgtier's OLTP sessions and the copies' upkeep share the same CPUs",
        c.cpu_share, c.placement
    )
}

/// Every way a run departs from CH-benCHmark and from study 004.
pub fn deviations(options: &ChOptions) -> Vec<String> {
    let mut out: Vec<String> = [
        "the OLTP stream is this kit's TPC-C (HammerDB TPROC-C's shape: no keying or thinking time; \
         its own deviations are `pgtier bench tpcc`'s, listed in its report)",
        "the data is not reloaded between the phases (a reload per phase would cost more than the phases \
         at the default scale): the OLTP stream of phase a adds orders before b and c run, and c's adds \
         more while it runs; order_line's rows at each phase's start are reported. Phase d repeats b and \
         phase e repeats a after c: NOPM kept is against the mean of a and e, each query's change against \
         the mean of its medians in b and d (d reads the tables as c's OLTP left them), and each pair's \
         difference is reported as drift",
        "every timestamp is the load's or the run's (today): the published date bounds select every row \
         (Q1, Q3, Q5, Q10, Q15, Q20: lower bounds only) or none (Q4, Q6, Q7, Q8, Q12, Q14: bounds \
         ending by 2020), as in every implementation that loads at the current time; the queries still \
         read their tables",
        "the analytic streams run Q1..Q22 in order over and over (stream k of N starts at query \
         1 + 22k/N); phases b and d run as many streams as c, so c differs from them by the OLTP stream only",
        "a query counts when it starts and ends inside the measure window; the one cut by the window's \
         end is left out (in b, c and d alike); per-query figures are medians of the counted runs",
        "Q15's view revenue0 is a CTE of the query (one statement on every target)",
        "statement_timeout bounds every analytic query (timeouts counted, the stream goes on); a refused \
         query is reported with its SQLSTATE, not rewritten; with a query timeout as long as the window, \
         one query that times out fills a phase's window alone",
        "supplier comments, addresses, phones and balances are drawn from the run's seed; nation names and \
         regions are the reference data's, their comments drawn",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    out.push(analytic_resources());
    out.extend(crate::report::idle_wakeup_deviation());
    out.push(if options.analytics {
        "pgtier's analytic sessions run with pgtier.analytics = on over columnar copies of every table \
         (a query that does not translate runs on the row path; step 2 gives each query's path); OLTP \
         sessions keep the default"
            .to_owned()
    } else {
        "pgtier answers the analytic queries on its row store (pgtier.analytics at its default, no \
         columnar copy; --analytics enables them)"
            .to_owned()
    });
    out.push(format!(
        "scale: {} warehouse(s), {} OLTP clients and {} analytic stream(s) (study 004: more warehouses and \
         virtual users){}",
        options.scale.warehouses,
        options.clients,
        options.analytic_streams,
        if options.scale.is_spec() {
            String::new()
        } else {
            format!(
                "; test-only scale: {} items, {} customers per district (spec: 100,000 and 3,000)",
                options.scale.items, options.scale.customers
            )
        }
    ));
    out
}

fn check_options(options: &ChOptions, sides: &[Side<'_>]) -> Result<(), ChError> {
    let bad = |m: String| Err(ChError::Options(m));
    if !(1..=tpcc::WAREHOUSES_MAX).contains(&options.scale.warehouses) {
        return bad(format!("warehouses {} is not from 1 to {}", options.scale.warehouses, tpcc::WAREHOUSES_MAX));
    }
    if options.clients == 0 || !(1..=STREAMS_MAX).contains(&options.analytic_streams) {
        return bad(format!("at least one OLTP client, and 1 to {STREAMS_MAX} analytic streams"));
    }
    if options.measure.is_zero() || options.query_timeout.is_zero() {
        return bad("the measure window and the query timeout must be longer than 0 s".to_owned());
    }
    match sides.first() {
        Some(s) if s.kind == SideKind::Postgresql => {}
        _ => return bad("the first target must be PostgreSQL (the answers' reference)".to_owned()),
    }
    if sides.iter().filter(|s| s.kind == SideKind::Postgresql).count() > 1 {
        return bad("one PostgreSQL target only".to_owned());
    }
    Ok(())
}

fn db(side: SideKind) -> impl Fn(DbError) -> ChError {
    move |error| ChError::Db { side: side.label(), error }
}

/// Loads TPC-C's tables (timestamps `now`) and CH-benCHmark's three.
fn populate(
    options: &ChOptions,
    side: &Side<'_>,
    now: &str,
    progress: &mut dyn ChProgress,
) -> Result<SideLoad, DbError> {
    let target = side.target;
    let extra = schema::expected_rows();
    let tpcc = population::populate_at(target, options.scale, options.seed, now, options.load_streams, &mut |r, e| {
        progress.loading(side.kind, r, e + extra)
    })?;
    let tpcc_rows: u64 = tpcc.rows.iter().map(|(_, n)| n).sum();
    let started = Instant::now();
    schema::create_tables(target)?;
    let loaded = AtomicU64::new(0);
    let ch_rows = schema::load(target, options.seed, &loaded)?;
    progress.loading(side.kind, tpcc_rows + loaded.load(Ordering::Relaxed), tpcc_rows + extra);
    let analyze = match target.execute_batch("ANALYZE region; ANALYZE nation; ANALYZE supplier") {
        Ok(()) => "done".to_owned(),
        Err(e) => format!("refused: {e}"),
    };
    Ok(SideLoad { tpcc, ch_rows, ch_load_s: started.elapsed().as_secs_f64(), analyze })
}

/// Step 2: every query once on every side, compared with PostgreSQL's.
fn check_answers(
    options: &ChOptions,
    sessions: &mut [QuerySession<'_>],
    queries: &[Query],
    progress: &mut dyn ChProgress,
) -> Vec<QueryResult> {
    let mut results = Vec::new();
    for query in queries {
        let mut reference = None;
        let mut sides = Vec::new();
        for session in sessions.iter_mut() {
            let kind = session.side().kind;
            let (status, ms, rows) = match session.run(&query.sql) {
                Err(e) => (failed(e, options.query_timeout), None, None),
                Ok((rows, ms)) => {
                    let n = rows.len();
                    let status = if kind == SideKind::Postgresql {
                        reference = Some(rows);
                        Status::Reference
                    } else {
                        match &reference {
                            None => Status::NotCompared { reason: "PostgreSQL gave no answer".to_owned() },
                            Some(r) => match answers::compare(r, &rows, query.order_columns, query.limit) {
                                None => Status::Identical,
                                Some(first_difference) => Status::Different { first_difference },
                            },
                        }
                    };
                    (status, Some(ms), Some(n))
                }
            };
            let path = options.analytics_setting(kind).map(|_| crate::tpch::explain_path(session, &query.sql));
            sides.push(crate::tpch::SideResult { side: kind, warmup_ms: ms, timing: None, rows, status, path });
        }
        let result = QueryResult { query: query.number, title: query.title.to_owned(), sides };
        progress.answer_checked(&result);
        results.push(result);
    }
    results
}

/// order_line's rows now (`None` when the target cannot say).
fn order_lines(target: &dyn Target) -> Option<u64> {
    let mut s = target.connect().ok()?;
    let rows = s.simple_query("SELECT count(*) FROM order_line").ok()?;
    rows.first()?.first()?.as_deref()?.parse().ok()
}

/// Phases b and d: the analytic streams alone; the window opens after the ramp-up.
fn olap_alone(
    options: &ChOptions,
    side: &Side<'_>,
    queries: &[Query],
    kind: PhaseKind,
    progress: &mut dyn ChProgress,
) -> PhaseResult {
    let order_lines_before = order_lines(side.target);
    let route_before = side.target.analytic_route();
    let window = Window::default();
    let streams = std::thread::scope(|s| {
        let handles = spawn_streams(s, options, side, queries, &window);
        let started = Instant::now();
        loop {
            let elapsed = started.elapsed();
            if elapsed >= options.rampup {
                window.open();
            }
            if elapsed >= options.rampup + options.measure {
                window.close();
                break;
            }
            progress.phase_running(side.kind, kind, elapsed, (0, window.finished.load(Ordering::Relaxed)));
            std::thread::sleep(Duration::from_millis(200).min(options.rampup + options.measure - elapsed));
        }
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect::<Vec<_>>()
    });
    let analytic = stream::figures(queries, &streams, &window);
    let route = route_since(side.target, route_before);
    PhaseResult { kind, order_lines_before, oltp: None, analytic: Some(analytic), route }
}

fn spawn_streams<'s, 'e: 's>(
    scope: &'s std::thread::Scope<'s, 'e>,
    options: &ChOptions,
    side: &'e Side<'e>,
    queries: &'e [Query],
    window: &'e Window,
) -> Vec<std::thread::ScopedJoinHandle<'s, Vec<stream::QueryRun>>> {
    let (n, timeout) = (options.analytic_streams, options.query_timeout);
    let analytics = options.analytics_setting(side.kind);
    (0..n)
        .map(|k| {
            let first = stream::first_query(k, n, queries.len());
            scope.spawn(move || stream::run_stream(side, queries, first, (timeout, analytics), window))
        })
        .collect()
}

/// Phases a and e (no streams) and c (streams beside): the OLTP clients, and the
/// analytic window as the driver's measure window.
fn oltp_phase(
    options: &ChOptions,
    side: &Side<'_>,
    queries: &[Query],
    kind: PhaseKind,
    progress: &mut dyn ChProgress,
) -> PhaseResult {
    let order_lines_before = order_lines(side.target);
    let route_before = side.target.analytic_route();
    let window = Window::default();
    let live = LiveCounters::default();
    let streams_wanted = kind == PhaseKind::Together;
    let (oltp, streams) = std::thread::scope(|s| {
        let handles = if streams_wanted { spawn_streams(s, options, side, queries, &window) } else { Vec::new() };
        let oltp = tpcc::run_oltp(
            side.target,
            options.scale,
            options.clients,
            (options.rampup, options.measure),
            // Each phase's clients draw other keys than the others'.
            options.seed ^ kind as u64,
            &live,
            &mut |phase, elapsed| {
                if phase == Phase::Measure {
                    window.open();
                }
                let counts = (live.finished.load(Ordering::Relaxed), window.finished.load(Ordering::Relaxed));
                progress.phase_running(side.kind, kind, elapsed, counts);
            },
        );
        window.close();
        let streams: Vec<_> = handles.into_iter().map(|h| h.join().unwrap_or_default()).collect();
        (oltp, streams)
    });
    let analytic = streams_wanted.then(|| stream::figures(queries, &streams, &window));
    let route = route_since(side.target, route_before);
    PhaseResult { kind, order_lines_before, oltp: Some(oltp), analytic, route }
}

/// The target's analytic route counters since `before` (None when it keeps none).
fn route_since(target: &dyn Target, before: Option<AnalyticRoute>) -> Option<AnalyticRoute> {
    Some(target.analytic_route()?.since(&before?))
}

/// Step 3 and 4 on one side.
fn run_phases(
    options: &ChOptions,
    side: &Side<'_>,
    (load, copies): (SideLoad, Option<CopiesEnabled>),
    timeout_method: String,
    queries: &[Query],
    progress: &mut dyn ChProgress,
) -> Result<SideResult, ChError> {
    let target = side.target;
    let durability = target.durability().map_err(db(side.kind))?;
    let mut phases = Vec::new();
    for kind in PhaseKind::ALL {
        if progress.cancelled() {
            break;
        }
        let result = match kind {
            PhaseKind::OlapAlone | PhaseKind::OlapAloneAgain => olap_alone(options, side, queries, kind, progress),
            _ => oltp_phase(options, side, queries, kind, progress),
        };
        progress.phase_done(side.kind, &result);
        phases.push(result);
    }
    let checks = consistency::run_checks(target).map_err(db(side.kind))?;
    Ok(SideResult {
        side: side.kind,
        target: target.describe(),
        durability,
        settings: tpcc::settings(target),
        load,
        copies,
        timeout_method,
        phases,
        checks,
        process_rss_mib: tpcc::process_rss_mib(),
    })
}

/// Populates every side, checks the 22 answers on all of them, then runs
/// the four phases on each in turn and checks its consistency. Only
/// population errors and bad options end the run.
pub fn run(options: &ChOptions, sides: &[Side<'_>], progress: &mut dyn ChProgress) -> Result<ChReport, ChError> {
    check_options(options, sides)?;
    let load_average_before = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default();
    let started_at = crate::report::now_rfc3339();
    let now = tpcc::random::timestamp_now();
    let mut loads = Vec::new();
    for side in sides {
        let load = populate(options, side, &now, progress).map_err(db(side.kind))?;
        progress.loaded(side.kind, &load);
        let copies = match options.analytics_setting(side.kind) {
            Some(_) => Some(enable_copies(side.target).map_err(db(side.kind))?),
            None => None,
        };
        loads.push((load, copies));
    }
    let queries = queries::all();
    let mut sessions = Vec::new();
    for side in sides {
        let mut s = QuerySession::new(side, options.query_timeout).with_analytics(options.analytics_setting(side.kind));
        s.open().map_err(db(side.kind))?;
        sessions.push(s);
    }
    let answers = check_answers(options, &mut sessions, &queries, progress);
    let methods: Vec<String> = sessions.iter().map(QuerySession::timeout_method).collect();
    drop(sessions);
    let mut results = Vec::new();
    for ((side, load), method) in sides.iter().zip(loads).zip(methods) {
        if progress.cancelled() {
            break;
        }
        results.push(run_phases(options, side, load, method, &queries, progress)?);
    }
    Ok(ChReport {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_at,
        scale: options.scale,
        clients: options.clients,
        analytic_streams: options.analytic_streams,
        rampup_s: options.rampup.as_secs_f64(),
        measure_s: options.measure.as_secs_f64(),
        query_timeout_s: options.query_timeout.as_secs_f64(),
        seed: options.seed,
        analytics: options.analytics,
        answers,
        sides: results,
        deviations: deviations(options),
        machine: crate::report::machine_info(),
        load_average_before,
    })
}
