//! Date, timestamp and time-of-day input: the forms PostgreSQL's
//! datetime input accepts for the types pgtier stores (moved out of
//! `value.rs`, whose casts and `parse_input` call them).

use pgtier_engine::days_from_civil;

use super::{MICROS_PER_DAY, MICROS_PER_SECOND, era};

/// The special inputs of date, timestamp and timestamptz that name no
/// calendar day PostgreSQL would parse: the infinities and `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Special {
    Infinity,
    NegInfinity,
    /// 1970-01-01 (00:00:00 UTC).
    Epoch,
}

/// `t` (trimmed, any case) as a special input, if it is one.
pub(super) fn special(t: &str) -> Option<Special> {
    let word = t.trim().to_ascii_lowercase();
    Some(match word.as_str() {
        "infinity" => Special::Infinity,
        "-infinity" => Special::NegInfinity,
        "epoch" => Special::Epoch,
        _ => return None,
    })
}

/// The special inputs that mean the current date or time (`now`, `today`,
/// `tomorrow`, `yesterday`), which pgtier does not take as input values.
pub(super) fn is_relative_word(t: &str) -> bool {
    let word = t.trim().to_ascii_lowercase();
    matches!(word.as_str(), "now" | "today" | "tomorrow" | "yesterday")
}

/// A date, or a timestamp whose time part PostgreSQL's date input discards
/// (`'1970-01-01 00:00:00Z'::date`, as pgx's simple protocol sends).
pub(super) fn parse_date(t: &str) -> Option<i32> {
    let (t, bc) = era::split_era(t);
    if bc {
        return parse_date(t).and_then(era::bc_date);
    }
    match t.find([' ', 'T']) {
        Some(i) => {
            parse_time_of_day(t[i + 1..].trim())?;
            parse_ymd(&t[..i])
        }
        None => parse_ymd(t),
    }
}

/// The last year PostgreSQL's date type holds.
const DATE_YEAR_MAX: i64 = 5_874_897;

pub(super) fn parse_ymd(t: &str) -> Option<i32> {
    let mut parts = t.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    // Bounded before any arithmetic: a 19-digit year overflowed (a panic
    // in debug builds; found by tests/fuzz.rs). Year 0 does not exist.
    if !(1..=DATE_YEAR_MAX).contains(&y) {
        return None;
    }
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    i32::try_from(days_from_civil(y, m, d)).ok()
}

pub(super) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

pub(super) fn parse_timestamp(t: &str) -> Option<i64> {
    let (t, bc) = era::split_era(t);
    let (date, time) = match t.find([' ', 'T']) {
        Some(i) => (&t[..i], t[i + 1..].trim()),
        None => (t, ""),
    };
    let days = parse_ymd(date)?;
    let days = i64::from(if bc { era::bc_date(days)? } else { days });
    let micros = if time.is_empty() { 0 } else { parse_time_of_day(time)? };
    days.checked_mul(MICROS_PER_DAY)?.checked_add(micros)
}

/// A timestamp with an optional UTC offset (`Z`, `+hh`, `+hhmm`,
/// `-hh:mm[:ss]`); without one the session's zone (UTC) applies.
/// Microseconds since 2000-01-01 UTC.
pub(super) fn parse_timestamptz(t: &str) -> Option<i64> {
    let local = parse_timestamp(t)?;
    let (_, time) = match t.find([' ', 'T']) {
        Some(i) => (&t[..i], t[i + 1..].trim()),
        None => return Some(local),
    };
    local.checked_sub(zone_offset_seconds(time)?.checked_mul(MICROS_PER_SECOND)?)
}

/// Whether a numeric UTC offset the input ends with (if any) is one
/// PostgreSQL accepts: timestamp input ignores the zone but still checks
/// it (22009 "time zone displacement out of range").
pub(super) fn zone_in_range(t: &str) -> bool {
    match t.find([' ', 'T']) {
        Some(i) => {
            let time = t[i + 1..].trim();
            strip_zone(time).len() == time.trim_end().len() || zone_offset_seconds(time).is_some()
        }
        None => true,
    }
}

/// The UTC offset a time of day ends with, in seconds (0 without one).
pub(super) fn zone_offset_seconds(time: &str) -> Option<i64> {
    let time = time.trim_end();
    let body = strip_zone(time);
    if body.len() == time.len() || time.ends_with(['Z', 'z']) {
        return Some(0);
    }
    let zone = time[body.len()..].trim_start();
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits = &zone[1..];
    let parts: Vec<&str> = if digits.contains(':') {
        digits.split(':').collect()
    } else if digits.len() == 4 {
        vec![&digits[..2], &digits[2..]]
    } else {
        vec![digits]
    };
    let mut secs = 0i64;
    for (k, p) in parts.iter().enumerate() {
        let v: i64 = p.parse().ok()?;
        if k > 2 || (k == 0 && v > 15) || (k > 0 && v > 59) {
            return None;
        }
        secs += v * [3600, 60, 1][k];
    }
    Some(sign * secs)
}

/// `hh:mm[:ss[.ffffff]]` with an optional zone (`Z`, `+hh`, `-hh:mm`),
/// which `timestamp without time zone` input ignores as PostgreSQL does;
/// microseconds since midnight.
pub(super) fn parse_time_of_day(time: &str) -> Option<i64> {
    let time = strip_zone(time);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut it = hms.split(':');
    let h: i64 = it.next()?.parse().ok()?;
    let mi: i64 = it.next()?.parse().ok()?;
    let s: i64 = it.next().map_or(Some(0), |x| x.parse().ok())?;
    if it.next().is_some() || h > 24 || mi > 59 || s > 60 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(((h * 60 + mi) * 60 + s) * MICROS_PER_SECOND + crate::time::fraction_micros(frac))
}

/// Is the rest after `yyyy-mm-dd` shaped like a time (so a parse failure
/// is a field out of range, 22008, not bad syntax, 22007)?
pub(super) fn time_shape_ok(rest: &str) -> bool {
    let Some(time) = rest.strip_prefix([' ', 'T']) else { return rest.is_empty() };
    let time = time.trim();
    let body = strip_zone(time);
    if body.len() == time.len() && time.ends_with(['+', '-', ':']) {
        return false;
    }
    let (hms, frac) = body.split_once('.').unwrap_or((body, ""));
    let parts: Vec<&str> = hms.split(':').collect();
    (2..=3).contains(&parts.len())
        && parts.iter().all(|p| !p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()))
        && frac.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn strip_zone(time: &str) -> &str {
    let time = time.trim_end();
    if let Some(t) = time.strip_suffix(['Z', 'z']) {
        return t.trim_end();
    }
    // A sign after the seconds starts an offset: +hh, +hhmm, +hh:mm.
    match time.rfind(['+', '-']) {
        Some(i) if i > 0 && time[i + 1..].bytes().all(|b| b.is_ascii_digit() || b == b':') && !time[i + 1..].is_empty() => time[..i].trim_end(),
        _ => time,
    }
}
