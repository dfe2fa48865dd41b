//! make_interval's named arguments (`make_interval(days => 1)`), put in
//! positional order before the call is resolved (expr/functions/interval_fns.rs);
//! and the typmods of `interval '...' day to second(2)` and
//! `x::interval minute` as PostgreSQL's grammar takes them.

use sqlparser::ast;

use crate::error::{Result, SqlError};
use crate::value::interval_in::{self, Typmod};

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

/// 42601 for an interval qualifier PostgreSQL's grammar does not take
/// (`interval '1' week`, `day(2)`, `year to day`).
fn qualifier_syntax(near: impl std::fmt::Display) -> SqlError {
    SqlError::new("42601", format!("syntax error at or near \"{near}\""))
}

/// A precision above 6 is 6 (PostgreSQL warns and reduces it).
fn precision(p: Option<u64>) -> Option<u8> {
    p.map(|p| u8::try_from(p.min(6)).unwrap_or(6))
}

/// The typmod of `interval '...' <fields>[(p)]` and `interval(p) '...'`.
pub(super) fn literal_typmod(iv: &ast::Interval) -> Result<Typmod> {
    use ast::DateTimeField as F;
    let bit = |f: &F| -> Result<u16> {
        Ok(match f {
            F::Year => interval_in::YEAR,
            F::Month => interval_in::MONTH,
            F::Day => interval_in::DAY,
            F::Hour => interval_in::HOUR,
            F::Minute => interval_in::MINUTE,
            F::Second => interval_in::SECOND,
            other => return Err(qualifier_syntax(other)),
        })
    };
    let Some(lead) = &iv.leading_field else {
        if iv.last_field.is_some() {
            return Err(qualifier_syntax("TO"));
        }
        let p = iv.fractional_seconds_precision.or(iv.leading_precision);
        return Ok(Typmod { range: interval_in::FULL_RANGE, precision: precision(p) });
    };
    let first = bit(lead)?;
    let Some(last) = &iv.last_field else {
        // SECOND(p): sqlparser reads it as a leading precision; any other
        // field takes none, and SECOND only one.
        if (iv.leading_precision.is_some() && first != interval_in::SECOND) || iv.fractional_seconds_precision.is_some()
        {
            return Err(qualifier_syntax("("));
        }
        return Ok(Typmod { range: first, precision: precision(iv.leading_precision) });
    };
    if iv.leading_precision.is_some() {
        return Err(qualifier_syntax("("));
    }
    let range = to_range(first, bit(last)?).ok_or_else(|| qualifier_syntax(last))?;
    Ok(Typmod { range, precision: precision(iv.fractional_seconds_precision) })
}

/// `a TO b` as a range mask, for the pairs the grammar has.
fn to_range(first: u16, last: u16) -> Option<u16> {
    use interval_in::{DAY, HOUR, MINUTE, MONTH, SECOND, YEAR};
    Some(match (first, last) {
        (YEAR, MONTH) => YEAR | MONTH,
        (DAY, HOUR) => DAY | HOUR,
        (DAY, MINUTE) => DAY | HOUR | MINUTE,
        (DAY, SECOND) => DAY | HOUR | MINUTE | SECOND,
        (HOUR, MINUTE) => HOUR | MINUTE,
        (HOUR, SECOND) => HOUR | MINUTE | SECOND,
        (MINUTE, SECOND) => MINUTE | SECOND,
        _ => return None,
    })
}

/// The typmod of the type `interval <fields>[(p)]`; None without either.
pub(super) fn type_typmod(fields: Option<ast::IntervalFields>, p: Option<u64>) -> Result<Option<Typmod>> {
    use ast::IntervalFields as F;
    use interval_in::{DAY, HOUR, MINUTE, MONTH, SECOND, YEAR};
    let Some(fields) = fields else {
        return Ok(p.map(|p| Typmod { range: interval_in::FULL_RANGE, precision: precision(Some(p)) }));
    };
    let range = match fields {
        F::Year => YEAR,
        F::Month => MONTH,
        F::Day => DAY,
        F::Hour => HOUR,
        F::Minute => MINUTE,
        F::Second => SECOND,
        F::YearToMonth => YEAR | MONTH,
        F::DayToHour => DAY | HOUR,
        F::DayToMinute => DAY | HOUR | MINUTE,
        F::DayToSecond => DAY | HOUR | MINUTE | SECOND,
        F::HourToMinute => HOUR | MINUTE,
        F::HourToSecond => HOUR | MINUTE | SECOND,
        F::MinuteToSecond => MINUTE | SECOND,
    };
    // Only a qualifier ending in SECOND takes a precision.
    if p.is_some() && range & SECOND == 0 {
        return Err(qualifier_syntax("("));
    }
    Ok(Some(Typmod { range, precision: precision(p) }))
}
