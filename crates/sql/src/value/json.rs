//! `json` and `jsonb` in SQL: input, casts, `to_json[b]` of every scalar
//! type, the operators and the functions (evaluation; binding is
//! bind/json.rs). The engine keeps json as written and jsonb as its
//! canonical text ([`pgtier_engine::json`]); values are parsed per call.
//!
//! json results keep PostgreSQL's json text layouts, which differ by
//! function: `->` returns the child as written, json_build_object
//! `{"a" : 1}`, json_agg `[1, 2]`, json_object_agg `{ "a" : 1 }`.

use pgtier_engine::json::{self, Json, JsonError, Shallow};
use pgtier_engine::{DataType, Value};

use crate::error::{Result, SqlError};
use crate::value;
use crate::value::types::{self, Elem};

/// A json function or operator, evaluated on already-evaluated arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonFunc {
    /// `->` (false) / `->>` (true) by key or index; `jsonb` says the operand type.
    Get {
        jsonb: bool,
        text: bool,
    },
    /// `#>` / `#>>` by a text[] path.
    GetPath {
        jsonb: bool,
        text: bool,
    },
    /// `@>` (rhs contained in lhs).
    Contains,
    /// `?`, `?|` (any), `?&` (all).
    Exists,
    ExistsAny,
    ExistsAll,
    /// jsonb `||`.
    Concat,
    /// jsonb `-` text / int / text[].
    Delete,
    /// jsonb `#-` text[].
    DeletePath,
    Typeof {
        jsonb: bool,
    },
    ArrayLength {
        jsonb: bool,
    },
    /// json[b]_build_object / json[b]_build_array (not strict: NULL is json null).
    BuildObject {
        jsonb: bool,
    },
    BuildArray {
        jsonb: bool,
    },
    /// The key argument of json[b]_object_agg, checked as each row reaches
    /// the aggregate (not strict: a NULL key is an error).
    ObjectAggKey,
    /// to_json / to_jsonb.
    To {
        jsonb: bool,
    },
    /// jsonb_set(target, path, new [, create_missing]).
    Set,
    /// jsonb_insert(target, path, new [, insert_after]).
    Insert,
    /// jsonb_set_lax(target, path, new [, create [, null_value_treatment]])
    /// (not strict in `new`).
    SetLax,
    /// `UPDATE ... SET j[s1][s2]... = v`: (jsonb, value, subscripts as
    /// text...), not strict (value/json_assign.rs). `expect_array`: the
    /// first subscript is an integer, so a NULL jsonb starts as `[]`.
    SubscriptAssign {
        expect_array: bool,
    },
    /// json[b]_object(text[]) and json[b]_object(keys text[], values text[]).
    Object {
        jsonb: bool,
    },
    /// The jsonpath functions and operators (evaluated by expr/jsonpath_eval.rs).
    Path(PathFunc),
    StripNulls {
        jsonb: bool,
    },
    Pretty,
    /// jsonb_extract_path[_text](from, VARIADIC path).
    ExtractPath {
        jsonb: bool,
        text: bool,
    },
}

/// The scalar jsonpath functions and operators: (target, path[, vars[, silent]]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathFunc {
    /// jsonb_path_exists.
    Exists,
    /// jsonb_path_match.
    Match,
    /// `@?` (jsonb_path_exists, silent).
    ExistsOp,
    /// `@@` (jsonb_path_match, silent).
    MatchOp,
    QueryArray,
    QueryFirst,
    /// jsonb_path_query (set-returning; only as JsonSrf::PathQuery).
    Query,
}

/// Set-returning json functions (FROM, or alone in a select list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonSrf {
    /// jsonb_each / jsonb_each_text (key, value).
    Each {
        jsonb: bool,
        text: bool,
    },
    ArrayElements {
        jsonb: bool,
        text: bool,
    },
    ObjectKeys {
        jsonb: bool,
    },
    /// jsonb_path_query(target, path [, vars [, silent]]): rows are made
    /// by expr/jsonpath_eval.rs.
    PathQuery,
}

impl JsonSrf {
    /// Output columns (name, type).
    pub fn columns(self) -> Vec<(&'static str, DataType)> {
        let vt = |jsonb: bool, text: bool| {
            if text {
                DataType::Text
            } else if jsonb {
                DataType::Jsonb
            } else {
                DataType::Json
            }
        };
        match self {
            JsonSrf::Each { jsonb, text } => vec![("key", DataType::Text), ("value", vt(jsonb, text))],
            JsonSrf::ArrayElements { jsonb, text } => vec![("value", vt(jsonb, text))],
            JsonSrf::ObjectKeys { .. } => vec![("", DataType::Text)],
            JsonSrf::PathQuery => vec![("", DataType::Jsonb)],
        }
    }
}

fn type_label(jsonb: bool) -> &'static str {
    if jsonb { "jsonb" } else { "json" }
}

fn input_error(e: JsonError, jsonb: bool, text: &str) -> SqlError {
    match e.sqlstate {
        "22P05" => SqlError::new("22P05", "unsupported Unicode escape sequence").with_detail(e.detail),
        "54001" => SqlError::new("54001", "stack depth limit exceeded"),
        _ => SqlError::invalid_text(type_label(jsonb), text).with_detail(e.detail),
    }
}

/// json_in / jsonb_in.
pub fn input(text: &str, jsonb: bool) -> Result<Value> {
    let parsed = json::parse(text, jsonb).map_err(|e| input_error(e, jsonb, text))?;
    Ok(if jsonb { Value::Jsonb(parsed.into_jsonb().to_jsonb_text()) } else { Value::Json(text.to_owned()) })
}

pub(super) fn jsonb_value(j: Json) -> Value {
    Value::Jsonb(j.into_jsonb().to_jsonb_text())
}

/// The tree of a json or jsonb value (jsonb: in jsonb form).
pub fn tree(v: &Value) -> Result<Json> {
    match v {
        Value::Jsonb(s) => json::parse(s, false).map_err(|e| input_error(e, true, s)),
        Value::Json(s) => json::parse(s, false).map_err(|e| input_error(e, false, s)),
        other => Err(SqlError::new("42883", format!("function expects json, not {}", other.type_name()))),
    }
}

/// Casts from and to json / jsonb; None when neither side is json.
pub fn cast(v: &Value, to: DataType) -> Option<Result<Value>> {
    Some(match (v, to) {
        (Value::Json(s), DataType::Jsonb) => input(s, true),
        (Value::Jsonb(s), DataType::Json) => Ok(Value::Json(s.clone())),
        (Value::Jsonb(s), DataType::Jsonb) => Ok(Value::Jsonb(s.clone())),
        (Value::Json(s), DataType::Json) => Ok(Value::Json(s.clone())),
        (
            Value::Jsonb(_),
            DataType::Bool
            | DataType::Int2
            | DataType::Int4
            | DataType::Int8
            | DataType::Numeric { .. }
            | DataType::Float4
            | DataType::Float8,
        ) => scalar_cast(v, to),
        _ => return None,
    })
}

/// jsonb to boolean or a number: only from a scalar of that kind (22023).
fn scalar_cast(v: &Value, to: DataType) -> Result<Value> {
    let t = tree(v)?;
    let target = value::type_name(to);
    let refuse = |kind: &str| SqlError::new("22023", format!("cannot cast jsonb {kind} to type {target}"));
    match (&t, to) {
        (Json::Bool(b), DataType::Bool) => Ok(Value::Bool(*b)),
        (Json::Number(_), DataType::Bool) => Err(refuse("numeric")),
        (Json::Number(n), _) => {
            let num = value::parse_input(n, value::NUMERIC_ANY)
                .map_err(|_| SqlError::unsupported(format!("jsonb number {n} beyond 38 digits")))?;
            value::cast(num, to, true)
        }
        (other, _) => Err(refuse(match other {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
            Json::Number(_) => "numeric",
        })),
    }
}

/// Numbers and strings as jsonb gets them from SQL values (datum_to_jsonb).
pub fn from_value(v: &Value) -> Result<Json> {
    Ok(match v {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int2(_) | Value::Int4(_) | Value::Int8(_) | Value::Numeric(_) => Json::Number(value::to_text(v)),
        // NaN and the infinities are no JSON numbers: strings, as floats'.
        Value::Float4(_) | Value::Float8(_) | Value::NumericBig(_) => {
            let text = value::to_text(v);
            match json::numeric_text(&text).filter(|_| json::parse(&text, false).is_ok()) {
                Some(n) => Json::Number(n),
                None => Json::String(text),
            }
        }
        Value::Json(_) | Value::Jsonb(_) => tree(v)?.into_jsonb(),
        Value::Array(items) => Json::Array(items.iter().map(from_value).collect::<Result<_>>()?),
        // to_json(b) ignores an array's lower bounds.
        Value::BoundedArray(b) => Json::Array(b.items.iter().map(from_value).collect::<Result<_>>()?),
        other => Json::String(scalar_text(other)),
    })
}

/// The text of a non-number, non-boolean scalar in json: dates and times
/// in ISO 8601 with a `T` whatever the DateStyle (JsonEncodeDateTime),
/// anything else (and the infinities) its output.
fn scalar_text(v: &Value) -> String {
    let mut out = String::new();
    if value::is_infinite_datetime(v) || !crate::tz::write_xsd_datetime(v, &mut out) {
        out = value::to_text(v);
    }
    out
}

/// json text of a SQL value (datum_to_json): numbers as written when they
/// are JSON numbers, json as written, jsonb as its text, others quoted.
pub fn write_json_text(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int2(_)
        | Value::Int4(_)
        | Value::Int8(_)
        | Value::Numeric(_)
        | Value::NumericBig(_)
        | Value::Float4(_)
        | Value::Float8(_) => {
            let text = value::to_text(v);
            if json::parse(&text, false).is_ok_and(|j| matches!(j, Json::Number(_))) {
                out.push_str(&text);
            } else {
                json::escape_string(out, &text);
            }
        }
        Value::Json(s) | Value::Jsonb(s) => out.push_str(s),
        // array_to_json's layout: no space after the commas; the lower
        // bounds do not show.
        Value::Array(_) | Value::BoundedArray(_) => {
            let items = v.array_parts().map_or(&[][..], |(_, items)| items);
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_text(item, out);
            }
            out.push(']');
        }
        other => json::escape_string(out, &scalar_text(other)),
    }
}

/// The text of a key argument of json[b]_build_object / object_agg: a
/// scalar as json writes it (datum_to_json with key_scalar), unquoted.
fn key_text(v: &Value, position: usize, jsonb: bool) -> Result<String> {
    match v {
        Value::Null if jsonb => Err(SqlError::new("22023", format!("argument {position}: key must not be null"))),
        Value::Null => Err(SqlError::new("22023", format!("argument {position} cannot be null"))
            .with_hint("Object keys should be text.")),
        Value::Json(_) | Value::Jsonb(_) | Value::Array(_) | Value::BoundedArray(_) => {
            Err(SqlError::new("22023", "key value must be scalar, not array, composite, or json"))
        }
        Value::Bool(b) => Ok(if *b { "true" } else { "false" }.to_owned()),
        other => Ok(scalar_text(other)),
    }
}

/// A key of json[b]_object_agg as its transition function takes it.
fn object_agg_key(v: &Value) -> Result<Value> {
    match v {
        Value::Null => Err(SqlError::new("22023", "field name must not be null")),
        Value::Json(_) | Value::Jsonb(_) | Value::Array(_) | Value::BoundedArray(_) => {
            Err(SqlError::new("22023", "key value must be scalar, not array, composite, or json"))
        }
        other => Ok(other.clone()),
    }
}

// ------------------------------------------------------------ operators

/// The elements of a text[] argument (NULL elements kept as None).
fn text_array(v: &Value) -> Result<Vec<Option<String>>> {
    types::parse_array(v.as_str().unwrap_or("{}"), Elem::Text)
}

fn get_step<'a>(j: &'a Json, step: &Value) -> Option<&'a Json> {
    match step {
        Value::Text(k) => j.get(k),
        other => j.index(other.as_i64()?),
    }
}

/// One path step of `#>`: a key in an object, an integer in an array.
fn path_step<'a>(j: &'a Json, step: &str) -> Option<&'a Json> {
    match j {
        Json::Object(_) => j.get(step),
        Json::Array(_) => j.index(step.trim().parse::<i64>().ok()?),
        _ => None,
    }
}

fn result(j: Option<&Json>, jsonb: bool, text: bool) -> Value {
    match (j, text) {
        (None, _) => Value::Null,
        (Some(j), true) => j.to_text().map_or(Value::Null, Value::Text),
        (Some(j), false) if jsonb => Value::Jsonb(j.to_jsonb_text()),
        (Some(j), false) => Value::Json(j.to_jsonb_text()),
    }
}

/// json's `->`/`->>`: the child exactly as written.
fn json_get(doc: &str, step: &Value, text: bool) -> Result<Value> {
    let child: Option<&str> = match (json::shallow(doc).map_err(|e| input_error(e, false, doc))?, step) {
        (Shallow::Object(pairs), Value::Text(k)) => pairs.iter().rev().find(|(key, _)| key == k).map(|(_, v)| *v),
        (Shallow::Array(items), i) => match i.as_i64() {
            Some(i) => {
                let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                let at = if i < 0 { len + i } else { i };
                usize::try_from(at).ok().and_then(|at| items.get(at)).copied()
            }
            None => None,
        },
        _ => None,
    };
    Ok(match child {
        None => Value::Null,
        Some(c) if text => match json::parse(c, false).map_err(|e| input_error(e, false, c))? {
            Json::Null => Value::Null,
            Json::String(s) => {
                if s.contains('\0') {
                    return Err(SqlError::new("22P05", "unsupported Unicode escape sequence")
                        .with_detail("\\u0000 cannot be converted to text."));
                }
                Value::Text(s)
            }
            _ => Value::Text(c.to_owned()),
        },
        Some(c) => Value::Json(c.to_owned()),
    })
}

fn json_get_path(doc: &str, path: &[Option<String>], text: bool) -> Result<Value> {
    let mut cur = doc.trim().to_owned();
    for step in path {
        let Some(step) = step else { return Ok(Value::Null) };
        let key = match json::shallow(&cur).map_err(|e| input_error(e, false, doc))? {
            Shallow::Object(_) => Value::Text(step.clone()),
            Shallow::Array(_) => match step.trim().parse::<i64>() {
                Ok(i) => Value::Int8(i),
                Err(_) => return Ok(Value::Null),
            },
            Shallow::Scalar(_) => return Ok(Value::Null),
        };
        match json_get(&cur, &key, false)? {
            Value::Json(c) => cur = c,
            _ => return Ok(Value::Null),
        }
    }
    if !text {
        return Ok(Value::Json(cur));
    }
    json_get(&format!("[{cur}]"), &Value::Int4(0), true)
}

/// JsonbDeepContains: is `b` contained in `a`?
fn contains(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Object(ap), Json::Object(bp)) => {
            bp.iter().all(|(k, bv)| ap.iter().any(|(ak, av)| ak == k && contains_value(av, bv)))
        }
        (Json::Array(ai), Json::Array(bi)) => bi.iter().all(|bv| ai.iter().any(|av| contains_value(av, bv))),
        _ => false,
    }
}

fn contains_value(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Object(_), Json::Object(_)) | (Json::Array(_), Json::Array(_)) => contains(a, b),
        (Json::Object(_) | Json::Array(_), _) | (_, Json::Object(_) | Json::Array(_)) => false,
        _ => scalar_eq(a, b),
    }
}

fn scalar_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => json::value_sort_key(a) == json::value_sort_key(b) || x == y,
        _ => a == b,
    }
}

/// `@>` at the top: a raw scalar is a one-element array, and an array
/// contains a raw scalar it has among its elements.
fn top_contains(a: &Json, b: &Json) -> bool {
    let is_scalar = |j: &Json| !matches!(j, Json::Array(_) | Json::Object(_));
    match (is_scalar(a), is_scalar(b)) {
        (true, true) => scalar_eq(a, b),
        (true, false) => false,
        (false, true) => matches!(a, Json::Array(items) if items.iter().any(|x| scalar_eq(x, b))),
        (false, false) => contains(a, b),
    }
}

/// `?`: a top-level key, or a string element of a top-level array (or the
/// raw scalar string itself).
fn exists(j: &Json, key: &str) -> bool {
    match j {
        Json::Object(pairs) => pairs.iter().any(|(k, _)| k == key),
        Json::Array(items) => items.iter().any(|x| matches!(x, Json::String(s) if s == key)),
        Json::String(s) => s == key,
        _ => false,
    }
}

fn concat(a: Json, b: Json) -> Json {
    match (a, b) {
        (Json::Object(mut ap), Json::Object(bp)) => {
            ap.extend(bp);
            Json::Object(ap)
        }
        (a, b) => {
            let items = |j: Json| match j {
                Json::Array(items) => items,
                other => vec![other],
            };
            let mut out = items(a);
            out.extend(items(b));
            Json::Array(out)
        }
    }
}

fn delete(j: Json, what: &Value) -> Result<Json> {
    let scalar = || SqlError::new("22023", "cannot delete from scalar");
    match (j, what) {
        (Json::Object(pairs), Value::Text(k)) if types_is_text_array(k) => {
            let keys = types::parse_array(k, Elem::Text)?;
            Ok(Json::Object(
                pairs.into_iter().filter(|(pk, _)| !keys.iter().any(|x| x.as_deref() == Some(pk))).collect(),
            ))
        }
        (Json::Object(pairs), Value::Text(k)) => {
            Ok(Json::Object(pairs.into_iter().filter(|(pk, _)| pk != k).collect()))
        }
        (Json::Array(items), Value::Text(k)) => {
            Ok(Json::Array(items.into_iter().filter(|x| !matches!(x, Json::String(s) if s == k)).collect()))
        }
        (Json::Object(_), _) => Err(SqlError::new("22023", "cannot delete from object using integer index")),
        (Json::Array(mut items), i) => {
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let i = i.as_i64().unwrap_or(len);
            let at = if i < 0 { len + i } else { i };
            if let Some(at) = usize::try_from(at).ok().filter(|&at| at < items.len()) {
                items.remove(at);
            }
            Ok(Json::Array(items))
        }
        _ => Err(scalar()),
    }
}

/// The binder marks `jsonb - text[]` by wrapping the array text in this
/// prefix (the engine has no array type to tell text from text[]).
pub const TEXT_ARRAY_MARK: &str = "\u{1}text[]";

fn types_is_text_array(k: &str) -> bool {
    k.starts_with(TEXT_ARRAY_MARK)
}

fn delete_value(j: Json, what: &Value) -> Result<Json> {
    match what {
        Value::Text(k) if types_is_text_array(k) => {
            let inner = Value::Text(k[TEXT_ARRAY_MARK.len()..].to_owned());
            match j {
                Json::Object(_) | Json::Array(_) => {
                    let mut cur = j;
                    for key in text_array(&inner)?.into_iter().flatten() {
                        cur = delete(cur, &Value::Text(key))?;
                    }
                    Ok(cur)
                }
                _ => Err(SqlError::new("22023", "cannot delete from scalar")),
            }
        }
        _ => delete(j, what),
    }
}

fn delete_path(j: Json, path: &[Option<String>]) -> Result<Json> {
    let Some((first, rest)) = path.split_first() else { return Ok(j) };
    let Some(first) = first else { return Err(SqlError::new("22004", "path element at position 1 is null")) };
    // jsonb_delete_path returns an empty container as it is, path or not.
    if matches!(&j, Json::Array(v) if v.is_empty()) || matches!(&j, Json::Object(v) if v.is_empty()) {
        return Ok(j);
    }
    Ok(match j {
        Json::Object(pairs) => Json::Object(if rest.is_empty() {
            pairs.into_iter().filter(|(k, _)| k != first).collect()
        } else {
            pairs
                .into_iter()
                .map(|(k, v)| if k == *first { delete_path(v, rest).map(|v| (k, v)) } else { Ok((k, v)) })
                .collect::<Result<_>>()?
        }),
        Json::Array(mut items) => {
            let i: i64 = first.trim().parse().map_err(|_| {
                SqlError::new("22P02", format!("path element at position 1 is not an integer: \"{first}\""))
            })?;
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if i < 0 { len + i } else { i };
            if let Some(at) = usize::try_from(at).ok().filter(|&at| at < items.len()) {
                if rest.is_empty() {
                    items.remove(at);
                } else {
                    let v = std::mem::replace(&mut items[at], Json::Null);
                    items[at] = delete_path(v, rest)?;
                }
            }
            Json::Array(items)
        }
        _ => return Err(SqlError::new("22023", "cannot delete path in scalar")),
    })
}

/// What jsonb_set / jsonb_insert do at the last step of the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetMode {
    /// jsonb_set: replace, and with `create` add a missing last step.
    Set { create: bool },
    /// jsonb_insert: add before (or after) the array element; add a
    /// missing object key, refuse an existing one.
    Insert { after: bool },
}

impl SetMode {
    fn adds(self) -> bool {
        matches!(self, SetMode::Set { create: true } | SetMode::Insert { .. })
    }
}

/// A path element used as an array index: PostgreSQL's strtoint (leading
/// white space and a sign, nothing after the digits, int4 range).
pub(super) fn path_index(step: &str, level: usize) -> Result<i64> {
    step.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']).parse::<i32>().map(i64::from).map_err(|_| {
        SqlError::new("22P02", format!("path element at position {} is not an integer: \"{step}\"", level + 1))
    })
}

/// jsonb_set / jsonb_insert (setPath): the value at `path` replaced, or
/// the new value added, as `mode` says.
fn set_path(j: Json, path: &[Option<String>], new: &Json, mode: SetMode, level: usize) -> Result<Json> {
    if level == 0 && !matches!(j, Json::Object(_) | Json::Array(_)) {
        return Err(SqlError::new("22023", "cannot set path in scalar"));
    }
    let Some((first, rest)) = path.split_first() else {
        return Ok(if level == 0 { j } else { new.clone() });
    };
    let Some(first) = first else {
        return Err(SqlError::new("22004", format!("path element at position {} is null", level + 1)));
    };
    Ok(match j {
        Json::Object(mut pairs) => {
            match pairs.iter().position(|(k, _)| k == first) {
                Some(_) if rest.is_empty() && matches!(mode, SetMode::Insert { .. }) => {
                    return Err(SqlError::new("22023", "cannot replace existing key")
                        .with_hint("Try using the function jsonb_set to replace key value."));
                }
                Some(at) => {
                    let v = std::mem::replace(&mut pairs[at].1, Json::Null);
                    pairs[at].1 = set_path(v, rest, new, mode, level + 1)?;
                }
                None if mode.adds() && rest.is_empty() => pairs.push((first.clone(), new.clone())),
                None => {}
            }
            Json::Object(pairs)
        }
        Json::Array(mut items) => {
            let i = path_index(first, level)?;
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if i < 0 { len + i } else { i };
            match usize::try_from(at).ok().filter(|&at| at < items.len()) {
                Some(at) if rest.is_empty() && matches!(mode, SetMode::Insert { .. }) => {
                    let after = matches!(mode, SetMode::Insert { after: true });
                    items.insert(if after { at + 1 } else { at }, new.clone());
                }
                Some(at) => {
                    let v = std::mem::replace(&mut items[at], Json::Null);
                    items[at] = set_path(v, rest, new, mode, level + 1)?;
                }
                None if mode.adds() && rest.is_empty() => {
                    if at < 0 {
                        items.insert(0, new.clone())
                    } else {
                        items.push(new.clone())
                    }
                }
                None => {}
            }
            Json::Array(items)
        }
        other => other,
    })
}

/// jsonb_set_lax: jsonb_set unless the new value is SQL NULL, then what
/// null_value_treatment says (compared case-sensitively, as PostgreSQL does).
fn set_lax(vals: &[Value]) -> Result<Value> {
    let arg = |i: usize| vals.get(i).unwrap_or(&Value::Null);
    if arg(0).is_null() || arg(1).is_null() || (vals.len() > 3 && arg(3).is_null()) {
        return Ok(Value::Null);
    }
    let bad_treatment = || {
        SqlError::new(
            "22023",
            "null_value_treatment must be \"delete_key\", \"return_target\", \"use_json_null\", or \"raise_exception\"",
        )
    };
    if vals.len() > 4 && arg(4).is_null() {
        return Err(bad_treatment());
    }
    let create = vals.len() < 4 || matches!(arg(3), Value::Bool(true));
    let path = text_array(arg(1))?;
    let set = |new: &Json| -> Result<Value> {
        Ok(jsonb_value(set_path(tree(arg(0))?, &path, new, SetMode::Set { create }, 0)?))
    };
    if !arg(2).is_null() {
        return set(&tree(arg(2))?);
    }
    match if vals.len() > 4 { arg(4).as_str().unwrap_or("") } else { "use_json_null" } {
        "raise_exception" => Err(SqlError::new("22004", "JSON value must not be null")
            .with_detail("Exception was raised because null_value_treatment is \"raise_exception\".")
            .with_hint(
                "To avoid, either change the null_value_treatment argument or ensure that an SQL NULL is not passed.",
            )),
        "use_json_null" => set(&Json::Null),
        "delete_key" => Ok(jsonb_value(delete_path(tree(arg(0))?, &path)?)),
        "return_target" => Ok(arg(0).clone()),
        _ => Err(bad_treatment()),
    }
}

fn strip_nulls(j: Json) -> Json {
    match j {
        Json::Object(pairs) => Json::Object(
            pairs.into_iter().filter(|(_, v)| *v != Json::Null).map(|(k, v)| (k, strip_nulls(v))).collect(),
        ),
        Json::Array(items) => Json::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

/// json_strip_nulls keeps the text layout of what it keeps: rebuilt from
/// the children as written.
fn json_strip_nulls(doc: &str) -> Result<String> {
    Ok(match json::shallow(doc).map_err(|e| input_error(e, false, doc))? {
        Shallow::Object(pairs) => {
            let mut out = String::from("{");
            let mut first = true;
            for (k, v) in pairs {
                if v.trim() == "null" {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                json::escape_string(&mut out, &k);
                out.push(':');
                out.push_str(&json_strip_nulls(v)?);
            }
            out.push('}');
            out
        }
        Shallow::Array(items) => {
            let parts: Vec<String> = items.into_iter().map(json_strip_nulls).collect::<Result<_>>()?;
            format!("[{}]", parts.join(","))
        }
        Shallow::Scalar(_) => doc.to_owned(),
    })
}

fn array_length(j: &Json) -> Result<Value> {
    match j {
        Json::Array(items) => Ok(Value::Int4(i32::try_from(items.len()).unwrap_or(i32::MAX))),
        Json::Object(_) => Err(SqlError::new("22023", "cannot get array length of a non-array")),
        _ => Err(SqlError::new("22023", "cannot get array length of a scalar")),
    }
}

/// Evaluates `f` on its arguments. Strict functions never see NULLs (the
/// caller answers NULL).
pub fn eval(f: JsonFunc, vals: &[Value]) -> Result<Value> {
    let arg = |i: usize| vals.get(i).unwrap_or(&Value::Null);
    match f {
        JsonFunc::BuildObject { jsonb } => return build_object(vals, jsonb),
        JsonFunc::BuildArray { jsonb } => return build_array(vals, jsonb),
        JsonFunc::ObjectAggKey => return object_agg_key(arg(0)),
        JsonFunc::Path(_) => return Err(SqlError::unsupported("a jsonpath function here")),
        JsonFunc::SetLax => return set_lax(vals),
        JsonFunc::SubscriptAssign { expect_array } => return super::json_assign::assign(vals, expect_array),
        _ => {}
    }
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    Ok(match f {
        JsonFunc::To { jsonb: true } => jsonb_value(from_value(arg(0))?),
        JsonFunc::To { jsonb: false } => {
            let mut s = String::new();
            write_json_text(arg(0), &mut s);
            Value::Json(s)
        }
        JsonFunc::Get { jsonb: false, text } => json_get(arg(0).as_json_text(), arg(1), text)?,
        JsonFunc::Get { jsonb: true, text } => result(get_step(&tree(arg(0))?, arg(1)), true, text),
        JsonFunc::GetPath { jsonb, text } | JsonFunc::ExtractPath { jsonb, text } => {
            let path = if matches!(f, JsonFunc::GetPath { .. }) {
                text_array(arg(1))?
            } else {
                vals[1..].iter().map(|v| v.as_str().map(str::to_owned)).collect()
            };
            if !jsonb {
                return json_get_path(arg(0).as_json_text(), &path, text);
            }
            let t = tree(arg(0))?;
            let mut cur = Some(&t);
            for step in &path {
                cur = match (cur, step) {
                    (Some(j), Some(s)) => path_step(j, s),
                    _ => None,
                };
            }
            result(cur, true, text)
        }
        JsonFunc::Contains => Value::Bool(top_contains(&tree(arg(0))?, &tree(arg(1))?)),
        JsonFunc::Exists => Value::Bool(exists(&tree(arg(0))?, arg(1).as_str().unwrap_or(""))),
        JsonFunc::ExistsAny | JsonFunc::ExistsAll => {
            let t = tree(arg(0))?;
            let keys: Vec<String> = text_array(arg(1))?.into_iter().flatten().collect();
            let hit = |k: &String| exists(&t, k);
            Value::Bool(if f == JsonFunc::ExistsAny { keys.iter().any(hit) } else { keys.iter().all(hit) })
        }
        JsonFunc::Concat => jsonb_value(concat(tree(arg(0))?, tree(arg(1))?)),
        JsonFunc::Delete => jsonb_value(delete_value(tree(arg(0))?, arg(1))?),
        JsonFunc::DeletePath => jsonb_value(delete_path(tree(arg(0))?, &text_array(arg(1))?)?),
        JsonFunc::Typeof { .. } => Value::Text(tree(arg(0))?.type_name().to_owned()),
        JsonFunc::ArrayLength { .. } => array_length(&tree(arg(0))?)?,
        JsonFunc::Set | JsonFunc::Insert => {
            let flag = matches!(arg(3), Value::Bool(true));
            let mode = if f == JsonFunc::Set {
                SetMode::Set { create: vals.len() < 4 || flag }
            } else {
                SetMode::Insert { after: flag }
            };
            let new = tree(arg(2))?;
            jsonb_value(set_path(tree(arg(0))?, &text_array(arg(1))?, &new, mode, 0)?)
        }
        JsonFunc::Object { jsonb } => object(vals, jsonb)?,
        JsonFunc::StripNulls { jsonb: true } => jsonb_value(strip_nulls(tree(arg(0))?)),
        JsonFunc::StripNulls { jsonb: false } => Value::Json(json_strip_nulls(arg(0).as_json_text())?),
        JsonFunc::Pretty => Value::Text(tree(arg(0))?.to_pretty_text()),
        JsonFunc::BuildObject { .. }
        | JsonFunc::BuildArray { .. }
        | JsonFunc::ObjectAggKey
        | JsonFunc::Path(_)
        | JsonFunc::SetLax
        | JsonFunc::SubscriptAssign { .. } => Value::Null,
    })
}

trait JsonText {
    fn as_json_text(&self) -> &str;
}

impl JsonText for Value {
    fn as_json_text(&self) -> &str {
        match self {
            Value::Json(s) | Value::Jsonb(s) | Value::Text(s) => s,
            _ => "null",
        }
    }
}

fn build_object(vals: &[Value], jsonb: bool) -> Result<Value> {
    if !vals.len().is_multiple_of(2) {
        return Err(SqlError::new("22023", "argument list must have even number of elements").with_hint(format!(
            "The arguments of {}_build_object() must consist of alternating keys and values.",
            type_label(jsonb)
        )));
    }
    if jsonb {
        let mut pairs = Vec::new();
        for (i, kv) in vals.chunks(2).enumerate() {
            pairs.push((key_text(&kv[0], 2 * i + 1, true)?, from_value(&kv[1])?));
        }
        return Ok(jsonb_value(Json::Object(pairs)));
    }
    let mut out = String::from("{");
    for (i, kv) in vals.chunks(2).enumerate() {
        let key = key_text(&kv[0], 2 * i + 1, false)?;
        if i > 0 {
            out.push_str(", ");
        }
        json::escape_string(&mut out, &key);
        out.push_str(" : ");
        write_json_text(&kv[1], &mut out);
    }
    out.push('}');
    Ok(Value::Json(out))
}

/// A text[] argument of json_object (the text form, of any number of
/// dimensions): its number of dimensions, its second dimension's length
/// and its elements in storage order.
fn object_array(v: &Value) -> Result<(usize, usize, Vec<Option<String>>)> {
    let whole = value::array::array_in(v.as_str().unwrap_or("{}"), DataType::Text)?;
    // json_object ignores the lower bounds.
    let Some((_, items)) = whole.array_parts() else {
        return Ok((0, 0, Vec::new()));
    };
    let dims = value::array::dims(items);
    let elems = value::array::leaves(items).into_iter().map(|e| e.as_str().map(str::to_owned)).collect();
    Ok((dims.len(), dims.get(1).copied().unwrap_or(0), elems))
}

/// json_object / jsonb_object of one array of alternating keys and values
/// (one-dimensional, or of two columns) or of a keys array and a values
/// array (one-dimensional); the values are json strings.
fn object(vals: &[Value], jsonb: bool) -> Result<Value> {
    let subscripts = || SqlError::new("2202E", "wrong number of array subscripts");
    let pairs: Vec<(Option<String>, Option<String>)> = match vals {
        [both] => {
            let (ndims, columns, items) = object_array(both)?;
            match ndims {
                0 | 1 if !items.len().is_multiple_of(2) => {
                    return Err(SqlError::new("2202E", "array must have even number of elements"));
                }
                0 | 1 => {}
                2 if columns != 2 => return Err(SqlError::new("2202E", "array must have two columns")),
                2 => {}
                _ => return Err(subscripts()),
            }
            items.chunks(2).map(|kv| (kv[0].clone(), kv[1].clone())).collect()
        }
        [keys, values] => {
            let ((nk, _, keys), (nv, _, values)) = (object_array(keys)?, object_array(values)?);
            if nk > 1 || nk != nv {
                return Err(subscripts());
            }
            if keys.len() != values.len() {
                return Err(SqlError::new("2202E", "mismatched array dimensions"));
            }
            keys.into_iter().zip(values).collect()
        }
        _ => return Err(SqlError::new("42883", "json_object takes one or two text arrays")),
    };
    let mut out_pairs = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        let Some(k) = k else { return Err(SqlError::new("22004", "null value not allowed for object key")) };
        out_pairs.push((k, v.map_or(Json::Null, Json::String)));
    }
    if jsonb {
        return Ok(jsonb_value(Json::Object(out_pairs)));
    }
    let mut out = String::from("{");
    for (i, (k, v)) in out_pairs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        json::escape_string(&mut out, k);
        out.push_str(" : ");
        out.push_str(&v.to_jsonb_text());
    }
    out.push('}');
    Ok(Value::Json(out))
}

fn build_array(vals: &[Value], jsonb: bool) -> Result<Value> {
    if jsonb {
        return Ok(jsonb_value(Json::Array(vals.iter().map(from_value).collect::<Result<_>>()?)));
    }
    let mut out = String::from("[");
    for (i, v) in vals.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_json_text(v, &mut out);
    }
    out.push(']');
    Ok(Value::Json(out))
}

/// The rows of a set-returning json function (each row its columns).
pub fn srf_rows(f: JsonSrf, doc: &Value) -> Result<Vec<Vec<Value>>> {
    let name = |what: &str, jsonb: bool| format!("{}_{what}", type_label(jsonb));
    match f {
        JsonSrf::PathQuery => Err(SqlError::unsupported("jsonb_path_query here")),
        JsonSrf::Each { jsonb, text } => {
            let refuse = |kind: &str| {
                SqlError::new(
                    "22023",
                    format!("cannot call {} on a {kind}", name(if text { "each_text" } else { "each" }, jsonb)),
                )
            };
            if !jsonb {
                return match json::shallow(doc.as_json_text()).map_err(|e| input_error(e, false, doc.as_json_text()))? {
                    Shallow::Object(pairs) => pairs
                        .into_iter()
                        .map(|(k, v)| {
                            let val = if text {
                                json_get(&format!("[{v}]"), &Value::Int4(0), true)?
                            } else {
                                Value::Json(v.to_owned())
                            };
                            Ok(vec![Value::Text(k), val])
                        })
                        .collect(),
                    Shallow::Array(_) => Err(refuse("non-object")),
                    Shallow::Scalar(_) => Err(refuse("scalar")),
                };
            }
            match tree(doc)? {
                Json::Object(pairs) => {
                    Ok(pairs.into_iter().map(|(k, v)| vec![Value::Text(k), result(Some(&v), true, text)]).collect())
                }
                Json::Array(_) => Err(refuse("non-object")),
                _ => Err(refuse("scalar")),
            }
        }
        JsonSrf::ArrayElements { jsonb, text } => {
            let fname = name(if text { "array_elements_text" } else { "array_elements" }, jsonb);
            if !jsonb {
                return match json::shallow(doc.as_json_text()).map_err(|e| input_error(e, false, doc.as_json_text()))? {
                    Shallow::Array(items) => items
                        .into_iter()
                        .map(|v| {
                            Ok(vec![if text {
                                json_get(&format!("[{v}]"), &Value::Int4(0), true)?
                            } else {
                                Value::Json(v.to_owned())
                            }])
                        })
                        .collect(),
                    Shallow::Object(_) => Err(SqlError::new("22023", format!("cannot call {fname} on a non-array"))),
                    Shallow::Scalar(_) => Err(SqlError::new("22023", format!("cannot call {fname} on a scalar"))),
                };
            }
            match tree(doc)? {
                Json::Array(items) => Ok(items.iter().map(|v| vec![result(Some(v), true, text)]).collect()),
                Json::Object(_) => Err(SqlError::new("22023", "cannot extract elements from an object")),
                _ => Err(SqlError::new("22023", "cannot extract elements from a scalar")),
            }
        }
        JsonSrf::ObjectKeys { jsonb } => {
            let fname = name("object_keys", jsonb);
            let keys: Vec<String> = if jsonb {
                match tree(doc)? {
                    Json::Object(pairs) => pairs.into_iter().map(|(k, _)| k).collect(),
                    Json::Array(_) => return Err(SqlError::new("22023", format!("cannot call {fname} on an array"))),
                    _ => return Err(SqlError::new("22023", format!("cannot call {fname} on a scalar"))),
                }
            } else {
                match json::shallow(doc.as_json_text()).map_err(|e| input_error(e, false, doc.as_json_text()))? {
                    Shallow::Object(pairs) => pairs.into_iter().map(|(k, _)| k).collect(),
                    Shallow::Array(_) => {
                        return Err(SqlError::new("22023", format!("cannot call {fname} on an array")));
                    }
                    Shallow::Scalar(_) => {
                        return Err(SqlError::new("22023", format!("cannot call {fname} on a scalar")));
                    }
                }
            };
            Ok(keys.into_iter().map(|k| vec![Value::Text(k)]).collect())
        }
    }
}

// ------------------------------------------------------------ aggregates

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonAgg {
    /// json_agg / jsonb_agg.
    Agg { jsonb: bool },
    /// json_object_agg / jsonb_object_agg: each row's argument is the json
    /// array `[key, value]` (json_build_array of the pair).
    ObjectAgg { jsonb: bool },
}

/// The aggregate's value over the collected arguments (not empty).
pub fn finish_agg(agg: JsonAgg, items: &[Value]) -> Result<Value> {
    match agg {
        // The layout of json_build_array (`[1, 2]`), but json_agg starts
        // each array after the first on a new line.
        JsonAgg::Agg { jsonb: true } => build_array(items, true),
        JsonAgg::Agg { jsonb: false } => {
            let mut out = String::from("[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(if matches!(v, Value::Array(_) | Value::BoundedArray(_)) { ", \n " } else { ", " });
                }
                write_json_text(v, &mut out);
            }
            out.push(']');
            Ok(Value::Json(out))
        }
        JsonAgg::ObjectAgg { jsonb } => {
            let mut pairs = Vec::with_capacity(items.len());
            for pair in items {
                let doc = pair.as_json_text();
                let Shallow::Array(kv) = json::shallow(doc).map_err(|e| input_error(e, false, doc))? else { continue };
                let (Some(k), Some(v)) = (kv.first(), kv.get(1)) else { continue };
                let key = match json::parse(k, false).map_err(|e| input_error(e, false, k))? {
                    Json::Null => return Err(SqlError::new("22023", "field name must not be null")),
                    Json::String(s) => s,
                    other => other.to_jsonb_text(),
                };
                pairs.push((key, *v));
            }
            if jsonb {
                let mut out = Vec::with_capacity(pairs.len());
                for (k, v) in pairs {
                    out.push((k, json::parse(v, false).map_err(|e| input_error(e, false, v))?));
                }
                return Ok(jsonb_value(Json::Object(out)));
            }
            let mut out = String::from("{ ");
            for (i, (k, v)) in pairs.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                json::escape_string(&mut out, &k);
                out.push_str(" : ");
                out.push_str(v);
            }
            out.push_str(" }");
            Ok(Value::Json(out))
        }
    }
}
