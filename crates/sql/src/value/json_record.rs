//! `json_to_record`, `jsonb_to_record`, `json_to_recordset` and
//! `jsonb_to_recordset` with a column definition list: PostgreSQL 15's
//! populate_record_field (jsonfuncs.c) for the types pgtier has.
//!
//! A column takes the object's key of its name (the last one of a json
//! object that repeats it); a missing key or JSON null is NULL. Then, by
//! the column's type:
//! - json / jsonb: the value as JSON (a string stays a JSON string); from
//!   json the text as written, from jsonb its jsonb text;
//! - an array type: a JSON array element by element, a JSON string
//!   through array input, anything else 22P02 `expected JSON array`; a
//!   JSON array of arrays is a multidimensional array (populate_array);
//! - any other type: the type's input function on a string's contents,
//!   a number's text (as written in json, numeric_out's in jsonb), `true`
//!   / `false`, or an object's or array's JSON text.

use pgtier_engine::json::{self, Json, Shallow};
use pgtier_engine::{DataType, Value};

use crate::error::{Result, SqlError};
use crate::value;

/// What a bound `json[b]_to_record[set]` call returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordSpec {
    pub jsonb: bool,
    /// `_to_recordset`: a row per object of an array.
    pub set: bool,
    /// The column definition list: key (column name) and type.
    pub columns: Vec<(String, DataType)>,
    /// `json[b]_populate_record[set]` over a composite type's attributes
    /// (its name in messages).
    pub populate: bool,
}

impl RecordSpec {
    fn name(&self) -> String {
        format!(
            "{}_{}_record{}",
            if self.jsonb { "jsonb" } else { "json" },
            if self.populate { "populate" } else { "to" },
            if self.set { "set" } else { "" }
        )
    }
}

/// A check of each column's value as it is made (a domain's constraints),
/// in column order: PostgreSQL checks a column before it reads the next.
pub type ColumnCheck<'a> = dyn FnMut(usize, &Value) -> Result<()> + 'a;

/// A column's value from its key's converted value (None: the key is missing).
type RowFill<'a> = dyn FnMut(usize, Option<Value>) -> Result<Value> + 'a;

/// A JSON value to convert: json's text as written or a jsonb tree node.
#[derive(Clone, Copy)]
enum Jv<'a> {
    Text(&'a str),
    Tree(&'a Json),
}

fn syntax(e: json::JsonError, text: &str) -> SqlError {
    SqlError::invalid_text("json", text).with_detail(e.detail)
}

/// The rows of the call on `doc` (a NULL document: none). `defaults`:
/// the values of a populate call's non-NULL base record, which a column
/// whose key is missing keeps unchecked (empty: a NULL base).
pub fn rows(
    spec: &RecordSpec,
    doc: &Value,
    defaults: &[Value],
    check: &mut ColumnCheck<'_>,
) -> Result<Vec<Vec<Value>>> {
    let check = &mut |k: usize, v: Option<Value>| match v {
        None if !defaults.is_empty() => Ok(defaults.get(k).cloned().unwrap_or(Value::Null)),
        v => {
            let v = v.unwrap_or(Value::Null);
            check(k, &v)?;
            Ok(v)
        }
    };
    let wrong = |what: &str| SqlError::new("22023", format!("cannot call {} on {what}", spec.name()));
    let not_objects = || SqlError::new("22023", format!("argument of {} must be an array of objects", spec.name()));
    match doc {
        Value::Null => Ok(Vec::new()),
        Value::Json(text) => match json::shallow(text).map_err(|e| syntax(e, text))? {
            Shallow::Object(pairs) if !spec.set => Ok(vec![json_row(spec, &pairs, check)?]),
            Shallow::Object(_) => Err(wrong("an object")),
            Shallow::Array(_) if !spec.set => Err(wrong("an array")),
            Shallow::Array(items) => items
                .into_iter()
                .map(|item| match json::shallow(item).map_err(|e| syntax(e, item))? {
                    Shallow::Object(pairs) => json_row(spec, &pairs, check),
                    _ => Err(not_objects()),
                })
                .collect(),
            Shallow::Scalar(_) => Err(wrong("a scalar")),
        },
        other => match super::json::tree(other)? {
            Json::Object(pairs) if !spec.set => Ok(vec![jsonb_row(spec, &pairs, check)?]),
            Json::Array(items) if spec.set => items
                .iter()
                .map(|item| match item {
                    Json::Object(pairs) => jsonb_row(spec, pairs, check),
                    _ => Err(not_objects()),
                })
                .collect(),
            _ if spec.set => Err(wrong("a non-array")),
            Json::Array(_) => Err(wrong("an array")),
            _ => Err(wrong("a scalar")),
        },
    }
}

fn json_row(spec: &RecordSpec, pairs: &[(String, &str)], check: &mut RowFill<'_>) -> Result<Vec<Value>> {
    record_row(spec, pairs, |v| Jv::Text(v), check)
}

fn jsonb_row(spec: &RecordSpec, pairs: &[(String, Json)], check: &mut RowFill<'_>) -> Result<Vec<Value>> {
    record_row(spec, pairs, Jv::Tree, check)
}

/// One row of `spec` from an object's pairs (the last of a repeated key).
fn record_row<'a, V>(
    spec: &RecordSpec,
    pairs: &'a [(String, V)],
    as_jv: impl Fn(&'a V) -> Jv<'a>,
    check: &mut RowFill<'_>,
) -> Result<Vec<Value>> {
    let mut row = Vec::with_capacity(spec.columns.len());
    for (k, (key, ty)) in spec.columns.iter().enumerate() {
        let v = match pairs.iter().rev().find(|(name, _)| name == key) {
            None => None,
            Some((_, v)) => Some(field(as_jv(v), *ty, key)?),
        };
        row.push(check(k, v)?);
    }
    Ok(row)
}

/// populate_record_field for the column `key` of type `ty`.
fn field(jv: Jv<'_>, ty: DataType, key: &str) -> Result<Value> {
    let owned;
    let tree = match jv {
        Jv::Text(t) => {
            owned = json::parse(t, false).map_err(|e| syntax(e, t))?;
            &owned
        }
        Jv::Tree(j) => j,
    };
    match (tree, ty) {
        (Json::Null, _) => Ok(Value::Null),
        (_, super::types::COMPOSITE_ATTR) => {
            Err(SqlError::unsupported(format!("composite values (the value of key \"{key}\")")))
        }
        (_, DataType::Json | DataType::Jsonb) => {
            let text = match (jv, tree) {
                (Jv::Text(_), Json::String(s)) => {
                    let mut quoted = String::new();
                    json::escape_string(&mut quoted, s);
                    quoted
                }
                (Jv::Text(t), _) => t.to_owned(),
                (Jv::Tree(j), _) => j.to_jsonb_text(),
            };
            super::json::input(&text, ty == DataType::Jsonb)
        }
        (Json::Array(_), DataType::Array(elem)) => array(jv, elem.get(), key),
        (Json::String(_), DataType::Array(_)) => scalar(jv, tree, ty),
        (_, DataType::Array(_)) => {
            Err(SqlError::new("22P02", "expected JSON array").with_hint(format!("See the value of key \"{key}\".")))
        }
        _ => scalar(jv, tree, ty),
    }
}

/// populate_array: a JSON array of arrays (as deep as its first elements
/// go) into an array of `elem` of that many dimensions. The sub-arrays of
/// each dimension must all be as long as its first (22P02 `malformed JSON
/// array`), and an element above the innermost dimension must be an
/// array (22P02 `expected JSON array`, the hint naming where).
fn array(jv: Jv<'_>, elem: DataType, key: &str) -> Result<Value> {
    let mut dims = Dims { ndims: 0, lens: Vec::new(), sizes: Vec::new(), key };
    let items = dims.sub_array(jv, 1, elem)?;
    if dims.ndims > super::array::DIMS_MAX {
        return Err(super::array::too_many_dims(dims.ndims));
    }
    // makeMdArrayResult: a dimension of length 0 makes the array empty.
    if items.is_empty() || dims.lens.contains(&Some(0)) {
        return Ok(Value::Array(Vec::new()));
    }
    Ok(Value::Array(items))
}

/// PopulateArrayContext: the number of dimensions once known (0 until
/// then), each dimension's length once known, and the count of elements
/// of the sub-array being read at each dimension.
struct Dims<'k> {
    ndims: usize,
    lens: Vec<Option<usize>>,
    sizes: Vec<usize>,
    key: &'k str,
}

impl Dims<'_> {
    /// populate_array_dim_jsonb: the (sub-)array `jv` at dimension `ndim`
    /// (from 1), its elements or sub-arrays.
    fn sub_array(&mut self, jv: Jv<'_>, ndim: usize, elem: DataType) -> Result<Vec<Value>> {
        let items: Vec<Jv<'_>> = match jv {
            Jv::Text(t) => match json::shallow(t).map_err(|e| syntax(e, t))? {
                Shallow::Array(items) => items.into_iter().map(Jv::Text).collect(),
                _ => return Err(self.expected_array(ndim - 1)),
            },
            Jv::Tree(Json::Array(items)) => items.iter().map(Jv::Tree).collect(),
            Jv::Tree(_) => return Err(self.expected_array(ndim - 1)),
        };
        let is_array = |jv: &Jv<'_>| match jv {
            Jv::Text(t) => t.trim_start().starts_with('['),
            Jv::Tree(j) => matches!(j, Json::Array(_)),
        };
        if self.ndims == 0 && !items.first().is_some_and(is_array) {
            self.ndims = ndim;
            self.lens = vec![None; ndim];
            self.sizes = vec![0; ndim];
        }
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            if self.ndims > 0 && ndim >= self.ndims {
                out.push(field(item, elem, self.key)?);
                self.sizes[ndim - 1] += 1;
            } else {
                out.push(Value::Array(self.sub_array(item, ndim + 1, elem)?));
                self.check_dimension(ndim)?;
            }
        }
        if ndim == 1 {
            self.lens[0] = Some(self.sizes[0]);
        }
        Ok(out)
    }

    /// populate_array_check_dimension: the sub-array of dimension `ndim + 1`
    /// just read against the first one's length.
    fn check_dimension(&mut self, ndim: usize) -> Result<()> {
        let len = self.sizes[ndim];
        match self.lens[ndim] {
            None => self.lens[ndim] = Some(len),
            Some(first) if first != len => {
                return Err(SqlError::new("22P02", "malformed JSON array")
                    .with_detail("Multidimensional arrays must have sub-arrays with matching dimensions."));
            }
            Some(_) => {}
        }
        self.sizes[ndim] = 0;
        self.sizes[ndim - 1] += 1;
        Ok(())
    }

    /// populate_array_report_expected_array: a non-array where dimension
    /// `ndim + 1` was expected.
    fn expected_array(&self, ndim: usize) -> SqlError {
        let err = SqlError::new("22P02", "expected JSON array");
        if ndim == 0 {
            return err.with_hint(format!("See the value of key \"{}\".", self.key));
        }
        let at: String = self.sizes.iter().take(ndim).map(|n| format!("[{n}]")).collect();
        err.with_hint(format!("See the array element {at} of key \"{}\".", self.key))
    }
}

/// populate_scalar: the type's input function on the value's text.
fn scalar(jv: Jv<'_>, tree: &Json, ty: DataType) -> Result<Value> {
    let text = match (jv, tree) {
        (_, Json::String(s)) => {
            if s.contains('\0') {
                return Err(SqlError::new("22P05", "unsupported Unicode escape sequence")
                    .with_detail("\\u0000 cannot be converted to text."));
            }
            s.clone()
        }
        (Jv::Text(t), _) => t.to_owned(),
        (Jv::Tree(j), _) => j.to_jsonb_text(),
    };
    let v = value::parse_input(&text, ty)?;
    value::cast(v, ty, false)
}
