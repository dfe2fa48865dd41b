//! PostgreSQL types that exist only in the SQL layer, for the system
//! catalogs: `oid`, `name`, `"char"`, the `reg*` types, `int2vector`,
//! `oidvector` and one-dimensional arrays.
//!
//! The engine's [`DataType`] is the binder's type, and storage never sees
//! these types, so they are carried as engine types:
//! - `oid` is `int8` (prints the same, compares numerically with integers);
//!   `name` and `"char"` are `text` (PostgreSQL compares `name` in the C
//!   collation, as pgtier compares all text).
//! - `regclass`/`regtype`/`regnamespace`/`regrole` are an oid that prints as
//!   a name. They are `numeric` with precision 0 and a nonzero scale tag:
//!   precision 0 is unconstrained numeric (`NUMERIC_ANY` is scale 0), so
//!   any cast the binder inserts keeps the number, comparisons with oids are
//!   numeric, and `CREATE TABLE` can never produce one. Values are `Int8`;
//!   the top-level output and `::text` turn them into names
//!   ([`crate::expr::SysFunc::RegOut`]).
//! - `regproc` is the function's name as text (pg_proc is minimal).
//! - arrays, `int2vector` and `oidvector` are `varchar(n)` with `n` above
//!   PostgreSQL's limit (which `CREATE TABLE` and casts reject) holding
//!   PostgreSQL's text form (`{1,2}`, `1 2`); the array functions parse it.

use pgtier_engine::{DataType, Value};

use crate::error::Result;

pub const OID: DataType = DataType::Int8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegKind {
    Class,
    Type,
    Namespace,
    Role,
}

impl RegKind {
    pub fn data_type(self) -> DataType {
        let tag = match self {
            RegKind::Class => 1,
            RegKind::Type => 2,
            RegKind::Namespace => 3,
            RegKind::Role => 4,
        };
        DataType::Numeric { precision: 0, scale: tag }
    }

    pub fn of(ty: DataType) -> Option<RegKind> {
        match ty {
            DataType::Numeric { precision: 0, scale: 1 } => Some(RegKind::Class),
            DataType::Numeric { precision: 0, scale: 2 } => Some(RegKind::Type),
            DataType::Numeric { precision: 0, scale: 3 } => Some(RegKind::Namespace),
            DataType::Numeric { precision: 0, scale: 4 } => Some(RegKind::Role),
            _ => None,
        }
    }

    pub fn type_oid(self) -> u32 {
        match self {
            RegKind::Class => 2205,
            RegKind::Type => 2206,
            RegKind::Namespace => 4089,
            RegKind::Role => 4096,
        }
    }
}

/// A `"char"` from text, as the text pgtier carries it (its output):
/// PostgreSQL's charin and text_char keep one byte, the one a `\ooo` of
/// exactly four characters names (octal, taken modulo 256) or else the
/// first (the zero byte for ''), and charout shows the zero byte as '' and
/// a byte of 128 and above as `\ooo`.
pub fn char_from_text(s: &str) -> String {
    let octal = |d: u8| d.is_ascii_digit() && d < b'8';
    let byte = match *s.as_bytes() {
        [b'\\', a, b, c] if octal(a) && octal(b) && octal(c) => {
            let value = (u32::from(a - b'0') << 6) | (u32::from(b - b'0') << 3) | u32::from(c - b'0');
            value.to_le_bytes()[0]
        }
        [first, ..] => first,
        [] => 0,
    };
    char_text(byte)
}

/// int4 → `"char"` (i4tochar): the byte of a signed 8-bit value.
pub fn char_from_int4(v: i32) -> Result<String> {
    let byte = i8::try_from(v).map_err(|_| crate::error::SqlError::new("22003", "\"char\" out of range"))?;
    Ok(char_text(byte.to_le_bytes()[0]))
}

fn char_text(byte: u8) -> String {
    match byte {
        0 => String::new(),
        1..=127 => char::from(byte).to_string(),
        _ => format!("\\{byte:03o}"),
    }
}

/// Element type of an array (or vector) carried as text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    Int2,
    Int4,
    Int8,
    Oid,
    Text,
    Char,
    Bool,
    Float8,
    /// `int2vector`: space-separated, no braces.
    Int2Vector,
    /// `oidvector`.
    OidVector,
    /// `aclitem[]` (always NULL here; typed for the columns that hold it).
    AclItem,
}

/// Above PostgreSQL's varchar limit (10485760), which `map_type` enforces.
const ARRAY_TAG_BASE: u32 = 10_485_761;

/// `varchar(n)` as declared, not one of the types tagged onto
/// `Varchar` above the length limit (arrays, tsvector, ...).
pub fn is_declared_varchar(ty: DataType) -> bool {
    matches!(ty, DataType::Varchar(n) if n < ARRAY_TAG_BASE)
}
const ELEMS: [Elem; 11] = [
    Elem::Int2,
    Elem::Int4,
    Elem::Int8,
    Elem::Oid,
    Elem::Text,
    Elem::Char,
    Elem::Bool,
    Elem::Float8,
    Elem::Int2Vector,
    Elem::OidVector,
    Elem::AclItem,
];

impl Elem {
    pub fn data_type(self) -> DataType {
        let i = ELEMS.iter().position(|e| *e == self).unwrap_or(0);
        DataType::Varchar(ARRAY_TAG_BASE + u32::try_from(i).unwrap_or(0))
    }

    pub fn of(ty: DataType) -> Option<Elem> {
        match ty {
            DataType::Varchar(n) if (ARRAY_TAG_BASE..EXPAND_RECORD_TAG_BASE).contains(&n) => {
                ELEMS.get(usize::try_from(n - ARRAY_TAG_BASE).ok()?).copied()
            }
            _ => None,
        }
    }

    pub fn is_vector(self) -> bool {
        matches!(self, Elem::Int2Vector | Elem::OidVector)
    }

    /// The engine type of one element.
    pub fn element_type(self) -> DataType {
        match self {
            Elem::Int2 | Elem::Int2Vector => DataType::Int2,
            Elem::Int4 => DataType::Int4,
            Elem::Int8 | Elem::Oid | Elem::OidVector => DataType::Int8,
            Elem::Text | Elem::Char | Elem::AclItem => DataType::Text,
            Elem::Bool => DataType::Bool,
            Elem::Float8 => DataType::Float8,
        }
    }

    /// The array type holding elements of engine type `ty`.
    pub fn for_element(ty: DataType) -> Option<Elem> {
        Some(match ty {
            DataType::Int2 => Elem::Int2,
            DataType::Int4 => Elem::Int4,
            DataType::Int8 => Elem::Int8,
            DataType::Bool => Elem::Bool,
            DataType::Float8 => Elem::Float8,
            DataType::Text | DataType::Varchar(_) | DataType::Char(_) => Elem::Text,
            _ => return None,
        })
    }

    /// PostgreSQL's OID of this array type.
    pub fn type_oid(self) -> u32 {
        match self {
            Elem::Int2 => 1005,
            Elem::Int4 => 1007,
            Elem::Int8 => 1016,
            Elem::Oid => 1028,
            Elem::Text => 1009,
            Elem::Char => 1002,
            Elem::Bool => 1000,
            Elem::Float8 => 1022,
            Elem::Int2Vector => 22,
            Elem::OidVector => 30,
            Elem::AclItem => 1034,
        }
    }
}

/// True for the SQL-layer-only types, which must not reach storage.
pub fn is_pseudo(ty: DataType) -> bool {
    RegKind::of(ty).is_some()
        || Elem::of(ty).is_some()
        || expand_record_elem(ty).is_some()
        || ty == COMPOSITE_ATTR
        || is_text_search(ty)
}

/// `tsvector` and `tsquery`, carried as their text forms (value/tsearch.rs,
/// value/tsquery.rs). Their category is their own, so no string function
/// or operator takes them; comparisons and sorting are refused.
pub const TSVECTOR: DataType = DataType::Varchar(EXPAND_RECORD_TAG_BASE + 17);
pub const TSQUERY: DataType = DataType::Varchar(EXPAND_RECORD_TAG_BASE + 18);

pub fn is_text_search(ty: DataType) -> bool {
    ty == TSVECTOR || ty == TSQUERY
}

/// The type of a column json[b]_populate_record[set] gives an attribute
/// of a composite type (or an array of one): pgtier has no composite
/// values, so the value is NULL when the key is missing or JSON null, any
/// other is refused (0A000), and so is reading the column.
pub const COMPOSITE_ATTR: DataType = DataType::Varchar(EXPAND_RECORD_TAG_BASE + 16);

/// Tags of the row type `information_schema._pg_expandarray` returns over
/// an array of integers: `(x elem, n int4)`, carried as its text form
/// `(x,n)` like arrays (`SysFunc::ExpandRecord`, `SysFunc::RecordField`).
const EXPAND_RECORD_TAG_BASE: u32 = ARRAY_TAG_BASE + 32;

pub fn expand_record_type(elem: Elem) -> DataType {
    let i = ELEMS.iter().position(|e| *e == elem).unwrap_or(0);
    DataType::Varchar(EXPAND_RECORD_TAG_BASE + u32::try_from(i).unwrap_or(0))
}

pub fn expand_record_elem(ty: DataType) -> Option<Elem> {
    match ty {
        DataType::Varchar(n) if n >= EXPAND_RECORD_TAG_BASE => {
            ELEMS.get(usize::try_from(n - EXPAND_RECORD_TAG_BASE).ok()?).copied()
        }
        _ => None,
    }
}

/// What a client sees for a column of type `ty`: reg* columns are turned
/// into their names and arrays are their text form.
pub fn output_type(ty: DataType) -> DataType {
    if is_pseudo(ty) { DataType::Text } else { ty }
}

/// PostgreSQL's text form of an array (or vector) of `items`.
pub fn array_text(elem: Elem, items: &[Value]) -> String {
    let mut out = String::new();
    if elem.is_vector() {
        for (k, v) in items.iter().enumerate() {
            if k > 0 {
                out.push(' ');
            }
            crate::value::write_text(v, &mut out);
        }
        return out;
    }
    out.push('{');
    for (k, v) in items.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        match v {
            Value::Null => out.push_str("NULL"),
            Value::Text(s) => crate::value::array::quote_element(s, &mut out),
            other => crate::value::write_text(other, &mut out),
        }
    }
    out.push('}');
    out
}

/// Elements of an array's text form (NULL elements as None), as text.
pub fn parse_array(text: &str, elem: Elem) -> Result<Vec<Option<String>>> {
    if elem.is_vector() {
        return Ok(text.split_whitespace().map(|s| Some(s.to_owned())).collect());
    }
    crate::value::array::split(text)
}

/// Elements as values of the element type.
pub fn array_values(text: &str, elem: Elem) -> Result<Vec<Value>> {
    parse_array(text, elem)?
        .into_iter()
        .map(|e| match e {
            None => Ok(Value::Null),
            Some(s) => crate::value::parse_input(&s, elem.element_type()),
        })
        .collect()
}

/// Validates and normalizes array input text (`'{1, 2}'::int2[]`).
pub fn array_input(text: &str, elem: Elem) -> Result<Value> {
    let items = array_values(text, elem)?;
    Ok(Value::Text(array_text(elem, &items)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_round_trip() {
        let v = array_values("{1, 2,NULL}", Elem::Int2).unwrap();
        assert_eq!(v, vec![Value::Int2(1), Value::Int2(2), Value::Null]);
        assert_eq!(array_text(Elem::Int2, &v), "{1,2,NULL}");
        let t = array_values(r#"{a,"b c","d\"e"}"#, Elem::Text).unwrap();
        assert_eq!(array_text(Elem::Text, &t), r#"{a,"b c","d\"e"}"#);
        assert_eq!(array_text(Elem::Int2Vector, &[Value::Int2(1), Value::Int2(3)]), "1 3");
        assert!(array_values("{}", Elem::Oid).unwrap().is_empty());
    }

    #[test]
    fn tags_round_trip() {
        for e in ELEMS {
            assert_eq!(Elem::of(e.data_type()), Some(e));
        }
        for k in [RegKind::Class, RegKind::Type, RegKind::Namespace, RegKind::Role] {
            assert_eq!(RegKind::of(k.data_type()), Some(k));
        }
        assert_eq!(RegKind::of(crate::value::NUMERIC_ANY), None);
    }
}
