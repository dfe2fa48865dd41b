//! Function calls: builtin scalar functions and the system functions
//! (what drivers and psql call).

use pgtier_engine::DataType;
use sqlparser::ast::{self, ObjectName};

use super::aggregate::aggregate_named;
use super::coerce::{common_type, is_untyped_value, refuse_padded_literals};
use super::{Binder, ExprCtx, Scope, Ty, parts, truncate};
use crate::error::{Result, SqlError};
use crate::expr::{Expr, Func, SeqFunc, SysFunc};
use crate::value::types::{Elem, RegKind};
use crate::value::{self, ArithOp, Category, NUMERIC_ANY, category, type_name};

impl Binder<'_> {
    pub(super) fn function(&mut self, f: &ast::Function, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        if !f.within_group.is_empty() || f.null_treatment.is_some() || f.parameters != ast::FunctionArguments::None {
            return Err(SqlError::unsupported(format!("function call {}", truncate(&f.to_string()))));
        }
        let name = function_name(&f.name)?;
        let mut order_by: &[ast::OrderByExpr] = &[];
        let (args, distinct, star) = match &f.args {
            ast::FunctionArguments::None => (Vec::new(), false, false),
            ast::FunctionArguments::Subquery(q) if name == "array" => return self.array_subquery(q, scope),
            ast::FunctionArguments::Subquery(_) => return Err(SqlError::unsupported("subquery as function argument")),
            ast::FunctionArguments::List(list) => {
                for clause in &list.clauses {
                    match clause {
                        ast::FunctionArgumentClause::OrderBy(items) if order_by.is_empty() => order_by = items,
                        _ => return Err(SqlError::unsupported(format!("clauses in {name}()"))),
                    }
                }
                let distinct = matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct));
                let mut args = Vec::new();
                let mut named = Vec::new();
                let mut star = false;
                for a in &list.args {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) if named.is_empty() => {
                            args.push(e.clone())
                        }
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(_)) => {
                            return Err(SqlError::syntax("positional argument cannot follow named argument"));
                        }
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        ast::FunctionArg::Named { name: arg_name, arg: ast::FunctionArgExpr::Expr(e), .. }
                            if name == "make_interval" =>
                        {
                            named.push((arg_name.value.clone(), e.clone()));
                        }
                        ast::FunctionArg::ExprNamed {
                            name: ast::Expr::Identifier(arg_name),
                            arg: ast::FunctionArgExpr::Expr(e),
                            ..
                        } if name == "make_interval" => {
                            named.push((arg_name.value.clone(), e.clone()));
                        }
                        _ => return Err(SqlError::unsupported(format!("argument form in {name}()"))),
                    }
                }
                if name == "make_interval" {
                    args = super::interval_fns::make_interval_args(args, named)?;
                }
                (args, distinct, star)
            }
        };
        let filter = match &f.filter {
            None => None,
            Some(_) if aggregate_named(&name, star).is_none() => {
                return Err(SqlError::new(
                    "42809",
                    format!("FILTER specified, but {name} is not an aggregate function"),
                ));
            }
            Some(cond) => {
                let (b, t) = self.expr(cond, scope, &mut ExprCtx::plain("FILTER"))?;
                Some(self.boolean(b, t, "FILTER")?)
            }
        };
        if !order_by.is_empty() && aggregate_named(&name, star).is_none() {
            return Err(SqlError::new("42809", format!("ORDER BY specified, but {name} is not an aggregate function")));
        }
        if let Some(over) = &f.over {
            if !order_by.is_empty() {
                return Err(SqlError::unsupported("aggregate ORDER BY is not implemented for window functions"));
            }
            return self.window_function(over, &name, &args, star, distinct, filter, scope, ctx);
        }
        if let Some(func) = aggregate_named(&name, star) {
            return self.aggregate(func, &name, &args, distinct, filter, order_by, scope, ctx);
        }
        if star || distinct {
            return Err(SqlError::syntax(format!("{name}(*) or DISTINCT used with a non-aggregate function")));
        }
        self.scalar_function(&name, &args, scope, ctx)
    }

    /// An argument for an `integer` parameter: smallint or integer (cast),
    /// an unknown literal or parameter (typed integer); bigint and the
    /// other types have no implicit cast to integer, so no such function
    /// (42883 with the call's signature `sig`).
    pub(super) fn int4_param(&mut self, e: Expr, t: Ty, sig: &str) -> Result<Expr> {
        match t {
            None => self.coerce(e, None, DataType::Int4, "integer argument"),
            Some(t) if value::is_int4_implicit(t) => self.result_cast(e, Some(t), Some(DataType::Int4)),
            Some(_) => Err(SqlError::undefined_function(sig)),
        }
    }

    pub(super) fn scalar_function(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let mut bound: Vec<(Expr, Ty)> = Vec::new();
        for a in args {
            // PostgreSQL drops COALESCE's arguments after a non-null
            // constant without simplifying them.
            let decided = name == "coalesce" && bound.iter().any(|(e, _)| matches!(e, Expr::Const(v) if !v.is_null()));
            bound.push(self.lazily(decided, |b| b.expr(a, scope, ctx))?);
        }
        let sig_text = {
            let types: Vec<&str> = bound.iter().map(|(_, t)| t.map_or("unknown", type_name)).collect();
            format!("{name}({})", types.join(", "))
        };
        if super::array_func::is_array_call(name, &bound) {
            return self.array_function(name, bound, &sig_text);
        }
        let sig = || sig_text.clone();
        let nargs = bound.len();
        let arity = |lo: usize, hi: usize| -> Result<()> {
            if nargs < lo || nargs > hi { Err(SqlError::undefined_function(&sig())) } else { Ok(()) }
        };
        let text_fn = |f: Func,
                       lo: usize,
                       hi: usize,
                       arg_types: &[DataType],
                       result: DataType,
                       b: &mut Self,
                       bound: Vec<(Expr, Ty)>|
         -> Result<(Expr, Ty)> {
            arity(lo, hi)?;
            let mut out = Vec::new();
            for (k, (e, t)) in bound.into_iter().enumerate() {
                let want = arg_types.get(k).copied().unwrap_or(DataType::Text);
                let e = if want == DataType::Text {
                    b.text_arg(e, t, name).map_err(|_| SqlError::undefined_function(&sig()))?
                } else {
                    match t {
                        Some(tt)
                            if value::is_integer(tt) && (want == DataType::Int8 || value::is_int4_implicit(tt)) =>
                        {
                            e
                        }
                        None => b.coerce(e, None, want, name)?,
                        Some(_) => return Err(SqlError::undefined_function(&sig())),
                    }
                };
                out.push(e);
            }
            Ok((Expr::Func(f, out), Some(result)))
        };
        use DataType::{Int4, Text};
        match name {
            "lower" => text_fn(Func::Lower, 1, 1, &[Text], Text, self, bound),
            "upper" => text_fn(Func::Upper, 1, 1, &[Text], Text, self, bound),
            "length" | "octet_length" if matches!(bound.as_slice(), [(_, Some(DataType::Bytea))]) => {
                Ok((Expr::Func(Func::OctetLength, bound.into_iter().map(|(e, _)| e).collect()), Some(Int4)))
            }
            "octet_length" => text_fn(Func::OctetLength, 1, 1, &[Text], Int4, self, bound),
            "length" | "char_length" | "character_length" => text_fn(Func::Length, 1, 1, &[Text], Int4, self, bound),
            "substring" if bound.get(1).is_some_and(|(_, t)| t.is_none_or(|t| category(t) == Category::String)) => {
                // substring(text, text): a POSIX regular expression (an unknown
                // literal prefers the string category); with a third text
                // argument, SQL's SIMILAR TO form.
                if nargs == 3 && bound[2].1.is_none_or(|t| category(t) == Category::String) {
                    return Err(SqlError::unsupported("substring(string FROM pattern FOR escape)"));
                }
                if nargs == 3 {
                    return text_fn(Func::Substr, 3, 3, &[Text, Int4, Int4], Text, self, bound);
                }
                text_fn(Func::RegexpSubstring, 2, 2, &[Text, Text], Text, self, bound)
            }
            "substr" | "substring" => text_fn(Func::Substr, 2, 3, &[Text, Int4, Int4], Text, self, bound),
            "lpad" => text_fn(Func::Lpad, 2, 3, &[Text, Int4, Text], Text, self, bound),
            "rpad" => text_fn(Func::Rpad, 2, 3, &[Text, Int4, Text], Text, self, bound),
            "btrim" => text_fn(Func::Btrim, 1, 2, &[Text, Text], Text, self, bound),
            "ltrim" => text_fn(Func::Ltrim, 1, 2, &[Text, Text], Text, self, bound),
            "rtrim" => text_fn(Func::Rtrim, 1, 2, &[Text, Text], Text, self, bound),
            "replace" => text_fn(Func::Replace, 3, 3, &[Text, Text, Text], Text, self, bound),
            "trunc" => {
                arity(1, 2)?;
                // One integer argument: PostgreSQL picks trunc(double precision),
                // float8 being the numeric category's preferred type;
                // trunc(x, n) exists only for numeric.
                let numeric = match bound[0].1 {
                    Some(DataType::Float4 | DataType::Float8) => false,
                    Some(t) if value::is_integer(t) => nargs == 2,
                    Some(t) if value::category(t) == value::Category::Numeric => true,
                    None => true,
                    Some(_) => return Err(SqlError::undefined_function(&sig())),
                };
                if !numeric && nargs == 2 {
                    return Err(SqlError::undefined_function(&sig()));
                }
                let want = if numeric { value::NUMERIC_ANY } else { DataType::Float8 };
                let mut out = Vec::new();
                for (k, (e, t)) in bound.into_iter().enumerate() {
                    out.push(if k == 0 { self.result_cast(e, t, Some(want))? } else { self.int4_param(e, t, &sig())? });
                }
                Ok((Expr::Func(Func::Trunc, out), Some(want)))
            }
            "width_bucket" => {
                arity(4, 4)?;
                let float = bound[..3].iter().any(|(_, t)| matches!(t, Some(DataType::Float4 | DataType::Float8)));
                if bound.iter().any(|(_, t)| t.is_some_and(|t| value::category(t) != value::Category::Numeric)) {
                    return Err(SqlError::undefined_function(&sig()));
                }
                let want = if float { DataType::Float8 } else { value::NUMERIC_ANY };
                let mut out = Vec::new();
                for (k, (e, t)) in bound.into_iter().enumerate() {
                    out.push(if k < 3 { self.result_cast(e, t, Some(want))? } else { self.int4_param(e, t, &sig())? });
                }
                Ok((Expr::Func(Func::WidthBucket, out), Some(Int4)))
            }
            "age" | "make_interval" | "justify_days" | "justify_hours" | "justify_interval" => {
                self.interval_function(name, bound, &sig())
            }
            "isfinite" => {
                arity(1, 1)?;
                let (e, t) = bound.into_iter().next().ok_or_else(|| SqlError::undefined_function(&sig()))?;
                match t {
                    Some(DataType::Date | DataType::Timestamp(_) | DataType::TimestampTz(_) | DataType::Interval) => {}
                    None => {
                        return Err(SqlError::new("42725", format!("function {} is not unique", sig())).with_hint(
                            "Could not choose a best candidate function. You might need to add explicit type casts.",
                        ));
                    }
                    Some(_) => return Err(SqlError::undefined_function(&sig())),
                }
                Ok((Expr::Func(Func::IsFinite, vec![e]), Some(DataType::Bool)))
            }
            "make_date" => {
                arity(3, 3)?;
                let mut out = Vec::new();
                for (e, t) in bound {
                    out.push(self.int4_param(e, t, &sig())?);
                }
                Ok((Expr::Func(Func::MakeDate, out), Some(DataType::Date)))
            }
            "date_trunc" => {
                arity(2, 2)?;
                let mut bound = bound.into_iter();
                let (Some((unit, _)), Some((x, t))) = (bound.next(), bound.next()) else {
                    return Err(SqlError::undefined_function(&sig()));
                };
                let Expr::Const(pgtier_engine::Value::Text(unit)) = unit else {
                    return Err(SqlError::unsupported("date_trunc with a unit that is not a constant"));
                };
                let unit = crate::expr::DateField::parse_trunc(&unit).ok_or_else(|| {
                    SqlError::new(
                        "22023",
                        format!("unit \"{}\" not recognized for type timestamp without time zone", unit.to_lowercase()),
                    )
                })?;
                // A date is truncated as the timestamptz of its midnight, as PostgreSQL casts it.
                let (x, tz) = match t {
                    Some(DataType::Timestamp(_)) => (x, false),
                    Some(DataType::TimestampTz(_)) => (x, true),
                    Some(DataType::Date) => (self.result_cast(x, t, Some(DataType::TimestampTz(None)))?, true),
                    None => {
                        return Err(SqlError::new("42725", format!("function {} is not unique", sig())).with_hint(
                            "Could not choose a best candidate function. You might need to add explicit type casts.",
                        ));
                    }
                    Some(_) => return Err(SqlError::undefined_function(&sig())),
                };
                Ok((
                    Expr::Func(Func::DateTrunc(unit, tz), vec![x]),
                    Some(if tz { DataType::TimestampTz(None) } else { DataType::Timestamp(None) }),
                ))
            }
            "date_part" => {
                arity(2, 2)?;
                let mut bound = bound.into_iter();
                let (Some((field, _)), Some((x, t))) = (bound.next(), bound.next()) else {
                    return Err(SqlError::undefined_function(&sig()));
                };
                let Expr::Const(pgtier_engine::Value::Text(field)) = field else {
                    return Err(SqlError::unsupported("date_part with a field that is not a constant"));
                };
                self.extract(&field, x, t, false)
            }
            "pg_size_pretty" => {
                arity(1, 1)?;
                match bound[0].1 {
                    Some(DataType::Int8) => {}
                    // PostgreSQL has a bigint and a numeric version, and picks neither for these.
                    Some(DataType::Int2 | DataType::Int4) | None => {
                        return Err(SqlError::new("42725", format!("function {} is not unique", sig())).with_hint(
                            "Could not choose a best candidate function. You might need to add explicit type casts.",
                        ));
                    }
                    Some(t) if value::category(t) == value::Category::Numeric => {
                        return Err(SqlError::unsupported("pg_size_pretty(numeric)"));
                    }
                    Some(_) => return Err(SqlError::undefined_function(&sig())),
                }
                let (e, t) = bound.into_iter().next().ok_or_else(|| SqlError::undefined_function(&sig()))?;
                Ok((Expr::Func(Func::SizePretty, vec![self.result_cast(e, t, Some(DataType::Int8))?]), Some(Text)))
            }
            "md5" => {
                arity(1, 1)?;
                if bound[0].1 == Some(DataType::Bytea) {
                    let (e, _) = bound.into_iter().next().ok_or_else(|| SqlError::undefined_function(&sig()))?;
                    return Ok((Expr::Func(Func::Md5, vec![e]), Some(Text)));
                }
                text_fn(Func::Md5, 1, 1, &[Text], Text, self, bound)
            }
            "factorial" => {
                arity(1, 1)?;
                let Some((e, t)) = bound.into_iter().next() else { return Err(SqlError::undefined_function(&sig())) };
                let e = match t {
                    None => self.coerce(e, None, DataType::Int8, name)?,
                    Some(t) if value::is_integer(t) => self.result_cast(e, Some(t), Some(DataType::Int8))?,
                    Some(_) => return Err(SqlError::undefined_function(&sig())),
                };
                Ok((Expr::Func(Func::Factorial, vec![e]), Some(NUMERIC_ANY)))
            }
            "power" | "pow" | "sqrt" => {
                let (f, n) = if name == "sqrt" { (Func::Sqrt, 1) } else { (Func::Power, 2) };
                arity(n, n)?;
                // A float argument picks the float8 version (float8 does not
                // cast to numeric implicitly); else a numeric one picks the
                // numeric version, with its own precision rules (refused).
                let any_float = bound.iter().any(|(_, t)| t.is_some_and(value::is_float));
                if let (Func::Sqrt, Some((e, Some(t @ DataType::Numeric { .. })))) = (f, bound.first())
                    && RegKind::of(*t).is_none()
                {
                    return Ok((Expr::Func(Func::Sqrt, vec![e.clone()]), Some(NUMERIC_ANY)));
                }
                // numeric ^ numeric: a numeric argument and no float one.
                let numeric = !any_float && bound.iter().any(|(_, t)| matches!(t, Some(DataType::Numeric { .. })));
                let want = if numeric { NUMERIC_ANY } else { DataType::Float8 };
                let mut out = Vec::new();
                for (e, t) in bound {
                    match t {
                        Some(t) if value::category(t) != Category::Numeric || RegKind::of(t).is_some() => {
                            return Err(SqlError::undefined_function(&sig()));
                        }
                        None if numeric => out.push(self.coerce(e, None, want, name)?),
                        _ => out.push(self.result_cast(e, t, Some(want))?),
                    }
                }
                Ok((Expr::Func(f, out), Some(want)))
            }
            "clock_timestamp" => {
                arity(0, 0)?;
                Ok((Expr::Func(Func::ClockTimestamp, Vec::new()), Some(DataType::TimestampTz(None))))
            }
            "random" => {
                arity(0, 0)?;
                Ok((Expr::Func(Func::Random, Vec::new()), Some(DataType::Float8)))
            }
            "gen_random_uuid" => {
                arity(0, 0)?;
                Ok((Expr::Func(Func::GenRandomUuid, Vec::new()), Some(DataType::Uuid)))
            }
            "repeat" => text_fn(Func::Repeat, 2, 2, &[Text, Int4], Text, self, bound),
            "split_part" => text_fn(Func::SplitPart, 3, 3, &[Text, Text, Int4], Text, self, bound),
            "left" => text_fn(Func::Left, 2, 2, &[Text, Int4], Text, self, bound),
            "right" => text_fn(Func::Right, 2, 2, &[Text, Int4], Text, self, bound),
            "initcap" => text_fn(Func::Initcap, 1, 1, &[Text], Text, self, bound),
            "translate" => text_fn(Func::Translate, 3, 3, &[Text, Text, Text], Text, self, bound),
            "starts_with" => text_fn(Func::StartsWith, 2, 2, &[Text, Text], DataType::Bool, self, bound),
            "to_hex" => {
                arity(1, 1)?;
                // smallint and unknown fit to_hex(integer) and to_hex(bigint) alike.
                if matches!(bound[0].1, None | Some(DataType::Int2)) {
                    return Err(SqlError::new("42725", format!("function {} is not unique", sig())).with_hint(
                        "Could not choose a best candidate function. You might need to add explicit type casts.",
                    ));
                }
                let wide = bound[0].1 == Some(DataType::Int8);
                text_fn(Func::ToHex(wide), 1, 1, &[if wide { DataType::Int8 } else { Int4 }], Text, self, bound)
            }
            "concat_ws" => {
                if nargs < 2 {
                    return Err(SqlError::undefined_function(&sig()));
                }
                let mut out = Vec::new();
                for (e, t) in bound {
                    out.push(match t {
                        None => self.coerce(e, None, Text, name)?,
                        _ => e,
                    });
                }
                Ok((Expr::Func(Func::ConcatWs, out), Some(Text)))
            }
            "position" | "strpos" => {
                let swapped = if name == "strpos" { bound.into_iter().rev().collect() } else { bound };
                text_fn(Func::Position, 2, 2, &[Text, Text], Int4, self, swapped)
            }
            "concat" => {
                // VARIADIC "any": at least one argument.
                arity(1, usize::MAX)?;
                let mut out = Vec::new();
                // concat() prints each argument with its output function:
                // char(n) keeps its padding (concat('a'::char(3), 'x') is 'a  x').
                for (e, t) in bound {
                    out.push(match t {
                        None => self.coerce(e, None, Text, name)?,
                        _ => e,
                    });
                }
                Ok((Expr::Func(Func::Concat, out), Some(Text)))
            }
            // void in PostgreSQL; pgtier's pseudo types go out as text,
            // an empty one here.
            "pg_sleep" => {
                arity(1, 1)?;
                let (e, t) = bound.into_iter().next().ok_or_else(|| SqlError::undefined_function(&sig()))?;
                let e = match t {
                    None => self.coerce(e, None, DataType::Float8, name)?,
                    Some(t) if value::category(t) == value::Category::Numeric => {
                        self.result_cast(e, Some(t), Some(DataType::Float8))?
                    }
                    Some(_) => return Err(SqlError::undefined_function(&sig())),
                };
                Ok((Expr::Func(Func::PgSleep, vec![e]), Some(Text)))
            }
            "now" | "transaction_timestamp" => {
                arity(0, 0)?;
                Ok((Expr::Func(Func::Now, Vec::new()), Some(DataType::TimestampTz(None))))
            }
            // The SQL forms take an optional precision (a literal).
            "current_timestamp" | "localtimestamp" | "localtime" => {
                arity(0, 1)?;
                let p = clock_precision(name, &bound)?;
                let ty = match name {
                    "current_timestamp" => DataType::TimestampTz(p),
                    "localtimestamp" => DataType::Timestamp(p),
                    _ => DataType::Time(p),
                };
                let now = Expr::Func(Func::Now, Vec::new());
                let e = if ty == DataType::TimestampTz(None) { now } else { Expr::Cast(now.boxed(), ty, false) };
                Ok((e, Some(ty)))
            }
            "current_time" => Err(SqlError::unsupported("current_time (time with time zone)")),
            "current_date" => {
                arity(0, 0)?;
                Ok((Expr::Cast(Expr::Func(Func::Now, Vec::new()).boxed(), DataType::Date, false), Some(DataType::Date)))
            }
            "abs" => {
                arity(1, 1)?;
                let (e, t) = bound.into_iter().next().ok_or_else(|| SqlError::undefined_function(&sig()))?;
                match t {
                    Some(ty) if category(ty) == Category::Numeric => {
                        let rt = if let DataType::Numeric { .. } = ty { NUMERIC_ANY } else { ty };
                        Ok((Expr::Func(Func::Abs, vec![e]), Some(rt)))
                    }
                    None => {
                        let e = self.coerce(e, None, DataType::Float8, name)?;
                        Ok((Expr::Func(Func::Abs, vec![e]), Some(DataType::Float8)))
                    }
                    Some(_) => Err(SqlError::undefined_function(&sig())),
                }
            }
            "round" | "ceil" | "ceiling" | "floor" => {
                let f = match name {
                    "round" => Func::Round,
                    "floor" => Func::Floor,
                    _ => Func::Ceil,
                };
                arity(1, if f == Func::Round { 2 } else { 1 })?;
                let mut it = bound.into_iter();
                let (e, t) = it.next().ok_or_else(|| SqlError::undefined_function(&sig()))?;
                let digits = it.next();
                let rt = match (t, &digits) {
                    (Some(DataType::Float4 | DataType::Float8) | None, None) => DataType::Float8,
                    // An integer argument: PostgreSQL picks the double
                    // precision version (float8 is the preferred type of the
                    // numeric category); round(int, n) exists only for numeric.
                    (Some(ty), None) if value::is_integer(ty) => DataType::Float8,
                    (Some(ty), _)
                        if category(ty) == Category::Numeric && !(value::is_float(ty) && digits.is_some()) =>
                    {
                        NUMERIC_ANY
                    }
                    _ => return Err(SqlError::undefined_function(&sig())),
                };
                let e = match t {
                    None => self.coerce(e, None, rt, name)?,
                    Some(ty) if ty == rt || matches!(ty, DataType::Numeric { .. }) && rt == NUMERIC_ANY => e,
                    Some(_) => Expr::Cast(e.boxed(), rt, false),
                };
                let mut args = vec![e];
                if let Some((d, dt)) = digits {
                    args.push(self.int4_param(d, dt, &sig())?);
                }
                Ok((Expr::Func(f, args), Some(rt)))
            }
            "mod" => {
                arity(2, 2)?;
                let mut it = bound.into_iter();
                let (Some((x, xt)), Some((y, yt))) = (it.next(), it.next()) else {
                    return Err(SqlError::undefined_function(&sig()));
                };
                let (e, t) = self.arith(ArithOp::Mod, x, xt, y, yt)?;
                Ok((e, t))
            }
            "coalesce" | "greatest" | "least" => {
                if bound.is_empty() {
                    return Err(SqlError::syntax(format!("syntax error at or near \")\" in {name}()")));
                }
                let types: Vec<Ty> = bound.iter().map(|b| b.1).collect();
                let untyped: Vec<bool> = bound.iter().map(|(e, t)| is_untyped_value(e, *t)).collect();
                refuse_padded_literals(&types, &untyped, &name.to_uppercase())?;
                let common = common_type(&types, &name.to_uppercase())?.or(Some(Text));
                let mut out = Vec::new();
                for (e, t) in bound {
                    out.push(self.result_cast(e, t, common)?);
                }
                let e = match name {
                    "coalesce" => Expr::Coalesce(out),
                    "greatest" => Expr::Func(Func::Greatest, out),
                    _ => Expr::Func(Func::Least, out),
                };
                Ok((e, common))
            }
            "nullif" if nargs == 2 => {
                arity(2, 2)?;
                let mut it = bound.into_iter();
                let (Some((x, xt)), Some((y, yt))) = (it.next(), it.next()) else {
                    return Err(SqlError::undefined_function(&sig()));
                };
                // NULLIF('a', c) returns 'a' as character without a length
                // (unpadded); pgtier's character carries c's length.
                refuse_padded_literals(&[yt], &[is_untyped_value(&x, xt)], "NULLIF")?;
                let (x, y) = self.unify_cmp(x, xt, y, yt, "=")?;
                let t = xt.or(yt).or(Some(Text));
                Ok((Expr::NullIf(x.boxed(), y.boxed()), t))
            }
            "reverse" => text_fn(Func::Reverse, 1, 1, &[Text], Text, self, bound),
            "chr" => text_fn(Func::Chr, 1, 1, &[Int4], Text, self, bound),
            "ascii" => text_fn(Func::Ascii, 1, 1, &[Text], Int4, self, bound),
            "regexp_replace" => {
                // PostgreSQL 15's forms with a start position (and an occurrence).
                if nargs > 4 || (nargs == 4 && bound[3].1.is_some_and(value::is_integer)) {
                    return text_fn(
                        Func::RegexpReplaceAt,
                        4,
                        6,
                        &[Text, Text, Text, Int4, Int4, Text],
                        Text,
                        self,
                        bound,
                    );
                }
                text_fn(Func::RegexpReplace, 3, 4, &[Text; 4], Text, self, bound)
            }
            "regexp_match" => text_fn(Func::RegexpMatch, 2, 3, &[Text; 3], super::builtin::text_array(), self, bound),
            "regexp_like" => text_fn(Func::RegexpLike, 2, 3, &[Text; 3], DataType::Bool, self, bound),
            "regexp_split_to_array" => {
                text_fn(Func::RegexpSplitToArray, 2, 3, &[Text; 3], super::builtin::text_array(), self, bound)
            }
            "regexp_count" => text_fn(Func::RegexpCount, 2, 4, &[Text, Text, Int4, Text], Int4, self, bound),
            "regexp_instr" => {
                text_fn(Func::RegexpInstr, 2, 7, &[Text, Text, Int4, Int4, Int4, Text, Int4], Int4, self, bound)
            }
            "regexp_substr" => {
                text_fn(Func::RegexpSubstr, 2, 6, &[Text, Text, Int4, Int4, Text, Int4], Text, self, bound)
            }
            _ if super::numeric_fns::NUMERIC_FUNCTIONS.contains(&name) => self.numeric_function(name, bound, &sig_text),
            _ if super::builtin::MORE_FUNCTIONS.contains(&name) => self.more_function(name, bound, &sig_text),
            _ if super::json::is_unsupported_json_function(name) => {
                let s = sig();
                self.json_function(name, bound, &s)?.ok_or_else(|| SqlError::unsupported(format!("function {name}")))
            }
            _ => self.sys_function(name, bound)?.ok_or_else(|| SqlError::undefined_function(&sig())),
        }
    }

    /// System functions, after the builtin scalar functions.
    fn sys_function(&mut self, name: &str, bound: Vec<(Expr, Ty)>) -> Result<Option<(Expr, Ty)>> {
        if name == "pg_partition_ancestors" {
            return Err(SqlError::unsupported("pg_partition_ancestors() outside FROM or a SELECT list without FROM"));
        }
        if let Some(call) = self.backend_sequence_call(name, &bound)? {
            return Ok(Some(call));
        }
        // A regclass argument (nextval('s')) is looked up as `::regclass` would.
        let mut coerce = |e: Expr, t: Ty, to: DataType| match RegKind::of(to) {
            Some(kind) => self.reg_cast(e, t, kind).map(|(e, _)| e),
            None => self.coerce(e, t, to, name),
        };
        bind_function(name, bound, &mut coerce)
    }

    /// nextval('s') / currval('s') of PostgreSQL's sequence `s` that a
    /// cached column's default draws from, when no relation of pgtier's has
    /// that name: bound to the name (the executor draws from the cache's
    /// reserved block), the plan depending on that table (so it re-plans
    /// when the group goes). setval is refused: the values are PostgreSQL's.
    /// None for every other call, which binds as before (a sequence named
    /// nowhere is 42P01, and the server may pass the statement through).
    fn backend_sequence_call(&mut self, name: &str, bound: &[(Expr, Ty)]) -> Result<Option<(Expr, Ty)>> {
        let call = match (name, bound.len()) {
            ("nextval", 1) => SeqFunc::Nextval,
            ("currval", 1) => SeqFunc::Currval,
            ("setval", 2 | 3) => SeqFunc::Setval,
            _ => return Ok(None),
        };
        let Some((Expr::Const(pgtier_engine::Value::Text(text)), None | Some(DataType::Text | DataType::Varchar(_)))) =
            bound.first()
        else {
            return Ok(None);
        };
        let settings = std::collections::HashMap::new();
        match crate::catalog::reg_lookup_in(self.catalog, self.path, &settings, RegKind::Class, text) {
            Err(e) if matches!(e.sqlstate, "42P01" | "3F000") => {}
            _ => return Ok(None),
        }
        let Some((table, sequence)) = crate::catalog::backend_sequence(self.catalog, text) else { return Ok(None) };
        if call == SeqFunc::Setval {
            return Err(SqlError::unsupported(format!("setval of sequence \"{text}\", whose values pgtier reserves from PostgreSQL"))
                .with_hint("Run setval on PostgreSQL: pgtier hands out the values it has already reserved first, as a session with a sequence CACHE does."));
        }
        if !self.deps.iter().any(|d| std::sync::Arc::ptr_eq(d, &table)) {
            self.deps.push(table);
        }
        let key = pgtier_cache::KeyDefault::sequence_key(&sequence);
        Ok(Some((
            Expr::Func(Func::Sys(SysFunc::Sequence(call)), vec![Expr::Const(pgtier_engine::Value::Text(key))]),
            Some(DataType::Int8),
        )))
    }

    /// `EXTRACT(field FROM x)` (numeric) or `date_part('field', x)`
    /// (float8) of a date, timestamp or timestamptz. date_part of a date is
    /// PostgreSQL's SQL function over its timestamp (so its hour is 0).
    pub(super) fn extract(&mut self, field: &str, x: Expr, t: Ty, numeric: bool) -> Result<(Expr, Ty)> {
        let field = field.trim_matches('\'');
        let (x, t) = match t {
            Some(DataType::Date) if !numeric => {
                (self.result_cast(x, t, Some(DataType::Timestamp(None)))?, Some(DataType::Timestamp(None)))
            }
            Some(DataType::Date | DataType::Timestamp(_) | DataType::TimestampTz(_)) => (x, t),
            // An untyped literal fits several of PostgreSQL's candidates.
            None => {
                let name = if numeric { "extract" } else { "date_part" };
                return Err(SqlError::new(
                    "42725",
                    format!("function pg_catalog.{name}(unknown, unknown) is not unique"),
                )
                .with_hint("Could not choose a best candidate function. You might need to add explicit type casts."));
            }
            Some(DataType::Time(_) | DataType::Interval) => (x, t),
            Some(other) => {
                let what = if numeric { "extract" } else { "date_part" };
                return Err(SqlError::undefined_function(&format!("{what}(unknown, {})", type_name(other))));
            }
        };
        let Some(f) = crate::expr::DateField::parse(field) else {
            let ty = t.map_or_else(|| "unknown".to_owned(), value::full_type_name);
            return Err(SqlError::new(
                "22023",
                format!("unit \"{}\" not recognized for type {ty}", field.to_lowercase()),
            ));
        };
        Ok((Expr::Func(Func::Extract(f, numeric), vec![x]), Some(if numeric { NUMERIC_ANY } else { DataType::Float8 })))
    }

    /// `current_schema` written without parentheses.
    pub(super) fn keyword_function(&mut self, name: &str) -> Result<Option<(Expr, Ty)>> {
        match name {
            "current_schema" => self.sys_function(name, Vec::new()),
            _ => Ok(None),
        }
    }
}

/// A function's name: `pg_catalog.f` is `f`.
pub(super) fn function_name(name: &ObjectName) -> Result<String> {
    match parts(name)?.as_slice() {
        [n] => Ok(n.clone()),
        [s, n] if s == "pg_catalog" || s == "public" => Ok(n.clone()),
        // Not on the search path in PostgreSQL either: only by this name.
        [s, n] if s == "information_schema" && n == "_pg_expandarray" => Ok(EXPAND_ARRAY.to_owned()),
        [s, _] => Err(SqlError::new("3F000", format!("schema \"{s}\" does not exist"))),
        _ => Err(SqlError::unsupported(format!("name {name}"))),
    }
}

/// `information_schema._pg_expandarray`, as [`function_name`] gives it.
pub(super) const EXPAND_ARRAY: &str = "information_schema._pg_expandarray";

/// Binds a system function call; None if `name` is not one.
fn bind_function(
    name: &str,
    args: Vec<(Expr, Ty)>,
    coerce: &mut dyn FnMut(Expr, Ty, DataType) -> Result<Expr>,
) -> Result<Option<(Expr, Ty)>> {
    use DataType::{Bool, Int4, Int8, Text};
    let n = args.len();
    let sig = {
        let types: Vec<&str> = args.iter().map(|(_, t)| t.map_or("unknown", value::type_name)).collect();
        format!("{name}({})", types.join(", "))
    };
    let bad = || SqlError::undefined_function(&sig);
    let array_arg = |k: usize| -> Option<Elem> { args.get(k).and_then(|a| a.1).and_then(Elem::of) };
    let (f, want, ret): (SysFunc, Vec<DataType>, DataType) = match (name, n) {
        ("version", 0) => (SysFunc::Version, vec![], Text),
        ("current_setting", 1) => (SysFunc::CurrentSetting, vec![Text], Text),
        ("current_setting", 2) => (SysFunc::CurrentSetting, vec![Text, Bool], Text),
        ("set_config", 3) => (SysFunc::SetConfig, vec![Text, Text, Bool], Text),
        ("current_database" | "current_catalog", 0) => (SysFunc::CurrentDatabase, vec![], Text),
        ("current_schema", 0) => (SysFunc::CurrentSchema, vec![], Text),
        ("current_schemas", 1) => (SysFunc::CurrentSchemas, vec![Bool], Elem::Text.data_type()),
        ("current_user" | "session_user" | "user" | "current_role" | "getpgusername", 0) => {
            (SysFunc::CurrentUser, vec![], Text)
        }
        ("pg_backend_pid", 0) => (SysFunc::BackendPid, vec![], Int4),
        ("format_type", 2) => (SysFunc::FormatType, vec![Int8, Int4], Text),
        ("pg_get_indexdef", 1) => (SysFunc::IndexDef, vec![Int8], Text),
        ("pg_get_indexdef", 3) => (SysFunc::IndexDef, vec![Int8, Int4, Bool], Text),
        ("pg_get_constraintdef", 1) => (SysFunc::ConstraintDef, vec![Int8], Text),
        ("pg_get_constraintdef", 2) => (SysFunc::ConstraintDef, vec![Int8, Bool], Text),
        ("pg_get_expr", 2) => (SysFunc::GetExpr, vec![Text, Int8], Text),
        ("pg_get_expr", 3) => (SysFunc::GetExpr, vec![Text, Int8, Bool], Text),
        ("pg_get_userbyid", 1) => (SysFunc::UserById, vec![Int8], Text),
        ("pg_table_is_visible", 1) => (SysFunc::TableIsVisible, vec![Int8], Bool),
        ("pg_type_is_visible", 1) => (SysFunc::TypeIsVisible, vec![Int8], Bool),
        ("obj_description", 1 | 2) | ("shobj_description", 2) | ("col_description", 2) => {
            (SysFunc::NoDescription, vec![Int8, if name == "col_description" { Int4 } else { Text }], Text)
        }
        ("pg_encoding_to_char", 1) => (SysFunc::EncodingToChar, vec![Int4], Text),
        (
            "has_table_privilege"
            | "has_schema_privilege"
            | "has_database_privilege"
            | "has_any_column_privilege"
            | "pg_has_role",
            2 | 3,
        ) => (SysFunc::HasPrivilege, vec![Text; n], Bool),
        ("has_column_privilege", 3 | 4) => (SysFunc::HasPrivilege, vec![Text; n], Bool),
        ("pg_relation_is_publishable", 1) => (SysFunc::RelationIsPublishable, vec![Int8], Bool),
        // pg_get_viewdef(text) names the view; an untyped literal picks it, as in PostgreSQL.
        ("pg_get_viewdef", 1 | 2) if matches!(args[0].1, None | Some(Text)) => {
            (SysFunc::ViewDefByName, vec![Text, Bool][..n].to_vec(), Text)
        }
        ("pg_get_viewdef", 1 | 2) => (SysFunc::ViewDef, vec![Int8, Bool][..n].to_vec(), Text),
        ("pg_get_statisticsobjdef_columns" | "pg_get_triggerdef" | "pg_get_partkeydef" | "pg_get_ruledef", 1 | 2) => {
            (SysFunc::NullResult, vec![Int8; n], Text)
        }
        ("pg_get_serial_sequence", 2) => (SysFunc::SerialSequence, vec![Text, Text], Text),
        ("nextval", 1) => (SysFunc::Sequence(SeqFunc::Nextval), vec![RegKind::Class.data_type()], Int8),
        ("currval", 1) => (SysFunc::Sequence(SeqFunc::Currval), vec![RegKind::Class.data_type()], Int8),
        ("setval", 2) => (SysFunc::Sequence(SeqFunc::Setval), vec![RegKind::Class.data_type(), Int8], Int8),
        ("setval", 3) => (SysFunc::Sequence(SeqFunc::Setval), vec![RegKind::Class.data_type(), Int8, Bool], Int8),
        ("lastval", 0) => (SysFunc::Sequence(SeqFunc::Lastval), vec![], Int8),
        // pg_proc is empty: no function is there to describe.
        ("pg_get_function_result" | "pg_get_function_arguments" | "pg_get_function_identity_arguments", 1) => {
            (SysFunc::NullResult, vec![Int8], Text)
        }
        ("pg_function_is_visible", 1) => (SysFunc::NullResult, vec![Int8], Bool),
        ("pg_is_in_recovery", 0) => (SysFunc::IsInRecovery, vec![], Bool),
        ("quote_ident", 1) => (SysFunc::QuoteIdent, vec![Text], Text),
        // pgtier has no partitioning: no relation has a partition root.
        ("pg_partition_root", 1) => (SysFunc::NullResult, vec![Int8], RegKind::Class.data_type()),
        ("to_regclass", 1) => (SysFunc::RegIn(RegKind::Class, true), vec![Text], RegKind::Class.data_type()),
        ("to_regtype", 1) => (SysFunc::RegIn(RegKind::Type, true), vec![Text], RegKind::Type.data_type()),
        ("to_regnamespace", 1) => {
            (SysFunc::RegIn(RegKind::Namespace, true), vec![Text], RegKind::Namespace.data_type())
        }
        ("array_to_string", 2 | 3) => {
            let e = array_arg(0).ok_or_else(bad)?;
            (SysFunc::ArrayToString(e), vec![e.data_type(), Text, Text][..n].to_vec(), Text)
        }
        ("array_upper" | "array_lower" | "array_length", 2) => {
            let e = array_arg(0).ok_or_else(bad)?;
            let f = match name {
                "array_upper" => SysFunc::ArrayUpper(e),
                "array_lower" => SysFunc::ArrayLower(e),
                _ => SysFunc::ArrayLength(e),
            };
            (f, vec![e.data_type(), Int4], Int4)
        }
        ("cardinality", 1) => {
            let e = array_arg(0).ok_or_else(bad)?;
            (SysFunc::Cardinality(e), vec![e.data_type()], Int4)
        }
        (
            "pg_table_size" | "pg_relation_size" | "pg_total_relation_size" | "pg_indexes_size" | "pg_database_size",
            _,
        ) => {
            return Err(SqlError::unsupported(format!("{name}(): pgtier keeps no relation files to measure")));
        }
        _ => return Ok(None),
    };
    let mut out = Vec::with_capacity(n);
    if f == SysFunc::NullResult {
        // Never looks at its arguments: any types do.
        for (e, t) in args {
            out.push(if t.is_none() { coerce(e, None, Text)? } else { e });
        }
        return Ok(Some((Expr::Func(Func::Sys(f), out), Some(ret))));
    }
    for ((e, t), w) in args.into_iter().zip(want) {
        out.push(match t {
            Some(t) if t == w => e,
            _ if RegKind::of(w).is_some() => coerce(e, t, w)?,
            Some(t) if RegKind::of(t).is_some() && w == Int8 => e,
            Some(t) if value::category(t) == value::category(w) && Elem::of(t).is_none() && Elem::of(w).is_none() => {
                if w == Text {
                    e
                } else {
                    Expr::Cast(e.boxed(), w, false)
                }
            }
            None => coerce(e, None, w)?,
            Some(_) => return Err(bad()),
        });
    }
    Ok(Some((Expr::Func(Func::Sys(f), out), Some(ret))))
}

/// The precision of `current_timestamp(p)`, `localtimestamp(p)` or
/// `localtime(p)` (`bound`: the call's arguments): PostgreSQL's grammar
/// takes an unsigned integer literal there (anything else is a syntax
/// error) and reduces one above 6 to 6.
fn clock_precision(name: &str, bound: &[(Expr, Ty)]) -> Result<Option<u8>> {
    let [(arg, _)] = bound else { return Ok(None) };
    match arg {
        Expr::Const(v) if v.as_i64().is_some_and(|p| p >= 0) => {
            Ok(Some(u8::try_from(v.as_i64().unwrap_or(6).min(6)).unwrap_or(6)))
        }
        _ => Err(SqlError::syntax(format!("{name} takes an unsigned integer literal as its precision"))),
    }
}
