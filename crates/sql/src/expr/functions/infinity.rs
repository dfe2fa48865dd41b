//! The infinite dates and timestamps (`'infinity'`, `'-infinity'`) in the
//! date/time functions: PostgreSQL answers a field that keeps growing
//! (year, epoch, ...) with an infinity, one that cycles (month, hour,
//! ...) with NULL (NonFiniteTimestampTzPart, extract_date): `EXTRACT`
//! with numeric's infinity, `date_part` with float8's.

use pgtier_engine::{DATE_NEG_INFINITY, NumericBig, TIMESTAMP_NEG_INFINITY, Value};

use super::datetime::DateField;
use crate::error::{Result, SqlError};

/// extract (numeric) / date_part (float8) of `field` from an infinite `v`.
pub(super) fn extract(field: DateField, v: &Value, numeric: bool) -> Result<Value> {
    let negative = matches!(
        v,
        Value::Date(DATE_NEG_INFINITY)
            | Value::Timestamp(TIMESTAMP_NEG_INFINITY)
            | Value::TimestampTz(TIMESTAMP_NEG_INFINITY)
    );
    let type_name = v.type_name();
    let growing = matches!(
        field,
        DateField::Year
            | DateField::Decade
            | DateField::Century
            | DateField::Millennium
            | DateField::Julian
            | DateField::IsoYear
            | DateField::Epoch
    );
    if growing {
        if numeric {
            return Ok(Value::NumericBig(NumericBig::infinity(negative)));
        }
        return Ok(Value::Float8(if negative { f64::NEG_INFINITY } else { f64::INFINITY }));
    }
    // A date has no time of day or zone, infinite or not.
    if matches!(v, Value::Date(_)) && field.is_time() {
        return Err(SqlError::unsupported(format!("unit \"{}\" not supported for type {type_name}", field.name())));
    }
    Ok(Value::Null)
}
