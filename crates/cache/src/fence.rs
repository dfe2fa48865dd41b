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
//!   instance is kept after that (`registry::Marks`, held by each group's entry).
//! - The load reads, inside S, how far PostgreSQL had the cache's commits
//!   (`registry::Horizon`): AWT's progress rows (per group and apply lane), or for
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

use parking_lot::Mutex;
use pgtier_engine::{Database, Transaction, Value};

use crate::awt::progress::read_group_progress;
use crate::error::CacheError;
use crate::group::GroupKind;
use crate::instance::key_text;
use crate::node::NodeIdentity;
use crate::registry::{GroupEntry, Horizon};

/// Where write-through stands, as a load's fence asks it (`Cache` answers
/// from AWT and SWT).
pub(crate) trait WriteThroughState: Send + Sync {
    /// Ok when `entry`'s dirty marks cover every transaction committed so
    /// far (AWT: write-through has read up to now); 55000 otherwise.
    fn require_dirty_current(&self, entry: &GroupEntry) -> Result<(), CacheError>;
    /// A position below every AWT commit PostgreSQL does not have yet.
    fn awt_applied_floor(&self) -> u64;
    /// Every SWT commit numbered below it is committed in PostgreSQL now.
    fn swt_floor(&self) -> u64;
    /// This pgtier in PostgreSQL (whose AWT progress rows a horizon reads).
    fn identity(&self) -> &NodeIdentity;
}

/// One load's view of a group's marks: registered (so the marks it needs
/// are not pruned) from before its PostgreSQL snapshot until it ends.
pub(crate) struct Fence<'a> {
    write_through: &'a dyn WriteThroughState,
    entry: &'a GroupEntry,
    registration: u64,
    horizon: Mutex<Option<Horizon>>,
}

impl<'a> Fence<'a> {
    /// Call before the load's PostgreSQL snapshot is taken. An AWT group
    /// needs write-through reading (its marks current): 55000 otherwise.
    pub fn open(write_through: &'a dyn WriteThroughState, entry: &'a GroupEntry) -> Result<Fence<'a>, CacheError> {
        let (floor, horizon) = match entry.def.kind {
            GroupKind::ReadOnly => (u64::MAX, Some(Horizon::Everything)),
            GroupKind::Awt => {
                write_through.require_dirty_current(entry)?;
                (write_through.awt_applied_floor(), None)
            }
            GroupKind::Swt => {
                let before = write_through.swt_floor();
                (before, Some(Horizon::Before(before)))
            }
        };
        let registration = entry.marks.register(floor);
        Ok(Fence { write_through, entry, registration, horizon: Mutex::new(horizon) })
    }

    /// Reads the horizon inside the load's snapshot (before it is used).
    pub fn read_horizon<C: postgres::GenericClient>(&self, snapshot: &mut C) -> Result<(), CacheError> {
        if self.horizon.lock().is_some() {
            return Ok(());
        }
        // How far PostgreSQL had the group's AWT commits in the snapshot: its progress rows there.
        let group = self.entry.def.name.clone();
        let positions = read_group_progress(snapshot, self.write_through.identity(), &group)?;
        *self.horizon.lock() = Some(Horizon::Lanes { group, positions });
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
        self.write_through.require_dirty_current(self.entry)?;
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
