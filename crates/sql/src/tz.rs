//! The session's TimeZone and DateStyle as the date/time code reads them.
//!
//! Casts, text input and output and the date/time functions are free
//! functions without a session argument, and the wire server formats and
//! parses values outside any statement (Bind parameters, DataRow text,
//! COPY). So the session installs its [`DtCtx`] in a thread-local before it
//! runs anything (`Connection::enter`, the server's message loop), and the
//! date/time code reads it here. The default session (UTC, `ISO, MDY`)
//! installs `None`: its path is the one pgtier had before zones existed, at
//! the cost of one thread-local read where a zone could matter.
//!
//! Zones: the system tz database (`/usr/share/zoneinfo`, read by jiff at run
//! time, no network), POSIX specs (`UTC+3` is three hours west, as in
//! PostgreSQL) and fixed offsets. Local times that a transition skips or
//! repeats resolve as PostgreSQL's DetermineTimeZoneOffset does: to the
//! later of the two UTC instants.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;

use pgtier_engine::{Value, civil_from_days};

use crate::error::{Result, SqlError};

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400_000_000;
/// Unix epoch minus PostgreSQL's (2000-01-01), in microseconds.
const UNIX_TO_PG_MICROS: i64 = 946_684_800_000_000;

/// A time zone: fixed offsets need no database.
#[derive(Debug, Clone)]
pub enum Zone {
    /// Seconds east of Greenwich, with the abbreviation SQL-style output shows.
    Fixed {
        east_secs: i32,
        abbrev: String,
    },
    Named(jiff::tz::TimeZone),
    /// An abbreviation whose offset depends on the date (the `Default`
    /// set's DYNTZ entries, `MSK` = Europe/Moscow): what the abbreviation
    /// meant in that zone at the time (DetermineTimeZoneAbbrevOffset).
    Dynamic {
        abbrev: String,
        tz: jiff::tz::TimeZone,
    },
}

/// DateStyle's output style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Iso,
    Sql,
    Postgres,
    German,
}

/// DateStyle's field order, for input and for SQL/Postgres output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Mdy,
    Dmy,
    Ymd,
}

/// What a session's date/time values depend on, and the other settings
/// that change how values print (one thread-local for all of them).
#[derive(Debug, Clone)]
pub struct DtCtx {
    pub zone: Zone,
    pub style: Style,
    pub order: Order,
    /// extra_float_digits; at 1 and above floats print shortest-exact.
    pub float_digits: i32,
    /// bytea_output = escape.
    pub bytea_escape: bool,
    pub interval_style: IntervalStyle,
}

/// IntervalStyle's output forms (`sql_standard` also changes how input
/// is read: a leading sign applies to every field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntervalStyle {
    #[default]
    Postgres,
    PostgresVerbose,
    Iso8601,
    SqlStandard,
}

thread_local! {
    static CTX: RefCell<Option<Arc<DtCtx>>> = const { RefCell::new(None) };
}

/// Makes `ctx` the context of the date/time code on this thread (one
/// pointer compare when it already is).
pub fn install(ctx: Option<&Arc<DtCtx>>) {
    CTX.with(|c| {
        let same = match (&*c.borrow(), ctx) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if !same {
            *c.borrow_mut() = ctx.cloned();
        }
    });
}

fn with<R>(f: impl FnOnce(Option<&DtCtx>) -> R) -> R {
    CTX.with(|c| f(c.borrow().as_deref()))
}

/// The context for `timezone`, `datestyle`, `extra_float_digits`,
/// `bytea_output` and `intervalstyle` as the settings hold them (already
/// normalized); None for the defaults (UTC, `ISO, MDY`, shortest floats,
/// hex, postgres).
pub fn context(
    timezone: &str,
    datestyle: &str,
    extra_float_digits: &str,
    bytea_output: &str,
    intervalstyle: &str,
) -> Option<Arc<DtCtx>> {
    let (style, order) = parse_datestyle_shown(datestyle);
    let float_digits = extra_float_digits.parse().unwrap_or(1);
    let bytea_escape = bytea_output == "escape";
    let interval_style = match intervalstyle {
        "postgres_verbose" => IntervalStyle::PostgresVerbose,
        "iso_8601" => IntervalStyle::Iso8601,
        "sql_standard" => IntervalStyle::SqlStandard,
        _ => IntervalStyle::Postgres,
    };
    if timezone == "UTC"
        && style == Style::Iso
        && order == Order::Mdy
        && float_digits >= 1
        && !bytea_escape
        && interval_style == IntervalStyle::Postgres
    {
        return None;
    }
    let zone = setting_zone(timezone).map_or(Zone::Fixed { east_secs: 0, abbrev: "UTC".to_owned() }, |(z, _)| z);
    Some(Arc::new(DtCtx { zone, style, order, float_digits, bytea_escape, interval_style }))
}

/// The session's IntervalStyle.
pub fn interval_style() -> IntervalStyle {
    with(|c| c.map_or(IntervalStyle::Postgres, |c| c.interval_style))
}

/// The session's extra_float_digits (1 when it is the default).
pub fn float_digits() -> i32 {
    with(|c| c.map_or(1, |c| c.float_digits))
}

/// Does the session print bytea in the escape format?
pub fn bytea_escape() -> bool {
    with(|c| c.is_some_and(|c| c.bytea_escape))
}

fn parse_datestyle_shown(text: &str) -> (Style, Order) {
    let mut style = Style::Iso;
    let mut order = Order::Mdy;
    for word in text.split(',').map(str::trim) {
        match word {
            "SQL" => style = Style::Sql,
            "Postgres" => style = Style::Postgres,
            "German" => style = Style::German,
            "DMY" => order = Order::Dmy,
            "YMD" => order = Order::Ymd,
            _ => {}
        }
    }
    (style, order)
}

/// The input field order of the session (DMY / MDY / YMD).
pub fn order() -> Order {
    with(|c| c.map_or(Order::Mdy, |c| c.order))
}

// ---------------------------------------------------------------- settings

/// check_datestyle: the words of `value` applied over `current` (a style
/// alone keeps the current order; German alone also sets DMY).
pub fn normalize_datestyle(value: &str, current: &str) -> Result<String> {
    let (mut style, mut order) = parse_datestyle_shown(current);
    let (mut have_style, mut have_order) = (false, false);
    let invalid = |detail: String| {
        SqlError::new("22023", format!("invalid value for parameter \"DateStyle\": \"{value}\"")).with_detail(detail)
    };
    for word in value.split(|c: char| c == ',' || c.is_ascii_whitespace()).filter(|w| !w.is_empty()) {
        let w = word.trim_matches('"').to_ascii_uppercase();
        let (new_style, new_order) = match w.as_str() {
            "ISO" => (Some(Style::Iso), None),
            "SQL" => (Some(Style::Sql), None),
            "POSTGRES" => (Some(Style::Postgres), None),
            "GERMAN" => (Some(Style::German), None),
            "YMD" => (None, Some(Order::Ymd)),
            "DMY" | "EURO" | "EUROPEAN" => (None, Some(Order::Dmy)),
            "MDY" | "US" | "NONEURO" | "NONEUROPEAN" => (None, Some(Order::Mdy)),
            "DEFAULT" => (Some(Style::Iso), Some(Order::Mdy)),
            _ => return Err(invalid(format!("Unrecognized key word: \"{word}\"."))),
        };
        if let Some(s) = new_style {
            if have_style && s != style {
                return Err(invalid("Conflicting \"datestyle\" specifications.".to_owned()));
            }
            style = s;
            have_style = true;
            if s == Style::German && !have_order {
                order = Order::Dmy;
            }
        }
        if let Some(o) = new_order {
            if have_order && o != order {
                return Err(invalid("Conflicting \"datestyle\" specifications.".to_owned()));
            }
            order = o;
            have_order = true;
        }
    }
    let style = match style {
        Style::Iso => "ISO",
        Style::Sql => "SQL",
        Style::Postgres => "Postgres",
        Style::German => "German",
    };
    let order = match order {
        Order::Mdy => "MDY",
        Order::Dmy => "DMY",
        Order::Ymd => "YMD",
    };
    Ok(format!("{style}, {order}"))
}

/// check_timezone: a number of hours east (`3`, `-3.5`), or a tz database
/// name (any case; shown in the database's), or a POSIX spec (`UTC+3`,
/// `<+03>-03`). Returns the zone and the text SHOW prints.
pub fn setting_zone(value: &str) -> Option<(Zone, String)> {
    let v = value.trim();
    if let Ok(hours) = v.parse::<f64>()
        && hours.is_finite()
        && hours.abs() < 168.0
    {
        #[allow(clippy::cast_possible_truncation)]
        let east = (hours * 3600.0).round() as i32;
        return Some(fixed_setting(east));
    }
    if v.eq_ignore_ascii_case("utc") {
        return Some((Zone::Fixed { east_secs: 0, abbrev: "UTC".to_owned() }, "UTC".to_owned()));
    }
    // A POSIX offset alone (`+02:00`, `-13:00`, `04:30`): hours west of
    // UTC, as POSIX counts, under the empty abbreviation PostgreSQL's
    // tzparse allows (IANA's does not); SHOW gives it as written.
    // (With seconds PostgreSQL refuses it: 22023.)
    if v.matches(':').count() == 1
        && let Some(west) = parse_offset(v)
        && west.abs() < 168 * 3600
    {
        return Some((Zone::Fixed { east_secs: -west, abbrev: String::new() }, v.to_ascii_uppercase()));
    }
    // The form SHOW prints for an offset (`<+05:30>-05:30`), which POSIX
    // (and so jiff) does not take: `:` may not appear inside `<>`.
    if let Some((abbrev, posix)) = v.strip_prefix('<').and_then(|r| r.split_once('>'))
        && let Some(west) = parse_offset(posix)
        && offset_text(-west, false) == abbrev
    {
        return Some(fixed_setting(-west));
    }
    named(v)
}

/// `[+-]hh[:mm[:ss]]` in seconds.
fn parse_offset(text: &str) -> Option<i32> {
    let (sign, digits) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => (1, text),
    };
    let mut secs = 0;
    let mut parts = 0;
    for (k, part) in digits.split(':').enumerate() {
        if k > 2 || part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        secs += part.parse::<i32>().ok()? * [3600, 60, 1][k];
        parts += 1;
    }
    (parts > 0).then_some(sign * secs)
}

/// A zone `east_secs` east as PostgreSQL names it (`<+03>-03`).
pub fn fixed_setting(east_secs: i32) -> (Zone, String) {
    let abbrev = offset_text(east_secs, false);
    let posix = offset_text(-east_secs, false);
    let shown = format!("<{abbrev}>{posix}");
    (Zone::Fixed { east_secs, abbrev }, shown)
}

fn named(v: &str) -> Option<(Zone, String)> {
    if v.is_empty() || v.starts_with(':') || v.contains("..") {
        return None;
    }
    if let Ok(tz) = jiff::tz::db().get(v) {
        let shown = tz.iana_name().unwrap_or(v).to_owned();
        return Some((Zone::Named(tz), shown));
    }
    let tz = jiff::tz::TimeZone::posix(v).ok()?;
    Some((Zone::Named(tz), v.to_owned()))
}

/// `+hh[:mm[:ss]]` (timestamptz output; `colon_always` for `+hh:mm`).
pub fn offset_text(east_secs: i32, colon_always: bool) -> String {
    let sign = if east_secs < 0 { '-' } else { '+' };
    let a = east_secs.unsigned_abs();
    let (h, m, s) = (a / 3600, a / 60 % 60, a % 60);
    if s != 0 {
        format!("{sign}{h:02}:{m:02}:{s:02}")
    } else if m != 0 || colon_always {
        format!("{sign}{h:02}:{m:02}")
    } else {
        format!("{sign}{h:02}")
    }
}

// ---------------------------------------------------------------- zones

/// Abbreviations of PostgreSQL's `Default` timezone_abbreviations set
/// (fixed offsets, seconds east) that timestamptz input and AT TIME ZONE
/// take before the tz database.
const ABBREVIATIONS: &[(&str, i32)] = &[
    ("acdt", 37_800),
    ("acst", 34_200),
    ("adt", -10_800),
    ("aedt", 39_600),
    ("aest", 36_000),
    ("akdt", -28_800),
    ("akst", -32_400),
    ("ast", -14_400),
    ("awst", 28_800),
    ("bst", 3600),
    ("cdt", -18_000),
    ("cest", 7200),
    ("cet", 3600),
    ("cst", -21_600),
    ("edt", -14_400),
    ("eest", 10_800),
    ("eet", 7200),
    ("est", -18_000),
    ("gmt", 0),
    ("hst", -36_000),
    ("idt", 10_800),
    ("ist", 7200),
    ("jst", 32_400),
    ("kst", 32_400),
    ("mdt", -21_600),
    ("mest", 7200),
    ("met", 3600),
    ("mst", -25_200),
    ("nzdt", 46_800),
    ("nzst", 43_200),
    ("pdt", -25_200),
    ("pst", -28_800),
    ("utc", 0),
    ("ut", 0),
    ("wet", 0),
    ("west", 3600),
    ("z", 0),
    ("zulu", 0),
];

/// The `Default` set's abbreviations that name a zone rather than an
/// offset (DYNTZ): their offset is what the zone used the abbreviation for
/// at the time in question.
const DYNAMIC_ABBREVIATIONS: &[(&str, &str)] = &[
    ("amst", "Asia/Yerevan"),
    ("anast", "Asia/Anadyr"),
    ("anat", "Asia/Anadyr"),
    ("arst", "America/Argentina/Buenos_Aires"),
    ("art", "America/Argentina/Buenos_Aires"),
    ("azst", "Asia/Baku"),
    ("azt", "Asia/Baku"),
    ("ckt", "Pacific/Rarotonga"),
    ("clt", "America/Santiago"),
    ("davt", "Antarctica/Davis"),
    ("easst", "Pacific/Easter"),
    ("east", "Pacific/Easter"),
    ("fkst", "Atlantic/Stanley"),
    ("fkt", "Atlantic/Stanley"),
    ("gest", "Asia/Tbilisi"),
    ("get", "Asia/Tbilisi"),
    ("gyt", "America/Guyana"),
    ("iot", "Indian/Chagos"),
    ("irkst", "Asia/Irkutsk"),
    ("irkt", "Asia/Irkutsk"),
    ("kgt", "Asia/Bishkek"),
    ("kost", "Pacific/Kosrae"),
    ("krast", "Asia/Krasnoyarsk"),
    ("krat", "Asia/Krasnoyarsk"),
    ("lhdt", "Australia/Lord_Howe"),
    ("lint", "Pacific/Kiritimati"),
    ("lkt", "Asia/Colombo"),
    ("magst", "Asia/Magadan"),
    ("magt", "Asia/Magadan"),
    ("mawt", "Antarctica/Mawson"),
    ("msk", "Europe/Moscow"),
    ("novst", "Asia/Novosibirsk"),
    ("novt", "Asia/Novosibirsk"),
    ("nut", "Pacific/Niue"),
    ("omsst", "Asia/Omsk"),
    ("omst", "Asia/Omsk"),
    ("petst", "Asia/Kamchatka"),
    ("pett", "Asia/Kamchatka"),
    ("pyt", "America/Asuncion"),
    ("sgt", "Asia/Singapore"),
    ("tkt", "Pacific/Fakaofo"),
    ("tmt", "Asia/Ashgabat"),
    ("ulat", "Asia/Ulaanbaatar"),
    ("vet", "America/Caracas"),
    ("vlast", "Asia/Vladivostok"),
    ("vlat", "Asia/Vladivostok"),
    ("volt", "Europe/Volgograd"),
    ("yakst", "Asia/Yakutsk"),
    ("yakt", "Asia/Yakutsk"),
    ("yekt", "Asia/Yekaterinburg"),
];

/// A zone named in a value or AT TIME ZONE: an abbreviation first, then
/// the tz database (or a POSIX spec), as PostgreSQL looks them up.
pub fn lookup(name: &str) -> Option<Zone> {
    let lower = name.to_ascii_lowercase();
    if let Some((_, east)) = ABBREVIATIONS.iter().find(|(a, _)| *a == lower) {
        return Some(Zone::Fixed { east_secs: *east, abbrev: name.to_ascii_uppercase() });
    }
    if let Some((_, zone)) = DYNAMIC_ABBREVIATIONS.iter().find(|(a, _)| *a == lower) {
        let tz = jiff::tz::db().get(zone).ok()?;
        return Some(Zone::Dynamic { abbrev: name.to_ascii_uppercase(), tz });
    }
    named(name).map(|(z, _)| z)
}

impl Zone {
    /// Seconds east of UTC at the instant `utc` (µs since 2000-01-01).
    pub fn offset_at(&self, utc: i64) -> i32 {
        match self {
            Zone::Fixed { east_secs, .. } => *east_secs,
            Zone::Named(tz) => tz.to_offset(jiff_instant(utc)).seconds(),
            // DetermineTimeZoneAbbrevOffsetTS.
            Zone::Dynamic { abbrev, tz } => {
                abbrev_offset(tz, abbrev, utc).unwrap_or_else(|| tz.to_offset(jiff_instant(utc)).seconds())
            }
        }
    }

    fn abbreviation_at(&self, utc: i64) -> String {
        match self {
            Zone::Fixed { abbrev, .. } => abbrev.clone(),
            Zone::Named(tz) => tz.to_offset_info(jiff_instant(utc)).abbreviation().to_owned(),
            Zone::Dynamic { abbrev, .. } => abbrev.clone(),
        }
    }

    /// The UTC instant of local time `local` in this zone (DetermineTimeZoneOffset).
    pub fn from_local(&self, local: i64) -> i64 {
        // Saturating throughout: main's ±infinity timestamps are i64 bounds.
        if let Zone::Dynamic { abbrev, tz } = self {
            // DetermineTimeZoneAbbrevOffset: the abbreviation's meaning at
            // the instant the zone itself gives the local time.
            let probe = Zone::Named(tz.clone()).from_local(local);
            return match abbrev_offset(tz, abbrev, probe) {
                Some(east) => local.saturating_sub(i64::from(east) * MICROS_PER_SECOND),
                None => probe,
            };
        }
        let Zone::Named(_) = self else {
            return local.saturating_sub(i64::from(self.offset_at(local)) * MICROS_PER_SECOND);
        };
        let o1 = i64::from(self.offset_at(local.saturating_sub(MICROS_PER_DAY))) * MICROS_PER_SECOND;
        let o2 = i64::from(self.offset_at(local.saturating_add(MICROS_PER_DAY))) * MICROS_PER_SECOND;
        let (u1, u2) = (local.saturating_sub(o1), local.saturating_sub(o2));
        if o1 == o2 {
            return u1;
        }
        let ok1 = i64::from(self.offset_at(u1)) * MICROS_PER_SECOND == o1;
        let ok2 = i64::from(self.offset_at(u2)) * MICROS_PER_SECOND == o2;
        match (ok1, ok2) {
            (true, false) => u1,
            (false, true) => u2,
            // Skipped or repeated: the later instant, as PostgreSQL prefers.
            _ => u1.max(u2),
        }
    }

    /// The local time in this zone of the instant `utc`.
    pub fn to_local(&self, utc: i64) -> i64 {
        utc.saturating_add(i64::from(self.offset_at(utc)) * MICROS_PER_SECOND)
    }
}

/// pg_interpret_timezone_abbrev: the offset (seconds east) `abbrev` had
/// in `tz` at its latest use at or before `utc`, else its earliest use
/// after; None when the zone never uses it.
fn abbrev_offset(tz: &jiff::tz::TimeZone, abbrev: &str, utc: i64) -> Option<i32> {
    let t = jiff_instant(utc);
    let info = tz.to_offset_info(t);
    if info.abbreviation().eq_ignore_ascii_case(abbrev) {
        return Some(info.offset().seconds());
    }
    let is = |tr: &jiff::tz::TimeZoneTransition<'_>| tr.abbreviation().eq_ignore_ascii_case(abbrev);
    tz.preceding(t).find(is).or_else(|| tz.following(t).find(is)).map(|tr| tr.offset().seconds())
}

/// jiff covers years -9999..=9999: a later instant is moved back by whole
/// 400-year cycles; an earlier one takes the offset at jiff's bound (the
/// zone's first, as PostgreSQL's table has it).
fn jiff_instant(utc: i64) -> jiff::Timestamp {
    // 400 Gregorian years: the calendar (weekdays, leap days) repeats, so
    // a zone's POSIX rule, which PostgreSQL applies to every year past its
    // table, gives the same offset.
    const CYCLE_MICROS: i64 = 146_097 * 86_400 * 1_000_000;
    let max = jiff::Timestamp::MAX.as_microsecond();
    let mut unix = utc.saturating_add(UNIX_TO_PG_MICROS);
    if unix > max {
        unix -= ((unix - max) / CYCLE_MICROS + 1) * CYCLE_MICROS;
    }
    let t = unix.clamp(jiff::Timestamp::MIN.as_microsecond(), max);
    jiff::Timestamp::from_microsecond(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// Local time of `utc` in the session zone.
pub fn to_local(utc: i64) -> i64 {
    with(|c| c.map_or(utc, |c| c.zone.to_local(utc)))
}

/// The instant of session-local time `local`.
pub fn from_local(local: i64) -> i64 {
    with(|c| c.map_or(local, |c| c.zone.from_local(local)))
}

/// Seconds east of UTC of the session zone at `utc`.
pub fn offset_at(utc: i64) -> i32 {
    with(|c| c.map_or(0, |c| c.zone.offset_at(utc)))
}

/// The session zone's abbreviation at `utc` (to_char's TZ pattern).
pub fn abbreviation_at(utc: i64) -> String {
    with(|c| c.map_or_else(|| "UTC".to_owned(), |c| c.zone.abbreviation_at(utc)))
}

/// The session's zone; None in the default session (UTC).
pub fn session_zone() -> Option<Zone> {
    with(|c| c.map(|c| c.zone.clone()))
}

/// Is the session zone UTC (no conversion anywhere)?
pub fn session_is_utc() -> bool {
    with(|c| c.is_none_or(|c| matches!(&c.zone, Zone::Fixed { east_secs: 0, .. })))
}

/// A zone for AT TIME ZONE / timezone(zone, ts): 22023 when unknown.
pub fn zone_arg(name: &str) -> Result<Zone> {
    lookup(name.trim()).ok_or_else(|| SqlError::new("22023", format!("time zone \"{name}\" not recognized")))
}

/// DecodeTimezone: a numeric zone `+h`, `-hh:mm[:ss]`, `+hhmm` (ISO sign:
/// east of UTC), in seconds east. Err(true) when its hours, minutes or
/// seconds are out of range; Err(false) when `s` is not of this form.
pub fn decode_numeric_zone(s: &str) -> std::result::Result<i32, bool> {
    /// strtoint: an optional sign and digits (0 and all of `s` without any).
    fn strtoint(s: &str) -> std::result::Result<(i64, &str), bool> {
        let t = s.trim_start();
        let (neg, body) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let n = body.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return Ok((0, s));
        }
        let v: i64 = body[..n].parse().map_err(|_| true)?;
        if v > i64::from(i32::MAX) {
            return Err(true);
        }
        Ok((if neg { -v } else { v }, &body[n..]))
    }
    let negative = match s.as_bytes().first() {
        Some(b'+') => false,
        Some(b'-') => true,
        _ => return Err(false),
    };
    let (mut hr, mut cp) = strtoint(&s[1..])?;
    let (mut min, mut sec) = (0, 0);
    if let Some(rest) = cp.strip_prefix(':') {
        (min, cp) = strtoint(rest)?;
        if let Some(rest) = cp.strip_prefix(':') {
            (sec, cp) = strtoint(rest)?;
        }
    } else if cp.is_empty() && s.len() > 3 {
        min = hr % 100;
        hr /= 100;
    }
    if !(0..=15).contains(&hr) || !(0..60).contains(&min) || !(0..60).contains(&sec) {
        return Err(true);
    }
    if !cp.is_empty() {
        return Err(false);
    }
    let east = i32::try_from((hr * 60 + min) * 60 + sec).map_err(|_| true)?;
    Ok(if negative { -east } else { east })
}

/// make_timestamptz's zone (parse_sane_timezone): a numeric zone with the
/// ISO sign first, then an abbreviation, then a tz database name or POSIX
/// spec; 22023 for what is none of them.
pub fn sane_zone(name: &str) -> Result<Zone> {
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(SqlError::new("22023", format!("invalid input syntax for type numeric time zone: \"{name}\""))
            .with_hint("Numeric time zones must have \"-\" or \"+\" as first character."));
    }
    match decode_numeric_zone(name) {
        Ok(east) => Ok(fixed_setting(east).0),
        Err(true) => Err(SqlError::new("22023", format!("numeric time zone \"{name}\" out of range"))),
        Err(false) => {
            lookup(name).ok_or_else(|| SqlError::new("22023", format!("time zone \"{name}\" not recognized")))
        }
    }
}

// ---------------------------------------------------------------- output

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/// date, timestamp and timestamptz output in the session's DateStyle and
/// zone; false for any other value (the caller writes it).
pub fn write_datetime(v: &Value, out: &mut String) -> bool {
    with(|c| {
        let Some(c) = c else { return false };
        match v {
            Value::Date(d) => write_date(c, i64::from(*d), out),
            Value::Timestamp(t) => write_timestamp(c, *t, None, out),
            Value::TimestampTz(t) => {
                let east = c.zone.offset_at(*t);
                let local = t.saturating_add(i64::from(east) * MICROS_PER_SECOND);
                let abbrev = if c.style == Style::Iso { String::new() } else { c.zone.abbreviation_at(*t) };
                write_timestamp(c, local, Some((east, abbrev)), out);
            }
            _ => return false,
        }
        true
    })
}

fn shown_year(y: i64) -> (i64, &'static str) {
    if y <= 0 { (1 - y, " BC") } else { (y, "") }
}

fn write_date(c: &DtCtx, days: i64, out: &mut String) {
    let (y, m, d) = civil_from_days(days);
    let (y, bc) = shown_year(y);
    let _ = match (c.style, c.order) {
        (Style::Iso, _) => write!(out, "{y:04}-{m:02}-{d:02}"),
        (Style::Sql, Order::Dmy) => write!(out, "{d:02}/{m:02}/{y:04}"),
        (Style::Sql, _) => write!(out, "{m:02}/{d:02}/{y:04}"),
        (Style::German, _) => write!(out, "{d:02}.{m:02}.{y:04}"),
        (Style::Postgres, Order::Dmy) => write!(out, "{d:02}-{m:02}-{y:04}"),
        (Style::Postgres, _) => write!(out, "{m:02}-{d:02}-{y:04}"),
    };
    out.push_str(bc);
}

/// date, timestamp and timestamptz as JSON writes them, whatever the
/// DateStyle (PostgreSQL's JsonEncodeDateTime, its XSD style): ISO 8601
/// with a `T`, a timestamptz in the session zone with its offset as
/// `+hh:mm` (`+hh:mm:ss` when the offset has seconds); false for any other
/// value. Finite values only: the caller writes the infinities' output.
pub fn write_xsd_datetime(v: &Value, out: &mut String) -> bool {
    match *v {
        Value::Date(days) => {
            let (y, m, d) = civil_from_days(i64::from(days));
            let (y, bc) = shown_year(y);
            let _ = write!(out, "{y:04}-{m:02}-{d:02}{bc}");
        }
        Value::Timestamp(local) => write_xsd_timestamp(local, None, out),
        Value::TimestampTz(t) => {
            let east = offset_at(t);
            write_xsd_timestamp(t.saturating_add(i64::from(east) * MICROS_PER_SECOND), Some(east), out);
        }
        _ => return false,
    }
    true
}

fn write_xsd_timestamp(local: i64, east_secs: Option<i32>, out: &mut String) {
    let LocalFields { year, bc, month, day, clock, .. } = LocalFields::of(local);
    let _ = write!(out, "{year:04}-{month:02}-{day:02}T{clock}");
    if let Some(east) = east_secs {
        out.push_str(&offset_text(east, true));
    }
    out.push_str(bc);
}

/// A local timestamp's fields as the output styles show them.
struct LocalFields {
    days: i64,
    year: i64,
    bc: &'static str,
    month: u32,
    day: u32,
    /// `hh:mm:ss[.ffffff]`, trailing zeros of the fraction dropped.
    clock: String,
}

impl LocalFields {
    fn of(local: i64) -> LocalFields {
        let days = local.div_euclid(MICROS_PER_DAY);
        let in_day = local.rem_euclid(MICROS_PER_DAY);
        let (y, month, day) = civil_from_days(days);
        let (year, bc) = shown_year(y);
        let secs = in_day / MICROS_PER_SECOND;
        let mut clock = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
        let frac = in_day % MICROS_PER_SECOND;
        if frac != 0 {
            let text = format!("{frac:06}");
            let _ = write!(clock, ".{}", text.trim_end_matches('0'));
        }
        LocalFields { days, year, bc, month, day, clock }
    }
}

/// `local` µs; `zone`: the offset and abbreviation of a timestamptz.
fn write_timestamp(c: &DtCtx, local: i64, zone: Option<(i32, String)>, out: &mut String) {
    let LocalFields { days, year, bc, month: m, day: d, clock } = LocalFields::of(local);
    let _ = match (c.style, c.order) {
        (Style::Iso, _) => write!(out, "{year:04}-{m:02}-{d:02} {clock}"),
        (Style::Sql, Order::Dmy) => write!(out, "{d:02}/{m:02}/{year:04} {clock}"),
        (Style::Sql, _) => write!(out, "{m:02}/{d:02}/{year:04} {clock}"),
        (Style::German, _) => write!(out, "{d:02}.{m:02}.{year:04} {clock}"),
        (Style::Postgres, order) => {
            let dow = DAYS[usize::try_from((days + 6).rem_euclid(7)).unwrap_or(0)];
            let mon = MONTHS[usize::try_from(m - 1).unwrap_or(0)];
            if order == Order::Dmy {
                write!(out, "{dow} {d:02} {mon} {clock} {year:04}")
            } else {
                write!(out, "{dow} {mon} {d:02} {clock} {year:04}")
            }
        }
    };
    if let Some((east, abbrev)) = zone {
        if c.style == Style::Iso {
            out.push_str(&offset_text(east, false));
        } else {
            out.push(' ');
            out.push_str(&abbrev);
        }
    }
    out.push_str(bc);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(y: i64, m: u32, d: u32, h: i64, mi: i64) -> i64 {
        pgtier_engine::days_from_civil(y, m, d) * MICROS_PER_DAY + (h * 60 + mi) * 60 * MICROS_PER_SECOND
    }

    #[test]
    fn local_times_resolve_as_postgresql() {
        let (ny, _) = setting_zone("america/new_york").expect("tz database");
        // 02:30 does not exist on 2024-03-10: the EST reading, 07:30 UTC.
        assert_eq!(ny.from_local(micros(2024, 3, 10, 2, 30)), micros(2024, 3, 10, 7, 30));
        // 01:30 on 2024-11-03 happens twice: the later (EST) one.
        assert_eq!(ny.from_local(micros(2024, 11, 3, 1, 30)), micros(2024, 11, 3, 6, 30));
        assert_eq!(ny.from_local(micros(2024, 7, 1, 12, 0)), micros(2024, 7, 1, 16, 0));
    }

    #[test]
    fn settings_read_as_postgresql() {
        assert_eq!(setting_zone("america/new_york").map(|z| z.1).as_deref(), Some("America/New_York"));
        assert_eq!(setting_zone("3").map(|z| z.1).as_deref(), Some("<+03>-03"));
        assert_eq!(setting_zone("-3.5").map(|z| z.1).as_deref(), Some("<-03:30>+03:30"));
        assert_eq!(setting_zone("<+05:30>-05:30").map(|z| z.0.offset_at(0)), Some(19_800));
        let (utc3, _) = setting_zone("UTC+3").expect("posix");
        assert_eq!(utc3.offset_at(0), -3 * 3600);
        assert!(setting_zone("Mars/Olympus").is_none());
        assert_eq!(normalize_datestyle("German", "ISO, MDY").ok().as_deref(), Some("German, DMY"));
        assert_eq!(normalize_datestyle("sql", "ISO, DMY").ok().as_deref(), Some("SQL, DMY"));
        assert_eq!(normalize_datestyle("ISO, SQL", "ISO, MDY").map_err(|e| e.sqlstate).err(), Some("22023"));
    }
}
