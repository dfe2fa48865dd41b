//! Rows of plain local tables on flash (write-back mode, study 002): the
//! tables no PostgreSQL stands behind. When their memory passes
//! `[tier] local_tables` (a budget), aging moves the images of rows not
//! used since the last round to the flash store as durable records, and the
//! engine keeps each row as a stub (its key and indexed columns; the
//! engine's cold.rs): scans and indexes still find every row, and whatever
//! hands a row out reads its image back. Nothing else changes for SQL.
//!
//! Records: key `[LOCAL_PREFIX][table u32][ColdRef u64][primary key]`,
//! value the row's image, retention Durable, stored in batches (one
//! fdatasync each, `insert_deferred` + `sync`) before the engine swaps the
//! stubs in. The reference is part of the key, so every stub names a
//! record of its own: a row moved, changed (async, lost in a crash) and
//! moved again cannot overwrite the image the older stub still needs.
//!
//! Releases (the engine's, once the WAL is durable past the change that
//! made a stub unreachable) append tombstones without an fdatasync of
//! their own (`remove_deferred`): after a crash a released record may come
//! back, which `reconcile` (at open) removes with every other record no
//! stub names: stored just before a crash, before the engine swapped its
//! stub in; of a table since dropped.
//!
//! The store is attached to every local table whenever the tier is
//! configured, so stubs stay readable whichever mode the tier runs in;
//! without it (the tier not configured, or failed), reading a stub fails
//! with XX001: never a row with NULLs. DISABLE first brings every stub
//! back into memory (`Database::promote_cold`).

use std::collections::{HashMap, HashSet};
use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use pgtier_engine::{ColdRef, ColdRow, ColdRows, EngineError, TableId};
use pgtier_tier::{Inserted, Retention};

use crate::cache::Cache;

/// Keys of local rows start here: a group id no table has (u32::MAX) and a
/// generation no group uses, so `Flash::reconcile` tells them apart.
pub(crate) const LOCAL_PREFIX: [u8; 12] = {
    let mut prefix = [0xFF; 12];
    prefix[4] = 0xFE;
    prefix
};

/// Rows moved per engine call (one batch of records, one fdatasync).
pub(crate) const DEMOTE_BATCH: usize = 512;

/// The record key of a local row's image.
pub(crate) fn record_key(table: TableId, cold: ColdRef, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(LOCAL_PREFIX.len() + 12 + key.len());
    out.extend_from_slice(&LOCAL_PREFIX);
    out.extend_from_slice(&table.0.to_le_bytes());
    out.extend_from_slice(&cold.0.to_le_bytes());
    out.extend_from_slice(key);
    out
}

/// A local row's record key split back: table, reference, primary key.
pub(crate) fn parse_record_key(record: &[u8]) -> Option<(TableId, ColdRef, &[u8])> {
    let rest = record.strip_prefix(&LOCAL_PREFIX[..])?;
    let table = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?);
    let cold = u64::from_le_bytes(rest.get(4..12)?.try_into().ok()?);
    Some((TableId(table), ColdRef(cold), &rest[12..]))
}

/// What the flash tier did for local tables (counters since open).
#[derive(Debug, Default)]
pub(crate) struct LocalCounters {
    pub(crate) demoted: AtomicU64,
    pub(crate) fetched: AtomicU64,
    pub(crate) released: AtomicU64,
}

/// The cache's side of local tables on flash.
pub(crate) struct LocalRows {
    /// `[tier] local_tables`: memory local tables may use before their idle
    /// rows move to flash; None: none move.
    budget: Option<u64>,
    /// The next reference to hand out (above every one a record holds).
    pub(crate) next_ref: AtomicU64,
    /// Tables the store is attached to (and access tracked on).
    pub(crate) attached: Mutex<HashSet<TableId>>,
    /// Per table, the shard where the last round stopped.
    pub(crate) hands: Mutex<HashMap<TableId, usize>>,
    pub(crate) counters: LocalCounters,
}

impl LocalRows {
    pub(crate) fn new(budget: Option<u64>) -> LocalRows {
        // A clock start keeps references unique across restarts even before
        // `reconcile` has seen the records.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX >> 1));
        LocalRows {
            budget,
            next_ref: AtomicU64::new(now),
            attached: Mutex::new(HashSet::new()),
            hands: Mutex::new(HashMap::new()),
            counters: LocalCounters::default(),
        }
    }

    pub(crate) fn budget(&self) -> Option<u64> {
        self.budget
    }
}

/// The engine's `ColdRows` for local tables: the cache's flash store. Holds
/// the cache weakly (the engine holds this).
pub(crate) struct FlashColdRows(pub(crate) Weak<Cache>);

impl FlashColdRows {
    fn cache(&self) -> pgtier_engine::Result<std::sync::Arc<Cache>> {
        self.0.upgrade().ok_or(EngineError::ShuttingDown)
    }
}

fn hook_error(sqlstate: &'static str, message: String) -> EngineError {
    EngineError::Hook { sqlstate, message, hint: None }
}

fn off() -> EngineError {
    EngineError::Corrupt("a row of a local table is on the flash tier, which is not open".into())
}

fn tier_failed(error: impl std::fmt::Display) -> EngineError {
    EngineError::Corrupt(format!("the flash tier could not read a row of a local table: {error}"))
}

impl ColdRows for FlashColdRows {
    fn store(&self, table: TableId, rows: &[ColdRow<'_>]) -> pgtier_engine::Result<Vec<ColdRef>> {
        let cache = self.cache()?;
        let store = cache.flash_store().ok_or_else(|| {
            hook_error("55000", "the flash tier is not open: rows of local tables stay in memory".into())
        })?;
        let local = cache.local_rows();
        let mut refs = Vec::with_capacity(rows.len());
        for row in rows {
            let cold = ColdRef(local.next_ref.fetch_add(1, Ordering::Relaxed));
            match store.insert_deferred(&record_key(table, cold, row.key), row.image, Retention::Durable) {
                Ok(Inserted::Stored) => refs.push(cold),
                Ok(Inserted::Rejected(reason)) => {
                    return Err(hook_error(
                        "53100",
                        format!("the flash tier took no more rows of local tables: {reason:?}"),
                    ));
                }
                Err(error) => return Err(hook_error("58030", format!("flash tier: {error}"))),
            }
        }
        store.sync().map_err(|error| hook_error("58030", format!("flash tier: {error}")))?;
        local.counters.demoted.fetch_add(rows.len() as u64, Ordering::Relaxed);
        Ok(refs)
    }

    fn fetch(&self, table: TableId, key: &[u8], cold: ColdRef, out: &mut Vec<u8>) -> pgtier_engine::Result<()> {
        let cache = self.cache()?;
        let store = cache.flash_store().ok_or_else(off)?;
        match store.get(&record_key(table, cold, key)).map_err(tier_failed)? {
            Some((image, Retention::Durable)) => {
                out.extend_from_slice(&image);
                cache.local_rows().counters.fetched.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Some(_) | None => Err(EngineError::Corrupt(format!(
                "the flash tier holds no image {cold:?} for a row of table id {}",
                table.0
            ))),
        }
    }

    fn release(&self, table: TableId, key: &[u8], cold: ColdRef) {
        let Ok(cache) = self.cache() else { return };
        let Some(store) = cache.flash_store() else { return };
        // A tombstone lost in a crash brings the record back as an orphan,
        // which `reconcile` removes at the next open.
        if let Err(error) = store.remove_deferred(&record_key(table, cold, key)) {
            tracing::warn!("flash tier: a released row image of a local table stays until the next open: {error}");
        }
        cache.local_rows().counters.released.fetch_add(1, Ordering::Relaxed);
    }
}
