//! The errors of the flash tier. Each carries the SQLSTATE a server would
//! report for it, so callers map them without string matching.

use std::io;

/// What went wrong in the flash tier.
#[derive(Debug, thiserror::Error)]
pub enum TierError {
    /// A read, write, sync, allocation or rename failed. After one on the
    /// device the store is failed (see `TierStats::failed`).
    #[error("flash tier I/O error: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// A record or file failed its checksum or carried impossible fields.
    /// The bytes were not returned; the index entry was removed.
    #[error("flash tier data corrupted: {0}")]
    Corrupt(String),
    /// Durable records would exceed what the store can keep while still
    /// reclaiming space (or a shrink would not fit them).
    #[error("flash tier full: {0}")]
    Full(String),
    /// The configuration cannot be used (sizes, alignment).
    #[error("invalid flash tier configuration: {0}")]
    Config(String),
    /// `DirectIo::On` and the file system refused O_DIRECT.
    #[error("direct I/O unavailable: {0}")]
    DirectIoUnavailable(String),
    /// The file is not a flash tier file of this format.
    #[error("not a usable flash tier file: {0}")]
    Format(String),
    /// Another store (this process or another) has the file open.
    #[error("flash tier file in use: {0}")]
    Locked(String),
    /// The store failed earlier (the reason) and takes no more writes.
    #[error("flash tier failed earlier: {0}")]
    Failed(String),
}

impl TierError {
    /// The SQLSTATE PostgreSQL would use for this condition.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            TierError::Io { .. } | TierError::Failed(_) => "58030", // io_error
            TierError::Corrupt(_) | TierError::Format(_) => "XX001", // data_corrupted
            TierError::Full(_) => "53100",                          // disk_full
            TierError::Config(_) | TierError::DirectIoUnavailable(_) => "22023", // invalid_parameter_value
            TierError::Locked(_) => "55006",                        // object_in_use
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> TierError {
        TierError::Io { context: context.into(), source }
    }
}
