//! Subscripted assignment to jsonb (`UPDATE t SET j['a'][0] = v`):
//! jsonbsubs.c's assign step and jsonb_set_element, that is setPath with
//! JB_PATH_CREATE | JB_PATH_FILL_GAPS | JB_PATH_CONSISTENT_POSITION. A
//! missing key or element is created with the whole chain of containers
//! the rest of the path asks for, an array grows to the index given (the
//! gap JSON null), a negative index counts from the end but never
//! prepends, and stepping into a scalar is an error.

use pgtier_engine::Value;
use pgtier_engine::json::Json;

use crate::error::{Result, SqlError};
use crate::value::json::{jsonb_value, path_index, tree};

/// pgtier holds a jsonb array's elements in memory as a tree: an
/// assignment that fills a gap past this length is refused rather than
/// building it (PostgreSQL fails at 2^24 elements, its pushJsonbValue's
/// allocation limit).
const FILL_MAX: i64 = 1 << 20;

/// `j[s1][s2]... = v`: vals are the jsonb (NULL: an empty array when the
/// first subscript was an integer, else an empty object), the value (NULL:
/// JSON null), then each subscript as text.
pub(super) fn assign(vals: &[Value], expect_array: bool) -> Result<Value> {
    let path = vals.get(2..).unwrap_or_default();
    let mut steps = Vec::with_capacity(path.len());
    for s in path {
        match s.as_str() {
            Some(s) => steps.push(s.to_owned()),
            None => return Err(SqlError::new("22004", "jsonb subscript in assignment must not be null")),
        }
    }
    let new = match vals.get(1) {
        None | Some(Value::Null) => Json::Null,
        Some(v) => tree(v)?,
    };
    let j = match vals.first() {
        None | Some(Value::Null) if expect_array => Json::Array(Vec::new()),
        None | Some(Value::Null) => Json::Object(Vec::new()),
        Some(v) => tree(v)?,
    };
    Ok(jsonb_value(set_element(j, &steps, new, 0)?))
}

fn scalar_in_path() -> SqlError {
    SqlError::new("22023", "cannot replace existing key")
        .with_detail("The path assumes key is a composite object, but it is a scalar value.")
}

/// setPath at `level`: `j` with the value at `path` (the steps from
/// `level` on) replaced by, or created as, `new`.
fn set_element(j: Json, path: &[String], new: Json, level: usize) -> Result<Json> {
    let Some((first, rest)) = path.split_first() else {
        return Ok(new);
    };
    match j {
        Json::Object(mut pairs) => {
            match pairs.iter().position(|(k, _)| k == first) {
                Some(at) => {
                    let v = std::mem::replace(&mut pairs[at].1, Json::Null);
                    pairs[at].1 = set_element(v, rest, new, level + 1)?;
                }
                None => pairs.push((first.clone(), new_chain(rest, new)?)),
            }
            Ok(Json::Object(pairs))
        }
        Json::Array(mut items) => {
            let i = path_index(first, level)?;
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = match i {
                i if i < 0 && -i > len => {
                    return Err(SqlError::new(
                        "22023",
                        format!("path element at position {} is out of range: {i}", level + 1),
                    ));
                }
                i if i < 0 => len + i,
                i => i,
            };
            if at < len {
                let at = usize::try_from(at).unwrap_or(usize::MAX);
                let v = std::mem::replace(&mut items[at], Json::Null);
                items[at] = set_element(v, rest, new, level + 1)?;
            } else {
                items.resize(fill_len(at)?, Json::Null);
                items.push(new_chain(rest, new)?);
            }
            Ok(Json::Array(items))
        }
        _ => Err(scalar_in_path()),
    }
}

/// The length of an array filled with nulls up to index `at`.
fn fill_len(at: i64) -> Result<usize> {
    if at > FILL_MAX {
        return Err(SqlError::unsupported(format!("filling a jsonb array past {FILL_MAX} elements")));
    }
    Ok(usize::try_from(at).unwrap_or(0))
}

/// push_path: the containers the rest of a path asks for where nothing
/// is, `new` at its end. A step that reads as an integer (strtoint) is
/// an array holding the next one at that index (after that many nulls;
/// a negative one at 0), any other step an object of that key.
fn new_chain(path: &[String], new: Json) -> Result<Json> {
    let mut out = new;
    for step in path.iter().rev() {
        out = match path_index(step, 0) {
            Ok(i) => {
                let mut items = vec![Json::Null; fill_len(i.max(0))?];
                items.push(out);
                Json::Array(items)
            }
            Err(_) => Json::Object(vec![(step.clone(), out)]),
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(j: &str, path: &[&str], v: &str) -> std::result::Result<String, &'static str> {
        let mut vals = vec![Value::Jsonb(j.to_owned()), Value::Jsonb(v.to_owned())];
        vals.extend(path.iter().map(|s| Value::Text((*s).to_owned())));
        match assign(&vals, false) {
            Ok(Value::Jsonb(s)) => Ok(s),
            Ok(_) => Err("not jsonb"),
            Err(e) => Err(e.sqlstate),
        }
    }

    #[test]
    fn paths_are_created_and_filled() {
        assert_eq!(run("[0]", &["5"], "1").unwrap(), "[0, null, null, null, null, 1]");
        assert_eq!(run("[0, null, null, null, null, 1]", &["-4"], "1").unwrap(), "[0, null, 1, null, null, 1]");
        assert_eq!(run("[0]", &["-2"], "1"), Err("22023"));
        assert_eq!(run("{}", &["a", "2", "b"], "1").unwrap(), r#"{"a": [null, null, {"b": 1}]}"#);
        assert_eq!(run("{}", &["0", "a"], "1").unwrap(), r#"{"0": {"a": 1}}"#);
        assert_eq!(run("{\"a\": 1}", &["a", "b"], "1"), Err("22023"));
        assert_eq!(run("null", &["0"], "1"), Err("22023"));
        assert_eq!(run("[]", &["a"], "1"), Err("22P02"));
        assert_eq!(run("[]", &["2000000"], "1"), Err("0A000"));
    }

    #[test]
    fn null_container_and_subscript() {
        let arr = assign(&[Value::Null, Value::Null, Value::Text("1".into())], true).unwrap();
        assert_eq!(arr, Value::Jsonb("[null, null]".into()));
        let obj = assign(&[Value::Null, Value::Jsonb("1".into()), Value::Text("1".into())], false).unwrap();
        assert_eq!(obj, Value::Jsonb(r#"{"1": 1}"#.into()));
        let err = assign(&[Value::Jsonb("{}".into()), Value::Null, Value::Null], false).unwrap_err();
        assert_eq!(err.sqlstate, "22004");
    }
}
