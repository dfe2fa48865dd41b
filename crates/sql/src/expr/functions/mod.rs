//! Function calls: the builtin scalar functions (lower, substr, round,
//! now, ...) here, the system functions in [`system`].

mod system;

use std::cmp::Ordering;

use pgtier_engine::{DataType, Numeric, Value};

use super::{Env, Expr, SubqueryRunner};
use crate::error::{Result, SqlError};
use crate::value::{self, ArithOp};

pub use system::{SeqFunc, SysFunc};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Lower,
    Upper,
    Length,
    Substr,
    Lpad,
    Rpad,
    Abs,
    Round,
    Now,
    Btrim,
    Ltrim,
    Rtrim,
    Mod,
    Ceil,
    Floor,
    Concat,
    Replace,
    Position,
    Greatest,
    Least,
    /// A system function ([`SysFunc`]).
    Sys(SysFunc),
}

fn text_arg(v: &Value) -> Option<&str> {
    match v {
        Value::Text(s) => Some(s),
        _ => None,
    }
}

pub(super) fn eval_func(f: Func, args: &[Expr], env: &Env<'_>, sq: &mut dyn SubqueryRunner, row: &[Value]) -> Result<Value> {
    if let Func::Sys(s) = f {
        return system::eval(s, args, env, sq, row);
    }
    if f == Func::Now {
        return Ok(Value::TimestampTz(env.now_micros));
    }
    let mut vals = Vec::with_capacity(args.len());
    for a in args {
        vals.push(a.eval(env, sq, row)?);
    }
    match f {
        Func::Concat => {
            let mut s = String::new();
            for v in &vals {
                if !v.is_null() {
                    value::write_text(v, &mut s);
                }
            }
            return Ok(Value::Text(s));
        }
        Func::Greatest | Func::Least => {
            let mut best: Option<Value> = None;
            for v in vals.into_iter().filter(|v| !v.is_null()) {
                let better = match &best {
                    None => true,
                    Some(b) => {
                        let o = value::sort_cmp(&v, b);
                        if f == Func::Greatest { o == Ordering::Greater } else { o == Ordering::Less }
                    }
                };
                if better {
                    best = Some(v);
                }
            }
            return Ok(best.unwrap_or(Value::Null));
        }
        _ => {}
    }
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let int = |i: usize| vals.get(i).and_then(Value::as_i64).unwrap_or(0);
    let s0 = vals.first().and_then(text_arg).unwrap_or("");
    Ok(match f {
        // The C locale's ctype, as pgtier's text order is C's: only ASCII
        // letters change case (PostgreSQL under LC_CTYPE=C: upper('é') = 'é').
        Func::Lower => Value::Text(s0.to_ascii_lowercase()),
        Func::Upper => Value::Text(s0.to_ascii_uppercase()),
        Func::Length => Value::Int4(i32::try_from(s0.chars().count()).unwrap_or(i32::MAX)),
        Func::Substr => {
            let start = int(1);
            let (from, to) = if vals.len() > 2 {
                let len = int(2);
                if len < 0 {
                    return Err(SqlError::new("22011", "negative substring length not allowed"));
                }
                (start, start.saturating_add(len))
            } else {
                (start, i64::MAX)
            };
            let from = from.max(1);
            if to <= from {
                return Ok(Value::Text(String::new()));
            }
            let skip = usize::try_from(from - 1).unwrap_or(usize::MAX);
            let take = usize::try_from(to - from).unwrap_or(usize::MAX);
            Value::Text(s0.chars().skip(skip).take(take).collect())
        }
        Func::Lpad | Func::Rpad => {
            let len = usize::try_from(int(1).max(0)).unwrap_or(0);
            let fill: Vec<char> = match vals.get(2) {
                Some(v) => text_arg(v).unwrap_or(" ").chars().collect(),
                None => vec![' '],
            };
            let chars: Vec<char> = s0.chars().collect();
            if chars.len() >= len || fill.is_empty() {
                return Ok(Value::Text(chars.iter().take(len).collect()));
            }
            let pad: String = fill.iter().cycle().take(len - chars.len()).collect();
            let body: String = chars.iter().collect();
            Value::Text(if f == Func::Lpad { pad + &body } else { body + &pad })
        }
        Func::Btrim | Func::Ltrim | Func::Rtrim => {
            let set: Vec<char> = match vals.get(1) {
                Some(v) => text_arg(v).unwrap_or(" ").chars().collect(),
                None => vec![' '],
            };
            let t = match f {
                Func::Btrim => s0.trim_matches(|c| set.contains(&c)),
                Func::Ltrim => s0.trim_start_matches(|c| set.contains(&c)),
                _ => s0.trim_end_matches(|c| set.contains(&c)),
            };
            Value::Text(t.to_owned())
        }
        Func::Replace => {
            let from = vals.get(1).and_then(text_arg).unwrap_or("");
            let to = vals.get(2).and_then(text_arg).unwrap_or("");
            Value::Text(if from.is_empty() { s0.to_owned() } else { s0.replace(from, to) })
        }
        Func::Position => {
            // position(sub IN s): args are (sub, s).
            let hay = vals.get(1).and_then(text_arg).unwrap_or("");
            let pos = hay.find(s0).map_or(0, |b| hay[..b].chars().count() + 1);
            Value::Int4(i32::try_from(pos).unwrap_or(0))
        }
        Func::Abs => match &vals[0] {
            Value::Int2(x) => Value::Int2(x.checked_abs().ok_or_else(|| SqlError::out_of_range("smallint"))?),
            Value::Int4(x) => Value::Int4(x.checked_abs().ok_or_else(|| SqlError::out_of_range("integer"))?),
            Value::Int8(x) => Value::Int8(x.checked_abs().ok_or_else(|| SqlError::out_of_range("bigint"))?),
            Value::Numeric(n) => Value::Numeric(Numeric::new(n.mantissa.abs(), n.scale)),
            Value::Float4(x) => Value::Float4(x.abs()),
            Value::Float8(x) => Value::Float8(x.abs()),
            other => return Err(SqlError::undefined_function(&format!("abs({})", value::value_type_name(other)))),
        },
        Func::Round => match &vals[0] {
            Value::Float8(x) => Value::Float8(x.round_ties_even()),
            Value::Numeric(n) => Value::Numeric(value::round_numeric(*n, if vals.len() > 1 { int(1) } else { 0 })?),
            other => return Err(SqlError::undefined_function(&format!("round({})", value::value_type_name(other)))),
        },
        Func::Ceil | Func::Floor => match &vals[0] {
            Value::Float8(x) => Value::Float8(if f == Func::Ceil { x.ceil() } else { x.floor() }),
            Value::Numeric(n) => {
                let t = n.rescale(0).map(|r| r.mantissa).unwrap_or(0);
                let back = Numeric::new(t, 0);
                let cmp = value::numeric_cmp(back, *n);
                let m = match (f, cmp) {
                    (Func::Ceil, Ordering::Less) => t + 1,
                    (Func::Floor, Ordering::Greater) => t - 1,
                    _ => t,
                };
                Value::Numeric(Numeric::new(m, 0))
            }
            other => return Err(SqlError::undefined_function(&format!("ceil({})", value::value_type_name(other)))),
        },
        Func::Mod => {
            let ty = match (&vals[0], &vals[1]) {
                (Value::Numeric(_), _) | (_, Value::Numeric(_)) => value::NUMERIC_ANY,
                (Value::Int8(_), _) | (_, Value::Int8(_)) => DataType::Int8,
                (Value::Int4(_), _) | (_, Value::Int4(_)) => DataType::Int4,
                _ => DataType::Int2,
            };
            value::arith(ArithOp::Mod, &vals[0], &vals[1], ty)?
        }
        Func::Now | Func::Concat | Func::Greatest | Func::Least | Func::Sys(_) => Value::Null,
    })
}

