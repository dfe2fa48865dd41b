//! A cache group's definition: the tables named by the user, imported from
//! the PostgreSQL catalog in one snapshot, checked to form a tree rooted at
//! the root (each other table has exactly one foreign key to a table of the
//! group), and turned into engine `TableDef`s.

use pgtier_backend::catalog::{self, ForeignKeyAction, QualifiedName, TableDef as PgTable};
use pgtier_backend::copy_out::ValueKind;
use pgtier_engine::{ColumnDef, DataType, Database, FkAction, FkTiming, ForeignKeyDef, Origin, TableDef, TableId};
use postgres::Client;
use serde::{Deserialize, Serialize};

use crate::error::CacheError;
use crate::sequence::KeyDefault;
use crate::types::engine_type;

/// How changes flow between the group and PostgreSQL (DESIGN.md §3); only
/// recorded for now: propagation comes with its own issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupKind {
    ReadOnly,
    Awt,
    Swt,
}

/// What the user asks for: `root` and `children` as `[schema.]table`.
#[derive(Clone, Debug)]
pub struct GroupSpec {
    pub name: String,
    pub root: String,
    pub children: Vec<String>,
    pub kind: GroupKind,
}

/// One table of a defined group.
#[derive(Clone, Debug)]
pub struct GroupTable {
    /// PostgreSQL's definition as imported.
    pub source: PgTable,
    /// The engine table (named like the PostgreSQL table).
    pub def: TableDef,
    /// Index in [`CacheGroup::tables`] of the parent; None for the root.
    pub parent: Option<usize>,
    /// For a child: (its columns, the parent's columns) of the foreign key to the parent.
    pub parent_key: Option<(Vec<String>, Vec<String>)>,
    pub types: Vec<DataType>,
    pub kinds: Vec<ValueKind>,
}

/// A validated group; `tables[0]` is the root and every parent comes before its children.
#[derive(Clone, Debug)]
pub struct CacheGroup {
    pub name: String,
    pub kind: GroupKind,
    pub tables: Vec<GroupTable>,
}

impl CacheGroup {
    pub fn root(&self) -> &GroupTable {
        &self.tables[0]
    }

    /// The table indexes from `index` up to the root, `index` first.
    pub fn chain(&self, index: usize) -> Vec<usize> {
        let mut chain = vec![index];
        let mut at = index;
        while let Some(parent) = self.tables[at].parent {
            chain.push(parent);
            at = parent;
        }
        chain
    }
}

/// Imports `spec`'s tables from PostgreSQL (one REPEATABLE READ snapshot)
/// and validates them. Only schema `public` is accepted for now.
pub fn define_group(client: &mut Client, spec: &GroupSpec) -> Result<CacheGroup, CacheError> {
    let mut names: Vec<QualifiedName> = Vec::with_capacity(1 + spec.children.len());
    for input in std::iter::once(&spec.root).chain(&spec.children) {
        let name = QualifiedName::parse(input)?;
        if name.schema != "public" {
            return Err(CacheError::UnsupportedSchema { table: name.to_string() });
        }
        if names.contains(&name) {
            return Err(CacheError::DuplicateTable { group: spec.name.clone(), table: name.to_string() });
        }
        names.push(name);
    }
    let texts: Vec<String> = names.iter().map(ToString::to_string).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let imported = catalog::import_tables(client, &refs)?;
    build_group(spec, imported)
}

pub(crate) fn build_group(spec: &GroupSpec, imported: Vec<PgTable>) -> Result<CacheGroup, CacheError> {
    if imported.is_empty() {
        return Err(CacheError::InvalidSpec {
            group: spec.name.clone(),
            reason: "a cache group needs a root table".into(),
        });
    }
    let parents = find_parents(&imported)?;
    let order = parents_first(&imported, &parents)?;
    let mut tables = Vec::with_capacity(imported.len());
    let position = |original: usize| order.iter().position(|&o| o == original);
    for &original in &order {
        let source = &imported[original];
        let (parent, parent_fk) = match parents[original] {
            Some((parent, fk)) => (position(parent), Some(fk)),
            None => (None, None),
        };
        tables.push(group_table(source.clone(), parent, parent_fk)?);
    }
    Ok(CacheGroup { name: spec.name.clone(), kind: spec.kind, tables })
}

/// Per imported table: the (parent table, foreign key index) inside the group.
fn find_parents(imported: &[PgTable]) -> Result<Vec<Option<(usize, usize)>>, CacheError> {
    let mut parents = vec![None];
    for table in &imported[1..] {
        let mut inside = table.foreign_keys.iter().enumerate().filter_map(|(fk_index, fk)| {
            let parent = imported.iter().position(|other| other.oid == fk.referenced_oid && other.oid != table.oid)?;
            Some((parent, fk_index))
        });
        let first = inside.next();
        let name = table.name.to_string();
        match (first, inside.next()) {
            (None, _) => {
                return Err(CacheError::NotInTree {
                    table: name,
                    reason: "has no foreign key to another table of the cache group".into(),
                });
            }
            (Some(_), Some(_)) => {
                return Err(CacheError::NotInTree {
                    table: name,
                    reason:
                        "has more than one foreign key to tables of the cache group; it must have exactly one parent"
                            .into(),
                });
            }
            (Some(found), None) => parents.push(Some(found)),
        }
    }
    Ok(parents)
}

/// Imported indexes with every parent before its children; refuses cycles
/// (parents that never lead to the root).
fn parents_first(imported: &[PgTable], parents: &[Option<(usize, usize)>]) -> Result<Vec<usize>, CacheError> {
    let mut order = vec![0];
    while order.len() < imported.len() {
        let next = (0..imported.len())
            .find(|i| !order.contains(i) && parents[*i].is_some_and(|(parent, _)| order.contains(&parent)));
        match next {
            Some(next) => order.push(next),
            None => {
                let stuck = (0..imported.len()).find(|i| !order.contains(i)).unwrap_or(0);
                return Err(CacheError::NotInTree {
                    table: imported[stuck].name.to_string(),
                    reason: format!("does not lead to the root \"{}\" by its foreign keys", imported[0].name),
                });
            }
        }
    }
    Ok(order)
}

fn group_table(source: PgTable, parent: Option<usize>, parent_fk: Option<usize>) -> Result<GroupTable, CacheError> {
    let table = source.name.table.clone();
    let Some(pk) = &source.primary_key else {
        return Err(CacheError::NoPrimaryKey { table: source.name.to_string() });
    };
    let mut columns = Vec::with_capacity(source.columns.len());
    let (mut types, mut kinds) = (Vec::new(), Vec::new());
    for column in &source.columns {
        let (ty, kind) = engine_type(column).map_err(|hint| CacheError::UnsupportedType {
            table: source.name.to_string(),
            column: column.name.clone(),
            type_name: column.type_name.clone(),
            hint,
        })?;
        let mut def = ColumnDef::new(column.name.clone(), ty);
        // Keys come from PostgreSQL's sequence, never from a second counter
        // in the cache: the SQL layer draws the default through
        // `Cache::sequence_nextval` (see sequence.rs).
        def.default_sql = KeyDefault::of_column(column).map(|key| key.to_sql());
        columns.push(if column.not_null { def.not_null() } else { def });
        types.push(ty);
        kinds.push(kind);
    }
    let pk_columns: Vec<&str> = pk.columns.iter().map(String::as_str).collect();
    let mut def = TableDef::new(table, columns, &pk_columns);
    def.unique = source.unique_keys.iter().map(|key| (Some(key.name.clone()), key.columns.clone())).collect();
    // Only the foreign key to the parent: others lead outside the group,
    // where the engine has no table to check them against.
    let parent_fk = parent_fk.map(|fk| source.foreign_keys[fk].clone());
    if let Some(fk) = &parent_fk {
        def.foreign_keys.push(ForeignKeyDef {
            name: Some(fk.name.clone()),
            columns: fk.columns.clone(),
            parent_table: fk.referenced_table.table.clone(),
            parent_columns: fk.referenced_columns.clone(),
            on_delete: match fk.on_delete {
                ForeignKeyAction::Cascade => FkAction::Cascade,
                ForeignKeyAction::SetNull => FkAction::SetNull,
                // SET DEFAULT is not an engine action; application deletes of
                // a referenced parent are refused instead.
                ForeignKeyAction::NoAction | ForeignKeyAction::Restrict | ForeignKeyAction::SetDefault => {
                    FkAction::NoAction
                }
            },
            // As PostgreSQL declares it, so a transaction that writes a child
            // before its parent commits here as it does there.
            timing: match (fk.deferrable, fk.initially_deferred) {
                (false, _) => FkTiming::Immediate,
                (true, false) => FkTiming::DeferrableImmediate,
                (true, true) => FkTiming::DeferrableDeferred,
            },
        });
    }
    let parent_key = parent_fk.map(|fk| (fk.columns, fk.referenced_columns));
    Ok(GroupTable { source, def, parent, parent_key, types, kinds })
}

/// Creates the group's tables (parents first) in one engine transaction.
pub fn create_group_tables(db: &Database, group: &CacheGroup) -> Result<Vec<TableId>, CacheError> {
    let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Application)?;
    let mut ids = Vec::with_capacity(group.tables.len());
    for table in &group.tables {
        ids.push(txn.create_table(&table.def)?);
    }
    txn.commit()?;
    Ok(ids)
}
