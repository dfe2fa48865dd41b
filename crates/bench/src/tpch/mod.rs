//! TPC-H (study 004's OLAP side; `reference/benchmarks.md`): the 22
//! queries on every target the kit knows — PostgreSQL by URL, the pgtier
//! server by URL, the embedded engine — each answer compared with
//! PostgreSQL's on the same data.
//!
//! Method.
//! 1. Population ([`schema`]): on each target the 8 tables are dropped and
//!    created with the same DDL (the spec's columns and types: `integer`,
//!    `numeric(15,2)`, `char(n)`, `varchar(n)`, `date`; the spec's primary
//!    keys), then loaded at scale factor SF from the `tpchgen` crate
//!    (dbgen's generators, the same rows on every target) through the
//!    target's bulk path — COPY text format FROM STDIN for PostgreSQL and
//!    the pgtier server, the engine's typed loader for the embedded target
//!    — streamed row by row, in parallel streams (lineitem, orders and
//!    partsupp split into dbgen parts). Then `ANALYZE` where the target
//!    accepts it (the report says where it did not).
//! 2. Queries ([`queries`]): the 22 queries with the spec's validation
//!    parameters, in PostgreSQL's dialect, one session per target, sent as
//!    simple-query text (no parameters, no prepared plan). Per query and
//!    target: one warm-up run, whose answer is the one compared, then N
//!    timed runs (min / median / max of the client-side wall time, rows
//!    received and converted to text included). A run is bounded by
//!    `statement_timeout`, set on each session (PostgreSQL, the pgtier
//!    server and the embedded engine all honour it and answer 57014); the
//!    client also gives up 10 s past the timeout (a target that ignores or
//!    refuses statement_timeout: its session is abandoned to the thread
//!    running the query and a new one opened; the report says which
//!    bound each target had). A query whose warm-up times out is reported
//!    `timeout > N s` and not run again; any other error is `refused:
//!    SQLSTATE message`; neither stops the run. A lost connection is
//!    reopened for the next query.
//! 3. Answers ([`answers`]): every value in the text form the PostgreSQL
//!    protocol carries (the embedded engine: the same output function the
//!    pgtier server uses), compared exactly — no rounding, no tolerance.
//!    Row order counts where the ORDER BY decides it: the ORDER BY values
//!    must match row for row, and rows tied on them are compared as
//!    multisets; at a LIMIT cut, rows tied with the last row are compared on
//!    their ORDER BY values only (any of the tied rows is a right answer).
//!    Each query and pgtier target gets `identical`, `DIFFERENT (first
//!    differing row …)`, `timeout` or `refused`; when PostgreSQL itself
//!    has no answer, `not compared`.
//!
//! Deviations from the TPC-H specification (also in every report):
//! - Data from `tpchgen` 4 (a port of dbgen 3.0.1, row for row dbgen's
//!   `.tbl` output); any scale factor from 0.0001 to 100, fractional ones
//!   included (the spec allows 1, 10, 30, …).
//! - Below about SF 0.01 (fewer than 100 suppliers) dbgen's formula for a
//!   part's 4 suppliers can name one supplier twice; the repeated partsupp
//!   row would break the primary key and is dropped (see
//!   `schema::first_supplier_of_part`).
//! - Identifiers are `integer` (4 bytes), which holds every key up to
//!   SF 100 only; scale factors above are refused.
//! - The spec's foreign keys (optional, 1.4.2.3) are not declared; primary
//!   keys are, in CREATE TABLE (the engine keys rows at creation and has
//!   no ALTER TABLE), so PostgreSQL builds them during the load too.
//! - The queries use the validation (qualification) parameters of 2.4.n.3,
//!   every run the same, not the random substitutions of a performance
//!   run; Q11's FRACTION is 0.0001/SF as 2.4.11.3 says.
//! - Q15's view `revenue0` is a CTE in the query itself rather than
//!   CREATE VIEW / DROP VIEW around it: one statement per query on every
//!   target, and nothing created in the measured run.
//! - Interval literals are PostgreSQL's (`interval '3 months'` for the
//!   spec's `interval '3' month`); `extract` and `substring` as the spec.
//! - No refresh functions (RF1/RF2), no throughput test, no QphH: this is
//!   a power-test-like sequence of single queries, timed one by one, with
//!   a warm-up run first (the spec's power test runs each query once, cold).
//!
//! TPC-C and CH-benCHmark sit beside this module (same targets, same
//! output conventions, CH-benCHmark also this module's [`QuerySession`]
//! and [`answers`]); [`schema`] and [`queries`] are TPC-H's alone.

pub mod answers;
pub mod compression;
pub mod output;
pub mod queries;
pub mod schema;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::result::MachineInfo;
use crate::target::{DbError, Session, Target, TextRow};

pub use self::queries::Query;
pub use self::schema::LoadReport;

/// Timed runs at most per query and target (bounds a run's length).
pub const RUNS_MAX: u32 = 100;

/// The kinds of system a run measures; PostgreSQL is the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideKind {
    Postgresql,
    PgtierServer,
    Embedded,
    /// The embedded target again, its sessions `SET pgtier.analytics = on`
    /// over the columnar copies of its tables (`TpchOptions::analytics`).
    Columnar,
}

impl SideKind {
    pub fn label(self) -> &'static str {
        match self {
            SideKind::Postgresql => "PostgreSQL",
            SideKind::PgtierServer => "pgtier server",
            SideKind::Embedded => "embedded",
            SideKind::Columnar => "pgtier columnar",
        }
    }

    /// The `pgtier.analytics` a query session of this side sets when the
    /// run has columnar copies (`analytics`): `on` for the columnar side,
    /// `off` for the embedded side (its tables have copies too, and it is
    /// the row path); none elsewhere (the default).
    pub fn analytics_setting(self, analytics: bool) -> Option<&'static str> {
        match self {
            SideKind::Columnar => Some("on"),
            SideKind::Embedded if analytics => Some("off"),
            _ => None,
        }
    }
}

/// One target of a run and what kind it is.
pub struct Side<'a> {
    pub kind: SideKind,
    pub target: &'a dyn Target,
}

pub struct TpchOptions {
    /// Scale factor, [`schema::SCALE_MIN`]..=[`schema::SCALE_MAX`].
    pub scale: f64,
    /// Timed runs per query and target, after the warm-up (at most
    /// [`RUNS_MAX`]); 0 checks the answers only (no timing).
    pub runs: u32,
    /// `statement_timeout` of every run.
    pub timeout: Duration,
    /// Parallel bulk-load streams per target.
    pub load_streams: usize,
    /// Query numbers to run (1..=22), in order.
    pub queries: Vec<u8>,
    /// Reuse the tables the targets hold (loaded by an earlier run at the
    /// same scale) instead of dropping and loading them.
    pub skip_load: bool,
    /// After the load, enable the columnar copy of the 8 tables on the
    /// embedded target and report its compression ([`compression`]). With
    /// a [`SideKind::Columnar`] side the copies stay on for its queries
    /// (the embedded side's sessions then run with `pgtier.analytics =
    /// off`); without one they are disabled again after the measurement.
    pub analytics: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TpchError {
    #[error("{side}: {error}")]
    Db { side: &'static str, error: DbError },
    #[error("invalid options: {0}")]
    Options(String),
}

/// Told what the run is doing, for a progress display; every method has a
/// do-nothing default.
pub trait TpchProgress {
    fn loading(&mut self, _side: SideKind, _rows: u64, _expected: u64) {}
    fn loaded(&mut self, _side: SideKind, _report: &LoadReport) {}
    /// `run` 0 is the warm-up.
    fn query_run(&mut self, _query: u8, _side: SideKind, _run: u32, _runs: u32) {}
    fn query_done(&mut self, _result: &QueryResult) {}
    /// Asked before each query: true ends the run there, its report
    /// holding the queries done (a demo's Ctrl-C).
    fn cancelled(&self) -> bool {
        false
    }
}

/// A [`TpchProgress`] that shows nothing.
pub struct NoProgress;
impl TpchProgress for NoProgress {}

/// Client-side wall times of the timed runs, ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub runs_ms: Vec<f64>,
    pub min_ms: f64,
    pub median_ms: f64,
    pub max_ms: f64,
}

impl Timing {
    /// The statistics of `runs_ms` (at least one run).
    pub fn of(runs_ms: Vec<f64>) -> Timing {
        assert!(!runs_ms.is_empty(), "a timing needs at least one run");
        let mut sorted = runs_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        Timing { min_ms: sorted[0], median_ms: median, max_ms: sorted[n - 1], runs_ms }
    }
}

/// How one target did on one query.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    /// PostgreSQL's own answer: what the others are compared with.
    Reference,
    Identical,
    Different {
        first_difference: String,
    },
    Timeout {
        after_s: f64,
    },
    Refused {
        sqlstate: Option<String>,
        message: String,
    },
    /// PostgreSQL gave no answer to compare with.
    NotCompared {
        reason: String,
    },
}

impl Status {
    /// The report's cell: `identical`, `DIFFERENT (…)`, `timeout > 60 s`,
    /// `refused: 0A000 …`.
    pub fn describe(&self) -> String {
        match self {
            Status::Reference => "reference".to_owned(),
            Status::Identical => "identical".to_owned(),
            Status::Different { first_difference } => format!("DIFFERENT ({first_difference})"),
            Status::Timeout { after_s } => format!("timeout > {} s", trim_float(*after_s)),
            Status::Refused { sqlstate, message } => {
                format!("refused: {}{message}", sqlstate.as_deref().map_or(String::new(), |c| format!("{c} ")))
            }
            Status::NotCompared { reason } => format!("not compared ({reason})"),
        }
    }

    /// One word for the one-screen summary.
    pub fn short(&self) -> &'static str {
        match self {
            Status::Reference => "ref",
            Status::Identical => "identical",
            Status::Different { .. } => "DIFFERENT",
            Status::Timeout { .. } => "timeout",
            Status::Refused { .. } => "refused",
            Status::NotCompared { .. } => "n/c",
        }
    }
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideResult {
    pub side: SideKind,
    /// The warm-up run's wall time (the answer compared), ms.
    pub warmup_ms: Option<f64>,
    /// The timed runs; `None` when the query timed out or was refused (or
    /// the run checked answers only).
    pub timing: Option<Timing>,
    /// Rows of the answer (the warm-up's).
    pub rows: Option<usize>,
    pub status: Status,
    /// The columnar side: the path EXPLAIN's first line names for the
    /// query (`columnar copy of lineitem (DataFusion)`, `row path
    /// (reason)`), its `Analytics: ` prefix dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl SideResult {
    /// EXPLAIN named the columnar path for the query.
    pub fn columnar(&self) -> bool {
        self.path.as_deref().is_some_and(is_columnar_path)
    }
}

/// `path` (an EXPLAIN line without its `Analytics: ` prefix) is the
/// columnar one.
pub fn is_columnar_path(path: &str) -> bool {
    path.starts_with("columnar")
}

/// What EXPLAIN says of a statement's path: the text after `Analytics: `
/// of its first line, or that the database has no columnar copy (EXPLAIN
/// prints no such line then).
pub fn explained_path(explain: &[TextRow]) -> String {
    let first = explain.first().and_then(|r| r.first()).and_then(|c| c.as_deref()).unwrap_or("");
    match first.strip_prefix("Analytics: ") {
        Some(path) => path.to_owned(),
        None => "row path (no columnar copy: EXPLAIN names no analytic path)".to_owned(),
    }
}

/// A pgtier build without the analytic executor says so in EXPLAIN's
/// reason (crates/olap's OlapError::NoExecutor).
pub fn lacks_executor(path: &str) -> bool {
    path.contains("no analytic executor")
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryResult {
    pub query: u8,
    pub title: String,
    pub sides: Vec<SideResult>,
}

impl QueryResult {
    pub fn side(&self, kind: SideKind) -> Option<&SideResult> {
        self.sides.iter().find(|s| s.side == kind)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideInfo {
    pub side: SideKind,
    pub target: String,
    pub load: Option<LoadReport>,
    /// What bounds a query: `statement_timeout`, or the client-side
    /// cut-off alone where the target refused it.
    pub timeout_method: String,
}

/// A whole run: what `pgtier bench tpch` writes as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TpchReport {
    pub tool_version: String,
    pub started_at: String,
    pub scale: f64,
    pub runs: u32,
    pub timeout_s: f64,
    pub sides: Vec<SideInfo>,
    pub queries: Vec<QueryResult>,
    pub deviations: Vec<String>,
    pub machine: MachineInfo,
    /// The 1-minute load average before the run (the machine may be shared).
    pub load_average_before: String,
    /// The columnar copy's figures (`--analytics`), on the embedded target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<compression::CompressionReport>,
}

/// Sum of one side's medians over the queries it answered, and how many.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Total {
    pub median_ms: f64,
    pub answered: usize,
    pub of: usize,
}

impl TpchReport {
    /// Queries the columnar side's EXPLAIN sent to the columnar path, and
    /// how many it ran.
    pub fn columnar_paths(&self) -> (usize, usize) {
        let sides: Vec<&SideResult> = self.queries.iter().filter_map(|q| q.side(SideKind::Columnar)).collect();
        (sides.iter().filter(|s| s.columnar()).count(), sides.len())
    }

    pub fn total(&self, kind: SideKind) -> Total {
        let timed: Vec<f64> =
            self.queries.iter().filter_map(|q| q.side(kind)?.timing.as_ref().map(|t| t.median_ms)).collect();
        Total { median_ms: timed.iter().sum(), answered: timed.len(), of: self.queries.len() }
    }

    /// Queries where a pgtier side's answer is not `identical`, with the
    /// side and its status, for a caller that must fail on them.
    pub fn not_identical(&self) -> Vec<(u8, SideKind, &Status)> {
        let mut out = Vec::new();
        for q in &self.queries {
            for s in &q.sides {
                if !matches!(s.status, Status::Reference | Status::Identical) {
                    out.push((q.query, s.side, &s.status));
                }
            }
        }
        out
    }
}

/// The deviations from the spec, for the report (the module doc's list).
pub fn deviations() -> Vec<String> {
    [
        "data from the tpchgen crate (a port of dbgen 3.0.1); fractional scale factors allowed",
        "identifiers are integer (4 bytes): scale factors up to 100",
        "below about SF 0.01, a partsupp row repeating a part's supplier (dbgen's formula) is dropped",
        "foreign keys not declared (optional in the spec); primary keys in CREATE TABLE",
        "validation (qualification) parameters of 2.4.n.3 for every run; Q11 FRACTION = 0.0001/SF",
        "Q15's view revenue0 is a CTE in the query, not CREATE/DROP VIEW",
        "PostgreSQL interval literals (interval '3 months' for interval '3' month)",
        "no refresh functions, no throughput test, no QphH: each query timed alone, after one warm-up run",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn db(side: SideKind) -> impl Fn(DbError) -> TpchError {
    move |error| TpchError::Db { side: side.label(), error }
}

fn check(options: &TpchOptions, sides: &[Side<'_>]) -> Result<(), TpchError> {
    let bad = |m: String| Err(TpchError::Options(m));
    if !(schema::SCALE_MIN..=schema::SCALE_MAX).contains(&options.scale) {
        return bad(format!("scale {} is not from {} to {}", options.scale, schema::SCALE_MIN, schema::SCALE_MAX));
    }
    if options.runs > RUNS_MAX {
        return bad(format!("runs {} is more than {RUNS_MAX}", options.runs));
    }
    if options.timeout.is_zero() {
        return bad("the timeout must be more than 0".to_owned());
    }
    if let Some(q) = options.queries.iter().find(|q| !(1..=22).contains(*q)) {
        return bad(format!("there is no query {q} (1 to 22)"));
    }
    match sides.first() {
        Some(s) if s.kind == SideKind::Postgresql => {}
        _ => return bad("the first target must be PostgreSQL (the answers' reference)".to_owned()),
    }
    if sides.iter().filter(|s| s.kind == SideKind::Postgresql).count() > 1 {
        return bad("one PostgreSQL target only".to_owned());
    }
    if sides.iter().any(|s| s.kind == SideKind::Columnar)
        && !(options.analytics && sides.iter().any(|s| s.kind == SideKind::Embedded))
    {
        return bad(
            "the columnar side reads the embedded target's copies: it needs analytics and an embedded side".to_owned()
        );
    }
    Ok(())
}

/// How long past the timeout the client waits before it gives up on a
/// query itself: the server's statement_timeout should have answered long
/// before.
const CLIENT_GRACE: Duration = Duration::from_secs(10);

/// A target's session for the queries, with its statement_timeout set
/// where the target accepts it; reopened after a lost connection. Each run
/// happens on a helper thread the caller waits for at most the timeout plus
/// [`CLIENT_GRACE`]: a target that ignores statement_timeout (or refused
/// it) is cut off client-side, its session abandoned (left to its thread,
/// which ends when the target answers) and a new one opened.
pub struct QuerySession<'a> {
    side: &'a Side<'a>,
    session: Option<Box<dyn Session>>,
    timeout: Duration,
    /// The target refused `SET statement_timeout` (its error, as text):
    /// only the client-side cut-off bounds its queries.
    no_statement_timeout: Option<String>,
    /// `pgtier.analytics` set on every connection, when one is.
    analytics: Option<&'static str>,
}

impl<'a> QuerySession<'a> {
    /// A session on `side` whose queries are bounded by `timeout`; it
    /// connects at its first query (or [`QuerySession::open`]).
    pub fn new(side: &'a Side<'a>, timeout: Duration) -> QuerySession<'a> {
        QuerySession { side, session: None, timeout, no_statement_timeout: None, analytics: None }
    }

    /// Every connection of this session sets `pgtier.analytics = mode`
    /// (`off`, `auto`, `on`); a target that refuses it fails the connect.
    pub fn with_analytics(mut self, mode: Option<&'static str>) -> QuerySession<'a> {
        self.analytics = mode;
        self
    }

    pub fn side(&self) -> &'a Side<'a> {
        self.side
    }

    /// Connects now, so a target that cannot be reached fails before a run.
    pub fn open(&mut self) -> Result<(), DbError> {
        let s = self.connect()?;
        self.session = Some(s);
        Ok(())
    }

    fn connect(&mut self) -> Result<Box<dyn Session>, DbError> {
        if let Some(s) = self.session.take() {
            return Ok(s);
        }
        let mut s = self.side.target.connect()?;
        match s.simple_query(&format!("SET statement_timeout = {}", self.timeout.as_millis())) {
            Ok(_) => self.no_statement_timeout = None,
            Err(e) if e.sqlstate.as_deref().is_none_or(|c| c.starts_with("08")) => return Err(e),
            Err(e) => self.no_statement_timeout = Some(e.to_string()),
        }
        if let Some(mode) = self.analytics {
            s.simple_query(&format!("SET pgtier.analytics = {mode}"))?;
        }
        Ok(s)
    }

    /// How this target's queries are bounded, for the report.
    pub fn timeout_method(&self) -> String {
        match &self.no_statement_timeout {
            None => "statement_timeout".to_owned(),
            Some(e) => format!("client-side only (SET statement_timeout refused: {e})"),
        }
    }

    /// One run: the answer and its wall time (measured on the thread that
    /// runs it, so the hand-off is not counted), or the error.
    pub fn run(&mut self, sql: &str) -> Result<(Vec<TextRow>, f64), DbError> {
        let mut session = self.connect()?;
        let sql = sql.to_owned();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("tpch-query".to_owned())
            .spawn(move || {
                let started = Instant::now();
                let outcome = session.simple_query(&sql);
                let ms = started.elapsed().as_secs_f64() * 1e3;
                let _ = tx.send((session, outcome, ms));
            })
            .map_err(|e| DbError::new(None, format!("starting a query thread: {e}")))?;
        let Ok((session, outcome, ms)) = rx.recv_timeout(self.timeout + CLIENT_GRACE) else {
            // 57014 as the server would say it; the session stays with its
            // thread.
            return Err(DbError::new(
                Some("57014"),
                format!("no answer {} s after the timeout: cancelled client-side", CLIENT_GRACE.as_secs()),
            ));
        };
        match outcome {
            Ok(rows) => {
                self.session = Some(session);
                Ok((rows, ms))
            }
            Err(e) => {
                // Class 08: the connection is gone; the next query reconnects.
                if !e.sqlstate.as_deref().is_none_or(|c| c.starts_with("08")) {
                    self.session = Some(session);
                }
                Err(e)
            }
        }
    }
}

/// The status of a query that ended in `e`: a timeout (57014) or a refusal.
pub fn failed(e: DbError, timeout: Duration) -> Status {
    // 57014: query_canceled (statement_timeout).
    if e.sqlstate_is("57014") {
        return Status::Timeout { after_s: timeout.as_secs_f64() };
    }
    Status::Refused { sqlstate: e.sqlstate, message: e.message }
}

/// Warm-up, then `runs` timed runs of one query on one side.
fn measure(
    session: &mut QuerySession<'_>,
    query: &Query,
    options: &TpchOptions,
    progress: &mut dyn TpchProgress,
) -> (Result<Vec<TextRow>, Status>, Option<f64>, Option<Timing>) {
    let kind = session.side.kind;
    progress.query_run(query.number, kind, 0, options.runs);
    let (answer, warmup_ms) = match session.run(&query.sql) {
        Ok((rows, ms)) => (rows, ms),
        Err(e) => return (Err(failed(e, options.timeout)), None, None),
    };
    let mut runs_ms = Vec::with_capacity(options.runs as usize);
    for run in 1..=options.runs {
        progress.query_run(query.number, kind, run, options.runs);
        match session.run(&query.sql) {
            // Every run must give the warm-up's row count; a different one
            // is a wrong answer in the making, not a timing.
            Ok((rows, _)) if rows.len() != answer.len() => {
                let first_difference =
                    format!("timed run {run} returned {} rows, the warm-up {}", rows.len(), answer.len());
                return (Err(Status::Different { first_difference }), Some(warmup_ms), None);
            }
            Ok((_, ms)) => runs_ms.push(ms),
            Err(e) => return (Err(failed(e, options.timeout)), Some(warmup_ms), None),
        }
    }
    let timing = (!runs_ms.is_empty()).then(|| Timing::of(runs_ms));
    (Ok(answer), Some(warmup_ms), timing)
}

/// The path EXPLAIN names for `sql` on `session` (or why it could not say).
pub fn explain_path(session: &mut QuerySession<'_>, sql: &str) -> String {
    match session.run(&format!("EXPLAIN {sql}")) {
        Ok((rows, _)) => explained_path(&rows),
        Err(e) => format!("unknown (EXPLAIN failed: {e})"),
    }
}

/// Populates every side (unless `skip_load`; the columnar side never: its
/// tables are the embedded side's), then runs the queries on each
/// and compares every answer with PostgreSQL's. Only population errors and
/// bad options end the run; a query's failure is its result.
pub fn run(
    options: &TpchOptions,
    sides: &[Side<'_>],
    progress: &mut dyn TpchProgress,
) -> Result<TpchReport, TpchError> {
    check(options, sides)?;
    let load_average_before = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default();
    let started_at = crate::report::now_rfc3339();
    let mut infos = Vec::new();
    for side in sides {
        // The columnar side's tables are the embedded side's.
        let load = if options.skip_load || side.kind == SideKind::Columnar {
            None
        } else {
            let report = schema::populate(side.target, options.scale, options.load_streams, &mut |rows, expected| {
                progress.loading(side.kind, rows, expected);
            })
            .map_err(db(side.kind))?;
            progress.loaded(side.kind, &report);
            Some(report)
        };
        infos.push(SideInfo { side: side.kind, target: side.target.describe(), load, timeout_method: String::new() });
    }
    let keep_copies = sides.iter().any(|s| s.kind == SideKind::Columnar);
    let compression = match sides.iter().find(|s| s.kind == SideKind::Embedded) {
        Some(side) if options.analytics => Some(compression::measure(side.target, keep_copies).map_err(db(side.kind))?),
        _ => None,
    };
    let mut sessions = Vec::new();
    for (side, info) in sides.iter().zip(&mut infos) {
        let mut s =
            QuerySession::new(side, options.timeout).with_analytics(side.kind.analytics_setting(options.analytics));
        s.open().map_err(db(side.kind))?;
        info.timeout_method = s.timeout_method();
        sessions.push(s);
    }
    let all = queries::all(options.scale);
    let mut results = Vec::new();
    for number in &options.queries {
        if progress.cancelled() {
            break;
        }
        let Some(query) = all.iter().find(|q| q.number == *number) else { continue };
        let mut reference: Option<Vec<TextRow>> = None;
        let mut side_results = Vec::new();
        for session in &mut sessions {
            let kind = session.side.kind;
            let (answer, warmup_ms, timing) = measure(session, query, options, progress);
            let path = (kind == SideKind::Columnar).then(|| explain_path(session, &query.sql));
            let rows = answer.as_ref().ok().map(Vec::len);
            let status = match answer {
                Err(status) => status,
                Ok(rows) if kind == SideKind::Postgresql => {
                    reference = Some(rows);
                    Status::Reference
                }
                Ok(rows) => match &reference {
                    None => Status::NotCompared { reason: "PostgreSQL gave no answer".to_owned() },
                    Some(r) => match answers::compare(r, &rows, query.order_columns, query.limit) {
                        None => Status::Identical,
                        Some(first_difference) => Status::Different { first_difference },
                    },
                },
            };
            side_results.push(SideResult { side: kind, warmup_ms, timing, rows, status, path });
        }
        let result = QueryResult { query: query.number, title: query.title.to_owned(), sides: side_results };
        progress.query_done(&result);
        results.push(result);
    }
    Ok(TpchReport {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_at,
        scale: options.scale,
        runs: options.runs,
        timeout_s: options.timeout.as_secs_f64(),
        sides: infos,
        queries: results,
        deviations: deviations(),
        machine: crate::report::machine_info(),
        load_average_before,
        compression,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_statistics() {
        let t = Timing::of(vec![3.0, 1.0, 2.0]);
        assert_eq!((t.min_ms, t.median_ms, t.max_ms), (1.0, 2.0, 3.0));
        assert_eq!(t.runs_ms, [3.0, 1.0, 2.0]);
        assert_eq!(Timing::of(vec![4.0, 1.0]).median_ms, 2.5);
    }

    #[test]
    fn statuses_read_as_the_report_says() {
        assert_eq!(Status::Timeout { after_s: 60.0 }.describe(), "timeout > 60 s");
        assert_eq!(Status::Timeout { after_s: 2.5 }.describe(), "timeout > 2.5 s");
        let refused = Status::Refused { sqlstate: Some("0A000".into()), message: "no".into() };
        assert_eq!(refused.describe(), "refused: 0A000 no");
        assert_eq!(Status::Different { first_difference: "row 1".into() }.describe(), "DIFFERENT (row 1)");
    }
}
