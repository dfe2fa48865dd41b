//! Write-through marks of a group's instances and the horizon a load
//! compares them with (the rule is told in fence.rs): what
//! `GroupEntry::marks` holds and loads, removals and both write-through
//! modes read and write.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::hash::stable_hash;

/// The dirty mark of a change whose root key a table does not carry.
pub(crate) const WHOLE_GROUP: &str = "*";

/// The lane of instance `key` of `group` with `lanes` lanes: a hash stable
/// across processes and Rust versions, since progress rows must mean the
/// same after a restart (loads read them too: `fence`). AWT queues by it; a load's horizon
/// (`Horizon::Lanes`) picks a lane's position by it.
pub(crate) fn lane_of(group: &str, key: &str, lanes: usize) -> usize {
    (stable_hash(&format!("{group}\u{0}{key}")) % lanes.max(1) as u64) as usize
}

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
    /// How many of `keys` have pending commits (kept with them, so asking
    /// costs no lock: every miss of a group over its budget asks).
    pending_keys: AtomicUsize,
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
        if marks.pending.is_empty() {
            self.pending_keys.fetch_add(1, Ordering::Relaxed);
        }
        marks.pending.insert(position);
        marks.newest = marks.newest.max(position);
    }

    /// PostgreSQL has (or refused for good, or never got) the commit at `position`.
    pub fn settle(&self, key: &str, position: u64) {
        if let Some(marks) = self.keys.lock().get_mut(key)
            && marks.pending.remove(&position)
            && marks.pending.is_empty()
        {
            self.pending_keys.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Changes PostgreSQL does not have yet are on the instance.
    pub fn is_pending(&self, key: &str) -> bool {
        let keys = self.keys.lock();
        let pending = |k: &str| keys.get(k).is_some_and(|m| !m.pending.is_empty());
        pending(WHOLE_GROUP) || pending(key)
    }

    /// Whether the instance `key` may be written from a snapshot whose horizon is `horizon`.
    pub(crate) fn admits(&self, key: &str, horizon: &Horizon) -> bool {
        let keys = self.keys.lock();
        let clear = |k: &str, below: u64| keys.get(k).is_none_or(|m| m.pending.is_empty() && m.newest < below);
        clear(WHOLE_GROUP, horizon.lowest()) && clear(key, horizon.at(key))
    }

    /// Whether some instance (or the whole group) has changes PostgreSQL
    /// does not have yet.
    pub fn any_pending(&self) -> bool {
        self.pending_keys.load(Ordering::Relaxed) > 0
    }

    /// Whether the instance has marks at all (a dynamic miss reads the horizon only then).
    pub(crate) fn touched(&self, key: &str) -> bool {
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

    pub(crate) fn register(&self, floor: u64) -> u64 {
        let id = self.next_load.fetch_add(1, Ordering::Relaxed);
        self.loads.lock().push((id, floor));
        id
    }

    pub(crate) fn unregister(&self, id: u64) {
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
            Horizon::Lanes { group, positions } => positions[lane_of(group, key, positions.len())],
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{Horizon, Marks};

    #[test]
    fn marks_decide_by_position() {
        let marks = Marks::default();
        let horizon = |p: u64| Horizon::Lanes { group: "g".into(), positions: vec![p] };
        assert!(marks.admits("1", &horizon(0)), "never touched");
        assert!(!marks.any_pending());
        marks.mark("1", 10);
        marks.mark("1", 10);
        assert!(marks.is_pending("1"));
        assert!(marks.any_pending());
        assert!(!marks.admits("1", &horizon(100)), "pending: PostgreSQL does not have it");
        marks.settle("1", 10);
        assert!(!marks.is_pending("1"));
        assert!(!marks.any_pending());
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
        assert!(marks.any_pending());
        marks.mark("3", 32);
        marks.settle("3", 32);
        marks.settle("3", 32);
        assert!(marks.any_pending(), "one commit of it is still pending");
        marks.settle("3", 30);
        marks.settle("4", 40);
        assert!(!marks.any_pending(), "settling what was never marked counts nothing");
    }
}
