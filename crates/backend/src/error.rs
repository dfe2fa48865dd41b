//! The harness's one error type. Every variant renders as text a user can act
//! on: what failed, where, and (for the common setup problems) how to fix it.

use std::io;
use std::path::PathBuf;

use crate::connect::ConnectError;

/// Hint shared by every "PostgreSQL is not installed properly" error.
pub const INSTALL_HINT: &str = "run scripts/ensure-postgres.sh (or apt-get install postgresql)";

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("PostgreSQL server binaries (initdb, postgres, pg_ctl) not found: {searched}; {INSTALL_HINT}")]
    BinariesNotFound { searched: String },

    #[error(
        "PostgreSQL refuses to run as root and there is no unprivileged user to run it as: {detail}; \
         run scripts/ensure-postgres.sh (it creates the `postgres` user) or set PGTIER_PG_USER"
    )]
    NoUnprivilegedUser { detail: String },

    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("`{program}` failed ({status}): {output}")]
    CommandFailed { program: String, status: String, output: String },

    #[error("PostgreSQL did not start: {reason}\n--- last lines of {log_file} ---\n{log_tail}")]
    StartFailed { reason: String, log_file: PathBuf, log_tail: String },

    #[error("PostgreSQL (pid {pid}) {problem}\n--- last lines of {log_file} ---\n{log_tail}")]
    Shutdown { pid: u32, problem: String, log_file: PathBuf, log_tail: String },

    #[error("memory limit of the private PostgreSQL: {0}")]
    MemoryLimit(#[from] crate::memory_limit::MemoryLimitError),

    #[error("read ceiling of the private PostgreSQL: {0}")]
    ReadThrottle(#[from] crate::read_throttle::ReadThrottleError),

    #[error("invalid cluster option: {0}")]
    InvalidOption(String),

    #[error(transparent)]
    Connect(#[from] ConnectError),

    #[error("{what} failed (SQLSTATE {sqlstate}): {message}")]
    Sql { what: String, sqlstate: String, message: String },

    #[error("the shared private cluster could not be started: {0}")]
    SharedClusterFailed(String),

    #[error("no pgtier backend cluster in {dir}; start one with `pgtier backend start --dir {dir}`")]
    NotInitialized { dir: PathBuf },
}

impl HarnessError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        HarnessError::Io { action, path: path.into(), source }
    }

    pub(crate) fn sql(what: impl Into<String>, error: &postgres::Error) -> Self {
        let (sqlstate, message) = match error.as_db_error() {
            Some(db) => (db.code().code().to_owned(), db.message().to_owned()),
            None => ("08006".to_owned(), error.to_string()),
        };
        HarnessError::Sql { what: what.into(), sqlstate, message }
    }
}
