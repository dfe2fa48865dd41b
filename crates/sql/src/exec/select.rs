//! SELECT: the streaming and point-lookup paths, and the full pipeline
//! (join, aggregation, windows, projection, DISTINCT, ORDER BY, LIMIT) and
//! FOR UPDATE's recheck.

use std::cmp::Ordering;

use pgtier_engine::Value;

use super::aggregate::{Aggregator, GroupKey, aggregate};
use super::{Exec, ResultBuf, assign_columns, assign_ref, row_bytes, set_len, value_bytes};
use crate::error::{Result, SqlError};
use crate::expr::{Env, NoSubqueries};
use crate::plan::{Access, SelectPlan};
use crate::value;

/// Rows of values, as the pipeline passes them on.
type Rows = Vec<Vec<Value>>;

impl Exec<'_> {
    /// SELECT into `out` (visible columns only).
    pub fn select(&mut self, plan: &SelectPlan, params: &[Value], out: &mut ResultBuf) -> Result<()> {
        if plan.point_lookup {
            // The result's values are overwritten in place, not cleared:
            // a text column reuses the previous execution's string buffer.
            out.width = plan.visible;
            out.rows = 0;
            let r = self.select_point(plan, params, out);
            if out.rows == 0 {
                out.values.clear();
            }
            return r;
        }
        out.reset(plan.visible);
        let streams = plan.agg.is_none()
            && plan.windows.is_empty()
            && !plan.distinct
            && plan.distinct_on.is_empty()
            && plan.order_by.is_empty()
            && plan.limit.is_none()
            && plan.offset.is_none()
            && !plan.for_update;
        if streams {
            let env = self.env(params, &[]);
            // The columnar path's rows when it takes the plan; else the
            // join streams them (nothing held).
            if self.columnar_candidate(plan, &[])
                && let Some(rows) = self.columnar_rows(plan, &env)?
            {
                for r in &rows {
                    for e in &plan.projection[..plan.visible] {
                        let v = e.eval(&env, self, r)?;
                        out.values.push(v);
                    }
                    out.rows += 1;
                }
                return Ok(());
            }
            if let [level] = plan.levels.as_slice()
                && matches!(level.access, Access::IndexScan { .. } | Access::FullScan)
                && level.filters.is_empty()
                && level.post_filters.is_empty()
                && plan.final_filters.is_empty()
                && plan.projects_columns
            {
                // One table, nothing to check per row, plain columns out:
                // each row's columns go from the engine into the result.
                let projection = &plan.projection[..plan.visible];
                let (values, rows) = (&mut out.values, &mut out.rows);
                return self.scan_level(level, &env, &[], &mut |r| {
                    let start = values.len();
                    values.resize(start + projection.len(), Value::Null);
                    assign_columns(&mut values[start..], projection, r);
                    *rows += 1;
                    values[start..].iter().map(value_bytes).sum()
                });
            }
            // Each joined row is projected into the result as it is found.
            let mut row = self.pooled_row();
            row.resize(plan.width, Value::Null);
            let projection = &plan.projection[..plan.visible];
            let r = self.join(plan, 0, &mut row, &env, &mut |ex, r| {
                let start = out.values.len();
                for e in projection {
                    let v = e.eval(&env, ex, r)?;
                    out.values.push(v);
                }
                out.rows += 1;
                ex.interrupt.charge(out.values[start..].iter().map(value_bytes).sum(), "result")
            });
            self.return_row(row);
            return r;
        }
        let rows = self.select_rows(plan, params, &[])?;
        for r in rows {
            out.push_row(&r[..plan.visible]);
        }
        Ok(())
    }

    fn select_point(&mut self, plan: &SelectPlan, params: &[Value], out: &mut ResultBuf) -> Result<()> {
        let level = &plan.levels[0];
        let Access::PkLookup { key } = &level.access else { return Ok(()) };
        let env = Env { params, now_micros: self.now_micros, outer: &[] };
        if !self.eval_pk(&level.table, key, &env, &[])? {
            return Ok(());
        }
        let projection = &plan.projection[..plan.visible];
        if plan.projects_columns && !plan.for_update {
            // Decoded from the row in place, under the engine's read lock
            // (no engine calls in here), instead of copying the row out first.
            set_len(&mut out.values, plan.visible);
            let values = &mut out.values;
            let found = self.txn.get_with(level.table.id, self.keybuf, |r| assign_columns(values, projection, &r))?;
            out.rows += usize::from(found.is_some());
            return Ok(());
        }
        let found = if plan.for_update {
            self.txn.get_for_update(level.table.id, self.keybuf, self.rowbuf)?
        } else {
            self.txn.get(level.table.id, self.keybuf, self.rowbuf)?
        };
        let Some(r) = self.rowbuf.row().filter(|_| found) else { return Ok(()) };
        set_len(&mut out.values, plan.visible);
        if plan.projects_columns {
            assign_columns(&mut out.values, projection, &r);
        } else {
            let mut scratch = std::mem::take(self.scratch);
            set_len(&mut scratch, r.len());
            for (c, slot) in scratch.iter_mut().enumerate() {
                assign_ref(slot, r.get(c));
            }
            for (slot, e) in out.values.iter_mut().zip(projection) {
                *slot = e.eval(&env, &mut NoSubqueries, &scratch)?;
            }
            *self.scratch = scratch;
        }
        out.rows += 1;
        Ok(())
    }

    /// Full SELECT pipeline; rows carry every projection column (sort keys too).
    /// What it holds is charged to the statement's memory account while it
    /// runs and released when it returns (a correlated subquery runs once
    /// per outer row and must not add up).
    pub fn select_rows(&mut self, plan: &SelectPlan, params: &[Value], outer: &[Value]) -> Result<Vec<Vec<Value>>> {
        let held_before = self.interrupt.mem_used;
        let rows = self.select_rows_charged(plan, params, outer);
        self.interrupt.mem_used = held_before;
        rows
    }

    fn select_rows_charged(&mut self, plan: &SelectPlan, params: &[Value], outer: &[Value]) -> Result<Vec<Vec<Value>>> {
        let env = self.env(params, outer);
        let holding = if !plan.order_by.is_empty() && !plan.index_ordered {
            "sort"
        } else if plan.distinct || !plan.distinct_on.is_empty() {
            "DISTINCT"
        } else {
            "result"
        };
        // Evaluated before any row is read, as ExecLimit does: a negative
        // LIMIT fails before the scan does.
        let offset = match &plan.offset {
            Some(e) => count_arg(e.eval(&env, self, &[])?, "OFFSET")?,
            None => 0,
        };
        let limit = match &plan.limit {
            Some(e) => Some(count_arg(e.eval(&env, self, &[])?, "LIMIT")?),
            None => None,
        };
        // With nothing between the join and LIMIT that needs every row (a
        // sort, DISTINCT, an aggregate, a window, row locks), the join stops
        // at OFFSET + LIMIT rows: later rows are never read nor projected
        // (no nextval for them), as PostgreSQL's Limit pulls no more.
        let row_cap = limit
            .filter(|_| {
                plan.agg.is_none()
                    && plan.windows.is_empty()
                    && !plan.distinct
                    && plan.distinct_on.is_empty()
                    && (plan.order_by.is_empty() || plan.index_ordered)
                    && !plan.for_update
            })
            .map(|l| l.saturating_add(offset));
        let (mut joined, streamed_groups) = self.gather(plan, &env, outer, row_cap, holding)?;
        if plan.for_update {
            joined = self.lock_rows(plan, &env, joined)?;
        }
        let input = match &plan.agg {
            Some(agg) => {
                let mut groups = match streamed_groups {
                    Some(g) => g,
                    None => aggregate(self, &env, &agg.group_by, &agg.aggs, &joined)?,
                };
                if let Some(h) = &agg.having {
                    let mut kept = Vec::with_capacity(groups.len());
                    for g in groups {
                        if h.eval_bool(&env, self, &g)? == Some(true) {
                            kept.push(g);
                        }
                    }
                    groups = kept;
                }
                groups
            }
            None => joined,
        };
        let input = if plan.windows.is_empty() { input } else { self.apply_windows(&plan.windows, &env, input)? };
        let mut rows = Vec::with_capacity(input.len());
        for r in &input {
            self.interrupt.tick()?;
            let mut o = Vec::with_capacity(plan.projection.len());
            for e in &plan.projection {
                o.push(e.eval(&env, self, r)?);
            }
            self.interrupt.charge(row_bytes(&o), holding)?;
            rows.push(o);
        }
        if plan.distinct {
            let mut seen = std::collections::HashSet::new();
            rows.retain(|r| seen.insert(GroupKey(r[..plan.visible].to_vec())));
        }
        if !plan.order_by.is_empty() && !plan.index_ordered {
            // A sort cannot stop half-way: once interrupted, every comparison
            // answers Equal, which ends it in a few linear passes.
            let interrupt = &mut self.interrupt;
            let mut stopped = Ok(());
            rows.sort_by(|a, b| {
                if stopped.is_err() {
                    return Ordering::Equal;
                }
                stopped = interrupt.tick();
                for k in &plan.order_by {
                    let o = sort_key_cmp(&a[k.column], &b[k.column], k.desc, k.nulls_first);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            });
            stopped?;
        }
        if !plan.distinct_on.is_empty() {
            let mut seen = std::collections::HashSet::new();
            rows.retain(|r| seen.insert(GroupKey(plan.distinct_on.iter().map(|&c| r[c].clone()).collect())));
        }
        Ok(limited(plan, rows, offset, limit))
    }

    /// The joined rows (or, with an aggregate, the groups as they were
    /// streamed into it; then the rows are none), from the columnar path
    /// (exec/columnar) when it takes the plan, else from the join; the
    /// rest of the pipeline is the same either way.
    fn gather(
        &mut self,
        plan: &SelectPlan,
        env: &Env<'_>,
        outer: &[Value],
        row_cap: Option<usize>,
        holding: &'static str,
    ) -> Result<(Rows, Option<Rows>)> {
        if row_cap.is_none()
            && self.columnar_candidate(plan, outer)
            && let Some(rows) = self.columnar_rows(plan, env)?
        {
            return Ok(if plan.agg.is_some() { (Vec::new(), Some(rows)) } else { (rows, None) });
        }
        let mut joined: Vec<Vec<Value>> = Vec::new();
        let mut row = vec![Value::Null; plan.width];
        let mut streamed_groups = None;
        match &plan.agg {
            // Rows feed the aggregates as they are found: memory is per
            // group, not per row (count(*) over a million rows holds one).
            Some(agg) if !plan.for_update => {
                let mut acc = Aggregator::new(&agg.group_by, &agg.aggs);
                self.join(plan, 0, &mut row, env, &mut |ex, r| acc.add(ex, env, r))?;
                streamed_groups = Some(acc.finish()?);
            }
            _ if row_cap == Some(0) => {}
            _ => {
                let joined_all = self.join(plan, 0, &mut row, env, &mut |ex, r| {
                    joined.push(r.to_vec());
                    ex.join_stop = row_cap.is_some_and(|cap| joined.len() >= cap);
                    ex.interrupt.charge(row_bytes(r), holding)
                });
                self.join_stop = false;
                joined_all?;
            }
        }
        Ok((joined, streamed_groups))
    }

    /// SELECT ... FOR UPDATE: lock each row, re-read its latest version and
    /// recheck the predicates on it (PostgreSQL's EvalPlanQual).
    fn lock_rows(&mut self, plan: &SelectPlan, env: &Env<'_>, rows: Vec<Vec<Value>>) -> Result<Vec<Vec<Value>>> {
        let level = &plan.levels[0];
        let table = level.table.clone();
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let key: Vec<Value> = table.primary_key.iter().map(|&c| r[c].clone()).collect();
            if !self.txn.get_for_update(table.id, &key, self.rowbuf)? {
                continue;
            }
            let latest = self.rowbuf.values();
            let mut keep =
                self.passes(&level.filters, env, &latest)? && self.passes(&level.key_checks, env, &latest)?;
            if keep && let Access::PkLookup { key: kexprs } = &level.access {
                // The key may have moved away from the looked-up value.
                for (e, &c) in kexprs.iter().zip(&table.primary_key) {
                    let want = e.eval(env, self, &latest)?;
                    keep &= value::compare(&want, &latest[c]) == Some(Ordering::Equal);
                }
            }
            if keep && self.passes(&plan.final_filters, env, &latest)? {
                out.push(latest);
            }
        }
        Ok(out)
    }
}

/// OFFSET and LIMIT over the sorted rows; with FETCH FIRST ... WITH TIES
/// also the rows after the limit that sort equal to the last one kept.
fn limited(plan: &SelectPlan, rows: Vec<Vec<Value>>, offset: usize, limit: Option<usize>) -> Vec<Vec<Value>> {
    let mut rest = rows.into_iter().skip(offset);
    let mut kept: Vec<Vec<Value>> = rest.by_ref().take(limit.unwrap_or(usize::MAX)).collect();
    if plan.with_ties
        && let Some(last) = kept.last()
    {
        let peer = |r: &Vec<Value>| {
            plan.order_by.iter().all(|k| sort_key_cmp(&last[k.column], &r[k.column], k.desc, k.nulls_first).is_eq())
        };
        let ties: Vec<Vec<Value>> = rest.take_while(peer).collect();
        kept.extend(ties);
    }
    kept
}

fn count_arg(v: Value, what: &str) -> Result<usize> {
    match v {
        // LIMIT NULL is no limit, OFFSET NULL no offset (limit_needed / ExecLimit).
        Value::Null if what == "OFFSET" => Ok(0),
        Value::Null => Ok(usize::MAX),
        v => {
            let n = v.as_i64().unwrap_or(0);
            if n < 0 {
                let msg = if what == "LIMIT" { "LIMIT must not be negative" } else { "OFFSET must not be negative" };
                return Err(SqlError::new("2201W", msg));
            }
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        }
    }
}

/// ORDER BY's comparison of one key (also window ORDER BY and PARTITION BY).
pub(super) fn sort_key_cmp(x: &Value, y: &Value, desc: bool, nulls_first: bool) -> Ordering {
    match (x.is_null(), y.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => {
            if nulls_first {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        (false, true) => {
            if nulls_first {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        _ => {
            let o = value::compare(x, y).unwrap_or(Ordering::Equal);
            if desc { o.reverse() } else { o }
        }
    }
}
