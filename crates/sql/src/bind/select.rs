//! SELECT: WITH, the select list, WHERE, GROUP BY / HAVING, ORDER BY,
//! DISTINCT [ON], LIMIT / OFFSET and FOR UPDATE.

use pgtier_engine::{DataType, Value};
use sqlparser::ast;

use super::function::function_name;
use super::select_phases::{
    aggregate, check_distinct_on_leads, check_json_operators, refuse_select_clauses, window_inputs,
};
use super::{Binder, CteDef, ExprCtx, Rel, Scope, ident};
use crate::error::{Result, SqlError};
use crate::expr::{CmpOp, Expr};
use crate::plan::{Access, OutputColumn, SelectPlan};
use crate::planner::{self, JoinRel};

impl Binder<'_> {
    pub(super) fn query(&mut self, q: &ast::Query, outer: Option<&Scope<'_>>) -> Result<SelectPlan> {
        let Some(with) = &q.with else { return self.query_body(q, outer) };
        let readers = ast::Query { with: None, ..q.clone() }.to_string();
        self.with_scope(with, &readers, |b| b.query_body(q, outer))
    }

    /// Binds `body` (a query, or the INSERT / UPDATE / DELETE after a WITH)
    /// with `with`'s queries in scope. `readers` is the text of what reads
    /// them besides each other.
    pub(super) fn with_scope<T>(
        &mut self,
        with: &ast::With,
        readers: &str,
        body: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        if let Some(f) = &self.function {
            // A WITH query's rows are kept per statement by id: a body's
            // would be kept across calls with other arguments.
            let body = if f.plpgsql { "a PL/pgSQL function" } else { "a SQL function body" };
            return Err(SqlError::unsupported(format!("WITH in {body}")));
        }
        let top = self.top_with == std::ptr::from_ref(with) as usize;
        super::modifying::check_placement(with, top, self.top_with != 0)?;
        if top {
            self.top_with = 1;
        }
        let modifying = with.cte_tables.iter().any(super::modifying::is_modifying);
        let base = self.ctes.len();
        let all_readers = with
            .cte_tables
            .iter()
            .fold(readers.to_lowercase(), |text, c| text + " " + &c.query.to_string().to_lowercase());
        for cte in &with.cte_tables {
            let name = ident(&cte.alias.name);
            if self.ctes[base..].iter().any(|c| c.name == name) {
                self.ctes.truncate(base);
                return Err(SqlError::new("42712", format!("WITH query name \"{name}\" specified more than once")));
            }
            let id = self.shared_ctes;
            self.shared_ctes += 1;
            let named_twice = word_count(&all_readers, &name) > 1;
            self.ctes.push(CteDef {
                name,
                cte: cte.clone(),
                id,
                uses: 0,
                named_twice,
                shared: false,
                recursive: with.recursive,
                self_ref: super::recursive::SelfRef::Hidden,
                modifying: super::modifying::is_modifying(cte).then_some(super::modifying::State::Pending),
            });
        }
        // The data-modifying queries bind first, each with what it reads
        // (they run before the rest, in the order they finish binding).
        let outer_touched = std::mem::take(&mut self.touched);
        let pending: Vec<usize> = (base..self.ctes.len()).filter(|&k| self.ctes[k].modifying.is_some()).collect();
        let bound = pending.into_iter().try_for_each(|k| self.bind_modifying(k));
        let plan = bound.and_then(|()| body(self)).and_then(|plan| {
            // PostgreSQL binds every WITH query, referenced or not: its
            // errors are the statement's (it runs only when read).
            for k in base..self.ctes.len() {
                if self.ctes[k].uses == 0 {
                    self.cte_source(k)?;
                }
            }
            Ok(plan)
        });
        let defs = self.ctes.split_off(base);
        let primary = std::mem::replace(&mut self.touched, outer_touched);
        let plan = plan?;
        if modifying {
            self.check_parts(&primary)?;
        }
        // A nested WITH's reads are the enclosing part's.
        self.touched.merge(primary);
        // The readers: the statement without its WITH clause, and the WITH
        // queries' own texts (one may read another).
        let readers =
            defs.iter().fold(readers.to_lowercase(), |text, d| text + " " + &d.cte.query.to_string().to_lowercase());
        for d in defs.iter() {
            // A data-modifying query runs to its end, read or not.
            if d.modifying.is_none() && advances_sequence(&d.cte) && may_stop_early(&readers) {
                return Err(SqlError::unsupported(format!(
                    "WITH query \"{}\" that advances a sequence, in a statement that may stop reading it early",
                    d.name
                )));
            }
        }
        Ok(plan)
    }

    /// SELECT ... INTO name FROM ...: CREATE TABLE name AS the query without INTO.
    pub(super) fn select_into(&mut self, q: &ast::Query, s: &ast::Select) -> Result<crate::plan::Plan> {
        let Some(into) = &s.into else { return Err(SqlError::new("XX000", "SELECT INTO without INTO")) };
        if into.unlogged {
            return Err(SqlError::unsupported("SELECT INTO UNLOGGED"));
        }
        let mut plain = s.clone();
        plain.into = None;
        let mut query = q.clone();
        *query.body = ast::SetExpr::Select(Box::new(plain));
        if into.temporary {
            let create = self.table_as(self.new_temp_key(&into.name)?, &[], &query, false)?;
            return Ok(crate::plan::Plan::CreateTemp {
                create: Box::new(create),
                on_commit: crate::plan::OnCommit::PreserveRows,
            });
        }
        let key = self.new_relation_key(&into.name)?;
        self.table_as(key, &[], &query, false)
    }

    /// The query apart from its WITH clause.
    fn query_body(&mut self, q: &ast::Query, outer: Option<&Scope<'_>>) -> Result<SelectPlan> {
        if let Some(fetch) = &q.fetch {
            check_fetch(fetch, q)?;
        }
        if q.for_clause.is_some() || q.settings.is_some() || q.format_clause.is_some() || !q.pipe_operators.is_empty() {
            return Err(SqlError::unsupported("FETCH/FOR/SETTINGS clause"));
        }
        let select = match q.body.as_ref() {
            ast::SetExpr::Select(s) => s,
            ast::SetExpr::SetOperation { .. } | ast::SetExpr::Values(_) => return self.set_query(q, outer),
            ast::SetExpr::Query(inner)
                if q.order_by.is_none() && q.limit_clause.is_none() && q.fetch.is_none() && q.locks.is_empty() =>
            {
                return self.query(inner, outer);
            }
            // PostgreSQL runs a data-modifying WITH query once, to its end,
            // and the rest of the statement reads the tables as they were
            // before it: pgtier does neither yet, so it is refused rather
            // than run per reference or not at all.
            ast::SetExpr::Insert(_) | ast::SetExpr::Update(_) | ast::SetExpr::Delete(_) | ast::SetExpr::Merge(_)
                if q.with.is_none() =>
            {
                return Err(SqlError::unsupported("data-modifying statement in WITH"));
            }
            ast::SetExpr::Insert(_) | ast::SetExpr::Update(_) | ast::SetExpr::Delete(_) | ast::SetExpr::Merge(_) => {
                return Err(SqlError::unsupported("WITH before INSERT, UPDATE, DELETE or MERGE"));
            }
            _ => return Err(SqlError::unsupported("this query form")),
        };
        self.select(select, q, outer)
    }

    /// A SELECT with its WINDOW clause in scope for its window calls only
    /// (a subquery's calls see its own).
    pub(super) fn select(&mut self, s: &ast::Select, q: &ast::Query, outer: Option<&Scope<'_>>) -> Result<SelectPlan> {
        let named = self.named_windows(&s.named_window)?;
        let outer_windows = std::mem::replace(&mut self.named_windows, named);
        let plan = self.select_in_scope(s, q, outer);
        self.named_windows = outer_windows;
        plan
    }

    /// One SELECT, bound phase by phase as transformSelectStmt does, in the
    /// order that decides which error a statement with two faults gets.
    fn select_in_scope(&mut self, s: &ast::Select, q: &ast::Query, outer: Option<&Scope<'_>>) -> Result<SelectPlan> {
        refuse_select_clauses(s)?;
        if let Some(plan) = self.rewritten_select(s, q, outer)? {
            return Ok(plan);
        }
        let (distinct, distinct_on_items) = match &s.distinct {
            None | Some(ast::Distinct::All) => (false, None),
            Some(ast::Distinct::Distinct) => (true, None),
            Some(ast::Distinct::On(items)) => (false, Some(items.as_slice())),
        };
        let (scope, join_rels) = self.select_scope(&s.from, outer)?;
        let mut where_conjuncts = self.where_clause(s.selection.as_ref(), &scope)?;
        let mut ctx = ExprCtx { aggs: Some(Vec::new()), windows: Some(Vec::new()), clause: "", in_agg: false };
        let mut list = self.select_list(&s.projection, &scope, &mut ctx)?;
        let group_by = self.group_by(&s.group_by, &scope, &list)?;
        let having = self.having(s.having.as_ref(), &scope, &mut ctx)?;
        let order_by = self.order_by(q.order_by.as_ref(), &scope, &mut ctx, &mut list, distinct)?;
        let distinct_on = self.distinct_on(distinct_on_items, &scope, &mut ctx, &mut list)?;
        check_distinct_on_leads(&distinct_on, &order_by)?;
        // WINDOW clause entries no call names are bound all the same (their
        // errors are PostgreSQL's), then dropped.
        let unused_windows = self.unused_windows(&scope, &mut ctx)?;
        let aggs = ctx.aggs.take().unwrap_or_default();
        let mut windows = ctx.windows.take().unwrap_or_default();
        let agg = aggregate(group_by, aggs, having, &scope, &mut list.projection, unused_windows, &mut windows)?;
        window_inputs(&windows, agg.as_ref(), &scope, &mut list.projection)?;
        let (limit, offset) = self.limit_offset(q)?;
        if !windows.is_empty() && !q.locks.is_empty() {
            return Err(SqlError::new("0A000", "FOR UPDATE is not allowed with window functions"));
        }
        check_json_operators(&list, distinct, &distinct_on, &order_by)?;
        let for_update = self.locks(q, &scope, agg.is_some() || distinct || !distinct_on.is_empty())?;
        // HAVING without aggregates or GROUP BY is one group whatever the
        // input (is_degenerate_grouping): PostgreSQL never evaluates WHERE
        // then, so a 1/0 there raises nothing.
        if agg.as_ref().is_some_and(|a| a.aggs.is_empty() && a.group_by.is_empty()) {
            where_conjuncts.clear();
        }
        // Rows locked FOR UPDATE are locked in the order read: keep it.
        let (rels, join_rels, where_conjuncts) = if !for_update {
            planner::join_order(self.rows, scope.rels.clone(), join_rels, where_conjuncts)
        } else {
            (scope.rels.clone(), join_rels, where_conjuncts)
        };
        let (levels, final_filters) =
            planner::plan_levels(self.catalog, &rels, join_rels, where_conjuncts, &mut self.indexes)?;
        let mut plan = SelectPlan {
            levels,
            width: scope.width(),
            final_filters,
            agg,
            windows,
            projection: list.projection,
            visible: list.visible,
            distinct,
            distinct_on,
            order_by,
            limit,
            with_ties: q.fetch.as_ref().is_some_and(|f| f.with_ties),
            offset,
            for_update,
            columns: list.columns,
            point_lookup: false,
            projects_columns: false,
            index_ordered: false,
            level_masks: Vec::new(),
        }
        .decide_point_lookup();
        plan.index_ordered = index_order(&plan, self.catalog);
        Ok(plan)
    }

    /// The join conditions of `joins` (from [`Binder::bind_from`]), one
    /// [`JoinRel`] per relation of `scope`. Each condition sees the
    /// relations of its chain joined so far (not those before a comma:
    /// 42P01 as in PostgreSQL). USING and NATURAL merge each named column
    /// pair into the left one: `*` lists the merged columns first, then the
    /// rest of the left side, then of the right (`Scope::star`), and an
    /// unqualified name finds the left column (the right one is `hidden`).
    pub(super) fn join_conditions(
        &mut self,
        joins: &[super::from::JoinSpec],
        scope: &mut Scope<'_>,
    ) -> Result<Vec<JoinRel>> {
        let mut join_rels = Vec::new();
        // `*`'s order so far; the current chain's columns from `chain_start`.
        let mut star: Vec<usize> = Vec::new();
        let mut chain_start = 0;
        let mut merged_any = false;
        for (level, spec) in joins.iter().enumerate() {
            let right = &scope.rels[level];
            let right_cols: Vec<usize> = (0..right.table.visible_columns().len()).map(|i| right.offset + i).collect();
            if spec.chain == level {
                chain_start = star.len();
            }
            let mut on = Vec::new();
            for (first, e) in spec.on.iter().map(|e| (spec.chain, e)).chain(spec.inner_on.iter().map(|(f, e)| (*f, e)))
            {
                on.push(self.join_on(e, scope, first, level)?);
            }
            let names: Vec<(usize, String)> = star[chain_start..]
                .iter()
                .chain(&right_cols)
                .map(|&p| (p, scope.column_at(p).map_or(String::new(), |c| c.name.clone())))
                .collect();
            let name_at = |pos: usize| names.iter().find(|(p, _)| *p == pos).map_or("", |(_, n)| n.as_str());
            let using: Vec<String> = if spec.natural {
                // The common names, in the left side's order.
                star[chain_start..]
                    .iter()
                    .map(|&p| name_at(p).to_owned())
                    .filter(|n| right_cols.iter().any(|&p| name_at(p) == n))
                    .collect()
            } else {
                spec.using.clone()
            };
            let mut merged_left = Vec::new();
            let mut merged_right = Vec::new();
            let mut merged = Vec::new();
            let mut hide = Vec::new();
            for col in &using {
                let on_right: Vec<usize> = right_cols.iter().copied().filter(|&p| name_at(p) == col).collect();
                let on_left: Vec<usize> = star[chain_start..].iter().copied().filter(|&p| name_at(p) == col).collect();
                let (&[rpos], &[lpos]) = (on_right.as_slice(), on_left.as_slice()) else {
                    return Err(match (on_left.len(), on_right.len()) {
                        (0, _) => SqlError::new(
                            "42703",
                            format!("column \"{col}\" specified in USING clause does not exist in left table"),
                        ),
                        (1, 0) => SqlError::new(
                            "42703",
                            format!("column \"{col}\" specified in USING clause does not exist in right table"),
                        ),
                        (1, _) => SqlError::new(
                            "42702",
                            format!("common column name \"{col}\" appears more than once in right table"),
                        ),
                        _ => SqlError::new(
                            "42702",
                            format!("common column name \"{col}\" appears more than once in left table"),
                        ),
                    });
                };
                if merged_left.contains(&lpos) {
                    return Err(SqlError::new(
                        "42701",
                        format!("column name \"{col}\" appears more than once in USING clause"),
                    ));
                }
                // A RIGHT JOIN's merged column is the right one: the left may be NULL.
                let (kept, other) = if spec.right { (rpos, lpos) } else { (lpos, rpos) };
                if spec.full {
                    let (e, ty) = self.full_merged_column(scope, lpos, rpos)?;
                    scope.merged.push((kept, e, ty));
                } else if let Some((e, ty)) = self.merged_column(scope, kept, other)? {
                    scope.merged.push((kept, e, ty));
                }
                on.push(Expr::Cmp(CmpOp::Eq, Expr::Column(lpos).boxed(), Expr::Column(rpos).boxed()));
                merged_left.push(lpos);
                merged_right.push(rpos);
                merged.push(kept);
                hide.push(other);
            }
            scope.hidden.extend(hide);
            if !merged.is_empty() {
                merged_any = true;
                let rest: Vec<usize> =
                    star[chain_start..].iter().copied().filter(|p| !merged_left.contains(p)).collect();
                star.truncate(chain_start);
                star.extend(merged);
                star.extend(rest);
            }
            star.extend(right_cols.into_iter().filter(|p| !merged_right.contains(p)));
            join_rels.push(JoinRel { left: spec.left, right: spec.right, full: spec.full, on });
        }
        if merged_any {
            scope.star = star;
        }
        Ok(join_rels)
    }

    /// A join condition, which sees the relations from `first` to `level`
    /// (a reference to one before them is 42P01, as in PostgreSQL).
    fn join_on(&mut self, e: &ast::Expr, scope: &Scope<'_>, first: usize, level: usize) -> Result<Expr> {
        let prefix = Scope {
            rels: scope.rels[first..=level].to_vec(),
            hidden: Vec::new(),
            star: Vec::new(),
            merged: Vec::new(),
            outer: scope.outer,
        };
        let (b, t) = self
            .expr(e, &prefix, &mut ExprCtx::plain("JOIN conditions"))
            .map_err(|err| invalid_reference(err, &scope.rels[..first]))?;
        self.boolean(b, t, "JOIN/ON")
    }

    /// A FULL JOIN's merged USING column: COALESCE(left, right) in the
    /// pair's common type, since either side may be the NULL-extended one.
    fn full_merged_column(&mut self, scope: &Scope<'_>, left: usize, right: usize) -> Result<(Expr, DataType)> {
        let (Some(l), Some(r)) = (scope.column_at(left), scope.column_at(right)) else {
            return Err(SqlError::new("XX000", "a USING column outside the joined row"));
        };
        let (left_ty, right_ty) = (l.ty, r.ty);
        let (left_e, ty) = match self.merged_column(scope, left, right)? {
            Some(converted) => converted,
            None => (Expr::Column(left), left_ty),
        };
        // text and varchar values are the same strings; a character(n)
        // value converts (its padding goes), as every other type does.
        let right_e = if same_base_type(right_ty, ty) || (text_like(right_ty) && text_like(ty)) {
            Expr::Column(right)
        } else {
            self.result_cast(Expr::Column(right), Some(right_ty), Some(ty))?
        };
        Ok((Expr::Coalesce(vec![left_e, right_e]), ty))
    }

    /// A merged USING column is the `kept` one (the left, or a RIGHT
    /// JOIN's right) converted to the pair's common type: None when that
    /// is the kept column's own type (up to its length or precision, which
    /// the conversion would not change), else the conversion and the type.
    fn merged_column(&mut self, scope: &Scope<'_>, kept: usize, other: usize) -> Result<Option<(Expr, DataType)>> {
        let (Some(k), Some(o)) = (scope.column_at(kept), scope.column_at(other)) else { return Ok(None) };
        let (kept_ty, other_ty) = (k.ty, o.ty);
        // PostgreSQL keeps the first of two string types that convert to
        // each other implicitly (select_common_type): a text or varchar
        // kept column stays as it is.
        if same_base_type(kept_ty, other_ty)
            || (text_like(kept_ty) && (text_like(other_ty) || matches!(other_ty, DataType::Char(_))))
        {
            return Ok(None);
        }
        let Some(common) = super::coerce::common_type(&[Some(kept_ty), Some(other_ty)], "JOIN/USING")? else {
            return Ok(None);
        };
        if same_base_type(common, kept_ty) {
            return Ok(None);
        }
        Ok(Some((self.result_cast(Expr::Column(kept), Some(kept_ty), Some(common))?, common)))
    }

    pub(super) fn limit_offset(&mut self, q: &ast::Query) -> Result<(Option<Expr>, Option<Expr>)> {
        let scope = Scope::default();
        let bind = |b: &mut Self, e: &ast::Expr, what: &'static str| -> Result<Option<Expr>> {
            if matches!(e, ast::Expr::Value(v) if matches!(v.value, ast::Value::Null)) {
                return Ok(None);
            }
            let (x, t) = b.expr(e, &scope, &mut ExprCtx::plain(what))?;
            Ok(Some(b.coerce(x, t, DataType::Int8, what)?))
        };
        // FETCH FIRST [n] ROWS ONLY is LIMIT n (n defaults to 1); the
        // parser takes it with LIMIT, which PostgreSQL's grammar does not.
        if let Some(fetch) = &q.fetch {
            let limit = match &fetch.quantity {
                Some(n) => bind(self, n, "LIMIT")?,
                None => Some(Expr::Const(Value::Int8(1))),
            };
            return match &q.limit_clause {
                None => Ok((limit, None)),
                Some(ast::LimitClause::LimitOffset { limit: None, offset, limit_by }) if limit_by.is_empty() => {
                    let o = match offset {
                        Some(o) => bind(self, &o.value, "OFFSET")?,
                        None => None,
                    };
                    Ok((limit, o))
                }
                Some(_) => Err(SqlError::new("42601", "multiple LIMIT clauses not allowed")),
            };
        }
        match &q.limit_clause {
            None => Ok((None, None)),
            Some(ast::LimitClause::LimitOffset { limit, offset, limit_by }) => {
                if !limit_by.is_empty() {
                    return Err(SqlError::unsupported("LIMIT BY"));
                }
                let l = match limit {
                    Some(e) => bind(self, e, "LIMIT")?,
                    None => None,
                };
                let o = match offset {
                    Some(o) => bind(self, &o.value, "OFFSET")?,
                    None => None,
                };
                Ok((l, o))
            }
            Some(ast::LimitClause::OffsetCommaLimit { .. }) => Err(SqlError::unsupported("LIMIT offset, count")),
        }
    }

    fn locks(&mut self, q: &ast::Query, scope: &Scope<'_>, aggregated: bool) -> Result<bool> {
        if q.locks.is_empty() {
            return Ok(false);
        }
        for l in &q.locks {
            if l.nonblock.is_some() {
                return Err(SqlError::unsupported("NOWAIT / SKIP LOCKED"));
            }
            if !matches!(l.lock_type, ast::LockType::Update) {
                return Err(SqlError::unsupported(format!("FOR {}", l.lock_type)));
            }
        }
        if aggregated {
            return Err(SqlError::new("0A000", "FOR UPDATE is not allowed with aggregate functions"));
        }
        if scope.rels.len() != 1 {
            return Err(SqlError::unsupported("SELECT FOR UPDATE over more than one table"));
        }
        if scope.rels[0].source.is_some() {
            return Err(SqlError::unsupported("FOR UPDATE on a system catalog, subquery or function"));
        }
        // PostgreSQL: locking rows needs UPDATE besides SELECT.
        let table = std::sync::Arc::clone(&scope.rels[0].table);
        self.need(&table, crate::catalog::roles::Privs::UPDATE);
        Ok(true)
    }
}

/// One type up to its length, precision or scale (a conversion between
/// them leaves a value as it is); arrays only of one element type.
/// Whether `plan`'s ORDER BY is the order its one IndexScan level visits
/// rows in (the engine's scans go in key order), so nothing needs sorting
/// ([`SelectPlan::index_ordered`]): every sort key ascending, NULLS LAST,
/// a plain column of that level, and past the columns the index's
/// equality prefix fixes, the index's next columns in index order. Only
/// NOT NULL columns of integer, date and timestamp types, whose index key
/// order is their sort order with no NULL to place. Nothing between the
/// scan and the ORDER BY may change the order or need every row.
fn index_order(plan: &SelectPlan, catalog: &pgtier_engine::Catalog) -> bool {
    let [level] = plan.levels.as_slice() else { return false };
    let Access::IndexScan { index, eq, .. } = &level.access else { return false };
    if plan.order_by.is_empty()
        || plan.agg.is_some()
        || !plan.windows.is_empty()
        || plan.distinct
        || !plan.distinct_on.is_empty()
        || plan.with_ties
        || plan.for_update
    {
        return false;
    }
    let Some(index) = catalog.index(*index) else { return false };
    let fixed = &index.columns[..eq.len().min(index.columns.len())];
    let mut next = eq.len();
    for key in &plan.order_by {
        if key.desc || key.nulls_first {
            return false;
        }
        let Some(Expr::Column(c)) = plan.projection.get(key.column) else { return false };
        let Some(col) = c.checked_sub(level.offset).filter(|&c| c < level.width()) else { return false };
        if fixed.contains(&col) {
            continue;
        }
        let column = &level.table.columns[col];
        let sortable = matches!(
            column.ty,
            DataType::Int2 | DataType::Int4 | DataType::Int8 | DataType::Date | DataType::Timestamp(_)
        );
        if index.columns.get(next) != Some(&col) || column.nullable || !sortable {
            return false;
        }
        next += 1;
    }
    true
}

fn same_base_type(a: DataType, b: DataType) -> bool {
    std::mem::discriminant(&a) == std::mem::discriminant(&b) && (!matches!(a, DataType::Array(_)) || a == b)
}

/// text and varchar: the same strings whichever of the two a value is.
fn text_like(t: DataType) -> bool {
    matches!(t, DataType::Text | DataType::Varchar(_))
}

pub(super) use crate::planner::flatten_and;

pub(super) fn ordinal(e: &ast::Expr) -> Option<usize> {
    // Signs fold into the constant: -(-2) is position 2.
    match signed_number(e) {
        Some((false, n)) => n.parse().ok(),
        _ => None,
    }
}

/// A literal PostgreSQL's grammar keeps as a constant (A_Const) that is not
/// an integer: a string, decimal, boolean or NULL, also signed or in
/// parentheses. GROUP BY refuses it (an integer would be a position).
pub(super) fn non_integer_constant(e: &ast::Expr) -> bool {
    if let Some((_, n)) = signed_number(e) {
        return !n.bytes().all(|b| b.is_ascii_digit());
    }
    let mut e = e;
    while let ast::Expr::Nested(inner) = e {
        e = inner;
    }
    matches!(e, ast::Expr::Value(v) if matches!(&v.value, ast::Value::SingleQuotedString(_) | ast::Value::Boolean(_) | ast::Value::Null))
}

/// `-5`, `(-5)`, `-((-5))`: PostgreSQL's grammar folds signs into the
/// constant, so GROUP BY takes a negative integer as a position (and
/// refuses it).
pub(super) fn negative_integer(e: &ast::Expr) -> Option<&str> {
    match signed_number(e) {
        Some((true, n)) if n.bytes().all(|b| b.is_ascii_digit()) => Some(n),
        _ => None,
    }
}

/// A number under any parentheses and signs: (negative, digits).
fn signed_number(e: &ast::Expr) -> Option<(bool, &str)> {
    match e {
        ast::Expr::Nested(inner) => signed_number(inner),
        ast::Expr::UnaryOp { op: ast::UnaryOperator::Minus, expr } => signed_number(expr).map(|(neg, n)| (!neg, n)),
        ast::Expr::UnaryOp { op: ast::UnaryOperator::Plus, expr } => signed_number(expr),
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => Some((false, n.as_str())),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn output_name_match(e: &ast::Expr, columns: &[OutputColumn]) -> Option<usize> {
    let ast::Expr::Identifier(i) = e else { return None };
    let n = ident(i);
    let mut hits = columns.iter().enumerate().filter(|(_, c)| c.name == n);
    let first = hits.next()?.0;
    if hits.next().is_some() { None } else { Some(first) }
}

/// The name PostgreSQL gives an output column with no alias.
pub(super) fn column_label(e: &ast::Expr) -> String {
    super::colname::figure_colname(e)
}

pub(super) fn json_no_operator(kind: &str) -> SqlError {
    SqlError::new("42883", format!("could not identify an {kind} operator for type json"))
}

pub(super) fn check_wildcard(opts: &ast::WildcardAdditionalOptions) -> Result<()> {
    if opts.opt_ilike.is_some()
        || opts.opt_exclude.is_some()
        || opts.opt_except.is_some()
        || opts.opt_replace.is_some()
        || opts.opt_rename.is_some()
    {
        return Err(SqlError::unsupported("wildcard options"));
    }
    Ok(())
}

/// `SELECT srf(args) [AS a]` without FROM, for the set-returning functions
/// pgtier has, as `SELECT f AS a FROM srf(args) f`: the function's rows,
/// possibly none (PostgreSQL's SRF-in-target-list for this simple case).
pub(super) fn srf_select(s: &ast::Select) -> Option<ast::Select> {
    if !s.from.is_empty() || s.selection.is_some() || s.projection.len() != 1 {
        return None;
    }
    let (e, alias) = match &s.projection[0] {
        ast::SelectItem::UnnamedExpr(e) => (e, None),
        ast::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.clone())),
        _ => return None,
    };
    let ast::Expr::Function(f) = e else { return None };
    if !plain_call(f) {
        return None;
    }
    let name = function_name(&f.name).ok()?;
    let one_column_json = super::json::json_srf(&name).is_some_and(|f| f.columns().len() == 1);
    if !matches!(
        name.as_str(),
        "pg_partition_ancestors" | "generate_series" | "unnest" | "string_to_table" | "regexp_split_to_table"
    ) && !one_column_json
    {
        return None;
    }
    let ast::FunctionArguments::List(list) = &f.args else { return None };
    let fn_alias = ast::Ident::new("__srf");
    let mut out = s.clone();
    out.from = vec![function_item(&f.name, &list.args, &fn_alias)];
    // jsonb_array_elements[_text] name their column `value`.
    let column = if one_column_json && !name.ends_with("object_keys") && name != "jsonb_path_query" {
        ast::Expr::CompoundIdentifier(vec![fn_alias, ast::Ident::new("value")])
    } else {
        ast::Expr::Identifier(fn_alias)
    };
    out.projection =
        vec![ast::SelectItem::ExprWithAlias { expr: column, alias: alias.unwrap_or_else(|| ast::Ident::new(name)) }];
    Some(out)
}

/// The FROM item `_pg_expandarray` calls in the select list become.
pub(super) const EXPAND_ITEM: &str = "__pg_expandarray";

/// `information_schema._pg_expandarray(a)` and `(...(a)).x` / `.n` as
/// select items (pgJDBC's getPrimaryKeys, getIndexInfo). PostgreSQL runs a
/// set-returning function in the select list once per row of FROM; one
/// such call, however often written, is therefore FROM joined with the
/// function's rows: `FROM ..., _pg_expandarray(a) AS __pg_expandarray`,
/// each call then being that item's whole row. Aggregates and windows,
/// which PostgreSQL computes before the expansion, are refused with it
/// (checked on the bound plan, in `select`). `unnest(a)` and
/// `generate_series(...)` in the select list of a query with FROM are
/// moved the same way (without FROM, `srf_select` has them).
pub(super) fn expand_array_items(s: &ast::Select) -> Result<Option<ast::Select>> {
    let is_call = |e: &ast::Expr| match e {
        ast::Expr::Function(f) => {
            plain_call(f)
                && function_name(&f.name).is_ok_and(|n| n == super::function::EXPAND_ARRAY || moved_with_from(&n))
        }
        _ => false,
    };
    let call_of = |e: &ast::Expr| -> Option<(ast::Expr, Option<ast::Ident>)> {
        match e {
            _ if is_call(e) => Some((e.clone(), None)),
            ast::Expr::CompoundFieldAccess { root, access_chain } => match (root.as_ref(), access_chain.as_slice()) {
                (ast::Expr::Nested(inner), [ast::AccessExpr::Dot(ast::Expr::Identifier(field))]) if is_call(inner) => {
                    Some((inner.as_ref().clone(), Some(field.clone())))
                }
                _ => None,
            },
            _ => None,
        }
    };
    let nested_call = |e: &ast::Expr| -> Result<Option<(ast::Expr, ast::Expr)>> {
        let mut copy = e.clone();
        Ok(take_nested_call(&mut copy, &is_call)?.map(|call| (call, copy)))
    };
    // Most SELECTs have no such call: they are not copied.
    if !s.projection.iter().any(|item| matches!(item, ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } if call_of(e).is_some() || contains_call(e, &is_call))) {
        return Ok(None);
    }
    // `*` would take the moved call's FROM item for a column of its own.
    if s.projection.iter().any(|item| matches!(item, ast::SelectItem::Wildcard(_))) {
        return Err(SqlError::unsupported("a set-returning function beside * in the select list"));
    }
    let mut call: Option<ast::Expr> = None;
    let mut out = s.clone();
    for item in &mut out.projection {
        let (expr, alias) = match item {
            ast::SelectItem::UnnamedExpr(e) => (e.clone(), None),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr.clone(), Some(alias.clone())),
            _ => continue,
        };
        let Some((found, field)) = call_of(&expr) else {
            // `abs(unnest(a))`: the outer expression over each of the
            // function's rows, named as it would be.
            let Some((found, replaced)) = nested_call(&expr)? else { continue };
            if call.as_ref().is_some_and(|c| *c != found) {
                return Err(SqlError::unsupported("several different set-returning functions in the select list"));
            }
            call = Some(found);
            *item = match alias {
                None => ast::SelectItem::UnnamedExpr(replaced),
                Some(alias) => ast::SelectItem::ExprWithAlias { expr: replaced, alias },
            };
            continue;
        };
        if call.as_ref().is_some_and(|c| *c != found) {
            return Err(SqlError::unsupported("several different set-returning functions in the select list"));
        }
        let called = if let ast::Expr::Function(f) = &found {
            function_name(&f.name).unwrap_or_default()
        } else {
            String::new()
        };
        call = Some(found);
        let row = ast::Expr::Identifier(ast::Ident::new(EXPAND_ITEM));
        let default_name = if moved_with_from(&called) { called.as_str() } else { "_pg_expandarray" };
        let name = field.as_ref().map_or_else(|| ast::Ident::new(default_name), Clone::clone);
        let replaced = match field {
            None => row,
            Some(f) => ast::Expr::CompoundFieldAccess {
                root: Box::new(ast::Expr::Nested(Box::new(row))),
                access_chain: vec![ast::AccessExpr::Dot(ast::Expr::Identifier(f))],
            },
        };
        *item = ast::SelectItem::ExprWithAlias { expr: replaced, alias: alias.unwrap_or(name) };
    }
    let Some(ast::Expr::Function(f)) = call else { return Ok(None) };
    let ast::FunctionArguments::List(list) = &f.args else {
        return Err(SqlError::unsupported("_pg_expandarray without arguments"));
    };
    out.from.push(function_item(&f.name, &list.args, &ast::Ident::new(EXPAND_ITEM)));
    Ok(Some(out))
}

/// Replaces the first set-returning call (`is_call`) found inside `e`'s
/// operands and the arguments of its scalar function calls by the FROM
/// item it moves to, and answers it. Only those places are searched; one
/// inside CASE, COALESCE or an aggregate is PostgreSQL's 0A000.
fn take_nested_call(e: &mut ast::Expr, is_call: &dyn Fn(&ast::Expr) -> bool) -> Result<Option<ast::Expr>> {
    let placement = |place: &str| {
        SqlError::new("0A000", format!("set-returning functions are not allowed in {place}"))
            .with_hint("You might be able to move the set-returning function into a LATERAL FROM item.")
    };
    let contained = contains_call(e, is_call);
    match e {
        ast::Expr::Case { .. } if contained => return Err(placement("CASE")),
        ast::Expr::Function(f) if contained => match function_name(&f.name).as_deref() {
            Ok("coalesce") => return Err(placement("COALESCE")),
            Ok(n) if super::aggregate::aggregate_named(n, false).is_some() => {
                return Err(SqlError::new(
                    "0A000",
                    "aggregate function calls cannot contain set-returning function calls",
                )
                .with_hint("You might be able to move the set-returning function into a LATERAL FROM item."));
            }
            _ => {}
        },
        _ => {}
    }
    let operands: Vec<&mut ast::Expr> = match e {
        ast::Expr::BinaryOp { left, right, .. } => vec![left.as_mut(), right.as_mut()],
        ast::Expr::UnaryOp { expr, .. } | ast::Expr::Nested(expr) | ast::Expr::Cast { expr, .. } => vec![expr.as_mut()],
        // Not pg_typeof: an element of an oid array or oidvector is a
        // bigint here (value/types.rs OID), which pg_typeof would name.
        ast::Expr::Function(f)
            if plain_call(f)
                && function_name(&f.name)
                    .is_ok_and(|n| n != "pg_typeof" && crate::expr::registry::lookup(&n).is_some()) =>
        {
            match &mut f.args {
                ast::FunctionArguments::List(list) => list
                    .args
                    .iter_mut()
                    .filter_map(|a| match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg)) => Some(arg),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    };
    for operand in operands {
        if is_call(operand) {
            return Ok(Some(std::mem::replace(operand, ast::Expr::Identifier(ast::Ident::new(EXPAND_ITEM)))));
        }
        if let Some(call) = take_nested_call(operand, is_call)? {
            return Ok(Some(call));
        }
    }
    Ok(None)
}

/// Whether a set-returning call (`is_call`) is among `e`'s operands,
/// function arguments or CASE parts, at any depth.
fn contains_call(e: &ast::Expr, is_call: &dyn Fn(&ast::Expr) -> bool) -> bool {
    let inside = |x: &ast::Expr| is_call(x) || contains_call(x, is_call);
    match e {
        ast::Expr::BinaryOp { left, right, .. } => inside(left) || inside(right),
        ast::Expr::UnaryOp { expr, .. } | ast::Expr::Nested(expr) | ast::Expr::Cast { expr, .. } => inside(expr),
        ast::Expr::Function(f) => match &f.args {
            ast::FunctionArguments::List(list) => list
                .args
                .iter()
                .any(|a| matches!(a, ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) if inside(x))),
            _ => false,
        },
        ast::Expr::Case { operand, conditions, else_result, .. } => {
            operand.as_deref().is_some_and(inside)
                || conditions.iter().any(|w| inside(&w.condition) || inside(&w.result))
                || else_result.as_deref().is_some_and(inside)
        }
        _ => false,
    }
}

/// The FETCH FIRST forms PostgreSQL refuses (its grammar's and
/// transformLimitClause's errors), and PERCENT, which it lacks.
fn check_fetch(fetch: &ast::Fetch, q: &ast::Query) -> Result<()> {
    if fetch.percent {
        return Err(SqlError::new("42601", "syntax error at or near \"PERCENT\""));
    }
    if !fetch.with_ties {
        return Ok(());
    }
    if q.order_by.is_none() {
        return Err(SqlError::new("42601", "WITH TIES cannot be specified without ORDER BY clause"));
    }
    if q.locks.iter().any(|l| matches!(l.nonblock, Some(ast::NonBlock::SkipLocked))) {
        return Err(SqlError::new("42601", "SKIP LOCKED and WITH TIES options cannot be used together"));
    }
    if matches!(&fetch.quantity, Some(ast::Expr::Value(v)) if matches!(v.value, ast::Value::Null)) {
        return Err(SqlError::new("2201W", "row count cannot be null in FETCH FIRST ... WITH TIES clause"));
    }
    Ok(())
}

/// The set-returning functions that `expand_array_items` moves from the
/// select list of a query with FROM into its FROM: each output row is one
/// row of FROM joined with one of the function's rows, in the function's
/// order, as PostgreSQL's ProjectSet gives them.
fn moved_with_from(name: &str) -> bool {
    matches!(name, "unnest" | "generate_series" | "regexp_split_to_table")
}

/// A call with no OVER, FILTER, WITHIN GROUP, DISTINCT or ORDER BY: only
/// such a set-returning call moves to FROM; the others are bound where
/// they stand, which refuses them as PostgreSQL does (42809), rather than
/// moved with their clause dropped.
fn plain_call(f: &ast::Function) -> bool {
    let plain_args = match &f.args {
        ast::FunctionArguments::List(list) => list.duplicate_treatment.is_none() && list.clauses.is_empty(),
        _ => true,
    };
    plain_args && f.over.is_none() && f.filter.is_none() && f.within_group.is_empty() && f.null_treatment.is_none()
}

/// `FROM name(args) AS alias`: a select-list set-returning call moved to FROM.
fn function_item(name: &ast::ObjectName, args: &[ast::FunctionArg], alias: &ast::Ident) -> ast::TableWithJoins {
    ast::TableWithJoins {
        relation: ast::TableFactor::Table {
            name: name.clone(),
            alias: Some(ast::TableAlias { explicit: true, name: alias.clone(), columns: Vec::new(), at: None }),
            args: Some(ast::TableFunctionArgs { args: args.to_vec(), settings: None }),
            with_hints: Vec::new(),
            version: None,
            with_ordinality: false,
            partitions: Vec::new(),
            json_path: None,
            sample: None,
            index_hints: Vec::new(),
        },
        joins: Vec::new(),
    }
}

/// PostgreSQL's words for a name in ON that is a FROM item before the
/// comma: not missing, out of reach.
pub(super) fn invalid_reference(mut err: SqlError, before_comma: &[Rel]) -> SqlError {
    let Some(name) = err
        .message
        .strip_prefix("missing FROM-clause entry for table \"")
        .and_then(|m| m.strip_suffix('"'))
        .map(str::to_owned)
    else {
        return err;
    };
    if before_comma.iter().any(|r| r.name == name) {
        err.message = format!("invalid reference to FROM-clause entry for table \"{name}\"");
        err.hint = Some(format!(
            "There is an entry for table \"{name}\", but it cannot be referenced from this part of the query."
        ));
    }
    err
}

/// Calls nextval or setval. PostgreSQL runs a WITH query only as far as
/// its readers read it, and how far a sequence advances shows that;
/// pgtier computes a WITH query's rows whole, inlined or shared.
fn advances_sequence(cte: &ast::Cte) -> bool {
    let text = cte.query.to_string().to_lowercase();
    text.contains("nextval") || text.contains("setval")
}

/// A reader that may stop before the last row: LIMIT / FETCH, EXISTS, and
/// the sublinks PostgreSQL ends at the first match (IN, ANY, SOME, ALL) or
/// reads one row of (a scalar subquery, which an unmatched parenthesis
/// before SELECT shows). Said of the statement's text: a false alarm only
/// refuses what could have been answered.
/// A sequence advanced inside a subquery that PostgreSQL may stop reading
/// early: it calls nextval only for the rows it reads (a FROM subquery
/// under LIMIT, EXISTS, IN, a scalar subquery that fails at its second
/// row), where pgtier computes a subquery whole, so the sequence would
/// end elsewhere: refused (0A000). Said of the statement's text, as
/// [`may_stop_early`]: a subquery in FROM (or a WITH query, which has its
/// own guard) is refused only beside a word that may stop it; any other
/// subquery always. A false alarm refuses what could have been answered.
pub(super) fn refuse_partial_sequence_reads(statement: &str) -> Result<()> {
    let text = statement.to_lowercase();
    let stops = may_stop_early(&text.replace("(select", "( select"));
    for call in ["nextval(", "setval("] {
        for (at, _) in text.match_indices(call) {
            let Some(open) = text[..at].rfind("(select") else { continue };
            let before = text[..open].trim_end();
            let from_like = ["from", "join", "lateral", "as", "materialized"]
                .iter()
                .any(|w| before.ends_with(w) && !before.ends_with("exists"));
            if stops || !from_like {
                return Err(SqlError::unsupported(
                    "a sequence advanced inside a subquery that the statement may stop reading early",
                ));
            }
        }
    }
    Ok(())
}

fn may_stop_early(statement: &str) -> bool {
    [" limit ", " fetch ", "exists", " in (", " any (", " any(", " some", " all (", " all(", "(select"]
        .iter()
        .any(|word| statement.contains(word))
}

/// Whole-word occurrences of `word` in `text` (an identifier, lower case;
/// `text` lower-cased). Counts a column or a string of that spelling too:
/// an upper bound of the references to a WITH query.
fn word_count(text: &str, word: &str) -> usize {
    if word.is_empty() {
        return 0;
    }
    let ident_char = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    text.match_indices(word)
        .filter(|(at, _)| {
            let before = text[..*at].chars().next_back();
            let after = text[at + word.len()..].chars().next();
            !before.is_some_and(ident_char) && !after.is_some_and(ident_char)
        })
        .count()
}
