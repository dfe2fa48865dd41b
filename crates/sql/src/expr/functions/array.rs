//! The array functions and operators on real arrays (`Value::Array`),
//! with PostgreSQL's NULL rules: most are strict, while `||`,
//! array_append/prepend/cat take a NULL array as empty, and the element
//! searches (array_position, array_remove, ...) find NULL elements with IS
//! NOT DISTINCT FROM. An array's lower bounds (`Value::BoundedArray`)
//! count where PostgreSQL's do: subscripts, slices, the dimension
//! functions, array_position(s), `||` and array_append/prepend, `=`.

use std::cmp::Ordering;

use pgtier_engine::Value;

use crate::error::{Result, SqlError};
use crate::expr::CmpOp;
use crate::value;
use crate::value::array::{DIMS_MAX, dims, is_nested, leaves, too_many_dims};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayFunc {
    /// `x op ANY (array)` (false) or `x op ALL (array)` (true).
    Any(CmpOp, bool),
    /// `x [NOT] LIKE / ILIKE ANY (array)`, or ALL.
    Like {
        all: bool,
        negated: bool,
        case_insensitive: bool,
    },
    /// `ARRAY[a, b, ...]`.
    Make,
    /// `ARRAY[[...], [...]]`, `ARRAY[a1, a2]` of arrays: one more dimension.
    MakeRows,
    /// `a[i]`, `a[i][j]`, ...: one index argument per subscript.
    Subscript,
    /// `a[i:j]`, `a[i:j][k]`, ...: the number of subscripts and, bit 2k
    /// and 2k+1, whether subscript k's lower and upper bound are given
    /// (the arguments hold only the given ones).
    Slice(u8, u16),
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
    /// `a[i][j]... = v` (UPDATE's subscripted assignment): array, value,
    /// one index per subscript.
    AssignElement,
    /// `a[i:j]... = src`: array, source, the given bounds as in `Slice`.
    AssignSlice(u8, u16),
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
                | ArrayFunc::Like { .. }
                | ArrayFunc::Make
                | ArrayFunc::MakeRows
                | ArrayFunc::AssignElement
                | ArrayFunc::AssignSlice(..)
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
    parts(v).1
}

/// An array's lower bounds (empty: all 1) and elements; none for a
/// non-array.
fn parts(v: &Value) -> (&[i32], &[Value]) {
    v.array_parts().unwrap_or((&[], &[]))
}

/// The lower bound of dimension `k` (0-based).
fn lower_of(lower: &[i32], k: usize) -> i64 {
    lower.get(k).map_or(1, |l| i64::from(*l))
}

/// Lower bounds of `n` dimensions, written out.
fn lowers(lower: &[i32], n: usize) -> Vec<i32> {
    (0..n).map(|k| lower.get(k).copied().unwrap_or(1)).collect()
}

fn int_overflow() -> SqlError {
    SqlError::new("22003", "integer out of range")
}

/// An array with lower bounds `lower`, once its upper bounds fit in int4
/// (ArrayCheckBounds, 54000).
fn checked(lower: Vec<i32>, items: Vec<Value>) -> Result<Value> {
    value::array::check_bounds(&lower, &dims(&items))?;
    Ok(Value::array_with_lower(lower, items))
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
        ArrayFunc::Like { all, negated, case_insensitive } => {
            let Some((_, items)) = arg(1).array_parts() else { return Ok(Value::Null) };
            let elems = if is_nested(items) { leaves(items) } else { items.iter().collect() };
            like_any(all, negated, case_insensitive, arg(0), elems)?
        }
        ArrayFunc::Make => Value::Array(vals),
        ArrayFunc::MakeRows => make_rows(vals)?,
        ArrayFunc::AssignElement => super::array_assign::assign_element(vals)?,
        ArrayFunc::AssignSlice(n, given) => super::array_assign::assign_slice(vals, n, given)?,
        ArrayFunc::Subscript => subscript(&vals),
        ArrayFunc::Slice(n, given) => slice(&vals, n, given),
        ArrayFunc::Cat => match (arg(0), arg(1)) {
            (Value::Null, b) => b.clone(),
            (a, Value::Null) => a.clone(),
            (a, b) if items(a).is_empty() => b.clone(),
            (a, b) if items(b).is_empty() => a.clone(),
            (a, b) if !is_nested(items(a)) && !is_nested(items(b)) => {
                checked(parts(a).0.to_vec(), items(a).iter().chain(items(b)).cloned().collect())?
            }
            (a, b) => cat_rows(parts(a), parts(b))?,
        },
        ArrayFunc::Append | ArrayFunc::Prepend if vals.iter().any(|v| is_nested(items(v))) => {
            return Err(SqlError::new("22000", "argument must be empty or one-dimensional array"));
        }
        ArrayFunc::Append => {
            let (lower, a) = parts(arg(0));
            let mut out = a.to_vec();
            out.push(arg(1).clone());
            checked(lower.to_vec(), out)?
        }
        ArrayFunc::Prepend => {
            // array_prepend keeps the array's lower bound.
            let (lower, a) = parts(arg(1));
            if lower.first() == Some(&i32::MIN) {
                return Err(int_overflow());
            }
            let mut out = vec![arg(0).clone()];
            out.extend_from_slice(a);
            Value::array_with_lower(if a.is_empty() { Vec::new() } else { lower.to_vec() }, out)
        }
        ArrayFunc::Cardinality if is_nested(items(arg(0))) => count(leaves(items(arg(0))).len()),
        ArrayFunc::Cardinality => count(items(arg(0)).len()),
        ArrayFunc::Ndims | ArrayFunc::Dims | ArrayFunc::Length | ArrayFunc::Lower | ArrayFunc::Upper => {
            dims_of(f, &vals)
        }
        ArrayFunc::Position | ArrayFunc::Positions if is_nested(items(arg(0))) => {
            return Err(SqlError::new("0A000", "searching for elements in multidimensional arrays is not supported"));
        }
        ArrayFunc::Position | ArrayFunc::Positions => position(f, &vals)?,
        ArrayFunc::Remove if is_nested(items(arg(0))) => {
            return Err(SqlError::new("0A000", "removing elements from multidimensional arrays is not supported"));
        }
        ArrayFunc::Remove | ArrayFunc::Replace => remove_or_replace(f, &vals),
        ArrayFunc::ToString => to_string(&vals),
        ArrayFunc::StringToArray => string_to_array(&vals),
        ArrayFunc::Contains => Value::Bool(contains(&leaves(items(arg(0))), &leaves(items(arg(1))))),
        ArrayFunc::ContainedBy => Value::Bool(contains(&leaves(items(arg(1))), &leaves(items(arg(0))))),
        ArrayFunc::Overlap => {
            let b = leaves(items(arg(1)));
            Value::Bool(leaves(items(arg(0))).iter().any(|x| b.iter().any(|y| equal(x, y))))
        }
    })
}

/// `a[i][j]...`: NULL unless there is one subscript per dimension, each
/// within the array's bounds.
fn subscript(vals: &[Value]) -> Value {
    let Some((lower, items)) = vals.first().and_then(Value::array_parts) else { return Value::Null };
    let mut level = items;
    let mut cur: Option<&Value> = None;
    for (k, idx) in vals.iter().skip(1).enumerate() {
        if let Some(v) = cur {
            let Value::Array(row) = v else { return Value::Null };
            level = row;
        }
        let at = int_arg(Some(idx)).and_then(|i| usize::try_from(i - lower_of(lower, k)).ok());
        cur = match at.and_then(|i| level.get(i)) {
            Some(v) => Some(v),
            None => return Value::Null,
        };
    }
    match cur {
        Some(Value::Array(_)) | None => Value::Null,
        Some(v) => v.clone(),
    }
}

/// `a[lo:hi][...]` (array_get_slice): each bound clamped to the array, the
/// dimensions without a subscript taken whole, renumbered from 1; empty
/// when a range is, or when there are more subscripts than dimensions.
fn slice(vals: &[Value], n: u8, given: u16) -> Value {
    let (lower, a) = parts(vals.first().unwrap_or(&Value::Null));
    let shape = dims(a);
    let n = usize::from(n);
    if n > shape.len() || shape.is_empty() {
        return Value::Array(Vec::new());
    }
    let mut args = vals.iter().skip(1);
    let mut ranges = Vec::with_capacity(shape.len());
    for (k, len) in shape.iter().enumerate() {
        let (lb, len) = (lower_of(lower, k), i64::try_from(*len).unwrap_or(i64::MAX));
        let ub = lb + len - 1;
        let mut bound = |bit: usize, default: i64| {
            if k < n && given & (1 << bit) != 0 { int_arg(args.next()).unwrap_or(default) } else { default }
        };
        let lo = bound(2 * k, lb).max(lb);
        let hi = bound(2 * k + 1, ub).min(ub);
        if lo > hi {
            return Value::Array(Vec::new());
        }
        ranges.push((usize::try_from(lo - lb).unwrap_or(0), usize::try_from(hi - lb + 1).unwrap_or(0)));
    }
    Value::Array(slice_rows(a, &ranges))
}

fn slice_rows(a: &[Value], ranges: &[(usize, usize)]) -> Vec<Value> {
    let Some(((lo, hi), inner)) = ranges.split_first() else { return a.to_vec() };
    a.get(*lo..*hi)
        .unwrap_or_default()
        .iter()
        .map(|v| match v {
            Value::Array(row) if !inner.is_empty() => Value::Array(slice_rows(row, inner)),
            other => other.clone(),
        })
        .collect()
}

fn mismatched_rows() -> SqlError {
    SqlError::new("2202E", "multidimensional arrays must have array expressions with matching dimensions")
}

/// `ARRAY[a1, a2, ...]` of arrays (ExecEvalArrayExpr): the rows of one
/// more dimension, all of one shape; NULL and empty rows only all together
/// (an empty array).
fn make_rows(vals: Vec<Value>) -> Result<Value> {
    // The rows' dimensions and lower bounds (ExecEvalArrayExpr compares both).
    let mut shape: Option<(Vec<usize>, Vec<i32>)> = None;
    let mut empty = false;
    for v in &vals {
        match parts(v) {
            (lower, a) if !a.is_empty() => {
                let d = dims(a);
                let l = lowers(lower, d.len());
                match &shape {
                    Some(s) if s.0 != d || s.1 != l => return Err(mismatched_rows()),
                    Some(_) => {}
                    None => shape = Some((d, l)),
                }
            }
            _ => empty = true,
        }
    }
    match shape {
        None => Ok(Value::Array(Vec::new())),
        Some(_) if empty => Err(mismatched_rows()),
        Some((s, _)) if s.len() + 1 > DIMS_MAX => Err(too_many_dims(s.len() + 1)),
        Some((_, inner)) => {
            let rows = vals
                .into_iter()
                .map(|v| match v {
                    Value::BoundedArray(b) => Value::Array(b.items),
                    v => v,
                })
                .collect();
            Ok(Value::array_with_lower(std::iter::once(1).chain(inner).collect(), rows))
        }
    }
}

/// array_cat of two non-empty arrays (lower bounds, elements) one of
/// which has more than one dimension: along the first dimension, the
/// lower-dimensional one as one row. The element dimensions must match in
/// length and lower bound; the result keeps the higher-dimensional
/// array's lower bounds (the first array's when they have as many).
fn cat_rows((la, a): (&[i32], &[Value]), (lb, b): (&[i32], &[Value])) -> Result<Value> {
    let (da, db) = (dims(a), dims(b));
    let (la, lb) = (lowers(la, da.len()), lowers(lb, db.len()));
    let incompatible =
        |detail: String| SqlError::new("2202E", "cannot concatenate incompatible arrays").with_detail(detail);
    let differing = || incompatible("Arrays with differing dimensions are not compatible for concatenation.".into());
    let mut lower = la.clone();
    let out: Vec<Value> = if da.len() == db.len() {
        if da[1..] != db[1..] || la[1..] != lb[1..] {
            return Err(incompatible(
                "Arrays with differing element dimensions are not compatible for concatenation.".into(),
            ));
        }
        a.iter().chain(b).cloned().collect()
    } else if da.len() + 1 == db.len() {
        if da[..] != db[1..] || la[..] != lb[1..] {
            return Err(differing());
        }
        lower.clone_from(&lb);
        std::iter::once(Value::Array(a.to_vec())).chain(b.iter().cloned()).collect()
    } else if da.len() == db.len() + 1 {
        if da[1..] != db[..] || la[1..] != lb[..] {
            return Err(differing());
        }
        a.iter().cloned().chain(std::iter::once(Value::Array(b.to_vec()))).collect()
    } else {
        return Err(incompatible(format!(
            "Arrays of {} and {} dimensions are not compatible for concatenation.",
            da.len(),
            db.len()
        )));
    };
    if dims(&out).len() > DIMS_MAX {
        return Err(too_many_dims(dims(&out).len()));
    }
    checked(lower, out)
}

/// array_ndims, array_dims, array_length / lower / upper of a dimension.
fn dims_of(f: ArrayFunc, vals: &[Value]) -> Value {
    let (lower, a) = parts(vals.first().unwrap_or(&Value::Null));
    let shape = dims(a);
    if shape.is_empty() {
        return Value::Null;
    }
    let upper = |k: usize, n: usize| lower_of(lower, k) + i64::try_from(n).unwrap_or(i64::MAX) - 1;
    match f {
        ArrayFunc::Ndims => count(shape.len()),
        ArrayFunc::Dims => Value::Text(
            shape.iter().enumerate().map(|(k, n)| format!("[{}:{}]", lower_of(lower, k), upper(k, *n))).collect(),
        ),
        _ => {
            let d = int_arg(vals.get(1)).and_then(|d| usize::try_from(d).ok()).filter(|d| *d >= 1);
            let bound = |v: i64| Value::Int4(i32::try_from(v).unwrap_or(i32::MAX));
            match d.and_then(|d| shape.get(d - 1).map(|n| (d - 1, *n))) {
                None => Value::Null,
                Some((k, _)) if f == ArrayFunc::Lower => bound(lower_of(lower, k)),
                Some((k, n)) if f == ArrayFunc::Upper => bound(upper(k, n)),
                Some((_, n)) => count(n),
            }
        }
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
    // Positions are subscripts: they start at the lower bound.
    let (lower, a) = parts(arg(0));
    let lb = lower_of(lower, 0);
    let at = |i: usize| lb + i64::try_from(i).unwrap_or(i64::MAX);
    let found = a.iter().enumerate().filter(|(i, e)| at(*i) >= start && not_distinct(e, arg(1)));
    let pos = |(i, _): (usize, &Value)| Value::Int4(i32::try_from(at(i)).unwrap_or(i32::MAX));
    Ok(if f == ArrayFunc::Positions {
        Value::Array(found.map(pos).collect())
    } else {
        found.map(pos).next().unwrap_or(Value::Null)
    })
}

/// array_remove / array_replace: IS NOT DISTINCT FROM.
fn remove_or_replace(f: ArrayFunc, vals: &[Value]) -> Value {
    let arg = |k: usize| vals.get(k).unwrap_or(&Value::Null);
    if arg(0).is_null() {
        return Value::Null;
    }
    // The result keeps the array's lower bounds.
    let (lower, a) = parts(arg(0));
    let out = if f == ArrayFunc::Remove {
        a.iter().filter(|e| !not_distinct(e, arg(1))).cloned().collect()
    } else {
        match replace(a, arg(1), arg(2)) {
            Value::Array(out) => out,
            _ => Vec::new(),
        }
    };
    Value::array_with_lower(lower.to_vec(), out)
}

/// array_replace, every dimension.
fn replace(a: &[Value], from: &Value, to: &Value) -> Value {
    Value::Array(
        a.iter()
            .map(|e| match e {
                Value::Array(row) => replace(row, from, to),
                e if not_distinct(e, from) => to.clone(),
                e => e.clone(),
            })
            .collect(),
    )
}

/// array_to_string(a, delimiter [, null_text]).
fn to_string(vals: &[Value]) -> Value {
    let arg = |k: usize| vals.get(k).unwrap_or(&Value::Null);
    let (Some((_, a)), Value::Text(delim)) = (arg(0).array_parts(), arg(1)) else { return Value::Null };
    let a = leaves(a);
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
fn contains(a: &[&Value], b: &[&Value]) -> bool {
    b.iter().all(|y| a.iter().any(|x| equal(x, y)))
}

/// `x op ANY/ALL (a)`: three-valued, as a chain of OR / AND.
fn any(op: CmpOp, all: bool, x: &Value, a: &Value) -> Value {
    let Some((_, items)) = a.array_parts() else { return Value::Null };
    if is_nested(items) {
        return any_of(op, all, x, leaves(items).into_iter());
    }
    any_of(op, all, x, items.iter())
}

fn any_of<'a>(op: CmpOp, all: bool, x: &Value, items: impl Iterator<Item = &'a Value>) -> Value {
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

/// `~~` (`!~~`, case-insensitive `~~*`) of x and each pattern, as
/// `any_of` combines comparisons: NULL for a NULL x or pattern unless an
/// element decides.
fn like_any(all: bool, negated: bool, ci: bool, x: &Value, patterns: Vec<&Value>) -> Result<Value> {
    let mut saw_null = false;
    for p in patterns {
        let m = match (x, p) {
            (Value::Text(s), Value::Text(p)) if ci => crate::expr::like(&s.to_lowercase(), &p.to_lowercase())?,
            (Value::Text(s), Value::Text(p)) => crate::expr::like(s, p)?,
            _ => {
                saw_null = true;
                continue;
            }
        };
        if (m != negated) != all {
            return Ok(Value::Bool(!all));
        }
    }
    Ok(if saw_null { Value::Null } else { Value::Bool(all) })
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
            eval(ArrayFunc::Slice(1, u16::from(lo.is_some()) | u16::from(hi.is_some()) << 1), vals).unwrap()
        };
        assert_eq!(slice(Some(2), Some(3)), ints(&[Some(2), Some(3)]));
        assert_eq!(slice(Some(-5), Some(1)), ints(&[Some(1)]));
        assert_eq!(slice(None, Some(2)), ints(&[Some(1), Some(2)]));
        assert_eq!(slice(Some(3), None), ints(&[Some(3), Some(4)]));
        assert_eq!(slice(Some(3), Some(2)), ints(&[]));
    }
}
