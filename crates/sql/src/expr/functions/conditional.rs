//! COALESCE, GREATEST and LEAST: any number of arguments in their common
//! type (PostgreSQL's CoalesceExpr and MinMaxExpr, called like functions).
//! NULLIF, a comparison, is bound with the operators.

use std::cmp::Ordering;

use pgtier_engine::Value;

use super::registry::{ArgBinder, Call, EvalFn, FunctionDef, Ty, Volatility::Immutable};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value;

pub(super) const DEFS: &[FunctionDef] = &[
    FunctionDef {
        names: &["coalesce"],
        volatility: Immutable,
        resolve: |_, b, call| {
            let (args, common) = common_args(b, call)?;
            Ok((Expr::Coalesce(args), common))
        },
    },
    FunctionDef {
        names: &["greatest"],
        volatility: Immutable,
        resolve: |def, b, call| min_max(def, b, call, |v, _| Ok(best_of(v, Ordering::Greater))),
    },
    FunctionDef {
        names: &["least"],
        volatility: Immutable,
        resolve: |def, b, call| min_max(def, b, call, |v, _| Ok(best_of(v, Ordering::Less))),
    },
];

/// The arguments in their common type (text when all are unknown).
fn common_args(b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Vec<Expr>, Ty)> {
    if call.args.is_empty() {
        return Err(SqlError::syntax(format!("syntax error at or near \")\" in {}()", call.name)));
    }
    b.common(call.args, &call.name.to_uppercase())
}

fn min_max(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>, eval: EvalFn) -> Result<(Expr, Ty)> {
    let (args, common) = common_args(b, call)?;
    // Not strict: NULL arguments are skipped.
    Ok((Expr::Func(super::Func::Builtin(def.call(eval).lax()), args), common))
}

/// The argument that sorts `wanted` of all others; NULLs are skipped.
fn best_of(vals: &[Value], wanted: Ordering) -> Value {
    let mut best: Option<&Value> = None;
    for v in vals.iter().filter(|v| !v.is_null()) {
        if best.is_none_or(|b| value::sort_cmp(v, b) == wanted) {
            best = Some(v);
        }
    }
    best.cloned().unwrap_or(Value::Null)
}
