//! Rows that do not come from an engine table: system relations,
//! subqueries, VALUES and set operations in FROM, table functions.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use pgtier_engine::Value;

use super::Exec;
use super::aggregate::GroupKey;
use crate::catalog;
use crate::error::{Result, SqlError};
use crate::expr::{Env, SubqueryRunner};
use crate::plan::{SetOp, SetTree, TableFunc, VirtualSource};
use crate::value::types;

impl Exec<'_> {
    /// Appends the rows of a virtual level (flat) for the joined `row` so far.
    pub(super) fn virtual_rows(
        &mut self,
        source: &VirtualSource,
        env: &Env<'_>,
        row: &[Value],
        out: &mut Vec<Value>,
    ) -> Result<()> {
        match source {
            VirtualSource::System(rel) => {
                let Some(ctx) = self.system() else { return Ok(()) };
                catalog::rows(*rel, &ctx, out);
            }
            VirtualSource::Query(tree) | VirtualSource::Correlated(tree) => {
                for r in self.set_rows(tree, env)? {
                    out.extend(r);
                }
            }
            VirtualSource::Lateral(tree) => {
                let lateral = Env { params: env.params, now_micros: env.now_micros, outer: row };
                for r in self.set_rows(tree, &lateral)? {
                    out.extend(r);
                }
            }
            VirtualSource::Recursive { slot, anchor, step, all } => {
                for r in self.recursive_rows(*slot, anchor, step, *all, env)? {
                    out.extend(r);
                }
            }
            VirtualSource::WorkTable(slot) => {
                for r in self.work_tables.get(*slot).map_or(&[][..], Vec::as_slice) {
                    out.extend(r.iter().cloned());
                }
            }
            VirtualSource::Function { func, args, ordinality } => {
                self.function_rows(func, args, *ordinality, env, row, out)?;
            }
            VirtualSource::Shared { id, source } => out.extend_from_slice(&self.shared_rows(*id, source, env)?),
            VirtualSource::Returning(id) => match self.shared_ctes.get(id) {
                Some(rows) => out.extend_from_slice(rows),
                None => return Err(SqlError::new("XX000", "data-modifying WITH query read before it ran")),
            },
        }
        Ok(())
    }

    /// The rows of materialized WITH query `id`: run at its first read,
    /// kept for the rest of the execution (charged to
    /// pgtier.statement_mem; past it 53200, since running it again could
    /// give other rows).
    fn shared_rows(&mut self, id: usize, source: &VirtualSource, env: &Env<'_>) -> Result<Arc<Vec<Value>>> {
        if let Some(rows) = self.shared_ctes.get(&id) {
            return Ok(Arc::clone(rows));
        }
        let mut rows = Vec::new();
        self.virtual_rows(source, env, &[], &mut rows)?;
        let bytes = rows.iter().map(super::value_bytes).sum();
        self.interrupt.charge(bytes, "WITH query")?;
        let rows = Arc::new(rows);
        self.shared_ctes.insert(id, Arc::clone(&rows));
        Ok(rows)
    }

    /// A table function's rows, with their ordinal after each when WITH ORDINALITY.
    fn function_rows(
        &mut self,
        func: &TableFunc,
        args: &[crate::expr::Expr],
        ordinality: bool,
        env: &Env<'_>,
        row: &[Value],
        out: &mut Vec<Value>,
    ) -> Result<()> {
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            vals.push(a.eval(env, self, row)?);
        }
        if let TableFunc::UnnestArrays(_) = func {
            // A NULL array is an empty one here; a multidimensional one
            // gives its elements in storage order.
            let flat: Vec<Option<Vec<Value>>> = vals
                .iter()
                .map(|v| match v {
                    Value::Array(a) if crate::value::array::is_nested(a) => {
                        Some(crate::value::array::leaves(a).into_iter().cloned().collect())
                    }
                    // unnest ignores the lower bounds.
                    Value::BoundedArray(b) => {
                        Some(crate::value::array::leaves(&b.items).into_iter().cloned().collect())
                    }
                    _ => None,
                })
                .collect();
            let arrays: Vec<&[Value]> = vals
                .iter()
                .zip(&flat)
                .map(|(v, f)| match (v, f) {
                    (_, Some(f)) => f.as_slice(),
                    (Value::Array(a), None) => a.as_slice(),
                    _ => &[],
                })
                .collect();
            let rows = arrays.iter().map(|a| a.len()).max().unwrap_or(0);
            for k in 0..rows {
                self.interrupt.tick()?;
                out.extend(arrays.iter().map(|a| a.get(k).cloned().unwrap_or(Value::Null)));
                if ordinality {
                    out.push(Value::Int8(i64::try_from(k + 1).unwrap_or(i64::MAX)));
                }
            }
            return Ok(());
        }
        if let TableFunc::JsonToRecord(spec, domains) = func {
            // A populate call's base record's values follow the document.
            let rows = self.record_rows(spec, domains, (&vals[0], &vals[1..]), env)?;
            return self.json_rows(rows, ordinality, out);
        }
        if let TableFunc::Scalar = func {
            out.push(vals[0].clone());
            if ordinality {
                out.push(Value::Int8(1));
            }
            return Ok(());
        }
        let items: Vec<Value> = match func {
            _ if vals.iter().any(Value::is_null) => Vec::new(),
            TableFunc::GenerateSeries if matches!(vals[0], Value::Numeric(_) | Value::NumericBig(_)) => {
                let items = crate::value::numeric_series(&vals)?;
                let bytes = items.len().saturating_mul(std::mem::size_of::<Value>());
                self.interrupt.charge(bytes, "generate_series")?;
                self.interrupt.mem_used -= bytes;
                items
            }
            TableFunc::GenerateSeries => self.integer_series(&vals)?,
            TableFunc::Unnest(e) => types::array_values(vals[0].as_str().unwrap_or(""), *e)?,
            TableFunc::PartitionAncestors
            | TableFunc::UnnestArrays(_)
            | TableFunc::JsonToRecord(..)
            | TableFunc::Scalar => Vec::new(),
            TableFunc::Json(srf) => {
                let rows = match srf {
                    crate::value::json::JsonSrf::PathQuery => crate::expr::jsonpath_eval::query_rows(&vals)?,
                    _ => crate::value::json::srf_rows(*srf, &vals[0])?,
                };
                return self.json_rows(rows, ordinality, out);
            }
            TableFunc::ExpandArray(elem) => {
                let items = match &vals[0] {
                    Value::Array(items) => items.clone(),
                    // Its n counts from 1 whatever the lower bound.
                    Value::BoundedArray(b) => b.items.clone(),
                    other => types::array_values(other.as_str().unwrap_or(""), *elem)?,
                };
                for (k, v) in items.into_iter().enumerate() {
                    out.push(v);
                    out.push(Value::Int4(i32::try_from(k + 1).unwrap_or(i32::MAX)));
                    if ordinality {
                        out.push(Value::Int8(i64::try_from(k + 1).unwrap_or(i64::MAX)));
                    }
                }
                return Ok(());
            }
        };
        for (k, v) in items.into_iter().enumerate() {
            out.push(v);
            if ordinality {
                out.push(Value::Int8(i64::try_from(k + 1).unwrap_or(i64::MAX)));
            }
        }
        Ok(())
    }

    /// generate_series of int4 or int8 (both bounds given, not NULL).
    /// A json set-returning function's rows, charged to the statement's
    /// memory, each with its ordinal when asked.
    /// json[b]_to_record[set] and _populate_record[set]: each value of a
    /// domain column checked against the domain's constraints as it is
    /// made (NOT NULL, then the CHECKs by name: PostgreSQL's domain_check).
    fn record_rows(
        &mut self,
        spec: &crate::value::json_record::RecordSpec,
        domains: &[Option<crate::plan::ColumnDomain>],
        (doc, defaults): (&Value, &[Value]),
        env: &Env<'_>,
    ) -> Result<Vec<Vec<Value>>> {
        let mut check = |k: usize, v: &Value| -> Result<()> {
            let Some(Some(d)) = domains.get(k) else { return Ok(()) };
            if d.not_null && v.is_null() {
                return Err(SqlError::new("23502", format!("domain {} does not allow null values", d.name)));
            }
            let row = std::slice::from_ref(v);
            for c in &d.checks {
                if c.expr.eval_bool(env, self, row)? == Some(false) {
                    return Err(SqlError::new(
                        "23514",
                        format!("value for domain {} violates check constraint \"{}\"", d.name, c.name),
                    ));
                }
            }
            Ok(())
        };
        crate::value::json_record::rows(spec, doc, defaults, &mut check)
    }

    fn json_rows(&mut self, rows: Vec<Vec<Value>>, ordinality: bool, out: &mut Vec<Value>) -> Result<()> {
        let bytes: usize = rows.iter().map(|r| super::row_bytes(r)).sum();
        self.interrupt.charge(bytes, "json function")?;
        self.interrupt.mem_used -= bytes;
        for (k, r) in rows.into_iter().enumerate() {
            self.interrupt.tick()?;
            out.extend(r);
            if ordinality {
                out.push(Value::Int8(i64::try_from(k + 1).unwrap_or(i64::MAX)));
            }
        }
        Ok(())
    }

    fn integer_series(&mut self, vals: &[Value]) -> Result<Vec<Value>> {
        let (lo, hi) = (vals[0].as_i64().unwrap_or(0), vals[1].as_i64().unwrap_or(0));
        let step = vals.get(2).and_then(Value::as_i64).unwrap_or(1);
        if step == 0 {
            return Err(SqlError::new("22023", "step size cannot equal zero"));
        }
        let n = if (step > 0 && hi < lo) || (step < 0 && hi > lo) { 0 } else { (hi - lo) / step + 1 };
        if n > 100_000_000 {
            return Err(SqlError::new("54000", "generate_series: too many rows"));
        }
        let int8 = matches!(vals[0], Value::Int8(_)) || matches!(vals[1], Value::Int8(_));
        // Charged before it is built (released with the
        // level's candidates, which last one outer row).
        let bytes = usize::try_from(n).unwrap_or(usize::MAX).saturating_mul(std::mem::size_of::<Value>());
        self.interrupt.charge(bytes, "generate_series")?;
        self.interrupt.mem_used -= bytes;
        let mut items = Vec::new();
        for k in 0..n {
            self.interrupt.tick()?;
            let v = lo + k * step;
            items.push(if int8 { Value::Int8(v) } else { Value::Int4(i32::try_from(v).unwrap_or(0)) });
        }
        Ok(items)
    }

    /// WITH RECURSIVE, evaluated as PostgreSQL does (iteratively, not
    /// recursively): every round is charged to pgtier.statement_mem, so a
    /// query that never stops ends with 53200 (or statement_timeout).
    fn recursive_rows(
        &mut self,
        slot: usize,
        anchor: &SetTree,
        step: &SetTree,
        all: bool,
        env: &Env<'_>,
    ) -> Result<Vec<Vec<Value>>> {
        let held = self.interrupt.mem_used;
        let mut seen = HashSet::new();
        let keep = |rows: Vec<Vec<Value>>, seen: &mut HashSet<GroupKey>| -> Vec<Vec<Value>> {
            if all { rows } else { rows.into_iter().filter(|r| seen.insert(GroupKey(r.clone()))).collect() }
        };
        let mut result = keep(self.set_rows(anchor, env)?, &mut seen);
        if self.work_tables.len() <= slot {
            self.work_tables.resize_with(slot + 1, Vec::new);
        }
        let mut round_start = 0;
        let outcome = loop {
            let round = result[round_start..].to_vec();
            if round.is_empty() {
                break Ok(());
            }
            let bytes: usize = round.iter().map(|r| super::row_bytes(r)).sum();
            // The rows kept (and, for UNION, their copies in `seen`).
            if let Err(e) = self.interrupt.charge(if all { bytes } else { bytes * 2 }, "WITH RECURSIVE query") {
                break Err(e);
            }
            self.work_tables[slot] = round;
            let next = match self.set_rows(step, env).and_then(|rows| self.interrupt.check().map(|()| rows)) {
                Ok(rows) => keep(rows, &mut seen),
                // The round's rows crossed the bound the recursion holds most of.
                Err(e) if e.sqlstate == "53200" => break Err(self.interrupt.out_of_memory("WITH RECURSIVE query")),
                Err(e) => break Err(e),
            };
            round_start = result.len();
            result.extend(next);
        };
        self.work_tables[slot] = Vec::new();
        // Like a table function's rows: held while the level's candidates last.
        self.interrupt.mem_used = held;
        outcome.map(|()| result)
    }

    fn set_rows(&mut self, tree: &SetTree, env: &Env<'_>) -> Result<Vec<Vec<Value>>> {
        Ok(match tree {
            SetTree::Select(plan) => {
                let mut rows = self.select_rows(plan, env.params, env.outer)?;
                for r in &mut rows {
                    r.truncate(plan.visible);
                }
                rows
            }
            SetTree::Values(rows) => {
                let mut out = Vec::with_capacity(rows.len());
                for r in rows {
                    let mut vals = Vec::with_capacity(r.len());
                    for e in r {
                        vals.push(e.eval(env, self, &[])?);
                    }
                    out.push(vals);
                }
                out
            }
            SetTree::Op { op, all, left, right } => {
                let l = self.set_rows(left, env)?;
                let r = self.set_rows(right, env)?;
                combine(*op, *all, l, r)
            }
        })
    }
}

/// UNION / INTERSECT / EXCEPT [ALL] on rows, NULLs equal (SQL's "not distinct").
fn combine(op: SetOp, all: bool, left: Vec<Vec<Value>>, right: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    let distinct = |rows: Vec<Vec<Value>>| -> Vec<Vec<Value>> {
        let mut seen = HashSet::new();
        rows.into_iter().filter(|r| seen.insert(GroupKey(r.clone()))).collect()
    };
    match op {
        SetOp::Union => {
            let mut rows = left;
            rows.extend(right);
            if all { rows } else { distinct(rows) }
        }
        SetOp::Intersect | SetOp::Except => {
            let mut counts: HashMap<GroupKey, usize> = HashMap::new();
            for r in right {
                *counts.entry(GroupKey(r)).or_insert(0) += 1;
            }
            let left = if all { left } else { distinct(left) };
            let mut out = Vec::new();
            for r in left {
                let key = GroupKey(r);
                let n = counts.get_mut(&key);
                let present = n.as_ref().is_some_and(|c| **c > 0);
                if all && let Some(c) = n {
                    *c = c.saturating_sub(1);
                }
                if present == (op == SetOp::Intersect) {
                    out.push(key.0);
                }
            }
            out
        }
    }
}
