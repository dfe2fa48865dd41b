//! The database: configuration, open/close, and `DbInner`, which gathers
//! the subsystems. Each subsystem's state is a struct owned by its module
//! and handed to the code that needs it:
//!
//! | field | type (module) | touched by |
//! |---|---|---|
//! | `txns` | `TxnManager` (txn_slots) | transactions, GC (horizon), stats |
//! | `catalog` | `CommittedCatalog` (catalog) | transactions (DDL publishes), sequences, GC, checkpoint, verify, stream, stats |
//! | `commit` | `CommitOrder` (commit_order) | commit, checkpoint, close |
//! | `gc` | `Gc` (gc) | commit (queues work), background thread, vacuum, verify |
//! | `checkpoints` | `Checkpoints` (checkpoint) | background thread, `checkpoint()`, close, stats |
//! | `consumers` | `Consumers` (consumers) | commit streams, checkpoint (WAL retention) |
//! | `sequence_locks` | `SequenceLocks` (sequence) | `nextval`/`setval` |
//! | `counters` | `Counters` (stats) | transactions, stats |
//!
//! Recovery builds the persistent part (`recovery::Recovered`) and `open`
//! assembles the rest around it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use pgtier_wal::{Wal, WalConfig};

use crate::catalog::CommittedCatalog;
use crate::checkpoint::{CheckpointInfo, Checkpoints};
use crate::cold::{ColdRef, ColdRelease, ColdRow, ColdRows};
use crate::commit_mode::CommitMode;
use crate::commit_order::CommitOrder;
use crate::consumers::{ConsumerPosition, Consumers};
use crate::error::{EngineError, Result};
use crate::gc::Gc;
use crate::incarnation::Incarnation;
use crate::origin::Origin;
use crate::recovery::RecoveryReport;
use crate::schema::{Catalog, TableId};
use crate::seams::MissHook;
use crate::sequence::SequenceLocks;
use crate::stats::{Counters, DbStats};
use crate::table::TableStore;
use crate::transaction::Transaction;
use crate::txn_slots::TxnManager;
use crate::types::Value;
use crate::verify::TableCheck;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Default for transactions begun without an explicit mode.
    pub commit_mode: CommitMode,
    pub wal: WalConfig,
    /// Bound on concurrent transactions (slots); begin fails with 53300 beyond.
    pub max_transactions: usize,
    /// Bound on any lock wait (row, table, DDL); 55P03 after it.
    pub lock_timeout: Duration,
    /// Background checkpoint period (None: only on demand / by WAL volume).
    pub checkpoint_interval: Option<Duration>,
    /// Also checkpoint once this much WAL was written since the last one.
    pub checkpoint_wal_bytes: u64,
    /// Write a checkpoint in `close()` so the next open replays little WAL.
    pub checkpoint_on_close: bool,
    /// Run GC and checkpoints in a background thread.
    pub background: bool,
    /// Bound on queued GC work (committed transactions whose superseded
    /// versions await the snapshot horizon). Beyond it a full sweep runs.
    pub gc_queue_max: usize,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            commit_mode: CommitMode::Sync,
            wal: WalConfig::default(),
            max_transactions: 1024,
            lock_timeout: Duration::from_secs(30),
            checkpoint_interval: Some(Duration::from_secs(300)),
            checkpoint_wal_bytes: 512 << 20,
            checkpoint_on_close: true,
            background: true,
            gc_queue_max: 1 << 20,
        }
    }
}

/// Source of [`DbInner::instance`] ids.
static INSTANCES: AtomicU64 = AtomicU64::new(1);

pub(crate) struct DbInner {
    /// Unique per open database in this process (thread-local caches key on
    /// it; an address could be reused by the next database opened).
    pub(crate) instance: u64,
    dir: PathBuf,
    pub(crate) config: EngineConfig,
    pub(crate) wal: Wal,
    pub(crate) txns: TxnManager,
    pub(crate) catalog: CommittedCatalog,
    pub(crate) commit: CommitOrder,
    pub(crate) gc: Gc,
    pub(crate) checkpoints: Checkpoints,
    pub(crate) consumers: Consumers,
    /// The coarse clock rows are stamped with on access (hook_slots.rs):
    /// advanced by whoever ages rows (`Database::advance_access_tick`);
    /// starts at 1 so a stamp of 0 means never seen.
    pub(crate) access_tick: AtomicU32,
    /// Just past the start of the newest `Origin::Application` commit's last
    /// WAL record (see `Database::application_commit_end`).
    pub(crate) application_commit_end: AtomicU64,
    /// Who may write (replica.rs, `READ_*`): everyone; only replicated
    /// transactions (a hot standby); nobody (an active fenced off by its
    /// lost lease).
    pub(crate) read_only: std::sync::atomic::AtomicU8,
    /// Replication: what a commit that logged passes before it is
    /// acknowledged (replica.rs); unset: no replication.
    pub(crate) commit_gate: std::sync::OnceLock<Arc<dyn crate::replica::CommitGate>>,
    /// Consumers whose streams stop at a moving limit (replica.rs
    /// `limit_stream`): write-through on an active never passes what its
    /// standby has.
    pub(crate) stream_limits: Mutex<std::collections::HashMap<String, Arc<std::sync::atomic::AtomicU64>>>,
    /// Callers of one sequence take turns (sequence.rs).
    pub(crate) sequence_locks: SequenceLocks,
    /// Stub images GC freed, each batch with the WAL end it waits to be
    /// durable (cold.rs; `release_cold`).
    cold_releases: Mutex<Vec<ColdReleaseBatch>>,
    pub(crate) counters: Counters,
    shutdown: Shutdown,
    pub(crate) recovery: RecoveryReport,
    incarnation: Incarnation,
    /// The directory's lock file, released when the last handle goes:
    /// declared last, so it outlives every file written above.
    _lock: crate::files::DirLock,
}

impl DbInner {
    fn open(dir: &Path, config: EngineConfig) -> Result<DbInner> {
        let r = crate::recovery::open(dir, &config.wal)?;
        // Whatever the WAL holds at open may end with application commits.
        let wal_end = r.wal.end().0;
        Ok(DbInner {
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            dir: dir.to_path_buf(),
            txns: TxnManager::new(config.max_transactions, r.last_ts),
            wal: r.wal,
            catalog: CommittedCatalog::new(r.catalog),
            commit: CommitOrder::new(r.last_ts, r.last_commit_time_us),
            gc: Gc::new(config.gc_queue_max),
            checkpoints: Checkpoints::new(r.checkpoints),
            consumers: r.consumers,
            access_tick: AtomicU32::new(1),
            application_commit_end: AtomicU64::new(wal_end),
            read_only: std::sync::atomic::AtomicU8::new(crate::replica::READ_WRITE),
            commit_gate: std::sync::OnceLock::new(),
            stream_limits: Mutex::new(std::collections::HashMap::new()),
            sequence_locks: SequenceLocks::default(),
            cold_releases: Mutex::new(Vec::new()),
            counters: Counters::default(),
            shutdown: Shutdown::default(),
            recovery: r.report,
            incarnation: r.incarnation,
            _lock: r.lock,
            config,
        })
    }

    pub(crate) fn checkpoint(&self) -> Result<CheckpointInfo> {
        self.checkpoints.take(&self.dir, &self.wal, &self.commit, &self.catalog, &self.consumers)
    }

    pub(crate) fn backup(
        &self,
        dest: &Path,
        keep_wal_for: &[&str],
        progress: &mut dyn FnMut(crate::backup::CopyProgress),
    ) -> Result<crate::backup::BackupReport> {
        let source = crate::backup::Source {
            dir: &self.dir,
            wal: &self.wal,
            commit: &self.commit,
            catalog: &self.catalog,
            consumers: &self.consumers,
            checkpoints: &self.checkpoints,
            incarnation: &self.incarnation.id,
        };
        crate::backup::take(&source, dest, keep_wal_for, progress)
    }

    pub(crate) fn lock_deadline(&self) -> Instant {
        Instant::now() + self.config.lock_timeout
    }

    /// Hands the stubs GC freed to their tables' cold stores, each once
    /// the WAL is durable past the moment it was collected: by then the
    /// commit that made the stub unreachable survives a crash, so no
    /// recovery brings the stub back without its image. `wait`: wait for
    /// that durability now (vacuum) instead of leaving it for a later call.
    pub(crate) fn release_cold(&self, wait: bool) {
        let mut batches = self.cold_releases.lock();
        let cat = self.catalog.current();
        let mut taken = Vec::new();
        // Only tables with a store: the others' stubs (after a restart,
        // before it is attached) wait for it anyway, and this runs every GC
        // period, so the rest cost a flag test, not a lock.
        for store in cat.live_stores().filter(|s| s.hooks.has_cold_rows()) {
            let releases = store.take_cold_releases();
            if !releases.is_empty() {
                taken.push((Arc::clone(store), releases));
            }
        }
        if !taken.is_empty() {
            // Read after taking: every stub taken was freed after the commit
            // that superseded it had appended its record.
            batches.push(ColdReleaseBatch { wal_end: self.wal.end(), releases: taken });
        }
        if batches.is_empty() {
            return;
        }
        // `wait_durable(p)` waits for the record holding byte `p`: the last
        // byte before `wal_end` stands for everything appended before it.
        if wait
            && let Some(last) = batches.last()
            && self.wal.durable_end() < last.wal_end
            && self.wal.wait_durable(pgtier_wal::Lsn(last.wal_end.0 - 1)).is_err()
        {
            return;
        }
        let durable = self.wal.durable_end();
        let mut kept = Vec::new();
        for batch in batches.drain(..) {
            if batch.wal_end > durable {
                kept.push(batch);
                continue;
            }
            for (store, releases) in batch.releases {
                match store.hooks.cold_rows() {
                    Some(cold) => {
                        for (key, cold_ref) in &releases {
                            cold.release(store.schema.id, key, *cold_ref);
                        }
                    }
                    None => store.requeue_cold_releases(releases),
                }
            }
        }
        *batches = kept;
    }
}

/// Stubs freed by GC, waiting for the WAL to be durable through `wal_end`.
struct ColdReleaseBatch {
    wal_end: pgtier_wal::Lsn,
    releases: Vec<(Arc<TableStore>, Vec<ColdRelease>)>,
}

/// An open database directory. Cheap to share (`Clone` is an `Arc`).
#[derive(Clone)]
pub struct Database {
    pub(crate) inner: Arc<DbInner>,
    /// The background thread, stopped when the last handle that shares it
    /// drops. None in handles lent to a miss hook (`Database::lent`): they
    /// never stop it.
    background: Option<Arc<Mutex<Option<JoinHandle<()>>>>>,
}

impl Database {
    /// Opens (or creates) the database in `dir`: latest valid checkpoint +
    /// WAL replay, then secondary indexes are rebuilt.
    pub fn open(dir: &Path, config: EngineConfig) -> Result<Database> {
        let inner = Arc::new(DbInner::open(dir, config)?);
        let background = if inner.config.background {
            let bg = Arc::clone(&inner);
            let handle = std::thread::Builder::new()
                .name("pgtier-engine-bg".into())
                .spawn(move || background_loop(&bg))
                .map_err(|e| EngineError::io("spawn background thread", e))?;
            Some(handle)
        } else {
            None
        };
        Ok(Database { inner, background: Some(Arc::new(Mutex::new(background))) })
    }

    /// A handle on `inner` for a miss hook, built from inside a transaction
    /// (which holds only `Arc<DbInner>`): the hook needs no strong
    /// reference of its own, so no cycle database -> hook -> database.
    pub(crate) fn lent(inner: Arc<DbInner>) -> Database {
        Database { inner, background: None }
    }

    /// Installs (or removes, with None) the hook called when an
    /// application transaction's read of `table` finds nothing (see
    /// [`MissHook`]). Not persisted: install it after every open. Ignored
    /// for a table that does not exist (committed).
    pub fn set_miss_hook(&self, table: TableId, hook: Option<Arc<dyn MissHook>>) {
        if let Some(store) = self.inner.catalog.current().store(table) {
            store.hooks.set_miss_hook(hook);
        }
    }

    /// Installs (Some) or removes (None) the [`WriteGuard`] of `table`. Not
    /// persisted: install it after every open. Ignored for a table that does
    /// not exist (committed).
    pub fn set_write_guard(&self, table: TableId, guard: Option<Arc<dyn crate::WriteGuard>>) {
        if let Some(store) = self.inner.catalog.current().store(table) {
            store.hooks.set_write_guard(guard);
        }
    }

    /// Installs (Some) or removes (None) the [`crate::CommitParticipant`]
    /// of `table`. Not persisted: install it after every open. Ignored for a
    /// table that does not exist (committed).
    pub fn set_commit_participant(&self, table: TableId, participant: Option<Arc<dyn crate::CommitParticipant>>) {
        if let Some(store) = self.inner.catalog.current().store(table) {
            store.hooks.set_participant(participant);
        }
    }

    /// Installs (Some) or removes (None) the store of `table`'s cold row
    /// images (cold.rs). Not persisted: install it after every open, before
    /// the table's stubs are read (a stub met without it fails with
    /// XX001). Ignored for a table that does not exist (committed).
    pub fn set_cold_rows(&self, table: TableId, store: Option<Arc<dyn ColdRows>>) {
        if let Some(table) = self.inner.catalog.current().store(table) {
            table.hooks.set_cold_rows(store);
        }
    }

    /// Moves the images of rows `keys` (primary-key values) of `table` to
    /// its cold store, leaving stubs (cold.rs); returns how many moved. A
    /// row that is absent, locked, recently changed (an older version still
    /// under it) or already a stub stays as it is. 55000 when the table
    /// has no cold store.
    pub fn demote_rows(&self, table: TableId, keys: &[Vec<Value>]) -> Result<usize> {
        let store = self.demotion_store(table)?;
        let mut encoded = Vec::with_capacity(keys.len());
        for key in keys {
            let mut out = Vec::new();
            if key.len() == store.schema.primary_key.len() && store.pk.encode_values(key, &mut out) {
                encoded.push(out);
            }
        }
        self.demote_encoded(&store, &encoded)
    }

    /// Moves to `table`'s cold store up to `limit` rows whose access stamp
    /// ([`Database::access_tick`]) is below `idle_before`, in shard order
    /// from `from_shard` (a caller going round the table passes where it
    /// stopped); returns how many moved and the shard to start from next.
    pub fn demote_idle(
        &self,
        table: TableId,
        idle_before: u32,
        limit: usize,
        from_shard: usize,
    ) -> Result<(usize, usize)> {
        let store = self.demotion_store(table)?;
        let (keys, next) = store.idle_keys(idle_before, limit, from_shard);
        Ok((self.demote_encoded(&store, &keys)?, next))
    }

    /// Brings every stub of `table` back to a whole row in memory (the
    /// cold store is going away: the flash tier disabled); returns how many.
    /// The retained checkpoints name those stubs, so two checkpoints are
    /// taken before their images are released (waiting for the WAL), as
    /// CREATE INDEX does (cold.rs).
    pub fn promote_cold(&self, table: TableId) -> Result<usize> {
        let Some(store) = self.inner.catalog.current().store(table).cloned() else { return Ok(0) };
        let promoted = store.promote_stubs()?;
        let count = promoted.len();
        if count > 0 {
            self.inner.checkpoint()?;
            self.inner.checkpoint()?;
            store.requeue_cold_releases(promoted);
            self.inner.release_cold(true);
        }
        Ok(count)
    }

    /// Calls `f` with the encoded primary key and reference of every stub
    /// of `table`: what its cold store must keep (after a restart, the
    /// images it holds that no stub names are garbage).
    pub fn for_each_stub(&self, table: TableId, f: impl FnMut(&[u8], ColdRef)) {
        if let Some(store) = self.inner.catalog.current().store(table) {
            store.for_each_stub(f);
        }
    }

    fn demotion_store(&self, table: TableId) -> Result<Arc<TableStore>> {
        let Some(store) = self.inner.catalog.current().store(table).cloned() else {
            return Err(EngineError::UndefinedTable { name: format!("id {}", table.0) });
        };
        if !store.hooks.has_cold_rows() {
            return Err(EngineError::definition(
                "55000",
                format!("table \"{}\" has no store for rows outside memory", store.schema.name),
            ));
        }
        Ok(store)
    }

    /// The demotion of rows `keys` (encoded) of `store`: their images
    /// stored durably first, then each swapped for its stub if unchanged.
    /// Holds the table lock shared, so CREATE INDEX (which needs stubs to
    /// keep its columns) waits for it.
    fn demote_encoded(&self, store: &TableStore, keys: &[Vec<u8>]) -> Result<usize> {
        let Some(cold) = store.hooks.cold_rows() else { return Ok(0) };
        let deadline = std::time::Instant::now() + self.inner.config.lock_timeout;
        store.lock.lock_shared(deadline, &store.schema.name)?;
        struct Unlock<'a>(&'a TableStore);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                self.0.lock.unlock_shared();
            }
        }
        let _unlock = Unlock(store);
        let mut scratch = Vec::new();
        let mut found = Vec::new();
        for key in keys {
            let hash = crate::key::hash_key(key);
            let mut image = Vec::new();
            if let Some(at) = store.demotable(hash, key, &mut scratch, &mut image) {
                found.push((key, hash, at, image));
            }
        }
        if found.is_empty() {
            return Ok(0);
        }
        let rows: Vec<ColdRow<'_>> = found.iter().map(|(key, _, _, image)| ColdRow { key, image }).collect();
        let refs = cold.store(store.schema.id, &rows)?;
        assert_eq!(refs.len(), rows.len(), "a cold store returned {} references for {} rows", refs.len(), rows.len());
        let kept = store.stub_columns();
        let mut stub = Vec::new();
        let mut moved = 0;
        for ((key, hash, at, image), cold_ref) in found.iter().zip(refs) {
            store.layout().encode_stub(image, &kept, cold_ref, &mut stub)?;
            if store.swap_in_stub(*hash, key, *at, &stub, &mut scratch) {
                moved += 1;
            } else {
                cold.release(store.schema.id, key, cold_ref);
            }
        }
        Ok(moved)
    }

    /// Turns access stamps on or off for `table`: while on, every row an
    /// application transaction reads (get, get_with, scans, get_for_update,
    /// update, delete) and every row inserted gets the current
    /// [`Database::access_tick`] ([`crate::Transaction::row_meta`] reads it).
    /// Not persisted; ignored for a table that does not exist.
    pub fn set_access_tracking(&self, table: TableId, on: bool) {
        if let Some(store) = self.inner.catalog.current().store(table) {
            store.hooks.set_access_tracking(on);
        }
    }

    /// The access clock: a counter the caller advances (the cache's aging
    /// loop, e.g. once a second), starting at 1 when the database opens.
    /// A counter rather than a wall clock, so stamping a row costs a load,
    /// not a clock read, and tests can step it.
    pub fn access_tick(&self) -> u32 {
        self.inner.access_tick.load(Ordering::Relaxed)
    }

    /// Advances [`Database::access_tick`] by one; returns the new tick.
    pub fn advance_access_tick(&self) -> u32 {
        self.inner.access_tick.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
    }

    /// Bytes `table` holds in memory now: its row versions (headers
    /// included, as allocated) and its primary and secondary index entries;
    /// not the free space of its structures. Kept as rows come and go, so
    /// this reads counters, not rows. Deleted rows leave when GC prunes
    /// them: once no snapshot older than the delete is open, within a GC
    /// period (5 ms) of the commit, or at `vacuum()`. 0 for a table that
    /// does not exist.
    pub fn table_memory(&self, table: TableId) -> u64 {
        self.inner.catalog.current().store(table).map_or(0, |s| s.memory_bytes())
    }

    /// Committed live rows of `table` (a counter, not a scan).
    pub fn table_rows(&self, table: TableId) -> u64 {
        self.inner
            .catalog
            .current()
            .store(table)
            .map_or(0, |s| u64::try_from(s.live_rows.load(std::sync::atomic::Ordering::Relaxed)).unwrap_or(0))
    }

    /// Rows of `table` by how long ago they were last used, in ticks of
    /// [`Database::access_tick`]: `counts[i]` rows were used within
    /// `ages[i]` ticks of now (and not within `ages[i - 1]`), the last entry
    /// the rest, never stamped included (`ages` ascending; the result has
    /// one more entry). Reads the stamps of the stored rows (deleted ones
    /// left out), nothing else: cheap enough for a status query, though it
    /// visits every row. Empty counts for a table that does not exist.
    pub fn access_ages(&self, table: TableId, ages: &[u32]) -> Vec<u64> {
        debug_assert!(ages.windows(2).all(|w| w[0] <= w[1]), "ages not ascending: {ages:?}");
        let mut counts = vec![0u64; ages.len() + 1];
        let Some(store) = self.inner.catalog.current().store(table).cloned() else { return counts };
        let now = self.access_tick();
        store.primary.for_each_head(|head| {
            if crate::version::is_deleted(head.word()) {
                return;
            }
            let stamp = head.access();
            let age = if stamp == 0 { u32::MAX } else { now.wrapping_sub(stamp) };
            let bucket = ages.iter().position(|&limit| age <= limit).unwrap_or(ages.len());
            counts[bucket] += 1;
        });
        counts
    }

    /// [`Database::table_memory`] summed over every table.
    pub fn memory_total(&self) -> u64 {
        self.inner.catalog.current().live_stores().map(|s| s.memory_bytes()).sum()
    }

    /// Begins a transaction with the database's default commit mode.
    pub fn begin(&self) -> Result<Transaction> {
        self.begin_with(self.inner.config.commit_mode)
    }

    /// The commit mode transactions get unless told otherwise.
    pub fn default_commit_mode(&self) -> CommitMode {
        self.inner.config.commit_mode
    }

    pub fn begin_with(&self, mode: CommitMode) -> Result<Transaction> {
        Transaction::begin(Arc::clone(&self.inner), mode, Origin::Application)
    }

    /// Begins a transaction whose commit is logged with `origin` (loads,
    /// refreshes, evictions and autorefresh applies of the cache; see
    /// [`Origin`] for what changes besides the label).
    pub fn begin_with_origin(&self, mode: CommitMode, origin: Origin) -> Result<Transaction> {
        Transaction::begin(Arc::clone(&self.inner), mode, origin)
    }

    /// The committed catalog (tables, columns, indexes, foreign keys).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.inner.catalog.catalog()
    }

    /// Committed live rows of `table` (None: no such live table); an
    /// estimate for planning, see [`Transaction::estimated_rows`].
    pub fn estimated_rows(&self, table: TableId) -> Option<u64> {
        let state = self.inner.catalog.current();
        state.store(table).map(|s| u64::try_from(s.live_rows.load(Ordering::Relaxed)).unwrap_or(0))
    }

    /// Writes a fuzzy checkpoint now (writers keep running) and truncates
    /// the WAL below what is still needed.
    pub fn checkpoint(&self) -> Result<CheckpointInfo> {
        self.inner.checkpoint()
    }

    /// Copies the database into `dest` (created; must be empty) while
    /// writers go on: a checkpoint, the WAL after it up to an end point taken
    /// when the checkpoint is done, and a manifest (backup.rs). The copy holds
    /// exactly the transactions committed before the end point
    /// (`report.manifest.end_lsn`): everything acknowledged before the call,
    /// and nothing half. `progress` is told of every chunk copied.
    pub fn backup(
        &self,
        dest: &Path,
        progress: &mut dyn FnMut(crate::backup::CopyProgress),
    ) -> Result<crate::backup::BackupReport> {
        self.inner.backup(dest, &[], progress)
    }

    /// [`Database::backup`] whose WAL also holds what the consumers named
    /// in `keep_wal_for` have not processed yet (from before the
    /// checkpoint), so a copy restored with `restore_standby` can take their
    /// work over: write-through on a re-seeded standby that is promoted
    /// resumes where the active's stood.
    pub fn backup_keeping_wal_for(
        &self,
        dest: &Path,
        keep_wal_for: &[&str],
        progress: &mut dyn FnMut(crate::backup::CopyProgress),
    ) -> Result<crate::backup::BackupReport> {
        self.inner.backup(dest, keep_wal_for, progress)
    }

    /// Collects superseded versions that no snapshot needs any more.
    /// Walks every row of every table: for what commits leave behind,
    /// [`Database::collect_garbage`] costs only what they wrote.
    pub fn vacuum(&self) {
        self.inner.gc.full_sweep(&self.inner.txns, &self.inner.catalog);
        self.inner.release_cold(true);
    }

    /// Now, on the caller's thread, what the GC thread does every period:
    /// prunes the rows that committed transactions wrote, once no open
    /// snapshot needs their old versions (a full sweep only if GC's queue
    /// overflowed). For a caller that just deleted many rows and wants their
    /// memory back before it measures again (aging), without
    /// [`Database::vacuum`]'s walk of every table.
    pub fn collect_garbage(&self) {
        self.inner.gc.drain(&self.inner.txns, &self.inner.catalog);
        self.inner.gc.sweep_if_overflowed(&self.inner.txns, &self.inner.catalog);
        self.inner.release_cold(false);
    }

    /// [`Database::collect_garbage`] until the rows of every transaction
    /// committed before the call are pruned, or `timeout` passes (false
    /// then). A collection frees only what no open snapshot still sees, and
    /// sessions' snapshots come and go: a caller that just deleted many rows
    /// and will measure memory next (aging) waits here for the moment they
    /// are all gone, instead of measuring its own deletes as memory and
    /// evicting again for them.
    pub fn collect_garbage_committed(&self, timeout: std::time::Duration) -> bool {
        let through = self.inner.txns.visible();
        let deadline = std::time::Instant::now() + timeout;
        loop {
            self.collect_garbage();
            if !self.inner.gc.holds_through(through) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// A mark of the transactions committed so far, for
    /// [`Database::garbage_collected_since`].
    pub fn garbage_mark(&self) -> u64 {
        self.inner.txns.visible().get()
    }

    /// Whether garbage collection has pruned the rows of every transaction
    /// committed before `mark` was taken (nothing of theirs is queued).
    pub fn garbage_collected_since(&self, mark: u64) -> bool {
        !self.inner.gc.holds_through(crate::ids::CommitTs::new(mark))
    }

    /// The end of the WAL written so far (cheap: no table walk, unlike
    /// [`Database::stats`]); what a commit-stream consumer is behind of.
    pub fn wal_end(&self) -> crate::Lsn {
        self.inner.wal.end()
    }

    /// The end of the WAL made durable so far (cheap): a commit whose record
    /// lies before it survives a crash.
    pub fn wal_durable_end(&self) -> crate::Lsn {
        self.inner.wal.durable_end()
    }

    /// A WAL position every application transaction committed so far lies
    /// before (just past the start of the newest one's commit record; at
    /// open, the WAL's end): a consumer that read up to it has seen every
    /// application commit, whatever loads and evictions came after.
    pub fn application_commit_end(&self) -> crate::Lsn {
        crate::Lsn(self.inner.application_commit_end.load(Ordering::Acquire))
    }

    /// The newest commit ts assigned and the end of the WAL just after its
    /// records, read together under the commit lock: every commit with a
    /// larger ts is logged at or after that position. A consumer that
    /// copies a table at a snapshot and then follows the stream (the
    /// columnar copy) starts reading there, waits for a snapshot at or
    /// past that ts, and so misses no commit between the two.
    pub fn commit_point(&self) -> (crate::CommitTs, crate::Lsn) {
        let c = self.inner.commit.lock();
        (c.last_ts, self.inner.wal.end())
    }

    /// The oldest snapshot any transaction may still read at (the GC
    /// horizon): no statement running now or begun later reads at an older
    /// one. The columnar copy folds changes into its chunks only up to it,
    /// so every live statement's snapshot is still served.
    pub fn snapshot_horizon(&self) -> crate::Snapshot {
        self.inner.txns.horizon()
    }

    /// Makes everything written to the WAL so far durable now (what a
    /// synchronous commit waits for), so commit-stream consumers can read it
    /// without waiting for the next asynchronous flush.
    pub fn flush_wal(&self) -> Result<()> {
        // The last byte written, not the end (wait_durable takes a record position).
        let last = crate::Lsn(self.inner.wal.end().0.saturating_sub(1));
        self.inner.wal.wait_durable(last).map_err(Into::into)
    }

    pub fn stats(&self) -> DbStats {
        crate::stats::collect(&self.inner)
    }

    /// Checks storage invariants (tests, `pgtier admin check`): every live
    /// row has its entry in each ordered index, every entry's key is held
    /// by some version of its row, UNIQUE holds over live rows, row counts
    /// match. Returns live rows and index entries per table. Run it quiesced.
    pub fn verify(&self) -> Result<Vec<TableCheck>> {
        crate::verify::verify(&self.inner.catalog, &self.inner.gc)
    }

    pub fn recovery_report(&self) -> RecoveryReport {
        self.inner.recovery.clone()
    }

    /// The directory's identity, made when it was created (incarnation.rs):
    /// what positions stored outside it are keyed by.
    pub fn incarnation(&self) -> &Incarnation {
        &self.inner.incarnation
    }

    /// Stops background work, optionally checkpoints, flushes the WAL.
    /// Open transactions keep the storage alive until they end.
    pub fn close(self) -> Result<()> {
        self.stop_background();
        if self.inner.config.checkpoint_on_close {
            self.inner.checkpoint()?;
        }
        if let Some(lsn) = self.inner.commit.last_lsn() {
            self.inner.wal.wait_durable(lsn)?;
        }
        Ok(())
    }

    fn stop_background(&self) {
        let Some(background) = &self.background else { return };
        self.inner.shutdown.request();
        if let Some(handle) = background.lock().take() {
            let _ = handle.join();
        }
    }

    /// Registers a commit-stream consumer (see [`crate::CommitStream`]).
    pub fn register_consumer(&self, name: &str, start: crate::StreamStart) -> Result<()> {
        self.inner.consumers.register(&self.inner.wal, name, start)
    }

    pub fn unregister_consumer(&self, name: &str) -> Result<()> {
        self.inner.consumers.unregister(name)
    }

    /// Opens the stream of committed transactions for a registered consumer,
    /// positioned after its last acknowledged transaction.
    pub fn stream(&self, name: &str) -> Result<crate::CommitStream> {
        crate::stream::open(Arc::clone(&self.inner), name)
    }

    /// Consumers and their acknowledged positions.
    pub fn consumers(&self) -> Vec<ConsumerPosition> {
        self.inner.consumers.list()
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if self.background.as_ref().is_some_and(|b| Arc::strong_count(b) == 1) {
            self.stop_background();
        }
    }
}

/// Tells the background thread to stop, waking it from its nap.
#[derive(Default)]
struct Shutdown {
    requested: Mutex<bool>,
    wake: Condvar,
}

impl Shutdown {
    fn request(&self) {
        *self.requested.lock() = true;
        self.wake.notify_all();
    }

    /// Naps up to `period`; true once a stop was requested.
    fn nap(&self, period: Duration) -> bool {
        let mut stop = self.requested.lock();
        if *stop {
            return true;
        }
        self.wake.wait_for(&mut stop, period);
        *stop
    }
}

fn background_loop(db: &DbInner) {
    let gc_period = Duration::from_millis(5);
    while !db.shutdown.nap(gc_period) {
        // The background thread waits its turn behind a committer helping
        // (only committers give up rather than wait: their commit path
        // stays short).
        db.gc.drain(&db.txns, &db.catalog);
        db.gc.sweep_if_overflowed(&db.txns, &db.catalog);
        db.release_cold(false);
        if db.checkpoints.due(&db.wal, db.config.checkpoint_interval, db.config.checkpoint_wal_bytes) {
            // A failed background checkpoint is retried next period; the
            // previous checkpoint and the WAL it needs remain in place.
            let _ = db.checkpoint();
        }
    }
}
