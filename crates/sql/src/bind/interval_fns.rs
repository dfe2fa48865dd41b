//! make_interval's named arguments (`make_interval(days => 1)`), put in
//! positional order before the call is resolved (expr/functions/interval_fns.rs).

use sqlparser::ast;

use crate::error::{Result, SqlError};

/// make_interval's parameters, in order; each defaults to 0.
pub(super) const MAKE_INTERVAL_PARAMS: [&str; 7] = ["years", "months", "weeks", "days", "hours", "mins", "secs"];

/// make_interval's arguments in positional order: `positional` first, then
/// each remaining parameter from `named` or its default 0 (42883 for a
/// name it does not have, 42P02-like duplicates as PostgreSQL: 42601).
pub(super) fn make_interval_args(
    positional: Vec<ast::Expr>,
    named: Vec<(String, ast::Expr)>,
) -> Result<Vec<ast::Expr>> {
    let mut slots: Vec<Option<ast::Expr>> = vec![None; MAKE_INTERVAL_PARAMS.len()];
    if positional.len() > slots.len() {
        return Err(SqlError::undefined_function("make_interval(...)"));
    }
    let first_named = positional.len();
    for (slot, e) in slots.iter_mut().zip(positional) {
        *slot = Some(e);
    }
    for (name, e) in named {
        let key = name.to_lowercase();
        let Some(k) = MAKE_INTERVAL_PARAMS.iter().position(|p| *p == key) else {
            return Err(SqlError::undefined_function(&format!("make_interval({key} => ...)")));
        };
        if k < first_named || slots[k].is_some() {
            return Err(SqlError::syntax(format!("argument name \"{key}\" used more than once")));
        }
        slots[k] = Some(e);
    }
    Ok(slots
        .into_iter()
        .map(|s| s.unwrap_or_else(|| ast::Expr::value(ast::Value::Number("0".into(), false))))
        .collect())
}
