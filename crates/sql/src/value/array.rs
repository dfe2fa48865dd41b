//! One-dimensional arrays (`DataType::Array`, values `Value::Array`):
//! PostgreSQL's array_in and array_out (quoting), array_cmp, element-wise
//! casts (array_coerce).
//!
//! Only what PostgreSQL's arrays are when written without dimension
//! decoration exists here: one dimension, lower bound 1. Input with
//! explicit bounds (`'[0:1]={1,2}'`) or more dimensions (`'{{1},{2}}'`,
//! `ARRAY[[1],[2]]`) is refused with 0A000, never answered differently.

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

/// The elements of an array's text form, NULL elements as None
/// (ReadArrayStr's rules: backslash escapes everywhere, double quotes,
/// unquoted white space around an element dropped, unquoted `NULL`).
pub fn split(text: &str) -> Result<Vec<Option<String>>> {
    let t = text.trim_start_matches(is_space);
    if t.starts_with('[') {
        return Err(SqlError::unsupported("arrays with explicit bounds"));
    }
    let Some(body) = t.strip_prefix('{') else {
        return Err(malformed(text, "Array value must start with \"{\" or dimension information."));
    };
    let mut chars = body.chars().peekable();
    let mut out = Vec::new();
    let skip_space = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while chars.peek().is_some_and(|c| is_space(*c)) {
            chars.next();
        }
    };
    skip_space(&mut chars);
    if chars.peek() == Some(&'}') {
        chars.next();
    } else {
        loop {
            skip_space(&mut chars);
            let mut item = String::new();
            let mut quoted = false;
            let mut escaped_any = false;
            // Length of `item` up to its last character that was quoted or
            // escaped: trailing white space before it is kept.
            let mut keep = 0;
            loop {
                match chars.peek().copied() {
                    None => return Err(malformed(text, "Unexpected end of input.")),
                    Some('{') if !quoted => return Err(multidimensional()),
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
                            skip_space(&mut chars);
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
            out.push(if !escaped_any && item.eq_ignore_ascii_case("null") { None } else { Some(item) });
            match chars.next() {
                Some(',') => continue,
                _ => break,
            }
        }
    }
    if chars.any(|c| !is_space(c)) {
        return Err(malformed(text, "Junk after closing right brace."));
    }
    Ok(out)
}

/// array_in for element type `elem`.
pub fn array_in(text: &str, elem: DataType) -> Result<Value> {
    let items = split(text)?
        .into_iter()
        .map(|e| match e {
            None => Ok(Value::Null),
            Some(s) => value::parse_input(&s, elem),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Value::Array(items))
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

/// array_cmp: element by element (NULL elements after values, two NULLs
/// equal), then the shorter array first.
pub fn compare(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let ord = value::sort_cmp(x, y);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}

/// array_coerce: every element cast to `elem`.
pub fn cast(items: Vec<Value>, elem: DataType, explicit: bool) -> Result<Value> {
    Ok(Value::Array(items.into_iter().map(|v| value::cast(v, elem, explicit)).collect::<Result<Vec<_>>>()?))
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
        assert_eq!(array_in("{{1},{2}}", DataType::Int4).unwrap_err().sqlstate, "0A000");
        assert_eq!(array_in("[0:1]={1,2}", DataType::Int4).unwrap_err().sqlstate, "0A000");
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
