//! ln, log and exp of numerics at PostgreSQL's result scales
//! (numeric.c: estimate_ln_dweight, numeric_ln, log_var, numeric_exp),
//! computed in fixed point with guard digits and rounded once, half away
//! from zero, at that scale.

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

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
    if r.abs() * 2u32 >= d { if n.is_negative() { q - 1 } else { q + 1 } } else { q }
}

/// Decimal digits of |m| (1 for zero).
fn digit_count(m: &BigInt) -> i64 {
    if m.is_zero() { 1 } else { i64::try_from(m.magnitude().to_str_radix(10).len()).unwrap_or(i64::MAX) }
}

/// numeric.c's estimate_ln_dweight: the decimal weight of ln(x), x > 0.
fn estimate_ln_dweight(m: &BigInt, s: u32) -> i64 {
    let x = Dec::Fin(m.clone(), s);
    let near_one =
        x.total_cmp(&Dec::Fin(BigInt::from(9), 1)).is_ge() && x.total_cmp(&Dec::Fin(BigInt::from(11), 1)).is_le();
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
    let y = if shift >= 0 {
        m * pow10(u32::try_from(shift).unwrap_or(0))
    } else {
        m / pow10(u32::try_from(-shift).unwrap_or(0))
    };
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
    let p = exp_precision(val, rscale);
    Ok(exp_fixed(&(m * pow10(p) / pow10(s)), p, val, rscale))
}

/// Digits after the point e^x is computed with, x ~ `val`.
fn exp_precision(val: f64, rscale: u32) -> u32 {
    #[allow(clippy::cast_possible_truncation)]
    let k = (val / std::f64::consts::LN_10).floor() as i64;
    working(rscale, k.max(0) + 4) + u32::try_from(k.unsigned_abs().to_string().len()).unwrap_or(0)
}

/// e^(x / 10^p) at `rscale` digits, x ~ `val` (|val| < 6000); `p` from
/// [`exp_precision`] or more.
fn exp_fixed(x: &BigInt, p: u32, val: f64, rscale: u32) -> Dec {
    // e^x = 10^k × e^t, t = x - k ln 10 in [0, ln 10).
    #[allow(clippy::cast_possible_truncation)]
    let k = (val / std::f64::consts::LN_10).floor() as i64;
    let ln10 = ln_fixed(&pow10(p + 1), p);
    let mut t = x - &ln10 * k;
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
    let r = if shift >= 0 {
        round_shift(&sum, u32::try_from(shift).unwrap_or(0))
    } else {
        sum * pow10(u32::try_from(-shift).unwrap_or(0))
    };
    Dec::Fin(r, rscale)
}

fn power_error(message: &str) -> SqlError {
    SqlError::new("2201F", message.to_owned())
}

/// numeric_power (`^`, power()): POSIX pow's NaN and infinity cases, then
/// power_var_int's or power_var's result scale.
pub fn power(x: &Dec, y: &Dec) -> Result<Dec> {
    let one = || Dec::Fin(BigInt::from(1), 0);
    let is_one = |d: &Dec| matches!(d, Dec::Fin(..)) && d.total_cmp(&one()).is_eq();
    if x.is_nan() {
        return Ok(if matches!(y, Dec::Fin(..)) && y.signum() == 0 { one() } else { Dec::NaN });
    }
    if y.is_nan() {
        return Ok(if is_one(x) { one() } else { Dec::NaN });
    }
    let (sx, sy) = (x.signum(), y.signum());
    if let Dec::Inf { negative } = y {
        // |x| against 1.
        let above = match x {
            Dec::Inf { .. } => std::cmp::Ordering::Greater,
            _ => (if sx < 0 { x.neg() } else { x.clone() }).total_cmp(&one()),
        };
        if *negative && sx == 0 {
            return Err(power_error("zero raised to a negative power is undefined"));
        }
        return Ok(match (above, negative) {
            (std::cmp::Ordering::Equal, _) => one(),
            (std::cmp::Ordering::Less, false) | (std::cmp::Ordering::Greater, true) => Dec::zero(),
            _ => Dec::Inf { negative: false },
        });
    }
    if let Dec::Inf { negative } = x {
        if *negative && sy != 0 && !matches!(y, Dec::Fin(m, s) if (m % pow10(*s)).is_zero()) {
            return Err(power_error("a negative number raised to a non-integer power yields a complex result"));
        }
        return Ok(match sy {
            0 => one(),
            s if s < 0 => Dec::zero(),
            _ => Dec::Inf { negative: *negative && is_odd_integer(y) },
        });
    }
    if sx == 0 && sy < 0 {
        return Err(power_error("zero raised to a negative power is undefined"));
    }
    let (Dec::Fin(_, xs), Dec::Fin(ym, ys)) = (x, y) else { return Ok(Dec::NaN) };
    let integer = (ym % pow10(*ys)).is_zero();
    if integer && let Some(n) = (ym / pow10(*ys)).to_i32() {
        return power_int(x, n);
    }
    if sx == 0 {
        return Ok(Dec::Fin(BigInt::zero(), 16));
    }
    if sx < 0 && !integer {
        return Err(power_error("a negative number raised to a non-integer power yields a complex result"));
    }
    let negative = sx < 0 && is_odd_integer(y);
    let r = power_general(&x_abs(x), *xs, ym, *ys, None)?;
    Ok(if negative { r.neg() } else { r })
}

fn x_abs(x: &Dec) -> BigInt {
    match x {
        Dec::Fin(m, _) => m.abs(),
        _ => BigInt::zero(),
    }
}

/// power_var's general case, |x| = bm × 10^-xs > 0: e^(y ln x) at the
/// scale a low-precision y ln x picks (or `rscale`).
fn power_general(bm: &BigInt, xs: u32, ym: &BigInt, ys: u32, rscale: Option<u32>) -> Result<Dec> {
    let y = Dec::Fin(ym.clone(), ys);
    let ln_dweight = estimate_ln_dweight(bm, xs);
    let local = u32::try_from((8 - ln_dweight).max(0)).unwrap_or(0);
    let ln_low = Dec::Fin(round_shift(&ln_at(bm, xs, local + GUARD_DIGITS), GUARD_DIGITS), local);
    let Dec::Fin(lm, ls) = ln_low.mul(&y) else { return Ok(Dec::NaN) };
    let val = Dec::Fin(round_shift(&lm, ls.saturating_sub(local)), local.min(ls)).to_f64();
    if val.abs() > 6020.0 {
        if val > 0.0 {
            return Err(overflow());
        }
        return Ok(Dec::Fin(BigInt::zero(), 1000));
    }
    #[allow(clippy::cast_possible_truncation)]
    let rscale = rscale.unwrap_or_else(|| rscale_of((val * std::f64::consts::LOG10_E) as i64, &[xs, ys]));
    let p = exp_precision(val, rscale);
    let int_digits = digit_count(&(ym / pow10(ys))) + 2;
    let p_ln = p + u32::try_from(int_digits).unwrap_or(0);
    let l = ln_at(bm, xs, p_ln) * ym / pow10(ys);
    Ok(exp_fixed(&(l / pow10(p_ln - p)), p, val, rscale))
}

fn is_odd_integer(y: &Dec) -> bool {
    match y {
        Dec::Fin(m, s) => (m % pow10(*s)).is_zero() && !((m / pow10(*s)) % 2u32).is_zero(),
        _ => false,
    }
}

/// power_var_int: x^n for an integer exponent, at PostgreSQL 15's scale.
fn power_int(x: &Dec, n: i32) -> Result<Dec> {
    let Dec::Fin(m, s) = x else { return Ok(Dec::NaN) };
    // f ~ log10(|x|^n) from x's first four base-10000 digits, as PostgreSQL.
    let f = if m.is_zero() {
        0.0
    } else {
        let digits = m.magnitude().to_str_radix(10);
        let exp10 = i64::try_from(digits.len()).unwrap_or(0) - 1 - i64::from(*s);
        let weight = exp10.div_euclid(4);
        let lead = usize::try_from(exp10 - 4 * weight + 1).unwrap_or(1);
        let ngroups = 1 + (digits.len().saturating_sub(lead)).div_ceil(4);
        let used = ngroups.min(4);
        let take = lead + 4 * (used - 1);
        let padded: String = digits.chars().chain(std::iter::repeat('0')).take(take).collect();
        let value: f64 = padded.parse().unwrap_or(1.0);
        #[allow(clippy::cast_precision_loss)]
        let p = (weight * 4 - 4 * i64::try_from(used - 1).unwrap_or(0)) as f64;
        f64::from(n) * (value.log10() + p)
    };
    // PostgreSQL 15's power_var: 16 digits, or the base's scale.
    let rscale = u32::try_from(i64::from((*s).max(16)).min(MAX_DISPLAY_SCALE)).unwrap_or(16);
    if n != 0 && n != 1 && n != -1 && n != 2 && !m.is_zero() {
        if f > 3.0 * 32767.0 * 4.0 {
            return Err(overflow());
        }
        if f + 1.0 < -f64::from(rscale) || f + 1.0 < -1000.0 {
            return Ok(Dec::Fin(BigInt::zero(), rscale));
        }
    }
    match n {
        0 => return Ok(Dec::Fin(pow10(rscale), rscale)),
        1 => return Ok(x.round(i64::from(rscale))),
        _ => {}
    }
    if m.is_zero() {
        return Ok(Dec::Fin(BigInt::zero(), rscale));
    }
    // Exactly when m^|n| is not too long, then one rounding; else through
    // exp and ln where exp_fixed reaches (|n ln x| < 6000), else refused.
    let size = digit_count(m).saturating_mul(i64::from(n.unsigned_abs()));
    if size > 300_000 {
        if (f * std::f64::consts::LN_10).abs() >= 6000.0 {
            return Err(SqlError::unsupported("numeric ^ an integer with this many digits computed"));
        }
        let r = power_general(&m.abs(), *s, &BigInt::from(n), 0, Some(rscale))?;
        return Ok(if m.is_negative() && n % 2 != 0 { r.neg() } else { r });
    }
    let k = n.unsigned_abs();
    let num = m.pow(k);
    let den_scale = s * k;
    if n > 0 {
        return Ok(Dec::Fin(num, den_scale).round(i64::from(rscale)));
    }
    Dec::Fin(BigInt::from(1), 0).div_at(&Dec::Fin(num, den_scale), rscale)
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
        assert_eq!(text(power(&d("2"), &d("0.5")).unwrap()), "1.4142135623730950");
        assert_eq!(text(power(&d("2"), &d("10")).unwrap()), "1024.0000000000000000");
        assert_eq!(text(power(&d("0.12"), &d("-20")).unwrap()), "2608405330458882702.5529619561355838");
        assert_eq!(text(power(&d("-Infinity"), &d("3")).unwrap()), "-Infinity");
        assert_eq!(power(&d("-Infinity"), &d("-4.5")).unwrap_err().sqlstate, "2201F");
        assert_eq!(power(&d("10"), &d("131071")).unwrap(), Dec::Fin(BigInt::from(10u32).pow(131_071 + 16), 16));
        assert_eq!(text(power(&d("1.000000001"), &d("1000000")).unwrap()), "1.0010005001662078");
        assert_eq!(text(power(&d("-2"), &d("Infinity")).unwrap()), "Infinity");
        assert_eq!(text(power(&d("0.0"), &d("0.5")).unwrap()), "0.0000000000000000");
        assert_eq!(power(&d("0"), &d("-1")).unwrap_err().sqlstate, "2201F");
        assert_eq!(power(&d("-2"), &d("0.5")).unwrap_err().sqlstate, "2201F");
        assert_eq!(log(&d("1.0"), &d("12.34")).unwrap_err().sqlstate, "22012");
        assert_eq!(text(ln(&d("1.000")).unwrap()), "0.0000000000000000");
        assert_eq!(text(log(&d("2"), &d("8")).unwrap()), "3.0000000000000000");
        assert_eq!(
            text(ln(&d("1e-100")).unwrap()),
            "-230.2585092994045684017991454684364207601101488628772976033327900967572609677352480235997205089598298342"
        );
        assert_eq!(text(exp(&d("-100.5")).unwrap()), "0.00000000000000000000000000000000000000000002256340135917036");
        assert_eq!(text(log(&d("10"), &d("1e50")).unwrap()), "50.00000000000000");
        assert_eq!(exp(&d("-Infinity")).unwrap(), Dec::zero());
        assert_eq!(estimate_ln_dweight(&BigInt::from(1), 0), 0);
    }
}
