//! pgtier's write-ahead log device: an ordered, CRC-protected, segmented log
//! with group commit. It stores opaque records (the engine puts one whole
//! transaction in each) and knows nothing of tables, SQL or the network.
//!
//! API contract (the engine codes against exactly this; see README.md):
//! - `append` copies a record into the log buffer and returns its [`Lsn`]. Records
//!   are read back in append order; the engine appends under its commit lock,
//!   so log order is commit order.
//! - `wait_durable(lsn)` blocks until the record at `lsn` (and everything
//!   before it) is on stable storage. Concurrent waiters share one fdatasync.
//! - In the background, a writer thread flushes the buffer at most every
//!   `async_flush_interval` even if nobody waits (the `async` commit mode).
//! - `read_from(lsn)` iterates durable records in order from `lsn`.
//! - `truncate_before(lsn)` deletes whole segments that end at or before `lsn`.
//! - `open` recovers: it scans to the last whole record and cuts a torn tail.
//!
//! STUB: the bodies below are placeholders while the real log is written.

use std::path::Path;
use std::time::Duration;

/// Log sequence number: byte offset of a record's start in the log stream.
/// Monotonic across segments; never reused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("WAL I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("WAL record of {size_bytes} bytes exceeds the limit of {limit_bytes} bytes")]
    RecordTooLarge { size_bytes: usize, limit_bytes: usize },
    #[error("WAL is corrupt at {lsn:?}: {detail}")]
    Corrupt { lsn: Lsn, detail: String },
    #[error("WAL is closed after an earlier I/O failure; restart to recover")]
    Poisoned,
}

#[derive(Clone, Debug)]
pub struct WalConfig {
    /// Size of each preallocated segment file.
    pub segment_bytes: u64,
    /// Upper bound on how long an appended record may wait before the writer
    /// thread flushes it when no committer asks (async commit mode).
    pub async_flush_interval: Duration,
    /// Largest record accepted.
    pub record_bytes_max: usize,
}

impl Default for WalConfig {
    fn default() -> WalConfig {
        WalConfig {
            segment_bytes: 64 << 20,
            async_flush_interval: Duration::from_millis(10),
            record_bytes_max: 16 << 20,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct WalStats {
    pub records_appended: u64,
    pub bytes_appended: u64,
    pub fsyncs: u64,
    pub segments_created: u64,
    pub segments_removed: u64,
}

pub struct Wal {
    _private: (),
}

/// Iterator over durable records `(lsn, payload)` in log order.
pub struct WalReader {
    _private: (),
}

impl Iterator for WalReader {
    type Item = Result<(Lsn, Vec<u8>), WalError>;
    fn next(&mut self) -> Option<Self::Item> {
        None
    }
}

#[allow(clippy::unused_self, unused_variables)]
impl Wal {
    /// Opens or creates the log in `dir`, recovering to the last whole record.
    pub fn open(dir: &Path, config: WalConfig) -> Result<Wal, WalError> {
        unimplemented!("stub")
    }
    /// Appends one record; not yet durable.
    pub fn append(&self, payload: &[u8]) -> Result<Lsn, WalError> {
        unimplemented!("stub")
    }
    /// Blocks until the record at `lsn` and all before it are durable.
    pub fn wait_durable(&self, lsn: Lsn) -> Result<(), WalError> {
        unimplemented!("stub")
    }
    /// Position just past the last durable record.
    pub fn durable_end(&self) -> Lsn {
        unimplemented!("stub")
    }
    /// Position just past the last appended record.
    pub fn end(&self) -> Lsn {
        unimplemented!("stub")
    }
    /// Blocks until the durable end passes `after` or `timeout` elapses;
    /// returns the durable end. Lets commit-stream consumers tail the log.
    pub fn wait_for_durable_beyond(&self, after: Lsn, timeout: Duration) -> Lsn {
        unimplemented!("stub")
    }
    /// Reads durable records starting at the record whose LSN is `from`
    /// (or the first record at or after `from`).
    pub fn read_from(&self, from: Lsn) -> Result<WalReader, WalError> {
        unimplemented!("stub")
    }
    /// Deletes whole segments that lie entirely before `lsn`.
    pub fn truncate_before(&self, lsn: Lsn) -> Result<(), WalError> {
        unimplemented!("stub")
    }
    pub fn stats(&self) -> WalStats {
        unimplemented!("stub")
    }
}
