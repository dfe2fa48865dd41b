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

use super::aggregate::sum_kind;
use super::translate::{Cols, Kind, Res, Sql, Translator, cast, comparable, sql};
use crate::expr::{Subquery, SubqueryKind};
use crate::plan::{AggFunc, SelectPlan};
use pgtier_engine::DataType;

impl Translator<'_> {
    /// `s` (correlated) read from the row `cx` describes.
    pub(super) fn correlated(&mut self, s: &Subquery, cx: &Cols<'_>) -> Res<Sql> {
        let plan = &s.plan;
        if plan.limit.is_some() || plan.offset.is_some() || !plan.distinct_on.is_empty() || !plan.windows.is_empty() {
            return Err("a correlated subquery with LIMIT, OFFSET, DISTINCT ON or windows".into());
        }
        self.outer.push(cx.0.to_vec());
        let translated = self.correlated_body(s, plan, cx);
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
            _ => Err("this kind of correlated subquery".into()),
        }
    }
}
