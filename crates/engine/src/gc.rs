//! Version GC: commits queue the keys of rows that left older versions
//! (bounded; overflow asks for a full sweep), and the background thread
//! (or a committer, when it lags) prunes each such row once the snapshot
//! horizon has passed the commit. What a prune keeps and frees is
//! `TableStore::prune`'s business; this module decides when and which rows.
//!
//! The prune gate: each row prune holds it shared from freeing versions to
//! removing their index entries; `verify` holds it exclusively, so it never
//! sees the moment between (entries whose versions are already gone).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock, RwLockWriteGuard};

use crate::catalog::CommittedCatalog;
use crate::ids::{CommitTs, Snapshot};
use crate::key::hash_key;
use crate::primary::SHARD_COUNT;
use crate::schema::TableId;
use crate::table::TableStore;
use crate::txn_slots::TxnManager;
use crate::version::is_deleted;

/// Work for GC: rows a committed transaction wrote.
pub(crate) struct GcItem {
    pub(crate) commit_ts: CommitTs,
    pub(crate) rows: Vec<GcRow>,
    /// The rows' encoded primary keys, back to back.
    pub(crate) keys: Vec<u8>,
}

/// A row of a [`GcItem`]: its table, key hash and key (a range of `keys`).
pub(crate) struct GcRow {
    pub(crate) table: TableId,
    pub(crate) hash: u64,
    pub(crate) key_off: u32,
    pub(crate) key_len: u32,
}

pub(crate) struct Gc {
    queue: Mutex<VecDeque<GcItem>>,
    /// Bound on `queue`; beyond it the oldest item is dropped and this set.
    queue_max: usize,
    overflowed: AtomicBool,
    pruning: RwLock<()>,
    /// Held from taking a queued item to the end of its prunes, so that
    /// [`Gc::drain`] knows, once it holds it, that no item taken before is
    /// still being pruned by another thread.
    item_turn: Mutex<()>,
    versions_freed: AtomicU64,
    full_sweeps: AtomicU64,
}

impl Gc {
    pub(crate) fn new(queue_max: usize) -> Gc {
        Gc {
            queue: Mutex::new(VecDeque::new()),
            queue_max,
            overflowed: AtomicBool::new(false),
            pruning: RwLock::new(()),
            item_turn: Mutex::new(()),
            versions_freed: AtomicU64::new(0),
            full_sweeps: AtomicU64::new(0),
        }
    }

    /// Queues GC work; returns the queue length.
    pub(crate) fn push(&self, item: GcItem) -> usize {
        let mut q = self.queue.lock();
        if q.len() >= self.queue_max {
            q.pop_front();
            self.overflowed.store(true, Ordering::Release);
        }
        q.push_back(item);
        q.len()
    }

    /// Prunes rows of up to `items_max` queued commits the horizon passed;
    /// returns early rather than wait while another thread prunes an item
    /// (a committer helping the background thread, which waits its turn).
    pub(crate) fn step(&self, txns: &TxnManager, catalog: &CommittedCatalog, items_max: usize) {
        self.prune_queued(txns, catalog, items_max, false);
    }

    /// Prunes every queued commit the horizon passed, waiting its turn, and
    /// returns once none taken from the queue before is still being pruned
    /// elsewhere: what was queued and prunable when called is freed.
    pub(crate) fn drain(&self, txns: &TxnManager, catalog: &CommittedCatalog) {
        self.prune_queued(txns, catalog, usize::MAX, true);
        drop(self.item_turn.lock());
    }

    fn prune_queued(&self, txns: &TxnManager, catalog: &CommittedCatalog, items_max: usize, wait: bool) {
        let horizon = txns.horizon();
        let cat = catalog.current();
        let mut scratch = Vec::new();
        let mut freed = Vec::new();
        for _ in 0..items_max {
            let turn = if wait { Some(self.item_turn.lock()) } else { self.item_turn.try_lock() };
            let Some(_turn) = turn else { return };
            let item = {
                let mut q = self.queue.lock();
                match q.front() {
                    Some(front) if horizon.sees(front.commit_ts) => q.pop_front(),
                    _ => None,
                }
            };
            let Some(item) = item else { return };
            for row in &item.rows {
                let Some(store) = cat.store(row.table) else { continue };
                let key = &item.keys[row.key_off as usize..(row.key_off + row.key_len) as usize];
                self.prune_row(store, row.hash, key, horizon, &mut scratch, &mut freed);
            }
        }
    }

    /// Whether a commit at or before `through` still has rows queued.
    pub(crate) fn holds_through(&self, through: CommitTs) -> bool {
        self.queue.lock().iter().any(|item| item.commit_ts <= through)
    }

    /// A full sweep if the queue overflowed since the last call.
    pub(crate) fn sweep_if_overflowed(&self, txns: &TxnManager, catalog: &CommittedCatalog) {
        if self.overflowed.swap(false, Ordering::AcqRel) {
            self.full_sweep(txns, catalog);
        }
    }

    fn prune_row(
        &self,
        store: &TableStore,
        hash: u64,
        key: &[u8],
        horizon: Snapshot,
        scratch: &mut Vec<u8>,
        freed: &mut Vec<Vec<u8>>,
    ) {
        let meta = store.meta();
        freed.clear();
        let _pruning = self.pruning.read();
        let n = store.prune(hash, key, horizon, scratch, &meta.indexes, freed);
        self.versions_freed.fetch_add(n as u64, Ordering::Relaxed);
        store.cleanup_entries(&meta, key, freed);
    }

    /// Prunes every row of every table (after GC queue overflow, or on demand).
    pub(crate) fn full_sweep(&self, txns: &TxnManager, catalog: &CommittedCatalog) {
        self.full_sweeps.fetch_add(1, Ordering::Relaxed);
        let horizon = txns.horizon();
        let cat = catalog.current();
        let mut scratch = Vec::new();
        let mut freed = Vec::new();
        for store in cat.live_stores() {
            let mut keys: Vec<(u64, Vec<u8>)> = Vec::new();
            for shard in 0..SHARD_COUNT {
                keys.clear();
                store.primary.for_each_head_in(shard, |head| {
                    if head.prev().is_some() || is_deleted(head.word()) {
                        let mut k = Vec::new();
                        store.pk_of(head.row(store.layout()), &mut k);
                        keys.push((hash_key(&k), k));
                    }
                });
                for (hash, key) in &keys {
                    self.prune_row(store, *hash, key, horizon, &mut scratch, &mut freed);
                }
            }
        }
    }

    /// Waits for row prunes in flight and holds off new ones (`verify`).
    pub(crate) fn exclude_pruning(&self) -> RwLockWriteGuard<'_, ()> {
        self.pruning.write()
    }

    pub(crate) fn queue_len(&self) -> usize {
        self.queue.lock().len()
    }

    pub(crate) fn versions_freed(&self) -> u64 {
        self.versions_freed.load(Ordering::Relaxed)
    }
}
