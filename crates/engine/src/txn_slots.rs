//! Transaction slots, snapshots, lock waits and deadlock detection.
//!
//! A transaction owns one of `max_transactions` slots (bounded: begin fails
//! with 53300 when all are taken). Its id is `(sequence << SLOT_BITS) | slot`,
//! so the owner id stored in an uncommitted version leads straight to the
//! slot to wait on. Row locks live in the versions themselves (version.rs);
//! this module only knows who waits for whom.
//!
//! Snapshots: a slot publishes the commit ts its current statement reads
//! at. The GC horizon is the minimum over published snapshots and
//! `visible_ts`. Publication is race-free without a lock: a slot first
//! publishes the last computed horizon (which never exceeds any value a
//! concurrent horizon computation can produce), then reads `visible_ts` and
//! publishes that. Either the computation sees the slot, or it read
//! `visible_ts` before the slot did (so its horizon is <= the snapshot).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{EngineError, Result};
use crate::ids::{CommitTs, Snapshot, TxnId};

pub(crate) const SLOT_BITS: u32 = 12;
pub(crate) const SLOTS_MAX: usize = 1 << SLOT_BITS;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const NO_SNAPSHOT: u64 = u64::MAX;
/// How often a waiter re-walks the wait-for graph: bounds how long a
/// deadlock whose last edge raced with the first check goes unnoticed.
const DEADLOCK_RECHECK: Duration = Duration::from_millis(10);

#[repr(align(64))]
pub(crate) struct TxnSlot {
    id: AtomicU64,
    snapshot: AtomicU64,
    waiting_for: AtomicU64,
    /// Transactions blocked in `wait_for` on this slot's transaction: `end`
    /// takes the mutex and wakes them only when there are any.
    waiters: AtomicU32,
    /// Bumped when the transaction unlocks rows without ending (ROLLBACK
    /// TO a savepoint): its waiters look at their row again.
    released: AtomicU64,
    mutex: Mutex<()>,
    ended: Condvar,
}

/// Sequence numbers a thread takes from `next_seq` at a time, so that
/// concurrent begins do not all pull one shared cache line. Ids then follow
/// begin order only roughly, which only the choice of deadlock victim sees.
const SEQ_BATCH: u64 = 64;

/// Tells apart `TxnManager`s (databases) in one process for [`SEQS`].
static MANAGER_INSTANCES: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Slot this thread's last transaction used (any database).
    static SLOT_HINT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// This thread's unused sequence numbers: (manager instance, next, end).
    static SEQS: std::cell::Cell<(u64, u64, u64)> = const { std::cell::Cell::new((0, 0, 0)) };
}

pub(crate) struct TxnManager {
    slots: Box<[TxnSlot]>,
    /// One past the highest slot ever handed out: horizon scans stop here
    /// (threads reuse their slot, so this tracks peak concurrency).
    slots_used: std::sync::atomic::AtomicUsize,
    next_seq: AtomicU64,
    instance: u64,
    /// Commit ts up to which committed transactions are visible to new
    /// snapshots (sync mode: only once durable).
    visible_ts: AtomicU64,
    horizon_ts: AtomicU64,
}

impl TxnManager {
    pub(crate) fn new(max_transactions: usize, visible_ts: CommitTs) -> TxnManager {
        let visible_ts = visible_ts.get();
        assert!(max_transactions > 0 && max_transactions <= SLOTS_MAX, "max_transactions must be in 1..={SLOTS_MAX}");
        let slots = (0..max_transactions)
            .map(|_| TxnSlot {
                id: AtomicU64::new(0),
                snapshot: AtomicU64::new(NO_SNAPSHOT),
                waiting_for: AtomicU64::new(0),
                waiters: AtomicU32::new(0),
                released: AtomicU64::new(0),
                mutex: Mutex::new(()),
                ended: Condvar::new(),
            })
            .collect();
        TxnManager {
            slots,
            slots_used: std::sync::atomic::AtomicUsize::new(0),
            next_seq: AtomicU64::new(1),
            instance: MANAGER_INSTANCES.fetch_add(1, Ordering::Relaxed),
            visible_ts: AtomicU64::new(visible_ts),
            horizon_ts: AtomicU64::new(visible_ts),
        }
    }

    /// Takes a slot and publishes a snapshot; returns (id, snapshot ts).
    /// A slot is claimed by a CAS on its id, starting at the slot this
    /// thread used last: no shared free list, so begin/end touch no cache
    /// line another core's transactions use.
    pub(crate) fn begin(&self) -> Result<(TxnId, Snapshot)> {
        let seq = self.next_sequence();
        let n = self.slots.len();
        let start = SLOT_HINT.with(std::cell::Cell::get) % n;
        let mut claimed = None;
        for i in 0..n {
            let slot = (start + i) % n;
            let id = (seq << SLOT_BITS) | slot as u64;
            let s = &self.slots[slot];
            if s.id.load(Ordering::Relaxed) == 0
                && s.id.compare_exchange(0, id, Ordering::SeqCst, Ordering::Relaxed).is_ok()
            {
                claimed = Some((slot, id));
                break;
            }
        }
        let Some((slot, id)) = claimed else { return Err(EngineError::TooManyTransactions { limit: n }) };
        SLOT_HINT.with(|h| h.set(slot));
        assert!(id & !crate::version::TS_MASK == 0, "transaction id space exhausted");
        // Read first: an RMW would take the line from every other core on
        // each begin, though the value changes only at new peak concurrency.
        if self.slots_used.load(Ordering::SeqCst) <= slot {
            self.slots_used.fetch_max(slot + 1, Ordering::SeqCst);
        }
        let id = TxnId::new(id);
        let snapshot = self.refresh_snapshot(id);
        Ok((id, snapshot))
    }

    /// A sequence number no other transaction of this manager gets.
    fn next_sequence(&self) -> u64 {
        SEQS.with(|c| {
            let (instance, next, end) = c.get();
            if instance == self.instance && next < end {
                c.set((instance, next + 1, end));
                return next;
            }
            let start = self.next_seq.fetch_add(SEQ_BATCH, Ordering::Relaxed);
            c.set((self.instance, start + 1, start + SEQ_BATCH));
            start
        })
    }

    /// New statement snapshot for the transaction `id` (see module docs).
    pub(crate) fn refresh_snapshot(&self, id: TxnId) -> Snapshot {
        let s = self.slot(id);
        if s.snapshot.load(Ordering::Relaxed) == NO_SNAPSHOT {
            s.snapshot.store(self.horizon_ts.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        let snapshot = self.visible_ts.load(Ordering::SeqCst);
        s.snapshot.store(snapshot, Ordering::SeqCst);
        Snapshot::new(snapshot)
    }

    /// Makes commits up to `ts` visible to new snapshots (never moves back).
    #[inline]
    pub(crate) fn publish(&self, ts: CommitTs) {
        self.visible_ts.fetch_max(ts.get(), Ordering::SeqCst);
    }

    /// The newest commit ts new snapshots see.
    pub(crate) fn visible(&self) -> CommitTs {
        CommitTs::new(self.visible_ts.load(Ordering::Relaxed))
    }

    /// Ends `id`: wakes its waiters and frees the slot. Call only after its
    /// versions are stamped (commit) or unlinked (rollback).
    pub(crate) fn end(&self, id: TxnId) {
        let s = self.slot(id);
        assert_eq!(s.id.load(Ordering::Relaxed), id.get(), "ending a transaction that does not own its slot");
        s.snapshot.store(NO_SNAPSHOT, Ordering::SeqCst);
        s.waiting_for.store(0, Ordering::Relaxed);
        s.id.store(0, Ordering::SeqCst);
        // A waiter registers (SeqCst) before it locks and re-reads `id`: if
        // this load misses its registration, its read of `id` follows the
        // store above and sees the slot ended, so it never sleeps on it.
        if s.waiters.load(Ordering::SeqCst) > 0 {
            // Under the mutex, so the wake cannot fall between a waiter's
            // check of `id` and its sleep.
            let _guard = s.mutex.lock();
            s.ended.notify_all();
        }
    }

    /// `id` (still running) unlocked some rows: wakes its waiters, which
    /// return from `wait_for` to look at their row again (a waiter whose
    /// row is still locked waits anew). One that read its row just before
    /// and registers just after keeps waiting for `id` to end: locking
    /// only, as before savepoints.
    pub(crate) fn released_rows(&self, id: TxnId) {
        let s = self.slot(id);
        s.released.fetch_add(1, Ordering::SeqCst);
        if s.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = s.mutex.lock();
            s.ended.notify_all();
        }
    }

    fn slot(&self, id: TxnId) -> &TxnSlot {
        &self.slots[(id.get() & SLOT_MASK) as usize]
    }

    #[cfg(test)]
    pub(crate) fn is_active(&self, id: TxnId) -> bool {
        let idx = (id.get() & SLOT_MASK) as usize;
        idx < self.slots.len() && self.slots[idx].id.load(Ordering::Acquire) == id.get()
    }

    /// Oldest snapshot any transaction may still read at.
    pub(crate) fn horizon(&self) -> Snapshot {
        let mut h = self.visible_ts.load(Ordering::SeqCst);
        let used = self.slots_used.load(Ordering::SeqCst);
        for s in &self.slots[..used] {
            h = h.min(s.snapshot.load(Ordering::SeqCst));
        }
        self.horizon_ts.fetch_max(h, Ordering::SeqCst);
        Snapshot::new(h)
    }

    pub(crate) fn active_count(&self) -> usize {
        self.slots.iter().filter(|s| s.id.load(Ordering::Relaxed) != 0).count()
    }

    /// Blocks `me` until transaction `target` ends. Fails with 40P01 when
    /// `me` is the youngest member of a wait-for cycle, 55P03 at `deadline`.
    pub(crate) fn wait_for(&self, me: TxnId, target: TxnId, limits: &WaitLimits<'_>) -> Result<()> {
        assert_ne!(me, target, "a transaction never waits for itself");
        crate::wait_hook::before_wait();
        let mine = self.slot(me);
        mine.waiting_for.store(target.get(), Ordering::SeqCst);
        let result = self.wait_loop(me, target, limits);
        mine.waiting_for.store(0, Ordering::SeqCst);
        result
    }

    fn wait_loop(&self, me: TxnId, target: TxnId, limits: &WaitLimits<'_>) -> Result<()> {
        let slot = self.slot(target);
        slot.waiters.fetch_add(1, Ordering::SeqCst);
        let result = self.wait_registered(slot, me, target, limits);
        slot.waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }

    fn wait_registered(&self, slot: &TxnSlot, me: TxnId, target: TxnId, limits: &WaitLimits<'_>) -> Result<()> {
        let deadline = limits.statement_deadline.map_or(limits.lock_deadline, |s| s.min(limits.lock_deadline));
        let released = slot.released.load(Ordering::SeqCst);
        loop {
            if limits.cancel.is_some_and(|flag| flag.swap(false, Ordering::Relaxed)) {
                return Err(EngineError::Canceled);
            }
            if let Some(cycle) = self.find_cycle(me, target)
                && cycle.iter().max() == Some(&me)
            {
                return Err(EngineError::Deadlock { detail: describe_cycle(&cycle) });
            }
            let mut guard = slot.mutex.lock();
            if slot.id.load(Ordering::SeqCst) != target.get() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                if limits.statement_deadline.is_some_and(|d| d <= limits.lock_deadline) {
                    return Err(EngineError::StatementTimeout);
                }
                return Err(EngineError::LockTimeout { detail: format!("while waiting for transaction {target}") });
            }
            let nap = DEADLOCK_RECHECK.min(deadline - now);
            if slot.released.load(Ordering::SeqCst) != released {
                return Ok(());
            }
            slot.ended.wait_for(&mut guard, nap);
            if slot.id.load(Ordering::SeqCst) != target.get() || slot.released.load(Ordering::SeqCst) != released {
                return Ok(());
            }
        }
    }

    /// The wait-for path from `me` back to `me`, if there is one.
    fn find_cycle(&self, me: TxnId, target: TxnId) -> Option<Vec<TxnId>> {
        let (me, target) = (me.get(), target.get());
        let mut path = vec![TxnId::new(me)];
        let mut cur = target;
        for _ in 0..self.slots.len() {
            if cur == me {
                return Some(path);
            }
            let idx = (cur & SLOT_MASK) as usize;
            let slot = self.slots.get(idx)?;
            if slot.id.load(Ordering::SeqCst) != cur {
                return None;
            }
            let next = slot.waiting_for.load(Ordering::SeqCst);
            // The edge is `cur`'s only if `cur` still owns the slot after the
            // read. Otherwise it may be the slot's next transaction's (the
            // same session thread, begun the moment `cur` ended), which can
            // well be waiting for `me`: a cycle that never existed. Ids are
            // never reused, and a slot's next owner claims `id` before it
            // stores `waiting_for`, so this second read sees the change.
            if next == 0 || slot.id.load(Ordering::SeqCst) != cur {
                return None;
            }
            path.push(TxnId::new(cur));
            cur = next;
        }
        None
    }
}

/// What ends a lock wait besides the lock's release: the database's lock
/// timeout (55P03), the waiting statement's own deadline (57014, its
/// statement_timeout) and its cancel flag (57014, a cancel request), seen
/// within [`DEADLOCK_RECHECK`].
pub(crate) struct WaitLimits<'a> {
    pub lock_deadline: Instant,
    pub statement_deadline: Option<Instant>,
    pub cancel: Option<&'a AtomicBool>,
}

impl WaitLimits<'_> {
    #[cfg(test)]
    fn lock_only(lock_deadline: Instant) -> WaitLimits<'static> {
        WaitLimits { lock_deadline, statement_deadline: None, cancel: None }
    }
}

fn describe_cycle(cycle: &[TxnId]) -> String {
    let mut parts = Vec::with_capacity(cycle.len());
    for (i, t) in cycle.iter().enumerate() {
        let next = cycle[(i + 1) % cycle.len()];
        parts.push(format!("Transaction {t} waits for transaction {next}."));
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn slots_are_bounded_and_reused() {
        let m = TxnManager::new(2, CommitTs::new(5));
        let (a, sa) = m.begin().unwrap();
        let (b, _) = m.begin().unwrap();
        assert_eq!(sa, Snapshot::new(5));
        assert!(matches!(m.begin(), Err(EngineError::TooManyTransactions { .. })));
        m.end(a);
        let (c, _) = m.begin().unwrap();
        assert_ne!(a, c);
        assert!(m.is_active(c) && m.is_active(b) && !m.is_active(a));
    }

    #[test]
    fn horizon_follows_oldest_snapshot() {
        let m = TxnManager::new(4, CommitTs::new(10));
        let (a, _) = m.begin().unwrap();
        m.publish(CommitTs::new(20));
        let (b, sb) = m.begin().unwrap();
        assert_eq!(sb, Snapshot::new(20));
        assert_eq!(m.horizon(), Snapshot::new(10));
        m.end(a);
        assert_eq!(m.horizon(), Snapshot::new(20));
        m.end(b);
    }

    #[test]
    fn deadlock_detected_for_youngest() {
        let m = Arc::new(TxnManager::new(4, CommitTs::new(1)));
        let (a, _) = m.begin().unwrap();
        let (b, _) = m.begin().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let m2 = m.clone();
        let waiter = std::thread::spawn(move || m2.wait_for(a, b, &WaitLimits::lock_only(deadline)));
        std::thread::sleep(Duration::from_millis(30));
        let r = m.wait_for(b, a, &WaitLimits::lock_only(deadline));
        assert!(matches!(r, Err(EngineError::Deadlock { .. })), "{r:?}");
        m.end(b);
        assert!(waiter.join().unwrap().is_ok());
        m.end(a);
    }

    #[test]
    fn wait_times_out() {
        let m = TxnManager::new(4, CommitTs::new(1));
        let (a, _) = m.begin().unwrap();
        let (b, _) = m.begin().unwrap();
        let r = m.wait_for(a, b, &WaitLimits::lock_only(Instant::now() + Duration::from_millis(30)));
        assert!(matches!(r, Err(EngineError::LockTimeout { .. })));
    }

    #[test]
    fn the_statement_deadline_or_its_cancel_flag_ends_a_wait_first() {
        let m = TxnManager::new(4, CommitTs::new(1));
        let (a, _) = m.begin().unwrap();
        let (b, _) = m.begin().unwrap();
        let lock_deadline = Instant::now() + Duration::from_secs(60);
        let started = Instant::now();
        let limits = WaitLimits {
            lock_deadline,
            statement_deadline: Some(Instant::now() + Duration::from_millis(30)),
            cancel: None,
        };
        assert!(matches!(m.wait_for(a, b, &limits), Err(EngineError::StatementTimeout)));
        assert!(started.elapsed() < Duration::from_secs(10));
        // The lock timeout, when it comes first, stays 55P03.
        let limits = WaitLimits {
            lock_deadline: Instant::now() + Duration::from_millis(30),
            statement_deadline: Some(lock_deadline),
            cancel: None,
        };
        assert!(matches!(m.wait_for(a, b, &limits), Err(EngineError::LockTimeout { .. })));
        let flag = AtomicBool::new(true);
        let limits = WaitLimits { lock_deadline, statement_deadline: None, cancel: Some(&flag) };
        assert!(matches!(m.wait_for(a, b, &limits), Err(EngineError::Canceled)));
        assert!(!flag.load(Ordering::Relaxed), "the wait lowered the flag it obeyed");
        assert_eq!(EngineError::StatementTimeout.sqlstate(), "57014");
        assert_eq!(EngineError::Canceled.to_string(), "canceling statement due to user request");
    }
}
