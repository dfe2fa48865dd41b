//! MERGE as PostgreSQL 15 has it (parsed by dialect.rs): `MERGE INTO t
//! USING src ON cond`, WHEN MATCHED [AND c] THEN UPDATE / DELETE / DO
//! NOTHING, WHEN NOT MATCHED [AND c] THEN INSERT / DO NOTHING; no
//! RETURNING (PostgreSQL 17's). The source is joined to the target by a
//! left join on the ON condition, planned as a SELECT's join is.

use sqlparser::ast;

use super::dml::{column_default, generated_defaults, insert_targets, writable};
use super::dml_from::join_pipeline;
use super::select::invalid_reference;
use super::{Binder, ExprCtx, Rel, Scope, ident};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::plan::{MergeAction, MergePlan, MergeWhen, Plan};
use crate::planner::{self, JoinRel};

impl Binder<'_> {
    pub(super) fn merge(&mut self, m: &ast::Merge) -> Result<Plan> {
        if m.output.is_some() || !m.optimizer_hints.is_empty() {
            return Err(SqlError::unsupported("this MERGE form"));
        }
        let ast::TableFactor::Table { name, alias, args: None, .. } = &m.table else {
            return Err(SqlError::unsupported("this MERGE target"));
        };
        if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
            return Err(SqlError::syntax("syntax error at or near \"(\""));
        }
        // A clause after an unconditional one of its kind never runs: a
        // parse-time error in PostgreSQL, before anything is bound.
        for (k, clause) in m.clauses.iter().enumerate() {
            if m.clauses[..k].iter().any(|c| c.clause_kind == clause.clause_kind && c.predicate.is_none()) {
                return Err(SqlError::syntax("unreachable WHEN clause specified after unconditional WHEN clause"));
            }
        }
        let table = self.table(name)?;
        self.refuse_merge_rules(&table)?;
        writable(&table)?;
        super::dml_from::refuse_triggers(self, &table, "MERGE")?;
        self.refuse_cascaded_triggers(&table)?;
        if crate::catalog::partitions::is_partitioned(&table) {
            return Err(SqlError::unsupported("MERGE into a partitioned table"));
        }
        // MERGE reads its target (the join) and needs each action's privilege.
        let mut needed = crate::catalog::roles::Privs::SELECT;
        for c in &m.clauses {
            needed = needed.union(match &c.action {
                ast::MergeAction::Insert(_) => crate::catalog::roles::Privs::INSERT,
                ast::MergeAction::Update(_) => crate::catalog::roles::Privs::UPDATE,
                ast::MergeAction::Delete { .. } => crate::catalog::roles::Privs::DELETE,
            });
        }
        self.need(&table, needed);
        let target_name =
            alias.as_ref().map_or_else(|| crate::names::short(&table.name).to_owned(), |a| ident(&a.name));
        if matches!(m.source, ast::TableFactor::Derived { lateral: true, .. }) {
            return Err(SqlError::unsupported("LATERAL as MERGE's source"));
        }
        // The source first (offset 0): the left join keeps its rows.
        let (mut rels, _) =
            self.bind_from(&[ast::TableWithJoins { relation: m.source.clone(), joins: Vec::new() }], None)?;
        if rels.iter().any(|r| r.name == target_name) {
            return Err(SqlError::new("42712", format!("table name \"{target_name}\" specified more than once")));
        }
        let target_offset = rels.iter().map(|r| r.table.columns.len()).sum();
        let sources = rels.len();
        rels.push(Rel { name: target_name, table: table.clone(), offset: target_offset, source: None });
        let scope = Scope { rels, hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer: None };
        let source_scope = Scope {
            rels: scope.rels[..sources].to_vec(),
            hidden: Vec::new(),
            star: Vec::new(),
            merged: Vec::new(),
            outer: None,
        };
        let (on, t) = self.expr(&m.on, &scope, &mut ExprCtx::plain("JOIN conditions"))?;
        let on = self.boolean(on, t, "JOIN/ON")?;
        let target_rel = &scope.rels[sources..];
        let mut matched = Vec::new();
        let mut not_matched = Vec::new();
        for clause in &m.clauses {
            let is_matched = match clause.clause_kind {
                ast::MergeClauseKind::Matched => true,
                ast::MergeClauseKind::NotMatched => false,
                _ => return Err(SqlError::syntax(format!("syntax error at or near \"{}\"", clause.clause_kind))),
            };
            // NOT MATCHED sees the source only (its row has no target).
            let clause_scope = if is_matched { &scope } else { &source_scope };
            let condition = match &clause.predicate {
                Some(p) => {
                    let (b, t) = self
                        .expr(p, clause_scope, &mut ExprCtx::plain("MERGE WHEN"))
                        .map_err(|e| invalid_reference(e, target_rel))?;
                    Some(self.boolean(b, t, "WHEN")?)
                }
                None => None,
            };
            let action = match &clause.action {
                ast::MergeAction::Update(u) if u.assignments.is_empty() => MergeAction::Nothing,
                ast::MergeAction::Update(u) => MergeAction::Update(self.assignments(&u.assignments, &table, &scope)?),
                ast::MergeAction::Delete { .. } => MergeAction::Delete,
                ast::MergeAction::Insert(ins) => {
                    let targets = insert_targets(&table, &ins.columns)?;
                    let values = match &ins.kind {
                        ast::MergeInsertKind::Row if ins.columns.is_empty() => {
                            targets.iter().map(|&c| column_default(&table.columns[c])).collect::<Result<Vec<_>>>()?
                        }
                        ast::MergeInsertKind::Row => {
                            return Err(SqlError::syntax("syntax error at or near \"DEFAULT\""));
                        }
                        ast::MergeInsertKind::Values(v) => {
                            let [row] = v.rows.as_slice() else {
                                return Err(SqlError::syntax("syntax error at or near \",\""));
                            };
                            self.values_row(&table, &targets, row, !ins.columns.is_empty(), &source_scope)
                                .map_err(|e| invalid_reference(e, target_rel))?
                        }
                    };
                    let mut row: Vec<(usize, Expr)> = targets.into_iter().zip(values).collect();
                    row.extend(generated_defaults(&table, &row.iter().map(|(c, _)| *c).collect::<Vec<_>>())?);
                    MergeAction::Insert(row)
                }
            };
            let when = MergeWhen { condition, action };
            if is_matched { matched.push(when) } else { not_matched.push(when) }
        }
        let mut joins: Vec<JoinRel> =
            (0..sources).map(|_| JoinRel { left: false, right: false, full: false, on: Vec::new() }).collect();
        joins.push(JoinRel { left: true, right: false, full: false, on: vec![on.clone()] });
        let (levels, final_filters) =
            planner::plan_levels(self.catalog, &scope.rels, joins, Vec::new(), &mut self.indexes)?;
        let join = join_pipeline(levels, scope.width(), final_filters);
        let checks = self.table_checks(&table)?;
        let on = (!on.has_subquery()).then_some(on);
        Ok(Plan::Merge(Box::new(MergePlan { table, join, target_offset, on, matched, not_matched, checks })))
    }
}
