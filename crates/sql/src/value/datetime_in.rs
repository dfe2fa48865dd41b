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
        let word = match day_offset(field) {
            Some(offset) => Relative::Day(offset),
            None if field.eq_ignore_ascii_case("now") => Relative::Now,
            None => continue,
        };
        if found.is_some() {
            return Some((word, false));
        }
        found = Some(word);
    }
    found.map(|w| (w, fields == 1))
}

/// The day a day word names, relative to today.
fn day_offset(field: &str) -> Option<i32> {
    match field.to_ascii_lowercase().as_str() {
        "today" => Some(0),
        "tomorrow" => Some(1),
        "yesterday" => Some(-1),
        _ => None,
    }
}

/// `t` with its day word replaced by the ISO date of `days` (since
/// 2000-01-01), put first where the date/time parsers look for it:
/// `10:00 tomorrow` as `2026-11-25 10:00`.
pub(super) fn with_day_word_replaced(t: &str, days: i64) -> String {
    let (y, m, d) = pgtier_engine::civil_from_days(days);
    let mut out = format!("{y:04}-{m:02}-{d:02}");
    for field in t.split_whitespace().filter(|f| day_offset(f).is_none()) {
        out.push(' ');
        out.push_str(field);
    }
    out
}

/// A date, or a timestamp whose time part PostgreSQL's date input discards
/// (`'1970-01-01 00:00:00Z'::date`, as pgx's simple protocol sends).
pub(super) fn parse_date(t: &str) -> Option<i32> {
    let p = split(t)?;
    if !p.time.is_empty() || p.meridian.is_some() {
        p.local()?;
    }
    p.days()
}

/// The zone name of `t` when it names no zone PostgreSQL knows and is
/// written as a path (`America/Does_not_exist`), which PostgreSQL reports
/// as such (22023) rather than as bad syntax; lower-cased as it prints it.
pub(super) fn unrecognized_zone(t: &str) -> Option<String> {
    let zone = split(t)?.zone?;
    (zone.contains('/') && crate::tz::lookup(zone).is_none()).then(|| zone.to_ascii_lowercase())
}

/// A date/time text split as PostgreSQL's ParseDateTime sees it: the date
/// fields, the time of day (with a numeric offset), a zone name, the era.
struct Parts<'a> {
    date: String,
    time: String,
    zone: Option<&'a str>,
    bc: bool,
    /// `am` (false) or `pm` (true), written apart or on the time.
    meridian: Option<bool>,
}

/// `am` / `pm` (any case) as the meridian: Some(true) for pm.
fn meridian(w: &str) -> Option<bool> {
    match w.to_ascii_lowercase().as_str() {
        "am" => Some(false),
        "pm" => Some(true),
        _ => None,
    }
}

/// A time written without colons, as PostgreSQL's DecodeNumberField reads
/// one after a date: `hhmmss[.f]` or `hhmm`, an offset possibly attached
/// (`040506+08`); returned with colons (`04:05:06+08`).
fn compact_time(tok: &str) -> Option<String> {
    let end = tok.find(['+', '-']).unwrap_or(tok.len());
    let (number, offset) = tok.split_at(end);
    let (digits, frac) = number.split_once('.').map_or((number, None), |(d, f)| (d, Some(f)));
    if !digits.bytes().all(|b| b.is_ascii_digit()) || frac.is_some_and(|f| !f.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let mut out = match digits.len() {
        6 => format!("{}:{}:{}", &digits[..2], &digits[2..4], &digits[4..]),
        4 if frac.is_none() => format!("{}:{}", &digits[..2], &digits[2..]),
        _ => return None,
    };
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out.push_str(offset);
    Some(out)
}

/// `J` and a Julian day number (any case).
fn is_julian(w: &str) -> bool {
    w.len() > 1 && w.starts_with(['J', 'j']) && w[1..].bytes().all(|b| b.is_ascii_digit())
}

/// Day and month names are fields of the date, never zones.
fn is_date_word(w: &str) -> bool {
    month_number(w).is_some() || day_name(w)
}

fn day_name(w: &str) -> bool {
    let w = w.to_ascii_lowercase();
    w.len() >= 3
        && ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
            .iter()
            .any(|d| d.starts_with(&w) || w == d[..3])
}

fn month_number(w: &str) -> Option<u32> {
    const NAMES: [&str; 12] = MONTH_NAMES;
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
        if last.starts_with(|c: char| c.is_ascii_alphabetic())
            && !is_date_word(last)
            && glued_month(last).is_none()
            && !last.eq_ignore_ascii_case("allballs")
            && meridian(last).is_none()
            && !is_julian(last)
        {
            zone = Some(last);
            t = t[..i].trim_end();
        }
    }
    let tokens: Vec<&str> = t.split_whitespace().collect();
    if tokens.len() <= 1 {
        // ISO 8601's `T` between the date and the time.
        let at = t
            .char_indices()
            .skip(1)
            .find(|&(k, c)| (c == 'T' || c == 't') && t[..k].ends_with(|d: char| d.is_ascii_digit()))
            .map(|(k, _)| k);
        return Some(match at {
            Some(k) => {
                let time = &t[k + 1..];
                let time = if time.contains(':') {
                    time.to_owned()
                } else {
                    compact_time(time).unwrap_or_else(|| time.to_owned())
                };
                Parts { date: t[..k].to_owned(), time, zone, bc, meridian: None }
            }
            None => match t.split_once('+') {
                // A date with an offset glued on (`2001-01-01+11`): midnight there.
                Some((date, offset))
                    if date.ends_with(|c: char| c.is_ascii_digit())
                        && !offset.is_empty()
                        && offset.bytes().all(|b| b.is_ascii_digit() || b == b':') =>
                {
                    Parts { date: date.to_owned(), time: format!("00:00 +{offset}"), zone, bc, meridian: None }
                }
                _ => Parts { date: t.to_owned(), time: String::new(), zone, bc, meridian: None },
            },
        });
    }
    let mut date = Vec::new();
    let mut time = String::new();
    let mut offset = None;
    let mut am_pm = None;
    for (k, tok) in tokens.iter().enumerate() {
        // After the time PostgreSQL takes no separated date (`10:00
        // 1997-02-10`), nor after a meridian.
        let separated_date = tok.get(1..).is_some_and(|rest| rest.contains(['-', '/', '.']))
            && (tok.starts_with(|c: char| c.is_ascii_digit())
                || tok.split(['-', '/', '.']).next().is_some_and(is_date_word));
        if (!time.is_empty() && separated_date) || (am_pm.is_some() && (separated_date || is_date_word(tok))) {
            return None;
        }
        let lower = tok.to_ascii_lowercase();
        let glued_meridian =
            lower.strip_suffix("am").or_else(|| lower.strip_suffix("pm")).filter(|rest| rest.contains(':'));
        if let Some(m) = meridian(tok) {
            am_pm = Some(m);
        } else if let Some(rest) = glued_meridian
            && time.is_empty()
        {
            // `5:32PM`
            time.push_str(&tok[..rest.len()]);
            am_pm = meridian(&tok[rest.len()..]);
        } else if (tok.contains(':') || tok.eq_ignore_ascii_case("allballs"))
            && time.is_empty()
            && !tok.starts_with(['+', '-'])
        {
            // `allballs` is 00:00:00 (PostgreSQL's name for it).
            time.push_str(tok);
        } else if let Some(compact) = compact_time(tok)
            .filter(|_| k > 0 && time.is_empty() && parse_date_fields(&date.join(" "), false).is_some())
        {
            // `19970210 173201`, `Feb 10 1997 1732`: after a whole date.
            time.push_str(&compact);
        } else if zone.is_none()
            && tok.starts_with(|c: char| c.is_ascii_alphabetic())
            && !is_date_word(tok)
            && !is_julian(tok)
            && glued_month(tok).is_none()
            && crate::tz::lookup(tok).is_some()
        {
            // A zone in mid-text: `Feb 10 17:32:01 PST 1997`.
            zone = Some(*tok);
        } else if k > 0
            && offset.is_none()
            && tok.len() > 1
            && tok.starts_with(['+', '-'])
            && tok[1..].bytes().all(|b| b.is_ascii_digit() || b == b':')
        {
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
    Some(Parts { date: date.join(" "), time, zone, bc, meridian: am_pm })
}

impl Parts<'_> {
    fn days(&self) -> Option<i32> {
        if let Some(z) = self.zone {
            crate::tz::lookup(z)?;
        }
        let days = parse_date_fields(&self.date, self.bc)?;
        if self.bc { era::bc_date(days) } else { Some(days) }
    }

    fn local(&self) -> Option<i64> {
        let days = i64::from(self.days()?);
        let mut micros = if self.time.is_empty() { 0 } else { parse_time_of_day(&self.time)? };
        if let Some(pm) = self.meridian {
            // 12 am is midnight, 12 pm noon; an hour above 12 has no meridian.
            const HOUR: i64 = 3600 * MICROS_PER_SECOND;
            match micros / HOUR {
                13.. => return None,
                12 if !pm => micros -= 12 * HOUR,
                h if pm && h < 12 => micros += 12 * HOUR,
                _ => {}
            }
        }
        days.checked_mul(MICROS_PER_DAY)?.checked_add(micros)
    }
}

/// The date fields in any order PostgreSQL reads: `y-m-d`, DateStyle's
/// order for `a/b/c`, `a-b-c` and `a.b.c` when the first is no year,
/// month names (`Jan 15 2024`, `15-Jan-2024`), day names ignored, two-digit
/// years in 1970..2069.
fn parse_date_fields(date: &str, bc: bool) -> Option<i32> {
    // A month name may lead or sit inside a `-`/`/`-joined field, never end
    // it: PostgreSQL's DecodeDate refuses `1999-08-Jan` and `1999/08/Jan`.
    if date.split_whitespace().any(|field| {
        field.contains(['-', '/'])
            && field.rsplit(['-', '/']).next().is_some_and(|last| last.starts_with(|c: char| c.is_ascii_alphabetic()))
    }) {
        return None;
    }
    if is_julian(date.trim()) {
        // A Julian day number: J2451545 is 2000-01-01.
        const JULIAN_2000: i64 = 2_451_545;
        let jd: i64 = date.trim()[1..].parse().ok()?;
        return i32::try_from(jd - JULIAN_2000).ok();
    }
    if let Some((y, doy)) = date.trim().split_once('.')
        && y.len() == 4
        && doy.len() == 3
        && y.bytes().chain(doy.bytes()).all(|b| b.is_ascii_digit())
    {
        // `yyyy.ddd`: the day of the year (366 of a common year runs on).
        let (y, doy): (i64, i64) = (y.parse().ok()?, doy.parse().ok()?);
        if !(1..=366).contains(&doy) || y == 0 {
            return None;
        }
        return i32::try_from(days_from_civil(y, 1, 1) + doy - 1).ok();
    }
    let fields: Vec<&str> = date
        .split([' ', ','])
        .flat_map(|token| match glued_month(token) {
            Some(runs) => runs,
            None => token.split(['/', '-', '.']).collect(),
        })
        .filter(|f| !f.is_empty() && !day_name(f))
        .collect();
    let numbers: Vec<&str> = fields.iter().copied().filter(|f| f.bytes().all(|b| b.is_ascii_digit())).collect();
    let month_names: Vec<u32> = fields.iter().filter_map(|f| month_number(f)).collect();
    if numbers.len() + month_names.len() != fields.len() {
        return None;
    }
    // A two-digit year is 1970..2069, except with BC (DecodeDate's
    // is2digits adjustment skips BC years).
    let year = |f: &str| -> Option<i64> {
        let y: i64 = f.parse().ok()?;
        Some(if f.len() <= 2 && !bc { if y < 70 { 2000 + y } else { 1900 + y } } else { y })
    };
    let num = |f: &str| f.parse::<u32>().ok();
    let (y, m, d) = match (numbers.as_slice(), month_names.as_slice()) {
        // DecodeNumberField: the last two digits the day, two more the
        // month, the rest the year (`970210`, `100000312`).
        ([ymd], []) if ymd.len() >= 6 => {
            let n = ymd.len();
            (year(&ymd[..n - 4])?, num(&ymd[n - 4..n - 2])?, num(&ymd[n - 2..])?)
        }
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

/// A whitespace-separated field of digits and a month name run together
/// (`97FEB10`, `10feb1997`) as the fields PostgreSQL's ParseDateTime makes
/// of it: digits end a field where a letter follows, and a month name
/// (only one of its keywords: `feb`, `february`, `sept`, not `febr`) ends
/// where a digit follows. None for any other field, and for one with a
/// separator: DecodeDate reads `1999-Jan18` otherwise (as 1999-01-08).
fn glued_month(field: &str) -> Option<Vec<&str>> {
    let alpha = |b: u8| b.is_ascii_alphabetic();
    let bytes = field.as_bytes();
    if !bytes.iter().all(u8::is_ascii_alphanumeric)
        || !bytes.iter().any(|&b| alpha(b))
        || bytes.iter().all(|&b| alpha(b))
    {
        return None;
    }
    let mut runs = Vec::new();
    let mut start = 0;
    for k in 1..=bytes.len() {
        if k == bytes.len() || alpha(bytes[k]) != alpha(bytes[k - 1]) {
            runs.push(&field[start..k]);
            start = k;
        }
    }
    let month_keyword = |w: &str| {
        let w = w.to_ascii_lowercase();
        w == "sept" || MONTH_NAMES.iter().any(|n| *n == w || n[..3] == w)
    };
    runs.iter().all(|r| !r.starts_with(|c: char| c.is_ascii_alphabetic()) || month_keyword(r)).then_some(runs)
}

const MONTH_NAMES: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

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
    Some(((h * 60 + mi) * 60 + s) * MICROS_PER_SECOND + crate::value::time::fraction_micros(frac))
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
        Some(i)
            if i > 0 && time[i + 1..].bytes().all(|b| b.is_ascii_digit() || b == b':') && !time[i + 1..].is_empty() =>
        {
            time[..i].trim_end()
        }
        _ => time,
    }
}
