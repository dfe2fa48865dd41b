//! TPC-C's random inputs (spec 2.1.4 to 2.1.6, 4.3.2): uniform ranges,
//! NURand with its C constants, customer last names from syllables, the
//! a-strings and n-strings of the population, and decimals as fixed-point
//! integers (cents, ten-thousandths) written as PostgreSQL prints them.

use rand::Rng;
use rand::rngs::SmallRng;

/// C for NURand(255, 0, 999) of C_LAST at population time.
pub const C_LAST_LOAD: i64 = 157;
/// C for C_LAST during the run: C_LAST_RUN - C_LAST_LOAD = 66, inside the
/// spec's [65, 119] and neither 96 nor 112 (2.1.6.1).
pub const C_LAST_RUN: i64 = 223;
/// C for NURand(1023, 1, 3000) of C_ID (population and run alike).
pub const C_ID: i64 = 259;
/// C for NURand(8191, 1, 100000) of OL_I_ID.
pub const OL_I_ID: i64 = 7911;

const SYLLABLES: [&str; 10] = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];
const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// Uniform in [lo, hi] (both included).
pub fn uniform(rng: &mut SmallRng, lo: i64, hi: i64) -> i64 {
    rng.random_range(lo..=hi)
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand(rng: &mut SmallRng, a: i64, x: i64, y: i64, c: i64) -> i64 {
    (((uniform(rng, 0, a) | uniform(rng, x, y)) + c) % (y - x + 1)) + x
}

/// The last name of number `n` (0..=999): three syllables, one per digit.
pub fn last_name(n: i64) -> String {
    let n = n.clamp(0, 999) as usize;
    let mut s = String::with_capacity(15);
    s.push_str(SYLLABLES[n / 100]);
    s.push_str(SYLLABLES[n / 10 % 10]);
    s.push_str(SYLLABLES[n % 10]);
    s
}

/// Random alphanumeric string of length in [min, max].
pub fn a_string(rng: &mut SmallRng, min: usize, max: usize) -> String {
    let len = rng.random_range(min..=max);
    (0..len).map(|_| ALPHANUMERIC[rng.random_range(0..ALPHANUMERIC.len())] as char).collect()
}

/// Random digit string of length in [min, max].
pub fn n_string(rng: &mut SmallRng, min: usize, max: usize) -> String {
    let len = rng.random_range(min..=max);
    (0..len).map(|_| char::from(b'0' + rng.random_range(0..10u8))).collect()
}

/// A zip code: 4 random digits then "11111" (4.3.2.7).
pub fn zip(rng: &mut SmallRng) -> String {
    let mut s = n_string(rng, 4, 4);
    s.push_str("11111");
    s
}

/// I_DATA / S_DATA: a-string of 26..50, in 10 % of rows with "ORIGINAL" at a
/// random position (4.3.3.1).
pub fn data_with_original(rng: &mut SmallRng) -> String {
    let mut s = a_string(rng, 26, 50);
    if rng.random_range(0..10) == 0 {
        let at = rng.random_range(0..=s.len() - 8);
        s.replace_range(at..at + 8, "ORIGINAL");
    }
    s
}

/// A fixed-point decimal with `scale` digits after the point, as
/// PostgreSQL prints a numeric of that scale (`-10.00`, `0.0500`).
pub fn decimal(units: i64, scale: u32) -> String {
    let div = 10i64.pow(scale);
    let sign = if units < 0 { "-" } else { "" };
    let a = units.unsigned_abs();
    let d = div.unsigned_abs();
    if scale == 0 {
        return format!("{sign}{a}");
    }
    format!("{sign}{}.{:0width$}", a / d, a % d, width = scale as usize)
}

/// Parses a decimal's text into units of `scale` digits after the point
/// (`"12.3"` at scale 2 is 1230); extra digits are an error, not rounded.
pub fn parse_decimal(text: &str, scale: u32) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if fraction.len() > scale as usize && fraction[scale as usize..].bytes().any(|b| b != b'0') {
        return None;
    }
    let mut units: i64 = whole.parse().ok()?;
    for i in 0..scale as usize {
        let digit = fraction.as_bytes().get(i).map_or(Some(0), |b| b.is_ascii_digit().then(|| i64::from(b - b'0')))?;
        units = units.checked_mul(10)?.checked_add(digit)?;
    }
    Some(if negative { -units } else { units })
}

/// A `timestamp` literal of the UTC time now, as PostgreSQL prints one
/// (`2026-11-30 17:05:09.123456`).
pub fn timestamp_now() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:06}", rem / 3600, rem / 60 % 60, rem % 60, now.subsec_micros())
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn last_names_follow_the_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut hits = vec![0u32; 1000];
        for _ in 0..100_000 {
            let v = nurand(&mut rng, 255, 0, 999, C_LAST_RUN);
            assert!((0..=999).contains(&v));
            hits[v as usize] += 1;
        }
        let max = *hits.iter().max().unwrap_or(&0);
        let min = *hits.iter().min().unwrap_or(&0);
        assert!(max > 4 * min.max(1), "NURand is non-uniform: {min}..{max}");
    }

    #[test]
    fn decimals_print_and_parse_as_postgresql() {
        assert_eq!(decimal(-1000, 2), "-10.00");
        assert_eq!(decimal(5, 4), "0.0005");
        assert_eq!(decimal(30_000_000, 2), "300000.00");
        assert_eq!(decimal(7, 0), "7");
        assert_eq!(parse_decimal("12.3", 2), Some(1230));
        assert_eq!(parse_decimal("-0.05", 2), Some(-5));
        assert_eq!(parse_decimal("0.1234", 4), Some(1234));
        assert_eq!(parse_decimal("3.000", 2), Some(300));
        assert_eq!(parse_decimal("3.001", 2), None);
        assert_eq!(parse_decimal("x", 2), None);
    }

    #[test]
    fn strings_have_their_lengths() {
        let mut rng = SmallRng::seed_from_u64(2);
        for _ in 0..1000 {
            let s = data_with_original(&mut rng);
            assert!((26..=50).contains(&s.len()));
            assert_eq!(zip(&mut rng).len(), 9);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(timestamp_now().len(), 26);
    }
}
