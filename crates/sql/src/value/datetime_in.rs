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

/// A special input that means the current date or time: the transaction's
/// start (`now`), or the day of it in the session's zone, one day later or
/// earlier (`today`, `tomorrow`, `yesterday`: the day offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Relative {
    Now,
    Day(i32),
}

/// The relative word among the whitespace-separated fields of `t`, and
/// whether it is the only field. Several (`today tomorrow`) count as one
/// with company, which the caller refuses.
pub(super) fn relative_word(t: &str) -> Option<(Relative, bool)> {
    let mut found = None;
    let mut fields = 0;
    for field in t.split_whitespace() {
        fields += 1;
        let word = match field.to_ascii_lowercase().as_str() {
            "now" => Relative::Now,
            "today" => Relative::Day(0),
            "tomorrow" => Relative::Day(1),
            "yesterday" => Relative::Day(-1),
            _ => continue,
        };
        if found.is_some() {
            return Some((word, false));
        }
        found = Some(word);
    }
    found.map(|w| (w, fields == 1))
}

/// `t` with its day word replaced by the ISO date of `days` (since
/// 2000-01-01), put first where the date/time parsers look for it:
/// `10:00 tomorrow` as `2026-11-25 10:00`.
pub(super) fn with_day_word_replaced(t: &str, days: i64) -> String {
    let (y, m, d) = pgtier_engine::civil_from_days(days);
    let mut out = format!("{y:04}-{m:02}-{d:02}");
    for field in t.split_whitespace().filter(|f| !matches!(f.to_ascii_lowercase().as_str(), "today" | "tomorrow" | "yesterday")) {
        out.push(' ');
        out.push_str(field);
    }
    out
}

/// A date, or a timestamp whose time part PostgreSQL's date input discards
/// (`'1970-01-01 00:00:00Z'::date`, as pgx's simple protocol sends).
pub(super) fn parse_date(t: &str) -> Option<i32> {
    let p = split(t)?;
    if !p.time.is_empty() {
        parse_time_of_day(&p.time)?;
    }
    p.days()
}

/// A date/time text split as PostgreSQL's ParseDateTime sees it: the date
/// fields, the time of day (with a numeric offset), a zone name, the era.
struct Parts<'a> {
    date: String,
    time: String,
    zone: Option<&'a str>,
    bc: bool,
}

/// Day and month names are fields of the date, never zones.
fn is_date_word(w: &str) -> bool {
    month_number(w).is_some() || day_name(w)
}

fn day_name(w: &str) -> bool {
    let w = w.to_ascii_lowercase();
    w.len() >= 3 && ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"].iter().any(|d| d.starts_with(&w) || w == d[..3])
}

fn month_number(w: &str) -> Option<u32> {
    const NAMES: [&str; 12] = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];
    let w = w.to_ascii_lowercase();
    if w.len() < 3 {
        return None;
    }
    let k = NAMES.iter().position(|n| n.starts_with(&w) || (w == "sept" && *n == "september"))?;
    u32::try_from(k + 1).ok()
}

fn split(t: &str) -> Option<Parts<'_>> {
    let (mut t, bc) = era::split_era(t);
    let mut zone = None;
    if let Some(i) = t.rfind(char::is_whitespace) {
        let last = &t[i + 1..];
        if last.starts_with(|c: char| c.is_ascii_alphabetic()) && !is_date_word(last) && !last.eq_ignore_ascii_case("allballs") {
            zone = Some(last);
            t = t[..i].trim_end();
        }
    }
    let tokens: Vec<&str> = t.split_whitespace().collect();
    if tokens.len() <= 1 {
        // ISO 8601's `T` between the date and the time.
        let at = t.char_indices().skip(1).find(|&(k, c)| (c == 'T' || c == 't') && t[..k].ends_with(|d: char| d.is_ascii_digit())).map(|(k, _)| k);
        return Some(match at {
            Some(k) => Parts { date: t[..k].to_owned(), time: t[k + 1..].to_owned(), zone, bc },
            None => Parts { date: t.to_owned(), time: String::new(), zone, bc },
        });
    }
    let mut date = Vec::new();
    let mut time = String::new();
    let mut offset = None;
    for (k, tok) in tokens.iter().enumerate() {
        // `allballs` is 00:00:00 (PostgreSQL's name for it).
        if (tok.contains(':') || tok.eq_ignore_ascii_case("allballs")) && time.is_empty() && !tok.starts_with(['+', '-']) {
            time.push_str(tok);
        } else if k > 0 && offset.is_none() && tok.len() > 1 && tok.starts_with(['+', '-']) && tok[1..].bytes().all(|b| b.is_ascii_digit() || b == b':') {
            // An offset written apart: `10:00:00 +01`, `Feb 10 17:32:01 1997 -0800`.
            offset = Some(*tok);
        } else {
            date.push(*tok);
        }
    }
    if let Some(o) = offset {
        if time.is_empty() {
            time.push_str("00:00");
        }
        time.push(' ');
        time.push_str(o);
    }
    Some(Parts { date: date.join(" "), time, zone, bc })
}

impl Parts<'_> {
    fn days(&self) -> Option<i32> {
        if let Some(z) = self.zone {
            crate::tz::lookup(z)?;
        }
        let days = parse_date_fields(&self.date)?;
        if self.bc { era::bc_date(days) } else { Some(days) }
    }

    fn local(&self) -> Option<i64> {
        let days = i64::from(self.days()?);
        let micros = if self.time.is_empty() { 0 } else { parse_time_of_day(&self.time)? };
        days.checked_mul(MICROS_PER_DAY)?.checked_add(micros)
    }
}

/// The date fields in any order PostgreSQL reads: `y-m-d`, DateStyle's
/// order for `a/b/c`, `a-b-c` and `a.b.c` when the first is no year,
/// month names (`Jan 15 2024`, `15-Jan-2024`), day names ignored, two-digit
/// years in 1970..2069.
fn parse_date_fields(date: &str) -> Option<i32> {
    let fields: Vec<&str> = date.split([' ', '/', '-', '.', ',']).filter(|f| !f.is_empty() && !day_name(f)).collect();
    let numbers: Vec<&str> = fields.iter().copied().filter(|f| f.bytes().all(|b| b.is_ascii_digit())).collect();
    let month_names: Vec<u32> = fields.iter().filter_map(|f| month_number(f)).collect();
    if numbers.len() + month_names.len() != fields.len() {
        return None;
    }
    let year = |f: &str| -> Option<i64> {
        let y: i64 = f.parse().ok()?;
        Some(if f.len() <= 2 { if y < 70 { 2000 + y } else { 1900 + y } } else { y })
    };
    let num = |f: &str| f.parse::<u32>().ok();
    let (y, m, d) = match (numbers.as_slice(), month_names.as_slice()) {
        ([ymd], []) if ymd.len() == 8 => (ymd[..4].parse().ok()?, num(&ymd[4..6])?, num(&ymd[6..])?),
        ([a, b, c], []) => {
            if a.len() >= 3 {
                (year(a)?, num(b)?, num(c)?)
            } else {
                match crate::tz::order() {
                    crate::tz::Order::Mdy => (year(c)?, num(a)?, num(b)?),
                    crate::tz::Order::Dmy => (year(c)?, num(b)?, num(a)?),
                    crate::tz::Order::Ymd => (year(a)?, num(b)?, num(c)?),
                }
            }
        }
        ([a, b], [m]) => {
            let year_first = a.len() >= 3 || (crate::tz::order() == crate::tz::Order::Ymd && b.len() <= 2);
            if year_first { (year(a)?, *m, num(b)?) } else { (year(b)?, *m, num(a)?) }
        }
        _ => return None,
    };
    ymd_days(y, m, d)
}

fn ymd_days(y: i64, m: u32, d: u32) -> Option<i32> {
    if !(1..=DATE_YEAR_MAX).contains(&y) || !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    i32::try_from(days_from_civil(y, m, d)).ok()
}

/// The last year PostgreSQL's date type holds.
const DATE_YEAR_MAX: i64 = 5_874_897;

pub(super) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

pub(super) fn parse_timestamp(t: &str) -> Option<i64> {
    split(t)?.local()
}

/// A timestamp with a UTC offset (`Z`, `+hh`, `+hhmm`, `-hh:mm[:ss]`) or a
/// zone (`America/New_York`, `EST`); without one the session's zone
/// applies. Microseconds since 2000-01-01 UTC.
pub(super) fn parse_timestamptz(t: &str) -> Option<i64> {
    let p = split(t)?;
    let local = p.local()?;
    if let Some(name) = p.zone {
        return Some(crate::tz::lookup(name)?.from_local(local));
    }
    let time = p.time.trim_end();
    if time.is_empty() || strip_zone(time).len() == time.len() {
        return Some(crate::tz::from_local(local));
    }
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
    if time.trim().eq_ignore_ascii_case("allballs") {
        return Some(0);
    }
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
