//! Transactions: the typed API `sql`, `cache` and applications call.
//!
//! READ COMMITTED as in PostgreSQL: each statement reads at a snapshot taken
//! when it starts (every API call is its own statement unless the caller
//! brackets several with [`Transaction::begin_statement`]); writers lock the
//! latest committed version (waiting for another writer to finish, then
//! re-reading it, as PostgreSQL's update re-check does). Any error aborts the
//! transaction (there are no savepoints): its changes are undone and its
//! locks released at once, and later calls fail with 25P02 until it ends.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use pgtier_wal::Lsn;

use crate::api::{CommitInfo, RowBuf, RowRef};
use crate::db::{CatalogState, CommitMode, DbInner, GcItem};
use crate::error::{EngineError, Result};
use crate::key::hash_key;
use crate::ordered::{ENTRY_BYTES_MAX, OrderedIndex, batch_entries, prefix_successor, prefix_successor_in_place};
use crate::schema::{ForeignKey, IndexDef, IndexId, IndexSchema, TableDef, TableId, TableSchema};
use crate::table::{Conflict, FkLink, IndexStore, InsertOutcome, Latest, TableMeta, TableStore, cols_equal, encode_cols_as};
use crate::types::{Value, coerce};
use crate::version::{DELETED, LOCK_ONLY, VPtr, is_deleted, is_lock_only, is_uncommitted, ts_of};
use crate::walrec::{RecordBuilder, RowOp};

/// Entries copied per ordered-index lock acquisition during scans.
const SCAN_BATCH_ENTRIES: usize = 128;
/// Queued GC items beyond which committers prune too.
const GC_HELP_QUEUE_LEN: usize = 4096;
/// Write sets up to this size are searched linearly.
const WRITE_INDEX_THRESHOLD: usize = 16;
/// Bound on optimistic install retries (each one means another commit
/// changed the row between our read and our install).
const INSTALL_RETRIES_MAX: usize = 10_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Active,
    /// An error aborted the transaction; already rolled back.
    Failed,
    Ended,
}

struct Held {
    store: Arc<TableStore>,
    meta: Arc<TableMeta>,
    /// Holds a shared table lock (false for tables created in this txn).
    shared: bool,
}

struct WriteEntry {
    held: u32,
    hash: u64,
    key_off: u32,
    key_len: u32,
    /// Our uncommitted head version of the row.
    head: VPtr,
    /// The row existed (committed, live) before our first write.
    had_base: bool,
}

enum Step {
    Row(usize),
    Ddl(usize),
}

enum DdlOp {
    CreateTable(Arc<TableSchema>, Vec<Arc<IndexSchema>>, Vec<Arc<ForeignKey>>),
    DropTable(TableId),
    CreateIndex(Arc<IndexSchema>),
    DropIndex(IndexId),
}

#[derive(Default)]
struct Scratch {
    key: Vec<u8>,
    scratch: Vec<u8>,
    row: Vec<u8>,
    base: Vec<u8>,
    entry: Vec<u8>,
    tmp: Vec<u8>,
    probe: Vec<u8>,
    batch: Vec<u8>,
    /// Encoded scan bounds (the lower one becomes the resume cursor).
    lo: Vec<u8>,
    hi: Vec<u8>,
    /// The last commit's WAL record builder and live-row deltas, reused.
    records: Option<RecordBuilder>,
    deltas: Vec<i64>,
}

/// Buffers a finished transaction leaves to the next one on its thread, so
/// the steady-state commit path does not allocate them again.
#[derive(Default)]
struct Recycled {
    /// The committed catalog the last transaction on this thread used:
    /// (database instance, catalog version, catalog). Reused while the
    /// version is unchanged, sparing a shared lock and refcount per begin.
    cat: Option<(u64, u64, Arc<CatalogState>)>,
    writes: Vec<WriteEntry>,
    order: Vec<Step>,
    held: Vec<Held>,
    s: Scratch,
}

/// Recycled buffers larger than this are dropped instead (bulk loads).
const RECYCLE_BYTES_MAX: usize = 256 << 10;

thread_local! {
    static RECYCLED: std::cell::RefCell<Option<Recycled>> = const { std::cell::RefCell::new(None) };
    /// Placeholder left in a finished transaction's `cat` (thread-local, so
    /// cloning it touches no shared cache line).
    static NO_CATALOG: Arc<CatalogState> = Arc::new(CatalogState::default());
}

pub struct Transaction {
    db: Arc<DbInner>,
    id: u64,
    snapshot: u64,
    mode: CommitMode,
    status: Status,
    in_statement: bool,
    /// The snapshot was taken by `begin` and no statement has used it yet.
    fresh_snapshot: bool,
    cat: Arc<CatalogState>,
    cat_version: u64,
    private_catalog: bool,
    held: Vec<Held>,
    writes: Vec<WriteEntry>,
    write_index: Option<HashMap<(u32, u64), u32>>,
    keys: Vec<u8>,
    order: Vec<Step>,
    ddl: Vec<DdlOp>,
    ddl_locked: bool,
    exclusive: Vec<Arc<TableStore>>,
    meta_undo: Vec<(Arc<TableStore>, Arc<TableMeta>)>,
    dropped: Vec<Arc<TableStore>>,
    /// A log position this transaction's result depends on without having
    /// written it (a sequence advanced in its own transaction): a `Sync`
    /// commit waits for it even when read-only.
    observed_lsn: Option<Lsn>,
    /// ON DELETE CASCADE / SET NULL actions in progress (nested): bounded,
    /// so a long chain of references fails instead of exhausting the stack.
    fk_action_depth: u32,
    s: Scratch,
}

impl Transaction {
    pub(crate) fn begin(db: Arc<DbInner>, mode: CommitMode) -> Result<Transaction> {
        let (id, snapshot) = db.txns.begin()?;
        // Version first, then catalog: a cached catalog is reused only if
        // no DDL committed since it was taken.
        let cat_version = db.catalog_version.load(Ordering::Acquire);
        let mut r = RECYCLED.with(|c| c.borrow_mut().take()).unwrap_or_default();
        let cat = match r.cat.take() {
            Some((instance, version, cat)) if instance == db.instance && version == cat_version => cat,
            _ => db.current_catalog(),
        };
        Ok(Transaction {
            db,
            id,
            snapshot,
            mode,
            status: Status::Active,
            in_statement: false,
            fresh_snapshot: true,
            cat,
            cat_version,
            private_catalog: false,
            held: r.held,
            writes: r.writes,
            write_index: None,
            keys: Vec::new(),
            order: r.order,
            ddl: Vec::new(),
            ddl_locked: false,
            exclusive: Vec::new(),
            meta_undo: Vec::new(),
            dropped: Vec::new(),
            observed_lsn: None,
            fk_action_depth: 0,
            s: r.s,
        })
    }

    pub(crate) fn db(&self) -> &Arc<DbInner> {
        &self.db
    }

    /// See `observed_lsn`.
    pub(crate) fn observe_lsn(&mut self, lsn: Lsn) {
        self.observed_lsn = self.observed_lsn.max(Some(lsn));
    }

    /// This transaction's id (also the lock owner shown in 40P01 details).
    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn commit_mode(&self) -> CommitMode {
        self.mode
    }

    /// Nothing written and no DDL so far: committing logs nothing, so the
    /// commit mode does not matter.
    pub fn is_read_only(&self) -> bool {
        self.writes.is_empty() && self.ddl.is_empty()
    }

    /// Changes the commit mode (`SET LOCAL synchronous_commit` style).
    pub fn set_commit_mode(&mut self, mode: CommitMode) {
        self.mode = mode;
    }

    /// The catalog this transaction sees (its own uncommitted DDL included).
    pub fn catalog(&self) -> &crate::schema::Catalog {
        &self.cat.catalog
    }

    /// Starts a statement: takes a new snapshot that all calls until
    /// [`Transaction::end_statement`] share (PostgreSQL statement snapshot).
    pub fn begin_statement(&mut self) -> Result<()> {
        self.check_active()?;
        self.refresh();
        self.in_statement = true;
        Ok(())
    }

    /// [`Transaction::begin_statement`] for a statement issued right after
    /// `begin` (autocommit): it reads at the snapshot `begin` took, which is
    /// as fresh, sparing two more fenced stores. Only the first statement
    /// may; later ones (and a first one issued after a pause, as after an
    /// explicit BEGIN) need [`Transaction::begin_statement`].
    pub fn begin_first_statement(&mut self) -> Result<()> {
        self.check_active()?;
        if !self.fresh_snapshot {
            self.refresh();
        }
        self.in_statement = true;
        Ok(())
    }

    pub fn end_statement(&mut self) {
        self.in_statement = false;
        self.fresh_snapshot = false;
    }

    /// The commit ts this statement reads at.
    pub fn snapshot_ts(&self) -> u64 {
        self.snapshot
    }

    fn check_active(&self) -> Result<()> {
        match self.status {
            Status::Active => Ok(()),
            Status::Failed | Status::Ended => Err(EngineError::TransactionAborted),
        }
    }

    fn refresh(&mut self) {
        self.fresh_snapshot = false;
        self.snapshot = self.db.txns.refresh_snapshot(self.id);
        if !self.private_catalog {
            self.follow_committed_catalog();
        }
    }

    /// Takes the committed catalog if DDL committed since ours was taken.
    /// Called after the snapshot is taken (version first, then catalog).
    fn follow_committed_catalog(&mut self) {
        let v = self.db.catalog_version.load(Ordering::Acquire);
        if v != self.cat_version {
            self.cat = self.db.current_catalog();
            self.cat_version = v;
        }
    }

    fn prologue(&mut self) -> Result<()> {
        self.check_active()?;
        if !self.in_statement {
            self.refresh();
        }
        Ok(())
    }

    /// Any error aborts the transaction, as in PostgreSQL.
    fn check<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if matches!(e, EngineError::Deadlock { .. }) {
                self.db.counters.deadlocks.fetch_add(1, Ordering::Relaxed);
            }
            if self.status == Status::Active {
                self.rollback_internal();
                self.status = Status::Failed;
            }
        }
        r
    }

    /// Waits for the log up to `lsn` to be durable; the thread's wait hook
    /// runs first if that means blocking.
    fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        if self.db.wal.durable_end() <= lsn {
            crate::wait_hook::before_wait();
        }
        Ok(self.db.wal.wait_durable(lsn)?)
    }

    fn wait(&self, owner: u64) -> Result<()> {
        self.db.txns.wait_for(self.id, owner, self.db.lock_deadline())
    }

    fn store(&self, table: TableId) -> Result<Arc<TableStore>> {
        self.cat.store(table).cloned().ok_or_else(|| EngineError::UndefinedTable { name: format!("table id {}", table.0) })
    }

    // ------------------------------------------------------------------ reads

    /// Reads the row with primary key `key` visible to this statement.
    pub fn get(&mut self, table: TableId, key: &[Value], out: &mut RowBuf) -> Result<bool> {
        self.prologue()?;
        let r = self.get_inner(table, key, out);
        self.check(r)
    }

    fn get_inner(&mut self, table: TableId, key: &[Value], out: &mut RowBuf) -> Result<bool> {
        let Some(store) = self.cat.store(table) else { return Err(undefined(table)) };
        check_key_arity(store, key)?;
        self.s.key.clear();
        if !store.pk.encode_values(key, &mut self.s.key) {
            return Ok(false);
        }
        let hash = hash_key(&self.s.key);
        let found = store.read_visible(hash, &self.s.key, self.id, self.snapshot, &mut self.s.scratch, &mut out.data);
        if found {
            out.set_schema(&store.schema);
        }
        Ok(found)
    }

    /// Like [`Transaction::get`] without copying: `f` sees the row in place.
    /// `f` runs under an internal read lock and must not call the engine.
    pub fn get_with<R>(&mut self, table: TableId, key: &[Value], f: impl FnOnce(RowRef<'_>) -> R) -> Result<Option<R>> {
        self.prologue()?;
        let Some(store) = self.cat.store(table) else {
            let e = Err(undefined(table));
            return self.check(e);
        };
        if let Err(e) = check_key_arity(store, key) {
            return self.check(Err(e));
        }
        self.s.key.clear();
        if !store.pk.encode_values(key, &mut self.s.key) {
            return Ok(None);
        }
        let hash = hash_key(&self.s.key);
        let schema = &store.schema;
        Ok(store.with_visible(hash, &self.s.key, self.id, self.snapshot, &mut self.s.scratch, |row| f(RowRef::new(schema, row))))
    }

    /// Scans index `index` over `[lower, upper]` (bounds on leading key
    /// columns; `Bound::Included(&[a])` on a composite key is a prefix
    /// bound). Calls `f` with each visible row in key order until it
    /// returns false; returns the number of rows visited.
    pub fn scan(&mut self, index: IndexId, lower: Bound<&[Value]>, upper: Bound<&[Value]>, f: impl FnMut(RowRef<'_>) -> Result<bool>) -> Result<u64> {
        self.prologue()?;
        let r = self.scan_inner(index, lower, upper, f);
        self.check(r)
    }

    /// All rows whose leading key columns equal `prefix`.
    pub fn scan_prefix(&mut self, index: IndexId, prefix: &[Value], f: impl FnMut(RowRef<'_>) -> Result<bool>) -> Result<u64> {
        self.scan(index, Bound::Included(prefix), Bound::Included(prefix), f)
    }

    fn scan_inner(&mut self, index: IndexId, lower: Bound<&[Value]>, upper: Bound<&[Value]>, mut f: impl FnMut(RowRef<'_>) -> Result<bool>) -> Result<u64> {
        let ischema = self.cat.catalog.index(index).cloned().ok_or_else(|| EngineError::UndefinedObject { what: "index", name: format!("id {}", index.0) })?;
        let store = self.store(ischema.table)?;
        let meta = store.meta();
        let Some(istore) = meta.index(index).cloned() else {
            return Err(EngineError::FeatureNotSupported(format!("range scan on hash-only index \"{}\"", ischema.name)));
        };
        let (mut lo, mut hi) = (std::mem::take(&mut self.s.lo), std::mem::take(&mut self.s.hi));
        let (mut from, to) = encode_bounds(&istore, lower, upper, &mut lo, &mut hi)?;
        if let Some(probe) = &istore.probe
            && whole_key_equality(&istore, lower, upper)
        {
            // At most one visible row has this key: the probe finds it
            // without walking the tree (see `probe`).
            if let Some(r) = self.probe_equal(&store, &istore, probe, &lo, &mut f) {
                (self.s.lo, self.s.hi) = (lo, hi);
                return r;
            }
        }
        let mut visited = 0u64;
        loop {
            self.s.batch.clear();
            let n = istore.tree.scan(from.of(&lo), to.of(&hi), SCAN_BATCH_ENTRIES, &mut self.s.batch);
            let batch = std::mem::take(&mut self.s.batch);
            let mut last: &[u8] = &[];
            let mut stop = false;
            for entry in batch_entries(&batch) {
                last = entry;
                let (index_key, pk) = istore.split(entry);
                let hash = hash_key(pk);
                let found = store.read_visible(hash, pk, self.id, self.snapshot, &mut self.s.scratch, &mut self.s.row);
                if !found {
                    continue;
                }
                if !istore.schema.primary {
                    // The entry may belong to another version of the row.
                    self.s.tmp.clear();
                    istore.spec.encode_row(store.layout(), &self.s.row, &mut self.s.tmp);
                    if self.s.tmp.as_slice() != index_key {
                        continue;
                    }
                }
                visited += 1;
                match f(RowRef::new(&store.schema, &self.s.row)) {
                    Ok(true) => {}
                    Ok(false) => {
                        stop = true;
                        break;
                    }
                    // The batch buffer is dropped on this error path.
                    Err(e) => return Err(e),
                }
            }
            if stop || n < SCAN_BATCH_ENTRIES {
                self.s.batch = batch;
                (self.s.lo, self.s.hi) = (lo, hi);
                return Ok(visited);
            }
            // Resume after the last entry of this batch.
            lo.clear();
            lo.extend_from_slice(last);
            from = BoundKind::Excluded;
            self.s.batch = batch;
        }
    }

    /// Visits the row of a unique secondary index whose whole key is `key`
    /// (encoded), found through the index's probe. None: too many rows once
    /// carried the key for the probe's bounded candidate list; scan the tree.
    fn probe_equal(
        &mut self,
        store: &TableStore,
        istore: &IndexStore,
        probe: &parking_lot::RwLock<crate::probe::ProbeTable>,
        key: &[u8],
        f: &mut impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Option<Result<u64>> {
        let mut candidates = [0u64; 8];
        let mut n = 0;
        let mut overflow = false;
        probe.read().candidates(hash_key(key), |pk_hash| {
            if candidates[..n].contains(&pk_hash) {
                return;
            }
            if n == candidates.len() {
                overflow = true;
                return;
            }
            candidates[n] = pk_hash;
            n += 1;
        });
        // Only a long history of one key moving between rows (within what
        // old snapshots still see) gets here.
        if overflow {
            return None;
        }
        let layout = store.layout();
        let mut tmp = std::mem::take(&mut self.s.tmp);
        let mut row = std::mem::take(&mut self.s.row);
        let mut visited = 0;
        let mut result = Ok(());
        for &pk_hash in &candidates[..n] {
            let found = store.read_visible_where(pk_hash, self.id, self.snapshot, &mut row, |r| {
                tmp.clear();
                istore.spec.encode_row(layout, r, &mut tmp);
                tmp.as_slice() == key
            });
            if found {
                visited += 1;
                result = f(RowRef::new(&store.schema, &row)).map(|_| ());
                break;
            }
        }
        (self.s.tmp, self.s.row) = (tmp, row);
        Some(result.map(|()| visited))
    }

    /// Visits every visible row of `table` (no order). Rows are copied out
    /// shard by shard, so `f` may call the engine.
    pub fn scan_table(&mut self, table: TableId, mut f: impl FnMut(RowRef<'_>) -> Result<bool>) -> Result<u64> {
        self.prologue()?;
        let store = match self.store(table) {
            Ok(s) => s,
            Err(e) => return self.check(Err(e)),
        };
        let mut visited = 0;
        let mut buf = std::mem::take(&mut self.s.batch);
        let shards = store.primary.shards().len();
        let mut result = Ok(visited);
        'outer: for shard in 0..shards {
            buf.clear();
            store.scan_shard(shard, self.id, self.snapshot, &mut buf);
            let mut at = 0;
            while at + 4 <= buf.len() {
                let len = u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
                let row = &buf[at + 4..at + 4 + len];
                at += 4 + len;
                visited += 1;
                match f(RowRef::new(&store.schema, row)) {
                    Ok(true) => {}
                    Ok(false) => break 'outer,
                    Err(e) => {
                        result = Err(e);
                        break 'outer;
                    }
                }
            }
        }
        self.s.batch = buf;
        let result = result.map(|_| visited);
        self.check(result)
    }

    // ----------------------------------------------------------------- writes

    fn hold(&mut self, table: TableId) -> Result<usize> {
        if let Some(i) = self.held.iter().position(|h| h.store.schema.id == table) {
            return Ok(i);
        }
        let store = self.store(table)?;
        let own_exclusive = self.exclusive.iter().any(|s| Arc::ptr_eq(s, &store));
        let created_here = self.private_catalog && self.db.current_catalog().store(table).is_none();
        let shared = !own_exclusive && !created_here;
        if shared {
            store.lock.lock_shared(self.db.lock_deadline(), &store.schema.name)?;
            if store.dropped.load(Ordering::Acquire) {
                store.lock.unlock_shared();
                return Err(EngineError::UndefinedTable { name: store.schema.name.clone() });
            }
        }
        let meta = store.meta();
        self.held.push(Held { store, meta, shared });
        Ok(self.held.len() - 1)
    }

    fn find_write(&self, held: usize, hash: u64, key: &[u8]) -> Option<usize> {
        let matches = |i: usize| {
            let w = &self.writes[i];
            w.held as usize == held && w.hash == hash && &self.keys[w.key_off as usize..(w.key_off + w.key_len) as usize] == key
        };
        if let Some(map) = &self.write_index {
            if let Some(&i) = map.get(&(held as u32, hash))
                && matches(i as usize) {
                    return Some(i as usize);
                }
            // Hash collision within the map: fall back to a scan.
            return (0..self.writes.len()).find(|&i| matches(i));
        }
        (0..self.writes.len()).find(|&i| matches(i))
    }

    fn record_write(&mut self, held: usize, hash: u64, own_before: bool, head: VPtr, had_base: bool) {
        if own_before {
            let key = std::mem::take(&mut self.s.key);
            let found = self.find_write(held, hash, &key);
            self.s.key = key;
            match found {
                Some(i) => self.writes[i].head = head,
                None => unreachable!("own version without a write-set entry"),
            }
            return;
        }
        let key_off = self.keys.len() as u32;
        self.keys.extend_from_slice(&self.s.key);
        let idx = self.writes.len();
        self.writes.push(WriteEntry { held: held as u32, hash, key_off, key_len: self.s.key.len() as u32, head, had_base });
        self.order.push(Step::Row(idx));
        if self.writes.len() > WRITE_INDEX_THRESHOLD {
            let map = self.write_index.get_or_insert_with(|| {
                let mut m = HashMap::new();
                for (i, w) in self.writes.iter().enumerate().take(idx) {
                    m.entry((w.held, w.hash)).or_insert(i as u32);
                }
                m
            });
            map.entry((held as u32, hash)).or_insert(idx as u32);
        }
    }

    /// Inserts a row (one value per column; start from
    /// [`TableSchema::default_row`] for INSERT with a column list).
    pub fn insert(&mut self, table: TableId, values: &[Value]) -> Result<()> {
        self.prologue()?;
        let r = self.insert_inner(table, values);
        self.check(r)
    }

    fn insert_inner(&mut self, table: TableId, values: &[Value]) -> Result<()> {
        let h = self.hold(table)?;
        let store = Arc::clone(&self.held[h].store);
        if store.schema.has_rowid() && values.last().is_some_and(Value::is_null) {
            let mut with_id = values.to_vec();
            if let Some(last) = with_id.last_mut() {
                *last = Value::Int8(store.allocate_rowid());
            }
            encode_row(&store.schema, &with_id, &mut self.s.row)?;
        } else {
            encode_row(&store.schema, values, &mut self.s.row)?;
        }
        self.insert_encoded(h, &store)
    }

    /// Inserts the row in `self.s.row`.
    fn insert_encoded(&mut self, h: usize, store: &Arc<TableStore>) -> Result<()> {
        let meta = Arc::clone(&self.held[h].meta);
        store.pk_of(&self.s.row, &mut self.s.key);
        let hash = hash_key(&self.s.key);
        let (head, replaced_tombstone) = loop {
            match store.insert(hash, &self.s.key, self.id, &self.s.row, &mut self.s.scratch) {
                InsertOutcome::Inserted { head, replaced_tombstone } => break (head, replaced_tombstone),
                InsertOutcome::Duplicate => {
                    return Err(unique_violation(&store.schema, &store.schema.primary_key, &self.cat, store.schema.primary_index, &self.s.row));
                }
                InsertOutcome::WaitFor(owner) => self.wait(owner)?,
            }
        };
        let over_own_delete = replaced_tombstone.is_some();
        self.record_write(h, hash, over_own_delete, head, false);
        if let Some(tombstone) = replaced_tombstone {
            // Entries only the replaced tombstone had; the new version is a
            // fresh insert for constraint purposes (its key may be taken now).
            store.cleanup_entries(&meta, &self.s.key, &[tombstone]);
        }
        let row = std::mem::take(&mut self.s.row);
        let r = self.after_write(store, &meta, &row, None, false, None);
        self.s.row = row;
        r
    }

    /// Index maintenance and constraint checks after installing `new_row`
    /// (whose previous image was `old_row`, if any) for the key in `self.s.key`.
    /// Index entries and foreign keys of a written row. `changed`: what an
    /// UPDATE assigned (other columns are copies of `old_row`), so indexes
    /// and foreign keys on none of its columns need no work.
    fn after_write(&mut self, store: &Arc<TableStore>, meta: &TableMeta, new_row: &[u8], old_row: Option<&[u8]>, old_was_own: bool, changed: Option<&[(usize, Value)]>) -> Result<()> {
        let layout = store.layout();
        let pk = std::mem::take(&mut self.s.key);
        let r = (|| {
            // Our previous version was replaced in place: drop the entries
            // only it had, before anything below can fail and abort (the
            // rollback only knows the newest image).
            if old_was_own
                && let Some(old) = old_row {
                    store.cleanup_entries(meta, &pk, &[old.to_vec()]);
                }
            let untouched = |cols: &[usize]| changed.is_some_and(|ch| !ch.iter().any(|(c, _)| cols.contains(c)));
            for index in &meta.indexes {
                if old_row.is_some() && untouched(&index.spec.columns) {
                    continue;
                }
                index.entry(layout, new_row, &pk, &mut self.s.entry);
                if let Some(old) = old_row {
                    index.entry(layout, old, &pk, &mut self.s.tmp);
                    if self.s.tmp == self.s.entry {
                        continue;
                    }
                }
                if self.s.entry.len() > ENTRY_BYTES_MAX {
                    return Err(EngineError::ProgramLimitExceeded {
                        message: format!("index row size {} exceeds maximum {ENTRY_BYTES_MAX} for index \"{}\"", self.s.entry.len(), index.schema.name),
                    });
                }
                if index.schema.unique && !index.schema.primary && !index.spec.row_has_null(layout, new_row) {
                    self.unique_insert(store, index, &pk, new_row)?;
                } else {
                    index.insert(&self.s.entry);
                }
            }
            for link in &meta.as_child {
                if old_row.is_some() && untouched(&link.fk.child_columns) {
                    continue;
                }
                self.check_parent(store, link, new_row, old_row)?;
            }
            if let Some(old) = old_row {
                for link in &meta.as_parent {
                    if !untouched(&link.fk.parent_columns) && !cols_equal(layout, old, new_row, &link.fk.parent_columns) {
                        self.check_children(store, link, old, false)?;
                    }
                }
            }
            Ok(())
        })();
        self.s.key = pk;
        r
    }

    fn unique_insert(&mut self, store: &TableStore, index: &IndexStore, pk: &[u8], row: &[u8]) -> Result<()> {
        loop {
            match store.unique_insert(index, &self.s.entry, pk, self.id) {
                Conflict::None => return Ok(()),
                Conflict::Committed | Conflict::Mine => {
                    return Err(unique_violation(&store.schema, &index.schema.columns, &self.cat, index.schema.id, row));
                }
                Conflict::WaitFor(owner) => self.wait(owner)?,
            }
        }
    }

    /// FK, child side: the referenced parent row must exist.
    fn check_parent(&mut self, store: &TableStore, link: &FkLink, new_row: &[u8], old_row: Option<&[u8]>) -> Result<()> {
        let fk = &link.fk;
        let layout = store.layout();
        if fk.child_columns.iter().any(|&c| layout.is_null(new_row, c)) {
            return Ok(()); // MATCH SIMPLE: a NULL column means no reference.
        }
        if old_row.is_some_and(|old| cols_equal(layout, old, new_row, &fk.child_columns)) {
            return Ok(());
        }
        let Some(parent) = link.other.upgrade() else { return Ok(()) };
        let parent_meta = parent.meta();
        loop {
            let outcome = if fk.parent_index == parent.schema.primary_index {
                encode_cols_as(&parent.pk, layout, new_row, &fk.child_columns, &mut self.s.probe);
                parent.parent_exists(&self.s.probe, self.id, &mut self.s.scratch)
            } else {
                let Some(pindex) = parent_meta.index(fk.parent_index) else { return Ok(()) };
                encode_cols_as(&pindex.spec, layout, new_row, &fk.child_columns, &mut self.s.probe);
                self.parent_exists_unique(&parent, pindex)
            };
            match outcome {
                Ok(true) => return Ok(()),
                Ok(false) => {
                    return Err(EngineError::ForeignKeyViolation {
                        constraint: fk.name.clone(),
                        message: format!("insert or update on table \"{}\" violates foreign key constraint \"{}\"", store.schema.name, fk.name),
                        detail: key_detail(&store.schema, new_row, &fk.child_columns, format_args!("is not present in table \"{}\".", parent.schema.name)),
                    });
                }
                Err(owner) => self.wait(owner)?,
            }
        }
    }

    fn parent_exists_unique(&mut self, parent: &TableStore, pindex: &IndexStore) -> std::result::Result<bool, u64> {
        let prefix = self.s.probe.clone();
        let upper = prefix_successor(&prefix);
        let mut batch = Vec::new();
        pindex.tree.scan(Bound::Included(&prefix), upper.as_deref().map_or(Bound::Unbounded, Bound::Excluded), usize::MAX, &mut batch);
        let mut tmp = Vec::new();
        for entry in batch_entries(&batch) {
            let (_, pk) = pindex.split(entry);
            let pred = |row: &[u8]| {
                tmp.clear();
                pindex.spec.encode_row(parent.layout(), row, &mut tmp);
                tmp == prefix
            };
            match parent.probe(pk, self.id, &mut self.s.scratch, pred) {
                Conflict::Committed | Conflict::Mine => return Ok(true),
                Conflict::WaitFor(owner) => return Err(owner),
                Conflict::None => {}
            }
        }
        Ok(false)
    }

    /// FK, parent side (RESTRICT): no row may still reference `old_row`.
    /// FK, parent side: `old_row`'s key is going away (deleted, or changed
    /// when not `deleting`). Rows still referencing it are an error, or,
    /// for a delete under ON DELETE CASCADE / SET NULL, are deleted or
    /// have their referencing columns set to NULL (in this transaction;
    /// their own references are followed the same way).
    fn check_children(&mut self, store: &TableStore, link: &FkLink, old_row: &[u8], deleting: bool) -> Result<()> {
        const FK_ACTION_DEPTH_MAX: u32 = 256;
        let fk = &link.fk;
        let action = if deleting { fk.on_delete } else { crate::schema::FkAction::NoAction };
        let layout = store.layout();
        if fk.parent_columns.iter().any(|&c| layout.is_null(old_row, c)) {
            return Ok(());
        }
        let Some(child) = link.other.upgrade() else { return Ok(()) };
        let child_meta = child.meta();
        let Some(cindex) = child_meta.index(fk.child_index).cloned() else { return Ok(()) };
        encode_cols_as(&cindex.spec, layout, old_row, &fk.parent_columns, &mut self.s.probe);
        let prefix = self.s.probe.clone();
        let upper = prefix_successor(&prefix);
        'retry: loop {
            let mut batch = Vec::new();
            cindex.tree.scan(Bound::Included(&prefix), upper.as_deref().map_or(Bound::Unbounded, Bound::Excluded), usize::MAX, &mut batch);
            let mut tmp = Vec::new();
            for entry in batch_entries(&batch) {
                let (_, child_pk) = cindex.split(entry);
                let mut child_key: Vec<Value> = Vec::new();
                let pred = |row: &[u8]| {
                    encode_cols_as(&cindex.spec, child.layout(), row, &fk.child_columns, &mut tmp);
                    let refers = tmp == prefix;
                    if refers && action != crate::schema::FkAction::NoAction {
                        let r = RowRef::new(&child.schema, row);
                        child_key = child.schema.primary_key.iter().map(|&c| r.get(c).to_owned_value()).collect();
                    }
                    refers
                };
                match child.probe(child_pk, self.id, &mut self.s.scratch, pred) {
                    Conflict::None => {}
                    Conflict::Committed | Conflict::Mine if action != crate::schema::FkAction::NoAction => {
                        if self.fk_action_depth >= FK_ACTION_DEPTH_MAX {
                            return Err(EngineError::ProgramLimitExceeded {
                                message: format!("foreign key actions nested deeper than {FK_ACTION_DEPTH_MAX} (constraint \"{}\")", fk.name),
                            });
                        }
                        self.fk_action_depth += 1;
                        let r = if action == crate::schema::FkAction::Cascade {
                            self.delete_inner(child.schema.id, &child_key, |_| Ok(true)).map(|_| ())
                        } else {
                            let changes: Vec<(usize, Value)> = fk.child_columns.iter().map(|&c| (c, Value::Null)).collect();
                            self.update_inner(child.schema.id, &child_key, |_| Ok(Some(changes.clone()))).map(|_| ())
                        };
                        self.fk_action_depth -= 1;
                        r?;
                    }
                    Conflict::Committed | Conflict::Mine => {
                        return Err(EngineError::ForeignKeyViolation {
                            constraint: fk.name.clone(),
                            message: format!(
                                "update or delete on table \"{}\" violates foreign key constraint \"{}\" on table \"{}\"",
                                store.schema.name, fk.name, child.schema.name
                            ),
                            detail: key_detail(&store.schema, old_row, &fk.parent_columns, format_args!("is still referenced from table \"{}\".", child.schema.name)),
                        });
                    }
                    Conflict::WaitFor(owner) => {
                        self.wait(owner)?;
                        continue 'retry;
                    }
                }
            }
            return Ok(());
        }
    }

    /// Sets columns of the row with primary key `key`; false if no such row.
    pub fn update(&mut self, table: TableId, key: &[Value], changes: &[(usize, Value)]) -> Result<bool> {
        self.update_with(table, key, |_| Ok(Some(changes.to_vec())))
    }

    /// Locks the latest committed version of the row (waiting for another
    /// writer to finish first) and calls `f` with it; `f` returns the column
    /// changes, or None to leave the row alone (its WHERE no longer holds).
    /// `f` may run more than once if the row changes under it.
    pub fn update_with(&mut self, table: TableId, key: &[Value], f: impl FnMut(RowRef<'_>) -> Result<Option<Vec<(usize, Value)>>>) -> Result<bool> {
        self.prologue()?;
        let r = self.update_inner(table, key, f);
        self.check(r)
    }

    fn update_inner(&mut self, table: TableId, key: &[Value], mut f: impl FnMut(RowRef<'_>) -> Result<Option<Vec<(usize, Value)>>>) -> Result<bool> {
        let h = self.hold(table)?;
        let store = Arc::clone(&self.held[h].store);
        check_key_arity(&store, key)?;
        self.s.key.clear();
        if !store.pk.encode_values(key, &mut self.s.key) {
            return Ok(false);
        }
        let hash = hash_key(&self.s.key);
        for _ in 0..INSTALL_RETRIES_MAX {
            let (head, word) = match store.latest(hash, &self.s.key, self.id, &mut self.s.scratch, &mut self.s.base) {
                Latest::Absent => return Ok(false),
                Latest::Locked(owner) => {
                    self.wait(owner)?;
                    continue;
                }
                Latest::Head { head, word } => (head, word),
            };
            if is_deleted(word) {
                return Ok(false);
            }
            let Some(changes) = f(RowRef::new(&store.schema, &self.s.base))? else { return Ok(false) };
            apply_changes(&store.schema, &self.s.base, &changes, &mut self.s.row)?;
            self.s.tmp.clear();
            store.pk.encode_row(store.layout(), &self.s.row, &mut self.s.tmp);
            if self.s.tmp != self.s.key {
                return self.update_key(h, &store, hash, head, word).map(|()| true);
            }
            let own = is_uncommitted(word);
            let Some(new_head) = store.install(hash, &self.s.key, self.id, head, word, &self.s.row, 0, &mut self.s.scratch) else {
                continue;
            };
            self.record_write(h, hash, own, new_head, true);
            let meta = Arc::clone(&self.held[h].meta);
            let (row, base) = (std::mem::take(&mut self.s.row), std::mem::take(&mut self.s.base));
            let r = self.after_write(&store, &meta, &row, Some(&base), own, Some(&changes));
            (self.s.row, self.s.base) = (row, base);
            return r.map(|()| true);
        }
        Err(EngineError::LockTimeout { detail: "row kept changing under an update".into() })
    }

    /// UPDATE that changes the primary key: delete the old row, insert the new.
    fn update_key(&mut self, h: usize, store: &Arc<TableStore>, hash: u64, head: VPtr, word: u64) -> Result<()> {
        // The old key goes by an UPDATE: its children are refused, never
        // deleted or detached (ON DELETE actions are for DELETE only).
        if !self.delete_installed(h, store, hash, head, word, false)? {
            return Err(EngineError::LockTimeout { detail: "row changed during a key update".into() });
        }
        self.insert_encoded(h, store)
    }

    /// Deletes the row with primary key `key`; false if no such row.
    pub fn delete(&mut self, table: TableId, key: &[Value]) -> Result<bool> {
        self.prologue()?;
        let r = self.delete_inner(table, key, |_| Ok(true));
        self.check(r)
    }

    /// DELETE of the row with primary key `key` if `f` holds on its latest
    /// version (after waiting for a writer that holds it): READ
    /// COMMITTED's recheck. False if there is no such row or `f` says no.
    pub fn delete_with(&mut self, table: TableId, key: &[Value], f: impl FnMut(RowRef<'_>) -> Result<bool>) -> Result<bool> {
        self.prologue()?;
        let r = self.delete_inner(table, key, f);
        self.check(r)
    }

    fn delete_inner(&mut self, table: TableId, key: &[Value], mut f: impl FnMut(RowRef<'_>) -> Result<bool>) -> Result<bool> {
        let h = self.hold(table)?;
        let store = Arc::clone(&self.held[h].store);
        check_key_arity(&store, key)?;
        self.s.key.clear();
        if !store.pk.encode_values(key, &mut self.s.key) {
            return Ok(false);
        }
        let hash = hash_key(&self.s.key);
        for _ in 0..INSTALL_RETRIES_MAX {
            let (head, word) = match store.latest(hash, &self.s.key, self.id, &mut self.s.scratch, &mut self.s.base) {
                Latest::Absent => return Ok(false),
                Latest::Locked(owner) => {
                    self.wait(owner)?;
                    continue;
                }
                Latest::Head { head, word } => (head, word),
            };
            if is_deleted(word) || !f(RowRef::new(&store.schema, &self.s.base))? {
                return Ok(false);
            }
            if self.delete_installed(h, &store, hash, head, word, true)? {
                return Ok(true);
            }
        }
        Err(EngineError::LockTimeout { detail: "row kept changing under a delete".into() })
    }

    /// Installs a tombstone over (`head`, `word`) whose image is in
    /// `self.s.base`; false if the head changed meanwhile.
    /// `deleting`: a DELETE (ON DELETE actions apply), not the delete half
    /// of a primary-key UPDATE.
    fn delete_installed(&mut self, h: usize, store: &Arc<TableStore>, hash: u64, head: VPtr, word: u64, deleting: bool) -> Result<bool> {
        let own = is_uncommitted(word);
        let Some(new_head) = store.install(hash, &self.s.key, self.id, head, word, &self.s.base, DELETED, &mut self.s.scratch) else {
            return Ok(false);
        };
        self.record_write(h, hash, own, new_head, true);
        let meta = Arc::clone(&self.held[h].meta);
        let base = std::mem::take(&mut self.s.base);
        let mut r = Ok(());
        for link in &meta.as_parent {
            r = self.check_children(store, link, &base, deleting);
            if r.is_err() {
                break;
            }
        }
        self.s.base = base;
        r.map(|()| true)
    }

    /// SELECT ... FOR UPDATE: locks the row and returns its latest
    /// committed version; false if it does not exist.
    pub fn get_for_update(&mut self, table: TableId, key: &[Value], out: &mut RowBuf) -> Result<bool> {
        self.prologue()?;
        let r = self.lock_inner(table, key, out);
        self.check(r)
    }

    fn lock_inner(&mut self, table: TableId, key: &[Value], out: &mut RowBuf) -> Result<bool> {
        let h = self.hold(table)?;
        let store = Arc::clone(&self.held[h].store);
        check_key_arity(&store, key)?;
        self.s.key.clear();
        if !store.pk.encode_values(key, &mut self.s.key) {
            return Ok(false);
        }
        let hash = hash_key(&self.s.key);
        for _ in 0..INSTALL_RETRIES_MAX {
            let (head, word) = match store.latest(hash, &self.s.key, self.id, &mut self.s.scratch, &mut out.data) {
                Latest::Absent => return Ok(false),
                Latest::Locked(owner) => {
                    self.wait(owner)?;
                    continue;
                }
                Latest::Head { head, word } => (head, word),
            };
            if is_deleted(word) {
                return Ok(false);
            }
            out.set_schema(&store.schema);
            if is_uncommitted(word) {
                return Ok(true); // Already ours.
            }
            if let Some(new_head) = store.install(hash, &self.s.key, self.id, head, word, &out.data, LOCK_ONLY, &mut self.s.scratch) {
                self.record_write(h, hash, false, new_head, true);
                return Ok(true);
            }
        }
        Err(EngineError::LockTimeout { detail: "row kept changing under a lock".into() })
    }

    // -------------------------------------------------------------------- DDL

    fn acquire_ddl(&mut self) -> Result<()> {
        if self.ddl_locked {
            return Ok(());
        }
        let deadline = self.db.lock_deadline();
        while self.db.ddl_owner.compare_exchange(0, self.id, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            if std::time::Instant::now() >= deadline {
                return Err(EngineError::LockTimeout { detail: "while waiting for another transaction's DDL".into() });
            }
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
        self.ddl_locked = true;
        // Base the private catalog on the latest committed one: no other
        // DDL can commit while we hold the DDL lock.
        self.cat = Arc::new((*self.db.current_catalog()).clone());
        self.private_catalog = true;
        for held in &mut self.held {
            held.meta = held.store.meta();
        }
        Ok(())
    }

    fn lock_exclusive(&mut self, store: &Arc<TableStore>) -> Result<()> {
        if self.exclusive.iter().any(|s| Arc::ptr_eq(s, store)) {
            return Ok(());
        }
        if self.db.current_catalog().store(store.schema.id).is_none() {
            return Ok(()); // Created by this transaction: nobody else can see it.
        }
        let own_shared = u64::from(self.held.iter().any(|h| h.shared && Arc::ptr_eq(&h.store, store)));
        store.lock.lock_exclusive(self.db.lock_deadline(), &store.schema.name, own_shared)?;
        self.exclusive.push(Arc::clone(store));
        Ok(())
    }

    fn set_meta(&mut self, store: &Arc<TableStore>, meta: TableMeta) {
        let meta = Arc::new(meta);
        let old = std::mem::replace(&mut *store.meta.write(), Arc::clone(&meta));
        self.meta_undo.push((Arc::clone(store), old));
        for held in &mut self.held {
            if Arc::ptr_eq(&held.store, store) {
                held.meta = Arc::clone(&meta);
            }
        }
    }

    fn catalog_mut(&mut self) -> &mut crate::schema::Catalog {
        Arc::make_mut(&mut Arc::make_mut(&mut self.cat).catalog)
    }

    /// CREATE TABLE (transactional: visible to others at commit).
    pub fn create_table(&mut self, def: &TableDef) -> Result<TableId> {
        self.check_active()?;
        let r = self.create_table_inner(def);
        self.check(r)
    }

    fn create_table_inner(&mut self, def: &TableDef) -> Result<TableId> {
        self.acquire_ddl()?;
        let (table, indexes, fks) = self.cat.catalog.plan_create_table(def)?;
        let table = Arc::new(table);
        let indexes: Vec<Arc<IndexSchema>> = indexes.into_iter().map(Arc::new).collect();
        let fks: Vec<Arc<ForeignKey>> = fks.into_iter().map(Arc::new).collect();
        let store = Arc::new(TableStore::new(Arc::clone(&table)));
        let mut meta = TableMeta::default();
        for index in indexes.iter().filter(|i| i.ordered) {
            meta.indexes.push(Arc::new(store.new_index_store(Arc::clone(index))));
        }
        for fk in &fks {
            if fk.parent == table.id {
                meta.as_child.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&store) });
                meta.as_parent.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&store) });
                continue;
            }
            let parent = self.store(fk.parent)?;
            self.lock_exclusive(&parent)?;
            let mut pmeta = (*parent.meta()).clone();
            pmeta.as_parent.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&store) });
            self.set_meta(&parent, pmeta);
            meta.as_child.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&parent) });
        }
        *store.meta.write() = Arc::new(meta);
        let id = table.id;
        self.catalog_mut().add_table(Arc::clone(&table), indexes.clone(), fks.clone());
        Arc::make_mut(&mut self.cat).set_store(id, Some(store));
        self.order.push(Step::Ddl(self.ddl.len()));
        self.ddl.push(DdlOp::CreateTable(table, indexes, fks));
        Ok(id)
    }

    /// DROP TABLE (RESTRICT: fails if another table's foreign key references it).
    pub fn drop_table(&mut self, name: &str) -> Result<()> {
        self.check_active()?;
        let r = self.drop_table_inner(name);
        self.check(r)
    }

    fn drop_table_inner(&mut self, name: &str) -> Result<()> {
        self.acquire_ddl()?;
        let table = self.cat.catalog.table_by_name(name).cloned().ok_or_else(|| EngineError::UndefinedTable { name: name.to_owned() })?;
        if let Some(fk) = self.cat.catalog.referencing(table.id).into_iter().find(|fk| fk.child != table.id) {
            let child = self.cat.catalog.table(fk.child).map_or_else(String::new, |t| t.name.clone());
            return Err(EngineError::definition(
                "2BP01",
                format!("cannot drop table {name} because other objects depend on it (constraint {} on table {child})", fk.name),
            ));
        }
        if let Some((user, column)) = self.cat.catalog.sequence_users(table.id).into_iter().find(|(t, _)| t.id != table.id) {
            return Err(EngineError::definition(
                "2BP01",
                format!(
                    "cannot drop sequence {name} because other objects depend on it (default value for column {} of table {})",
                    user.columns[column].name, user.name
                ),
            ));
        }
        let store = self.store(table.id)?;
        self.lock_exclusive(&store)?;
        for fk in self.cat.catalog.foreign_keys_of(table.id) {
            if fk.parent == table.id {
                continue;
            }
            let parent = self.store(fk.parent)?;
            self.lock_exclusive(&parent)?;
            let mut pmeta = (*parent.meta()).clone();
            pmeta.as_parent.retain(|l| l.fk.id != fk.id);
            self.set_meta(&parent, pmeta);
        }
        self.catalog_mut().remove_table(table.id);
        Arc::make_mut(&mut self.cat).set_store(table.id, None);
        self.dropped.push(store);
        self.order.push(Step::Ddl(self.ddl.len()));
        self.ddl.push(DdlOp::DropTable(table.id));
        // Sequences of serial and identity columns go with their table.
        for (seq, _) in table.columns.iter().filter_map(|c| c.sequence).filter(|(_, how)| how.owns()) {
            if let Some(seq_name) = self.cat.catalog.table(seq).map(|t| t.name.clone()) {
                self.drop_table_inner(&seq_name)?;
            }
        }
        Ok(())
    }

    /// CREATE [UNIQUE] INDEX; builds it from the table's current rows.
    pub fn create_index(&mut self, def: &IndexDef) -> Result<IndexId> {
        self.check_active()?;
        let r = self.create_index_inner(def);
        self.check(r)
    }

    fn create_index_inner(&mut self, def: &IndexDef) -> Result<IndexId> {
        self.acquire_ddl()?;
        let index = Arc::new(self.cat.catalog.plan_create_index(def)?);
        let store = self.store(index.table)?;
        self.lock_exclusive(&store)?;
        let built = build_index(&store, Arc::clone(&index), self.id)?;
        let mut meta = (*store.meta()).clone();
        meta.indexes.push(Arc::new(built));
        self.set_meta(&store, meta);
        self.catalog_mut().add_index(Arc::clone(&index));
        let id = index.id;
        self.order.push(Step::Ddl(self.ddl.len()));
        self.ddl.push(DdlOp::CreateIndex(index));
        Ok(id)
    }

    /// DROP INDEX (not the primary key's, nor one a foreign key relies on).
    pub fn drop_index(&mut self, name: &str) -> Result<()> {
        self.check_active()?;
        let r = self.drop_index_inner(name);
        self.check(r)
    }

    fn drop_index_inner(&mut self, name: &str) -> Result<()> {
        self.acquire_ddl()?;
        let index = self
            .cat
            .catalog
            .index_by_name(name)
            .cloned()
            .ok_or_else(|| EngineError::UndefinedObject { what: "index", name: name.to_owned() })?;
        let needed_by_fk = self.cat.catalog.referencing(index.table).iter().chain(self.cat.catalog.foreign_keys_of(index.table).iter()).any(|fk| fk.parent_index == index.id || fk.child_index == index.id);
        if index.primary || needed_by_fk {
            return Err(EngineError::definition("2BP01", format!("cannot drop index {name} because a constraint requires it")));
        }
        let store = self.store(index.table)?;
        self.lock_exclusive(&store)?;
        let mut meta = (*store.meta()).clone();
        meta.indexes.retain(|i| i.schema.id != index.id);
        self.set_meta(&store, meta);
        self.catalog_mut().remove_index(index.id);
        self.order.push(Step::Ddl(self.ddl.len()));
        self.ddl.push(DdlOp::DropIndex(index.id));
        Ok(())
    }

    // ------------------------------------------------------------ end of txn

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
            return Err(e);
        }
        let (commit_ts, lsn, prior_lsn) = match self.commit_critical(&mut builder) {
            Ok(v) => v,
            Err(e) => {
                self.rollback_internal();
                self.status = Status::Ended;
                return Err(e);
            }
        };
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
            if self.db.push_gc(item) > GC_HELP_QUEUE_LEN {
                self.db.gc_step(2);
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
        self.db.txns.visible_ts.fetch_max(commit_ts, Ordering::SeqCst);
        Ok(CommitInfo { commit_ts: Some(commit_ts), lsn, rolled_back: false })
    }

    fn build_records(&self, builder: &mut RecordBuilder, deltas: &mut [i64]) -> Result<()> {
        for step in &self.order {
            match step {
                Step::Row(i) => {
                    let w = &self.writes[*i];
                    let store = &self.held[w.held as usize].store;
                    let word = w.head.word();
                    let op = final_op(word, w.had_base);
                    let Some(op) = op else { continue };
                    deltas[w.held as usize] += match op {
                        RowOp::Insert => 1,
                        RowOp::Delete => -1,
                        RowOp::Update => 0,
                    };
                    builder.row(op, store.schema.id, w.head.row(store.layout()))?;
                }
                Step::Ddl(j) => match &self.ddl[*j] {
                    DdlOp::CreateTable(t, i, f) => builder.create_table(t, i, f)?,
                    DdlOp::DropTable(t) => builder.drop_table(*t)?,
                    DdlOp::CreateIndex(i) => builder.create_index(i)?,
                    DdlOp::DropIndex(i) => builder.drop_index(*i)?,
                },
            }
        }
        builder.finish();
        Ok(())
    }

    /// Under the commit lock: assign the commit ts, append the WAL records,
    /// stamp our versions, publish DDL. Short and allocation-free apart from
    /// the WAL's own buffer copy.
    fn commit_critical(&mut self, builder: &mut RecordBuilder) -> Result<(u64, Option<Lsn>, Option<Lsn>)> {
        let has_records = !builder.is_empty();
        let mut c = self.db.commit.lock();
        let commit_ts = c.last_ts + 1;
        let prior_lsn = c.last_lsn;
        let mut lsn = None;
        if has_records {
            builder.set_commit_ts(commit_ts);
            for chunk in &builder.chunks {
                lsn = Some(self.db.wal.append(chunk)?);
            }
        }
        for w in &self.writes {
            TableStore::stamp(w.head, commit_ts);
        }
        if !self.ddl.is_empty() {
            for store in &self.dropped {
                store.dropped.store(true, Ordering::Release);
            }
            *self.db.catalog.write() = Arc::clone(&self.cat);
            self.db.catalog_version.fetch_add(1, Ordering::AcqRel);
        }
        assert!(commit_ts > c.last_ts);
        c.last_ts = commit_ts;
        if lsn.is_some() {
            c.last_lsn = lsn;
        }
        Ok((commit_ts, lsn, prior_lsn))
    }

    fn gc_item(&mut self, commit_ts: u64) -> Option<GcItem> {
        if self.writes.is_empty() {
            return None;
        }
        // Only rows with an older version (or a tombstone) leave garbage;
        // fresh inserts do not (bulk loads queue nothing).
        let rows: Vec<_> = self
            .writes
            .iter()
            .filter(|w| w.had_base || w.head.prev().is_some() || is_deleted(w.head.word()) || is_lock_only(w.head.word()))
            .map(|w| (self.held[w.held as usize].store.schema.id, w.hash, w.key_off, w.key_len))
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
        if self.status == Status::Active {
            self.rollback_internal();
        }
        self.status = Status::Ended;
    }

    /// True until commit or rollback (a failed transaction is still open:
    /// it awaits its rollback).
    pub fn is_open(&self) -> bool {
        self.status != Status::Ended
    }

    /// Begins a new transaction in this ended one, reusing its buffers and,
    /// while no DDL has committed since, its catalog. An open transaction
    /// is rolled back first.
    pub fn restart(&mut self, mode: CommitMode) -> Result<()> {
        self.rollback_in_place();
        debug_assert!(self.held.is_empty() && self.exclusive.is_empty() && !self.ddl_locked);
        let (id, snapshot) = self.db.txns.begin()?;
        self.follow_committed_catalog();
        self.id = id;
        self.snapshot = snapshot;
        self.mode = mode;
        self.status = Status::Active;
        self.in_statement = false;
        self.fresh_snapshot = true;
        self.private_catalog = false;
        self.writes.clear();
        self.order.clear();
        self.write_index = None;
        self.keys.clear();
        self.ddl.clear();
        self.meta_undo.clear();
        self.dropped.clear();
        self.observed_lsn = None;
        Ok(())
    }

    fn rollback_internal(&mut self) {
        for i in (0..self.writes.len()).rev() {
            let w = &self.writes[i];
            let held = &self.held[w.held as usize];
            let key = &self.keys[w.key_off as usize..(w.key_off + w.key_len) as usize];
            let image = held.store.rollback_row(w.hash, key, self.id, &mut self.s.scratch);
            held.store.cleanup_entries(&held.meta, key, &[image]);
        }
        self.writes.clear();
        self.write_index = None;
        self.keys.clear();
        self.order.clear();
        while let Some((store, meta)) = self.meta_undo.pop() {
            *store.meta.write() = meta;
        }
        self.ddl.clear();
        self.dropped.clear();
        if self.private_catalog {
            // Back to the committed catalog (read under our DDL lock, so
            // no DDL commits in between): the private copy holds the
            // rolled-back DDL, and the next transaction on this thread
            // reuses whatever catalog this one ends with.
            self.cat_version = self.db.catalog_version.load(Ordering::Acquire);
            self.cat = self.db.current_catalog();
        }
        self.release_locks();
        self.db.txns.end(self.id);
        self.db.counters.rollbacks.fetch_add(1, Ordering::Relaxed);
    }

    fn release_locks(&mut self) {
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
            let released = self.db.ddl_owner.compare_exchange(self.id, 0, Ordering::AcqRel, Ordering::Relaxed);
            assert!(released.is_ok(), "DDL lock owned by someone else");
        }
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if self.status == Status::Active {
            self.rollback_internal();
            self.status = Status::Ended;
        }
        self.recycle();
    }
}

impl Transaction {
    fn recycle(&mut self) {
        assert!(self.held.is_empty(), "table locks outlive the transaction");
        self.writes.clear();
        self.order.clear();
        let s = &self.s;
        let bytes = s.key.capacity() + s.scratch.capacity() + s.row.capacity() + s.base.capacity() + s.entry.capacity()
            + s.tmp.capacity() + s.probe.capacity() + s.batch.capacity() + s.lo.capacity() + s.hi.capacity()
            + self.writes.capacity() * std::mem::size_of::<WriteEntry>();
        if bytes > RECYCLE_BYTES_MAX {
            return;
        }
        let cat = (!self.private_catalog).then(|| {
            let placeholder = NO_CATALOG.with(Arc::clone);
            (self.db.instance, self.cat_version, std::mem::replace(&mut self.cat, placeholder))
        });
        let r = Recycled {
            cat,
            writes: std::mem::take(&mut self.writes),
            order: std::mem::take(&mut self.order),
            held: std::mem::take(&mut self.held),
            s: std::mem::take(&mut self.s),
        };
        RECYCLED.with(|c| *c.borrow_mut() = Some(r));
    }
}

/// The op a write-set entry contributes at commit.
fn final_op(word: u64, had_base: bool) -> Option<RowOp> {
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

fn undefined(table: TableId) -> EngineError {
    EngineError::UndefinedTable { name: format!("table id {}", table.0) }
}

fn check_key_arity(store: &TableStore, key: &[Value]) -> Result<()> {
    if key.len() != store.schema.primary_key.len() {
        return Err(EngineError::definition(
            "42601",
            format!("primary key of \"{}\" has {} columns, {} values given", store.schema.name, store.schema.primary_key.len(), key.len()),
        ));
    }
    Ok(())
}

/// The kind of an encoded scan bound kept in a reused buffer.
#[derive(Clone, Copy)]
enum BoundKind {
    Included,
    Excluded,
    Unbounded,
}

impl BoundKind {
    fn of(self, key: &[u8]) -> Bound<&[u8]> {
        match self {
            BoundKind::Included => Bound::Included(key),
            BoundKind::Excluded => Bound::Excluded(key),
            BoundKind::Unbounded => Bound::Unbounded,
        }
    }
}

/// True when `[lower, upper]` asks for one whole key of `index`, none of
/// whose values is NULL (NULL keys may repeat in a unique index).
fn whole_key_equality(index: &IndexStore, lower: Bound<&[Value]>, upper: Bound<&[Value]>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => {
            l.len() == index.spec.columns.len() && (std::ptr::eq(l, u) || l == u) && !l.iter().any(Value::is_null)
        }
        _ => false,
    }
}

/// Encodes a scan's bounds into `lo`/`hi` (reused across scans, so a
/// point or prefix scan allocates nothing).
fn encode_bounds(index: &IndexStore, lower: Bound<&[Value]>, upper: Bound<&[Value]>, lo: &mut Vec<u8>, hi: &mut Vec<u8>) -> Result<(BoundKind, BoundKind)> {
    let enc = |vals: &[Value], out: &mut Vec<u8>| -> Result<()> {
        if vals.len() > index.spec.columns.len() {
            return Err(EngineError::definition("42601", format!("index \"{}\" has {} columns", index.schema.name, index.spec.columns.len())));
        }
        out.clear();
        if !index.spec.encode_values(vals, out) {
            return Err(EngineError::OutOfRange { message: format!("scan bound out of range for index \"{}\"", index.schema.name) });
        }
        Ok(())
    };
    let from = match lower {
        Bound::Included(v) => {
            enc(v, lo)?;
            BoundKind::Included
        }
        Bound::Excluded(v) => {
            enc(v, lo)?;
            if !prefix_successor_in_place(lo) {
                // Nothing sorts after an all-0xFF prefix: an empty range.
                lo.clear();
                lo.resize(ENTRY_BYTES_MAX + 1, 0xFF);
                return Ok((BoundKind::Excluded, BoundKind::Unbounded));
            }
            BoundKind::Included
        }
        Bound::Unbounded => BoundKind::Unbounded,
    };
    let to = match upper {
        // An equality prefix (both bounds the same slice): encoded once.
        Bound::Included(v) if matches!(lower, Bound::Included(l) if std::ptr::eq(l, v)) => {
            hi.clear();
            hi.extend_from_slice(lo);
            if prefix_successor_in_place(hi) { BoundKind::Excluded } else { BoundKind::Unbounded }
        }
        Bound::Included(v) => {
            enc(v, hi)?;
            if prefix_successor_in_place(hi) { BoundKind::Excluded } else { BoundKind::Unbounded }
        }
        Bound::Excluded(v) => {
            enc(v, hi)?;
            BoundKind::Excluded
        }
        Bound::Unbounded => BoundKind::Unbounded,
    };
    Ok((from, to))
}

/// Coerces `values` to the table's column types, checks NOT NULL, encodes.
pub(crate) fn encode_row(schema: &TableSchema, values: &[Value], out: &mut Vec<u8>) -> Result<()> {
    if values.len() != schema.columns.len() {
        return Err(EngineError::definition(
            "42601",
            format!("table \"{}\" has {} columns but {} values were supplied", schema.name, schema.columns.len(), values.len()),
        ));
    }
    let mut coerced: Vec<Cow<'_, Value>> = Vec::with_capacity(values.len());
    for (col, v) in schema.columns.iter().zip(values) {
        let c = if !v.is_of_type(col.ty) { Cow::Owned(coerce(v.clone(), col.ty, &col.name)?) } else { Cow::Borrowed(v) };
        if c.is_null() && !col.nullable {
            let detail = failing_row(schema, |k| values[k].to_string());
            return Err(EngineError::NotNullViolation { table: schema.name.clone(), column: col.name.clone(), detail });
        }
        coerced.push(c);
    }
    schema.layout().encode(&coerced, out)
}


/// New row = `base` with `changes`; fixed-width-only changes patch a copy.
fn apply_changes(schema: &TableSchema, base: &[u8], changes: &[(usize, Value)], out: &mut Vec<u8>) -> Result<()> {
    let layout = schema.layout();
    for (col, _) in changes {
        if *col >= schema.columns.len() {
            return Err(EngineError::UndefinedColumn { table: schema.name.clone(), column: format!("#{col}") });
        }
    }
    let check_null = |col: usize, v: &Value| {
        if v.is_null() && !schema.columns[col].nullable {
            let detail = failing_row(schema, |k| match changes.iter().rev().find(|(c, _)| *c == k) {
                Some((_, changed)) => changed.to_string(),
                None => layout.get(base, k).to_string(),
            });
            return Err(EngineError::NotNullViolation { table: schema.name.clone(), column: schema.columns[col].name.clone(), detail });
        }
        Ok(())
    };
    if changes.iter().all(|(c, _)| layout.is_fixed(*c)) {
        out.clear();
        out.extend_from_slice(base);
        for (col, v) in changes {
            let ty = schema.columns[*col].ty;
            let v = if !v.is_of_type(ty) { Cow::Owned(coerce(v.clone(), ty, &schema.columns[*col].name)?) } else { Cow::Borrowed(v) };
            check_null(*col, &v)?;
            layout.patch_fixed(out, *col, &v);
        }
        return Ok(());
    }
    let mut values: Vec<Value> = (0..schema.columns.len()).map(|c| layout.get(base, c).to_owned_value()).collect();
    for (col, v) in changes {
        values[*col] = v.clone();
    }
    encode_row(schema, &values, out)
}


/// ("a, b", "1, x") for error details.
/// PostgreSQL's DETAIL of a NOT NULL violation: the new row's user
/// columns in text form, `null` for NULL.
fn failing_row(schema: &TableSchema, value_text: impl Fn(usize) -> String) -> String {
    let vals: Vec<String> = (0..schema.visible_columns().len()).map(value_text).collect();
    format!("Failing row contains ({}).", vals.join(", "))
}

/// PostgreSQL's DETAIL for a key: `Key (a, b)=(1, x) <then>`, built in one
/// string (a failing INSERT in TATP's mix pays for it every time).
fn key_detail(schema: &TableSchema, row: &[u8], cols: &[usize], then: std::fmt::Arguments<'_>) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(64);
    s.push_str("Key (");
    for (i, &c) in cols.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&schema.columns[c].name);
    }
    s.push_str(")=(");
    for (i, &c) in cols.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{}", schema.layout().get(row, c));
    }
    s.push_str(") ");
    let _ = s.write_fmt(then);
    s
}

fn unique_violation(schema: &TableSchema, cols: &[usize], cat: &CatalogState, index: IndexId, row: &[u8]) -> EngineError {
    let constraint = cat.catalog.index(index).map_or_else(|| format!("{}_pkey", schema.name), |i| i.name.clone());
    EngineError::UniqueViolation { constraint, detail: key_detail(schema, row, cols, format_args!("already exists.")) }
}

/// Builds an index over the current rows: entries for every version (a
/// concurrent reader's snapshot may need an old one), UNIQUE checked on
/// each row's latest state.
fn build_index(store: &TableStore, schema: Arc<IndexSchema>, me: u64) -> Result<IndexStore> {
    let istore = store.new_index_store(Arc::clone(&schema));
    let layout = store.layout();
    let mut entries: Vec<Vec<u8>> = Vec::new();
    let mut latest_keys: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut pk = Vec::new();
    for shard in store.primary.shards() {
        let map = shard.map.read();
        for head in map.iter() {
            store.pk_of(head.row(layout), &mut pk);
            let mut cur = Some(*head);
            let mut latest_seen = false;
            while let Some(v) = cur {
                let mut e = Vec::new();
                istore.entry(layout, v.row(layout), &pk, &mut e);
                if e.len() > ENTRY_BYTES_MAX {
                    return Err(EngineError::ProgramLimitExceeded { message: format!("index row size {} exceeds maximum {ENTRY_BYTES_MAX} for index \"{}\"", e.len(), schema.name) });
                }
                let w = v.word();
                if !latest_seen && !is_lock_only(w) && (!is_uncommitted(w) || ts_of(w) == me) {
                    latest_seen = true;
                    if !is_deleted(w) && schema.unique && !istore.spec.row_has_null(layout, v.row(layout)) {
                        let (k, _) = istore.split(&e);
                        latest_keys.push((k.to_vec(), v.row(layout).to_vec()));
                    }
                }
                entries.push(e);
                cur = v.prev();
            }
        }
    }
    latest_keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if let Some(pair) = latest_keys.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(EngineError::UniqueViolation {
            constraint: schema.name.clone(),
            detail: key_detail(&store.schema, &pair[0].1, &schema.columns, format_args!("is duplicated.")),
        });
    }
    entries.sort_unstable();
    entries.dedup();
    Ok(IndexStore::new(schema, istore.spec, OrderedIndex::from_sorted(entries.iter().map(Vec::as_slice))))
}
