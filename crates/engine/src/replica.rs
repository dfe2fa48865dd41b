//! Physical replication's engine side: a hot standby whose directory is
//! the active's, continued byte for byte.
//!
//! The active hands out its durable WAL records ([`Database::wal_reader`]);
//! the standby feeds each one to a [`ReplicaApplier`], which appends it to
//! its own WAL at the same LSN (asserted) and applies whole transactions
//! to memory through the ordinary write path (transaction/replica.rs), so
//! read-only sessions see them at MVCC snapshots. While
//! [`Database::set_standby`] is on, every other transaction is refused its
//! first write or DDL with 25006. [`Database::promote`] ends that: from
//! then on the directory is exactly what a crash-restart of the active
//! would open (same incarnation, same log, same LSNs), which is why
//! write-through resumes from PostgreSQL's progress rows with no loss and
//! no repeat.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use pgtier_wal::{Lsn, WalReader};

use crate::codec::Reader;
use crate::commit_mode::CommitMode;
use crate::db::{Database, DbInner};
use crate::error::{EngineError, Result};
use crate::ids::CommitTs;
use crate::origin::Origin;
use crate::transaction::Transaction;
use crate::transaction::replica::ReplicaTxn;
use crate::walrec::{decode_header, decode_record};

/// What a commit that logged passes before it is acknowledged, once its
/// record is written here (durable when `sync_commit`) and its ts
/// published: with sync replication, the standby's acknowledgement of a
/// durable end past `lsn`; with a lease, that this member still holds it.
/// Called with no engine lock held. An error is the commit's (it is
/// committed here all the same: the caller reports an outcome it cannot
/// confirm).
pub trait CommitGate: Send + Sync {
    fn before_ack(&self, lsn: Lsn, sync_commit: bool) -> Result<()>;
}

/// `DbInner::read_only`: every transaction may write.
pub(crate) const READ_WRITE: u8 = 0;
/// Only the standby's apply of received transactions writes.
pub(crate) const READ_REPLICA_ONLY: u8 = 1;
/// Nobody writes: an active that lost its lease.
pub(crate) const READ_FENCED: u8 = 2;

impl Database {
    /// Installs replication's commit gate (once; false if one is installed).
    pub fn set_commit_gate(&self, gate: Arc<dyn CommitGate>) -> bool {
        self.inner.commit_gate.set(gate).is_ok()
    }

    /// A standby refuses every write and DDL but the replicated ones (25006).
    pub fn set_standby(&self, on: bool) {
        self.inner.read_only.store(if on { READ_REPLICA_ONLY } else { READ_WRITE }, Ordering::SeqCst);
    }

    pub fn is_standby(&self) -> bool {
        self.inner.read_only.load(Ordering::SeqCst) == READ_REPLICA_ONLY
    }

    /// An active whose lease lapsed refuses every new write and DDL (25006)
    /// until it holds the lease again; a standby stays a standby.
    pub fn set_fenced(&self, on: bool) {
        let (from, to) = if on { (READ_WRITE, READ_FENCED) } else { (READ_FENCED, READ_WRITE) };
        let _ = self.inner.read_only.compare_exchange(from, to, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Streams of consumer `name` opened from now on deliver only
    /// transactions whose records end at or before `limit` (an active's
    /// standby-acknowledged end): what write-through sends to PostgreSQL
    /// is then always in the log a promoted standby continues, so
    /// PostgreSQL's progress rows never point past that log.
    pub fn limit_stream(&self, name: &str, limit: Arc<std::sync::atomic::AtomicU64>) {
        self.inner.stream_limits.lock().insert(name.to_owned(), limit);
    }

    pub fn is_fenced(&self) -> bool {
        self.inner.read_only.load(Ordering::SeqCst) == READ_FENCED
    }

    /// Ends the standby state: row-id counters continue past the rows
    /// received, writes are accepted. Afterwards the directory is what a
    /// restart of the active would open.
    pub fn promote(&self) {
        for store in self.inner.catalog.current().live_stores() {
            store.restore_rowid();
        }
        self.inner.application_commit_end.fetch_max(self.inner.wal.end().0, Ordering::Release);
        self.inner.read_only.store(READ_WRITE, Ordering::SeqCst);
    }

    /// Durable WAL records from `from` (a record boundary), for a standby.
    pub fn wal_reader(&self, from: Lsn) -> Result<WalReader> {
        Ok(self.inner.wal.read_from(from)?)
    }

    /// The last durable WAL record, its position and checksum: where this
    /// directory's history ends (a standby says it to its active).
    pub fn wal_last_record(&self) -> Result<Option<(Lsn, u32)>> {
        Ok(self.inner.wal.last_record()?)
    }

    /// The checksum of the WAL record at `lsn`, `None` when none starts
    /// there: an active checks a standby's last record against its own.
    pub fn wal_record_checksum_at(&self, lsn: Lsn) -> Result<Option<u32>> {
        Ok(self.inner.wal.record_checksum_at(lsn)?)
    }

    /// Waits up to `timeout` for the durable end to pass `after`; returns it.
    pub fn wait_wal_durable_beyond(&self, after: Lsn, timeout: Duration) -> Lsn {
        self.inner.wal.wait_for_durable_beyond(after, timeout)
    }

    /// Persists a registered consumer's position (see
    /// [`crate::CommitStream::ack`]): a standby mirrors the active's.
    pub fn ack_consumer(&self, name: &str, next_lsn: Lsn) -> Result<()> {
        self.inner.consumers.ack(&self.inner.wal, name, next_lsn)
    }

    pub fn replica_applier(&self) -> ReplicaApplier {
        ReplicaApplier { db: Arc::clone(&self.inner), parts: Vec::new(), applied: 0 }
    }
}

/// Applies received WAL records in order. Not thread-safe by design: one
/// receiver feeds it.
pub struct ReplicaApplier {
    db: Arc<DbInner>,
    /// Earlier records of a run whose closing record has not arrived.
    parts: Vec<(Lsn, Vec<u8>)>,
    applied: u64,
}

impl ReplicaApplier {
    /// One record the active logged at `lsn`. A transaction is applied when
    /// its closing record arrives (returns true). Not durable on return:
    /// see [`ReplicaApplier::sync`].
    pub fn push(&mut self, lsn: Lsn, payload: Vec<u8>) -> Result<bool> {
        let header = decode_header(&mut Reader::new(&payload))?;
        if header.chunk == 0 && !self.parts.is_empty() {
            // A run the active never closed (it crashed in the middle and
            // went on after it): its records stay in the log, unapplied,
            // as recovery leaves them.
            self.append_raw()?;
        } else if header.chunk != 0 && header.chunk as usize != self.parts.len() {
            return Err(EngineError::Corrupt(format!("replicated record at {lsn:?} continues a run never started")));
        }
        if !header.last {
            self.parts.push((lsn, payload));
            return Ok(false);
        }
        let mut records = std::mem::take(&mut self.parts);
        records.push((lsn, payload));
        // Commit timestamps order versions within one run of a database:
        // recovery numbers them again from its checkpoint, so an active
        // that restarted logs timestamps this standby has passed. Applied
        // in log order (this applier is the standby's only committer), each
        // goes after the last one here.
        let after_last = self.db.commit.lock().last_ts.next();
        let txn = ReplicaTxn {
            records,
            commit_ts: CommitTs::new(header.commit_ts).max(after_last),
            commit_time_us: header.commit_time_us,
            origin: header.origin,
        };
        self.apply(&txn)?;
        self.applied += 1;
        Ok(true)
    }

    fn apply(&mut self, txn: &ReplicaTxn) -> Result<()> {
        // The transaction's own origin only matters for what it enforces:
        // `Refresh` enforces no foreign key and runs no ON DELETE action
        // (the active did, and logged their effects); the records keep the
        // active's origin byte for byte.
        let mut t = Transaction::begin(Arc::clone(&self.db), CommitMode::Async, Origin::Refresh)?;
        t.set_replica();
        for (_, payload) in &txn.records {
            let (_, ops) = decode_record(payload)?;
            for op in ops {
                t.apply_op(op)?;
            }
        }
        t.commit_replica(txn)
    }

    /// Appends the pending parts of an abandoned run without applying them.
    fn append_raw(&mut self) -> Result<()> {
        let parts = std::mem::take(&mut self.parts);
        let mut c = self.db.commit.lock();
        for (expected, payload) in &parts {
            let lsn = self.db.wal.append(payload)?;
            assert_eq!(lsn, *expected, "standby WAL diverged at {expected:?} (appended at {lsn:?})");
            c.last_lsn = Some(lsn);
        }
        Ok(())
    }

    /// Makes everything appended so far durable; returns the durable end
    /// (what the standby acknowledges).
    pub fn sync(&self) -> Result<Lsn> {
        if let Some(last) = self.db.commit.last_lsn() {
            self.db.wal.wait_durable(last)?;
        }
        Ok(self.db.wal.durable_end())
    }

    /// Transactions applied by this applier.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// The end of the standby's log: where the active resumes sending.
    pub fn wal_end(&self) -> Lsn {
        self.db.wal.end()
    }
}
