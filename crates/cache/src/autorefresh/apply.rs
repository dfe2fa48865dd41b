//! Applying one PostgreSQL transaction, as decoded from the stream, to the
//! cache: one engine transaction with `Origin::Autorefresh` (write-through
//! never sends it back), together with the group's progress row.
//!
//! Which changes belong to the cache (DESIGN.md §3, instances):
//! - a root row belongs when it matches the group's predicate; in a DYNAMIC
//!   group only while its instance is cached (new ones come on demand);
//! - any other row belongs while its parent row is cached: following the
//!   foreign keys up, its instance is.
//!
//! Applying is idempotent (inserts and updates write the whole new row,
//! deletes remove it if present), so an instance loaded from a snapshot
//! newer than the stream's position converges once the stream passes it.
//! A root that enters the group by an UPDATE (now matching the predicate,
//! or cached no more) is read again from PostgreSQL with its children; a
//! root that leaves it takes its whole instance along.
//!
//! Foreign keys are not checked for this origin: PostgreSQL already did,
//! and it sends a cascaded child delete after its parent's.

use pgtier_backend::copy_out::{DecodeError, ValueKind};
use pgtier_backend::replication::{Relation, TupleValue};
use pgtier_engine::{CommitInfo, CommitMode, Database, Origin, Transaction, Value};

use super::progress::{self, Progress};
use crate::error::CacheError;
use crate::group::{CacheGroup, GroupTable};
use crate::instance::InstanceLayout;
use crate::registry::GroupEntry;
use crate::types::engine_value;

/// A root-row test compiled from the group's predicate by the SQL layer.
pub trait RowTest: Send {
    /// Whether `row` (the root table's columns, in order) matches.
    fn matches(&mut self, row: &[Value]) -> Result<bool, String>;
}

/// Compiles a group's root predicate into a [`RowTest`] (installed by the SQL layer).
pub trait PredicateCompiler: Send + Sync {
    fn compile(&self, table: &str, predicate: &str) -> Result<Box<dyn RowTest>, String>;
}

/// One change, in the cache's column order.
#[derive(Debug)]
pub(crate) enum Change {
    /// An INSERT or an UPDATE: the new row (None: a TOASTed value PostgreSQL
    /// did not send because it did not change); `old_key` when the key changed.
    Write {
        table: usize,
        update: bool,
        old_key: Option<Vec<Value>>,
        new: Vec<Option<Value>>,
    },
    Delete {
        table: usize,
        key: Vec<Value>,
    },
    Truncate {
        table: usize,
    },
}

/// How the columns of a PostgreSQL relation message map onto a group table.
#[derive(Clone, Debug)]
pub(crate) struct Mapping {
    pub table: usize,
    /// Per relation column: its position in the cache's row.
    pub positions: Vec<usize>,
    /// Positions of the primary key columns in the cache's row.
    pub key: Vec<usize>,
}

/// A table of READONLY group `group` changed in PostgreSQL: the group stops.
pub(crate) fn definition_changed(group: &str, table: &str, reason: &str) -> CacheError {
    CacheError::Autorefresh {
        sqlstate: "55000",
        message: format!(
            "table \"{table}\" changed in PostgreSQL ({reason}), so READONLY cache group \"{group}\" stopped following it"
        ),
        hint: Some(format!(
            "Resynchronise: DROP CACHE GROUP {group}, then CREATE it again (it imports the new definition) and LOAD CACHE GROUP {group}."
        )),
    }
}

/// Maps relation `relation` onto the group table with the same oid; a
/// definition other than the group's (columns added, dropped, renamed or
/// retyped in PostgreSQL) is an error that stops the group.
pub(crate) fn map_relation(group: &CacheGroup, relation: &Relation) -> Result<Option<Mapping>, CacheError> {
    let Some(index) = group.tables.iter().position(|t| t.source.oid == relation.oid) else { return Ok(None) };
    let table = &group.tables[index];
    let changed =
        |reason: String| definition_changed(&group.name, &format!("{}.{}", relation.schema, relation.name), &reason);
    let mut positions = Vec::with_capacity(relation.columns.len());
    let mut covered = vec![false; table.source.columns.len()];
    for column in &relation.columns {
        let Some(position) = table.source.columns.iter().position(|c| c.name == column.name) else {
            return Err(changed(format!("column \"{}\" is new", column.name)));
        };
        if table.source.columns[position].type_oid != column.type_oid {
            return Err(changed(format!("column \"{}\" has another type", column.name)));
        }
        covered[position] = true;
        positions.push(position);
    }
    if let Some(missing) = table.source.columns.iter().zip(&covered).find(|(_, covered)| !**covered) {
        if missing.0.generated.is_some() {
            return Err(CacheError::Autorefresh {
                sqlstate: "0A000",
                message: format!(
                    "column \"{}\" of table \"{}\" is generated: PostgreSQL does not replicate it, so READONLY cache group \"{}\" cannot follow the table",
                    missing.0.name, relation.name, group.name
                ),
                hint: None,
            });
        }
        return Err(changed(format!("column \"{}\" is gone", missing.0.name)));
    }
    let key = table
        .def
        .primary_key
        .iter()
        .filter_map(|name| table.def.columns.iter().position(|c| &c.name == name))
        .collect();
    Ok(Some(Mapping { table: index, positions, key }))
}

/// A decoded tuple in the cache's column order (None: unchanged TOAST).
pub(crate) fn decode_tuple(
    table: &GroupTable,
    mapping: &Mapping,
    tuple: &[TupleValue],
) -> Result<Vec<Option<Value>>, CacheError> {
    if tuple.len() != mapping.positions.len() {
        return Err(CacheError::Autorefresh {
            sqlstate: "08P01",
            message: format!(
                "a change of table \"{}\" has {} columns where its relation message has {}",
                table.def.name,
                tuple.len(),
                mapping.positions.len()
            ),
            hint: None,
        });
    }
    let mut row = vec![Some(Value::Null); table.types.len()];
    for (value, &position) in tuple.iter().zip(&mapping.positions) {
        row[position] = match value {
            TupleValue::Null => Some(Value::Null),
            TupleValue::UnchangedToast => None,
            TupleValue::Binary(bytes) => Some(decode_value(table, position, bytes)?),
            TupleValue::Text(_) => {
                return Err(CacheError::Autorefresh {
                    sqlstate: "08P01",
                    message: format!(
                        "column \"{}\" of table \"{}\" arrived in text form; autorefresh asks for binary",
                        table.source.columns[position].name, table.def.name
                    ),
                    hint: None,
                });
            }
        };
    }
    Ok(row)
}

fn decode_value(table: &GroupTable, column: usize, bytes: &[u8]) -> Result<Value, CacheError> {
    let name = &table.source.columns[column].name;
    let kind: ValueKind = table.kinds[column];
    let decoded = kind.decode(bytes).map_err(|error: DecodeError| pgtier_backend::BackendError::Decode {
        what: table.def.name.clone(),
        column: name.clone(),
        error,
    })?;
    engine_value(table.types[column], decoded).map_err(|reason| CacheError::BadValue {
        table: table.def.name.clone(),
        column: name.clone(),
        reason,
    })
}

/// The key columns of a full row.
fn key_of(primary_key: &[usize], row: &[Value]) -> Vec<Value> {
    primary_key.iter().map(|&c| row[c].clone()).collect()
}

/// Per child table: the positions of its foreign key columns in the order
/// of the parent's primary key, when the key references it (else None:
/// the parent is not looked up, the row is taken as belonging).
pub(crate) fn parent_lookups(group: &CacheGroup) -> Vec<Option<Vec<usize>>> {
    group
        .tables
        .iter()
        .map(|table| {
            let (parent, (child_columns, parent_columns)) = (table.parent?, table.parent_key.as_ref()?);
            let parent_pk = &group.tables[parent].def.primary_key;
            if parent_pk.len() != parent_columns.len() {
                return None;
            }
            parent_pk
                .iter()
                .map(|pk| {
                    let at = parent_columns.iter().position(|c| c == pk)?;
                    table.def.columns.iter().position(|c| c.name == child_columns[at])
                })
                .collect()
        })
        .collect()
}

/// What applying one transaction did.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub applied: u64,
    pub skipped: u64,
    /// Root keys to read again from PostgreSQL (instances that entered the group).
    pub reload: Vec<Vec<Value>>,
    /// A row could not be completed (an unchanged TOAST value of a row the
    /// cache did not hold, in a table without the root key): load the group again.
    pub resnapshot: bool,
    pub commit: Option<CommitInfo>,
}

/// Applies the changes of one PostgreSQL transaction and its progress row.
pub(crate) struct TxnApplier<'a> {
    pub db: &'a Database,
    pub entry: &'a GroupEntry,
    pub layout: &'a InstanceLayout,
    /// [`parent_lookups`] of the group.
    pub parents: &'a [Option<Vec<usize>>],
    pub predicate: Option<&'a mut Box<dyn RowTest>>,
}

impl TxnApplier<'_> {
    /// `before_commit` gets the root keys of instances that entered the
    /// group (to read from PostgreSQL); its error leaves nothing applied.
    pub fn apply(
        &mut self,
        changes: &[Change],
        progress: &Progress,
        before_commit: impl FnOnce(&[Vec<Value>]) -> Result<(), CacheError>,
    ) -> Result<Outcome, CacheError> {
        let mut outcome = Outcome::default();
        let mut txn = self.db.begin_with_origin(CommitMode::Async, Origin::Autorefresh)?;
        let parents = self.parents;
        for change in changes {
            match change {
                Change::Write { table, update, old_key, new } => {
                    self.write(&mut txn, parents, *table, *update, old_key.as_deref(), new, &mut outcome)?
                }
                Change::Delete { table, key } => {
                    let id = self.layout.tables[*table].id;
                    if txn.delete(id, key)? {
                        outcome.applied += 1;
                    } else {
                        outcome.skipped += 1;
                    }
                }
                Change::Truncate { table } => {
                    let layout = &self.layout.tables[*table];
                    let mut keys = Vec::new();
                    txn.scan_table(layout.id, |row| {
                        keys.push(
                            layout.primary_key.iter().map(|&c| row.get(c).to_owned_value()).collect::<Vec<Value>>(),
                        );
                        Ok(true)
                    })?;
                    for key in keys {
                        txn.delete(layout.id, &key)?;
                        outcome.applied += 1;
                    }
                }
            }
        }
        if outcome.resnapshot {
            txn.rollback();
            return Ok(outcome);
        }
        before_commit(&outcome.reload)?;
        progress::record(&mut txn, progress)?;
        outcome.commit = Some(txn.commit()?);
        Ok(outcome)
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        txn: &mut Transaction,
        parents: &[Option<Vec<usize>>],
        table: usize,
        update: bool,
        old_key: Option<&[Value]>,
        new: &[Option<Value>],
        outcome: &mut Outcome,
    ) -> Result<(), CacheError> {
        let layout = &self.layout.tables[table];
        let id = layout.id;
        let key: Vec<Value> = layout.primary_key.iter().map(|&c| new[c].clone().unwrap_or(Value::Null)).collect();
        let moved_from = old_key.filter(|old| *old != key.as_slice());
        let lookup = moved_from.unwrap_or(&key);
        let cached = txn.get_with(id, lookup, |row| row.values())?;
        // The whole new row: unchanged TOAST values from the cached one.
        let row: Option<Vec<Value>> = new
            .iter()
            .enumerate()
            .map(|(c, v)| v.clone().or_else(|| cached.as_ref().map(|old| old[c].clone())))
            .collect();
        let belongs = match &row {
            Some(row) => self.belongs(txn, parents, table, row, cached.is_some())?,
            None => true,
        };
        if table == 0 && !belongs {
            // The root left the group (or never was in it): its instance goes.
            if cached.is_some() {
                if let Some(instance) = self.layout.read(txn, lookup)? {
                    self.layout.delete(txn, &instance)?;
                }
                outcome.applied += 1;
            } else {
                outcome.skipped += 1;
            }
            return Ok(());
        }
        if !belongs {
            if cached.is_some() {
                txn.delete(id, lookup)?;
                outcome.applied += 1;
            } else {
                outcome.skipped += 1;
            }
            return Ok(());
        }
        let Some(row) = row else {
            // A value PostgreSQL did not resend, of a row the cache lacks.
            match self
                .entry
                .root_key_of_row(table, &new.iter().map(|v| v.clone().unwrap_or(Value::Null)).collect::<Vec<_>>())
            {
                Some(root) if table == 0 || !root.iter().any(|v| matches!(v, Value::Null)) => outcome.reload.push(root),
                _ => outcome.resnapshot = true,
            }
            return Ok(());
        };
        if table == 0 && update && cached.is_none() && !self.entry.def.dynamic && self.entry.group.tables.len() > 1 {
            // An existing root now in the group: its children are in
            // PostgreSQL, not in the stream.
            outcome.reload.push(key);
            return Ok(());
        }
        if moved_from.is_some() && cached.is_some() {
            txn.delete(id, lookup)?;
        }
        let exists = moved_from.is_none() && cached.is_some();
        if exists {
            let changes: Vec<(usize, Value)> =
                row.iter().cloned().enumerate().filter(|(c, _)| !layout.primary_key.contains(c)).collect();
            txn.update(id, &key, &changes)?;
        } else {
            txn.insert(id, &row)?;
        }
        outcome.applied += 1;
        Ok(())
    }

    /// Whether `row` of table `table` belongs to the cache (see the module comment).
    fn belongs(
        &mut self,
        txn: &mut Transaction,
        parents: &[Option<Vec<usize>>],
        table: usize,
        row: &[Value],
        cached: bool,
    ) -> Result<bool, CacheError> {
        if table == 0 {
            if self.entry.def.dynamic && !cached {
                return Ok(false);
            }
            return match self.predicate.as_mut() {
                None => Ok(true),
                Some(test) => test.matches(row).map_err(|reason| CacheError::Autorefresh {
                    sqlstate: "XX000",
                    message: format!(
                        "cache group \"{}\": evaluating its WHERE on a row from PostgreSQL failed: {reason}",
                        self.entry.def.name
                    ),
                    hint: None,
                }),
            };
        }
        let Some(columns) = &parents[table] else { return Ok(true) };
        let Some(parent) = self.entry.group.tables[table].parent else { return Ok(true) };
        let parent_key = key_of(columns, row);
        if parent_key.iter().any(|v| matches!(v, Value::Null)) {
            return Ok(false);
        }
        Ok(txn.get_with(self.layout.tables[parent].id, &parent_key, |_| ())?.is_some())
    }
}
