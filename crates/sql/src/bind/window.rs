//! Window function calls.

use pgtier_engine::DataType;
use sqlparser::ast;

use super::aggregate::aggregate_named;
use super::{Binder, ExprCtx, Scope, Ty};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::plan::{AggCall, WindowCall, WindowFunc};

impl Binder<'_> {
    /// `func(...) OVER (PARTITION BY ... ORDER BY ...)`: row_number, rank,
    /// dense_rank, or an aggregate over the default frame.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn window_function(
        &mut self, over: &ast::WindowType, name: &str, args: &[ast::Expr], star: bool, distinct: bool, filter: Option<Expr>, scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        if ctx.in_agg {
            return Err(SqlError::new("42803", "aggregate function calls cannot contain window function calls"));
        }
        if ctx.windows.is_none() {
            let clause = if ctx.clause.is_empty() { "this context" } else { ctx.clause };
            return Err(SqlError::new("42P20", format!("window functions are not allowed in {clause}")));
        }
        let ast::WindowType::WindowSpec(spec) = over else {
            return Err(SqlError::unsupported("named windows"));
        };
        if spec.window_name.is_some() {
            return Err(SqlError::unsupported("named windows"));
        }
        if spec.window_frame.is_some() {
            return Err(SqlError::unsupported("window frame clauses (only the default frame)"));
        }
        if distinct {
            return Err(SqlError::unsupported("DISTINCT is not implemented for window functions"));
        }
        // The call's own pieces may hold aggregates but no window function.
        let saved = ctx.windows.take();
        let bound = (|| -> Result<(WindowCall, Ty)> {
            let mut value_type: Ty = None;
            let func = match (name, aggregate_named(name, star)) {
                (_, Some(a)) => WindowFunc::Agg(AggCall { filter: filter.clone(), ..self.agg_call(a, name, args, false, scope, ctx)? }),
                ("row_number" | "rank" | "dense_rank" | "percent_rank" | "cume_dist", None) if args.is_empty() && !star => match name {
                    "row_number" => WindowFunc::RowNumber,
                    "rank" => WindowFunc::Rank,
                    "dense_rank" => WindowFunc::DenseRank,
                    "percent_rank" => WindowFunc::PercentRank,
                    _ => WindowFunc::CumeDist,
                },
                ("ntile", None) if args.len() == 1 => {
                    let (n, t) = self.expr(&args[0], scope, ctx)?;
                    WindowFunc::Ntile(self.coerce(n, t, DataType::Int4, name)?)
                }
                ("lag" | "lead", None) if (1..=3).contains(&args.len()) => {
                    let (mut value, mut vt) = self.expr(&args[0], scope, ctx)?;
                    let offset = match args.get(1) {
                        Some(a) => {
                            let (o, t) = self.expr(a, scope, ctx)?;
                            Some(self.coerce(o, t, DataType::Int4, name)?)
                        }
                        None => None,
                    };
                    let default = match args.get(2) {
                        Some(a) => {
                            // lag(anycompatible, integer, anycompatible): value and
                            // default take their common type (lag(int, 1, 0.7) is numeric).
                            let (d, t) = self.expr(a, scope, ctx)?;
                            let common = super::coerce::common_type(&[vt, t], name)?;
                            value = self.result_cast(value, vt, common)?;
                            vt = common;
                            Some(self.result_cast(d, t, common)?)
                        }
                        None => None,
                    };
                    value_type = vt;
                    WindowFunc::Shift { value, offset, default, lead: name == "lead" }
                }
                ("first_value" | "last_value", None) if args.len() == 1 => {
                    let (value, vt) = self.expr(&args[0], scope, ctx)?;
                    value_type = vt;
                    if name == "first_value" { WindowFunc::FirstValue(value) } else { WindowFunc::LastValue(value) }
                }
                ("row_number" | "rank" | "dense_rank" | "percent_rank" | "cume_dist" | "ntile" | "lag" | "lead" | "first_value" | "last_value", None) => {
                    return Err(SqlError::undefined_function(&format!("{name}(...)")));
                }
                (_, None) => return Err(SqlError::unsupported(format!("window function {name}()"))),
            };
            let mut partition = Vec::new();
            for e in &spec.partition_by {
                partition.push(self.expr(e, scope, ctx)?.0);
            }
            let mut order = Vec::new();
            for item in &spec.order_by {
                let desc = item.options.asc == Some(false);
                order.push((self.expr(&item.expr, scope, ctx)?.0, desc, item.options.nulls_first.unwrap_or(desc)));
            }
            let ty = match &func {
                WindowFunc::Agg(agg) => Some(agg.ty),
                WindowFunc::PercentRank | WindowFunc::CumeDist => Some(DataType::Float8),
                WindowFunc::Ntile(_) => Some(DataType::Int4),
                WindowFunc::Shift { .. } | WindowFunc::FirstValue(_) | WindowFunc::LastValue(_) => value_type,
                WindowFunc::RowNumber | WindowFunc::Rank | WindowFunc::DenseRank => Some(DataType::Int8),
            };
            Ok((WindowCall { func, partition, order }, ty))
        })();
        ctx.windows = saved;
        let (call, ty) = bound?;
        let windows = ctx.windows.as_mut().ok_or_else(|| SqlError::new("XX000", "window context lost"))?;
        windows.push(call);
        Ok((Expr::WindowRef(windows.len() - 1), ty))
    }
}

/// A window function's reference becomes the column the executor appends
/// for it after the input row's `base` columns.
pub(super) fn resolve_window_refs(e: Expr, base: usize) -> Result<Expr> {
    match e {
        Expr::WindowRef(i) => Ok(Expr::Column(base + i)),
        other => other.map_children(&mut |c| resolve_window_refs(c, base)),
    }
}
