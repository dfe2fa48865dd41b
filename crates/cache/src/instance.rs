//! Cache instances in the engine: a root row and all its descendants,
//! found through the foreign keys of the group's tables (each child's
//! foreign key to its parent has an ordered child index in the engine, so
//! the rows of one parent are one prefix scan). UNLOAD, REFRESH and aging
//! read and remove instances only through here.

use pgtier_engine::{Catalog, DataType, Database, IndexId, Origin, TableId, Transaction, Value, coerce};

use crate::error::CacheError;
use crate::group::CacheGroup;

/// How to walk one group's instances in the engine (resolved from the
/// engine catalog once per operation: ids change when tables are re-created).
#[derive(Clone, Debug)]
pub(crate) struct InstanceLayout {
    pub tables: Vec<TableLayout>,
}

#[derive(Clone, Debug)]
pub(crate) struct TableLayout {
    pub id: TableId,
    /// Positions of the primary key columns.
    pub primary_key: Vec<usize>,
    pub key_types: Vec<DataType>,
    /// For a child: (group index of the parent, the engine's child index of
    /// the foreign key, positions in the parent row of the referenced columns
    /// in the order of the child index's leading columns).
    pub parent: Option<(usize, IndexId, Vec<usize>)>,
}

/// One instance as read: per group table, the rows (all columns) in scan order.
#[derive(Debug, Default)]
pub(crate) struct Instance {
    pub rows: Vec<Vec<Vec<Value>>>,
}

impl Instance {
    pub fn row_count(&self) -> u64 {
        self.rows.iter().map(|rows| rows.len() as u64).sum()
    }
}

impl InstanceLayout {
    pub fn resolve(catalog: &Catalog, group: &CacheGroup) -> Result<InstanceLayout, CacheError> {
        let missing = || CacheError::InvalidSpec {
            group: group.name.clone(),
            reason: "its tables are missing from the cache (dropped by hand?)".into(),
        };
        let mut tables: Vec<TableLayout> = Vec::with_capacity(group.tables.len());
        for table in &group.tables {
            let schema = catalog.table_by_name(&table.def.name).ok_or_else(missing)?;
            let key_types = schema.primary_key.iter().map(|&c| schema.columns[c].ty).collect();
            let parent = match table.parent {
                None => None,
                Some(parent_index) => {
                    let parent_id = tables[parent_index].id;
                    let fk = catalog
                        .foreign_keys_of(schema.id)
                        .into_iter()
                        .find(|fk| fk.parent == parent_id)
                        .ok_or_else(missing)?;
                    Some((parent_index, fk.child_index, fk.parent_columns.clone()))
                }
            };
            tables.push(TableLayout { id: schema.id, primary_key: schema.primary_key.clone(), key_types, parent });
        }
        Ok(InstanceLayout { tables })
    }

    pub fn root(&self) -> &TableLayout {
        &self.tables[0]
    }

    /// The root key `key` in the column types of the root's key (a lookup
    /// may bring an `int4` for a `bigint` key), or None when it cannot be one.
    pub fn normalize_root_key(&self, key: &[Value]) -> Option<Vec<Value>> {
        let root = self.root();
        if key.len() != root.key_types.len() {
            return None;
        }
        key.iter().zip(&root.key_types).map(|(value, ty)| coerce(value.clone(), *ty, "key").ok()).collect()
    }

    /// Reads the instance of `root_key` at `txn`'s snapshot; None when the
    /// root row is not cached.
    pub fn read(&self, txn: &mut Transaction, root_key: &[Value]) -> Result<Option<Instance>, CacheError> {
        let mut instance = Instance { rows: vec![Vec::new(); self.tables.len()] };
        let Some(root) = txn.get_with(self.root().id, root_key, |row| row.values())? else { return Ok(None) };
        instance.rows[0].push(root);
        for (index, table) in self.tables.iter().enumerate().skip(1) {
            let Some((parent, child_index, parent_columns)) = &table.parent else { continue };
            let mut found = Vec::new();
            for parent_row in &instance.rows[*parent] {
                let prefix: Vec<Value> = parent_columns.iter().map(|&c| parent_row[c].clone()).collect();
                if prefix.iter().any(|v| matches!(v, Value::Null)) {
                    continue;
                }
                txn.scan_prefix(*child_index, &prefix, |row| {
                    found.push(row.values());
                    Ok(true)
                })?;
            }
            instance.rows[index] = found;
        }
        Ok(Some(instance))
    }

    /// Deletes the rows of `instance` in `txn`, children first.
    pub fn delete(&self, txn: &mut Transaction, instance: &Instance) -> Result<(), CacheError> {
        for (table, rows) in self.tables.iter().zip(&instance.rows).rev() {
            for row in rows {
                let key: Vec<Value> = table.primary_key.iter().map(|&c| row[c].clone()).collect();
                txn.delete(table.id, &key)?;
            }
        }
        Ok(())
    }

    /// Whether the root row of `key` is cached (at a fresh snapshot).
    pub fn root_cached(&self, db: &Database, key: &[Value]) -> Result<bool, CacheError> {
        let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Load)?;
        let found = txn.get_with(self.root().id, key, |_| ())?.is_some();
        txn.rollback();
        Ok(found)
    }

    /// Whether the root row of `key` is in memory with `values` in its
    /// `columns` (at a fresh snapshot).
    pub fn root_row_holds(
        &self,
        db: &Database,
        key: &[Value],
        columns: &[usize],
        values: &[Value],
    ) -> Result<bool, CacheError> {
        let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Load)?;
        let holds = txn.get_with(self.root().id, key, |row| {
            columns.len() == values.len()
                && columns.iter().zip(values).all(|(&column, value)| row.get(column).to_owned_value() == *value)
        })?;
        txn.rollback();
        Ok(holds == Some(true))
    }

    /// Every cached root key (at a fresh snapshot).
    pub fn root_keys(&self, db: &Database) -> Result<Vec<Vec<Value>>, CacheError> {
        let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Evict)?;
        let mut keys = Vec::new();
        let key_columns = self.root().primary_key.clone();
        txn.scan_table(self.root().id, |row| {
            keys.push(key_columns.iter().map(|&c| row.get(c).to_owned_value()).collect());
            Ok(true)
        })?;
        txn.rollback();
        Ok(keys)
    }
}

/// A key as a hashable string (values already normalized to the key's types).
pub(crate) fn key_text(key: &[Value]) -> String {
    format!("{key:?}")
}
