//! Loads never undo commits (DESIGN.md §3, "Deleted-then-reloaded").
//!
//! A load (LOAD, REFRESH, a dynamic miss, SWT's repair) writes instances read
//! from one PostgreSQL snapshot S. An instance the cache changed after S was
//! taken — or before, but whose change reached PostgreSQL only after S — would
//! be put back to S's older image: a deleted instance resurrected, an update
//! undone, while write-through still sends the newer state to PostgreSQL.
//! Marks at the moment rows arrive cannot tell (the change may have reached
//! PostgreSQL, unmarking the instance, between S and the write), so the
//! decision is made by positions:
//!
//! - Every write-through commit marks the instances it changes with its
//!   position (AWT: its WAL position, when the propagation reader reads it;
//!   SWT: a sequence number, before PostgreSQL commits it). A mark is
//!   *pending* until PostgreSQL has the commit, and the newest position per
//!   instance is kept after that ([`Marks`]).
//! - The load reads, inside S, how far PostgreSQL had the cache's commits
//!   ([`Horizon`]): AWT's progress rows (per group and apply lane), or for
//!   SWT the oldest commit in flight when S was taken.
//! - Each batch of the load pins one engine snapshot
//!   (`Transaction::pin_snapshot`) and makes the marks current for it (AWT
//!   waits until its reader has read every commit that snapshot sees). An
//!   instance is written only when nothing is pending on it and its newest
//!   mark is below the horizon: S holds every cache commit the batch sees.
//!   Commits after the pin make the batch's writes fail (40001, 55P03,
//!   23505); the batch is then redone an instance at a time, and an instance
//!   still changing is left alone.
//!
//! Removals (UNLOAD, aging, REFRESH's "gone from PostgreSQL") follow the same
//! rule: pending instances stay; REFRESH removes only what S vouches for.
//! Marks below every running load's floor and below what PostgreSQL has are
//! pruned, so memory follows the backlog, not the history.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use pgtier_engine::{Database, Transaction, Value};

use crate::error::CacheError;
use crate::group::GroupKind;
use crate::instance::key_text;
use crate::manager::{Cache, GroupEntry, WHOLE_GROUP};

/// One instance's marks.
#[derive(Default)]
struct KeyMarks {
    /// Positions of its commits PostgreSQL does not have yet.
    pending: BTreeSet<u64>,
    /// The newest position of a commit to it.
    newest: u64,
}

/// The write-through marks of one group's instances (by `key_text`;
/// [`WHOLE_GROUP`] for a change whose instance could not be told).
#[derive(Default)]
pub(crate) struct Marks {
    keys: Mutex<HashMap<String, KeyMarks>>,
    /// Running loads and the floor each registered (marks at or above it are kept).
    loads: Mutex<Vec<(u64, u64)>>,
    next_load: AtomicU64,
}

impl Marks {
    /// A commit at `position` changed the instance `key`. Marking the same
    /// commit again (read again after a reconnect) changes nothing.
    pub fn mark(&self, key: &str, position: u64) {
        let mut keys = self.keys.lock();
        let marks = keys.entry(key.to_owned()).or_default();
        marks.pending.insert(position);
        marks.newest = marks.newest.max(position);
    }

    /// PostgreSQL has (or refused for good, or never got) the commit at `position`.
    pub fn settle(&self, key: &str, position: u64) {
        if let Some(marks) = self.keys.lock().get_mut(key) {
            marks.pending.remove(&position);
        }
    }

    /// Changes PostgreSQL does not have yet are on the instance.
    pub fn is_pending(&self, key: &str) -> bool {
        let keys = self.keys.lock();
        let pending = |k: &str| keys.get(k).is_some_and(|m| !m.pending.is_empty());
        pending(WHOLE_GROUP) || pending(key)
    }

    /// Whether the instance `key` may be written from a snapshot whose horizon is `horizon`.
    fn admits(&self, key: &str, horizon: &Horizon) -> bool {
        let keys = self.keys.lock();
        let clear = |k: &str, below: u64| keys.get(k).is_none_or(|m| m.pending.is_empty() && m.newest < below);
        clear(WHOLE_GROUP, horizon.lowest()) && clear(key, horizon.at(key))
    }

    /// Whether the instance has marks at all (a dynamic miss reads the horizon only then).
    fn touched(&self, key: &str) -> bool {
        let keys = self.keys.lock();
        keys.contains_key(key) || keys.contains_key(WHOLE_GROUP)
    }

    /// Forgets settled marks older than `floor` and than every running load's floor.
    pub fn prune(&self, floor: u64) {
        let floor = self.loads.lock().iter().map(|&(_, f)| f).fold(floor, u64::min);
        self.keys.lock().retain(|_, m| !m.pending.is_empty() || m.newest >= floor);
    }

    /// Instances with marks (pending or kept).
    pub fn len(&self) -> usize {
        self.keys.lock().len()
    }

    fn register(&self, floor: u64) -> u64 {
        let id = self.next_load.fetch_add(1, Ordering::Relaxed);
        self.loads.lock().push((id, floor));
        id
    }

    fn unregister(&self, id: u64) {
        self.loads.lock().retain(|&(other, _)| other != id);
    }
}

/// How far PostgreSQL had the cache's write-through commits in a load's snapshot.
#[derive(Clone, Debug)]
pub(crate) enum Horizon {
    /// The group has no write-through (READONLY): nothing of the cache's own to protect.
    Everything,
    /// AWT: per apply lane (lane count = the vector's length), the position
    /// before which the group's commits in that lane are in the snapshot.
    Lanes { group: String, positions: Vec<u64> },
    /// SWT: every commit numbered below it was committed in PostgreSQL before the snapshot.
    Before(u64),
}

impl Horizon {
    fn at(&self, key: &str) -> u64 {
        match self {
            Horizon::Everything => u64::MAX,
            Horizon::Lanes { group, positions } => positions[crate::awt::lane_of(group, key, positions.len())],
            Horizon::Before(n) => *n,
        }
    }

    fn lowest(&self) -> u64 {
        match self {
            Horizon::Everything => u64::MAX,
            Horizon::Lanes { positions, .. } => positions.iter().copied().min().unwrap_or(0),
            Horizon::Before(n) => *n,
        }
    }
}

/// One load's view of a group's marks: registered (so the marks it needs
/// are not pruned) from before its PostgreSQL snapshot until it ends.
pub(crate) struct Fence<'a> {
    cache: &'a Cache,
    entry: &'a GroupEntry,
    registration: u64,
    horizon: Mutex<Option<Horizon>>,
}

impl<'a> Fence<'a> {
    /// Call before the load's PostgreSQL snapshot is taken. An AWT group
    /// needs write-through reading (its marks current): 55000 otherwise.
    pub fn open(cache: &'a Cache, entry: &'a GroupEntry) -> Result<Fence<'a>, CacheError> {
        let (floor, horizon) = match entry.def.kind {
            GroupKind::ReadOnly => (u64::MAX, Some(Horizon::Everything)),
            GroupKind::Awt => {
                cache.require_dirty_current(entry)?;
                (cache.awt_applied_floor(), None)
            }
            GroupKind::Swt => {
                let before = cache.swt_floor();
                (before, Some(Horizon::Before(before)))
            }
        };
        let registration = entry.marks.register(floor);
        Ok(Fence { cache, entry, registration, horizon: Mutex::new(horizon) })
    }

    /// Reads the horizon inside the load's snapshot (before it is used).
    pub fn read_horizon<C: postgres::GenericClient>(&self, snapshot: &mut C) -> Result<(), CacheError> {
        if self.horizon.lock().is_some() {
            return Ok(());
        }
        let horizon = self.cache.awt_horizon(snapshot, &self.entry.def.name)?;
        *self.horizon.lock() = Some(horizon);
        Ok(())
    }

    /// Whether the instance has marks, so [`Fence::read_horizon`] matters
    /// for it (after [`Fence::begin_batch`]).
    pub fn touched(&self, key: &[Value]) -> bool {
        self.entry.marks.touched(&key_text(key))
    }

    /// Begins a batch's engine transaction: pinned, with the marks current for its snapshot.
    pub fn begin_batch(&self, db: &Database, origin: pgtier_engine::Origin) -> Result<Transaction, CacheError> {
        let mut txn = db.begin_with_origin(db.default_commit_mode(), origin)?;
        txn.pin_snapshot()?;
        self.cache.require_dirty_current(self.entry)?;
        Ok(txn)
    }

    /// Whether instance `key` may be written from the load's snapshot (after [`Fence::read_horizon`]).
    pub fn admits(&self, key: &[Value]) -> bool {
        let horizon = self.horizon.lock();
        let Some(horizon) = horizon.as_ref() else {
            debug_assert!(false, "the horizon is read before instances are admitted");
            return false;
        };
        self.entry.marks.admits(&key_text(key), horizon)
    }
}

impl Drop for Fence<'_> {
    fn drop(&mut self) {
        self.entry.marks.unregister(self.registration);
    }
}

/// Errors a pinned batch meets when an application commits on its rows
/// after the pin: the batch is redone an instance at a time.
pub(crate) fn is_conflict(error: &CacheError) -> bool {
    matches!(error, CacheError::Engine(e) if matches!(e.sqlstate(), "40001" | "55P03" | "23505"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{Horizon, Marks};

    #[test]
    fn marks_decide_by_position() {
        let marks = Marks::default();
        let horizon = |p: u64| Horizon::Lanes { group: "g".into(), positions: vec![p] };
        assert!(marks.admits("1", &horizon(0)), "never touched");
        marks.mark("1", 10);
        marks.mark("1", 10);
        assert!(marks.is_pending("1"));
        assert!(!marks.admits("1", &horizon(100)), "pending: PostgreSQL does not have it");
        marks.settle("1", 10);
        assert!(!marks.is_pending("1"));
        assert!(!marks.admits("1", &horizon(10)), "the snapshot predates the commit");
        assert!(marks.admits("1", &horizon(11)));
        marks.mark("*", 20);
        assert!(marks.is_pending("2"), "a whole-group mark covers every instance");
        marks.settle("*", 20);
        assert!(!marks.admits("2", &horizon(20)));
        assert!(marks.admits("2", &horizon(21)));
        // A running load keeps what it needs from pruning.
        let load = marks.register(5);
        marks.prune(50);
        assert_eq!(marks.len(), 2);
        marks.unregister(load);
        marks.prune(15);
        assert_eq!(marks.len(), 1, "only the newer whole-group mark stays");
        marks.mark("3", 30);
        marks.prune(100);
        assert!(marks.is_pending("3"), "pending marks are never pruned");
    }
}
