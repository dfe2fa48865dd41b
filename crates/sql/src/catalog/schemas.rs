//! Schemas made with CREATE SCHEMA. pgtier keeps every table, view, index
//! and sequence in `public`; a schema of its own is a namespace that holds
//! nothing yet (objects in it are refused with 0A000), kept as views are
//! (views.rs): an engine table without rows, here under a name no SQL
//! identifier can spell (it starts with a NUL byte), whose annotation
//! holds the owner. So CREATE / DROP SCHEMA are transactional, logged and
//! recovered like other DDL, and the schema's OID is its table's.

use std::sync::Arc;

use pgtier_engine::{Catalog, TableSchema};

/// What a schema's engine table name starts with.
const SCHEMA_MARK: &str = "\0pgtier_schema\0";
/// The first line of a schema's annotation (the number is the format).
const SCHEMA_MAGIC: &str = "pgtier_schema 1\n";

/// The engine table name that stands for schema `name`.
pub fn schema_table_name(name: &str) -> String {
    format!("{SCHEMA_MARK}{name}")
}

/// The annotation of schema owned by `owner`.
pub fn schema_annotation(owner: &str) -> String {
    format!("{SCHEMA_MAGIC}{owner}")
}

/// True for the engine table of a schema.
#[inline]
pub fn is_schema(t: &TableSchema) -> bool {
    t.name.starts_with(SCHEMA_MARK)
}

/// A schema made with CREATE SCHEMA.
pub struct UserSchema {
    pub name: String,
    pub owner: String,
    pub oid: i64,
}

fn user_schema(t: &Arc<TableSchema>) -> Option<UserSchema> {
    let name = t.name.strip_prefix(SCHEMA_MARK)?.to_owned();
    let owner = t.annotation.as_deref().and_then(|a| a.strip_prefix(SCHEMA_MAGIC)).unwrap_or_default().to_owned();
    Some(UserSchema { name, owner, oid: super::table_oid(t) })
}

/// The schemas made with CREATE SCHEMA, in id order.
pub fn user_schemas(catalog: &Catalog) -> Vec<UserSchema> {
    catalog.tables().filter_map(user_schema).collect()
}

/// Schema `name` if CREATE SCHEMA made it.
pub fn user_schema_named(catalog: &Catalog, name: &str) -> Option<UserSchema> {
    catalog.table_by_name(&schema_table_name(name)).and_then(user_schema)
}
