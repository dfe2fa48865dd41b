//! Types: PostgreSQL's implicit coercions (unknown literals, parameters,
//! numeric widening), assignment casts, common types, SQL type names.

use pgtier_engine::{DataType, Value};
use sqlparser::ast;

use super::{Binder, Ty};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value::{self, Category, NUMERIC_ANY, category, type_name};

impl Binder<'_> {
    /// Gives an expression of type `from` the type `to` where PostgreSQL
    /// would coerce implicitly (unknown literals, parameters, numeric widening).
    pub(super) fn coerce(&mut self, e: Expr, from: Ty, to: DataType, what: &str) -> Result<Expr> {
        // An operator's or function's argument type has no typmod: a
        // literal or parameter compared with a timestamp(2) column keeps
        // all its digits, one compared with a varchar(5) or numeric(5,2)
        // column is neither cut nor rounded onto another row's value.
        let to = if from.is_none() { without_typmod(to) } else { to };
        if crate::value::types::is_text_search(to) {
            return text_search_coerce(e, from, to);
        }
        match (from, &e) {
            (None, Expr::Param(i)) => {
                self.params[*i] = Some(to);
                Ok(e)
            }
            // A bpchar literal without a typmod keeps its own length
            // (trailing blanks aside, which its comparisons ignore).
            (None, Expr::Const(Value::Text(s))) => {
                let to = match to {
                    DataType::Char(n) => {
                        let length = s.trim_end_matches(' ').chars().count();
                        DataType::Char(n.max(u32::try_from(length).unwrap_or(u32::MAX)))
                    }
                    other => other,
                };
                Ok(Expr::Const(value::parse_input(s, to)?))
            }
            (None, Expr::Const(_)) => Ok(e),
            (None, _) => Ok(Expr::Cast(e.boxed(), to, false)),
            (Some(f), _) if f == to => Ok(e),
            (Some(f), _)
                if category(f) == category(to) || (f == DataType::Date && matches!(to, DataType::Timestamp(_))) =>
            {
                if category(f) == Category::String && to == DataType::Text {
                    return Ok(if matches!(f, DataType::Char(_)) { Expr::BpcharTrim(e.boxed()) } else { e });
                }
                Ok(Expr::Cast(e.boxed(), to, false))
            }
            (Some(f), _) => Err(SqlError::datatype_mismatch(format!(
                "argument of {what} must be type {}, not type {}",
                type_name(to),
                type_name(f)
            ))),
        }
    }

    /// Assignment to a column: PostgreSQL's assignment casts.
    pub(super) fn assign(&mut self, e: Expr, from: Ty, to: DataType, column: &str) -> Result<Expr> {
        match from {
            None => match e {
                // The parameter's own type has no typmod (PostgreSQL's
                // input function sees -1); the assignment cast then checks
                // it: too long a string fails with 22001 as PostgreSQL's
                // does, not cut to fit (onto another row's key).
                Expr::Param(i) => {
                    let declared = without_typmod(to);
                    self.params[i] = Some(declared);
                    Ok(if declared == to { Expr::Param(i) } else { Expr::Cast(Expr::Param(i).boxed(), to, false) })
                }
                Expr::Const(Value::Text(s)) => Ok(Expr::Const(value::parse_input(&s, to)?)),
                Expr::Const(Value::Null) => Ok(Expr::Const(Value::Null)),
                other => Ok(Expr::Cast(other.boxed(), to, false)),
            },
            Some(f) if f == to => Ok(e),
            Some(f) => {
                check_assignable(f, to, column)?;
                // char(n) to text or varchar drops the padding, as
                // PostgreSQL's bpchar-to-text conversion does.
                if matches!(f, DataType::Char(_)) && matches!(to, DataType::Text | DataType::Varchar(_)) {
                    return Ok(Expr::Cast(Expr::BpcharTrim(e.boxed()).boxed(), to, false));
                }
                // Fold constants so a bad literal fails at prepare time, like PostgreSQL.
                if let Expr::Const(v) = e {
                    return self
                        .folded(value::cast(v.clone(), to, false), || Expr::Cast(Expr::Const(v).boxed(), to, false));
                }
                Ok(Expr::Cast(e.boxed(), to, false))
            }
        }
    }

    pub(super) fn boolean(&mut self, e: Expr, t: Ty, clause: &str) -> Result<Expr> {
        match t {
            Some(DataType::Bool) => Ok(e),
            None => self.coerce(e, None, DataType::Bool, clause),
            Some(other) => Err(SqlError::datatype_mismatch(format!(
                "argument of {clause} must be type boolean, not type {}",
                type_name(other)
            ))),
        }
    }

    pub(super) fn text_arg(&mut self, e: Expr, t: Ty, op: &str) -> Result<Expr> {
        match t {
            None => self.coerce(e, None, DataType::Text, op),
            Some(DataType::Char(_)) => Ok(Expr::BpcharTrim(e.boxed())),
            Some(ty) if category(ty) == Category::String => Ok(e),
            Some(ty) => Err(SqlError::undefined_operator(&format!("{} {op} unknown", type_name(ty)))),
        }
    }

    pub(super) fn coerce_common(&mut self, e: Expr, t: Ty, common: Ty) -> Result<Expr> {
        match (t, common) {
            (_, None) => Ok(e),
            (None, Some(c)) => self.coerce(e, None, c, "expression"),
            (Some(DataType::Char(_)), Some(DataType::Text)) => Ok(Expr::BpcharTrim(e.boxed())),
            (Some(a), Some(c)) if a == c || category(a) == Category::String && category(c) == Category::String => Ok(e),
            (Some(a), Some(c)) if category(a) == Category::Numeric && category(c) == Category::Numeric => {
                // Mixed integer/numeric compare exactly at runtime; cast only to floats.
                let widen = (value::is_float(c) && !value::is_float(a)) || (c == NUMERIC_ANY && value::is_integer(a));
                if widen { Ok(Expr::Cast(e.boxed(), c, false)) } else { Ok(e) }
            }
            (Some(_), Some(_)) => Ok(e),
        }
    }

    pub(super) fn unify_cmp(&mut self, x: Expr, xt: Ty, y: Expr, yt: Ty, op: &str) -> Result<(Expr, Expr)> {
        // Their text forms do not order (or, for tsquery, equal) as they do.
        if xt.is_some_and(crate::value::types::is_text_search) || yt.is_some_and(crate::value::types::is_text_search) {
            return Err(SqlError::unsupported("comparing tsvector or tsquery values"));
        }
        if let (Some(DataType::Json), None) | (None, Some(DataType::Json)) = (xt, yt) {
            return Err(SqlError::undefined_operator(&format!(
                "{} {op} {}",
                xt.map_or("unknown", type_name),
                yt.map_or("unknown", type_name)
            )));
        }
        match (xt, yt) {
            (None, None) => {
                let x = self.coerce(x, None, DataType::Text, op)?;
                let y = self.coerce(y, None, DataType::Text, op)?;
                Ok((x, y))
            }
            (None, Some(t)) => Ok((self.coerce(x, None, t, op)?, y)),
            (Some(t), None) => {
                let y = self.coerce(y, None, t, op)?;
                Ok((x, y))
            }
            (Some(a), Some(b)) => {
                let ca = category(a);
                let cb = category(b);
                // json has no comparison operators (PostgreSQL: none at all).
                if ca == Category::Json || cb == Category::Json {
                    return Err(SqlError::undefined_operator(&format!("{} {op} {}", type_name(a), type_name(b))));
                }
                let ok = ca == cb || (ca == Category::DateTime && cb == Category::DateTime);
                // Arrays compare when their elements do (array_eq, array_cmp).
                let elems_ok = ca != Category::Array || crate::value::array::same_array_type(a, b);
                if !ok || !elems_ok {
                    return Err(SqlError::undefined_operator(&format!("{} {op} {}", type_name(a), type_name(b))));
                }
                if ca == Category::String {
                    let both_char = matches!((a, b), (DataType::Char(_), DataType::Char(_)));
                    // char(n) against varchar compares as bpchar (varchar
                    // converts to bpchar implicitly): trailing blanks of
                    // both sides are insignificant. Against text, as text:
                    // only char(n) loses its padding.
                    if matches!(
                        (a, b),
                        (DataType::Char(_), DataType::Varchar(_)) | (DataType::Varchar(_), DataType::Char(_))
                    ) {
                        return Ok((Expr::BpcharTrim(x.boxed()), Expr::BpcharTrim(y.boxed())));
                    }
                    let trim = |e: Expr, t: DataType| {
                        if matches!(t, DataType::Char(_)) && !both_char { Expr::BpcharTrim(e.boxed()) } else { e }
                    };
                    let (x, y) = (trim(x, a), trim(y, b));
                    if both_char && a != b {
                        return Ok((Expr::BpcharTrim(x.boxed()), Expr::BpcharTrim(y.boxed())));
                    }
                    return Ok((x, y));
                }
                if ca == Category::Numeric {
                    let common = value::numeric_common(a, b);
                    if value::is_float(common) {
                        let x = if value::is_float(a) { x } else { Expr::Cast(x.boxed(), DataType::Float8, false) };
                        let y = if value::is_float(b) { y } else { Expr::Cast(y.boxed(), DataType::Float8, false) };
                        return Ok((x, y));
                    }
                }
                Ok((x, y))
            }
        }
    }

    /// Casts a branch result to the common type (so output formatting matches).
    pub(super) fn result_cast(&mut self, e: Expr, t: Ty, common: Ty) -> Result<Expr> {
        match (t, common) {
            (_, None) => Ok(e),
            (None, Some(c)) => self.coerce(e, None, c, "CASE"),
            (Some(a), Some(c)) if a == c => Ok(e),
            (Some(DataType::Char(_)), Some(DataType::Text)) => Ok(Expr::BpcharTrim(e.boxed())),
            (Some(a), Some(c)) if category(a) == Category::String && category(c) == Category::String => Ok(e),
            (Some(_), Some(c)) => Ok(Expr::Cast(e.boxed(), c, false)),
        }
    }
}

/// Assignment casts PostgreSQL allows into a column of type `to`.
pub(super) fn check_assignable(from: DataType, to: DataType, column: &str) -> Result<()> {
    let ok = match (category(from), category(to)) {
        // Element by element (array_coerce), as the element types assign.
        (Category::Array, Category::Array) => {
            match (crate::value::array::elem_type(from), crate::value::array::elem_type(to)) {
                (Some(f), Some(t)) => check_assignable(f, t, column).is_ok(),
                _ => false,
            }
        }
        (a, b) if a == b => true,
        // Any type converts to a string type by its text output on assignment.
        (_, Category::String) => true,
        // timestamp and timestamptz assign to time (their time of day).
        (Category::DateTime, Category::Time) => from != DataType::Date,
        (Category::Time, Category::Interval) | (Category::Interval, Category::Time) => true,
        // time and timestamptz assign to timetz, timetz to time.
        (Category::Time, Category::TimeTz) | (Category::TimeTz, Category::Time) => true,
        (Category::DateTime, Category::TimeTz) => matches!(from, DataType::TimestampTz(_)),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(SqlError::datatype_mismatch(format!(
            "column \"{column}\" is of type {} but expression is of type {}",
            value::full_type_name(to),
            type_name(from)
        ))
        .with_hint("You will need to rewrite or cast the expression."))
    }
}

/// Common type of CASE/COALESCE/IN branches (PostgreSQL's
/// select_common_type, for the categories pgtier has).
pub(super) fn common_type(types: &[Ty], construct: &str) -> Result<Ty> {
    let mut common: Ty = None;
    for t in types.iter().flatten() {
        common = Some(match common {
            None => *t,
            Some(c) if c == *t => c,
            Some(c) => match (category(c), category(*t)) {
                // select_common_type: float8 (the preferred type) if present,
                // else real, which the exact types convert to implicitly (unlike
                // an operator's float8 for real with numeric).
                (Category::Numeric, Category::Numeric)
                    if c != DataType::Float8
                        && *t != DataType::Float8
                        && (c == DataType::Float4 || *t == DataType::Float4) =>
                {
                    DataType::Float4
                }
                (Category::Numeric, Category::Numeric) => value::numeric_common(c, *t),
                // The string types convert to each other implicitly, so
                // PostgreSQL keeps the first: text or varchar after it
                // answer as text (char(n) loses its padding), but a first
                // character(n) makes the result bpchar, compared without
                // trailing blanks and printing each value's own padding,
                // which pgtier has no type for.
                (Category::String, Category::String) if matches!(c, DataType::Char(_)) => {
                    return Err(bpchar_common(construct, type_name(*t)));
                }
                (Category::String, Category::String) => DataType::Text,
                // date < timestamp < timestamptz, PostgreSQL's preference.
                (Category::DateTime, Category::DateTime)
                    if matches!(c, DataType::TimestampTz(_)) || matches!(t, DataType::TimestampTz(_)) =>
                {
                    DataType::TimestampTz(None)
                }
                (Category::DateTime, Category::DateTime) => DataType::Timestamp(None),
                (Category::Time, Category::Time) => DataType::Time(None),
                (Category::TimeTz, Category::TimeTz) => DataType::TimeTz(None),
                (Category::Array, Category::Array) => {
                    let elems = [crate::value::array::elem_type(c), crate::value::array::elem_type(*t)];
                    match common_type(&elems, construct)?.and_then(crate::value::array::array_type) {
                        Some(a) => a,
                        None => {
                            return Err(SqlError::datatype_mismatch(format!(
                                "{construct} types {} and {} cannot be matched",
                                type_name(c),
                                type_name(*t)
                            )));
                        }
                    }
                }
                _ => {
                    return Err(SqlError::datatype_mismatch(format!(
                        "{construct} types {} and {} cannot be matched",
                        type_name(c),
                        type_name(*t)
                    )));
                }
            },
        });
    }
    Ok(common)
}

fn bpchar_common(construct: &str, other: &str) -> SqlError {
    SqlError::unsupported(format!("{construct} of character and {other}"))
        .with_hint("PostgreSQL resolves them to character without a length, compared without trailing blanks; cast both to text (or both to character) to say which you mean.")
}

/// A literal string or a parameter among character(n) values: PostgreSQL
/// gives them bpchar without a length, so the literal keeps its length
/// ('x', not 'x    ' as pgtier's character(n) would pad it). `literal[k]`:
/// item k is a non-NULL unknown-typed literal or a parameter.
pub(super) fn refuse_padded_literals(types: &[Ty], literal: &[bool], construct: &str) -> Result<()> {
    if types.iter().any(|t| matches!(t, Some(DataType::Char(_)))) && literal.iter().any(|l| *l) {
        return Err(bpchar_common(construct, "unknown"));
    }
    Ok(())
}

/// Whether `e` (of type `t`) takes its type from its context: a string
/// literal or a parameter, not NULL.
pub(super) fn is_untyped_value(e: &Expr, t: Ty) -> bool {
    t.is_none() && !matches!(e, Expr::Const(Value::Null))
}

/// SQL type name → engine type.
pub fn map_type(t: &ast::DataType) -> Result<DataType> {
    use ast::DataType as D;
    let len = |l: &Option<ast::CharacterLength>| -> Result<Option<u32>> {
        match l {
            None => Ok(None),
            Some(ast::CharacterLength::IntegerLength { length, .. }) => {
                // Longer lengths are the system catalogs' array tags (crate::value::types).
                u32::try_from(*length)
                    .ok()
                    .filter(|n| *n <= 10_485_760)
                    .map(Some)
                    .ok_or_else(|| SqlError::new("22023", "length for type varchar cannot exceed 10485760"))
            }
            Some(ast::CharacterLength::Max) => Err(SqlError::unsupported("varchar(max)")),
        }
    };
    let numeric = |info: &ast::ExactNumberInfo| -> Result<DataType> {
        match info {
            ast::ExactNumberInfo::None => Ok(NUMERIC_ANY),
            ast::ExactNumberInfo::Precision(p) => Ok(DataType::Numeric { precision: narrow(*p)?, scale: 0 }),
            ast::ExactNumberInfo::PrecisionAndScale(p, s) => {
                let precision = narrow(*p)?;
                let max = pgtier_engine::NUMERIC_SCALE_MAX;
                let scale = i16::try_from(*s).ok().filter(|s| s.abs() <= max).ok_or_else(|| {
                    SqlError::new("22023", format!("NUMERIC scale {s} must be between -{max} and {max}"))
                })?;
                Ok(DataType::Numeric { precision, scale })
            }
        }
    };
    Ok(match t {
        D::SmallInt(_) | D::Int2(_) => DataType::Int2,
        D::Int(_) | D::Integer(_) | D::Int4(_) => DataType::Int4,
        D::BigInt(_) | D::Int8(_) => DataType::Int8,
        D::Numeric(i) | D::Decimal(i) | D::Dec(i) => numeric(i)?,
        D::Real | D::Float4 => DataType::Float4,
        D::DoublePrecision | D::Float8 | D::Double(ast::ExactNumberInfo::None) => DataType::Float8,
        D::Float(ast::ExactNumberInfo::Precision(p)) if *p <= 24 => DataType::Float4,
        D::Float(_) => DataType::Float8,
        D::Text | D::String(None) => DataType::Text,
        D::Varchar(l) | D::CharacterVarying(l) => match len(l)? {
            Some(n) => DataType::Varchar(n),
            None => DataType::Text,
        },
        D::Char(l) | D::Character(l) => DataType::Char(len(l)?.unwrap_or(1)),
        D::Bool | D::Boolean => DataType::Bool,
        D::Bytea => DataType::Bytea,
        D::Date => DataType::Date,
        D::Uuid => DataType::Uuid,
        D::JSON => DataType::Json,
        D::JSONB => DataType::Jsonb,
        D::Timestamp(p, ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) => {
            DataType::Timestamp(time_precision(*p))
        }
        D::Timestamp(p, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => {
            DataType::TimestampTz(time_precision(*p))
        }
        D::Time(p, ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) => DataType::Time(time_precision(*p)),
        D::Time(p, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => DataType::TimeTz(time_precision(*p)),
        D::Interval { fields: None, precision: None } => DataType::Interval,
        D::Interval { .. } => return Err(SqlError::unsupported("interval with fields or a precision")),
        // `int[]`, `int[][]` (PostgreSQL does not enforce dimensions: both are int[]), `int[3]`.
        D::Array(ast::ArrayElemTypeDef::SquareBracket(inner, _) | ast::ArrayElemTypeDef::AngleBracket(inner)) => {
            let elem = map_type(inner)?;
            if matches!(elem, DataType::Array(_)) {
                return Ok(elem);
            }
            crate::value::array::array_type(elem)
                .ok_or_else(|| SqlError::unsupported(format!("arrays of {}", crate::value::type_name(elem))))?
        }
        // The array types' own names (`_int4`), as drivers write them.
        D::Custom(name, mods)
            if mods.is_empty() && name.to_string().trim_start_matches("pg_catalog.").starts_with('_') =>
        {
            let inner = name.to_string().to_lowercase();
            let elem_name = inner.trim_start_matches("pg_catalog.").trim_start_matches('_');
            let elem = map_type(&D::Custom(ast::ObjectName::from(vec![ast::Ident::new(elem_name)]), Vec::new()))?;
            crate::value::array::array_type(elem)
                .ok_or_else(|| SqlError::new("42704", format!("type \"{inner}\" does not exist")))?
        }
        // psql and drivers write builtin types qualified (`pg_catalog.text`).
        D::Custom(name, mods) if mods.is_empty() => {
            match name.to_string().to_lowercase().trim_start_matches("pg_catalog.") {
                "int" | "int4" | "integer" => DataType::Int4,
                "int2" | "smallint" => DataType::Int2,
                "int8" | "bigint" => DataType::Int8,
                "float4" | "real" => DataType::Float4,
                "float8" => DataType::Float8,
                "bool" | "boolean" => DataType::Bool,
                "text" | "varchar" => DataType::Text,
                "bytea" => DataType::Bytea,
                "date" => DataType::Date,
                "timestamp" => DataType::Timestamp(None),
                "timestamptz" => DataType::TimestampTz(None),
                "time" => DataType::Time(None),
                "interval" => DataType::Interval,
                "timetz" => DataType::TimeTz(None),
                // The jsonpath functions take a path as an untyped literal.
                "jsonpath" => return Err(SqlError::unsupported("type jsonpath")),
                "uuid" => DataType::Uuid,
                "json" => DataType::Json,
                "jsonb" => DataType::Jsonb,
                "bpchar" => DataType::Char(1),
                "numeric" | "decimal" => crate::value::NUMERIC_ANY,
                other => return Err(SqlError::new("42704", format!("type \"{other}\" does not exist"))),
            }
        }
        other => return Err(SqlError::unsupported(format!("type {other}"))),
    })
}

/// PostgreSQL reduces a precision above 6 to 6 (with a warning).
fn time_precision(p: Option<u64>) -> Option<u8> {
    p.map(|p| u8::try_from(p).map_or(pgtier_engine::TIME_PRECISION_MAX, |p| p.min(pgtier_engine::TIME_PRECISION_MAX)))
}

fn narrow(v: u64) -> Result<u16> {
    let max = pgtier_engine::NUMERIC_PRECISION_MAX;
    u16::try_from(v)
        .ok()
        .filter(|p| (1..=max).contains(p))
        .ok_or_else(|| SqlError::new("22023", format!("NUMERIC precision {v} must be between 1 and {max}")))
}

impl Binder<'_> {
    /// A constant folded at bind time: its value, or its error; in a
    /// position PostgreSQL never simplifies ([`Binder::lazy_folding`]),
    /// the unfolded expression instead of the error.
    pub(super) fn folded(&self, value: Result<Value>, unfolded: impl FnOnce() -> Expr) -> Result<Expr> {
        match value {
            Ok(v) => Ok(Expr::Const(v)),
            Err(_) if self.lazy_folding => Ok(unfolded()),
            Err(e) => Err(e),
        }
    }

    /// Binds with `lazy_folding` set when `lazy` (it stays set inside
    /// already lazy expressions), restored afterwards.
    pub(super) fn lazily<T>(&mut self, lazy: bool, bind: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let outer = self.lazy_folding;
        self.lazy_folding = outer || lazy;
        let result = bind(self);
        self.lazy_folding = outer;
        result
    }
}

/// The truth of a condition PostgreSQL's planner folds to a constant
/// (a boolean or NULL constant, a comparison of two constants, NOT of
/// one): Some(Some(b)), Some(None) for NULL; None when it is not constant.
pub(super) fn constant_truth(e: &Expr) -> Option<Option<bool>> {
    match e {
        Expr::Const(Value::Bool(b)) => Some(Some(*b)),
        Expr::Const(Value::Null) => Some(None),
        Expr::Not(inner) => constant_truth(inner).map(|t| t.map(|b| !b)),
        Expr::Cmp(op, a, b) => match (a.as_ref(), b.as_ref()) {
            (Expr::Const(x), Expr::Const(y)) if x.is_null() || y.is_null() => Some(None),
            (Expr::Const(x), Expr::Const(y)) => value::compare(x, y).map(|o| Some(op.holds(o))),
            _ => None,
        },
        _ => None,
    }
}

/// An argument for a tsvector or tsquery parameter: an unknown literal
/// is read as one (tsvectorin, tsqueryin); nothing else converts.
fn text_search_coerce(e: Expr, from: Ty, to: DataType) -> Result<Expr> {
    use crate::value::tsearch::TsVector;
    use crate::value::tsquery::TsQuery;
    match (from, e) {
        (Some(f), e) if f == to => Ok(e),
        (None, Expr::Const(Value::Text(s))) if to == crate::value::types::TSVECTOR => {
            Ok(Expr::Const(Value::Text(TsVector::parse(&s)?.to_text())))
        }
        (None, Expr::Const(Value::Text(s))) => Ok(Expr::Const(Value::Text(TsQuery::parse(&s)?.to_text()))),
        (None, e @ Expr::Const(Value::Null)) => Ok(e),
        _ => Err(SqlError::unsupported(format!("converting this value to {}", type_name(to)))),
    }
}

/// `ty` without its modifier, as PostgreSQL types an operator's or
/// function's argument and a parameter: `varchar(n)` is `text` (the only
/// varchar without a length pgtier has; they compare alike), `numeric(p,s)`
/// unconstrained, a time type without precision. `char(n)` keeps n: its
/// comparisons ignore trailing blanks, which `text` would not.
pub(crate) fn without_typmod(ty: DataType) -> DataType {
    match ty {
        ty if crate::value::types::is_declared_varchar(ty) => DataType::Text,
        DataType::Numeric { .. } => pgtier_engine::NUMERIC_UNCONSTRAINED,
        DataType::Timestamp(_) => DataType::Timestamp(None),
        DataType::TimestampTz(_) => DataType::TimestampTz(None),
        DataType::Time(_) => DataType::Time(None),
        DataType::TimeTz(_) => DataType::TimeTz(None),
        other => other,
    }
}
