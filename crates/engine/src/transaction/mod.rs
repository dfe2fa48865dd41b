//! Transactions: the typed API `sql`, `cache` and applications call.
//!
//! READ COMMITTED as in PostgreSQL: each statement reads at a snapshot taken
//! when it starts (every API call is its own statement unless the caller
//! brackets several with [`Transaction::begin_statement`]); writers lock the
//! latest committed version (waiting for another writer to finish, then
//! re-reading it, as PostgreSQL's update re-check does). Any error aborts the
//! transaction: later calls fail with 25P02 until it ends. Without
//! savepoints its changes are undone and its locks released at once; with
//! them they stay until ROLLBACK TO one of them, which undoes what came
//! after it and makes the transaction active again (`savepoint`).
//!
//! Cache seams: an application transaction's lookup that finds nothing on a
//! table with a miss hook asks the hook; if it loaded rows, the statement's
//! snapshot is refreshed (READ COMMITTED: as if the statement started after
//! the load) and the lookup runs once more (`miss`). Transactions of every
//! other origin never wait for a row lock: 55P03 at once (see `wait`).
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the `Transaction` value: begin/restart, statements and snapshots, error handling |
//! | `reads` | point reads and scans at the statement snapshot |
//! | `writes` | the write set; insert, update, delete, lock (writers work on the latest version) |
//! | `constraints` | index maintenance, UNIQUE and foreign keys after a write |
//! | `ddl` | CREATE/DROP TABLE and INDEX, annotations, on a private catalog |
//! | `miss` | the miss path: the table's hook, a fresh snapshot, one retry |
//! | `commit` | commit (WAL, stamping, publication) and rollback |
//! | `savepoint` | SAVEPOINT, ROLLBACK TO, RELEASE: marks of the undo state |

mod commit;
mod constraints;
mod ddl;
mod deferred;
mod miss;
mod miss_rows;
mod reads;
pub(crate) mod replica;
mod savepoint;
mod writes;

pub use commit::{CommitInfo, wall_clock_us};
pub(crate) use writes::encode_row;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use pgtier_wal::Lsn;

use crate::catalog::CatalogState;
use crate::commit_mode::CommitMode;
use crate::db::DbInner;
use crate::error::{EngineError, Result};
use crate::ids::{Snapshot, TxnId};
use crate::key::hash_key;
use crate::origin::Origin;
use crate::row_meta::RowMeta;
use crate::schema::{IndexId, IndexSchema, TableDdl, TableId};
use crate::table::{TableMeta, TableStore};
use crate::txn_slots::WaitLimits;
use crate::types::Value;
use crate::version::VPtr;
use crate::walrec::RecordBuilder;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Active,
    /// An error aborted the transaction while savepoints were defined: its
    /// changes stay in place until ROLLBACK TO one of them (back to
    /// `Active`) or the end of the transaction (savepoint.rs).
    Aborted,
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
    /// Bit 31: the row existed (committed, live) before our first write.
    /// Bits 0..31: the id of the innermost savepoint when `head` was made
    /// (0: none); a write over an own version made before the innermost
    /// savepoint stacks a new version instead of overwriting it
    /// (savepoint.rs). Packed so the entry stays 32 bytes.
    bits: u32,
}

const HAD_BASE: u32 = 1 << 31;

impl WriteEntry {
    #[inline]
    fn had_base(&self) -> bool {
        self.bits & HAD_BASE != 0
    }

    /// See `bits`.
    #[inline]
    fn sp(&self) -> u32 {
        self.bits & !HAD_BASE
    }

    #[inline]
    fn set_sp(&mut self, sp: u32) {
        self.bits = (self.bits & HAD_BASE) | sp;
    }
}

enum Step {
    Row(usize),
    Ddl(usize),
}

/// A table's metadata before this transaction's DDL replaced it.
struct MetaUndo {
    store: Arc<TableStore>,
    old: Arc<TableMeta>,
}

enum DdlOp {
    CreateTable(TableDdl),
    DropTable(TableId),
    CreateIndex(Arc<IndexSchema>),
    DropIndex(IndexId),
    SetAnnotation(TableId, Option<String>),
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
    /// The foreign keys (bit i: the table's i-th as a child) whose missing
    /// parent `load_missing_parents` asked the miss hook for, for the row
    /// being inserted: `check_parent` does not ask again.
    parents_asked: u64,
}

/// Buffers a finished transaction leaves to the next one on its thread, so
/// the steady-state commit path does not allocate them again.
#[derive(Default)]
struct Recycled {
    /// The committed catalog the last transaction on this thread used.
    /// Reused while its version is unchanged, sparing a shared lock and
    /// refcount per begin.
    cat: Option<CachedCatalog>,
    writes: Vec<WriteEntry>,
    order: Vec<Step>,
    held: Vec<Held>,
    s: Scratch,
}

struct CachedCatalog {
    /// `DbInner::instance` of its database.
    instance: u64,
    version: u64,
    state: Arc<CatalogState>,
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
    id: TxnId,
    snapshot: Snapshot,
    mode: CommitMode,
    /// Logged with the commit; fixed once the transaction writes.
    origin: Origin,
    status: Status,
    in_statement: bool,
    /// `pin_snapshot` was called: one snapshot until the end, and no write
    /// over a row committed after it.
    pinned: bool,
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
    meta_undo: Vec<MetaUndo>,
    dropped: Vec<Arc<TableStore>>,
    /// A log position this transaction's result depends on without having
    /// written it (a sequence advanced in its own transaction): a `Sync`
    /// commit waits for it even when read-only.
    observed_lsn: Option<Lsn>,
    /// Savepoints, outermost first (savepoint.rs).
    savepoints: Vec<savepoint::Mark>,
    /// The id of the innermost savepoint (0: none); see `WriteEntry::bits`.
    sp_current: u32,
    /// The last savepoint id handed out in this transaction.
    sp_last: u32,
    /// Own versions a later write stacked a version over, with what
    /// rollback to a savepoint restores (savepoint.rs).
    sp_undo: Vec<savepoint::Undo>,
    /// ON DELETE CASCADE / SET NULL actions in progress (nested): bounded,
    /// so a long chain of references fails instead of exhausting the stack.
    fk_action_depth: u32,
    /// Deferred foreign-key checks and `SET CONSTRAINTS` modes (deferred.rs).
    deferred: deferred::Deferred,
    /// Ends a lock wait of the running statement with 57014 (its
    /// statement_timeout); set per statement by the SQL layer.
    statement_deadline: Option<Instant>,
    /// The session's cancel flag: a lock wait ends with 57014 when it is
    /// raised. Kept across `restart`, so set once per session.
    cancel: Option<Arc<AtomicBool>>,
    /// What miss hooks asked this transaction to keep until it ends
    /// (`MissResolution::Retry`, `MissHook::hold_present`): dropped with its locks.
    miss_holds: MissHolds,
    /// Rows miss hooks answered reads with, for the current statement
    /// snapshot only (miss_rows.rs): cleared whenever it changes.
    miss_rows: miss_rows::MissRows,
    /// A standby's apply of a received transaction (replica.rs): may
    /// write while the database is a standby.
    replica: bool,
    s: Scratch,
}

impl Transaction {
    pub(crate) fn begin(db: Arc<DbInner>, mode: CommitMode, origin: Origin) -> Result<Transaction> {
        let (id, snapshot) = db.txns.begin()?;
        // Version first, then catalog: a cached catalog is reused only if
        // no DDL committed since it was taken.
        let cat_version = db.catalog.version();
        let mut r = RECYCLED.with(|c| c.borrow_mut().take()).unwrap_or_default();
        let cat = match r.cat.take() {
            Some(c) if c.instance == db.instance && c.version == cat_version => c.state,
            _ => db.catalog.current(),
        };
        Ok(Transaction {
            db,
            id,
            snapshot,
            mode,
            origin,
            status: Status::Active,
            in_statement: false,
            pinned: false,
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
            savepoints: Vec::new(),
            sp_current: 0,
            sp_last: 0,
            sp_undo: Vec::new(),
            fk_action_depth: 0,
            deferred: deferred::Deferred::default(),
            statement_deadline: None,
            cancel: None,
            miss_holds: MissHolds::default(),
            miss_rows: miss_rows::MissRows::default(),
            replica: false,
            s: r.s,
        })
    }

    /// The database is a hot standby (replica.rs): `pg_is_in_recovery()`.
    pub fn is_standby(&self) -> bool {
        self.db.read_only.load(std::sync::atomic::Ordering::Relaxed) == crate::replica::READ_REPLICA_ONLY
    }

    pub(crate) fn db(&self) -> &Arc<DbInner> {
        &self.db
    }

    /// See `observed_lsn`.
    pub(crate) fn observe_lsn(&mut self, lsn: Lsn) {
        self.observed_lsn = self.observed_lsn.max(Some(lsn));
    }

    /// This transaction's id (also the lock owner shown in 40P01 details).
    pub fn id(&self) -> TxnId {
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

    /// The origin its commit is logged with (see [`Origin`]).
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Sets the origin, before the first write or DDL only: the origin
    /// also decides whether foreign keys are checked (see [`Origin`]), so
    /// writes already made would not match it. After one it fails with
    /// 25001 (as PostgreSQL refuses SET TRANSACTION ISOLATION LEVEL after
    /// the first query) and, like any error, aborts the transaction. Reads
    /// and `nextval` before it are fine.
    pub fn set_origin(&mut self, origin: Origin) -> Result<()> {
        self.check_active()?;
        if !self.is_read_only() {
            let e = EngineError::OriginAfterWrite { origin: origin.as_str() };
            return self.check(Err(e));
        }
        self.origin = origin;
        Ok(())
    }

    /// The catalog this transaction sees (its own uncommitted DDL included).
    pub fn catalog(&self) -> &crate::schema::Catalog {
        &self.cat.catalog
    }

    /// Committed live rows of `table` as of the catalog this transaction
    /// sees (its own uncommitted writes not counted); None for a table it
    /// does not see. An estimate for planning: it moves as others commit.
    pub fn estimated_rows(&self, table: crate::schema::TableId) -> Option<u64> {
        self.cat
            .store(table)
            .map(|s| u64::try_from(s.live_rows.load(std::sync::atomic::Ordering::Relaxed)).unwrap_or(0))
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
        self.in_statement = self.pinned;
        self.fresh_snapshot = false;
    }

    /// For the cache's own transactions (load, refresh, evict), which
    /// decide from what they read (an instance is absent, or unchanged
    /// since a position): takes one snapshot every later call shares until
    /// the end, and makes a write that finds a row whose latest version
    /// committed after it fail with 40001 instead of acting on that version.
    /// READ COMMITTED's recheck, right for an application, would let such a
    /// transaction replace a commit it never saw. Application transactions
    /// cannot pin (0A000).
    pub fn pin_snapshot(&mut self) -> Result<Snapshot> {
        if self.origin == Origin::Application {
            return Err(EngineError::FeatureNotSupported("pinning the snapshot of an application transaction".into()));
        }
        self.begin_statement()?;
        self.pinned = true;
        Ok(self.snapshot)
    }

    /// The commit ts this statement reads at.
    pub fn snapshot_ts(&self) -> Snapshot {
        self.snapshot
    }

    fn check_active(&self) -> Result<()> {
        match self.status {
            Status::Active => Ok(()),
            Status::Aborted | Status::Failed | Status::Ended => Err(EngineError::TransactionAborted),
        }
    }

    fn refresh(&mut self) {
        self.fresh_snapshot = false;
        self.snapshot = self.db.txns.refresh_snapshot(self.id);
        self.miss_rows.clear();
        if !self.private_catalog {
            self.follow_committed_catalog();
        }
    }

    /// Takes the committed catalog if DDL committed since ours was taken.
    /// Called after the snapshot is taken (version first, then catalog).
    fn follow_committed_catalog(&mut self) {
        let v = self.db.catalog.version();
        if v != self.cat_version {
            self.cat = self.db.catalog.current();
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
            self.fail();
        }
        r
    }

    /// The statement failed: without savepoints the transaction is undone
    /// at once; with them its changes wait for ROLLBACK TO (or the end).
    fn fail(&mut self) {
        if self.status == Status::Active {
            if self.savepoints.is_empty() {
                self.rollback_internal();
                self.status = Status::Failed;
            } else {
                self.status = Status::Aborted;
            }
        }
    }

    /// A statement failed outside the engine (an SQL-level error inside a
    /// transaction block): the transaction aborts as after an engine
    /// error (later calls: 25P02). See [`Transaction::rollback_to_savepoint`].
    pub fn statement_failed(&mut self) {
        self.fail();
    }

    /// Waits for the log up to `lsn` to be durable; the thread's wait hook
    /// runs first if that means blocking.
    fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        if self.db.wal.durable_end() <= lsn {
            crate::wait_hook::before_wait();
        }
        Ok(self.db.wal.wait_durable(lsn)?)
    }

    /// Waits for `owner`, which holds a row of `relation` we need. Only
    /// application transactions wait: the cache's own (load, refresh,
    /// evict, autorefresh) fail at once with 55P03. A miss hook's load runs
    /// while the application transaction that missed keeps its locks; if
    /// it waited for one of them (the application inserted the parent whose
    /// child it then missed on), neither could go on, and the wait-for graph
    /// would not see it (the application waits in the hook, not on a lock).
    fn wait(&self, owner: TxnId, relation: &str) -> Result<()> {
        if self.origin != Origin::Application {
            return Err(EngineError::LockNotAvailable {
                relation: relation.to_owned(),
                detail: format!(
                    "row locked by transaction {owner}; {} transactions do not wait for row locks",
                    self.origin
                ),
            });
        }
        self.db.counters.lock_waits.fetch_add(1, Ordering::Relaxed);
        let limits = WaitLimits {
            lock_deadline: self.db.lock_deadline(),
            statement_deadline: self.statement_deadline,
            cancel: self.cancel.as_deref(),
        };
        self.db.txns.wait_for(self.id, owner, &limits)
    }

    /// The running statement's deadline: a lock wait still going on then
    /// ends with 57014 "canceling statement due to statement timeout", as
    /// PostgreSQL's statement_timeout ends one. None: no limit but the
    /// database's lock timeout.
    #[inline]
    pub fn set_statement_deadline(&mut self, deadline: Option<Instant>) {
        self.statement_deadline = deadline;
    }

    /// A flag another thread raises to cancel the session's statement: a
    /// lock wait ends with 57014 "canceling statement due to user request"
    /// and lowers it. Kept across [`Transaction::restart`].
    pub fn set_cancel_flag(&mut self, cancel: Arc<AtomicBool>) {
        self.cancel = Some(cancel);
    }

    /// The tick to stamp the rows this transaction reads in `store` with,
    /// 0 for none: only application transactions' reads of tables that
    /// track access count (hook_slots.rs).
    #[inline]
    fn touch_tick(&self, store: &TableStore) -> u32 {
        if store.hooks.tracks_access() && self.origin == Origin::Application {
            self.db.access_tick.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// The row `key`'s last access stamp and its share of the table's
    /// memory (`Database::table_memory`); None when no version of it is
    /// stored (committed or not, visible or not: this reads storage, not
    /// the snapshot, and stamps nothing).
    pub fn row_meta(&mut self, table: TableId, key: &[Value]) -> Result<Option<RowMeta>> {
        self.check_active()?;
        let r = self.row_meta_inner(table, key);
        self.check(r)
    }

    fn row_meta_inner(&mut self, table: TableId, key: &[Value]) -> Result<Option<RowMeta>> {
        let store = self.store(table)?;
        let Some(hash) = encode_pk(&store, key, &mut self.s.key)? else { return Ok(None) };
        let meta = store.row_meta(hash, &self.s.key, &mut self.s.scratch, &mut self.s.entry);
        Ok(meta.map(|(last_access, bytes)| RowMeta { last_access, bytes }))
    }

    fn store(&self, table: TableId) -> Result<Arc<TableStore>> {
        self.cat
            .store(table)
            .cloned()
            .ok_or_else(|| EngineError::UndefinedTable { name: format!("table id {}", table.0) })
    }

    /// Begins a new transaction in this ended one, reusing its buffers and,
    /// while no DDL has committed since, its catalog. An open transaction
    /// is rolled back first. The origin is back to `Application`.
    pub fn restart(&mut self, mode: CommitMode) -> Result<()> {
        self.rollback_in_place();
        debug_assert!(self.held.is_empty() && self.exclusive.is_empty() && !self.ddl_locked);
        let (id, snapshot) = self.db.txns.begin()?;
        self.follow_committed_catalog();
        self.id = id;
        self.snapshot = snapshot;
        self.mode = mode;
        self.origin = Origin::Application;
        self.replica = false;
        self.status = Status::Active;
        self.in_statement = false;
        self.pinned = false;
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
        self.miss_holds.clear();
        self.miss_rows.clear();
        self.clear_savepoints();
        self.deferred.clear();
        Ok(())
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if matches!(self.status, Status::Active | Status::Aborted) {
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
        let bytes = s.key.capacity()
            + s.scratch.capacity()
            + s.row.capacity()
            + s.base.capacity()
            + s.entry.capacity()
            + s.tmp.capacity()
            + s.probe.capacity()
            + s.batch.capacity()
            + s.lo.capacity()
            + s.hi.capacity()
            + self.writes.capacity() * std::mem::size_of::<WriteEntry>();
        if bytes > RECYCLE_BYTES_MAX {
            return;
        }
        let cat = (!self.private_catalog).then(|| {
            let placeholder = NO_CATALOG.with(Arc::clone);
            CachedCatalog {
                instance: self.db.instance,
                version: self.cat_version,
                state: std::mem::replace(&mut self.cat, placeholder),
            }
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

fn undefined(table: TableId) -> EngineError {
    EngineError::UndefinedTable { name: format!("table id {}", table.0) }
}

/// Encodes `key`, one value per primary-key column, as `store`'s primary
/// key into `out` and returns its hash; None when no row can have that key
/// (a value out of its column's range).
#[inline]
fn encode_pk(store: &TableStore, key: &[Value], out: &mut Vec<u8>) -> Result<Option<u64>> {
    if key.len() != store.schema.primary_key.len() {
        return Err(key_arity_error(store, key.len()));
    }
    out.clear();
    if !store.pk.encode_values(key, out) {
        return Ok(None);
    }
    Ok(Some(hash_key(out)))
}

#[cold]
fn key_arity_error(store: &TableStore, given: usize) -> EngineError {
    EngineError::definition(
        "42601",
        format!(
            "primary key of \"{}\" has {} columns, {given} values given",
            store.schema.name,
            store.schema.primary_key.len()
        ),
    )
}

/// A transaction's holds from miss hooks, and the parent it last asked a
/// hook to hold for a new child row: the rows of a bulk insert under one
/// parent ask once, not once per row.
#[derive(Default)]
pub(super) struct MissHolds {
    holds: Vec<crate::seams::MissHold>,
    last_parent: Option<(crate::schema::TableId, Vec<Value>)>,
}

impl MissHolds {
    pub(super) fn extend(&mut self, hold: Option<crate::seams::MissHold>) {
        self.holds.extend(hold);
    }

    /// Whether `parent` (table, referenced values) is the one held last.
    pub(super) fn holds_parent(&self, table: crate::schema::TableId, values: &[Value]) -> bool {
        self.last_parent.as_ref().is_some_and(|(t, v)| *t == table && v.as_slice() == values)
    }

    pub(super) fn push_parent(
        &mut self,
        hold: crate::seams::MissHold,
        table: crate::schema::TableId,
        values: Vec<Value>,
    ) {
        self.holds.push(hold);
        self.last_parent = Some((table, values));
    }

    pub(super) fn clear(&mut self) {
        self.holds.clear();
        self.last_parent = None;
    }
}
