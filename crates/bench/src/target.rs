//! The one small trait every workload drives (DESIGN.md §2, "bench").
//!
//! The same TATP code measures PostgreSQL, the pgtier server (which speaks the
//! PostgreSQL protocol, so it is the same `postgres://` target) and, later, the
//! embedded engine. A target therefore exposes only what SQL clients have:
//! prepared statements with parameters, transactions, and a bulk loader for
//! population. Anything target-specific (COPY, engine bulk insert, backend
//! sampling) hides behind these methods.

use std::fmt;

/// A parameter or result value. Only the types the workloads use: TATP needs
/// integers and text. Kept small so the hot path stays cheap for the embedded
/// target, where a conversion costs as much as the work itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
}

/// An error reported by a target, classified by SQLSTATE so workloads can tell
/// acceptable errors (e.g. 23505 unique violation in TATP) from fatal ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbError {
    /// Five-character SQLSTATE when the target reported one (`None` for
    /// connection-level failures where no server answered).
    pub sqlstate: Option<String>,
    /// One line a human can act on.
    pub message: String,
}

impl DbError {
    pub fn new(sqlstate: Option<&str>, message: impl Into<String>) -> DbError {
        DbError { sqlstate: sqlstate.map(str::to_owned), message: message.into() }
    }

    pub fn sqlstate_is(&self, code: &str) -> bool {
        self.sqlstate.as_deref() == Some(code)
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.sqlstate {
            Some(code) => write!(f, "{} (SQLSTATE {code})", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for DbError {}

/// Index of a statement prepared on one session; valid only on that session.
pub type StatementId = usize;

/// One result row in text form: each value exactly as the server's output
/// function prints it (what the PostgreSQL protocol carries in text format),
/// NULL as `None`.
pub type TextRow = Vec<Option<String>>;

/// Most rows [`Session::simple_query`] keeps; a larger answer is refused
/// with 54000 rather than grown without bound.
pub const SIMPLE_QUERY_ROWS_MAX: usize = 1_000_000;

/// The error a [`Session::simple_query`] returns past [`SIMPLE_QUERY_ROWS_MAX`].
pub fn too_many_rows() -> DbError {
    // 54000: program_limit_exceeded.
    DbError::new(Some("54000"), format!("the answer has more than {SIMPLE_QUERY_ROWS_MAX} rows"))
}

/// One client connection. Owned by one worker thread for the whole run.
pub trait Session: Send {
    /// Prepares `sql` (placeholders `$1..$n`) once; executions reuse the plan.
    fn prepare(&mut self, sql: &str) -> Result<StatementId, DbError>;

    /// Runs a prepared query. Result values replace `out`'s contents,
    /// row-major (the caller knows the column count); returns the number
    /// of rows. `out` is caller-owned so the hot loop does not allocate per
    /// call (a target may overwrite its values in place, reusing strings).
    fn query(&mut self, stmt: StatementId, params: &[Value], out: &mut Vec<Value>) -> Result<usize, DbError>;

    /// Runs a prepared statement that returns no rows; returns rows affected.
    fn execute(&mut self, stmt: StatementId, params: &[Value]) -> Result<u64, DbError>;

    /// Runs SQL without parameters through the simple-query path (one or
    /// more statements; the rows of all of them, in order) and returns every
    /// value in its text form, unconverted and unrounded, so answers can be
    /// compared with PostgreSQL's exactly (TPC-H). Also how a workload sets
    /// a session setting such as `statement_timeout`.
    fn simple_query(&mut self, sql: &str) -> Result<Vec<TextRow>, DbError>;

    fn begin(&mut self) -> Result<(), DbError>;
    fn commit(&mut self) -> Result<(), DbError>;
    fn rollback(&mut self) -> Result<(), DbError>;
}

/// Rows handed to [`Target::bulk_load`], generated on the fly so population
/// never holds a whole table in memory.
pub trait RowSource: Send {
    /// Fills `row` with the next row's values (cleared by the caller) and
    /// returns false when the source is exhausted.
    fn next_row(&mut self, row: &mut Vec<Value>) -> bool;
}

/// Figures sampled from the system under test during the measure window.
pub use crate::result::BackendFigures;

/// Samples the system under test while a measure window runs (PostgreSQL:
/// pg_stat_database, WAL position, wait events, CPU of its processes).
pub trait BackendSampler: Send {
    /// Starts sampling in the background.
    fn start(&mut self) -> Result<(), DbError>;
    /// Stops sampling and returns what was seen since `start`.
    fn finish(&mut self) -> Result<BackendFigures, DbError>;
}

/// A system the benchmark can run against.
pub trait Target: Send + Sync {
    /// Human description for reports, with no secrets (no password).
    fn describe(&self) -> String;

    /// Opens a new session (one per worker thread).
    fn connect(&self) -> Result<Box<dyn Session>, DbError>;

    /// Runs one or more statements without parameters (DDL, ANALYZE, ...).
    fn execute_batch(&self, sql: &str) -> Result<(), DbError>;

    /// Loads rows into `table` as fast as the target allows (COPY for
    /// PostgreSQL). May be called from several threads at once for different
    /// tables or different ranges of one table.
    fn bulk_load(&self, table: &str, columns: &[&str], rows: &mut dyn RowSource) -> Result<u64, DbError>;

    /// A sampler for backend-side figures, when the target can provide one.
    fn sampler(&self) -> Option<Box<dyn BackendSampler>>;

    /// Durability setting the target runs with, for the report (e.g.
    /// "synchronous_commit=on, fsync=on").
    fn durability(&self) -> Result<String, DbError>;

    /// True when keys and foreign keys must be declared with the tables
    /// (the embedded engine stores rows by primary key and has no ALTER
    /// TABLE): population then creates keyed tables and loads parents before
    /// children. False (PostgreSQL): bare tables, keys built after the load,
    /// which is many times faster there.
    fn keys_with_tables(&self) -> bool {
        false
    }

    /// How [`Target::bulk_load`] moves rows, for the report's deviations.
    fn bulk_load_method(&self) -> &'static str {
        "COPY"
    }

    /// The analytic path's counters since the target's columnar copies
    /// started, when it can say (the embedded engine): a benchmark reports
    /// how many of its SELECTs went back to the row path, and why.
    fn analytic_route(&self) -> Option<AnalyticRoute> {
        None
    }
}

/// SELECTs the columnar path answered and those that went back to the row
/// path after the analytic executor failed (the latest failure's error),
/// and the copies' upkeep: analytic queries' waits for the commit stream's
/// applier, merges of the delta into the chunks, the delta not merged.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AnalyticRoute {
    pub columnar: u64,
    pub fallbacks: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fallback: Option<String>,
    #[serde(default)]
    pub catch_up_waits: u64,
    #[serde(default)]
    pub catch_up_wait_ms: f64,
    #[serde(default)]
    pub merges: u64,
    #[serde(default)]
    pub merged_rows: u64,
    /// The merger's time in merges.
    #[serde(default)]
    pub merge_ms: f64,
    /// Analytic queries' table scans and the time making their batches
    /// (views at the snapshot, masked chunks copied, delta rows converted).
    #[serde(default)]
    pub scans: u64,
    #[serde(default)]
    pub scan_ms: f64,
    /// Unmerged delta entries over every copy when sampled (not a difference).
    #[serde(default)]
    pub delta_rows: u64,
}

impl AnalyticRoute {
    /// What happened between `before` and `self` (the last failure only
    /// when one happened in between; the delta as `self` saw it).
    pub fn since(&self, before: &AnalyticRoute) -> AnalyticRoute {
        let fallbacks = self.fallbacks.saturating_sub(before.fallbacks);
        AnalyticRoute {
            columnar: self.columnar.saturating_sub(before.columnar),
            fallbacks,
            last_fallback: if fallbacks > 0 { self.last_fallback.clone() } else { None },
            catch_up_waits: self.catch_up_waits.saturating_sub(before.catch_up_waits),
            catch_up_wait_ms: (self.catch_up_wait_ms - before.catch_up_wait_ms).max(0.0),
            merges: self.merges.saturating_sub(before.merges),
            merged_rows: self.merged_rows.saturating_sub(before.merged_rows),
            merge_ms: (self.merge_ms - before.merge_ms).max(0.0),
            scans: self.scans.saturating_sub(before.scans),
            scan_ms: (self.scan_ms - before.scan_ms).max(0.0),
            delta_rows: self.delta_rows,
        }
    }
}
