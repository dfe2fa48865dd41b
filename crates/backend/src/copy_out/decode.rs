//! Binary representations (PostgreSQL's `*send` functions) of the common
//! types, decoded without allocating: a [`Value`] borrows the field bytes.
//! A caller picks a [`ValueKind`] per column once (from the type oid the
//! catalog import reported) and applies it to every row.

use std::fmt;

/// The types this module decodes, by what their binary form is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueKind {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Numeric,
    /// text, varchar, bpchar (with its padding), name, json: UTF-8 text.
    Text,
    /// jsonb: a version byte (1) and then the text.
    Jsonb,
    Bytea,
    Date,
    Timestamp,
    TimestampTz,
    /// time without time zone: microseconds since midnight.
    Time,
    /// interval: microseconds, days, months.
    Interval,
    Uuid,
    Oid,
    /// A one-dimensional array of one of the kinds above (array_send; the
    /// element type's oid is in the value).
    Array,
}

/// The array type oids of the element kinds above (pg_type.typarray), as
/// (array oid, element oid).
pub const ARRAY_TYPES: &[(u32, u32)] = &[
    (1000, 16),
    (1005, 21),
    (1007, 23),
    (1016, 20),
    (1021, 700),
    (1022, 701),
    (1231, 1700),
    (1009, 25),
    (1015, 1043),
    (1014, 1042),
    (1001, 17),
    (1182, 1082),
    (1115, 1114),
    (1185, 1184),
    (1183, 1083),
    (1187, 1186),
    (2951, 2950),
];

impl ValueKind {
    /// The kind for a built-in type oid; None for types this module does not decode.
    pub fn for_type_oid(oid: u32) -> Option<ValueKind> {
        Some(match oid {
            16 => ValueKind::Bool,
            21 => ValueKind::Int2,
            23 => ValueKind::Int4,
            20 => ValueKind::Int8,
            700 => ValueKind::Float4,
            701 => ValueKind::Float8,
            1700 => ValueKind::Numeric,
            25 | 1043 | 1042 | 19 | 114 => ValueKind::Text,
            3802 => ValueKind::Jsonb,
            17 => ValueKind::Bytea,
            1082 => ValueKind::Date,
            1114 => ValueKind::Timestamp,
            1184 => ValueKind::TimestampTz,
            1083 => ValueKind::Time,
            1186 => ValueKind::Interval,
            2950 => ValueKind::Uuid,
            26 => ValueKind::Oid,
            oid if ARRAY_TYPES.iter().any(|(array, _)| *array == oid) => ValueKind::Array,
            _ => return None,
        })
    }

    /// Decodes one non-NULL field of this kind.
    pub fn decode(self, bytes: &[u8]) -> Result<Value<'_>, DecodeError> {
        Ok(match self {
            ValueKind::Bool => match bytes {
                [0] => Value::Bool(false),
                [1] => Value::Bool(true),
                _ => return Err(DecodeError::Invalid("bool")),
            },
            ValueKind::Int2 => Value::Int2(i16::from_be_bytes(fixed(bytes, "smallint")?)),
            ValueKind::Int4 => Value::Int4(i32::from_be_bytes(fixed(bytes, "integer")?)),
            ValueKind::Int8 => Value::Int8(i64::from_be_bytes(fixed(bytes, "bigint")?)),
            ValueKind::Float4 => Value::Float4(f32::from_be_bytes(fixed(bytes, "real")?)),
            ValueKind::Float8 => Value::Float8(f64::from_be_bytes(fixed(bytes, "double precision")?)),
            ValueKind::Numeric => Value::Numeric(Numeric::decode(bytes)?),
            ValueKind::Text => Value::Text(utf8(bytes)?),
            ValueKind::Jsonb => match bytes.split_first() {
                Some((1, text)) => Value::Text(utf8(text)?),
                _ => return Err(DecodeError::Invalid("jsonb version")),
            },
            ValueKind::Bytea => Value::Bytea(bytes),
            ValueKind::Date => Value::Date(i32::from_be_bytes(fixed(bytes, "date")?)),
            ValueKind::Timestamp => Value::Timestamp(i64::from_be_bytes(fixed(bytes, "timestamp")?)),
            ValueKind::TimestampTz => Value::TimestampTz(i64::from_be_bytes(fixed(bytes, "timestamptz")?)),
            ValueKind::Time => Value::Time(i64::from_be_bytes(fixed(bytes, "time")?)),
            ValueKind::Interval => {
                let raw: [u8; 16] = fixed(bytes, "interval")?;
                let (micros, rest) = raw.split_at(8);
                let (days, months) = rest.split_at(4);
                Value::Interval {
                    months: i32::from_be_bytes(fixed(months, "interval")?),
                    days: i32::from_be_bytes(fixed(days, "interval")?),
                    micros: i64::from_be_bytes(fixed(micros, "interval")?),
                }
            }
            ValueKind::Uuid => Value::Uuid(fixed(bytes, "uuid")?),
            ValueKind::Oid => Value::Oid(u32::from_be_bytes(fixed(bytes, "oid")?)),
            ValueKind::Array => {
                // Checked whole here, so walking it later cannot fail.
                let array = Array::parse(bytes)?;
                for element in array.elements() {
                    if let Some(field) = element? {
                        array.kind.decode(field)?;
                    }
                }
                Value::Array(array)
            }
        })
    }
}

/// A one-dimensional array as array_send writes it: ndim, has-null flag,
/// element type oid, (length, lower bound) when ndim is 1, then each
/// element as an i32 length (-1: NULL) and its binary form.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Array<'a> {
    pub kind: ValueKind,
    pub len: usize,
    body: &'a [u8],
}

impl<'a> Array<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Array<'a>, DecodeError> {
        let word = |at: usize| -> Result<i32, DecodeError> {
            let w = bytes.get(at..at + 4).ok_or(DecodeError::Invalid("array header"))?;
            Ok(i32::from_be_bytes([w[0], w[1], w[2], w[3]]))
        };
        let (ndim, element_oid) = (word(0)?, word(8)?);
        let kind = u32::try_from(element_oid)
            .ok()
            .and_then(ValueKind::for_type_oid)
            .filter(|k| *k != ValueKind::Array)
            .ok_or(DecodeError::Invalid("array element type"))?;
        match ndim {
            0 => Ok(Array { kind, len: 0, body: &[] }),
            // Other lower bounds and more dimensions have no engine value.
            1 if word(16)? == 1 => {
                let len = usize::try_from(word(12)?).map_err(|_| DecodeError::Invalid("array length"))?;
                Ok(Array { kind, len, body: &bytes[20..] })
            }
            _ => Err(DecodeError::Invalid("array (only one dimension with lower bound 1)")),
        }
    }

    /// Each element's bytes (None: NULL).
    pub fn elements(&self) -> impl Iterator<Item = Result<Option<&'a [u8]>, DecodeError>> + '_ {
        let mut at = 0;
        (0..self.len).map(move |_| {
            let w = self.body.get(at..at + 4).ok_or(DecodeError::Invalid("array element"))?;
            at += 4;
            let len = i32::from_be_bytes([w[0], w[1], w[2], w[3]]);
            if len < 0 {
                return Ok(None);
            }
            let len = usize::try_from(len).map_err(|_| DecodeError::Invalid("array element"))?;
            let field = self.body.get(at..at + len).ok_or(DecodeError::Invalid("array element"))?;
            at += len;
            Ok(Some(field))
        })
    }

    /// The elements decoded (a decoded `Value::Array` was checked: no errors).
    pub fn values(&self) -> impl Iterator<Item = Option<Value<'a>>> + '_ {
        self.elements().map(|e| e.ok().flatten().and_then(|field| self.kind.decode(field).ok()))
    }
}

/// Why a field's bytes are not a value of its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{ty} field of {found} bytes, expected {expected}")]
    Length { ty: &'static str, found: usize, expected: usize },
    #[error("invalid {0} value")]
    Invalid(&'static str),
    #[error("text is not valid UTF-8")]
    Utf8,
}

/// A decoded field. Date and timestamps keep PostgreSQL's representation
/// (days / microseconds since 2000-01-01; `i32::MIN/MAX`, `i64::MIN/MAX` are
/// -infinity / infinity). `Display` writes PostgreSQL's text output
/// (DateStyle ISO, timestamptz in UTC, bytea_output hex).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    Bool(bool),
    Int2(i16),
    Int4(i32),
    Int8(i64),
    Float4(f32),
    Float8(f64),
    Numeric(Numeric<'a>),
    Text(&'a str),
    Bytea(&'a [u8]),
    Date(i32),
    Timestamp(i64),
    TimestampTz(i64),
    Time(i64),
    Interval { months: i32, days: i32, micros: i64 },
    Uuid([u8; 16]),
    Oid(u32),
    Array(Array<'a>),
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(value) => f.write_str(if *value { "t" } else { "f" }),
            Value::Int2(value) => write!(f, "{value}"),
            Value::Int4(value) => write!(f, "{value}"),
            Value::Int8(value) => write!(f, "{value}"),
            Value::Float4(value) => super::text::write_float4(f, *value),
            Value::Float8(value) => super::text::write_float8(f, *value),
            Value::Numeric(value) => write!(f, "{value}"),
            Value::Text(value) => f.write_str(value),
            Value::Bytea(value) => {
                f.write_str("\\x")?;
                value.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
            }
            Value::Date(days) => super::text::write_date(f, *days),
            Value::Timestamp(micros) => super::text::write_timestamp(f, *micros, false),
            Value::TimestampTz(micros) => super::text::write_timestamp(f, *micros, true),
            Value::Time(micros) => super::text::write_time(f, *micros),
            Value::Interval { months, days, micros } => super::text::write_interval(f, *months, *days, *micros),
            Value::Uuid(bytes) => {
                for (index, byte) in bytes.iter().enumerate() {
                    if matches!(index, 4 | 6 | 8 | 10) {
                        f.write_str("-")?;
                    }
                    write!(f, "{byte:02x}")?;
                }
                Ok(())
            }
            Value::Oid(value) => write!(f, "{value}"),
            // array_out: elements quoted when empty, NULL, or holding a
            // delimiter, brace, quote, backslash or white space.
            Value::Array(array) => {
                f.write_str("{")?;
                for (index, element) in array.values().enumerate() {
                    if index > 0 {
                        f.write_str(",")?;
                    }
                    let Some(element) = element else {
                        f.write_str("NULL")?;
                        continue;
                    };
                    let text = element.to_string();
                    let quote = text.is_empty()
                        || text.eq_ignore_ascii_case("null")
                        || text.chars().any(|c| {
                            matches!(c, '{' | '}' | ',' | '"' | '\\' | ' ' | '\t' | '\n' | '\r' | '\x0B' | '\x0C')
                        });
                    if !quote {
                        f.write_str(&text)?;
                        continue;
                    }
                    f.write_str("\"")?;
                    for c in text.chars() {
                        if c == '"' || c == '\\' {
                            f.write_str("\\")?;
                        }
                        write!(f, "{c}")?;
                    }
                    f.write_str("\"")?;
                }
                f.write_str("}")
            }
        }
    }
}

fn fixed<const N: usize>(bytes: &[u8], ty: &'static str) -> Result<[u8; N], DecodeError> {
    bytes.try_into().map_err(|_| DecodeError::Length { ty, found: bytes.len(), expected: N })
}

fn utf8(bytes: &[u8]) -> Result<&str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|_| DecodeError::Utf8)
}

/// numeric's sign word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumericSign {
    Positive,
    Negative,
    NaN,
    Infinity,
    NegativeInfinity,
}

/// A numeric as sent: base-10000 digits (borrowed, big-endian i16 each),
/// the weight of the first digit, the sign and the display scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Numeric<'a> {
    pub sign: NumericSign,
    /// Power of 10000 of the first digit.
    pub weight: i16,
    /// Digits after the decimal point in the text form.
    pub dscale: u16,
    digits: &'a [u8],
}

/// Why a numeric has no exact `(i128, scale)` form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NumericError {
    #[error("numeric NaN has no decimal value")]
    NaN,
    #[error("numeric infinity has no decimal value")]
    Infinity,
    #[error("numeric value does not fit 38 decimal digits")]
    Overflow,
}

const NUMERIC_DSCALE_MAX: u16 = 0x3fff;
const NBASE: i16 = 10_000;

impl<'a> Numeric<'a> {
    /// Validates as PostgreSQL's `numeric_recv` does.
    pub fn decode(bytes: &'a [u8]) -> Result<Numeric<'a>, DecodeError> {
        const INVALID: DecodeError = DecodeError::Invalid("numeric");
        let Some((header, digits)) = bytes.split_first_chunk::<8>() else {
            return Err(DecodeError::Length { ty: "numeric", found: bytes.len(), expected: 8 });
        };
        let ndigits = i16::from_be_bytes([header[0], header[1]]);
        let weight = i16::from_be_bytes([header[2], header[3]]);
        let sign = match u16::from_be_bytes([header[4], header[5]]) {
            0x0000 => NumericSign::Positive,
            0x4000 => NumericSign::Negative,
            0xC000 => NumericSign::NaN,
            0xD000 => NumericSign::Infinity,
            0xF000 => NumericSign::NegativeInfinity,
            _ => return Err(INVALID),
        };
        let dscale = u16::from_be_bytes([header[6], header[7]]);
        if ndigits < 0 || digits.len() != 2 * ndigits as usize || dscale > NUMERIC_DSCALE_MAX {
            return Err(INVALID);
        }
        let special = !matches!(sign, NumericSign::Positive | NumericSign::Negative);
        if special && ndigits != 0 {
            return Err(INVALID);
        }
        if digits.chunks_exact(2).any(|pair| !(0..NBASE).contains(&i16::from_be_bytes([pair[0], pair[1]]))) {
            return Err(INVALID);
        }
        Ok(Numeric { sign, weight, dscale, digits })
    }

    pub fn ndigits(&self) -> usize {
        self.digits.len() / 2
    }

    /// Base-10000 digit `index` (0 = most significant); 0 beyond the stored ones.
    pub fn digit(&self, index: usize) -> i16 {
        match self.digits.get(2 * index..2 * index + 2) {
            Some(pair) => i16::from_be_bytes([pair[0], pair[1]]),
            None => 0,
        }
    }

    /// `(mantissa, scale)` with value = mantissa * 10^-scale and scale = dscale,
    /// truncating digits beyond dscale as the text output does.
    pub fn to_i128(&self) -> Result<(i128, u16), NumericError> {
        let negative = match self.sign {
            NumericSign::Positive => false,
            NumericSign::Negative => true,
            NumericSign::NaN => return Err(NumericError::NaN),
            NumericSign::Infinity | NumericSign::NegativeInfinity => return Err(NumericError::Infinity),
        };
        let mut mantissa: i128 = 0;
        for index in 0..self.ndigits() {
            let digit = i128::from(self.digit(index));
            if digit == 0 {
                continue;
            }
            // This digit is worth digit * 10^(4 * (weight - index) + dscale) in mantissa units.
            let exponent = 4 * (i64::from(self.weight) - index as i64) + i64::from(self.dscale);
            let part = if exponent >= 0 {
                let factor = pow10(exponent).ok_or(NumericError::Overflow)?;
                digit.checked_mul(factor).ok_or(NumericError::Overflow)?
            } else if exponent > -4 {
                digit / pow10(-exponent).ok_or(NumericError::Overflow)?
            } else {
                break;
            };
            mantissa = mantissa.checked_add(part).ok_or(NumericError::Overflow)?;
        }
        Ok((if negative { -mantissa } else { mantissa }, self.dscale))
    }
}

fn pow10(exponent: i64) -> Option<i128> {
    10i128.checked_pow(u32::try_from(exponent).ok()?)
}

/// numeric_out: all integer digits, then exactly dscale fraction digits.
impl fmt::Display for Numeric<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.sign {
            NumericSign::NaN => return f.write_str("NaN"),
            NumericSign::Infinity => return f.write_str("Infinity"),
            NumericSign::NegativeInfinity => return f.write_str("-Infinity"),
            NumericSign::Negative => f.write_str("-")?,
            NumericSign::Positive => {}
        }
        let weight = i64::from(self.weight);
        if weight < 0 {
            f.write_str("0")?;
        } else {
            for index in 0..=weight as usize {
                if index == 0 {
                    write!(f, "{}", self.digit(0))?;
                } else {
                    write!(f, "{:04}", self.digit(index))?;
                }
            }
        }
        if self.dscale == 0 {
            return Ok(());
        }
        f.write_str(".")?;
        let mut remaining = usize::from(self.dscale);
        // Base-10000 position of the first fraction digit, relative to digit 0.
        let mut position = weight + 1;
        while remaining > 0 {
            let digit = usize::try_from(position).map_or(0, |index| self.digit(index));
            let text = [
                b'0' + (digit / 1000) as u8,
                b'0' + (digit / 100 % 10) as u8,
                b'0' + (digit / 10 % 10) as u8,
                b'0' + (digit % 10) as u8,
            ];
            let take = remaining.min(4);
            for &byte in &text[..take] {
                write!(f, "{}", char::from(byte))?;
            }
            remaining -= take;
            position += 1;
        }
        Ok(())
    }
}
