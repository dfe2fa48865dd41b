//! pgtier's flash tier: a store of byte-string records on a file or block
//! device, below DRAM. Append-only regions, checksummed records, an index of
//! 8 bytes per slot in DRAM, FIFO reclamation of regions for data that may
//! be dropped and compaction (rewrite) for data that may not.
//!
//! The crate knows nothing of tables, SQL or PostgreSQL: keys and values are
//! bytes. README.md states the on-device format and the invariants.

mod admission;
mod aligned;
mod checkpoint;
mod device;
mod error;
mod format;
mod hash;
mod index;
mod manage;
mod read;
mod reclaim;
mod recovery;
mod regions;
mod stats;
mod store;
mod writer;

use std::path::PathBuf;
use std::time::Duration;

pub use error::TierError;
pub use stats::{LATENCY_BUCKETS, Rejections, TierStats};
pub use store::FlashStore;

/// Regions of 16 MiB: large sequential writes, few enough to scan quickly.
pub const DEFAULT_REGION_SIZE: u32 = 16 << 20;
/// The mean record size the index is sized for when none is given.
pub const DEFAULT_MEAN_RECORD_BYTES: u32 = 512;

/// How to open a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TierConfig {
    /// The file (created if missing) or block device.
    pub path: PathBuf,
    /// Bytes of the device the store uses (rounded down to whole regions).
    pub size: u64,
    /// Bytes per region: a multiple of 4096 from 64 KiB to 1 GiB. A file
    /// created with another region size keeps its own.
    pub region_size: u32,
    pub direct_io: DirectIo,
    /// Mean bytes a record takes on the device (20-byte header + key +
    /// value, rounded up to 8): the index gets `size / mean_record_bytes` slots.
    pub mean_record_bytes: u32,
    pub admission: Admission,
}

impl TierConfig {
    /// A configuration with the defaults: 16 MiB regions, O_DIRECT where
    /// allowed, 512-byte records, every insert admitted.
    pub fn new(path: impl Into<PathBuf>, size: u64) -> TierConfig {
        TierConfig {
            path: path.into(),
            size,
            region_size: DEFAULT_REGION_SIZE,
            direct_io: DirectIo::Auto,
            mean_record_bytes: DEFAULT_MEAN_RECORD_BYTES,
            admission: Admission::All,
        }
    }
}

/// Whether to bypass the page cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DirectIo {
    /// O_DIRECT if the file system allows it, else buffered I/O with
    /// `posix_fadvise(RANDOM)`.
    #[default]
    Auto,
    /// O_DIRECT or `open` fails with `TierError::DirectIoUnavailable`.
    On,
    /// Buffered I/O.
    Off,
}

/// The I/O mode actually in use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoMode {
    Direct,
    Buffered { reason: String },
}

/// Which inserts of droppable records the store takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Admission {
    #[default]
    All,
    /// A key's first insert attempt is only remembered (a fixed-size ghost
    /// table of key hashes) and admitted on the second; keys already on
    /// flash and Durable inserts are always admitted.
    SecondTouch,
}

/// What reclamation may do with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Retention {
    /// FIFO reclamation drops it.
    Evictable,
    /// Reclamation rewrites it at the head unless Keep and Durable live
    /// bytes exceed 80% of capacity (or what compaction can hold), then drops it.
    Keep,
    /// Never dropped by reclamation, always rewritten. `insert` returns
    /// after the record is on stable storage (group commit).
    Durable,
}

/// The outcome of an insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    Stored,
    /// Not stored; an older record of the key, if any, is unchanged.
    Rejected(RejectReason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Key longer than 65535 bytes or record larger than a region's payload.
    TooLarge,
    /// Admission::SecondTouch and this is the key's first attempt.
    NotAdmitted,
    /// The key's index shard is full.
    IndexFull,
    /// Reclamation could not free a region (everything left must be kept).
    NoSpace,
    /// The store failed earlier (`TierStats::failed`) and takes no writes.
    Disabled,
}

/// How an open found the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warm {
    /// A new (or empty) file.
    Cold,
    /// An index checkpoint with the token was loaded; only regions written
    /// after it were scanned.
    FromIndex,
    /// Every region was scanned.
    FromScan,
}

/// What `FlashStore::open` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenReport {
    pub warm: Warm,
    /// Live records after recovery (all retentions).
    pub records: u64,
    pub durable_records: u64,
    /// Regions whose records were read (a clean close with a matching token: 0).
    pub regions_scanned: u64,
    pub took: Duration,
    pub io_mode: IoMode,
    /// An intact index checkpoint carried the token passed to `open`.
    pub token_matched: bool,
    /// The checkpoint was written by `close` and nothing was written after
    /// it: the records are exactly those live at the close. When false, a
    /// droppable record removed (or replaced by nothing) before a crash may
    /// be back; Durable records are exact either way.
    pub clean: bool,
    /// Bytes read from the device (and index file) to recover.
    pub bytes_read: u64,
}
