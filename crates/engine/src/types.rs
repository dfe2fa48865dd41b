//! SQL data types and values as the engine stores them.
//!
//! Representations follow PostgreSQL's: `date` is days since 2000-01-01,
//! `timestamp` (without time zone) is microseconds since 2000-01-01 00:00:00,
//! their `infinity` and `-infinity` the ends of i32 / i64 (as PostgreSQL's
//! binary format carries them, so a cached table holds them unchanged),
//! `time` is microseconds since midnight (24:00:00 included), and the
//! precision of `time(p)`/`timestamp(p)` is part of the type (the typmod),
//! applied by rounding half away from zero as PostgreSQL does,
//! `numeric(p,s)` is an exact i128 scaled by 10^s (p <= 38), `char(n)` is
//! blank-padded to n characters, text compares bytewise (the `C` collation).

use std::fmt;

use crate::error::{EngineError, Result};
use crate::numeric_big::{NumericBig, NumericBigRef};

/// Largest precision `numeric(p,s)` accepts (PostgreSQL's NUMERIC_MAX_PRECISION).
pub const NUMERIC_PRECISION_MAX: u16 = 1000;
/// Largest |scale| of `numeric(p,s)` (PostgreSQL 15: -1000 ..= 1000).
pub const NUMERIC_SCALE_MAX: i16 = 1000;
/// numeric(p,s) with 1 <= p <= this and 0 <= s <= p stores a bare i128
/// mantissa at the type's scale (16 bytes); others keep each value's scale.
pub const NUMERIC_I128_PRECISION_MAX: u16 = 38;
/// `numeric` without a typmod.
pub const NUMERIC_UNCONSTRAINED: DataType = DataType::Numeric { precision: 0, scale: 0 };
/// Largest declared length of varchar(n)/char(n) (PostgreSQL's limit).
pub const CHAR_LENGTH_MAX: u32 = 10_485_760;
/// Largest fractional-second precision of time(p) and timestamp(p).
pub const TIME_PRECISION_MAX: u8 = 6;
/// `'-infinity'::date` and `'infinity'::date`: PostgreSQL's DATEVAL_NOBEGIN
/// and DATEVAL_NOEND, the ends of i32 (what its binary format carries).
pub const DATE_NEG_INFINITY: i32 = i32::MIN;
pub const DATE_INFINITY: i32 = i32::MAX;
/// `'-infinity'` and `'infinity'` of timestamp and timestamptz:
/// DT_NOBEGIN and DT_NOEND, the ends of i64.
pub const TIMESTAMP_NEG_INFINITY: i64 = i64::MIN;
pub const TIMESTAMP_INFINITY: i64 = i64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    Bool,
    Int2,
    Int4,
    Int8,
    /// Exact decimal; `precision` total digits, `scale` digits after the point.
    /// Precision 0 (scale 0) is unconstrained `numeric`: each value keeps its
    /// own scale, as PostgreSQL's does ([`NUMERIC_UNCONSTRAINED`]); a
    /// value too wide for an i128 mantissa is a `Value::NumericBig`.
    /// A negative scale rounds left of the point (PostgreSQL 15).
    Numeric {
        precision: u16,
        scale: i16,
    },
    Float4,
    Float8,
    Text,
    Varchar(u32),
    /// Blank-padded to exactly n characters.
    Char(u32),
    Bytea,
    Date,
    /// `timestamp [(p)]`; None: no typmod (all six fraction digits).
    Timestamp(Option<u8>),
    /// `timestamp with time zone [(p)]`: an instant, stored as UTC
    /// microseconds since 2000-01-01 (PostgreSQL's representation); shown
    /// in the session's time zone, which pgtier keeps at UTC.
    TimestampTz(Option<u8>),
    /// `time [(p)] without time zone`.
    Time(Option<u8>),
    /// `time [(p)] with time zone`: a time of day and its UTC offset, as
    /// PostgreSQL's TimeTzADT (ordered by the UTC time, then the offset).
    TimeTz(Option<u8>),
    /// `interval`: months, days and microseconds, kept apart as PostgreSQL does.
    Interval,
    /// 16 bytes in network order (RFC 4122 layout), ordered by memcmp as
    /// PostgreSQL's uuid_cmp orders them.
    Uuid,
    /// `json`: the input text as written, after validation.
    Json,
    /// `jsonb`: the canonical text jsonb_out prints (crate::json); ordered
    /// and compared as PostgreSQL's jsonb_cmp.
    Jsonb,
    /// A one-dimensional array (lower bound 1) of a scalar type; stored in
    /// the self-describing form of [`crate::array`], ordered as
    /// PostgreSQL's array_cmp (element by element, NULL elements last,
    /// then the shorter array first).
    Array(ElemType),
}

/// The element type of [`DataType::Array`]: a scalar type packed as its
/// catalog tag in 4 unaligned bytes, so `DataType` stays `Copy` and 8
/// bytes wide (the size every column, plan node and key spec carries).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ElemType {
    tag: u8,
    /// 24 bits, little-endian: the tag's first argument (a length fits:
    /// CHAR_LENGTH_MAX < 2^24), or for numeric precision | scale << 8.
    arg: [u8; 3],
}

const NUMERIC_WIDE_TYPMOD: u32 = 1 << 23;

impl ElemType {
    /// None for an array type (arrays of arrays are multidimensional).
    pub fn of(ty: DataType) -> Option<ElemType> {
        let (tag, a, b) = ty.tag();
        let packed = match ty {
            // Wider numeric typmods: flag bit 23, precision in 10 bits, scale + 1024 in 11.
            DataType::Numeric { precision, scale } if a >= 1 << 8 || b >= 1 << 8 => {
                NUMERIC_WIDE_TYPMOD | u32::from(precision) | (u32::from((scale + 1024).cast_unsigned()) << 10)
            }
            _ if b == 0 => a,
            _ if a < 1 << 8 && b < 1 << 8 => a | (b << 8),
            _ => return None,
        };
        if matches!(ty, DataType::Array(_)) || packed >= 1 << 24 {
            return None;
        }
        let [x, y, z, _] = packed.to_le_bytes();
        Some(ElemType { tag, arg: [x, y, z] })
    }

    pub fn get(self) -> DataType {
        // Built only by `of` (or checked by `from_parts`), so always valid.
        Self::unpack(self.tag, self.packed()).unwrap_or(DataType::Text)
    }

    fn packed(self) -> u32 {
        let [x, y, z] = self.arg;
        u32::from_le_bytes([x, y, z, 0])
    }

    fn unpack(tag: u8, packed: u32) -> Option<DataType> {
        // Only numeric (tag 5) has two arguments.
        let (a, b) = if tag == 5 && packed & NUMERIC_WIDE_TYPMOD != 0 {
            let scale = i16::try_from((packed >> 10) & 0x7FF).ok()? - 1024;
            (packed & 0x3FF, u32::from(scale.cast_unsigned()))
        } else if tag == 5 {
            (packed & 0xFF, packed >> 8)
        } else {
            (packed, 0)
        };
        DataType::from_tag(tag, a, b)
    }

    fn from_parts(tag: u32, packed: u32) -> Option<ElemType> {
        ElemType::of(Self::unpack(u8::try_from(tag).ok()?, packed)?)
    }
}

impl DataType {
    /// Bytes in the fixed part of a row, or None for variable-length types.
    pub fn fixed_width_bytes(self) -> Option<usize> {
        match self {
            DataType::Bool => Some(1),
            DataType::Int2 => Some(2),
            DataType::Int4 | DataType::Float4 | DataType::Date => Some(4),
            DataType::Int8
            | DataType::Float8
            | DataType::Timestamp(_)
            | DataType::TimestampTz(_)
            | DataType::Time(_) => Some(8),
            DataType::TimeTz(_) => Some(12),
            // The mantissa, and where the type fixes no scale the value's own.
            DataType::Numeric { .. } if self.numeric_own_scale() => Some(17),
            DataType::Numeric { .. } | DataType::Uuid | DataType::Interval => Some(16),
            DataType::Text
            | DataType::Varchar(_)
            | DataType::Char(_)
            | DataType::Bytea
            | DataType::Json
            | DataType::Jsonb
            | DataType::Array(_) => None,
        }
    }

    /// The type name as PostgreSQL prints it (`format_type`).
    pub fn pg_name(self) -> String {
        match self {
            DataType::Bool => "boolean".into(),
            DataType::Int2 => "smallint".into(),
            DataType::Int4 => "integer".into(),
            DataType::Int8 => "bigint".into(),
            DataType::Numeric { precision: 0, .. } => "numeric".into(),
            DataType::Numeric { precision, scale } => format!("numeric({precision},{scale})"),
            DataType::Float4 => "real".into(),
            DataType::Float8 => "double precision".into(),
            DataType::Text => "text".into(),
            DataType::Varchar(n) => format!("character varying({n})"),
            DataType::Char(n) => format!("character({n})"),
            DataType::Bytea => "bytea".into(),
            DataType::Date => "date".into(),
            DataType::Timestamp(p) => format!("timestamp{} without time zone", precision_suffix(p)),
            DataType::TimestampTz(p) => format!("timestamp{} with time zone", precision_suffix(p)),
            DataType::Time(p) => format!("time{} without time zone", precision_suffix(p)),
            DataType::TimeTz(p) => format!("time{} with time zone", precision_suffix(p)),
            DataType::Uuid => "uuid".into(),
            DataType::Interval => "interval".into(),
            DataType::Json => "json".into(),
            DataType::Jsonb => "jsonb".into(),
            DataType::Array(e) => format!("{}[]", e.get().pg_name()),
        }
    }

    /// numeric whose stored values carry their own scale (unconstrained,
    /// or a typmod the 16-byte i128 form at the type's scale cannot hold).
    pub fn numeric_own_scale(self) -> bool {
        match self {
            DataType::Numeric { precision, scale } => {
                precision == 0
                    || precision > NUMERIC_I128_PRECISION_MAX
                    || scale < 0
                    || scale.unsigned_abs() > precision
            }
            _ => false,
        }
    }

    pub(crate) fn validate(self) -> Result<()> {
        match self {
            DataType::Numeric { precision: 0, scale: 0 } => {}
            DataType::Array(e) => return e.get().validate(),
            DataType::Numeric { precision, scale } => {
                if precision == 0 || precision > NUMERIC_PRECISION_MAX {
                    return Err(EngineError::definition(
                        "22023",
                        format!("NUMERIC precision {precision} must be between 1 and {NUMERIC_PRECISION_MAX}"),
                    ));
                }
                if scale.abs() > NUMERIC_SCALE_MAX {
                    return Err(EngineError::definition(
                        "22023",
                        format!("NUMERIC scale {scale} must be between -{NUMERIC_SCALE_MAX} and {NUMERIC_SCALE_MAX}"),
                    ));
                }
            }
            DataType::Varchar(n) | DataType::Char(n) if (n == 0 || n > CHAR_LENGTH_MAX) => {
                return Err(EngineError::definition(
                    "22023",
                    format!("length for type {} must be between 1 and {CHAR_LENGTH_MAX}", self.pg_name()),
                ));
            }
            DataType::Timestamp(Some(p))
            | DataType::TimestampTz(Some(p))
            | DataType::Time(Some(p))
            | DataType::TimeTz(Some(p))
                if p > TIME_PRECISION_MAX =>
            {
                return Err(EngineError::definition(
                    "22023",
                    format!("precision {p} of type {} must be between 0 and {TIME_PRECISION_MAX}", self.pg_name()),
                ));
            }
            _ => {}
        }
        Ok(())
    }

    pub(crate) fn tag(self) -> (u8, u32, u32) {
        match self {
            DataType::Bool => (1, 0, 0),
            DataType::Int2 => (2, 0, 0),
            DataType::Int4 => (3, 0, 0),
            DataType::Int8 => (4, 0, 0),
            // A negative scale as its 16-bit two's complement (old scales, 0..=38, unchanged).
            DataType::Numeric { precision, scale } => (5, u32::from(precision), u32::from(scale.cast_unsigned())),
            DataType::Float4 => (6, 0, 0),
            DataType::Float8 => (7, 0, 0),
            DataType::Text => (8, 0, 0),
            DataType::Varchar(n) => (9, n, 0),
            DataType::Char(n) => (10, n, 0),
            DataType::Bytea => (11, 0, 0),
            DataType::Date => (12, 0, 0),
            // 0: no typmod (the tag's meaning before precisions existed).
            DataType::Timestamp(p) => (13, p.map_or(0, |p| u32::from(p) + 1), 0),
            DataType::TimestampTz(p) => (14, p.map_or(0, |p| u32::from(p) + 1), 0),
            DataType::Uuid => (15, 0, 0),
            DataType::Time(p) => (16, p.map_or(0, |p| u32::from(p) + 1), 0),
            DataType::Interval => (17, 0, 0),
            DataType::Json => (18, 0, 0),
            DataType::Jsonb => (19, 0, 0),
            DataType::Array(e) => (20, u32::from(e.tag), e.packed()),
            DataType::TimeTz(p) => (21, p.map_or(0, |p| u32::from(p) + 1), 0),
        }
    }

    pub(crate) fn from_tag(tag: u8, a: u32, b: u32) -> Option<DataType> {
        let narrow = |v: u32| u8::try_from(v).ok();
        let precision = |v: u32| if v == 0 { Some(None) } else { narrow(v - 1).map(Some) };
        Some(match tag {
            1 => DataType::Bool,
            2 => DataType::Int2,
            3 => DataType::Int4,
            4 => DataType::Int8,
            5 => DataType::Numeric { precision: u16::try_from(a).ok()?, scale: u16::try_from(b).ok()?.cast_signed() },
            6 => DataType::Float4,
            7 => DataType::Float8,
            8 => DataType::Text,
            9 => DataType::Varchar(a),
            10 => DataType::Char(a),
            11 => DataType::Bytea,
            12 => DataType::Date,
            13 => DataType::Timestamp(precision(a)?),
            14 => DataType::TimestampTz(precision(a)?),
            15 => DataType::Uuid,
            16 => DataType::Time(precision(a)?),
            17 => DataType::Interval,
            18 => DataType::Json,
            19 => DataType::Jsonb,
            20 => DataType::Array(ElemType::from_parts(a, b)?),
            21 => DataType::TimeTz(precision(a)?),
            _ => return None,
        })
    }
}

/// An exact decimal: `mantissa * 10^-scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Numeric {
    pub mantissa: i128,
    pub scale: u8,
}

impl Numeric {
    pub fn new(mantissa: i128, scale: u8) -> Numeric {
        Numeric { mantissa, scale }
    }

    /// Rescales exactly (up) or rounding half away from zero (down), as
    /// PostgreSQL does when storing into numeric(p,s). None on overflow.
    pub fn rescale(self, scale: u8) -> Option<Numeric> {
        if scale >= self.scale {
            let factor = pow10(scale - self.scale)?;
            return Some(Numeric { mantissa: self.mantissa.checked_mul(factor)?, scale });
        }
        let factor = pow10(self.scale - scale)?;
        let quotient = self.mantissa / factor;
        let remainder = self.mantissa % factor;
        let round_away = remainder.unsigned_abs() * 2 >= factor.unsigned_abs();
        let mantissa = if !round_away {
            quotient
        } else if self.mantissa < 0 {
            quotient.checked_sub(1)?
        } else {
            quotient.checked_add(1)?
        };
        Some(Numeric { mantissa, scale })
    }
}

fn pow10(exponent: u8) -> Option<i128> {
    10i128.checked_pow(u32::from(exponent))
}

impl fmt::Display for Numeric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.mantissa.unsigned_abs().to_string();
        let scale = usize::from(self.scale);
        let sign = if self.mantissa < 0 { "-" } else { "" };
        if scale == 0 {
            return write!(f, "{sign}{digits}");
        }
        let padded =
            if digits.len() <= scale { format!("{}{digits}", "0".repeat(scale + 1 - digits.len())) } else { digits };
        let (int_part, frac_part) = padded.split_at(padded.len() - scale);
        write!(f, "{sign}{int_part}.{frac_part}")
    }
}

/// An `interval`: PostgreSQL's three fields, none carried into another
/// (1 month is not 30 days when added to a date), but compared as if a
/// month were 30 days and a day 24 hours (interval_cmp).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

impl Interval {
    /// The value interval_cmp orders by: microseconds with 30-day months.
    pub fn span(self) -> i128 {
        (i128::from(self.months) * 30 + i128::from(self.days)) * i128::from(MICROS_PER_DAY) + i128::from(self.micros)
    }
}

/// An owned SQL value. `Null` is untyped, as in SQL.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int2(i16),
    Int4(i32),
    Int8(i64),
    Numeric(Numeric),
    /// A numeric beyond [`Numeric`] (wider, NaN, ±Infinity); of the same
    /// SQL type `numeric`.
    NumericBig(NumericBig),
    Float4(f32),
    Float8(f64),
    Text(String),
    Bytea(Vec<u8>),
    /// Days since 2000-01-01.
    Date(i32),
    /// Microseconds since 2000-01-01 00:00:00.
    Timestamp(i64),
    /// Microseconds since 2000-01-01 00:00:00 UTC.
    TimestampTz(i64),
    Uuid([u8; 16]),
    /// Microseconds since midnight, 0 ..= 86_400_000_000.
    Time(i64),
    /// Microseconds since local midnight (0 ..= 24:00:00) and the zone in
    /// seconds west of UTC (PostgreSQL's TimeTzADT; `-07` is 25200).
    TimeTz(i64, i32),
    Interval(Interval),
    /// json text as written.
    Json(String),
    /// jsonb's canonical text.
    Jsonb(String),
    /// A one-dimensional array's elements (NULL elements as `Null`).
    Array(Vec<Value>),
    /// An array with some lower bound other than 1 (`'[0:1]={1,2}'`); one
    /// whose lower bounds are all 1 is always a `Value::Array` (see
    /// [`Value::array_with_lower`]), so the common case stays as it was.
    BoundedArray(Box<BoundedArray>),
}

/// The lower bounds (one per dimension, not all 1) and the elements (as in
/// `Value::Array`) of a `Value::BoundedArray`.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundedArray {
    pub lower: Vec<i32>,
    pub items: Vec<Value>,
}

/// A value borrowed from a stored row: reading a column never allocates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Bool(bool),
    Int2(i16),
    Int4(i32),
    Int8(i64),
    Numeric(Numeric),
    NumericBig(NumericBigRef<'a>),
    Float4(f32),
    Float8(f64),
    Text(&'a str),
    Bytea(&'a [u8]),
    Date(i32),
    Timestamp(i64),
    TimestampTz(i64),
    Uuid([u8; 16]),
    Time(i64),
    TimeTz(i64, i32),
    Interval(Interval),
    Json(&'a str),
    Jsonb(&'a str),
    Array(ArrayRef<'a>),
}

/// An array borrowed from a stored row (its encoded bytes) or from a `Value`.
#[derive(Clone, Copy, Debug)]
pub enum ArrayRef<'a> {
    Stored(&'a [u8]),
    Values(&'a [Value]),
    Bounded(&'a BoundedArray),
}

impl ArrayRef<'_> {
    /// The owned value: `Value::Array`, or `Value::BoundedArray`.
    pub fn to_value(self) -> Value {
        match self {
            // Written only by `array::encode_with`.
            ArrayRef::Stored(bytes) => crate::array::decode(bytes).unwrap_or(Value::Array(Vec::new())),
            ArrayRef::Values(items) => Value::Array(items.to_vec()),
            ArrayRef::Bounded(b) => Value::BoundedArray(Box::new(b.clone())),
        }
    }
}

impl PartialEq for ArrayRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.to_value() == other.to_value()
    }
}

impl ValueRef<'_> {
    pub fn to_owned_value(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Bool(v) => Value::Bool(v),
            ValueRef::Int2(v) => Value::Int2(v),
            ValueRef::Int4(v) => Value::Int4(v),
            ValueRef::Int8(v) => Value::Int8(v),
            ValueRef::Numeric(v) => Value::Numeric(v),
            ValueRef::NumericBig(v) => Value::NumericBig(v.to_owned_big()),
            ValueRef::Float4(v) => Value::Float4(v),
            ValueRef::Float8(v) => Value::Float8(v),
            ValueRef::Text(v) => Value::Text(v.to_owned()),
            ValueRef::Bytea(v) => Value::Bytea(v.to_vec()),
            ValueRef::Date(v) => Value::Date(v),
            ValueRef::Timestamp(v) => Value::Timestamp(v),
            ValueRef::TimestampTz(v) => Value::TimestampTz(v),
            ValueRef::Uuid(v) => Value::Uuid(v),
            ValueRef::Time(v) => Value::Time(v),
            ValueRef::TimeTz(t, z) => Value::TimeTz(t, z),
            ValueRef::Interval(v) => Value::Interval(v),
            ValueRef::Json(v) => Value::Json(v.to_owned()),
            ValueRef::Jsonb(v) => Value::Jsonb(v.to_owned()),
            ValueRef::Array(a) => a.to_value(),
        }
    }
}

impl Value {
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Bool(v) => ValueRef::Bool(*v),
            Value::Int2(v) => ValueRef::Int2(*v),
            Value::Int4(v) => ValueRef::Int4(*v),
            Value::Int8(v) => ValueRef::Int8(*v),
            Value::Numeric(v) => ValueRef::Numeric(*v),
            Value::NumericBig(v) => ValueRef::NumericBig(v.as_ref()),
            Value::Float4(v) => ValueRef::Float4(*v),
            Value::Float8(v) => ValueRef::Float8(*v),
            Value::Text(v) => ValueRef::Text(v),
            Value::Bytea(v) => ValueRef::Bytea(v),
            Value::Date(v) => ValueRef::Date(*v),
            Value::Timestamp(v) => ValueRef::Timestamp(*v),
            Value::TimestampTz(v) => ValueRef::TimestampTz(*v),
            Value::Uuid(v) => ValueRef::Uuid(*v),
            Value::Time(v) => ValueRef::Time(*v),
            Value::TimeTz(t, z) => ValueRef::TimeTz(*t, *z),
            Value::Interval(v) => ValueRef::Interval(*v),
            Value::Json(v) => ValueRef::Json(v),
            Value::Jsonb(v) => ValueRef::Jsonb(v),
            Value::Array(items) => ValueRef::Array(ArrayRef::Values(items)),
            Value::BoundedArray(b) => ValueRef::Array(ArrayRef::Bounded(b)),
        }
    }

    /// An array with lower bounds `lower` (one per dimension): a
    /// `Value::Array` when they are all 1 or it is empty (PostgreSQL's
    /// empty array has no dimensions, so no bounds).
    pub fn array_with_lower(lower: Vec<i32>, items: Vec<Value>) -> Value {
        if items.is_empty() || lower.iter().all(|lb| *lb == 1) {
            Value::Array(items)
        } else {
            Value::BoundedArray(Box::new(BoundedArray { lower, items }))
        }
    }

    /// An array value's lower bounds (empty when all are 1) and elements.
    pub fn array_parts(&self) -> Option<(&[i32], &[Value])> {
        match self {
            Value::Array(items) => Some((&[], items)),
            Value::BoundedArray(b) => Some((&b.lower, &b.items)),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Already a value of `ty` as stored (NULL fits any type): no coercion
    /// or cast needed. Length-checked types (varchar(n), char(n)),
    /// numeric(p, s) and time/timestamp(p) always go through coercion.
    pub fn is_of_type(&self, ty: DataType) -> bool {
        matches!(
            (self, ty),
            (Value::Null, _)
                | (Value::Bool(_), DataType::Bool)
                | (Value::Int2(_), DataType::Int2)
                | (Value::Int4(_), DataType::Int4)
                | (Value::Int8(_), DataType::Int8)
                | (Value::Float4(_), DataType::Float4)
                | (Value::Float8(_), DataType::Float8)
                | (Value::Text(_), DataType::Text)
                | (Value::Bytea(_), DataType::Bytea)
                | (Value::Date(_), DataType::Date)
                | (Value::Timestamp(_), DataType::Timestamp(None))
                | (Value::TimestampTz(_), DataType::TimestampTz(None))
                | (Value::Time(_), DataType::Time(None))
                | (Value::TimeTz(..), DataType::TimeTz(None))
                | (Value::Uuid(_), DataType::Uuid)
                | (Value::Interval(_), DataType::Interval)
                | (Value::Json(_), DataType::Json)
                | (Value::Jsonb(_), DataType::Jsonb)
        )
    }

    /// Integer content of any integer-typed value.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int2(v) => Some(i64::from(*v)),
            Value::Int4(v) => Some(i64::from(*v)),
            Value::Int8(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(v) => Some(v),
            _ => None,
        }
    }

    /// The PostgreSQL name of this value's type, as error messages print it
    /// ("unknown" for an untyped NULL).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "unknown",
            Value::Bool(_) => "boolean",
            Value::Int2(_) => "smallint",
            Value::Int4(_) => "integer",
            Value::Int8(_) => "bigint",
            Value::Numeric(_) | Value::NumericBig(_) => "numeric",
            Value::Float4(_) => "real",
            Value::Float8(_) => "double precision",
            Value::Text(_) => "text",
            Value::Bytea(_) => "bytea",
            Value::Date(_) => "date",
            Value::Timestamp(_) => "timestamp without time zone",
            Value::TimestampTz(_) => "timestamp with time zone",
            Value::Uuid(_) => "uuid",
            Value::Time(_) => "time without time zone",
            Value::TimeTz(..) => "time with time zone",
            Value::Interval(_) => "interval",
            Value::Json(_) => "json",
            Value::Jsonb(_) => "jsonb",
            Value::Array(_) | Value::BoundedArray(_) => "array",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

/// PostgreSQL's text output, as used in error details (`Key (id)=(1)`).
impl fmt::Display for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueRef::Null => write!(f, "null"),
            ValueRef::Bool(v) => write!(f, "{}", if *v { "t" } else { "f" }),
            ValueRef::Int2(v) => write!(f, "{v}"),
            ValueRef::Int4(v) => write!(f, "{v}"),
            ValueRef::Int8(v) => write!(f, "{v}"),
            ValueRef::Numeric(v) => write!(f, "{v}"),
            ValueRef::NumericBig(v) => write!(f, "{v}"),
            ValueRef::Float4(v) => write_float(f, f64::from(*v)),
            ValueRef::Float8(v) => write_float(f, *v),
            ValueRef::Text(v) | ValueRef::Json(v) | ValueRef::Jsonb(v) => write!(f, "{v}"),
            ValueRef::Bytea(v) => {
                write!(f, "\\x")?;
                v.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
            ValueRef::Date(DATE_INFINITY)
            | ValueRef::Timestamp(TIMESTAMP_INFINITY)
            | ValueRef::TimestampTz(TIMESTAMP_INFINITY) => f.write_str("infinity"),
            ValueRef::Date(DATE_NEG_INFINITY)
            | ValueRef::Timestamp(TIMESTAMP_NEG_INFINITY)
            | ValueRef::TimestampTz(TIMESTAMP_NEG_INFINITY) => f.write_str("-infinity"),
            ValueRef::Date(days) => {
                let (y, m, d) = civil_from_days(i64::from(*days));
                write!(f, "{:04}-{m:02}-{d:02}{}", display_year(y), era(y))
            }
            ValueRef::Timestamp(micros) => {
                let year = write_timestamp(f, *micros)?;
                write!(f, "{}", era(year))
            }
            // The session time zone is UTC (the only one pgtier accepts).
            ValueRef::TimestampTz(micros) => {
                let year = write_timestamp(f, *micros)?;
                write!(f, "+00{}", era(year))
            }
            ValueRef::Time(micros) => {
                let secs = micros / 1_000_000;
                write!(f, "{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)?;
                write_fraction(f, micros % 1_000_000)
            }
            ValueRef::TimeTz(micros, west) => {
                write!(f, "{}", ValueRef::Time(*micros))?;
                write_zone(f, *west)
            }
            ValueRef::Interval(v) => write_interval(f, *v),
            ValueRef::Array(a) => {
                let whole = a.to_value();
                let (lower, items) = whole.array_parts().unwrap_or((&[], &[]));
                let mut level: &[Value] = items;
                for lb in lower {
                    let n = i64::try_from(level.len()).unwrap_or(i64::MAX);
                    write!(f, "[{lb}:{}]", i64::from(*lb) + n - 1)?;
                    level = match level.first() {
                        Some(Value::Array(row)) => row,
                        _ => &[],
                    };
                }
                if !lower.is_empty() {
                    f.write_str("=")?;
                }
                f.write_str("{")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    match v {
                        Value::Null => f.write_str("NULL")?,
                        Value::Array(_) => write!(f, "{v}")?,
                        _ => write_array_element(&v.to_string(), f)?,
                    }
                }
                f.write_str("}")
            }
            ValueRef::Uuid(bytes) => {
                for (i, b) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        f.write_str("-")?;
                    }
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
    }
}

/// An element's text as array_out writes it: quoted (with `"` and `\`
/// escaped) when it is empty, `NULL`, or holds a delimiter, brace, quote,
/// backslash or array_isspace white space.
pub fn write_array_element(s: &str, out: &mut dyn fmt::Write) -> fmt::Result {
    let needs = s.is_empty()
        || s.eq_ignore_ascii_case("null")
        || s.chars().any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\' | ' ' | '\t' | '\n' | '\r' | '\x0B' | '\x0C'));
    if !needs {
        return out.write_str(s);
    }
    out.write_char('"')?;
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.write_char('\\')?;
        }
        out.write_char(c)?;
    }
    out.write_char('"')
}

fn write_float(f: &mut fmt::Formatter<'_>, v: f64) -> fmt::Result {
    if v.is_nan() {
        write!(f, "NaN")
    } else if v.is_infinite() {
        write!(f, "{}", if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        write!(f, "{v}")
    }
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Writes date and time (no era); returns the astronomical year for the caller's era suffix.
fn write_timestamp(f: &mut fmt::Formatter<'_>, micros: i64) -> Result<i64, fmt::Error> {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let in_day = micros.rem_euclid(MICROS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let secs = in_day / 1_000_000;
    let frac = in_day % 1_000_000;
    write!(f, "{:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", display_year(y), secs / 3600, secs / 60 % 60, secs % 60)?;
    write_fraction(f, frac)?;
    Ok(y)
}

/// A UTC offset as EncodeTimezone writes it: `+hh`, `-hh:mm`, `+hh:mm:ss`.
fn write_zone(f: &mut fmt::Formatter<'_>, west: i32) -> fmt::Result {
    let east = -west;
    let abs = east.unsigned_abs();
    let (h, m, s) = (abs / 3600, abs / 60 % 60, abs % 60);
    let sign = if east < 0 { '-' } else { '+' };
    match (m, s) {
        (_, 1..) => write!(f, "{sign}{h:02}:{m:02}:{s:02}"),
        (1.., 0) => write!(f, "{sign}{h:02}:{m:02}"),
        _ => write!(f, "{sign}{h:02}"),
    }
}

/// `.ffffff` without trailing zeros; nothing for a whole second.
fn write_fraction(f: &mut fmt::Formatter<'_>, frac: i64) -> fmt::Result {
    if frac != 0 {
        let text = format!("{frac:06}");
        write!(f, ".{}", text.trim_end_matches('0'))?;
    }
    Ok(())
}

/// interval_out in IntervalStyle `postgres`: `1 year 2 mons -3 days +04:05:06.5`.
fn write_interval(f: &mut fmt::Formatter<'_>, v: Interval) -> fmt::Result {
    let (year, mon) = (v.months / 12, v.months % 12);
    let mut is_zero = true;
    let mut is_before = false;
    for (value, unit) in [(year, "year"), (mon, "mon"), (v.days, "day")] {
        if value != 0 {
            let sep = if is_zero { "" } else { " " };
            let plus = if is_before && value > 0 { "+" } else { "" };
            write!(f, "{sep}{plus}{value} {unit}{}", if value == 1 { "" } else { "s" })?;
            is_before = value < 0;
            is_zero = false;
        }
    }
    if is_zero || v.micros != 0 {
        let abs = v.micros.unsigned_abs();
        let secs = abs / 1_000_000;
        let sign = if v.micros < 0 {
            "-"
        } else if is_before {
            "+"
        } else {
            ""
        };
        write!(f, "{}{sign}{:02}:{:02}:{:02}", if is_zero { "" } else { " " }, secs / 3600, secs / 60 % 60, secs % 60)?;
        write_fraction(f, i64::try_from(abs % 1_000_000).unwrap_or(0))?;
    }
    Ok(())
}

fn precision_suffix(p: Option<u8>) -> String {
    p.map_or(String::new(), |p| format!("({p})"))
}

/// Rounds microseconds to `precision` fraction digits, half away from
/// zero (PostgreSQL's AdjustTimestampForTypmod and AdjustTimeForTypmod);
/// None keeps all six.
pub fn round_to_precision(micros: i64, precision: Option<u8>) -> i64 {
    let Some(p) = precision.filter(|p| *p < TIME_PRECISION_MAX) else { return micros };
    // The infinities stay what they are (AdjustTimestampForTypmod).
    if micros == TIMESTAMP_INFINITY || micros == TIMESTAMP_NEG_INFINITY {
        return micros;
    }
    let scale = 10i64.pow(u32::from(TIME_PRECISION_MAX - p));
    let half = scale / 2;
    if micros >= 0 {
        micros.saturating_add(half) / scale * scale
    } else {
        -(micros.saturating_neg().saturating_add(half) / scale * scale)
    }
}

/// PostgreSQL has no year 0: astronomical year 0 is 1 BC, -1 is 2 BC.
fn display_year(astronomical: i64) -> i64 {
    if astronomical <= 0 { 1 - astronomical } else { astronomical }
}

fn era(astronomical: i64) -> &'static str {
    if astronomical <= 0 { " BC" } else { "" }
}

/// Days since 2000-01-01 for a proleptic Gregorian date (H. Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 - 10_957
}

/// Inverse of [`days_from_civil`].
pub fn civil_from_days(days_since_2000: i64) -> (i64, u32, u32) {
    let z = days_since_2000 + 10_957 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Bounded by construction: month in 1..=12, day in 1..=31.
    (year, u32::try_from(month).unwrap_or(1), u32::try_from(day).unwrap_or(1))
}

/// Converts `value` to the column type `ty`, applying PostgreSQL's
/// assignment rules for the types the engine stores (integer narrowing with
/// range checks, numeric rounding to the column scale, char(n) padding,
/// varchar(n)/char(n) length checks). `Null` passes through.
pub fn coerce(value: Value, ty: DataType, column: &str) -> Result<Value> {
    let mismatch = |v: &Value| EngineError::DatatypeMismatch {
        column: column.to_owned(),
        expected: ty.pg_name(),
        found: v.type_name().to_owned(),
    };
    Ok(match (ty, value) {
        (_, Value::Null) => Value::Null,
        (DataType::Bool, Value::Bool(v)) => Value::Bool(v),
        (DataType::Int2 | DataType::Int4 | DataType::Int8, v @ (Value::Int2(_) | Value::Int4(_) | Value::Int8(_))) => {
            let wide = v.as_i64().ok_or_else(|| mismatch(&v))?;
            coerce_int(wide, ty)?
        }
        // Unconstrained takes every numeric; numeric(p,s) takes NaN only
        // (the sql layer rounds wide values to the typmod before this).
        (DataType::Numeric { .. }, Value::NumericBig(b)) => match b.as_ref().kind() {
            _ if ty.numeric_own_scale() => Value::NumericBig(b),
            crate::numeric_big::NumericKind::NaN => Value::NumericBig(b),
            _ => return Err(EngineError::OutOfRange { message: "numeric field overflow".to_owned() }),
        },
        (DataType::Numeric { precision, scale }, v) => {
            let n = match v {
                Value::Numeric(n) => n,
                Value::Int2(_) | Value::Int4(_) | Value::Int8(_) => {
                    Numeric::new(i128::from(v.as_i64().ok_or_else(|| mismatch(&v))?), 0)
                }
                other => return Err(mismatch(&other)),
            };
            // Unconstrained: the value as it is (its scale kept).
            if precision == 0 { Value::Numeric(n) } else { Value::Numeric(coerce_numeric(n, precision, scale)?) }
        }
        (DataType::Float4, v) => Value::Float4(match v {
            Value::Float4(x) => x,
            #[allow(clippy::cast_possible_truncation)]
            Value::Float8(x) => x as f32,
            #[allow(clippy::cast_precision_loss)]
            Value::Int2(_) | Value::Int4(_) | Value::Int8(_) => v.as_i64().unwrap_or(0) as f32,
            other => return Err(mismatch(&other)),
        }),
        (DataType::Float8, v) => Value::Float8(match v {
            Value::Float4(x) => f64::from(x),
            Value::Float8(x) => x,
            #[allow(clippy::cast_precision_loss)]
            Value::Int2(_) | Value::Int4(_) | Value::Int8(_) => v.as_i64().unwrap_or(0) as f64,
            other => return Err(mismatch(&other)),
        }),
        (DataType::Text, Value::Text(s)) => Value::Text(s),
        (DataType::Varchar(n), Value::Text(s)) => Value::Text(fit_length(s, n, ty, false)?),
        (DataType::Char(n), Value::Text(s)) => Value::Text(fit_length(s, n, ty, true)?),
        (DataType::Bytea, Value::Bytea(b)) => Value::Bytea(b),
        (DataType::Date, Value::Date(d)) => Value::Date(d),
        // Between local time and an instant: the session's zone is UTC.
        (DataType::Timestamp(p), Value::Timestamp(t) | Value::TimestampTz(t)) => {
            Value::Timestamp(round_to_precision(t, p))
        }
        (DataType::Timestamp(_), Value::Date(d)) => Value::Timestamp(i64::from(d) * MICROS_PER_DAY),
        (DataType::TimestampTz(p), Value::TimestampTz(t) | Value::Timestamp(t)) => {
            Value::TimestampTz(round_to_precision(t, p))
        }
        (DataType::TimestampTz(_), Value::Date(d)) => Value::TimestampTz(i64::from(d) * MICROS_PER_DAY),
        (DataType::Time(p), Value::Time(t)) => Value::Time(round_to_precision(t, p)),
        (DataType::TimeTz(p), Value::TimeTz(t, z)) => Value::TimeTz(round_to_precision(t, p), z),
        (DataType::Uuid, Value::Uuid(u)) => Value::Uuid(u),
        (DataType::Interval, Value::Interval(v)) => Value::Interval(v),
        (DataType::Json, Value::Json(v)) => Value::Json(v),
        (DataType::Jsonb, Value::Jsonb(v)) => Value::Jsonb(v),
        (DataType::Array(e), Value::BoundedArray(b)) => {
            let BoundedArray { lower, items } = *b;
            match coerce(Value::Array(items), DataType::Array(e), column)? {
                Value::Array(items) => Value::BoundedArray(Box::new(BoundedArray { lower, items })),
                other => other,
            }
        }
        (DataType::Array(e), Value::Array(items)) => {
            // A multidimensional array's rows are arrays of the same type.
            let row_ty = DataType::Array(e);
            Value::Array(
                items
                    .into_iter()
                    .map(|v| {
                        let t = if matches!(v, Value::Array(_)) { row_ty } else { e.get() };
                        coerce(v, t, column)
                    })
                    .collect::<Result<Vec<_>>>()?,
            )
        }
        (_, other) => return Err(mismatch(&other)),
    })
}

fn coerce_int(v: i64, ty: DataType) -> Result<Value> {
    let out_of_range = |name: &str| EngineError::OutOfRange { message: format!("{name} out of range") };
    Ok(match ty {
        DataType::Int2 => Value::Int2(i16::try_from(v).map_err(|_| out_of_range("smallint"))?),
        DataType::Int4 => Value::Int4(i32::try_from(v).map_err(|_| out_of_range("integer"))?),
        _ => Value::Int8(v),
    })
}

fn coerce_numeric(n: Numeric, precision: u16, scale: i16) -> Result<Numeric> {
    let overflow = || EngineError::OutOfRange { message: "numeric field overflow".to_owned() };
    let rounded = if scale < 0 {
        // Rounds to a multiple of 10^-scale, shown with scale 0.
        let shift = u8::try_from(scale.unsigned_abs()).map_err(|_| overflow())?;
        let q = Numeric::new(n.mantissa, n.scale.checked_add(shift).ok_or_else(overflow)?)
            .rescale(0)
            .ok_or_else(overflow)?;
        Numeric::new(q.mantissa.checked_mul(pow10(shift).ok_or_else(overflow)?).ok_or_else(overflow)?, 0)
    } else {
        n.rescale(u8::try_from(scale).map_err(|_| overflow())?).ok_or_else(overflow)?
    };
    // PostgreSQL's bound: below 10^(precision - scale), i.e. the value in
    // units of 10^-scale has at most `precision` digits.
    let units = if scale < 0 {
        rounded.mantissa / pow10(u8::try_from(scale.unsigned_abs()).map_err(|_| overflow())?).ok_or_else(overflow)?
    } else {
        rounded.mantissa
    };
    if pow10(u8::try_from(precision).unwrap_or(u8::MAX))
        .is_some_and(|limit| units.unsigned_abs() >= limit.unsigned_abs())
    {
        return Err(overflow());
    }
    Ok(rounded)
}

/// PostgreSQL: an over-long value is an error unless the excess is blanks,
/// which are silently cut; char(n) is then blank-padded to n characters.
fn fit_length(s: String, n: u32, ty: DataType, pad: bool) -> Result<String> {
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let chars = s.chars().count();
    if chars > limit {
        let cut = s.char_indices().nth(limit).map_or(s.len(), |(i, _)| i);
        if s[cut..].bytes().any(|b| b != b' ') {
            return Err(EngineError::StringTooLong { type_name: ty.pg_name() });
        }
        return Ok(s[..cut].to_owned());
    }
    if pad && chars < limit {
        let mut padded = s;
        padded.extend(std::iter::repeat_n(' ', limit - chars));
        return Ok(padded);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        assert_eq!(days_from_civil(2000, 1, 1), 0);
        assert_eq!(days_from_civil(1999, 12, 31), -1);
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
        for d in -800_000..800_000i64 {
            if d % 997 != 0 {
                continue;
            }
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }

    #[test]
    fn numeric_rescale_rounds_half_away() {
        assert_eq!(Numeric::new(125, 2).rescale(1), Some(Numeric::new(13, 1)));
        assert_eq!(Numeric::new(-125, 2).rescale(1), Some(Numeric::new(-13, 1)));
        assert_eq!(Numeric::new(124, 2).rescale(1), Some(Numeric::new(12, 1)));
        assert_eq!(Numeric::new(5, 0).rescale(2), Some(Numeric::new(500, 2)));
        assert_eq!(Numeric::new(-5, 3).to_string(), "-0.005");
        assert_eq!(Numeric::new(12345, 2).to_string(), "123.45");
        assert!(
            coerce(Value::Numeric(Numeric::new(100_000, 0)), DataType::Numeric { precision: 5, scale: 1 }, "c")
                .is_err()
        );
        assert!(
            coerce(Value::Numeric(Numeric::new(9_999, 0)), DataType::Numeric { precision: 5, scale: 1 }, "c").is_ok()
        );
    }

    #[test]
    fn char_padding_and_lengths() {
        let v = coerce(Value::Text("ab".into()), DataType::Char(4), "c").ok();
        assert_eq!(v, Some(Value::Text("ab  ".into())));
        let v = coerce(Value::Text("abc   ".into()), DataType::Varchar(3), "c").ok();
        assert_eq!(v, Some(Value::Text("abc".into())));
        let e = coerce(Value::Text("abcd".into()), DataType::Varchar(3), "c");
        assert!(matches!(e, Err(EngineError::StringTooLong { .. })));
        let e = coerce(Value::Int8(70_000), DataType::Int2, "c");
        assert!(matches!(e, Err(EngineError::OutOfRange { .. })));
    }

    #[test]
    fn precision_rounds_half_away_from_zero() {
        assert_eq!(round_to_precision(1_500_000, Some(0)), 2_000_000);
        assert_eq!(round_to_precision(-1_500_000, Some(0)), -2_000_000);
        assert_eq!(round_to_precision(-500_000, Some(0)), -1_000_000);
        assert_eq!(round_to_precision(123_456, Some(2)), 120_000);
        assert_eq!(round_to_precision(125_000, Some(2)), 130_000);
        assert_eq!(round_to_precision(123_456, Some(6)), 123_456);
        assert_eq!(round_to_precision(123_456, None), 123_456);
        assert_eq!(round_to_precision(i64::MAX - 1, Some(0)) % 1_000_000, 0);
        // The infinities are not rounded.
        assert_eq!(round_to_precision(TIMESTAMP_INFINITY, Some(0)), TIMESTAMP_INFINITY);
        assert_eq!(round_to_precision(TIMESTAMP_NEG_INFINITY, Some(2)), TIMESTAMP_NEG_INFINITY);
        let v = coerce(Value::Time(86_399_999_999), DataType::Time(Some(3)), "c").ok();
        assert_eq!(v, Some(Value::Time(86_400_000_000)));
        assert!(!Value::Time(1).is_of_type(DataType::Time(Some(3))));
    }

    #[test]
    fn array_types_round_trip_and_stay_small() {
        assert_eq!(std::mem::size_of::<DataType>(), 8);
        for elem in [
            DataType::Int4,
            DataType::Numeric { precision: 38, scale: 38 },
            DataType::Numeric { precision: 5, scale: 0 },
            DataType::Numeric { precision: 1000, scale: 0 },
            DataType::Numeric { precision: 300, scale: -5 },
            DataType::Numeric { precision: 5, scale: -2 },
            DataType::Numeric { precision: 3, scale: 1000 },
            DataType::Varchar(CHAR_LENGTH_MAX),
            DataType::Char(1),
            DataType::Timestamp(Some(0)),
            DataType::TimestampTz(None),
            DataType::Interval,
            DataType::Uuid,
        ] {
            let ty = DataType::Array(ElemType::of(elem).unwrap());
            assert_eq!(crate::types::ElemType::of(elem).unwrap().get(), elem);
            let (tag, a, b) = ty.tag();
            assert_eq!(DataType::from_tag(tag, a, b), Some(ty));
        }
        assert_eq!(ElemType::of(DataType::Array(ElemType::of(DataType::Int4).unwrap())), None);
        assert_eq!(DataType::Array(ElemType::of(DataType::Varchar(10)).unwrap()).pg_name(), "character varying(10)[]");
    }

    #[test]
    fn type_tags_round_trip_with_precision() {
        for ty in [
            DataType::Timestamp(None),
            DataType::Timestamp(Some(0)),
            DataType::TimestampTz(Some(6)),
            DataType::Time(None),
            DataType::Time(Some(2)),
            DataType::TimeTz(None),
            DataType::TimeTz(Some(0)),
            DataType::Uuid,
            DataType::Json,
            DataType::Jsonb,
            DataType::Numeric { precision: 1000, scale: -1000 },
            DataType::Numeric { precision: 60, scale: 5 },
        ] {
            let (tag, a, b) = ty.tag();
            assert_eq!(DataType::from_tag(tag, a, b), Some(ty));
        }
        assert_eq!(DataType::from_tag(13, 0, 0), Some(DataType::Timestamp(None)));
        assert!(DataType::Time(Some(7)).validate().is_err());
        assert_eq!(DataType::TimestampTz(Some(3)).pg_name(), "timestamp(3) with time zone");
    }

    #[test]
    fn display_like_postgres() {
        assert_eq!(Value::Timestamp(0).to_string(), "2000-01-01 00:00:00");
        assert_eq!(Value::Timestamp(1_500_000).to_string(), "2000-01-01 00:00:01.5");
        assert_eq!(Value::TimestampTz(1_500_000).to_string(), "2000-01-01 00:00:01.5+00");
        assert_eq!(Value::Date(-1).to_string(), "1999-12-31");
        assert_eq!(Value::TimeTz(43_200_010_000, 25_200).to_string(), "12:00:00.01-07");
        assert_eq!(Value::TimeTz(0, -19_800).to_string(), "00:00:00+05:30");
        assert_eq!(Value::TimeTz(0, 16_215).to_string(), "00:00:00-04:30:15");
        assert_eq!(Value::Bool(true).to_string(), "t");
        assert_eq!(Value::Bytea(vec![1, 171]).to_string(), "\\x01ab");
        let u: [u8; 16] =
            [0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11];
        assert_eq!(Value::Uuid(u).to_string(), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
        assert_eq!(Value::Time(86_400_000_000).to_string(), "24:00:00");
        assert_eq!(Value::Time(3_723_040_000).to_string(), "01:02:03.04");
        let iv = |months, days, micros| Value::Interval(Interval { months, days, micros }).to_string();
        assert_eq!(iv(0, 0, 0), "00:00:00");
        assert_eq!(iv(14, 3, 14_706_500_000), "1 year 2 mons 3 days 04:05:06.5");
        assert_eq!(iv(0, -1, 7_200_000_000), "-1 days +02:00:00");
        assert_eq!(iv(1, 1, -1_000_000), "1 mon 1 day -00:00:01");
        assert_eq!(iv(-13, 0, 0), "-1 years -1 mons");
    }
}
