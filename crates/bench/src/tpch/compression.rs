//! The columnar copy's compression on TPC-H's tables (`--analytics`):
//! after the embedded target's load, `ALTER TABLE t SET ANALYTICS ON` for
//! the 8 tables (each timed client-side: the scan into Arrow chunks, rows/s
//! from the copy's row count), then the per-table totals of
//! `pgtier_column_compression` (plain size of the values vs the Arrow
//! memory holding them; crates/olap/src/compression.rs says what each
//! counts), beside study 004's figures for Oracle Database In-Memory under
//! MEMCOMPRESS FOR QUERY LOW. Then `SET ANALYTICS OFF` again, so the timed
//! queries run as without the option — unless the run has a columnar side,
//! whose queries read the copies.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::schema::TABLES;
use crate::target::{DbError, Target};

/// Study 004: Oracle In-Memory, MEMCOMPRESS FOR QUERY LOW, all 8 tables.
pub const STUDY_004_OVERALL: f64 = 1.53;
/// Study 004: the same, LINEITEM alone.
pub const STUDY_004_LINEITEM: f64 = 1.84;

/// One table's copy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableCompression {
    pub table: String,
    pub rows: u64,
    pub plain_bytes: u64,
    pub columnar_bytes: u64,
    /// plain / columnar (above 1: the copy is smaller).
    pub ratio: f64,
    /// SET ANALYTICS ON's wall time (the client's), s.
    pub enable_s: f64,
    pub rows_per_s: f64,
}

/// The section of the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompressionReport {
    pub tables: Vec<TableCompression>,
    pub plain_bytes: u64,
    pub columnar_bytes: u64,
    pub ratio: f64,
    pub study_004_overall: f64,
    pub study_004_lineitem: f64,
}

fn ratio(plain: u64, columnar: u64) -> f64 {
    if columnar == 0 { 0.0 } else { plain as f64 / columnar as f64 }
}

fn number(cell: Option<&Option<String>>, what: &str) -> Result<u64, DbError> {
    cell.and_then(|c| c.as_deref())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| DbError::new(None, format!("pgtier_column_compression: no {what}")))
}

/// Enables the copy of every TPC-H table of `target` (a pgtier target),
/// reads the figures, and disables the copies again unless `keep`.
pub fn measure(target: &dyn Target, keep: bool) -> Result<CompressionReport, DbError> {
    let mut session = target.connect()?;
    let mut times = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let started = Instant::now();
        session.simple_query(&format!("ALTER TABLE {table} SET ANALYTICS ON"))?;
        times.push(started.elapsed().as_secs_f64());
    }
    let rows = session.simple_query(
        "SELECT \"table\", rows, plain_bytes, columnar_bytes FROM pgtier_column_compression \
         WHERE schema = 'public' AND \"column\" IS NULL",
    )?;
    let mut tables = Vec::with_capacity(TABLES.len());
    for (table, enable_s) in TABLES.iter().zip(times) {
        let Some(row) = rows.iter().find(|r| r.first().and_then(|c| c.as_deref()) == Some(*table)) else {
            return Err(DbError::new(None, format!("pgtier_column_compression has no row for {table}")));
        };
        let (n, plain, columnar) =
            (number(row.get(1), "rows")?, number(row.get(2), "plain_bytes")?, number(row.get(3), "columnar_bytes")?);
        tables.push(TableCompression {
            table: (*table).to_owned(),
            rows: n,
            plain_bytes: plain,
            columnar_bytes: columnar,
            ratio: ratio(plain, columnar),
            enable_s,
            rows_per_s: if enable_s > 0.0 { n as f64 / enable_s } else { 0.0 },
        });
    }
    for table in TABLES.iter().filter(|_| !keep) {
        session.simple_query(&format!("ALTER TABLE {table} SET ANALYTICS OFF"))?;
    }
    let plain_bytes = tables.iter().map(|t| t.plain_bytes).sum();
    let columnar_bytes = tables.iter().map(|t| t.columnar_bytes).sum();
    Ok(CompressionReport {
        tables,
        plain_bytes,
        columnar_bytes,
        ratio: ratio(plain_bytes, columnar_bytes),
        study_004_overall: STUDY_004_OVERALL,
        study_004_lineitem: STUDY_004_LINEITEM,
    })
}

fn mb(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / 1e6)
}

/// The report's "Compression" section (Markdown).
pub fn markdown(c: &CompressionReport) -> String {
    let mut out = String::from(
        "## Compression (embedded, SET ANALYTICS ON)\n\n\
         Plain: the values' sizes (fixed-width types at their width, text at its bytes). Columnar: the Arrow \
         memory holding them (values, offsets, validity bitmaps, dictionary keys and values). Study 004: Oracle \
         Database In-Memory under MEMCOMPRESS FOR QUERY LOW.\n\n\
         | table | rows | plain MB | columnar MB | ratio | study 004 | enable s | rows/s |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for t in &c.tables {
        let study = if t.table == "lineitem" { format!("{:.2}x", c.study_004_lineitem) } else { "-".to_owned() };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.2}x | {study} | {:.2} | {:.0} |\n",
            t.table,
            t.rows,
            mb(t.plain_bytes),
            mb(t.columnar_bytes),
            t.ratio,
            t.enable_s,
            t.rows_per_s
        ));
    }
    out.push_str(&format!(
        "| all | {} | {} | {} | {:.2}x | {:.2}x | {:.2} | |\n",
        c.tables.iter().map(|t| t.rows).sum::<u64>(),
        mb(c.plain_bytes),
        mb(c.columnar_bytes),
        c.ratio,
        c.study_004_overall,
        c.tables.iter().map(|t| t.enable_s).sum::<f64>()
    ));
    out
}
