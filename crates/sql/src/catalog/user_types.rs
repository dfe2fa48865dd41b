//! Types made with CREATE TYPE ... AS (...) (composite types) and CREATE
//! DOMAIN, kept as functions are (functions.rs): one engine table without
//! rows per type, under a name no SQL identifier can spell (it starts
//! with a NUL byte). A composite type's table has a column per attribute
//! (so the engine stores their types), a domain's one column `value` of
//! its base type; the annotation is a JSON document with the rest. So
//! CREATE / DROP TYPE and DOMAIN are transactional, logged and recovered
//! like other DDL, and the type's OID is its table's.
//!
//! What pgtier does with them is narrow: json[b]_populate_record[set]
//! reads a composite type's attributes (bind/user_type.rs); every other
//! use of a user-defined type's name is refused (0A000).

use std::sync::Arc;

use pgtier_engine::{Catalog, ColumnDef, DataType, TableDef, TableSchema};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SqlError};

/// What a user-defined type's engine table name starts with.
const TYPE_MARK: &str = "\0pgtier_type\0";

/// The annotation's document.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TypeDoc {
    pub owner: String,
    /// A composite type: per attribute, the user-defined type it is of
    /// (`None` for a built-in type; the engine column holds the type
    /// itself, or a domain's base type, or a placeholder for a composite
    /// one).
    #[serde(default)]
    pub attr_types: Vec<Option<AttrType>>,
    /// A domain: its constraints.
    #[serde(default)]
    pub domain: Option<DomainDoc>,
}

/// An attribute of a user-defined type.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct AttrType {
    pub name: String,
    /// An array of that type (`jpop[]`).
    pub array: bool,
}

/// A domain's constraints.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct DomainDoc {
    pub not_null: bool,
    /// CHECK constraints: name and expression text (over `VALUE`), in
    /// the order PostgreSQL checks them (by name).
    pub checks: Vec<(String, String)>,
}

/// A CREATE TYPE / CREATE DOMAIN as bound.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeDef {
    pub name: String,
    /// Attribute names and engine types (a domain: `value` and its base).
    pub columns: Vec<(String, DataType)>,
    /// Without the owner: the executor sets it.
    pub doc: TypeDoc,
}

impl TypeDef {
    pub fn is_domain(&self) -> bool {
        self.doc.domain.is_some()
    }
}

/// A type made with CREATE TYPE or CREATE DOMAIN.
#[derive(Clone, Debug)]
pub struct UserType {
    pub name: String,
    pub columns: Vec<(String, DataType)>,
    pub doc: TypeDoc,
    pub oid: i64,
    /// Its engine table: a plan that used the type depends on it.
    pub table: Arc<TableSchema>,
}

impl UserType {
    pub fn is_domain(&self) -> bool {
        self.doc.domain.is_some()
    }

    /// The engine type of a domain (its base type).
    pub fn base_type(&self) -> DataType {
        self.columns.first().map_or(DataType::Text, |(_, t)| *t)
    }

    /// The user-defined types this one names (attributes, a domain's base).
    pub fn uses(&self) -> impl Iterator<Item = (usize, &AttrType)> {
        self.doc.attr_types.iter().enumerate().filter_map(|(k, a)| a.as_ref().map(|a| (k, a)))
    }
}

/// The engine table name of type `name`.
pub fn type_table_name(name: &str) -> String {
    format!("{TYPE_MARK}{name}")
}

/// The engine table that stores a type.
pub fn type_table_def(def: &TypeDef, owner: &str) -> Result<TableDef> {
    let cols: Vec<ColumnDef> = def.columns.iter().map(|(n, t)| ColumnDef::new(n.clone(), *t)).collect();
    let mut table = TableDef::new(type_table_name(&def.name), cols, &[]);
    let doc = TypeDoc { owner: owner.to_owned(), ..def.doc.clone() };
    table.annotation =
        Some(serde_json::to_string(&doc).map_err(|e| SqlError::new("XX000", format!("type document: {e}")))?);
    Ok(table)
}

fn user_type(t: &Arc<TableSchema>) -> Option<UserType> {
    let name = t.name.strip_prefix(TYPE_MARK)?.to_owned();
    let doc: TypeDoc = serde_json::from_str(t.annotation.as_deref()?).ok()?;
    Some(UserType {
        name,
        columns: t.visible_columns().iter().map(|c| (c.name.clone(), c.ty)).collect(),
        doc,
        oid: super::table_oid(t),
        table: Arc::clone(t),
    })
}

/// Type `name` if CREATE TYPE or CREATE DOMAIN made it.
pub fn user_type_named(catalog: &Catalog, name: &str) -> Option<UserType> {
    catalog.table_by_name(&type_table_name(name)).and_then(user_type)
}

/// Every type made with CREATE TYPE or CREATE DOMAIN, in id order.
pub fn user_types(catalog: &Catalog) -> Vec<UserType> {
    catalog.tables().filter(|t| t.name.starts_with(TYPE_MARK)).filter_map(user_type).collect()
}
