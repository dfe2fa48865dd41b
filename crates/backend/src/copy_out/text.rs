//! PostgreSQL's text output for the binary forms that need calendar or float
//! arithmetic: dates and timestamps (DateStyle ISO; timestamptz in UTC) and
//! float4/float8 (shortest round-trip digits, `extra_float_digits` ≥ 1, the
//! default since PostgreSQL 12). Used by `Value`'s `Display` and by tests that
//! compare against PostgreSQL.

use std::fmt::{self, Write};

/// Julian day of 2000-01-01, PostgreSQL's date and timestamp epoch.
const POSTGRES_EPOCH_JDATE: i64 = 2_451_545;
const USECS_PER_DAY: i64 = 86_400_000_000;

/// PostgreSQL's `j2date`: Julian day to (year, month, day), year ≤ 0 being BC.
fn julian_to_date(julian_day: i64) -> (i64, u32, u32) {
    let mut julian = julian_day + 32_044;
    let mut quad = julian.div_euclid(146_097);
    let extra = (julian - quad * 146_097) * 4 + 3;
    julian += 60 + quad * 3 + extra / 146_097;
    quad = julian.div_euclid(1461);
    julian -= quad * 1461;
    let mut year = julian * 4 / 1461;
    let day_of_year = if year != 0 { (julian + 305) % 365 } else { (julian + 306) % 366 };
    julian = day_of_year + 123;
    year += quad * 4;
    let quad = julian * 2141 / 65_536;
    let day = julian - 7834 * quad / 256;
    let month = (quad + 10) % 12 + 1;
    (year - 4800, month as u32, day as u32)
}

/// Writes `YYYY-MM-DD` (at least four year digits), returning whether the year is BC.
fn write_ymd(f: &mut dyn Write, julian_day: i64) -> Result<bool, fmt::Error> {
    let (year, month, day) = julian_to_date(julian_day);
    let bc = year <= 0;
    let shown_year = if bc { 1 - year } else { year };
    write!(f, "{shown_year:04}-{month:02}-{day:02}")?;
    Ok(bc)
}

/// date_out (ISO): `2024-02-29`, `0044-03-15 BC`, `infinity`.
pub fn write_date(f: &mut dyn Write, days: i32) -> fmt::Result {
    match days {
        i32::MAX => f.write_str("infinity"),
        i32::MIN => f.write_str("-infinity"),
        _ => {
            if write_ymd(f, i64::from(days) + POSTGRES_EPOCH_JDATE)? {
                f.write_str(" BC")?;
            }
            Ok(())
        }
    }
}

/// timestamp_out / timestamptz_out (ISO, TimeZone UTC):
/// `2024-02-29 13:45:01.5`, with `+00` for timestamptz, ` BC` last.
pub fn write_timestamp(f: &mut dyn Write, micros: i64, with_zone: bool) -> fmt::Result {
    match micros {
        i64::MAX => return f.write_str("infinity"),
        i64::MIN => return f.write_str("-infinity"),
        _ => {}
    }
    let days = micros.div_euclid(USECS_PER_DAY);
    let time = micros.rem_euclid(USECS_PER_DAY);
    let bc = write_ymd(f, days + POSTGRES_EPOCH_JDATE)?;
    f.write_char(' ')?;
    write_time(f, time)?;
    if with_zone {
        f.write_str("+00")?;
    }
    if bc {
        f.write_str(" BC")?;
    }
    Ok(())
}

/// interval_out (IntervalStyle postgres): `1 year 2 mons -3 days +04:05:06.5`.
pub fn write_interval(f: &mut dyn Write, months: i32, days: i32, micros: i64) -> fmt::Result {
    let mut is_zero = true;
    let mut is_before = false;
    for (value, unit) in [(months / 12, "year"), (months % 12, "mon"), (days, "day")] {
        if value != 0 {
            let plus = if is_before && value > 0 { "+" } else { "" };
            write!(f, "{}{plus}{value} {unit}{}", if is_zero { "" } else { " " }, if value == 1 { "" } else { "s" })?;
            is_before = value < 0;
            is_zero = false;
        }
    }
    if is_zero || micros != 0 {
        let sign = if micros < 0 {
            "-"
        } else if is_before {
            "+"
        } else {
            ""
        };
        write!(f, "{}{sign}", if is_zero { "" } else { " " })?;
        // write_time prints any number of hours (an interval's may pass 24).
        write_time(f, i64::try_from(micros.unsigned_abs()).unwrap_or(i64::MAX))?;
    }
    Ok(())
}

/// time_out: `13:45:01.5`, `24:00:00`.
pub fn write_time(f: &mut dyn Write, time: i64) -> fmt::Result {
    let seconds = time / 1_000_000;
    let fraction = time % 1_000_000;
    write!(f, "{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60)?;
    if fraction != 0 {
        let mut digits = [0u8; 6];
        let mut rest = fraction;
        for slot in digits.iter_mut().rev() {
            *slot = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        let used = 6 - digits.iter().rev().take_while(|&&digit| digit == b'0').count();
        f.write_char('.')?;
        for &digit in &digits[..used] {
            f.write_char(char::from(digit))?;
        }
    }
    Ok(())
}

/// float8out: shortest digits that round-trip, in positional form when the
/// decimal exponent is in -4..15, else `d.ddde+XX`.
pub fn write_float8(f: &mut dyn Write, value: f64) -> fmt::Result {
    write_float(f, value)
}

/// float4out: as [`write_float8`] with the positional range -4..6.
pub fn write_float4(f: &mut dyn Write, value: f32) -> fmt::Result {
    write_float(f, value)
}

/// What [`write_float`] needs of f32 and f64.
trait Float: Copy + PartialOrd + fmt::LowerExp + std::str::FromStr {
    const ZERO: Self;
    /// Enough digits to round-trip any value.
    const DIGITS_MAX: usize;
    /// Decimal exponents from -4 up to (not including) this print positionally.
    const POSITIONAL_LIMIT: i32;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn binary(self) -> Binary;
}

impl Float for f64 {
    const ZERO: f64 = 0.0;
    const DIGITS_MAX: usize = 17;
    const POSITIONAL_LIMIT: i32 = 15;
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn is_infinite(self) -> bool {
        f64::is_infinite(self)
    }
    fn binary(self) -> Binary {
        let bits = self.to_bits();
        Binary::new(bits & ((1 << 52) - 1), ((bits >> 52) & 0x7ff) as i32, 52, 1075)
    }
}

impl Float for f32 {
    const ZERO: f32 = 0.0;
    const DIGITS_MAX: usize = 9;
    const POSITIONAL_LIMIT: i32 = 6;
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn is_infinite(self) -> bool {
        f32::is_infinite(self)
    }
    fn binary(self) -> Binary {
        let bits = self.to_bits();
        Binary::new(u64::from(bits & ((1 << 23) - 1)), ((bits >> 23) & 0xff) as i32, 23, 150)
    }
}

fn write_float<T: Float>(f: &mut dyn Write, value: T) -> fmt::Result {
    if value.is_nan() {
        return f.write_str("NaN");
    }
    if value.is_infinite() {
        return f.write_str(if value > T::ZERO { "Infinity" } else { "-Infinity" });
    }
    let binary = value.binary();
    let round_trips = |text: &String| text.parse::<T>().is_ok_and(|parsed| parsed == value);
    let text = (significant_digits(&format!("{value:e}"))..=T::DIGITS_MAX)
        .map(|digits| format!("{value:.*e}", digits - 1))
        .find(|text| round_trips(text) && !binary.is_boundary(text))
        .unwrap_or_else(|| format!("{value:.*e}", T::DIGITS_MAX - 1));
    write_shortest(f, &text, T::POSITIONAL_LIMIT)
}

/// Digits in the mantissa of Rust's shortest `{:e}` form: where the search
/// for PostgreSQL's form starts. Candidates are then formatted exactly at a
/// given length (nearest, ties to even), as Ryu chooses among equally short ones.
fn significant_digits(scientific: &str) -> usize {
    let mantissa = scientific.split_once('e').map_or(scientific, |(mantissa, _)| mantissa);
    mantissa.bytes().filter(u8::is_ascii_digit).count().max(1)
}

/// The two midpoints between a float and its neighbours, each as
/// `odd * 2^exponent`. PostgreSQL builds Ryu without STRICTLY_SHORTEST
/// (`acceptBounds = false`): a decimal exactly on a midpoint is refused even
/// though it parses back to the value, where Rust's shortest form accepts it.
struct Binary {
    upper: (u128, i32),
    lower: (u128, i32),
}

impl Binary {
    fn new(mantissa: u64, biased_exponent: i32, mantissa_bits: u32, bias_and_bits: i32) -> Binary {
        let (significand, exponent) = if biased_exponent == 0 {
            (u128::from(mantissa), 1 - bias_and_bits)
        } else {
            (u128::from(mantissa) | (1 << mantissa_bits), biased_exponent - bias_and_bits)
        };
        // Below a power of two the neighbour is half as far (Ryu's mmShift).
        let lower = if mantissa == 0 && biased_exponent > 1 {
            (4 * significand - 1, exponent - 2)
        } else {
            ((2 * significand).saturating_sub(1), exponent - 1)
        };
        Binary { upper: (2 * significand + 1, exponent - 1), lower }
    }

    /// Whether the decimal `text` (`-d.ddde±x`) equals either midpoint exactly.
    fn is_boundary(&self, text: &str) -> bool {
        let Some((mantissa, exponent)) = text.trim_start_matches('-').split_once('e') else {
            return false;
        };
        let Ok(exponent) = exponent.parse::<i32>() else {
            return false;
        };
        let fraction_digits = mantissa.split_once('.').map_or(0, |(_, fraction)| fraction.len()) as i32;
        let Ok(mut digits) = mantissa.replace('.', "").parse::<u128>() else {
            return false;
        };
        if digits == 0 {
            return false;
        }
        // value = digits * 10^power = odd * 2^twos * 5^fives.
        let power = exponent - fraction_digits;
        let (mut twos, mut fives) = (power, power);
        while digits % 2 == 0 {
            digits /= 2;
            twos += 1;
        }
        while digits % 5 == 0 {
            digits /= 5;
            fives += 1;
        }
        // A midpoint is a dyadic rational: no 5 in a denominator.
        if fives < 0 {
            return false;
        }
        let Some(odd) = 5u128.checked_pow(fives as u32).and_then(|factor| factor.checked_mul(digits)) else {
            return false;
        };
        (odd, twos) == self.upper || (odd, twos) == self.lower
    }
}

/// Rewrites Rust's shortest `{:e}` form (`-1.2345e-5`) in PostgreSQL's layout.
fn write_shortest(f: &mut dyn Write, scientific: &str, positional_exponent_limit: i32) -> fmt::Result {
    let (mantissa, exponent) = scientific.split_once('e').ok_or(fmt::Error)?;
    let exponent: i32 = exponent.parse().map_err(|_| fmt::Error)?;
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if negative {
        f.write_char('-')?;
    }
    if digits == "0" {
        return f.write_char('0');
    }
    if exponent < -4 || exponent >= positional_exponent_limit {
        f.write_str(&digits[..1])?;
        if digits.len() > 1 {
            f.write_char('.')?;
            f.write_str(&digits[1..])?;
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        return write!(f, "e{sign}{:02}", exponent.abs());
    }
    if exponent < 0 {
        f.write_str("0.")?;
        for _ in 0..(-exponent - 1) {
            f.write_char('0')?;
        }
        return f.write_str(&digits);
    }
    let integer_digits = exponent as usize + 1;
    if digits.len() <= integer_digits {
        f.write_str(&digits)?;
        for _ in digits.len()..integer_digits {
            f.write_char('0')?;
        }
        return Ok(());
    }
    f.write_str(&digits[..integer_digits])?;
    f.write_char('.')?;
    f.write_str(&digits[integer_digits..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(days: i32) -> String {
        let mut text = String::new();
        write_date(&mut text, days).ok();
        text
    }

    fn float8(value: f64) -> String {
        let mut text = String::new();
        write_float8(&mut text, value).ok();
        text
    }

    #[test]
    fn dates_match_postgres() {
        assert_eq!(date(0), "2000-01-01");
        assert_eq!(date(-1), "1999-12-31");
        assert_eq!(date(59), "2000-02-29");
        assert_eq!(date(-2_451_545), "4714-11-24 BC");
        assert_eq!(date(i32::MAX), "infinity");
    }

    #[test]
    fn floats_match_postgres() {
        assert_eq!(float8(0.0), "0");
        assert_eq!(float8(-0.0), "-0");
        assert_eq!(float8(1.5), "1.5");
        assert_eq!(float8(100.0), "100");
        assert_eq!(float8(1e20), "1e+20");
        assert_eq!(float8(1.5e-5), "1.5e-05");
        assert_eq!(float8(0.0001), "0.0001");
        assert_eq!(float8(123456789012345.0), "123456789012345");
        assert_eq!(float8(1234567890123456.0), "1.234567890123456e+15");
        assert_eq!(float8(f64::MAX), "1.7976931348623157e+308");
        let mut text = String::new();
        // Exactly halfway between the shortest candidates -1663378.2 and -1663378.3.
        let tie: f32 = -1_663_378.0 - 0.25;
        write_float4(&mut text, tie).ok();
        assert_eq!(text, "-1.6633782e+06", "tie between two shortest forms goes to even");
        let mut text = String::new();
        write_float4(&mut text, 804_147_968.0).ok();
        assert_eq!(text, "8.0414797e+08", "8.04148e+08 lies on the boundary Ryu refuses");
    }
}
