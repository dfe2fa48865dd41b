//! The database: configuration, open/close, the commit path's shared state,
//! version GC, the background maintenance thread and statistics.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::{Condvar, Mutex, RwLock};
use pgtier_wal::{Lsn, Wal, WalConfig, WalStats};

use crate::error::{EngineError, Result};
use crate::ids::{CommitTs, Snapshot};
use crate::schema::{Catalog, TableId};
use crate::stream::ConsumerRegistry;
use crate::table::TableStore;
use crate::transaction::Transaction;
use crate::txn::TxnManager;

/// When a commit is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitMode {
    /// After the WAL record is on stable storage (group commit: concurrent
    /// committers share one fdatasync). Visible to others only then.
    Sync,
    /// Once the record is in the WAL buffer; the WAL writes it within
    /// `WalConfig::async_flush_interval`. A crash may lose that suffix.
    Async,
}

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

/// Committed catalog plus the storage of each live table.
#[derive(Clone, Default)]
pub(crate) struct CatalogState {
    pub(crate) catalog: Arc<Catalog>,
    /// Indexed by table id; None for ids of dropped tables.
    pub(crate) stores: Vec<Option<Arc<TableStore>>>,
}

impl CatalogState {
    pub(crate) fn store(&self, id: TableId) -> Option<&Arc<TableStore>> {
        self.stores.get(id.0 as usize).and_then(Option::as_ref)
    }
    pub(crate) fn set_store(&mut self, id: TableId, store: Option<Arc<TableStore>>) {
        let i = id.0 as usize;
        if self.stores.len() <= i {
            self.stores.resize(i + 1, None);
        }
        self.stores[i] = store;
    }
    pub(crate) fn live_stores(&self) -> impl Iterator<Item = &Arc<TableStore>> {
        self.stores.iter().flatten()
    }
}

pub(crate) struct CommitState {
    pub(crate) last_ts: CommitTs,
    /// LSN of the last record appended (for checkpoint durability waits).
    pub(crate) last_lsn: Option<Lsn>,
}

/// Work for GC: rows a committed transaction wrote.
pub(crate) struct GcItem {
    pub(crate) commit_ts: CommitTs,
    pub(crate) rows: Vec<(TableId, u64, u32, u32)>,
    pub(crate) keys: Vec<u8>,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) commits: AtomicU64,
    pub(crate) commits_sync: AtomicU64,
    pub(crate) rollbacks: AtomicU64,
    pub(crate) deadlocks: AtomicU64,
    pub(crate) gc_versions_freed: AtomicU64,
    pub(crate) gc_full_sweeps: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
}

/// Result of a checkpoint.
#[derive(Clone, Debug)]
pub struct CheckpointInfo {
    /// Replay starts here; WAL before it is not needed by this checkpoint.
    pub start_lsn: Lsn,
    pub rows: u64,
    pub bytes: u64,
    pub duration: Duration,
    pub completed_at: SystemTime,
    pub path: PathBuf,
}

/// Source of [`DbInner::instance`] ids.
pub(crate) static INSTANCES: AtomicU64 = AtomicU64::new(1);

pub(crate) struct DbInner {
    /// Unique per open database in this process (thread-local caches key on
    /// it; an address could be reused by the next database opened).
    pub(crate) instance: u64,
    pub(crate) dir: PathBuf,
    pub(crate) config: EngineConfig,
    pub(crate) wal: Wal,
    pub(crate) txns: TxnManager,
    pub(crate) catalog: RwLock<Arc<CatalogState>>,
    pub(crate) catalog_version: AtomicU64,
    pub(crate) commit: Mutex<CommitState>,
    /// Transaction id holding the DDL lock (0: free). One DDL txn at a time.
    pub(crate) ddl_owner: AtomicU64,
    pub(crate) gc: Mutex<VecDeque<GcItem>>,
    pub(crate) gc_overflowed: AtomicBool,
    /// Held shared by each row prune, from freeing versions to removing
    /// their index entries; `verify` holds it exclusively, so it never sees
    /// the moment between (entries whose versions are already gone).
    pub(crate) pruning: RwLock<()>,
    /// Callers of one sequence take turns (sequence.rs).
    pub(crate) sequence_locks: crate::sequence::SequenceLocks,
    pub(crate) counters: Counters,
    /// Retained checkpoint files, oldest first.
    pub(crate) checkpoints: Mutex<Vec<CheckpointInfo>>,
    /// One checkpoint at a time.
    pub(crate) checkpoint_serial: Mutex<()>,
    pub(crate) consumers: Mutex<ConsumerRegistry>,
    pub(crate) shutdown: Mutex<bool>,
    pub(crate) shutdown_cv: Condvar,
    pub(crate) recovery: RecoveryReport,
}

/// What `open` did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub checkpoint_lsn: Option<Lsn>,
    pub checkpoint_rows: u64,
    pub wal_records_replayed: u64,
    pub wal_ops_replayed: u64,
    pub duration: Duration,
    pub load_duration: Duration,
    pub replay_duration: Duration,
    pub index_build_duration: Duration,
}

/// Per-table statistics.
#[derive(Clone, Debug)]
pub struct TableStats {
    pub id: TableId,
    pub name: String,
    /// Committed live rows.
    pub rows: u64,
    /// Bytes reserved for row versions (slab chunks).
    pub row_bytes: u64,
    /// Bytes in live versions (including not-yet-collected old versions).
    pub row_bytes_used: u64,
    /// Primary hash slots plus ordered-index pages.
    pub index_bytes: u64,
}

#[derive(Clone, Debug)]
pub struct DbStats {
    pub tables: Vec<TableStats>,
    pub commits: u64,
    pub commits_sync: u64,
    pub rollbacks: u64,
    pub deadlocks: u64,
    pub wal_end: Lsn,
    pub wal_durable_end: Lsn,
    pub wal: WalStats,
    pub last_checkpoint: Option<CheckpointInfo>,
    pub checkpoint_age: Option<Duration>,
    pub checkpoints: u64,
    pub visible_ts: u64,
    pub active_transactions: usize,
    pub gc_queue_len: usize,
    pub gc_versions_freed: u64,
    pub recovery: RecoveryReport,
}

/// An open database directory. Cheap to share (`Clone` is an `Arc`).
#[derive(Clone)]
pub struct Database {
    pub(crate) inner: Arc<DbInner>,
    background: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Database {
    /// Opens (or creates) the database in `dir`: latest valid checkpoint +
    /// WAL replay, then secondary indexes are rebuilt.
    pub fn open(dir: &Path, config: EngineConfig) -> Result<Database> {
        let inner = Arc::new(crate::recovery::open(dir, config)?);
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
        Ok(Database { inner, background: Arc::new(Mutex::new(background)) })
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
        Transaction::begin(Arc::clone(&self.inner), mode)
    }

    /// The committed catalog (tables, columns, indexes, foreign keys).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.inner.catalog.read().catalog.clone()
    }

    /// Writes a fuzzy checkpoint now (writers keep running) and truncates
    /// the WAL below what is still needed.
    pub fn checkpoint(&self) -> Result<CheckpointInfo> {
        crate::checkpoint::checkpoint(&self.inner)
    }

    /// Collects superseded versions that no snapshot needs any more.
    pub fn vacuum(&self) {
        self.inner.gc_full_sweep();
    }

    pub fn stats(&self) -> DbStats {
        self.inner.stats()
    }

    /// Checks storage invariants (tests, `pgtier admin check`): every live
    /// row has its entry in each ordered index, every entry's key is held
    /// by some version of its row, UNIQUE holds over live rows, row counts
    /// match. Returns (live rows, index entries) per table. Run it quiesced.
    pub fn verify(&self) -> Result<Vec<(String, u64, Vec<usize>)>> {
        crate::verify::verify(&self.inner)
    }

    pub fn recovery_report(&self) -> RecoveryReport {
        self.inner.recovery.clone()
    }

    /// Stops background work, optionally checkpoints, flushes the WAL.
    /// Open transactions keep the storage alive until they end.
    pub fn close(self) -> Result<()> {
        self.stop_background();
        if self.inner.config.checkpoint_on_close {
            crate::checkpoint::checkpoint(&self.inner)?;
        }
        let end = self.inner.commit.lock().last_lsn;
        if let Some(lsn) = end {
            self.inner.wal.wait_durable(lsn)?;
        }
        Ok(())
    }

    fn stop_background(&self) {
        *self.inner.shutdown.lock() = true;
        self.inner.shutdown_cv.notify_all();
        if let Some(handle) = self.background.lock().take() {
            let _ = handle.join();
        }
    }

    /// Registers a commit-stream consumer (see [`crate::CommitStream`]).
    pub fn register_consumer(&self, name: &str, start: crate::StreamStart) -> Result<()> {
        crate::stream::register(&self.inner, name, start)
    }

    pub fn unregister_consumer(&self, name: &str) -> Result<()> {
        crate::stream::unregister(&self.inner, name)
    }

    /// Opens the stream of committed transactions for a registered consumer,
    /// positioned after its last acknowledged transaction.
    pub fn stream(&self, name: &str) -> Result<crate::CommitStream> {
        crate::stream::open(Arc::clone(&self.inner), name)
    }

    /// Consumers and their acknowledged positions.
    pub fn consumers(&self) -> Vec<(String, Lsn)> {
        self.inner.consumers.lock().list()
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if Arc::strong_count(&self.background) == 1 {
            self.stop_background();
        }
    }
}

fn background_loop(db: &DbInner) {
    let gc_period = Duration::from_millis(5);
    loop {
        {
            let mut stop = db.shutdown.lock();
            if *stop {
                return;
            }
            db.shutdown_cv.wait_for(&mut stop, gc_period);
            if *stop {
                return;
            }
        }
        db.gc_step(usize::MAX);
        if db.gc_overflowed.swap(false, Ordering::AcqRel) {
            db.gc_full_sweep();
        }
        if db.checkpoint_due() {
            // A failed background checkpoint is retried next period; the
            // previous checkpoint and the WAL it needs remain in place.
            let _ = crate::checkpoint::checkpoint(db);
        }
    }
}

impl DbInner {
    pub(crate) fn current_catalog(&self) -> Arc<CatalogState> {
        self.catalog.read().clone()
    }

    fn checkpoint_due(&self) -> bool {
        let last = self.checkpoints.lock().last().map(|c| (c.start_lsn, c.completed_at));
        let wal_end = self.wal.end().0;
        match last {
            None => wal_end > self.config.checkpoint_wal_bytes.min(64 << 20),
            Some((start, at)) => {
                let by_volume = wal_end.saturating_sub(start.0) > self.config.checkpoint_wal_bytes;
                let by_time = self
                    .config
                    .checkpoint_interval
                    .is_some_and(|i| at.elapsed().unwrap_or_default() >= i && wal_end > start.0 + 4096);
                by_volume || by_time
            }
        }
    }

    /// Queues GC work; returns the queue length.
    pub(crate) fn push_gc(&self, item: GcItem) -> usize {
        let mut q = self.gc.lock();
        if q.len() >= self.config.gc_queue_max {
            q.pop_front();
            self.gc_overflowed.store(true, Ordering::Release);
        }
        q.push_back(item);
        q.len()
    }

    /// Prunes rows of up to `items_max` queued commits the horizon passed.
    pub(crate) fn gc_step(&self, items_max: usize) {
        let horizon = self.txns.horizon();
        let cat = self.current_catalog();
        let mut scratch = Vec::new();
        let mut freed = Vec::new();
        for _ in 0..items_max {
            let item = {
                let mut q = self.gc.lock();
                match q.front() {
                    Some(front) if horizon.sees(front.commit_ts) => q.pop_front(),
                    _ => None,
                }
            };
            let Some(item) = item else { return };
            for &(table, hash, off, len) in &item.rows {
                let Some(store) = cat.store(table) else { continue };
                let key = &item.keys[off as usize..(off + len) as usize];
                self.prune_row(store, hash, key, horizon, &mut scratch, &mut freed);
            }
        }
    }

    fn prune_row(&self, store: &TableStore, hash: u64, key: &[u8], horizon: Snapshot, scratch: &mut Vec<u8>, freed: &mut Vec<Vec<u8>>) {
        let meta = store.meta();
        freed.clear();
        let _pruning = self.pruning.read();
        let n = store.prune(hash, key, horizon, scratch, &meta.indexes, freed);
        self.counters.gc_versions_freed.fetch_add(n as u64, Ordering::Relaxed);
        store.cleanup_entries(&meta, key, freed);
    }

    /// Prunes every row of every table (after GC queue overflow, or on demand).
    pub(crate) fn gc_full_sweep(&self) {
        self.counters.gc_full_sweeps.fetch_add(1, Ordering::Relaxed);
        let horizon = self.txns.horizon();
        let cat = self.current_catalog();
        let mut scratch = Vec::new();
        let mut freed = Vec::new();
        for store in cat.live_stores() {
            let mut keys: Vec<(u64, Vec<u8>)> = Vec::new();
            for shard in 0..crate::primary::SHARD_COUNT {
                keys.clear();
                store.primary.for_each_head_in(shard, |head| {
                    if head.prev().is_some() || crate::version::is_deleted(head.word()) {
                        let mut k = Vec::new();
                        store.pk_of(head.row(store.layout()), &mut k);
                        keys.push((crate::key::hash_key(&k), k));
                    }
                });
                for (hash, key) in &keys {
                    self.prune_row(store, *hash, key, horizon, &mut scratch, &mut freed);
                }
            }
        }
    }

    pub(crate) fn stats(&self) -> DbStats {
        let cat = self.current_catalog();
        let tables = cat
            .live_stores()
            .map(|s| {
                let (row_bytes, index_bytes) = s.bytes();
                TableStats {
                    id: s.schema.id,
                    name: s.schema.name.clone(),
                    rows: u64::try_from(s.live_rows.load(Ordering::Relaxed)).unwrap_or(0),
                    row_bytes,
                    row_bytes_used: s.slab.used_bytes(),
                    index_bytes,
                }
            })
            .collect();
        let last_checkpoint = self.checkpoints.lock().last().cloned();
        let checkpoint_age = last_checkpoint.as_ref().and_then(|c| c.completed_at.elapsed().ok());
        let c = &self.counters;
        DbStats {
            tables,
            commits: c.commits.load(Ordering::Relaxed),
            commits_sync: c.commits_sync.load(Ordering::Relaxed),
            rollbacks: c.rollbacks.load(Ordering::Relaxed),
            deadlocks: c.deadlocks.load(Ordering::Relaxed),
            wal_end: self.wal.end(),
            wal_durable_end: self.wal.durable_end(),
            wal: self.wal.stats(),
            last_checkpoint,
            checkpoint_age,
            checkpoints: c.checkpoints.load(Ordering::Relaxed),
            visible_ts: self.txns.visible().get(),
            active_transactions: self.txns.active_count(),
            gc_queue_len: self.gc.lock().len(),
            gc_versions_freed: c.gc_versions_freed.load(Ordering::Relaxed),
            recovery: self.recovery.clone(),
        }
    }

    pub(crate) fn lock_deadline(&self) -> Instant {
        Instant::now() + self.config.lock_timeout
    }
}
