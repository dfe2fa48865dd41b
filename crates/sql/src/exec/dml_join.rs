//! UPDATE ... FROM and DELETE ... USING: the join of the target (level 0)
//! with the other relations runs to completion first, through the SELECT
//! pipeline (`Exec::join`, with hash joins: nothing is written yet, so a
//! hashed level cannot go stale and a self-join reads the statement's
//! snapshot); then each target row found is written once, through the
//! same engine calls as a plain UPDATE / DELETE (`update_with`,
//! `delete_with`: locks, constraints, FK actions and the cache's
//! write-through are theirs), after rechecking the join's predicates on
//! the row's latest version (READ COMMITTED).

use pgtier_engine::{TableSchema, Value};

use super::dml::check_violation;
use super::{Exec, ResultBuf, assign_ref, row_bytes};
use crate::error::{Result, SqlError};
use crate::expr::{Env, Expr, NoSubqueries};
use crate::plan::{DeletePlan, DmlJoin, UpdatePlan};
use crate::value;

impl Exec<'_> {
    /// The joined rows (flat, `join.join.width` values each), one per
    /// target row: its first in join order. The target is the outer level,
    /// so a target row's joined rows come one after another.
    fn target_join_rows(&mut self, join: &DmlJoin, env: &Env<'_>) -> Result<Vec<Value>> {
        let plan = &join.join;
        let width = plan.width;
        let pk = &plan.levels[0].table.primary_key;
        let mut rows: Vec<Value> = Vec::new();
        let mut row = vec![Value::Null; width];
        let hash_joins = std::mem::replace(&mut self.hash_joins, true);
        let r = self.join(plan, 0, &mut row, env, &mut |ex, r| {
            if let Some(last) = rows.len().checked_sub(width).map(|start| &rows[start..])
                && pk.iter().all(|&c| value::compare(&last[c], &r[c]) == Some(std::cmp::Ordering::Equal))
            {
                return Ok(());
            }
            rows.extend_from_slice(r);
            ex.interrupt.charge(row_bytes(r), "join")
        });
        self.hash_joins = hash_joins;
        r?;
        Ok(rows)
    }

    pub(super) fn update_join(&mut self, plan: &UpdatePlan, join: &DmlJoin, env: &Env<'_>, out: &mut ResultBuf) -> Result<u64> {
        let rows = self.target_join_rows(join, env)?;
        let table = plan.level.table.clone();
        let mut count = 0;
        let mut key = Vec::with_capacity(table.primary_key.len());
        for found in rows.chunks(join.join.width.max(1)) {
            key.clear();
            key.extend(table.primary_key.iter().map(|&c| found[c].clone()));
            let mut joined = found.to_vec();
            let updated = if plan.assignments_have_subqueries {
                // Subqueries cannot run in the engine's row callback: the
                // new values are computed on the row as the join found it.
                let changes = self.assigned(plan, env, &mut joined)?;
                self.check_row(&plan.checks, env, &table, &joined[..table.columns.len()])?;
                self.txn.update(table.id, &key, &changes)?
            } else {
                self.update_rechecked(plan, join, env, &table, &key, &mut joined)?
            };
            if !updated {
                continue;
            }
            count += 1;
            if !plan.returning.is_empty() {
                // RETURNING sees the row as stored (padding, rounding).
                let new_key: Vec<Value> = table.primary_key.iter().map(|&c| joined[c].clone()).collect();
                if self.txn.get(table.id, &new_key, self.rowbuf)?
                    && let Some(r) = self.rowbuf.row()
                {
                    for (c, slot) in joined.iter_mut().enumerate().take(r.len()) {
                        assign_ref(slot, r.get(c));
                    }
                }
                self.returning(&plan.returning, env, &joined, out)?;
            }
        }
        Ok(count)
    }

    /// The assignments evaluated on `joined`, which then holds the new row.
    fn assigned(&mut self, plan: &UpdatePlan, env: &Env<'_>, joined: &mut [Value]) -> Result<Vec<(usize, Value)>> {
        let mut changes = Vec::with_capacity(plan.assignments.len());
        for (c, e) in &plan.assignments {
            changes.push((*c, e.eval(env, self, joined)?));
        }
        for (c, v) in &changes {
            joined[*c] = v.clone();
        }
        Ok(changes)
    }

    /// Updates the target row `key` if the join's predicates still hold on
    /// its latest version; `joined` then holds the new joined row.
    fn update_rechecked(&mut self, plan: &UpdatePlan, join: &DmlJoin, env: &Env<'_>, table: &TableSchema, key: &[Value], joined: &mut [Value]) -> Result<bool> {
        let mut failure: Option<SqlError> = None;
        let mut applied = false;
        let updated = self.txn.update_with(table.id, key, |r| {
            applied = false;
            for (c, slot) in joined.iter_mut().enumerate().take(r.len()) {
                assign_ref(slot, r.get(c));
            }
            let outcome = (|| -> Result<Option<Vec<(usize, Value)>>> {
                if !holds(&join.recheck, env, joined)? {
                    return Ok(None);
                }
                let mut changes = Vec::with_capacity(plan.assignments.len());
                for (c, e) in &plan.assignments {
                    changes.push((*c, e.eval(env, &mut NoSubqueries, joined)?));
                }
                for (c, v) in &changes {
                    joined[*c] = v.clone();
                }
                let new_row = &joined[..table.columns.len()];
                for c in &plan.checks {
                    if c.expr.eval_bool(env, &mut NoSubqueries, new_row)? == Some(false) {
                        return Err(check_violation(table, &c.name, new_row));
                    }
                }
                Ok(Some(changes))
            })();
            match outcome {
                Ok(changes) => {
                    applied = changes.is_some();
                    Ok(changes)
                }
                Err(e) => {
                    failure = Some(e);
                    Ok(None)
                }
            }
        })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(updated && applied),
        }
    }

    pub(super) fn delete_join(&mut self, plan: &DeletePlan, join: &DmlJoin, env: &Env<'_>, out: &mut ResultBuf) -> Result<u64> {
        let rows = self.target_join_rows(join, env)?;
        let table = plan.level.table.clone();
        let mut count = 0;
        let mut key = Vec::with_capacity(table.primary_key.len());
        for found in rows.chunks(join.join.width.max(1)) {
            key.clear();
            key.extend(table.primary_key.iter().map(|&c| found[c].clone()));
            let mut joined = found.to_vec();
            let mut failure = None;
            // The latest version is what is deleted (and returned).
            let deleted = self.txn.delete_with(table.id, &key, |r| {
                for (c, slot) in joined.iter_mut().enumerate().take(r.len()) {
                    assign_ref(slot, r.get(c));
                }
                match holds(&join.recheck, env, &joined) {
                    Ok(keep) => Ok(keep),
                    Err(e) => {
                        failure = Some(e);
                        Ok(false)
                    }
                }
            })?;
            if let Some(e) = failure {
                return Err(e);
            }
            if deleted {
                count += 1;
                self.returning(&plan.returning, env, &joined, out)?;
            }
        }
        Ok(count)
    }
}

/// Whether every predicate is true on `row` (none reads a subquery: this
/// runs in the engine's row callback).
pub(super) fn holds<'e>(predicates: impl IntoIterator<Item = &'e Expr>, env: &Env<'_>, row: &[Value]) -> Result<bool> {
    for p in predicates {
        if p.eval_bool(env, &mut NoSubqueries, row)? != Some(true) {
            return Ok(false);
        }
    }
    Ok(true)
}
