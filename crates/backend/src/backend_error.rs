//! Errors of the PostgreSQL-facing library (catalog import, COPY, snapshots).
//!
//! Every variant has a SQLSTATE: PostgreSQL's own when it gave one, else the
//! code PostgreSQL uses for the same situation, so the server can pass them
//! on unchanged. No variant ever holds a URL or a password: these errors are
//! raised after the connection exists, and PostgreSQL's messages never echo
//! credentials.

use std::io;

use crate::connect::error_chain;
use crate::copy_out::{CopyFormatError, DecodeError};

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The name could not be parsed as `[schema.]table`.
    #[error("invalid table name {name:?}: {reason}")]
    InvalidName { name: String, reason: String },

    #[error("relation \"{name}\" does not exist")]
    TableNotFound { name: String },

    /// `object` reads like PostgreSQL's message: `table public.t`,
    /// `schema s`, `column c of table public.t`.
    #[error("permission denied for {object}")]
    PermissionDenied { object: String },

    /// A view, partitioned parent, foreign table, ... (`kind` says which).
    #[error("\"{name}\" is {kind}; only ordinary tables can be cached")]
    NotATable { name: String, kind: &'static str },

    /// PostgreSQL answered with an error.
    #[error("{what} failed (SQLSTATE {sqlstate}): {message}")]
    Server { what: String, sqlstate: String, message: String, detail: Option<String>, hint: Option<String> },

    /// The connection failed or broke (no SQLSTATE from the server).
    #[error("{what} failed: connection to PostgreSQL lost: {reason}")]
    Connection { what: String, reason: String },

    /// PostgreSQL answered with something this library did not expect
    /// (a catalog column of another type, a missing row).
    #[error("{what}: unexpected answer from PostgreSQL: {reason}")]
    UnexpectedResult { what: String, reason: String },

    /// The binary COPY stream is malformed or truncated.
    #[error("binary COPY stream of {what}: {error}")]
    CopyFormat { what: String, error: CopyFormatError },

    /// A field's bytes are not a valid binary value of its type.
    #[error("binary COPY stream of {what}, column \"{column}\": {error}")]
    Decode { what: String, column: String, error: DecodeError },

    /// A load was cancelled by its owner.
    #[error("canceling statement due to user request")]
    Cancelled,

    /// A snapshot id that does not look like one `pg_export_snapshot()` returns.
    #[error("invalid snapshot identifier: {id:?}")]
    InvalidSnapshot { id: String },

    /// Not a name PostgreSQL accepts for a replication slot.
    #[error("invalid replication slot name {name:?}: {reason}")]
    InvalidSlotName { name: String, reason: &'static str },

    /// The server sent bytes that break the protocol (a malformed or
    /// truncated message, one that is not valid in this state).
    #[error("{what}: protocol violation: {reason}")]
    Protocol { what: String, reason: String },
}

impl BackendError {
    /// The SQLSTATE PostgreSQL reports (or would report) for this error.
    pub fn sqlstate(&self) -> &str {
        match self {
            BackendError::InvalidName { .. } => "42602",
            BackendError::TableNotFound { .. } => "42P01",
            BackendError::PermissionDenied { .. } => "42501",
            BackendError::NotATable { .. } => "42809",
            BackendError::Server { sqlstate, .. } => sqlstate,
            BackendError::Connection { .. } => "08006",
            BackendError::UnexpectedResult { .. } => "XX000",
            BackendError::CopyFormat { .. } => "22P04",
            BackendError::Decode { .. } => "22P03",
            BackendError::Cancelled => "57014",
            BackendError::InvalidSnapshot { .. } => "22023",
            BackendError::InvalidSlotName { .. } => "42602",
            BackendError::Protocol { .. } => "08P01",
        }
    }

    /// Maps a `postgres` client error, keeping PostgreSQL's SQLSTATE, message,
    /// detail and hint. A cancel request's error (57014, "due to user request")
    /// becomes [`BackendError::Cancelled`].
    pub fn from_postgres(what: impl Into<String>, error: &postgres::Error) -> BackendError {
        let what = what.into();
        match error.as_db_error() {
            // 57014 also covers statement_timeout and lock_timeout, which
            // must keep their own message.
            Some(db) if db.code().code() == "57014" && db.message().ends_with("due to user request") => {
                BackendError::Cancelled
            }
            Some(db) => BackendError::Server {
                what,
                sqlstate: db.code().code().to_owned(),
                message: db.message().to_owned(),
                detail: db.detail().map(str::to_owned),
                hint: db.hint().map(str::to_owned),
            },
            None => BackendError::Connection { what, reason: error_chain(error) },
        }
    }

    /// Maps an I/O error from a COPY stream: the `postgres` reader wraps the
    /// server's error (e.g. a failed or cancelled COPY) in an `io::Error`.
    pub(crate) fn from_io(what: &str, error: &io::Error) -> BackendError {
        if let Some(inner) = error.get_ref()
            && let Some(postgres_error) = inner.downcast_ref::<postgres::Error>()
        {
            return BackendError::from_postgres(what, postgres_error);
        }
        BackendError::Connection { what: what.to_owned(), reason: error.to_string() }
    }
}
