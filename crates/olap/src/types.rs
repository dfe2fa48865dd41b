//! The engine's column types as Arrow types, values into Arrow builders and
//! back. Every mapping is exact; a type without an exact form is refused at
//! enable ([`arrow_type`]), a value without one fails its table's copy
//! ([`ColumnBuilder::append`]) — never a silently different value.
//!
//! | engine | Arrow |
//! |---|---|
//! | boolean | Boolean |
//! | smallint / integer / bigint | Int16 / Int32 / Int64 |
//! | real / double precision | Float32 / Float64 |
//! | numeric(p,s), 1 <= p <= 38, 0 <= s <= p | Decimal128(p, s) |
//! | text, varchar(n), char(n) (blank-padded as stored), json, jsonb (canonical text) | Utf8, or Dictionary(UInt16, Utf8) when chosen at enable |
//! | bytea | Binary |
//! | date | Date32 (days since 1970-01-01; ±infinity refused) |
//! | timestamp | Timestamp(µs) (±infinity refused) |
//! | timestamptz | Timestamp(µs, "+00:00") (±infinity refused) |
//! | time | Time64(µs) |
//! | interval | Interval(MonthDayNano) |
//! | uuid | FixedSizeBinary(16) |
//!
//! Refused: numeric without a typmod or with p > 38 or s outside 0..=p
//! (values carry their own scale or exceed Decimal128's 38 digits), and
//! arrays. Numeric NaN in a numeric(p,s) column is refused as a value.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder, Float32Builder,
    Float64Builder, Int16Builder, Int32Builder, Int64Builder, IntervalMonthDayNanoBuilder, StringBuilder,
    StringDictionaryBuilder, Time64MicrosecondBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, IntervalMonthDayNanoType,
    Time64MicrosecondType, TimestampMicrosecondType, UInt16Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_buffer::IntervalMonthDayNano;
use arrow_schema::{DataType as ArrowType, TimeUnit};
use pgtier_engine::{
    Column, DATE_INFINITY, DATE_NEG_INFINITY, DataType, Interval, Numeric, TIMESTAMP_INFINITY, TIMESTAMP_NEG_INFINITY,
    TableSchema, Value, ValueRef,
};

use crate::error::{OlapError, Result};

/// Days from 1970-01-01 (Arrow's epoch) to 2000-01-01 (PostgreSQL's).
pub(crate) const PG_EPOCH_DAYS: i32 = 10_957;
/// Microseconds from 1970-01-01 to 2000-01-01.
pub(crate) const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// The zone Arrow's timestamptz carries: pgtier keeps timestamptz as UTC.
pub(crate) const UTC: &str = "+00:00";

/// The Arrow type of `col` (plain, before any dictionary encoding), or the
/// typed refusal naming the column.
pub(crate) fn arrow_type(table: &TableSchema, col: &Column) -> Result<ArrowType> {
    arrow_type_of(col.ty).ok_or_else(|| unsupported(table, col))
}

/// The Arrow type of engine type `ty`, None when it has no exact form.
pub(crate) fn arrow_type_of(ty: DataType) -> Option<ArrowType> {
    Some(match ty {
        DataType::Bool => ArrowType::Boolean,
        DataType::Int2 => ArrowType::Int16,
        DataType::Int4 => ArrowType::Int32,
        DataType::Int8 => ArrowType::Int64,
        DataType::Float4 => ArrowType::Float32,
        DataType::Float8 => ArrowType::Float64,
        DataType::Numeric { precision, scale } if !ty.numeric_own_scale() => {
            ArrowType::Decimal128(u8::try_from(precision).ok().filter(|p| *p <= 38)?, i8::try_from(scale).ok()?)
        }
        DataType::Text | DataType::Varchar(_) | DataType::Char(_) | DataType::Json | DataType::Jsonb => ArrowType::Utf8,
        DataType::Bytea => ArrowType::Binary,
        DataType::Date => ArrowType::Date32,
        DataType::Timestamp(_) => ArrowType::Timestamp(TimeUnit::Microsecond, None),
        DataType::TimestampTz(_) => ArrowType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
        DataType::Time(_) => ArrowType::Time64(TimeUnit::Microsecond),
        DataType::Interval => ArrowType::Interval(arrow_schema::IntervalUnit::MonthDayNano),
        DataType::Uuid => ArrowType::FixedSizeBinary(16),
        DataType::Numeric { .. } | DataType::Array(_) | DataType::TimeTz(_) => return None,
    })
}

fn unsupported(table: &TableSchema, col: &Column) -> OlapError {
    OlapError::UnsupportedType { table: table.name.clone(), column: col.name.clone(), ty: col.ty.pg_name() }
}

/// Text-like columns, the ones dictionary encoding may apply to.
pub(crate) fn is_text(ty: DataType) -> bool {
    matches!(ty, DataType::Text | DataType::Varchar(_) | DataType::Char(_) | DataType::Json | DataType::Jsonb)
}

/// Why a value has no exact Arrow form, or None when it has one. Called
/// for every applied change, so a commit the copy cannot hold fails the
/// copy when it arrives, not when a reader meets it.
pub(crate) fn unrepresentable(ty: DataType, v: ValueRef<'_>) -> Option<String> {
    match (ty, v) {
        (_, ValueRef::Null) => None,
        (DataType::Date, ValueRef::Date(d)) => date32(d).is_none().then(|| format!("date {d} (infinity)")),
        (DataType::Timestamp(_), ValueRef::Timestamp(t)) | (DataType::TimestampTz(_), ValueRef::TimestampTz(t)) => {
            micros_1970(t).is_none().then(|| "timestamp at infinity".to_owned())
        }
        (DataType::Interval, ValueRef::Interval(i)) => {
            i.micros.checked_mul(1000).is_none().then(|| "interval beyond nanosecond range".to_owned())
        }
        (DataType::Numeric { scale, .. }, ValueRef::Numeric(n)) => {
            (i16::from(n.scale) != scale).then(|| format!("numeric {n} not at the column's scale {scale}"))
        }
        (DataType::Numeric { .. }, ValueRef::NumericBig(b)) => Some(format!("numeric {b}")),
        (ty, v) if !value_matches(ty, v) => Some(format!("value {v:?} of another type than {}", ty.pg_name())),
        _ => None,
    }
}

fn value_matches(ty: DataType, v: ValueRef<'_>) -> bool {
    matches!(
        (ty, v),
        (DataType::Bool, ValueRef::Bool(_))
            | (DataType::Int2, ValueRef::Int2(_))
            | (DataType::Int4, ValueRef::Int4(_))
            | (DataType::Int8, ValueRef::Int8(_))
            | (DataType::Float4, ValueRef::Float4(_))
            | (DataType::Float8, ValueRef::Float8(_))
            | (DataType::Numeric { .. }, ValueRef::Numeric(_))
            | (DataType::Text | DataType::Varchar(_) | DataType::Char(_), ValueRef::Text(_))
            | (DataType::Json, ValueRef::Json(_))
            | (DataType::Jsonb, ValueRef::Jsonb(_))
            | (DataType::Bytea, ValueRef::Bytea(_))
            | (DataType::Date, ValueRef::Date(_))
            | (DataType::Timestamp(_), ValueRef::Timestamp(_))
            | (DataType::TimestampTz(_), ValueRef::TimestampTz(_))
            | (DataType::Time(_), ValueRef::Time(_))
            | (DataType::Interval, ValueRef::Interval(_))
            | (DataType::Uuid, ValueRef::Uuid(_))
    )
}

fn date32(d: i32) -> Option<i32> {
    if d == DATE_INFINITY || d == DATE_NEG_INFINITY {
        return None;
    }
    d.checked_add(PG_EPOCH_DAYS)
}

fn micros_1970(t: i64) -> Option<i64> {
    if t == TIMESTAMP_INFINITY || t == TIMESTAMP_NEG_INFINITY {
        return None;
    }
    t.checked_add(PG_EPOCH_MICROS)
}

/// The plain size of an array's values, the yardstick of the compression
/// figures: per non-null value, the bytes of its fixed-width form (what
/// the engine's binary form of that type takes), or of its text/bytes.
/// Computed from a finished column, so a chunk built row by row and one
/// gathered column by column (`copy::sorted_by_key`) count alike.
pub(crate) fn plain_bytes(array: &dyn Array) -> u64 {
    let non_null = (array.len() - array.null_count()) as u64;
    let width = match array.data_type() {
        ArrowType::Boolean => 1,
        ArrowType::Int16 => 2,
        ArrowType::Int32 | ArrowType::Float32 | ArrowType::Date32 => 4,
        ArrowType::Int64 | ArrowType::Float64 | ArrowType::Timestamp(..) | ArrowType::Time64(_) => 8,
        ArrowType::Decimal128(..) | ArrowType::Interval(_) | ArrowType::FixedSizeBinary(_) => 16,
        ArrowType::Utf8 => return array.as_string::<i32>().iter().flatten().map(|s| s.len() as u64).sum(),
        ArrowType::Binary => return array.as_binary::<i32>().iter().flatten().map(|b| b.len() as u64).sum(),
        ArrowType::Dictionary(..) => {
            let dict = array.as_dictionary::<UInt16Type>();
            let values = dict.values().as_string::<i32>();
            return dict.keys().iter().flatten().map(|k| values.value_length(usize::from(k)) as u64).sum();
        }
        other => unreachable!("a copy's column of Arrow type {other} (arrow_type gives none)"),
    };
    width * non_null
}

/// One column of a chunk being built.
pub(crate) enum ColumnBuilder {
    Bool(BooleanBuilder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    /// The builder and the column's scale.
    Decimal(Decimal128Builder, i8),
    Utf8(StringBuilder),
    Dict(StringDictionaryBuilder<UInt16Type>),
    Binary(BinaryBuilder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Time(Time64MicrosecondBuilder),
    Interval(IntervalMonthDayNanoBuilder),
    Uuid(FixedSizeBinaryBuilder),
}

impl ColumnBuilder {
    /// A builder for Arrow type `ty` (one [`arrow_type`] gave, or its
    /// dictionary form) of about `rows` values.
    pub(crate) fn new(ty: &ArrowType, rows: usize) -> ColumnBuilder {
        match ty {
            ArrowType::Boolean => ColumnBuilder::Bool(BooleanBuilder::with_capacity(rows)),
            ArrowType::Int16 => ColumnBuilder::I16(Int16Builder::with_capacity(rows)),
            ArrowType::Int32 => ColumnBuilder::I32(Int32Builder::with_capacity(rows)),
            ArrowType::Int64 => ColumnBuilder::I64(Int64Builder::with_capacity(rows)),
            ArrowType::Float32 => ColumnBuilder::F32(Float32Builder::with_capacity(rows)),
            ArrowType::Float64 => ColumnBuilder::F64(Float64Builder::with_capacity(rows)),
            ArrowType::Decimal128(_, s) => {
                ColumnBuilder::Decimal(Decimal128Builder::with_capacity(rows).with_data_type(ty.clone()), *s)
            }
            ArrowType::Dictionary(..) => ColumnBuilder::Dict(StringDictionaryBuilder::new()),
            ArrowType::Binary => ColumnBuilder::Binary(BinaryBuilder::with_capacity(rows, rows * 8)),
            ArrowType::Date32 => ColumnBuilder::Date(Date32Builder::with_capacity(rows)),
            ArrowType::Timestamp(..) => {
                ColumnBuilder::Timestamp(TimestampMicrosecondBuilder::with_capacity(rows).with_data_type(ty.clone()))
            }
            ArrowType::Time64(_) => ColumnBuilder::Time(Time64MicrosecondBuilder::with_capacity(rows)),
            ArrowType::Interval(_) => ColumnBuilder::Interval(IntervalMonthDayNanoBuilder::with_capacity(rows)),
            ArrowType::FixedSizeBinary(_) => ColumnBuilder::Uuid(FixedSizeBinaryBuilder::with_capacity(rows, 16)),
            // Utf8, and nothing else: `arrow_type` gives no other.
            _ => ColumnBuilder::Utf8(StringBuilder::with_capacity(rows, rows * 16)),
        }
    }

    /// Appends `v`; Err(reason) when it has no exact form (see
    /// [`unrepresentable`], which the applier checks first).
    pub(crate) fn append(&mut self, v: ValueRef<'_>) -> Result<(), String> {
        let mismatch = || format!("value {v:?} in a column of another type");
        match (self, v) {
            (ColumnBuilder::Bool(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::I16(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::I32(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::I64(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::F32(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::F64(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Decimal(b, _), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Utf8(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Dict(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Binary(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Date(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Timestamp(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Time(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Interval(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Uuid(b), ValueRef::Null) => b.append_null(),
            (ColumnBuilder::Bool(b), ValueRef::Bool(x)) => b.append_value(x),
            (ColumnBuilder::I16(b), ValueRef::Int2(x)) => b.append_value(x),
            (ColumnBuilder::I32(b), ValueRef::Int4(x)) => b.append_value(x),
            (ColumnBuilder::I64(b), ValueRef::Int8(x)) => b.append_value(x),
            (ColumnBuilder::F32(b), ValueRef::Float4(x)) => b.append_value(x),
            (ColumnBuilder::F64(b), ValueRef::Float8(x)) => b.append_value(x),
            (ColumnBuilder::Decimal(b, s), ValueRef::Numeric(n)) => {
                if i16::from(n.scale) != i16::from(*s) {
                    return Err(format!("numeric {n} not at the column's scale {s}"));
                }
                b.append_value(n.mantissa);
            }
            (ColumnBuilder::Utf8(b), ValueRef::Text(s) | ValueRef::Json(s) | ValueRef::Jsonb(s)) => b.append_value(s),
            (ColumnBuilder::Dict(b), ValueRef::Text(s) | ValueRef::Json(s) | ValueRef::Jsonb(s)) => {
                // At most CHUNK_ROWS values per chunk: the u16 keys cannot run out.
                b.append(s).map_err(|e| e.to_string())?;
            }
            (ColumnBuilder::Binary(b), ValueRef::Bytea(x)) => b.append_value(x),
            (ColumnBuilder::Date(b), ValueRef::Date(d)) => {
                b.append_value(date32(d).ok_or_else(|| format!("date {d} (infinity)"))?);
            }
            (ColumnBuilder::Timestamp(b), ValueRef::Timestamp(t) | ValueRef::TimestampTz(t)) => {
                b.append_value(micros_1970(t).ok_or_else(|| "timestamp at infinity".to_owned())?);
            }
            (ColumnBuilder::Time(b), ValueRef::Time(t)) => b.append_value(t),
            (ColumnBuilder::Interval(b), ValueRef::Interval(i)) => {
                let nanos = i.micros.checked_mul(1000).ok_or_else(|| "interval beyond nanosecond range".to_owned())?;
                b.append_value(IntervalMonthDayNano::new(i.months, i.days, nanos));
            }
            (ColumnBuilder::Uuid(b), ValueRef::Uuid(u)) => b.append_value(u).map_err(|e| e.to_string())?,
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    pub(crate) fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::Bool(b) => shrunk(b.finish()),
            ColumnBuilder::I16(b) => shrunk(b.finish()),
            ColumnBuilder::I32(b) => shrunk(b.finish()),
            ColumnBuilder::I64(b) => shrunk(b.finish()),
            ColumnBuilder::F32(b) => shrunk(b.finish()),
            ColumnBuilder::F64(b) => shrunk(b.finish()),
            ColumnBuilder::Decimal(b, _) => shrunk(b.finish()),
            ColumnBuilder::Utf8(b) => shrunk(b.finish()),
            ColumnBuilder::Dict(b) => shrunk(b.finish()),
            ColumnBuilder::Binary(b) => shrunk(b.finish()),
            ColumnBuilder::Date(b) => shrunk(b.finish()),
            ColumnBuilder::Timestamp(b) => shrunk(b.finish()),
            ColumnBuilder::Time(b) => shrunk(b.finish()),
            ColumnBuilder::Interval(b) => shrunk(b.finish()),
            ColumnBuilder::Uuid(b) => shrunk(b.finish()),
        }
    }
}

/// Builders allocate for a full chunk; a smaller one gives the rest back,
/// so the memory figures are what the values take.
fn shrunk<A: Array + 'static>(mut a: A) -> ArrayRef {
    a.shrink_to_fit();
    Arc::new(a)
}

/// The engine value at `row` of `array`, a column of engine type `ty`: the
/// inverse of [`ColumnBuilder::append`] (lookups compare keys with it,
/// tests compare with the row store).
pub(crate) fn value_at(array: &dyn Array, row: usize, ty: DataType) -> Value {
    value_ref_at(array, row, ty).to_owned_value()
}

/// [`value_at`] borrowed from the array: what a merge copies rows of old
/// chunks into new ones with, no value allocated.
pub(crate) fn value_ref_at(array: &dyn Array, row: usize, ty: DataType) -> ValueRef<'_> {
    if array.is_null(row) {
        return ValueRef::Null;
    }
    match ty {
        DataType::Bool => ValueRef::Bool(array.as_boolean().value(row)),
        DataType::Int2 => ValueRef::Int2(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int4 => ValueRef::Int4(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int8 => ValueRef::Int8(array.as_primitive::<Int64Type>().value(row)),
        DataType::Float4 => ValueRef::Float4(array.as_primitive::<Float32Type>().value(row)),
        DataType::Float8 => ValueRef::Float8(array.as_primitive::<Float64Type>().value(row)),
        DataType::Numeric { scale, .. } => {
            let mantissa = array.as_primitive::<Decimal128Type>().value(row);
            // `arrow_type` admits only 0 <= scale <= 38.
            ValueRef::Numeric(Numeric::new(mantissa, u8::try_from(scale).unwrap_or(0)))
        }
        DataType::Text | DataType::Varchar(_) | DataType::Char(_) => ValueRef::Text(text_at(array, row)),
        DataType::Json => ValueRef::Json(text_at(array, row)),
        DataType::Jsonb => ValueRef::Jsonb(text_at(array, row)),
        DataType::Bytea => ValueRef::Bytea(array.as_binary::<i32>().value(row)),
        DataType::Date => ValueRef::Date(array.as_primitive::<Date32Type>().value(row) - PG_EPOCH_DAYS),
        DataType::Timestamp(_) => {
            ValueRef::Timestamp(array.as_primitive::<TimestampMicrosecondType>().value(row) - PG_EPOCH_MICROS)
        }
        DataType::TimestampTz(_) => {
            ValueRef::TimestampTz(array.as_primitive::<TimestampMicrosecondType>().value(row) - PG_EPOCH_MICROS)
        }
        DataType::Time(_) => ValueRef::Time(array.as_primitive::<Time64MicrosecondType>().value(row)),
        DataType::Interval => {
            let i = array.as_primitive::<IntervalMonthDayNanoType>().value(row);
            ValueRef::Interval(Interval { months: i.months, days: i.days, micros: i.nanoseconds / 1000 })
        }
        DataType::Uuid => {
            let mut u = [0u8; 16];
            u.copy_from_slice(array.as_fixed_size_binary().value(row));
            ValueRef::Uuid(u)
        }
        // Refused by `arrow_type`: no chunk holds them.
        DataType::Array(_) | DataType::TimeTz(_) => ValueRef::Null,
    }
}

fn text_at(array: &dyn Array, row: usize) -> &str {
    match array.data_type() {
        ArrowType::Dictionary(..) => {
            let dict = array.as_dictionary::<UInt16Type>();
            let key = usize::from(dict.keys().value(row));
            dict.values().as_string::<i32>().value(key)
        }
        _ => array.as_string::<i32>().value(row),
    }
}
