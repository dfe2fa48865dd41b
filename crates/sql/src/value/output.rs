//! Values as text: PostgreSQL's output functions under the session's
//! settings (DateStyle and zone through tz.rs, extra_float_digits,
//! bytea_output), and the float digit rules they share with the casts.

use std::fmt::Write as _;

use pgtier_engine::Value;

use super::is_infinite_datetime;

/// PostgreSQL's text output of `v` in the session's settings (tz.rs).
pub fn write_text(v: &Value, out: &mut String) {
    match v {
        Value::Float4(x) => write_float(f64::from(*x), true, out),
        Value::Float8(x) => write_float(*x, false, out),
        Value::Bytea(b) if crate::tz::bytea_escape() => write_bytea_escape(b, out),
        Value::Array(items) => crate::value::array::write_array(items, out),
        Value::BoundedArray(b) => crate::value::array::write_bounded(&b.lower, &b.items, out),
        // The session's DateStyle and zone (tz.rs); the engine's form is
        // ISO in UTC, and the infinities print as the engine prints them.
        Value::Date(_) | Value::Timestamp(_) | Value::TimestampTz(_)
            if !is_infinite_datetime(v) && crate::tz::write_datetime(v, out) => {}
        // IntervalStyle postgres is the engine's own form.
        Value::Interval(i) if crate::tz::interval_style() != crate::tz::IntervalStyle::Postgres => {
            write_interval_styled(*i, crate::tz::interval_style(), out)
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// PostgreSQL's (Ryu's) shortest text: the fewest digits that read back
/// as the value, correctly rounded at that length (an exact tie goes to
/// the even digit: 47732.5625 is 47732.562), and for float4 never a text
/// that lies exactly halfway between two floats (it reads back as the even
/// one; PostgreSQL prints 1022141568 as 1.02214157e+09). Rust's shortest
/// form differs only there, so it gives the length to start from.
pub(super) fn float_shortest(x: f64, single: bool) -> String {
    #[allow(clippy::cast_possible_truncation)]
    let y = x as f32;
    let rust = if single { format!("{y:e}") } else { format!("{x:e}") };
    if !x.is_finite() || x == 0.0 {
        return rust;
    }
    let digits = rust.split('e').next().unwrap_or("").bytes().filter(u8::is_ascii_digit).count().max(1);
    let same = |t: &str| if single { t.parse::<f32>() == Ok(y) } else { t.parse::<f64>() == Ok(x) };
    let reads_back = |t: &String| same(t) && !halfway(t, &same);
    // Rust's fixed-precision form rounds exact ties up: round the exact
    // digits here instead.
    let exact = if single { format!("{y:.120e}") } else { format!("{x:.120e}") };
    // Of the texts with the fewest digits that read back, the nearest to
    // the exact value (Ryu, PostgreSQL's float8out). The nearest k-digit
    // text may not read back while the one on the other side does
    // (6.3108872417680944e-30 is x, and so is 6.310887241768095e-30, which
    // is shorter): try both neighbours at each length.
    for k in digits..=17 {
        let nearest = round_digits(&exact, k, None);
        if reads_back(&nearest) {
            return nearest;
        }
        let other = [round_digits(&exact, k, Some(false)), round_digits(&exact, k, Some(true))]
            .into_iter()
            .find(|t| *t != nearest);
        if let Some(other) = other.filter(reads_back) {
            return other;
        }
    }
    rust
}

/// `exact` ("d.ddd...e<exp>") rounded to `k` significant digits, in the
/// same form: to the nearest, an exact tie to the even digit (`force`
/// None), or down / up in magnitude (`Some(false)` / `Some(true)`).
fn round_digits(exact: &str, k: usize, force: Option<bool>) -> String {
    let (mantissa, exp) = exact.split_once('e').unwrap_or((exact, "0"));
    let mut exp: i32 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).map(|b| b - b'0').collect();
    let k = k.clamp(1, digits.len().max(1));
    let mut head: Vec<u8> = digits.iter().take(k).copied().collect();
    let rest = digits.get(k..).unwrap_or(&[]);
    let up = match (force, rest.first()) {
        (Some(up), _) => up && rest.iter().any(|&d| d != 0),
        (None, Some(&d)) if d > 5 => true,
        (None, Some(&5)) => rest[1..].iter().any(|&d| d != 0) || head.last().is_some_and(|d| d % 2 == 1),
        (None, _) => false,
    };
    if up {
        let mut i = head.len();
        loop {
            if i == 0 {
                // 9.99 rounded up: 1.00 and the next power of ten.
                head.insert(0, 1);
                head.pop();
                exp += 1;
                break;
            }
            i -= 1;
            if head[i] == 9 {
                head[i] = 0;
            } else {
                head[i] += 1;
                break;
            }
        }
    }
    let mut out = String::with_capacity(k + 8);
    if mantissa.starts_with('-') {
        out.push('-');
    }
    for (i, d) in head.iter().enumerate() {
        if i == 1 {
            out.push('.');
        }
        out.push(char::from(b'0' + d));
    }
    let _ = write!(out, "e{exp}");
    out
}

/// `t` (a "d.ddde<exp>" text that reads back as the value) lies exactly
/// halfway to a neighbour: nudged by a unit in its 40th digit, up or down
/// in magnitude, it reads back as another value. (A text of at most 17
/// digits that is not on the midpoint is far further than that from it.)
pub(super) fn halfway(t: &str, same: &dyn Fn(&str) -> bool) -> bool {
    let (mantissa, exp) = t.split_once('e').unwrap_or((t, "0"));
    let mantissa = if mantissa.contains('.') { mantissa.to_owned() } else { format!("{mantissa}.") };
    let up = format!("{mantissa}{}1e{exp}", "0".repeat(40));
    // Down: borrow from the last digit, then nines.
    let mut down: Vec<u8> = mantissa.into_bytes();
    let mut i = down.len();
    while i > 0 {
        i -= 1;
        match down[i] {
            b'0' => down[i] = b'9',
            b'1'..=b'9' => {
                down[i] -= 1;
                break;
            }
            _ => {}
        }
    }
    let down = format!("{}{}e{exp}", String::from_utf8_lossy(&down), "9".repeat(40));
    !same(&up) || !same(&down)
}

pub fn to_text(v: &Value) -> String {
    let mut s = String::new();
    write_text(v, &mut s);
    s
}

/// byteaout's escape format: printable ASCII as itself, a backslash
/// doubled, every other byte as a backslash and three octal digits.
fn write_bytea_escape(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
}

/// float8out/float4out with extra_float_digits <= 0: `%.*g` with the
/// type's digits (15 or 6) plus extra_float_digits, at least 1.
fn write_float_rounded(x: f64, single: bool, extra: i32, out: &mut String) {
    let precision = usize::try_from((if single { 6 } else { 15 } + extra).max(1)).unwrap_or(1);
    let sci = format!("{x:.*e}", precision - 1);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_owned() } else { s.to_owned() }
    };
    if exp < -4 || exp >= i32::try_from(precision).unwrap_or(i32::MAX) {
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "{}e{sign}{:02}", strip(mantissa), exp.abs());
    } else {
        let decimals = usize::try_from(i32::try_from(precision).unwrap_or(0) - 1 - exp).unwrap_or(0);
        out.push_str(&strip(&format!("{x:.decimals$}")));
    }
}

/// Shortest round-trip digits, in the layout of PostgreSQL's float output:
/// scientific notation when the decimal exponent is < -4 or >= the type's
/// digit count (15 for float8, 6 for float4). With extra_float_digits <= 0,
/// PostgreSQL's rounded form instead.
pub(super) fn write_float(x: f64, single: bool, out: &mut String) {
    if x.is_nan() {
        out.push_str("NaN");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if x == 0.0 {
        out.push_str(if x.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    let extra = crate::tz::float_digits();
    if extra <= 0 {
        write_float_rounded(x, single, extra, out);
        return;
    }
    let sci = float_shortest(x, single);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let limit = if single { 6 } else { 15 };
    if exp < -4 || exp >= limit {
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "{mantissa}e{sign}{:02}", exp.abs());
        return;
    }
    // The same digits without the exponent.
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    if negative {
        out.push('-');
    }
    if exp < 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', exp.unsigned_abs() as usize - 1));
        out.push_str(digits);
    } else {
        let point = exp as usize + 1;
        if digits.len() <= point {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', point - digits.len()));
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
}

/// interval_out in IntervalStyle postgres_verbose (`@ 1 year 2 mons 3 days
/// ago`), iso_8601 (`P1Y2M3DT4H5M6.5S`) or sql_standard (`1-2`, `-1 2:03:04`,
/// `+1-2 -3 +4:05:06`), as EncodeInterval writes them,
/// from interval2itm's fields (each carries the sign of its part).
fn write_interval_styled(v: pgtier_engine::Interval, style: crate::tz::IntervalStyle, out: &mut String) {
    let (year, mon, mday) = (i64::from(v.months / 12), i64::from(v.months % 12), i64::from(v.days));
    let hour = v.micros / 3_600_000_000;
    let rest = v.micros - hour * 3_600_000_000;
    let min = rest / 60_000_000;
    let rest = rest - min * 60_000_000;
    let (sec, usec) = (rest / 1_000_000, rest % 1_000_000);
    // AppendSeconds without zero fill: the whole seconds, then the fraction
    // without trailing zeros; signs stripped.
    let seconds = |out: &mut String| {
        let _ = write!(out, "{}", sec.unsigned_abs());
        if usec != 0 {
            let frac = format!("{:06}", usec.unsigned_abs());
            let _ = write!(out, ".{}", frac.trim_end_matches('0'));
        }
    };
    match style {
        crate::tz::IntervalStyle::SqlStandard => write_sql_standard([year, mon, mday, hour, min, sec, usec], out),
        crate::tz::IntervalStyle::Iso8601 => {
            if year == 0 && mon == 0 && mday == 0 && hour == 0 && min == 0 && sec == 0 && usec == 0 {
                out.push_str("PT0S");
                return;
            }
            out.push('P');
            let part = |out: &mut String, value: i64, unit: char| {
                if value != 0 {
                    let _ = write!(out, "{value}{unit}");
                }
            };
            part(out, year, 'Y');
            part(out, mon, 'M');
            part(out, mday, 'D');
            if hour != 0 || min != 0 || sec != 0 || usec != 0 {
                out.push('T');
            }
            part(out, hour, 'H');
            part(out, min, 'M');
            if sec != 0 || usec != 0 {
                if sec < 0 || usec < 0 {
                    out.push('-');
                }
                seconds(out);
                out.push('S');
            }
        }
        _ => {
            out.push('@');
            let mut is_zero = true;
            let mut is_before = false;
            for (value, unit) in [(year, "year"), (mon, "mon"), (mday, "day"), (hour, "hour"), (min, "min")] {
                if value == 0 {
                    continue;
                }
                // The first field's sign decides "ago"; later fields are
                // printed against it.
                let value = if is_zero {
                    is_before = value < 0;
                    value.abs()
                } else if is_before {
                    -value
                } else {
                    value
                };
                let _ = write!(out, " {value} {unit}{}", if value == 1 { "" } else { "s" });
                is_zero = false;
            }
            if sec != 0 || usec != 0 {
                out.push(' ');
                if sec < 0 || (sec == 0 && usec < 0) {
                    if is_zero {
                        is_before = true;
                    } else if !is_before {
                        out.push('-');
                    }
                } else if is_before {
                    out.push('-');
                }
                seconds(out);
                let _ = write!(out, " sec{}", if sec.abs() != 1 || usec != 0 { "s" } else { "" });
                is_zero = false;
            }
            if is_zero {
                out.push_str(" 0");
            }
            if is_before {
                out.push_str(" ago");
            }
        }
    }
}

/// EncodeInterval's sql_standard case over interval2itm's fields (year,
/// mon, mday, hour, min, sec, usec): one leading sign when every field
/// has it and the value is year-month or day-time only; else each part
/// signed (`+1-2 -3 +4:05:06`).
fn write_sql_standard(f: [i64; 7], out: &mut String) {
    let has_negative = f.iter().any(|v| *v < 0);
    let has_positive = f.iter().any(|v| *v > 0);
    let has_year_month = f[0] != 0 || f[1] != 0;
    let has_day_time = f[2..].iter().any(|v| *v != 0);
    let standard = !(has_negative && has_positive || has_year_month && has_day_time);
    let [year, mon, mday, hour, min, sec, usec] = if has_negative && standard {
        out.push('-');
        f.map(|v| -v)
    } else {
        f
    };
    // AppendSeconds with zero fill: two digits, the fraction without
    // trailing zeros; signs stripped.
    let seconds = |out: &mut String| {
        let _ = write!(out, "{:02}", sec.unsigned_abs());
        if usec != 0 {
            let frac = format!("{:06}", usec.unsigned_abs());
            let _ = write!(out, ".{}", frac.trim_end_matches('0'));
        }
    };
    if !has_negative && !has_positive {
        out.push('0');
    } else if !standard {
        let sign = |neg: bool| if neg { '-' } else { '+' };
        let _ = write!(
            out,
            "{}{}-{} {}{} {}{}:{:02}:",
            sign(year < 0 || mon < 0),
            year.unsigned_abs(),
            mon.unsigned_abs(),
            sign(mday < 0),
            mday.unsigned_abs(),
            sign(hour < 0 || min < 0 || sec < 0 || usec < 0),
            hour.unsigned_abs(),
            min.unsigned_abs()
        );
        seconds(out);
    } else if has_year_month {
        let _ = write!(out, "{year}-{mon}");
    } else if mday != 0 {
        let _ = write!(out, "{mday} {hour}:{min:02}:");
        seconds(out);
    } else {
        let _ = write!(out, "{hour}:{min:02}:");
        seconds(out);
    }
}
