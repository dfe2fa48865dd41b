//! Storage of one table: the primary hash index of version chains, the
//! ordered indexes, the version slab, and the MVCC primitives the
//! transaction layer composes (read visible, lock/install, insert,
//! rollback, stamp, prune, constraint probes).
//!
//! Lock order inside this module (see README): ordered-index lock, then
//! primary shard lock, then slab class lock. Nothing here waits for another
//! transaction; a primitive that finds a row locked returns the owner and
//! the caller waits with no lock held.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::cold::{ColdRef, ColdRelease};
use crate::error::{EngineError, Result};
use crate::hook_slots::HookSlots;
use crate::ids::{CommitTs, Snapshot, TxnId};
use crate::key::{KeySpec, encode_column, hash_key};
use crate::ordered::{IndexWriter, OrderedIndex, batch_entries, prefix_successor};
use crate::primary::{self, PrimaryIndex};
use crate::probe::ProbeTable;
use crate::row::RowLayout;
use crate::schema::{ForeignKey, IndexId, IndexSchema, TableSchema};
use crate::slab::Slab;
use crate::version::{
    FLAGS_MASK, VPtr, commit_ts_of, committed_word, is_deleted, is_lock_only, is_uncommitted, locked_by_other,
    owner_of, uncommitted_word,
};

/// An ordered index's storage.
pub(crate) struct IndexStore {
    pub(crate) schema: Arc<IndexSchema>,
    pub(crate) spec: KeySpec,
    pub(crate) tree: OrderedIndex,
    /// Unique secondary indexes only: equality lookups on the whole key
    /// (see `probe`). Entries enter and leave `tree` only through
    /// `insert`, `insert_with` and `remove_with`, which keep it in step.
    /// Lock order: after the tree's lock, before nothing.
    pub(crate) probe: Option<RwLock<ProbeTable>>,
}

impl IndexStore {
    /// An index over `tree`'s entries (its probe, if it gets one, is built
    /// from them).
    pub(crate) fn new(schema: Arc<IndexSchema>, spec: KeySpec, tree: OrderedIndex) -> IndexStore {
        let mut index = IndexStore { schema, spec, tree, probe: None };
        if index.schema.unique && !index.schema.primary {
            let mut probe = ProbeTable::new();
            probe.reserve(index.tree.len());
            index.tree.for_each(|entry| {
                let (key_hash, pk_hash) = index.probe_pair(entry);
                probe.insert(key_hash, pk_hash);
            });
            index.probe = Some(RwLock::new(probe));
        }
        index
    }

    /// The probe's pair for an entry: hashes of its index key and its pk.
    pub(crate) fn probe_pair(&self, entry: &[u8]) -> (u64, u64) {
        let (index_key, pk) = self.split(entry);
        (hash_key(index_key), hash_key(pk))
    }

    /// Adds `entry` to the tree (and its pair to the probe).
    pub(crate) fn insert(&self, entry: &[u8]) {
        if self.tree.insert(entry) {
            self.entry_added(entry);
        }
    }

    /// As `insert`, under the tree's write lock `w` already held.
    pub(crate) fn insert_with(&self, w: &mut IndexWriter<'_>, entry: &[u8]) {
        if w.insert(entry) {
            self.entry_added(entry);
        }
    }

    /// Removes `entry` from the tree (and its pair from the probe), under
    /// the write lock `w`.
    pub(crate) fn remove_with(&self, w: &mut IndexWriter<'_>, entry: &[u8]) {
        if w.remove(entry) {
            self.entry_removed(entry);
        }
    }

    fn entry_added(&self, entry: &[u8]) {
        if let Some(probe) = &self.probe {
            let (key_hash, pk_hash) = self.probe_pair(entry);
            probe.write().insert(key_hash, pk_hash);
        }
    }

    fn entry_removed(&self, entry: &[u8]) {
        if let Some(probe) = &self.probe {
            let (key_hash, pk_hash) = self.probe_pair(entry);
            let held = probe.write().remove(key_hash, pk_hash);
            assert!(held, "index \"{}\": an entry left the tree without its probe pair", self.schema.name);
        }
    }

    /// Bytes an entry of `entry_len` bytes costs: its leaf bytes and slot,
    /// and its probe pair (unique secondary indexes).
    pub(crate) fn entry_cost(&self, entry_len: usize) -> u64 {
        let pair = if self.probe.is_some() { crate::probe::PAIR_BYTES } else { 0 };
        (entry_len + crate::ordered::ENTRY_SLOT_BYTES + pair) as u64
    }

    /// What the entries occupy now (see [`OrderedIndex::usage`]).
    pub(crate) fn bytes_in_use(&self) -> u64 {
        let (entries, bytes) = self.tree.usage();
        let pairs = if self.probe.is_some() { entries * crate::probe::PAIR_BYTES } else { 0 };
        (bytes + pairs) as u64
    }

    /// Memory held by the tree and the probe.
    pub(crate) fn bytes(&self) -> u64 {
        self.tree.bytes() + self.probe.as_ref().map_or(0, |p| p.read().bytes())
    }

    /// Entry of `row` (primary key `pk`) in this index: the encoded key,
    /// followed by the primary key for secondary indexes.
    pub(crate) fn entry(&self, layout: &RowLayout, row: &[u8], pk: &[u8], out: &mut Vec<u8>) {
        out.clear();
        if self.schema.primary {
            out.extend_from_slice(pk);
        } else {
            self.spec.encode_row(layout, row, out);
            out.extend_from_slice(pk);
        }
    }

    /// Splits an entry into (index key, primary key).
    pub(crate) fn split<'a>(&self, entry: &'a [u8]) -> (&'a [u8], &'a [u8]) {
        if self.schema.primary {
            return (entry, entry);
        }
        let n = self.spec.prefix_len(entry, self.spec.columns.len());
        entry.split_at(n)
    }
}

/// A foreign key as seen from one of its two tables.
#[derive(Clone)]
pub(crate) struct FkLink {
    pub(crate) fk: Arc<ForeignKey>,
    /// The parent (for a child link) or the child (for a parent link).
    pub(crate) other: Weak<TableStore>,
}

/// What DDL changes; replaced as a whole under the exclusive table lock.
#[derive(Clone, Default)]
pub(crate) struct TableMeta {
    pub(crate) indexes: Vec<Arc<IndexStore>>,
    pub(crate) as_child: Vec<FkLink>,
    pub(crate) as_parent: Vec<FkLink>,
}

impl TableMeta {
    pub(crate) fn index(&self, id: IndexId) -> Option<&Arc<IndexStore>> {
        self.indexes.iter().find(|i| i.schema.id == id)
    }
}

/// Shared/exclusive table lock: DML transactions hold it shared from their
/// first write to the table until they end; DROP TABLE, CREATE/DROP INDEX
/// and FK creation hold it exclusively. Waits are bounded (55P03).
pub(crate) struct TableLock {
    state: AtomicU64,
}

const EXCLUSIVE: u64 = 1 << 63;
const EXCLUSIVE_WAITING: u64 = 1 << 62;
const SHARED_MASK: u64 = (1 << 32) - 1;

impl TableLock {
    fn new() -> TableLock {
        TableLock { state: AtomicU64::new(0) }
    }

    pub(crate) fn lock_shared(&self, deadline: Instant, name: &str) -> Result<()> {
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s & (EXCLUSIVE | EXCLUSIVE_WAITING) == 0 {
                assert!(s & SHARED_MASK < SHARED_MASK, "table lock shared count overflow");
                if self.state.compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                    return Ok(());
                }
                continue;
            }
            nap(deadline, name)?;
        }
    }

    pub(crate) fn unlock_shared(&self) {
        let prev = self.state.fetch_sub(1, Ordering::AcqRel);
        assert!(prev & SHARED_MASK > 0, "table lock released more than taken");
    }

    /// `own_shared`: shared holds the caller itself has (lock upgrade).
    pub(crate) fn lock_exclusive(&self, deadline: Instant, name: &str, own_shared: u64) -> Result<()> {
        self.state.fetch_or(EXCLUSIVE_WAITING, Ordering::AcqRel);
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s & SHARED_MASK == own_shared
                && s & EXCLUSIVE == 0
                && self.state.compare_exchange(s, own_shared | EXCLUSIVE, Ordering::AcqRel, Ordering::Relaxed).is_ok()
            {
                return Ok(());
            }
            if let Err(e) = nap(deadline, name) {
                self.state.fetch_and(!EXCLUSIVE_WAITING, Ordering::AcqRel);
                return Err(e);
            }
        }
    }

    pub(crate) fn unlock_exclusive(&self) {
        let prev = self.state.fetch_and(!EXCLUSIVE, Ordering::AcqRel);
        assert!(prev & EXCLUSIVE != 0, "exclusive table lock not held");
    }
}

fn nap(deadline: Instant, name: &str) -> Result<()> {
    if Instant::now() >= deadline {
        return Err(EngineError::LockTimeout { detail: format!("while locking relation \"{name}\"") });
    }
    std::thread::sleep(Duration::from_micros(200));
    Ok(())
}

pub(crate) struct TableStore {
    pub(crate) schema: Arc<TableSchema>,
    /// The cache's hooks and switches for this table (hook_slots.rs,
    /// typed by seams.rs); not persisted.
    pub(crate) hooks: HookSlots,
    pub(crate) pk: KeySpec,
    pub(crate) primary: PrimaryIndex,
    pub(crate) slab: Slab,
    pub(crate) meta: RwLock<Arc<TableMeta>>,
    pub(crate) lock: TableLock,
    /// Committed live rows (maintained at commit and recovery).
    pub(crate) live_rows: AtomicI64,
    pub(crate) dropped: AtomicBool,
    /// Next hidden row id (tables declared without a primary key only).
    next_rowid: AtomicI64,
    /// Stubs GC freed, whose images their store may drop once the WAL is
    /// durable past the moment they were freed (cold.rs).
    cold_releases: parking_lot::Mutex<Vec<ColdRelease>>,
}

/// Latest state of a row as a writer sees it.
pub(crate) enum Latest {
    Absent,
    /// Another transaction holds the row's lock.
    Locked(TxnId),
    /// Head version (committed, or our own); bytes copied out.
    Head(LatestVersion),
}

/// A row's head version as a writer found it (committed, or its own) and
/// the head's word at that moment: [`TableStore::install`] over it
/// succeeds only if neither has changed since.
#[derive(Clone, Copy)]
pub(crate) struct LatestVersion {
    pub(crate) head: VPtr,
    pub(crate) word: u64,
}

pub(crate) enum InsertOutcome {
    /// New head; `replaced_tombstone` is the image of our own tombstone it
    /// replaced (re-insert after our own delete), for index cleanup.
    Inserted {
        head: VPtr,
        replaced_tombstone: Option<Vec<u8>>,
    },
    Duplicate,
    WaitFor(TxnId),
    /// The key's latest version is a tombstone committed after the pinned
    /// snapshot the inserter passed (a row it saw absent was there since).
    DeletedSince,
}

/// Outcome of probing a row for a conflicting key (UNIQUE, FK children).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Conflict {
    None,
    /// A committed row holds the key.
    Committed,
    /// One of our own uncommitted rows holds it.
    Mine,
    /// Another transaction may hold it: wait for it, then probe again.
    WaitFor(TxnId),
}

impl TableStore {
    pub(crate) fn new(schema: Arc<TableSchema>) -> TableStore {
        let nullable: Vec<bool> = schema.columns.iter().map(|c| c.nullable).collect();
        let pk = KeySpec::new(&schema.primary_key, &schema.layout, &nullable, true);
        TableStore {
            schema,
            hooks: HookSlots::default(),
            pk,
            primary: PrimaryIndex::new(),
            slab: Slab::new(),
            meta: RwLock::new(Arc::new(TableMeta::default())),
            lock: TableLock::new(),
            live_rows: AtomicI64::new(0),
            dropped: AtomicBool::new(false),
            next_rowid: AtomicI64::new(1),
            cold_releases: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// A fresh hidden row id. Ids of rolled-back inserts are not reused,
    /// like PostgreSQL sequence values.
    pub(crate) fn allocate_rowid(&self) -> i64 {
        self.next_rowid.fetch_add(1, Ordering::Relaxed)
    }

    /// After recovery: continue past the largest row id stored, so a new
    /// id never collides with a recovered row.
    pub(crate) fn restore_rowid(&self) {
        if !self.schema.has_rowid() {
            return;
        }
        let layout = self.layout();
        let col = self.schema.columns.len() - 1;
        let mut max = 0i64;
        self.primary.for_each_head(|head| {
            if let crate::types::ValueRef::Int8(id) = layout.get(head.row(layout), col) {
                max = max.max(id);
            }
        });
        self.next_rowid.store(max + 1, Ordering::Relaxed);
    }

    pub(crate) fn layout(&self) -> &RowLayout {
        &self.schema.layout
    }

    pub(crate) fn meta(&self) -> Arc<TableMeta> {
        self.meta.read().clone()
    }

    pub(crate) fn new_index_store(&self, schema: Arc<IndexSchema>) -> IndexStore {
        let nullable: Vec<bool> = self.schema.columns.iter().map(|c| c.nullable).collect();
        let spec = KeySpec::new(&schema.columns, &self.schema.layout, &nullable, schema.primary);
        IndexStore::new(schema, spec, OrderedIndex::new())
    }

    /// Encoded primary key of a stored row.
    pub(crate) fn pk_of(&self, row: &[u8], out: &mut Vec<u8>) {
        out.clear();
        self.pk.encode_row(&self.schema.layout, row, out);
    }

    // ---------------------------------------------------------------- reads

    /// Copies the version of `key` visible to (`me`, `snapshot`) into `out`.
    /// `tick`: stamp the row's access with it (0: don't; every reader below
    /// takes it too).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read_visible(
        &self,
        hash: u64,
        key: &[u8],
        me: TxnId,
        snapshot: Snapshot,
        tick: u32,
        scratch: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        let layout = self.layout();
        let map = self.primary.read(hash);
        let Some(head) = primary::find(&map, hash, key, &self.pk, layout, scratch) else { return Ok(false) };
        match visible(head, me, snapshot) {
            Some(v) => {
                if tick != 0 {
                    head.touch(tick);
                }
                out.clear();
                self.copy_row(v, out)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Copies into `out` the visible row of the first chain whose head hash
    /// tag matches `hash` and whose visible row `accept` takes; for lookups
    /// that know only a primary key's hash (the unique-index probe).
    /// `accept` runs under the shard read lock.
    pub(crate) fn read_visible_where(
        &self,
        hash: u64,
        me: TxnId,
        snapshot: Snapshot,
        tick: u32,
        out: &mut Vec<u8>,
        mut accept: impl FnMut(&[u8]) -> bool,
    ) -> Result<bool> {
        let layout = self.layout();
        let map = self.primary.read(hash);
        // `accept` reads the index's columns, which a stub keeps.
        let Some(&head) = map.find(hash, |head| visible(*head, me, snapshot).is_some_and(|v| accept(v.row(layout))))
        else {
            return Ok(false);
        };
        let Some(v) = visible(head, me, snapshot) else { return Ok(false) };
        if tick != 0 {
            head.touch(tick);
        }
        out.clear();
        self.copy_row(v, out)?;
        Ok(true)
    }

    /// Runs `f` on the visible row of `key` without copying it out. `f` runs
    /// under the shard read lock: it must not call into the engine.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn with_visible<R>(
        &self,
        hash: u64,
        key: &[u8],
        me: TxnId,
        snapshot: Snapshot,
        tick: u32,
        scratch: &mut Vec<u8>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        let layout = self.layout();
        let map = self.primary.read(hash);
        let Some(head) = primary::find(&map, hash, key, &self.pk, layout, scratch) else { return Ok(None) };
        let Some(v) = visible(head, me, snapshot) else { return Ok(None) };
        if tick != 0 {
            head.touch(tick);
        }
        let row = v.row(layout);
        if RowLayout::is_stub(row) {
            let mut image = Vec::new();
            self.fetch_stub(row, &mut image)?;
            return Ok(Some(f(&image)));
        }
        Ok(Some(f(row)))
    }

    /// Latest state of `key` for a writer; copies the head row into `out`.
    pub(crate) fn latest(
        &self,
        hash: u64,
        key: &[u8],
        me: TxnId,
        tick: u32,
        scratch: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<Latest> {
        let layout = self.layout();
        let map = self.primary.read(hash);
        let Some(head) = primary::find(&map, hash, key, &self.pk, layout, scratch) else { return Ok(Latest::Absent) };
        let word = head.word();
        if let Some(owner) = locked_by_other(word, me) {
            return Ok(Latest::Locked(owner));
        }
        if tick != 0 && !is_deleted(word) {
            head.touch(tick);
        }
        out.clear();
        self.copy_row(head, out)?;
        Ok(Latest::Head(LatestVersion { head, word }))
    }

    /// True when the table's miss hook may know `key` although a lookup by
    /// `me` at `snapshot` found nothing: no version of it, its latest
    /// committed version is a tombstone, or the row is newer than the
    /// snapshot (committed after it, or written by another transaction not
    /// yet committed). The last case is a load that ended, or is under way,
    /// after this statement began: PostgreSQL had the row all along, so the
    /// hook waits for that load (or reads PostgreSQL) and the lookup is
    /// retried at a fresh snapshot; answering "no row" there would be wrong.
    /// False when the miss is this transaction's own doing (its uncommitted
    /// delete) or the row is visible (a writer's recheck said no).
    pub(crate) fn miss_may_be_loaded(
        &self,
        hash: u64,
        key: &[u8],
        me: TxnId,
        snapshot: Snapshot,
        scratch: &mut Vec<u8>,
    ) -> bool {
        let layout = self.layout();
        let map = self.primary.read(hash);
        let Some(head) = primary::find(&map, hash, key, &self.pk, layout, scratch) else { return true };
        let word = head.word();
        if is_uncommitted(word) && owner_of(word) == me {
            return false;
        }
        match latest_committed(Some(head)) {
            None => true,
            Some(v) if is_deleted(v.word()) => true,
            Some(v) => !snapshot.sees(commit_ts_of(v.word())),
        }
    }

    /// Visible rows of shard `shard` appended to `out` as `[u32 len][row]`.
    pub(crate) fn scan_shard(
        &self,
        shard: usize,
        me: TxnId,
        snapshot: Snapshot,
        tick: u32,
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        let mut n = 0;
        self.primary.try_for_each_head_in(shard, |head| {
            if let Some(v) = visible(head, me, snapshot) {
                if tick != 0 {
                    head.touch(tick);
                }
                self.copy_framed(v, out)?;
                n += 1;
            }
            Ok::<(), EngineError>(())
        })?;
        Ok(n)
    }

    /// Appends `v`'s whole row to `out`: its bytes, or a stub's image.
    /// Under the shard lock that keeps `v` alive.
    #[inline]
    fn copy_row(&self, v: VPtr, out: &mut Vec<u8>) -> Result<()> {
        let row = v.row(self.layout());
        if RowLayout::is_stub(row) {
            return self.fetch_stub(row, out);
        }
        out.extend_from_slice(row);
        Ok(())
    }

    /// `copy_row` framed as `[u32 len][row]`.
    fn copy_framed(&self, v: VPtr, out: &mut Vec<u8>) -> Result<()> {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        self.copy_row(v, out)?;
        let len = u32::try_from(out.len() - at - 4).unwrap_or(u32::MAX);
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
        Ok(())
    }

    /// Appends the image stub `stub` stands for, from the table's cold
    /// store, checked: a whole row of this layout with the stub's key.
    fn fetch_stub(&self, stub: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let mut key = Vec::new();
        self.pk_of(stub, &mut key);
        let cold = RowLayout::stub_ref(stub);
        let Some(store) = self.hooks.cold_rows() else {
            return Err(EngineError::Corrupt(format!(
                "a row of table \"{}\" is stored outside memory ({cold:?}), and no store for it is attached",
                self.schema.name
            )));
        };
        let start = out.len();
        store.fetch(self.schema.id, &key, cold, out)?;
        let image = &out[start..];
        self.layout().validate_image(image)?;
        let mut image_key = Vec::new();
        self.pk_of(image, &mut image_key);
        if image_key != key {
            out.truncate(start);
            return Err(EngineError::Corrupt(format!(
                "the image stored outside memory as {cold:?} for a row of table \"{}\" is another row's",
                self.schema.name
            )));
        }
        Ok(())
    }

    /// Frees a version no one can reach any more (the caller unlinked it
    /// under the shard write lock). A stub's image is queued for release:
    /// the store may drop it once the commit that made the stub unreachable
    /// is durable (`Database::release_cold`), not before, since a crash
    /// could otherwise bring the stub back without its image.
    ///
    /// # Safety
    /// As [`VPtr::free`].
    unsafe fn free_version(&self, v: VPtr) {
        let layout = self.layout();
        let row = v.row(layout);
        if RowLayout::is_stub(row) {
            let mut key = Vec::new();
            self.pk_of(row, &mut key);
            self.cold_releases.lock().push((key, RowLayout::stub_ref(row)));
        }
        // SAFETY: the caller's contract.
        unsafe { v.free(&self.slab, layout) };
    }

    /// The stubs freed since the last call (see `free_version`).
    pub(crate) fn take_cold_releases(&self) -> Vec<ColdRelease> {
        std::mem::take(&mut *self.cold_releases.lock())
    }

    /// Puts back releases that found no store to go to.
    pub(crate) fn requeue_cold_releases(&self, mut releases: Vec<ColdRelease>) {
        self.cold_releases.lock().append(&mut releases);
    }

    // --------------------------------------------------------------- writes

    /// Installs a new version for `key` on top of `expected` (as returned by
    /// [`TableStore::latest`]), or overwrites it if it is our own, unless
    /// `stack` (our own version predates a savepoint: it must survive for
    /// ROLLBACK TO). Returns None if the head changed meanwhile (the caller
    /// re-reads and retries).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn install(
        &self,
        hash: u64,
        key: &[u8],
        me: TxnId,
        expected: LatestVersion,
        row: &[u8],
        flags: u64,
        stack: bool,
        scratch: &mut Vec<u8>,
    ) -> Option<VPtr> {
        assert_eq!(flags & !FLAGS_MASK, 0);
        let layout = self.layout();
        let mut map = self.primary.write(hash);
        let head = primary::find(&map, hash, key, &self.pk, layout, scratch)?;
        let expected_word = expected.word;
        if head != expected.head || head.word() != expected_word {
            return None;
        }
        let word = uncommitted_word(me, flags);
        if is_uncommitted(expected_word) {
            assert_eq!(owner_of(expected_word), me, "install over another transaction's version");
        }
        if is_uncommitted(expected_word) && !stack {
            if head.row(layout).len() == row.len() {
                head.overwrite_row(layout, row);
                head.set_word(word);
                return Some(head);
            }
            let new = VPtr::alloc(&self.slab, word, head.prev(), row);
            new.touch(head.access());
            primary::replace(&mut map, hash, key, &self.pk, layout, new, scratch);
            // SAFETY: our own uncommitted version, unlinked under the write lock.
            unsafe { head.free(&self.slab, layout) };
            return Some(new);
        }
        let new = VPtr::alloc(&self.slab, word, Some(head), row);
        if stack {
            new.touch(head.access());
        }
        primary::replace(&mut map, hash, key, &self.pk, layout, new, scratch);
        Some(new)
    }

    /// Inserts a new row version for `key` (PK uniqueness is decided here).
    /// `stack`: as for [`TableStore::install`], over our own tombstone.
    /// `pinned`: the inserter's pinned snapshot (`Transaction::pin_snapshot`),
    /// which must see a committed tombstone it inserts over.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert(
        &self,
        hash: u64,
        key: &[u8],
        me: TxnId,
        row: &[u8],
        stack: bool,
        pinned: Option<Snapshot>,
        scratch: &mut Vec<u8>,
    ) -> InsertOutcome {
        let layout = self.layout();
        let mut map = self.primary.write(hash);
        let word = uncommitted_word(me, 0);
        let Some(head) = primary::find(&map, hash, key, &self.pk, layout, scratch) else {
            let new = VPtr::alloc(&self.slab, word, None, row);
            primary::insert_new(&mut map, hash, &self.pk, layout, new);
            return InsertOutcome::Inserted { head: new, replaced_tombstone: None };
        };
        let hw = head.word();
        if let Some(owner) = locked_by_other(hw, me) {
            return InsertOutcome::WaitFor(owner);
        }
        if !is_deleted(hw) {
            return InsertOutcome::Duplicate;
        }
        if let Some(pinned) = pinned
            && !is_uncommitted(hw)
            && !pinned.sees(commit_ts_of(hw))
        {
            return InsertOutcome::DeletedSince;
        }
        if is_uncommitted(hw) && !stack {
            // Re-insert after our own delete: replace our tombstone.
            let new = VPtr::alloc(&self.slab, word, head.prev(), row);
            new.touch(head.access());
            primary::replace(&mut map, hash, key, &self.pk, layout, new, scratch);
            let image = head.row(layout).to_vec();
            // SAFETY: our own uncommitted tombstone, unlinked under the write lock.
            unsafe { head.free(&self.slab, layout) };
            return InsertOutcome::Inserted { head: new, replaced_tombstone: Some(image) };
        }
        let new = VPtr::alloc(&self.slab, word, Some(head), row);
        primary::replace(&mut map, hash, key, &self.pk, layout, new, scratch);
        InsertOutcome::Inserted { head: new, replaced_tombstone: None }
    }

    /// Discards our uncommitted versions of `key` from the head down to
    /// `stop` (exclusive; None: all of them, the row as before our first
    /// write), appending their images to `images` (for index cleanup).
    /// Without savepoints a row has one own version; a write after a
    /// savepoint may have stacked more (transaction/savepoint.rs).
    pub(crate) fn rollback_row(
        &self,
        hash: u64,
        key: &[u8],
        me: TxnId,
        stop: Option<VPtr>,
        scratch: &mut Vec<u8>,
        images: &mut Vec<Vec<u8>>,
    ) {
        let layout = self.layout();
        let mut map = self.primary.write(hash);
        let Some(mut head) = primary::find(&map, hash, key, &self.pk, layout, scratch) else {
            unreachable!("rollback of a row that is not in the primary index")
        };
        loop {
            let w = head.word();
            assert!(is_uncommitted(w) && owner_of(w) == me, "rollback of a version we do not own");
            images.push(head.row(layout).to_vec());
            let prev = head.prev();
            match prev {
                Some(prev) => primary::replace(&mut map, hash, key, &self.pk, layout, prev, scratch),
                None => {
                    primary::remove(&mut map, hash, key, &self.pk, layout, scratch);
                }
            }
            // SAFETY: our own uncommitted version, unlinked under the write lock.
            unsafe { head.free(&self.slab, layout) };
            match prev {
                Some(p) if Some(p) != stop && is_uncommitted(p.word()) && owner_of(p.word()) == me => head = p,
                _ => break,
            }
        }
    }

    /// Frees versions no snapshot at or after `horizon` can see; removes the
    /// row when only a tombstone would remain. The images of freed versions
    /// whose index entries may have become stale are appended to `freed`
    /// (for `cleanup_entries`): those whose key in one of `indexes` differs
    /// from the newest kept version's. An image that agrees with it on
    /// every indexed column (an UPDATE of other columns, the usual case)
    /// shares all its entries with a version that stays.
    pub(crate) fn prune(
        &self,
        hash: u64,
        key: &[u8],
        horizon: Snapshot,
        scratch: &mut Vec<u8>,
        indexes: &[Arc<IndexStore>],
        freed: &mut Vec<Vec<u8>>,
    ) -> usize {
        let layout = self.layout();
        let mut map = self.primary.write(hash);
        let Some(head) = primary::find(&map, hash, key, &self.pk, layout, scratch) else { return 0 };
        // One walk from the head, relinking as it goes: no reader can see the
        // chain meanwhile (the shard write lock). A dropped version is freed
        // at once unless it is the head, which the map still points at.
        let mut first_kept: Option<VPtr> = None;
        let mut last_kept: Option<VPtr> = None;
        let mut head_dropped = false;
        let mut floor_found = false;
        let mut count = 0;
        let mut cur = Some(head);
        while let Some(v) = cur {
            cur = v.prev();
            let w = v.word();
            let keep = if floor_found {
                false
            } else if is_uncommitted(w) {
                true
            } else if is_lock_only(w) {
                false
            } else if !horizon.sees(commit_ts_of(w)) {
                true
            } else {
                floor_found = true;
                !is_deleted(w)
            };
            if keep {
                if let Some(lk) = last_kept
                    && lk.prev() != Some(v)
                {
                    lk.set_prev(Some(v));
                }
                first_kept.get_or_insert(v);
                last_kept = Some(v);
                continue;
            }
            count += 1;
            let entries_kept = first_kept.is_some_and(|k| {
                indexes.iter().all(|index| cols_equal(layout, v.row(layout), k.row(layout), &index.spec.columns))
            });
            if !indexes.is_empty() && !entries_kept {
                freed.push(v.row(layout).to_vec());
            }
            if v == head {
                head_dropped = true;
            } else {
                // SAFETY: committed (or lock-only) and invisible to every
                // snapshot >= horizon; its newer neighbour is relinked past
                // it before the lock is released; we hold the write lock.
                unsafe { self.free_version(v) };
            }
        }
        if count == 0 {
            return 0;
        }
        match (first_kept, last_kept) {
            (Some(first), Some(last)) => {
                if last.prev().is_some() {
                    last.set_prev(None);
                }
                if first != head {
                    // The row's stamp lives on its head: the new head keeps it.
                    first.touch(first.access().max(head.access()));
                    primary::replace(&mut map, hash, key, &self.pk, layout, first, scratch);
                }
            }
            _ => {
                primary::remove(&mut map, hash, key, &self.pk, layout, scratch);
            }
        }
        if head_dropped {
            // SAFETY: as above, and the map no longer points at it.
            unsafe { self.free_version(head) };
        }
        count
    }

    // --------------------------------------------------------------- probes

    /// Probes row `pk` for a live version satisfying `pred` (its key equals
    /// a key being inserted, or it references a parent being deleted),
    /// looking at the latest committed version and any uncommitted one.
    pub(crate) fn probe(
        &self,
        pk: &[u8],
        me: TxnId,
        scratch: &mut Vec<u8>,
        mut pred: impl FnMut(&[u8]) -> bool,
    ) -> Conflict {
        let layout = self.layout();
        let hash = hash_key(pk);
        let map = self.primary.read(hash);
        let Some(head) = primary::find(&map, hash, pk, &self.pk, layout, scratch) else { return Conflict::None };
        let w = head.word();
        let mut live_match = |v: VPtr| !is_deleted(v.word()) && pred(v.row(layout));
        if is_uncommitted(w) {
            let owner = owner_of(w);
            if owner == me {
                return if live_match(head) { Conflict::Mine } else { Conflict::None };
            }
            // Every version the owner made counts: one a later write of its
            // stacked over comes back if it rolls back to a savepoint.
            let mut cur = Some(head);
            while let Some(v) = cur
                && is_uncommitted(v.word())
            {
                if live_match(v) {
                    return Conflict::WaitFor(owner);
                }
                cur = v.prev();
            }
            return match latest_committed(cur) {
                Some(v) if live_match(v) => Conflict::WaitFor(owner),
                _ => Conflict::None,
            };
        }
        match latest_committed(Some(head)) {
            Some(v) if live_match(v) => Conflict::Committed,
            _ => Conflict::None,
        }
    }

    /// For an eviction's delete of a parent (which checks no foreign key):
    /// does row `pk` hold a live version satisfying `pred` (it references
    /// the parent) that `snapshot` does not see? `Err(owner)`: another
    /// transaction has one uncommitted (or holds the row); `Ok(true)`: one
    /// committed after the snapshot. Versions `me` wrote decide alone: the
    /// eviction deleted the row itself, or it is its own.
    pub(crate) fn holds_unseen_reference(
        &self,
        pk: &[u8],
        me: TxnId,
        snapshot: Snapshot,
        scratch: &mut Vec<u8>,
        mut pred: impl FnMut(&[u8]) -> bool,
    ) -> std::result::Result<bool, TxnId> {
        let layout = self.layout();
        let hash = hash_key(pk);
        let map = self.primary.read(hash);
        let Some(head) = primary::find(&map, hash, pk, &self.pk, layout, scratch) else { return Ok(false) };
        let mut live_match = |v: VPtr| !is_deleted(v.word()) && pred(v.row(layout));
        if is_uncommitted(head.word()) {
            let owner = owner_of(head.word());
            if owner == me {
                return Ok(false);
            }
            // As `probe`: any version the owner made counts, and so does
            // the committed one under them (the owner may delete it).
            let mut cur = Some(head);
            while let Some(v) = cur
                && is_uncommitted(v.word())
            {
                if live_match(v) {
                    return Err(owner);
                }
                cur = v.prev();
            }
            return match latest_committed(cur) {
                Some(v) if live_match(v) => Err(owner),
                _ => Ok(false),
            };
        }
        Ok(latest_committed(Some(head)).is_some_and(|v| live_match(v) && !snapshot.sees(commit_ts_of(v.word()))))
    }

    /// Does a parent row with primary key `pk` exist for a new reference?
    /// Ok(true) exists, Ok(false) missing, Err(owner) wait for owner.
    pub(crate) fn parent_exists(
        &self,
        pk: &[u8],
        me: TxnId,
        scratch: &mut Vec<u8>,
    ) -> std::result::Result<bool, TxnId> {
        let layout = self.layout();
        let hash = hash_key(pk);
        let map = self.primary.read(hash);
        let Some(head) = primary::find(&map, hash, pk, &self.pk, layout, scratch) else { return Ok(false) };
        let w = head.word();
        if let Some(owner) = locked_by_other(w, me) {
            if is_deleted(w) {
                return Err(owner);
            }
            // A non-key update by another transaction keeps the parent
            // either way; an uncommitted insert is not visible (23503).
            return Ok(latest_committed(head.prev()).is_some_and(|v| !is_deleted(v.word())));
        }
        if is_uncommitted(w) {
            return Ok(!is_deleted(w));
        }
        Ok(latest_committed(Some(head)).is_some_and(|v| !is_deleted(v.word())))
    }

    /// Does any version of row `pk` have index key `index_key` in `index`?
    /// (Keeps index entries that some version still needs.)
    fn entry_still_needed(
        &self,
        index: &IndexStore,
        pk: &[u8],
        index_key: &[u8],
        scratch: &mut Vec<u8>,
        tmp: &mut Vec<u8>,
    ) -> bool {
        let layout = self.layout();
        let hash = hash_key(pk);
        let map = self.primary.read(hash);
        let Some(head) = primary::find(&map, hash, pk, &self.pk, layout, scratch) else { return false };
        if index.schema.primary {
            return true;
        }
        let mut cur = Some(head);
        while let Some(v) = cur {
            tmp.clear();
            index.spec.encode_row(layout, v.row(layout), tmp);
            if tmp.as_slice() == index_key {
                return true;
            }
            cur = v.prev();
        }
        false
    }

    /// Removes index entries of discarded row images `images` of row `pk`
    /// unless a remaining version still has the same key.
    pub(crate) fn cleanup_entries(&self, meta: &TableMeta, pk: &[u8], images: &[Vec<u8>]) {
        if images.is_empty() {
            return;
        }
        let layout = self.layout();
        let mut scratch = Vec::new();
        let mut tmp = Vec::new();
        let mut entry = Vec::new();
        let mut stale: Vec<Vec<u8>> = Vec::new();
        for index in &meta.indexes {
            stale.clear();
            for img in images {
                index.entry(layout, img, pk, &mut entry);
                if stale.contains(&entry) {
                    continue;
                }
                // Most discarded images carry a key a newer version keeps
                // (an UPDATE of other columns). That is settled here under the
                // primary shard's read lock alone, so such a prune never takes
                // the index write lock every reader of the index shares.
                let (index_key, _) = index.split(&entry);
                if !self.entry_still_needed(index, pk, index_key, &mut scratch, &mut tmp) {
                    stale.push(entry.clone());
                }
            }
            if stale.is_empty() {
                continue;
            }
            index.tree.with_write(|w| {
                for e in &stale {
                    // Checked again under the index lock: a writer may have
                    // installed a version with this key since (it inserts its
                    // entries under this lock).
                    let (index_key, _) = index.split(e);
                    if !self.entry_still_needed(index, pk, index_key, &mut scratch, &mut tmp) {
                        index.remove_with(w, e);
                    }
                }
            });
        }
    }

    /// Checks UNIQUE for `entry` (= key ++ pk) and inserts it atomically with
    /// the check, under the index write lock.
    pub(crate) fn unique_insert(&self, index: &IndexStore, entry: &[u8], pk: &[u8], me: TxnId) -> Conflict {
        let (index_key, _) = index.split(entry);
        let layout = self.layout();
        let upper = prefix_successor(index_key);
        let mut scratch = Vec::new();
        let mut batch = Vec::new();
        index.tree.with_write(|w| {
            let to = upper.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            w.scan(Bound::Included(index_key), to, usize::MAX, &mut batch);
            let mut tmp = Vec::new();
            for existing in batch_entries(&batch) {
                let other_pk = &existing[index_key.len()..];
                if other_pk == pk {
                    continue;
                }
                let same_key = |row: &[u8]| {
                    tmp.clear();
                    index.spec.encode_row(layout, row, &mut tmp);
                    tmp.as_slice() == index_key
                };
                match self.probe(other_pk, me, &mut scratch, same_key) {
                    Conflict::None => {}
                    other => return other,
                }
            }
            index.insert_with(w, entry);
            Conflict::None
        })
    }

    /// Bytes the table's rows and index entries occupy now: every version
    /// as allocated (header, stamp, row, rounding), a primary hash slot per
    /// row, every ordered-index entry with its slot and probe pair. Kept
    /// as rows come and go (the slab's count, the shards' and trees'
    /// counters), so this reads a few hundred counters, never the rows.
    /// Free space (empty hash slots, leaf slack, freed slab objects the
    /// table keeps for reuse) is not counted: see `bytes` for that.
    pub(crate) fn memory_bytes(&self) -> u64 {
        let heads = (self.primary.len() * crate::heads::HeadTable::SLOT_BYTES) as u64;
        let entries: u64 = self.meta().indexes.iter().map(|i| i.bytes_in_use()).sum();
        self.slab.used_bytes() + heads + entries
    }

    /// The row `key`'s last access stamp and its share of
    /// [`TableStore::memory_bytes`]: its versions, its hash slot, its
    /// distinct index entries. None when no version of it is stored.
    pub(crate) fn row_meta(
        &self,
        hash: u64,
        key: &[u8],
        scratch: &mut Vec<u8>,
        entry: &mut Vec<u8>,
    ) -> Option<(u32, u64)> {
        let meta = self.meta();
        let layout = self.layout();
        let map = self.primary.read(hash);
        let head = primary::find(&map, hash, key, &self.pk, layout, scratch)?;
        let mut bytes = crate::heads::HeadTable::SLOT_BYTES as u64;
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for index in &meta.indexes {
            seen.clear();
            for v in head.chain() {
                index.entry(layout, v.row(layout), key, entry);
                if head.prev().is_some() {
                    if seen.contains(entry) {
                        continue;
                    }
                    seen.push(entry.clone());
                }
                bytes += index.entry_cost(entry.len());
            }
        }
        bytes += head.chain().map(|v| v.alloc_bytes(layout)).sum::<u64>();
        Some((head.access(), bytes))
    }

    /// Memory held by the table's rows and indexes.
    pub(crate) fn bytes(&self) -> (u64, u64) {
        let rows = self.slab.reserved_bytes();
        let index: u64 = self.primary.slots_bytes() + self.meta().indexes.iter().map(|i| i.bytes()).sum::<u64>();
        (rows, index)
    }

    /// Stamps a committed version (called under the commit lock).
    pub(crate) fn stamp(v: VPtr, commit_ts: CommitTs) {
        v.set_word(committed_word(v.word(), commit_ts));
    }

    /// Appends the newest committed image of every live row in `shard` to
    /// `out` as `[u32 len][row]` (checkpoints); returns how many. Stubs go
    /// as they are, unless `resolve` (a backup, which must stand alone):
    /// then their images are fetched.
    pub(crate) fn committed_rows_of_shard(&self, shard: usize, resolve: bool, out: &mut Vec<u8>) -> Result<u32> {
        let layout = self.layout();
        let mut n = 0;
        self.primary.try_for_each_head_in(shard, |head| {
            if let Some(v) = latest_committed(Some(head))
                && !is_deleted(v.word())
            {
                if resolve {
                    self.copy_framed(v, out)?;
                } else {
                    let row = v.row(layout);
                    out.extend_from_slice(&(row.len() as u32).to_le_bytes());
                    out.extend_from_slice(row);
                }
                n += 1;
            }
            Ok::<(), EngineError>(())
        })?;
        Ok(n)
    }

    // ---------------------------------------------------------- cold rows

    /// The columns a stub of this table keeps: the primary key's and every
    /// index's (cold.rs).
    pub(crate) fn stub_columns(&self) -> Vec<bool> {
        let mut kept = vec![false; self.schema.columns.len()];
        for &col in &self.schema.primary_key {
            kept[col] = true;
        }
        for index in &self.meta().indexes {
            for &col in &index.schema.columns {
                kept[col] = true;
            }
        }
        kept
    }

    /// Row `key`'s version if it may become a stub (its only version,
    /// committed, live, whole), its image copied into `out`.
    pub(crate) fn demotable(
        &self,
        hash: u64,
        key: &[u8],
        scratch: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Option<LatestVersion> {
        let layout = self.layout();
        let map = self.primary.read(hash);
        let head = primary::find(&map, hash, key, &self.pk, layout, scratch)?;
        let word = head.word();
        let row = head.row(layout);
        if is_uncommitted(word)
            || is_deleted(word)
            || is_lock_only(word)
            || head.prev().is_some()
            || RowLayout::is_stub(row)
        {
            return None;
        }
        out.clear();
        out.extend_from_slice(row);
        Some(LatestVersion { head, word })
    }

    /// Keys of up to `limit` rows that may become stubs (see `demotable`,
    /// which decides) and whose stamp is below `idle_before`, shard by
    /// shard from `from_shard`, at most one lap; and the shard to go on from.
    pub(crate) fn idle_keys(&self, idle_before: u32, limit: usize, from_shard: usize) -> (Vec<Vec<u8>>, usize) {
        let layout = self.layout();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut shard = from_shard % primary::SHARD_COUNT;
        for _ in 0..primary::SHARD_COUNT {
            self.primary.for_each_head_in(shard, |head| {
                if keys.len() < limit && head.access() < idle_before && head.prev().is_none() {
                    let row = head.row(layout);
                    if !RowLayout::is_stub(row) && !is_deleted(head.word()) {
                        let mut key = Vec::new();
                        self.pk_of(row, &mut key);
                        keys.push(key);
                    }
                }
            });
            shard = (shard + 1) % primary::SHARD_COUNT;
            if keys.len() >= limit {
                break;
            }
        }
        (keys, shard)
    }

    /// Replaces `expected` (from `demotable`) by `stub` if it is still the
    /// row's only version, unchanged; false otherwise (the caller releases
    /// the stub's image). The stub keeps the version's word and stamp.
    pub(crate) fn swap_in_stub(
        &self,
        hash: u64,
        key: &[u8],
        expected: LatestVersion,
        stub: &[u8],
        scratch: &mut Vec<u8>,
    ) -> bool {
        let layout = self.layout();
        let mut map = self.primary.write(hash);
        let Some(head) = primary::find(&map, hash, key, &self.pk, layout, scratch) else { return false };
        if head != expected.head || head.word() != expected.word || head.prev().is_some() {
            return false;
        }
        debug_assert!(RowLayout::is_stub(stub) && !RowLayout::is_stub(head.row(layout)));
        let new = VPtr::alloc(&self.slab, expected.word, None, stub);
        new.touch(head.access());
        primary::replace(&mut map, hash, key, &self.pk, layout, new, scratch);
        // SAFETY: unlinked under the write lock; a whole version, so
        // nothing to release.
        unsafe { head.free(&self.slab, layout) };
        true
    }

    /// Brings every stub of the table back to a whole version (CREATE
    /// INDEX, before it reads a column a stub may have dropped). Each
    /// shard under its write lock: the images are fetched there. Returns
    /// the stubs' keys and references, not yet released: checkpoints may
    /// still name them (the caller queues them when none does).
    pub(crate) fn promote_stubs(&self) -> Result<Vec<ColdRelease>> {
        let mut promoted = Vec::new();
        if !self.has_stubs() {
            return Ok(promoted);
        }
        let layout = self.layout();
        let mut key = Vec::new();
        let mut scratch = Vec::new();
        let mut image = Vec::new();
        for shard in 0..primary::SHARD_COUNT {
            let mut map = self.primary.write_shard(shard);
            let heads: Vec<VPtr> =
                map.iter().copied().filter(|head| head.chain().any(|v| RowLayout::is_stub(v.row(layout)))).collect();
            for head in heads {
                self.pk_of(head.row(layout), &mut key);
                let hash = hash_key(&key);
                let mut newer: Option<VPtr> = None;
                let mut cur = Some(head);
                while let Some(v) = cur {
                    cur = v.prev();
                    let row = v.row(layout);
                    if !RowLayout::is_stub(row) {
                        newer = Some(v);
                        continue;
                    }
                    image.clear();
                    self.fetch_stub(row, &mut image)?;
                    let whole = VPtr::alloc(&self.slab, v.word(), v.prev(), &image);
                    whole.touch(v.access());
                    match newer {
                        Some(n) => n.set_prev(Some(whole)),
                        None => primary::replace(&mut map, hash, &key, &self.pk, layout, whole, &mut scratch),
                    }
                    promoted.push((key.clone(), RowLayout::stub_ref(row)));
                    // SAFETY: unlinked under the shard write lock; its
                    // release is the caller's.
                    unsafe { v.free(&self.slab, layout) };
                    newer = Some(whole);
                }
            }
        }
        Ok(promoted)
    }

    /// For `verify`: a stub's image can be fetched, is its row's, and
    /// agrees with the stub on every column the stub keeps.
    pub(crate) fn check_stub(&self, v: VPtr) -> Result<()> {
        let layout = self.layout();
        let row = v.row(layout);
        if !RowLayout::is_stub(row) {
            return Ok(());
        }
        let mut image = Vec::new();
        self.fetch_stub(row, &mut image)?;
        let kept: Vec<usize> = self.stub_columns().iter().enumerate().filter(|(_, k)| **k).map(|(c, _)| c).collect();
        if !cols_equal(layout, row, &image, &kept) {
            return Err(EngineError::Corrupt(format!(
                "{}: a stub and its image ({:?}) disagree on a key or indexed column",
                self.schema.name,
                RowLayout::stub_ref(row)
            )));
        }
        Ok(())
    }

    /// Whether any version of the table is a stub.
    pub(crate) fn has_stubs(&self) -> bool {
        let layout = self.layout();
        let mut any = false;
        self.primary.for_each_head(|head| any = any || head.chain().any(|v| RowLayout::is_stub(v.row(layout))));
        any
    }

    /// Calls `f` with the key and reference of every stub of the table.
    pub(crate) fn for_each_stub(&self, mut f: impl FnMut(&[u8], ColdRef)) {
        let layout = self.layout();
        let mut key = Vec::new();
        self.primary.for_each_head(|head| {
            for v in head.chain() {
                let row = v.row(layout);
                if RowLayout::is_stub(row) {
                    self.pk_of(row, &mut key);
                    f(&key, RowLayout::stub_ref(row));
                }
            }
        });
    }
}

/// First committed, non-lock-only version at or below `v`.
fn latest_committed(mut cur: Option<VPtr>) -> Option<VPtr> {
    while let Some(v) = cur {
        let w = v.word();
        if !is_uncommitted(w) && !is_lock_only(w) {
            return Some(v);
        }
        cur = v.prev();
    }
    None
}

/// The version visible to (`me`, `snapshot`), None if none or deleted.
#[inline]
fn visible(head: VPtr, me: TxnId, snapshot: Snapshot) -> Option<VPtr> {
    let mut cur = Some(head);
    while let Some(v) = cur {
        let w = v.word();
        if !is_lock_only(w) {
            let mine_or_old = if is_uncommitted(w) { owner_of(w) == me } else { snapshot.sees(commit_ts_of(w)) };
            if mine_or_old {
                return if is_deleted(w) { None } else { Some(v) };
            }
        }
        cur = v.prev();
    }
    None
}

impl Drop for TableStore {
    fn drop(&mut self) {
        // Free every version so large (non-slab) rows are returned too.
        // Stubs release nothing here: a closing database's checkpoint names
        // them, and a dropped table's images are its store's to purge
        // (cold.rs).
        let layout = self.schema.layout.clone();
        self.primary.drain(|head| {
            for v in head.chain() {
                // SAFETY: the table is unreachable; nobody else holds versions.
                unsafe { v.free(&self.slab, &layout) };
            }
        });
    }
}

/// Encodes columns `cols` of `row` with the types/tags of the leading
/// columns of `spec` (cross-table key probes for foreign keys).
pub(crate) fn encode_cols_as(spec: &KeySpec, layout: &RowLayout, row: &[u8], cols: &[usize], out: &mut Vec<u8>) {
    out.clear();
    for (i, &c) in cols.iter().enumerate() {
        encode_column(out, layout.get(row, c), spec.types[i], spec.tagged[i]);
    }
}

/// True when rows `a` and `b` hold equal values in `cols`. Equal values
/// encode to equal index keys (the encoding normalizes -0.0; NaN, unequal
/// to itself, only makes this answer false).
pub(crate) fn cols_equal(layout: &RowLayout, a: &[u8], b: &[u8], cols: &[usize]) -> bool {
    cols.iter().all(|&c| layout.get(a, c) == layout.get(b, c))
}
