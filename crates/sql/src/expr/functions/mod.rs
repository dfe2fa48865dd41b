//! Function calls: the builtin scalar functions (lower, substr, round,
//! now, ...) here, the system functions in [`system`].

mod system;

use std::cmp::Ordering;

use pgtier_engine::{DataType, Numeric, Value};

use super::{Env, Expr, SubqueryRunner};
use crate::error::{Result, SqlError};
use crate::value::{self, ArithOp};

pub use system::{SeqFunc, SysFunc, oid_in};

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
    Repeat,
    SplitPart,
    Left,
    Right,
    Initcap,
    Translate,
    StartsWith,
    /// to_hex of an int4 (false) or int8 (true): two's complement of that width.
    ToHex(bool),
    ConcatWs,
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
        // concat_ws skips NULL arguments; only a NULL separator makes it NULL.
        Func::ConcatWs => {
            let Some(sep) = vals.first().filter(|v| !v.is_null()) else { return Ok(Value::Null) };
            let sep = text_arg(sep).unwrap_or("");
            let mut s = String::new();
            for (k, v) in vals[1..].iter().filter(|v| !v.is_null()).enumerate() {
                if k > 0 {
                    s.push_str(sep);
                }
                value::write_text(v, &mut s);
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
        // The C locale's case mapping (pgtier's collation, DESIGN.md §3):
        // ASCII letters only, as PostgreSQL's lower/upper/initcap under C.
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
        Func::Repeat => {
            let n = usize::try_from(int(1).max(0)).unwrap_or(0);
            if s0.len().saturating_mul(n) > TEXT_BYTES_MAX {
                return Err(SqlError::new("54000", "requested length too large"));
            }
            Value::Text(s0.repeat(n))
        }
        Func::SplitPart => split_part(s0, vals.get(1).and_then(text_arg).unwrap_or(""), int(2))?,
        Func::Left | Func::Right => {
            let chars: Vec<char> = s0.chars().collect();
            let len = i64::try_from(chars.len()).unwrap_or(i64::MAX);
            let n = int(1);
            // A negative count keeps all but that many from the other end.
            let keep = usize::try_from(if n >= 0 { n.min(len) } else { (len + n).max(0) }).unwrap_or(0);
            let taken: String = if f == Func::Left { chars[..keep].iter().collect() } else { chars[chars.len() - keep..].iter().collect() };
            Value::Text(taken)
        }
        Func::Initcap => {
            // Words are runs of letters and digits; under the C locale only
            // ASCII ones are (and change case).
            let mut out = String::with_capacity(s0.len());
            let mut in_word = false;
            for c in s0.chars() {
                out.push(if in_word { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() });
                in_word = c.is_ascii_alphanumeric();
            }
            Value::Text(out)
        }
        Func::Translate => {
            let from: Vec<char> = vals.get(1).and_then(text_arg).unwrap_or("").chars().collect();
            let to: Vec<char> = vals.get(2).and_then(text_arg).unwrap_or("").chars().collect();
            let out: String = s0
                .chars()
                .filter_map(|c| match from.iter().position(|&x| x == c) {
                    Some(i) => to.get(i).copied(),
                    None => Some(c),
                })
                .collect();
            Value::Text(out)
        }
        Func::StartsWith => Value::Bool(s0.starts_with(vals.get(1).and_then(text_arg).unwrap_or(""))),
        #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)]
        Func::ToHex(wide) => Value::Text(if wide { format!("{:x}", int(0) as u64) } else { format!("{:x}", int(0) as i32 as u32) }),
        Func::Now | Func::Concat | Func::ConcatWs | Func::Greatest | Func::Least | Func::Sys(_) => Value::Null,
    })
}

/// The longest text value PostgreSQL builds (1 GB less its header).
const TEXT_BYTES_MAX: usize = (1 << 30) - 5;

/// split_part: field `n` of `s` split at `delimiter`, counted from the end
/// when negative (PostgreSQL 14+); field 0 is an error.
fn split_part(s: &str, delimiter: &str, n: i64) -> Result<Value> {
    if n == 0 {
        return Err(SqlError::new("22023", "field position must not be zero"));
    }
    if delimiter.is_empty() {
        return Ok(Value::Text(if n == 1 || n == -1 { s.to_owned() } else { String::new() }));
    }
    let parts: Vec<&str> = s.split(delimiter).collect();
    let len = i64::try_from(parts.len()).unwrap_or(i64::MAX);
    let index = if n > 0 { n - 1 } else { len + n };
    Ok(Value::Text(usize::try_from(index).ok().and_then(|i| parts.get(i)).map_or(String::new(), |p| (*p).to_owned())))
}
