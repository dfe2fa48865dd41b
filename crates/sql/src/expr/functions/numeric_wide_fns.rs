//! Numeric functions of wide or special values (NaN, ±Infinity), with
//! PostgreSQL's (numeric.c) semantics: what the i128 form's paths in
//! mod.rs and math.rs cannot hold comes here.

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{Signed, Zero};
use pgtier_engine::Value;

use crate::error::{Result, SqlError};
use crate::value::{self, Dec};

/// The numeric functions this module evaluates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wide {
    Abs,
    Sign,
    Round,
    Trunc,
    Ceil,
    Floor,
    Div,
    Gcd,
    Lcm,
    Scale,
    MinScale,
    TrimScale,
    Sqrt,
    Power,
    Exp,
    Ln,
    Log10,
}

/// `f`'s value when an argument is a wide, NaN or infinite numeric; None
/// to leave it to the i128 form.
pub(super) fn eval_if_wide(f: Wide, vals: &[Value]) -> Option<Result<Value>> {
    if vals.iter().any(|v| matches!(v, Value::NumericBig(_))) { eval(f, vals) } else { None }
}

/// The function's value over numeric arguments of any width; None when
/// the first argument is not a number.
pub(super) fn eval(f: Wide, vals: &[Value]) -> Option<Result<Value>> {
    let arg = |i: usize| vals.get(i).and_then(Dec::of);
    let int = |i: usize| vals.get(i).and_then(Value::as_i64).unwrap_or(0);
    let x = arg(0)?;
    let out = |d: Dec| Some(d.into_value());
    match f {
        Wide::Abs => out(if x.signum() < 0 { x.neg() } else { x }),
        Wide::Sign => out(match x {
            Dec::NaN => Dec::NaN,
            _ => Dec::Fin(BigInt::from(x.signum()), 0),
        }),
        Wide::Round => out(x.round(if vals.len() > 1 { int(1) } else { 0 })),
        Wide::Trunc => out(x.trunc(if vals.len() > 1 { int(1) } else { 0 })),
        Wide::Ceil | Wide::Floor => out(match &x {
            Dec::Fin(..) => {
                let t = x.trunc(0);
                let below = x.total_cmp(&t);
                match (f, below) {
                    (Wide::Ceil, std::cmp::Ordering::Greater) => t.add(&Dec::Fin(BigInt::from(1), 0)),
                    (Wide::Floor, std::cmp::Ordering::Less) => t.sub(&Dec::Fin(BigInt::from(1), 0)),
                    _ => t,
                }
            }
            _ => x,
        }),
        Wide::Div => Some(div_trunc(&x, &arg(1)?).and_then(Dec::into_value)),
        Wide::Gcd | Wide::Lcm => Some(gcd_lcm(f == Wide::Lcm, &x, &arg(1)?).and_then(Dec::into_value)),
        Wide::Scale | Wide::MinScale => Some(Ok(match &x {
            Dec::Fin(m, s) => {
                Value::Int4(i32::try_from(if f == Wide::Scale { *s } else { trimmed(m, *s).1 }).unwrap_or(i32::MAX))
            }
            _ => Value::Null,
        })),
        Wide::TrimScale => out(match &x {
            Dec::Fin(m, s) => {
                let (m, s) = trimmed(m, *s);
                Dec::Fin(m, s)
            }
            _ => x,
        }),
        Wide::Sqrt => Some(sqrt(&x).and_then(Dec::into_value)),
        Wide::Power => Some(value::numeric_transcendental::power(&x, &arg(1)?).and_then(Dec::into_value)),
        Wide::Exp => Some(value::numeric_transcendental::exp(&x).and_then(Dec::into_value)),
        Wide::Ln => Some(value::numeric_transcendental::ln(&x).and_then(Dec::into_value)),
        // log(x) is log(10, x); log(b, x) binds to the same function.
        Wide::Log10 if vals.len() == 2 => {
            Some(value::numeric_transcendental::log(&x, &arg(1)?).and_then(Dec::into_value))
        }
        Wide::Log10 => {
            Some(value::numeric_transcendental::log(&Dec::Fin(BigInt::from(10), 0), &x).and_then(Dec::into_value))
        }
    }
}

/// numeric_fac: n! exactly; 22003 for a negative n or one past 32177
/// (a result beyond numeric's digits).
pub(super) fn factorial(n: i64) -> Result<Value> {
    if n < 0 {
        return Err(SqlError::new("22003", "factorial of a negative number is undefined"));
    }
    if n > 32177 {
        return Err(SqlError::new("22003", "value overflows numeric format"));
    }
    let mut r = BigInt::from(1u32);
    for k in 2..=n {
        r *= k;
    }
    Dec::Fin(r, 0).into_value()
}

/// The value without trailing fractional zeros.
fn trimmed(m: &BigInt, mut s: u32) -> (BigInt, u32) {
    let ten = BigInt::from(10u32);
    let mut m = m.clone();
    while s > 0 && (&m % &ten).is_zero() {
        m /= &ten;
        s -= 1;
    }
    (m, s)
}

/// div(x, y): the quotient truncated toward zero, scale 0 (numeric_div_trunc).
fn div_trunc(x: &Dec, y: &Dec) -> Result<Dec> {
    match (x, y) {
        (Dec::NaN, _) | (_, Dec::NaN) | (Dec::Inf { .. }, Dec::Inf { .. }) => Ok(Dec::NaN),
        (Dec::Inf { .. }, _) => match y.signum() {
            0 => Err(SqlError::division_by_zero()),
            s => Ok(Dec::Inf { negative: x.signum() * s < 0 }),
        },
        (_, Dec::Inf { .. }) => Ok(Dec::zero()),
        (Dec::Fin(..), Dec::Fin(b, _)) => {
            if b.is_zero() {
                return Err(SqlError::division_by_zero());
            }
            let s = x.scale().max(y.scale());
            let (Dec::Fin(p, _), Dec::Fin(q, _)) = (x.round(i64::from(s)), y.round(i64::from(s))) else {
                return Ok(Dec::NaN);
            };
            Ok(Dec::Fin(p / q, 0))
        }
    }
}

/// gcd / lcm of numerics: NaN for any special; at the larger scale.
fn gcd_lcm(lcm: bool, x: &Dec, y: &Dec) -> Result<Dec> {
    let s = x.scale().max(y.scale());
    let (Dec::Fin(p, _), Dec::Fin(q, _)) = (x.round(i64::from(s)), y.round(i64::from(s))) else { return Ok(Dec::NaN) };
    let g = p.gcd(&q);
    if !lcm {
        return Ok(Dec::Fin(g, s));
    }
    if p.is_zero() || q.is_zero() {
        return Ok(Dec::Fin(BigInt::zero(), s));
    }
    Ok(Dec::Fin((p / &g * q).abs(), s))
}

/// numeric_sqrt: at least 16 significant digits and the argument's scale,
/// correctly rounded (half away from zero).
fn sqrt(x: &Dec) -> Result<Dec> {
    let negative = || SqlError::new("2201F", "cannot take square root of a negative number");
    let (m, s) = match x {
        Dec::NaN => return Ok(Dec::NaN),
        Dec::Inf { negative: false } => return Ok(x.clone()),
        Dec::Inf { negative: true } => return Err(negative()),
        Dec::Fin(m, s) => (m, *s),
    };
    if m.is_negative() {
        return Err(negative());
    }
    // PostgreSQL's weight counts base-10000 digits; sweight = 2 * weight + 1.
    let digits = if m.is_zero() { 1 } else { i64::try_from(m.to_str_radix(10).len()).unwrap_or(i64::MAX) };
    let weight = if m.is_zero() { 0 } else { (digits - 1 - i64::from(s)).div_euclid(4) };
    let rscale = (16 - (2 * weight + 1)).max(i64::from(s)).clamp(0, 1000);
    let rscale = u32::try_from(rscale).unwrap_or(0);
    // N = x * 10^(2 rscale): root r = floor(sqrt(N)), rounded up when
    // N >= (r + 1/2)^2, i.e. 4N >= (2r + 1)^2.
    let n = m * BigInt::from(10u32).pow(2 * rscale - s.min(2 * rscale))
        / BigInt::from(10u32).pow(s.saturating_sub(2 * rscale));
    let r = n.sqrt();
    let twice = &r * 2u32 + 1u32;
    let r = if n * 4u32 >= &twice * &twice { r + 1u32 } else { r };
    Ok(Dec::Fin(r, rscale))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> Value {
        value::parse_input(s, value::NUMERIC_ANY).unwrap()
    }

    fn call(f: Wide, args: &[&str]) -> String {
        let vals: Vec<Value> = args.iter().map(|a| num(a)).collect();
        match eval(f, &vals) {
            Some(Ok(v)) => v.to_string(),
            Some(Err(e)) => e.sqlstate.to_string(),
            None => "none".into(),
        }
    }

    #[test]
    fn like_postgres() {
        assert_eq!(call(Wide::Sqrt, &["2"]), "1.414213562373095");
        assert_eq!(call(Wide::Sqrt, &["NaN"]), "NaN");
        assert_eq!(call(Wide::Sqrt, &["-Infinity"]), "2201F");
        assert_eq!(call(Wide::Abs, &["-Infinity"]), "Infinity");
        assert_eq!(call(Wide::Sign, &["-Infinity"]), "-1");
        assert_eq!(call(Wide::Ceil, &["-1.5"]), "-1");
        assert_eq!(call(Wide::Floor, &["-1.5"]), "-2");
        assert_eq!(call(Wide::Div, &["Infinity", "0"]), "22012");
        assert_eq!(call(Wide::Gcd, &["12.5", "7.50"]), "2.50");
        assert_eq!(call(Wide::Lcm, &["4", "-6"]), "12");
        assert_eq!(call(Wide::Scale, &["NaN"]), "null");
        assert_eq!(call(Wide::TrimScale, &["1.500"]), "1.5");
        assert_eq!(factorial(25).unwrap().to_string(), "15511210043330985984000000");
        assert_eq!(factorial(0).unwrap().to_string(), "1");
        assert_eq!(factorial(-4).unwrap_err().sqlstate, "22003");
        assert_eq!(factorial(32178).unwrap_err().sqlstate, "22003");
    }
}
