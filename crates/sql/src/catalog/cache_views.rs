//! The rows of pgtier's cache-group views, `pgtier_cache_groups`,
//! `pgtier_cache_tables`, `pgtier_cache_stats`, `pgtier_cache_propagation`,
//! `pgtier_cache_lanes`, `pgtier_cache_swt`, `pgtier_cache_autorefresh` and `pgtier_tier_stats`:
//! one column per field of the cache's `GroupInfo`, `TableInfo`,
//! `GroupStats`, `PropagationInfo`, `LaneInfo`, `SwtStatus` and
//! `AutorefreshStatus`, read from the
//! attached cache each time a statement reads them; empty without one.

use pgtier_cache::Cache;
use pgtier_engine::Value;

use super::rows::text;

fn int8(n: u64) -> Value {
    Value::Int8(i64::try_from(n).unwrap_or(i64::MAX))
}

fn opt_text(s: Option<&str>) -> Value {
    s.map_or(Value::Null, text)
}

/// Groups and why, as one text ("g: why; h: why"), or None for none.
fn held(groups: &[(String, String)]) -> Option<String> {
    (!groups.is_empty()).then(|| groups.iter().map(|(g, r)| format!("{g}: {r}")).collect::<Vec<_>>().join("; "))
}

pub(super) fn rows(name: &str, cache: Option<&Cache>, out: &mut Vec<Value>) {
    let Some(cache) = cache else { return };
    match name {
        "pgtier_cache_groups" => group_rows(cache, out),
        "pgtier_cache_tables" => table_rows(cache, out),
        "pgtier_cache_stats" => stats_rows(cache, out),
        "pgtier_cache_propagation" => propagation_rows(cache, out),
        "pgtier_cache_lanes" => lane_rows(cache, out),
        "pgtier_cache_swt" => swt_rows(cache, out),
        "pgtier_cache_autorefresh" => autorefresh_rows(cache, out),
        "pgtier_tier_stats" => tier_rows(cache, out),
        _ => {}
    }
}

/// The flash tier: the store first (group NULL), then one row per group.
fn tier_rows(cache: &Cache, out: &mut Vec<Value>) {
    let opt_int8 = |n: Option<u64>| n.map_or(Value::Null, int8);
    let opt_float8 = |f: Option<f64>| f.map_or(Value::Null, Value::Float8);
    for t in cache.tier_stats() {
        out.extend([
            opt_text(t.group.as_deref()),
            text(&t.state),
            text(&t.policy),
            int8(t.memory_instances),
            int8(t.memory_bytes),
            opt_int8(t.flash_records),
            opt_int8(t.flash_live_bytes),
            opt_int8(t.flash_capacity_bytes),
            opt_int8(t.index_bytes),
            int8(t.flash_hits),
            int8(t.promotions),
            int8(t.backend_loads),
            opt_float8(t.flash_hit_ratio),
            int8(t.demotions),
            int8(t.dirty_demotions),
            opt_int8(t.durable_records),
            int8(t.invalidations),
            int8(t.rejections),
            opt_float8(t.read_p50_us),
            opt_float8(t.read_p99_us),
            opt_float8(t.write_amplification),
            int8(t.hot_rows),
            int8(t.warm_rows),
            int8(t.cold_rows),
        ]);
    }
}

fn group_rows(cache: &Cache, out: &mut Vec<Value>) {
    for g in cache.groups() {
        out.extend([
            text(&g.name),
            text(g.kind),
            Value::Bool(g.dynamic),
            text(&g.root_table),
            opt_text(g.root_predicate.as_deref()),
            text(&g.aging),
            Value::Bool(g.keep),
            g.memory_budget.map_or(Value::Null, int8),
        ]);
    }
}

fn table_rows(cache: &Cache, out: &mut Vec<Value>) {
    for t in cache.tables() {
        out.extend([
            text(&t.group),
            text(&t.table),
            text(&t.source),
            opt_text(t.parent.as_deref()),
            int8(t.rows),
            int8(t.memory_bytes),
        ]);
    }
}

fn stats_rows(cache: &Cache, out: &mut Vec<Value>) {
    for s in cache.stats() {
        out.extend([
            text(&s.group),
            int8(s.instances),
            int8(s.rows),
            int8(s.memory_bytes),
            int8(s.loaded_instances),
            int8(s.unloaded_instances),
            int8(s.refreshed_instances),
            int8(s.evicted_instances),
            int8(s.dynamic_loads),
            int8(s.dynamic_absent),
            Value::Float8(s.miss_latency_avg_us),
            int8(s.miss_latency_max_us),
            int8(s.loads_held),
            int8(s.load_hold_us),
        ]);
    }
}

fn propagation_rows(cache: &Cache, out: &mut Vec<Value>) {
    // One row while AWT propagation runs; none otherwise.
    if let Some(p) = cache.propagation_info() {
        out.extend([
            Value::Bool(p.connected),
            int8(p.applied_txns),
            int8(p.applied_statements),
            int8(p.batches),
            int8(p.errors),
            int8(p.retries),
            int8(p.backlog_bytes),
            Value::Float8(p.lag_ms),
            Value::Float8(p.lag_p50_ms),
            Value::Float8(p.lag_p99_ms),
            int8(p.lanes),
            opt_text(p.last_error.as_deref()),
            text(&p.state),
            text(&p.node),
            text(&p.incarnation),
            opt_text(held(&p.held_groups).as_deref()),
            int8(p.stalls),
            int8(p.marked_instances),
        ]);
    }
}

/// One row per AWT apply connection of the running session, the control connection ("x") last.
fn lane_rows(cache: &Cache, out: &mut Vec<Value>) {
    for l in cache.lanes() {
        out.extend([
            text(&l.lane),
            text(&l.state),
            int8(l.queued_txns),
            int8(l.queued_bytes),
            int8(l.applied_txns),
            Value::Float8(l.waiting_ms),
            Value::Int4(l.backend_pid),
            opt_text(l.last_error.as_deref()),
        ]);
    }
}

/// One row while an SWT group exists.
fn swt_rows(cache: &Cache, out: &mut Vec<Value>) {
    let Some(s) = cache.swt_status() else { return };
    let load = |v: &std::sync::atomic::AtomicU64| int8(v.load(std::sync::atomic::Ordering::Relaxed));
    out.extend([
        load(&s.commits),
        load(&s.refused),
        load(&s.in_doubt_resolved),
        load(&s.repairs),
        Value::Float8(s.latency.quantile_us(0.5) / 1000.0),
        Value::Float8(s.latency.quantile_us(0.99) / 1000.0),
        opt_text(s.last_error.lock().as_deref()),
        opt_text(held(&s.drifted.lock().iter().map(|(g, r)| (g.clone(), r.clone())).collect::<Vec<_>>()).as_deref()),
    ]);
}

/// One row per READONLY group that follows PostgreSQL.
fn autorefresh_rows(cache: &Cache, out: &mut Vec<Value>) {
    let load = |v: &std::sync::atomic::AtomicU64| int8(v.load(std::sync::atomic::Ordering::Relaxed));
    for s in cache.autorefresh_status() {
        out.extend([
            text(&s.group),
            text(&s.slot),
            text(*s.state.lock()),
            Value::Bool(s.connected.load(std::sync::atomic::Ordering::Relaxed)),
            load(&s.applied_txns),
            load(&s.applied_changes),
            load(&s.skipped_changes),
            load(&s.own_txns_skipped),
            int8(s.lag_bytes()),
            Value::Float8(s.lag_ms()),
            Value::Float8(s.lag.quantile_us(0.5) / 1000.0),
            Value::Float8(s.lag.quantile_us(0.99) / 1000.0),
            load(&s.retained_wal_bytes),
            load(&s.resnapshots),
            load(&s.errors),
            opt_text(s.last_error.lock().as_deref()),
        ]);
    }
}
