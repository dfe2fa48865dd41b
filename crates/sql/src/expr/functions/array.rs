//! The array functions and operators on real arrays (`Value::Array`),
//! with PostgreSQL's NULL rules: most are strict, while `||`,
//! array_append/prepend/cat take a NULL array as empty, and the element
//! searches (array_position, array_remove, ...) find NULL elements with IS
//! NOT DISTINCT FROM. Bounds are always 1 (see `crate::value::array`).

use std::cmp::Ordering;

use pgtier_engine::Value;

use crate::error::{Result, SqlError};
use crate::expr::CmpOp;
use crate::value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayFunc {
    /// `x op ANY (array)` (false) or `x op ALL (array)` (true).
    Any(CmpOp, bool),
    /// `ARRAY[a, b, ...]`.
    Make,
    /// `a[i]`.
    Subscript,
    /// `a[i:j]`: whether the lower and the upper bound are given (the
    /// arguments hold only the given ones).
    Slice(bool, bool),
    /// array_cat and `array || array`.
    Cat,
    Append,
    Prepend,
    Cardinality,
    Ndims,
    Dims,
    /// array_length / array_lower / array_upper (array, dimension).
    Length,
    Lower,
    Upper,
    Position,
    Positions,
    Remove,
    Replace,
    ToString,
    StringToArray,
    /// `@>`.
    Contains,
    /// `<@`.
    ContainedBy,
    /// `&&`.
    Overlap,
}

impl ArrayFunc {
    /// Functions that are not NULL when an argument is.
    pub fn is_strict(self) -> bool {
        !matches!(
            self,
            ArrayFunc::Any(..)
                | ArrayFunc::Make
                | ArrayFunc::Cat
                | ArrayFunc::Append
                | ArrayFunc::Prepend
                | ArrayFunc::Position
                | ArrayFunc::Positions
                | ArrayFunc::Remove
                | ArrayFunc::Replace
                | ArrayFunc::ToString
                | ArrayFunc::StringToArray
        )
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(items) => items,
        _ => &[],
    }
}

fn int_arg(v: Option<&Value>) -> Option<i64> {
    v.and_then(Value::as_i64)
}

fn count(n: usize) -> Value {
    Value::Int4(i32::try_from(n).unwrap_or(i32::MAX))
}

/// Equal in the sense of `=` (NULL equals nothing).
fn equal(a: &Value, b: &Value) -> bool {
    value::compare(a, b) == Some(Ordering::Equal)
}

/// IS NOT DISTINCT FROM.
fn not_distinct(a: &Value, b: &Value) -> bool {
    match (a.is_null(), b.is_null()) {
        (true, true) => true,
        (false, false) => equal(a, b),
        _ => false,
    }
}

pub(super) fn eval(f: ArrayFunc, vals: Vec<Value>) -> Result<Value> {
    if f.is_strict() && vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let arg = |k: usize| vals.get(k).unwrap_or(&Value::Null);
    Ok(match f {
        ArrayFunc::Any(op, all) => any(op, all, arg(0), arg(1)),
        ArrayFunc::Make => Value::Array(vals),
        ArrayFunc::Subscript => {
            let a = items(arg(0));
            match int_arg(vals.get(1)).and_then(|i| usize::try_from(i).ok()).filter(|i| *i >= 1) {
                Some(i) => a.get(i - 1).cloned().unwrap_or(Value::Null),
                None => Value::Null,
            }
        }
        ArrayFunc::Slice(has_lo, has_hi) => slice(&vals, has_lo, has_hi),
        ArrayFunc::Cat => match (arg(0), arg(1)) {
            (Value::Null, b) => b.clone(),
            (a, Value::Null) => a.clone(),
            (a, b) => Value::Array(items(a).iter().chain(items(b)).cloned().collect()),
        },
        ArrayFunc::Append => {
            let mut out = items(arg(0)).to_vec();
            out.push(arg(1).clone());
            Value::Array(out)
        }
        ArrayFunc::Prepend => {
            let mut out = vec![arg(0).clone()];
            out.extend_from_slice(items(arg(1)));
            Value::Array(out)
        }
        ArrayFunc::Cardinality => count(items(arg(0)).len()),
        ArrayFunc::Ndims | ArrayFunc::Dims | ArrayFunc::Length | ArrayFunc::Lower | ArrayFunc::Upper => dims(f, &vals),
        ArrayFunc::Position | ArrayFunc::Positions => position(f, &vals)?,
        ArrayFunc::Remove | ArrayFunc::Replace => remove_or_replace(f, &vals),
        ArrayFunc::ToString => to_string(&vals),
        ArrayFunc::StringToArray => string_to_array(&vals),
        ArrayFunc::Contains => Value::Bool(contains(items(arg(0)), items(arg(1)))),
        ArrayFunc::ContainedBy => Value::Bool(contains(items(arg(1)), items(arg(0)))),
        ArrayFunc::Overlap => Value::Bool(items(arg(0)).iter().any(|x| items(arg(1)).iter().any(|y| equal(x, y)))),
    })
}

/// `a[lo:hi]`: clamped to the array, renumbered from 1.
fn slice(vals: &[Value], has_lo: bool, has_hi: bool) -> Value {
    let arg = |k: usize| vals.get(k).unwrap_or(&Value::Null);
    let a = items(arg(0));
    let len = i64::try_from(a.len()).unwrap_or(i64::MAX);
    let mut k = 1;
    let lo = if has_lo {
        k += 1;
        int_arg(vals.get(k - 1)).unwrap_or(1)
    } else {
        1
    };
    let hi = if has_hi { int_arg(vals.get(k)).unwrap_or(len) } else { len };
    let (lo, hi) = (lo.max(1), hi.min(len));
    if lo > hi {
        Value::Array(Vec::new())
    } else {
        let (lo, hi) = (usize::try_from(lo - 1).unwrap_or(0), usize::try_from(hi).unwrap_or(0));
        Value::Array(a[lo..hi].to_vec())
    }
}

/// array_ndims, array_dims, array_length / lower / upper of dimension 1.
fn dims(f: ArrayFunc, vals: &[Value]) -> Value {
    let arg = |k: usize| vals.get(k).unwrap_or(&Value::Null);
    let n = items(arg(0)).len();
    let first_dim = matches!(f, ArrayFunc::Ndims | ArrayFunc::Dims) || int_arg(vals.get(1)) == Some(1);
    if n == 0 || !first_dim {
        return Value::Null;
    }
    match f {
        ArrayFunc::Ndims | ArrayFunc::Lower => Value::Int4(1),
        ArrayFunc::Dims => Value::Text(format!("[1:{n}]")),
        _ => count(n),
    }
}

/// array_position(s): IS NOT DISTINCT FROM, from an optional start.
fn position(f: ArrayFunc, vals: &[Value]) -> Result<Value> {
    let arg = |k: usize| vals.get(k).unwrap_or(&Value::Null);
    if arg(0).is_null() {
        return Ok(Value::Null);
    }
    let start = match vals.get(2) {
        None => 1,
        Some(Value::Null) => return Err(SqlError::new("22004", "initial position must not be null")),
        Some(v) => v.as_i64().unwrap_or(1),
    };
    let a = items(arg(0));
    let found = a
        .iter()
        .enumerate()
        .filter(|(i, e)| i64::try_from(*i).unwrap_or(i64::MAX) + 1 >= start && not_distinct(e, arg(1)));
    Ok(if f == ArrayFunc::Positions {
        Value::Array(found.map(|(i, _)| count(i + 1)).collect())
    } else {
        found.map(|(i, _)| count(i + 1)).next().unwrap_or(Value::Null)
    })
}

/// array_remove / array_replace: IS NOT DISTINCT FROM.
fn remove_or_replace(f: ArrayFunc, vals: &[Value]) -> Value {
    let arg = |k: usize| vals.get(k).unwrap_or(&Value::Null);
    if arg(0).is_null() {
        return Value::Null;
    }
    let a = items(arg(0));
    if f == ArrayFunc::Remove {
        Value::Array(a.iter().filter(|e| !not_distinct(e, arg(1))).cloned().collect())
    } else {
        Value::Array(a.iter().map(|e| if not_distinct(e, arg(1)) { arg(2).clone() } else { e.clone() }).collect())
    }
}

/// array_to_string(a, delimiter [, null_text]).
fn to_string(vals: &[Value]) -> Value {
    let arg = |k: usize| vals.get(k).unwrap_or(&Value::Null);
    let (Value::Array(a), Value::Text(delim)) = (arg(0), arg(1)) else { return Value::Null };
    let null_text = arg(2).as_str();
    let mut out = String::new();
    let mut first = true;
    for e in a {
        let text = match e {
            Value::Null => match null_text {
                Some(t) => t.to_owned(),
                None => continue,
            },
            other => value::to_text(other),
        };
        if !first {
            out.push_str(delim);
        }
        first = false;
        out.push_str(&text);
    }
    Value::Text(out)
}

/// string_to_array(s, delimiter [, null_text]).
fn string_to_array(vals: &[Value]) -> Value {
    let arg = |k: usize| vals.get(k).unwrap_or(&Value::Null);
    let Value::Text(s) = arg(0) else { return Value::Null };
    let null_text = arg(2).as_str();
    let parts: Vec<String> = if s.is_empty() {
        Vec::new()
    } else {
        match arg(1) {
            Value::Null => s.chars().map(String::from).collect(),
            Value::Text(d) if d.is_empty() => vec![s.clone()],
            Value::Text(d) => s.split(d.as_str()).map(str::to_owned).collect(),
            _ => Vec::new(),
        }
    };
    Value::Array(
        parts.into_iter().map(|p| if Some(p.as_str()) == null_text { Value::Null } else { Value::Text(p) }).collect(),
    )
}

/// array_contain_compare: every element of `b` equals one of `a` (a NULL never does).
fn contains(a: &[Value], b: &[Value]) -> bool {
    b.iter().all(|y| a.iter().any(|x| equal(x, y)))
}

/// `x op ANY/ALL (a)`: three-valued, as a chain of OR / AND.
fn any(op: CmpOp, all: bool, x: &Value, a: &Value) -> Value {
    let Value::Array(items) = a else { return Value::Null };
    let mut saw_null = false;
    for e in items {
        match value::compare(x, e) {
            None => saw_null = true,
            Some(ord) if op.holds(ord) != all => return Value::Bool(!all),
            Some(_) => {}
        }
    }
    if saw_null { Value::Null } else { Value::Bool(all) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[Option<i32>]) -> Value {
        Value::Array(v.iter().map(|e| e.map_or(Value::Null, Value::Int4)).collect())
    }

    #[test]
    fn any_all_three_valued() {
        let a = ints(&[Some(1), None, Some(3)]);
        assert_eq!(any(CmpOp::Eq, false, &Value::Int4(3), &a), Value::Bool(true));
        assert_eq!(any(CmpOp::Eq, false, &Value::Int4(2), &a), Value::Null);
        assert_eq!(any(CmpOp::Eq, false, &Value::Int4(2), &ints(&[Some(1)])), Value::Bool(false));
        assert_eq!(any(CmpOp::Gt, true, &Value::Int4(4), &a), Value::Null);
        assert_eq!(any(CmpOp::Gt, true, &Value::Int4(2), &a), Value::Bool(false));
        assert_eq!(any(CmpOp::Eq, false, &Value::Null, &ints(&[])), Value::Bool(false));
        assert_eq!(any(CmpOp::Eq, true, &Value::Null, &ints(&[])), Value::Bool(true));
    }

    #[test]
    fn slices_clamp_and_renumber() {
        let a = ints(&[Some(1), Some(2), Some(3), Some(4)]);
        let slice = |lo: Option<i32>, hi: Option<i32>| {
            let mut vals = vec![a.clone()];
            vals.extend(lo.map(Value::Int4));
            vals.extend(hi.map(Value::Int4));
            eval(ArrayFunc::Slice(lo.is_some(), hi.is_some()), vals).unwrap()
        };
        assert_eq!(slice(Some(2), Some(3)), ints(&[Some(2), Some(3)]));
        assert_eq!(slice(Some(-5), Some(1)), ints(&[Some(1)]));
        assert_eq!(slice(None, Some(2)), ints(&[Some(1), Some(2)]));
        assert_eq!(slice(Some(3), None), ints(&[Some(3), Some(4)]));
        assert_eq!(slice(Some(3), Some(2)), ints(&[]));
    }
}
