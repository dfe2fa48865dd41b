//! The stored form of an array value (a var column of a row, a default in
//! the catalog): self-describing, so reading it needs no element type.
//!
//! ```text
//! [count u32 LE][count x element in row::encode_value's tagged form]
//! ```
//! A NULL element is its tag (0) alone. A multidimensional array is an
//! array of its rows (each element an array of the same shape). An array
//! with a lower bound other than 1 (`Value::BoundedArray`) sets the count's
//! top bit and puts its lower bounds after it:
//!
//! ```text
//! [count | 1<<31 u32 LE][ndims u8][ndims x lower bound i32 LE][elements]
//! ```
//! A count never reaches 1<<31, so arrays stored before bounds existed
//! read back unchanged.

use crate::codec::{Reader, Writer};
use crate::error::{EngineError, Result};
use crate::row::{decode_value, encode_value};
use crate::types::{BoundedArray, Value};

const BOUNDED: u32 = 1 << 31;

/// Appends the stored form of `items` to `out`.
pub(crate) fn encode(items: &[Value], out: &mut Vec<u8>) {
    encode_with(&[], items, out);
}

/// Appends the stored form of an array with lower bounds `lower` (none:
/// all 1) to `out`.
pub(crate) fn encode_with(lower: &[i32], items: &[Value], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    let n = u32::try_from(items.len()).unwrap_or(u32::MAX) & !BOUNDED;
    if lower.is_empty() {
        w.u32(n);
    } else {
        w.u32(n | BOUNDED);
        w.u8(u8::try_from(lower.len()).unwrap_or(u8::MAX));
        for lb in lower {
            w.u32(lb.cast_unsigned());
        }
    }
    for v in items {
        encode_value(&mut w, v);
    }
}

/// Appends the stored form of an array value (`Value::Array` or
/// `Value::BoundedArray`; nothing for others).
pub(crate) fn encode_any(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Array(items) => encode(items, out),
        Value::BoundedArray(b) => encode_with(&b.lower, &b.items, out),
        _ => {}
    }
}

/// The value of a stored array: `Value::Array`, or `Value::BoundedArray`
/// when it has lower bounds.
pub(crate) fn decode(bytes: &[u8]) -> Result<Value> {
    let mut r = Reader::new(bytes);
    let head = r.u32()?;
    let mut lower = Vec::new();
    if head & BOUNDED != 0 {
        let nd = r.u8()?;
        for _ in 0..nd {
            lower.push(r.u32()?.cast_signed());
        }
    }
    let items = decode_items(r, (head & !BOUNDED) as usize, bytes.len())?;
    Ok(if lower.is_empty() {
        Value::Array(items)
    } else {
        Value::BoundedArray(Box::new(BoundedArray { lower, items }))
    })
}

fn decode_items(mut r: Reader<'_>, n: usize, len: usize) -> Result<Vec<Value>> {
    let bytes_len = len;
    // Each element takes at least its tag byte: a bound before allocating.
    if n > bytes_len {
        return Err(EngineError::Corrupt("array element count".into()));
    }
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(decode_value(&mut r)?);
    }
    if !r.is_empty() {
        return Err(EngineError::Corrupt("bytes after an array's elements".into()));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_nulls() {
        let items = vec![Value::Int4(1), Value::Null, Value::Text("a b".into()), Value::Int4(-7)];
        let mut out = Vec::new();
        encode(&items, &mut out);
        assert_eq!(decode(&out).unwrap(), Value::Array(items.clone()));
        let mut empty = Vec::new();
        encode(&[], &mut empty);
        assert_eq!(decode(&empty).unwrap(), Value::Array(Vec::new()));
        let bounded = Value::BoundedArray(Box::new(BoundedArray { lower: vec![-3], items }));
        let mut b = Vec::new();
        encode_any(&bounded, &mut b);
        assert_eq!(decode(&b).unwrap(), bounded);
        assert!(decode(&out[..out.len() - 1]).is_err());
        assert!(decode(&[255, 255, 255, 255]).is_err());
    }
}
