//! PostgreSQL column types → engine `DataType`s, and COPY values → engine
//! `Value`s. Domains map by their base type (COPY sends the base type's
//! binary form). What the engine cannot store exactly is refused at define
//! time (0A000), never truncated at load time.

use pgtier_backend::catalog::{ColumnDef, TypeModifier};
use pgtier_backend::copy_out::NumericSign;
use pgtier_backend::copy_out::{Value as PgValue, ValueKind};
use pgtier_engine::{DataType, NumericBig, Value};

/// The engine type of a PostgreSQL column and the COPY decoder for it, or
/// the hint that says why the column cannot be cached.
pub fn engine_type(column: &ColumnDef) -> Result<(DataType, ValueKind), String> {
    let length = match column.modifier {
        TypeModifier::Length(n) => Some(n),
        _ => None,
    };
    let precision = match column.modifier {
        TypeModifier::Precision(p) => Some(p),
        _ => None,
    };
    if let Some(element) = column.element() {
        let (elem, _) = engine_type(&element)?;
        let ty = pgtier_engine::ElemType::of(elem).map(DataType::Array).ok_or("Arrays of arrays are not supported.")?;
        return Ok((ty, ValueKind::Array));
    }
    let ty = match column.base_type_oid {
        16 => DataType::Bool,
        21 => DataType::Int2,
        23 => DataType::Int4,
        20 => DataType::Int8,
        700 => DataType::Float4,
        701 => DataType::Float8,
        1700 => match column.modifier {
            TypeModifier::Numeric { precision, scale } => DataType::Numeric { precision, scale },
            // Each value keeps its scale (1.50 stays 1.50).
            TypeModifier::None => pgtier_engine::NUMERIC_UNCONSTRAINED,
            _ => return Err("Declare the column numeric or numeric(p,s).".into()),
        },
        25 => DataType::Text,
        1043 => length.map_or(DataType::Text, DataType::Varchar),
        1042 => DataType::Char(length.unwrap_or(1)),
        17 => DataType::Bytea,
        1082 => DataType::Date,
        1114 => DataType::Timestamp(precision),
        1184 => DataType::TimestampTz(precision),
        1083 => DataType::Time(precision),
        2950 => DataType::Uuid,
        114 => DataType::Json,
        3802 => DataType::Jsonb,
        // interval(p) and interval fields round and truncate what is stored.
        1186 if column.modifier == TypeModifier::None => DataType::Interval,
        1186 => return Err("Declare the column interval without fields or a precision.".into()),
        _ => {
            return Err("Supported types: smallint, integer, bigint, numeric, numeric(p,s), real, double precision, text, varchar(n), char(n), boolean, bytea, date, timestamp, timestamptz, time, interval, uuid, json, jsonb, and one-dimensional arrays of them.".into());
        }
    };
    let kind = ValueKind::for_type_oid(column.base_type_oid)
        .ok_or_else(|| format!("No binary decoder for type oid {}.", column.base_type_oid))?;
    Ok((ty, kind))
}

/// The engine value of one decoded COPY field of a column of type `ty`.
pub fn engine_value(ty: DataType, value: PgValue<'_>) -> Result<Value, String> {
    Ok(match (ty, value) {
        (DataType::Bool, PgValue::Bool(v)) => Value::Bool(v),
        (DataType::Int2, PgValue::Int2(v)) => Value::Int2(v),
        (DataType::Int4, PgValue::Int4(v)) => Value::Int4(v),
        (DataType::Int8, PgValue::Int8(v)) => Value::Int8(v),
        (DataType::Float4, PgValue::Float4(v)) => Value::Float4(v),
        (DataType::Float8, PgValue::Float8(v)) => Value::Float8(v),
        (DataType::Numeric { .. }, PgValue::Numeric(n)) => match n.sign {
            NumericSign::NaN => Value::NumericBig(NumericBig::nan()),
            NumericSign::Infinity | NumericSign::NegativeInfinity => {
                Value::NumericBig(NumericBig::infinity(n.sign == NumericSign::NegativeInfinity))
            }
            NumericSign::Positive | NumericSign::Negative => {
                // numeric_out's text has every digit at the display scale:
                // PostgreSQL already fitted the value to the column's typmod.
                let digits: String = n.to_string().chars().filter(char::is_ascii_digit).collect();
                let value = NumericBig::finite(n.sign == NumericSign::Negative, &digits, n.dscale)
                    .ok_or_else(|| format!("numeric value {n} is beyond pgtier's numeric"))?;
                let value = match value {
                    Ok(small) => Value::Numeric(small),
                    Err(big) => Value::NumericBig(big),
                };
                pgtier_engine::coerce(value, ty, "").map_err(|e| format!("numeric value {n} cannot be cached: {e}"))?
            }
        },
        (DataType::Text | DataType::Varchar(_) | DataType::Char(_), PgValue::Text(v)) => Value::Text(v.to_owned()),
        (DataType::Bytea, PgValue::Bytea(v)) => Value::Bytea(v.to_vec()),
        (DataType::Date, PgValue::Date(v)) => Value::Date(v),
        (DataType::Timestamp(_), PgValue::Timestamp(v)) => Value::Timestamp(v),
        (DataType::TimestampTz(_), PgValue::TimestampTz(v)) => Value::TimestampTz(v),
        (DataType::Time(_), PgValue::Time(v)) => Value::Time(v),
        (DataType::Interval, PgValue::Interval { months, days, micros }) => {
            Value::Interval(pgtier_engine::Interval { months, days, micros })
        }
        (DataType::Uuid, PgValue::Uuid(v)) => Value::Uuid(v),
        (DataType::Json, PgValue::Text(v)) => Value::Json(v.to_owned()),
        // jsonb_send's text is jsonb_out's, already the canonical form;
        // canonicalized again so keys and comparisons never see another.
        (DataType::Jsonb, PgValue::Text(v)) => Value::Jsonb(
            pgtier_engine::json::canonical(v).map_err(|e| format!("jsonb value cannot be cached: {}", e.detail))?,
        ),
        (DataType::Array(e), PgValue::Array(array)) => Value::Array(
            array
                .values()
                .map(|v| v.map_or(Ok(Value::Null), |v| engine_value(e.get(), v)))
                .collect::<Result<Vec<_>, String>>()?,
        ),
        (ty, value) => return Err(format!("a {value:?} does not fit type {}", ty.pg_name())),
    })
}
