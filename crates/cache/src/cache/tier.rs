//! The flash tier as users manage and watch it: `ALTER CACHE TIER`
//! (`pgtier tier enable|disable|resize`) and the rows of `pgtier_tier_stats`
//! (`pgtier tier status`, `/metrics`). The mechanism is `flash.rs`.

use std::sync::atomic::Ordering;

use super::Cache;
use crate::error::CacheError;
use crate::statement::TierCommand;

/// A row of `pgtier_tier_stats`: the store (group None) or one group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TierInfo {
    /// None: the store as a whole.
    pub group: Option<String>,
    /// `enabled`, `disabled`, `not configured`, or `failed: why`.
    pub state: String,
    /// The group's `FLASH` policy (`DEFAULT`, `KEEP`, `NONE`); the store's I/O mode.
    pub policy: String,
    /// Memory: the group's instances and bytes there (the store row: all groups').
    pub memory_instances: u64,
    pub memory_bytes: u64,
    /// Flash: the store's records and bytes (the group rows: None, the store does not tell groups apart).
    pub flash_records: Option<u64>,
    pub flash_live_bytes: Option<u64>,
    pub flash_capacity_bytes: Option<u64>,
    /// Bytes of memory the store's index holds.
    pub index_bytes: Option<u64>,
    /// Misses in memory flash answered: a read from the record, or the
    /// instance taken back into memory (`promotions`) ...
    pub flash_hits: u64,
    /// Of those, the instances taken back into memory (a write, or a read
    /// of one read from flash recently).
    pub promotions: u64,
    /// ... and the ones PostgreSQL had to send.
    pub backend_loads: u64,
    /// Of misses in memory, the share flash answered.
    pub flash_hit_ratio: Option<f64>,
    /// Misses by a unique key that does not carry the root key (TATP's
    /// `sub_nbr`): the ones a key record on flash named the instance for,
    /// and the ones that asked PostgreSQL whose row it is.
    pub unique_on_flash: u64,
    pub unique_asked: u64,
    pub demotions: u64,
    /// Of those, instances with changes PostgreSQL did not have yet, stored durably (write-back).
    pub dirty_demotions: u64,
    /// Records on flash that are the only copy of their changes (write-back; store row only).
    pub durable_records: Option<u64>,
    /// Records forgotten because memory took the instance over or a load replaced it.
    pub invalidations: u64,
    /// Instances the store did not take (too large, not admitted yet, index full).
    pub rejections: u64,
    pub read_p50_us: Option<f64>,
    pub read_p99_us: Option<f64>,
    /// Bytes written to the device per byte of records stored.
    pub write_amplification: Option<f64>,
    /// Rows in memory by their last use (study 003's temperatures): hot
    /// within the last `HOT_TICKS` aging intervals, warm within the last
    /// `WARM_TICKS`, cold longer ago; what is on flash is colder still.
    pub hot_rows: u64,
    pub warm_rows: u64,
    pub cold_rows: u64,
}

/// Aging intervals (`CacheConfig::aging_interval`, the engine's access
/// tick) within which a row counts as hot ...
const HOT_TICKS: u32 = 1;
/// ... and as warm.
const WARM_TICKS: u32 = 10;

impl Cache {
    /// `ALTER CACHE TIER ...`; the message for the NOTICE.
    pub fn tier_command(&self, command: TierCommand) -> Result<String, CacheError> {
        if !self.flash.configured() {
            return Err(CacheError::Tier {
                sqlstate: "55000",
                reason: "no flash tier is configured: set [tier] size (and path) in the configuration and restart"
                    .into(),
            });
        }
        match command {
            TierCommand::Enable => {
                self.flash.enable(&self.db)?;
                Ok("flash tier enabled: instances aging evicts from memory go to flash from now on".into())
            }
            TierCommand::Disable => {
                // Write-back: what only flash holds comes back to memory first.
                self.flash.stop_demotions();
                for entry in self.group_entries() {
                    let layout = crate::instance::InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
                    self.flash.restore_durable(&self.db, &entry, &layout)?;
                }
                let local = self.promote_local_rows()?;
                self.flash.disable()?;
                Ok(if local > 0 {
                    format!(
                        "flash tier disabled: {local} row(s) of local tables came back into memory first; the rest of its records are dropped (PostgreSQL has every one of them)"
                    )
                } else {
                    "flash tier disabled: its records are dropped (PostgreSQL has every one of them)".into()
                })
            }
            TierCommand::Resize(bytes) => {
                self.flash.resize(bytes)?;
                Ok(format!("flash tier resized to {} MB", bytes >> 20))
            }
        }
    }

    /// At open: durable records whose instance memory holds go (a crash
    /// came between a promotion's commit and the record's removal).
    /// Returns the local tables' record keys it passed over (for
    /// `reconcile_local_rows`).
    pub(super) fn reconcile_flash(&self) -> Result<Vec<Vec<u8>>, CacheError> {
        let mut groups = Vec::new();
        for entry in self.group_entries() {
            let layout = crate::instance::InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
            groups.push((entry, layout));
        }
        self.flash.reconcile(&self.db, &groups)
    }

    /// `pgtier_tier_stats`: the store first, then one row per group.
    pub fn tier_stats(&self) -> Vec<TierInfo> {
        let stats = self.flash.stats();
        let state = match (self.flash.configured(), self.flash.enabled(), self.flash.failure.lock().clone()) {
            (false, _, _) => "not configured".to_owned(),
            (true, true, _) => "enabled".to_owned(),
            (true, false, Some(why)) => format!("failed: {why}"),
            (true, false, None) => "disabled".to_owned(),
        };
        let groups = self.stats();
        let entries = self.group_entries();
        let mut rows = Vec::with_capacity(entries.len() + 1);
        let mut store = TierInfo {
            group: None,
            state: state.clone(),
            policy: self.flash.io_mode().unwrap_or_default(),
            memory_instances: groups.iter().map(|g| g.instances).sum(),
            memory_bytes: groups.iter().map(|g| g.memory_bytes).sum(),
            ..TierInfo::default()
        };
        if let Some(stats) = &stats {
            store.flash_records = Some(stats.records);
            store.flash_live_bytes = Some(stats.live_bytes);
            store.flash_capacity_bytes = Some(stats.capacity_bytes);
            store.index_bytes = Some(stats.index_bytes);
            store.durable_records = Some(stats.durable_records);
            store.read_p50_us = stats.read_latency_quantile_us(0.5);
            store.read_p99_us = stats.read_latency_quantile_us(0.99);
            store.write_amplification = (stats.logical_bytes_written > 0)
                .then(|| stats.device_bytes_written as f64 / stats.logical_bytes_written as f64);
        }
        for entry in &entries {
            let counters = &entry.counters;
            let promotions = counters.flash_promoted.load(Ordering::Relaxed);
            let flash_hits = counters.flash_answered.load(Ordering::Relaxed) + promotions;
            let backend_loads = counters.dynamic_loads.load(Ordering::Relaxed);
            let group = groups.iter().find(|g| g.group == entry.def.name);
            let [hot_rows, warm_rows, cold_rows] = self.temperatures(entry);
            let row = TierInfo {
                group: Some(entry.def.name.clone()),
                state: if self.flash.accepts(entry) { state.clone() } else { "not used".into() },
                policy: entry.def.flash.as_str().to_owned(),
                memory_instances: group.map_or(0, |g| g.instances),
                memory_bytes: group.map_or(0, |g| g.memory_bytes),
                flash_hits,
                promotions,
                backend_loads,
                flash_hit_ratio: ratio(flash_hits, flash_hits + backend_loads),
                unique_on_flash: counters.unique_on_flash.load(Ordering::Relaxed),
                unique_asked: counters.unique_asked.load(Ordering::Relaxed),
                demotions: counters.flash_demoted.load(Ordering::Relaxed),
                dirty_demotions: counters.flash_demoted_dirty.load(Ordering::Relaxed),
                invalidations: counters.flash_invalidated.load(Ordering::Relaxed),
                rejections: counters.flash_rejected.load(Ordering::Relaxed),
                hot_rows,
                warm_rows,
                cold_rows,
                ..TierInfo::default()
            };
            store.flash_hits += row.flash_hits;
            store.promotions += row.promotions;
            store.backend_loads += row.backend_loads;
            store.unique_on_flash += row.unique_on_flash;
            store.unique_asked += row.unique_asked;
            store.demotions += row.demotions;
            store.dirty_demotions += row.dirty_demotions;
            store.invalidations += row.invalidations;
            store.rejections += row.rejections;
            store.hot_rows += row.hot_rows;
            store.warm_rows += row.warm_rows;
            store.cold_rows += row.cold_rows;
            rows.push(row);
        }
        store.flash_hit_ratio = ratio(store.flash_hits, store.flash_hits + store.backend_loads);
        if let Some(local) = self.local_tables_tier_row(&state) {
            rows.push(local);
        }
        rows.insert(0, store);
        rows
    }

    /// The row of plain local tables (`local_rows.rs`), named `(local
    /// tables)` (no group can be: parentheses), when their rows may use
    /// flash: memory, rows moved (demotions), rows read back (flash hits),
    /// images released (invalidations), temperatures.
    fn local_tables_tier_row(&self, state: &str) -> Option<TierInfo> {
        let local = self.local_rows();
        let counters = &local.counters;
        let demoted = counters.demoted.load(Ordering::Relaxed);
        if local.budget().is_none() && demoted == 0 {
            return None;
        }
        let tables = self.local_tables();
        let mut row = TierInfo {
            group: Some("(local tables)".into()),
            state: if self.flash.accepts_local_rows() { state.to_owned() } else { "not used".into() },
            policy: "write-back".into(),
            memory_instances: tables.iter().map(|&t| self.db.table_rows(t)).sum(),
            memory_bytes: tables.iter().map(|&t| self.db.table_memory(t)).sum(),
            flash_hits: counters.fetched.load(Ordering::Relaxed),
            demotions: demoted,
            dirty_demotions: demoted,
            invalidations: counters.released.load(Ordering::Relaxed),
            ..TierInfo::default()
        };
        for &table in &tables {
            let ages = self.db.access_ages(table, &[HOT_TICKS, WARM_TICKS]);
            row.hot_rows += ages.first().copied().unwrap_or(0);
            row.warm_rows += ages.get(1).copied().unwrap_or(0);
            row.cold_rows += ages.get(2).copied().unwrap_or(0);
        }
        Some(row)
    }
}

impl Cache {
    /// The group's rows in memory, hot, warm and cold (`TierInfo`). Rows
    /// rather than instances: the engine keeps one stamp per row, and
    /// counting them reads only the stamps.
    fn temperatures(&self, entry: &crate::registry::GroupEntry) -> [u64; 3] {
        let catalog = self.db.catalog();
        let mut counts = [0u64; 3];
        for table in &entry.group.tables {
            let Some(schema) = catalog.table_by_name(&table.def.name) else { continue };
            let ages = self.db.access_ages(schema.id, &[HOT_TICKS, WARM_TICKS]);
            for (count, n) in counts.iter_mut().zip(ages) {
                *count += n;
            }
        }
        counts
    }
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}
