//! numeric beyond the i128 form: arbitrary width, NaN and ±Infinity, with
//! PostgreSQL's (numeric.c) semantics and result scales. The i128 form's
//! arithmetic in `value.rs` stays the fast path; these functions run when
//! an operand is wide or special, or when the fast path would overflow.

use std::cmp::Ordering;

use num_bigint::{BigInt, Sign};
use num_integer::Integer;
use num_traits::{Signed, ToPrimitive, Zero};
use pgtier_engine::{NUMERIC_DSCALE_MAX, NUMERIC_WEIGHT_DIGITS_MAX, Numeric, NumericBig, NumericKind, Value};

use crate::error::{Result, SqlError};

/// PostgreSQL's NUMERIC_MIN_SIG_DIGITS and display-scale bounds of division.
const MIN_SIG_DIGITS: i64 = 16;
const MAX_DISPLAY_SCALE: i64 = 1000;
/// Decimal digits before the point PostgreSQL's numeric holds.
const PG_WEIGHT_DIGITS_MAX: usize = NUMERIC_WEIGHT_DIGITS_MAX;

/// A numeric of any form, owned, for computing.
#[derive(Clone, Debug, PartialEq)]
pub enum Dec {
    NaN,
    Inf {
        negative: bool,
    },
    /// `m × 10^-scale`; `scale` is the display scale.
    Fin(BigInt, u32),
}

pub fn overflow() -> SqlError {
    SqlError::new("22003", "value overflows numeric format")
}

fn pow10(n: u32) -> BigInt {
    BigInt::from(10u32).pow(n)
}

/// `n / 10^k` rounded half away from zero.
fn div_pow10_round(n: &BigInt, k: u32) -> BigInt {
    if k == 0 {
        return n.clone();
    }
    let d = pow10(k);
    let (q, r) = n.div_rem(&d);
    if r.abs() * 2u32 >= d { if n.is_negative() { q - 1 } else { q + 1 } } else { q }
}

/// `a / b` rounded half away from zero (b non-zero).
fn div_round(a: &BigInt, b: &BigInt) -> BigInt {
    let (q, r) = a.div_rem(b);
    if r.abs() * 2u32 >= b.abs() { if a.is_negative() != b.is_negative() { q - 1 } else { q + 1 } } else { q }
}

/// numeric_round / numeric_trunc's bounds on the places argument: no
/// more digits after the point than a numeric holds, and one more before.
fn clamp_places(scale: i64) -> i64 {
    let before = i64::try_from(PG_WEIGHT_DIGITS_MAX).unwrap_or(i64::MAX) + 1;
    scale.clamp(-before, i64::from(NUMERIC_DSCALE_MAX))
}

impl Dec {
    pub fn of(v: &Value) -> Option<Dec> {
        Some(match v {
            Value::Int2(_) | Value::Int4(_) | Value::Int8(_) => Dec::Fin(BigInt::from(v.as_i64()?), 0),
            Value::Numeric(n) => Dec::small(*n),
            Value::NumericBig(b) => {
                let b = b.as_ref();
                match b.kind() {
                    NumericKind::NaN => Dec::NaN,
                    NumericKind::PosInf => Dec::Inf { negative: false },
                    NumericKind::NegInf => Dec::Inf { negative: true },
                    NumericKind::Finite { negative } => {
                        let m =
                            BigInt::parse_bytes(if b.digits().is_empty() { b"0" } else { b.digits().as_bytes() }, 10)?;
                        Dec::Fin(if negative { -m } else { m }, u32::from(b.scale()))
                    }
                }
            }
            _ => return None,
        })
    }

    pub fn small(n: Numeric) -> Dec {
        Dec::Fin(BigInt::from(n.mantissa), u32::from(n.scale))
    }

    pub fn zero() -> Dec {
        Dec::Fin(BigInt::zero(), 0)
    }

    /// The engine value: the i128 form when it fits; 22003 past
    /// PostgreSQL's limits (131072 digits before the point, 16383 after).
    pub fn into_value(self) -> Result<Value> {
        let (m, scale) = match self {
            Dec::NaN => return Ok(Value::NumericBig(NumericBig::nan())),
            Dec::Inf { negative } => return Ok(Value::NumericBig(NumericBig::infinity(negative))),
            Dec::Fin(m, scale) => (m, scale),
        };
        let digits = m.magnitude().to_str_radix(10);
        let int_digits = digits.len().saturating_sub(scale as usize);
        if int_digits > PG_WEIGHT_DIGITS_MAX || scale > u32::from(NUMERIC_DSCALE_MAX) {
            return Err(overflow());
        }
        let scale = u16::try_from(scale).map_err(|_| overflow())?;
        match NumericBig::finite(m.is_negative(), &digits, scale) {
            Some(Ok(n)) => Ok(Value::Numeric(n)),
            Some(Err(b)) => Ok(Value::NumericBig(b)),
            None => Err(overflow()),
        }
    }

    pub fn is_nan(&self) -> bool {
        matches!(self, Dec::NaN)
    }

    /// -1, 0 or 1 (NaN: 0; the caller handles it first).
    pub fn signum(&self) -> i32 {
        match self {
            Dec::NaN => 0,
            Dec::Inf { negative } => {
                if *negative {
                    -1
                } else {
                    1
                }
            }
            Dec::Fin(m, _) => match m.sign() {
                Sign::Minus => -1,
                Sign::NoSign => 0,
                Sign::Plus => 1,
            },
        }
    }

    pub fn scale(&self) -> u32 {
        match self {
            Dec::Fin(_, s) => *s,
            _ => 0,
        }
    }

    /// The same value at display scale `s` (>= its own: exact).
    fn mantissa_at(&self, s: u32) -> BigInt {
        match self {
            Dec::Fin(m, own) => m * pow10(s.saturating_sub(*own)),
            _ => BigInt::zero(),
        }
    }

    /// Parses numeric_in's text (PostgreSQL 15): blanks around, an
    /// optional sign, digits with an optional point, an optional exponent;
    /// or NaN, Infinity, inf (signed, any case). None: invalid syntax.
    pub fn parse(text: &str) -> Option<Result<Dec>> {
        let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
        let lower = t.to_ascii_lowercase();
        match lower.as_str() {
            "nan" => return Some(Ok(Dec::NaN)),
            "infinity" | "+infinity" | "inf" | "+inf" => return Some(Ok(Dec::Inf { negative: false })),
            "-infinity" | "-inf" => return Some(Ok(Dec::Inf { negative: true })),
            _ => {}
        }
        let (negative, rest) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let (mantissa, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (int_part.is_empty() && frac.is_empty()) || !digits(int_part) || !digits(frac) {
            return None;
        }
        let exponent: i64 = match exp {
            None => 0,
            Some(e) => {
                let body = e.strip_prefix(['+', '-']).unwrap_or(e);
                if body.is_empty() || !digits(body) {
                    return None;
                }
                // PostgreSQL: |exponent| >= INT_MAX / 2 overflows.
                match e.parse::<i64>() {
                    Ok(x) if x.abs() < i64::from(i32::MAX / 2) => x,
                    _ => return Some(Err(overflow())),
                }
            }
        };
        let all = format!("{int_part}{frac}");
        let frac_len = i64::try_from(frac.len()).unwrap_or(i64::MAX);
        let dscale = frac_len - exponent;
        // Digits past 10^-dscale scaled by the exponent are kept exactly.
        let (m, scale) = if dscale >= 0 {
            (BigInt::parse_bytes(all.as_bytes(), 10)?, dscale)
        } else {
            let shift = u32::try_from(-dscale).ok()?;
            if shift as usize > PG_WEIGHT_DIGITS_MAX + 1 {
                return Some(Err(overflow()));
            }
            (BigInt::parse_bytes(all.as_bytes(), 10)? * pow10(shift), 0)
        };
        let Ok(scale) = u32::try_from(scale) else { return Some(Err(overflow())) };
        if scale > u32::from(NUMERIC_DSCALE_MAX) {
            return Some(Err(overflow()));
        }
        Some(Ok(Dec::Fin(if negative { -m } else { m }, scale)))
    }

    pub fn total_cmp(&self, other: &Dec) -> Ordering {
        let rank = |d: &Dec| match d {
            Dec::Inf { negative: true } => 0,
            Dec::Fin(..) => 1,
            Dec::Inf { negative: false } => 2,
            Dec::NaN => 3,
        };
        match (self, other) {
            (Dec::Fin(_, a), Dec::Fin(_, b)) => {
                let s = (*a).max(*b);
                self.mantissa_at(s).cmp(&other.mantissa_at(s))
            }
            _ => rank(self).cmp(&rank(other)),
        }
    }

    pub fn add(&self, other: &Dec) -> Dec {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Dec::NaN,
            (Dec::Inf { negative: a }, Dec::Inf { negative: b }) => {
                if a == b {
                    self.clone()
                } else {
                    Dec::NaN
                }
            }
            (Dec::Inf { .. }, _) => self.clone(),
            (_, Dec::Inf { .. }) => other.clone(),
            (Dec::Fin(_, a), Dec::Fin(_, b)) => {
                let s = (*a).max(*b);
                Dec::Fin(self.mantissa_at(s) + other.mantissa_at(s), s)
            }
        }
    }

    pub fn neg(&self) -> Dec {
        match self {
            Dec::NaN => Dec::NaN,
            Dec::Inf { negative } => Dec::Inf { negative: !negative },
            Dec::Fin(m, s) => Dec::Fin(-m, *s),
        }
    }

    pub fn sub(&self, other: &Dec) -> Dec {
        self.add(&other.neg())
    }

    /// Exact product, rounded to NUMERIC_DSCALE_MAX digits if wider
    /// (numeric_mul).
    pub fn mul(&self, other: &Dec) -> Dec {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Dec::NaN,
            (Dec::Inf { .. }, _) | (_, Dec::Inf { .. }) => match self.signum() * other.signum() {
                0 => Dec::NaN,
                s => Dec::Inf { negative: s < 0 },
            },
            (Dec::Fin(a, sa), Dec::Fin(b, sb)) => {
                let (m, s) = (a * b, sa + sb);
                let max = u32::from(NUMERIC_DSCALE_MAX);
                if s > max { Dec::Fin(div_pow10_round(&m, s - max), max) } else { Dec::Fin(m, s) }
            }
        }
    }

    /// The exact product of finite values, at any scale (do_numeric_accum's
    /// sum of squares keeps every digit; numeric_mul rounds past 16383).
    pub fn mul_exact(&self, other: &Dec) -> Dec {
        match (self, other) {
            (Dec::Fin(a, sa), Dec::Fin(b, sb)) => Dec::Fin(a * b, sa + sb),
            _ => self.mul(other),
        }
    }

    /// The quotient of finite values truncated toward zero (scale 0).
    pub fn trunc_div(&self, other: &Dec) -> Dec {
        let (Dec::Fin(_, a), Dec::Fin(b, bs)) = (self, other) else { return Dec::NaN };
        if b.is_zero() {
            return Dec::NaN;
        }
        let s = (*a).max(*bs);
        Dec::Fin(self.mantissa_at(s) / other.mantissa_at(s), 0)
    }

    /// numeric_div: the quotient at select_div_scale's scale.
    pub fn div(&self, other: &Dec) -> Result<Dec> {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Ok(Dec::NaN),
            (Dec::Inf { .. }, Dec::Inf { .. }) => Ok(Dec::NaN),
            (Dec::Inf { .. }, _) => match other.signum() {
                0 => Err(SqlError::division_by_zero()),
                s => Ok(Dec::Inf { negative: self.signum() * s < 0 }),
            },
            (_, Dec::Inf { .. }) => Ok(Dec::zero()),
            _ => {
                let scale = self.div_scale(other);
                self.div_at(other, scale)
            }
        }
    }

    /// `self / other` rounded half away from zero at `scale` digits (finite).
    pub fn div_at(&self, other: &Dec, scale: u32) -> Result<Dec> {
        let (Dec::Fin(a, sa), Dec::Fin(b, sb)) = (self, other) else { return Ok(Dec::NaN) };
        if b.is_zero() {
            return Err(SqlError::division_by_zero());
        }
        // q = a * 10^(scale + sb - sa) / b
        let exp = i64::from(scale) + i64::from(*sb) - i64::from(*sa);
        let (num, den) = if exp >= 0 {
            (a * pow10(u32::try_from(exp).map_err(|_| overflow())?), b.clone())
        } else {
            (a.clone(), b * pow10(u32::try_from(-exp).map_err(|_| overflow())?))
        };
        Ok(Dec::Fin(div_round(&num, &den), scale))
    }

    /// Base-10000 weight and first digit, as a NumericVar holds them.
    fn nbase_weight_first_digit(&self) -> (i64, u32) {
        let Dec::Fin(m, s) = self else { return (0, 0) };
        if m.is_zero() {
            return (0, 0);
        }
        let digits = m.magnitude().to_str_radix(10);
        let exp10 = i64::try_from(digits.len()).unwrap_or(i64::MAX) - 1 - i64::from(*s);
        let weight = exp10.div_euclid(4);
        let lead = usize::try_from(exp10 - 4 * weight + 1).unwrap_or(1);
        let first: String = digits.chars().chain(std::iter::repeat('0')).take(lead).collect();
        (weight, first.parse().unwrap_or(0))
    }

    /// PostgreSQL's select_div_scale.
    pub fn div_scale(&self, other: &Dec) -> u32 {
        let (w1, f1) = self.nbase_weight_first_digit();
        let (w2, f2) = other.nbase_weight_first_digit();
        let mut qweight = w1 - w2;
        if f1 <= f2 {
            qweight -= 1;
        }
        let rscale = (MIN_SIG_DIGITS - qweight * 4)
            .max(i64::from(self.scale()))
            .max(i64::from(other.scale()))
            .clamp(0, MAX_DISPLAY_SCALE);
        u32::try_from(rscale).unwrap_or(0)
    }

    /// numeric_mod: truncated quotient's remainder, the dividend's sign.
    pub fn modulo(&self, other: &Dec) -> Result<Dec> {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Ok(Dec::NaN),
            (Dec::Inf { .. }, _) => {
                if other.signum() == 0 {
                    return Err(SqlError::division_by_zero());
                }
                Ok(Dec::NaN)
            }
            (_, Dec::Inf { .. }) => Ok(self.clone()),
            (Dec::Fin(_, a), Dec::Fin(b, bs)) => {
                if b.is_zero() {
                    return Err(SqlError::division_by_zero());
                }
                let s = (*a).max(*bs);
                Ok(Dec::Fin(self.mantissa_at(s) % other.mantissa_at(s), s))
            }
        }
    }

    /// sqrt_var: the square root of a non-negative finite value at `rscale`
    /// digits, correctly rounded (half away from zero).
    pub fn sqrt_at(&self, rscale: u32) -> Dec {
        let Dec::Fin(m, s) = self else { return self.clone() };
        // N = x * 10^(2 rscale); r = floor(sqrt(N)), up when 4N >= (2r + 1)^2.
        let n = if 2 * rscale >= *s { m * pow10(2 * rscale - s) } else { m / pow10(s - 2 * rscale) };
        let r = n.sqrt();
        let twice = &r * 2u32 + 1u32;
        let r = if n * 4u32 >= &twice * &twice { r + 1u32 } else { r };
        Dec::Fin(r, rscale)
    }

    /// Rounds (half away from zero) or pads to `scale` digits after the
    /// point; a negative `scale` rounds left of it (display scale 0).
    pub fn round(&self, scale: i64) -> Dec {
        self.to_places(scale, div_pow10_round)
    }

    /// Like [`Dec::round`], truncating toward zero.
    pub fn trunc(&self, scale: i64) -> Dec {
        self.to_places(scale, |m, k| m / pow10(k))
    }

    /// The value at `scale` places (clamped as numeric_round does), the
    /// dropped digits handled by `drop(m, k)` (m / 10^k, rounded or cut).
    fn to_places(&self, scale: i64, drop: impl Fn(&BigInt, u32) -> BigInt) -> Dec {
        let Dec::Fin(m, s) = self else { return self.clone() };
        let scale = clamp_places(scale);
        let own = i64::from(*s);
        if scale >= own {
            let target = u32::try_from(scale).unwrap_or(u32::MAX);
            return Dec::Fin(self.mantissa_at(target), target);
        }
        let q = drop(m, u32::try_from(own - scale).unwrap_or(u32::MAX));
        if scale >= 0 {
            return Dec::Fin(q, u32::try_from(scale).unwrap_or(0));
        }
        Dec::Fin(q * pow10(u32::try_from(-scale).unwrap_or(0)), 0)
    }

    /// numeric(p,s)'s apply_typmod: round to `scale`, then 22003 when
    /// more than `precision - scale` digits are left before the point.
    pub fn apply_typmod(&self, precision: i64, scale: i64, overflow_error: impl Fn(bool) -> SqlError) -> Result<Dec> {
        let rounded = match self {
            Dec::NaN => return Ok(Dec::NaN),
            Dec::Inf { .. } => return Err(overflow_error(true)),
            Dec::Fin(..) => self.round(scale),
        };
        if let Dec::Fin(m, s) = &rounded
            && !m.is_zero()
        {
            let digits = i64::try_from(m.magnitude().to_str_radix(10).len()).unwrap_or(i64::MAX);
            if digits - i64::from(*s) > precision - scale {
                return Err(overflow_error(false));
            }
        }
        Ok(rounded)
    }

    /// numeric to int8 (rounding half away from zero): None out of range.
    pub fn to_i64(&self) -> Result<Option<i64>> {
        match self {
            Dec::NaN => Err(SqlError::new("0A000", "cannot convert NaN to integer")),
            Dec::Inf { .. } => Err(SqlError::new("0A000", "cannot convert infinity to integer")),
            Dec::Fin(..) => match self.round(0) {
                Dec::Fin(m, _) => Ok(m.to_i64()),
                _ => Ok(None),
            },
        }
    }

    /// The nearest double (through text, as PostgreSQL's strtod does).
    pub fn to_f64(&self) -> f64 {
        match self {
            Dec::NaN => f64::NAN,
            Dec::Inf { negative } => {
                if *negative {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            Dec::Fin(m, s) => format!("{m}e-{s}").parse().unwrap_or(f64::NAN),
        }
    }
}

/// generate_series(numeric, numeric[, numeric]) (generate_series_step_numeric):
/// start, start + step, ... while not past stop; 22023 for a NaN or
/// infinite argument or a zero step; 54000 past 100 million rows.
pub fn numeric_series(vals: &[Value]) -> Result<Vec<Value>> {
    let arg = |k: usize, what: &str| -> Result<Dec> {
        let d = Dec::of(&vals[k]).ok_or_else(overflow)?;
        match d {
            Dec::NaN => Err(SqlError::new("22023", format!("{what} cannot be NaN"))),
            Dec::Inf { .. } => Err(SqlError::new("22023", format!("{what} cannot be infinity"))),
            d => Ok(d),
        }
    };
    let (start, stop) = (arg(0, "start value")?, arg(1, "stop value")?);
    let step = if vals.len() > 2 { arg(2, "step size")? } else { Dec::Fin(BigInt::from(1), 0) };
    if step.signum() == 0 {
        return Err(SqlError::new("22023", "step size cannot equal zero"));
    }
    // Rows: floor((stop - start) / step) + 1, when not negative.
    let span = stop.sub(&start);
    let rows = match span.trunc_div(&step) {
        Dec::Fin(t, _) if span.signum() == 0 || span.signum() == step.signum() => t + 1u32,
        _ => BigInt::zero(),
    };
    if rows > BigInt::from(100_000_000u32) {
        return Err(SqlError::new("54000", "generate_series: too many rows"));
    }
    let mut out = Vec::new();
    let mut current = start;
    let mut k = BigInt::zero();
    while k < rows {
        out.push(current.clone().into_value()?);
        current = current.add(&step);
        k += 1u32;
    }
    Ok(out)
}

/// numeric_stddev_internal: from the count, the exact sum and sum of
/// squares, (N sumX2 - sumX^2) / (N (N - 1)) (or N^2) at select_div_scale,
/// its square root for stddev; NULL below two rows (one for _pop), NaN
/// after a NaN or an infinity, 0 when roundoff leaves nothing positive.
pub fn numeric_variance(n: i64, sum: &Dec, sum_sq: &Dec, special: bool, sample: bool, stddev: bool) -> Result<Value> {
    if n == 0 || (sample && n <= 1) {
        return Ok(Value::Null);
    }
    if special {
        return Ok(Value::NumericBig(NumericBig::nan()));
    }
    let count = Dec::Fin(BigInt::from(n), 0);
    let numerator = count.mul_exact(sum_sq).sub(&sum.mul_exact(sum));
    if numerator.signum() <= 0 {
        return Dec::zero().into_value();
    }
    let denominator = count.mul(&Dec::Fin(BigInt::from(if sample { n - 1 } else { n }), 0));
    let rscale = numerator.div_scale(&denominator);
    let variance = numerator.div_at(&denominator, rscale)?;
    if !stddev {
        return variance.into_value();
    }
    variance.sqrt_at(rscale).into_value()
}

/// A wide or special numeric without trailing fractional zeros, in the
/// form it then takes: values `compare` finds equal come out identical
/// (for hashing).
pub fn normalized(v: &Value) -> Value {
    match Dec::of(v) {
        Some(Dec::Fin(mut m, mut s)) => {
            let ten = BigInt::from(10u32);
            while s > 0 && (&m % &ten).is_zero() {
                m /= &ten;
                s -= 1;
            }
            Dec::Fin(m, s).into_value().unwrap_or(Value::Null)
        }
        _ => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s).and_then(std::result::Result::ok).unwrap_or_else(|| panic!("parse {s}"))
    }

    fn text(x: Dec) -> String {
        x.into_value().map(|v| v.to_string()).unwrap_or_else(|e| e.message)
    }

    #[test]
    fn parse_like_numeric_in() {
        assert_eq!(text(d(" 1.50 ")), "1.50");
        assert_eq!(text(d("-1e3")), "-1000");
        assert_eq!(text(d("1.5e-3")), "0.0015");
        assert_eq!(text(d(".5")), "0.5");
        assert_eq!(text(d("-InFiNiTy")), "-Infinity");
        assert_eq!(text(d("inf")), "Infinity");
        assert_eq!(text(d("NaN")), "NaN");
        assert!(Dec::parse("+nan").is_none());
        assert!(Dec::parse("1e").is_none());
        assert!(Dec::parse(".").is_none());
        assert!(matches!(Dec::parse("1e-16384"), Some(Err(_))));
        assert_eq!(text(d(&format!("1{}", "0".repeat(60)))), format!("1{}", "0".repeat(60)));
    }

    #[test]
    fn arithmetic_like_postgres() {
        assert_eq!(text(d("1").div(&d("3")).unwrap()), "0.33333333333333333333");
        assert_eq!(text(d("10").div(&d("4")).unwrap()), "2.5000000000000000");
        assert_eq!(
            text(d("99999999999999999999999999999999999999999").mul(&d("2"))),
            "199999999999999999999999999999999999999998"
        );
        assert_eq!(text(d("inf").add(&d("-inf"))), "NaN");
        assert_eq!(text(d("inf").mul(&d("0"))), "NaN");
        assert_eq!(text(d("5").div(&d("inf")).unwrap()), "0");
        assert!(d("inf").div(&d("0")).is_err());
        assert_eq!(text(d("-7.5").modulo(&d("2")).unwrap()), "-1.5");
        assert_eq!(text(d("64.5").round(-1)), "60");
        assert_eq!(text(d("-2.5").round(0)), "-3");
        assert_eq!(d("nan").total_cmp(&d("inf")), Ordering::Greater);
        assert_eq!(d("1.0").total_cmp(&d("1")), Ordering::Equal);
    }
}
