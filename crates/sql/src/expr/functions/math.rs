//! The mathematical functions beyond arithmetic: cbrt, exp, ln, log10,
//! sign, div, gcd, lcm, pi. exp, ln and log10 are Rust's (correctly
//! rounded where glibc's are, which PostgreSQL calls); cbrt is glibc's
//! algorithm, which is not correctly rounded (cbrt(27) is
//! 3.0000000000000004 in PostgreSQL on glibc). The numeric versions of
//! exp/ln/log are refused at bind.

use pgtier_engine::{Numeric, Value};

use super::Func;
use crate::error::{Result, SqlError};
use crate::value;

fn overflow() -> SqlError {
    SqlError::new("22003", "value out of range: overflow")
}

fn underflow() -> SqlError {
    SqlError::new("22003", "value out of range: underflow")
}

/// A float8 function of one argument with PostgreSQL's checks (float.c).
pub(super) fn float_fn(f: Func, x: f64) -> Result<f64> {
    let r = match f {
        Func::Cbrt => glibc_cbrt(x),
        Func::Exp => {
            let r = x.exp();
            if r.is_infinite() && x.is_finite() {
                return Err(overflow());
            }
            if r == 0.0 && x.is_finite() {
                return Err(underflow());
            }
            return Ok(r);
        }
        Func::Ln | Func::Log10 => {
            if x == 0.0 {
                return Err(SqlError::new("2201E", "cannot take logarithm of zero"));
            }
            if x < 0.0 {
                return Err(SqlError::new("2201E", "cannot take logarithm of a negative number"));
            }
            if f == Func::Ln { x.ln() } else { x.log10() }
        }
        _ => x,
    };
    if r.is_infinite() && x.is_finite() {
        return Err(overflow());
    }
    Ok(r)
}

/// sqrt(numeric), PostgreSQL's numeric_sqrt: at least 16 significant
/// digits and the input's scale, rounded half away from zero. Beyond the
/// 38 digits pgtier's numeric holds: 0A000.
pub(super) fn numeric_sqrt(n: Numeric) -> Result<Numeric> {
    if n.mantissa < 0 {
        return Err(SqlError::new("2201F", "cannot take square root of a negative number"));
    }
    let too_wide = || SqlError::unsupported("sqrt(numeric) with more than 38 digits");
    let m = n.mantissa.unsigned_abs();
    let digits = if m == 0 { 1 } else { i64::from(m.ilog10()) + 1 };
    // PostgreSQL's weight counts base-10000 digits.
    let weight = if m == 0 { 0 } else { (digits - 1 - i64::from(n.scale)).div_euclid(4) };
    let rscale = (16 - (2 * weight + 1)).max(i64::from(n.scale)).clamp(0, 1000);
    let up = u32::try_from(2 * (rscale + 1) - i64::from(n.scale)).map_err(|_| too_wide())?;
    let wide = m.checked_mul(10u128.checked_pow(up).ok_or_else(too_wide)?).ok_or_else(too_wide)?;
    // One digit past rscale, then rounded: the true root is never exactly half.
    let root = (wide.isqrt() + 5) / 10;
    let scale = u8::try_from(rscale).map_err(|_| too_wide())?;
    if root.checked_ilog10().unwrap_or(0) >= 38 {
        return Err(too_wide());
    }
    Ok(Numeric::new(i128::try_from(root).map_err(|_| too_wide())?, scale))
}

/// power(float8, float8), PostgreSQL's dpow: NaN and infinities decided
/// here, not by pow() (POSIX's answers), and its SQLSTATEs.
pub(super) fn dpow(x: f64, y: f64) -> Result<f64> {
    let invalid = |m: &str| SqlError::new("2201F", m.to_owned());
    if x.is_nan() {
        return Ok(if y.is_nan() || y != 0.0 { f64::NAN } else { 1.0 });
    }
    if y.is_nan() {
        return Ok(if x == 1.0 { 1.0 } else { f64::NAN });
    }
    if x == 0.0 && y < 0.0 {
        return Err(invalid("zero raised to a negative power is undefined"));
    }
    if x < 0.0 && y.floor() != y {
        return Err(invalid("a negative number raised to a non-integer power yields a complex result"));
    }
    let above_one = x.abs() > 1.0;
    if y.is_infinite() {
        return Ok(match (x.abs() == 1.0, y > 0.0) {
            (true, _) => 1.0,
            (false, true) => {
                if above_one {
                    y
                } else {
                    0.0
                }
            }
            (false, false) => {
                if above_one {
                    0.0
                } else {
                    -y
                }
            }
        });
    }
    if x.is_infinite() {
        if y == 0.0 {
            return Ok(1.0);
        }
        if x > 0.0 {
            return Ok(if y > 0.0 { x } else { 0.0 });
        }
        // The sign follows whether y is an odd integer (it is an integer: checked above).
        let odd = (y / 2.0).floor() != y / 2.0;
        return Ok(match (y > 0.0, odd) {
            (true, true) => x,
            (true, false) => -x,
            (false, true) => -0.0,
            (false, false) => 0.0,
        });
    }
    let r = x.powf(y);
    if r.is_nan() {
        // Only old libms get here (|y| > 2^63); PostgreSQL's fallback.
        if x == 0.0 {
            return Ok(0.0);
        }
        if x.abs() == 1.0 {
            return Ok(1.0);
        }
        return Err(if (y >= 0.0) == above_one { overflow() } else { underflow() });
    }
    if r.is_infinite() {
        return Err(overflow());
    }
    if r == 0.0 && x != 0.0 {
        return Err(underflow());
    }
    Ok(r)
}

/// glibc's cbrt (sysdeps/ieee754/dbl-64/s_cbrt.c): a polynomial guess
/// on the mantissa, one Halley step, the exponent's third. The constants
/// are glibc's as written (each rounds to the same double).
#[allow(clippy::excessive_precision)]
fn glibc_cbrt(x: f64) -> f64 {
    const CBRT2: f64 = 1.259_921_049_894_873_164_8;
    const SQR_CBRT2: f64 = 1.587_401_051_968_199_474_8;
    const FACTOR: [f64; 5] = [1.0 / SQR_CBRT2, 1.0 / CBRT2, 1.0, CBRT2, SQR_CBRT2];
    if x == 0.0 || !x.is_finite() {
        return x + x;
    }
    let (xm, xe) = frexp(x.abs());
    let u = 0.354_895_765_043_919_86
        + ((1.508_191_937_815_848_96
            + ((-2.114_994_941_673_712_87
                + ((2.446_931_225_635_344_3
                    + ((-1.834_692_774_836_130_86
                        + (0.784_932_344_976_639_262 - 0.145_263_899_385_486_377 * xm) * xm)
                        * xm))
                    * xm))
                * xm))
            * xm);
    let t2 = u * u * u;
    // C's % and / truncate toward zero, as Rust's do.
    let ym = u * (t2 + 2.0 * xm) / (2.0 * t2 + xm) * FACTOR[usize::try_from(2 + xe % 3).unwrap_or(2)];
    let r = ym * 2f64.powi(xe / 3);
    if x < 0.0 { -r } else { r }
}

/// frexp: (m, e) with x = m * 2^e and 0.5 <= |m| < 1, for finite nonzero x.
fn frexp(x: f64) -> (f64, i32) {
    let bits = x.to_bits();
    let exp = i32::try_from((bits >> 52) & 0x7ff).unwrap_or(0);
    if exp == 0 {
        let (m, e) = frexp(x * 2f64.powi(54));
        return (m, e - 54);
    }
    (f64::from_bits((bits & !(0x7ff_u64 << 52)) | (1022_u64 << 52)), exp - 1022)
}

/// sign of a float8 or numeric (numeric: -1, 0 or 1 at scale 0).
pub(super) fn sign(v: &Value) -> Value {
    match v {
        Value::Numeric(n) => Value::Numeric(Numeric::new(n.mantissa.signum(), 0)),
        other => {
            let x = value::to_f64(other).unwrap_or(f64::NAN);
            // NaN is neither above nor below zero: 0, as PostgreSQL's dsign.
            Value::Float8(if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            })
        }
    }
}

fn numeric_overflow() -> SqlError {
    SqlError::new("22003", "value overflows numeric format")
}

/// Two numerics at one scale: (mantissa, mantissa, scale).
fn common_scale(a: Numeric, b: Numeric) -> Result<(i128, i128, u8)> {
    let s = a.scale.max(b.scale);
    let at = |n: Numeric| n.rescale(s).map(|r| r.mantissa).ok_or_else(numeric_overflow);
    Ok((at(a)?, at(b)?, s))
}

/// div(y, x): the integer quotient, truncated toward zero (numeric, scale 0).
pub(super) fn div(a: &Value, b: &Value) -> Result<Value> {
    let (Some(a), Some(b)) = (value::to_numeric(a), value::to_numeric(b)) else { return Ok(Value::Null) };
    let (x, y, _) = common_scale(a, b)?;
    if y == 0 {
        return Err(SqlError::division_by_zero());
    }
    Ok(Value::Numeric(Numeric::new(x / y, 0)))
}

fn gcd_u128(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// gcd / lcm of two integers of `ty` (int4, int8) or two numerics.
pub(super) fn gcd_lcm(lcm: bool, a: &Value, b: &Value) -> Result<Value> {
    match (a, b) {
        (Value::Numeric(_), _) | (_, Value::Numeric(_)) => {
            let (Some(a), Some(b)) = (value::to_numeric(a), value::to_numeric(b)) else { return Ok(Value::Null) };
            let (x, y, s) = common_scale(a, b)?;
            let g = gcd_u128(x.unsigned_abs(), y.unsigned_abs());
            let m = match (lcm, x.unsigned_abs().checked_div(g)) {
                (false, _) => g,
                (true, None) => 0,
                (true, Some(q)) => q.checked_mul(y.unsigned_abs()).ok_or_else(numeric_overflow)?,
            };
            Ok(Value::Numeric(Numeric::new(i128::try_from(m).map_err(|_| numeric_overflow())?, s)))
        }
        _ => {
            let wide = matches!(a, Value::Int8(_)) || matches!(b, Value::Int8(_));
            let (x, y) = (a.as_i64().unwrap_or(0), b.as_i64().unwrap_or(0));
            let g = gcd_u128(u128::from(x.unsigned_abs()), u128::from(y.unsigned_abs()));
            let m = match (lcm, u128::from(x.unsigned_abs()).checked_div(g)) {
                (false, _) => g,
                (true, None) => 0,
                (true, Some(q)) => q * u128::from(y.unsigned_abs()),
            };
            // The one result that does not fit is the type's minimum's absolute value.
            if wide {
                i64::try_from(m).map(Value::Int8).map_err(|_| SqlError::out_of_range("bigint"))
            } else {
                i32::try_from(m).map(Value::Int4).map_err(|_| SqlError::out_of_range("integer"))
            }
        }
    }
}

/// scale / min_scale / trim_scale / float4send / float8send / sinh / cosh / tanh of a non-NULL value.
pub(super) fn scale_or_send(f: Func, v: &Value) -> Result<Value> {
    let digits = |n: i32| Value::Int4(n);
    Ok(match (f, v) {
        (Func::Scale, Value::Numeric(n)) => digits(i32::from(n.scale)),
        (Func::MinScale, Value::Numeric(n)) => digits(i32::from(trimmed(n.mantissa, n.scale).1)),
        (Func::TrimScale, Value::Numeric(n)) => {
            let (m, s) = trimmed(n.mantissa, n.scale);
            Value::Numeric(pgtier_engine::Numeric::new(m, s))
        }
        (Func::Float4Send, Value::Float4(x)) => Value::Bytea(x.to_be_bytes().to_vec()),
        (Func::Float8Send, Value::Float8(x)) => Value::Bytea(x.to_be_bytes().to_vec()),
        // dsinh: an overflow is the infinity of the argument's sign (libm's already is).
        (Func::Sinh, Value::Float8(x)) => Value::Float8(x.sinh()),
        (Func::Cosh, Value::Float8(x)) => {
            let r = x.cosh();
            if r == 0.0 {
                return Err(SqlError::new("22003", "value out of range: underflow"));
            }
            Value::Float8(r)
        }
        (Func::Tanh, Value::Float8(x)) => {
            let r = x.tanh();
            if r.is_infinite() {
                return Err(SqlError::new("22003", "value out of range: overflow"));
            }
            Value::Float8(r)
        }
        _ => return Err(SqlError::new("XX000", "numeric function given another type")),
    })
}

/// The value without trailing fractional zeros: (mantissa, scale).
fn trimmed(mut m: i128, mut scale: u8) -> (i128, u8) {
    while scale > 0 && m % 10 == 0 {
        m /= 10;
        scale -= 1;
    }
    (m, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbrt_is_glibc_s() {
        assert_eq!(glibc_cbrt(27.0), 3.000_000_000_000_000_4);
        assert_eq!(glibc_cbrt(-8.0), -2.0);
        assert_eq!(glibc_cbrt(0.125), 0.499_999_999_999_999_94);
        assert_eq!(glibc_cbrt(1e-310), glibc_cbrt(1e-310 * 8.0) / 2.0);
    }

    #[test]
    fn gcd_lcm_edges() {
        assert_eq!(gcd_lcm(false, &Value::Int4(i32::MIN), &Value::Int4(6)).unwrap(), Value::Int4(2));
        assert!(gcd_lcm(false, &Value::Int4(i32::MIN), &Value::Int4(0)).is_err());
        assert_eq!(gcd_lcm(true, &Value::Int4(4), &Value::Int4(-6)).unwrap(), Value::Int4(12));
        assert_eq!(gcd_lcm(true, &Value::Int8(0), &Value::Int8(5)).unwrap(), Value::Int8(0));
    }
}
