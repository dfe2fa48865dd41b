//! Memcomparable key encoding: byte order of encoded keys equals
//! PostgreSQL's order of the values (text in the `C` collation, NULLS LAST).
//! Every column encoding is self-delimiting, so a composite key's encoded
//! prefix is exactly the encoding of its leading columns (prefix scans).
//!
//! - integers, date, timestamp, time, numeric(p,s): big-endian with the sign bit flipped
//! - unconstrained numeric: sign byte, exponent and digits (`decimal_key`), scale-free;
//!   -Infinity, +Infinity and NaN (in that order, around the finite values) one byte each;
//!   NaN in numeric(p,s): all ones
//! - uuid: its 16 bytes as they are (PostgreSQL compares uuids by memcmp)
//! - interval: its span (30-day months, 24-hour days) as an i128, sign flipped
//! - float: IEEE bits flipped so order is numeric; -0 = 0; NaN sorts last
//! - text/bytea: bytes with 0x00 escaped as 0x00 0xFF, terminated by 0x00 0x00
//! - jsonb: [`crate::json::sort_key`] (jsonb_cmp's order as bytes), escaped as text is
//! - nullable columns (secondary indexes only) get a tag byte: 0x01 value, 0x02 NULL
//! - array: each element tagged as a nullable column (NULL elements sort
//!   after values, as in array_cmp), then 0x00 (a prefix sorts first)

use crate::numeric_big::NumericKind;
use crate::row::RowLayout;
use crate::types::{DataType, Value, ValueRef};

pub(crate) const TAG_VALUE: u8 = 0x01;
pub(crate) const TAG_NULL: u8 = 0x02;

/// Appends one column's encoding. `tagged` for nullable index columns.
pub(crate) fn encode_column(out: &mut Vec<u8>, value: ValueRef<'_>, ty: DataType, tagged: bool) {
    if tagged {
        if matches!(value, ValueRef::Null) {
            out.push(TAG_NULL);
            return;
        }
        out.push(TAG_VALUE);
    }
    match value {
        ValueRef::Null => {
            // Untagged keys never hold NULL (primary-key columns are NOT NULL).
            debug_assert!(false, "NULL in an untagged key column");
        }
        ValueRef::Bool(v) => out.push(u8::from(v)),
        ValueRef::Int2(v) => out.extend_from_slice(&(v.cast_unsigned() ^ 0x8000).to_be_bytes()),
        ValueRef::Int4(v) | ValueRef::Date(v) => {
            out.extend_from_slice(&(v.cast_unsigned() ^ 0x8000_0000).to_be_bytes())
        }
        ValueRef::Int8(v) | ValueRef::Timestamp(v) | ValueRef::TimestampTz(v) | ValueRef::Time(v) => {
            out.extend_from_slice(&(v.cast_unsigned() ^ (1 << 63)).to_be_bytes())
        }
        // timetz_cmp's order: the UTC time, then the zone (seconds west).
        ValueRef::TimeTz(t, z) => {
            let utc = t + i64::from(z) * 1_000_000;
            out.extend_from_slice(&(utc.cast_unsigned() ^ (1 << 63)).to_be_bytes());
            out.extend_from_slice(&(z.cast_unsigned() ^ 0x8000_0000).to_be_bytes());
        }
        // Unconstrained numeric: values of any scale, ordered as decimals.
        ValueRef::Numeric(n) if ty.numeric_own_scale() => {
            decimal_key(out, n.mantissa < 0, &n.mantissa.unsigned_abs().to_string(), i64::from(n.scale));
        }
        ValueRef::NumericBig(b) if ty.numeric_own_scale() => match b.kind() {
            NumericKind::Finite { negative } => decimal_key(out, negative, b.digits(), i64::from(b.scale())),
            NumericKind::NegInf => out.push(0x00),
            NumericKind::PosInf => out.push(0x04),
            NumericKind::NaN => out.push(0x05),
        },
        // numeric(p,s) holds no infinity nor wide value: NaN, above every
        // value (all below 10^38), is the only one in this form.
        ValueRef::NumericBig(_) => out.extend_from_slice(&[0xFF; 16]),
        ValueRef::Numeric(n) => out.extend_from_slice(&(n.mantissa.cast_unsigned() ^ (1 << 127)).to_be_bytes()),
        ValueRef::Float4(v) => out.extend_from_slice(&float4_key(v).to_be_bytes()),
        ValueRef::Float8(v) => out.extend_from_slice(&float8_key(v).to_be_bytes()),
        ValueRef::Text(s) => escape_bytes(out, s.as_bytes()),
        ValueRef::Bytea(b) => escape_bytes(out, b),
        // Byte order is uuid_cmp's order (memcmp).
        ValueRef::Uuid(u) => out.extend_from_slice(&u),
        // Intervals PostgreSQL finds equal ('1 day', '24 hours') share a key.
        ValueRef::Interval(v) => out.extend_from_slice(&(v.span().cast_unsigned() ^ (1 << 127)).to_be_bytes()),
        // Values PostgreSQL finds equal ('1.0', '1') share a key.
        ValueRef::Jsonb(s) => escape_bytes(out, &crate::json::sort_key(s)),
        // json has no equality: no index accepts it (checked when defining).
        ValueRef::Json(s) => escape_bytes(out, s.as_bytes()),
        ValueRef::Array(a) => {
            let elem = match ty {
                DataType::Array(e) => e.get(),
                _ => DataType::Text,
            };
            // Only arrays with lower bounds 1 reach a key (see writes.rs
            // refuse_nested_keys).
            let whole = a.to_value();
            for v in whole.array_parts().map_or(&[][..], |(_, items)| items) {
                // A multidimensional array's rows are arrays of `ty`.
                let t = if matches!(v, Value::Array(_)) { ty } else { elem };
                encode_column(out, v.as_ref(), t, true);
            }
            out.push(ARRAY_END);
        }
    }
}

/// Length of a [`decimal_key`] at the start of `bytes`: the zero byte, or
/// sign, exponent, digits and the terminator (0x00, inverted 0xFF).
fn decimal_key_len(bytes: &[u8]) -> usize {
    match bytes.first() {
        None => 0,
        // Zero, -Infinity, +Infinity, NaN.
        Some(0x02 | 0x00 | 0x04 | 0x05) => 1,
        Some(&sign) => {
            let end = if sign == 0x03 { 0x00 } else { 0xFF };
            // An escaped exponent's four bytes may hold the terminator's value.
            let escape = if sign == 0x03 { [0xFF, 0xFF] } else { [0x00, 0x00] };
            let digits_at = if bytes.get(1..3) == Some(&escape[..]) { 7 } else { 3 };
            bytes.iter().skip(digits_at).position(|&b| b == end).map_or(bytes.len(), |k| digits_at + k + 1)
        }
    }
}

/// A decimal's memcomparable key: a sign byte (-Infinity 0x00, negative
/// 0x01, zero 0x02, positive 0x03, +Infinity 0x04, NaN 0x05), then for non-zero values the exponent E and the digits
/// D of `0.D × 10^E` (no leading or trailing zeros, so 1.5 and 1.50 share
/// a key), each digit as 1..=10 and a 0x00 terminator; negative values
/// with those bytes inverted, so larger magnitudes sort first.
fn decimal_key(out: &mut Vec<u8>, negative: bool, digits: &str, scale: i64) {
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        out.push(0x02);
        return;
    }
    let significant = digits.trim_end_matches('0');
    // Digits before the point: the digit count less the scale, at least
    // -16383 (NUMERIC_DSCALE_MAX) and at most 131072 (NUMERIC_WEIGHT_DIGITS_MAX).
    let exponent = i64::try_from(digits.len()).unwrap_or(i64::MAX) - scale;
    let flip = |b: u8| if negative { !b } else { b };
    out.push(if negative { 0x01 } else { 0x03 });
    match i16::try_from(exponent) {
        // i16::MAX itself is the escape: it and larger exponents follow as a u32.
        Ok(e) if e < i16::MAX => out.extend((e.cast_unsigned() ^ 0x8000).to_be_bytes().map(flip)),
        _ => {
            out.extend([0xFF, 0xFF].map(flip));
            out.extend(u32::try_from(exponent).unwrap_or(u32::MAX).to_be_bytes().map(flip));
        }
    }
    for d in significant.bytes() {
        out.push(flip(d - b'0' + 1));
    }
    out.push(flip(0x00));
}

const ARRAY_END: u8 = 0x00;

fn float4_key(v: f32) -> u32 {
    let v = if v == 0.0 {
        0.0
    } else if v.is_nan() {
        f32::NAN
    } else {
        v
    };
    let bits = v.to_bits();
    if v.is_nan() {
        u32::MAX
    } else if bits & (1 << 31) != 0 {
        !bits
    } else {
        bits | (1 << 31)
    }
}

fn float8_key(v: f64) -> u64 {
    let v = if v == 0.0 { 0.0 } else { v };
    let bits = v.to_bits();
    if v.is_nan() {
        u64::MAX
    } else if bits & (1 << 63) != 0 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn escape_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Length of the encoding of one column at the start of `bytes`.
pub(crate) fn column_len(bytes: &[u8], ty: DataType, tagged: bool) -> usize {
    let mut at = 0;
    if tagged {
        if bytes.first() == Some(&TAG_NULL) {
            return 1;
        }
        at = 1;
    }
    if ty.numeric_own_scale() {
        return at + decimal_key_len(&bytes[at..]);
    }
    if let DataType::Array(e) = ty {
        while at < bytes.len() && bytes[at] != ARRAY_END {
            at += column_len(&bytes[at..], e.get(), true);
        }
        return (at + 1).min(bytes.len());
    }
    match ty.fixed_width_bytes() {
        Some(w) => at + w,
        None => {
            while at + 1 < bytes.len() {
                if bytes[at] == 0 {
                    if bytes[at + 1] == 0 {
                        return at + 2;
                    }
                    at += 2;
                } else {
                    at += 1;
                }
            }
            bytes.len()
        }
    }
}

/// Describes how an index encodes its columns.
#[derive(Debug, Clone)]
pub(crate) struct KeySpec {
    pub(crate) columns: Vec<usize>,
    pub(crate) types: Vec<DataType>,
    pub(crate) tagged: Vec<bool>,
}

impl KeySpec {
    pub(crate) fn new(columns: &[usize], layout: &RowLayout, nullable: &[bool], force_untagged: bool) -> KeySpec {
        KeySpec {
            columns: columns.to_vec(),
            types: columns.iter().map(|&c| layout.column_type(c)).collect(),
            tagged: columns.iter().map(|&c| !force_untagged && nullable[c]).collect(),
        }
    }

    /// Appends the key of a stored row.
    pub(crate) fn encode_row(&self, layout: &RowLayout, row: &[u8], out: &mut Vec<u8>) {
        for (i, &col) in self.columns.iter().enumerate() {
            encode_column(out, layout.get(row, col), self.types[i], self.tagged[i]);
        }
    }

    /// True if the row's key contains a NULL (such keys never conflict).
    pub(crate) fn row_has_null(&self, layout: &RowLayout, row: &[u8]) -> bool {
        self.columns.iter().any(|&c| layout.is_null(row, c))
    }

    /// Appends the encoding of caller-supplied values for the leading
    /// `values.len()` key columns, converting them to the column types the
    /// way a comparison would. Returns false when no stored key can equal
    /// these values (e.g. 70000 looked up in a smallint column, or a string
    /// longer than varchar(n)), so the caller can answer "not found".
    pub(crate) fn encode_values(&self, values: &[Value], out: &mut Vec<u8>) -> bool {
        assert!(values.len() <= self.columns.len(), "more key values than key columns");
        for (i, value) in values.iter().enumerate() {
            if !encode_lookup(out, value, self.types[i], self.tagged[i]) {
                return false;
            }
        }
        true
    }

    /// Byte length of the leading `n` columns of an encoded key.
    pub(crate) fn prefix_len(&self, key: &[u8], n: usize) -> usize {
        let mut at = 0;
        for i in 0..n.min(self.types.len()) {
            at += column_len(&key[at..], self.types[i], self.tagged[i]);
        }
        at
    }
}

fn encode_lookup(out: &mut Vec<u8>, value: &Value, ty: DataType, tagged: bool) -> bool {
    let int = value.as_i64();
    let converted: ValueRef<'_> = match (ty, value) {
        (_, Value::Null) => {
            if !tagged {
                return false;
            }
            ValueRef::Null
        }
        (DataType::Int2, _) if int.is_some() => match int.and_then(|v| i16::try_from(v).ok()) {
            Some(v) => ValueRef::Int2(v),
            None => return false,
        },
        (DataType::Int4, _) if int.is_some() => match int.and_then(|v| i32::try_from(v).ok()) {
            Some(v) => ValueRef::Int4(v),
            None => return false,
        },
        (DataType::Int8, _) if int.is_some() => ValueRef::Int8(int.unwrap_or_default()),
        // Unconstrained numeric holds any value's scale: every probe is exact.
        (DataType::Numeric { .. }, Value::Numeric(n)) if ty.numeric_own_scale() => ValueRef::Numeric(*n),
        (DataType::Numeric { .. }, Value::NumericBig(b)) if ty.numeric_own_scale() => ValueRef::NumericBig(b.as_ref()),
        (DataType::Numeric { scale, .. }, Value::NumericBig(b)) => match b.as_ref().kind() {
            NumericKind::NaN => ValueRef::NumericBig(b.as_ref()),
            _ => match b.as_ref().exact_small(u8::try_from(scale).unwrap_or(0)) {
                Some(r) => ValueRef::Numeric(r),
                None => return false,
            },
        },
        (DataType::Numeric { .. }, _) if int.is_some() && ty.numeric_own_scale() => {
            ValueRef::Numeric(crate::types::Numeric::new(i128::from(int.unwrap_or_default()), 0))
        }
        (DataType::Numeric { scale, .. }, Value::Numeric(n)) => match n.rescale(u8::try_from(scale).unwrap_or(0)) {
            Some(r) if r.rescale(n.scale) == Some(*n) => ValueRef::Numeric(r),
            _ => return false,
        },
        (DataType::Numeric { scale, .. }, _) if int.is_some() => {
            match crate::types::Numeric::new(i128::from(int.unwrap_or_default()), 0)
                .rescale(u8::try_from(scale).unwrap_or(0))
            {
                Some(r) => ValueRef::Numeric(r),
                None => return false,
            }
        }
        (DataType::Float4, Value::Float4(v)) => ValueRef::Float4(*v),
        (DataType::Float8, Value::Float8(v)) => ValueRef::Float8(*v),
        #[allow(clippy::cast_possible_truncation)]
        (DataType::Float4, Value::Float8(v)) => ValueRef::Float4(*v as f32),
        (DataType::Float8, Value::Float4(v)) => ValueRef::Float8(f64::from(*v)),
        (DataType::Char(n), Value::Text(s)) => {
            // char(n) is stored blank-padded: pad the probe the same way.
            let chars = s.chars().count();
            let limit = n as usize;
            let trimmed = s.trim_end_matches(' ');
            if trimmed.chars().count() > limit {
                return false;
            }
            if tagged {
                out.push(TAG_VALUE);
            }
            let pad = limit.saturating_sub(chars.min(limit));
            let body =
                if chars > limit { &s[..s.char_indices().nth(limit).map_or(s.len(), |(i, _)| i)] } else { s.as_str() };
            for &b in body.as_bytes() {
                out.push(b);
                if b == 0 {
                    out.push(0xFF);
                }
            }
            out.extend(std::iter::repeat_n(b' ', pad));
            out.extend_from_slice(&[0, 0]);
            return true;
        }
        (DataType::Text | DataType::Varchar(_), Value::Text(s)) => ValueRef::Text(s),
        (DataType::Bytea, Value::Bytea(b)) => ValueRef::Bytea(b),
        (DataType::Bool, Value::Bool(b)) => ValueRef::Bool(*b),
        (DataType::Date, Value::Date(d)) => ValueRef::Date(*d),
        (DataType::Timestamp(_), Value::Timestamp(t)) => ValueRef::Timestamp(*t),
        (DataType::TimestampTz(_), Value::TimestampTz(t)) => ValueRef::TimestampTz(*t),
        (DataType::Time(_), Value::Time(t)) => ValueRef::Time(*t),
        (DataType::TimeTz(_), Value::TimeTz(t, z)) => ValueRef::TimeTz(*t, *z),
        (DataType::Uuid, Value::Uuid(u)) => ValueRef::Uuid(*u),
        (DataType::Interval, Value::Interval(v)) => ValueRef::Interval(*v),
        (DataType::Jsonb, Value::Jsonb(s)) => ValueRef::Jsonb(s),
        (DataType::Array(e), Value::Array(items)) => {
            if tagged {
                out.push(TAG_VALUE);
            }
            for v in items {
                let t = if matches!(v, Value::Array(_)) { ty } else { e.get() };
                if !encode_lookup(out, v, t, true) {
                    return false;
                }
            }
            out.push(ARRAY_END);
            return true;
        }
        _ => return false,
    };
    encode_column(out, converted, ty, tagged);
    true
}

/// 64-bit hash of an encoded key (folded multiply; not DoS resistant, the
/// engine's keys come from trusted applications).
#[inline]
pub(crate) fn hash_key(bytes: &[u8]) -> u64 {
    const K0: u64 = 0x9E37_79B9_7F4A_7C15;
    const K1: u64 = 0xC2B2_AE3D_27D4_EB4F;
    let fold = |a: u64, b: u64| {
        let p = u128::from(a) * u128::from(b);
        (p as u64) ^ ((p >> 64) as u64)
    };
    let mut h = K0 ^ (bytes.len() as u64).wrapping_mul(K1);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        h = fold(h ^ u64::from_le_bytes(w), K1);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut w = [0u8; 8];
        w[..tail.len()].copy_from_slice(tail);
        h = fold(h ^ u64::from_le_bytes(w), K0);
    }
    fold(h, K1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(v: &Value, ty: DataType, tagged: bool) -> Vec<u8> {
        let mut out = Vec::new();
        encode_column(&mut out, v.as_ref(), ty, tagged);
        out
    }

    #[test]
    fn numeric_keys_order_wide_values_and_specials() {
        use crate::numeric_big::NumericBig;
        let unconstrained = DataType::Numeric { precision: 0, scale: 0 };
        let wide = |neg: bool, d: &str, s: u16| match NumericBig::finite(neg, d, s) {
            Some(Ok(n)) => Value::Numeric(n),
            Some(Err(b)) => Value::NumericBig(b),
            None => panic!("out of range"),
        };
        let ordered = [
            Value::NumericBig(NumericBig::infinity(true)),
            wide(true, &"9".repeat(50), 0),
            Value::Numeric(crate::types::Numeric::new(-1, 0)),
            wide(true, "1", 300),
            Value::Numeric(crate::types::Numeric::new(0, 2)),
            wide(false, "1", 300),
            Value::Numeric(crate::types::Numeric::new(15, 1)),
            wide(false, &"1".repeat(45), 2),
            Value::NumericBig(NumericBig::infinity(false)),
            Value::NumericBig(NumericBig::nan()),
        ];
        for tagged in [false, true] {
            let keys: Vec<Vec<u8>> = ordered.iter().map(|v| enc(v, unconstrained, tagged)).collect();
            for (k, w) in keys.windows(2).enumerate() {
                assert!(w[0] < w[1], "{} < {}", ordered[k], ordered[k + 1]);
            }
            for k in &keys {
                assert_eq!(column_len(k, unconstrained, tagged), k.len());
            }
        }
        // Exponents past i16 (an escape, then a u32) order with the rest.
        for tagged in [false, true] {
            for sign in [false, true] {
                let huge = [32_765usize, 32_766, 32_767, 32_768, 65_536, 131_072]
                    .map(|n| wide(sign, &format!("1{}", "0".repeat(n - 1)), 0));
                let keys: Vec<Vec<u8>> = huge.iter().map(|v| enc(v, unconstrained, tagged)).collect();
                for w in keys.windows(2) {
                    assert_eq!(w[0] < w[1], !sign);
                }
                for k in &keys {
                    assert_eq!(column_len(k, unconstrained, tagged), k.len());
                }
            }
        }
        // 1.5 stored at any scale shares a key.
        assert_eq!(
            enc(&wide(false, &format!("15{}", "0".repeat(299)), 300), unconstrained, false),
            enc(&Value::Numeric(crate::types::Numeric::new(15, 1)), unconstrained, false)
        );
        let constrained = DataType::Numeric { precision: 38, scale: 0 };
        let max = Value::Numeric(crate::types::Numeric::new(10i128.pow(38) - 1, 0));
        assert!(enc(&max, constrained, false) < enc(&Value::NumericBig(NumericBig::nan()), constrained, false));
    }

    proptest! {
        #[test]
        fn int_order_preserved(a: i64, b: i64) {
            let (ka, kb) = (enc(&Value::Int8(a), DataType::Int8, false), enc(&Value::Int8(b), DataType::Int8, false));
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn array_order_is_array_cmp(a: Vec<Option<i32>>, b: Vec<Option<i32>>, s in "[a\\x00b]{0,3}") {
            // array_cmp: element by element, NULL after any value, then the shorter first.
            let cmp_key = |x: &Vec<Option<i32>>| x.iter().map(|e| e.map_or((1, 0), |v| (0, v))).collect::<Vec<_>>();
            let arr = |x: &Vec<Option<i32>>| Value::Array(x.iter().map(|e| e.map_or(Value::Null, Value::Int4)).collect());
            let ty = DataType::Array(crate::types::ElemType::of(DataType::Int4).unwrap());
            let (ka, kb) = (enc(&arr(&a), ty, false), enc(&arr(&b), ty, false));
            prop_assert_eq!(cmp_key(&a).cmp(&cmp_key(&b)), ka.cmp(&kb));
            prop_assert_eq!(column_len(&ka, ty, false), ka.len());
            let texts = DataType::Array(crate::types::ElemType::of(DataType::Text).unwrap());
            let kt = enc(&Value::Array(vec![Value::Text(s.clone()), Value::Null, Value::Text(s)]), texts, true);
            prop_assert_eq!(column_len(&kt, texts, true), kt.len());
        }

        #[test]
        fn text_order_preserved(a: Vec<u8>, b: Vec<u8>) {
            let (ka, kb) = (enc(&Value::Bytea(a.clone()), DataType::Bytea, false), enc(&Value::Bytea(b.clone()), DataType::Bytea, false));
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
            prop_assert_eq!(column_len(&ka, DataType::Bytea, false), ka.len());
        }

        #[test]
        fn float_order_preserved(a in -1e30f64..1e30, b in -1e30f64..1e30) {
            let (ka, kb) = (enc(&Value::Float8(a), DataType::Float8, false), enc(&Value::Float8(b), DataType::Float8, false));
            prop_assert_eq!(a.partial_cmp(&b), Some(ka.cmp(&kb)));
        }

        #[test]
        fn uuid_order_is_memcmp(a: [u8; 16], b: [u8; 16]) {
            let (ka, kb) = (enc(&Value::Uuid(a), DataType::Uuid, true), enc(&Value::Uuid(b), DataType::Uuid, true));
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
            prop_assert_eq!(column_len(&ka, DataType::Uuid, true), ka.len());
        }

        #[test]
        fn jsonb_key_order_is_jsonb_cmp(a in json_value(), b in json_value(), x: i32) {
            use crate::json::Json;
            let canon = |j: &Json| j.clone().into_jsonb().to_jsonb_text();
            let (ta, tb) = (canon(&a), canon(&b));
            let key = |t: &str| enc(&Value::Jsonb(t.to_owned()), DataType::Jsonb, true);
            let (ka, kb) = (key(&ta), key(&tb));
            prop_assert_eq!(reference_cmp(&a.clone().into_jsonb(), &b.clone().into_jsonb(), true), ka.cmp(&kb), "{} vs {}", ta, tb);
            prop_assert_eq!(column_len(&ka, DataType::Jsonb, true), ka.len());
            // Self-delimiting inside a composite key.
            let mut both = ka.clone();
            encode_column(&mut both, ValueRef::Int4(x), DataType::Int4, false);
            prop_assert_eq!(column_len(&both, DataType::Jsonb, true), ka.len());
        }

        #[test]
        fn interval_order_is_span_order(a: (i32, i32, i64), b: (i32, i32, i64)) {
            let iv = |(months, days, micros): (i32, i32, i64)| crate::types::Interval { months, days, micros };
            let (x, y) = (iv(a), iv(b));
            let (kx, ky) = (enc(&Value::Interval(x), DataType::Interval, false), enc(&Value::Interval(y), DataType::Interval, false));
            prop_assert_eq!(x.span().cmp(&y.span()), kx.cmp(&ky));
        }

        #[test]
        fn composite_prefix_is_prefix(a: i32, s: String, b: i16) {
            let spec_types = [DataType::Int4, DataType::Text, DataType::Int2];
            let mut full = Vec::new();
            encode_column(&mut full, ValueRef::Int4(a), spec_types[0], false);
            let one = full.len();
            encode_column(&mut full, ValueRef::Text(&s), spec_types[1], false);
            let two = full.len();
            encode_column(&mut full, ValueRef::Int2(b), spec_types[2], false);
            prop_assert_eq!(column_len(&full, spec_types[0], false), one);
            prop_assert_eq!(one + column_len(&full[one..], spec_types[1], false), two);
        }
    }

    #[test]
    fn nulls_sort_last_and_nan_last() {
        let null = enc(&Value::Null, DataType::Int4, true);
        let big = enc(&Value::Int4(i32::MAX), DataType::Int4, true);
        assert!(null > big);
        let nan = enc(&Value::Float8(f64::NAN), DataType::Float8, false);
        let inf = enc(&Value::Float8(f64::INFINITY), DataType::Float8, false);
        assert!(nan > inf);
        assert_eq!(
            enc(&Value::Float8(-0.0), DataType::Float8, false),
            enc(&Value::Float8(0.0), DataType::Float8, false)
        );
    }

    #[test]
    fn char_lookup_pads() {
        let mut probe = Vec::new();
        assert!(encode_lookup(&mut probe, &Value::Text("ab".into()), DataType::Char(4), false));
        assert_eq!(probe, enc(&Value::Text("ab  ".into()), DataType::Char(4), false));
        let mut probe = Vec::new();
        assert!(!encode_lookup(&mut probe, &Value::Int8(70_000), DataType::Int2, false));
    }

    /// Small JSON values whose numbers come in several spellings of equal values.
    fn json_value() -> impl Strategy<Value = crate::json::Json> {
        use crate::json::Json;
        let number = (-30i64..30, 0u32..3, 0u32..2).prop_map(|(m, scale, pad)| {
            let text = if scale == 0 {
                m.to_string()
            } else {
                format!(
                    "{}{}.{:0>w$}",
                    if m < 0 { "-" } else { "" },
                    m.abs() / 10i64.pow(scale),
                    m.abs() % 10i64.pow(scale),
                    w = scale as usize
                )
            };
            let text = if pad == 1 && scale > 0 { format!("{text}0") } else { text };
            Json::Number(crate::json::numeric_text(&text).unwrap())
        });
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            number,
            "[ab]{0,3}".prop_map(Json::String),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Json::Array),
                prop::collection::vec(("[ab]{0,2}", inner), 0..3).prop_map(Json::Object),
            ]
        })
    }

    /// PostgreSQL's compareJsonbContainers, written directly on trees.
    fn reference_cmp(a: &crate::json::Json, b: &crate::json::Json, top: bool) -> std::cmp::Ordering {
        use crate::json::Json;
        use std::cmp::Ordering;
        let rank = |j: &Json| match j {
            Json::Null => 0,
            Json::String(_) => 1,
            Json::Number(_) => 2,
            Json::Bool(_) => 3,
            Json::Array(_) => 4,
            Json::Object(_) => 5,
        };
        let scalar = |j: &Json| !matches!(j, Json::Array(_) | Json::Object(_));
        if top && (scalar(a) || scalar(b)) {
            // A raw scalar is a one-element array marked raw.
            let wrap = |j: &Json| {
                if scalar(j) {
                    (vec![j.clone()], true)
                } else if let Json::Array(v) = j {
                    (v.clone(), false)
                } else {
                    (Vec::new(), false)
                }
            };
            if matches!(a, Json::Object(_)) || matches!(b, Json::Object(_)) {
                // Top level: a raw scalar is an array (rank 4).
                let top_rank = |j: &Json| if scalar(j) { 4 } else { rank(j) };
                return top_rank(a).cmp(&top_rank(b));
            }
            let ((va, ra), (vb, rb)) = (wrap(a), wrap(b));
            let mut res = if ra != rb { if ra { Ordering::Less } else { Ordering::Greater } } else { Ordering::Equal };
            if va.len() != vb.len() {
                res = va.len().cmp(&vb.len());
            }
            if res != Ordering::Equal {
                return res;
            }
            return va
                .iter()
                .zip(&vb)
                .map(|(x, y)| reference_cmp(x, y, false))
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal);
        }
        match (a, b) {
            (Json::Number(x), Json::Number(y)) => {
                x.parse::<f64>().unwrap().partial_cmp(&y.parse::<f64>().unwrap()).unwrap()
            }
            (Json::String(x), Json::String(y)) => x.as_bytes().cmp(y.as_bytes()),
            (Json::Bool(x), Json::Bool(y)) => x.cmp(y),
            (Json::Null, Json::Null) => Ordering::Equal,
            (Json::Array(x), Json::Array(y)) => x.len().cmp(&y.len()).then_with(|| {
                x.iter()
                    .zip(y)
                    .map(|(p, q)| reference_cmp(p, q, false))
                    .find(|o| *o != Ordering::Equal)
                    .unwrap_or(Ordering::Equal)
            }),
            (Json::Object(x), Json::Object(y)) => x.len().cmp(&y.len()).then_with(|| {
                x.iter()
                    .zip(y)
                    .map(|((kx, vx), (ky, vy))| {
                        kx.as_bytes().cmp(ky.as_bytes()).then_with(|| reference_cmp(vx, vy, false))
                    })
                    .find(|o| *o != Ordering::Equal)
                    .unwrap_or(Ordering::Equal)
            }),
            _ => rank(a).cmp(&rank(b)),
        }
    }
}
