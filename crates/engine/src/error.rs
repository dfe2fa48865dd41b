//! Engine errors. Each carries the SQLSTATE PostgreSQL would report and a
//! message/detail phrased as PostgreSQL phrases them, so the server can map
//! them to ErrorResponse fields one to one and drivers behave as usual.

use pgtier_wal::WalError;

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// 23505. `constraint` is the index name (e.g. `subscriber_pkey`).
    #[error("duplicate key value violates unique constraint \"{constraint}\"")]
    UniqueViolation { constraint: String, detail: String },
    /// 23503.
    #[error("{message}")]
    ForeignKeyViolation { constraint: String, message: String, detail: String },
    /// 23502.
    #[error("null value in column \"{column}\" of relation \"{table}\" violates not-null constraint")]
    NotNullViolation { table: String, column: String, detail: String },
    /// 22001.
    #[error("value too long for type {type_name}")]
    StringTooLong { type_name: String },
    /// 22003.
    #[error("{message}")]
    OutOfRange { message: String },
    /// 42804: a value of the wrong type for a column.
    #[error("column \"{column}\" is of type {expected} but expression is of type {found}")]
    DatatypeMismatch { column: String, expected: String, found: String },
    /// 42P07.
    #[error("relation \"{name}\" already exists")]
    DuplicateTable { name: String },
    /// 42P01.
    #[error("relation \"{name}\" does not exist")]
    UndefinedTable { name: String },
    /// 42703.
    #[error("column \"{column}\" of relation \"{table}\" does not exist")]
    UndefinedColumn { table: String, column: String },
    /// 42P16 / 42830 / 0A000 and other definition errors found by DDL checks.
    #[error("{message}")]
    InvalidDefinition { sqlstate: &'static str, message: String },
    /// 40P01.
    #[error("deadlock detected")]
    Deadlock { detail: String },
    /// 55P03.
    #[error("canceling statement due to lock timeout")]
    LockTimeout { detail: String },
    /// 57014: a lock wait outlived the statement's deadline
    /// ([`crate::Transaction::set_statement_deadline`]).
    #[error("canceling statement due to statement timeout")]
    StatementTimeout,
    /// 57014: the statement's cancel flag was raised while it waited for a
    /// lock ([`crate::Transaction::set_cancel_flag`]).
    #[error("canceling statement due to user request")]
    Canceled,
    /// 55P03: a transaction that never waits for row locks (every origin
    /// but `Application`) met one held by another transaction.
    #[error("could not obtain lock on row in relation \"{relation}\"")]
    LockNotAvailable { relation: String, detail: String },
    /// 40001: a transaction with a pinned snapshot
    /// ([`crate::Transaction::pin_snapshot`]) met a row committed after it.
    #[error("could not serialize access due to concurrent update")]
    ChangedSincePinned { relation: String },
    /// A miss hook's failure (the cache's dynamic load), with the SQLSTATE
    /// and hint it gave, passed to the statement unchanged.
    #[error("{message}")]
    Hook { sqlstate: &'static str, message: String, hint: Option<String> },
    /// 25P02.
    #[error("current transaction is aborted, commands ignored until end of transaction block")]
    TransactionAborted,
    /// 25001: [`crate::Transaction::set_origin`] after the transaction wrote.
    #[error("transaction origin {origin} must be set before the transaction's first write")]
    OriginAfterWrite { origin: &'static str },
    /// 25006: a write in a transaction begun read-only.
    #[error("cannot execute {what} in a read-only transaction")]
    ReadOnlyTransaction { what: &'static str },
    /// 53300: every transaction slot is in use (the bound is `max_transactions`).
    #[error("too many concurrent transactions (limit {limit})")]
    TooManyTransactions { limit: usize },
    /// 54000.
    #[error("{message}")]
    ProgramLimitExceeded { message: String },
    /// 42704: unknown index / consumer etc.
    #[error("{what} \"{name}\" does not exist")]
    UndefinedObject { what: &'static str, name: String },
    /// 42710.
    #[error("{what} \"{name}\" already exists")]
    DuplicateObject { what: &'static str, name: String },
    /// 58030: local I/O failed (checkpoint, consumer positions).
    #[error("I/O error: {context}: {source}")]
    Io { context: String, source: std::io::Error },
    /// 58030: the WAL device failed; the database refuses further commits.
    #[error("WAL error: {0}")]
    Wal(#[from] WalError),
    /// XX001: a checkpoint or WAL record failed validation.
    #[error("data corrupted: {0}")]
    Corrupt(String),
    /// F0001, as PostgreSQL's "lock file already exists": another open
    /// database (in this process or another) holds the directory.
    #[error("data directory \"{dir}\" is in use: another pgtier holds its lock file \"{lock_file}\"")]
    DirectoryInUse { dir: String, lock_file: String },
    /// 57P01: the database is shutting down.
    #[error("terminating connection due to administrator command")]
    ShuttingDown,
    /// 0A000.
    #[error("{0} is not supported")]
    FeatureNotSupported(String),
    /// 22023: a backup or restore directory that cannot be used (not
    /// absolute, not empty, not a directory); backup.rs.
    #[error("{message}")]
    InvalidBackupDirectory { message: String },
}

impl EngineError {
    /// The five-character SQLSTATE PostgreSQL uses for this condition.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            EngineError::UniqueViolation { .. } => "23505",
            EngineError::ForeignKeyViolation { .. } => "23503",
            EngineError::NotNullViolation { .. } => "23502",
            EngineError::StringTooLong { .. } => "22001",
            EngineError::OutOfRange { .. } => "22003",
            EngineError::DatatypeMismatch { .. } => "42804",
            EngineError::DuplicateTable { .. } => "42P07",
            EngineError::UndefinedTable { .. } => "42P01",
            EngineError::UndefinedColumn { .. } => "42703",
            EngineError::InvalidDefinition { sqlstate, .. } => sqlstate,
            EngineError::Deadlock { .. } => "40P01",
            EngineError::LockTimeout { .. } | EngineError::LockNotAvailable { .. } => "55P03",
            EngineError::StatementTimeout | EngineError::Canceled => "57014",
            EngineError::Hook { sqlstate, .. } => sqlstate,
            EngineError::ChangedSincePinned { .. } => "40001",
            EngineError::TransactionAborted => "25P02",
            EngineError::OriginAfterWrite { .. } => "25001",
            EngineError::ReadOnlyTransaction { .. } => "25006",
            EngineError::TooManyTransactions { .. } => "53300",
            EngineError::ProgramLimitExceeded { .. } => "54000",
            EngineError::UndefinedObject { .. } => "42704",
            EngineError::DuplicateObject { .. } => "42710",
            EngineError::Io { .. } | EngineError::Wal(_) => "58030",
            EngineError::Corrupt(_) => "XX001",
            EngineError::DirectoryInUse { .. } => "F0001",
            EngineError::ShuttingDown => "57P01",
            EngineError::FeatureNotSupported(_) => "0A000",
            EngineError::InvalidBackupDirectory { .. } => "22023",
        }
    }

    /// PostgreSQL's DETAIL field, when it has one.
    pub fn detail(&self) -> Option<&str> {
        match self {
            EngineError::UniqueViolation { detail, .. }
            | EngineError::ForeignKeyViolation { detail, .. }
            | EngineError::NotNullViolation { detail, .. }
            | EngineError::Deadlock { detail }
            | EngineError::LockTimeout { detail }
            | EngineError::LockNotAvailable { detail, .. } => Some(detail),
            _ => None,
        }
    }

    /// A miss hook's error. The SQLSTATE is interned: SQLSTATEs are five
    /// characters from a fixed alphabet, so at most a few hundred distinct
    /// ones are ever kept; anything else becomes XX000.
    pub fn hook(sqlstate: &str, message: impl Into<String>, hint: Option<String>) -> EngineError {
        EngineError::Hook { sqlstate: intern_sqlstate(sqlstate), message: message.into(), hint }
    }

    /// PostgreSQL's HINT field, when the error carries one.
    pub fn hint(&self) -> Option<&str> {
        match self {
            EngineError::Hook { hint, .. } => hint.as_deref(),
            _ => None,
        }
    }

    /// Name of the violated constraint, for the ErrorResponse `n` field.
    pub fn constraint(&self) -> Option<&str> {
        match self {
            EngineError::UniqueViolation { constraint, .. } | EngineError::ForeignKeyViolation { constraint, .. } => {
                Some(constraint)
            }
            _ => None,
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> EngineError {
        EngineError::Io { context: context.into(), source }
    }

    pub(crate) fn definition(sqlstate: &'static str, message: impl Into<String>) -> EngineError {
        EngineError::InvalidDefinition { sqlstate, message: message.into() }
    }
}

fn intern_sqlstate(code: &str) -> &'static str {
    static KNOWN: parking_lot::Mutex<Vec<&'static str>> = parking_lot::Mutex::new(Vec::new());
    if code.len() != 5 || !code.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) {
        return "XX000";
    }
    let mut known = KNOWN.lock();
    if let Some(found) = known.iter().find(|k| **k == code) {
        return found;
    }
    let leaked: &'static str = Box::leak(code.to_owned().into_boxed_str());
    known.push(leaked);
    leaked
}
