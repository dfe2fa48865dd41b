//! numeric's binary wire form (numeric_send / numeric_recv) for the values
//! beyond the i128 form: wide values, NaN (0xC000), +Infinity (0xD000)
//! and -Infinity (0xF000). types.rs keeps the i128 fast path.

use bytes::{BufMut, BytesMut};
use pgtier_engine::{NumericBig, NumericBigRef, NumericKind, Value};
use pgtier_sql::error::SqlError;

const NUMERIC_POS: u16 = 0x0000;
const NUMERIC_NEG: u16 = 0x4000;
const NUMERIC_NAN: u16 = 0xC000;
const NUMERIC_PINF: u16 = 0xD000;
const NUMERIC_NINF: u16 = 0xF000;

/// numeric_send of a wide or special value.
pub fn encode_big(b: NumericBigRef<'_>, out: &mut BytesMut) {
    let (sign, negative) = match b.kind() {
        NumericKind::NaN => (NUMERIC_NAN, false),
        NumericKind::PosInf => (NUMERIC_PINF, false),
        NumericKind::NegInf => (NUMERIC_NINF, false),
        NumericKind::Finite { negative } => (if negative { NUMERIC_NEG } else { NUMERIC_POS }, negative),
    };
    if !matches!(b.kind(), NumericKind::Finite { .. }) {
        out.put_i16(0);
        out.put_i16(0);
        out.put_u16(sign);
        out.put_u16(0);
        return;
    }
    let (groups, weight) = groups_of(b.digits(), usize::from(b.scale()));
    out.put_i16(i16::try_from(groups.len()).unwrap_or(i16::MAX));
    out.put_i16(i16::try_from(weight).unwrap_or(0));
    out.put_u16(if negative && !groups.is_empty() { NUMERIC_NEG } else { NUMERIC_POS });
    out.put_u16(b.scale());
    for g in groups {
        out.put_i16(g);
    }
}

/// Base-10000 digits (no leading or trailing zero groups) and the weight
/// of the first, of `digits × 10^-scale`.
fn groups_of(digits: &str, scale: usize) -> (Vec<i16>, i64) {
    let digits = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits.to_owned()
    };
    let (int_part, frac) = digits.split_at(digits.len() - scale);
    // Integer digits padded on the left, fraction on the right, to 4s.
    let int_pad = (4 - int_part.len() % 4) % 4;
    let frac_pad = (4 - frac.len() % 4) % 4;
    let all = format!("{}{int_part}{frac}{}", "0".repeat(int_pad), "0".repeat(frac_pad));
    let int_groups = i64::try_from((int_pad + int_part.len()) / 4).unwrap_or(0);
    let mut groups: Vec<i16> = all
        .as_bytes()
        .chunks(4)
        .map(|c| std::str::from_utf8(c).ok().and_then(|s| s.parse().ok()).unwrap_or(0))
        .collect();
    let mut weight = int_groups - 1;
    let lead = groups.iter().take_while(|&&g| g == 0).count();
    groups.drain(..lead);
    weight -= i64::try_from(lead).unwrap_or(0);
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    (groups, weight)
}

/// numeric_recv of any value (the caller tried the i128 form first).
pub fn decode_wide(bytes: &[u8], invalid: impl Fn() -> SqlError) -> Result<Value, SqlError> {
    let word = |i: usize| -> Result<u16, SqlError> {
        let b = bytes.get(2 * i..2 * i + 2).ok_or_else(&invalid)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    };
    let ndigits = usize::from(word(0)?);
    let weight = i64::from(word(1)?.cast_signed());
    let sign = word(2)?;
    let dscale = word(3)?;
    if bytes.len() != 8 + 2 * ndigits {
        return Err(invalid());
    }
    let negative = match sign {
        NUMERIC_NAN => return Ok(Value::NumericBig(NumericBig::nan())),
        NUMERIC_PINF => return Ok(Value::NumericBig(NumericBig::infinity(false))),
        NUMERIC_NINF => return Ok(Value::NumericBig(NumericBig::infinity(true))),
        NUMERIC_POS => false,
        NUMERIC_NEG => true,
        _ => return Err(invalid()),
    };
    let mut all = String::with_capacity(4 * ndigits);
    for i in 0..ndigits {
        let d = word(4 + i)?;
        if d >= 10_000 {
            return Err(invalid());
        }
        all.push_str(&format!("{d:04}"));
    }
    // The point sits after 4 * (weight + 1) digits of `all`.
    let point = 4 * (weight + 1);
    let all = if point < 0 { format!("{}{all}", "0".repeat(usize::try_from(-point).unwrap_or(0))) } else { all };
    let point = usize::try_from(point.max(0)).unwrap_or(0);
    let all = if all.len() < point { format!("{all:0<point$}") } else { all };
    let scale = usize::from(dscale);
    let (int_part, frac) = all.split_at(point);
    // Digits beyond dscale: PostgreSQL never sends them; dropped.
    let frac: String = frac.chars().chain(std::iter::repeat('0')).take(scale).collect();
    match NumericBig::finite(negative, &format!("{int_part}{frac}"), dscale) {
        Some(Ok(n)) => Ok(Value::Numeric(n)),
        Some(Err(b)) => Ok(Value::NumericBig(b)),
        None => Err(SqlError::new("22003", "value overflows numeric format")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) {
        let v = pgtier_sql::value::parse_input(text, pgtier_sql::value::NUMERIC_ANY).unwrap();
        let Value::NumericBig(b) = &v else { panic!("{text} is not wide") };
        let mut buf = BytesMut::new();
        encode_big(b.as_ref(), &mut buf);
        let back = decode_wide(&buf, || SqlError::new("22P03", "bad")).unwrap();
        assert_eq!(back, v, "{text}");
        assert_eq!(back.to_string(), text);
    }

    #[test]
    fn wide_and_special_values_round_trip() {
        for t in [
            "NaN",
            "Infinity",
            "-Infinity",
            "123456789012345678901234567890123456789012.5",
            "1000000000000000000000000000000000000000000000",
        ] {
            round_trip(t);
        }
        round_trip(&format!("-0.{}12300", "0".repeat(300)));
        round_trip(&format!("7{}.{}1", "0".repeat(50), "0".repeat(301)));
    }

    #[test]
    fn layout_matches_postgres() {
        // SELECT numeric_send('NaN') = 0000 0000 c000 0000
        let mut buf = BytesMut::new();
        encode_big(NumericBig::nan().as_ref(), &mut buf);
        assert_eq!(&buf[..], &[0, 0, 0, 0, 0xC0, 0, 0, 0]);
        // SELECT numeric_send(1e40) = 0001 000a 0000 0000 0001
        let (groups, weight) = groups_of(&format!("1{}", "0".repeat(40)), 0);
        assert_eq!((groups, weight), (vec![1], 10));
    }
}
