//! The registry of cache groups as every mechanism sees it: a group's
//! entry (its definition, tables, counters, write-through marks, accepted
//! definitions, root-key columns and prepared write-through statements),
//! the table → group map, and the helpers they share (`quote_literal`,
//! instance removal in `removal`, marks and horizons in `marks`).
//!
//! Imports point down: this module uses the definitions (`group`,
//! `statement`) and instance layouts (`instance`), never a mechanism (load,
//! dynamic load, aging, AWT, SWT, autorefresh) nor the `Cache` front
//! object, which are built on it.

mod marks;
mod removal;

pub(crate) use marks::{Horizon, Marks, WHOLE_GROUP, lane_of};
pub use removal::UnloadReport;
pub(crate) use removal::{Admits, Demotion, remove_instances};

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

use parking_lot::Mutex;
use pgtier_engine::Value;

use crate::group::CacheGroup;
use crate::instance::key_text;
use crate::statement::CreateGroup;

/// One group as the registry holds it.
pub(crate) struct GroupEntry {
    pub def: CreateGroup,
    pub group: CacheGroup,
    pub counters: Counters,
    /// Write-through marks of the instances (by `key_text`; [`WHOLE_GROUP`]
    /// for a change whose instance could not be told): pending ones are
    /// never loaded over, refreshed, unloaded or evicted, and a load writes
    /// an instance only when its PostgreSQL snapshot holds every commit to it
    /// (`fence`).
    pub marks: Marks,
    /// Instances an eviction has deleted and not yet committed, and those
    /// a transaction's miss pinned (`Evicting`).
    pub evicting: Evicting,
    /// Set by each aging round while the group's memory is past
    /// `aging::HOLD_LOADS_ABOVE` of its budget with instances write-through
    /// has not sent yet (which aging may not evict): a miss then waits
    /// before loading (`Cache::hold_load`), so memory grows no faster than
    /// write-through cleans instances for aging to evict.
    pub loads_held: AtomicBool,
    /// When a miss last measured whether to hold the group (µs since the
    /// cache opened): at most one per `LOAD_CHECK_US`.
    pub loads_checked_us: AtomicU64,
    /// Aging's clock hand: the next shard of the root table
    /// (`pgtier_engine::TABLE_SHARDS` of them) it examines for eviction.
    pub clock_hand: AtomicUsize,
    /// Per table, its oid and definition digest in PostgreSQL, captured when
    /// the definitions were last found unchanged (`drift`); None until then.
    pub tokens: Mutex<Option<Vec<(u32, String)>>>,
    /// Per table, the definition fingerprint PostgreSQL's table must have:
    /// its own at creation, or one accepted since (`accept_definition`).
    pub accepted: Mutex<Vec<u64>>,
    /// Per table: the positions of the columns holding the root key.
    pub root_key_columns: Vec<Option<Vec<usize>>>,
    /// The node partition map (`shard.rs`); None: not partitioned over nodes.
    pub shards: Option<Arc<crate::shard::ShardMap>>,
    /// Per table and operation (insert, update, delete): write-through's prepared statement.
    shapes: Vec<[std::sync::OnceLock<Arc<Shape>>; 3]>,
}

/// Table name → (its group, its index in the group), over every group.
pub(crate) type TableMap = HashMap<String, (Arc<GroupEntry>, usize)>;

pub(crate) fn table_map<'a>(groups: impl Iterator<Item = &'a Arc<GroupEntry>>) -> TableMap {
    let mut map = HashMap::new();
    for entry in groups {
        for (index, table) in entry.group.tables.iter().enumerate() {
            map.insert(table.def.name.clone(), (entry.clone(), index));
        }
    }
    map
}

impl GroupEntry {
    pub(crate) fn new(
        def: CreateGroup,
        group: CacheGroup,
        accepted: Vec<u64>,
        shards: Option<crate::shard::ShardMap>,
    ) -> GroupEntry {
        let root_key_columns = root_key_columns(&group);
        let shapes = (0..group.tables.len()).map(|_| Default::default()).collect();
        let accepted = Mutex::new(accepted);
        GroupEntry {
            def,
            group,
            counters: Counters::default(),
            marks: Marks::default(),
            evicting: Evicting::default(),
            loads_held: AtomicBool::new(false),
            loads_checked_us: AtomicU64::new(0),
            clock_hand: AtomicUsize::new(0),
            tokens: Mutex::new(None),
            accepted,
            root_key_columns,
            shards: shards.map(Arc::new),
            shapes,
        }
    }

    /// The prepared statement for `op` on table `index` (built once by `build`).
    pub(crate) fn shape(&self, index: usize, op: pgtier_engine::RowOp, build: impl FnOnce() -> Shape) -> Arc<Shape> {
        let at = match op {
            pgtier_engine::RowOp::Insert => 0,
            pgtier_engine::RowOp::Update => 1,
            pgtier_engine::RowOp::Delete => 2,
        };
        self.shapes[index][at].get_or_init(|| Arc::new(build())).clone()
    }

    /// Changes PostgreSQL does not have yet are on the instance of `key`.
    pub fn is_dirty(&self, key: &[Value]) -> bool {
        self.marks.is_pending(&key_text(key))
    }

    /// The root key a row of table `index` belongs to, when the table carries it.
    pub fn root_key_of_row(&self, index: usize, row: &[Value]) -> Option<Vec<Value>> {
        let columns = self.root_key_columns.get(index)?.as_ref()?;
        columns.iter().map(|&c| row.get(c).cloned()).collect()
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub loaded: AtomicU64,
    pub unloaded: AtomicU64,
    pub refreshed: AtomicU64,
    pub evicted: AtomicU64,
    pub dynamic_loads: AtomicU64,
    pub dynamic_absent: AtomicU64,
    pub miss_count: AtomicU64,
    pub miss_us_total: AtomicU64,
    pub miss_us_max: AtomicU64,
    /// Misses by a unique key without the root key (`dynamic::UniqueLookup`):
    /// those that asked PostgreSQL whose row it is, and those a key record
    /// on flash answered that for.
    pub unique_asked: AtomicU64,
    pub unique_on_flash: AtomicU64,
    /// Misses that waited for write-through before loading, and how long
    /// they waited in all (`GroupEntry::loads_held`).
    pub loads_held: AtomicU64,
    pub load_hold_us: AtomicU64,
    /// Instances aging put on flash, took back into memory from it, looked
    /// for there in vain (then PostgreSQL answered), and the flash store
    /// would not take (too large, not admitted, index full).
    pub flash_demoted: AtomicU64,
    pub flash_promoted: AtomicU64,
    /// Reads flash answered without taking the instance back into memory.
    pub flash_answered: AtomicU64,
    pub flash_missed: AtomicU64,
    pub flash_rejected: AtomicU64,
    /// Of the demotions, instances with changes PostgreSQL does not have yet (write-back).
    pub flash_demoted_dirty: AtomicU64,
    /// Flash records forgotten one by one (a demotion undone).
    pub flash_invalidated: AtomicU64,
}

/// Instances being evicted, and instances that may not be.
///
/// Being evicted: deleted by an eviction that has not committed yet. A miss
/// on one waits until the eviction ends: before, the instance still looks
/// cached to a fresh snapshot, and the lookup that missed it (the delete
/// under way) would be told to look again and miss again, answering "no
/// row" for an instance that exists.
///
/// Pinned: a transaction missed on the instance and the miss found it
/// cached or loaded it (`InstancePin`, kept by that transaction until it
/// ends). The engine retries the lookup once; an eviction committed between
/// the load and that retry (an aging round on another thread, or one a
/// later miss of the same statement runs) would make it answer "no row"
/// (or update nothing) for a row PostgreSQL has. A pinned instance is left
/// by every eviction, as one whose rows an application holds.
///
/// The two are decided under one lock: a miss pins before it waits out an
/// eviction, and an eviction begins only when no pin is there, so either
/// the eviction ends before the miss looks (and the miss loads again) or
/// it never starts.
#[derive(Default)]
pub(crate) struct Evicting {
    keys: Mutex<EvictingKeys>,
    ended: parking_lot::Condvar,
}

#[derive(Default)]
struct EvictingKeys {
    evicting: std::collections::HashSet<String>,
    /// Pins per instance (several transactions may hold one).
    pinned: HashMap<String, u32>,
}

impl Evicting {
    /// Marks the instance of `key` as being evicted; false (and nothing
    /// marked) when a transaction pins it: it must stay.
    pub fn begin(&self, key: &[Value]) -> bool {
        let text = key_text(key);
        let mut keys = self.keys.lock();
        if keys.pinned.contains_key(&text) {
            return false;
        }
        keys.evicting.insert(text);
        true
    }

    /// The evictions of `keys` ended (committed or not).
    pub fn end<'a>(&self, keys: impl IntoIterator<Item = &'a Vec<Value>>) {
        let mut set = self.keys.lock();
        for key in keys {
            set.evicting.remove(&key_text(key));
        }
        drop(set);
        self.ended.notify_all();
    }

    /// Waits until no eviction of `key` is under way (evictions never wait
    /// for locks, so this is short); gives up after `bound`.
    pub fn wait_out(&self, key: &[Value], bound: std::time::Duration) {
        let text = key_text(key);
        let deadline = std::time::Instant::now() + bound;
        let mut set = self.keys.lock();
        while set.evicting.contains(&text) {
            if self.ended.wait_until(&mut set, deadline).timed_out() {
                return;
            }
        }
    }
}

/// A transaction's pin on one instance (see `Evicting`): no eviction
/// begins while it lives.
pub(crate) struct InstancePin {
    entry: Arc<GroupEntry>,
    key: String,
}

impl InstancePin {
    pub fn new(entry: &Arc<GroupEntry>, key: &[Value]) -> InstancePin {
        let text = key_text(key);
        *entry.evicting.keys.lock().pinned.entry(text.clone()).or_insert(0) += 1;
        InstancePin { entry: entry.clone(), key: text }
    }
}

impl Drop for InstancePin {
    fn drop(&mut self) {
        let mut keys = self.entry.evicting.keys.lock();
        if let Some(count) = keys.pinned.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                keys.pinned.remove(&self.key);
            }
        }
    }
}

/// The prepared statement for one kind of change to one table.
pub(crate) struct Shape {
    /// One per table and operation.
    pub name: String,
    pub prepare: String,
}

/// For each table of a group: the positions of its columns that hold the
/// root key (in root key order), when every root key column reaches it
/// through the foreign keys; None otherwise.
pub(crate) fn root_key_columns(group: &CacheGroup) -> Vec<Option<Vec<usize>>> {
    let mut maps: Vec<Option<Vec<usize>>> = Vec::with_capacity(group.tables.len());
    for table in &group.tables {
        let position = |name: &str| table.def.columns.iter().position(|c| c.name == name);
        let map = match (table.parent, &table.parent_key) {
            (None, _) => table.def.primary_key.iter().map(|name| position(name)).collect(),
            (Some(parent), Some((child_columns, parent_columns))) => maps[parent].as_ref().and_then(|parent_map| {
                parent_map
                    .iter()
                    .map(|&at| {
                        let parent_column = &group.tables[parent].def.columns[at].name;
                        let i = parent_columns.iter().position(|c| c == parent_column)?;
                        position(&child_columns[i])
                    })
                    .collect()
            }),
            (Some(_), None) => None,
        };
        maps.push(map);
    }
    maps
}

/// A SQL string literal (standard_conforming_strings, PostgreSQL's default).
pub(crate) fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
