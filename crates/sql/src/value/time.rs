//! `time [(p)]` (time without time zone): PostgreSQL's time_in forms, the
//! typmod rounding of time(p) and timestamp(p), and date + time. The value
//! is microseconds since midnight, 0 ..= 24:00:00 as PostgreSQL allows;
//! output lives with the engine's value.

use pgtier_engine::{Value, round_to_precision};

use crate::error::{Result, SqlError};
use crate::value::{MICROS_PER_DAY, MICROS_PER_SECOND};

/// PostgreSQL's MIN_TIMESTAMP and END_TIMESTAMP (4714-11-24 BC .. 294277-01-01).
pub(crate) const TIMESTAMP_MIN: i64 = -211_813_488_000_000_000;
pub(crate) const TIMESTAMP_END: i64 = 9_223_371_331_200_000_000;

/// time_in, then the column's precision (AdjustTimeForTypmod).
pub fn parse(text: &str, precision: Option<u8>) -> Result<i64> {
    if text.trim().eq_ignore_ascii_case("now") {
        // The session-local time of day of the transaction's start.
        let start = crate::clock::transaction_start().ok_or_else(|| SqlError::unsupported("'now' as a time input value here (only a statement's own constants and parameters read the transaction's start)"))?;
        return Ok(round_to_precision(crate::tz::to_local(start).rem_euclid(MICROS_PER_DAY), precision));
    }
    let clock = parse_time(text.trim()).map_err(|bad| bad.error("time", text))?;
    Ok(round_to_precision(clock.micros, precision))
}

/// Why a time text is refused: 22007 bad syntax, 22008 a field out of range.
pub(crate) enum Bad {
    Syntax,
    Range,
}

impl Bad {
    pub(crate) fn error(self, type_name: &str, text: &str) -> SqlError {
        match self {
            Bad::Syntax => SqlError::new("22007", format!("invalid input syntax for type {type_name}: \"{text}\"")),
            Bad::Range => SqlError::new("22008", format!("date/time field value out of range: \"{text}\"")),
        }
    }
}

/// A time of day as written: the clock, and the date and zone written
/// with it (time without time zone ignores them; timetz reads them).
pub(crate) struct Clock<'a> {
    pub micros: i64,
    /// A leading `yyyy-mm-dd`.
    pub date: Option<&'a str>,
    /// A zone word or an offset glued to the clock, as written.
    pub zone: Option<&'a str>,
}

/// `[date ]hh:mm[:ss[.f]][ am|pm][ zone]`, `hhmmss[.f]`, `allballs`. A
/// leading ISO date and a trailing zone are accepted and ignored, as
/// time_in does for time without time zone.
pub(crate) fn parse_time(t: &str) -> std::result::Result<Clock<'_>, Bad> {
    if t.eq_ignore_ascii_case("allballs") {
        return Ok(Clock { micros: 0, date: None, zone: None });
    }
    let mut words: Vec<&str> = t.split_ascii_whitespace().collect();
    let mut dated = false;
    let mut date = None;
    let mut zone = None;
    // A leading yyyy-mm-dd (or yyyy-mm-ddThh:mm...) date.
    if let Some(first) = words.first().copied() {
        let date_len = first.find(['T', 't']).unwrap_or(first.len());
        if date_len == 10 && first.as_bytes().get(4) == Some(&b'-') && first.as_bytes().get(7) == Some(&b'-') {
            if !first[..10]
                .bytes()
                .enumerate()
                .all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() })
            {
                return Err(Bad::Syntax);
            }
            dated = true;
            date = Some(&first[..10]);
            match &first[date_len..] {
                "" => {
                    words.remove(0);
                }
                rest => words[0] = &rest[1..],
            }
        }
    }
    let clock = words.first().copied().ok_or(Bad::Syntax)?;
    let clock = clock.strip_prefix(['T', 't']).unwrap_or(clock);
    // A meridian glued to the clock: 5:32PM.
    let glued =
        clock.len().checked_sub(2).filter(|&i| clock.is_char_boundary(i) && clock[..i].contains(':')).and_then(|i| {
            match clock[i..].to_ascii_lowercase().as_str() {
                "am" => Some((i, false)),
                "pm" => Some((i, true)),
                _ => None,
            }
        });
    let (clock, mut pm) = match glued {
        Some((i, is_pm)) => (&clock[..i], Some(is_pm)),
        None => (clock, None),
    };
    for w in &words[1..] {
        match w.to_ascii_lowercase().as_str() {
            "am" | "a.m." => pm = Some(false),
            "pm" | "p.m." => pm = Some(true),
            // A zone with daylight-saving rules needs the date to apply.
            z if zone.is_none()
                && is_zone(z)
                && (dated || !matches!(crate::tz::lookup(z), Some(crate::tz::Zone::Named(_)))) =>
            {
                zone = Some(*w);
            }
            _ => return Err(Bad::Syntax),
        }
    }
    // A zone glued to the clock: 04:05:06+02, 04:05:06Z, 04:05:06-08:00.
    let body = match clock.find(['+', '-', 'z', 'Z']) {
        Some(i) if i > 0 => {
            if !is_zone(&clock[i..].to_ascii_lowercase()) || zone.is_some() {
                return Err(Bad::Syntax);
            }
            zone = Some(&clock[i..]);
            &clock[..i]
        }
        Some(_) => return Err(Bad::Syntax),
        None => clock,
    };
    let (h, m, s, frac) = fields(body)?;
    let h = match pm {
        None => h,
        Some(_) if h > 12 => return Err(Bad::Range),
        Some(false) => h % 12,
        Some(true) => h % 12 + 12,
    };
    if h > 24 || m > 59 || s > 60 {
        return Err(Bad::Range);
    }
    let micros = ((h * 60 + m) * 60 + s) * MICROS_PER_SECOND + frac;
    if micros > MICROS_PER_DAY {
        return Err(Bad::Range);
    }
    Ok(Clock { micros, date, zone })
}

/// Hours, minutes, seconds and the fraction in microseconds (rounded).
fn fields(body: &str) -> std::result::Result<(i64, i64, i64, i64), Bad> {
    let (hms, frac) = body.split_once('.').unwrap_or((body, ""));
    if !frac.bytes().all(|b| b.is_ascii_digit()) || (body.contains('.') && frac.is_empty() && !hms.contains(':')) {
        return Err(Bad::Syntax);
    }
    let num = |p: &str| -> std::result::Result<i64, Bad> {
        if p.is_empty() || p.len() > 9 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Bad::Syntax);
        }
        p.parse().map_err(|_| Bad::Syntax)
    };
    let parts: Vec<&str> = hms.split(':').collect();
    let (h, m, s) = match parts.as_slice() {
        [h, m] => (num(h)?, num(m)?, 0),
        [h, m, s] => (num(h)?, num(m)?, num(s)?),
        // ISO compact: hhmmss or hhmm.
        [compact] if compact.len() == 6 && compact.bytes().all(|b| b.is_ascii_digit()) => {
            (num(&compact[..2])?, num(&compact[2..4])?, num(&compact[4..])?)
        }
        [compact] if compact.len() == 4 && compact.bytes().all(|b| b.is_ascii_digit()) && frac.is_empty() => {
            (num(&compact[..2])?, num(&compact[2..])?, 0)
        }
        _ => return Err(Bad::Syntax),
    };
    Ok((h, m, s, fraction_micros(frac)))
}

/// The digits after a seconds' decimal point as microseconds, computed as
/// PostgreSQL's ParseFractionalSecond does (strtod, then rint of the
/// product: .1234565 is 123456, .1234575 is 123458).
pub(crate) fn fraction_micros(frac: &str) -> i64 {
    let digits = &frac[..frac.len().min(40)];
    let x: f64 = format!("0.{digits}0").parse().unwrap_or(0.0);
    #[allow(clippy::cast_possible_truncation)]
    let micros = (x * 1_000_000.0).round_ties_even() as i64;
    micros
}

/// UTC offsets and zone abbreviations time_in skips for time without
/// time zone (the ones pgtier knows; others are a syntax error).
fn is_zone(z: &str) -> bool {
    if matches!(z, "z" | "utc" | "gmt" | "zulu") || crate::tz::lookup(z).is_some() {
        return true;
    }
    let Some(digits) = z.strip_prefix(['+', '-']) else { return false };
    !digits.is_empty() && digits.len() <= 8 && digits.bytes().all(|b| b.is_ascii_digit() || b == b':')
}

/// date + time (and time + date): the timestamp at that time of that day.
/// (The other date/time arithmetic is in [`crate::value::interval`].)
pub fn date_plus_time(a: &Value, b: &Value) -> Result<Value> {
    let ((Value::Date(d), Value::Time(t)) | (Value::Time(t), Value::Date(d))) = (a, b) else {
        return Err(SqlError::undefined_operator(&format!("{} + {}", a.type_name(), b.type_name())));
    };
    // An infinite date stays infinite (date_pl_time via date2timestamp).
    if crate::value::is_infinite_date(*d) {
        return Ok(Value::Timestamp(crate::value::date_micros(*d)?));
    }
    let micros = i64::from(*d).checked_mul(MICROS_PER_DAY).and_then(|m| m.checked_add(*t));
    match micros {
        Some(m) if (TIMESTAMP_MIN..TIMESTAMP_END).contains(&m) => Ok(Value::Timestamp(m)),
        _ => Err(SqlError::new("22008", "timestamp out of range")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> i64 {
        parse(text, None).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    fn state(text: &str) -> &'static str {
        parse(text, None).err().map_or("ok", |e| e.sqlstate)
    }

    #[test]
    fn postgres_input_forms() {
        let hms = |h: i64, m: i64, s: i64| ((h * 60 + m) * 60 + s) * MICROS_PER_SECOND;
        assert_eq!(ok("04:05"), hms(4, 5, 0));
        assert_eq!(ok(" 04:05:06.789 "), hms(4, 5, 6) + 789_000);
        assert_eq!(ok("040506"), hms(4, 5, 6));
        assert_eq!(ok("04:05 PM"), hms(16, 5, 0));
        assert_eq!(ok("12:30 am"), hms(0, 30, 0));
        assert_eq!(ok("04:05:06+02"), hms(4, 5, 6));
        assert_eq!(ok("04:05:06 UTC"), hms(4, 5, 6));
        assert_eq!(ok("2003-04-12 04:05:06"), hms(4, 5, 6));
        assert_eq!(ok("allballs"), 0);
        assert_eq!(ok("24:00:00"), MICROS_PER_DAY);
        assert_eq!(ok("23:59:60"), MICROS_PER_DAY);
        assert_eq!(ok("00:00:00.0000015"), 2);
        assert_eq!(ok("12:34:56.1234565") % 1_000_000, 123_456);
    }

    #[test]
    fn refusals_have_postgres_sqlstates() {
        for bad in ["abc", "", "12:", "1:2:3:4", "12:00 xyz", "12.5", "-01:00"] {
            assert_eq!(state(bad), "22007", "{bad}");
        }
        for bad in ["25:00", "24:00:00.000001", "12:60", "12:00:61", "13:00 pm"] {
            assert_eq!(state(bad), "22008", "{bad}");
        }
    }

    #[test]
    fn precision_rounds_half_up() {
        assert_eq!(parse("12:00:00.125", Some(2)).ok(), Some(ok("12:00:00.13")));
        assert_eq!(parse("23:59:59.9999996", Some(6)).ok(), Some(MICROS_PER_DAY));
        assert_eq!(parse("23:59:59.5", Some(0)).ok(), Some(MICROS_PER_DAY));
    }
}
