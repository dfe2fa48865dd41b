//! Statistics: the transaction counters, and [`DbStats`], read from every
//! subsystem at once (the one place that does).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pgtier_wal::{Lsn, WalStats};

use crate::checkpoint::CheckpointInfo;
use crate::db::DbInner;
use crate::ids::CommitTs;
use crate::recovery::RecoveryReport;
use crate::schema::TableId;

/// Counted by transactions as they end.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) commits: AtomicU64,
    pub(crate) commits_sync: AtomicU64,
    pub(crate) rollbacks: AtomicU64,
    pub(crate) deadlocks: AtomicU64,
    pub(crate) lock_waits: AtomicU64,
}

/// Per-table statistics.
#[derive(Clone, Debug)]
pub struct TableStats {
    pub id: TableId,
    pub name: String,
    /// Committed live rows.
    pub rows: u64,
    /// Bytes reserved for row versions (slab chunks).
    pub row_bytes: u64,
    /// Bytes in live versions (including not-yet-collected old versions).
    pub row_bytes_used: u64,
    /// Primary hash slots plus ordered-index pages.
    pub index_bytes: u64,
}

#[derive(Clone, Debug)]
pub struct DbStats {
    pub tables: Vec<TableStats>,
    pub commits: u64,
    pub commits_sync: u64,
    pub rollbacks: u64,
    pub deadlocks: u64,
    /// Row-lock waits begun (an application transaction found a row another holds).
    pub lock_waits: u64,
    pub wal_end: Lsn,
    pub wal_durable_end: Lsn,
    pub wal: WalStats,
    pub last_checkpoint: Option<CheckpointInfo>,
    pub checkpoint_age: Option<Duration>,
    pub checkpoints: u64,
    pub visible_ts: CommitTs,
    pub active_transactions: usize,
    pub gc_queue_len: usize,
    pub gc_versions_freed: u64,
    pub recovery: RecoveryReport,
}

pub(crate) fn collect(db: &DbInner) -> DbStats {
    let cat = db.catalog.current();
    let tables = cat
        .live_stores()
        .map(|s| {
            let (row_bytes, index_bytes) = s.bytes();
            TableStats {
                id: s.schema.id,
                name: s.schema.name.clone(),
                rows: u64::try_from(s.live_rows.load(Ordering::Relaxed)).unwrap_or(0),
                row_bytes,
                row_bytes_used: s.slab.used_bytes(),
                index_bytes,
            }
        })
        .collect();
    let last_checkpoint = db.checkpoints.last();
    let checkpoint_age = last_checkpoint.as_ref().and_then(|c| c.completed_at.elapsed().ok());
    let c = &db.counters;
    DbStats {
        tables,
        commits: c.commits.load(Ordering::Relaxed),
        commits_sync: c.commits_sync.load(Ordering::Relaxed),
        rollbacks: c.rollbacks.load(Ordering::Relaxed),
        deadlocks: c.deadlocks.load(Ordering::Relaxed),
        lock_waits: c.lock_waits.load(Ordering::Relaxed),
        wal_end: db.wal.end(),
        wal_durable_end: db.wal.durable_end(),
        wal: db.wal.stats(),
        last_checkpoint,
        checkpoint_age,
        checkpoints: db.checkpoints.count(),
        visible_ts: db.txns.visible(),
        active_transactions: db.txns.active_count(),
        gc_queue_len: db.gc.queue_len(),
        gc_versions_freed: db.gc.versions_freed(),
        recovery: db.recovery.clone(),
    }
}
