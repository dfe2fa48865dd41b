//! interval_in as PostgreSQL 15 reads it: ParseDateTime's fields,
//! DecodeInterval (quantity-unit pairs, clock fields, SQL-standard
//! `years-months` and `days h:m:s`, `ago`), the ISO 8601 forms of
//! DecodeISO8601Interval (`P1Y2M3DT4H5M6S`, `P0001-02-03T04:05:06`), and
//! the typmod of `interval <fields>(p)`: the fields decide what a bare
//! number or `a:b` means (DecodeInterval's `range`) and which lower fields
//! are cut away (AdjustIntervalForTypmod).
//!
//! In IntervalStyle `sql_standard` a leading `-` applies to every field
//! when no other field has a sign, as PostgreSQL reads it.

use pgtier_engine::Interval;

use crate::error::{Result, SqlError};

/// A typmod's field bits (PostgreSQL's INTERVAL_MASK).
pub const MONTH: u16 = 1 << 1;
pub const YEAR: u16 = 1 << 2;
pub const DAY: u16 = 1 << 3;
pub const HOUR: u16 = 1 << 10;
pub const MINUTE: u16 = 1 << 11;
pub const SECOND: u16 = 1 << 12;
/// No fields named (INTERVAL_FULL_RANGE).
pub const FULL_RANGE: u16 = 0x7FFF;
/// No precision named (INTERVAL_FULL_PRECISION).
const FULL_PRECISION: i32 = 0xFFFF;

/// PostgreSQL's interval typmod: `range << 16 | precision`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Typmod {
    pub range: u16,
    /// Fractional digits of a second kept, 0..=6; None for all.
    pub precision: Option<u8>,
}

impl Typmod {
    pub const FULL: Typmod = Typmod { range: FULL_RANGE, precision: None };

    /// The int4 PostgreSQL stores (INTERVAL_TYPMOD).
    pub fn encode(self) -> i32 {
        (i32::from(self.range) << 16) | self.precision.map_or(FULL_PRECISION, i32::from)
    }

    pub fn decode(typmod: i32) -> Option<Typmod> {
        let range = u16::try_from(typmod >> 16).ok()?;
        let p = typmod & 0xFFFF;
        let precision = if p == FULL_PRECISION { None } else { Some(u8::try_from(p).ok()?.min(6)) };
        Some(Typmod { range, precision })
    }
}

/// DecodeInterval's and DecodeISO8601Interval's error codes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dterr {
    BadFormat,
    FieldOverflow,
    /// A form strtod reads that pgtier does not (hexadecimal numbers).
    Unsupported,
}

type Res<T> = std::result::Result<T, Dterr>;

/// interval_in with a typmod: the value, or PostgreSQL's error for `text`.
pub fn parse(text: &str, typmod: Typmod) -> Result<Interval> {
    let sql_standard = crate::tz::interval_style() == crate::tz::IntervalStyle::SqlStandard;
    let decoded = match parse_fields(text).and_then(|fields| decode_interval(&fields, typmod.range, sql_standard)) {
        Err(Dterr::BadFormat) => decode_iso8601(text),
        other => other,
    };
    let itm = decoded.map_err(|e| match e {
        Dterr::BadFormat => SqlError::new("22007", format!("invalid input syntax for type interval: \"{text}\"")),
        Dterr::FieldOverflow => SqlError::new("22015", format!("interval field value out of range: \"{text}\"")),
        Dterr::Unsupported => SqlError::unsupported(format!("interval input \"{text}\" (a hexadecimal number)")),
    })?;
    let months = i64::from(itm.year) * 12 + i64::from(itm.mon);
    let months = i32::try_from(months).map_err(|_| SqlError::new("22008", "interval out of range"))?;
    adjust(Interval { months, days: itm.mday, micros: itm.usec }, typmod)
}

/// AdjustIntervalForTypmod: the fields below the last named one cut away
/// (toward zero), then the seconds rounded to the precision.
pub fn adjust(v: Interval, typmod: Typmod) -> Result<Interval> {
    const USECS_PER_HOUR: i64 = 3_600_000_000;
    const USECS_PER_MINUTE: i64 = 60_000_000;
    let r = typmod.range;
    let v = if r == YEAR {
        Interval { months: v.months / 12 * 12, days: 0, micros: 0 }
    } else if r == MONTH || r == YEAR | MONTH {
        Interval { days: 0, micros: 0, ..v }
    } else if r == DAY {
        Interval { micros: 0, ..v }
    } else if r == HOUR || r == DAY | HOUR {
        Interval { micros: v.micros / USECS_PER_HOUR * USECS_PER_HOUR, ..v }
    } else if r == MINUTE || r == DAY | HOUR | MINUTE || r == HOUR | MINUTE {
        Interval { micros: v.micros / USECS_PER_MINUTE * USECS_PER_MINUTE, ..v }
    } else {
        v
    };
    match typmod.precision {
        Some(p) => super::interval::round_seconds(v, u64::from(p)),
        None => Ok(v),
    }
}

/// ParseDateTime's field types, as an interval reads them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ft {
    Number,
    Date,
    Time,
    String,
    Special,
    /// A sign and a digit: a signed number, `+h:m`, or `-y-m`.
    Tz,
}

/// The core date keywords (datetktbl): a word one of these followed by a
/// digit stays a word; any other starts a date-like field (`day2`).
const DATE_KEYWORDS: &[&str] = &[
    "-infinity",
    "ad",
    "allballs",
    "am",
    "apr",
    "april",
    "at",
    "aug",
    "august",
    "bc",
    "d",
    "dec",
    "december",
    "dow",
    "doy",
    "dst",
    "epoch",
    "feb",
    "february",
    "fri",
    "friday",
    "h",
    "infinity",
    "isodow",
    "isoyear",
    "j",
    "jan",
    "january",
    "jd",
    "jul",
    "julian",
    "july",
    "jun",
    "june",
    "m",
    "mar",
    "march",
    "may",
    "mm",
    "mon",
    "monday",
    "nov",
    "november",
    "now",
    "oct",
    "october",
    "on",
    "pm",
    "s",
    "sat",
    "saturday",
    "sep",
    "sept",
    "september",
    "sun",
    "sunday",
    "t",
    "thu",
    "thur",
    "thurs",
    "thursday",
    "today",
    "tomorrow",
    "tue",
    "tues",
    "tuesday",
    "wed",
    "wednesday",
    "weds",
    "y",
    "yesterday",
];

/// datebsearch's comparison: the first TOKMAXLEN (10) characters.
fn token_eq(word: &str, token: &str) -> bool {
    let cut = |s: &str| s.get(..10).unwrap_or(s).to_owned();
    cut(word) == cut(token)
}

/// interval_in's limits: MAXDATEFIELDS fields in a 256-byte work buffer.
const MAX_FIELDS: usize = 25;
const WORKBUF: usize = 256;

/// ParseDateTime's reading position and work-buffer use.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    used: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// The current character, lower-cased, onto the field (APPEND_CHAR).
    fn push(&mut self, f: &mut String) -> Res<()> {
        let c = self.peek().ok_or(Dterr::BadFormat)?;
        if self.used + 1 >= WORKBUF {
            return Err(Dterr::BadFormat);
        }
        self.used += 1;
        self.i += 1;
        f.push(char::from(c.to_ascii_lowercase()));
        Ok(())
    }

    fn push_while(&mut self, f: &mut String, pred: impl Fn(u8) -> bool) -> Res<()> {
        while self.peek().is_some_and(&pred) {
            self.push(f)?;
        }
        Ok(())
    }
}

/// ParseDateTime: the text cut into lower-cased fields with their types.
fn parse_fields(text: &str) -> Res<Vec<(String, Ft)>> {
    let mut sc = Scan { b: text.as_bytes(), i: 0, used: 0 };
    let mut out: Vec<(String, Ft)> = Vec::new();
    while let Some(c) = sc.peek() {
        if c.is_ascii_whitespace() {
            sc.i += 1;
            continue;
        }
        if out.len() >= MAX_FIELDS {
            return Err(Dterr::BadFormat);
        }
        let mut f = String::new();
        let ft = if c.is_ascii_digit() {
            digit_field(&mut sc, &mut f)?
        } else if c == b'.' {
            sc.push(&mut f)?;
            sc.push_while(&mut f, |c| c.is_ascii_digit())?;
            Ft::Number
        } else if c.is_ascii_alphabetic() {
            sc.push_while(&mut f, |c| c.is_ascii_alphabetic())?;
            let is_date = match sc.peek() {
                Some(b'-' | b'/' | b'.') => true,
                Some(n) if n == b'+' || n.is_ascii_digit() => !DATE_KEYWORDS.iter().any(|k| token_eq(&f, k)),
                _ => false,
            };
            if is_date {
                sc.push(&mut f)?;
                sc.push_while(&mut f, |c| {
                    matches!(c, b'+' | b'-' | b'/' | b'_' | b'.' | b':') || c.is_ascii_alphanumeric()
                })?;
                Ft::Date
            } else {
                Ft::String
            }
        } else if c == b'+' || c == b'-' {
            sc.push(&mut f)?;
            while sc.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                sc.i += 1;
            }
            match sc.peek() {
                Some(d) if d.is_ascii_digit() => {
                    sc.push_while(&mut f, |c| c.is_ascii_digit() || matches!(c, b':' | b'.' | b'-'))?;
                    Ft::Tz
                }
                Some(a) if a.is_ascii_alphabetic() => {
                    sc.push_while(&mut f, |c| c.is_ascii_alphabetic())?;
                    Ft::Special
                }
                _ => return Err(Dterr::BadFormat),
            }
        } else if c.is_ascii_punctuation() {
            sc.i += 1;
            continue;
        } else {
            return Err(Dterr::BadFormat);
        };
        // The field's terminating NUL.
        sc.used += 1;
        out.push((f, ft));
    }
    Ok(out)
}

/// A field starting with a digit: a number, a time (`1:02`), or a date
/// (`1-2`, `1.2.3`, `1-feb`).
fn digit_field(sc: &mut Scan<'_>, f: &mut String) -> Res<Ft> {
    sc.push_while(f, |c| c.is_ascii_digit())?;
    match sc.peek() {
        Some(b':') => {
            sc.push_while(f, |c| c.is_ascii_digit() || c == b':' || c == b'.')?;
            Ok(Ft::Time)
        }
        Some(delim @ (b'-' | b'/' | b'.')) => {
            sc.push(f)?;
            if sc.peek().is_some_and(|c| c.is_ascii_digit()) {
                sc.push_while(f, |c| c.is_ascii_digit())?;
                if sc.peek() == Some(delim) {
                    sc.push_while(f, |c| c.is_ascii_digit() || c == delim)?;
                    return Ok(Ft::Date);
                }
                Ok(if delim == b'.' { Ft::Number } else { Ft::Date })
            } else {
                sc.push_while(f, |c| c.is_ascii_alphanumeric() || c == delim)?;
                Ok(Ft::Date)
            }
        }
        _ => Ok(Ft::Number),
    }
}

/// pg_itm_in: what the decoders accumulate.
#[derive(Default, Debug)]
struct ItmIn {
    usec: i64,
    mday: i32,
    mon: i32,
    year: i32,
}

/// strtol's reading of `s`: an optional sign and digits; the value (None
/// on overflow) and the rest. Without digits the rest is all of `s`.
fn strtol(s: &str) -> (Option<i64>, &str) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let negative = b.get(i) == Some(&b'-');
    if matches!(b.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let start = i;
    let mut v: Option<i64> = Some(0);
    while i < b.len() && b[i].is_ascii_digit() {
        let d = i64::from(b[i] - b'0');
        v = v.and_then(|v| v.checked_mul(10)).and_then(|v| if negative { v.checked_sub(d) } else { v.checked_add(d) });
        i += 1;
    }
    if i == start {
        return (Some(0), s);
    }
    (v, &s[i..])
}

/// strtoint: strtol within int4.
fn strtoint(s: &str) -> (Option<i64>, &str) {
    let (v, rest) = strtol(s);
    (v.filter(|v| i32::try_from(*v).is_ok()), rest)
}

/// ParseFraction: `.` and digits to the end.
fn parse_fraction(s: &str) -> Res<f64> {
    let digits = s.strip_prefix('.').ok_or(Dterr::BadFormat)?;
    if digits.is_empty() {
        return Ok(0.0);
    }
    if !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(Dterr::BadFormat);
    }
    format!("0.{digits}").parse::<f64>().map_err(|_| Dterr::BadFormat)
}

/// A unit a number is read in (DecodeInterval's `type`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Unit {
    /// No unit yet: the typmod's range decides (IGNORE_DTF).
    Unset,
    Micro,
    Milli,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
    Decade,
    Century,
    Millennium,
    /// A unit no number may take (quarter, timezone, after `ago`).
    Invalid,
}

/// DTK_M bits of the fields seen, to refuse a field given twice.
mod seen {
    pub const YEAR: u32 = 1 << 0;
    pub const MONTH: u32 = 1 << 1;
    pub const DAY: u32 = 1 << 2;
    pub const HOUR: u32 = 1 << 3;
    pub const MINUTE: u32 = 1 << 4;
    pub const SECOND: u32 = 1 << 5;
    pub const MILLI: u32 = 1 << 6;
    pub const MICRO: u32 = 1 << 7;
    pub const WEEK: u32 = 1 << 8;
    pub const DECADE: u32 = 1 << 9;
    pub const CENTURY: u32 = 1 << 10;
    pub const MILLENNIUM: u32 = 1 << 11;
    pub const ALL_SECS: u32 = SECOND | MILLI | MICRO;
    pub const TIME: u32 = HOUR | MINUTE | ALL_SECS;
}

enum Word {
    Units(Unit),
    Ago,
    Unknown,
}

/// DecodeUnits over deltatktbl (compared on 10 characters).
fn decode_units(word: &str) -> Word {
    const TABLE: &[(&str, Unit)] = &[
        ("c", Unit::Century),
        ("cent", Unit::Century),
        ("centuries", Unit::Century),
        ("century", Unit::Century),
        ("d", Unit::Day),
        ("day", Unit::Day),
        ("days", Unit::Day),
        ("dec", Unit::Decade),
        ("decade", Unit::Decade),
        ("decades", Unit::Decade),
        ("decs", Unit::Decade),
        ("h", Unit::Hour),
        ("hour", Unit::Hour),
        ("hours", Unit::Hour),
        ("hr", Unit::Hour),
        ("hrs", Unit::Hour),
        ("m", Unit::Minute),
        ("microsecon", Unit::Micro),
        ("mil", Unit::Millennium),
        ("millennia", Unit::Millennium),
        ("millennium", Unit::Millennium),
        ("millisecon", Unit::Milli),
        ("mils", Unit::Millennium),
        ("min", Unit::Minute),
        ("mins", Unit::Minute),
        ("minute", Unit::Minute),
        ("minutes", Unit::Minute),
        ("mon", Unit::Month),
        ("mons", Unit::Month),
        ("month", Unit::Month),
        ("months", Unit::Month),
        ("ms", Unit::Milli),
        ("msec", Unit::Milli),
        ("msecond", Unit::Milli),
        ("mseconds", Unit::Milli),
        ("msecs", Unit::Milli),
        ("qtr", Unit::Invalid),
        ("quarter", Unit::Invalid),
        ("s", Unit::Second),
        ("sec", Unit::Second),
        ("second", Unit::Second),
        ("seconds", Unit::Second),
        ("secs", Unit::Second),
        ("timezone", Unit::Invalid),
        ("timezone_h", Unit::Invalid),
        ("timezone_m", Unit::Invalid),
        ("us", Unit::Micro),
        ("usec", Unit::Micro),
        ("usecond", Unit::Micro),
        ("useconds", Unit::Micro),
        ("usecs", Unit::Micro),
        ("w", Unit::Week),
        ("week", Unit::Week),
        ("weeks", Unit::Week),
        ("y", Unit::Year),
        ("year", Unit::Year),
        ("years", Unit::Year),
        ("yr", Unit::Year),
        ("yrs", Unit::Year),
    ];
    if token_eq(word, "ago") {
        return Word::Ago;
    }
    TABLE.iter().find(|(t, _)| token_eq(word, t)).map_or(Word::Unknown, |(_, u)| Word::Units(*u))
}

/// DecodeInterval: the fields read right to left, a unit naming the
/// number before it. In IntervalStyle sql_standard a leading `-` with no
/// other sign in the text applies to every field (`-1 2:03:04`).
fn decode_interval(fields: &[(String, Ft)], range: u16, sql_standard: bool) -> Res<ItmIn> {
    let force_negative = sql_standard
        && fields.first().is_some_and(|(f, _)| f.starts_with('-'))
        && !fields[1..].iter().any(|(f, _)| f.starts_with(['-', '+']));
    let negated = |usec: i64| if force_negative && usec > 0 { -usec } else { usec };
    let mut itm = ItmIn::default();
    let mut fmask = 0u32;
    let mut unit = Unit::Unset;
    let mut is_before = false;
    for (field, ft) in fields.iter().rev() {
        let tmask = match ft {
            Ft::Time => {
                itm.usec = negated(time_for_interval(field, range)?);
                unit = Unit::Day;
                seen::TIME
            }
            Ft::Tz if field[1..].contains(':') && time_for_interval(&field[1..], range).is_ok() => {
                let usec = time_for_interval(&field[1..], range)?;
                itm.usec = negated(if field.starts_with('-') {
                    usec.checked_neg().ok_or(Dterr::FieldOverflow)?
                } else {
                    usec
                });
                unit = Unit::Day;
                seen::TIME
            }
            Ft::Tz | Ft::Date | Ft::Number => {
                if unit == Unit::Unset {
                    unit = range_unit(range);
                }
                number(field, &mut unit, force_negative, &mut itm)?
            }
            Ft::String | Ft::Special => match decode_units(field) {
                Word::Units(u) => {
                    unit = u;
                    0
                }
                Word::Ago => {
                    is_before = true;
                    unit = Unit::Invalid;
                    0
                }
                Word::Unknown => return Err(Dterr::BadFormat),
            },
        };
        if tmask & fmask != 0 {
            return Err(Dterr::BadFormat);
        }
        fmask |= tmask;
    }
    if fmask == 0 {
        return Err(Dterr::BadFormat);
    }
    if is_before {
        let neg32 = |v: i32| v.checked_neg().ok_or(Dterr::FieldOverflow);
        itm = ItmIn {
            usec: itm.usec.checked_neg().ok_or(Dterr::FieldOverflow)?,
            mday: neg32(itm.mday)?,
            mon: neg32(itm.mon)?,
            year: neg32(itm.year)?,
        };
    }
    Ok(itm)
}

/// The unit of the rightmost bare number, by the typmod's fields.
fn range_unit(range: u16) -> Unit {
    match range {
        r if r == YEAR => Unit::Year,
        r if r == MONTH || r == YEAR | MONTH => Unit::Month,
        r if r == DAY => Unit::Day,
        r if r == HOUR || r == DAY | HOUR => Unit::Hour,
        r if r == MINUTE || r == HOUR | MINUTE || r == DAY | HOUR | MINUTE => Unit::Minute,
        _ => Unit::Second,
    }
}

/// A number field (`5`, `-1.5`, `1-2` years-months) in `unit`; its DTK_M bits.
fn number(field: &str, unit: &mut Unit, force_negative: bool, itm: &mut ItmIn) -> Res<u32> {
    let (val, rest) = strtol(field);
    let mut val = val.ok_or(Dterr::FieldOverflow)?;
    let negative = field.starts_with('-');
    let mut fval = 0.0;
    if let Some(after) = rest.strip_prefix('-') {
        // SQL-standard years-months.
        let (val2, rest2) = strtoint(after);
        let val2 = val2.filter(|v| (0..12).contains(v)).ok_or(Dterr::FieldOverflow)?;
        if !rest2.is_empty() {
            return Err(Dterr::BadFormat);
        }
        *unit = Unit::Month;
        let val2 = if negative { -val2 } else { val2 };
        val = val.checked_mul(12).and_then(|v| v.checked_add(val2)).ok_or(Dterr::FieldOverflow)?;
    } else if rest.starts_with('.') {
        fval = parse_fraction(rest)?;
        if negative {
            fval = -fval;
        }
    } else if !rest.is_empty() {
        return Err(Dterr::BadFormat);
    }
    if force_negative {
        if val > 0 {
            val = -val;
        }
        if fval > 0.0 {
            fval = -fval;
        }
    }
    let ovf = |ok: bool| if ok { Ok(()) } else { Err(Dterr::FieldOverflow) };
    Ok(match *unit {
        Unit::Micro => {
            ovf(micros(val, fval, 1, itm))?;
            seen::MICRO
        }
        Unit::Milli => {
            ovf(micros(val, fval, 1_000, itm))?;
            seen::MILLI
        }
        Unit::Second => {
            ovf(micros(val, fval, 1_000_000, itm))?;
            if fval == 0.0 { seen::SECOND } else { seen::ALL_SECS }
        }
        Unit::Minute => {
            ovf(micros(val, fval, 60_000_000, itm))?;
            seen::MINUTE
        }
        Unit::Hour => {
            ovf(micros(val, fval, 3_600_000_000, itm))?;
            *unit = Unit::Day;
            seen::HOUR
        }
        Unit::Day => {
            ovf(days(val, 1, itm) && fract_micros(fval, 86_400_000_000, itm))?;
            seen::DAY
        }
        Unit::Week => {
            ovf(days(val, 7, itm) && fract_days(fval, 7, itm))?;
            seen::WEEK
        }
        Unit::Month => {
            ovf(months(val, itm) && fract_days(fval, 30, itm))?;
            seen::MONTH
        }
        Unit::Year => {
            ovf(years(val, 1, itm) && fract_years(fval, 1, itm))?;
            seen::YEAR
        }
        Unit::Decade => {
            ovf(years(val, 10, itm) && fract_years(fval, 10, itm))?;
            seen::DECADE
        }
        Unit::Century => {
            ovf(years(val, 100, itm) && fract_years(fval, 100, itm))?;
            seen::CENTURY
        }
        Unit::Millennium => {
            ovf(years(val, 1000, itm) && fract_years(fval, 1000, itm))?;
            seen::MILLENNIUM
        }
        Unit::Unset | Unit::Invalid => return Err(Dterr::BadFormat),
    })
}

/// DecodeTimeCommon + DecodeTimeForInterval: `h:m[:s[.f]]` or `m:s.f`
/// (and `m:s` in a MINUTE TO SECOND typmod) as microseconds.
fn time_for_interval(s: &str, range: u16) -> Res<i64> {
    let (hour, rest) = strtol(s);
    let mut hour = hour.ok_or(Dterr::FieldOverflow)?;
    let rest = rest.strip_prefix(':').ok_or(Dterr::BadFormat)?;
    let (min, rest) = strtoint(rest);
    let mut min = min.ok_or(Dterr::FieldOverflow)?;
    let mut sec = 0;
    let mut fsec = 0.0;
    let shift = |hour: &mut i64, min: &mut i64, sec: &mut i64| -> Res<()> {
        if i32::try_from(*hour).is_err() {
            return Err(Dterr::FieldOverflow);
        }
        *sec = *min;
        *min = *hour;
        *hour = 0;
        Ok(())
    };
    if rest.is_empty() {
        if range == MINUTE | SECOND {
            shift(&mut hour, &mut min, &mut sec)?;
        }
    } else if rest.starts_with('.') {
        fsec = (parse_fraction(rest)? * 1e6).round_ties_even();
        shift(&mut hour, &mut min, &mut sec)?;
    } else if let Some(rest) = rest.strip_prefix(':') {
        let (s, rest) = strtoint(rest);
        sec = s.ok_or(Dterr::FieldOverflow)?;
        if rest.starts_with('.') {
            fsec = (parse_fraction(rest)? * 1e6).round_ties_even();
        } else if !rest.is_empty() {
            return Err(Dterr::BadFormat);
        }
    } else {
        return Err(Dterr::BadFormat);
    }
    if hour < 0 || !(0..=59).contains(&min) || !(0..=60).contains(&sec) || !(0.0..=1e6).contains(&fsec) {
        return Err(Dterr::FieldOverflow);
    }
    #[allow(clippy::cast_possible_truncation)]
    let mut usec = fsec as i64;
    let ok = multiply_add(hour, 3_600_000_000, &mut usec)
        && multiply_add(min, 60_000_000, &mut usec)
        && multiply_add(sec, 1_000_000, &mut usec);
    if ok { Ok(usec) } else { Err(Dterr::FieldOverflow) }
}

fn multiply_add(val: i64, multiplier: i64, sum: &mut i64) -> bool {
    match val.checked_mul(multiplier).and_then(|p| sum.checked_add(p)) {
        Some(v) => {
            *sum = v;
            true
        }
        None => false,
    }
}

/// AdjustFractMicroseconds: a fraction times `scale` microseconds, a
/// half or less dropped.
fn fract_micros(frac: f64, scale: i64, itm: &mut ItmIn) -> bool {
    if frac == 0.0 {
        return true;
    }
    #[allow(clippy::cast_precision_loss)]
    let x = frac * scale as f64;
    #[allow(clippy::cast_possible_truncation)]
    let mut usec = x as i64;
    #[allow(clippy::cast_precision_loss)]
    let rest = x - usec as f64;
    if rest > 0.5 {
        usec += 1;
    } else if rest < -0.5 {
        usec -= 1;
    }
    itm.usec.checked_add(usec).map(|v| itm.usec = v).is_some()
}

/// AdjustFractDays: whole days, the rest as microseconds.
fn fract_days(frac: f64, scale: i32, itm: &mut ItmIn) -> bool {
    if frac == 0.0 {
        return true;
    }
    let x = frac * f64::from(scale);
    #[allow(clippy::cast_possible_truncation)]
    let extra = x as i32;
    let Some(mday) = itm.mday.checked_add(extra) else { return false };
    itm.mday = mday;
    fract_micros(x - f64::from(extra), 86_400_000_000, itm)
}

/// AdjustFractYears: months, rounded half to even.
fn fract_years(frac: f64, scale: i32, itm: &mut ItmIn) -> bool {
    #[allow(clippy::cast_possible_truncation)]
    let extra = (frac * f64::from(scale) * 12.0).round_ties_even() as i32;
    itm.mon.checked_add(extra).map(|v| itm.mon = v).is_some()
}

fn micros(val: i64, fval: f64, scale: i64, itm: &mut ItmIn) -> bool {
    multiply_add(val, scale, &mut itm.usec) && fract_micros(fval, scale, itm)
}

fn days(val: i64, scale: i32, itm: &mut ItmIn) -> bool {
    let Ok(v) = i32::try_from(val) else { return false };
    match v.checked_mul(scale).and_then(|d| itm.mday.checked_add(d)) {
        Some(d) => {
            itm.mday = d;
            true
        }
        None => false,
    }
}

fn months(val: i64, itm: &mut ItmIn) -> bool {
    let Ok(v) = i32::try_from(val) else { return false };
    itm.mon.checked_add(v).map(|m| itm.mon = m).is_some()
}

fn years(val: i64, scale: i32, itm: &mut ItmIn) -> bool {
    let Ok(v) = i32::try_from(val) else { return false };
    match v.checked_mul(scale).and_then(|y| itm.year.checked_add(y)) {
        Some(y) => {
            itm.year = y;
            true
        }
        None => false,
    }
}

/// ParseISO8601Number: what strtod reads at the start of `s`, split into
/// its integer part (toward zero) and fraction; the rest of `s`.
fn iso_number(s: &str) -> Res<(i64, f64, &str)> {
    let b = s.as_bytes();
    if !matches!(b.first(), Some(c) if c.is_ascii_digit() || *c == b'-' || *c == b'.') {
        return Err(Dterr::BadFormat);
    }
    let body = s.strip_prefix('-').unwrap_or(s);
    let lower = body.get(..3).map(str::to_ascii_lowercase);
    if matches!(lower.as_deref(), Some("inf" | "nan")) {
        // strtod's infinity or NaN: out of range either way.
        return Err(Dterr::FieldOverflow);
    }
    if (body.starts_with("0x") || body.starts_with("0X")) && body.as_bytes().get(2).is_some_and(u8::is_ascii_hexdigit) {
        return Err(Dterr::Unsupported);
    }
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let start = usize::from(b[0] == b'-');
    let mut i = digits(start);
    let mut mantissa = i > start;
    if b.get(i) == Some(&b'.') {
        let j = digits(i + 1);
        mantissa |= j > i + 1;
        i = j;
    }
    if !mantissa {
        return Err(Dterr::BadFormat);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let k = if matches!(b.get(i + 1), Some(b'+' | b'-')) { i + 2 } else { i + 1 };
        let j = digits(k);
        if j > k {
            i = j;
        }
    }
    let text = &s[..i];
    let val: f64 = text.parse().map_err(|_| Dterr::BadFormat)?;
    // strtod's ERANGE: overflow to infinity, or underflow of nonzero digits.
    let nonzero = text.bytes().take_while(|c| !matches!(c, b'e' | b'E')).any(|c| matches!(c, b'1'..=b'9'));
    if val.is_infinite() || (nonzero && (val == 0.0 || val.abs() < f64::MIN_POSITIVE)) {
        return Err(Dterr::BadFormat);
    }
    if !(-1.0e15..=1.0e15).contains(&val) {
        return Err(Dterr::FieldOverflow);
    }
    #[allow(clippy::cast_possible_truncation)]
    let ipart = val.trunc() as i64;
    #[allow(clippy::cast_precision_loss)]
    let fpart = val - ipart as f64;
    Ok((ipart, fpart, &s[i..]))
}

/// ISO8601IntegerWidth: the integer digits of a field, sign skipped.
fn iso_width(field: &str) -> usize {
    field.strip_prefix('-').unwrap_or(field).bytes().take_while(u8::is_ascii_digit).count()
}

/// DecodeISO8601Interval: the format with designators (`P1Y2M3DT4H5M6S`)
/// and the alternative format (`P0001-02-03T04:05:06`, `P00010203T040506`).
fn decode_iso8601(text: &str) -> Res<ItmIn> {
    let mut itm = ItmIn::default();
    if text.len() < 2 || !text.starts_with('P') {
        return Err(Dterr::BadFormat);
    }
    let mut s = &text[1..];
    let mut datepart = true;
    let mut havefield = false;
    let ovf = |ok: bool| if ok { Ok(()) } else { Err(Dterr::FieldOverflow) };
    while !s.is_empty() {
        if let Some(rest) = s.strip_prefix('T') {
            datepart = false;
            havefield = false;
            s = rest;
            continue;
        }
        let fieldstart = s;
        let (val, fval, rest) = iso_number(s)?;
        let unit = rest.bytes().next();
        s = rest.get(1..).unwrap_or("");
        if datepart {
            match unit {
                Some(b'Y') => ovf(years(val, 1, &mut itm) && fract_years(fval, 1, &mut itm))?,
                Some(b'M') => ovf(months(val, &mut itm) && fract_days(fval, 30, &mut itm))?,
                Some(b'W') => ovf(days(val, 7, &mut itm) && fract_days(fval, 7, &mut itm))?,
                Some(b'D') => ovf(days(val, 1, &mut itm) && fract_micros(fval, 86_400_000_000, &mut itm))?,
                Some(b'T') | None if iso_width(fieldstart) == 8 && !havefield => {
                    ovf(years(val / 10000, 1, &mut itm)
                        && months((val / 100) % 100, &mut itm)
                        && days(val % 100, 1, &mut itm)
                        && fract_micros(fval, 86_400_000_000, &mut itm))?;
                    if unit.is_none() {
                        return Ok(itm);
                    }
                    datepart = false;
                    havefield = false;
                    continue;
                }
                Some(b'T' | b'-') | None => {
                    if havefield {
                        return Err(Dterr::BadFormat);
                    }
                    match iso_alternative_date(val, fval, unit, s, &mut itm)? {
                        None => return Ok(itm),
                        Some(rest) => {
                            s = rest;
                            datepart = false;
                            havefield = false;
                            continue;
                        }
                    }
                }
                _ => return Err(Dterr::BadFormat),
            }
        } else {
            match unit {
                Some(b'H') => ovf(micros(val, fval, 3_600_000_000, &mut itm))?,
                Some(b'M') => ovf(micros(val, fval, 60_000_000, &mut itm))?,
                Some(b'S') => ovf(micros(val, fval, 1_000_000, &mut itm))?,
                None if iso_width(fieldstart) == 6 && !havefield => {
                    ovf(micros(val / 10000, 0.0, 3_600_000_000, &mut itm)
                        && micros((val / 100) % 100, 0.0, 60_000_000, &mut itm)
                        && micros(val % 100, 0.0, 1_000_000, &mut itm)
                        && fract_micros(fval, 1, &mut itm))?;
                    return Ok(itm);
                }
                Some(b':') | None => {
                    if havefield {
                        return Err(Dterr::BadFormat);
                    }
                    iso_alternative_time(val, fval, unit, s, &mut itm)?;
                    return Ok(itm);
                }
                _ => return Err(Dterr::BadFormat),
            }
        }
        havefield = true;
    }
    Ok(itm)
}

/// The extended alternative date `Y[-M[-D]]` after its years; the text
/// after a `T` to go on with, or None at the end.
fn iso_alternative_date<'a>(
    val: i64,
    fval: f64,
    unit: Option<u8>,
    s: &'a str,
    itm: &mut ItmIn,
) -> Res<Option<&'a str>> {
    let ovf = |ok: bool| if ok { Ok(()) } else { Err(Dterr::FieldOverflow) };
    ovf(years(val, 1, itm) && fract_years(fval, 1, itm))?;
    match unit {
        None => return Ok(None),
        Some(b'T') => return Ok(Some(s)),
        _ => {}
    }
    let (val, fval, s) = iso_number(s)?;
    ovf(months(val, itm) && fract_days(fval, 30, itm))?;
    if s.is_empty() {
        return Ok(None);
    }
    if let Some(rest) = s.strip_prefix('T') {
        return Ok(Some(rest));
    }
    let s = s.strip_prefix('-').ok_or(Dterr::BadFormat)?;
    let (val, fval, s) = iso_number(s)?;
    ovf(days(val, 1, itm) && fract_micros(fval, 86_400_000_000, itm))?;
    if s.is_empty() {
        return Ok(None);
    }
    s.strip_prefix('T').map(Some).ok_or(Dterr::BadFormat)
}

/// The extended alternative time `H[:M[:S]]` after its hours, to the end.
fn iso_alternative_time(val: i64, fval: f64, unit: Option<u8>, s: &str, itm: &mut ItmIn) -> Res<()> {
    let ovf = |ok: bool| if ok { Ok(()) } else { Err(Dterr::FieldOverflow) };
    ovf(micros(val, fval, 3_600_000_000, itm))?;
    if unit.is_none() {
        return Ok(());
    }
    let (val, fval, s) = iso_number(s)?;
    ovf(micros(val, fval, 60_000_000, itm))?;
    if s.is_empty() {
        return Ok(());
    }
    let s = s.strip_prefix(':').ok_or(Dterr::BadFormat)?;
    let (val, fval, s) = iso_number(s)?;
    ovf(micros(val, fval, 1_000_000, itm))?;
    if s.is_empty() { Ok(()) } else { Err(Dterr::BadFormat) }
}
