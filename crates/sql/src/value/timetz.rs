//! `time [(p)] with time zone`: PostgreSQL's timetz_in (the zone read from
//! the input, or the session's), its order, its arithmetic with interval,
//! AT TIME ZONE and the casts (extract is with time's, in
//! `expr::functions::interval_fns`). The value is the engine's
//! `Value::TimeTz(local micros, seconds west)`, PostgreSQL's TimeTzADT;
//! output lives with the engine's value.
//!
//! Where the offset depends on a date the input does not give (a zone with
//! daylight-saving rules, no zone in a session zone that has them),
//! PostgreSQL takes today's date; pgtier takes the transaction's start, and
//! refuses (0A000) where it has none.

use std::cmp::Ordering;

use pgtier_engine::{Interval, Value, round_to_precision};

use crate::error::{Result, SqlError};
use crate::tz::Zone;
use crate::value::time::{Bad, parse_time};
use crate::value::{MICROS_PER_DAY, MICROS_PER_SECOND};

const TYPE_NAME: &str = "time with time zone";

/// timetz_in, then the column's precision (AdjustTimeForTypmod).
pub fn parse(text: &str, precision: Option<u8>) -> Result<Value> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("now") {
        let start = transaction_start()?;
        let local = crate::tz::to_local(start);
        let west = -crate::tz::offset_at(start);
        return Ok(Value::TimeTz(round_to_precision(local.rem_euclid(MICROS_PER_DAY), precision), west));
    }
    let clock = parse_time(t).map_err(|bad| bad.error(TYPE_NAME, text))?;
    let micros = round_to_precision(clock.micros, precision);
    let days = match clock.date {
        Some(d) => Some(super::datetime_in::parse_date(d).ok_or_else(|| Bad::Range.error(TYPE_NAME, text))?),
        None => None,
    };
    let east = match clock.zone {
        None => local_offset(&session_zone(), days, clock.micros)?,
        Some(z) if z.eq_ignore_ascii_case("z") || z.eq_ignore_ascii_case("zulu") => 0,
        Some(z) if z.starts_with(['+', '-']) => match crate::tz::decode_numeric_zone(z) {
            Ok(east) => east,
            Err(true) => {
                return Err(SqlError::new("22009", format!("time zone displacement out of range: \"{text}\"")));
            }
            Err(false) => return Err(Bad::Syntax.error(TYPE_NAME, text)),
        },
        Some(z) => {
            let zone = crate::tz::lookup(z).ok_or_else(|| Bad::Syntax.error(TYPE_NAME, text))?;
            local_offset(&zone, days, clock.micros)?
        }
    };
    Ok(Value::TimeTz(micros, -east))
}

fn transaction_start() -> Result<i64> {
    crate::clock::transaction_start().ok_or_else(|| {
        SqlError::unsupported(
            "a time with time zone whose offset depends on today's date here (only a statement's own constants and parameters read the transaction's start)",
        )
    })
}

/// The session's zone (UTC in the default session).
fn session_zone() -> Zone {
    crate::tz::session_zone().unwrap_or(Zone::Fixed { east_secs: 0, abbrev: "UTC".to_owned() })
}

/// Seconds east of UTC of `zone` at local time `micros` of day `days`
/// (today, the transaction's, when none is given) as DetermineTimeZoneOffset
/// resolves it.
fn local_offset(zone: &Zone, days: Option<i32>, micros: i64) -> Result<i32> {
    if let Zone::Fixed { east_secs, .. } = zone {
        return Ok(*east_secs);
    }
    let days = match days {
        Some(d) => i64::from(d),
        None => crate::tz::to_local(transaction_start()?).div_euclid(MICROS_PER_DAY),
    };
    let local = days * MICROS_PER_DAY + micros;
    let utc = zone.from_local(local);
    i32::try_from((local - utc) / MICROS_PER_SECOND).map_err(|_| SqlError::new("22008", "time zone out of range"))
}

/// timetz_cmp: the UTC time, then the zone (the one further west is greater).
pub fn compare(a: (i64, i32), b: (i64, i32)) -> Ordering {
    let utc = |(t, z): (i64, i32)| t + i64::from(z) * MICROS_PER_SECOND;
    utc(a).cmp(&utc(b)).then(a.1.cmp(&b.1))
}

/// timetz ± interval: the clock moves (modulo a day), the zone stays.
pub fn plus_interval(time: i64, west: i32, v: Interval) -> Result<Value> {
    let t = time.checked_add(v.micros).ok_or_else(|| SqlError::new("22008", "time out of range"))?;
    Ok(Value::TimeTz(t.rem_euclid(MICROS_PER_DAY), west))
}

/// date + timetz: the instant of that clock on that day in its zone
/// (datetimetz_timestamptz).
pub fn date_plus(days: i32, time: i64, west: i32) -> Result<Value> {
    if crate::value::is_infinite_date(days) {
        return Ok(Value::TimestampTz(crate::value::date_micros(days)?));
    }
    let micros = i64::from(days) * MICROS_PER_DAY + time + i64::from(west) * MICROS_PER_SECOND;
    if !(crate::value::time::TIMESTAMP_MIN..crate::value::time::TIMESTAMP_END).contains(&micros) {
        return Err(SqlError::new("22008", "timestamp out of range"));
    }
    Ok(Value::TimestampTz(micros))
}

/// The same instant's clock in the zone `west` (timetz_zone, timetz_izone).
fn shifted(time: i64, west: i32, to_west: i32) -> Value {
    let t = time + i64::from(west - to_west) * MICROS_PER_SECOND;
    Value::TimeTz(t.rem_euclid(MICROS_PER_DAY), to_west)
}

/// timetz AT TIME ZONE text: an abbreviation's fixed offset, else the
/// zone's offset at `now`, the transaction's start.
pub fn at_zone(time: i64, west: i32, name: &str, now: i64) -> Result<Value> {
    let east = crate::tz::zone_arg(name)?.offset_at(now);
    Ok(shifted(time, west, -east))
}

/// timetz AT TIME ZONE interval: the interval's clock part, east of UTC.
pub fn at_interval(time: i64, west: i32, v: Interval) -> Result<Value> {
    if v.months != 0 || v.days != 0 {
        return Err(SqlError::new(
            "22023",
            format!("interval time zone \"{}\" must not include months or days", Value::Interval(v)),
        ));
    }
    let east = i32::try_from(v.micros / MICROS_PER_SECOND)
        .map_err(|_| SqlError::new("22023", "interval time zone out of range"))?;
    Ok(shifted(time, west, -east))
}

/// A time or timestamptz as timetz: the session's local clock and offset
/// (time_timetz takes today's offset, timestamptz_timetz the instant's).
pub fn cast_from(v: &Value, precision: Option<u8>) -> Result<Option<Value>> {
    Ok(Some(match v {
        Value::TimeTz(t, z) => Value::TimeTz(round_to_precision(*t, precision), *z),
        Value::Time(t) => {
            let east = local_offset(&session_zone(), None, *t)?;
            Value::TimeTz(round_to_precision(*t, precision), -east)
        }
        Value::TimestampTz(t) if crate::value::is_infinite_micros(*t) => Value::Null,
        Value::TimestampTz(t) => {
            let east = crate::tz::offset_at(*t);
            let local = crate::tz::to_local(*t).rem_euclid(MICROS_PER_DAY);
            Value::TimeTz(round_to_precision(local, precision), -east)
        }
        _ => return Ok(None),
    }))
}
