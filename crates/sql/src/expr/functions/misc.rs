//! Functions of no other family: pg_typeof, pg_sleep, pg_size_pretty,
//! gen_random_uuid.

use pgtier_engine::{DataType, Value};

use super::SubqueryRunner;
use super::registry::{ArgBinder, Builtin, Call, EvalFn, FunctionDef, Ty, Volatility, int};
use crate::catalog::column_type_info;
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value;
use crate::value::types::{Elem, RegKind};

pub(super) const DEFS: &[FunctionDef] = &[
    FunctionDef { names: &["array_fill"], volatility: Volatility::Immutable, resolve: resolve_array_fill },
    FunctionDef {
        names: &["pg_typeof"],
        volatility: Volatility::Stable,
        resolve: |_, _, call| {
            call.arity(1, 1)?;
            // The argument's type is known when binding: a constant regtype.
            let oid = match call.args[0].1 {
                None => 705,
                Some(crate::value::types::TSVECTOR) => 3614,
                Some(crate::value::types::TSQUERY) => 3615,
                Some(t) => match (Elem::of(t), RegKind::of(t)) {
                    (Some(e), _) => e.type_oid(),
                    (_, Some(k)) => k.type_oid(),
                    _ => u32::try_from(column_type_info(t).type_oid).unwrap_or(0),
                },
            };
            Ok((Expr::Const(Value::Int8(i64::from(oid))), Some(RegKind::Type.data_type())))
        },
    },
    // void in PostgreSQL; pgtier's pseudo types go out as text, an empty one here.
    FunctionDef {
        names: &["pg_sleep"],
        volatility: Volatility::Volatile,
        resolve: |def, b, call| {
            call.arity(1, 1)?;
            let (name, undefined) = (call.name, call.undefined());
            let (e, t) = call.single()?;
            let e = match t {
                None => b.coerce(e, None, DataType::Float8, name)?,
                Some(t) if value::category(t) == value::Category::Numeric => {
                    b.result_cast(e, Some(t), Some(DataType::Float8))?
                }
                Some(_) => return Err(undefined),
            };
            let eval: EvalFn = |v, ctx| {
                sleep_interruptibly(value::to_f64(&v[0]).unwrap_or(f64::NAN), ctx.sq)?;
                Ok(Value::Text(String::new()))
            };
            Ok((def.expr(eval, vec![e]), Some(DataType::Text)))
        },
    },
    FunctionDef {
        names: &["pg_size_pretty"],
        volatility: Volatility::Immutable,
        resolve: |def, b, call| {
            call.arity(1, 1)?;
            match call.args[0].1 {
                Some(DataType::Int8) => {}
                // PostgreSQL has a bigint and a numeric version, and picks neither for these.
                Some(DataType::Int2 | DataType::Int4) | None => return Err(call.not_unique()),
                Some(t) if value::category(t) == value::Category::Numeric => {
                    return Err(SqlError::unsupported("pg_size_pretty(numeric)"));
                }
                Some(_) => return Err(call.undefined()),
            }
            let (e, t) = call.single()?;
            let eval: EvalFn = |v, _| Ok(Value::Text(size_pretty(int(v, 0))));
            Ok((def.expr(eval, vec![b.result_cast(e, t, Some(DataType::Int8))?]), Some(DataType::Text)))
        },
    },
    GEN_RANDOM_UUID_DEF,
    // bool_and's and bool_or's transition functions, callable as functions (strict).
    FunctionDef {
        names: &["booland_statefunc"],
        volatility: Volatility::Immutable,
        resolve: |d, b, c| bool_pair(d, b, c, true),
    },
    FunctionDef {
        names: &["boolor_statefunc"],
        volatility: Volatility::Immutable,
        resolve: |d, b, c| bool_pair(d, b, c, false),
    },
];

/// booland_statefunc / boolor_statefunc(boolean, boolean).
fn bool_pair(def: &FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>, and: bool) -> Result<(Expr, Ty)> {
    let (name, undefined) = (call.name, call.undefined());
    let (x, y) = call.pair()?;
    let mut arg = |(e, t): (Expr, Ty)| match t {
        None => b.coerce(e, None, DataType::Bool, name),
        Some(DataType::Bool) => Ok(e),
        Some(_) => Err(undefined.clone()),
    };
    let args = vec![arg(x)?, arg(y)?];
    let eval: EvalFn = if and {
        |v, _| Ok(Value::Bool(v[0] == Value::Bool(true) && v[1] == Value::Bool(true)))
    } else {
        |v, _| Ok(Value::Bool(v[0] == Value::Bool(true) || v[1] == Value::Bool(true)))
    };
    Ok((def.expr(eval, args), Some(DataType::Bool)))
}

const GEN_RANDOM_UUID_DEF: FunctionDef = FunctionDef {
    names: &["gen_random_uuid"],
    volatility: Volatility::Volatile,
    resolve: |_, _, call| {
        call.arity(0, 0)?;
        Ok((Expr::Func(super::Func::Builtin(GEN_RANDOM_UUID), Vec::new()), Some(DataType::Uuid)))
    },
};

/// gen_random_uuid(): a version 4 uuid, a new one at every call (also a
/// uuid column's DEFAULT).
pub(super) const GEN_RANDOM_UUID: Builtin =
    GEN_RANDOM_UUID_DEF.call(|_, _| Ok(Value::Uuid(crate::value::uuid::random_v4()?)));

/// pg_sleep: waits `secs` (nothing for a negative or NaN value) in short
/// slices, so a cancel or statement_timeout ends it as promptly as in
/// PostgreSQL.
fn sleep_interruptibly(secs: f64, sq: &mut dyn SubqueryRunner) -> Result<()> {
    const SLICE: std::time::Duration = std::time::Duration::from_millis(10);
    if secs.is_nan() || secs <= 0.0 {
        return Ok(());
    }
    let until = std::time::Instant::now()
        + std::time::Duration::try_from_secs_f64(secs).unwrap_or(std::time::Duration::MAX / 4);
    loop {
        sq.check_interrupt()?;
        let now = std::time::Instant::now();
        if now >= until {
            return Ok(());
        }
        std::thread::sleep(SLICE.min(until - now));
    }
}

/// pg_size_pretty(bigint), PostgreSQL 15's: bytes below 10 kB, then the
/// largest unit keeping the number under 20 * 1024 - 1, halves rounded away from zero.
fn size_pretty(mut size: i64) -> String {
    // (name, limit, round, bits)
    const UNITS: [(&str, i64, bool, u32); 6] = [
        ("bytes", 10 * 1024, false, 0),
        ("kB", 20 * 1024 - 1, true, 10),
        ("MB", 20 * 1024 - 1, true, 20),
        ("GB", 20 * 1024 - 1, true, 30),
        ("TB", 20 * 1024 - 1, true, 40),
        ("PB", 20 * 1024 - 1, true, 50),
    ];
    for (i, &(name, limit, round, bits)) in UNITS.iter().enumerate() {
        let Some(&(_, _, next_round, next_bits)) = UNITS.get(i + 1) else {
            return format!("{} {name}", if round { half_rounded(size) } else { size });
        };
        if size.unsigned_abs() < limit.unsigned_abs() {
            return format!("{} {name}", if round { half_rounded(size) } else { size });
        }
        let shift = next_bits - bits - u32::from(next_round) + u32::from(round);
        // C's division: toward zero, as PostgreSQL's.
        size /= 1i64 << shift;
    }
    String::new()
}

fn half_rounded(x: i64) -> i64 {
    (x + if x < 0 { -1 } else { 1 }) / 2
}

/// array_fill(value anyelement, dims int[] [, lower bounds int[]]): not
/// strict (a NULL value fills; NULL dims are 22004).
fn resolve_array_fill(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    call.arity(2, 3)?;
    let undefined = call.undefined();
    let mut args = call.args.into_iter();
    let Some((x, xt)) = args.next() else { return Err(undefined) };
    let Some(elem) = xt else {
        return Err(SqlError::new("42804", "could not determine polymorphic type because input has type unknown"));
    };
    let arr = crate::value::array::array_type(elem)
        .ok_or_else(|| SqlError::unsupported(format!("array_fill of {}", value::type_name(elem))))?;
    let ints = crate::value::array::array_type(DataType::Int4).ok_or_else(|| undefined.clone())?;
    let mut out = vec![x];
    for (e, t) in args {
        if t.is_some_and(|t| t != ints) {
            return Err(undefined);
        }
        out.push(b.result_cast(e, t, Some(ints))?);
    }
    Ok((Expr::Func(super::Func::Builtin(def.call(array_fill).lax()), out), Some(arr)))
}

/// The int4 elements of a dims / lower bounds argument (`what` names it in 2202E).
fn fill_bounds(v: Option<&Value>, what: &str) -> Result<Vec<i64>> {
    let Some((_, items)) = v.and_then(Value::array_parts) else {
        return Err(SqlError::new("22004", "dimension array or low bound array cannot be null"));
    };
    if crate::value::array::is_nested(items) {
        return Err(SqlError::new("2202E", "wrong number of array subscripts")
            .with_detail(format!("{what} array must be one dimensional.")));
    }
    items.iter().map(|i| i.as_i64().ok_or_else(|| SqlError::new("22004", "dimension values cannot be null"))).collect()
}

fn array_fill(v: &[Value], _: &mut super::registry::EvalCtx) -> Result<Value> {
    let dims = fill_bounds(v.get(1), "Dimension")?;
    let mut lower = Vec::new();
    if v.len() > 2 {
        let lbs = fill_bounds(v.get(2), "Low bound")?;
        if lbs.len() != dims.len() {
            return Err(SqlError::new("2202E", "wrong number of array subscripts")
                .with_detail("Low bound array has different size than dimensions array."));
        }
        // Elements of an int4[]: they fit.
        lower = lbs.iter().map(|l| i32::try_from(*l).unwrap_or(1)).collect();
    }
    if dims.len() > crate::value::array::DIMS_MAX {
        return Err(crate::value::array::too_many_dims(dims.len()));
    }
    if dims.iter().any(|d| *d < 0) {
        return Err(SqlError::unsupported("array_fill with a negative dimension"));
    }
    let total = dims.iter().try_fold(1i64, |n, d| n.checked_mul(*d)).unwrap_or(i64::MAX);
    if total > 134_217_727 {
        return Err(SqlError::new("54000", "array size exceeds the maximum allowed (134217727)"));
    }
    // No dimensions is no elements (ArrayGetNItems), not one.
    if total == 0 || dims.is_empty() {
        return Ok(Value::Array(Vec::new()));
    }
    let shape: Vec<usize> = dims.iter().map(|d| usize::try_from(*d).unwrap_or(0)).collect();
    crate::value::array::check_bounds(&lower, &shape)?;
    let fill = shape.iter().rev().fold(v[0].clone(), |inner, d| Value::Array(vec![inner; *d]));
    match fill {
        Value::Array(items) => Ok(Value::array_with_lower(lower, items)),
        other => Ok(other),
    }
}
