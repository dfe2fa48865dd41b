//! Values on the wire: type OIDs, and the text and binary forms of every
//! engine type, as PostgreSQL's input/output and send/receive functions
//! produce and accept them. Text output is the sql crate's
//! (`value::write_text`); binary is implemented here, once, for parameters,
//! result rows and COPY alike.

use bytes::{BufMut, BytesMut};
use pgtier_engine::{DataType, Numeric, Value};
use pgtier_sql::SqlError;
use pgtier_sql::value;

// pg_type.h OIDs.
pub const BOOL: u32 = 16;
pub const BYTEA: u32 = 17;
pub const NAME: u32 = 19;
pub const INT8: u32 = 20;
pub const INT2: u32 = 21;
pub const INT4: u32 = 23;
pub const TEXT: u32 = 25;
pub const FLOAT4: u32 = 700;
pub const FLOAT8: u32 = 701;
pub const UNKNOWN: u32 = 705;
pub const BPCHAR: u32 = 1042;
pub const VARCHAR: u32 = 1043;
pub const DATE: u32 = 1082;
pub const TIME: u32 = 1083;
pub const TIMESTAMP: u32 = 1114;
pub const TIMESTAMPTZ: u32 = 1184;
pub const NUMERIC: u32 = 1700;
pub const UUID: u32 = 2950;
pub const INTERVAL: u32 = 1186;
pub const JSON: u32 = 114;
pub const JSONB: u32 = 3802;

/// Numeric binary sign words (numeric.c).
const NUMERIC_POS: u16 = 0x0000;
const NUMERIC_NEG: u16 = 0x4000;

/// (type OID, `atttypmod`, `typlen`) of a column type as the wire reports
/// it: the catalog's facts (one mechanism with `pg_type`/`pg_attribute`),
/// after the SQL layer's pseudo types (reg*, arrays) became their text form.
fn wire_type(ty: DataType) -> (u32, i32, i16) {
    let info = pgtier_sql::catalog::column_type_info(pgtier_sql::value::types::output_type(ty));
    (u32::try_from(info.type_oid).unwrap_or(TEXT), info.typmod, info.len)
}

pub fn oid(ty: DataType) -> u32 {
    wire_type(ty).0
}

/// `pg_type.typlen` (-1 for variable length).
pub fn type_size(ty: DataType) -> i16 {
    wire_type(ty).2
}

/// The type modifier RowDescription reports (`atttypmod`).
pub fn type_modifier(ty: DataType) -> i32 {
    wire_type(ty).1
}

/// A type a client may declare for a parameter, when it is one whose
/// payload we decode as that type rather than as the inferred one.
pub fn declared_type(oid: u32) -> Option<DataType> {
    Some(match oid {
        BOOL => DataType::Bool,
        INT2 => DataType::Int2,
        INT4 => DataType::Int4,
        INT8 => DataType::Int8,
        FLOAT4 => DataType::Float4,
        FLOAT8 => DataType::Float8,
        BYTEA => DataType::Bytea,
        DATE => DataType::Date,
        TIMESTAMP => DataType::Timestamp(None),
        TIMESTAMPTZ => DataType::TimestampTz(None),
        TIME => DataType::Time(None),
        UUID => DataType::Uuid,
        INTERVAL => DataType::Interval,
        JSON => DataType::Json,
        JSONB => DataType::Jsonb,
        NUMERIC => DataType::Numeric { precision: 38, scale: 0 },
        // The array types of the above (and of text, varchar, bpchar).
        _ => {
            let m = pgtier_sql::catalog::type_by_oid(i64::from(oid)).filter(|m| m.is_array)?;
            let elem = match u32::try_from(m.base.oid).ok()? {
                TEXT | VARCHAR => DataType::Text,
                BPCHAR => DataType::Char(1),
                NUMERIC => pgtier_sql::value::NUMERIC_ANY,
                other => declared_type(other)?,
            };
            pgtier_sql::value::array::array_type(elem)?
        }
    })
}

/// Where a value being decoded came from, for error messages (built only
/// when an error is raised).
#[derive(Clone, Copy, Debug)]
pub enum Origin {
    /// Bind parameter, 1-based.
    Param(usize),
    /// A COPY FROM field.
    Copy,
}

fn binary_error(what: Origin) -> SqlError {
    match what {
        Origin::Param(n) => SqlError::new("22P03", format!("incorrect binary data format in bind parameter {n}")),
        Origin::Copy => SqlError::new("22P03", "incorrect binary data format"),
    }
}

/// Decodes one parameter or COPY field. `text` says the payload is in text
/// form; `declared` is the client's type OID (0 = let the server infer).
pub fn decode(bytes: &[u8], text: bool, declared: u32, inferred: DataType, what: Origin) -> Result<Value, SqlError> {
    let declared_ty = declared_type(declared);
    if text {
        let s = std::str::from_utf8(bytes).map_err(|_| invalid_utf8())?;
        return match declared_ty {
            // A declared numeric keeps its own scale; the cast to the
            // inferred type applies the column's typmod.
            Some(DataType::Numeric { .. }) => match value::parse_numeric(s) {
                Some(n) => Ok(Value::Numeric(n)),
                None => value::parse_input(s, value::NUMERIC_ANY),
            },
            Some(ty) => value::parse_input(s, ty),
            None => value::parse_input(s, inferred),
        };
    }
    let ty = match (declared, declared_ty) {
        (_, Some(ty)) => ty,
        (TEXT | VARCHAR | BPCHAR | NAME | UNKNOWN, None) => {
            let s = std::str::from_utf8(bytes).map_err(|_| invalid_utf8())?;
            return value::parse_input(s, inferred);
        }
        _ => inferred,
    };
    decode_binary(bytes, ty, what)
}

fn invalid_utf8() -> SqlError {
    SqlError::new("22021", "invalid byte sequence for encoding \"UTF8\"")
}

fn fixed<const N: usize>(bytes: &[u8], what: Origin) -> Result<[u8; N], SqlError> {
    bytes.try_into().map_err(|_| binary_error(what))
}

/// PostgreSQL's `*_recv` functions for the engine's types.
pub fn decode_binary(bytes: &[u8], ty: DataType, what: Origin) -> Result<Value, SqlError> {
    Ok(match ty {
        DataType::Bool => Value::Bool(fixed::<1>(bytes, what)?[0] != 0),
        DataType::Int2 => Value::Int2(i16::from_be_bytes(fixed(bytes, what)?)),
        DataType::Int4 => Value::Int4(i32::from_be_bytes(fixed(bytes, what)?)),
        DataType::Int8 => Value::Int8(i64::from_be_bytes(fixed(bytes, what)?)),
        DataType::Float4 => Value::Float4(f32::from_be_bytes(fixed(bytes, what)?)),
        DataType::Float8 => Value::Float8(f64::from_be_bytes(fixed(bytes, what)?)),
        DataType::Date => Value::Date(i32::from_be_bytes(fixed(bytes, what)?)),
        DataType::Timestamp(_) => Value::Timestamp(i64::from_be_bytes(fixed(bytes, what)?)),
        DataType::TimestampTz(_) => Value::TimestampTz(i64::from_be_bytes(fixed(bytes, what)?)),
        DataType::Time(_) => Value::Time(i64::from_be_bytes(fixed(bytes, what)?)),
        // timetz_recv: microseconds, then the zone in seconds west.
        DataType::TimeTz(_) => {
            let b: [u8; 12] = fixed(bytes, what)?;
            let time = i64::from_be_bytes(b[..8].try_into().map_err(|_| binary_error(what))?);
            Value::TimeTz(time, i32::from_be_bytes(b[8..].try_into().map_err(|_| binary_error(what))?))
        }
        DataType::Bytea => Value::Bytea(bytes.to_vec()),
        DataType::Uuid => Value::Uuid(fixed(bytes, what)?),
        // interval_recv: microseconds, days, months.
        DataType::Interval => {
            let b: [u8; 16] = fixed(bytes, what)?;
            let (micros, rest) = b.split_at(8);
            let (days, months) = rest.split_at(4);
            Value::Interval(pgtier_engine::Interval {
                micros: i64::from_be_bytes(fixed(micros, what)?),
                days: i32::from_be_bytes(fixed(days, what)?),
                months: i32::from_be_bytes(fixed(months, what)?),
            })
        }
        DataType::Text | DataType::Varchar(_) | DataType::Char(_) => {
            let s = std::str::from_utf8(bytes).map_err(|_| invalid_utf8())?;
            // The type's typmod (length) is applied by the cast that follows.
            Value::Text(s.to_owned())
        }
        DataType::Numeric { .. } => match decode_numeric(bytes, what) {
            Ok(n) => Value::Numeric(n),
            // Wider than the i128 form, NaN or an infinity.
            Err(e) if e.sqlstate == "22003" || e.sqlstate == "0A000" => {
                crate::numeric_wire::decode_wide(bytes, || binary_error(what))?
            }
            Err(e) => return Err(e),
        },
        // json_recv: the text; jsonb_recv: a version byte (1), then the text.
        DataType::Json => value::parse_input(std::str::from_utf8(bytes).map_err(|_| invalid_utf8())?, DataType::Json)?,
        DataType::Jsonb => match bytes.split_first() {
            Some((1, text)) => {
                value::parse_input(std::str::from_utf8(text).map_err(|_| invalid_utf8())?, DataType::Jsonb)?
            }
            Some((v, _)) => return Err(SqlError::new("XX000", format!("unsupported jsonb version number {v}"))),
            None => return Err(binary_error(what)),
        },
        DataType::Array(e) => decode_array(bytes, e.get(), what)?,
    })
}

/// array_recv of a one-dimensional array with lower bound 1: ndim, flags,
/// element type, (length, lower bound) per dimension, then each element
/// as a length (-1: NULL) and its binary form.
fn decode_array(bytes: &[u8], elem: DataType, what: Origin) -> Result<Value, SqlError> {
    let word = |at: &mut usize| -> Result<i32, SqlError> {
        let w = bytes.get(*at..*at + 4).ok_or_else(|| binary_error(what))?;
        *at += 4;
        Ok(i32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    let mut at = 0;
    let ndim = word(&mut at)?;
    let flags = word(&mut at)?;
    let elem_oid = word(&mut at)?;
    if !(0..=1).contains(&flags) {
        return Err(SqlError::new("22P03", "invalid array flags"));
    }
    let expected = oid(elem);
    if u32::try_from(elem_oid).ok() != Some(expected) {
        return Err(SqlError::new(
            "42804",
            format!("binary data has array element type {elem_oid} instead of expected {expected}"),
        ));
    }
    let n = match ndim {
        0 => 0,
        1 => {
            let (len, lower) = (word(&mut at)?, word(&mut at)?);
            if lower != 1 {
                return Err(SqlError::unsupported("arrays with a lower bound other than 1"));
            }
            usize::try_from(len).map_err(|_| binary_error(what))?
        }
        n if n < 0 => return Err(SqlError::new("22P03", format!("invalid number of dimensions: {n}"))),
        _ => return Err(pgtier_sql::value::array::multidimensional()),
    };
    let mut items = Vec::with_capacity(n.min(bytes.len() / 4));
    for _ in 0..n {
        let len = word(&mut at)?;
        if len < 0 {
            items.push(Value::Null);
            continue;
        }
        let len = usize::try_from(len).map_err(|_| binary_error(what))?;
        let body = bytes.get(at..at + len).ok_or_else(|| binary_error(what))?;
        at += len;
        items.push(decode_binary(body, elem, what)?);
    }
    if at != bytes.len() {
        return Err(binary_error(what));
    }
    Ok(Value::Array(items))
}

/// array_send (see [`decode_array`]): a multidimensional array (nested
/// `Value::Array` rows) as its dimensions and its elements in storage
/// order; `lower` its lower bounds (empty: all 1).
fn encode_array(lower: &[i32], items: &[Value], elem: Option<DataType>, out: &mut BytesMut) {
    use pgtier_sql::value::array::{dims, leaves};
    let elem_oid = elem.map_or(TEXT, oid);
    let shape = dims(items);
    let flat = leaves(items);
    out.put_i32(i32::try_from(shape.len()).unwrap_or(i32::MAX));
    out.put_i32(i32::from(flat.iter().any(|v| v.is_null())));
    out.put_u32(elem_oid);
    for (k, len) in shape.iter().enumerate() {
        out.put_i32(i32::try_from(*len).unwrap_or(i32::MAX));
        out.put_i32(lower.get(k).copied().unwrap_or(1));
    }
    for v in flat {
        if v.is_null() {
            out.put_i32(-1);
            continue;
        }
        let at = out.len();
        out.put_i32(0);
        encode_binary(v, elem, out);
        let len = i32::try_from(out.len() - at - 4).unwrap_or(i32::MAX);
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }
}

/// numeric_recv: ndigits, weight, sign, dscale, then base-10000 digits.
fn decode_numeric(bytes: &[u8], what: Origin) -> Result<Numeric, SqlError> {
    let word = |i: usize| -> Result<u16, SqlError> {
        let b = bytes.get(2 * i..2 * i + 2).ok_or_else(|| binary_error(what))?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    };
    let ndigits = usize::from(word(0)?);
    #[allow(clippy::cast_possible_wrap)]
    let weight = i32::from(word(1)? as i16);
    let sign = word(2)?;
    let dscale = word(3)?;
    if bytes.len() != 8 + 2 * ndigits {
        return Err(binary_error(what));
    }
    if sign != NUMERIC_POS && sign != NUMERIC_NEG {
        return Err(SqlError::unsupported("numeric NaN or infinity"));
    }
    let overflow = || SqlError::new("22003", "numeric field overflow");
    let scale = u8::try_from(dscale).map_err(|_| overflow())?;
    let mut mantissa: i128 = 0;
    for i in 0..ndigits {
        let d = word(4 + i)?;
        if d >= 10_000 {
            return Err(binary_error(what));
        }
        // Digit i stands for d * 10000^(weight - i); at `scale` decimals
        // that is d * 10^(4 * (weight - i) + scale).
        let i = i32::try_from(i).map_err(|_| overflow())?;
        let exp = 4 * (weight - i) + i32::from(scale);
        let term = if exp >= 0 {
            i128::from(d)
                .checked_mul(10i128.checked_pow(exp.unsigned_abs()).ok_or_else(overflow)?)
                .ok_or_else(overflow)?
        } else {
            // Digits beyond dscale: PostgreSQL never sends them; drop.
            i128::from(d) / 10i128.checked_pow(exp.unsigned_abs()).unwrap_or(i128::MAX)
        };
        mantissa = mantissa.checked_add(term).ok_or_else(overflow)?;
    }
    if sign == NUMERIC_NEG {
        mantissa = -mantissa;
    }
    Ok(Numeric::new(mantissa, scale))
}

/// numeric_send.
fn encode_numeric(n: Numeric, out: &mut BytesMut) {
    let scale = usize::from(n.scale);
    let abs = n.mantissa.unsigned_abs();
    // Integer part and fraction (as `scale` decimal digits).
    let pow = 10u128.checked_pow(u32::from(n.scale)).unwrap_or(u128::MAX);
    let (int_part, frac_part) = (abs / pow, abs % pow);
    let mut digits: Vec<i16> = Vec::with_capacity(12);
    // Integer groups, least significant first.
    let mut ip = int_part;
    let mut int_groups = 0i32;
    while ip > 0 {
        digits.push(i16::try_from(ip % 10_000).unwrap_or(0));
        ip /= 10_000;
        int_groups += 1;
    }
    digits.reverse();
    // Fraction: pad to a multiple of 4 digits, then groups left to right.
    let frac_groups = scale.div_ceil(4);
    let pad = u32::try_from(frac_groups * 4 - scale).unwrap_or(0);
    let mut frac = frac_part * 10u128.pow(pad);
    let mut frac_digits = vec![0i16; frac_groups];
    for slot in frac_digits.iter_mut().rev() {
        *slot = i16::try_from(frac % 10_000).unwrap_or(0);
        frac /= 10_000;
    }
    digits.extend_from_slice(&frac_digits);
    let mut weight = int_groups - 1;
    // Strip leading zero groups (only when the integer part is zero) and
    // trailing zero groups, as numeric_send's stored form has neither.
    let mut start = 0;
    while start < digits.len() && digits[start] == 0 {
        start += 1;
        weight -= 1;
    }
    let mut end = digits.len();
    while end > start && digits[end - 1] == 0 {
        end -= 1;
    }
    let digits = &digits[start..end];
    if digits.is_empty() {
        weight = 0;
    }
    out.put_i16(i16::try_from(digits.len()).unwrap_or(0));
    out.put_i16(i16::try_from(weight).unwrap_or(0));
    out.put_u16(if n.mantissa < 0 && !digits.is_empty() { NUMERIC_NEG } else { NUMERIC_POS });
    out.put_u16(u16::from(n.scale));
    for d in digits {
        out.put_i16(*d);
    }
}

/// PostgreSQL's `*_send`: the binary form of `v` as a value of `ty` (the
/// column's type when known, so an int4 column is always 4 bytes).
pub fn encode_binary(v: &Value, ty: Option<DataType>, out: &mut BytesMut) {
    match (v, ty) {
        (Value::Int2(_) | Value::Int4(_) | Value::Int8(_), Some(DataType::Int2)) => out.put_i16(int(v) as i16),
        (Value::Int2(_) | Value::Int4(_) | Value::Int8(_), Some(DataType::Int4)) => out.put_i32(int(v) as i32),
        (Value::Int2(_) | Value::Int4(_) | Value::Int8(_), Some(DataType::Int8)) => out.put_i64(int(v)),
        (Value::Bool(b), _) => out.put_u8(u8::from(*b)),
        (Value::Int2(x), _) => out.put_i16(*x),
        (Value::Int4(x), _) => out.put_i32(*x),
        (Value::Int8(x), _) => out.put_i64(*x),
        (Value::Float4(x), Some(DataType::Float8)) => out.put_f64(f64::from(*x)),
        (Value::Float4(x), _) => out.put_f32(*x),
        #[allow(clippy::cast_possible_truncation)]
        (Value::Float8(x), Some(DataType::Float4)) => out.put_f32(*x as f32),
        (Value::Float8(x), _) => out.put_f64(*x),
        (Value::Numeric(n), _) => encode_numeric(*n, out),
        (Value::NumericBig(b), _) => crate::numeric_wire::encode_big(b.as_ref(), out),
        (Value::Text(s) | Value::Json(s), _) => out.put_slice(s.as_bytes()),
        (Value::Jsonb(s), _) => {
            out.put_u8(1);
            out.put_slice(s.as_bytes());
        }
        (Value::Bytea(b), _) => out.put_slice(b),
        (Value::Date(d), _) => out.put_i32(*d),
        (Value::Timestamp(t) | Value::TimestampTz(t) | Value::Time(t), _) => out.put_i64(*t),
        (Value::TimeTz(t, z), _) => {
            out.put_i64(*t);
            out.put_i32(*z);
        }
        (Value::Uuid(u), _) => out.put_slice(u),
        (Value::Interval(v), _) => {
            out.put_i64(v.micros);
            out.put_i32(v.days);
            out.put_i32(v.months);
        }
        (Value::Array(_) | Value::BoundedArray(_), _) => {
            let (lower, items) = v.array_parts().unwrap_or((&[], &[]));
            encode_array(lower, items, ty.and_then(pgtier_sql::value::array::elem_type), out);
        }
        (Value::Null, _) => {}
    }
}

#[allow(clippy::cast_possible_truncation)]
fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// PostgreSQL's text output of `v` (`scratch` is reused between calls).
pub fn encode_text(v: &Value, out: &mut BytesMut, scratch: &mut String) {
    match v {
        Value::Text(s) | Value::Json(s) | Value::Jsonb(s) => out.put_slice(s.as_bytes()),
        Value::Int4(x) => put_int(out, i64::from(*x)),
        Value::Int8(x) => put_int(out, *x),
        Value::Int2(x) => put_int(out, i64::from(*x)),
        other => {
            scratch.clear();
            value::write_text(other, scratch);
            out.put_slice(scratch.as_bytes());
        }
    }
}

/// Decimal digits of an integer without going through `fmt`.
fn put_int(out: &mut BytesMut, x: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = x.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if x < 0 {
        out.put_u8(b'-');
    }
    out.put_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric_round_trip(text: &str) {
        let n = value::parse_numeric(text).unwrap();
        let mut buf = BytesMut::new();
        encode_numeric(n, &mut buf);
        let back = decode_numeric(&buf, Origin::Copy).unwrap();
        assert_eq!(back, n, "{text}");
    }

    #[test]
    fn numeric_binary_round_trips() {
        for t in [
            "0",
            "0.00",
            "1",
            "-1",
            "12345.6789",
            "0.0001",
            "-0.5",
            "10000",
            "99999999.99",
            "123456789012345678901234567890.12345678",
            "1.10",
        ] {
            numeric_round_trip(t);
        }
    }

    #[test]
    fn numeric_binary_layout_matches_postgres() {
        // SELECT numeric_send(12345.678) = 0003 0001 0000 0003 0001 0929 1a7c
        let mut buf = BytesMut::new();
        encode_numeric(value::parse_numeric("12345.678").unwrap(), &mut buf);
        assert_eq!(&buf[..], &[0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c]);
    }

    #[test]
    fn integers_as_text() {
        let mut out = BytesMut::new();
        let mut s = String::new();
        for x in [0i64, 7, -7, i64::MIN, i64::MAX] {
            out.clear();
            encode_text(&Value::Int8(x), &mut out, &mut s);
            assert_eq!(std::str::from_utf8(&out).unwrap(), x.to_string());
        }
    }
}
