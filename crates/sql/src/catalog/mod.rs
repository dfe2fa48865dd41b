//! The system catalogs: the pg_catalog tables and views and the
//! information_schema views drivers and psql read, generated from the engine
//! catalog snapshot (and the session's settings) each time a statement
//! reads them. Read-only; nothing here is stored. Also what the system
//! functions need of them: OIDs, names, and objects as SQL text.
//!
//! OIDs: builtin types, namespaces and the system relations themselves use
//! PostgreSQL's own; user objects get stable OIDs derived from engine ids
//! (ranges below), so the same table keeps its OID for its lifetime.

pub mod analytics;
mod cache_views;
mod deparse;
pub mod functions;
mod generated_keys;
mod information_schema;
mod lookup;
pub mod partitions;
mod pg_type;
mod relations;
pub mod roles;
mod rows;
pub mod rules;
mod schemas;
pub mod search_path;
pub mod triggers;
pub mod user_types;
mod viewdef;
mod views;

use std::sync::Arc;

use pgtier_engine::{Catalog, Column, ForeignKey, IndexSchema, TableId, TableSchema};

pub use deparse::{column_default_text, constraint_def, default_expr, format_type, index_def, quote_ident};
pub use generated_keys::{backend_key, backend_sequence, identity_kind};
pub(crate) use lookup::path_of;
pub use lookup::{reg_lookup, reg_lookup_in, reg_name, split_qualified};
pub use pg_type::{BUILTIN_TYPES, BuiltinType, ColumnTypeInfo, TypeMatch, column_type_info, type_by_name, type_by_oid};
pub use relations::{RELATIONS, RelDef, SysColumn, T};
pub use rows::rows;
pub use schemas::{UserSchema, is_schema, schema_annotation, schema_table_name, user_schema_named, user_schemas};
pub use viewdef::{is_auto_updatable, view_definition};
pub use views::{NUMERIC_ANY_STAND_IN, VIEW_MAGIC, ViewDef, column_types, dependent_views, is_view, view_def, views};

use crate::error::{Result, SqlError};

/// Table sizes the planner orders inner joins by (`planner::join_order`):
/// the engine's count of committed live rows, an estimate taken when the
/// statement is planned (a saved plan keeps its order as the table grows,
/// as a PostgreSQL generic plan keeps its statistics). None: unknown.
pub trait TableRows {
    fn estimated_rows(&self, table: TableId) -> Option<u64>;
}

impl TableRows for pgtier_engine::Transaction {
    fn estimated_rows(&self, table: TableId) -> Option<u64> {
        pgtier_engine::Transaction::estimated_rows(self, table)
    }
}

impl TableRows for pgtier_engine::Database {
    fn estimated_rows(&self, table: TableId) -> Option<u64> {
        pgtier_engine::Database::estimated_rows(self, table)
    }
}

/// No sizes known: joins keep the order written.
pub struct NoTableRows;

impl TableRows for NoTableRows {
    fn estimated_rows(&self, _table: TableId) -> Option<u64> {
        None
    }
}

/// What the system functions and relations read: the statement's catalog
/// snapshot and the session's settings.
pub struct SysCtx<'a> {
    pub catalog: &'a Catalog,
    pub settings: &'a mut crate::settings::Settings,
    /// The session's cache groups (the pgtier_cache_* views); None: empty.
    pub cache: Option<&'a pgtier_cache::Cache>,
    /// The database's columnar copies (the pgtier_analytics views); None: none run.
    pub analytics: Option<&'a analytics::Analytics>,
    /// The engine is a hot standby (`pg_is_in_recovery()`).
    pub standby: bool,
}

impl SysCtx<'_> {
    /// The session's user (current_user, the owner of everything).
    pub fn user(&self) -> String {
        self.settings.get("session_authorization").cloned().unwrap_or_else(|| "postgres".into())
    }

    /// The database the session connected to.
    pub fn database(&self) -> String {
        self.settings.get("pgtier.database").cloned().unwrap_or_else(|| "postgres".into())
    }
}

pub const NS_PG_CATALOG: i64 = 11;
pub const NS_PUBLIC: i64 = 2200;
pub const NS_INFORMATION_SCHEMA: i64 = 13_000;
pub const NS_PG_TOAST: i64 = 99;
/// The bootstrap superuser; it stands for the session's user.
pub const OWNER_OID: i64 = 10;
pub const DATABASE_OID: i64 = 5;
/// PostgreSQL 15's owner of schema public.
pub const DATABASE_OWNER_ROLE: i64 = 6171;
pub const DEFAULT_COLLATION: i64 = 100;
pub const HEAP_AM: i64 = 2;
pub const BTREE_AM: i64 = 403;

/// The btree operator classes an index key may name besides its type's
/// default, with their `pg_opclass` OIDs: the pattern classes compare
/// bytes, which is how every text comparison goes in the C collation pgtier
/// has (bpchar's also ignore trailing blanks, as char(n) comparisons do),
/// so an index declared with one orders its keys as the default class does.
pub const PATTERN_OPCLASSES: [(&str, i64); 3] =
    [("text_pattern_ops", 4217), ("varchar_pattern_ops", 4218), ("bpchar_pattern_ops", 4219)];

/// `pg_index.indclass` of a key declared with `opclass`; 0 where pgtier
/// shows its default classes.
pub fn opclass_oid(opclass: Option<&str>) -> i64 {
    let known = |name: &str| PATTERN_OPCLASSES.iter().find(|(n, _)| *n == name).map(|(_, oid)| *oid);
    opclass.and_then(known).unwrap_or(0)
}

const USER_BASE: i64 = 16_384;
const INDEX_BASE: i64 = USER_BASE + 1_000_000;
const FK_BASE: i64 = USER_BASE + 2_000_000;
const INDEX_CONSTRAINT_BASE: i64 = USER_BASE + 3_000_000;
const ATTRDEF_BASE: i64 = USER_BASE + 4_000_000;
/// CHECK constraints: table id * CHECKS_PER_TABLE + position.
const CHECK_BASE: i64 = USER_BASE + 5_000_000;
const CHECKS_PER_TABLE: i64 = 1_000;
/// A view's `_RETURN` rule (pg_rewrite): the view's table id. Only
/// pg_rewrite shows these; nothing resolves them (pg_get_ruledef is NULL),
/// so their overlap with CHECK OIDs of tables past id 1000 is harmless.
const REWRITE_BASE: i64 = USER_BASE + 6_000_000;

pub fn table_oid(t: &TableSchema) -> i64 {
    relation_oid(t.id)
}
pub fn relation_oid(id: TableId) -> i64 {
    USER_BASE + i64::from(id.0)
}
pub fn index_oid(i: &IndexSchema) -> i64 {
    INDEX_BASE + i64::from(i.id.0)
}
fn fk_oid(f: &ForeignKey) -> i64 {
    FK_BASE + i64::from(f.id.0)
}
fn index_constraint_oid(i: &IndexSchema) -> i64 {
    INDEX_CONSTRAINT_BASE + i64::from(i.id.0)
}
fn rewrite_oid(v: &TableSchema) -> i64 {
    REWRITE_BASE + i64::from(v.id.0)
}
fn attrdef_oid(t: &TableSchema, attnum: usize) -> i64 {
    ATTRDEF_BASE + i64::from(t.id.0) * 1_600 + attnum as i64
}

/// A user table by OID.
pub fn table_by_oid(catalog: &Catalog, oid: i64) -> Option<&Arc<TableSchema>> {
    let id = u32::try_from(oid.checked_sub(USER_BASE)?).ok().filter(|_| oid < INDEX_BASE)?;
    catalog.table(pgtier_engine::TableId(id))
}
pub fn index_by_oid(catalog: &Catalog, oid: i64) -> Option<&Arc<IndexSchema>> {
    let id = u32::try_from(oid.checked_sub(INDEX_BASE)?).ok().filter(|_| oid < FK_BASE)?;
    catalog.index(pgtier_engine::IndexId(id))
}

/// A constraint by OID: a foreign key, or the primary/unique index behind one.
pub enum ConstraintRef {
    Index(Arc<IndexSchema>),
    Foreign(Arc<ForeignKey>),
    /// A table's CHECK constraint, by position in `TableSchema::checks`.
    Check(Arc<TableSchema>, usize),
}

fn check_oid(t: &TableSchema, k: usize) -> i64 {
    CHECK_BASE + i64::from(t.id.0) * CHECKS_PER_TABLE + i64::try_from(k).unwrap_or(0)
}

/// The columns a CHECK constraint's text names (pg_constraint.conkey).
pub fn check_columns(t: &TableSchema, sql: &str) -> Vec<usize> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    let tokens = sqlparser::tokenizer::Tokenizer::new(&dialect, sql).tokenize().unwrap_or_default();
    let mut cols: Vec<usize> = tokens
        .iter()
        .filter_map(|tok| match tok {
            sqlparser::tokenizer::Token::Word(w) => {
                let name = if w.quote_style.is_some() { w.value.clone() } else { w.value.to_lowercase() };
                t.column_index(&name).filter(|&c| !t.columns[c].is_hidden())
            }
            _ => None,
        })
        .collect();
    cols.sort_unstable();
    cols.dedup();
    cols
}

pub fn constraint_by_oid(catalog: &Catalog, oid: i64) -> Option<ConstraintRef> {
    if (FK_BASE..INDEX_CONSTRAINT_BASE).contains(&oid) {
        let id = u32::try_from(oid - FK_BASE).ok()?;
        return catalog.foreign_key(pgtier_engine::ForeignKeyId(id)).cloned().map(ConstraintRef::Foreign);
    }
    if (INDEX_CONSTRAINT_BASE..ATTRDEF_BASE).contains(&oid) {
        let id = u32::try_from(oid - INDEX_CONSTRAINT_BASE).ok()?;
        return catalog.index(pgtier_engine::IndexId(id)).filter(|i| i.unique).cloned().map(ConstraintRef::Index);
    }
    if oid >= CHECK_BASE {
        let (table, k) = ((oid - CHECK_BASE) / CHECKS_PER_TABLE, (oid - CHECK_BASE) % CHECKS_PER_TABLE);
        let t = catalog.table(pgtier_engine::TableId(u32::try_from(table).ok()?))?;
        let k = usize::try_from(k).ok().filter(|&k| k < t.checks.len())?;
        return Some(ConstraintRef::Check(Arc::clone(t), k));
    }
    None
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schema {
    PgCatalog,
    InformationSchema,
}

/// One system relation (an index into [`RELATIONS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemRel(pub usize);

impl SystemRel {
    pub fn def(self) -> &'static RelDef {
        &RELATIONS[self.0]
    }

    pub fn find(schema: Schema, name: &str) -> Option<SystemRel> {
        RELATIONS.iter().position(|r| r.schema == schema && r.name == name).map(SystemRel)
    }

    /// Its row shape.
    pub fn schema(self) -> Arc<TableSchema> {
        Arc::new(TableSchema::detached(self.def().name, self.schema_columns()))
    }

    pub fn schema_columns(self) -> Vec<Column> {
        self.def()
            .columns
            .iter()
            .map(|c| Column {
                name: c.name.to_owned(),
                ty: c.ty.data_type(),
                nullable: true,
                default: None,
                sequence: None,
                default_sql: None,
            })
            .collect()
    }
}

pub fn namespace_oid(s: Schema) -> i64 {
    match s {
        Schema::PgCatalog => NS_PG_CATALOG,
        Schema::InformationSchema => NS_INFORMATION_SCHEMA,
    }
}

pub fn namespace_name(oid: i64) -> Option<&'static str> {
    Some(match oid {
        NS_PG_CATALOG => "pg_catalog",
        NS_PUBLIC => "public",
        NS_INFORMATION_SCHEMA => "information_schema",
        NS_PG_TOAST => "pg_toast",
        _ => return None,
    })
}

/// A system relation by (optional) schema and name, as PostgreSQL resolves
/// it: unqualified names look in pg_catalog first, information_schema only
/// when named. Err for a schema that does not exist.
pub fn resolve(schema: Option<&str>, name: &str) -> Result<Option<SystemRel>> {
    Ok(match schema {
        None | Some("pg_catalog") => SystemRel::find(Schema::PgCatalog, name),
        Some("information_schema") => SystemRel::find(Schema::InformationSchema, name),
        Some("public") => None,
        Some(s) => return Err(SqlError::new("3F000", format!("schema \"{s}\" does not exist"))),
    })
}
