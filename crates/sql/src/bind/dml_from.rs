//! UPDATE ... FROM and DELETE ... USING: the target joined to other
//! relations, planned as a SELECT's FROM is (`bind_from`, the join
//! conditions, `planner::plan_levels`: index and hash joins), with the
//! target as the first relation.

use sqlparser::ast;

use super::dml::writable;
use super::select::flatten_and;
use super::{Binder, ExprCtx, Rel, Scope};
use crate::error::Result;
use crate::expr::{CmpOp, Expr};
use crate::plan::{Access, ColumnMask, DeletePlan, DmlJoin, Level, Plan, SelectPlan, UpdatePlan};
use crate::planner;

impl Binder<'_> {
    pub(super) fn update_from(&mut self, u: &ast::Update, from: &[ast::TableWithJoins]) -> Result<Plan> {
        let target = self.single_table(&u.table)?;
        let table = target.table.clone();
        writable(&table)?;
        let (scope, join) = self.target_join(target, from, u.selection.as_ref())?;
        let assignments = self.assignments(&u.assignments, &table, &scope)?;
        let (returning, columns) = self.returning_in(u.returning.as_deref(), &scope)?;
        let checks = self.table_checks(&table)?;
        let width = table.columns.len();
        Ok(Plan::Update(UpdatePlan {
            level: join.join.levels[0].clone(),
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
        let (scope, join) = self.target_join(target, using, d.selection.as_ref())?;
        let (returning, columns) = self.returning_in(d.returning.as_deref(), &scope)?;
        Ok(Plan::Delete(DeletePlan { level: join.join.levels[0].clone(), search_columns: ColumnMask::all(width), returning, columns, from: Some(Box::new(join)) }))
    }

    /// The scope (target first, then the FROM items) and the planned join.
    fn target_join(&mut self, target: Rel, from: &[ast::TableWithJoins], selection: Option<&ast::Expr>) -> Result<(Scope<'static>, DmlJoin)> {
        let (rels, joins) = self.bind_from_after(Some(target), from, None)?;
        let mut scope = Scope { rels, hidden: Vec::new(), outer: None };
        let join_rels = self.join_conditions(&joins, &mut scope)?;
        let mut conjuncts = Vec::new();
        if let Some(w) = selection {
            let (b, t) = self.expr(w, &scope, &mut ExprCtx::plain("WHERE"))?;
            let b = self.boolean(b, t, "WHERE")?;
            flatten_and(b, &mut conjuncts);
        }
        let (levels, final_filters) = planner::plan_levels(self.catalog, &scope.rels, join_rels, conjuncts, &mut self.indexes)?;
        let (recheck, recheck_skipped) = recheck_predicates(&levels, &final_filters);
        let join = join_pipeline(levels, scope.width(), final_filters);
        Ok((scope, DmlJoin { join, recheck, recheck_skipped }))
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
        offset: None,
        for_update: false,
        columns: Vec::new(),
        point_lookup: false,
        projects_columns: false,
        // Empty: every column decoded (new rows and RETURNING read them).
        level_masks: Vec::new(),
    }
}

/// The join's predicates that read the target's columns (level 0): what
/// can change when the target row has a newer version. The key of a
/// primary-key lookup is written back as equalities; a left join's ON
/// conditions are not rechecked (the row would turn NULL-extended, which
/// the recheck cannot express). With a subquery among them: none, and
/// `true` (the row is written as the snapshot found it).
fn recheck_predicates(levels: &[Level], finals: &[Expr]) -> (Vec<Expr>, bool) {
    let target_width = levels.first().map_or(0, Level::width);
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
            if matches!(x, Expr::Column(c) if *c < target_width) {
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
