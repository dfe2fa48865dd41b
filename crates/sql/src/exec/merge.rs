//! MERGE: the source left-joined to the target runs to completion first
//! (`Exec::join`, hash joins allowed: nothing is written yet); then each
//! joined row, in join order, takes the first WHEN clause of its kind
//! (MATCHED when the target's key is not NULL) whose condition holds on
//! the row as found, and its action goes through the same engine calls as
//! UPDATE / DELETE / INSERT. As in PostgreSQL, a target row that an
//! earlier joined row updated or deleted cannot be updated or deleted
//! again (21000); DO NOTHING, or no clause, leaves it alone. Before an
//! UPDATE or DELETE, the ON condition and the clause's condition are
//! checked again on the target row's latest version (READ COMMITTED): a
//! row gone or no longer satisfying ON makes the source row NOT MATCHED,
//! as in PostgreSQL 15; one whose clause condition fails is left alone
//! (PostgreSQL would choose among the MATCHED clauses again).

use std::collections::HashSet;

use pgtier_engine::Value;

use super::dml::check_not_null;
use super::dml_join::{JoinedTarget, key_text};
use super::{Exec, ResultBuf, row_bytes};
use crate::error::{Result, SqlError};
use crate::expr::{Env, Expr};
use crate::plan::{MergeAction, MergePlan, MergeWhen};

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
        // Target rows this statement updated or deleted, by key text.
        let mut touched: HashSet<String> = HashSet::new();
        let mut count = 0;
        for found in rows.chunks(width.max(1)) {
            // A primary key is never NULL: NULL there is the left join's miss.
            if found[to + key_column].is_null() {
                count += u64::from(self.merge_not_matched(plan, &env, found)?);
                continue;
            }
            let Some(when) = self.first_when(&plan.matched, &env, found)? else { continue };
            match &when.action {
                MergeAction::Nothing | MergeAction::Insert(_) => {}
                MergeAction::Update(_) | MergeAction::Delete => {
                    let key: Vec<Value> = table.primary_key.iter().map(|&c| found[to + c].clone()).collect();
                    let text = key_text(&key);
                    if touched.contains(&text) {
                        return Err(SqlError::new("21000", "MERGE command cannot affect row a second time")
                            .with_hint("Ensure that not more than one source row matches any one target row."));
                    }
                    match self.merge_write(plan, when, &env, found, &key)? {
                        Written::Yes => {
                            touched.insert(text);
                            count += 1;
                        }
                        Written::No => {}
                        // PostgreSQL 15: the source row is then not matched.
                        Written::Lost => count += u64::from(self.merge_not_matched(plan, &env, found)?),
                    }
                }
            }
        }
        Ok(count)
    }

    fn first_when<'p>(
        &mut self,
        clauses: &'p [MergeWhen],
        env: &Env<'_>,
        row: &[Value],
    ) -> Result<Option<&'p MergeWhen>> {
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
    /// whether the row was written. ON and the clause's condition are
    /// rechecked on the row's latest version.
    fn merge_write(
        &mut self,
        plan: &MergePlan,
        when: &MergeWhen,
        env: &Env<'_>,
        found: &[Value],
        key: &[Value],
    ) -> Result<Written> {
        let recheck: Vec<&Expr> = plan.on.iter().chain(when.condition.iter().filter(|c| !c.has_subquery())).collect();
        let mut target = JoinedTarget::new(&plan.table, plan.target_offset, &plan.checks, recheck);
        target.joins = usize::from(plan.on.is_some());
        let mut joined = found.to_vec();
        let written = match &when.action {
            MergeAction::Update(assignments) => self.update_joined(&target, assignments, env, key, &mut joined)?,
            _ => self.delete_joined(&target, env, key, &mut joined)?,
        };
        Ok(if written {
            Written::Yes
        } else if target.lost.get() {
            Written::Lost
        } else {
            Written::No
        })
    }

    /// The NOT MATCHED action for the source row of `found` (its target
    /// part is ignored); whether a row was inserted.
    fn merge_not_matched(&mut self, plan: &MergePlan, env: &Env<'_>, found: &[Value]) -> Result<bool> {
        let mut source_row = found.to_vec();
        for v in &mut source_row[plan.target_offset..plan.target_offset + plan.table.columns.len()] {
            *v = Value::Null;
        }
        let Some(when) = self.first_when(&plan.not_matched, env, &source_row)? else { return Ok(false) };
        let MergeAction::Insert(values) = &when.action else { return Ok(false) };
        let table = &plan.table;
        let mut full = table.default_row();
        for (c, e) in values {
            full[*c] = e.eval(env, self, &source_row)?;
        }
        // PostgreSQL checks NOT NULL before CHECK (ExecConstraints).
        if !plan.checks.is_empty() {
            check_not_null(table, &full)?;
        }
        self.check_row(&plan.checks, env, table, &full)?;
        if let Some(cache) = self.cache {
            cache.partition_check_row(table.id, &full)?;
        }
        self.txn.insert(table.id, &full)?;
        Ok(true)
    }
}

/// What became of a MATCHED UPDATE or DELETE.
enum Written {
    Yes,
    /// The clause's condition no longer holds on the row's latest version.
    No,
    /// The row is gone or no longer satisfies ON.
    Lost,
}
