//! Aggregate calls and the rewrite of an aggregated query onto its groups.

use pgtier_engine::{DataType, Value};
use sqlparser::ast;

use super::{Binder, ExprCtx, Scope, Ty};
use crate::error::{Result, SqlError};
use crate::expr::{Builtin, Expr, Func, SysFunc, registry};
use crate::plan::{AggCall, AggFunc, AggOrder, RegrFunc};
use crate::value::json::{JsonAgg, JsonFunc};
use crate::value::types::{self, Elem};
use crate::value::{NUMERIC_ANY, type_name};

impl Binder<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn aggregate(
        &mut self,
        func: AggFunc,
        name: &str,
        args: &[ast::Expr],
        distinct: bool,
        filter: Option<Expr>,
        order_by: &[ast::OrderByExpr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        if ctx.aggs.is_none() {
            return Err(SqlError::new("42803", format!("aggregate functions are not allowed in {}", ctx.clause)));
        }
        let mut call = AggCall { filter, ..self.agg_call(func, name, args, distinct, false, scope, ctx)? };
        call.order_by = self.agg_order(&call, args, order_by, scope, ctx)?;
        if outer_level(&call) {
            // PostgreSQL evaluates such an aggregate in the outer query, once
            // over the outer rows; computed here it would count the inner ones.
            return Err(SqlError::unsupported("an aggregate whose arguments refer only to an outer query's columns"));
        }
        let aggs = ctx.aggs.as_mut().ok_or_else(|| SqlError::new("XX000", "aggregate context lost"))?;
        let idx = match aggs.iter().position(|c| *c == call) {
            Some(i) => i,
            None => {
                aggs.push(call.clone());
                aggs.len() - 1
            }
        };
        Ok((Expr::AggRef(idx), Some(call.ty)))
    }

    /// An aggregate call's argument and result type. A window aggregate's
    /// arguments may hold plain aggregates (`sum(count(*)) OVER ()`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn agg_call(
        &mut self,
        func: AggFunc,
        name: &str,
        args: &[ast::Expr],
        distinct: bool,
        over: bool,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<AggCall> {
        if ctx.in_agg {
            return Err(SqlError::new("42803", "aggregate function calls cannot be nested"));
        }
        let nesting = !over;
        let (arg, ty) = match (func, args) {
            (AggFunc::CountStar, []) => (None, DataType::Int8),
            (AggFunc::StringAgg, [x, delimiter]) => {
                ctx.in_agg = nesting;
                let bound = self.expr(x, scope, ctx).and_then(|bx| Ok((bx, self.expr(delimiter, scope, ctx)?)));
                ctx.in_agg = false;
                let ((x, xt), (d, dt)) = bound?;
                if xt == Some(DataType::Bytea) {
                    // string_agg(bytea, bytea): the pair as values, not text.
                    let d = match dt {
                        None => self.coerce(d, None, DataType::Bytea, name)?,
                        Some(DataType::Bytea) => d,
                        Some(_) => return Err(SqlError::undefined_function(&format!("{name}(...)"))),
                    };
                    (Some(Expr::Func(Func::Builtin(crate::exec::REGR_PAIR), vec![x, d])), DataType::Bytea)
                } else {
                    let x = self
                        .text_arg(x, xt, name)
                        .map_err(|_| SqlError::undefined_function(&format!("{name}(...)")))?;
                    let d = self
                        .text_arg(d, dt, name)
                        .map_err(|_| SqlError::undefined_function(&format!("{name}(...)")))?;
                    // Each row carries its value and delimiter as a two-element array.
                    (Some(Expr::Func(Func::Sys(SysFunc::MakeArray(Elem::Text)), vec![x, d])), DataType::Text)
                }
            }
            (AggFunc::StringAgg, _) => return Err(SqlError::undefined_function(&format!("{name}(...)"))),
            (AggFunc::Regr(kind), [y, x]) => {
                ctx.in_agg = nesting;
                let bound = self.expr(y, scope, ctx).and_then(|by| Ok((by, self.expr(x, scope, ctx)?)));
                ctx.in_agg = false;
                let ((y, yt), (x, xt)) = bound?;
                let sig = || {
                    let t = |t: Ty| t.map_or("unknown", type_name);
                    SqlError::undefined_function(&format!("{name}({}, {})", t(yt), t(xt)))
                };
                let mut float8 = |e: Expr, t: Ty| match t {
                    None => self.coerce(e, None, DataType::Float8, name),
                    Some(t) if float8_implicit(t) => self.result_cast(e, Some(t), Some(DataType::Float8)),
                    Some(_) => Err(sig()),
                };
                let pair = vec![float8(y, yt)?, float8(x, xt)?];
                let ty = if kind == RegrFunc::Count { DataType::Int8 } else { DataType::Float8 };
                (Some(Expr::Func(Func::Builtin(crate::exec::REGR_PAIR), pair)), ty)
            }
            (AggFunc::Regr(_), _) => return Err(SqlError::undefined_function(&format!("{name}(...)"))),
            (AggFunc::Json(JsonAgg::ObjectAgg { jsonb }), [k, v]) => {
                ctx.in_agg = nesting;
                let bound = self.expr(k, scope, ctx).and_then(|bk| Ok((bk, self.expr(v, scope, ctx)?)));
                ctx.in_agg = false;
                let ((k, kt), (v, vt)) = bound?;
                if kt.is_some_and(types::is_pseudo) || vt.is_some_and(types::is_pseudo) {
                    return Err(SqlError::unsupported(format!("{name} of an array or a system type")));
                }
                let k = if kt.is_none() { self.coerce(k, None, DataType::Text, name)? } else { k };
                let k = Expr::Func(Func::Json(JsonFunc::ObjectAggKey), vec![k]);
                let v = if vt.is_none() { self.coerce(v, None, DataType::Text, name)? } else { v };
                let ty = if jsonb { DataType::Jsonb } else { DataType::Json };
                (Some(Expr::Func(Func::Json(JsonFunc::BuildArray { jsonb: false }), vec![k, v])), ty)
            }
            (AggFunc::Json(JsonAgg::ObjectAgg { .. }), _) => {
                return Err(SqlError::undefined_function(&format!("{name}(...)")));
            }
            (_, [a]) => {
                ctx.in_agg = nesting;
                let bound = self.expr(a, scope, ctx);
                ctx.in_agg = false;
                let (x, t) = bound?;
                // bool_and / bool_or take boolean only; 't' is one.
                let (x, t) = match (func, t) {
                    (AggFunc::BoolAnd | AggFunc::BoolOr, None) => {
                        (self.coerce(x, None, DataType::Bool, name)?, Some(DataType::Bool))
                    }
                    other => (x, other.1),
                };
                let t = match t {
                    Some(t) => t,
                    None if func == AggFunc::Count => DataType::Text,
                    None if matches!(func, AggFunc::Json(_)) => {
                        return Err(SqlError::datatype_mismatch(
                            "could not determine polymorphic type because input has type unknown".to_owned(),
                        ));
                    }
                    None => return Err(SqlError::new("42725", format!("function {name}(unknown) is not unique"))),
                };
                (Some(x), agg_result_type(func, name, t)?)
            }
            _ => return Err(SqlError::undefined_function(&format!("{name}(...)"))),
        };
        Ok(AggCall { func, arg, distinct, filter: None, order_by: Vec::new(), ty })
    }

    /// An aggregate's ORDER BY, kept where the order changes the result
    /// (array_agg, string_agg) and dropped where it cannot (count, min,
    /// max, exact sums); a float sum or average depends on the order of its
    /// additions, so there it is refused rather than ignored.
    fn agg_order(
        &mut self,
        call: &AggCall,
        args: &[ast::Expr],
        order_by: &[ast::OrderByExpr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<Vec<AggOrder>> {
        if order_by.is_empty() {
            return Ok(Vec::new());
        }
        let mut keys = Vec::with_capacity(order_by.len());
        for item in order_by {
            if item.with_fill.is_some() {
                return Err(SqlError::unsupported("WITH FILL"));
            }
            if call.distinct && args.first().is_none_or(|a| *a != item.expr) {
                return Err(SqlError::new(
                    "42P10",
                    "in an aggregate with DISTINCT, ORDER BY expressions must appear in argument list",
                ));
            }
            ctx.in_agg = true;
            let bound = self.expr(&item.expr, scope, ctx);
            ctx.in_agg = false;
            let (key, _) = bound?;
            let desc = item.options.asc == Some(false);
            keys.push(AggOrder { key, desc, nulls_first: item.options.nulls_first.unwrap_or(desc) });
        }
        match call.func {
            AggFunc::ArrayAgg | AggFunc::StringAgg | AggFunc::Json(_) => Ok(keys),
            AggFunc::Sum | AggFunc::Avg | AggFunc::Variance { .. }
                if matches!(call.ty, DataType::Float4 | DataType::Float8) =>
            {
                Err(SqlError::unsupported("ORDER BY in a floating-point sum, avg, variance or stddev"))
            }
            AggFunc::Regr(kind) if kind != RegrFunc::Count => {
                Err(SqlError::unsupported("ORDER BY in a regr_*, covar_* or corr aggregate"))
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// The aggregate function `name` calls (`count(*)` when `star`).
pub(super) fn aggregate_named(name: &str, star: bool) -> Option<AggFunc> {
    Some(match name {
        "count" if star => AggFunc::CountStar,
        "count" => AggFunc::Count,
        "sum" => AggFunc::Sum,
        "avg" => AggFunc::Avg,
        "min" => AggFunc::Min,
        "max" => AggFunc::Max,
        "bool_and" | "every" => AggFunc::BoolAnd,
        "bool_or" => AggFunc::BoolOr,
        "string_agg" => AggFunc::StringAgg,
        "array_agg" => AggFunc::ArrayAgg,
        "json_agg" => AggFunc::Json(JsonAgg::Agg { jsonb: false }),
        "jsonb_agg" => AggFunc::Json(JsonAgg::Agg { jsonb: true }),
        "json_object_agg" => AggFunc::Json(JsonAgg::ObjectAgg { jsonb: false }),
        "jsonb_object_agg" => AggFunc::Json(JsonAgg::ObjectAgg { jsonb: true }),
        "regr_count" => AggFunc::Regr(RegrFunc::Count),
        "regr_sxx" => AggFunc::Regr(RegrFunc::Sxx),
        "regr_syy" => AggFunc::Regr(RegrFunc::Syy),
        "regr_sxy" => AggFunc::Regr(RegrFunc::Sxy),
        "regr_avgx" => AggFunc::Regr(RegrFunc::AvgX),
        "regr_avgy" => AggFunc::Regr(RegrFunc::AvgY),
        "regr_r2" => AggFunc::Regr(RegrFunc::R2),
        "regr_slope" => AggFunc::Regr(RegrFunc::Slope),
        "regr_intercept" => AggFunc::Regr(RegrFunc::Intercept),
        "covar_pop" => AggFunc::Regr(RegrFunc::CovarPop),
        "covar_samp" => AggFunc::Regr(RegrFunc::CovarSamp),
        "corr" => AggFunc::Regr(RegrFunc::Corr),
        "variance" | "var_samp" => AggFunc::Variance { sample: true, stddev: false },
        "var_pop" => AggFunc::Variance { sample: false, stddev: false },
        "stddev" | "stddev_samp" => AggFunc::Variance { sample: true, stddev: true },
        "stddev_pop" => AggFunc::Variance { sample: false, stddev: true },
        _ => return None,
    })
}

/// Maps an aggregated query's expression onto the aggregate row.
pub(super) fn rewrite_post_agg(e: Expr, groups: &[Expr], scope: &Scope<'_>) -> Result<Expr> {
    if let Some(k) = groups.iter().position(|g| *g == e) {
        return Ok(Expr::Column(k));
    }
    match e {
        Expr::AggRef(j) => Ok(Expr::Column(groups.len() + j)),
        Expr::Column(c) => Err(SqlError::new(
            "42803",
            format!(
                "column \"{}\" must appear in the GROUP BY clause or be used in an aggregate function",
                scope.column_name(c)
            ),
        )),
        Expr::Subquery(s) if s.correlated => Err(SqlError::unsupported("correlated subquery above GROUP BY")),
        other => other.map_children(&mut |c| rewrite_post_agg(c, groups, scope)),
    }
}

/// Whether the aggregate belongs to an outer query (check_agg_arguments):
/// its arguments, FILTER and ORDER BY name outer columns and none of this level's.
fn outer_level(call: &AggCall) -> bool {
    let (mut outer, mut local) = (false, false);
    let mut visit = |e: &Expr| {
        e.walk(&mut |x| match x {
            Expr::Outer(_) => outer = true,
            Expr::Column(_) => local = true,
            _ => {}
        });
    };
    call.arg.iter().chain(call.filter.iter()).chain(call.order_by.iter().map(|o| &o.key)).for_each(&mut visit);
    outer && !local
}

/// The result type of aggregate `func` (called `name`) over an argument of
/// type `t`, as PostgreSQL's pg_aggregate picks the overload; 42883 where
/// it has none, 0A000 where pgtier's answer would differ.
fn agg_result_type(func: AggFunc, name: &str, t: DataType) -> Result<DataType> {
    Ok(match func {
        AggFunc::StringAgg if t == DataType::Bytea => DataType::Bytea,
        AggFunc::StringAgg => DataType::Text,
        AggFunc::OrderedSet { .. } | AggFunc::Regr(_) => t,
        AggFunc::Json(JsonAgg::Agg { jsonb }) | AggFunc::Json(JsonAgg::ObjectAgg { jsonb }) => {
            if crate::value::types::is_pseudo(t) {
                return Err(SqlError::unsupported(format!("{name} of an array or a system type")));
            }
            if jsonb { DataType::Jsonb } else { DataType::Json }
        }
        AggFunc::ArrayAgg => match crate::value::array::array_type(t) {
            Some(a) => a,
            None => Elem::for_element(t)
                .ok_or_else(|| SqlError::unsupported(format!("array_agg of {}", type_name(t))))?
                .data_type(),
        },
        AggFunc::Count | AggFunc::CountStar => DataType::Int8,
        AggFunc::Sum | AggFunc::Avg if t == DataType::Interval => DataType::Interval,
        AggFunc::Sum => match t {
            DataType::Int2 | DataType::Int4 => DataType::Int8,
            DataType::Int8 | DataType::Numeric { .. } => NUMERIC_ANY,
            DataType::Float4 => DataType::Float4,
            DataType::Float8 => DataType::Float8,
            other => return Err(SqlError::undefined_function(&format!("{name}({})", type_name(other)))),
        },
        AggFunc::Variance { .. } => match t {
            DataType::Int2 | DataType::Int4 | DataType::Int8 | DataType::Numeric { .. }
                if crate::value::types::RegKind::of(t).is_none() =>
            {
                NUMERIC_ANY
            }
            // float8_accum's Youngs-Cramer state (exec/aggregate.rs).
            DataType::Float4 | DataType::Float8 => DataType::Float8,
            other => return Err(SqlError::undefined_function(&format!("{name}({})", type_name(other)))),
        },
        AggFunc::Avg => match t {
            DataType::Int2 | DataType::Int4 | DataType::Int8 | DataType::Numeric { .. } => NUMERIC_ANY,
            DataType::Float4 | DataType::Float8 => DataType::Float8,
            other => return Err(SqlError::undefined_function(&format!("{name}({})", type_name(other)))),
        },
        AggFunc::BoolAnd | AggFunc::BoolOr if t == DataType::Bool => DataType::Bool,
        AggFunc::BoolAnd | AggFunc::BoolOr => {
            return Err(SqlError::undefined_function(&format!("{name}({})", type_name(t))));
        }
        AggFunc::Min | AggFunc::Max => match t {
            DataType::Bool | DataType::Bytea | DataType::Uuid => {
                return Err(SqlError::undefined_function(&format!("{name}({})", type_name(t))));
            }
            // min(bpchar) is bpchar (its padding then goes with
            // the usual conversions); varchar has only min(text).
            DataType::Varchar(_) => DataType::Text,
            DataType::Numeric { .. } => NUMERIC_ANY,
            other => other,
        },
    })
}

/// The ordered-set aggregates pgtier has (PostgreSQL's orderedsetaggs.c).
#[derive(Clone, Copy, PartialEq, Eq)]
enum OrderedSet {
    PercentileCont,
    PercentileDisc,
    Mode,
    /// rank, dense_rank, percent_rank, cume_dist of a hypothetical row.
    Hypothetical(crate::exec::HypotheticalRank),
}

fn ordered_set_named(name: &str) -> Option<OrderedSet> {
    use crate::exec::HypotheticalRank as H;
    Some(match name {
        "percentile_cont" => OrderedSet::PercentileCont,
        "percentile_disc" => OrderedSet::PercentileDisc,
        "mode" => OrderedSet::Mode,
        "rank" => OrderedSet::Hypothetical(H::Rank),
        "dense_rank" => OrderedSet::Hypothetical(H::DenseRank),
        "percent_rank" => OrderedSet::Hypothetical(H::PercentRank),
        "cume_dist" => OrderedSet::Hypothetical(H::CumeDist),
        _ => return None,
    })
}

impl Binder<'_> {
    /// `f(direct args) WITHIN GROUP (ORDER BY keys)`: one aggregate
    /// (`AggFunc::OrderedSet`) collects the keys' rows in their order, and
    /// the final function, over that sorted array and the direct arguments,
    /// is evaluated once per group above it, so the direct arguments may
    /// use only grouped columns (42803), as PostgreSQL's do.
    pub(super) fn ordered_set_aggregate(
        &mut self,
        f: &ast::Function,
        name: &str,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let direct = within_group_direct_args(f, name)?;
        let Some(kind) = ordered_set_named(name) else {
            return Err(self.not_ordered_set(name, &direct, &f.within_group, scope));
        };
        if f.over.is_some() {
            return Err(SqlError::new("0A000", format!("OVER is not supported for ordered-set aggregate {name}")));
        }
        if ctx.aggs.is_none() {
            return Err(SqlError::new("42803", format!("aggregate functions are not allowed in {}", ctx.clause)));
        }
        if ctx.in_agg {
            return Err(SqlError::new("42803", "aggregate function calls cannot be nested"));
        }
        let filter = match &f.filter {
            None => None,
            Some(cond) => {
                let (b, t) = self.expr(cond, scope, &mut ExprCtx::plain("FILTER"))?;
                Some(self.boolean(b, t, "FILTER")?)
            }
        };
        // Both lists are bound inside the aggregate: an aggregate in either is nested.
        ctx.in_agg = true;
        let bound = self.within_group_operands(&direct, &f.within_group, scope, ctx);
        ctx.in_agg = false;
        let (direct, keys) = bound?;
        let signature = {
            let types: Vec<&str> = direct.iter().chain(&keys).map(|(_, t, _)| t.map_or("unknown", type_name)).collect();
            format!("{name}({})", types.join(", "))
        };
        let sig = || signature.clone();
        let (finals, ty, keys, direct) = self.ordered_set_types(kind, direct, keys, &sig)?;
        if keys.iter().any(|(_, t, _)| *t == Some(DataType::Json)) {
            return Err(super::select::json_no_operator("ordering"));
        }
        let order_by: Vec<AggOrder> = keys
            .iter()
            .map(|(key, _, (desc, nulls_first))| AggOrder { key: key.clone(), desc: *desc, nulls_first: *nulls_first })
            .collect();
        let hypothetical = matches!(kind, OrderedSet::Hypothetical(_));
        let call = AggCall {
            func: AggFunc::OrderedSet { hypothetical },
            arg: Some(order_by[0].key.clone()),
            distinct: false,
            filter,
            order_by,
            ty: keys[0].1.unwrap_or(DataType::Text),
        };
        if outer_level(&call) {
            // Its keys make it the outer query's aggregate (check_agg_arguments).
            let mut local = false;
            direct.iter().for_each(|d| d.walk(&mut |x| local |= matches!(x, Expr::Column(_))));
            return Err(if local {
                SqlError::new(
                    "42803",
                    "outer-level aggregate cannot contain a lower-level variable in its direct arguments",
                )
            } else {
                SqlError::unsupported("an aggregate whose arguments refer only to an outer query's columns")
            });
        }
        let aggs = ctx.aggs.as_mut().ok_or_else(|| SqlError::new("XX000", "aggregate context lost"))?;
        let idx = match aggs.iter().position(|c| *c == call) {
            Some(i) => i,
            None => {
                aggs.push(call);
                aggs.len() - 1
            }
        };
        let mut args = vec![Expr::AggRef(idx)];
        args.extend(direct);
        if hypothetical {
            let flags = keys.iter().flat_map(|(_, _, (d, n))| [Value::Bool(*d), Value::Bool(*n)]).collect();
            args.push(Expr::Const(Value::Array(flags)));
        }
        Ok((Expr::Func(Func::Builtin(finals), args), Some(ty)))
    }

    /// The direct arguments and the WITHIN GROUP keys, bound: each key with
    /// its type and (DESC, NULLS FIRST).
    #[allow(clippy::type_complexity)]
    fn within_group_operands(
        &mut self,
        direct: &[&ast::Expr],
        within: &[ast::OrderByExpr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Vec<(Expr, Ty, (bool, bool))>, Vec<(Expr, Ty, (bool, bool))>)> {
        let mut bound_direct = Vec::with_capacity(direct.len());
        for a in direct {
            let (e, t) = self.expr(a, scope, ctx)?;
            bound_direct.push((e, t, (false, false)));
        }
        let mut keys = Vec::with_capacity(within.len());
        for item in within {
            if item.with_fill.is_some() {
                return Err(SqlError::unsupported("WITH FILL"));
            }
            let (e, t) = self.expr(&item.expr, scope, ctx)?;
            let desc = item.options.asc == Some(false);
            keys.push((e, t, (desc, item.options.nulls_first.unwrap_or(desc))));
        }
        Ok((bound_direct, keys))
    }

    /// PostgreSQL's overload resolution of the ordered-set aggregates: the
    /// final function, its result type, and the keys and direct arguments
    /// cast to the types it takes.
    #[allow(clippy::type_complexity)]
    fn ordered_set_types(
        &mut self,
        kind: OrderedSet,
        mut direct: Vec<(Expr, Ty, (bool, bool))>,
        mut keys: Vec<(Expr, Ty, (bool, bool))>,
        sig: &dyn Fn() -> String,
    ) -> Result<(Builtin, DataType, Vec<(Expr, Ty, (bool, bool))>, Vec<Expr>)> {
        use crate::exec::ordered_set as fin;
        let builtin = |name: &'static str, eval: registry::EvalFn, strict: bool| Builtin {
            name,
            eval,
            strict,
            volatility: crate::expr::Volatility::Immutable,
            data: registry::CallData::None,
        };
        // The fraction, and whether it is an array of them.
        let fraction = |b: &mut Self, direct: &mut Vec<(Expr, Ty, (bool, bool))>| -> Result<(Expr, bool)> {
            let (e, t, _) = direct.pop().ok_or_else(|| SqlError::undefined_function(&sig()))?;
            match t {
                // percentile_*(float8[]): one result per fraction, in an array of their shape.
                Some(t) if crate::value::array::elem_type(t).is_some_and(float8_implicit) => {
                    Ok((b.result_cast(e, Some(t), crate::value::array::array_type(DataType::Float8))?, true))
                }
                Some(t) if float8_implicit(t) => Ok((b.result_cast(e, Some(t), Some(DataType::Float8))?, false)),
                None => Ok((b.coerce(e, None, DataType::Float8, "percentile")?, false)),
                Some(_) => Err(SqlError::undefined_function(&sig())),
            }
        };
        let result = |ty: DataType, multi: bool| -> Result<DataType> {
            if !multi {
                return Ok(ty);
            }
            crate::value::array::array_type(ty)
                .ok_or_else(|| SqlError::unsupported(format!("an array of percentiles of {}", type_name(ty))))
        };
        match kind {
            OrderedSet::PercentileCont | OrderedSet::PercentileDisc if direct.len() != 1 || keys.len() != 1 => {
                Err(SqlError::undefined_function(&sig()))
            }
            OrderedSet::Mode if !direct.is_empty() || keys.len() != 1 => Err(SqlError::undefined_function(&sig())),
            OrderedSet::PercentileCont => {
                let (p, multi) = fraction(self, &mut direct)?;
                let (key, t, order) = keys.pop().ok_or_else(|| SqlError::undefined_function(&sig()))?;
                let (key, ty, eval) = match t {
                    Some(DataType::Interval) => {
                        (key, DataType::Interval, fin::percentile_cont_interval as registry::EvalFn)
                    }
                    Some(t) if float8_implicit(t) => (
                        self.result_cast(key, Some(t), Some(DataType::Float8))?,
                        DataType::Float8,
                        fin::percentile_cont_float8 as _,
                    ),
                    None => (
                        self.coerce(key, None, DataType::Float8, "percentile")?,
                        DataType::Float8,
                        fin::percentile_cont_float8 as _,
                    ),
                    Some(_) => return Err(SqlError::undefined_function(&sig())),
                };
                Ok((builtin("percentile_cont", eval, true), result(ty, multi)?, vec![(key, Some(ty), order)], vec![p]))
            }
            OrderedSet::PercentileDisc | OrderedSet::Mode => {
                let Some(ty) = keys[0].1 else {
                    return Err(SqlError::datatype_mismatch(
                        "could not determine polymorphic type because input has type unknown",
                    ));
                };
                if kind == OrderedSet::Mode {
                    return Ok((builtin("mode", fin::mode, true), ty, keys, Vec::new()));
                }
                let (p, multi) = fraction(self, &mut direct)?;
                Ok((builtin("percentile_disc", fin::percentile_disc, true), result(ty, multi)?, keys, vec![p]))
            }
            OrderedSet::Hypothetical(rank) => {
                if direct.len() != keys.len() || keys.is_empty() {
                    return Err(SqlError::undefined_function(&sig()));
                }
                let mut cast_direct = Vec::with_capacity(direct.len());
                let mut cast_keys = Vec::with_capacity(keys.len());
                for ((d, dt, _), (k, kt, order)) in direct.into_iter().zip(keys) {
                    let (mut both, common) = registry::ArgBinder::common(self, vec![(d, dt), (k, kt)], "WITHIN GROUP")?;
                    let k = both.pop().ok_or_else(|| SqlError::new("XX000", "WITHIN GROUP key lost"))?;
                    cast_direct.push(both.pop().ok_or_else(|| SqlError::new("XX000", "direct argument lost"))?);
                    cast_keys.push((k, common, order));
                }
                let ty = match rank {
                    crate::exec::HypotheticalRank::Rank | crate::exec::HypotheticalRank::DenseRank => DataType::Int8,
                    _ => DataType::Float8,
                };
                let eval = fin::hypothetical(rank);
                Ok((builtin(rank.name(), eval, false), ty, cast_keys, cast_direct))
            }
        }
    }

    /// The error for WITHIN GROUP on a function that is not an ordered-set
    /// aggregate pgtier has, as PostgreSQL's ParseFuncOrColumn words it.
    fn not_ordered_set(
        &mut self,
        name: &str,
        direct: &[&ast::Expr],
        within: &[ast::OrderByExpr],
        scope: &Scope<'_>,
    ) -> SqlError {
        // PostgreSQL looks the function up with the direct arguments and the
        // keys as one list: only a function that takes them says it is not
        // an ordered-set aggregate.
        let combined: Vec<ast::Expr> =
            direct.iter().map(|e| (*e).clone()).chain(within.iter().map(|o| o.expr.clone())).collect();
        let ctx = &mut ExprCtx::plain("WITHIN GROUP");
        let found = if let Some(func) = aggregate_named(name, false) {
            self.agg_call(func, name, &combined, false, false, scope, ctx).map(|_| {
                SqlError::new(
                    "42809",
                    format!("{name} is not an ordered-set aggregate, so it cannot have WITHIN GROUP"),
                )
            })
        } else if matches!(name, "row_number" | "ntile" | "lag" | "lead" | "first_value" | "last_value" | "nth_value") {
            return SqlError::unsupported(format!("WITHIN GROUP on window function {name}"));
        } else if crate::expr::registry::lookup(name).is_some() {
            self.scalar_function(name, &combined, scope, ctx).map(|_| {
                SqlError::new("42809", format!("WITHIN GROUP specified, but {name} is not an aggregate function"))
            })
        } else {
            let mut types = Vec::new();
            for e in &combined {
                match self.expr(e, scope, ctx) {
                    Ok((_, t)) => types.push(t.map_or("unknown", type_name)),
                    Err(e) => return e,
                }
            }
            Err(SqlError::undefined_function(&format!("{name}({})", types.join(", "))))
        };
        found.unwrap_or_else(|e| e)
    }
}

/// A WITHIN GROUP call's direct arguments (plain expressions only).
fn within_group_direct_args<'a>(f: &'a ast::Function, name: &str) -> Result<Vec<&'a ast::Expr>> {
    match &f.args {
        ast::FunctionArguments::None => Ok(Vec::new()),
        ast::FunctionArguments::Subquery(_) => Err(SqlError::unsupported("subquery as function argument")),
        ast::FunctionArguments::List(list) => {
            if list.clauses.iter().any(|c| matches!(c, ast::FunctionArgumentClause::OrderBy(_))) {
                return Err(SqlError::syntax("cannot use multiple ORDER BY clauses with WITHIN GROUP"));
            }
            if !list.clauses.is_empty() || list.duplicate_treatment.is_some() {
                return Err(SqlError::unsupported(format!("clauses in {name}() WITHIN GROUP")));
            }
            list.args
                .iter()
                .map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e),
                    _ => Err(SqlError::unsupported(format!("argument form in {name}() WITHIN GROUP"))),
                })
                .collect()
        }
    }
}

/// Types with an implicit cast to float8 (the percentiles' argument type).
fn float8_implicit(t: DataType) -> bool {
    matches!(
        t,
        DataType::Int2
            | DataType::Int4
            | DataType::Int8
            | DataType::Numeric { .. }
            | DataType::Float4
            | DataType::Float8
    ) && types::RegKind::of(t).is_none()
}
