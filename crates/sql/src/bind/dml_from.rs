//! UPDATE ... FROM and DELETE ... USING: the target joined to other
//! relations, planned as a SELECT's FROM is (`bind_from`, the join
//! conditions, `planner::plan_levels`: index and hash joins). The target
//! is the first relation (the outer loop: a target row's joined rows come
//! together) unless a FROM item is a subquery or VALUES list: such a
//! level is evaluated again for each row of the levels before it, so then
//! it comes first and the target last, found by key (primary key, index
//! or hash) for each of its rows. Names resolve and `*` expands in the
//! order written either way (target first).

use sqlparser::ast;

use super::dml::writable;
use super::select::flatten_and;
use super::{Binder, ExprCtx, Rel, Scope};
use crate::error::Result;
use crate::expr::{CmpOp, Expr};
use crate::plan::{Access, ColumnMask, DeletePlan, DmlJoin, Level, Plan, SelectPlan, UpdatePlan, VirtualSource};
use crate::planner;

impl Binder<'_> {
    pub(super) fn update_from(&mut self, u: &ast::Update, from: &[ast::TableWithJoins]) -> Result<Plan> {
        let target = self.single_table(&u.table)?;
        let table = target.table.clone();
        writable(&table)?;
        let (scope, join) = self.target_join(target, from, u.selection.as_ref())?;
        let assignments = self.assignments(&u.assignments, &table, &scope)?;
        self.need_update(&table, u, &assignments);
        let (returning, columns) = self.returning_in(u.returning.as_deref(), &scope)?;
        let checks = self.update_checks(&table)?;
        let width = table.columns.len();
        refuse_triggers(self, &table, "UPDATE ... FROM")?;
        Ok(Plan::Update(UpdatePlan {
            triggers: crate::plan::TableTriggers::default(),
            level: join.join.levels[join.target_level].clone(),
            search_columns: ColumnMask::all(width),
            eval_columns: ColumnMask::all(width),
            assignments_have_subqueries: assignments.iter().any(|(_, e)| e.has_subquery()),
            filters_have_subqueries: join.recheck_skipped,
            assignments,
            returning,
            columns,
            checks,
            from: Some(Box::new(join)),
        }))
    }

    pub(super) fn delete_using(&mut self, d: &ast::Delete, target: Rel, using: &[ast::TableWithJoins]) -> Result<Plan> {
        let width = target.table.columns.len();
        refuse_triggers(self, &target.table, "DELETE ... USING")?;
        self.refuse_cascaded_triggers(&target.table)?;
        let (scope, join) = self.target_join(target, using, d.selection.as_ref())?;
        let (returning, columns) = self.returning_in(d.returning.as_deref(), &scope)?;
        Ok(Plan::Delete(DeletePlan {
            triggers: crate::plan::TableTriggers::default(),
            level: join.join.levels[join.target_level].clone(),
            search_columns: ColumnMask::all(width),
            returning,
            columns,
            from: Some(Box::new(join)),
        }))
    }

    /// The scope (target first, then the FROM items) and the planned join.
    fn target_join(
        &mut self,
        target: Rel,
        from: &[ast::TableWithJoins],
        selection: Option<&ast::Expr>,
    ) -> Result<(Scope<'static>, DmlJoin)> {
        let (mut rels, joins) = self.bind_from_after(Some(target), from, None)?;
        // Decided before any expression is bound over the joined row (its
        // positions depend on it). A table function's arguments were bound
        // with the target first: it keeps that layout.
        let virtual_query = rels[1..]
            .iter()
            .any(|r| matches!(r.source.as_deref(), Some(VirtualSource::Query(_) | VirtualSource::Correlated(_))));
        let function = rels[1..].iter().any(|r| matches!(r.source.as_deref(), Some(VirtualSource::Function { .. })));
        let target_last = virtual_query && !function;
        if target_last {
            let target_width = rels[0].table.columns.len();
            for r in &mut rels[1..] {
                r.offset -= target_width;
            }
            rels[0].offset = rels[1..].iter().map(|r| r.table.columns.len()).sum();
        }
        let width = rels.iter().map(|r| r.offset + r.table.columns.len()).max().unwrap_or(0);
        let mut scope = Scope { rels, hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer: None };
        let mut join_rels = self.join_conditions(&joins, &mut scope)?;
        let mut conjuncts = Vec::new();
        if let Some(w) = selection {
            let (b, t) = self.expr(w, &scope, &mut ExprCtx::plain("WHERE"))?;
            let b = self.boolean(b, t, "WHERE")?;
            flatten_and(b, &mut conjuncts);
        }
        // The planner takes the relations in join order (by offset).
        let mut plan_rels = scope.rels.clone();
        let target_level = if target_last {
            plan_rels.rotate_left(1);
            join_rels.rotate_left(1);
            plan_rels.len() - 1
        } else {
            0
        };
        let (levels, final_filters) =
            planner::plan_levels(self.catalog, &plan_rels, join_rels, conjuncts, &mut self.indexes)?;
        let (recheck, recheck_skipped) = recheck_predicates(&levels, target_level, &final_filters);
        let join = join_pipeline(levels, width, final_filters);
        Ok((scope, DmlJoin { join, target_level, recheck, recheck_skipped }))
    }
}

/// A SELECT pipeline that only joins: DML reads its joined rows.
pub(super) fn join_pipeline(levels: Vec<Level>, width: usize, final_filters: Vec<Expr>) -> SelectPlan {
    SelectPlan {
        levels,
        width,
        final_filters,
        agg: None,
        windows: Vec::new(),
        projection: Vec::new(),
        visible: 0,
        distinct: false,
        distinct_on: Vec::new(),
        order_by: Vec::new(),
        limit: None,
        with_ties: false,
        offset: None,
        for_update: false,
        columns: Vec::new(),
        point_lookup: false,
        projects_columns: false,
        index_ordered: false,
        // Empty: every column decoded (new rows and RETURNING read them).
        level_masks: Vec::new(),
    }
}

/// The join's predicates that read the target's columns: what
/// can change when the target row has a newer version. The key of a
/// primary-key lookup is written back as equalities; a left join's ON
/// conditions are not rechecked (the row would turn NULL-extended, which
/// the recheck cannot express). With a subquery among them: none, and
/// `true` (the row is written as the snapshot found it).
fn recheck_predicates(levels: &[Level], target_level: usize, finals: &[Expr]) -> (Vec<Expr>, bool) {
    let target = levels.get(target_level).map_or(0..0, |l| l.offset..l.offset + l.width());
    let mut all: Vec<Expr> = Vec::new();
    for level in levels {
        if let Access::PkLookup { key } = &level.access
            && !level.left_join
        {
            for (e, &c) in key.iter().zip(&level.table.primary_key) {
                all.push(Expr::Cmp(CmpOp::Eq, Expr::Column(level.offset + c).boxed(), e.clone().boxed()));
            }
        }
        if !level.left_join {
            all.extend(level.filters.iter().chain(&level.key_checks).cloned());
        }
        all.extend(level.post_filters.iter().cloned());
    }
    all.extend(finals.iter().cloned());
    all.retain(|e| {
        let mut reads = false;
        e.walk(&mut |x| {
            if matches!(x, Expr::Column(c) if target.contains(c)) {
                reads = true;
            }
        });
        reads || e.has_subquery()
    });
    if all.iter().any(Expr::has_subquery) {
        return (Vec::new(), true);
    }
    (all, false)
}

/// `what` (a write path that does not fire triggers yet) on a table with
/// triggers: 0A000, never a write that skips them.
pub(super) fn refuse_triggers(b: &Binder<'_>, table: &pgtier_engine::TableSchema, what: &str) -> Result<()> {
    if crate::catalog::triggers::triggers_of(b.catalog, &table.name).is_empty() {
        return Ok(());
    }
    Err(crate::error::SqlError::unsupported(format!("{what} on a table with triggers")))
}
