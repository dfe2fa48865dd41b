//! Arrays (`DataType::Array`, values `Value::Array`): PostgreSQL's
//! array_in and array_out (quoting), array_cmp, element-wise casts
//! (array_coerce).
//!
//! A one-dimensional array is `Value::Array` of its elements (the common
//! case, unchanged); a multidimensional one is `Value::Array` of its rows,
//! each a `Value::Array` of the same shape (`'{{1,2},{3,4}}'`): there is
//! no array of arrays type in PostgreSQL, so the nesting is unambiguous.
//! An array with some lower bound other than 1 (`'[0:1]={1,2}'`, or one
//! that subscripted assignment extended below 1) is a
//! `Value::BoundedArray`: its lower bounds and the same nested elements.

use std::cmp::Ordering;

use pgtier_engine::{DataType, ElemType, Value};

use crate::error::{Result, SqlError};
use crate::value;

/// The element type of a (real) array type.
pub fn elem_type(ty: DataType) -> Option<DataType> {
    match ty {
        DataType::Array(e) => Some(e.get()),
        _ => None,
    }
}

/// The array type of `elem`; None for the SQL layer's pseudo types (they
/// have their own text-form arrays, `types::Elem`) and for arrays.
pub fn array_type(elem: DataType) -> Option<DataType> {
    if crate::value::types::is_pseudo(elem) {
        return None;
    }
    ElemType::of(elem).map(DataType::Array)
}

/// `anyarray op anyarray` takes two arrays of one type (PostgreSQL does not
/// coerce int4[] to int8[] for `=`); typmods and the string types aside.
pub fn same_array_type(a: DataType, b: DataType) -> bool {
    match (elem_type(a), elem_type(b)) {
        (Some(x), Some(y)) => value::type_name(x) == value::type_name(y),
        _ => false,
    }
}

pub fn is_array(ty: Option<DataType>) -> bool {
    matches!(ty, Some(DataType::Array(_)))
}

/// The name of an array type as operator and function signatures print it.
pub fn type_name(elem: DataType) -> &'static str {
    match elem {
        DataType::Bool => "boolean[]",
        DataType::Int2 => "smallint[]",
        DataType::Int4 => "integer[]",
        DataType::Int8 => "bigint[]",
        DataType::Numeric { .. } => "numeric[]",
        DataType::Float4 => "real[]",
        DataType::Float8 => "double precision[]",
        DataType::Text => "text[]",
        DataType::Varchar(_) => "character varying[]",
        DataType::Char(_) => "character[]",
        DataType::Bytea => "bytea[]",
        DataType::Date => "date[]",
        DataType::Timestamp(_) => "timestamp without time zone[]",
        DataType::TimestampTz(_) => "timestamp with time zone[]",
        DataType::Time(_) => "time without time zone[]",
        DataType::TimeTz(_) => "time with time zone[]",
        DataType::Interval => "interval[]",
        DataType::Uuid => "uuid[]",
        DataType::Json => "json[]",
        DataType::Jsonb => "jsonb[]",
        DataType::Array(_) => "anyarray",
    }
}

pub fn multidimensional() -> SqlError {
    SqlError::unsupported("multidimensional arrays")
}

fn malformed(text: &str, detail: &str) -> SqlError {
    SqlError::new("22P02", format!("malformed array literal: \"{text}\"")).with_detail(detail)
}

/// array_isspace: the ASCII white space array_in skips.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0B' | '\x0C')
}

/// The greatest number of dimensions (PostgreSQL's MAXDIM).
pub const DIMS_MAX: usize = 6;

pub fn too_many_dims(n: usize) -> SqlError {
    SqlError::new("54000", format!("number of array dimensions ({n}) exceeds the maximum allowed ({DIMS_MAX})"))
}

/// One level of an array's text form: elements (NULL as None) or sub-arrays.
#[derive(Debug, PartialEq)]
pub enum Level {
    Items(Vec<Option<String>>),
    Lists(Vec<Level>),
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

fn skip_space(chars: &mut Chars<'_>) {
    while chars.peek().is_some_and(|c| is_space(*c)) {
        chars.next();
    }
}

/// The elements of a one-dimensional array's text form, NULL elements as
/// None; more dimensions are refused (the system catalogs' text arrays).
pub fn split(text: &str) -> Result<Vec<Option<String>>> {
    match parse(text)? {
        Level::Items(items) => Ok(items),
        Level::Lists(_) => Err(multidimensional()),
    }
}

/// array_in's reading of `text` (ReadArrayStr's rules: backslash escapes
/// everywhere, double quotes, unquoted white space around an element
/// dropped, unquoted `NULL`; nested braces are dimensions, all sub-arrays
/// of one level alike).
pub fn parse(text: &str) -> Result<Level> {
    let t = text.trim_start_matches(is_space);
    if t.starts_with('[') {
        return Err(SqlError::unsupported("arrays with explicit bounds"));
    }
    parse_braces(text, t)
}

/// `parse` of a text that may start with explicit dimensions
/// (`[0:2][1:3]={...}`, ReadArrayDimensions): the lower bounds (empty
/// without them) and the elements, whose shape must match them.
pub fn parse_bounded(text: &str) -> Result<(Vec<i32>, Level)> {
    let mut t = text.trim_start_matches(is_space);
    let mut given: Vec<(i32, i64)> = Vec::new();
    while let Some(rest) = t.strip_prefix('[') {
        if given.len() >= DIMS_MAX {
            return Err(too_many_dims(given.len() + 1));
        }
        let (lo, hi, rest) = read_dimension(text, rest)?;
        if hi < lo {
            return Err(SqlError::new("2202E", "upper bound cannot be less than lower bound"));
        }
        given.push((lo, i64::from(hi) - i64::from(lo) + 1));
        t = rest.trim_start_matches(is_space);
    }
    if given.is_empty() {
        return Ok((Vec::new(), parse_braces(text, t)?));
    }
    let Some(rest) = t.strip_prefix('=') else {
        return Err(malformed(text, "Missing \"=\" after array dimensions."));
    };
    let rest = rest.trim_start_matches(is_space);
    if !rest.starts_with('{') {
        return Err(malformed(text, "Array contents must start with \"{\"."));
    }
    let level = parse_braces(text, rest)?;
    let shape = level_dims(&level);
    let expected: Vec<i64> = given.iter().map(|(_, n)| *n).collect();
    if shape.iter().map(|n| i64::try_from(*n).unwrap_or(i64::MAX)).collect::<Vec<_>>() != expected {
        return Err(malformed(text, "Specified array dimensions do not match array contents."));
    }
    let lower: Vec<i32> = given.into_iter().map(|(lo, _)| lo).collect();
    check_bounds(&lower, &shape)?;
    Ok((lower, level))
}

/// ArrayCheckBounds: every dimension's lower bound plus its length must
/// fit in int4.
pub fn check_bounds(lower: &[i32], shape: &[usize]) -> Result<()> {
    for (lo, n) in lower.iter().zip(shape) {
        if i64::from(*lo) + i64::try_from(*n).unwrap_or(i64::MAX) > i64::from(i32::MAX) {
            return Err(SqlError::new("54000", format!("array lower bound is too large: {lo}")));
        }
    }
    Ok(())
}

/// One `lo:hi]` or `hi]` (its `[` read): lower bound, upper bound, the rest.
fn read_dimension<'a>(text: &str, s: &'a str) -> Result<(i32, i32, &'a str)> {
    let number = |s: &'a str| -> (&'a str, &'a str) {
        let end = s.find(|c: char| !(c.is_ascii_digit() || c == '-' || c == '+')).unwrap_or(s.len());
        s.split_at(end)
    };
    let (first, rest) = number(s);
    if first.is_empty() {
        return Err(malformed(text, "\"[\" must introduce explicitly-specified array dimensions."));
    }
    let (lo, hi, rest) = match rest.strip_prefix(':') {
        Some(r) => {
            let (second, r) = number(r);
            if second.is_empty() {
                return Err(malformed(text, "Missing array dimension value."));
            }
            (atoi(first)?, atoi(second)?, r)
        }
        None => (1, atoi(first)?, rest),
    };
    let Some(rest) = rest.strip_prefix(']') else {
        return Err(malformed(text, "Missing \"]\" after array dimensions."));
    };
    Ok((lo, hi, rest))
}

/// C's atoi on a run of digits and signs: an optional sign, then digits up
/// to the first non-digit. Beyond int4 C's result is undefined: refused.
fn atoi(s: &str) -> Result<i32> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    let mut n: i64 = 0;
    for c in digits[..end].bytes() {
        n = n * 10 + i64::from(c - b'0');
        if n > 1 << 32 {
            break;
        }
    }
    i32::try_from(if neg { -n } else { n }).map_err(|_| SqlError::unsupported("array dimensions beyond integer"))
}

/// The dimensions of a parsed text form (none for `{}`).
fn level_dims(level: &Level) -> Vec<usize> {
    match level {
        Level::Items(items) if items.is_empty() => Vec::new(),
        Level::Items(items) => vec![items.len()],
        Level::Lists(lists) => {
            let mut out = vec![lists.len()];
            out.extend(lists.first().map(level_dims).unwrap_or_default());
            out
        }
    }
}

fn parse_braces(text: &str, t: &str) -> Result<Level> {
    let Some(body) = t.strip_prefix('{') else {
        return Err(malformed(text, "Array value must start with \"{\" or dimension information."));
    };
    let mut chars = body.chars().peekable();
    let level = parse_level(&mut chars, text, 1)?;
    if chars.any(|c| !is_space(c)) {
        return Err(malformed(text, "Junk after closing right brace."));
    }
    if let Level::Lists(lists) = &level {
        shape_of(lists)
            .ok_or_else(|| malformed(text, "Multidimensional arrays must have sub-arrays with matching dimensions."))?;
    }
    Ok(level)
}

/// The dimensions under a level of sub-arrays, None when they differ.
fn shape_of(lists: &[Level]) -> Option<Vec<usize>> {
    let mut shape: Option<Vec<usize>> = None;
    for l in lists {
        let s = match l {
            Level::Items(items) => vec![items.len()],
            Level::Lists(inner) => {
                let mut s = vec![inner.len()];
                s.extend(shape_of(inner)?);
                s
            }
        };
        match &shape {
            Some(prev) if *prev != s => return None,
            Some(_) => {}
            None => shape = Some(s),
        }
    }
    Some(shape.unwrap_or_default())
}

/// One brace level, its `{` read: up to and including its `}`.
fn parse_level(chars: &mut Chars<'_>, text: &str, depth: usize) -> Result<Level> {
    skip_space(chars);
    if chars.peek() == Some(&'}') {
        chars.next();
        if depth > 1 {
            return Err(malformed(text, "Unexpected \"}\" character."));
        }
        return Ok(Level::Items(Vec::new()));
    }
    let mut items = Vec::new();
    let mut lists = Vec::new();
    loop {
        skip_space(chars);
        if chars.peek() == Some(&'{') {
            if !items.is_empty() {
                return Err(malformed(text, "Unexpected \"{\" character."));
            }
            chars.next();
            if depth + 1 > DIMS_MAX {
                return Err(too_many_dims(depth + 1));
            }
            lists.push(parse_level(chars, text, depth + 1)?);
            skip_space(chars);
            if !matches!(chars.peek(), Some(',' | '}')) {
                return Err(malformed(text, "Unexpected array element."));
            }
        } else {
            if !lists.is_empty() {
                return Err(malformed(text, "Unexpected array element."));
            }
            items.push(parse_item(chars, text)?);
        }
        match chars.next() {
            Some(',') => continue,
            _ => break,
        }
    }
    Ok(if lists.is_empty() { Level::Items(items) } else { Level::Lists(lists) })
}

/// One element, up to (not including) its `,` or `}`.
fn parse_item(chars: &mut Chars<'_>, text: &str) -> Result<Option<String>> {
    let mut item = String::new();
    let mut quoted = false;
    let mut escaped_any = false;
    // Length of `item` up to its last character that was quoted or
    // escaped: trailing white space before it is kept.
    let mut keep = 0;
    loop {
        match chars.peek().copied() {
            None => return Err(malformed(text, "Unexpected end of input.")),
            Some('{') if !quoted => return Err(malformed(text, "Unexpected \"{\" character.")),
            Some(',' | '}') if !quoted => break,
            Some('"') => {
                chars.next();
                if !quoted && !escaped_any && !item.trim_end_matches(is_space).is_empty() {
                    return Err(malformed(text, "Unexpected array element."));
                }
                quoted = !quoted;
                escaped_any = true;
                keep = item.len();
                if !quoted {
                    // Only white space may follow a closing quote.
                    skip_space(chars);
                    if !matches!(chars.peek(), Some(',' | '}')) {
                        return Err(malformed(text, "Unexpected array element."));
                    }
                }
            }
            Some('\\') => {
                chars.next();
                let c = chars.next().ok_or_else(|| malformed(text, "Unexpected end of input."))?;
                item.push(c);
                escaped_any = true;
                keep = item.len();
            }
            Some(c) => {
                chars.next();
                item.push(c);
                if quoted || !is_space(c) {
                    keep = item.len();
                }
            }
        }
    }
    item.truncate(keep);
    if item.is_empty() && !escaped_any {
        return Err(malformed(text, "Unexpected \",\" character."));
    }
    Ok(if !escaped_any && item.eq_ignore_ascii_case("null") { None } else { Some(item) })
}

/// array_in for element type `elem`: a multidimensional array is nested
/// `Value::Array`s (rectangular, lower bounds 1).
pub fn array_in(text: &str, elem: DataType) -> Result<Value> {
    let (lower, level) = parse_bounded(text)?;
    match level_value(level, elem)? {
        Value::Array(items) => Ok(Value::array_with_lower(lower, items)),
        other => Ok(other),
    }
}

fn level_value(level: Level, elem: DataType) -> Result<Value> {
    Ok(Value::Array(match level {
        Level::Items(items) => items
            .into_iter()
            .map(|e| match e {
                None => Ok(Value::Null),
                Some(s) => value::parse_input(&s, elem),
            })
            .collect::<Result<Vec<_>>>()?,
        Level::Lists(lists) => lists.into_iter().map(|l| level_value(l, elem)).collect::<Result<Vec<_>>>()?,
    }))
}

/// Whether `items` are the rows of a multidimensional array.
pub fn is_nested(items: &[Value]) -> bool {
    matches!(items.first(), Some(Value::Array(_)))
}

/// The length of each dimension (none for an empty array).
pub fn dims(items: &[Value]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut level = items;
    while !level.is_empty() {
        out.push(level.len());
        match level.first() {
            Some(Value::Array(inner)) => level = inner,
            _ => break,
        }
    }
    out
}

/// The elements in storage order (row-major), however many dimensions.
pub fn leaves(items: &[Value]) -> Vec<&Value> {
    let mut out = Vec::new();
    push_leaves(items, &mut out);
    out
}

fn push_leaves<'a>(items: &'a [Value], out: &mut Vec<&'a Value>) {
    for v in items {
        match v {
            Value::Array(inner) => push_leaves(inner, out),
            other => out.push(other),
        }
    }
}

/// Consumes `items` into its elements in storage order.
pub fn into_leaves(items: Vec<Value>, out: &mut Vec<Value>) {
    for v in items {
        match v {
            Value::Array(inner) => into_leaves(inner, out),
            other => out.push(other),
        }
    }
}

/// array_out of an array with lower bounds `lower` (none: all 1): the
/// dimensions first (`[0:1]={1,2}`) when some lower bound is not 1.
pub fn write_bounded(lower: &[i32], items: &[Value], out: &mut String) {
    if lower.iter().any(|lb| *lb != 1) && !items.is_empty() {
        for (lb, n) in lower.iter().zip(dims(items)) {
            let hi = i64::from(*lb) + i64::try_from(n).unwrap_or(i64::MAX) - 1;
            out.push_str(&format!("[{lb}:{hi}]"));
        }
        out.push('=');
    }
    write_array(items, out);
}

/// array_out: `{1,NULL,"a b"}`.
pub fn write_array(items: &[Value], out: &mut String) {
    out.push('{');
    let mut scratch = String::new();
    for (k, v) in items.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        if v.is_null() {
            out.push_str("NULL");
            continue;
        }
        if let Value::Array(inner) = v {
            write_array(inner, out);
            continue;
        }
        scratch.clear();
        value::write_text(v, &mut scratch);
        quote_element(&scratch, out);
    }
    out.push('}');
}

/// An element's text as array_out writes it: quoted (with `"` and `\`
/// escaped) when it is empty, `NULL`, or holds a delimiter, brace, quote,
/// backslash or white space.
pub fn quote_element(s: &str, out: &mut String) {
    // Writing to a String cannot fail.
    let _ = pgtier_engine::write_array_element(s, out);
}

/// array_cmp: element by element in storage order (NULL elements after
/// values, two NULLs equal), then the one with fewer elements first, then
/// fewer dimensions, then shorter dimensions.
pub fn compare(a: &[Value], b: &[Value]) -> Ordering {
    if is_nested(a) || is_nested(b) {
        let (x, y) = (leaves(a), leaves(b));
        return compare_flat(x.iter().copied(), y.iter().copied())
            .then_with(|| x.len().cmp(&y.len()))
            .then_with(|| dims(a).len().cmp(&dims(b).len()))
            .then_with(|| dims(a).cmp(&dims(b)));
    }
    compare_flat(a.iter(), b.iter()).then_with(|| a.len().cmp(&b.len()))
}

/// array_cmp of two array values (`Value::Array` or `Value::BoundedArray`):
/// as [`compare`], then the lower bounds, dimension by dimension (so `=`
/// is array_eq, which tells `'[0:1]={1,2}'` from `'{1,2}'`).
pub fn compare_bounded(a: &Value, b: &Value) -> Ordering {
    let (Some((la, x)), Some((lb, y))) = (a.array_parts(), b.array_parts()) else { return Ordering::Equal };
    compare(x, y).then_with(|| {
        let n = dims(x).len();
        let ones = vec![1; n];
        let la = if la.is_empty() { &ones[..] } else { la };
        let lb = if lb.is_empty() { &ones[..] } else { lb };
        la.cmp(lb)
    })
}

fn compare_flat<'a>(a: impl Iterator<Item = &'a Value>, b: impl Iterator<Item = &'a Value>) -> Ordering {
    for (x, y) in a.zip(b) {
        let ord = value::sort_cmp(x, y);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// array_coerce: every element cast to `elem`.
pub fn cast(items: Vec<Value>, elem: DataType, explicit: bool) -> Result<Value> {
    Ok(Value::Array(
        items
            .into_iter()
            .map(|v| match v {
                Value::Array(inner) => cast(inner, elem, explicit),
                v => value::cast(v, elem, explicit),
            })
            .collect::<Result<Vec<_>>>()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(v: &Value) -> String {
        let mut s = String::new();
        value::write_text(v, &mut s);
        s
    }

    #[test]
    fn input_and_output_like_postgres() {
        let v = array_in("{1, 2 ,NULL, null }", DataType::Int4).unwrap();
        assert_eq!(v, Value::Array(vec![Value::Int4(1), Value::Int4(2), Value::Null, Value::Null]));
        assert_eq!(out(&v), "{1,2,NULL,NULL}");
        let t = array_in(r#"{a,"b c", "d\"e" ,"NULL",\ x\ ,""}"#, DataType::Text).unwrap();
        assert_eq!(out(&t), r#"{a,"b c","d\"e","NULL"," x ",""}"#);
        assert_eq!(array_in(" { } ", DataType::Int4).unwrap(), Value::Array(vec![]));
        for bad in ["1,2", "{1,,2}", "{1,2", "{1}x", "{\"a\"b}", "{,}"] {
            assert_eq!(array_in(bad, DataType::Text).unwrap_err().sqlstate, "22P02", "{bad}");
        }
        let md = array_in("{{1, 2} ,{3,NULL}}", DataType::Int4).unwrap();
        assert_eq!(out(&md), "{{1,2},{3,NULL}}");
        assert_eq!(
            dims(match &md {
                Value::Array(a) => a,
                _ => unreachable!(),
            }),
            vec![2, 2]
        );
        for bad in ["{{1},{2,3}}", "{{1},2}", "{1,{2}}", "{{}}", "{{1}x}"] {
            assert_eq!(array_in(bad, DataType::Int4).unwrap_err().sqlstate, "22P02", "{bad}");
        }
        assert_eq!(array_in("{{{{{{{1}}}}}}}", DataType::Int4).unwrap_err().sqlstate, "54000");
        assert_eq!(split("{{1},{2}}").unwrap_err().sqlstate, "0A000");
        let bounded = array_in("[0:1]={1,2}", DataType::Int4).unwrap();
        assert_eq!(bounded.array_parts(), Some((&[0][..], &[Value::Int4(1), Value::Int4(2)][..])));
        assert_eq!(out(&bounded), "[0:1]={1,2}");
        assert_eq!(
            array_in("[1:2]={1,2}", DataType::Int4).unwrap(),
            Value::Array(vec![Value::Int4(1), Value::Int4(2)])
        );
        assert_eq!(array_in("{a}", DataType::Int4).unwrap_err().sqlstate, "22P02");
    }

    #[test]
    fn order_is_array_cmp() {
        let a = |v: &[Option<i32>]| v.iter().map(|e| e.map_or(Value::Null, Value::Int4)).collect::<Vec<_>>();
        assert_eq!(compare(&a(&[Some(1), Some(2)]), &a(&[Some(1), Some(2), Some(0)])), Ordering::Less);
        assert_eq!(compare(&a(&[Some(1), None]), &a(&[Some(1), Some(9)])), Ordering::Greater);
        assert_eq!(compare(&a(&[None]), &a(&[None])), Ordering::Equal);
        assert_eq!(compare(&a(&[Some(2)]), &a(&[Some(1), Some(5)])), Ordering::Greater);
    }
}
