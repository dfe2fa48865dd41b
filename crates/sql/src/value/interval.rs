//! `interval`: its input (read in interval_in.rs), and its arithmetic with intervals,
//! dates, timestamps and times. The value is the engine's
//! [`Interval`] (months, days, microseconds); output lives with it.

use pgtier_engine::{DataType, Interval, Value, civil_from_days, days_from_civil, round_to_precision};

use crate::error::{Result, SqlError};
use crate::value::time::{TIMESTAMP_END, TIMESTAMP_MIN};
use crate::value::{ArithOp, MICROS_PER_DAY};

/// interval_in without a typmod (crate::value::interval_in).
pub fn parse(text: &str) -> Result<Interval> {
    super::interval_in::parse(text, super::interval_in::Typmod::FULL)
}

fn out_of_range(what: &str) -> SqlError {
    SqlError::new("22008", format!("{what} out of range"))
}

/// AdjustIntervalForTypmod's precision: the time part rounded to `p`
/// fractional digits of a second, half away from zero; above 6 nothing
/// changes (PostgreSQL warns and uses 6).
pub fn round_seconds(v: Interval, p: u64) -> Result<Interval> {
    if p >= 6 {
        return Ok(v);
    }
    let scale = 10_i64.pow(6 - u32::try_from(p).unwrap_or(6));
    let half = scale / 2;
    let overflow = || SqlError::new("22008", "interval out of range");
    let magnitude = v.micros.unsigned_abs().checked_add(half.unsigned_abs()).ok_or_else(overflow)?
        / scale.unsigned_abs()
        * scale.unsigned_abs();
    let micros = i64::try_from(magnitude).map_err(|_| overflow())?;
    Ok(Interval { micros: if v.micros < 0 { -micros } else { micros }, ..v })
}

pub fn add(a: Interval, b: Interval) -> Result<Interval> {
    let err = || out_of_range("interval");
    Ok(Interval {
        months: a.months.checked_add(b.months).ok_or_else(err)?,
        days: a.days.checked_add(b.days).ok_or_else(err)?,
        micros: a.micros.checked_add(b.micros).ok_or_else(err)?,
    })
}

pub fn negate(v: Interval) -> Result<Interval> {
    let err = || out_of_range("interval");
    Ok(Interval {
        months: v.months.checked_neg().ok_or_else(err)?,
        days: v.days.checked_neg().ok_or_else(err)?,
        micros: v.micros.checked_neg().ok_or_else(err)?,
    })
}

/// timestamp_pl_interval: months (the day clamped to the month's end),
/// then days, then microseconds.
fn timestamp_plus(ts: i64, v: Interval) -> Result<i64> {
    let err = || out_of_range("timestamp");
    // An infinity plus any interval stays itself (timestamp_pl_interval).
    if crate::value::is_infinite_micros(ts) {
        return Ok(ts);
    }
    let mut ts = ts;
    if v.months != 0 {
        let (y, m, d) = civil_from_days(ts.div_euclid(MICROS_PER_DAY));
        let month0 = y * 12 + i64::from(m) - 1 + i64::from(v.months);
        let (y, m) = (month0.div_euclid(12), u32::try_from(month0.rem_euclid(12) + 1).unwrap_or(1));
        let last = (28..=31).rev().find(|&dd| civil_from_days(days_from_civil(y, m, dd)).1 == m).unwrap_or(28);
        ts = days_from_civil(y, m, d.min(last)).checked_mul(MICROS_PER_DAY).ok_or_else(err)?
            + ts.rem_euclid(MICROS_PER_DAY);
    }
    ts = ts.checked_add(i64::from(v.days).checked_mul(MICROS_PER_DAY).ok_or_else(err)?).ok_or_else(err)?;
    ts = ts.checked_add(v.micros).ok_or_else(err)?;
    if (TIMESTAMP_MIN..TIMESTAMP_END).contains(&ts) { Ok(ts) } else { Err(err()) }
}

/// interval_mul / interval_div: each field times the factor, the whole
/// months and days kept, their fractions cascaded down (a month is 30
/// days, a day 86,400 s) but never up, in PostgreSQL's floating-point
/// steps so the rounding is the same.
pub fn scale(v: Interval, factor: f64, divide: bool) -> Result<Interval> {
    const DAYS_PER_MONTH: f64 = 30.0;
    const SECS_PER_DAY: f64 = 86_400.0;
    // TSROUND: rounds to microsecond precision to absorb binary noise.
    let ts_round = |x: f64| (x * 1e6).round_ties_even() / 1e6;
    if divide && factor == 0.0 {
        return Err(SqlError::new("22012", "division by zero"));
    }
    let times = |x: f64| if divide { x / factor } else { x * factor };
    let err = || out_of_range("interval");
    let whole32 =
        |x: f64| if (f64::from(i32::MIN)..-f64::from(i32::MIN)).contains(&x) { Ok(x.trunc()) } else { Err(err()) };
    let month_product = times(f64::from(v.months));
    let day_product = times(f64::from(v.days));
    let months = whole32(month_product)?;
    let mut days = whole32(day_product)?;
    let month_remainder_days = ts_round((month_product - months) * DAYS_PER_MONTH);
    let mut sec_remainder =
        ts_round((day_product - days + month_remainder_days - month_remainder_days.trunc()) * SECS_PER_DAY);
    if sec_remainder.abs() >= SECS_PER_DAY {
        let carried = (sec_remainder / SECS_PER_DAY).trunc();
        days = whole32(days + carried)?;
        sec_remainder -= carried * SECS_PER_DAY;
    }
    days = whole32(days + month_remainder_days.trunc())?;
    #[allow(clippy::cast_precision_loss)]
    let micros = (times(v.micros as f64) + sec_remainder * 1e6).round_ties_even();
    if !f64_fits_i64(micros) {
        return Err(err());
    }
    #[allow(clippy::cast_possible_truncation)]
    Ok(Interval { months: months as i32, days: days as i32, micros: micros as i64 })
}

/// Whether a float is in i64's range (NaN is not), so `as i64` is exact
/// for a whole one.
#[allow(clippy::cast_precision_loss)]
pub(crate) fn f64_fits_i64(x: f64) -> bool {
    // -2^63 and 2^63 are exact doubles.
    (i64::MIN as f64..-(i64::MIN as f64)).contains(&x)
}

/// timestamptz_pl_interval: months and days move the local time in the
/// session's zone (a day across a DST change is 23 or 25 hours), the rest
/// is added to the instant.
fn timestamptz_plus(t: i64, v: Interval) -> Result<i64> {
    // An infinity stays itself; it has no local time to move.
    if crate::tz::session_is_utc() || (v.months == 0 && v.days == 0) || crate::value::is_infinite_micros(t) {
        return timestamp_plus(t, v);
    }
    let local = timestamp_plus(crate::tz::to_local(t), Interval { months: v.months, days: v.days, micros: 0 })?;
    timestamp_plus(crate::tz::from_local(local), Interval { months: 0, days: 0, micros: v.micros })
}

/// A date (as its midnight: 22008 past the timestamp range), timestamp or
/// timestamptz as microseconds; None for other values.
fn instant(v: &Value) -> Result<Option<i64>> {
    Ok(match v {
        Value::Date(d) => Some(crate::value::date_micros(*d)?),
        Value::Timestamp(t) | Value::TimestampTz(t) => Some(*t),
        _ => None,
    })
}

/// The date/time arithmetic the binder typed `ty`: interval ± interval,
/// date/timestamp/timestamptz ± interval, time ± interval, timestamp −
/// timestamp and time − time (intervals), date + time.
pub fn arith(op: ArithOp, a: &Value, b: &Value, ty: DataType) -> Result<Value> {
    let undefined = || SqlError::undefined_operator(&format!("{} {} {}", a.type_name(), op.symbol(), b.type_name()));
    let signed = |v: Interval| if op == ArithOp::Sub { negate(v) } else { Ok(v) };
    Ok(match (ty, a, b) {
        (DataType::Timestamp(_), Value::Date(_), Value::Time(_))
        | (DataType::Timestamp(_), Value::Time(_), Value::Date(_)) => crate::value::time::date_plus_time(a, b)?,
        (DataType::Interval, Value::Interval(x), Value::Interval(y)) => Value::Interval(add(*x, signed(*y)?)?),
        (DataType::Interval, Value::Interval(v), n) | (DataType::Interval, n, Value::Interval(v))
            if op == ArithOp::Mul =>
        {
            Value::Interval(scale(*v, crate::value::to_f64(n).ok_or_else(undefined)?, false)?)
        }
        (DataType::Interval, Value::Interval(v), n) if op == ArithOp::Div => {
            Value::Interval(scale(*v, crate::value::to_f64(n).ok_or_else(undefined)?, true)?)
        }
        (DataType::Interval, Value::Time(x), Value::Time(y)) if op == ArithOp::Sub => {
            Value::Interval(Interval { months: 0, days: 0, micros: x - y })
        }
        (DataType::Interval, x, y) if op == ArithOp::Sub => {
            // timestamp_mi then interval_justify_hours: whole days apart.
            let (x, y) = (instant(x)?.ok_or_else(undefined)?, instant(y)?.ok_or_else(undefined)?);
            if crate::value::is_infinite_micros(x) || crate::value::is_infinite_micros(y) {
                return Err(SqlError::new("22008", "cannot subtract infinite timestamps"));
            }
            let diff = x.checked_sub(y).ok_or_else(|| out_of_range("interval"))?;
            let days = i32::try_from(diff / MICROS_PER_DAY).map_err(|_| out_of_range("interval"))?;
            Value::Interval(Interval { months: 0, days, micros: diff % MICROS_PER_DAY })
        }
        (DataType::Time(_), Value::Time(t), Value::Interval(v))
        | (DataType::Time(_), Value::Interval(v), Value::Time(t)) => Value::Time(
            t.checked_add(signed(*v)?.micros).ok_or_else(|| out_of_range("time"))?.rem_euclid(MICROS_PER_DAY),
        ),
        (DataType::TimeTz(_), Value::TimeTz(t, z), Value::Interval(v))
        | (DataType::TimeTz(_), Value::Interval(v), Value::TimeTz(t, z)) => {
            crate::value::timetz::plus_interval(*t, *z, signed(*v)?)?
        }
        (DataType::TimestampTz(_), Value::Date(d), Value::TimeTz(t, z))
        | (DataType::TimestampTz(_), Value::TimeTz(t, z), Value::Date(d)) => {
            crate::value::timetz::date_plus(*d, *t, *z)?
        }
        (DataType::TimestampTz(_), Value::TimestampTz(t), Value::Interval(v))
        | (DataType::TimestampTz(_), Value::Interval(v), Value::TimestampTz(t)) => {
            Value::TimestampTz(timestamptz_plus(*t, signed(*v)?)?)
        }
        (DataType::Timestamp(_) | DataType::TimestampTz(_), x, Value::Interval(v))
        | (DataType::Timestamp(_) | DataType::TimestampTz(_), Value::Interval(v), x) => {
            let ts = timestamp_plus(instant(x)?.ok_or_else(undefined)?, signed(*v)?)?;
            if matches!(ty, DataType::TimestampTz(_)) {
                Value::TimestampTz(crate::tz::from_local(ts))
            } else {
                Value::Timestamp(ts)
            }
        }
        _ => return Err(undefined()),
    })
}

/// time ↔ interval (interval_time takes the clock part modulo a day).
pub fn cast(v: Value, to: DataType) -> Value {
    match (to, v) {
        (DataType::Interval, Value::Time(t)) => Value::Interval(Interval { months: 0, days: 0, micros: t }),
        (DataType::Time(p), Value::Interval(iv)) => {
            Value::Time(round_to_precision(iv.micros.rem_euclid(MICROS_PER_DAY), p))
        }
        (_, v) => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(text: &str) -> (i32, i32, i64) {
        let v = parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        (v.months, v.days, v.micros)
    }

    #[test]
    fn postgres_style_input() {
        let h = 3_600_000_000;
        assert_eq!(iv("1 year 2 months 3 days 04:05:06"), (14, 3, 4 * h + 5 * 60_000_000 + 6_000_000));
        assert_eq!(iv("@ 1 day 2 hours ago"), (0, -1, -2 * h));
        assert_eq!(iv("1.5 days"), (0, 1, 12 * h));
        assert_eq!(iv("1.5 weeks"), (0, 10, 12 * h));
        assert_eq!(iv("-1 days +02:00"), (0, -1, 2 * h));
        assert_eq!(iv("10"), (0, 0, 10_000_000));
        assert_eq!(iv("1 12:00"), (0, 1, 12 * h));
        assert_eq!(iv("100:00:00"), (0, 0, 100 * h));
        assert_eq!(iv("2 mons 1.5 years"), (20, 0, 0));
        assert_eq!(iv("1d2h3m"), (0, 1, 2 * h + 3 * 60_000_000));
        assert_eq!(iv("1 day 12:00:00"), (0, 1, 12 * h));
        assert_eq!(iv("1-2"), (14, 0, 0));
        assert_eq!(iv("-1-2 3 -4:05:06"), (-14, 3, -(4 * h + 5 * 60_000_000 + 6_000_000)));
        assert_eq!(iv("P1Y2M3DT4H5M6S"), (14, 3, 4 * h + 5 * 60_000_000 + 6_000_000));
        assert_eq!(iv("P0001-02-03T04:05:06"), (14, 3, 4 * h + 5 * 60_000_000 + 6_000_000));
    }

    #[test]
    fn refusals() {
        for (text, state) in [
            ("", "22007"),
            ("1 fortnight", "22007"),
            ("1 day 2 days", "22007"),
            ("day", "22007"),
            ("P0x1Y", "0A000"),
            (" P1Y", "22007"),
            ("99999999999 years", "22015"),
        ] {
            assert_eq!(parse(text).err().map(|e| e.sqlstate), Some(state), "{text}");
        }
    }

    #[test]
    fn month_arithmetic_clamps_to_the_month_end() {
        let jan31 = days_from_civil(2024, 1, 31) * MICROS_PER_DAY;
        let feb29 = days_from_civil(2024, 2, 29) * MICROS_PER_DAY;
        assert_eq!(timestamp_plus(jan31, Interval { months: 1, days: 0, micros: 0 }).ok(), Some(feb29));
        assert_eq!(
            timestamp_plus(feb29, Interval { months: -12, days: 1, micros: 0 }).ok(),
            Some(days_from_civil(2023, 3, 1) * MICROS_PER_DAY)
        );
    }
}
