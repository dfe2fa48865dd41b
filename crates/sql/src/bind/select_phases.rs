//! The phases of one SELECT's binding, in the order `select_in_scope` runs
//! them: FROM, WHERE, the select list, GROUP BY, HAVING, ORDER BY,
//! DISTINCT ON, then aggregation and windows over what those bound.

use pgtier_engine::{DataType, Value};
use sqlparser::ast;

use super::aggregate::rewrite_post_agg;
use super::select::{
    EXPAND_ITEM, check_wildcard, column_label, expand_array_items, flatten_and, json_no_operator, negative_integer,
    non_integer_constant, ordinal, output_name_match, srf_select,
};
use super::window::resolve_window_refs;
use super::{Binder, ExprCtx, Scope, ident};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::plan::{AggCall, AggPlan, OutputColumn, SelectPlan, SortKey, WindowCall, WindowFunc};
use crate::planner::JoinRel;

/// The select list as bound so far: ORDER BY and DISTINCT ON append the
/// sort keys the list lacks after its `visible` columns.
pub(super) struct SelectList<'q> {
    pub(super) projection: Vec<Expr>,
    pub(super) columns: Vec<OutputColumn>,
    /// Each column's expression as written (None for `*`'s columns), which
    /// GROUP BY binds again when it names a position or an output column.
    item_asts: Vec<Option<&'q ast::Expr>>,
    pub(super) visible: usize,
}

/// The SELECT clauses of other dialects sqlparser reads.
pub(super) fn refuse_select_clauses(s: &ast::Select) -> Result<()> {
    if s.top.is_some()
        || s.into.is_some()
        || !s.lateral_views.is_empty()
        || s.prewhere.is_some()
        || !s.cluster_by.is_empty()
        || !s.distribute_by.is_empty()
        || !s.sort_by.is_empty()
        || s.qualify.is_some()
        || !s.connect_by.is_empty()
    {
        return Err(SqlError::unsupported("this SELECT clause"));
    }
    Ok(())
}

impl Binder<'_> {
    /// A SELECT whose set-returning select items are bound as another
    /// SELECT with them in FROM; None for every other SELECT.
    pub(super) fn rewritten_select(
        &mut self,
        s: &ast::Select,
        q: &ast::Query,
        outer: Option<&Scope<'_>>,
    ) -> Result<Option<SelectPlan>> {
        if let Some(rewritten) = srf_select(s) {
            return self.select(&rewritten, q, outer).map(Some);
        }
        let Some(rewritten) = expand_array_items(s)? else { return Ok(None) };
        // PostgreSQL aggregates before it expands the set-returning call
        // (the rewrite would aggregate its rows: refused, whether that
        // binds or fails on the rewritten item).
        let aggregated = || SqlError::unsupported("a set-returning function in the select list of an aggregated query");
        match self.select(&rewritten, q, outer) {
            Ok(plan) if plan.agg.is_some() || !plan.windows.is_empty() => Err(aggregated()),
            Err(e) if e.message.contains(EXPAND_ITEM) => Err(aggregated()),
            other => other.map(Some),
        }
    }

    /// FROM and its join conditions: the scope every later clause reads.
    pub(super) fn select_scope<'p>(
        &mut self,
        from: &[ast::TableWithJoins],
        outer: Option<&'p Scope<'p>>,
    ) -> Result<(Scope<'p>, Vec<JoinRel>)> {
        let (rels, joins) = self.bind_from(from, outer)?;
        let mut scope = Scope { rels, hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer };
        let join_rels = self.join_conditions(&joins, &mut scope)?;
        Ok((scope, join_rels))
    }

    /// WHERE as its AND-ed parts, which the planner places one by one.
    pub(super) fn where_clause(&mut self, selection: Option<&ast::Expr>, scope: &Scope<'_>) -> Result<Vec<Expr>> {
        let mut conjuncts = Vec::new();
        if let Some(w) = selection {
            let (b, t) = self.expr(w, scope, &mut ExprCtx::plain("WHERE"))?;
            let b = self.boolean(b, t, "WHERE")?;
            flatten_and(b, &mut conjuncts);
        }
        Ok(conjuncts)
    }

    /// The select list, its aggregate and window calls collected in `ctx`.
    pub(super) fn select_list<'q>(
        &mut self,
        items: &'q [ast::SelectItem],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<SelectList<'q>> {
        let mut list = SelectList { projection: Vec::new(), columns: Vec::new(), item_asts: Vec::new(), visible: 0 };
        for item in items {
            match item {
                ast::SelectItem::UnnamedExpr(e) => {
                    let (b, t) = self.expr(e, scope, ctx)?;
                    list.columns.push(OutputColumn { name: column_label(e), ty: t });
                    list.projection.push(b);
                    list.item_asts.push(Some(e));
                }
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    let (b, t) = self.expr(expr, scope, ctx)?;
                    list.columns.push(OutputColumn { name: ident(alias), ty: t });
                    list.projection.push(b);
                    list.item_asts.push(Some(expr));
                }
                ast::SelectItem::Wildcard(opts) => {
                    check_wildcard(opts)?;
                    if scope.rels.is_empty() {
                        return Err(SqlError::new("42601", "SELECT * with no tables specified is not valid"));
                    }
                    for (name, e, ty) in scope.star_items()? {
                        list.columns.push(OutputColumn { name, ty: Some(ty) });
                        list.projection.push(e);
                        list.item_asts.push(None);
                    }
                }
                ast::SelectItem::ExprWithAliases { .. } => return Err(SqlError::unsupported("multiple aliases")),
                ast::SelectItem::QualifiedWildcard(kind, opts) => {
                    check_wildcard(opts)?;
                    let ast::SelectItemQualifiedWildcardKind::ObjectName(name) = kind else {
                        return Err(SqlError::unsupported("expression.*"));
                    };
                    let r = scope.qualified(name)?;
                    for (i, c) in r.table.visible_columns().iter().enumerate() {
                        list.projection.push(Expr::Column(r.offset + i));
                        list.columns
                            .push(OutputColumn { name: c.name.clone(), ty: Some(super::user_type::readable(c.ty)?) });
                        list.item_asts.push(None);
                    }
                }
            }
        }
        list.visible = list.projection.len();
        Ok(list)
    }

    pub(super) fn group_by(
        &mut self,
        group_by: &ast::GroupByExpr,
        scope: &Scope<'_>,
        list: &SelectList<'_>,
    ) -> Result<Vec<Expr>> {
        let exprs = match group_by {
            ast::GroupByExpr::Expressions(exprs, mods) => {
                if !mods.is_empty() {
                    return Err(SqlError::unsupported("GROUP BY modifiers"));
                }
                exprs
            }
            ast::GroupByExpr::All(_) => return Err(SqlError::unsupported("GROUP BY ALL")),
        };
        exprs.iter().map(|e| self.group_by_item(e, scope, list)).collect()
    }

    /// One GROUP BY item: a position, an expression, or else the name of an
    /// output column.
    fn group_by_item(&mut self, e: &ast::Expr, scope: &Scope<'_>, list: &SelectList<'_>) -> Result<Expr> {
        if non_integer_constant(e) {
            return Err(SqlError::new("42601", "non-integer constant in GROUP BY"));
        }
        if let Some(n) = negative_integer(e) {
            return Err(SqlError::new("42P10", format!("GROUP BY position -{n} is not in select list")));
        }
        let bound = if let Some(pos) = ordinal(e) {
            let item = pos
                .checked_sub(1)
                .and_then(|i| list.item_asts.get(i).copied().flatten())
                .ok_or_else(|| SqlError::new("42P10", format!("GROUP BY position {pos} is not in select list")))?;
            self.expr(item, scope, &mut ExprCtx::plain("GROUP BY"))?
        } else {
            match self.expr(e, scope, &mut ExprCtx::plain("GROUP BY")) {
                Ok(bt) => bt,
                Err(err) if err.sqlstate == "42703" => {
                    let name = match e {
                        ast::Expr::Identifier(i) => ident(i),
                        _ => return Err(err),
                    };
                    let pos = list.columns.iter().position(|c| c.name == name).ok_or(err)?;
                    let item = list.item_asts[pos].ok_or_else(|| SqlError::unsupported("GROUP BY on *"))?;
                    self.expr(item, scope, &mut ExprCtx::plain("GROUP BY"))?
                }
                Err(err) => return Err(err),
            }
        };
        if bound.1 == Some(DataType::Json) {
            return Err(json_no_operator("equality"));
        }
        if bound.1.is_some_and(crate::value::types::is_text_search) {
            return Err(SqlError::unsupported("GROUP BY on tsvector or tsquery values"));
        }
        Ok(bound.0)
    }

    /// HAVING, where aggregates are allowed and window calls are not.
    pub(super) fn having(
        &mut self,
        having: Option<&ast::Expr>,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<Option<Expr>> {
        let Some(h) = having else { return Ok(None) };
        let windows = ctx.windows.take();
        ctx.clause = "HAVING";
        let bound = self.expr(h, scope, ctx);
        (ctx.windows, ctx.clause) = (windows, "");
        let (b, t) = bound?;
        Ok(Some(self.boolean(b, t, "HAVING")?))
    }

    /// ORDER BY: a position, an output column's name, or an expression
    /// (a select item it equals, else a hidden column after the visible).
    pub(super) fn order_by(
        &mut self,
        order_by: Option<&ast::OrderBy>,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
        list: &mut SelectList<'_>,
        distinct: bool,
    ) -> Result<Vec<SortKey>> {
        let Some(ob) = order_by else { return Ok(Vec::new()) };
        let ast::OrderByKind::Expressions(items) = &ob.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        if ob.interpolate.is_some() {
            return Err(SqlError::unsupported("INTERPOLATE"));
        }
        let visible = list.visible;
        let mut keys = Vec::new();
        for item in items {
            if item.with_fill.is_some() {
                return Err(SqlError::unsupported("WITH FILL"));
            }
            let desc = item.options.asc == Some(false);
            let nulls_first = item.options.nulls_first.unwrap_or(desc);
            let column = if let Some(pos) = ordinal(&item.expr) {
                if pos == 0 || pos > visible {
                    return Err(SqlError::new("42P10", format!("ORDER BY position {pos} is not in select list")));
                }
                pos - 1
            } else if let Some(pos) = output_name_match(&item.expr, &list.columns[..visible]) {
                pos
            } else {
                let (b, t) = self.expr(&item.expr, scope, ctx)?;
                match list.projection.iter().position(|p| *p == b) {
                    Some(p) => p,
                    None => {
                        if distinct {
                            return Err(SqlError::new(
                                "42P10",
                                "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                            ));
                        }
                        list.push_hidden(b, t)
                    }
                }
            };
            keys.push(SortKey { column, desc, nulls_first });
        }
        Ok(keys)
    }

    /// DISTINCT ON: its expressions are read like ORDER BY's (positions,
    /// output names, expressions); each column once.
    pub(super) fn distinct_on(
        &mut self,
        items: Option<&[ast::Expr]>,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
        list: &mut SelectList<'_>,
    ) -> Result<Vec<usize>> {
        let visible = list.visible;
        let mut distinct_on = Vec::new();
        for e in items.into_iter().flatten() {
            let column = if let Some(pos) = ordinal(e) {
                if pos == 0 || pos > visible {
                    return Err(SqlError::new(
                        "42P10",
                        format!("SELECT DISTINCT ON position {pos} is not in select list"),
                    ));
                }
                pos - 1
            } else if let Some(pos) = output_name_match(e, &list.columns[..visible]) {
                pos
            } else {
                let (b, t) = self.expr(e, scope, ctx)?;
                match list.projection.iter().position(|p| *p == b) {
                    Some(p) => p,
                    None => list.push_hidden(b, t),
                }
            };
            if !distinct_on.contains(&column) {
                distinct_on.push(column);
            }
        }
        Ok(distinct_on)
    }
}

impl SelectList<'_> {
    /// A sort key the select list lacks, as a column the client does not see.
    fn push_hidden(&mut self, e: Expr, ty: Option<DataType>) -> usize {
        self.projection.push(e);
        self.columns.push(OutputColumn { name: "?column?".into(), ty });
        self.projection.len() - 1
    }
}

/// DISTINCT ON's expressions must lead the ORDER BY (in any order).
pub(super) fn check_distinct_on_leads(distinct_on: &[usize], order_by: &[SortKey]) -> Result<()> {
    let mut unmatched = distinct_on.to_vec();
    for k in order_by {
        if unmatched.is_empty() {
            break;
        }
        let Some(i) = unmatched.iter().position(|c| *c == k.column) else {
            return Err(SqlError::new(
                "42P10",
                "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
            ));
        };
        unmatched.remove(i);
    }
    Ok(())
}

/// Aggregation, when the query has aggregates, GROUP BY or HAVING:
/// everything above it (the select list, the WINDOW clause's unused
/// entries, window calls, HAVING) rewritten onto the aggregate row.
pub(super) fn aggregate(
    group_by: Vec<Expr>,
    aggs: Vec<AggCall>,
    having: Option<Expr>,
    scope: &Scope<'_>,
    projection: &mut Vec<Expr>,
    unused_windows: Vec<Expr>,
    windows: &mut [WindowCall],
) -> Result<Option<AggPlan>> {
    if aggs.is_empty() && group_by.is_empty() && having.is_none() {
        return Ok(None);
    }
    let rewrite = |e: Expr| rewrite_post_agg(e, &group_by, scope);
    *projection = std::mem::take(projection).into_iter().map(rewrite).collect::<Result<Vec<_>>>()?;
    for e in unused_windows {
        rewrite(e)?;
    }
    for w in windows {
        rewrite_window_call(w, &rewrite)?;
    }
    let having = having.map(rewrite).transpose()?;
    Ok(Some(AggPlan { group_by, aggs, having }))
}

/// One window call's partition, order and arguments onto the aggregate row.
fn rewrite_window_call(w: &mut WindowCall, rewrite: &dyn Fn(Expr) -> Result<Expr>) -> Result<()> {
    let take = |e: &mut Expr| std::mem::replace(e, Expr::Const(Value::Null));
    w.partition = std::mem::take(&mut w.partition).into_iter().map(rewrite).collect::<Result<Vec<_>>>()?;
    w.order = std::mem::take(&mut w.order)
        .into_iter()
        .map(|(e, d, n)| rewrite(e).map(|e| (e, d, n)))
        .collect::<Result<Vec<_>>>()?;
    match &mut w.func {
        WindowFunc::Agg(call) => {
            call.arg = call.arg.take().map(rewrite).transpose()?;
            call.filter = call.filter.take().map(rewrite).transpose()?;
        }
        WindowFunc::Ntile(e) | WindowFunc::FirstValue(e) | WindowFunc::LastValue(e) => *e = rewrite(take(e))?,
        WindowFunc::NthValue(e, n) => {
            *e = rewrite(take(e))?;
            *n = rewrite(take(n))?;
        }
        WindowFunc::Shift { value, offset, default, .. } => {
            *value = rewrite(take(value))?;
            *offset = offset.take().map(rewrite).transpose()?;
            *default = default.take().map(rewrite).transpose()?;
        }
        WindowFunc::RowNumber
        | WindowFunc::Rank
        | WindowFunc::DenseRank
        | WindowFunc::PercentRank
        | WindowFunc::CumeDist => {}
    }
    Ok(())
}

/// Window values follow the input row's own columns (the joined row's, or
/// the aggregate row's): the select list's window references become those
/// columns.
pub(super) fn window_inputs(
    windows: &[WindowCall],
    agg: Option<&AggPlan>,
    scope: &Scope<'_>,
    projection: &mut Vec<Expr>,
) -> Result<()> {
    if windows.is_empty() {
        return Ok(());
    }
    let input_width = match agg {
        Some(a) => a.group_by.len() + a.aggs.len(),
        None => scope.width(),
    };
    let to_column = |e: Expr| resolve_window_refs(e, input_width);
    *projection = std::mem::take(projection).into_iter().map(to_column).collect::<Result<Vec<_>>>()?;
    Ok(())
}

/// json has no equality or ordering operator: it can be neither a sort key
/// nor a DISTINCT one.
pub(super) fn check_json_operators(
    list: &SelectList<'_>,
    distinct: bool,
    distinct_on: &[usize],
    order_by: &[SortKey],
) -> Result<()> {
    let columns = &list.columns;
    let text_search = |c: usize| columns[c].ty.is_some_and(crate::value::types::is_text_search);
    if order_by.iter().any(|k| text_search(k.column))
        || (distinct && (0..list.visible).any(text_search))
        || distinct_on.iter().any(|&c| text_search(c))
    {
        return Err(SqlError::unsupported("sorting or DISTINCT on tsvector or tsquery values"));
    }
    if order_by.iter().any(|k| columns[k.column].ty == Some(DataType::Json)) {
        return Err(json_no_operator("ordering"));
    }
    if (distinct && columns[..list.visible].iter().any(|c| c.ty == Some(DataType::Json)))
        || distinct_on.iter().any(|&c| columns[c].ty == Some(DataType::Json))
    {
        return Err(json_no_operator("equality"));
    }
    Ok(())
}
