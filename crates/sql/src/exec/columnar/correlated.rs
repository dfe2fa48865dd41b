//! Correlated subqueries in the analytic query: EXISTS, IN and scalar
//! aggregates that read the enclosing row are written as SQL subqueries
//! over the enclosing query's columns, which DataFusion decorrelates into
//! joins. Only the forms whose decorrelated answer is the nested one's
//! are taken: [NOT] EXISTS; IN (not NOT IN: its NULL semantics through an
//! anti join are not checked here); a scalar subquery that is one
//! aggregation without GROUP BY over sum, min or max (one row whatever
//! the input; count is refused, whose empty-input 0 a decorrelated join
//! would turn into NULL). pgtier binds references one level out only
//! (bind/expr.rs), so `Expr::Outer` always names a column of the query
//! directly around the subquery.
//!
//! A scalar aggregate whose value DataFusion does not compute as pgtier
//! does (avg, whose numeric division rounds as PostgreSQL's, TPC-H Q17's
//! `0.2 * avg(l_quantity)`) is computed per key instead, when the
//! subquery reads the enclosing row only through equalities `x = outer
//! column`: one analytic query groups the subquery's rows by the x's
//! (`GROUP BY` finds the same rows `x = value` would, for the kinds a key
//! may have), pgtier finishes each group's aggregates and evaluates the
//! select list over them with its own evaluator, and the values go to the
//! main query as a side table read by key. An enclosing row whose key has
//! no group reads NULL, which is the subquery's value over no rows only
//! when the select list gives NULL over empty aggregates (checked; count's
//! 0 is refused). A group's value that fails to evaluate refuses the
//! whole plan (PostgreSQL raises only for keys an outer row reaches).

use super::aggregate::sum_kind;
use super::reshape;
use super::side::{side_type, side_values};
use super::translate::{Cols, From, Kind, LevelText, Res, Shape, Sql, Translator, aliased, cast, comparable, sql};
use crate::expr::{Expr, Subquery, SubqueryKind};
use crate::plan::{AggFunc, AggPlan, SelectPlan};
use pgtier_engine::{DataType, Value};
use pgtier_olap::SideTable;

impl Translator<'_> {
    /// `s` (correlated) read from the row `cx` describes.
    pub(super) fn correlated(&mut self, s: &Subquery, cx: &Cols<'_>) -> Res<Sql> {
        let plan = &s.plan;
        if plan.limit.is_some() || plan.offset.is_some() || !plan.distinct_on.is_empty() || !plan.windows.is_empty() {
            return Err("a correlated subquery with LIMIT, OFFSET, DISTINCT ON or windows".into());
        }
        self.outer.push(cx.0.to_vec());
        let where_of = self.in_where.take();
        self.outer_levels.push(where_of.and_then(|i| self.from_levels.get(i).cloned()));
        let translated = self.correlated_body(s, plan, cx);
        self.outer_levels.pop();
        self.in_where = where_of;
        self.outer.pop();
        translated
    }

    fn correlated_body(&mut self, s: &Subquery, plan: &SelectPlan, cx: &Cols<'_>) -> Res<Sql> {
        let from = self.from(plan)?;
        let mut body = format!("FROM {}", from.text);
        if !from.conditions.is_empty() {
            body = format!("{body} WHERE {}", from.conditions.join(" AND "));
        }
        match (&s.kind, &plan.agg) {
            (SubqueryKind::Exists, None) => {
                let not = if s.negated { "NOT " } else { "" };
                Ok(sql(format!("({not}EXISTS (SELECT 1 {body}))"), Kind::Bool))
            }
            (SubqueryKind::In { lhs, trim_rows: false }, None) if !s.negated => {
                // The outer row's value against the subquery's column.
                self.outer.pop();
                let x = self.expr(lhs, cx);
                self.outer.push(cx.0.to_vec());
                let first = plan.projection.first().ok_or("an IN subquery without a column")?;
                let y = self.expr(first, &Cols(&from.columns))?;
                let (x, y) = comparable(x?, y)?;
                Ok(sql(format!("({x} IN (SELECT {y} {body}))"), Kind::Bool))
            }
            (SubqueryKind::Scalar { column: 0 }, Some(agg))
                if agg.group_by.is_empty() && agg.having.is_none() && plan.visible == 1 =>
            {
                match self.scalar_aggregate(plan, agg, &from, body) {
                    Ok(value) => Ok(value),
                    Err(why) => self.per_key(plan, agg).map_err(|per_key| format!("{why}; per key: {per_key}")),
                }
            }
            _ => Err("this kind of correlated subquery".into()),
        }
    }

    /// A correlated scalar aggregate written as a SQL subquery.
    fn scalar_aggregate(&mut self, plan: &SelectPlan, agg: &AggPlan, from: &From, body: String) -> Res<Sql> {
        let mut row = Vec::with_capacity(agg.aggs.len());
        for call in &agg.aggs {
            let (Some(arg), None, true) = (&call.arg, &call.filter, call.order_by.is_empty()) else {
                return Err("a correlated aggregate with FILTER, ORDER BY or without an argument".into());
            };
            let a = self.expr(arg, &Cols(&from.columns))?;
            if a.scale.is_some() {
                return Err("a correlated aggregate over numerics of varying scale".into());
            }
            let distinct = if call.distinct { "DISTINCT " } else { "" };
            row.push(Some(match call.func {
                AggFunc::Sum => {
                    let out = sum_kind(a.kind, call.ty)?;
                    sql(format!("sum({distinct}{})", cast(&a.text, out)), out)
                }
                AggFunc::Min | AggFunc::Max
                    if Kind::of_type(call.ty) == Some(a.kind)
                        || matches!((a.kind, call.ty), (Kind::Num(_), DataType::Numeric { .. })) =>
                {
                    let f = if call.func == AggFunc::Min { "min" } else { "max" };
                    sql(format!("{f}({distinct}{})", a.text), a.kind)
                }
                f => return Err(format!("correlated aggregate {f:?}")),
            }));
        }
        let value = self.expr(&plan.projection[0], &Cols(&row))?;
        if value.scale.is_some() || value.kind == Kind::Null {
            return Err("a correlated scalar subquery of this kind".into());
        }
        Ok(sql(format!("(SELECT {} {body})", value.text), value.kind))
    }

    /// A correlated scalar aggregate computed per key (module comment).
    fn per_key(&mut self, plan: &SelectPlan, agg: &AggPlan) -> Res<Sql> {
        let value = &plan.projection[0];
        if !evaluable(value) {
            return Err("a select list pgtier does not evaluate apart".into());
        }
        let ty = plan.columns.first().and_then(|c| c.ty).ok_or("a select list of unknown type")?;
        let empty: Vec<Value> = agg
            .aggs
            .iter()
            .map(|c| if matches!(c.func, AggFunc::Count | AggFunc::CountStar) { Value::Int8(0) } else { Value::Null })
            .collect();
        match self.cx.evaluate(value, &empty) {
            Ok(Value::Null) => {}
            Ok(_) => return Err("a value over no rows that is not NULL".into()),
            Err(e) => return Err(format!("a value over no rows that fails: {}", e.message)),
        }
        let enclosing = self.outer.last().cloned().unwrap_or_default();
        let levels = self.outer_levels.last().cloned().flatten().unwrap_or_default();
        // The grouped query stands alone: any reference to the enclosing
        // row but the keys taken out is refused (an empty row reads none).
        self.outer.push(Vec::new());
        let mut keys = Vec::new();
        let grouped = self.keyed_from(plan, Some(&mut keys)).and_then(|mut from| {
            for (x, c) in &keys {
                if let Some(only) = self.keys_restriction(x, *c, &from, &enclosing, &levels)? {
                    from.conditions.push(only);
                }
            }
            let grouped = AggPlan {
                group_by: keys.iter().map(|(x, _)| x.clone()).collect(),
                aggs: agg.aggs.clone(),
                having: None,
            };
            self.aggregate(&grouped, &from)
        });
        self.outer.pop();
        let a = grouped?;
        if keys.is_empty() {
            return Err("no equality with the enclosing row".into());
        }
        let groups = keys.len();
        let query = format!("SELECT {} FROM {} GROUP BY {}", aliased(&a.select), a.from, a.group_by.join(", "));
        let key_kinds: Vec<Kind> = a.row[..groups].iter().map(|k| k.as_ref().map_or(Kind::Null, |k| k.kind)).collect();
        let mut columns = Vec::with_capacity(groups + 1);
        for (i, kind) in key_kinds.iter().enumerate() {
            columns.push((format!("k{i}"), side_type(*kind).ok_or_else(|| format!("a key of kind {kind:?}"))?));
        }
        let name = self.side_name();
        let alias = format!("s{}", self.depth);
        self.depth += 1;
        let mut matches = Vec::with_capacity(groups);
        for (i, (_, c)) in keys.iter().enumerate() {
            let outer = self.outer.last().and_then(|row| row.get(*c)).cloned().flatten();
            let outer = outer.ok_or_else(|| format!("column {c} of the enclosing row has no columnar form"))?;
            let (k, o) = comparable(sql(format!("{alias}.k{i}"), key_kinds[i]), outer)?;
            matches.push(format!("{k} = {o}"));
        }
        let read = |column: &str| {
            format!("(SELECT max({alias}.{column}) FROM {name} AS {alias} WHERE {})", matches.join(" AND "))
        };
        self.side_queries.push(format!("Values per key ({name}): {query}"));
        let Some(answer) = self.cx.analytic_rows(&query, &self.sides) else {
            // EXPLAIN: the values are computed when the statement runs.
            let kind =
                if ty.numeric_own_scale() { Kind::Num(0) } else { Kind::of_type(ty).ok_or("a value of this type")? };
            return Ok(sql(read("v"), kind));
        };
        let answer = answer.map_err(|e| format!("the values per key failed: {}", e.message))?;
        let answer = reshape(answer, &Shape::Groups { groups, finishes: a.finishes })
            .map_err(|e| format!("the values per key: {}", e.message))?;
        let mut rows = Vec::with_capacity(answer.len());
        for mut row in answer {
            let v =
                self.cx.evaluate(value, &row[groups..]).map_err(|e| format!("a value per key fails: {}", e.message))?;
            row.truncate(groups);
            row.push(v);
            rows.push(row);
        }
        let (kind, value_type, scales) = side_values(ty, &mut rows, groups)?;
        columns.push(("v".into(), value_type));
        let mut out = sql(read("v"), kind);
        if scales {
            columns.push(("vs".into(), DataType::Int8));
            out.scale = Some(read("vs"));
        }
        self.sides.push(SideTable { name, columns, rows });
        Ok(out)
    }
}

impl Translator<'_> {
    /// `x IN (SELECT <enclosing column c> FROM <its level> WHERE <that
    /// level's own conditions>)`: the keys an enclosing row can bring,
    /// or a superset of them (TPC-H Q17: the 200-odd parts of one brand
    /// and container, not lineitem's 200,000 part keys). None when column
    /// c's level has no condition of its own, or none is known.
    fn keys_restriction(
        &mut self,
        x: &Expr,
        c: usize,
        from: &From,
        enclosing: &[Option<Sql>],
        levels: &[LevelText],
    ) -> Res<Option<String>> {
        let Some(level) = levels.iter().find(|l| l.columns.contains(&c) && !l.conditions.is_empty()) else {
            return Ok(None);
        };
        let Some(outer) = enclosing.get(c).cloned().flatten() else { return Ok(None) };
        let (x, outer) = comparable(self.expr(x, &Cols(&from.columns))?, outer)?;
        Ok(Some(format!("({x} IN (SELECT {outer} FROM {} WHERE {}))", level.relation, level.conditions.join(" AND "))))
    }
}

/// Whether pgtier may evaluate `e` once per key rather than once per
/// enclosing row: no subquery, no function (none volatile), only
/// operators over the aggregate row and constants.
fn evaluable(e: &Expr) -> bool {
    let mut ok = true;
    e.walk(&mut |x| {
        ok &= matches!(
            x,
            Expr::Column(_)
                | Expr::Const(_)
                | Expr::Param(_)
                | Expr::Arith(..)
                | Expr::Neg(_)
                | Expr::Cast(..)
                | Expr::Coalesce(_)
                | Expr::NullIf(..)
                | Expr::Case { .. }
                | Expr::Cmp(..)
                | Expr::And(_)
                | Expr::Or(_)
                | Expr::Not(_)
                | Expr::IsNull(..)
                | Expr::IsDistinct(..)
                | Expr::IsBool(..)
        );
    });
    ok
}
