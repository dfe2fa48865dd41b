//! The mathematical functions, declared in [`DEFS`]: abs, round, ceil,
//! floor, trunc, mod, width_bucket, factorial, power, sqrt, cbrt, exp, ln,
//! log, log10, sign, pi, div, gcd, lcm, random, scale, min_scale,
//! trim_scale, float4send, float8send, sinh, cosh, tanh, asinh, acosh,
//! atanh, to_number and to_char
//! of a number (bound with the datetime to_char; both in num_format.rs). exp, ln and log10
//! are Rust's (correctly rounded where glibc's are, which PostgreSQL
//! calls); cbrt is glibc's algorithm, which is not correctly rounded
//! (cbrt(27) is 3.0000000000000004 in PostgreSQL on glibc). Wide, NaN and
//! infinite numerics go to numeric_wide_fns.rs.

use std::cmp::Ordering;

use pgtier_engine::{DataType, Numeric, Value};

use super::numeric_wide_fns::{self, Wide, eval_if_wide};
use super::registry::{ArgBinder, Call, EvalCtx, EvalFn, FunctionDef, Ty, Volatility, float, int};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value::types::RegKind;
use crate::value::{self, ArithOp, Category, NUMERIC_ANY, category};

use Volatility::Immutable;

/// The mathematical functions.
pub(super) const DEFS: &[FunctionDef] = &[
    FunctionDef { names: &["abs"], volatility: Immutable, resolve: resolve_abs },
    FunctionDef {
        names: &["round"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_round(def, b, call, round),
    },
    FunctionDef {
        names: &["ceil", "ceiling"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_round(def, b, call, ceil),
    },
    FunctionDef {
        names: &["floor"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_round(def, b, call, floor),
    },
    FunctionDef { names: &["trunc"], volatility: Immutable, resolve: resolve_trunc },
    FunctionDef {
        names: &["mod"],
        volatility: Immutable,
        resolve: |_, b, call| {
            call.arity(2, 2)?;
            let (x, y) = call.pair()?;
            b.arith(ArithOp::Mod, x, y)
        },
    },
    FunctionDef { names: &["width_bucket"], volatility: Immutable, resolve: resolve_width_bucket },
    FunctionDef { names: &["factorial"], volatility: Immutable, resolve: resolve_factorial },
    FunctionDef {
        names: &["power", "pow"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_power(def, b, call, power),
    },
    FunctionDef { names: &["sqrt"], volatility: Immutable, resolve: |def, b, call| resolve_power(def, b, call, sqrt) },
    FunctionDef {
        names: &["cbrt"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_float_fn(def, b, call, cbrt),
    },
    FunctionDef { names: &["exp"], volatility: Immutable, resolve: |def, b, call| resolve_float_fn(def, b, call, exp) },
    FunctionDef { names: &["ln"], volatility: Immutable, resolve: |def, b, call| resolve_float_fn(def, b, call, ln) },
    FunctionDef {
        names: &["log", "log10"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_float_fn(def, b, call, log10),
    },
    FunctionDef {
        names: &["sign"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_float_fn(def, b, call, sign),
    },
    FunctionDef {
        names: &["pi"],
        volatility: Immutable,
        resolve: |def, _, call| {
            call.arity(0, 0)?;
            Ok((def.expr(|_, _| Ok(Value::Float8(std::f64::consts::PI)), Vec::new()), Some(DataType::Float8)))
        },
    },
    FunctionDef { names: &["div"], volatility: Immutable, resolve: resolve_div },
    FunctionDef { names: &["gcd"], volatility: Immutable, resolve: |def, b, call| resolve_gcd(def, b, call, gcd) },
    FunctionDef { names: &["lcm"], volatility: Immutable, resolve: |def, b, call| resolve_gcd(def, b, call, lcm) },
    FunctionDef {
        names: &["random"],
        volatility: Volatility::Volatile,
        resolve: |def, _, call| {
            call.arity(0, 0)?;
            Ok((def.expr(|_, _| Ok(Value::Float8(random_unit())), Vec::new()), Some(DataType::Float8)))
        },
    },
    FunctionDef {
        names: &["scale"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (NUMERIC_ANY, DataType::Int4), scale),
    },
    FunctionDef {
        names: &["min_scale"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (NUMERIC_ANY, DataType::Int4), min_scale),
    },
    FunctionDef {
        names: &["to_number"],
        volatility: Immutable,
        resolve: |def, b, call| {
            super::registry::text_fn(def, b, call, to_number, (2, 2), &[DataType::Text, DataType::Text], NUMERIC_ANY)
        },
    },
    FunctionDef {
        names: &["trim_scale"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (NUMERIC_ANY, NUMERIC_ANY), trim_scale),
    },
    FunctionDef {
        names: &["float4send"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (DataType::Float4, DataType::Bytea), float4send),
    },
    FunctionDef {
        names: &["float8send"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (DataType::Float8, DataType::Bytea), float8send),
    },
    FunctionDef {
        names: &["sinh"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (DataType::Float8, DataType::Float8), sinh),
    },
    FunctionDef {
        names: &["cosh"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (DataType::Float8, DataType::Float8), cosh),
    },
    FunctionDef {
        names: &["asinh"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (DataType::Float8, DataType::Float8), asinh),
    },
    FunctionDef {
        names: &["acosh"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (DataType::Float8, DataType::Float8), acosh),
    },
    FunctionDef {
        names: &["atanh"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (DataType::Float8, DataType::Float8), atanh),
    },
    FunctionDef {
        names: &["tanh"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_unary(def, b, call, (DataType::Float8, DataType::Float8), tanh),
    },
];

type Resolved = Result<(Expr, Ty)>;

fn resolve_abs(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    call.arity(1, 1)?;
    let undefined = call.undefined();
    let (e, t) = call.single()?;
    match t {
        Some(ty) if category(ty) == Category::Numeric => {
            let rt = if let DataType::Numeric { .. } = ty { NUMERIC_ANY } else { ty };
            Ok((def.expr(abs, vec![e]), Some(rt)))
        }
        None => {
            let e = b.coerce(e, None, DataType::Float8, "abs")?;
            Ok((def.expr(abs, vec![e]), Some(DataType::Float8)))
        }
        Some(_) => Err(undefined),
    }
}

/// round (with optional digits), ceil, floor: float8 for a float, an
/// integer or an unknown literal (float8 is the numeric category's
/// preferred type); numeric for a numeric; round(int, n) exists only for
/// numeric.
fn resolve_round(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>, eval: EvalFn) -> Resolved {
    call.arity(1, if call.name == "round" { 2 } else { 1 })?;
    let (name, sig, undefined) = (call.name, call.sig, call.undefined());
    let mut it = call.args.into_iter();
    let (e, t) = it.next().ok_or_else(|| undefined.clone())?;
    let digits = it.next();
    let rt = match (t, &digits) {
        (Some(DataType::Float4 | DataType::Float8) | None, None) => DataType::Float8,
        (Some(ty), None) if value::is_integer(ty) => DataType::Float8,
        (Some(ty), _) if category(ty) == Category::Numeric && !(value::is_float(ty) && digits.is_some()) => NUMERIC_ANY,
        _ => return Err(undefined),
    };
    let e = match t {
        None => b.coerce(e, None, rt, name)?,
        Some(ty) if ty == rt || matches!(ty, DataType::Numeric { .. }) && rt == NUMERIC_ANY => e,
        Some(_) => Expr::Cast(e.boxed(), rt, false),
    };
    let mut args = vec![e];
    if let Some((d, dt)) = digits {
        args.push(b.int4_param(d, dt, sig)?);
    }
    Ok((def.expr(eval, args), Some(rt)))
}

fn resolve_trunc(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    call.arity(1, 2)?;
    let nargs = call.len();
    // One integer argument: PostgreSQL picks trunc(double precision),
    // float8 being the numeric category's preferred type; trunc(x, n)
    // exists only for numeric.
    let numeric = match call.args[0].1 {
        Some(DataType::Float4 | DataType::Float8) => false,
        Some(t) if value::is_integer(t) => nargs == 2,
        Some(t) if category(t) == Category::Numeric => true,
        None => true,
        Some(_) => return Err(call.undefined()),
    };
    if !numeric && nargs == 2 {
        return Err(call.undefined());
    }
    let want = if numeric { NUMERIC_ANY } else { DataType::Float8 };
    let mut out = Vec::with_capacity(nargs);
    for (k, (e, t)) in call.args.into_iter().enumerate() {
        out.push(if k == 0 { b.result_cast(e, t, Some(want))? } else { b.int4_param(e, t, call.sig)? });
    }
    Ok((def.expr(trunc, out), Some(want)))
}

fn resolve_width_bucket(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    if call.args.len() == 2 {
        return resolve_width_bucket_array(def, b, call);
    }
    call.arity(4, 4)?;
    let float = call.args[..3].iter().any(|(_, t)| matches!(t, Some(DataType::Float4 | DataType::Float8)));
    if call.args.iter().any(|(_, t)| t.is_some_and(|t| category(t) != Category::Numeric)) {
        return Err(call.undefined());
    }
    let want = if float { DataType::Float8 } else { NUMERIC_ANY };
    let mut out = Vec::with_capacity(4);
    for (k, (e, t)) in call.args.into_iter().enumerate() {
        out.push(if k < 3 { b.result_cast(e, t, Some(want))? } else { b.int4_param(e, t, call.sig)? });
    }
    let eval: EvalFn = |v, _| width_bucket(&v[0], &v[1], &v[2], int(v, 3));
    Ok((def.expr(eval, out), Some(DataType::Int4)))
}

/// width_bucket(operand, thresholds anycompatiblearray): the operand and
/// the elements at their common type (42883 across categories).
fn resolve_width_bucket_array(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    let undefined = call.undefined();
    let mut args = call.args.into_iter();
    let (Some((x, xt)), Some((a, at))) = (args.next(), args.next()) else { return Err(undefined) };
    let elem = match at {
        Some(t) => crate::value::array::elem_type(t).ok_or_else(|| undefined.clone())?,
        None => xt.unwrap_or(DataType::Text),
    };
    if xt.is_some_and(|t| category(t) != category(elem)) || crate::value::types::is_pseudo(elem) {
        return Err(undefined);
    }
    let (_, common) = b.common(vec![(x.clone(), xt), (Expr::Const(Value::Null), Some(elem))], "width_bucket")?;
    let common = common.unwrap_or(elem);
    let arr = crate::value::array::array_type(common).ok_or(undefined)?;
    let x = b.result_cast(x, xt, Some(common))?;
    let a = b.result_cast(a, at, Some(arr))?;
    Ok((def.expr(width_bucket_array, vec![x, a]), Some(DataType::Int4)))
}

/// PostgreSQL's width_bucket_array: how many thresholds are at most the
/// operand, by binary search (the thresholds are taken as sorted).
fn width_bucket_array(v: &[Value], _: &mut EvalCtx) -> Result<Value> {
    // The lower bounds do not count: the answer is a count of thresholds.
    let Some((_, items)) = v[1].array_parts() else { return Ok(Value::Null) };
    if crate::value::array::is_nested(items) {
        return Err(SqlError::new("2202E", "thresholds must be one-dimensional array"));
    }
    if items.iter().any(Value::is_null) {
        return Err(SqlError::new("22004", "thresholds array must not contain NULLs"));
    }
    let (mut lo, mut hi) = (0, items.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if value::compare(&v[0], &items[mid]) == Some(Ordering::Less) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(Value::Int4(i32::try_from(lo).unwrap_or(i32::MAX)))
}

/// factorial(bigint), a numeric.
fn resolve_factorial(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    call.arity(1, 1)?;
    let undefined = call.undefined();
    let (e, t) = call.single()?;
    let e = match t {
        None => b.coerce(e, None, DataType::Int8, "factorial")?,
        Some(t) if value::is_integer(t) => b.result_cast(e, Some(t), Some(DataType::Int8))?,
        Some(_) => return Err(undefined),
    };
    let eval: EvalFn = |v, _| numeric_wide_fns::factorial(int(v, 0));
    Ok((def.expr(eval, vec![e]), Some(NUMERIC_ANY)))
}

/// power and sqrt, of float8 or (arguments numeric) of numeric.
fn resolve_power(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>, eval: EvalFn) -> Resolved {
    let is_sqrt = call.name == "sqrt";
    let n = if is_sqrt { 1 } else { 2 };
    call.arity(n, n)?;
    // A float argument picks the float8 version (float8 does not cast to
    // numeric implicitly); else a numeric one picks the numeric version.
    let any_float = call.args.iter().any(|(_, t)| t.is_some_and(value::is_float));
    if let (true, Some((e, Some(t @ DataType::Numeric { .. })))) = (is_sqrt, call.args.first())
        && RegKind::of(*t).is_none()
    {
        return Ok((def.expr(eval, vec![e.clone()]), Some(NUMERIC_ANY)));
    }
    // numeric ^ numeric: a numeric argument and no float one.
    let numeric = !any_float && call.args.iter().any(|(_, t)| matches!(t, Some(DataType::Numeric { .. })));
    let want = if numeric { NUMERIC_ANY } else { DataType::Float8 };
    let mut out = Vec::with_capacity(n);
    let undefined = call.undefined();
    for (e, t) in call.args {
        match t {
            Some(t) if category(t) != Category::Numeric || RegKind::of(t).is_some() => return Err(undefined),
            None if numeric => out.push(b.coerce(e, None, want, call.name)?),
            _ => out.push(b.result_cast(e, t, Some(want))?),
        }
    }
    Ok((def.expr(eval, out), Some(want)))
}

/// Which version of a function with float8 and numeric versions PostgreSQL
/// picks for an argument of type `t`: Some(true) numeric, Some(false)
/// float8, None no version takes it.
pub(super) fn float_or_numeric(t: Ty) -> Option<bool> {
    match t {
        None => Some(false),
        Some(t) if RegKind::of(t).is_some() => None,
        Some(DataType::Numeric { .. }) => Some(true),
        Some(t) if category(t) == Category::Numeric => Some(false),
        Some(_) => None,
    }
}

/// cbrt, exp, ln, log, log10, sign: integers and unknown literals go to
/// float8 (the numeric category's preferred type), numeric picks the
/// numeric version (cbrt has none); log(base, x) exists for numeric only.
fn resolve_float_fn(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>, eval: EvalFn) -> Resolved {
    call.arity(1, if call.name == "log" { 2 } else { 1 })?;
    let undefined = call.undefined();
    if call.len() == 2 {
        if !call.args.iter().all(|(_, t)| float_or_numeric(*t).is_some() && !t.is_some_and(value::is_float)) {
            return Err(undefined);
        }
        let mut out = Vec::with_capacity(2);
        for (e, t) in call.args {
            out.push(if t.is_none() {
                b.coerce(e, None, NUMERIC_ANY, call.name)?
            } else {
                b.result_cast(e, t, Some(NUMERIC_ANY))?
            });
        }
        return Ok((def.expr(eval, out), Some(NUMERIC_ANY)));
    }
    let name = call.name;
    let (e, t) = call.single()?;
    let numeric = float_or_numeric(t).ok_or(undefined)? && name != "cbrt";
    let want = if numeric { NUMERIC_ANY } else { DataType::Float8 };
    let e = if numeric { e } else { b.result_cast(e, t, Some(want))? };
    Ok((def.expr(eval, vec![e]), Some(want)))
}

/// div(numeric, numeric).
fn resolve_div(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    call.arity(2, 2)?;
    if call.args.iter().any(|(_, t)| float_or_numeric(*t).is_none() || t.is_some_and(value::is_float)) {
        return Err(call.undefined());
    }
    let mut out = Vec::with_capacity(2);
    for (e, t) in call.args {
        out.push(b.result_cast(e, t, Some(NUMERIC_ANY))?);
    }
    Ok((def.expr(div_eval, out), Some(NUMERIC_ANY)))
}

/// gcd / lcm (integer, bigint and numeric versions) as PostgreSQL
/// resolves them: among the versions every argument converts to
/// implicitly, the one with the most arguments of exactly its type; a tie
/// is not unique (no version takes float8, the category's preferred type).
/// None: no version; Some(None): not unique.
fn gcd_version(types: &[Ty]) -> Option<Option<DataType>> {
    let mut best: Option<(usize, DataType)> = None;
    let mut tie = false;
    for (k, version) in [DataType::Int4, DataType::Int8, NUMERIC_ANY].into_iter().enumerate() {
        let fits = types.iter().all(|t| match t {
            None => true,
            Some(t) if RegKind::of(*t).is_some() || value::is_float(*t) || category(*t) != Category::Numeric => false,
            Some(DataType::Int2 | DataType::Int4) => true,
            Some(DataType::Int8) => k >= 1,
            Some(_) => k == 2,
        });
        if !fits {
            continue;
        }
        let exact = types
            .iter()
            .filter(|t| match (t, version) {
                (Some(DataType::Numeric { .. }), DataType::Numeric { .. }) => true,
                (Some(t), v) => *t == v,
                (None, _) => false,
            })
            .count();
        match best {
            Some((n, _)) if n > exact => {}
            Some((n, _)) if n == exact => tie = true,
            _ => {
                best = Some((exact, version));
                tie = false;
            }
        }
    }
    let (exact, version) = best?;
    Some(if tie || exact == 0 { None } else { Some(version) })
}

fn resolve_gcd(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>, eval: EvalFn) -> Resolved {
    call.arity(2, 2)?;
    let want = gcd_version(&call.types()).ok_or_else(|| call.undefined())?.ok_or_else(|| call.not_unique())?;
    let mut out = Vec::with_capacity(2);
    for (e, t) in call.args {
        out.push(b.result_cast(e, t, Some(want))?);
    }
    Ok((def.expr(eval, out), Some(want)))
}

/// scale, min_scale, trim_scale (numeric), float4send / float8send, sinh /
/// cosh / tanh: one argument converted to `want` as PostgreSQL's implicit
/// casts allow (integers and unknown literals to numeric or the float
/// type; a float never implicitly to numeric, a float8 never to real).
fn resolve_unary(
    def: &'static FunctionDef,
    b: &mut dyn ArgBinder,
    call: Call<'_>,
    (want, result): (DataType, DataType),
    eval: EvalFn,
) -> Resolved {
    let (name, undefined) = (call.name, call.undefined());
    let (e, t) = call.single()?;
    let implicit = match t {
        None => true,
        Some(DataType::Numeric { .. }) => want == NUMERIC_ANY || want == DataType::Float8 || want == DataType::Float4,
        Some(DataType::Float4) => want != NUMERIC_ANY,
        Some(DataType::Float8) => want == DataType::Float8,
        Some(t) => value::is_integer(t),
    };
    if !implicit {
        return Err(undefined);
    }
    let e = if t.is_none() { b.coerce(e, None, want, name)? } else { b.result_cast(e, t, Some(want))? };
    Ok((def.expr(eval, vec![e]), Some(result)))
}

/// The type a function refuses, as 42883 names it (`abs(text)`).
fn undefined_for(name: &str, v: &Value) -> SqlError {
    SqlError::undefined_function(&format!("{name}({})", value::value_type_name(v)))
}

fn abs(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    abs_value(vals)
}

pub(super) fn abs_value(vals: &[Value]) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Abs, vals) {
        return r;
    }
    Ok(match &vals[0] {
        Value::Int2(x) => Value::Int2(x.checked_abs().ok_or_else(|| SqlError::out_of_range("smallint"))?),
        Value::Int4(x) => Value::Int4(x.checked_abs().ok_or_else(|| SqlError::out_of_range("integer"))?),
        Value::Int8(x) => Value::Int8(x.checked_abs().ok_or_else(|| SqlError::out_of_range("bigint"))?),
        Value::Numeric(n) => Value::Numeric(Numeric::new(n.mantissa.abs(), n.scale)),
        Value::Float4(x) => Value::Float4(x.abs()),
        Value::Float8(x) => Value::Float8(x.abs()),
        other => return Err(undefined_for("abs", other)),
    })
}

/// The optional scale argument of round and trunc.
fn places(vals: &[Value]) -> i64 {
    if vals.len() > 1 { int(vals, 1) } else { 0 }
}

fn round(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Round, vals) {
        return r;
    }
    Ok(match &vals[0] {
        Value::Float8(x) => Value::Float8(x.round_ties_even()),
        Value::Numeric(n) => match value::round_numeric(*n, places(vals)) {
            Ok(r) => Value::Numeric(r),
            Err(e) => return numeric_wide_fns::eval(Wide::Round, vals).unwrap_or(Err(e)),
        },
        other => return Err(undefined_for("round", other)),
    })
}

pub(super) fn ceil_or_floor(vals: &[Value], ceil: bool) -> Result<Value> {
    if let Some(r) = eval_if_wide(if ceil { Wide::Ceil } else { Wide::Floor }, vals) {
        return r;
    }
    Ok(match &vals[0] {
        Value::Float8(x) => Value::Float8(if ceil { x.ceil() } else { x.floor() }),
        Value::Numeric(n) => {
            let t = n.rescale(0).map(|r| r.mantissa).unwrap_or(0);
            let m = match (ceil, value::numeric_cmp(Numeric::new(t, 0), *n)) {
                (true, Ordering::Less) => t + 1,
                (false, Ordering::Greater) => t - 1,
                _ => t,
            };
            Value::Numeric(Numeric::new(m, 0))
        }
        other => return Err(undefined_for("ceil", other)),
    })
}

fn ceil(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    ceil_or_floor(vals, true)
}

fn floor(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    ceil_or_floor(vals, false)
}

/// trunc(numeric [, scale]) or trunc(float8).
fn trunc(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Trunc, vals) {
        return r;
    }
    Ok(match &vals[0] {
        Value::Float8(x) => Value::Float8(x.trunc()),
        Value::Numeric(n) => match trunc_numeric(*n, places(vals)) {
            Ok(r) => Value::Numeric(r),
            Err(e) => return numeric_wide_fns::eval(Wide::Trunc, vals).unwrap_or(Err(e)),
        },
        other => return Err(undefined_for("trunc", other)),
    })
}

fn sqrt(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Sqrt, vals) {
        return r;
    }
    if let Value::Numeric(n) = &vals[0] {
        return match numeric_sqrt(*n) {
            Ok(r) => Ok(Value::Numeric(r)),
            Err(e) if e.sqlstate == "0A000" => numeric_wide_fns::eval(Wide::Sqrt, vals).unwrap_or(Err(e)),
            Err(e) => Err(e),
        };
    }
    let x = float(vals, 0);
    if x < 0.0 {
        return Err(SqlError::new("2201F", "cannot take square root of a negative number"));
    }
    Ok(Value::Float8(x.sqrt()))
}

fn power(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Power, vals) {
        return r;
    }
    if matches!(vals[0], Value::Numeric(_)) {
        return numeric_wide_fns::eval(Wide::Power, vals).unwrap_or(Ok(Value::Null));
    }
    Ok(Value::Float8(dpow(float(vals, 0), float(vals, 1))?))
}

fn cbrt(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let x = float(vals, 0);
    let r = glibc_cbrt(x);
    if r.is_infinite() && x.is_finite() {
        return Err(overflow());
    }
    Ok(Value::Float8(r))
}

/// exp, ln, log10 (and log(b, x)): the numeric versions where the binder
/// kept the argument numeric, float.c's checks otherwise.
fn transcendental(vals: &[Value], f: Wide) -> Result<Value> {
    if let Some(r) = eval_if_wide(f, vals) {
        return r;
    }
    if matches!(vals[0], Value::Numeric(_)) {
        return numeric_wide_fns::eval(f, vals).unwrap_or(Ok(Value::Null));
    }
    let x = float(vals, 0);
    if f == Wide::Exp {
        let r = x.exp();
        if r.is_infinite() && x.is_finite() {
            return Err(overflow());
        }
        if r == 0.0 && x.is_finite() {
            return Err(underflow());
        }
        return Ok(Value::Float8(r));
    }
    if x == 0.0 {
        return Err(SqlError::new("2201E", "cannot take logarithm of zero"));
    }
    if x < 0.0 {
        return Err(SqlError::new("2201E", "cannot take logarithm of a negative number"));
    }
    let r = if f == Wide::Ln { x.ln() } else { x.log10() };
    if r.is_infinite() && x.is_finite() {
        return Err(overflow());
    }
    Ok(Value::Float8(r))
}

fn exp(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    transcendental(vals, Wide::Exp)
}

fn ln(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    transcendental(vals, Wide::Ln)
}

fn log10(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    transcendental(vals, Wide::Log10)
}

fn sign(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Sign, vals) {
        return r;
    }
    Ok(sign_of(&vals[0]))
}

fn div_eval(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Div, vals) {
        return r;
    }
    div(&vals[0], &vals[1])
}

fn gcd(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Gcd, vals) {
        return r;
    }
    gcd_lcm(false, &vals[0], &vals[1])
}

fn lcm(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Lcm, vals) {
        return r;
    }
    gcd_lcm(true, &vals[0], &vals[1])
}

fn numeric_type_error() -> SqlError {
    SqlError::new("XX000", "numeric function given another type")
}

fn scale(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::Scale, vals) {
        return r;
    }
    let Value::Numeric(n) = &vals[0] else { return Err(numeric_type_error()) };
    Ok(Value::Int4(i32::from(n.scale)))
}

fn min_scale(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::MinScale, vals) {
        return r;
    }
    let Value::Numeric(n) = &vals[0] else { return Err(numeric_type_error()) };
    Ok(Value::Int4(i32::from(trimmed(n.mantissa, n.scale).1)))
}

fn trim_scale(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    if let Some(r) = eval_if_wide(Wide::TrimScale, vals) {
        return r;
    }
    let Value::Numeric(n) = &vals[0] else { return Err(numeric_type_error()) };
    let (m, s) = trimmed(n.mantissa, n.scale);
    Ok(Value::Numeric(Numeric::new(m, s)))
}

fn float4send(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Value::Float4(x) = &vals[0] else { return Err(numeric_type_error()) };
    Ok(Value::Bytea(x.to_be_bytes().to_vec()))
}

fn float8send(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Value::Float8(x) = &vals[0] else { return Err(numeric_type_error()) };
    Ok(Value::Bytea(x.to_be_bytes().to_vec()))
}

/// dsinh: an overflow is the infinity of the argument's sign (libm's already is).
fn sinh(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Value::Float8(x) = &vals[0] else { return Err(numeric_type_error()) };
    Ok(Value::Float8(x.sinh()))
}

fn cosh(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Value::Float8(x) = &vals[0] else { return Err(numeric_type_error()) };
    let r = x.cosh();
    if r == 0.0 {
        return Err(underflow());
    }
    Ok(Value::Float8(r))
}

fn tanh(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Value::Float8(x) = &vals[0] else { return Err(numeric_type_error()) };
    let r = x.tanh();
    if r.is_infinite() {
        return Err(overflow());
    }
    Ok(Value::Float8(r))
}

// Rust's f64::asinh/acosh/atanh are its own formulas, not the C
// library's PostgreSQL calls (they differ in the last bit): these are.
mod libm {
    unsafe extern "C" {
        pub safe fn asinh(x: f64) -> f64;
        pub safe fn acosh(x: f64) -> f64;
        pub safe fn atanh(x: f64) -> f64;
    }
}

/// dasinh.
fn asinh(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Value::Float8(x) = &vals[0] else { return Err(numeric_type_error()) };
    Ok(Value::Float8(libm::asinh(*x)))
}

/// dacosh: below 1 is an error, NaN passes.
fn acosh(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Value::Float8(x) = &vals[0] else { return Err(numeric_type_error()) };
    if *x < 1.0 {
        return Err(SqlError::new("22003", "input is out of range"));
    }
    Ok(Value::Float8(libm::acosh(*x)))
}

/// datanh: outside [-1, 1] an error, ±1 the infinities.
fn atanh(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Value::Float8(x) = &vals[0] else { return Err(numeric_type_error()) };
    if *x < -1.0 || *x > 1.0 {
        return Err(SqlError::new("22003", "input is out of range"));
    }
    Ok(Value::Float8(if x.abs() == 1.0 { f64::INFINITY.copysign(*x) } else { libm::atanh(*x) }))
}

fn overflow() -> SqlError {
    SqlError::new("22003", "value out of range: overflow")
}

fn underflow() -> SqlError {
    SqlError::new("22003", "value out of range: underflow")
}

/// sqrt(numeric), PostgreSQL's numeric_sqrt: at least 16 significant
/// digits and the input's scale, rounded half away from zero. Beyond the
/// 38 digits pgtier's numeric holds: 0A000.
fn numeric_sqrt(n: Numeric) -> Result<Numeric> {
    if n.mantissa < 0 {
        return Err(SqlError::new("2201F", "cannot take square root of a negative number"));
    }
    let too_wide = || SqlError::unsupported("sqrt(numeric) with more than 38 digits");
    let m = n.mantissa.unsigned_abs();
    let digits = if m == 0 { 1 } else { i64::from(m.ilog10()) + 1 };
    // PostgreSQL's weight counts base-10000 digits.
    let weight = if m == 0 { 0 } else { (digits - 1 - i64::from(n.scale)).div_euclid(4) };
    let rscale = (16 - (2 * weight + 1)).max(i64::from(n.scale)).clamp(0, 1000);
    let up = u32::try_from(2 * (rscale + 1) - i64::from(n.scale)).map_err(|_| too_wide())?;
    let wide = m.checked_mul(10u128.checked_pow(up).ok_or_else(too_wide)?).ok_or_else(too_wide)?;
    // One digit past rscale, then rounded: the true root is never exactly half.
    let root = (wide.isqrt() + 5) / 10;
    let scale = u8::try_from(rscale).map_err(|_| too_wide())?;
    if root.checked_ilog10().unwrap_or(0) >= 38 {
        return Err(too_wide());
    }
    Ok(Numeric::new(i128::try_from(root).map_err(|_| too_wide())?, scale))
}

/// power(float8, float8), PostgreSQL's dpow: NaN and infinities decided
/// here, not by pow() (POSIX's answers), and its SQLSTATEs.
fn dpow(x: f64, y: f64) -> Result<f64> {
    let invalid = |m: &str| SqlError::new("2201F", m.to_owned());
    if x.is_nan() {
        return Ok(if y.is_nan() || y != 0.0 { f64::NAN } else { 1.0 });
    }
    if y.is_nan() {
        return Ok(if x == 1.0 { 1.0 } else { f64::NAN });
    }
    if x == 0.0 && y < 0.0 {
        return Err(invalid("zero raised to a negative power is undefined"));
    }
    if x < 0.0 && y.floor() != y {
        return Err(invalid("a negative number raised to a non-integer power yields a complex result"));
    }
    let above_one = x.abs() > 1.0;
    if y.is_infinite() {
        return Ok(match (x.abs() == 1.0, y > 0.0) {
            (true, _) => 1.0,
            (false, true) => {
                if above_one {
                    y
                } else {
                    0.0
                }
            }
            (false, false) => {
                if above_one {
                    0.0
                } else {
                    -y
                }
            }
        });
    }
    if x.is_infinite() {
        if y == 0.0 {
            return Ok(1.0);
        }
        if x > 0.0 {
            return Ok(if y > 0.0 { x } else { 0.0 });
        }
        // The sign follows whether y is an odd integer (it is an integer: checked above).
        let odd = (y / 2.0).floor() != y / 2.0;
        return Ok(match (y > 0.0, odd) {
            (true, true) => x,
            (true, false) => -x,
            (false, true) => -0.0,
            (false, false) => 0.0,
        });
    }
    let r = x.powf(y);
    if r.is_nan() {
        // Only old libms get here (|y| > 2^63); PostgreSQL's fallback.
        if x == 0.0 {
            return Ok(0.0);
        }
        if x.abs() == 1.0 {
            return Ok(1.0);
        }
        return Err(if (y >= 0.0) == above_one { overflow() } else { underflow() });
    }
    if r.is_infinite() {
        return Err(overflow());
    }
    if r == 0.0 && x != 0.0 {
        return Err(underflow());
    }
    Ok(r)
}

/// glibc's cbrt (sysdeps/ieee754/dbl-64/s_cbrt.c): a polynomial guess
/// on the mantissa, one Halley step, the exponent's third. The constants
/// are glibc's as written (each rounds to the same double).
#[allow(clippy::excessive_precision)]
fn glibc_cbrt(x: f64) -> f64 {
    const CBRT2: f64 = 1.259_921_049_894_873_164_8;
    const SQR_CBRT2: f64 = 1.587_401_051_968_199_474_8;
    const FACTOR: [f64; 5] = [1.0 / SQR_CBRT2, 1.0 / CBRT2, 1.0, CBRT2, SQR_CBRT2];
    if x == 0.0 || !x.is_finite() {
        return x + x;
    }
    let (xm, xe) = frexp(x.abs());
    let u = 0.354_895_765_043_919_86
        + ((1.508_191_937_815_848_96
            + ((-2.114_994_941_673_712_87
                + ((2.446_931_225_635_344_3
                    + ((-1.834_692_774_836_130_86
                        + (0.784_932_344_976_639_262 - 0.145_263_899_385_486_377 * xm) * xm)
                        * xm))
                    * xm))
                * xm))
            * xm);
    let t2 = u * u * u;
    // C's % and / truncate toward zero, as Rust's do.
    let ym = u * (t2 + 2.0 * xm) / (2.0 * t2 + xm) * FACTOR[usize::try_from(2 + xe % 3).unwrap_or(2)];
    let r = ym * 2f64.powi(xe / 3);
    if x < 0.0 { -r } else { r }
}

/// frexp: (m, e) with x = m * 2^e and 0.5 <= |m| < 1, for finite nonzero x.
fn frexp(x: f64) -> (f64, i32) {
    let bits = x.to_bits();
    let exp = i32::try_from((bits >> 52) & 0x7ff).unwrap_or(0);
    if exp == 0 {
        let (m, e) = frexp(x * 2f64.powi(54));
        return (m, e - 54);
    }
    (f64::from_bits((bits & !(0x7ff_u64 << 52)) | (1022_u64 << 52)), exp - 1022)
}

/// sign of a float8 or numeric (numeric: -1, 0 or 1 at scale 0).
fn sign_of(v: &Value) -> Value {
    match v {
        Value::Numeric(n) => Value::Numeric(Numeric::new(n.mantissa.signum(), 0)),
        other => {
            let x = value::to_f64(other).unwrap_or(f64::NAN);
            // NaN is neither above nor below zero: 0, as PostgreSQL's dsign.
            Value::Float8(if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            })
        }
    }
}

fn numeric_overflow() -> SqlError {
    SqlError::new("22003", "value overflows numeric format")
}

/// Two numerics at one scale: (mantissa, mantissa, scale).
fn common_scale(a: Numeric, b: Numeric) -> Result<(i128, i128, u8)> {
    let s = a.scale.max(b.scale);
    let at = |n: Numeric| n.rescale(s).map(|r| r.mantissa).ok_or_else(numeric_overflow);
    Ok((at(a)?, at(b)?, s))
}

/// div(y, x): the integer quotient, truncated toward zero (numeric, scale 0).
fn div(a: &Value, b: &Value) -> Result<Value> {
    let (Some(a), Some(b)) = (value::to_numeric(a), value::to_numeric(b)) else { return Ok(Value::Null) };
    let (x, y, _) = common_scale(a, b)?;
    if y == 0 {
        return Err(SqlError::division_by_zero());
    }
    Ok(Value::Numeric(Numeric::new(x / y, 0)))
}

fn gcd_u128(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// gcd / lcm of two integers of `ty` (int4, int8) or two numerics.
fn gcd_lcm(lcm: bool, a: &Value, b: &Value) -> Result<Value> {
    match (a, b) {
        (Value::Numeric(_), _) | (_, Value::Numeric(_)) => {
            let (Some(a), Some(b)) = (value::to_numeric(a), value::to_numeric(b)) else { return Ok(Value::Null) };
            let (x, y, s) = common_scale(a, b)?;
            let g = gcd_u128(x.unsigned_abs(), y.unsigned_abs());
            let m = match (lcm, x.unsigned_abs().checked_div(g)) {
                (false, _) => g,
                (true, None) => 0,
                (true, Some(q)) => q.checked_mul(y.unsigned_abs()).ok_or_else(numeric_overflow)?,
            };
            Ok(Value::Numeric(Numeric::new(i128::try_from(m).map_err(|_| numeric_overflow())?, s)))
        }
        _ => {
            let wide = matches!(a, Value::Int8(_)) || matches!(b, Value::Int8(_));
            let (x, y) = (a.as_i64().unwrap_or(0), b.as_i64().unwrap_or(0));
            let g = gcd_u128(u128::from(x.unsigned_abs()), u128::from(y.unsigned_abs()));
            let m = match (lcm, u128::from(x.unsigned_abs()).checked_div(g)) {
                (false, _) => g,
                (true, None) => 0,
                (true, Some(q)) => q * u128::from(y.unsigned_abs()),
            };
            // The one result that does not fit is the type's minimum's absolute value.
            if wide {
                i64::try_from(m).map(Value::Int8).map_err(|_| SqlError::out_of_range("bigint"))
            } else {
                i32::try_from(m).map(Value::Int4).map_err(|_| SqlError::out_of_range("integer"))
            }
        }
    }
}

/// The value without trailing fractional zeros: (mantissa, scale).
fn trimmed(mut m: i128, mut scale: u8) -> (i128, u8) {
    while scale > 0 && m % 10 == 0 {
        m /= 10;
        scale -= 1;
    }
    (m, scale)
}

/// A uniform double in [0, 1) from a per-thread xorshift64* generator
/// seeded from the clock and the thread: random() is not for secrets (nor
/// is PostgreSQL's), and setseed() is not supported.
fn random_unit() -> f64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            let here = &nanos as *const u64 as u64;
            (nanos ^ here.rotate_left(32)) | 1
        });
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        // The top 53 bits of the output, scaled: exactly representable, < 1.
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// trunc(numeric, scale): toward zero at `scale` digits (negative: left of
/// the point); the result keeps max(scale, 0) digits, as PostgreSQL's.
fn trunc_numeric(n: Numeric, scale: i64) -> Result<Numeric> {
    let overflow = || SqlError::new("22003", "value overflows numeric format");
    let target = scale.clamp(-38, 38);
    let from = i64::from(n.scale);
    let mut mantissa = n.mantissa;
    if target >= from {
        let up = u32::try_from(target - from).map_err(|_| overflow())?;
        mantissa = mantissa.checked_mul(10i128.checked_pow(up).ok_or_else(overflow)?).ok_or_else(overflow)?;
        return Ok(Numeric::new(mantissa, u8::try_from(target).map_err(|_| overflow())?));
    }
    let down = u32::try_from(from - target).map_err(|_| overflow())?;
    mantissa /= 10i128.checked_pow(down).ok_or_else(overflow)?;
    if target < 0 {
        let up = u32::try_from(-target).map_err(|_| overflow())?;
        mantissa = mantissa.checked_mul(10i128.checked_pow(up).ok_or_else(overflow)?).ok_or_else(overflow)?;
        return Ok(Numeric::new(mantissa, 0));
    }
    Ok(Numeric::new(mantissa, u8::try_from(target).map_err(|_| overflow())?))
}

/// width_bucket(operand, low, high, count), exact for numerics.
fn width_bucket(operand: &Value, low: &Value, high: &Value, count: i64) -> Result<Value> {
    let bad = |m: &str| SqlError::new("2201G", m.to_owned());
    if count <= 0 {
        return Err(bad("count must be greater than zero"));
    }
    let as_exact = |v: &Value| value::to_numeric(v);
    let bucket = match (as_exact(operand), as_exact(low), as_exact(high)) {
        (Some(x), Some(lo), Some(hi))
            if ![operand, low, high].iter().any(|v| matches!(v, Value::Float4(_) | Value::Float8(_))) =>
        {
            // Scale all three to one scale, then integer arithmetic.
            let scale = x.scale.max(lo.scale).max(hi.scale);
            let at = |n: Numeric| {
                n.rescale(scale)
                    .map(|r| r.mantissa)
                    .ok_or_else(|| SqlError::new("22003", "value overflows numeric format"))
            };
            let (x, lo, hi) = (at(x)?, at(lo)?, at(hi)?);
            if lo == hi {
                return Err(bad("lower bound cannot equal upper bound"));
            }
            let count = i128::from(count);
            let (x, lo, hi) = if lo < hi { (x, lo, hi) } else { (-x, -lo, -hi) };
            if x < lo {
                0
            } else if x >= hi {
                count + 1
            } else {
                (x - lo).checked_mul(count).ok_or_else(|| SqlError::new("22003", "value overflows numeric format"))?
                    / (hi - lo)
                    + 1
            }
        }
        _ => {
            let f = |v: &Value| value::to_f64(v).unwrap_or(f64::NAN);
            let (x, lo, hi) = (f(operand), f(low), f(high));
            if x.is_nan() || lo.is_nan() || hi.is_nan() {
                return Err(bad("operand, lower bound, and upper bound cannot be NaN"));
            }
            // An infinite operand is allowed; infinite bounds are not (width_bucket_float8).
            if lo.is_infinite() || hi.is_infinite() {
                return Err(bad("lower and upper bounds must be finite"));
            }
            if lo == hi {
                return Err(bad("lower bound cannot equal upper bound"));
            }
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            let inside = |x: f64, lo: f64, hi: f64| ((count as f64) * (x - lo) / (hi - lo)).floor() as i128 + 1;
            let count = i128::from(count);
            if lo < hi {
                if x < lo {
                    0
                } else if x >= hi {
                    count + 1
                } else {
                    inside(x, lo, hi)
                }
            } else if x > lo {
                0
            } else if x <= hi {
                count + 1
            } else {
                inside(lo - x, 0.0, lo - hi)
            }
        }
    };
    i32::try_from(bucket).map(Value::Int4).map_err(|_| SqlError::out_of_range("integer"))
}

// ------------------------------------------------------------ to_char, to_number

/// to_char(integer or numeric, template) (num_format.rs).
pub(super) fn to_char_number(vals: &[Value], ctx: &mut EvalCtx<'_>) -> Result<Value> {
    let fmt = super::registry::text(vals, 1);
    let text = super::num_format::to_char(&vals[0], fmt, |v, places| round(&[v.clone(), Value::Int4(places)], ctx))?;
    Ok(Value::Text(text))
}

/// to_number(text, template) (num_format.rs); an empty template is NULL.
fn to_number(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let (input, fmt) = (super::registry::text(vals, 0), super::registry::text(vals, 1));
    Ok(super::num_format::to_number(input, fmt)?.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbrt_is_glibc_s() {
        assert_eq!(glibc_cbrt(27.0), 3.000_000_000_000_000_4);
        assert_eq!(glibc_cbrt(-8.0), -2.0);
        assert_eq!(glibc_cbrt(0.125), 0.499_999_999_999_999_94);
        assert_eq!(glibc_cbrt(1e-310), glibc_cbrt(1e-310 * 8.0) / 2.0);
    }

    #[test]
    fn gcd_lcm_edges() {
        assert_eq!(gcd_lcm(false, &Value::Int4(i32::MIN), &Value::Int4(6)).unwrap(), Value::Int4(2));
        assert!(gcd_lcm(false, &Value::Int4(i32::MIN), &Value::Int4(0)).is_err());
        assert_eq!(gcd_lcm(true, &Value::Int4(4), &Value::Int4(-6)).unwrap(), Value::Int4(12));
        assert_eq!(gcd_lcm(true, &Value::Int8(0), &Value::Int8(5)).unwrap(), Value::Int8(0));
    }
}
