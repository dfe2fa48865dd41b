//! The columnar path (study 004): a SELECT over tables with a columnar
//! copy (`ALTER TABLE t SET ANALYTICS ON`) may have its join, filters and
//! aggregation run by the analytic executor over the copies, at the
//! statement's snapshot, instead of by the row path's nested loops.
//!
//! Routing (`pgtier.analytics`):
//! - `off`: never.
//! - `auto` (the default): when every stored table the plan reads has a
//!   copy, the plan translates (translate.rs), and some level reads a whole
//!   table of at least [`AUTO_MIN_ROWS`] rows (a Seq Scan on the row
//!   path): a plan of key lookups and index ranges, or of small tables,
//!   stays on the row path, where it costs microseconds.
//! - `on`: whenever every table has a copy and the plan translates.
//!
//! Never for a statement whose transaction has written anything (the copy
//! holds committed rows only, not the transaction's own changes), FOR
//! UPDATE, a subquery run per outer row, or a LIMIT the row path stops
//! early for. The answer equals the row path's: the translation refuses
//! whatever it cannot compute identically, and any error of the analytic
//! executor (a copy being built or stopped, a snapshot older than the
//! copy, an overflow DataFusion reports) sends the statement back to the
//! row path, which then answers or raises PostgreSQL's error. Only a
//! memory bound the analytic executor reaches is the statement's error.
//! EXPLAIN prints which path a SELECT takes and why.

mod aggregate;
mod correlated;
mod side;
mod translate;

use std::sync::atomic::Ordering;

use pgtier_engine::{TableSchema, Value};
use pgtier_olap::{OlapEngine, OlapError, SideTable};

use super::Exec;
use crate::catalog::analytics::Analytics;
use crate::error::{Result, SqlError};
use crate::expr::{Env, Expr, NoSubqueries, Subquery, SubqueryRunner};
use crate::plan::{Access, SelectPlan};
use crate::settings::AnalyticsMode;
use aggregate::mismatch;
use translate::{Context, Shape, Translation, translate};

/// `auto` takes a plan that reads at least this many rows of one table
/// whole: below it the row path's scan costs less than starting the
/// analytic executor (about a millisecond).
const AUTO_MIN_ROWS: u64 = 10_000;

fn copy_columns(analytics: &Analytics, table: &TableSchema) -> Option<(Vec<String>, u64)> {
    let names = analytics.olap.column_names(table.id).ok()?;
    let rows = analytics.olap.table_stats(table.id).map_or(0, |s| s.rows);
    Some((names, rows))
}

/// Translation context of a statement that runs: uncorrelated subqueries
/// are evaluated by the row path (and cached by id as usual).
struct Running<'e, 'x, 'a> {
    exec: &'x mut Exec<'a>,
    env: &'x Env<'e>,
    analytics: &'x Analytics,
}

impl Context for Running<'_, '_, '_> {
    fn copy_columns(&self, table: &TableSchema) -> Option<(Vec<String>, u64)> {
        copy_columns(self.analytics, table)
    }

    fn subquery_values(&mut self, sub: &Subquery) -> Option<Result<Vec<Value>>> {
        Some(self.exec.run(sub, self.env, &[]))
    }

    fn params(&self) -> &[Value] {
        self.env.params
    }

    fn analytic_rows(&mut self, sql: &str, sides: &[SideTable]) -> Option<Result<Vec<Vec<Value>>>> {
        let snapshot = self.exec.txn.snapshot_ts();
        Some(match self.analytics.olap.query_rows_with(sql, snapshot, sides) {
            Ok(rows) => rows
                .iter()
                .try_for_each(|r| self.exec.interrupt.charge(super::row_bytes(r), "analytic values"))
                .map(|()| rows),
            Err(e) => Err(SqlError::new(e.sqlstate(), e.to_string())),
        })
    }

    fn evaluate(&mut self, e: &Expr, row: &[Value]) -> Result<Value> {
        e.eval(self.env, &mut NoSubqueries, row)
    }

    fn derived_rows(&mut self, plan: &SelectPlan) -> Option<Result<Vec<Vec<Value>>>> {
        Some(self.exec.select_rows(plan, self.env.params, &[]))
    }

    fn translates(&mut self, plan: &SelectPlan) -> bool {
        translate(plan, &mut Explaining { analytics: self.analytics }).is_ok()
    }
}

/// EXPLAIN's context: nothing runs.
struct Explaining<'x> {
    analytics: &'x Analytics,
}

impl Context for Explaining<'_> {
    fn copy_columns(&self, table: &TableSchema) -> Option<(Vec<String>, u64)> {
        copy_columns(self.analytics, table)
    }

    fn subquery_values(&mut self, _: &Subquery) -> Option<Result<Vec<Value>>> {
        None
    }

    fn params(&self) -> &[Value] {
        &[]
    }

    fn analytic_rows(&mut self, _: &str, _: &[SideTable]) -> Option<Result<Vec<Vec<Value>>>> {
        None
    }

    fn evaluate(&mut self, e: &Expr, row: &[Value]) -> Result<Value> {
        e.eval(&Env { params: &[], now_micros: 0, outer: &[] }, &mut NoSubqueries, row)
    }

    fn derived_rows(&mut self, _: &SelectPlan) -> Option<Result<Vec<Vec<Value>>>> {
        None
    }

    fn translates(&mut self, plan: &SelectPlan) -> bool {
        translate(plan, self).is_ok()
    }
}

impl Exec<'_> {
    /// Cheap checks before any translation: the database has copies, the
    /// setting allows, the statement is a read of committed rows.
    pub(super) fn columnar_candidate(&self, plan: &SelectPlan, outer: &[Value]) -> bool {
        self.analytics.is_some()
            && outer.is_empty()
            && !plan.for_update
            && !plan.index_ordered
            && !plan.levels.is_empty()
            && self.settings.analytics() != AnalyticsMode::Off
            && self.txn.is_read_only()
    }

    /// The rows the join (or, with an aggregate, the groups before HAVING)
    /// would give, from the columnar copies; None: take the row path.
    pub(super) fn columnar_rows(&mut self, plan: &SelectPlan, env: &Env<'_>) -> Result<Option<Vec<Vec<Value>>>> {
        let Some(analytics) = self.analytics else { return Ok(None) };
        let mode = self.settings.analytics();
        let may_scan = |l: &crate::plan::Level| matches!(l.access, Access::FullScan | Access::Virtual(_));
        if mode == AnalyticsMode::Auto && !plan.levels.iter().any(may_scan) {
            // Key lookups and index ranges only (OLTP): not worth translating.
            return Ok(None);
        }
        // A dry translation first, running nothing: a plan that does not
        // translate, or that `auto` leaves on the row path, computes no
        // subquery or side table for nothing (the row path would compute
        // them again). The largest scan does not depend on what runs.
        match translate(plan, &mut Explaining { analytics }) {
            Ok(dry) if mode != AnalyticsMode::Auto || dry.largest_scan >= AUTO_MIN_ROWS => {}
            _ => return Ok(None),
        }
        let translation = {
            let mut cx = Running { exec: self, env, analytics };
            match translate(plan, &mut cx) {
                Ok(t) => t,
                Err(_) => return Ok(None),
            }
        };
        let snapshot = self.txn.snapshot_ts();
        match analytics.olap.query_rows_with(&translation.sql, snapshot, &translation.sides) {
            Ok(rows) => {
                analytics.columnar_statements.fetch_add(1, Ordering::Relaxed);
                let rows = reshape(rows, &translation.shape)?;
                for r in &rows {
                    self.interrupt.charge(super::row_bytes(r), "result")?;
                }
                Ok(Some(rows))
            }
            Err(e) if e.sqlstate() == "53200" => Err(SqlError::new("53200", e.to_string())),
            Err(e) => {
                analytics.columnar_fallbacks.fetch_add(1, Ordering::Relaxed);
                *analytics.last_fallback.lock() = Some(format!("{e} (analytic query: {})", translation.sql));
                Ok(None)
            }
        }
    }
}

/// The executor's rows from the analytic answer (see [`Shape`]).
pub(super) fn reshape(answer: Vec<Vec<Value>>, shape: &Shape) -> Result<Vec<Vec<Value>>> {
    match shape {
        Shape::Joined { width, positions, scaled } => {
            let columns = positions.len() + scaled.iter().filter(|s| **s).count();
            answer
                .into_iter()
                .map(|row| {
                    let mut joined = vec![Value::Null; *width];
                    if !positions.is_empty() && row.len() != columns {
                        return Err(mismatch());
                    }
                    let mut values = row.into_iter();
                    for (&p, &s) in positions.iter().zip(scaled) {
                        let mut v = values.next().ok_or_else(mismatch)?;
                        if s {
                            v = aggregate::unscaled(v, &values.next().ok_or_else(mismatch)?)?;
                        }
                        *joined.get_mut(p).ok_or_else(mismatch)? = v;
                    }
                    Ok(joined)
                })
                .collect()
        }
        Shape::Groups { groups, finishes } => {
            let columns = groups + finishes.iter().map(|f| f.columns()).sum::<usize>();
            answer
                .into_iter()
                .map(|row| {
                    if row.len() != columns {
                        return Err(mismatch());
                    }
                    let mut values = row.into_iter();
                    let mut group: Vec<Value> = values.by_ref().take(*groups).collect();
                    for finish in finishes {
                        group.push(finish.value(&mut values)?);
                    }
                    Ok(group)
                })
                .collect()
        }
    }
}

/// EXPLAIN's lines about the columnar path for a SELECT (none when the
/// database has no columnar copy).
pub fn explain_route(plan: &SelectPlan, analytics: Option<&Analytics>, mode: AnalyticsMode) -> Vec<String> {
    let Some(analytics) = analytics else { return Vec::new() };
    let row_path = |why: &str| vec![format!("Analytics: row path ({why})")];
    if mode == AnalyticsMode::Off {
        return row_path("pgtier.analytics is off");
    }
    let translation: Translation = match translate(plan, &mut Explaining { analytics }) {
        Ok(t) => t,
        Err(why) => return row_path(&why),
    };
    if mode == AnalyticsMode::Auto && translation.largest_scan < AUTO_MIN_ROWS {
        return row_path(&format!(
            "pgtier.analytics is auto and no table of {AUTO_MIN_ROWS} rows or more is read whole"
        ));
    }
    if !OlapEngine::has_executor() {
        return row_path(&OlapError::NoExecutor.to_string());
    }
    let mut lines = vec![
        format!("Analytics: columnar copy of {} (DataFusion)", translation.tables.join(", ")),
        format!("  Analytic Query: {}", translation.sql),
    ];
    for line in &translation.side_queries {
        lines.push(format!("  {line}"));
    }
    lines
}
