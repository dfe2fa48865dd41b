//! Row triggers made with CREATE TRIGGER, kept as functions are
//! (functions.rs): one engine table without rows per trigger, named after
//! its table and its name with a leading NUL byte, its annotation a JSON
//! document with the rest. CREATE / DROP TRIGGER are so transactional,
//! logged and recovered like other DDL, and creating or dropping one
//! changes the catalog's names stamp: every prepared statement re-plans
//! and binds the triggers its writes fire.

use std::sync::Arc;

use pgtier_engine::{Catalog, ColumnDef, DataType, TableDef, TableSchema, Value};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SqlError};

const TRIGGER_MARK: &str = "\0pgtier_trigger\0";

/// The annotation's document.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TriggerDoc {
    /// The function's name (a PL/pgSQL function RETURNS trigger, no arguments).
    pub function: String,
    /// BEFORE (else AFTER).
    pub before: bool,
    pub insert: bool,
    pub update: bool,
    pub delete: bool,
    /// UPDATE OF these columns only (empty: any UPDATE).
    pub update_of: Vec<String>,
    /// ALTER TABLE ... DISABLE TRIGGER clears it.
    pub enabled: bool,
}

/// A trigger as stored.
#[derive(Clone, Debug)]
pub struct Trigger {
    pub name: String,
    /// The engine name of its table.
    pub table: String,
    pub doc: TriggerDoc,
    pub oid: i64,
    pub schema: Arc<TableSchema>,
}

/// The engine table name of trigger `name` on `table`.
pub fn trigger_table_name(table: &str, name: &str) -> String {
    format!("{TRIGGER_MARK}{table}\0{name}")
}

pub fn trigger_table_def(table: &str, name: &str, doc: &TriggerDoc) -> Result<TableDef> {
    let mut def = TableDef::new(trigger_table_name(table, name), vec![ColumnDef::new("t", DataType::Bool)], &[]);
    def.annotation = Some(encode(doc)?);
    Ok(def)
}

pub fn encode(doc: &TriggerDoc) -> Result<String> {
    serde_json::to_string(doc).map_err(|e| SqlError::new("XX000", format!("trigger document: {e}")))
}

fn trigger(t: &Arc<TableSchema>) -> Option<Trigger> {
    let rest = t.name.strip_prefix(TRIGGER_MARK)?;
    let (table, name) = rest.split_once('\0')?;
    let doc: TriggerDoc = serde_json::from_str(t.annotation.as_deref()?).ok()?;
    Some(Trigger {
        name: name.to_owned(),
        table: table.to_owned(),
        doc,
        oid: super::table_oid(t),
        schema: Arc::clone(t),
    })
}

/// The triggers of the table named `table` (engine name), by name.
pub fn triggers_of(catalog: &Catalog, table: &str) -> Vec<Trigger> {
    let prefix = format!("{TRIGGER_MARK}{table}\0");
    let mut out: Vec<Trigger> = catalog.tables().filter(|t| t.name.starts_with(&prefix)).filter_map(trigger).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Every trigger, in id order.
pub fn all_triggers(catalog: &Catalog) -> Vec<Trigger> {
    catalog.tables().filter(|t| t.name.starts_with(TRIGGER_MARK)).filter_map(trigger).collect()
}

/// pg_trigger's `tgtype` bits (ROW 1, BEFORE 2, INSERT 4, DELETE 8, UPDATE 16).
fn tgtype(d: &TriggerDoc) -> i16 {
    1 | if d.before { 2 } else { 0 }
        | if d.insert { 4 } else { 0 }
        | if d.delete { 8 } else { 0 }
        | if d.update { 16 } else { 0 }
}

/// pg_trigger's rows.
pub(super) fn trigger_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    use crate::value::types::{Elem, array_text};
    for t in all_triggers(catalog) {
        let Some(table) = catalog.table_by_name(&t.table) else { continue };
        let foid = super::functions::functions_named(catalog, &t.doc.function).first().map_or(0, |f| f.oid);
        let attrs: Vec<Value> = t
            .doc
            .update_of
            .iter()
            .filter_map(|c| table.column_index(c))
            .map(|i| Value::Int2(i16::try_from(i + 1).unwrap_or(i16::MAX)))
            .collect();
        out.extend([
            Value::Int8(t.oid),
            Value::Int8(super::table_oid(table)),
            Value::Int8(0),
            Value::Text(t.name.clone()),
            Value::Int8(foid),
            Value::Int2(tgtype(&t.doc)),
            Value::Text(if t.doc.enabled { "O" } else { "D" }.into()),
            Value::Bool(false),
            Value::Int8(0),
            Value::Int8(0),
            Value::Int8(0),
            Value::Bool(false),
            Value::Bool(false),
            Value::Int2(0),
            Value::Text(array_text(Elem::Int2Vector, &attrs)),
            Value::Text("\\x".into()),
            Value::Null,
            Value::Null,
            Value::Null,
        ]);
    }
}
