//! Binding of the interval functions: age, make_interval (also with
//! PostgreSQL's named arguments) and justify_days/hours/interval.

use pgtier_engine::DataType;
use sqlparser::ast;

use super::{Binder, Ty};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::expr::Func;
use crate::value;

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

impl Binder<'_> {
    /// age, make_interval, justify_*; `sig` is the call's signature for 42883.
    pub(super) fn interval_function(&mut self, name: &str, bound: Vec<(Expr, Ty)>, sig: &str) -> Result<(Expr, Ty)> {
        let interval = Some(DataType::Interval);
        match name {
            "age" => self.age(bound, sig),
            "make_interval" => {
                if bound.len() != MAKE_INTERVAL_PARAMS.len() {
                    return Err(SqlError::undefined_function(sig));
                }
                let mut out = Vec::with_capacity(bound.len());
                for (k, (e, t)) in bound.into_iter().enumerate() {
                    out.push(if k + 1 == MAKE_INTERVAL_PARAMS.len() {
                        match t {
                            Some(t) if value::category(t) != value::Category::Numeric => {
                                return Err(SqlError::undefined_function(sig));
                            }
                            _ => self.result_cast(e, t, Some(DataType::Float8))?,
                        }
                    } else {
                        self.int4_param(e, t, sig)?
                    });
                }
                Ok((Expr::Func(Func::MakeInterval, out), interval))
            }
            _ => {
                let f = match name {
                    "justify_days" => Func::JustifyDays,
                    "justify_hours" => Func::JustifyHours,
                    _ => Func::JustifyInterval,
                };
                let [(e, t)]: [(Expr, Ty); 1] = bound.try_into().map_err(|_| SqlError::undefined_function(sig))?;
                let e = match t {
                    Some(DataType::Interval) => e,
                    None => self.coerce(e, None, DataType::Interval, name)?,
                    Some(_) => return Err(SqlError::undefined_function(sig)),
                };
                Ok((Expr::Func(f, vec![e]), interval))
            }
        }
    }

    /// age(a, b) of two timestamps, or age(x) from today's midnight. The
    /// timestamp version when a side is a timestamp and none a timestamptz,
    /// else the timestamptz one (the preferred type, also for dates).
    fn age(&mut self, bound: Vec<(Expr, Ty)>, sig: &str) -> Result<(Expr, Ty)> {
        let is_instant =
            |t: Ty| matches!(t, None | Some(DataType::Date | DataType::Timestamp(_) | DataType::TimestampTz(_)));
        if bound.is_empty() || bound.len() > 2 || !bound.iter().all(|(_, t)| is_instant(*t)) {
            return Err(SqlError::undefined_function(sig));
        }
        if bound.len() == 1 && bound[0].1.is_none() {
            return Err(SqlError::new("42725", format!("function {sig} is not unique"))
                .with_hint("Could not choose a best candidate function. You might need to add explicit type casts."));
        }
        let any = |f: fn(DataType) -> bool| bound.iter().any(|(_, t)| t.is_some_and(f));
        let plain = any(|t| matches!(t, DataType::Timestamp(_))) && !any(|t| matches!(t, DataType::TimestampTz(_)));
        let want = if plain { DataType::Timestamp(None) } else { DataType::TimestampTz(None) };
        let mut args = Vec::with_capacity(2);
        if bound.len() == 1 {
            let today = Expr::Cast(Expr::Func(Func::Now, Vec::new()).boxed(), DataType::Date, false);
            args.push(Expr::Cast(today.boxed(), want, false));
        }
        for (e, t) in bound {
            args.push(self.result_cast(e, t, Some(want))?);
        }
        Ok((Expr::Func(Func::Age, args), Some(DataType::Interval)))
    }
}
