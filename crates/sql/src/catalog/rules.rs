//! Rules made with CREATE RULE, kept as triggers are (triggers.rs): one
//! engine table without rows per rule, named after its relation and its
//! name with a leading NUL byte, its annotation a JSON document with the
//! rest. CREATE / DROP RULE so are transactional, logged and recovered
//! like other DDL, and they give the relation a new schema version, so a
//! statement planned on it re-plans with the rules it has now.

use std::sync::Arc;

use pgtier_engine::{Catalog, ColumnDef, DataType, TableDef, TableSchema};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SqlError};

const RULE_MARK: &str = "\0pgtier_rule\0";

/// The statement a rule fires on.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum RuleEvent {
    Insert,
    Update,
    Delete,
}

impl RuleEvent {
    pub fn keyword(self) -> &'static str {
        match self {
            RuleEvent::Insert => "INSERT",
            RuleEvent::Update => "UPDATE",
            RuleEvent::Delete => "DELETE",
        }
    }
}

/// The annotation's document.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RuleDoc {
    pub event: RuleEvent,
    /// DO INSTEAD (else DO ALSO).
    pub instead: bool,
    /// The WHERE condition's text (sqlparser's rendering), naming NEW / OLD.
    pub condition: Option<String>,
    /// Each action's text (sqlparser's rendering); none for DO NOTHING.
    pub actions: Vec<String>,
}

/// A rule as stored.
#[derive(Clone, Debug)]
pub struct Rule {
    pub name: String,
    /// The engine name of its relation.
    pub table: String,
    pub doc: RuleDoc,
    pub schema: Arc<TableSchema>,
}

/// The engine table name of rule `name` on `table`.
pub fn rule_table_name(table: &str, name: &str) -> String {
    format!("{RULE_MARK}{table}\0{name}")
}

pub fn rule_table_def(table: &str, name: &str, doc: &RuleDoc) -> Result<TableDef> {
    let mut def = TableDef::new(rule_table_name(table, name), vec![ColumnDef::new("r", DataType::Bool)], &[]);
    def.annotation = Some(encode(doc)?);
    Ok(def)
}

pub fn encode(doc: &RuleDoc) -> Result<String> {
    serde_json::to_string(doc).map_err(|e| SqlError::new("XX000", format!("rule document: {e}")))
}

fn rule(t: &Arc<TableSchema>) -> Option<Rule> {
    let rest = t.name.strip_prefix(RULE_MARK)?;
    let (table, name) = rest.split_once('\0')?;
    let doc: RuleDoc = serde_json::from_str(t.annotation.as_deref()?).ok()?;
    Some(Rule { name: name.to_owned(), table: table.to_owned(), doc, schema: Arc::clone(t) })
}

/// The rules of the relation named `table` (engine name), by name (the
/// order PostgreSQL fires them in).
pub fn rules_of(catalog: &Catalog, table: &str) -> Vec<Rule> {
    let prefix = format!("{RULE_MARK}{table}\0");
    let mut out: Vec<Rule> = catalog.tables().filter(|t| t.name.starts_with(&prefix)).filter_map(rule).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}
