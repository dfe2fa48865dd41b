//! The commit order: the commit mutex and the last commit ts, LSN and
//! commit time it guards. Commits (transaction/commit.rs) take it to
//! assign all three; a checkpoint takes it for a moment to read a
//! consistent start and later reads the last LSN to wait for, as close does.

use parking_lot::{Mutex, MutexGuard};
use pgtier_wal::Lsn;

use crate::ids::CommitTs;

/// The commit mutex and what it orders: commit ts and WAL appends are
/// assigned in the same order under it, and stamping and DDL publication
/// happen inside it. A checkpoint takes it for a moment to read a start
/// LSN and catalog no commit is halfway past.
pub(crate) struct CommitOrder(Mutex<CommitPoint>);

pub(crate) struct CommitPoint {
    pub(crate) last_ts: CommitTs,
    /// LSN of the last record appended (for durability waits).
    pub(crate) last_lsn: Option<Lsn>,
    /// Commit time of the last logged commit (µs since the Unix epoch): a
    /// clock stepped back is clamped to it, so commit times never decrease
    /// along the log.
    last_time_us: u64,
}

impl CommitOrder {
    /// `last_ts`, `last_time_us`: the newest commit ts and commit time
    /// recovered.
    pub(crate) fn new(last_ts: CommitTs, last_time_us: u64) -> CommitOrder {
        CommitOrder(Mutex::new(CommitPoint { last_ts, last_lsn: None, last_time_us }))
    }

    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, CommitPoint> {
        self.0.lock()
    }

    /// LSN of the last record appended by a commit.
    pub(crate) fn last_lsn(&self) -> Option<Lsn> {
        self.0.lock().last_lsn
    }
}

impl CommitPoint {
    /// The commit time of the commit being logged: `now_us`, or the last
    /// one if the clock stepped back.
    pub(crate) fn clamp_time(&mut self, now_us: u64) -> u64 {
        self.last_time_us = self.last_time_us.max(now_us);
        self.last_time_us
    }
}
