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
//! Additions beyond that contract: [`Wal::open_with`] (a [`FileSystem`] to
//! inject faults, the append-buffer bound), [`Wal::close`] (flush, stop,
//! report health; `Drop` does the same silently), [`WalReader::position`],
//! and more [`WalStats`] fields.

mod format;
mod fs;
mod reader;
mod recovery;
mod scan;
mod segment;
mod waiters;
mod wal;

use std::time::Duration;

pub use crate::fs::{DirLock, FileSystem, StdFileSystem, WalFile};
pub use crate::reader::WalReader;
pub use crate::wal::{Wal, WalOpenOptions};

/// Bytes of the header at the start of every segment file: the first record
/// of the log is at `Lsn(SEGMENT_HEADER_BYTES)`, never at `Lsn(0)`.
pub const SEGMENT_HEADER_BYTES: u64 = format::SEGMENT_HEADER_BYTES;
/// Bytes of framing per record (header); records are 8-byte aligned.
pub const RECORD_HEADER_BYTES: u64 = format::RECORD_HEADER_BYTES;

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
    #[error("the WAL from {from:?} is gone: the oldest segment kept starts at {oldest:?}")]
    Truncated { from: Lsn, oldest: Lsn },
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
    /// Under group commit (4 or more committers already waiting), how many
    /// times a committer yields the CPU, re-checking, before it parks
    /// (`waiters.rs`). Where every runnable thread is a committer this
    /// spares most futex wake-ups (64 committers: 230-240k commits/s with
    /// 20, 134-146k with 0). Where committers share the CPU with other
    /// work (the server's sessions with their clients), a yield can wait
    /// for a whole round of those threads: the server sets 0.
    pub commit_yields: usize,
}

impl Default for WalConfig {
    fn default() -> WalConfig {
        WalConfig {
            segment_bytes: 64 << 20,
            async_flush_interval: Duration::from_millis(10),
            record_bytes_max: 16 << 20,
            commit_yields: 20,
        }
    }
}

/// Counters since `open`. Byte counts include framing (header, alignment).
#[derive(Clone, Debug, Default)]
pub struct WalStats {
    pub records_appended: u64,
    pub bytes_appended: u64,
    /// fdatasync calls on segment files by the writer (one per touched
    /// segment per flush).
    pub fsyncs: u64,
    /// New segment files, fresh or recycled, including the first one.
    pub segments_created: u64,
    /// Segments removed by `truncate_before` (deleted or kept as spares).
    pub segments_removed: u64,
    /// New segments made from a spare instead of a zero fill.
    pub segments_recycled: u64,
    /// Group-commit batches written and synced.
    pub flushes: u64,
    /// Times an `append` blocked on a full buffer.
    pub backpressure_waits: u64,
    /// Times the writer needed a segment the preallocator had not finished.
    pub segment_waits: u64,
    /// First record position still on disk (after `truncate_before`).
    pub oldest_lsn: Lsn,
    /// Whole records found by recovery at `open`.
    pub recovery_records: u64,
    /// Where recovery cut the log (first invalid record), if it found one.
    pub recovery_cut_lsn: Option<Lsn>,
    pub recovery_cut_reason: Option<String>,
    /// Segments after the cut that still began with a valid record. Usually
    /// means corruption in the middle of the log; a crash that tore a batch
    /// spanning a segment boundary (pad record lost, next segment's first
    /// record written) also counts here.
    pub recovery_segments_discarded: u64,
    /// Set once a write or fsync failed; the log accepts nothing more.
    pub poisoned_reason: Option<String>,
}

// The engine shares one log between committer threads and hands readers to
// consumer threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Wal>();
    send_sync::<WalReader>();
    send_sync::<WalError>();
};
