//! MERGE: the source left-joined to the target runs to completion first
//! (`Exec::join`, hash joins allowed: nothing is written yet); then each
//! joined row, in join order, takes the first WHEN clause of its kind
//! (MATCHED when the target's key is not NULL) whose condition holds on
//! the row as found, and its action goes through the same engine calls as
//! UPDATE / DELETE / INSERT. As in PostgreSQL, a target row that an
//! earlier joined row updated or deleted cannot be updated or deleted
//! again (21000); DO NOTHING, or no clause, leaves it alone. Before an
//! UPDATE or DELETE, the ON condition and the clause's condition are
//! checked again on the target row's latest version (READ COMMITTED); a
//! row that no longer satisfies them is left alone (PostgreSQL 15 would
//! try the NOT MATCHED clauses for its source row instead).

use std::collections::HashSet;

use pgtier_engine::Value;

use super::dml::{check_not_null, check_violation};
use super::dml_join::holds;
use super::{Exec, ResultBuf, assign_ref, row_bytes};
use crate::error::{Result, SqlError};
use crate::expr::{Env, Expr, NoSubqueries};
use crate::plan::{MergeAction, MergePlan, MergeWhen};
use crate::value;

impl Exec<'_> {
    pub fn merge(&mut self, plan: &MergePlan, params: &[Value], out: &mut ResultBuf) -> Result<u64> {
        out.reset(0);
        let env = self.env(params, &[]);
        let width = plan.join.width;
        let mut rows: Vec<Value> = Vec::new();
        let mut row = vec![Value::Null; width];
        let hash_joins = std::mem::replace(&mut self.hash_joins, true);
        let r = self.join(&plan.join, 0, &mut row, &env, &mut |ex, r| {
            rows.extend_from_slice(r);
            ex.interrupt.charge(row_bytes(r), "join")
        });
        self.hash_joins = hash_joins;
        r?;
        let table = plan.table.clone();
        let to = plan.target_offset;
        let key_column = table.primary_key.first().copied().unwrap_or(0);
        let defaults = table.default_row();
        // Target rows this statement updated or deleted, by key text.
        let mut touched: HashSet<String> = HashSet::new();
        let mut count = 0;
        for found in rows.chunks(width.max(1)) {
            // A primary key is never NULL: NULL there is the left join's miss.
            let matched = !found[to + key_column].is_null();
            let Some(when) = self.first_when(if matched { &plan.matched } else { &plan.not_matched }, &env, found)? else { continue };
            match &when.action {
                MergeAction::Nothing => {}
                MergeAction::Insert(values) => {
                    let mut full = defaults.clone();
                    for (c, e) in values {
                        full[*c] = e.eval(&env, self, found)?;
                    }
                    // PostgreSQL checks NOT NULL before CHECK (ExecConstraints).
                    if !plan.checks.is_empty() {
                        check_not_null(&table, &full)?;
                    }
                    self.check_row(&plan.checks, &env, &table, &full)?;
                    self.txn.insert(table.id, &full)?;
                    count += 1;
                }
                MergeAction::Update(_) | MergeAction::Delete => {
                    let key: Vec<Value> = table.primary_key.iter().map(|&c| found[to + c].clone()).collect();
                    let text = key_text(&key);
                    if touched.contains(&text) {
                        return Err(SqlError::new("21000", "MERGE command cannot affect row a second time")
                            .with_hint("Ensure that not more than one source row matches any one target row."));
                    }
                    if self.merge_write(plan, when, &env, found, &key)? {
                        touched.insert(text);
                        count += 1;
                    }
                }
            }
        }
        Ok(count)
    }

    fn first_when<'p>(&mut self, clauses: &'p [MergeWhen], env: &Env<'_>, row: &[Value]) -> Result<Option<&'p MergeWhen>> {
        for w in clauses {
            match &w.condition {
                None => return Ok(Some(w)),
                Some(c) if c.eval_bool(env, self, row)? == Some(true) => return Ok(Some(w)),
                Some(_) => {}
            }
        }
        Ok(None)
    }

    /// The MATCHED action UPDATE or DELETE on the target row `key`;
    /// whether the row was written.
    fn merge_write(&mut self, plan: &MergePlan, when: &MergeWhen, env: &Env<'_>, found: &[Value], key: &[Value]) -> Result<bool> {
        let table = plan.table.clone();
        let to = plan.target_offset;
        let tw = table.columns.len();
        let mut joined = found.to_vec();
        if let MergeAction::Update(assignments) = &when.action
            && assignments.iter().any(|(_, e)| e.has_subquery())
        {
            // Subqueries cannot run in the engine's row callback: computed
            // on the row as the join found it.
            let mut changes = Vec::with_capacity(assignments.len());
            for (c, e) in assignments {
                changes.push((*c, e.eval(env, self, &joined)?));
            }
            for (c, v) in &changes {
                joined[to + c] = v.clone();
            }
            self.check_row(&plan.checks, env, &table, &joined[to..to + tw])?;
            return Ok(self.txn.update(table.id, key, &changes)?);
        }
        let recheck: Vec<&Expr> = plan.on.iter().chain(when.condition.iter().filter(|c| !c.has_subquery())).collect();
        let mut failure: Option<SqlError> = None;
        let written = match &when.action {
            MergeAction::Update(assignments) => {
                let mut applied = false;
                let updated = self.txn.update_with(table.id, key, |r| {
                    applied = false;
                    for (c, slot) in joined[to..].iter_mut().enumerate().take(r.len()) {
                        assign_ref(slot, r.get(c));
                    }
                    let outcome = (|| -> Result<Option<Vec<(usize, Value)>>> {
                        if !holds(recheck.iter().copied(), env, &joined)? {
                            return Ok(None);
                        }
                        let mut changes = Vec::with_capacity(assignments.len());
                        for (c, e) in assignments {
                            changes.push((*c, e.eval(env, &mut NoSubqueries, &joined)?));
                        }
                        for (c, v) in &changes {
                            joined[to + c] = v.clone();
                        }
                        let new_row = &joined[to..to + tw];
                        for c in &plan.checks {
                            if c.expr.eval_bool(env, &mut NoSubqueries, new_row)? == Some(false) {
                                return Err(check_violation(&table, &c.name, new_row));
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
                updated && applied
            }
            _ => self.txn.delete_with(table.id, key, |r| {
                for (c, slot) in joined[to..].iter_mut().enumerate().take(r.len()) {
                    assign_ref(slot, r.get(c));
                }
                match holds(recheck.iter().copied(), env, &joined) {
                    Ok(keep) => Ok(keep),
                    Err(e) => {
                        failure = Some(e);
                        Ok(false)
                    }
                }
            })?,
        };
        match failure {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }
}

/// A target row's key as one string (values as text, NUL-separated): one
/// row per key, so equal strings name the same row.
fn key_text(key: &[Value]) -> String {
    let mut text = String::new();
    for v in key {
        text.push_str(&value::to_text(v));
        text.push('\0');
    }
    text
}
