//! Analytic answers as engine values, for the SQL layer's routing: each
//! Arrow column of a result is read by its own Arrow type (the caller's
//! query casts every output to the type whose engine value it wants), so
//! nothing here guesses a type: an Arrow type without an engine twin is an
//! error, and the caller runs the statement on the row path instead.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float64Type, Int16Type, Int32Type, Int64Type, TimestampMicrosecondType, UInt16Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType as ArrowType, TimeUnit};
use pgtier_engine::{DataType, Numeric, Snapshot, Value};

use crate::engine::OlapEngine;
use crate::error::{OlapError, Result};
use crate::types::{PG_EPOCH_DAYS, PG_EPOCH_MICROS};

/// Rows the caller computed, given to one analytic query as a table of
/// its own beside the copies (the SQL layer's values of a correlated
/// subquery per key): registered under `name` for that query only.
#[derive(Clone, Debug, Default)]
pub struct SideTable {
    pub name: String,
    /// Each column's name and engine type (one with an exact Arrow form).
    pub columns: Vec<(String, DataType)>,
    /// Values of those types, or NULL.
    pub rows: Vec<Vec<Value>>,
}

impl OlapEngine {
    /// [`OlapEngine::query`]'s answer as rows of engine values (see the
    /// module's comment for the types). Without the `datafusion` feature
    /// there is no executor: [`OlapError::NoExecutor`].
    pub fn query_rows(&self, sql: &str, snapshot: Snapshot) -> Result<Vec<Vec<Value>>> {
        self.query_rows_with(sql, snapshot, &[])
    }

    /// [`OlapEngine::query_rows`] with `sides` registered beside the copies.
    pub fn query_rows_with(&self, sql: &str, snapshot: Snapshot, sides: &[SideTable]) -> Result<Vec<Vec<Value>>> {
        #[cfg(feature = "datafusion")]
        {
            batches_to_rows(&self.query_with(sql, snapshot, sides)?)
        }
        #[cfg(not(feature = "datafusion"))]
        {
            let _ = (sql, snapshot, sides);
            Err(OlapError::NoExecutor)
        }
    }

    /// Whether this build has the analytic executor (feature `datafusion`).
    pub const fn has_executor() -> bool {
        cfg!(feature = "datafusion")
    }
}

/// The rows of `batches`, each column converted by its Arrow type.
pub fn batches_to_rows(batches: &[RecordBatch]) -> Result<Vec<Vec<Value>>> {
    let mut rows = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for batch in batches {
        let first = rows.len();
        rows.extend((0..batch.num_rows()).map(|_| Vec::with_capacity(batch.num_columns())));
        for column in batch.columns() {
            for (r, row) in rows[first..].iter_mut().enumerate() {
                row.push(value_of(column.as_ref(), r)?);
            }
        }
    }
    Ok(rows)
}

fn value_of(array: &dyn Array, row: usize) -> Result<Value> {
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    Ok(match array.data_type() {
        ArrowType::Null => Value::Null,
        ArrowType::Boolean => Value::Bool(array.as_boolean().value(row)),
        ArrowType::Int16 => Value::Int2(array.as_primitive::<Int16Type>().value(row)),
        ArrowType::Int32 => Value::Int4(array.as_primitive::<Int32Type>().value(row)),
        ArrowType::Int64 => Value::Int8(array.as_primitive::<Int64Type>().value(row)),
        ArrowType::Float64 => Value::Float8(array.as_primitive::<Float64Type>().value(row)),
        ArrowType::Decimal128(_, scale) => {
            let scale = u8::try_from(*scale).map_err(|_| mismatch(array))?;
            Value::Numeric(Numeric::new(array.as_primitive::<Decimal128Type>().value(row), scale))
        }
        ArrowType::Utf8 => Value::Text(array.as_string::<i32>().value(row).to_owned()),
        ArrowType::LargeUtf8 => Value::Text(array.as_string::<i64>().value(row).to_owned()),
        ArrowType::Utf8View => Value::Text(array.as_string_view().value(row).to_owned()),
        ArrowType::Dictionary(key, values) if **values == ArrowType::Utf8 => {
            let (values, key) = match **key {
                ArrowType::UInt16 => {
                    let d = array.as_dictionary::<UInt16Type>();
                    (d.values(), usize::from(d.keys().value(row)))
                }
                ArrowType::Int32 => {
                    let d = array.as_dictionary::<Int32Type>();
                    (d.values(), usize::try_from(d.keys().value(row)).map_err(|_| mismatch(array))?)
                }
                _ => return Err(mismatch(array)),
            };
            Value::Text(values.as_string::<i32>().value(key).to_owned())
        }
        ArrowType::Date32 => Value::Date(array.as_primitive::<Date32Type>().value(row) - PG_EPOCH_DAYS),
        ArrowType::Timestamp(TimeUnit::Microsecond, None) => {
            Value::Timestamp(array.as_primitive::<TimestampMicrosecondType>().value(row) - PG_EPOCH_MICROS)
        }
        _ => return Err(mismatch(array)),
    })
}

fn mismatch(array: &dyn Array) -> OlapError {
    OlapError::Query(format!("an analytic result column of Arrow type {} has no engine type", array.data_type()))
}
