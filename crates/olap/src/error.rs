//! Errors of the columnar copy. Each carries a SQLSTATE, so the SQL layer
//! can report it as PostgreSQL would, or (routing) fall back to the row path.

use pgtier_engine::EngineError;

#[derive(Debug, thiserror::Error)]
pub enum OlapError {
    /// 0A000: the column's type has no exact Arrow form here.
    #[error("column \"{column}\" of relation \"{table}\" has type {ty}, which the columnar copy does not support")]
    UnsupportedType { table: String, column: String, ty: String },
    /// 22003: a stored value the column's Arrow type cannot hold exactly
    /// (a date or timestamp at ±infinity, numeric NaN). The copy of the table
    /// stops serving (every read fails with this) until enabled again.
    #[error("value of column \"{column}\" of relation \"{table}\" cannot be held by the columnar copy: {reason}")]
    ValueNotRepresentable { table: String, column: String, reason: String },
    /// 55000: analytics is not on for the table (or it was dropped or
    /// rewritten by ALTER TABLE since).
    #[error("analytics is not enabled for relation \"{table}\"")]
    NotEnabled { table: String },
    /// 55000: the table is being copied (ENABLE in progress).
    #[error("the columnar copy of relation \"{table}\" is still being built")]
    Building { table: String },
    /// 72000: the snapshot is older than what the chunks were merged up to
    /// (only a snapshot whose transaction has ended can be: merges stay at
    /// or below the engine's snapshot horizon).
    #[error("snapshot {snapshot} is older than the columnar copy of relation \"{table}\" (merged at {base})")]
    SnapshotTooOld { table: String, snapshot: u64, base: u64 },
    /// 57014: the commit stream did not reach the reader's snapshot in time.
    #[error("the columnar copy did not catch up with the snapshot within {waited_ms} ms")]
    CatchUpTimeout { waited_ms: u64 },
    /// XX000: the consumer stopped on an error; no read is served.
    #[error("the columnar copy's commit-stream consumer stopped: {0}")]
    ConsumerStopped(String),
    /// 53400: a bound was reached.
    #[error("{0}")]
    Limit(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// XX000: Arrow refused a chunk we built (a broken invariant of ours).
    #[error("columnar chunk: {0}")]
    Arrow(String),
    /// 0A000: this build has no analytic executor (feature `datafusion`).
    #[error("this build of pgtier has no analytic executor (built without the `analytics` feature)")]
    NoExecutor,
    /// 53200: an analytic query needed more memory than the executor's
    /// bound (`OlapConfig::memory_limit`); nothing spills to disk.
    #[error("out of memory in the analytic executor: {0}")]
    OutOfMemory(String),
    /// An error of the analytic executor (DataFusion), as text.
    #[error("analytic query failed: {0}")]
    Query(String),
}

impl OlapError {
    pub fn sqlstate(&self) -> &'static str {
        match self {
            OlapError::UnsupportedType { .. } => "0A000",
            OlapError::ValueNotRepresentable { .. } => "22003",
            OlapError::NotEnabled { .. } | OlapError::Building { .. } => "55000",
            OlapError::SnapshotTooOld { .. } => "72000",
            OlapError::CatchUpTimeout { .. } => "57014",
            OlapError::ConsumerStopped(_) => "XX000",
            OlapError::NoExecutor => "0A000",
            OlapError::Limit(_) => "53400",
            OlapError::OutOfMemory(_) => "53200",
            OlapError::Engine(e) => e.sqlstate(),
            OlapError::Query(_) | OlapError::Arrow(_) => "XX000",
        }
    }
}

pub type Result<T, E = OlapError> = std::result::Result<T, E>;
