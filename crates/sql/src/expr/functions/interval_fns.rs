//! Functions of intervals and times of day: extract / date_part from an
//! interval or a time, age, make_interval and the justify_* family, each
//! computed in PostgreSQL's own steps (interval2itm, timestamp_age), since
//! their field borrowing and float rounding are part of the answer.

use pgtier_engine::{DataType, Interval, Numeric, Value, civil_from_days};

use super::Func;
use super::datetime::DateField;
use super::registry::{ArgBinder, Call, EvalCtx, EvalFn, FunctionDef, Ty, Volatility::Immutable, float, int};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value::{self, MICROS_PER_DAY};

const MICROS_PER_HOUR: i64 = 3_600_000_000;
const MICROS_PER_MINUTE: i64 = 60_000_000;
const MICROS_PER_SECOND: i64 = 1_000_000;

fn out_of_range() -> SqlError {
    SqlError::new("22008", "interval out of range")
}

/// An exact result: numeric for extract, float8 for date_part.
fn exact(mantissa: i128, scale: u8, numeric: bool) -> Value {
    if numeric {
        return Value::Numeric(Numeric::new(mantissa, scale));
    }
    #[allow(clippy::cast_precision_loss)]
    Value::Float8(mantissa as f64 / 10f64.powi(i32::from(scale)))
}

/// Seconds and microseconds of a clock part (C division: signs follow it).
fn seconds_part(micros: i64) -> (i64, i64) {
    let in_minute = micros % MICROS_PER_MINUTE;
    (in_minute / MICROS_PER_SECOND, in_minute % MICROS_PER_SECOND)
}

/// The sub-minute fields both types share, as PostgreSQL computes them:
/// date_part's milliseconds and seconds are float sums, not divisions.
fn sub_minute(field: DateField, micros: i64, numeric: bool) -> Option<Value> {
    let (sec, fsec) = seconds_part(micros);
    let whole = i128::from(sec * MICROS_PER_SECOND + fsec);
    #[allow(clippy::cast_precision_loss)]
    Some(match field {
        DateField::Microseconds => exact(whole, 0, numeric),
        DateField::Milliseconds if numeric => exact(whole, 3, true),
        DateField::Milliseconds => Value::Float8(sec as f64 * 1000.0 + fsec as f64 / 1000.0),
        DateField::Second if numeric => exact(whole, 6, true),
        DateField::Second => Value::Float8(sec as f64 + fsec as f64 / 1_000_000.0),
        _ => return None,
    })
}

/// extract (numeric) or date_part (float8) of `field` from an interval
/// (interval_part: years and months from the month count, the clock part
/// split with its sign) or a time of day.
pub(super) fn extract(field: DateField, v: &Value, numeric: bool) -> Result<Value> {
    match v {
        Value::Interval(iv) => extract_interval(field, *iv, numeric),
        Value::Time(t) => extract_time(field, *t, numeric),
        Value::TimeTz(t, west) => extract_timetz(field, *t, *west, numeric),
        other => Err(SqlError::undefined_function(&format!("extract({})", other.type_name()))),
    }
}

fn extract_interval(field: DateField, iv: Interval, numeric: bool) -> Result<Value> {
    if let Some(v) = sub_minute(field, iv.micros, numeric) {
        return Ok(v);
    }
    let years = iv.months / 12;
    let int = |x: i64| exact(i128::from(x), 0, numeric);
    Ok(match field {
        DateField::Minute => int(iv.micros % MICROS_PER_HOUR / MICROS_PER_MINUTE),
        DateField::Hour => int(iv.micros / MICROS_PER_HOUR),
        DateField::Day => int(i64::from(iv.days)),
        DateField::Month => int(i64::from(iv.months % 12)),
        DateField::Quarter => int(i64::from(iv.months % 12 / 3 + 1)),
        DateField::Year => int(i64::from(years)),
        DateField::Decade => int(i64::from(years / 10)),
        DateField::Century => int(i64::from(years / 100)),
        DateField::Millennium => int(i64::from(years / 1000)),
        // A year is 365.25 days, a month 30 (in seconds, exactly).
        DateField::Epoch if numeric => {
            let secs =
                31_557_600 * i128::from(years) + 2_592_000 * i128::from(iv.months % 12) + 86_400 * i128::from(iv.days);
            exact(secs * 1_000_000 + i128::from(iv.micros), 6, true)
        }
        DateField::Epoch => {
            #[allow(clippy::cast_precision_loss)]
            let secs = iv.micros as f64 / 1_000_000.0
                + 365.25 * 86_400.0 * f64::from(years)
                + 30.0 * 86_400.0 * f64::from(iv.months % 12)
                + 86_400.0 * f64::from(iv.days);
            Value::Float8(secs)
        }
        _ => return Err(SqlError::new("0A000", format!("unit \"{}\" not supported for type interval", field.name()))),
    })
}

fn extract_time(field: DateField, t: i64, numeric: bool) -> Result<Value> {
    if let Some(v) = sub_minute(field, t, numeric) {
        return Ok(v);
    }
    Ok(match field {
        DateField::Minute => exact(i128::from(t % MICROS_PER_HOUR / MICROS_PER_MINUTE), 0, numeric),
        DateField::Hour => exact(i128::from(t / MICROS_PER_HOUR), 0, numeric),
        DateField::Epoch => exact(i128::from(t), 6, numeric),
        _ => {
            return Err(SqlError::new(
                "0A000",
                format!("unit \"{}\" not supported for type time without time zone", field.name()),
            ));
        }
    })
}

/// timetz_part_common: the clock's fields, the zone's (seconds east), and
/// the epoch of the clock in UTC.
fn extract_timetz(field: DateField, t: i64, west: i32, numeric: bool) -> Result<Value> {
    let east = -i128::from(west);
    Ok(match field {
        DateField::Timezone => exact(east, 0, numeric),
        DateField::TimezoneHour => exact(east / 3600, 0, numeric),
        DateField::TimezoneMinute => exact(east / 60 % 60, 0, numeric),
        DateField::Epoch => exact(i128::from(t) + i128::from(west) * i128::from(MICROS_PER_SECOND), 6, numeric),
        DateField::Microseconds | DateField::Milliseconds | DateField::Second | DateField::Minute | DateField::Hour => {
            extract_time(field, t, numeric)?
        }
        _ => {
            return Err(SqlError::new(
                "0A000",
                format!("unit \"{}\" not supported for type time with time zone", field.name()),
            ));
        }
    })
}

/// Broken-down fields of a timestamp (µs since 2000-01-01), as
/// timestamp2tm gives them: astronomical year, month 1-12, day, clock.
struct Fields {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
}

fn fields(ts: i64) -> Fields {
    let (year, month, day) = civil_from_days(ts.div_euclid(MICROS_PER_DAY));
    let clock = ts.rem_euclid(MICROS_PER_DAY);
    Fields {
        year,
        month: i64::from(month),
        day: i64::from(day),
        hour: clock / MICROS_PER_HOUR,
        minute: clock % MICROS_PER_HOUR / MICROS_PER_MINUTE,
        second: clock % MICROS_PER_MINUTE / MICROS_PER_SECOND,
        micros: clock % MICROS_PER_SECOND,
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// age(a, b): the symbolic difference of the two timestamps' fields,
/// negative fields borrowed from the next larger one (a month borrows the
/// length of the earlier timestamp's month), as timestamp_age does.
fn age(a: i64, b: i64) -> Result<Interval> {
    let (x, y) = (fields(a), fields(b));
    let flip = a < b;
    let sign = if flip { -1 } else { 1 };
    let mut f = Fields {
        year: sign * (x.year - y.year),
        month: sign * (x.month - y.month),
        day: sign * (x.day - y.day),
        hour: sign * (x.hour - y.hour),
        minute: sign * (x.minute - y.minute),
        second: sign * (x.second - y.second),
        micros: sign * (x.micros - y.micros),
    };
    while f.micros < 0 {
        f.micros += MICROS_PER_SECOND;
        f.second -= 1;
    }
    while f.second < 0 {
        f.second += 60;
        f.minute -= 1;
    }
    while f.minute < 0 {
        f.minute += 60;
        f.hour -= 1;
    }
    while f.hour < 0 {
        f.hour += 24;
        f.day -= 1;
    }
    let borrow_from = if flip { &x } else { &y };
    while f.day < 0 {
        f.day += days_in_month(borrow_from.year, borrow_from.month);
        f.month -= 1;
    }
    while f.month < 0 {
        f.month += 12;
        f.year -= 1;
    }
    let months = sign * (f.year * 12 + f.month);
    let days = sign * f.day;
    let micros = sign * (((f.hour * 60 + f.minute) * 60 + f.second) * MICROS_PER_SECOND + f.micros);
    Ok(Interval {
        months: i32::try_from(months).map_err(|_| out_of_range())?,
        days: i32::try_from(days).map_err(|_| out_of_range())?,
        micros,
    })
}

/// make_interval(years, months, weeks, days, hours, mins, secs).
fn make_interval(years: i64, months: i64, weeks: i64, days: i64, hours: i64, mins: i64, secs: f64) -> Result<Interval> {
    if !secs.is_finite() {
        return Err(out_of_range());
    }
    let month_count = years.checked_mul(12).and_then(|m| m.checked_add(months)).ok_or_else(out_of_range)?;
    let day_count = weeks.checked_mul(7).and_then(|d| d.checked_add(days)).ok_or_else(out_of_range)?;
    let secs_micros = (secs * 1e6).round_ties_even();
    if !crate::value::interval::f64_fits_i64(secs_micros) {
        return Err(out_of_range());
    }
    #[allow(clippy::cast_possible_truncation)]
    let micros = hours
        .checked_mul(MICROS_PER_HOUR)
        .and_then(|h| h.checked_add(mins.checked_mul(MICROS_PER_MINUTE)?))
        .and_then(|t| t.checked_add(secs_micros as i64))
        .ok_or_else(out_of_range)?;
    Ok(Interval {
        months: i32::try_from(month_count).map_err(|_| out_of_range())?,
        days: i32::try_from(day_count).map_err(|_| out_of_range())?,
        micros,
    })
}

/// Borrows one `unit` of `small` from `big` when their signs differ, so
/// both end with the same sign (the justify functions' last step).
fn agree_in_sign(big: &mut i64, small: &mut i64, unit: i64) {
    if *big > 0 && *small < 0 {
        *small += unit;
        *big -= 1;
    } else if *big < 0 && *small > 0 {
        *small -= unit;
        *big += 1;
    }
}

/// justify_hours: whole days out of the clock part, signs made to agree.
fn justify_hours(v: Interval) -> Result<Interval> {
    let mut days = i64::from(v.days) + v.micros / MICROS_PER_DAY;
    let mut micros = v.micros % MICROS_PER_DAY;
    agree_in_sign(&mut days, &mut micros, MICROS_PER_DAY);
    Ok(Interval { months: v.months, days: i32::try_from(days).map_err(|_| out_of_range())?, micros })
}

/// justify_days: whole 30-day months out of the days, signs made to agree.
fn justify_days(v: Interval) -> Result<Interval> {
    let mut months = i64::from(v.months) + i64::from(v.days / 30);
    let mut days = i64::from(v.days % 30);
    agree_in_sign(&mut months, &mut days, 30);
    Ok(Interval {
        months: i32::try_from(months).map_err(|_| out_of_range())?,
        days: i32::try_from(days).map_err(|_| out_of_range())?,
        micros: v.micros,
    })
}

/// justify_interval: hours into days, days into 30-day months, then one
/// sign throughout (interval_justify_interval's order of steps).
fn justify_interval(v: Interval) -> Result<Interval> {
    let mut months = i64::from(v.months);
    let mut days = i64::from(v.days);
    let mut micros = v.micros;
    if (days > 0 && micros > 0) || (days < 0 && micros < 0) {
        months += days / 30;
        days %= 30;
    }
    days += micros / MICROS_PER_DAY;
    micros %= MICROS_PER_DAY;
    months += days / 30;
    days %= 30;
    if months > 0 && (days < 0 || (days == 0 && micros < 0)) {
        days += 30;
        months -= 1;
    } else if months < 0 && (days > 0 || (days == 0 && micros > 0)) {
        days -= 30;
        months += 1;
    }
    agree_in_sign(&mut days, &mut micros, MICROS_PER_DAY);
    let whole = |x: i64| i32::try_from(x).map_err(|_| out_of_range());
    Ok(Interval { months: whole(months)?, days: whole(days)?, micros })
}

/// The interval functions.
pub(super) const DEFS: &[FunctionDef] = &[
    // age(x) reads the clock through the now() it binds to.
    FunctionDef { names: &["age"], volatility: Immutable, resolve: resolve_age },
    FunctionDef { names: &["make_interval"], volatility: Immutable, resolve: resolve_make_interval },
    FunctionDef {
        names: &["justify_days"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_justify(def, b, call, |v, _| justify_eval(v, justify_days)),
    },
    FunctionDef {
        names: &["justify_hours"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_justify(def, b, call, |v, _| justify_eval(v, justify_hours)),
    },
    FunctionDef {
        names: &["justify_interval"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_justify(def, b, call, |v, _| justify_eval(v, justify_interval)),
    },
];

type Resolved = Result<(Expr, Ty)>;

/// age(a, b) of two timestamps, or age(x) from today's midnight. The
/// timestamp version when a side is a timestamp and none a timestamptz,
/// else the timestamptz one (the preferred type, also for dates).
fn resolve_age(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    let is_instant =
        |t: Ty| matches!(t, None | Some(DataType::Date | DataType::Timestamp(_) | DataType::TimestampTz(_)));
    if call.is_empty() || call.len() > 2 || !call.args.iter().all(|(_, t)| is_instant(*t)) {
        return Err(call.undefined());
    }
    if call.len() == 1 && call.args[0].1.is_none() {
        return Err(call.not_unique());
    }
    let any = |f: fn(DataType) -> bool| call.args.iter().any(|(_, t)| t.is_some_and(f));
    let plain = any(|t| matches!(t, DataType::Timestamp(_))) && !any(|t| matches!(t, DataType::TimestampTz(_)));
    let want = if plain { DataType::Timestamp(None) } else { DataType::TimestampTz(None) };
    let mut args = Vec::with_capacity(2);
    if call.len() == 1 {
        let today =
            Expr::Cast(Expr::Func(Func::Builtin(super::datetime::NOW), Vec::new()).boxed(), DataType::Date, false);
        args.push(Expr::Cast(today.boxed(), want, false));
    }
    for (e, t) in call.args {
        args.push(b.result_cast(e, t, Some(want))?);
    }
    Ok((def.expr(age_eval, args), Some(DataType::Interval)))
}

/// age(timestamp, timestamp) or age(timestamptz, timestamptz) (fields in the session's zone).
fn age_eval(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    // PostgreSQL 15 answers with the fields of i64's ends (292277 years ...).
    if vals.iter().any(value::is_infinite_datetime) {
        return Err(SqlError::unsupported("age of an infinite timestamp"));
    }
    Ok(match (&vals[0], &vals[1]) {
        // timestamptz_age takes both fields in the session's zone.
        (Value::TimestampTz(a), Value::TimestampTz(b)) => {
            Value::Interval(age(crate::tz::to_local(*a), crate::tz::to_local(*b))?)
        }
        (Value::Timestamp(a) | Value::TimestampTz(a), Value::Timestamp(b) | Value::TimestampTz(b)) => {
            Value::Interval(age(*a, *b)?)
        }
        (a, b) => {
            return Err(SqlError::undefined_function(&format!(
                "age({}, {})",
                value::value_type_name(a),
                value::value_type_name(b)
            )));
        }
    })
}

/// make_interval(years, months, weeks, days, hours, mins, secs), every
/// argument given (the binder fills in the defaults of named ones).
fn resolve_make_interval(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    const PARAMS: usize = 7;
    if call.len() != PARAMS {
        return Err(call.undefined());
    }
    let mut out = Vec::with_capacity(PARAMS);
    let undefined = call.undefined();
    for (k, (e, t)) in call.args.into_iter().enumerate() {
        out.push(if k + 1 == PARAMS {
            match t {
                Some(t) if value::category(t) != value::Category::Numeric => return Err(undefined),
                _ => b.result_cast(e, t, Some(DataType::Float8))?,
            }
        } else {
            b.int4_param(e, t, call.sig)?
        });
    }
    let eval: EvalFn = |v, _| {
        Ok(Value::Interval(make_interval(
            int(v, 0),
            int(v, 1),
            int(v, 2),
            int(v, 3),
            int(v, 4),
            int(v, 5),
            float(v, 6),
        )?))
    };
    Ok((def.expr(eval, out), Some(DataType::Interval)))
}

fn resolve_justify(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>, eval: EvalFn) -> Resolved {
    let (name, undefined) = (call.name, call.undefined());
    let (e, t) = call.single()?;
    let e = match t {
        Some(DataType::Interval) => e,
        None => b.coerce(e, None, DataType::Interval, name)?,
        Some(_) => return Err(undefined),
    };
    Ok((def.expr(eval, vec![e]), Some(DataType::Interval)))
}

fn justify_eval(vals: &[Value], justify: fn(Interval) -> Result<Interval>) -> Result<Value> {
    let Value::Interval(v) = vals[0] else {
        return Err(SqlError::undefined_function(&format!("justify({})", value::value_type_name(&vals[0]))));
    };
    Ok(Value::Interval(justify(v)?))
}

/// interval(interval, int4), the coercion to an interval typmod.
pub(super) const INTERVAL_TYPMOD: super::Builtin = {
    const INTERVAL: FunctionDef =
        FunctionDef { names: &["interval"], volatility: Immutable, resolve: |_, _, call| Err(call.undefined()) };
    INTERVAL.call(interval_typmod_eval)
};

fn interval_typmod_eval(v: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    use crate::value::interval_in::{Typmod, adjust};
    match v {
        [Value::Interval(iv), Value::Int4(t)] => {
            let typmod = Typmod::decode(*t).ok_or_else(|| SqlError::new("XX000", "invalid interval typmod"))?;
            Ok(Value::Interval(adjust(*iv, typmod)?))
        }
        _ => Err(SqlError::new("XX000", "interval typmod coercion of a non-interval")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgtier_engine::days_from_civil;

    fn ts(y: i64, m: u32, d: u32, h: i64) -> i64 {
        days_from_civil(y, m, d) * MICROS_PER_DAY + h * MICROS_PER_HOUR
    }

    #[test]
    fn age_borrows_the_earlier_months_length() {
        // PostgreSQL: age('2001-04-10', '1957-06-13') = 43 years 9 mons 27 days.
        let v = age(ts(2001, 4, 10, 0), ts(1957, 6, 13, 0)).ok();
        assert_eq!(v, Some(Interval { months: 43 * 12 + 9, days: 27, micros: 0 }));
        let back = age(ts(1957, 6, 13, 0), ts(2001, 4, 10, 0)).ok();
        assert_eq!(back, Some(Interval { months: -(43 * 12 + 9), days: -27, micros: 0 }));
    }

    #[test]
    fn justify_keeps_one_sign() {
        let v = Interval { months: 1, days: 0, micros: -MICROS_PER_HOUR };
        assert_eq!(justify_interval(v).ok(), Some(Interval { months: 0, days: 29, micros: 23 * MICROS_PER_HOUR }));
    }
}
