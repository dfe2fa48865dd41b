//! UPDATE ... FROM and DELETE ... USING: the join of the target with the
//! other relations runs to completion first, through the SELECT
//! pipeline (`Exec::join`, with hash joins: nothing is written yet, so a
//! hashed level cannot go stale and a self-join reads the statement's
//! snapshot); then each target row found is written once, through the
//! same engine calls as a plain UPDATE / DELETE (`update_with`,
//! `delete_with`: locks, constraints, FK actions and the cache's
//! write-through are theirs), after rechecking the join's predicates on
//! the row's latest version (READ COMMITTED).

use std::cell::Cell;
use std::collections::HashSet;

use pgtier_engine::{TableSchema, Value};

use super::dml::check_violation;
use super::{Exec, ResultBuf, assign_ref, row_bytes};
use crate::error::{Result, SqlError};
use crate::expr::{Env, Expr, NoSubqueries};
use crate::plan::{BoundCheck, DeletePlan, DmlJoin, UpdatePlan};
use crate::value;

impl Exec<'_> {
    /// The joined rows (flat, `join.join.width` values each), one per
    /// target row: its first in join order. With the target as the outer
    /// level a target row's joined rows come one after another; as the
    /// inner one, the keys seen are remembered.
    fn target_join_rows(&mut self, join: &DmlJoin, env: &Env<'_>) -> Result<Vec<Value>> {
        let plan = &join.join;
        let width = plan.width;
        let target = &plan.levels[join.target_level];
        let (to, pk) = (target.offset, &target.table.primary_key);
        let mut seen: HashSet<String> = HashSet::new();
        let mut rows: Vec<Value> = Vec::new();
        let mut row = vec![Value::Null; width];
        let hash_joins = std::mem::replace(&mut self.hash_joins, true);
        let r = self.join(plan, 0, &mut row, env, &mut |ex, r| {
            if join.target_level == 0 {
                if let Some(last) = rows.len().checked_sub(width).map(|start| &rows[start..])
                    && pk.iter().all(|&c| value::compare(&last[c], &r[c]) == Some(std::cmp::Ordering::Equal))
                {
                    return Ok(());
                }
            } else if !seen.insert(key_text(pk.iter().map(|&c| &r[to + c]))) {
                return Ok(());
            }
            rows.extend_from_slice(r);
            ex.interrupt.charge(row_bytes(r), "join")
        });
        self.hash_joins = hash_joins;
        r?;
        Ok(rows)
    }

    pub(super) fn update_join(
        &mut self,
        plan: &UpdatePlan,
        join: &DmlJoin,
        env: &Env<'_>,
        out: &mut ResultBuf,
    ) -> Result<u64> {
        let table = plan.level.table.clone();
        let target = JoinedTarget::new(&table, plan.level.offset, &plan.checks, join.recheck.iter().collect());
        self.each_target_row(join, &target, env, |ex, key, joined| {
            if !ex.update_joined(&target, &plan.assignments, env, key, joined)? {
                return Ok(false);
            }
            if !plan.returning.is_empty() {
                // RETURNING sees the row as stored (padding, rounding).
                let to = target.offset;
                let new_key: Vec<Value> = table.primary_key.iter().map(|&c| joined[to + c].clone()).collect();
                if ex.txn.get(table.id, &new_key, ex.rowbuf)?
                    && let Some(r) = ex.rowbuf.row()
                {
                    for (c, slot) in joined[to..].iter_mut().enumerate().take(r.len()) {
                        assign_ref(slot, r.get(c));
                    }
                }
                ex.returning(&plan.returning, env, joined, out)?;
            }
            Ok(true)
        })
    }

    pub(super) fn delete_join(
        &mut self,
        plan: &DeletePlan,
        join: &DmlJoin,
        env: &Env<'_>,
        out: &mut ResultBuf,
    ) -> Result<u64> {
        let table = plan.level.table.clone();
        let target = JoinedTarget::new(&table, plan.level.offset, &[], join.recheck.iter().collect());
        self.each_target_row(join, &target, env, |ex, key, joined| {
            if !ex.delete_joined(&target, env, key, joined)? {
                return Ok(false);
            }
            ex.returning(&plan.returning, env, joined, out)?;
            Ok(true)
        })
    }

    /// Runs the join, then `write` on each target row found (its key and
    /// a copy of its joined row); the number of rows `write` wrote.
    fn each_target_row<W>(
        &mut self,
        join: &DmlJoin,
        target: &JoinedTarget<'_>,
        env: &Env<'_>,
        mut write: W,
    ) -> Result<u64>
    where
        W: FnMut(&mut Self, &[Value], &mut [Value]) -> Result<bool>,
    {
        let rows = self.target_join_rows(join, env)?;
        let pk = &target.table.primary_key;
        let mut count = 0;
        let mut key = Vec::with_capacity(pk.len());
        for found in rows.chunks(join.join.width.max(1)) {
            key.clear();
            key.extend(pk.iter().map(|&c| found[target.offset + c].clone()));
            let mut joined = found.to_vec();
            count += u64::from(write(self, &key, &mut joined)?);
        }
        Ok(count)
    }

    /// Updates the target row `key` of the joined row `joined` (as the
    /// join found it) if `target.recheck` still holds on its latest
    /// version; `joined` then holds the new joined row. New values that
    /// need a subquery cannot be computed in the engine's row callback:
    /// they are computed on the row as found, without the recheck.
    pub(super) fn update_joined(
        &mut self,
        target: &JoinedTarget<'_>,
        assignments: &[(usize, Expr)],
        env: &Env<'_>,
        key: &[Value],
        joined: &mut [Value],
    ) -> Result<bool> {
        let (table, to) = (target.table, target.offset);
        let tw = table.columns.len();
        if assignments.iter().any(|(_, e)| e.has_subquery()) {
            let mut changes = Vec::with_capacity(assignments.len());
            for (c, e) in assignments {
                changes.push((*c, e.eval(env, self, joined)?));
            }
            for (c, v) in &changes {
                joined[to + c] = v.clone();
            }
            self.check_row(target.checks, env, table, &joined[to..to + tw])?;
            return Ok(self.txn.update(table.id, key, &changes)?);
        }
        let mut failure: Option<SqlError> = None;
        let mut applied = false;
        target.lost.set(true);
        let updated = self.txn.update_with(table.id, key, |r| {
            applied = false;
            for (c, slot) in joined[to..].iter_mut().enumerate().take(r.len()) {
                assign_ref(slot, r.get(c));
            }
            let outcome = (|| -> Result<Option<Vec<(usize, Value)>>> {
                let (join_predicates, others) = target.recheck.split_at(target.joins.min(target.recheck.len()));
                target.lost.set(!holds(join_predicates.iter().copied(), env, joined)?);
                if target.lost.get() || !holds(others.iter().copied(), env, joined)? {
                    return Ok(None);
                }
                let mut changes = Vec::with_capacity(assignments.len());
                for (c, e) in assignments {
                    changes.push((*c, e.eval(env, &mut NoSubqueries, joined)?));
                }
                for (c, v) in &changes {
                    joined[to + c] = v.clone();
                }
                let new_row = &joined[to..to + tw];
                for c in target.checks {
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

    /// Deletes the target row `key` if `target.recheck` still holds on its
    /// latest version, which `joined` then holds (what is deleted is what
    /// RETURNING shows).
    pub(super) fn delete_joined(
        &mut self,
        target: &JoinedTarget<'_>,
        env: &Env<'_>,
        key: &[Value],
        joined: &mut [Value],
    ) -> Result<bool> {
        let to = target.offset;
        let mut failure = None;
        target.lost.set(true);
        let deleted = self.txn.delete_with(target.table.id, key, |r| {
            for (c, slot) in joined[to..].iter_mut().enumerate().take(r.len()) {
                assign_ref(slot, r.get(c));
            }
            let (join_predicates, others) = target.recheck.split_at(target.joins.min(target.recheck.len()));
            let keep = holds(join_predicates.iter().copied(), env, joined).and_then(|on| {
                target.lost.set(!on);
                Ok(on && holds(others.iter().copied(), env, joined)?)
            });
            match keep {
                Ok(keep) => Ok(keep),
                Err(e) => {
                    failure = Some(e);
                    Ok(false)
                }
            }
        })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(deleted),
        }
    }
}

/// The target of a joined write: its table, where its columns start in
/// the joined row, its CHECKs, and what to recheck on its latest version
/// (over the joined row; none may read a subquery): first the `joins`
/// predicates that join it, then the others.
pub(super) struct JoinedTarget<'p> {
    pub table: &'p TableSchema,
    pub offset: usize,
    pub checks: &'p [BoundCheck],
    pub recheck: Vec<&'p Expr>,
    pub joins: usize,
    /// Set by the last write that was not made because the row is gone
    /// or no longer joins (MERGE then tries its NOT MATCHED clauses).
    pub lost: Cell<bool>,
}

impl<'p> JoinedTarget<'p> {
    /// A target whose every rechecked predicate is a join predicate.
    pub(super) fn new(
        table: &'p TableSchema,
        offset: usize,
        checks: &'p [BoundCheck],
        recheck: Vec<&'p Expr>,
    ) -> JoinedTarget<'p> {
        let joins = recheck.len();
        JoinedTarget { table, offset, checks, recheck, joins, lost: Cell::new(false) }
    }
}

/// Whether every predicate is true on `row` (none reads a subquery: this
/// runs in the engine's row callback).
fn holds<'e>(predicates: impl IntoIterator<Item = &'e Expr>, env: &Env<'_>, row: &[Value]) -> Result<bool> {
    for p in predicates {
        if p.eval_bool(env, &mut NoSubqueries, row)? != Some(true) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A target row's key as one string (values as text, NUL-separated): one
/// row per key, so equal strings name the same row.
pub(super) fn key_text<'v>(key: impl IntoIterator<Item = &'v Value>) -> String {
    let mut text = String::new();
    for v in key {
        text.push_str(&value::to_text(v));
        text.push('\0');
    }
    text
}
