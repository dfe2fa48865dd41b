//! ln, log and exp of numerics at PostgreSQL's result scales
//! (numeric.c: estimate_ln_dweight, numeric_ln, log_var, numeric_exp),
//! computed in fixed point with guard digits and rounded once, half away
//! from zero, at that scale.

use num_bigint::BigInt;
use num_traits::{Signed, Zero};

use super::numeric_wide::{Dec, overflow};
use crate::error::{Result, SqlError};

const MIN_SIG_DIGITS: i64 = 16;
const MAX_DISPLAY_SCALE: i64 = 1000;
/// Digits computed beyond those kept: the series, the square roots undone
/// (at most 2^12) and the final division lose far fewer.
const GUARD_DIGITS: u32 = 30;

fn pow10(n: u32) -> BigInt {
    BigInt::from(10u32).pow(n)
}

fn log_error(message: &str) -> SqlError {
    SqlError::new("2201E", message.to_owned())
}

/// `n / 10^k` rounded half away from zero.
fn round_shift(n: &BigInt, k: u32) -> BigInt {
    let d = pow10(k);
    let (q, r) = (n / &d, n % &d);
    if r.abs() * 2u32 >= d {
        if n.is_negative() { q - 1 } else { q + 1 }
    } else {
        q
    }
}

/// Decimal digits of |m| (1 for zero).
fn digit_count(m: &BigInt) -> i64 {
    if m.is_zero() { 1 } else { i64::try_from(m.magnitude().to_str_radix(10).len()).unwrap_or(i64::MAX) }
}

/// numeric.c's estimate_ln_dweight: the decimal weight of ln(x), x > 0.
fn estimate_ln_dweight(m: &BigInt, s: u32) -> i64 {
    let x = Dec::Fin(m.clone(), s);
    let near_one = x.total_cmp(&Dec::Fin(BigInt::from(9), 1)).is_ge() && x.total_cmp(&Dec::Fin(BigInt::from(11), 1)).is_le();
    if near_one {
        // ln(1 + y) ~ y: the weight of y's leading digit.
        let Dec::Fin(y, ys) = x.sub(&Dec::Fin(BigInt::from(1), 0)) else { return 0 };
        if y.is_zero() {
            return 0;
        }
        return digit_count(&y) - 1 - i64::from(ys);
    }
    // PostgreSQL reads the first two base-10000 digits as a double.
    let digits = m.magnitude().to_str_radix(10);
    let exp10 = i64::try_from(digits.len()).unwrap_or(0) - 1 - i64::from(s);
    let weight = exp10.div_euclid(4);
    let lead = usize::try_from(exp10 - 4 * weight + 1).unwrap_or(1);
    let padded: String = digits.chars().chain(std::iter::repeat('0')).take(lead + 4).collect();
    let first: f64 = padded[..lead].parse().unwrap_or(0.0);
    let second: f64 = padded[lead..lead + 4].parse().unwrap_or(0.0);
    let has_second = digits.len() > lead && digits[lead..].bytes().any(|b| b != b'0');
    #[allow(clippy::cast_precision_loss)]
    let (value, dweight) = if has_second { (first * 10_000.0 + second, (weight - 1) * 4) } else { (first, weight * 4) };
    #[allow(clippy::cast_precision_loss)]
    let ln = value.ln() + dweight as f64 * std::f64::consts::LN_10;
    #[allow(clippy::cast_possible_truncation)]
    let w = ln.abs().log10() as i64;
    w
}

/// ln(y) for y = v / 10^p > 0, in units of 10^-p.
fn ln_fixed(v: &BigInt, p: u32) -> BigInt {
    let one = pow10(p);
    let mut y = v.clone();
    let mut halvings = 0u32;
    // Square roots until |y - 1| < 0.01: the series then gains ~4 digits a term.
    while (&y - &one).abs() * 100u32 > one && halvings < 64 {
        y = (y * &one).sqrt();
        halvings += 1;
    }
    // ln(y) = 2 atanh(z), z = (y - 1) / (y + 1).
    let z = (&y - &one) * &one / (&y + &one);
    let z2 = &z * &z / &one;
    let mut term = z.clone();
    let mut sum = z;
    let mut k = 1u32;
    while !term.is_zero() {
        term = term * &z2 / &one;
        k += 2;
        sum += &term / k;
    }
    sum * (BigInt::from(2u32) << halvings)
}

/// ln(x) in units of 10^-p, x = m × 10^-s > 0.
fn ln_at(m: &BigInt, s: u32, p: u32) -> BigInt {
    // x = y × 10^d with y in [0.1, 1).
    let d = digit_count(m) - i64::from(s);
    let shift = i64::from(p) - i64::from(s) - d;
    let y = if shift >= 0 { m * pow10(u32::try_from(shift).unwrap_or(0)) } else { m / pow10(u32::try_from(-shift).unwrap_or(0)) };
    let ln_y = ln_fixed(&y, p);
    if d == 0 {
        return ln_y;
    }
    ln_y + ln_fixed(&pow10(p + 1), p) * d
}

fn rscale_of(dweight: i64, scales: &[u32]) -> u32 {
    let r = scales.iter().fold(MIN_SIG_DIGITS - dweight, |acc, s| acc.max(i64::from(*s)));
    u32::try_from(r.clamp(0, MAX_DISPLAY_SCALE)).unwrap_or(0)
}

/// Guard digits for a fixed-point computation whose integer part has
/// `int_digits` digits.
fn working(rscale: u32, int_digits: i64) -> u32 {
    rscale + GUARD_DIGITS + u32::try_from(int_digits.max(0)).unwrap_or(0)
}

/// numeric_ln.
pub fn ln(x: &Dec) -> Result<Dec> {
    let (m, s) = match x {
        Dec::NaN | Dec::Inf { negative: false } => return Ok(x.clone()),
        Dec::Inf { negative: true } => return Err(log_error("cannot take logarithm of a negative number")),
        Dec::Fin(m, s) => (m, *s),
    };
    if m.is_zero() {
        return Err(log_error("cannot take logarithm of zero"));
    }
    if m.is_negative() {
        return Err(log_error("cannot take logarithm of a negative number"));
    }
    let rscale = rscale_of(estimate_ln_dweight(m, s), &[s]);
    let p = working(rscale, digit_count(&BigInt::from(digit_count(m))));
    Ok(Dec::Fin(round_shift(&ln_at(m, s, p), p - rscale), rscale))
}

/// numeric_log: log(base, x).
pub fn log(base: &Dec, x: &Dec) -> Result<Dec> {
    if base.is_nan() || x.is_nan() {
        return Ok(Dec::NaN);
    }
    if base.signum() < 0 || x.signum() < 0 {
        return Err(log_error("cannot take logarithm of a negative number"));
    }
    if base.signum() == 0 || x.signum() == 0 {
        return Err(log_error("cannot take logarithm of zero"));
    }
    match (base, x) {
        (Dec::Inf { .. }, Dec::Inf { .. }) => return Ok(Dec::NaN),
        (Dec::Inf { .. }, _) => return Ok(Dec::zero()),
        (_, Dec::Inf { .. }) => return Ok(x.clone()),
        _ => {}
    }
    let (Dec::Fin(bm, bs), Dec::Fin(xm, xs)) = (base, x) else { return Ok(Dec::NaN) };
    // ln(1) = 0 exactly: log_var divides by it.
    if base.total_cmp(&Dec::Fin(BigInt::from(1), 0)).is_eq() {
        return Err(SqlError::division_by_zero());
    }
    let (base_dw, x_dw) = (estimate_ln_dweight(bm, *bs), estimate_ln_dweight(xm, *xs));
    let rscale = rscale_of(x_dw - base_dw, &[*bs, *xs]);
    // The quotient's error grows as ln(base) shrinks, and its integer part.
    let p = working(rscale, (-base_dw).max(0) + (x_dw - base_dw).max(0) + 8);
    let ln_base = ln_at(bm, *bs, p);
    if ln_base.is_zero() {
        return Err(SqlError::division_by_zero());
    }
    let ln_x = ln_at(xm, *xs, p);
    let q = ln_x * pow10(p) / ln_base;
    Ok(Dec::Fin(round_shift(&q, p - rscale), rscale))
}

/// numeric_exp.
pub fn exp(x: &Dec) -> Result<Dec> {
    let (m, s) = match x {
        Dec::NaN | Dec::Inf { negative: false } => return Ok(x.clone()),
        Dec::Inf { negative: true } => return Ok(Dec::zero()),
        Dec::Fin(m, s) => (m, *s),
    };
    let val = x.to_f64();
    // log10(e^x) = x log10(e): the result's decimal weight.
    let weight = (val * std::f64::consts::LOG10_E).clamp(-2000.0, 2000.0);
    #[allow(clippy::cast_possible_truncation)]
    let rscale = rscale_of(weight as i64, &[s]);
    if val.abs() >= 6000.0 {
        if val > 0.0 {
            return Err(overflow());
        }
        return Ok(Dec::Fin(BigInt::zero(), rscale));
    }
    // e^x = 10^k × e^t, t = x - k ln 10 in [0, ln 10).
    #[allow(clippy::cast_possible_truncation)]
    let k = (val / std::f64::consts::LN_10).floor() as i64;
    let p = working(rscale, k.max(0) + 4) + u32::try_from(k.unsigned_abs().to_string().len()).unwrap_or(0);
    let ln10 = ln_fixed(&pow10(p + 1), p);
    let x_fixed = m * pow10(p) / pow10(s);
    let mut t = x_fixed - &ln10 * k;
    // Halve t until below 0.01, sum the series, square back.
    let one = pow10(p);
    let mut halvings = 0u32;
    while t.abs() * 100u32 > one && halvings < 32 {
        t /= 2u32;
        halvings += 1;
    }
    let mut term = one.clone();
    let mut sum = one.clone();
    let mut n = 0u32;
    while !term.is_zero() {
        n += 1;
        term = term * &t / &one / n;
        sum += &term;
    }
    for _ in 0..halvings {
        sum = &sum * &sum / &one;
    }
    // Scale by 10^k: result = sum × 10^(k - p), kept at rscale digits.
    let shift = i64::from(p) - k - i64::from(rscale);
    let r = if shift >= 0 { round_shift(&sum, u32::try_from(shift).unwrap_or(0)) } else { sum * pow10(u32::try_from(-shift).unwrap_or(0)) };
    Ok(Dec::Fin(r, rscale))
}

#[cfg(test)]
fn text(d: Dec) -> String {
    d.into_value().map(|v| v.to_string()).unwrap_or_else(|e| e.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s).and_then(std::result::Result::ok).unwrap_or_else(|| panic!("{s}"))
    }

    #[test]
    fn like_postgres() {
        // Values from PostgreSQL 15.
        assert_eq!(text(ln(&d("2")).unwrap()), "0.6931471805599453");
        assert_eq!(text(ln(&d("10")).unwrap()), "2.3025850929940457");
        assert_eq!(text(exp(&d("1")).unwrap()), "2.7182818284590452");
        assert_eq!(text(log(&d("10"), &d("1000")).unwrap()), "3.0000000000000000");
        assert!(ln(&d("0")).is_err());
        assert_eq!(log(&d("1.0"), &d("12.34")).unwrap_err().sqlstate, "22012");
        assert_eq!(text(ln(&d("1.000")).unwrap()), "0.0000000000000000");
        assert_eq!(text(log(&d("2"), &d("8")).unwrap()), "3.0000000000000000");
        assert_eq!(text(ln(&d("1e-100")).unwrap()), "-230.2585092994045684017991454684364207601101488628772976033327900967572609677352480235997205089598298342");
        assert_eq!(text(exp(&d("-100.5")).unwrap()), "0.00000000000000000000000000000000000000000002256340135917036");
        assert_eq!(text(log(&d("10"), &d("1e50")).unwrap()), "50.00000000000000");
        assert_eq!(exp(&d("-Infinity")).unwrap(), Dec::zero());
        assert_eq!(estimate_ln_dweight(&BigInt::from(1), 0), 0);
    }
}
