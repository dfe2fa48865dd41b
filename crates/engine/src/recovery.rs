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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Instant, SystemTime};

use parking_lot::{Condvar, Mutex, RwLock};
use pgtier_wal::{Lsn, Wal};

use crate::db::{CatalogState, CheckpointInfo, CommitState, Counters, DbInner, EngineConfig, RecoveryReport};
use crate::error::{EngineError, Result};
use crate::key::hash_key;
use crate::ordered::OrderedIndex;
use crate::primary;
use crate::schema::{Catalog, TableId};
use crate::stream::ConsumerRegistry;
use crate::table::{FkLink, IndexStore, TableMeta, TableStore};
use crate::txn::TxnManager;
use crate::version::VPtr;
use crate::walrec::{OpRef, RowOp, TxnAssembler, decode_record};

/// Commit ts of every version loaded at recovery (older than any snapshot).
const RECOVERED_TS: u64 = 1;

pub(crate) fn open(dir: &Path, config: EngineConfig) -> Result<DbInner> {
    let started = Instant::now();
    std::fs::create_dir_all(dir).map_err(|e| EngineError::io(format!("create {}", dir.display()), e))?;
    let wal = Wal::open(&dir.join("wal"), config.wal.clone())?;
    let mut report = RecoveryReport::default();
    let mut state = CatalogState::default();
    let mut start_lsn = Lsn(0);
    let mut checkpoints = Vec::new();
    for (lsn, path) in crate::checkpoint::list(dir)? {
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
            duration: std::time::Duration::ZERO,
            completed_at: std::fs::metadata(&path).and_then(|m| m.modified()).unwrap_or(SystemTime::now()),
            path,
        });
        break;
    }
    report.load_duration = started.elapsed();
    let replay_started = Instant::now();
    let mut max_ts = RECOVERED_TS;
    let mut assembler = TxnAssembler::default();
    let mut scratch = Vec::new();
    for item in wal.read_from(start_lsn)? {
        let (lsn, payload) = item?;
        let Some((_, commit_ts, records)) = assembler.push(lsn, payload)? else { continue };
        for rec in &records {
            let (_, ops) = decode_record(rec)?;
            report.wal_ops_replayed += ops.len() as u64;
            for op in ops {
                apply(&mut state, op, &mut scratch)?;
            }
        }
        report.wal_records_replayed += records.len() as u64;
        max_ts = max_ts.max(commit_ts);
    }
    report.replay_duration = replay_started.elapsed();
    let index_started = Instant::now();
    build_metas(&state)?;
    report.index_build_duration = index_started.elapsed();
    let consumers = ConsumerRegistry::load(dir)?;
    report.duration = started.elapsed();
    Ok(DbInner {
        dir: dir.to_path_buf(),
        txns: TxnManager::new(config.max_transactions, max_ts),
        config,
        wal,
        catalog: RwLock::new(Arc::new(state)),
        catalog_version: AtomicU64::new(1),
        commit: Mutex::new(CommitState { last_ts: max_ts, last_lsn: None }),
        ddl_owner: AtomicU64::new(0),
        gc: Mutex::new(std::collections::VecDeque::new()),
        gc_overflowed: AtomicBool::new(false),
        counters: Counters::default(),
        checkpoints: Mutex::new(checkpoints),
        checkpoint_serial: Mutex::new(()),
        consumers: Mutex::new(consumers),
        shutdown: Mutex::new(false),
        shutdown_cv: Condvar::new(),
        recovery: report,
    })
}

fn load_checkpoint(loaded: &crate::checkpoint::LoadedCheckpoint) -> Result<CatalogState> {
    let mut state = CatalogState { catalog: Arc::new(loaded.catalog.clone()), stores: Vec::new() };
    for table in loaded.catalog.tables() {
        state.set_store(table.id, Some(Arc::new(TableStore::new(Arc::clone(table)))));
    }
    let mut counts: Vec<(TableId, usize)> = Vec::new();
    for (table, count, _) in &loaded.blocks {
        match counts.iter_mut().find(|(t, _)| t == table) {
            Some((_, c)) => *c += *count as usize,
            None => counts.push((*table, *count as usize)),
        }
    }
    for (table, rows) in counts {
        if let Some(store) = state.store(table) {
            store.primary.reserve_total(rows, &store.pk, store.layout());
        }
    }
    let mut scratch = Vec::new();
    for (table, count, range) in &loaded.blocks {
        let Some(store) = state.store(*table) else {
            return Err(EngineError::Corrupt(format!("checkpoint rows for unknown table {}", table.0)));
        };
        let payload = &loaded.data[range.clone()];
        let mut at = 0;
        for _ in 0..*count {
            let len = payload.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
            let row = len.and_then(|len| payload.get(at + 4..at + 4 + len));
            let Some(row) = row else { return Err(EngineError::Corrupt("checkpoint block overrun".into())) };
            store.layout().validate_image(row)?;
            upsert(store, row, &mut scratch);
            at += 4 + row.len();
        }
    }
    Ok(state)
}

/// Replaces or inserts the single recovered version of the row's key.
fn upsert(store: &TableStore, row: &[u8], scratch: &mut Vec<u8>) {
    let mut key = Vec::new();
    store.pk_of(row, &mut key);
    let hash = hash_key(&key);
    let layout = store.layout();
    let mut map = store.primary.write(hash);
    let new = VPtr::alloc(&store.slab, RECOVERED_TS, None, row);
    match primary::find(&map, hash, &key, &store.pk, layout, scratch) {
        Some(old) => {
            primary::replace(&mut map, hash, &key, &store.pk, layout, new, scratch);
            // SAFETY: recovery is single-threaded; nothing else references it.
            unsafe { old.free(&store.slab, layout) };
        }
        None => primary::insert_new(&mut map, hash, &store.pk, layout, new),
    }
}

fn remove(store: &TableStore, row: &[u8], scratch: &mut Vec<u8>) {
    let mut key = Vec::new();
    store.pk_of(row, &mut key);
    let hash = hash_key(&key);
    let layout = store.layout();
    let mut map = store.primary.write(hash);
    if let Some(old) = primary::remove(&mut map, hash, &key, &store.pk, layout, scratch) {
        // SAFETY: as in `upsert`.
        unsafe { old.free(&store.slab, layout) };
    }
}

fn catalog_mut(state: &mut CatalogState) -> &mut Catalog {
    Arc::make_mut(&mut state.catalog)
}

fn apply(state: &mut CatalogState, op: OpRef<'_>, scratch: &mut Vec<u8>) -> Result<()> {
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
                RowOp::Insert | RowOp::Update => upsert(store, row, scratch),
                RowOp::Delete => remove(store, row, scratch),
            }
        }
        OpRef::CreateTable((table, indexes, fks)) => {
            if state.catalog.table_ever(table.id).is_some() {
                return Ok(());
            }
            let id = table.id;
            catalog_mut(state).add_table(Arc::clone(&table), indexes, fks);
            state.set_store(id, Some(Arc::new(TableStore::new(table))));
        }
        OpRef::DropTable(id) => {
            catalog_mut(state).remove_table(id);
            state.set_store(id, None);
        }
        OpRef::CreateIndex(index) => {
            if state.catalog.index(index.id).is_none() && state.catalog.table(index.table).is_some() {
                catalog_mut(state).add_index(Arc::new(index));
            }
        }
        OpRef::DropIndex(id) => {
            catalog_mut(state).remove_index(id);
        }
    }
    Ok(())
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
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((store, index)) = jobs.get(i) else { return };
                let istore = build_index_bulk(store, Arc::clone(index));
                built.lock().push((store.schema.id, istore));
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
        let mut rows = 0i64;
        for shard in store.primary.shards() {
            rows += shard.map.read().len() as i64;
        }
        store.live_rows.store(rows, Ordering::Relaxed);
    }
    Ok(())
}

/// Entries of every row, sorted in one arena, packed into leaves.
fn build_index_bulk(store: &TableStore, schema: Arc<crate::schema::IndexSchema>) -> IndexStore {
    let istore = store.new_index_store(Arc::clone(&schema));
    let layout = store.layout();
    let mut arena: Vec<u8> = Vec::new();
    let mut spans: Vec<(u32, u16)> = Vec::new();
    let mut pk = Vec::new();
    let mut entry = Vec::new();
    for shard in store.primary.shards() {
        let map = shard.map.read();
        for head in map.iter() {
            let row = head.row(layout);
            store.pk_of(row, &mut pk);
            istore.entry(layout, row, &pk, &mut entry);
            if entry.len() > crate::ordered::ENTRY_BYTES_MAX {
                continue; // refused at insert time; cannot occur in valid data
            }
            spans.push((arena.len() as u32, entry.len() as u16));
            arena.extend_from_slice(&entry);
        }
    }
    assert!(arena.len() < u32::MAX as usize, "index build arena exceeds 4 GiB");
    let slice = |&(off, len): &(u32, u16)| &arena[off as usize..off as usize + len as usize];
    spans.sort_unstable_by(|a, b| slice(a).cmp(slice(b)));
    spans.dedup_by(|a, b| slice(a) == slice(b));
    let tree = OrderedIndex::from_sorted(spans.iter().map(slice));
    IndexStore { schema, spec: istore.spec, tree }
}
