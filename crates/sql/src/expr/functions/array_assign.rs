//! Subscripted assignment (`UPDATE t SET a[2] = v`, `SET a[1:2] = '{7,8}'`,
//! `SET a[1][2] = v`): PostgreSQL's array_set_element / array_set_slice on
//! arrays whose lower bounds are all 1. A one-dimensional array grows to
//! the right (the gap NULL); one of more dimensions never grows (2202E);
//! a NULL or empty array becomes one holding just the assigned part. What
//! would give an array a lower bound other than 1 (`a[0] = v`) is 0A000.

use pgtier_engine::Value;

use crate::error::{Result, SqlError};
use crate::value::array::{dims, into_leaves};

/// PostgreSQL's MaxArraySize.
const ARRAY_SIZE_MAX: usize = 134_217_727;

fn out_of_range() -> SqlError {
    SqlError::new("2202E", "array subscript out of range")
}

fn lower_bound_not_one() -> SqlError {
    SqlError::unsupported("arrays with a lower bound other than 1")
}

fn null_subscript() -> SqlError {
    SqlError::new("22004", "array subscript in assignment must not be null")
}

fn too_small() -> SqlError {
    SqlError::new("2202E", "source array too small")
}

fn bound_order() -> SqlError {
    SqlError::new("2202E", "upper bound cannot be less than lower bound")
}

fn size_limit(n: usize) -> Result<usize> {
    if n > ARRAY_SIZE_MAX {
        return Err(SqlError::new("54000", format!("array size exceeds the maximum allowed ({ARRAY_SIZE_MAX})")));
    }
    Ok(n)
}

fn subscript(v: &Value) -> Result<i64> {
    v.as_i64().ok_or_else(null_subscript)
}

/// `a[i][j]... = v`: vals are the array, the value, then one index per subscript.
pub(super) fn assign_element(vals: Vec<Value>) -> Result<Value> {
    let mut it = vals.into_iter();
    let arr = it.next().unwrap_or(Value::Null);
    let v = it.next().unwrap_or(Value::Null);
    let subs = it.map(|s| subscript(&s)).collect::<Result<Vec<_>>>()?;
    let mut items = match arr {
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    if items.is_empty() {
        if subs.iter().any(|i| *i != 1) {
            return Err(lower_bound_not_one());
        }
        return Ok(subs.iter().fold(v, |inner, _| Value::Array(vec![inner])));
    }
    let shape = dims(&items);
    if shape.len() != subs.len() {
        return Err(SqlError::new("2202E", "wrong number of array subscripts"));
    }
    if let [i] = subs[..] {
        if i < 1 {
            return Err(lower_bound_not_one());
        }
        let i = size_limit(usize::try_from(i).unwrap_or(usize::MAX))?;
        if i > items.len() {
            items.resize(i, Value::Null);
        }
        items[i - 1] = v;
        return Ok(Value::Array(items));
    }
    let mut at = Vec::with_capacity(subs.len());
    for (i, len) in subs.iter().zip(&shape) {
        match usize::try_from(*i) {
            Ok(i) if (1..=*len).contains(&i) => at.push(i - 1),
            _ => return Err(out_of_range()),
        }
    }
    let mut level = &mut items;
    let (last, path) = at.split_last().ok_or_else(out_of_range)?;
    for k in path {
        match level.get_mut(*k) {
            Some(Value::Array(row)) => level = row,
            _ => return Err(out_of_range()),
        }
    }
    *level.get_mut(*last).ok_or_else(out_of_range)? = v;
    Ok(Value::Array(items))
}

/// The (lower, upper) bounds of a slice assignment's subscripts: `n`
/// subscripts, bit 2k / 2k+1 of `given` saying whether subscript k's lower
/// / upper bound is among `bounds`; None for one not given.
fn slice_bounds(n: usize, given: u16, bounds: &[Value]) -> Result<Vec<(Option<i64>, Option<i64>)>> {
    let mut it = bounds.iter();
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let mut next = |bit: usize| -> Result<Option<i64>> {
            if given & (1 << bit) == 0 {
                return Ok(None);
            }
            subscript(it.next().unwrap_or(&Value::Null)).map(Some)
        };
        let lo = next(2 * k)?;
        let hi = next(2 * k + 1)?;
        out.push((lo, hi));
    }
    Ok(out)
}

/// `a[lo:hi]... = src`: vals are the array, the source array, then the
/// given bounds (see [`slice_bounds`]). A NULL source leaves the array as
/// it is.
pub(super) fn assign_slice(vals: Vec<Value>, n: u8, given: u16) -> Result<Value> {
    let mut it = vals.into_iter();
    let arr = it.next().unwrap_or(Value::Null);
    let src = it.next().unwrap_or(Value::Null);
    let rest: Vec<Value> = it.collect();
    let bounds = slice_bounds(usize::from(n), given, &rest)?;
    let Value::Array(src) = src else { return Ok(arr) };
    let mut source = Vec::new();
    into_leaves(src, &mut source);
    let items = match arr {
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    if items.is_empty() {
        return slice_into_empty(&bounds, source);
    }
    let shape = dims(&items);
    if bounds.len() > shape.len() {
        return Err(SqlError::new("2202E", "wrong number of array subscripts"));
    }
    if shape.len() == 1 {
        return slice_one_dim(items, bounds[0], source);
    }
    let mut ranges = Vec::with_capacity(shape.len());
    for (k, len) in shape.iter().enumerate() {
        let len = i64::try_from(*len).unwrap_or(i64::MAX);
        let (lo, hi) = bounds.get(k).copied().unwrap_or((None, None));
        let (lo, hi) = (lo.unwrap_or(1), hi.unwrap_or(len));
        if hi < lo {
            return Err(bound_order());
        }
        if lo < 1 || hi > len {
            return Err(out_of_range());
        }
        ranges.push((usize::try_from(lo - 1).unwrap_or(0), usize::try_from(hi).unwrap_or(0)));
    }
    let need: usize = ranges.iter().map(|(lo, hi)| hi - lo).product();
    if source.len() < need {
        return Err(too_small());
    }
    let mut items = items;
    let mut source = source.into_iter();
    replace_rows(&mut items, &ranges, &mut source);
    Ok(Value::Array(items))
}

fn replace_rows(items: &mut [Value], ranges: &[(usize, usize)], source: &mut impl Iterator<Item = Value>) {
    let Some(((lo, hi), inner)) = ranges.split_first() else { return };
    for v in items.iter_mut().take(*hi).skip(*lo) {
        match v {
            Value::Array(row) if !inner.is_empty() => replace_rows(row, inner, source),
            slot => *slot = source.next().unwrap_or(Value::Null),
        }
    }
}

fn slice_one_dim(mut items: Vec<Value>, bounds: (Option<i64>, Option<i64>), source: Vec<Value>) -> Result<Value> {
    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let (lo, hi) = (bounds.0.unwrap_or(1), bounds.1.unwrap_or(len));
    if hi < lo {
        return Err(bound_order());
    }
    if lo < 1 {
        return Err(lower_bound_not_one());
    }
    let (lo, hi) = (usize::try_from(lo).unwrap_or(usize::MAX), size_limit(usize::try_from(hi).unwrap_or(usize::MAX))?);
    if source.len() < hi - lo + 1 {
        return Err(too_small());
    }
    if hi > items.len() {
        items.resize(hi, Value::Null);
    }
    for (slot, v) in items[lo - 1..hi].iter_mut().zip(source) {
        *slot = v;
    }
    Ok(Value::Array(items))
}

/// A slice assigned to a NULL or empty array: the slice alone.
fn slice_into_empty(bounds: &[(Option<i64>, Option<i64>)], source: Vec<Value>) -> Result<Value> {
    let mut shape = Vec::with_capacity(bounds.len());
    for b in bounds {
        let (Some(lo), Some(hi)) = *b else {
            return Err(SqlError::new("2202E", "array slice subscript must provide both boundaries").with_detail(
                "When assigning to a slice of an empty array value, slice boundaries must be fully specified.",
            ));
        };
        if hi < lo {
            return Err(bound_order());
        }
        if lo != 1 {
            return Err(lower_bound_not_one());
        }
        shape.push(size_limit(usize::try_from(hi).unwrap_or(usize::MAX))?);
    }
    let need = shape.iter().try_fold(1usize, |n, d| n.checked_mul(*d)).unwrap_or(usize::MAX);
    size_limit(need)?;
    if source.len() < need {
        return Err(too_small());
    }
    let mut source = source.into_iter();
    Ok(build(&shape, &mut source))
}

fn build(shape: &[usize], source: &mut impl Iterator<Item = Value>) -> Value {
    match shape.split_first() {
        Some((n, [])) => Value::Array(source.by_ref().take(*n).collect()),
        Some((n, inner)) => Value::Array((0..*n).map(|_| build(inner, source)).collect()),
        None => Value::Array(Vec::new()),
    }
}
