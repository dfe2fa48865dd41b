//! Date and time functions on date, timestamp and timestamptz (the last in
//! the session's zone, tz.rs), declared in [`DEFS`]: now and the SQL clock
//! forms, clock_timestamp, date_trunc, extract / date_part, make_date,
//! make_timestamp[tz], to_char, to_timestamp, to_date, isfinite,
//! AT TIME ZONE.

use pgtier_engine::{DataType, Numeric, Value};

use super::Func;
use super::registry::{
    ArgBinder, Builtin, Call, CallData, EvalCtx, EvalFn, FunctionDef, Ty, Volatility, float, int, text,
};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value::types::RegKind;
use crate::value::{self, MICROS_PER_DAY, NUMERIC_ANY};

use Volatility::Immutable;

/// A field extract/date_part takes from a date or timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DateField {
    Microseconds,
    Milliseconds,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
    Decade,
    Century,
    Millennium,
    IsoYear,
    Dow,
    IsoDow,
    Doy,
    Julian,
    Epoch,
    Timezone,
    TimezoneHour,
    TimezoneMinute,
}

/// A unit name as PostgreSQL looks it up: lower case, cut to its token
/// length (10), so `microseconds` is `microsecon`.
fn unit_key(name: &str) -> String {
    name.to_ascii_lowercase().chars().take(10).collect()
}

impl DateField {
    /// The field named `name` (PostgreSQL's spellings), or None for one PostgreSQL does not know (22023).
    pub fn parse(name: &str) -> Option<DateField> {
        Some(match unit_key(name).as_str() {
            "microsecon" | "us" | "usec" | "usecond" | "useconds" | "usecs" => DateField::Microseconds,
            "millisecon" | "ms" | "msec" | "msecond" | "mseconds" | "msecs" => DateField::Milliseconds,
            "second" | "seconds" | "s" | "sec" | "secs" => DateField::Second,
            "minute" | "minutes" | "m" | "min" | "mins" => DateField::Minute,
            "hour" | "hours" | "h" | "hr" | "hrs" => DateField::Hour,
            "day" | "days" | "d" => DateField::Day,
            "week" | "weeks" | "w" => DateField::Week,
            "month" | "months" | "mon" | "mons" => DateField::Month,
            "quarter" | "qtr" => DateField::Quarter,
            "year" | "years" | "y" | "yr" | "yrs" => DateField::Year,
            "decade" | "decades" | "dec" | "decs" => DateField::Decade,
            "century" | "centuries" | "c" | "cent" => DateField::Century,
            "millennium" | "millennia" | "mil" | "mils" => DateField::Millennium,
            "isoyear" => DateField::IsoYear,
            "dow" => DateField::Dow,
            "isodow" => DateField::IsoDow,
            "doy" => DateField::Doy,
            "julian" | "j" | "jd" => DateField::Julian,
            "epoch" => DateField::Epoch,
            "timezone" => DateField::Timezone,
            "timezone_h" => DateField::TimezoneHour,
            "timezone_m" => DateField::TimezoneMinute,
            _ => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            DateField::Microseconds => "microseconds",
            DateField::Milliseconds => "milliseconds",
            DateField::Second => "second",
            DateField::Minute => "minute",
            DateField::Hour => "hour",
            DateField::Day => "day",
            DateField::Week => "week",
            DateField::Month => "month",
            DateField::Quarter => "quarter",
            DateField::Year => "year",
            DateField::Decade => "decade",
            DateField::Century => "century",
            DateField::Millennium => "millennium",
            DateField::IsoYear => "isoyear",
            DateField::Dow => "dow",
            DateField::IsoDow => "isodow",
            DateField::Doy => "doy",
            DateField::Julian => "julian",
            DateField::Epoch => "epoch",
            DateField::Timezone => "timezone",
            DateField::TimezoneHour => "timezone_hour",
            DateField::TimezoneMinute => "timezone_minute",
        }
    }

    /// The field named `name` if date_trunc takes it: PostgreSQL looks up
    /// date_trunc's units in the same table as extract's fields.
    pub fn parse_trunc(name: &str) -> Option<DateField> {
        DateField::parse(name).filter(|f| {
            !matches!(
                f,
                DateField::IsoYear
                    | DateField::Dow
                    | DateField::IsoDow
                    | DateField::Doy
                    | DateField::Julian
                    | DateField::Epoch
                    | DateField::Timezone
                    | DateField::TimezoneHour
                    | DateField::TimezoneMinute
            )
        })
    }

    /// Fields of the time of day (and zone), which a date does not have.
    pub(super) fn is_time(self) -> bool {
        matches!(
            self,
            DateField::Microseconds
                | DateField::Milliseconds
                | DateField::Second
                | DateField::Minute
                | DateField::Hour
                | DateField::Timezone
                | DateField::TimezoneHour
                | DateField::TimezoneMinute
        )
    }

    fn is_zone(self) -> bool {
        matches!(self, DateField::Timezone | DateField::TimezoneHour | DateField::TimezoneMinute)
    }
}

/// date_trunc of µs since 2000-01-01 (UTC: pgtier's only time zone).
/// Years before 1 (their decades and centuries count differently) are 0A000.
fn date_trunc(unit: DateField, t: i64) -> Result<i64> {
    let within_day = |step: i64| Ok(t - t.rem_euclid(step));
    let days = t.div_euclid(MICROS_PER_DAY);
    let (year, month, _) = pgtier_engine::civil_from_days(days);
    let at = |y: i64, m: u32| Ok(pgtier_engine::days_from_civil(y, m, 1) * MICROS_PER_DAY);
    if year <= 0 && matches!(unit, DateField::Decade | DateField::Century | DateField::Millennium) {
        return Err(SqlError::unsupported("date_trunc of a BC year to a decade, century or millennium"));
    }
    match unit {
        DateField::Microseconds => Ok(t),
        DateField::Milliseconds => within_day(1_000),
        DateField::Second => within_day(1_000_000),
        DateField::Minute => within_day(60_000_000),
        DateField::Hour => within_day(3_600_000_000),
        DateField::Day => within_day(MICROS_PER_DAY),
        // ISO weeks start on Monday; 2000-01-01 was a Saturday.
        DateField::Week => Ok((days - (days + 5).rem_euclid(7)) * MICROS_PER_DAY),
        DateField::Month => at(year, month),
        DateField::Quarter => at(year, (month - 1) / 3 * 3 + 1),
        DateField::Year => at(year, 1),
        DateField::Decade => at(year - year % 10, 1),
        DateField::Century => at((year - 1) / 100 * 100 + 1, 1),
        DateField::Millennium => at((year - 1) / 1000 * 1000 + 1, 1),
        other => Err(SqlError::new(
            "22023",
            format!("unit \"{}\" not recognized for type timestamp without time zone", other.name()),
        )),
    }
}

/// date_trunc of a timestamptz in the session's zone (timestamptz_trunc)
/// or in `zone` (timestamptz_trunc_zone):
/// units of a day and more start at that local midnight's instant; smaller
/// ones keep the value's own offset.
fn date_trunc_tz(unit: DateField, t: i64, zone: Option<&crate::tz::Zone>) -> Result<i64> {
    let local = zone.map_or_else(|| crate::tz::to_local(t), |z| z.to_local(t));
    let truncated = date_trunc(unit, local)?;
    if matches!(
        unit,
        DateField::Microseconds | DateField::Milliseconds | DateField::Second | DateField::Minute | DateField::Hour
    ) {
        Ok(truncated.saturating_sub(local.saturating_sub(t)))
    } else {
        Ok(zone.map_or_else(|| crate::tz::from_local(truncated), |z| z.from_local(truncated)))
    }
}

/// 1970-01-01 in days since 2000-01-01 (PostgreSQL's epoch).
pub(super) const UNIX_EPOCH_DAYS: i64 = -10_957;
/// The Julian day number of 2000-01-01.
const JULIAN_2000: i64 = 2_451_545;

/// ISO 8601 (year, week) of a day.
fn iso_week(days: i64) -> (i64, i64) {
    let isodow = (days + 5).rem_euclid(7) + 1;
    let thursday = days - (isodow - 1) + 3;
    let (year, _, _) = pgtier_engine::civil_from_days(thursday);
    (year, (thursday - pgtier_engine::days_from_civil(year, 1, 1)) / 7 + 1)
}

/// PostgreSQL shows astronomical year 0 as 1 BC (-1).
fn shown_year(year: i64) -> i64 {
    if year <= 0 { year - 1 } else { year }
}

/// extract (numeric, PostgreSQL 14+) or date_part (float8) of `field`
/// from a date, timestamp or timestamptz (in UTC). date_part of a date
/// is bound as of its timestamp, as PostgreSQL's SQL-language version is.
fn extract(field: DateField, v: &Value, numeric: bool) -> Result<Value> {
    let (days, micros, type_name) = match v {
        Value::Date(d) => (i64::from(*d), 0, "date"),
        Value::Timestamp(t) => {
            (t.div_euclid(MICROS_PER_DAY), t.rem_euclid(MICROS_PER_DAY), "timestamp without time zone")
        }
        Value::TimestampTz(t) => {
            let local = crate::tz::to_local(*t);
            (local.div_euclid(MICROS_PER_DAY), local.rem_euclid(MICROS_PER_DAY), "timestamp with time zone")
        }
        other => return Err(SqlError::undefined_function(&format!("extract({})", value::value_type_name(other)))),
    };
    let is_date = matches!(v, Value::Date(_));
    if (is_date && field.is_time()) || (matches!(v, Value::Timestamp(_)) && field.is_zone()) {
        return Err(SqlError::new("0A000", format!("unit \"{}\" not supported for type {type_name}", field.name())));
    }
    let (year, month, day) = pgtier_engine::civil_from_days(days);
    let in_minute = micros % 60_000_000;
    // (mantissa, scale) exact; the float where PostgreSQL computes it otherwise.
    let (mantissa, scale, float): (i128, u8, Option<f64>) = match field {
        DateField::Microseconds => (i128::from(in_minute), 0, None),
        #[allow(clippy::cast_precision_loss)]
        DateField::Milliseconds => (
            i128::from(in_minute),
            3,
            Some((in_minute / 1_000_000) as f64 * 1000.0 + (in_minute % 1_000_000) as f64 / 1000.0),
        ),
        #[allow(clippy::cast_precision_loss)]
        DateField::Second => (
            i128::from(in_minute),
            6,
            Some((in_minute / 1_000_000) as f64 + (in_minute % 1_000_000) as f64 / 1_000_000.0),
        ),
        DateField::Minute => (i128::from(micros / 60_000_000 % 60), 0, None),
        DateField::Hour => (i128::from(micros / 3_600_000_000), 0, None),
        DateField::Day => (i128::from(day), 0, None),
        DateField::Week => (i128::from(iso_week(days).1), 0, None),
        DateField::Month => (i128::from(month), 0, None),
        DateField::Quarter => (i128::from((month - 1) / 3 + 1), 0, None),
        DateField::Year => (i128::from(shown_year(year)), 0, None),
        DateField::Decade => (i128::from(if year >= 0 { year / 10 } else { -((8 - (year - 1)) / 10) }), 0, None),
        DateField::Century => {
            (i128::from(if year > 0 { (year + 99) / 100 } else { -((99 - (year - 1)) / 100) }), 0, None)
        }
        DateField::Millennium => {
            (i128::from(if year > 0 { (year + 999) / 1000 } else { -((999 - (year - 1)) / 1000) }), 0, None)
        }
        DateField::IsoYear => (i128::from(shown_year(iso_week(days).0)), 0, None),
        DateField::Dow => (i128::from((days + 6).rem_euclid(7)), 0, None),
        DateField::IsoDow => (i128::from((days + 5).rem_euclid(7) + 1), 0, None),
        DateField::Doy => (i128::from(days - pgtier_engine::days_from_civil(year, 1, 1) + 1), 0, None),
        DateField::Julian if micros == 0 => (i128::from(days + JULIAN_2000), 0, None),
        DateField::Julian => {
            #[allow(clippy::cast_precision_loss)]
            let float = (days + JULIAN_2000) as f64
                + ((micros / 1_000_000) as f64 + (micros % 1_000_000) as f64 / 1_000_000.0) / 86_400.0;
            if !numeric {
                return Ok(Value::Float8(float));
            }
            // date2j + µs / (86400 * 10^6) with numeric division's scale.
            let frac = value::arith(
                value::ArithOp::Div,
                &Value::Numeric(Numeric::new(i128::from(micros), 0)),
                &Value::Numeric(Numeric::new(i128::from(MICROS_PER_DAY), 0)),
                value::NUMERIC_ANY,
            )?;
            return value::arith(
                value::ArithOp::Add,
                &Value::Numeric(Numeric::new(i128::from(days + JULIAN_2000), 0)),
                &frac,
                value::NUMERIC_ANY,
            );
        }
        DateField::Epoch if is_date => (i128::from((days - UNIX_EPOCH_DAYS) * 86_400), 0, None),
        // The epoch of an instant, not of its local time.
        DateField::Epoch => match v {
            Value::TimestampTz(t) => {
                (i128::from(*t) + i128::from(-UNIX_EPOCH_DAYS) * i128::from(MICROS_PER_DAY), 6, None)
            }
            _ => (i128::from(days - UNIX_EPOCH_DAYS) * i128::from(MICROS_PER_DAY) + i128::from(micros), 6, None),
        },
        DateField::Timezone | DateField::TimezoneHour | DateField::TimezoneMinute => {
            let east = match v {
                Value::TimestampTz(t) => i64::from(crate::tz::offset_at(*t)),
                _ => 0,
            };
            let n = match field {
                DateField::Timezone => east,
                DateField::TimezoneHour => east / 3600,
                _ => east / 60 % 60,
            };
            (i128::from(n), 0, None)
        }
    };
    if numeric {
        return Ok(Value::Numeric(Numeric::new(mantissa, scale)));
    }
    #[allow(clippy::cast_precision_loss)]
    Ok(Value::Float8(float.unwrap_or(mantissa as f64 / 10f64.powi(i32::from(scale)))))
}

/// make_date(year, month, day); a negative year is BC, year 0 does not exist.
fn make_date(year: i64, month: i64, day: i64) -> Result<Value> {
    let out_of_range = || SqlError::new("22008", format!("date field value out of range: {year}-{month:02}-{day:02}"));
    if year == 0 {
        return Err(out_of_range());
    }
    let astronomical = if year < 0 { year + 1 } else { year };
    let (Ok(m), Ok(d)) = (u32::try_from(month), u32::try_from(day)) else { return Err(out_of_range()) };
    if !(1..=12).contains(&m) || d == 0 || !(-4713..=5_874_897).contains(&year) {
        return Err(out_of_range());
    }
    let days = pgtier_engine::days_from_civil(astronomical, m, d);
    // A day past the month's end comes back as another date.
    if pgtier_engine::civil_from_days(days) != (astronomical, m, d) {
        return Err(out_of_range());
    }
    i32::try_from(days).map(Value::Date).map_err(|_| out_of_range())
}

fn time_out_of_range(hour: i64, min: i64, sec: f64) -> SqlError {
    SqlError::new("22008", format!("time field value out of range: {hour}:{min:02}:{sec:02}"))
}

/// make_timestamp(year, month, day, hour, min, sec) as µs since
/// 2000-01-01 (make_timestamptz: the same instant in UTC).
fn make_timestamp(year: i64, month: i64, day: i64, hour: i64, min: i64, sec: f64) -> Result<i64> {
    let Value::Date(days) = make_date(year, month, day)? else {
        return Err(SqlError::new("22008", "date out of range"));
    };
    if hour < 0
        || !(0..60).contains(&min)
        || !(0.0..=60.0).contains(&sec)
        || hour > 24
        || (hour == 24 && (min > 0 || sec > 0.0))
    {
        return Err(time_out_of_range(hour, min, sec));
    }
    #[allow(clippy::cast_possible_truncation)]
    let frac = (sec * 1_000_000.0).round_ties_even() as i64;
    Ok(i64::from(days) * MICROS_PER_DAY + (hour * 60 + min) * 60_000_000 + frac)
}

/// to_timestamp(double precision): seconds since 1970-01-01 UTC.
fn to_timestamp_epoch(seconds: f64) -> Result<i64> {
    if seconds.is_nan() {
        return Err(SqlError::new("22008", "timestamp cannot be NaN"));
    }
    if seconds.is_infinite() {
        return Ok(if seconds > 0.0 {
            pgtier_engine::TIMESTAMP_INFINITY
        } else {
            pgtier_engine::TIMESTAMP_NEG_INFINITY
        });
    }
    // PostgreSQL's range: 4714-11-24 BC (Julian day 0) to 294277-01-01.
    #[allow(clippy::cast_precision_loss)]
    let (lo, hi) = ((-2_440_588.0) * 86_400.0, (109_203_528.0 - 2_440_588.0) * 86_400.0);
    if seconds < lo || seconds >= hi {
        return Err(SqlError::new("22008", format!("timestamp out of range: \"{seconds}\"")));
    }
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let micros = ((seconds - (-UNIX_EPOCH_DAYS * 86_400) as f64) * 1_000_000.0).round_ties_even() as i64;
    Ok(micros)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// The template patterns pgtier implements, longest first where one is
/// a prefix of another (to_timestamp reads only some: `read_field`).
const PATTERNS: [&str; 110] = [
    "HH24", "hh24", "HH12", "hh12", "HH", "hh", "Y,YYY", "y,yyy", "YYYY", "yyyy", "YYY", "yyy", "YY", "yy", "Y", "y",
    "IYYY", "iyyy", "IYY", "iyy", "IY", "iy", "IDDD", "iddd", "ID", "id", "IW", "iw", "I", "i", "MONTH", "Month",
    "month", "MON", "Mon", "mon", "MM", "mm", "DAY", "Day", "day", "DY", "Dy", "dy", "DDD", "ddd", "DD", "dd", "D",
    "d", "MI", "mi", "SSSSS", "sssss", "SSSS", "ssss", "SS", "ss", "MS", "ms", "US", "us", "FF1", "FF2", "FF3", "FF4",
    "FF5", "FF6", "ff1", "ff2", "ff3", "ff4", "ff5", "ff6", "AM", "PM", "am", "pm", "A.M.", "P.M.", "a.m.", "p.m.",
    "AD", "BC", "ad", "bc", "A.D.", "B.C.", "a.d.", "b.c.", "CC", "cc", "Q", "q", "WW", "ww", "W", "w", "J", "j", "RM",
    "rm", "TZH", "tzh", "TZM", "tzm", "TZ", "tz", "OF", "of",
];

/// PostgreSQL's template patterns (formatting.c's DCH keywords), to
/// refuse the ones pgtier does not implement rather than print their
/// letters; text matching none of them is copied.
const PG_PATTERNS: [&str; 114] = [
    "A.D.", "A.M.", "AD", "AM", "B.C.", "BC", "CC", "DAY", "DDD", "DD", "DY", "Day", "Dy", "D", "FF1", "FF2", "FF3",
    "FF4", "FF5", "FF6", "FX", "HH24", "HH12", "HH", "IDDD", "ID", "IW", "IYYY", "IYY", "IY", "I", "J", "MI", "MM",
    "MONTH", "MON", "MS", "Month", "Mon", "OF", "P.M.", "PM", "Q", "RM", "SSSSS", "SSSS", "SS", "TZH", "TZM", "TZ",
    "US", "WW", "W", "Y,YYY", "YYYY", "YYY", "YY", "Y", "a.d.", "a.m.", "ad", "am", "b.c.", "bc", "cc", "day", "ddd",
    "dd", "dy", "d", "ff1", "ff2", "ff3", "ff4", "ff5", "ff6", "fx", "hh24", "hh12", "hh", "iddd", "id", "iw", "iyyy",
    "iyy", "iy", "i", "j", "mi", "mm", "month", "mon", "ms", "of", "p.m.", "pm", "q", "rm", "sssss", "ssss", "ss",
    "tz", "tzh", "tzm", "us", "ww", "w", "y,yyy", "yyyy", "yyy", "yy", "y", "TM", "tm",
];

/// Suffixes PostgreSQL reads after a pattern (ordinal, spelled out).
const SUFFIXES: [&str; 4] = ["TH", "th", "SP", "sp"];

enum Piece<'a> {
    Pattern(&'a str, bool),
    /// `TH` / `th` after a pattern: the ordinal suffix of the number it printed (to_char only).
    Ordinal(bool),
    /// Template text outside quotes: a space or separator matches any one in to_timestamp's input.
    Literal(char),
    /// Quoted template text: in to_timestamp's input it skips one character, whatever it is.
    Quoted(char),
}

/// A template as patterns (with their FM flag) and literal characters.
fn template(fmt: &str) -> Result<Vec<Piece<'static>>> {
    let mut out = Vec::new();
    let mut rest = fmt;
    let mut fill = false;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            let mut chars = rest[1..].char_indices();
            let mut end = rest.len();
            while let Some((k, ch)) = chars.next() {
                match ch {
                    '\\' => {
                        if let Some((_, esc)) = chars.next() {
                            out.push(Piece::Quoted(esc));
                        }
                    }
                    '"' => {
                        end = k + 2;
                        break;
                    }
                    other => out.push(Piece::Quoted(other)),
                }
            }
            rest = &rest[end.min(rest.len())..];
            continue;
        }
        if c == '\\' && rest[1..].starts_with('"') {
            out.push(Piece::Literal('"'));
            rest = &rest[2..];
            continue;
        }
        if rest.starts_with("FM") || rest.starts_with("fm") {
            fill = true;
            rest = &rest[2..];
            continue;
        }
        let ours = PATTERNS.iter().find(|p| rest.starts_with(**p));
        let theirs = PG_PATTERNS.iter().filter(|p| rest.starts_with(**p)).max_by_key(|p| p.len());
        if let Some(p) = theirs.filter(|l| ours.is_none_or(|o| l.len() > o.len())) {
            return Err(SqlError::unsupported(format!("template pattern \"{p}\"")));
        }
        if let Some(p) = ours {
            out.push(Piece::Pattern(p, fill));
            fill = false;
            rest = &rest[p.len()..];
            if let Some(th) = ["TH", "th"].into_iter().find(|x| rest.starts_with(*x)) {
                out.push(Piece::Ordinal(th == "TH"));
                rest = &rest[2..];
            }
            if let Some(suffix) = SUFFIXES.iter().find(|x| rest.starts_with(**x)) {
                return Err(SqlError::unsupported(format!("template pattern suffix \"{suffix}\"")));
            }
            continue;
        }
        // FM before text that is no pattern applies to nothing.
        fill = false;
        out.push(Piece::Literal(c));
        rest = &rest[c.len_utf8()..];
    }
    Ok(out)
}

/// A name in the case of its pattern (`MONTH`, `Month`, `month`).
fn cased(name: &str, pattern: &str) -> String {
    let second = pattern.chars().nth(1).unwrap_or('a');
    if pattern.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.to_ascii_lowercase()
    } else if second.is_ascii_uppercase() {
        name.to_ascii_uppercase()
    } else {
        name.to_owned()
    }
}

/// to_char(timestamp, template) for µs since 2000-01-01 (a timestamptz
/// comes as its local time in the session zone with `instant`, its UTC
/// value, for the zone patterns; a timestamp has offset 0 and no zone
/// abbreviation; a date is its midnight),
/// as formatting.c's DCH_to_char prints each pattern.
fn to_char(micros: i64, instant: Option<i64>, fmt: &str) -> Result<String> {
    let offset = instant.map_or(0, crate::tz::offset_at);
    let days = micros.div_euclid(MICROS_PER_DAY);
    let in_day = micros.rem_euclid(MICROS_PER_DAY);
    let (year, month, day) = pgtier_engine::civil_from_days(days);
    let hour = in_day / 3_600_000_000;
    let dow = usize::try_from((days + 6).rem_euclid(7)).unwrap_or(0);
    let month_name = MONTHS[usize::try_from(month - 1).unwrap_or(0)];
    let yday = days - pgtier_engine::days_from_civil(year, 1, 1) + 1;
    let (iso_year, iso_week) = iso_year_week(days, year);
    // ADJUST_YEAR: BC years count from 1.
    let shown = |y: i64| if y <= 0 { 1 - y } else { y };
    let mut out = String::new();
    let mut last_number: Option<usize> = None;
    for piece in template(fmt)? {
        let (p, fill) = match piece {
            Piece::Literal(c) | Piece::Quoted(c) => {
                out.push(c);
                last_number = None;
                continue;
            }
            Piece::Ordinal(upper) => {
                if let Some(from) = last_number.take() {
                    let suffix = ordinal_suffix(&out[from..]);
                    out.push_str(&if upper { suffix.to_ascii_uppercase() } else { suffix.to_owned() });
                }
                continue;
            }
            Piece::Pattern(p, fill) => (p, fill),
        };
        let start = out.len();
        let num = |out: &mut String, n: i64, width: usize| {
            let _ = std::fmt::Write::write_fmt(out, format_args!("{:0w$}", n, w = if fill { 0 } else { width }));
        };
        let upper = p.to_ascii_uppercase();
        let mut numeric = true;
        match upper.as_str() {
            "YYYY" => num(&mut out, shown(year), 4),
            "Y,YYY" => {
                let y = shown(year);
                out.push_str(&format!("{},{:03}", y / 1000, y % 1000));
            }
            "YYY" => num(&mut out, shown(year) % 1000, 3),
            "YY" => num(&mut out, shown(year) % 100, 2),
            "Y" => num(&mut out, shown(year) % 10, 1),
            "IYYY" => num(&mut out, shown(iso_year), 4),
            "IYY" => num(&mut out, shown(iso_year) % 1000, 3),
            "IY" => num(&mut out, shown(iso_year) % 100, 2),
            "I" => num(&mut out, shown(iso_year) % 10, 1),
            "CC" => {
                let cc = if year > 0 { (year - 1) / 100 + 1 } else { year / 100 - 1 };
                if (-99..=99).contains(&cc) {
                    let width = if fill {
                        0
                    } else if cc >= 0 {
                        2
                    } else {
                        3
                    };
                    out.push_str(&format!("{cc:0width$}"));
                } else {
                    out.push_str(&cc.to_string());
                }
            }
            "Q" => out.push_str(&((month - 1) / 3 + 1).to_string()),
            "MM" => num(&mut out, i64::from(month), 2),
            "WW" => num(&mut out, (yday - 1) / 7 + 1, 2),
            "W" => out.push_str(&((day - 1) / 7 + 1).to_string()),
            "IW" => num(&mut out, iso_week, 2),
            "DDD" => num(&mut out, yday, 3),
            "IDDD" => num(&mut out, (iso_week - 1) * 7 + i64::try_from(dow).map_or(1, |d| (d + 6) % 7 + 1), 3),
            "DD" => num(&mut out, i64::from(day), 2),
            "D" => out.push_str(&(dow + 1).to_string()),
            "ID" => out.push_str(&(if dow == 0 { 7 } else { dow }).to_string()),
            "J" => out.push_str(&(days + JULIAN_2000).to_string()),
            "HH24" => num(&mut out, hour, 2),
            "HH12" | "HH" => num(&mut out, if hour % 12 == 0 { 12 } else { hour % 12 }, 2),
            "MI" => num(&mut out, in_day / 60_000_000 % 60, 2),
            "SS" => num(&mut out, in_day / 1_000_000 % 60, 2),
            "SSSS" | "SSSSS" => out.push_str(&(in_day / 1_000_000).to_string()),
            // Fixed widths: formatting.c prints these with "%0Nd", FM or not.
            "MS" => out.push_str(&format!("{:03}", in_day / 1000 % 1000)),
            "US" => out.push_str(&format!("{:06}", in_day % 1_000_000)),
            "FF1" | "FF2" | "FF3" | "FF4" | "FF5" | "FF6" => {
                let digits = usize::from(upper.as_bytes()[2] - b'0');
                let scale = 10i64.pow(u32::try_from(6 - digits).unwrap_or(0));
                out.push_str(&format!("{:0digits$}", in_day % 1_000_000 / scale));
            }
            "TZ" => {
                let abbrev = instant.map(crate::tz::abbreviation_at).unwrap_or_default();
                out.push_str(&if p == "tz" { abbrev.to_ascii_lowercase() } else { abbrev });
                numeric = false;
            }
            "TZH" => out.push_str(&format!("{}{:02}", if offset >= 0 { '+' } else { '-' }, offset.abs() / 3600)),
            "TZM" => out.push_str(&format!("{:02}", offset.abs() % 3600 / 60)),
            "OF" => {
                let sign = if offset >= 0 { '+' } else { '-' };
                let width = if fill { 0 } else { 2 };
                out.push_str(&format!("{sign}{:0width$}", offset.abs() / 3600));
                if offset.abs() % 3600 != 0 {
                    out.push_str(&format!(":{:02}", offset.abs() % 3600 / 60));
                }
                numeric = false;
            }
            _ => {
                numeric = false;
                to_char_word(&mut out, p, fill, year, hour, month, month_name, dow)?;
            }
        }
        last_number = numeric.then_some(start);
    }
    Ok(out)
}

/// The patterns that print words: meridian, era, month and day names,
/// Roman month numerals.
#[allow(clippy::too_many_arguments)]
fn to_char_word(
    out: &mut String,
    p: &str,
    fill: bool,
    year: i64,
    hour: i64,
    month: u32,
    month_name: &str,
    dow: usize,
) -> Result<()> {
    let lower = p.starts_with(|c: char| c.is_ascii_lowercase());
    let cased_text = |text: &str| if lower { text.to_ascii_lowercase() } else { text.to_owned() };
    match p.to_ascii_uppercase().as_str() {
        "AM" | "PM" | "A.M." | "P.M." => {
            let text = match (hour >= 12, p.contains('.')) {
                (false, false) => "AM",
                (true, false) => "PM",
                (false, true) => "A.M.",
                (true, true) => "P.M.",
            };
            out.push_str(&cased_text(text));
        }
        "AD" | "BC" | "A.D." | "B.C." => {
            let text = match (year <= 0, p.contains('.')) {
                (false, false) => "AD",
                (true, false) => "BC",
                (false, true) => "A.D.",
                (true, true) => "B.C.",
            };
            out.push_str(&cased_text(text));
        }
        "MONTH" | "DAY" => {
            let name = cased(if p.eq_ignore_ascii_case("month") { month_name } else { DAYS[dow] }, p);
            let _ = std::fmt::Write::write_fmt(out, format_args!("{:<w$}", name, w = if fill { 0 } else { 9 }));
        }
        "MON" => out.push_str(&cased(&month_name[..3], p)),
        "DY" => out.push_str(&cased(&DAYS[dow][..3], p)),
        "RM" => {
            const ROMAN: [&str; 12] = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"];
            let numeral = cased_text(ROMAN[usize::try_from(month - 1).unwrap_or(0)]);
            let _ = std::fmt::Write::write_fmt(out, format_args!("{:<w$}", numeral, w = if fill { 0 } else { 4 }));
        }
        _ => return Err(SqlError::unsupported(format!("template pattern \"{p}\""))),
    }
    Ok(())
}

/// str_numth: `st`, `nd`, `rd` or `th` for the number printed last (teens take `th`).
fn ordinal_suffix(number: &str) -> &'static str {
    let bytes = number.as_bytes();
    let teen = bytes.len() > 1 && bytes[bytes.len() - 2] == b'1';
    match bytes.last() {
        Some(b'1') if !teen => "st",
        Some(b'2') if !teen => "nd",
        Some(b'3') if !teen => "rd",
        _ => "th",
    }
}

/// The ISO 8601 year and week of the day `days` (since 2000-01-01) of
/// astronomical year `year`: date2isoyear and date2isoweek.
fn iso_year_week(days: i64, year: i64) -> (i64, i64) {
    // The Monday of ISO week 1 of `y`: the week holding January 4th.
    let week_one = |y: i64| {
        let jan4 = pgtier_engine::days_from_civil(y, 1, 4);
        jan4 - (jan4 + 5).rem_euclid(7)
    };
    let mut iso_year = year;
    let mut start = week_one(year);
    if days < start {
        iso_year -= 1;
        start = week_one(iso_year);
    } else if days >= week_one(year + 1) {
        iso_year += 1;
        start = week_one(iso_year);
    }
    (iso_year, (days - start) / 7 + 1)
}

/// The fields to_timestamp / to_date read; 0 is unset, as in PostgreSQL's
/// from_char (so a field given twice must agree unless one is 0).
#[derive(Default)]
struct Parsed {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    min: i64,
    sec: i64,
    micros: i64,
    /// The 12-hour clock (HH, HH12 or AM/PM seen; HH24 sets no clock).
    twelve: bool,
    pm: bool,
}

fn bad_format(msg: String) -> SqlError {
    SqlError::new("22007", msg)
}

fn set_field(slot: &mut i64, value: i64, pattern: &str) -> Result<()> {
    if *slot != 0 && *slot != value {
        return Err(bad_format(format!("conflicting values for \"{pattern}\" field in formatting string")));
    }
    *slot = value;
    Ok(())
}

fn is_separator(c: char) -> bool {
    c.is_ascii() && c > ' ' && c < '\u{7F}' && !c.is_ascii_alphanumeric()
}

/// Reads an integer field of `len` characters (all its digits when in
/// fill mode or before a non-digit): (value, digits read).
fn read_int(s: &mut &str, len: usize, slurp: bool, pattern: &str) -> Result<(i64, usize)> {
    *s = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let invalid = |text: &str| bad_format(format!("invalid value \"{text}\" for \"{pattern}\""));
    let (text, rest) = if slurp {
        let sign = usize::from(s.starts_with(['+', '-']));
        let end = s[sign..].find(|c: char| !c.is_ascii_digit()).map_or(s.len(), |e| e + sign);
        (&s[..end], &s[end..])
    } else {
        let end = s.char_indices().nth(len).map_or(s.len(), |(k, _)| k);
        if s[..end].chars().count() < len {
            return Err(bad_format(format!("source string too short for \"{pattern}\" formatting field")));
        }
        let digits = s[..end].find(|c: char| !c.is_ascii_digit()).unwrap_or(end);
        if digits > 0 && digits < len {
            return Err(invalid(&s[..end]));
        }
        (&s[..digits], &s[digits..])
    };
    if text.is_empty() || text == "+" || text == "-" {
        return Err(invalid(&s.chars().take(len.max(1)).collect::<String>()));
    }
    let n: i64 =
        text.parse().ok().filter(|n| i32::try_from(*n).is_ok()).ok_or_else(|| {
            SqlError::new("22008", format!("value for \"{pattern}\" in source string is out of range"))
        })?;
    *s = rest;
    Ok((n, text.trim_start_matches(['+', '-']).len()))
}

/// Reads one of `names` (case-insensitively, `len` letters of each or all):
/// its index.
fn read_name(s: &mut &str, names: &[&str], abbrev: bool, pattern: &str) -> Result<usize> {
    for (k, name) in names.iter().enumerate() {
        let want = if abbrev { &name[..3] } else { name };
        if s.len() >= want.len() && s.is_char_boundary(want.len()) && s[..want.len()].eq_ignore_ascii_case(want) {
            *s = &s[want.len()..];
            return Ok(k);
        }
    }
    Err(bad_format(format!(
        "invalid value \"{}\" for \"{pattern}\"",
        s.chars().take(if abbrev { 3 } else { 9 }).collect::<String>()
    )))
}

/// to_timestamp(text, template) / to_date: µs since 2000-01-01 (UTC).
fn parse_with_template(input: &str, fmt: &str) -> Result<i64> {
    let pieces = template(fmt)?;
    let mut p = Parsed::default();
    let mut s = input;
    let mut extra_skip = 0i64;
    for (k, piece) in pieces.iter().enumerate() {
        if s.is_empty() {
            break;
        }
        // Spaces before a field (and at the start) are skipped.
        if k == 0 || matches!(piece, Piece::Pattern(..)) {
            let trimmed = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
            extra_skip += i64::try_from(s.len() - trimmed.len()).unwrap_or(0);
            s = trimmed;
        }
        let (pat, fill) = match piece {
            Piece::Literal(c) if *c == ' ' || is_separator(*c) => {
                // A separator in the template matches one separator or space, or nothing.
                extra_skip -= 1;
                if s.starts_with(|c: char| c.is_ascii_whitespace() || is_separator(c)) {
                    s = &s[1..];
                    extra_skip += 1;
                }
                continue;
            }
            Piece::Literal(_) | Piece::Quoted(_) => {
                // Any other template character consumes one input character.
                if extra_skip > 0 {
                    extra_skip -= 1;
                } else if let Some(c) = s.chars().next() {
                    s = &s[c.len_utf8()..];
                }
                continue;
            }
            Piece::Pattern(pat, fill) => (*pat, *fill),
            Piece::Ordinal(_) => return Err(SqlError::unsupported("template pattern suffix \"TH\" in to_timestamp")),
        };
        let slurp = fill
            || match pieces.get(k + 1) {
                None => true,
                Some(Piece::Pattern(next, _)) => !matches!(
                    next.to_ascii_uppercase().as_str(),
                    "YYYY" | "YY" | "MM" | "DD" | "HH24" | "HH12" | "HH" | "MI" | "SS" | "MS" | "US"
                ),
                Some(Piece::Literal(c) | Piece::Quoted(c)) => !c.is_ascii_digit(),
                Some(Piece::Ordinal(_)) => true,
            };
        read_field(&mut p, &mut s, pat, slurp)?;
        // Spaces after a field are skipped; they count as skipped extra.
        let trimmed = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
        extra_skip = i64::try_from(s.len() - trimmed.len()).unwrap_or(0);
        s = trimmed;
    }
    p.timestamp(input)
}

/// Reads template pattern `pat` from `s` into `p` (`slurp`: all its digits).
fn read_field(p: &mut Parsed, s: &mut &str, pat: &str, slurp: bool) -> Result<()> {
    match pat.to_ascii_uppercase().as_str() {
        "YYYY" => set_field(&mut p.year, read_int(s, 4, slurp, pat)?.0, pat)?,
        "YY" => {
            let (y, digits) = read_int(s, 2, slurp, pat)?;
            // PostgreSQL's adjust_partial_year_to_2020, for fewer than 4 digits.
            let y = match y {
                _ if digits >= 4 => y,
                0..70 => y + 2000,
                70..100 => y + 1900,
                100..520 => y + 2000,
                520..1000 => y + 1000,
                _ => y,
            };
            set_field(&mut p.year, y, pat)?;
        }
        "MM" => set_field(&mut p.month, read_int(s, 2, slurp, pat)?.0, pat)?,
        "DD" => set_field(&mut p.day, read_int(s, 2, slurp, pat)?.0, pat)?,
        "HH24" => set_field(&mut p.hour, read_int(s, 2, slurp, pat)?.0, pat)?,
        "HH12" | "HH" => {
            p.twelve = true;
            set_field(&mut p.hour, read_int(s, 2, slurp, pat)?.0, pat)?;
        }
        "MI" => set_field(&mut p.min, read_int(s, 2, slurp, pat)?.0, pat)?,
        "SS" => set_field(&mut p.sec, read_int(s, 2, slurp, pat)?.0, pat)?,
        "MS" | "US" => {
            let width = if pat.eq_ignore_ascii_case("MS") { 3 } else { 6 };
            let (n, digits) = read_int(s, width, slurp, pat)?;
            // The digits are a fraction: "5" is 500 ms.
            let scaled = n * 10i64.pow(u32::try_from(width.saturating_sub(digits)).unwrap_or(0));
            set_field(&mut p.micros, if width == 3 { scaled * 1000 } else { scaled }, pat)?;
        }
        "AM" | "PM" | "A.M." | "P.M." => {
            let dotted = pat.contains('.');
            let names: &[&str] = if dotted { &["A.M.", "P.M."] } else { &["AM", "PM"] };
            let k = read_name(s, names, false, pat)?;
            p.twelve = true;
            p.pm = k == 1;
        }
        "MONTH" | "MON" => {
            let k = read_name(s, &MONTHS, pat.len() == 3, pat)?;
            set_field(&mut p.month, i64::try_from(k + 1).unwrap_or(1), pat)?;
        }
        "DAY" | "DY" => {
            // Read and checked; the date comes from the other fields.
            read_name(s, &DAYS, pat.len() == 2, pat)?;
        }
        _ => return Err(SqlError::unsupported(format!("template pattern \"{pat}\" in to_timestamp"))),
    }
    Ok(())
}

impl Parsed {
    /// The fields as µs since 2000-01-01; `input` names the value in errors.
    fn timestamp(mut self, input: &str) -> Result<i64> {
        if self.twelve {
            if !(1..=12).contains(&self.hour) {
                return Err(bad_format(format!("hour \"{}\" is invalid for the 12-hour clock", self.hour))
                    .with_hint("Use the 24-hour clock, or give an hour between 1 and 12."));
            }
            self.hour = match (self.pm, self.hour) {
                (true, h) if h < 12 => h + 12,
                (false, 12) => 0,
                (_, h) => h,
            };
        }
        let out_of_range = || SqlError::new("22008", format!("date/time field value out of range: \"{input}\""));
        // Unset year, month and day are PostgreSQL's defaults: 1 BC, January, the 1st.
        let year = if self.year > 0 {
            self.year
        } else if self.year < 0 {
            self.year + 1
        } else {
            0
        };
        let (month, day) = (if self.month == 0 { 1 } else { self.month }, if self.day == 0 { 1 } else { self.day });
        let (Ok(m), Ok(d)) = (u32::try_from(month), u32::try_from(day)) else { return Err(out_of_range()) };
        if !(1..=12).contains(&m) || d == 0 {
            return Err(out_of_range());
        }
        let days = pgtier_engine::days_from_civil(year, m, d);
        if pgtier_engine::civil_from_days(days) != (year, m, d) {
            return Err(out_of_range());
        }
        if !(0..24).contains(&self.hour) || !(0..60).contains(&self.min) || !(0..60).contains(&self.sec) {
            return Err(out_of_range());
        }
        // A year of many digits (`YYYY` read greedily) passes
        // days_from_civil but not the µs range: 22008, never an overflow.
        days.checked_mul(MICROS_PER_DAY)
            .and_then(|d| d.checked_add(((self.hour * 60 + self.min) * 60 + self.sec) * 1_000_000 + self.micros))
            .ok_or_else(out_of_range)
    }
}

/// The date and time functions.
pub(super) const DEFS: &[FunctionDef] = &[
    NOW_DEF,
    // The SQL forms take an optional precision (a literal).
    FunctionDef {
        names: &["current_timestamp", "localtimestamp", "localtime", "current_time"],
        volatility: Volatility::Stable,
        resolve: |_, _, call| {
            call.arity(0, 1)?;
            let p = clock_precision(call.name, &call.args)?;
            let ty = match call.name {
                "current_timestamp" => DataType::TimestampTz(p),
                "localtimestamp" => DataType::Timestamp(p),
                "current_time" => DataType::TimeTz(p),
                _ => DataType::Time(p),
            };
            let now = Expr::Func(Func::Builtin(NOW), Vec::new());
            let e = if ty == DataType::TimestampTz(None) { now } else { Expr::Cast(now.boxed(), ty, false) };
            Ok((e, Some(ty)))
        },
    },
    FunctionDef {
        names: &["current_date"],
        volatility: Volatility::Stable,
        resolve: |_, _, call| {
            call.arity(0, 0)?;
            let now = Expr::Func(Func::Builtin(NOW), Vec::new());
            Ok((Expr::Cast(now.boxed(), DataType::Date, false), Some(DataType::Date)))
        },
    },
    FunctionDef {
        names: &["clock_timestamp"],
        volatility: Volatility::Volatile,
        resolve: |def, _, call| {
            call.arity(0, 0)?;
            // The wall clock now: it changes within a statement, unlike now().
            let eval: EvalFn = |_, _| Ok(Value::TimestampTz(crate::clock::now_micros()));
            Ok((def.expr(eval, Vec::new()), Some(DataType::TimestampTz(None))))
        },
    },
    FunctionDef { names: &["date_trunc"], volatility: Immutable, resolve: resolve_date_trunc },
    FunctionDef { names: &["date_bin"], volatility: Immutable, resolve: resolve_date_bin },
    DATE_PART,
    FunctionDef {
        names: &["make_date"],
        volatility: Immutable,
        resolve: |def, b, call| {
            call.arity(3, 3)?;
            let mut out = Vec::with_capacity(3);
            for (e, t) in call.args {
                out.push(b.int4_param(e, t, call.sig)?);
            }
            let eval: EvalFn = |v, _| make_date(int(v, 0), int(v, 1), int(v, 2));
            Ok((def.expr(eval, out), Some(DataType::Date)))
        },
    },
    FunctionDef {
        names: &["make_timestamp"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_make_timestamp(def, b, call, false),
    },
    FunctionDef {
        names: &["make_timestamptz"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_make_timestamp(def, b, call, true),
    },
    FunctionDef { names: &["to_char"], volatility: Immutable, resolve: resolve_to_char },
    FunctionDef { names: &["to_timestamp"], volatility: Immutable, resolve: resolve_to_timestamp },
    FunctionDef { names: &["to_date"], volatility: Immutable, resolve: resolve_to_timestamp },
    FunctionDef {
        names: &["isfinite"],
        volatility: Immutable,
        resolve: |def, _, call| {
            call.arity(1, 1)?;
            match call.args[0].1 {
                Some(DataType::Date | DataType::Timestamp(_) | DataType::TimestampTz(_) | DataType::Interval) => {}
                None => return Err(call.not_unique()),
                Some(_) => return Err(call.undefined()),
            }
            let (e, _) = call.single()?;
            let eval: EvalFn = |v, _| Ok(Value::Bool(!value::is_infinite_datetime(&v[0])));
            Ok((def.expr(eval, vec![e]), Some(DataType::Bool)))
        },
    },
];

const DATE_PART: FunctionDef = FunctionDef {
    names: &["date_part"],
    volatility: Immutable,
    resolve: |_, b, call| {
        call.arity(2, 2)?;
        let ((field, _), (x, t)) = call.pair()?;
        let Expr::Const(Value::Text(field)) = field else {
            return Err(SqlError::unsupported("date_part with a field that is not a constant"));
        };
        extract_call(b, &field, x, t, false)
    },
};

const NOW_DEF: FunctionDef = FunctionDef {
    names: &["now", "transaction_timestamp"],
    volatility: Volatility::Stable,
    resolve: |_, _, call| {
        call.arity(0, 0)?;
        Ok((Expr::Func(Func::Builtin(NOW), Vec::new()), Some(DataType::TimestampTz(None))))
    },
};

/// now(): the transaction's start (also the clock forms' and a DEFAULT's).
pub(super) const NOW: Builtin = NOW_DEF.call(|_, ctx| Ok(Value::TimestampTz(ctx.now_micros)));

/// `x AT TIME ZONE zone` (timezone(zone, x)), bound by its syntax: of a
/// timestamp, its instant in that zone (`to_instant`); of a timestamptz,
/// its local time there.
pub(super) const fn at_time_zone(to_instant: bool) -> Builtin {
    const TIMEZONE: FunctionDef =
        FunctionDef { names: &["timezone"], volatility: Immutable, resolve: |_, _, call| Err(call.undefined()) };
    TIMEZONE.call(if to_instant {
        |v, ctx| at_time_zone_eval(v, true, ctx.now_micros)
    } else {
        |v, ctx| at_time_zone_eval(v, false, ctx.now_micros)
    })
}

type Resolved = Result<(Expr, Ty)>;

/// The precision of `current_timestamp(p)`, `localtimestamp(p)` or
/// `localtime(p)` (`args`: the call's arguments): PostgreSQL's grammar
/// takes an unsigned integer literal there (anything else is a syntax
/// error) and reduces one above 6 to 6.
fn clock_precision(name: &str, args: &[(Expr, Ty)]) -> Result<Option<u8>> {
    let [(arg, _)] = args else { return Ok(None) };
    match arg {
        Expr::Const(v) if v.as_i64().is_some_and(|p| p >= 0) => {
            Ok(Some(u8::try_from(v.as_i64().unwrap_or(6).min(6)).unwrap_or(6)))
        }
        _ => Err(SqlError::syntax(format!("{name} takes an unsigned integer literal as its precision"))),
    }
}

/// date_trunc(unit, timestamp | timestamptz | date [, zone]): the unit a
/// constant (parsed once) or any text (parsed per row); with a zone, the
/// timestamptz is truncated in that zone (timestamptz_trunc_zone).
fn resolve_date_trunc(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    call.arity(2, 3)?;
    let (not_unique, undefined) = (call.not_unique(), call.undefined());
    let zoned = call.len() == 3;
    let mut given = call.args.into_iter();
    let (Some((unit, unit_t)), Some((x, t))) = (given.next(), given.next()) else { return Err(undefined) };
    // A date is truncated as the timestamptz of its midnight, as PostgreSQL casts it.
    let (x, tz) = match t {
        Some(DataType::Timestamp(_)) if !zoned => (x, false),
        // Only the timestamptz version takes a zone: a timestamp converts (in the session's zone).
        Some(DataType::Timestamp(_)) => (b.result_cast(x, t, Some(DataType::TimestampTz(None)))?, true),
        Some(DataType::TimestampTz(_)) => (x, true),
        Some(DataType::Date) => (b.result_cast(x, t, Some(DataType::TimestampTz(None)))?, true),
        None if zoned => (b.coerce(x, t, DataType::TimestampTz(None), "date_trunc")?, true),
        None => return Err(not_unique),
        Some(_) => return Err(undefined),
    };
    let mut args = vec![x];
    if let Some((zone, zone_t)) = given.next() {
        args.push(b.text_arg(zone, zone_t, "date_trunc")?);
    }
    let data = match &unit {
        Expr::Const(Value::Text(unit)) => CallData::Field(parse_trunc_unit(unit, tz)?),
        _ => {
            args.push(b.text_arg(unit, unit_t, "date_trunc")?);
            CallData::None
        }
    };
    let (eval, ty): (EvalFn, _) = if tz {
        (|v, ctx| date_trunc_eval(v, ctx, true), DataType::TimestampTz(None))
    } else {
        (|v, ctx| date_trunc_eval(v, ctx, false), DataType::Timestamp(None))
    };
    Ok((Expr::Func(Func::Builtin(def.call(eval).with(data)), args), Some(ty)))
}

fn parse_trunc_unit(unit: &str, tz: bool) -> Result<DateField> {
    DateField::parse_trunc(unit).ok_or_else(|| {
        let ty = if tz { "timestamp with time zone" } else { "timestamp without time zone" };
        SqlError::new("22023", format!("unit \"{}\" not recognized for type {ty}", unit.to_lowercase()))
    })
}

/// date_bin(stride, source, origin): the timestamp and the timestamptz
/// versions. With no timestamp or timestamptz argument (dates, unknown
/// literals), PostgreSQL's preferred type of the datetime category wins:
/// timestamptz.
fn resolve_date_bin(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    call.arity(3, 3)?;
    let types = call.types();
    let undefined = call.undefined();
    let datetime =
        |t: &Ty| matches!(t, None | Some(DataType::Date | DataType::Timestamp(_) | DataType::TimestampTz(_)));
    if !matches!(types[0], None | Some(DataType::Interval)) || !types[1..].iter().all(datetime) {
        return Err(undefined);
    }
    let tz = if types[1..].iter().any(|t| matches!(t, Some(DataType::TimestampTz(_)))) {
        true
    } else if types[1..].iter().any(|t| matches!(t, Some(DataType::Timestamp(_)))) {
        false
    } else {
        // Dates or unknown literals: the datetime category's preferred type.
        true
    };
    let ty = if tz { DataType::TimestampTz(None) } else { DataType::Timestamp(None) };
    let mut args = Vec::with_capacity(3);
    for (i, (e, t)) in call.args.into_iter().enumerate() {
        let to = if i == 0 { DataType::Interval } else { ty };
        args.push(if t.is_none() { b.coerce(e, t, to, "date_bin")? } else { b.result_cast(e, t, Some(to))? });
    }
    let eval: EvalFn = |v, _| date_bin(&v[0], &v[1], &v[2]);
    Ok((def.expr(eval, args), Some(ty)))
}

/// timestamp_bin / timestamptz_bin (PostgreSQL 15.18, with its overflow
/// checks): the start of the bin of width `stride` from `origin` holding
/// `source`, rounding toward -infinity when the origin is later.
fn date_bin(stride: &Value, source: &Value, origin: &Value) -> Result<Value> {
    let out_of_range = |what: &str| SqlError::new("22008", format!("{what} out of range"));
    if source.is_null() || stride.is_null() || origin.is_null() {
        return Ok(Value::Null);
    }
    if value::is_infinite_datetime(source) {
        return Ok(source.clone());
    }
    if value::is_infinite_datetime(origin) {
        return Err(out_of_range("origin"));
    }
    let instant = |v: &Value| match v {
        Value::Timestamp(t) | Value::TimestampTz(t) => Some(*t),
        _ => None,
    };
    let (Value::Interval(stride), Some(at), Some(from)) = (stride, instant(source), instant(origin)) else {
        return Err(SqlError::new("XX000", "date_bin of values of other types"));
    };
    if stride.months != 0 {
        return Err(SqlError::new("0A000", "timestamps cannot be binned into intervals containing months or years"));
    }
    let stride_us = i64::from(stride.days)
        .checked_mul(86_400_000_000)
        .and_then(|d| d.checked_add(stride.micros))
        .ok_or_else(|| out_of_range("interval"))?;
    if stride_us <= 0 {
        return Err(SqlError::new("22008", "stride must be greater than zero"));
    }
    let diff = at.checked_sub(from).ok_or_else(|| out_of_range("interval"))?;
    let mut bins = diff / stride_us;
    if diff < 0 && diff % stride_us != 0 {
        bins -= 1;
    }
    let result = bins
        .checked_mul(stride_us)
        .and_then(|delta| from.checked_add(delta))
        .filter(|r| (crate::value::time::TIMESTAMP_MIN..crate::value::time::TIMESTAMP_END).contains(r))
        .ok_or_else(|| out_of_range("timestamp"))?;
    Ok(match source {
        Value::TimestampTz(_) => Value::TimestampTz(result),
        _ => Value::Timestamp(result),
    })
}

/// date_trunc of a timestamp (`tz` false) or timestamptz to the call's
/// unit; `vals`: the value, then the zone (three-argument form), then the
/// unit when it was not a constant.
fn date_trunc_eval(vals: &[Value], ctx: &mut EvalCtx<'_>, tz: bool) -> Result<Value> {
    // [x, unit] has no zone; [x, zone] (constant unit) and [x, zone, unit] have.
    let zone = match vals.get(1) {
        Some(Value::Text(name)) if vals.len() == 3 || matches!(ctx.data, CallData::Field(_)) => {
            Some(crate::tz::zone_arg(name)?)
        }
        _ => None,
    };
    let unit = match ctx.data {
        CallData::Field(unit) => unit,
        _ => parse_trunc_unit(vals.last().and_then(Value::as_str).unwrap_or(""), tz)?,
    };
    if value::is_infinite_datetime(&vals[0]) {
        return Ok(vals[0].clone());
    }
    Ok(match &vals[0] {
        Value::Timestamp(t) => {
            let truncated = date_trunc(unit, *t)?;
            if tz { Value::TimestampTz(truncated) } else { Value::Timestamp(truncated) }
        }
        Value::TimestampTz(t) => Value::TimestampTz(date_trunc_tz(unit, *t, zone.as_ref())?),
        other => {
            return Err(SqlError::undefined_function(&format!("date_trunc(text, {})", value::value_type_name(other))));
        }
    })
}

/// `EXTRACT(field FROM x)` (numeric) or `date_part('field', x)` (float8)
/// of a date, timestamp, timestamptz, time or interval. date_part of a
/// date is PostgreSQL's SQL function over its timestamp (so its hour is 0).
pub fn extract_call(b: &mut dyn ArgBinder, field: &str, x: Expr, t: Ty, numeric: bool) -> Resolved {
    let field = field.trim_matches('\'');
    let what = if numeric { "extract" } else { "date_part" };
    let (x, t) = match t {
        Some(DataType::Date) if !numeric => {
            (b.result_cast(x, t, Some(DataType::Timestamp(None)))?, Some(DataType::Timestamp(None)))
        }
        Some(DataType::Date | DataType::Timestamp(_) | DataType::TimestampTz(_)) => (x, t),
        // An untyped literal fits several of PostgreSQL's candidates.
        None => {
            return Err(SqlError::new("42725", format!("function pg_catalog.{what}(unknown, unknown) is not unique"))
                .with_hint("Could not choose a best candidate function. You might need to add explicit type casts."));
        }
        Some(DataType::Time(_) | DataType::TimeTz(_) | DataType::Interval) => (x, t),
        Some(other) => {
            return Err(SqlError::undefined_function(&format!("{what}(unknown, {})", value::type_name(other))));
        }
    };
    let Some(f) = DateField::parse(field) else {
        let ty = t.map_or_else(|| "unknown".to_owned(), value::full_type_name);
        return Err(SqlError::new("22023", format!("unit \"{}\" not recognized for type {ty}", field.to_lowercase())));
    };
    // Bound from EXTRACT's syntax or through date_part's declaration.
    const EXTRACT: FunctionDef =
        FunctionDef { names: &["extract"], volatility: Immutable, resolve: |_, _, call| Err(call.undefined()) };
    let (call, ty) = if numeric {
        (EXTRACT.call(|v, ctx| extract_eval(v, ctx, true)), NUMERIC_ANY)
    } else {
        (DATE_PART.call(|v, ctx| extract_eval(v, ctx, false)), DataType::Float8)
    };
    Ok((Expr::Func(Func::Builtin(call.with(CallData::Field(f))), vec![x]), Some(ty)))
}

/// extract (numeric, PostgreSQL 14+) or date_part (float8) of the call's field.
fn extract_eval(vals: &[Value], ctx: &mut EvalCtx<'_>, numeric: bool) -> Result<Value> {
    let CallData::Field(field) = ctx.data else { return Err(SqlError::new("XX000", "extract without a field")) };
    match &vals[0] {
        v @ (Value::Interval(_) | Value::Time(_) | Value::TimeTz(..)) => {
            super::interval_fns::extract(field, v, numeric)
        }
        v if value::is_infinite_datetime(v) => super::infinity::extract(field, v, numeric),
        v => extract(field, v, numeric),
    }
}

fn resolve_make_timestamp(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>, tz: bool) -> Resolved {
    // make_timestamptz(..., zone text): the local time in that zone.
    let zoned = tz && call.len() == 7;
    call.arity(6, if zoned { 7 } else { 6 })?;
    let mut out = Vec::with_capacity(7);
    let undefined = call.undefined();
    for (k, (e, t)) in call.args.into_iter().enumerate() {
        out.push(if k < 5 {
            b.int4_param(e, t, call.sig)?
        } else if k == 6 {
            match t {
                None | Some(DataType::Text | DataType::Varchar(_) | DataType::Char(_)) => {
                    b.text_arg(e, t, "make_timestamptz")?
                }
                Some(_) => return Err(undefined),
            }
        } else if super::math::float_or_numeric(t).is_some() {
            b.result_cast(e, t, Some(DataType::Float8))?
        } else {
            return Err(undefined);
        });
    }
    let (eval, ty): (EvalFn, _) = if zoned {
        (
            |v, _| {
                let local = make_timestamp_of(v)?;
                Ok(Value::TimestampTz(crate::tz::sane_zone(text(v, 6))?.from_local(local)))
            },
            DataType::TimestampTz(None),
        )
    } else if tz {
        (|v, _| Ok(Value::TimestampTz(crate::tz::from_local(make_timestamp_of(v)?))), DataType::TimestampTz(None))
    } else {
        (|v, _| Ok(Value::Timestamp(make_timestamp_of(v)?)), DataType::Timestamp(None))
    };
    Ok((def.expr(eval, out), Some(ty)))
}

fn make_timestamp_of(v: &[Value]) -> Result<i64> {
    make_timestamp(int(v, 0), int(v, 1), int(v, 2), int(v, 3), int(v, 4), float(v, 5))
}

/// to_char(timestamp | timestamptz, template); a date goes to timestamptz,
/// the date/time category's preferred type.
fn resolve_to_char(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    call.arity(2, 2)?;
    let (name, not_unique, undefined) = (call.name, call.not_unique(), call.undefined());
    let ((x, t), (fmt, ft)) = call.pair()?;
    let x = match t {
        Some(DataType::Timestamp(_) | DataType::TimestampTz(_)) => x,
        Some(DataType::Date) => b.result_cast(x, t, Some(DataType::TimestampTz(None)))?,
        None => return Err(not_unique),
        Some(t) if RegKind::of(t).is_some() => return Err(undefined),
        Some(DataType::Int2 | DataType::Int4 | DataType::Int8 | DataType::Numeric { .. }) => x,
        Some(t) if value::category(t) == value::Category::Numeric => {
            return Err(SqlError::unsupported("to_char of a floating-point number"));
        }
        Some(_) => return Err(undefined),
    };
    let fmt = b.text_arg(fmt, ft, name).map_err(|_| undefined)?;
    let number = t.is_some_and(|t| value::category(t) == value::Category::Numeric);
    let eval: EvalFn = if number { super::math::to_char_number } else { to_char_eval };
    Ok((def.expr(eval, vec![x, fmt]), Some(DataType::Text)))
}

fn to_char_eval(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let fmt = text(vals, 1);
    Ok(match &vals[0] {
        // An empty template gives NULL, as PostgreSQL's; so does an infinity.
        v if fmt.is_empty() || value::is_infinite_datetime(v) => Value::Null,
        Value::Timestamp(t) => Value::Text(to_char(*t, None, fmt)?),
        Value::TimestampTz(t) => Value::Text(to_char(crate::tz::to_local(*t), Some(*t), fmt)?),
        other => {
            return Err(SqlError::undefined_function(&format!("to_char({}, text)", value::value_type_name(other))));
        }
    })
}

/// to_timestamp(double precision), to_timestamp(text, template), to_date(text, template).
fn resolve_to_timestamp(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Resolved {
    let undefined = call.undefined();
    if call.name == "to_timestamp" && call.len() == 1 {
        let (e, t) = call.single()?;
        if super::math::float_or_numeric(t).is_none() {
            return Err(undefined);
        }
        let e = b.result_cast(e, t, Some(DataType::Float8))?;
        let eval: EvalFn = |v, _| Ok(Value::TimestampTz(to_timestamp_epoch(float(v, 0))?));
        return Ok((def.expr(eval, vec![e]), Some(DataType::TimestampTz(None))));
    }
    call.arity(2, 2)?;
    let mut out = Vec::with_capacity(2);
    for (e, t) in call.args {
        out.push(b.text_arg(e, t, call.name).map_err(|_| undefined.clone())?);
    }
    if call.name == "to_date" {
        let eval: EvalFn = |v, _| {
            let t = parse_with_template(text(v, 0), text(v, 1))?;
            let days = i32::try_from(t.div_euclid(MICROS_PER_DAY));
            Ok(Value::Date(days.map_err(|_| SqlError::new("22008", "date out of range"))?))
        };
        return Ok((def.expr(eval, out), Some(DataType::Date)));
    }
    let eval: EvalFn =
        |v, _| Ok(Value::TimestampTz(crate::tz::from_local(parse_with_template(text(v, 0), text(v, 1))?)));
    Ok((def.expr(eval, out), Some(DataType::TimestampTz(None))))
}

/// `zone` AT TIME ZONE: vals are (zone, x); `now` the transaction's
/// start, when a timetz takes a zone's offset.
fn at_time_zone_eval(vals: &[Value], to_instant: bool, now: i64) -> Result<Value> {
    if let Value::TimeTz(t, west) = &vals[1] {
        return match &vals[0] {
            Value::Interval(iv) => crate::value::timetz::at_interval(*t, *west, *iv),
            _ => crate::value::timetz::at_zone(*t, *west, text(vals, 0), now),
        };
    }
    let zone = match &vals[0] {
        Value::Interval(iv) if iv.months == 0 && iv.days == 0 => {
            crate::tz::fixed_setting(
                i32::try_from(iv.micros / 1_000_000)
                    .map_err(|_| SqlError::new("22023", "interval time zone out of range"))?,
            )
            .0
        }
        Value::Interval(iv) => {
            return Err(SqlError::new(
                "22023",
                format!("interval time zone \"{}\" must not include months or days", Value::Interval(*iv)),
            ));
        }
        _ => crate::tz::zone_arg(text(vals, 0))?,
    };
    Ok(match &vals[1] {
        Value::Timestamp(t) if to_instant => Value::TimestampTz(zone.from_local(*t)),
        Value::TimestampTz(t) => Value::Timestamp(zone.to_local(*t)),
        other => {
            return Err(SqlError::undefined_function(&format!("timezone(text, {})", value::value_type_name(other))));
        }
    })
}
