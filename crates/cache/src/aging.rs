//! Aging: instances leave the cache when they get old (`AGING USE column
//! LIFETIME n`, on the root row's date/timestamp) or when memory passes the
//! budget (`AGING LRU`: least recently used instances first, until memory is
//! below the low watermark). Whole instances only, as `Origin::Evict` (the
//! rows leave the cache; PostgreSQL keeps them), never an instance with
//! changes not yet propagated (except to flash in write-back mode, durably),
//! never a group marked KEEP by the budget.
//!
//! Recency: the engine stamps every row an application reads with a coarse
//! clock (`Database::access_tick`) on tables with access tracking on; an
//! instance's recency is the newest stamp of its rows. Memory: the engine's
//! per-table accounting (`Database::table_memory`), the same number
//! `pgtier_cache_stats` shows. Evicted versions are freed by the engine's
//! garbage collection; each batch of evictions is followed by a collection
//! of what it left (`Database::collect_garbage`), so memory does not first
//! grow by a whole round's deletes and the next round sees it freed.
//!
//! Which instances: a round does not rank every cached instance (reading
//! them all costs a round as much as the cache is large, and on a cache
//! several times its budget that was half the machine). Each group keeps a
//! clock hand over its root table's shards (`Transaction::scan_table_shards`,
//! fixed parts by key hash); a round examines shards from the hand on until
//! it has seen `SAMPLE_FACTOR` times the bytes it must free, evicts the least
//! recently used of those, and leaves the hand after them. An instance the
//! hand passes but spares was used more recently than those that went; it
//! is examined again one lap later. So a round costs about what it evicts,
//! and the choice is LRU within the window (sampled LRU, as Redis does it).
//! A round frees at most `ROUND_BYTES_MAX`: promotions go on while it runs,
//! and short rounds measure memory again soon (a round cannot measure its
//! own effect: its deletes are freed by garbage collection a moment later).
//!
//! One background thread per `Cache`, waking every `aging_interval`; it holds
//! only a weak reference, so dropping the cache stops it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use pgtier_engine::{Database, Origin, TABLE_SHARDS, Value};

use crate::error::CacheError;
use crate::instance::InstanceLayout;
use crate::registry::{GroupEntry, UnloadReport};
use crate::statement::Aging;
use crate::tuning::LiveTuning;

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

/// Instances evicted between two garbage collections.
const EVICT_BATCH: usize = 512;

/// Bytes of instances a round examines per byte it must free: the least
/// recently used half of what the hand passes over goes.
const SAMPLE_FACTOR: u64 = 2;

/// Bytes a round frees at most (about 5,000 TATP instances, ten batches).
/// A round sized by a large excess (150 MB chosen and evicted in one go)
/// ran for seconds while promotions went on, and under 8 promoting
/// sessions memory reached 1.6x the budget before the next round looked.
/// Short rounds look again often; misses run them too (`Cache::help_aging`).
const ROUND_BYTES_MAX: u64 = 4 << 20;

/// Between two rounds of the aging thread while memory is still far over
/// (`AgingReport::more`): long enough for garbage collection to free the
/// last round's deletes, so the next one measures what is left.
const CATCH_UP_PAUSE: Duration = Duration::from_millis(50);

/// Past this share of its budget (the group's own, or the global one),
/// with instances write-through has not sent yet, a group's misses wait
/// before loading (`GroupEntry::loads_held`). Above the high watermark so
/// that aging alone keeps a group whose write-through keeps up from ever
/// holding one.
pub(crate) const HOLD_LOADS_ABOVE: f64 = 1.25;

/// How long a round that evicted waits at most for garbage collection to
/// free its deletes (`Database::collect_garbage_committed`).
pub(crate) const GC_WAIT_MAX: Duration = Duration::from_millis(100);

/// What one aging round evicted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgingReport {
    /// Instances whose root timestamp passed the lifetime.
    pub expired: u64,
    /// Instances evicted for memory.
    pub evicted: u64,
    /// Estimated bytes freed by the memory evictions.
    pub freed_bytes: u64,
    /// Instances that would have gone but hold unpropagated changes.
    pub skipped_dirty: u64,
    /// Instances examined to choose the memory evictions (about
    /// `SAMPLE_FACTOR` times what they free, not the whole cache).
    pub examined: u64,
    /// The round stopped at `ROUND_BYTES_MAX` short of the low watermark:
    /// the aging thread runs the next one as soon as its deletes are
    /// collected, not an interval later.
    pub more: bool,
}

/// Bytes aging evicted that garbage collection may not have freed yet: a
/// delete is a new version, and the versions it ends stay (counted in the
/// tables' memory) until no snapshot can see them. Whoever measures memory
/// to decide on a round counts these as gone; once collection has passed
/// the last eviction counted, they are.
#[derive(Default)]
pub(crate) struct Uncollected {
    /// (bytes, `Database::garbage_mark` after the last eviction counted).
    state: Mutex<(u64, u64)>,
}

impl Uncollected {
    /// A round evicted `bytes` (its committed deletes).
    pub fn add(&self, db: &Database, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut state = self.state.lock();
        *state = (state.0.saturating_add(bytes), db.garbage_mark());
    }

    /// The bytes still uncollected as last checked (cheap).
    pub fn bytes(&self) -> u64 {
        self.state.lock().0
    }

    /// Checks with garbage collection (reads its queue: not on every miss)
    /// and returns the bytes still uncollected.
    pub fn check(&self, db: &Database) -> u64 {
        let mut state = self.state.lock();
        if state.0 > 0 && db.garbage_collected_since(state.1) {
            state.0 = 0;
        }
        state.0
    }
}

/// The aging thread's stop switch.
#[derive(Default)]
pub(crate) struct AgerControl {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl AgerControl {
    pub fn stop(&self) {
        *self.stopped.lock() = true;
        self.wake.notify_all();
    }

    /// A round now, and the interval read again (a reload changed the tuning).
    pub fn wake(&self) {
        let _stopped = self.stopped.lock();
        self.wake.notify_all();
    }
}

/// What aging asks of the cache (`Cache` implements it). The thread holds
/// it weakly, so dropping the cache stops aging.
pub(crate) trait AgingHost: Send + Sync {
    fn database(&self) -> &Database;
    /// One round now (`Cache::age_now`: one at a time, a new access epoch).
    fn age_now(&self) -> Result<AgingReport, CacheError>;
    /// Removes these instances of `entry`'s group, leaving those with
    /// changes PostgreSQL does not have yet (`registry::remove_instances`);
    /// `to_flash`: they go to the flash tier when the group uses it.
    fn remove_instances(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        keys: &[Vec<Value>],
        to_flash: bool,
    ) -> Result<UnloadReport, CacheError>;
    /// Whether instances of the group with changes PostgreSQL does not have
    /// yet may be evicted (to flash, durably: write-back mode).
    fn evicts_dirty(&self, entry: &GroupEntry) -> bool;
    /// Whether some of the group's instances cannot be evicted for want of
    /// write-through: changes PostgreSQL does not have yet, or (AWT) commits
    /// write-through has not read yet, before which nothing of an AWT
    /// group is evicted (`registry::remove_instances` waits for the marks).
    fn write_through_behind(&self, entry: &GroupEntry) -> bool;
}

pub(crate) fn spawn(
    cache: Weak<dyn AgingHost>,
    control: Arc<AgerControl>,
    tuning: Arc<LiveTuning>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("pgtier-aging".into()).spawn(move || {
        let mut wait = tuning.get().aging_interval;
        loop {
            {
                let mut stopped = control.stopped.lock();
                if !*stopped {
                    control.wake.wait_for(&mut stopped, wait);
                }
                if *stopped {
                    return;
                }
            }
            let Some(cache) = cache.upgrade() else { return };
            // A failed round (a lock conflict with an application writer,
            // the database shutting down) is retried at the next tick.
            let more = cache.age_now().is_ok_and(|report| report.more);
            let interval = tuning.get().aging_interval;
            wait = if more { CATCH_UP_PAUSE.min(interval) } else { interval };
        }
    })
}

/// One candidate for memory eviction.
struct Candidate {
    last_access: u32,
    bytes: u64,
    group: usize,
    key: Vec<Value>,
}

/// One aging round over `groups` (what `Cache::age_now` runs). Instances
/// used at or after `spare_from` (an access tick) stay. `uncollected`:
/// bytes earlier rounds evicted that garbage collection has not freed yet;
/// they are still counted in the tables' memory, and a round that measured
/// them would evict for them a second time.
pub(crate) fn age_round(
    cache: &dyn AgingHost,
    groups: &[Arc<GroupEntry>],
    limits: &Watermarks,
    spare_from: u32,
    uncollected: u64,
) -> Result<AgingReport, CacheError> {
    let db = cache.database();
    let mut report = AgingReport::default();
    let catalog = db.catalog();
    let layouts =
        groups.iter().map(|entry| InstanceLayout::resolve(&catalog, &entry.group)).collect::<Result<Vec<_>, _>>()?;
    for (entry, layout) in groups.iter().zip(&layouts) {
        if let Aging::Time { column, lifetime } = &entry.def.aging {
            let expired = expired_keys(db, entry, layout, column, *lifetime)?;
            let removed = cache.remove_instances(entry, layout, &expired, false)?;
            entry.counters.evicted.fetch_add(removed.instances, Ordering::Relaxed);
            report.expired += removed.instances;
            report.skipped_dirty += removed.skipped_dirty;
        }
    }
    let memory: Vec<u64> =
        layouts.iter().map(|layout| layout.tables.iter().map(|t| db.table_memory(t.id)).sum()).collect();
    let total = memory.iter().sum::<u64>().saturating_sub(uncollected);
    // By the memory as the round finds it; a hold is lifted by a later
    // round or by a waiting miss that measures memory back under (what
    // this round evicts is soon promoted again by the misses it lets go).
    for (entry, &used) in groups.iter().zip(&memory) {
        let held = holds_loads(entry, used, total, limits.budget, cache.evicts_dirty(entry), || {
            cache.write_through_behind(entry)
        });
        entry.loads_held.store(held, Ordering::Relaxed);
    }
    // Bytes to free per group (its own budget), and overall (the global
    // one): down to the low watermark once past the high one, at most
    // `ROUND_BYTES_MAX` in a round. What is evicted and not yet collected
    // is known only overall (a group's own budget is measured as it is:
    // the aging thread's rounds wait for collection).
    let mut more = false;
    let mut excess = |used: u64, limit: u64| {
        if used as f64 <= limits.high * limit as f64 {
            return 0;
        }
        let bytes = used - (limits.low * limit as f64) as u64;
        more |= bytes > ROUND_BYTES_MAX;
        bytes.min(ROUND_BYTES_MAX)
    };
    let mut group_excess: Vec<u64> = groups
        .iter()
        .zip(&memory)
        .map(|(entry, &used)| entry.def.memory_budget.map_or(0, |limit| excess(used, limit)))
        .collect();
    let mut global_excess = limits.budget.map_or(0, |limit| excess(total, limit));
    report.more = more;
    if global_excess == 0 && group_excess.iter().all(|&e| e == 0) {
        return Ok(report);
    }
    let evictable = |index: usize| {
        let entry = &groups[index];
        entry.def.aging == Aging::Lru && !entry.def.keep && (global_excess > 0 || group_excess[index] > 0)
    };
    // Instances used since `spare_from` are not least recently used (the
    // aging thread's rounds spare those used since they began; rounds a
    // miss runs spare the epoch before theirs too). Those a miss loaded for
    // a transaction still open are pinned besides
    // (`registry::InstancePin`), however old their stamps.
    let mut candidates = Vec::new();
    for index in (0..groups.len()).filter(|&i| evictable(i)) {
        let window = Window {
            dirty_too: cache.evicts_dirty(&groups[index]),
            spare_from,
            wanted: SAMPLE_FACTOR.saturating_mul(global_excess.max(group_excess[index])),
        };
        report.examined += collect_candidates(db, &groups[index], &layouts[index], index, &window, &mut candidates)?;
    }
    candidates.sort_by_key(|c| c.last_access);
    let mut chosen: Vec<Vec<Vec<Value>>> = vec![Vec::new(); groups.len()];
    for candidate in candidates {
        let group = candidate.group;
        if global_excess == 0 && group_excess[group] == 0 {
            continue;
        }
        global_excess = global_excess.saturating_sub(candidate.bytes);
        group_excess[group] = group_excess[group].saturating_sub(candidate.bytes);
        report.freed_bytes += candidate.bytes;
        chosen[group].push(candidate.key);
    }
    for ((entry, layout), keys) in groups.iter().zip(&layouts).zip(&chosen) {
        // A delete is a new version until garbage collection frees the old
        // ones: memory first grows by what is evicted. Collecting after every
        // batch keeps that rise to one batch instead of the whole round.
        for batch in keys.chunks(EVICT_BATCH) {
            let removed = cache.remove_instances(entry, layout, batch, true)?;
            entry.counters.evicted.fetch_add(removed.instances, Ordering::Relaxed);
            report.evicted += removed.instances;
            report.skipped_dirty += removed.skipped_dirty;
            db.collect_garbage();
        }
    }
    Ok(report)
}

/// Whether the group's loads wait for write-through (`GroupEntry::loads_held`):
/// its memory `used` or all groups' `total` past `HOLD_LOADS_ABOVE` of
/// the group's budget or the global `budget`, while write-through is
/// `behind` (`AgingHost::write_through_behind`). Only a group aging evicts
/// from, whose dirty instances cannot go to flash instead (`evicts_dirty`:
/// write-back).
pub(crate) fn holds_loads(
    entry: &GroupEntry,
    used: u64,
    total: u64,
    budget: Option<u64>,
    evicts_dirty: bool,
    behind: impl FnOnce() -> bool,
) -> bool {
    let past = |used: u64, limit: Option<u64>| limit.is_some_and(|limit| used as f64 > HOLD_LOADS_ABOVE * limit as f64);
    (past(used, entry.def.memory_budget) || past(total, budget))
        && entry.def.aging == Aging::Lru
        && !entry.def.keep
        && !evicts_dirty
        && behind()
}

/// The budgets a round works to.
pub(crate) struct Watermarks {
    /// The cache's memory budget (None: only groups' own budgets).
    pub budget: Option<u64>,
    /// Rounds evict above `high * budget`, down to `low * budget`.
    pub high: f64,
    pub low: f64,
}

/// What `collect_candidates` looks for.
struct Window {
    /// Instances with changes PostgreSQL does not have yet too (write-back).
    dirty_too: bool,
    /// Instances used at or after this access tick are passed over.
    spare_from: u32,
    /// Bytes of candidates to collect.
    wanted: u64,
}

/// Cached instances of a group with their recency and size, from the
/// group's clock hand on, until they hold `window.wanted` bytes or the hand
/// has been all the way round; the hand is left after the shards examined.
/// Instances the window spares are passed over and not counted: a round
/// that runs while the sessions work on most of what is cached still finds
/// what it must free. Returns how many instances it read.
fn collect_candidates(
    db: &Database,
    entry: &GroupEntry,
    layout: &InstanceLayout,
    group: usize,
    window: &Window,
    out: &mut Vec<Candidate>,
) -> Result<u64, CacheError> {
    let root = layout.root();
    let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Evict)?;
    let mut keys: Vec<Vec<Value>> = Vec::new();
    let (mut collected, mut examined) = (0u64, 0u64);
    let start = entry.clock_hand.load(Ordering::Relaxed) % TABLE_SHARDS;
    for step in 0..TABLE_SHARDS {
        let shard = (start + step) % TABLE_SHARDS;
        keys.clear();
        txn.scan_table_shards(root.id, shard..shard + 1, |row| {
            keys.push(root.primary_key.iter().map(|&c| row.get(c).to_owned_value()).collect());
            Ok(true)
        })?;
        for key in keys.drain(..) {
            if !window.dirty_too && entry.is_dirty(&key) {
                continue;
            }
            let Some(instance) = layout.read(&mut txn, &key)? else { continue };
            examined += 1;
            let (mut last_access, mut bytes) = (0u32, 0u64);
            for (table, rows) in layout.tables.iter().zip(&instance.rows) {
                for row in rows {
                    let pk: Vec<Value> = table.primary_key.iter().map(|&c| row[c].clone()).collect();
                    if let Some(meta) = txn.row_meta(table.id, &pk)? {
                        last_access = last_access.max(meta.last_access);
                        bytes += meta.bytes;
                    }
                }
            }
            if last_access >= window.spare_from {
                continue;
            }
            collected += bytes;
            out.push(Candidate { last_access, bytes, group, key });
        }
        entry.clock_hand.store((shard + 1) % TABLE_SHARDS, Ordering::Relaxed);
        if collected >= window.wanted {
            break;
        }
    }
    txn.rollback();
    Ok(examined)
}

/// Root keys of the instances whose root `column` is older than `lifetime`.
fn expired_keys(
    db: &Database,
    entry: &GroupEntry,
    layout: &InstanceLayout,
    column: &str,
    lifetime: Duration,
) -> Result<Vec<Vec<Value>>, CacheError> {
    let root = &entry.group.root().def;
    let Some(position) = root.columns.iter().position(|c| c.name == column) else {
        return Err(CacheError::InvalidSpec {
            group: entry.def.name.clone(),
            reason: format!("aging column \"{column}\" is not a column of \"{}\"", root.name),
        });
    };
    let now_us = i64::try_from(pgtier_engine::wall_clock_us()).unwrap_or(i64::MAX) - PG_EPOCH_OFFSET_US;
    let cutoff_us = now_us.saturating_sub(i64::try_from(lifetime.as_micros()).unwrap_or(i64::MAX));
    let key_columns = layout.root().primary_key.clone();
    let mut keys = Vec::new();
    let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Evict)?;
    txn.scan_table(layout.root().id, |row| {
        let old = match row.get(position).to_owned_value() {
            Value::Timestamp(us) | Value::TimestampTz(us) => us < cutoff_us,
            Value::Date(days) => i64::from(days) * 86_400_000_000 < cutoff_us,
            _ => false,
        };
        if old {
            keys.push(key_columns.iter().map(|&c| row.get(c).to_owned_value()).collect());
        }
        Ok(true)
    })?;
    txn.rollback();
    Ok(keys)
}
