//! The rows of the system views (`pgtier_cache_groups`, `_tables`,
//! `_stats`, `_propagation`, `_lanes`) as the SQL layer and `/metrics` read them.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::Cache;
use crate::group::{CacheGroup, GroupKind};
use crate::registry::GroupEntry;
use crate::statement::{Aging, CreateGroup};

/// A row of `pgtier_cache_propagation`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PropagationInfo {
    pub connected: bool,
    pub applied_txns: u64,
    pub applied_statements: u64,
    pub batches: u64,
    /// Transactions PostgreSQL refused for good (in `pgtier.awt_errors`).
    pub errors: u64,
    pub retries: u64,
    /// WAL committed locally and not yet processed by propagation.
    pub backlog_bytes: u64,
    /// How far behind PostgreSQL is, in milliseconds (0 when nothing is pending).
    pub lag_ms: f64,
    /// Commit in the cache to commit in PostgreSQL, over applied transactions.
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    /// The largest commit-in-cache to commit-in-PostgreSQL time, exact.
    pub lag_max_ms: f64,
    pub lanes: u64,
    pub last_error: Option<String>,
    /// `starting`, `streaming`, `reconnecting`, or `refused` (the node name is another data directory's).
    pub state: String,
    /// This pgtier's node name and data directory incarnation.
    pub node: String,
    pub incarnation: String,
    /// Groups whose write-through is held (a table changed in PostgreSQL), with why.
    pub held_groups: Vec<(String, String)>,
    /// Lanes found stalled (work, no progress for `stall_timeout`) and reconnected.
    pub stalls: u64,
    /// Instances with write-through marks kept (pending, or needed by a load).
    pub marked_instances: u64,
}

/// A row of `pgtier_cache_lanes`: one AWT apply connection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaneInfo {
    /// The lane number, or `x` for the control connection (transactions spanning lanes).
    pub lane: String,
    /// `connecting`, `idle`, `applying`, `stalled`.
    pub state: String,
    pub queued_txns: u64,
    pub queued_bytes: u64,
    pub applied_txns: u64,
    /// How long the lane has had work without applying any (0: none waiting).
    pub waiting_ms: f64,
    pub backend_pid: i32,
    pub last_error: Option<String>,
}

/// A row of `pgtier_cache_groups`.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupInfo {
    pub name: String,
    /// "AWT", "SWT" or "READONLY".
    pub kind: &'static str,
    pub dynamic: bool,
    pub root_table: String,
    pub root_predicate: Option<String>,
    /// "OFF", "LRU" or "USE column LIFETIME n SECONDS".
    pub aging: String,
    pub keep: bool,
    pub memory_budget: Option<u64>,
}

/// A row of `pgtier_cache_tables`.
#[derive(Clone, Debug, PartialEq)]
pub struct TableInfo {
    pub group: String,
    pub table: String,
    /// The PostgreSQL table (`schema.table`).
    pub source: String,
    /// None for the root.
    pub parent: Option<String>,
    pub rows: u64,
    pub memory_bytes: u64,
}

/// A row of `pgtier_cache_stats`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupStats {
    pub group: String,
    pub instances: u64,
    pub rows: u64,
    pub memory_bytes: u64,
    pub loaded_instances: u64,
    pub unloaded_instances: u64,
    pub refreshed_instances: u64,
    pub evicted_instances: u64,
    pub dynamic_loads: u64,
    /// Dynamic lookups of keys PostgreSQL does not have either.
    pub dynamic_absent: u64,
    pub miss_latency_avg_us: f64,
    pub miss_latency_max_us: u64,
    /// Misses that waited for write-through before loading, and their
    /// waits in all (`GroupEntry::loads_held`).
    pub loads_held: u64,
    pub load_hold_us: u64,
}

impl Cache {
    /// A row of `pgtier_cache_propagation`: where write-through stands.
    pub fn propagation_info(&self) -> Option<PropagationInfo> {
        let status = self.propagation()?;
        let stats = self.db.stats();
        let position = status.position.load(Ordering::Relaxed);
        // Up to the newest application commit even before it is durable: an
        // asynchronous commit is acknowledged (and VERIFY sees it) up to
        // `async_flush_interval` before the reader can read it, and a
        // backlog of 0 must mean PostgreSQL has every acknowledged commit.
        let end = stats.wal_durable_end.0.max(self.db.application_commit_end().0);
        let backlog_bytes = end.saturating_sub(position);
        let last_applied = status.last_applied_commit_us.load(Ordering::Relaxed);
        let now_us = pgtier_engine::wall_clock_us();
        Some(PropagationInfo {
            connected: status.connected.load(Ordering::Relaxed),
            applied_txns: status.applied_txns.load(Ordering::Relaxed),
            applied_statements: status.applied_statements.load(Ordering::Relaxed),
            batches: status.batches.load(Ordering::Relaxed),
            errors: status.errors.load(Ordering::Relaxed),
            retries: status.retries.load(Ordering::Relaxed),
            backlog_bytes,
            // Nothing pending: no lag. Else the age of the last applied
            // commit bounds how far behind PostgreSQL is.
            lag_ms: if backlog_bytes == 0 || last_applied == 0 {
                0.0
            } else {
                now_us.saturating_sub(last_applied) as f64 / 1000.0
            },
            lag_p50_ms: status.lag.quantile_us(0.5) / 1000.0,
            lag_p99_ms: status.lag.quantile_us(0.99) / 1000.0,
            lag_max_ms: status.lag.max_us() as f64 / 1000.0,
            lanes: status.lanes.load(Ordering::Relaxed),
            last_error: status.last_error.lock().clone(),
            state: (*status.state.lock()).to_owned(),
            node: self.identity.name.clone(),
            incarnation: self.identity.incarnation.clone(),
            held_groups: status.held.lock().iter().map(|(g, r)| (g.clone(), r.clone())).collect(),
            stalls: status.stalls.load(Ordering::Relaxed),
            marked_instances: self.group_entries().iter().map(|entry| entry.marks.len() as u64).sum(),
        })
    }

    /// `pgtier_cache_lanes`: AWT's apply connections in the current session.
    pub fn lanes(&self) -> Vec<LaneInfo> {
        let Some(status) = self.propagation() else { return Vec::new() };
        let now_us = pgtier_engine::wall_clock_us();
        let lanes = status.lane_status.lock().clone();
        let count = lanes.len().saturating_sub(1);
        lanes
            .iter()
            .map(|lane| {
                let since = lane.waiting_since_us.load(Ordering::Relaxed);
                LaneInfo {
                    lane: if lane.lane == count { "x".into() } else { lane.lane.to_string() },
                    state: (*lane.state.lock()).to_owned(),
                    queued_txns: lane.queued_txns.load(Ordering::Relaxed),
                    queued_bytes: lane.queued_bytes.load(Ordering::Relaxed),
                    applied_txns: lane.applied_txns.load(Ordering::Relaxed),
                    waiting_ms: if since == 0 { 0.0 } else { now_us.saturating_sub(since) as f64 / 1000.0 },
                    backend_pid: lane.backend_pid.load(Ordering::Relaxed),
                    last_error: lane.last_error.lock().clone(),
                }
            })
            .collect()
    }

    /// `pgtier_cache_groups`.
    pub fn groups(&self) -> Vec<GroupInfo> {
        self.groups.read().values().map(|entry| group_info(&entry.def, &entry.group)).collect()
    }

    /// `pgtier_cache_tables`.
    pub fn tables(&self) -> Vec<TableInfo> {
        let sizes = self.table_sizes();
        let mut out = Vec::new();
        for entry in self.groups.read().values() {
            for table in &entry.group.tables {
                let (rows, memory_bytes) = sizes.get(table.def.name.as_str()).copied().unwrap_or((0, 0));
                out.push(TableInfo {
                    group: entry.def.name.clone(),
                    table: table.def.name.clone(),
                    source: table.source.name.to_string(),
                    parent: table.parent.map(|parent| entry.group.tables[parent].def.name.clone()),
                    rows,
                    memory_bytes,
                });
            }
        }
        out
    }

    /// `pgtier_cache_stats`.
    pub fn stats(&self) -> Vec<GroupStats> {
        let sizes = self.table_sizes();
        self.groups.read().values().map(|entry| group_stats(entry, &sizes)).collect()
    }

    /// Per engine table: (committed rows, bytes in memory).
    fn table_sizes(&self) -> HashMap<String, (u64, u64)> {
        self.db.stats().tables.into_iter().map(|t| (t.name, (t.rows, self.db.table_memory(t.id)))).collect()
    }
}

fn group_info(def: &CreateGroup, group: &CacheGroup) -> GroupInfo {
    GroupInfo {
        name: def.name.clone(),
        kind: match def.kind {
            GroupKind::Awt => "AWT",
            GroupKind::Swt => "SWT",
            GroupKind::ReadOnly => "READONLY",
        },
        dynamic: def.dynamic,
        root_table: group.root().def.name.clone(),
        root_predicate: def.root_predicate.clone(),
        aging: match &def.aging {
            Aging::Off => "OFF".into(),
            Aging::Lru => "LRU".into(),
            Aging::Time { column, lifetime } => format!("USE {column} LIFETIME {} SECONDS", lifetime.as_secs()),
        },
        keep: def.keep,
        memory_budget: def.memory_budget,
    }
}

fn group_stats(entry: &GroupEntry, sizes: &HashMap<String, (u64, u64)>) -> GroupStats {
    let size = |name: &str| sizes.get(name).copied().unwrap_or((0, 0));
    let counters = &entry.counters;
    let misses = counters.miss_count.load(Ordering::Relaxed);
    GroupStats {
        group: entry.def.name.clone(),
        instances: size(&entry.group.root().def.name).0,
        rows: entry.group.tables.iter().map(|t| size(&t.def.name).0).sum(),
        memory_bytes: entry.group.tables.iter().map(|t| size(&t.def.name).1).sum(),
        loaded_instances: counters.loaded.load(Ordering::Relaxed),
        unloaded_instances: counters.unloaded.load(Ordering::Relaxed),
        refreshed_instances: counters.refreshed.load(Ordering::Relaxed),
        evicted_instances: counters.evicted.load(Ordering::Relaxed),
        dynamic_loads: counters.dynamic_loads.load(Ordering::Relaxed),
        dynamic_absent: counters.dynamic_absent.load(Ordering::Relaxed),
        miss_latency_avg_us: if misses == 0 {
            0.0
        } else {
            counters.miss_us_total.load(Ordering::Relaxed) as f64 / misses as f64
        },
        miss_latency_max_us: counters.miss_us_max.load(Ordering::Relaxed),
        loads_held: counters.loads_held.load(Ordering::Relaxed),
        load_hold_us: counters.load_hold_us.load(Ordering::Relaxed),
    }
}
