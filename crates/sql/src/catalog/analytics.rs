//! `ALTER TABLE t SET ANALYTICS ON` (a pgtier extension): which tables
//! have a columnar copy (crates/olap), kept as triggers are (triggers.rs):
//! one engine table without rows per flagged table, named after the table
//! with a leading NUL byte, its annotation a JSON document holding the
//! table's id. So the flag is logged and recovered like other DDL, and a
//! start rebuilds the copy of every flagged table (session/analytics.rs).
//! A table's own annotation is not used: a cache group's tables and
//! partitioned tables keep their own documents there.
//!
//! The id in the document makes a flag that outlived its table harmless:
//! a table is flagged only while its id is the recorded one. DROP TABLE
//! and every ALTER TABLE that rewrites the table (a new id: the copy ends
//! with the old one) drop the flag in their own transaction
//! (exec/ddl.rs, exec/alter.rs).
//!
//! Also the rows of the two views over the copies,
//! `pgtier_analytics_tables` and `pgtier_column_compression`, read from the
//! running [`Analytics`] each time a statement reads them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;
use pgtier_engine::{Catalog, ColumnDef, DataType, TableDef, TableId, TableSchema, Value};
use pgtier_olap::OlapEngine;
use serde::{Deserialize, Serialize};

use super::rows::text;
use crate::error::{Result, SqlError};

const ANALYTICS_MARK: &str = "\0pgtier_analytics\0";

/// The flag's document.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AnalyticsDoc {
    /// The engine id of the table when the flag was set.
    pub table_id: u32,
}

/// The engine table name of `table`'s flag.
pub fn flag_table_name(table: &str) -> String {
    format!("{ANALYTICS_MARK}{table}")
}

pub fn flag_table_def(table: &TableSchema) -> Result<TableDef> {
    let mut def = TableDef::new(flag_table_name(&table.name), vec![ColumnDef::new("a", DataType::Bool)], &[]);
    let doc = AnalyticsDoc { table_id: table.id.0 };
    def.annotation =
        Some(serde_json::to_string(&doc).map_err(|e| SqlError::new("XX000", format!("analytics document: {e}")))?);
    Ok(def)
}

/// The flag table of the table named `table` (engine name), whatever id it records.
pub fn flag_of<'a>(catalog: &'a Catalog, table: &str) -> Option<&'a Arc<TableSchema>> {
    catalog.table_by_name(&flag_table_name(table))
}

/// The tables whose flag records their current id, in id order.
pub fn flagged_tables(catalog: &Catalog) -> Vec<Arc<TableSchema>> {
    let mut out: Vec<Arc<TableSchema>> = catalog
        .tables()
        .filter_map(|flag| {
            let name = flag.name.strip_prefix(ANALYTICS_MARK)?;
            let doc: AnalyticsDoc = serde_json::from_str(flag.annotation.as_deref()?).ok()?;
            catalog.table_by_name(name).filter(|t| t.id.0 == doc.table_id).cloned()
        })
        .collect();
    out.sort_by_key(|t| t.id.0);
    out
}

/// Why `table` cannot have a columnar copy, as PostgreSQL words a
/// command refused for a relation's kind (42809) or pgtier refuses what it
/// does not do (0A000); None when it can.
pub fn refusal(table: &TableSchema) -> Option<SqlError> {
    let short = crate::names::short(&table.name);
    let wrong_kind = |what: &str| {
        SqlError::new("42809", format!("ALTER TABLE ... SET ANALYTICS cannot be used on \"{short}\": it is {what}"))
    };
    if super::is_view(table) {
        return Some(wrong_kind("a view"));
    }
    if table.sequence.is_some() {
        return Some(wrong_kind("a sequence"));
    }
    if super::partitions::is_partitioned(table) {
        return Some(
            SqlError::unsupported(format!(
                "SET ANALYTICS on partitioned table \"{short}\" (a partitioned table holds no rows)"
            ))
            .with_hint("Set it on each partition."),
        );
    }
    if crate::names::is_temp_schema(crate::names::split(&table.name).0) {
        return Some(SqlError::unsupported(format!(
            "SET ANALYTICS on temporary table \"{short}\" (its copy would outlive the session's view of it)"
        )));
    }
    None
}

/// Where a flagged table's copy is.
#[derive(Clone, Debug, PartialEq)]
pub enum CopyState {
    /// Being scanned (SET ANALYTICS ON running, or the rebuild at start).
    Building,
    /// Enabling failed (at start: the flag stays, the copy does not).
    Failed(String),
}

/// The columnar copies of one database: its one [`OlapEngine`] (one
/// commit-stream consumer) and what the SQL layer knows beyond it (the
/// copies being built, the flagged tables whose rebuild failed).
pub struct Analytics {
    pub olap: OlapEngine,
    pub states: Mutex<HashMap<TableId, CopyState>>,
    /// SELECTs the columnar path answered (exec/columnar).
    pub columnar_statements: AtomicU64,
    /// SELECTs translated for it that went back to the row path because
    /// the analytic executor failed (a copy being built, no executor in
    /// this build, an error DataFusion raised).
    pub columnar_fallbacks: AtomicU64,
    /// The latest of those failures: the analytic query and its error.
    pub last_fallback: Mutex<Option<String>>,
}

impl Analytics {
    pub fn new(olap: OlapEngine) -> Analytics {
        Analytics {
            olap,
            states: Mutex::new(HashMap::new()),
            columnar_statements: AtomicU64::new(0),
            columnar_fallbacks: AtomicU64::new(0),
            last_fallback: Mutex::new(None),
        }
    }
}

fn int8(n: u64) -> Value {
    Value::Int8(i64::try_from(n).unwrap_or(i64::MAX))
}

/// (schema, table) of an engine name, as the views show them.
fn schema_and_table(name: &str) -> (Value, Value) {
    let (schema, table) = crate::names::split(name);
    (text(schema), text(table))
}

/// `pgtier_analytics_tables`: one row per flagged table.
pub(super) fn table_rows(catalog: &Catalog, analytics: Option<&Analytics>, out: &mut Vec<Value>) {
    let applied = analytics.map(|a| (a.olap.stats(), a.olap.database().wal_end().0));
    for t in flagged_tables(catalog) {
        let (schema, table) = schema_and_table(&t.name);
        let state = analytics.and_then(|a| a.states.lock().get(&t.id).cloned());
        let stats = analytics.and_then(|a| a.olap.table_stats(t.id).ok());
        let (word, error) = match (&state, &stats) {
            (Some(CopyState::Building), _) => ("building", None),
            (Some(CopyState::Failed(e)), _) => ("failed", Some(e.clone())),
            (None, Some(s)) if s.failed.is_some() => ("failed", s.failed.clone()),
            (None, Some(s)) if s.ready => ("ready", None),
            (None, Some(_)) => ("building", None),
            // No copy: the engine did not start (a standby), or it was stopped.
            (None, None) => ("stopped", None),
        };
        let figures = |f: fn(&pgtier_olap::CopyStats) -> u64| stats.as_ref().map_or(Value::Null, |s| int8(f(s)));
        out.extend([
            schema,
            table,
            text(word),
            error.map_or(Value::Null, Value::Text),
            figures(|s| s.rows),
            figures(|s| s.chunks as u64),
            figures(|s| s.delta_rows as u64),
            figures(|s| s.merges),
            figures(|s| s.base_ts),
            applied.as_ref().map_or(Value::Null, |(a, _)| int8(a.applied_ts)),
            applied.as_ref().map_or(Value::Null, |(a, _)| int8(a.applied_lsn)),
            applied.as_ref().map_or(Value::Null, |(a, end)| int8(end.saturating_sub(a.applied_lsn))),
        ]);
    }
}

/// `pgtier_column_compression`: per copied table, one row per column and
/// then one for the table (column NULL: the sum of its columns, the hidden
/// row id of a table without a primary key included).
pub(super) fn compression_rows(analytics: Option<&Analytics>, out: &mut Vec<Value>) {
    let Some(analytics) = analytics else { return };
    for r in analytics.olap.compression() {
        let (schema, table) = schema_and_table(&r.table);
        let ratio = if r.arrow_bytes == 0 { Value::Null } else { Value::Float8(r.ratio()) };
        out.extend([
            schema,
            table,
            r.column.map_or(Value::Null, Value::Text),
            r.arrow_type.map_or(Value::Null, Value::Text),
            text(r.encoding),
            int8(r.rows),
            int8(r.plain_bytes),
            int8(r.arrow_bytes),
            ratio,
        ]);
    }
}
