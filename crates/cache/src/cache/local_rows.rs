//! The cache's side of rows of plain local tables on flash: which tables
//! are local, attaching the store to them, the aging round that moves their
//! idle rows, reconciliation at open and DISABLE's way back. The mechanism
//! (record keys, the engine's `ColdRows`) is `crate::local_rows`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use pgtier_engine::{ColdRef, ColdRows, Database, TableId};

use super::Cache;
use crate::error::CacheError;
use crate::local_rows::{DEMOTE_BATCH, FlashColdRows, parse_record_key};

impl Cache {
    /// Tables of the database that are not in a cache group and hold rows
    /// of their own: not sequences, views or schemas (annotated tables that
    /// hold none), not pgtier's own.
    pub(crate) fn local_tables(&self) -> Vec<TableId> {
        let catalog = self.db.catalog();
        let mut in_groups = HashSet::new();
        for entry in self.group_entries() {
            for table in &entry.group.tables {
                if let Some(schema) = catalog.table_by_name(&table.def.name) {
                    in_groups.insert(schema.id);
                }
            }
        }
        catalog
            .tables()
            .filter(|t| {
                t.sequence.is_none()
                    && t.annotation.is_none()
                    && !t.name.starts_with("pgtier_")
                    && !in_groups.contains(&t.id)
            })
            .map(|t| t.id)
            .collect()
    }

    /// Attaches the flash store to local tables it is not attached to yet
    /// (at open, and each aging round for tables created since), with
    /// access stamps on when their rows may move.
    pub(crate) fn attach_local_rows(&self) {
        if !self.flash.configured() {
            return;
        }
        let tables = self.local_tables();
        let mut attached = self.local_rows.attached.lock();
        attached.retain(|t| tables.contains(t));
        for table in tables {
            if attached.insert(table) {
                let store: Arc<dyn ColdRows> = Arc::new(FlashColdRows(self.this.clone()));
                self.db.set_cold_rows(table, Some(store));
                if self.local_rows().budget().is_some() {
                    self.db.set_access_tracking(table, true);
                }
            }
        }
    }

    /// Removes every local-row record no stub names (see the module
    /// docs), and starts references above them. Only while no local row
    /// moves (a record stored whose stub is not swapped in yet would look
    /// the same): at open before aging starts, and at DISABLE after
    /// `stop_demotions`. `records`: their keys, when a walk of the durable
    /// records already found them (open's `reconcile_flash`); None: walk.
    pub(crate) fn reconcile_local_rows(&self, records: Option<Vec<Vec<u8>>>) -> Result<u64, CacheError> {
        let Some(store) = self.flash_store() else { return Ok(0) };
        let mut live: HashSet<(TableId, ColdRef)> = HashSet::new();
        for table in self.local_tables() {
            self.db.for_each_stub(table, |_, cold| {
                live.insert((table, cold));
            });
        }
        let records = match records {
            Some(records) => records,
            None => {
                let mut records = Vec::new();
                store
                    .for_each_durable(|record, _| {
                        records.push(record.to_vec());
                        true
                    })
                    .map_err(crate::flash::tier_error)?;
                records
            }
        };
        let mut orphans = Vec::new();
        let mut highest = 0;
        for record in records {
            if let Some((table, cold, _)) = parse_record_key(&record) {
                highest = highest.max(cold.0);
                if !live.contains(&(table, cold)) {
                    orphans.push(record);
                }
            }
        }
        for record in &orphans {
            store.remove_deferred(record).map_err(crate::flash::tier_error)?;
        }
        store.sync().map_err(crate::flash::tier_error)?;
        self.local_rows().next_ref.fetch_max(highest + 1, Ordering::Relaxed);
        let removed = orphans.len() as u64;
        if removed > 0 {
            tracing::info!("flash tier: {removed} row image(s) of local tables no row needs any more were removed");
        }
        Ok(removed)
    }

    /// One round for local tables: above the high watermark of their
    /// budget, rows not used since the last round move to flash until
    /// their memory is below the low one. Write-back mode only. Returns
    /// the rows moved.
    pub(crate) fn age_local_rows(&self, idle_before: u32) -> Result<u64, CacheError> {
        let Some(budget) = self.local_rows().budget() else { return Ok(0) };
        let Some(_pass) = self.flash.local_demotion_pass() else { return Ok(0) };
        self.attach_local_rows();
        let tables: Vec<TableId> = self.local_rows().attached.lock().iter().copied().collect();
        let tuning = self.tuning.get();
        let memory = |db: &Database| tables.iter().map(|&t| db.table_memory(t)).sum::<u64>();
        let mut used = memory(&self.db);
        if (used as f64) <= tuning.high_watermark * budget as f64 {
            return Ok(0);
        }
        let low = (tuning.low_watermark * budget as f64) as u64;
        let mut moved = 0u64;
        for &table in &tables {
            // Until a call finds less than a batch (it went round the
            // table): rows stamped at or after `idle_before` stay.
            let mut hand = self.local_rows().hands.lock().get(&table).copied().unwrap_or(0);
            loop {
                let (n, next) = self.db.demote_idle(table, idle_before, DEMOTE_BATCH, hand)?;
                moved += n as u64;
                hand = next;
                used = memory(&self.db);
                // Fewer than a batch: the call went round every shard.
                if used <= low || n < DEMOTE_BATCH {
                    break;
                }
            }
            self.local_rows().hands.lock().insert(table, hand);
            if used <= low {
                break;
            }
        }
        Ok(moved)
    }

    /// DISABLE (demotions stopped): every stub of a local table back to
    /// memory, so the store can go (their images released once the WAL is
    /// durable); then what no stub names any more (a dropped table's
    /// images) goes too, or DISABLE would count it as unsaved data.
    pub(crate) fn promote_local_rows(&self) -> Result<u64, CacheError> {
        let mut promoted = 0;
        for table in self.local_tables() {
            promoted += self.db.promote_cold(table)? as u64;
        }
        self.reconcile_local_rows(None)?;
        Ok(promoted)
    }
}
