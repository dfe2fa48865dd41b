//! Function calls: the builtin scalar functions, one declaration each in
//! its family's file (strings, binary, regex, math, datetime, interval_fns,
//! conditional, misc) collected by [`registry`]; the system functions in
//! [`system`], arrays in [`array`], json in crate::value::json.

mod array;
mod array_assign;
mod binary;
mod conditional;
mod datetime;
mod infinity;
mod interval_fns;
mod math;
mod misc;
mod num_format;
mod numeric_wide_fns;
mod regex;
pub mod registry;
mod strings;
mod system;
pub mod textsearch;

use pgtier_engine::Value;

use super::{Env, Expr, SubqueryRunner};
use crate::error::Result;

pub use array::ArrayFunc;
pub(crate) use system::needs_catalog;

/// An array function on constant arguments (the binder folds with it).
pub fn eval_array(f: ArrayFunc, vals: Vec<pgtier_engine::Value>) -> crate::error::Result<pgtier_engine::Value> {
    array::eval(f, vals)
}
pub use datetime::{DateField, extract_call};
pub use registry::{Builtin, Volatility};
pub use system::{BitOp, SeqFunc, SysFunc, oid_in};

/// A bound function call: what evaluating it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    /// A builtin scalar function of the registry (the overload the binder chose).
    Builtin(Builtin),
    /// A system function ([`SysFunc`]).
    Sys(SysFunc),
    /// A json / jsonb operator or function (crate::value::json).
    Json(crate::value::json::JsonFunc),
    /// An array function or operator ([`ArrayFunc`]).
    Array(ArrayFunc),
}

// The calls other binders make from syntax rather than by name (a column's
// DEFAULT, `bytea || bytea`, `AT TIME ZONE`), under the names they had as
// variants of this enum.
#[allow(non_upper_case_globals, non_snake_case)]
impl Func {
    /// now(): the transaction's start.
    pub const Now: Func = Func::Builtin(datetime::NOW);
    /// gen_random_uuid().
    pub const GenRandomUuid: Func = Func::Builtin(misc::GEN_RANDOM_UUID);
    /// bytea || bytea.
    pub const ByteaConcat: Func = Func::Builtin(strings::BYTEA_CONCAT);
    /// interval(interval, int4): a typmod's coercion (`x::interval day to
    /// minute`), the typmod (crate::value::interval_in::Typmod) a constant.
    pub const IntervalTypmod: Func = Func::Builtin(interval_fns::INTERVAL_TYPMOD);

    /// `x AT TIME ZONE zone` (timezone(zone, x)): of a timestamp, its instant
    /// in that zone (true); of a timestamptz, its local time there (false).
    pub const fn AtTimeZone(to_instant: bool) -> Func {
        Func::Builtin(datetime::at_time_zone(to_instant))
    }

    /// As declared by the function (system, json and array functions are immutable here).
    pub fn volatility(&self) -> Volatility {
        match self {
            Func::Builtin(b) => b.volatility,
            Func::Sys(_) | Func::Json(_) | Func::Array(_) => Volatility::Immutable,
        }
    }
}

pub(super) fn eval_func(
    f: Func,
    args: &[Expr],
    env: &Env<'_>,
    sq: &mut dyn SubqueryRunner,
    row: &[Value],
) -> Result<Value> {
    match f {
        Func::Builtin(b) => registry::eval(b, &eval_args(args, env, sq, row)?, env.now_micros, sq),
        Func::Sys(s) => system::eval(s, args, env, sq, row),
        Func::Array(a) => array::eval(a, eval_args(args, env, sq, row)?),
        Func::Json(crate::value::json::JsonFunc::Path(p)) => {
            super::jsonpath_eval::eval(p, &eval_args(args, env, sq, row)?)
        }
        Func::Json(j) => crate::value::json::eval(j, &eval_args(args, env, sq, row)?),
    }
}

/// `.ceiling()`, `.floor()`, `.abs()` of a jsonpath number: the numeric
/// functions of those names.
pub(crate) fn numeric_method(name: &str, v: Value) -> Result<Value> {
    let vals = [v];
    match name {
        "ceiling" => math::ceil_or_floor(&vals, true),
        "floor" => math::ceil_or_floor(&vals, false),
        _ => math::abs_value(&vals),
    }
}

/// `s ~ pattern` / `s ~* pattern` (jsonpath's like_regex).
pub(crate) fn regex_is_match(s: &str, pattern: &str, ci: bool) -> Result<bool> {
    regex::is_match(s, pattern, ci)
}

fn eval_args(args: &[Expr], env: &Env<'_>, sq: &mut dyn SubqueryRunner, row: &[Value]) -> Result<Vec<Value>> {
    let mut vals = Vec::with_capacity(args.len());
    for a in args {
        vals.push(a.eval(env, sq, row)?);
    }
    Ok(vals)
}
