//! The end of a transaction. Commit: WAL records built and the clock read
//! outside the commit lock; under it the commit ts, the commit time clamped
//! to be non-decreasing, the append, stamping and DDL publication; after it
//! locks released, GC work queued, the ts published (in `Sync`
//! mode once durable). Rollback: versions unlinked newest first, metadata
//! restored, locks released.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use pgtier_wal::Lsn;

use super::{DdlOp, Status, Step, Transaction};
use crate::commit_mode::CommitMode;
use crate::error::{EngineError, Result};
use crate::gc::{GcItem, GcRow};
use crate::ids::CommitTs;
use crate::origin::Origin;
use crate::seams::CommitParticipant;
use crate::stream::RowChange;
use crate::table::TableStore;
use crate::version::{is_deleted, is_lock_only, is_uncommitted};
use crate::walrec::{RecordBuilder, RowOp};

/// Queued GC items beyond which committers prune too.
const GC_HELP_QUEUE_LEN: usize = 4096;

/// What the commit lock's critical section assigned.
struct Committed {
    commit_ts: CommitTs,
    /// The transaction's last WAL record (None: it logged nothing).
    lsn: Option<Lsn>,
    /// The last record appended before it.
    prior_lsn: Option<Lsn>,
}

/// What a commit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    /// Commit timestamp (order of commits); None for read-only transactions.
    pub commit_ts: Option<CommitTs>,
    /// LSN of the transaction's (closing) WAL record, if it wrote one.
    pub lsn: Option<Lsn>,
    /// The transaction had failed earlier; COMMIT rolled it back (as
    /// PostgreSQL answers COMMIT in an aborted transaction with ROLLBACK).
    pub rolled_back: bool,
}

impl Transaction {
    /// Commits. In `Sync` mode returns once the WAL record is durable; in
    /// `Async` once it is in the WAL buffer. A failed transaction is rolled
    /// back instead (`rolled_back` in the result).
    pub fn commit(mut self) -> Result<CommitInfo> {
        self.commit_in_place()
    }

    /// [`Transaction::commit`] that leaves this value ended, for
    /// [`Transaction::restart`]: a session keeps one `Transaction` and
    /// restarts it rather than moving a fresh one (about 500 bytes) in and
    /// out per statement and passing its buffers through a thread-local.
    pub fn commit_in_place(&mut self) -> Result<CommitInfo> {
        match self.status {
            Status::Active => {}
            Status::Aborted => {
                self.rollback_internal();
                self.status = Status::Ended;
                return Ok(CommitInfo { commit_ts: None, lsn: None, rolled_back: true });
            }
            Status::Failed => {
                self.status = Status::Ended;
                return Ok(CommitInfo { commit_ts: None, lsn: None, rolled_back: true });
            }
            Status::Ended => return Err(EngineError::TransactionAborted),
        }
        if self.is_read_only() {
            self.release_locks();
            self.db.txns.end(self.id);
            self.status = Status::Ended;
            if self.mode == CommitMode::Sync
                && let Some(lsn) = self.observed_lsn.take()
            {
                self.wait_durable(lsn)?;
            }
            return Ok(CommitInfo { commit_ts: None, lsn: None, rolled_back: false });
        }
        // Deferred foreign keys first: a violation fails the commit before
        // anything leaves the transaction (a participant's write-through).
        if let Err(e) = self.run_deferred(|_| true) {
            self.rollback_internal();
            self.status = Status::Ended;
            return Err(e);
        }
        let tickets = if self.origin == Origin::Application && self.held.iter().any(|h| h.store.hooks.has_participant())
        {
            match self.commit_participants() {
                Ok(tickets) => tickets,
                Err(e) => {
                    self.rollback_internal();
                    self.status = Status::Ended;
                    return Err(e);
                }
            }
        } else {
            Vec::new()
        };
        // Scratch buffers move between transactions of any database on this
        // thread: reuse the builder only under the same record limit.
        let record_bytes_max = self.db.config.wal.record_bytes_max;
        let mut builder = match self.s.records.take() {
            Some(mut b) if b.record_bytes_max() == record_bytes_max => {
                b.reset();
                b
            }
            _ => RecordBuilder::new(record_bytes_max),
        };
        let mut deltas = std::mem::take(&mut self.s.deltas);
        deltas.clear();
        deltas.resize(self.held.len(), 0);
        if let Err(e) = self.build_records(&mut builder, &mut deltas) {
            self.rollback_internal();
            self.status = Status::Ended;
            finish_participants(tickets, false);
            return Err(e);
        }
        let Committed { commit_ts, lsn, prior_lsn } = match self.commit_critical(&mut builder) {
            Ok(v) => v,
            Err(e) => {
                self.rollback_internal();
                self.status = Status::Ended;
                finish_participants(tickets, false);
                return Err(e);
            }
        };
        finish_participants(tickets, true);
        for (held, delta) in self.held.iter().zip(&deltas) {
            held.store.live_rows.fetch_add(*delta, Ordering::Relaxed);
        }
        (self.s.records, self.s.deltas) = (Some(builder), deltas);
        let gc = self.gc_item(commit_ts);
        self.release_locks();
        // Dropped tables' storage is freed now, not when this value is
        // restarted or dropped.
        self.dropped.clear();
        self.db.txns.end(self.id);
        self.status = Status::Ended;
        if let Some(item) = gc {
            // The background thread prunes every few ms; committers help
            // only when it falls behind, keeping the commit path short.
            if self.db.gc.push(item) > GC_HELP_QUEUE_LEN {
                self.db.gc.step(&self.db.txns, &self.db.catalog, 2);
            }
        }
        self.db.counters.commits.fetch_add(1, Ordering::Relaxed);
        // Sync: visible once durable. Async: at once. Commit ts and LSN are
        // assigned in the same order under the commit lock, so publishing a
        // ts also covers every earlier (now durable) commit. A transaction
        // that logged nothing (only locks, or insert+delete) waits for the
        // log it may have observed, so publishing its ts exposes nothing early.
        let wait_lsn = lsn.or(prior_lsn);
        if self.mode == CommitMode::Sync {
            if let Some(wait) = wait_lsn {
                self.wait_durable(wait)?;
            }
            if lsn.is_some() {
                self.db.counters.commits_sync.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.db.txns.publish(commit_ts);
        // Replication (replica.rs): acknowledged once the gate passes it
        // (sync: the standby has it too; with a lease: still held).
        // Visible here already, as in PostgreSQL.
        if let Some(lsn) = lsn
            && let Some(gate) = self.db.commit_gate.get()
        {
            gate.before_ack(lsn, self.mode == CommitMode::Sync)?;
        }
        Ok(CommitInfo { commit_ts: Some(commit_ts), lsn, rolled_back: false })
    }

    /// Hands each commit participant its tables' final row changes (see
    /// [`CommitParticipant::commit_first`]). On an error the participants
    /// that had already committed are told the engine did not.
    fn commit_participants(&mut self) -> Result<Vec<(Arc<dyn CommitParticipant>, u64)>> {
        let mut calls: Vec<(Arc<dyn CommitParticipant>, Vec<RowChange>)> = Vec::new();
        for step in &self.order {
            let Step::Row(i) = step else { continue };
            let w = &self.writes[*i];
            let store = &self.held[w.held as usize].store;
            if !store.hooks.has_participant() {
                continue;
            }
            let (Some(participant), Some(op)) = (store.hooks.participant(), final_op(w.head.word(), w.had_base()))
            else {
                continue;
            };
            let change = RowChange { op, table: Arc::clone(&store.schema), image: w.head.row(store.layout()).to_vec() };
            match calls.iter_mut().find(|(p, _)| Arc::ptr_eq(p, &participant)) {
                Some((_, changes)) => changes.push(change),
                None => calls.push((participant, vec![change])),
            }
        }
        let mut tickets = Vec::with_capacity(calls.len());
        for (participant, changes) in calls {
            match participant.commit_first(self, &changes) {
                Ok(ticket) => tickets.push((participant, ticket)),
                Err(e) => {
                    finish_participants(tickets, false);
                    return Err(e);
                }
            }
        }
        Ok(tickets)
    }

    fn build_records(&self, builder: &mut RecordBuilder, deltas: &mut [i64]) -> Result<()> {
        for step in &self.order {
            match step {
                Step::Row(i) => {
                    let w = &self.writes[*i];
                    let store = &self.held[w.held as usize].store;
                    let word = w.head.word();
                    let op = final_op(word, w.had_base());
                    let Some(op) = op else { continue };
                    deltas[w.held as usize] += match op {
                        RowOp::Insert => 1,
                        RowOp::Delete => -1,
                        RowOp::Update => 0,
                    };
                    builder.row(op, store.schema.id, w.head.row(store.layout()))?;
                }
                Step::Ddl(j) => match &self.ddl[*j] {
                    DdlOp::CreateTable(t) => builder.create_table(t)?,
                    DdlOp::DropTable(t) => builder.drop_table(*t)?,
                    DdlOp::CreateIndex(i) => builder.create_index(i)?,
                    DdlOp::DropIndex(i) => builder.drop_index(*i)?,
                    DdlOp::SetAnnotation(t, a) => builder.set_annotation(*t, a.as_deref())?,
                },
            }
        }
        builder.finish(self.origin);
        Ok(())
    }

    /// Under the commit lock: assign the commit ts, append the WAL records,
    /// stamp our versions, publish DDL. Short and allocation-free apart from
    /// the WAL's own buffer copy.
    fn commit_critical(&mut self, builder: &mut RecordBuilder) -> Result<Committed> {
        let has_records = !builder.is_empty();
        // Read outside the lock (it only has to be clamped under it): the
        // critical section stays as short as without commit times.
        let now_us = if has_records { wall_clock_us() } else { 0 };
        let mut c = self.db.commit.lock();
        let commit_ts = c.last_ts.next();
        let prior_lsn = c.last_lsn;
        let mut lsn = None;
        if has_records {
            builder.seal(commit_ts, c.clamp_time(now_us));
            for chunk in &builder.chunks {
                lsn = Some(self.db.wal.append(chunk)?);
            }
        }
        for w in &self.writes {
            TableStore::stamp(w.head, commit_ts);
        }
        // Own versions a write after a savepoint stacked a newer one over
        // (empty without savepoints): stamped too, never visible to anyone
        // (the newer one has the same ts), pruned by GC.
        for u in &self.sp_undo {
            TableStore::stamp(u.head, commit_ts);
        }
        if !self.ddl.is_empty() {
            for store in &self.dropped {
                store.dropped.store(true, Ordering::Release);
            }
            self.db.catalog.publish(Arc::clone(&self.cat));
        }
        assert!(commit_ts > c.last_ts);
        c.last_ts = commit_ts;
        if let Some(lsn) = lsn {
            c.last_lsn = Some(lsn);
            // Under the commit lock, before any later commit can publish a
            // ts covering this one: whoever sees this commit in a snapshot
            // finds it below `application_commit_end` (the cache waits for
            // its write-through reader to reach that point).
            if self.origin == Origin::Application {
                self.db.application_commit_end.fetch_max(lsn.0 + 1, Ordering::Release);
            }
        }
        Ok(Committed { commit_ts, lsn, prior_lsn })
    }

    pub(super) fn gc_item(&mut self, commit_ts: CommitTs) -> Option<GcItem> {
        if self.writes.is_empty() {
            return None;
        }
        // Only rows with an older version (or a tombstone) leave garbage;
        // fresh inserts do not (bulk loads queue nothing).
        let rows: Vec<_> = self
            .writes
            .iter()
            .filter(|w| {
                w.had_base() || w.head.prev().is_some() || is_deleted(w.head.word()) || is_lock_only(w.head.word())
            })
            .map(|w| GcRow {
                table: self.held[w.held as usize].store.schema.id,
                hash: w.hash,
                key_off: w.key_off,
                key_len: w.key_len,
            })
            .collect();
        if rows.is_empty() {
            return None;
        }
        let keys = std::mem::take(&mut self.keys);
        Some(GcItem { commit_ts, rows, keys })
    }

    /// Rolls back: discards every change and releases every lock.
    pub fn rollback(mut self) {
        self.rollback_in_place();
    }

    /// [`Transaction::rollback`] that leaves this value ended, for
    /// [`Transaction::restart`].
    pub fn rollback_in_place(&mut self) {
        if matches!(self.status, Status::Active | Status::Aborted) {
            self.rollback_internal();
        }
        self.status = Status::Ended;
    }

    /// True until commit or rollback (a failed transaction is still open:
    /// it awaits its rollback).
    pub fn is_open(&self) -> bool {
        self.status != Status::Ended
    }

    pub(super) fn rollback_internal(&mut self) {
        self.deferred.clear();
        let mut images = Vec::new();
        for i in (0..self.writes.len()).rev() {
            self.undo_row(i, None, &mut images);
        }
        self.clear_savepoints();
        self.writes.clear();
        self.write_index = None;
        self.keys.clear();
        self.order.clear();
        while let Some(undo) = self.meta_undo.pop() {
            *undo.store.meta.write() = undo.old;
        }
        self.ddl.clear();
        self.dropped.clear();
        if self.private_catalog {
            // Back to the committed catalog (read under our DDL lock, so
            // no DDL commits in between): the private copy holds the
            // rolled-back DDL, and the next transaction on this thread
            // reuses whatever catalog this one ends with.
            self.cat_version = self.db.catalog.version();
            self.cat = self.db.catalog.current();
        }
        self.release_locks();
        self.db.txns.end(self.id);
        self.db.counters.rollbacks.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn release_locks(&mut self) {
        self.miss_holds.clear();
        self.miss_rows.clear();
        for held in self.held.drain(..) {
            if held.shared {
                held.store.lock.unlock_shared();
            }
        }
        for store in self.exclusive.drain(..) {
            store.lock.unlock_exclusive();
        }
        self.meta_undo.clear();
        if self.ddl_locked {
            self.ddl_locked = false;
            self.private_catalog = false;
            self.db.catalog.unlock_ddl(self.id);
        }
    }
}

fn finish_participants(tickets: Vec<(Arc<dyn CommitParticipant>, u64)>, committed: bool) {
    for (participant, ticket) in tickets {
        participant.finished(ticket, committed);
    }
}

/// Microseconds since the Unix epoch: `clock_gettime(CLOCK_REALTIME)`,
/// served by the vDSO without a system call. 0 for a clock before 1970.
/// The clock of `CommittedTxn::commit_time_us`: consumers measure their lag
/// against it.
#[inline]
pub fn wall_clock_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The op a write-set entry contributes at commit.
pub(super) fn final_op(word: u64, had_base: bool) -> Option<RowOp> {
    debug_assert!(is_uncommitted(word));
    if is_lock_only(word) {
        return None;
    }
    match (is_deleted(word), had_base) {
        (true, true) => Some(RowOp::Delete),
        (true, false) => None,
        (false, true) => Some(RowOp::Update),
        (false, false) => Some(RowOp::Insert),
    }
}
