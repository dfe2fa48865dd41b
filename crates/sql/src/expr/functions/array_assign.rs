//! Subscripted assignment (`UPDATE t SET a[2] = v`, `SET a[1:2] = '{7,8}'`,
//! `SET a[1][2] = v`): PostgreSQL's array_set_element / array_set_slice.
//! A one-dimensional array grows either way (`a[0] = v` moves its lower
//! bound down; the gap is NULL); one of more dimensions never grows
//! (2202E); a NULL or empty array becomes one holding just the assigned
//! part, its lower bounds the subscripts'.

use pgtier_engine::Value;

use crate::error::{Result, SqlError};
use crate::value::array::{check_bounds, dims, into_leaves};

/// PostgreSQL's MaxArraySize.
const ARRAY_SIZE_MAX: usize = 134_217_727;

fn out_of_range() -> SqlError {
    SqlError::new("2202E", "array subscript out of range")
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

/// The lower bounds (empty: all 1) and elements of an array value; an
/// empty array for NULL.
fn split(arr: Value) -> (Vec<i32>, Vec<Value>) {
    match arr {
        Value::Array(a) => (Vec::new(), a),
        Value::BoundedArray(b) => (b.lower, b.items),
        _ => (Vec::new(), Vec::new()),
    }
}

fn lower_of(lower: &[i32], k: usize) -> i64 {
    lower.get(k).map_or(1, |l| i64::from(*l))
}

/// A subscript as the int4 PostgreSQL holds it.
fn int4(i: i64) -> Result<i32> {
    i32::try_from(i).map_err(|_| SqlError::new("22003", "integer out of range"))
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The array with its lower bounds, after ArrayCheckBounds.
fn bounded(lower: Vec<i32>, items: Vec<Value>) -> Result<Value> {
    check_bounds(&lower, &dims(&items))?;
    Ok(Value::array_with_lower(lower, items))
}

/// `a[i][j]... = v`: vals are the array, the value, then one index per subscript.
pub(super) fn assign_element(vals: Vec<Value>) -> Result<Value> {
    let mut it = vals.into_iter();
    let arr = it.next().unwrap_or(Value::Null);
    let v = it.next().unwrap_or(Value::Null);
    let subs = it.map(|s| subscript(&s)).collect::<Result<Vec<_>>>()?;
    let (lower, mut items) = split(arr);
    if items.is_empty() {
        let lower = subs.iter().map(|i| int4(*i)).collect::<Result<Vec<_>>>()?;
        return bounded(lower, vec![subs.iter().skip(1).fold(v, |inner, _| Value::Array(vec![inner]))]);
    }
    let shape = dims(&items);
    if shape.len() != subs.len() {
        return Err(SqlError::new("2202E", "wrong number of array subscripts"));
    }
    if let [i] = subs[..] {
        return assign_one_dim(lower_of(&lower, 0), items, i, v);
    }
    let mut at = Vec::with_capacity(subs.len());
    for (k, (i, len)) in subs.iter().zip(&shape).enumerate() {
        match usize::try_from(i - lower_of(&lower, k)) {
            Ok(i) if i < *len => at.push(i),
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
    Ok(Value::array_with_lower(lower, items))
}

/// `a[i] = v` on a one-dimensional array with lower bound `lb`: below it
/// the array grows down (its lower bound becomes i), past its end up; the
/// gap is NULL.
fn assign_one_dim(lb: i64, mut items: Vec<Value>, i: i64, v: Value) -> Result<Value> {
    let ub = lb + len_i64(items.len()) - 1;
    let new_lb = lb.min(i);
    size_limit(usize::try_from(ub.max(i) - new_lb + 1).unwrap_or(usize::MAX))?;
    if i < lb {
        let gap = usize::try_from(lb - i).unwrap_or(0);
        let mut out = Vec::with_capacity(gap + items.len());
        out.push(v);
        out.resize(gap, Value::Null);
        out.extend(items);
        items = out;
    } else {
        let at = usize::try_from(i - lb).unwrap_or(usize::MAX);
        if at >= items.len() {
            items.resize(at + 1, Value::Null);
        }
        items[at] = v;
    }
    bounded(vec![int4(new_lb)?], items)
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
    let src = match src {
        Value::Array(src) => src,
        Value::BoundedArray(b) => b.items,
        _ => return Ok(arr),
    };
    let mut source = Vec::new();
    into_leaves(src, &mut source);
    let (lower, items) = split(arr);
    if items.is_empty() {
        return slice_into_empty(&bounds, source);
    }
    let shape = dims(&items);
    if bounds.len() > shape.len() {
        return Err(SqlError::new("2202E", "wrong number of array subscripts"));
    }
    if shape.len() == 1 {
        return slice_one_dim(lower_of(&lower, 0), items, bounds[0], source);
    }
    let mut ranges = Vec::with_capacity(shape.len());
    for (k, len) in shape.iter().enumerate() {
        let (lb, len) = (lower_of(&lower, k), len_i64(*len));
        let (lo, hi) = bounds.get(k).copied().unwrap_or((None, None));
        let (lo, hi) = (lo.unwrap_or(lb), hi.unwrap_or(lb + len - 1));
        if hi < lo {
            return Err(bound_order());
        }
        if lo < lb || hi >= lb + len {
            return Err(out_of_range());
        }
        ranges.push((usize::try_from(lo - lb).unwrap_or(0), usize::try_from(hi - lb + 1).unwrap_or(0)));
    }
    let need: usize = ranges.iter().map(|(lo, hi)| hi - lo).product();
    if source.len() < need {
        return Err(too_small());
    }
    let mut items = items;
    let mut source = source.into_iter();
    replace_rows(&mut items, &ranges, &mut source);
    Ok(Value::array_with_lower(lower, items))
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

/// `a[lo:hi] = src` on a one-dimensional array with lower bound `lb`: it
/// grows down and up to cover the slice, the gaps NULL.
fn slice_one_dim(
    lb: i64,
    mut items: Vec<Value>,
    bounds: (Option<i64>, Option<i64>),
    source: Vec<Value>,
) -> Result<Value> {
    let ub = lb + len_i64(items.len()) - 1;
    let (lo, hi) = (bounds.0.unwrap_or(lb), bounds.1.unwrap_or(ub));
    if hi < lo {
        return Err(bound_order());
    }
    let new_lb = lo.min(lb);
    let new_len = size_limit(usize::try_from(hi.max(ub) - new_lb + 1).unwrap_or(usize::MAX))?;
    check_bounds(&[int4(new_lb)?], &[new_len])?;
    if len_i64(source.len()) < hi - lo + 1 {
        return Err(too_small());
    }
    if new_lb < lb {
        let mut out = vec![Value::Null; usize::try_from(lb - new_lb).unwrap_or(0)];
        out.extend(items);
        items = out;
    }
    items.resize(new_len, Value::Null);
    let (from, to) = (usize::try_from(lo - new_lb).unwrap_or(0), usize::try_from(hi - new_lb).unwrap_or(0));
    for (slot, v) in items[from..=to].iter_mut().zip(source) {
        *slot = v;
    }
    bounded(vec![int4(new_lb)?], items)
}

/// A slice assigned to a NULL or empty array: the slice alone.
fn slice_into_empty(bounds: &[(Option<i64>, Option<i64>)], source: Vec<Value>) -> Result<Value> {
    let mut shape = Vec::with_capacity(bounds.len());
    let mut lower = Vec::with_capacity(bounds.len());
    for b in bounds {
        let (Some(lo), Some(hi)) = *b else {
            return Err(SqlError::new("2202E", "array slice subscript must provide both boundaries").with_detail(
                "When assigning to a slice of an empty array value, slice boundaries must be fully specified.",
            ));
        };
        if hi < lo {
            return Err(bound_order());
        }
        shape.push(size_limit(usize::try_from(hi - lo + 1).unwrap_or(usize::MAX))?);
        lower.push(int4(lo)?);
    }
    let need = shape.iter().try_fold(1usize, |n, d| n.checked_mul(*d)).unwrap_or(usize::MAX);
    size_limit(need)?;
    if source.len() < need {
        return Err(too_small());
    }
    let mut source = source.into_iter();
    match build(&shape, &mut source) {
        Value::Array(items) => bounded(lower, items),
        other => Ok(other),
    }
}

fn build(shape: &[usize], source: &mut impl Iterator<Item = Value>) -> Value {
    match shape.split_first() {
        Some((n, [])) => Value::Array(source.by_ref().take(*n).collect()),
        Some((n, inner)) => Value::Array((0..*n).map(|_| build(inner, source)).collect()),
        None => Value::Array(Vec::new()),
    }
}
