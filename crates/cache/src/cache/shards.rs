//! Node partitions as the `Cache` enforces them (`shard.rs` holds the map):
//! declaring a map, checking a group fits one, and what the SQL layer asks
//! before it reads or writes a table of a partitioned group.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use pgtier_engine::{DataType, TableId, Value};

use super::Cache;
use crate::error::CacheError;
use crate::group::{CacheGroup, GroupKind};
use crate::registry::GroupEntry;
use crate::shard::{self, ShardMap, key_int};
use crate::statement::CreateGroup;

/// A table of a partitioned group: its entry and the position of the root key column.
pub(super) type ShardTables = HashMap<TableId, (Arc<GroupEntry>, usize)>;

/// What a statement may do with a table, by the columns it binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionAccess {
    /// The table is not partitioned over nodes (or pgtier scans its own).
    Unrestricted,
    /// The root key is bound to a value this node owns (or NULL: no row).
    Owned,
    /// The root key is not bound: only this node's rows are here, so the
    /// caller answers only when that is exact (a unique lookup that finds
    /// its row) and otherwise refuses ([`Cache::partition_refusal`]).
    Unbound,
}

impl Cache {
    /// ALTER CACHE GROUP g PARTITION BY RANGE: writes the map into
    /// PostgreSQL. A group this node has already is refused (55000): nodes
    /// read the map when they create the group.
    pub fn declare_partitions(&self, map: &ShardMap) -> Result<(), CacheError> {
        map.validate()?;
        if let Ok(entry) = self.entry(&map.group)
            && entry.shards.as_deref() != Some(map)
        {
            return Err(CacheError::InvalidSpec {
                group: map.group.clone(),
                reason:
                    "exists on this node already: drop it on every node, declare the partitions, then create it again"
                        .into(),
            });
        }
        let mut client = self.connect()?;
        crate::backend_schema::ensure(&mut client)?;
        shard::declare(&mut client, map)
    }

    /// The map of group `name`, None when it is not partitioned over nodes.
    pub fn partition_map(&self, name: &str) -> Result<Option<ShardMap>, CacheError> {
        Ok(self.entry(name)?.shards.as_deref().cloned())
    }

    /// Whether any group is partitioned over nodes: the SQL layer's fast path.
    pub fn has_node_partitions(&self) -> bool {
        self.any_sharded.load(Ordering::Relaxed)
    }

    /// What a statement may do with `table` binding `bound` (column
    /// position, value) by equality. A key another node owns is refused
    /// with 0AP01 naming the owner.
    pub fn partition_access(&self, table: TableId, bound: &[(usize, &Value)]) -> Result<PartitionAccess, CacheError> {
        if !self.has_node_partitions() || shard::own_scans() {
            return Ok(PartitionAccess::Unrestricted);
        }
        let tables = self.shard_tables.read().clone();
        let Some((entry, column)) = tables.get(&table) else { return Ok(PartitionAccess::Unrestricted) };
        let Some((_, value)) = bound.iter().find(|(c, _)| c == column) else { return Ok(PartitionAccess::Unbound) };
        if value.is_null() {
            return Ok(PartitionAccess::Owned);
        }
        let Some(key) = key_int(value) else { return Ok(PartitionAccess::Unbound) };
        self.check_owned(entry, key)?;
        Ok(PartitionAccess::Owned)
    }

    /// A new row of `table` (all its columns): refused unless this node owns its root key.
    pub fn partition_check_row(&self, table: TableId, row: &[Value]) -> Result<(), CacheError> {
        if !self.has_node_partitions() {
            return Ok(());
        }
        let tables = self.shard_tables.read().clone();
        let Some((entry, column)) = tables.get(&table) else { return Ok(()) };
        match row.get(*column).and_then(key_int) {
            Some(key) => self.check_owned(entry, key),
            None => Ok(()), // NULL: the NOT NULL of a key column refuses it
        }
    }

    /// The 0A000 refusal of a statement on `table` that does not bind the
    /// root key and that this node cannot answer exactly.
    pub fn partition_refusal(&self, table: TableId, reason: &str) -> CacheError {
        let tables = self.shard_tables.read().clone();
        match tables.get(&table) {
            Some((entry, column)) => {
                let index = entry.group.tables.iter().position(|t| {
                    self.db.catalog().table_by_name(&t.def.name).is_some_and(|schema| schema.id == table)
                });
                let table_name = index.map_or_else(String::new, |i| entry.group.tables[i].def.name.clone());
                let column_name = index
                    .and_then(|i| entry.group.tables[i].def.columns.get(*column))
                    .map_or_else(String::new, |c| c.name.clone());
                CacheError::ShardScan {
                    group: entry.def.name.clone(),
                    table: table_name,
                    column: column_name,
                    reason: reason.to_owned(),
                }
            }
            None => CacheError::NotYet { what: "this statement on a node-partitioned table" },
        }
    }

    /// Refuses a root key of `entry` this node does not own.
    pub(super) fn check_owned(&self, entry: &GroupEntry, key: i64) -> Result<(), CacheError> {
        let Some(map) = entry.shards.as_deref() else { return Ok(()) };
        match map.of_node(&self.identity.name) {
            Some(mine) if mine.contains(key) => Ok(()),
            _ => Err(map.wrong_node(&self.identity.name, key)),
        }
    }

    /// A dynamic miss's root key: refused when another node owns it.
    pub(super) fn check_owned_key(&self, entry: &GroupEntry, root_key: &[Value]) -> Result<(), CacheError> {
        match (entry.shards.as_ref(), root_key) {
            (Some(_), [value]) => key_int(value).map_or(Ok(()), |key| self.check_owned(entry, key)),
            _ => Ok(()),
        }
    }

    /// The condition on root rows of every instance this node may hold:
    /// the group's WHERE and, partitioned over nodes, this node's range
    /// (LOAD, REFRESH and VERIFY send it to PostgreSQL).
    pub(super) fn own_predicate(&self, entry: &GroupEntry) -> Option<String> {
        let group = entry.def.root_predicate.as_deref();
        let Some(map) = entry.shards.as_deref() else { return group.map(str::to_owned) };
        // A node outside the map owns nothing (create_group refuses that).
        let range = match map.of_node(&self.identity.name) {
            Some(mine) => shard::range_predicate(&map.column, mine),
            None => Some("false".into()),
        };
        super::combine(group, range.as_deref())
    }

    /// Rebuilds the table → (group, root key column) map of partitioned groups.
    pub(super) fn shard_tables_changed(&self, groups: &[Arc<GroupEntry>]) {
        let catalog = self.db.catalog();
        let mut tables = ShardTables::new();
        for entry in groups.iter().filter(|e| e.shards.is_some()) {
            for (index, table) in entry.group.tables.iter().enumerate() {
                let (Some(schema), Some(Some([column]))) =
                    (catalog.table_by_name(&table.def.name), entry.root_key_columns.get(index).map(Option::as_deref))
                else {
                    continue;
                };
                tables.insert(schema.id, (entry.clone(), *column));
            }
        }
        self.any_sharded.store(!tables.is_empty(), Ordering::Relaxed);
        *self.shard_tables.write() = Arc::new(tables);
    }
}

/// A group fits its map: AWT or SWT, a one-column integer root key named
/// as the map's column, every table carrying it, and this node in the map.
pub(super) fn check_shardable(
    def: &CreateGroup,
    group: &CacheGroup,
    map: &ShardMap,
    node: &str,
) -> Result<(), CacheError> {
    let invalid = |reason: String| CacheError::InvalidSpec { group: def.name.clone(), reason };
    if def.kind == GroupKind::ReadOnly {
        return Err(CacheError::NotYet { what: "a READONLY cache group partitioned over nodes" });
    }
    let root = group.root();
    if root.def.primary_key != [map.column.clone()] {
        return Err(invalid(format!(
            "is partitioned over nodes by \"{}\" (pgtier.node_partitions), but its root key is ({})",
            map.column,
            root.def.primary_key.join(", ")
        )));
    }
    let integer = root
        .def
        .columns
        .iter()
        .find(|c| c.name == map.column)
        .is_some_and(|c| matches!(c.ty, DataType::Int2 | DataType::Int4 | DataType::Int8));
    if !integer {
        return Err(CacheError::NotYet { what: "a node partition map over a root key that is not an integer" });
    }
    let keys = crate::registry::root_key_columns(group);
    if let Some(i) = keys.iter().position(Option::is_none) {
        return Err(invalid(format!(
            "table \"{}\" does not carry the root key \"{}\", so its rows cannot be told to a node partition",
            group.tables[i].def.name, map.column
        )));
    }
    if map.of_node(node).is_none() {
        return Err(invalid(format!(
            "the node partition map (pgtier.node_partitions) gives this node \"{node}\" no range: add it, or create the group only on the nodes of the map"
        )));
    }
    Ok(())
}
