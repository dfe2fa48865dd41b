//! Opening a database: latest valid checkpoint + WAL replay.
//!
//! Rows go into primary storage only (one committed version each) while the
//! checkpoint loads and the WAL replays: a fuzzy checkpoint may transiently
//! violate UNIQUE (it can hold a row's new key and another row's old one),
//! so ordered indexes are built afterwards from the final rows, in bulk.
//! Replay is idempotent: every op is a full image keyed by primary key
//! (insert/update = upsert, delete = remove if present); DDL ops already
//! reflected in the checkpoint's catalog are skipped.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use pgtier_wal::{Lsn, Wal, WalConfig};

use crate::catalog::CatalogState;
use crate::checkpoint::{CheckpointInfo, RowBlock};
use crate::consumers::Consumers;
use crate::error::{EngineError, Result};
use crate::ids::CommitTs;
use crate::key::hash_key;
use crate::ordered::OrderedIndex;
use crate::primary;
use crate::schema::{Catalog, TableDdl, TableId};
use crate::table::{FkLink, IndexStore, TableMeta, TableStore};
use crate::version::VPtr;
use crate::walrec::{AssembledTxn, OpRef, RowOp, TxnAssembler, decode_record};

/// Word of every version loaded at recovery: committed (no flags) at a ts
/// older than any snapshot.
const RECOVERED_WORD: u64 = CommitTs::RECOVERED.get();

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

/// The persistent state of a database directory, read back.
pub(crate) struct Recovered {
    pub(crate) wal: Wal,
    /// Schemas and every table's rows, indexes built.
    pub(crate) catalog: CatalogState,
    /// The newest commit ts in the checkpoint and the WAL.
    pub(crate) last_ts: CommitTs,
    /// The newest commit time replayed (0 if none): later commits are
    /// stamped no earlier, even if the clock stepped back across the restart.
    pub(crate) last_commit_time_us: u64,
    /// Checkpoint files found, oldest first.
    pub(crate) checkpoints: Vec<CheckpointInfo>,
    pub(crate) consumers: Consumers,
    pub(crate) report: RecoveryReport,
    pub(crate) incarnation: crate::incarnation::Incarnation,
    /// Held for as long as the database is open.
    pub(crate) lock: crate::files::DirLock,
}

pub(crate) fn open(dir: &Path, wal_config: &WalConfig) -> Result<Recovered> {
    let started = Instant::now();
    std::fs::create_dir_all(dir).map_err(|e| EngineError::io(format!("create {}", dir.display()), e))?;
    // Before anything is read or written: the directory is ours alone.
    let lock = crate::files::DirLock::acquire(dir)?;
    if dir.join(crate::backup::RESTORE_MARKER).exists() {
        return Err(EngineError::Corrupt(format!(
            "{} holds a restore that did not finish ({}): delete the directory and restore again",
            dir.display(),
            crate::backup::RESTORE_MARKER
        )));
    }
    // Before anything else is written: a new directory gets its id first.
    let incarnation = crate::incarnation::open_or_create(dir)?;
    let wal = Wal::open(&dir.join("wal"), wal_config.clone())?;
    let mut report = RecoveryReport::default();
    let mut state = CatalogState::default();
    let mut start_lsn = Lsn(0);
    let mut checkpoints = Vec::new();
    let files = crate::checkpoint::list(dir)?;
    for (at, (lsn, path)) in files.iter().enumerate() {
        let (lsn, path) = (*lsn, path.clone());
        // The newest file that validates wins; a torn or corrupt one is skipped.
        let Ok(loaded) = crate::checkpoint::load(&path) else { continue };
        state = load_checkpoint(&loaded)?;
        start_lsn = loaded.start_lsn;
        report.checkpoint_lsn = Some(lsn);
        report.checkpoint_rows = loaded.rows;
        checkpoints.push(CheckpointInfo {
            start_lsn: lsn,
            rows: loaded.rows,
            bytes: loaded.data.len() as u64,
            duration: Duration::ZERO,
            completed_at: std::fs::metadata(&path).and_then(|m| m.modified()).unwrap_or(SystemTime::now()),
            path,
        });
        // Older files are tracked too (oldest first), so the next checkpoint
        // retires them: before, only the loaded one was, and every restart
        // left one more file on disk for good.
        for (older_lsn, older_path) in &files[at + 1..] {
            checkpoints.insert(
                0,
                CheckpointInfo {
                    start_lsn: *older_lsn,
                    rows: 0,
                    bytes: 0,
                    duration: Duration::ZERO,
                    completed_at: SystemTime::UNIX_EPOCH,
                    path: older_path.clone(),
                },
            );
        }
        break;
    }
    report.load_duration = started.elapsed();
    let replay_started = Instant::now();
    let mut last = Last { ts: CommitTs::RECOVERED, time_us: 0 };
    replay(&wal, start_lsn, &mut state, &mut report, &mut last)?;
    report.replay_duration = replay_started.elapsed();
    let index_started = Instant::now();
    build_metas(&state)?;
    for store in state.live_stores() {
        store.restore_rowid();
    }
    report.index_build_duration = index_started.elapsed();
    let consumers = Consumers::load(dir)?;
    report.duration = started.elapsed();
    Ok(Recovered {
        wal,
        catalog: state,
        last_ts: last.ts,
        last_commit_time_us: last.time_us,
        checkpoints,
        consumers,
        report,
        incarnation,
        lock,
    })
}

fn load_checkpoint(loaded: &crate::checkpoint::LoadedCheckpoint) -> Result<CatalogState> {
    let mut state = CatalogState { catalog: Arc::new(loaded.catalog.clone()), stores: Vec::new() };
    for table in loaded.catalog.tables() {
        state.set_store(table.id, Some(Arc::new(TableStore::new(Arc::clone(table)))));
    }
    let mut counts: Vec<(TableId, usize)> = Vec::new();
    for block in &loaded.blocks {
        match counts.iter_mut().find(|(t, _)| *t == block.table) {
            Some((_, c)) => *c += block.rows as usize,
            None => counts.push((block.table, block.rows as usize)),
        }
    }
    for (table, rows) in counts {
        if let Some(store) = state.store(table) {
            store.primary.reserve_total(rows, &store.pk, store.layout());
        }
    }
    // Tables load in parallel (a table's blocks are contiguous); rows of a
    // checkpoint have distinct keys, so each is inserted without a probe.
    let mut per_table: Vec<(Arc<TableStore>, Vec<&RowBlock>)> = Vec::new();
    for block in &loaded.blocks {
        let Some(store) = state.store(block.table) else {
            return Err(EngineError::Corrupt(format!("checkpoint rows for unknown table {}", block.table.0)));
        };
        match per_table.iter_mut().find(|(s, _)| Arc::ptr_eq(s, store)) {
            Some((_, blocks)) => blocks.push(block),
            None => per_table.push((Arc::clone(store), vec![block])),
        }
    }
    per_table.sort_by_key(|(_, blocks)| std::cmp::Reverse(blocks.iter().map(|b| b.bytes.len()).sum::<usize>()));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed: Mutex<Option<EngineError>> = Mutex::new(None);
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get).min(per_table.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut key = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((store, blocks)) = per_table.get(i) else { return };
                    for block in blocks {
                        if let Err(e) = load_block(store, block.rows, &loaded.data[block.bytes.clone()], &mut key) {
                            *failed.lock() = Some(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    Ok(state)
}

fn load_block(store: &TableStore, count: u32, payload: &[u8], key: &mut Vec<u8>) -> Result<()> {
    let layout = store.layout();
    let mut at = 0;
    for _ in 0..count {
        let len = payload.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let row = len.and_then(|len| payload.get(at + 4..at + 4 + len));
        let Some(row) = row else { return Err(EngineError::Corrupt("checkpoint block overrun".into())) };
        // A checkpoint keeps stubs (cold.rs); the WAL never holds one.
        layout.validate_stored(row)?;
        store.pk_of(row, key);
        let hash = hash_key(key);
        let new = VPtr::alloc(&store.slab, RECOVERED_WORD, None, row);
        primary::insert_new(&mut store.primary.write(hash), hash, &store.pk, layout, new);
        at += 4 + row.len();
    }
    if at != payload.len() {
        return Err(EngineError::Corrupt("checkpoint block has trailing bytes".into()));
    }
    Ok(())
}

/// Replaces or inserts the single recovered version of the row's key.
fn upsert(store: &TableStore, row: &[u8], key: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    store.pk_of(row, key);
    upsert_hashed(store, hash_key(key), key, row, scratch);
}

fn upsert_hashed(store: &TableStore, hash: u64, key: &[u8], row: &[u8], scratch: &mut Vec<u8>) {
    let layout = store.layout();
    let mut map = store.primary.write(hash);
    if let Some(slot) = map.find_mut(hash, |v| primary::key_eq(&store.pk, layout, *v, key, scratch)) {
        let old = *slot;
        if old.row(layout).len() == row.len() {
            // Recovery is the only user of these versions: overwrite in place.
            old.overwrite_row(layout, row);
            return;
        }
        *slot = VPtr::alloc(&store.slab, RECOVERED_WORD, None, row);
        // SAFETY: unlinked above; recovery is the only user.
        unsafe { old.free(&store.slab, layout) };
        return;
    }
    let new = VPtr::alloc(&store.slab, RECOVERED_WORD, None, row);
    primary::insert_new(&mut map, hash, &store.pk, layout, new);
}

fn remove(store: &TableStore, row: &[u8], key: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    store.pk_of(row, key);
    remove_hashed(store, hash_key(key), key, scratch);
}

fn remove_hashed(store: &TableStore, hash: u64, key: &[u8], scratch: &mut Vec<u8>) {
    let layout = store.layout();
    let mut map = store.primary.write(hash);
    if let Some(old) = primary::remove(&mut map, hash, key, &store.pk, layout, scratch) {
        // SAFETY: as in `upsert_hashed`.
        unsafe { old.free(&store.slab, layout) };
    }
}

/// The newest commit ts and commit time replay met.
struct Last {
    ts: CommitTs,
    time_us: u64,
}

/// Row ops per batch handed to a replay worker.
const REPLAY_BATCH_OPS: usize = 512;
/// Batches queued per worker (bounds replay memory).
const REPLAY_QUEUE_BATCHES: usize = 16;

/// A batch of row ops for one replay worker: the stores they refer to and
/// `[table u32][delete u8][len u32][row]` entries.
struct ReplayBatch {
    stores: Arc<CatalogState>,
    ops: Vec<u8>,
    count: usize,
}

/// Replays the WAL from `start_lsn`. The main thread reads and decodes;
/// row ops go to workers partitioned by primary-index shard, so each key's
/// ops apply in log order while cache misses of different shards overlap
/// (replay is memory-latency bound). DDL ops drain the workers first.
/// Every origin replays alike: an evicted row is gone, a loaded one there.
fn replay(
    wal: &Wal,
    start_lsn: Lsn,
    state: &mut CatalogState,
    report: &mut RecoveryReport,
    last: &mut Last,
) -> Result<()> {
    let workers = replay_workers();
    let failed: Mutex<Option<EngineError>> = Mutex::new(None);
    std::thread::scope(|scope| -> Result<()> {
        let mut senders = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (tx, rx) = std::sync::mpsc::sync_channel::<ReplayMsg>(REPLAY_QUEUE_BATCHES);
            senders.push(tx);
            let failed = &failed;
            handles.push(scope.spawn(move || replay_worker(&rx, failed)));
        }
        let mut snapshot = Arc::new(state.clone());
        let mut pending: Vec<ReplayBatch> =
            (0..workers).map(|_| ReplayBatch { stores: Arc::clone(&snapshot), ops: Vec::new(), count: 0 }).collect();
        let mut assembler = TxnAssembler::default();
        let mut key = Vec::new();
        let flush = |pending: &mut Vec<ReplayBatch>,
                     senders: &[std::sync::mpsc::SyncSender<ReplayMsg>],
                     stores: &Arc<CatalogState>| {
            for (w, batch) in pending.iter_mut().enumerate() {
                if batch.count > 0 {
                    let full =
                        std::mem::replace(batch, ReplayBatch { stores: Arc::clone(stores), ops: Vec::new(), count: 0 });
                    // A worker only stops receiving when the scope ends.
                    let _ = senders[w].send(ReplayMsg::Batch(full));
                }
            }
        };
        for item in wal.read_from(start_lsn)? {
            let (lsn, payload) = item?;
            let Some(AssembledTxn { commit_ts, commit_time_us, records, .. }) = assembler.push(lsn, payload)? else {
                continue;
            };
            for rec in &records {
                let (_, ops) = decode_record(rec)?;
                report.wal_ops_replayed += ops.len() as u64;
                for op in ops {
                    let OpRef::Row { op, table, row } = op else {
                        // DDL: let workers finish every earlier op, then change the catalog.
                        flush(&mut pending, &senders, &snapshot);
                        wait_idle(&senders);
                        apply(state, op, &mut key, &mut Vec::new())?;
                        snapshot = Arc::new(state.clone());
                        for b in &mut pending {
                            b.stores = Arc::clone(&snapshot);
                        }
                        continue;
                    };
                    let Some(store) = state.store(table) else {
                        if state.catalog.table_ever(table).is_some() {
                            continue; // dropped later in the log
                        }
                        return Err(EngineError::Corrupt(format!("WAL row for unknown table {}", table.0)));
                    };
                    // Validation, key and hash happen here: workers are the
                    // bottleneck (memory stalls), this thread has slack.
                    store.layout().validate_image(row)?;
                    store.pk_of(row, &mut key);
                    let hash = hash_key(&key);
                    let w = crate::primary::shard_of(hash) % workers;
                    let b = &mut pending[w];
                    b.ops.extend_from_slice(&table.0.to_le_bytes());
                    b.ops.push(u8::from(op == RowOp::Delete));
                    b.ops.extend_from_slice(&hash.to_le_bytes());
                    b.ops.extend_from_slice(&(key.len() as u32).to_le_bytes());
                    b.ops.extend_from_slice(&key);
                    b.ops.extend_from_slice(&(row.len() as u32).to_le_bytes());
                    b.ops.extend_from_slice(row);
                    b.count += 1;
                    if b.count >= REPLAY_BATCH_OPS {
                        let full = std::mem::replace(
                            b,
                            ReplayBatch { stores: Arc::clone(&snapshot), ops: Vec::new(), count: 0 },
                        );
                        let _ = senders[w].send(ReplayMsg::Batch(full));
                    }
                }
            }
            report.wal_records_replayed += records.len() as u64;
            last.ts = last.ts.max(commit_ts);
            last.time_us = last.time_us.max(commit_time_us);
        }
        flush(&mut pending, &senders, &snapshot);
        drop(senders);
        for h in handles {
            if h.join().is_err() {
                return Err(EngineError::Corrupt("WAL replay worker panicked".into()));
            }
        }
        Ok(())
    })?;
    match failed.into_inner() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Replay workers: `PGTIER_REPLAY_WORKERS` or one per core, 1 to 4.
fn replay_workers() -> usize {
    std::env::var("PGTIER_REPLAY_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
        .clamp(1, 4)
}

/// One replay worker: applies its batches in the order sent (an error is
/// kept in `failed` for `replay` to return) and answers barriers, until
/// its sender is dropped.
fn replay_worker(rx: &std::sync::mpsc::Receiver<ReplayMsg>, failed: &Mutex<Option<EngineError>>) {
    let mut scratch = Vec::new();
    for msg in rx {
        match msg {
            ReplayMsg::Batch(batch) => {
                if let Err(e) = apply_batch(&batch, &mut scratch) {
                    *failed.lock() = Some(e);
                }
            }
            ReplayMsg::Barrier(done) => {
                let _ = done.send(());
            }
        }
    }
}

enum ReplayMsg {
    Batch(ReplayBatch),
    /// Answered once everything sent before it is applied (DDL barrier).
    Barrier(std::sync::mpsc::SyncSender<()>),
}

/// Blocks until every worker has applied all batches sent so far.
fn wait_idle(senders: &[std::sync::mpsc::SyncSender<ReplayMsg>]) {
    let acks: Vec<_> = senders
        .iter()
        .map(|tx| {
            let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<()>(1);
            let _ = tx.send(ReplayMsg::Barrier(done_tx));
            done_rx
        })
        .collect();
    for rx in acks {
        let _ = rx.recv();
    }
}

fn apply_batch(batch: &ReplayBatch, scratch: &mut Vec<u8>) -> Result<()> {
    let ops = &batch.ops;
    let mut r = crate::codec::Reader::new(ops);
    for _ in 0..batch.count {
        let table = TableId(r.u32()?);
        let delete = r.u8()? != 0;
        let hash = r.u64()?;
        let key = r.bytes()?;
        let row = r.bytes()?;
        let Some(store) = batch.stores.store(table) else { continue };
        if delete {
            remove_hashed(store, hash, key, scratch);
        } else {
            upsert_hashed(store, hash, key, row, scratch);
        }
    }
    Ok(())
}

fn catalog_mut(state: &mut CatalogState) -> &mut Catalog {
    Arc::make_mut(&mut state.catalog)
}

fn apply(state: &mut CatalogState, op: OpRef<'_>, key: &mut Vec<u8>, scratch: &mut Vec<u8>) -> Result<()> {
    match op {
        OpRef::Row { op, table, row } => {
            // Ops on a table that a later record of the replay drops are
            // harmless; ops on a table we never saw created are corrupt.
            let Some(store) = state.store(table) else {
                if state.catalog.table_ever(table).is_some() {
                    return Ok(());
                }
                return Err(EngineError::Corrupt(format!("WAL row for unknown table {}", table.0)));
            };
            store.layout().validate_image(row)?;
            match op {
                RowOp::Insert | RowOp::Update => upsert(store, row, key, scratch),
                RowOp::Delete => remove(store, row, key, scratch),
            }
        }
        OpRef::CreateTable(TableDdl { table, indexes, foreign_keys }) => {
            if state.catalog.table_ever(table.id).is_some() {
                return Ok(());
            }
            let id = table.id;
            catalog_mut(state).add_table(Arc::clone(&table), indexes, foreign_keys);
            state.set_store(id, Some(Arc::new(TableStore::new(table))));
        }
        OpRef::DropTable(id) => {
            catalog_mut(state).remove_table(id);
            state.set_store(id, None);
        }
        OpRef::CreateIndex(index) => {
            if state.catalog.index(index.id).is_none() && state.catalog.table(index.table).is_some() {
                if let Some(store) = state.store(index.table) {
                    refuse_uncovering_stubs(state, store, &index)?;
                }
                catalog_mut(state).add_index(Arc::new(index));
            }
        }
        OpRef::DropIndex(id) => {
            catalog_mut(state).remove_index(id);
        }
        OpRef::SetAnnotation { table, annotation } => {
            // Absent: dropped later in the log (or already in the checkpoint).
            catalog_mut(state).set_annotation(table, annotation);
        }
    }
    Ok(())
}

/// A stub keeps only the columns of the indexes it was made under
/// (cold.rs): one loaded from the checkpoint cannot give an index created
/// after it its entries. CREATE INDEX takes two checkpoints before it
/// commits so that no retained one holds such stubs; finding one anyway
/// is refused rather than building a wrong index.
fn refuse_uncovering_stubs(state: &CatalogState, store: &TableStore, index: &crate::schema::IndexSchema) -> Result<()> {
    let table = &store.schema;
    let mut kept: Vec<usize> = table.primary_key.clone();
    for other in state.catalog.indexes_of(table.id) {
        kept.extend_from_slice(&other.columns);
    }
    if index.columns.iter().all(|c| kept.contains(c)) || !store.has_stubs() {
        return Ok(());
    }
    Err(EngineError::Corrupt(format!(
        "index \"{}\" was created after a checkpoint that holds rows of \"{}\" outside memory, which lack its columns",
        index.name, table.name
    )))
}

/// Builds every table's ordered indexes (bulk, from sorted entries) and FK
/// links, and counts rows. Tables are spread over the available cores.
fn build_metas(state: &CatalogState) -> Result<()> {
    let stores: Vec<&Arc<TableStore>> = state.live_stores().collect();
    let mut jobs: Vec<(&Arc<TableStore>, Arc<crate::schema::IndexSchema>)> = Vec::new();
    for store in &stores {
        for index in state.catalog.indexes_of(store.schema.id) {
            if index.ordered {
                jobs.push((store, index));
            }
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get).min(jobs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let built: Mutex<Vec<(TableId, IndexStore)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((store, index)) = jobs.get(i) else { return };
                    let istore = build_index_bulk(store, Arc::clone(index));
                    built.lock().push((store.schema.id, istore));
                }
            });
        }
    });
    let mut built = built.into_inner();
    for store in &stores {
        let id = store.schema.id;
        let mut meta = TableMeta::default();
        let mut mine: Vec<IndexStore> = Vec::new();
        let mut rest = Vec::new();
        for (t, i) in built.drain(..) {
            if t == id { mine.push(i) } else { rest.push((t, i)) }
        }
        built = rest;
        mine.sort_by_key(|i| (!i.schema.primary, i.schema.id));
        meta.indexes = mine.into_iter().map(Arc::new).collect();
        let link = |other: TableId| -> Weak<TableStore> { state.store(other).map_or_else(Weak::new, Arc::downgrade) };
        for fk in state.catalog.foreign_keys_of(id) {
            let other = link(fk.parent);
            meta.as_child.push(FkLink { fk, other });
        }
        for fk in state.catalog.referencing(id) {
            let other = link(fk.child);
            meta.as_parent.push(FkLink { fk, other });
        }
        *store.meta.write() = Arc::new(meta);
        store.live_rows.store(store.primary.len() as i64, Ordering::Relaxed);
    }
    Ok(())
}

/// Entries up to this many bytes sort inline (no pointer chasing).
const INLINE_ENTRY_BYTES: usize = 30;

/// Entries of every row, sorted, packed into leaves.
fn build_index_bulk(store: &TableStore, schema: Arc<crate::schema::IndexSchema>) -> IndexStore {
    let istore = store.new_index_store(Arc::clone(&schema));
    let layout = store.layout();
    let mut inline: Vec<([u8; INLINE_ENTRY_BYTES], u8)> = Vec::new();
    let mut long: Vec<Vec<u8>> = Vec::new();
    let mut pk = Vec::new();
    let mut entry = Vec::new();
    inline.reserve(store.primary.len());
    store.primary.for_each_head(|head| {
        let row = head.row(layout);
        store.pk_of(row, &mut pk);
        istore.entry(layout, row, &pk, &mut entry);
        if entry.len() <= INLINE_ENTRY_BYTES {
            let mut k = [0u8; INLINE_ENTRY_BYTES];
            k[..entry.len()].copy_from_slice(&entry);
            inline.push((k, entry.len() as u8));
        } else if entry.len() <= crate::ordered::ENTRY_BYTES_MAX {
            long.push(entry.clone());
        }
    });
    // (zero-padded bytes, length) orders exactly like the byte strings: equal
    // padded arrays mean one is a prefix of the other, and the shorter sorts first.
    inline.sort_unstable();
    let tree = if long.is_empty() {
        OrderedIndex::from_sorted(inline.iter().map(|(k, n)| &k[..usize::from(*n)]))
    } else {
        let mut all: Vec<Vec<u8>> = inline.iter().map(|(k, n)| k[..usize::from(*n)].to_vec()).collect();
        all.append(&mut long);
        all.sort_unstable();
        all.dedup();
        OrderedIndex::from_sorted(all.iter().map(Vec::as_slice))
    };
    IndexStore::new(schema, istore.spec, tree)
}
