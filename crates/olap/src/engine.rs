//! The columnar copies of one database and the two threads that keep them
//! current: the applier (the commit-stream consumer `olap`) and the merger.
//!
//! **Alignment of a copy with the stream.** The applier starts reading at
//! the WAL position [`Database::commit_point`] gives with the newest commit
//! ts T: every commit after T is logged at or after it. It keeps the ts of
//! the last transaction it applied (`applied_ts`), updated while it holds
//! the table map's read lock. Enabling a table inserts its (building) copy
//! under the write lock and reads `applied_ts` there: every commit with a
//! larger ts is applied after, to the new copy too. The table is then
//! scanned at a snapshot S0 >= that ts (waited for: committed transactions
//! become visible to snapshots once their committers publish them), and
//! the changes recorded with ts <= S0 are dropped, since the scan holds
//! them, as are those that arrive later with ts <= S0 (asynchronous
//! commits are visible before they are durable and streamed). Nothing is
//! missed or applied twice. (An overlap would do no harm anyway: the delta
//! holds full row images and the last one of a key wins; a gap would.)
//!
//! **Never stale.** A reader at snapshot S (taken by its caller before the
//! call) reads the WAL end L after S: every commit with ts <= S is logged
//! before L (a commit is logged before its ts is published). If the WAL is
//! durable only below L (asynchronous commits), it is flushed: the stream
//! delivers durable transactions only. The reader then waits until the
//! applier has read the stream up to L, and reads the chunks plus the
//! delta entries with ts <= S. The wait is measured ([`OlapStats`]).
//! When the applier has already applied a transaction at or past S, none
//! is needed: transactions are applied in commit-ts order.
//!
//! **Merges** fold the delta up to min(applied ts, the engine's snapshot
//! horizon): no running statement reads below the horizon, so a reader's
//! snapshot is never older than the chunks (a snapshot of an ended
//! transaction may be: 72000, and routing reads the row store).
//!
//! **Acknowledgement.** The copy lives in memory only and is rebuilt by a
//! scan at every start, so it needs no WAL: the applier acknowledges what
//! it has read every [`ACK_INTERVAL`], and a start moves the consumer's
//! position to the WAL end (the old one would hold back truncation).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use pgtier_engine::{
    Change, CommitMode, CommitStream, Database, Lsn, Origin, Snapshot, StreamStart, TABLE_SHARDS, TableId,
};

use crate::copy::{CHUNK_ROWS, Chunk, ChunkBuilder, CopyStats, Layout, TableCopy, TableView};
use crate::error::{OlapError, Result};
use crate::resources::{ExecutorPlan, ExecutorReport, Placement};

/// How often the applier persists its position at most (each is an fsync).
pub const ACK_INTERVAL: Duration = Duration::from_millis(200);
/// Shards of a table sampled at enable to choose dictionary encoding
/// (of [`TABLE_SHARDS`]; a row's shard follows its key hash, so a sample).
const SAMPLE_SHARDS: usize = 8;

#[derive(Clone, Debug)]
pub struct OlapConfig {
    /// The commit-stream consumer's name (one per database).
    pub consumer: String,
    /// How often the merger looks at the deltas.
    pub merge_interval: Duration,
    /// A table whose delta holds this many changes is merged at the next look...
    pub merge_delta_rows: usize,
    /// ...and any non-empty delta after this long.
    pub merge_age: Duration,
    /// Bound on a table's unmerged changes; past it the copy stops serving.
    pub delta_rows_max: usize,
    /// Bound on a reader's wait for the applier (57014 past it).
    pub catch_up_timeout: Duration,
    /// Threads of the analytic executor (DataFusion `target_partitions`):
    /// 0 (the default) takes `cpu_share` of the CPUs; a non-zero count is
    /// used as given and `cpu_share` is not (resources.rs).
    pub threads: usize,
    /// The share of the online CPUs the executor runs threads on, in
    /// (0, 1]: `max(1, round(cpus * cpu_share))` worker threads.
    pub cpu_share: f64,
    /// How much lower the executor's threads are scheduled than the
    /// process, 0..=19 (added to its nice value, capped at 19): an
    /// analytic scan that shares a core with session threads yields it to
    /// them instead of taking half (CFS weights nice +5 at about a third
    /// of nice 0), so OLTP latency holds while analytics uses idle CPU.
    pub nice: i32,
    /// SCHED_IDLE for the executor's threads and the merger instead of
    /// `nice`: they run only on a CPU no other thread wants. Even at nice
    /// +19 a CPU-bound thread beside a 1-client TPC-C run cost it 16 % of
    /// its NOPM on the 2-core VM (it still takes slices and delays the
    /// session's wake-ups), SCHED_IDLE about nothing; the price is that
    /// analytics wait for any OLTP burst.
    pub sched_idle: bool,
    /// Which CPUs the executor's threads are pinned to ([`Placement`]).
    pub placement: Placement,
    /// Bound on the memory DataFusion's operators (hash aggregates, joins,
    /// sorts) may reserve together, all queries of this engine at once;
    /// past it a query fails with 53200 (no spilling to disk). None: no bound.
    pub memory_limit: Option<usize>,
    /// Rows per chunk, 1..=[`CHUNK_ROWS`] (small values are for tests).
    pub chunk_rows: usize,
}

impl Default for OlapConfig {
    fn default() -> OlapConfig {
        OlapConfig {
            consumer: "olap".into(),
            merge_interval: Duration::from_millis(50),
            // A merge rebuilds the small tail chunk and re-masks every chunk
            // the delta touches whatever the delta's size, so merging often
            // costs OLTP's CPUs more than it saves readers: at 500 ms,
            // CH-benCHmark's one OLTP client kept the merger 18 % busy
            // (nine tables merged twice a second each).
            merge_delta_rows: 32_768,
            merge_age: Duration::from_secs(2),
            delta_rows_max: 4 << 20,
            catch_up_timeout: Duration::from_secs(10),
            threads: 0,
            cpu_share: 0.5,
            nice: 5,
            sched_idle: false,
            placement: Placement::None,
            memory_limit: None,
            chunk_rows: CHUNK_ROWS,
        }
    }
}

/// Figures of the consumer and of readers' waits.
#[derive(Clone, Debug, Default)]
pub struct OlapStats {
    /// Where the applier has read the stream to.
    pub applied_lsn: u64,
    /// The commit ts of the last transaction applied (or of the start).
    pub applied_ts: u64,
    /// Readers' waits for the applier: count, total and longest.
    pub waits: u64,
    pub wait_total_us: u64,
    pub wait_max_us: u64,
    /// Waits that had to flush the WAL first (asynchronous commits).
    pub wait_flushes: u64,
    /// Merges done and the delta entries they folded.
    pub merges: u64,
    pub merged_rows: u64,
    /// The merger's time in merges, µs (its thread's busy time, mostly).
    pub merge_total_us: u64,
    /// Analytic queries' table scans, and the time spent making their
    /// batches: the view at the snapshot (the delta's latest rows, the
    /// chunks' masks), masked chunks copied, delta rows converted. What a
    /// scan costs beyond reading the chunks grows with the delta.
    pub scans: u64,
    pub scan_total_us: u64,
}

/// Counters the scans of queries add to (query.rs).
#[derive(Default)]
pub(crate) struct ScanCounters {
    scans: AtomicU64,
    total_us: AtomicU64,
}

impl ScanCounters {
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn record(&self, took: Duration) {
        self.scans.fetch_add(1, Ordering::Relaxed);
        self.total_us.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }
}

struct Applied {
    lsn: Lsn,
    error: Option<String>,
}

struct Shared {
    db: Database,
    config: OlapConfig,
    tables: RwLock<HashMap<TableId, Arc<TableCopy>>>,
    /// Written by the applier only while it holds `tables`' read lock.
    applied_ts: AtomicU64,
    applied: Mutex<Applied>,
    applied_moved: Condvar,
    stop: AtomicBool,
    waits: AtomicU64,
    wait_total_us: AtomicU64,
    wait_max_us: AtomicU64,
    wait_flushes: AtomicU64,
    merges: AtomicU64,
    merged_rows: AtomicU64,
    merge_total_us: AtomicU64,
    scans: Arc<ScanCounters>,
}

/// The columnar copies of a database, kept current from its commit stream.
pub struct OlapEngine {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// The analytic executor's threads, CPUs, priority and memory bound.
    pub(crate) executor: Arc<ExecutorPlan>,
    #[cfg(feature = "datafusion")]
    pub(crate) runtime: Mutex<Option<Arc<tokio::runtime::Runtime>>>,
    /// DataFusion's runtime environment: one memory pool for every query.
    #[cfg(feature = "datafusion")]
    pub(crate) runtime_env: Arc<datafusion::execution::runtime_env::RuntimeEnv>,
}

impl OlapEngine {
    /// Starts the consumer (registering it, or moving a registered one's
    /// position to the WAL end: nothing of the old copy survives a restart)
    /// and the merger. No table is enabled yet.
    pub fn start(db: &Database, config: OlapConfig) -> Result<OlapEngine> {
        assert!(config.merge_delta_rows >= 1 && config.delta_rows_max >= 1);
        assert!(config.cpu_share > 0.0 && config.cpu_share <= 1.0, "cpu_share outside (0, 1]");
        assert!((0..=19).contains(&config.nice), "nice outside 0..=19");
        let executor = Arc::new(ExecutorPlan::new(&config));
        #[cfg(feature = "datafusion")]
        let runtime_env = crate::executor::runtime_env(config.memory_limit)?;
        assert!((1..=CHUNK_ROWS).contains(&config.chunk_rows), "chunk_rows outside 1..={CHUNK_ROWS}");
        let (last_ts, start) = db.commit_point();
        db.register_consumer(&config.consumer, StreamStart::At(start))?;
        // An acknowledgement may not pass the durable end.
        if db.wal_durable_end() < start {
            db.flush_wal()?;
        }
        db.stream(&config.consumer)?.ack(start)?;
        let stream = db.stream(&config.consumer)?;
        if stream.position() != start {
            return Err(OlapError::ConsumerStopped(format!(
                "consumer \"{}\" opened at {:?}, not at {start:?}",
                config.consumer,
                stream.position()
            )));
        }
        let shared = Arc::new(Shared {
            db: db.clone(),
            config,
            tables: RwLock::new(HashMap::new()),
            applied_ts: AtomicU64::new(last_ts.get()),
            applied: Mutex::new(Applied { lsn: start, error: None }),
            applied_moved: Condvar::new(),
            stop: AtomicBool::new(false),
            waits: AtomicU64::new(0),
            wait_total_us: AtomicU64::new(0),
            wait_max_us: AtomicU64::new(0),
            wait_flushes: AtomicU64::new(0),
            merges: AtomicU64::new(0),
            merged_rows: AtomicU64::new(0),
            merge_total_us: AtomicU64::new(0),
            scans: Arc::default(),
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| OlapError::ConsumerStopped(format!("cannot start {name}: {e}")))
        };
        let a = Arc::clone(&shared);
        let applier = spawn("pgtier-olap-apply", Box::new(move || apply_loop(&a, stream)))?;
        let m = Arc::clone(&shared);
        let plan = Arc::clone(&executor);
        let merger = match spawn(
            "pgtier-olap-merge",
            Box::new(move || {
                plan.lower_background_thread("merger");
                merge_loop(&m);
            }),
        ) {
            Ok(h) => h,
            Err(e) => {
                shared.stop.store(true, Ordering::Relaxed);
                let _ = applier.join();
                return Err(e);
            }
        };
        Ok(OlapEngine {
            shared,
            threads: vec![applier, merger],
            executor,
            #[cfg(feature = "datafusion")]
            runtime: Mutex::new(None),
            #[cfg(feature = "datafusion")]
            runtime_env,
        })
    }

    pub fn database(&self) -> &Database {
        &self.shared.db
    }

    pub fn config(&self) -> &OlapConfig {
        &self.shared.config
    }

    /// The analytic executor's resources: threads (from `cpu_share` or
    /// explicit), nice, placement and each worker's CPU, the topology
    /// seen, the memory limit, and what its threads did when they started
    /// (with the first query).
    pub fn executor_report(&self) -> ExecutorReport {
        self.executor.report()
    }

    /// Enables the columnar copy of `table`: scans it at one snapshot into
    /// chunks (`progress(rows done, rows expected)` after each chunk; the
    /// expectation is the table's live-row count, an estimate) while the
    /// applier records its changes. Fails with 0A000 naming the column of a
    /// type without an exact Arrow form, 22003 for such a value. Enabling
    /// an enabled table rebuilds its copy.
    pub fn enable(&self, table: TableId, mut progress: impl FnMut(u64, u64)) -> Result<()> {
        let db = &self.shared.db;
        let catalog = db.catalog();
        let schema =
            catalog.table(table).cloned().ok_or_else(|| OlapError::NotEnabled { table: format!("id {}", table.0) })?;
        let expected = db.stats().tables.iter().find(|t| t.id == table).map_or(0, |t| t.rows);
        // Check the types before anything is registered.
        let chunk_rows = self.shared.config.chunk_rows;
        Layout::new(Arc::clone(&schema), &[], chunk_rows)?;
        let mut txn = db.begin_with_origin(CommitMode::Sync, Origin::Load)?;
        txn.begin_statement()?;
        let dictionary = choose_dictionary(&mut txn, &schema)?;
        txn.end_statement();
        let copy = Arc::new(TableCopy::new(
            Layout::new(Arc::clone(&schema), &dictionary, chunk_rows)?,
            self.shared.config.delta_rows_max,
        ));
        let since = {
            let mut tables = self.shared.tables.write();
            tables.insert(table, Arc::clone(&copy));
            self.shared.applied_ts.load(Ordering::Acquire)
        };
        let built = self.build(&mut txn, &copy, since, expected, &mut progress);
        txn.rollback();
        match built {
            Ok(()) => Ok(()),
            Err(e) => {
                let mut tables = self.shared.tables.write();
                if tables.get(&table).is_some_and(|c| Arc::ptr_eq(c, &copy)) {
                    tables.remove(&table);
                }
                Err(e)
            }
        }
    }

    fn build(
        &self,
        txn: &mut pgtier_engine::Transaction,
        copy: &TableCopy,
        since: u64,
        expected: u64,
        progress: &mut impl FnMut(u64, u64),
    ) -> Result<()> {
        let snapshot = self.snapshot_at_least(txn, since)?;
        let layout = &copy.layout;
        let mut chunks: Vec<Arc<Chunk>> = Vec::new();
        let chunk_rows = layout.chunk_rows;
        let mut builder = ChunkBuilder::new(layout, chunk_rows);
        let mut key = Vec::new();
        let mut done = 0u64;
        let mut failed: Option<OlapError> = None;
        txn.scan_table(layout.table.id, |row| {
            let hash = layout.key_of_row(row, &mut key);
            if let Err(e) = builder.push(layout, hash, |c| row.get(c)) {
                failed = Some(e);
                return Ok(false);
            }
            if builder.len() == chunk_rows {
                let full = std::mem::replace(&mut builder, ChunkBuilder::new(layout, chunk_rows));
                match full.finish(layout) {
                    Ok(c) => chunks.push(Arc::new(c)),
                    Err(e) => {
                        failed = Some(e);
                        return Ok(false);
                    }
                }
                done += chunk_rows as u64;
                progress(done, expected.max(done));
            }
            Ok(true)
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        if builder.len() > 0 {
            done += builder.len() as u64;
            chunks.push(Arc::new(builder.finish(layout)?));
        }
        // The scan gives the rows in no order (the row store's shards).
        let sorted = crate::copy::sorted_by_key(layout, &chunks)?;
        let is_sorted = sorted.is_some();
        let chunks = sorted.unwrap_or(chunks);
        progress(done, done);
        copy.finish_build(snapshot.get(), chunks, is_sorted)
    }

    /// Starts a statement of `txn` whose snapshot is at least `ts`: a
    /// commit the applier has seen is durable, and visible once its
    /// committer publishes it, which it does right after its WAL wait.
    fn snapshot_at_least(&self, txn: &mut pgtier_engine::Transaction, ts: u64) -> Result<Snapshot> {
        let deadline = Instant::now() + self.shared.config.catch_up_timeout;
        let started = Instant::now();
        loop {
            txn.begin_statement()?;
            let s = txn.snapshot_ts();
            if s.get() >= ts {
                return Ok(s);
            }
            txn.end_statement();
            if Instant::now() >= deadline {
                return Err(OlapError::CatchUpTimeout { waited_ms: started.elapsed().as_millis() as u64 });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Drops `table`'s copy (no error if it had none).
    pub fn disable(&self, table: TableId) {
        self.shared.tables.write().remove(&table);
    }

    pub fn is_enabled(&self, table: TableId) -> bool {
        self.shared.tables.read().contains_key(&table)
    }

    /// The enabled tables.
    pub fn tables(&self) -> Vec<TableId> {
        let mut t: Vec<TableId> = self.shared.tables.read().keys().copied().collect();
        t.sort_by_key(|t| t.0);
        t
    }

    /// Waits until every commit at or before `snapshot` has been applied
    /// (see the module doc); returns how long it waited. `snapshot` must
    /// have been taken before the call (a statement's snapshot).
    pub fn catch_up(&self, snapshot: Snapshot) -> Result<Duration> {
        let started = Instant::now();
        let sh = &self.shared;
        // Transactions are applied in commit-ts order: once one at or past
        // the snapshot is, every logged one before it is too. No WAL read,
        // no flush.
        if sh.applied_ts.load(Ordering::Acquire) >= snapshot.get() {
            sh.waits.fetch_add(1, Ordering::Relaxed);
            return Ok(Duration::ZERO);
        }
        let target = sh.db.wal_end();
        let mut flushed = false;
        if sh.db.wal_durable_end() < target {
            sh.db.flush_wal()?;
            flushed = true;
        }
        let deadline = started + sh.config.catch_up_timeout;
        let mut applied = sh.applied.lock();
        loop {
            if let Some(e) = &applied.error {
                return Err(OlapError::ConsumerStopped(e.clone()));
            }
            if applied.lsn >= target {
                break;
            }
            if sh.applied_moved.wait_until(&mut applied, deadline).timed_out() {
                return Err(OlapError::CatchUpTimeout { waited_ms: started.elapsed().as_millis() as u64 });
            }
        }
        drop(applied);
        let waited = started.elapsed();
        let us = waited.as_micros() as u64;
        sh.waits.fetch_add(1, Ordering::Relaxed);
        sh.wait_total_us.fetch_add(us, Ordering::Relaxed);
        sh.wait_max_us.fetch_max(us, Ordering::Relaxed);
        if flushed {
            sh.wait_flushes.fetch_add(1, Ordering::Relaxed);
        }
        Ok(waited)
    }

    /// `table`'s rows at `snapshot`: waits for the applier, then takes the
    /// chunks and the delta entries visible at it.
    pub fn view(&self, table: TableId, snapshot: Snapshot) -> Result<TableView> {
        self.catch_up(snapshot)?;
        self.view_caught_up(table, snapshot)
    }

    /// [`OlapEngine::view`] after [`OlapEngine::catch_up`] for the same
    /// snapshot (a query over several tables waits once).
    pub fn view_caught_up(&self, table: TableId, snapshot: Snapshot) -> Result<TableView> {
        let copy = self.copy(table)?;
        copy.view(snapshot.get())
    }

    /// The names of the columns a query sees of `table`'s copy, in the
    /// table's order (a FROM item's aliases are not these).
    pub fn column_names(&self, table: TableId) -> Result<Vec<String>> {
        Ok(self.copy(table)?.layout.visible_schema().fields().iter().map(|f| f.name().clone()).collect())
    }

    pub(crate) fn copy(&self, table: TableId) -> Result<Arc<TableCopy>> {
        self.shared.tables.read().get(&table).cloned().ok_or_else(|| OlapError::NotEnabled {
            table: self.shared.db.catalog().table(table).map_or_else(|| format!("id {}", table.0), |t| t.name.clone()),
        })
    }

    /// Merges every table's delta now, as far as the horizon allows
    /// (the merger does this on its own; tests and `VACUUM`-like commands
    /// call it).
    pub fn merge_now(&self) -> Result<usize> {
        merge_all(&self.shared, true)
    }

    pub fn stats(&self) -> OlapStats {
        let sh = &self.shared;
        OlapStats {
            applied_lsn: sh.applied.lock().lsn.0,
            applied_ts: sh.applied_ts.load(Ordering::Acquire),
            waits: sh.waits.load(Ordering::Relaxed),
            wait_total_us: sh.wait_total_us.load(Ordering::Relaxed),
            wait_max_us: sh.wait_max_us.load(Ordering::Relaxed),
            wait_flushes: sh.wait_flushes.load(Ordering::Relaxed),
            merges: sh.merges.load(Ordering::Relaxed),
            merged_rows: sh.merged_rows.load(Ordering::Relaxed),
            merge_total_us: sh.merge_total_us.load(Ordering::Relaxed),
            scans: sh.scans.scans.load(Ordering::Relaxed),
            scan_total_us: sh.scans.total_us.load(Ordering::Relaxed),
        }
    }

    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn scan_counters(&self) -> Arc<ScanCounters> {
        Arc::clone(&self.shared.scans)
    }

    pub fn table_stats(&self, table: TableId) -> Result<CopyStats> {
        Ok(self.copy(table)?.stats())
    }

    /// Per column and per table: plain size of the stored values vs the
    /// Arrow memory holding them (see compression.rs).
    pub fn compression(&self) -> Vec<crate::compression::CompressionRow> {
        let copies: Vec<Arc<TableCopy>> = {
            let tables = self.shared.tables.read();
            let mut ids: Vec<&TableId> = tables.keys().collect();
            ids.sort_by_key(|t| t.0);
            ids.into_iter().map(|t| Arc::clone(&tables[t])).collect()
        };
        copies.iter().flat_map(|c| crate::compression::rows(c)).collect()
    }
}

impl Drop for OlapEngine {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Dictionary-encode a text column whose sampled rows hold at most half as
/// many distinct values as rows.
fn choose_dictionary(txn: &mut pgtier_engine::Transaction, schema: &pgtier_engine::TableSchema) -> Result<Vec<bool>> {
    let text: Vec<usize> = (0..schema.columns.len()).filter(|&c| crate::types::is_text(schema.columns[c].ty)).collect();
    if text.is_empty() {
        return Ok(vec![false; schema.columns.len()]);
    }
    let mut distinct: Vec<std::collections::HashSet<String>> = vec![Default::default(); text.len()];
    let mut rows = 0usize;
    txn.scan_table_shards(schema.id, 0..SAMPLE_SHARDS.min(TABLE_SHARDS), |row| {
        rows += 1;
        for (i, &c) in text.iter().enumerate() {
            if let pgtier_engine::ValueRef::Text(s)
            | pgtier_engine::ValueRef::Json(s)
            | pgtier_engine::ValueRef::Jsonb(s) = row.get(c)
                && distinct[i].len() <= CHUNK_ROWS
            {
                distinct[i].insert(s.to_owned());
            }
        }
        Ok(rows < CHUNK_ROWS * 4)
    })?;
    let mut out = vec![false; schema.columns.len()];
    for (i, &c) in text.iter().enumerate() {
        out[c] = rows > 0 && distinct[i].len() * 2 <= rows;
    }
    Ok(out)
}

fn apply_loop(sh: &Shared, mut stream: CommitStream) {
    let mut acked = stream.position();
    let mut last_ack = Instant::now();
    while !sh.stop.load(Ordering::Relaxed) {
        let next = stream.next(Duration::from_millis(20));
        let moved_to = match next {
            Ok(Some(txn)) => {
                let mut dropped = Vec::new();
                let (commit_ts, next_lsn) = (txn.commit_ts, txn.next_lsn);
                {
                    let tables = sh.tables.read();
                    // By value: a copy keeps the change's row image as it came.
                    for change in txn.changes {
                        match change {
                            Change::Row(rc) => {
                                if let Some(copy) = tables.get(&rc.table.id) {
                                    copy.apply(commit_ts, rc);
                                }
                            }
                            // ALTER TABLE rewrites under a new id: the copy goes with the old one.
                            Change::DropTable(id) if tables.contains_key(&id) => dropped.push(id),
                            _ => {}
                        }
                    }
                    sh.applied_ts.store(commit_ts.get(), Ordering::Release);
                }
                if !dropped.is_empty() {
                    let mut tables = sh.tables.write();
                    for id in dropped {
                        tables.remove(&id);
                    }
                }
                next_lsn
            }
            // Read to the durable end: whatever lies before it is applied.
            Ok(None) => stream.position(),
            Err(e) => {
                sh.applied.lock().error = Some(e.to_string());
                sh.applied_moved.notify_all();
                return;
            }
        };
        {
            let mut applied = sh.applied.lock();
            if moved_to > applied.lsn {
                applied.lsn = moved_to;
                sh.applied_moved.notify_all();
            }
        }
        if moved_to > acked && last_ack.elapsed() >= ACK_INTERVAL {
            if let Err(e) = stream.ack(moved_to) {
                sh.applied.lock().error = Some(e.to_string());
                sh.applied_moved.notify_all();
                return;
            }
            acked = moved_to;
            last_ack = Instant::now();
        }
    }
    let last = sh.applied.lock().lsn;
    if last > acked {
        let _ = stream.ack(last);
    }
}

fn merge_loop(sh: &Shared) {
    while !sh.stop.load(Ordering::Relaxed) {
        // In slices: dropping the engine joins this thread, and a long
        // configured interval must not hold the drop that long.
        let until = Instant::now() + sh.config.merge_interval;
        while !sh.stop.load(Ordering::Relaxed) && Instant::now() < until {
            std::thread::sleep(until.saturating_duration_since(Instant::now()).min(Duration::from_millis(10)));
        }
        if sh.stop.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = merge_all(sh, false) {
            sh.applied.lock().error = Some(format!("merge: {e}"));
            sh.applied_moved.notify_all();
            return;
        }
    }
}

/// Merges the tables whose delta is due (all with `force`), up to
/// min(applied ts, snapshot horizon).
fn merge_all(sh: &Shared, force: bool) -> Result<usize> {
    let horizon = sh.db.snapshot_horizon().get();
    let upto = horizon.min(sh.applied_ts.load(Ordering::Acquire));
    let copies: Vec<Arc<TableCopy>> = sh.tables.read().values().cloned().collect();
    let mut folded = 0;
    for copy in copies {
        let (rows, oldest, since) = copy.delta_state();
        let due = rows >= sh.config.merge_delta_rows || since >= sh.config.merge_age || force;
        if rows == 0 || !due || oldest.is_none_or(|ts| ts > upto) {
            continue;
        }
        let started = Instant::now();
        let n = copy.merge(upto)?;
        sh.merge_total_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        if n > 0 {
            sh.merges.fetch_add(1, Ordering::Relaxed);
            sh.merged_rows.fetch_add(n as u64, Ordering::Relaxed);
        }
        folded += n;
    }
    Ok(folded)
}
