//! The stored form of an array value (a var column of a row, a default in
//! the catalog): self-describing, so reading it needs no element type.
//!
//! ```text
//! [count u32 LE][count x element in row::encode_value's tagged form]
//! ```
//! A NULL element is its tag (0) alone. A multidimensional array is an
//! array of its rows (each element an array of the same shape); every
//! lower bound is 1 (the SQL layer refuses the others with 0A000).

use crate::codec::{Reader, Writer};
use crate::error::{EngineError, Result};
use crate::row::{decode_value, encode_value};
use crate::types::Value;

/// Appends the stored form of `items` to `out`.
pub(crate) fn encode(items: &[Value], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.u32(u32::try_from(items.len()).unwrap_or(u32::MAX));
    for v in items {
        encode_value(&mut w, v);
    }
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<Value>> {
    let mut r = Reader::new(bytes);
    let n = r.u32()? as usize;
    // Each element takes at least its tag byte: a bound before allocating.
    if n > bytes.len() {
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
        assert_eq!(decode(&out).unwrap(), items);
        let mut empty = Vec::new();
        encode(&[], &mut empty);
        assert_eq!(decode(&empty).unwrap(), Vec::<Value>::new());
        assert!(decode(&out[..out.len() - 1]).is_err());
        assert!(decode(&[255, 255, 255, 255]).is_err());
    }
}
