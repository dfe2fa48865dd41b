//! The numeric values that do not fit [`crate::Numeric`]'s i128 mantissa
//! and u8 scale: wide finite values, NaN and the infinities.
//!
//! Every such value is one byte string, so a stored row lends it out
//! without decoding (`ValueRef::NumericBig` borrows the bytes):
//!
//! ```text
//! [kind u8][scale u16 LE][ASCII digits of |unscaled value|, no leading zero]
//! ```
//! kind: 0 positive, 1 negative, 2 NaN, 3 +Infinity, 4 -Infinity (the
//! specials carry scale 0 and no digits). The value is digits × 10^-scale.
//! A finite value that fits the small form is never encoded here
//! ([`NumericBig::finite`] refuses it), so each value has one form.

use std::cmp::Ordering;
use std::fmt;

use crate::types::Numeric;

const KIND_POS: u8 = 0;
const KIND_NEG: u8 = 1;
const KIND_NAN: u8 = 2;
const KIND_POS_INF: u8 = 3;
const KIND_NEG_INF: u8 = 4;

/// Largest display scale of a numeric value (PostgreSQL's NUMERIC_DSCALE_MAX).
pub const NUMERIC_DSCALE_MAX: u16 = 16383;
/// Most digits before the decimal point ((NUMERIC_WEIGHT_MAX + 1) *
/// DEC_DIGITS, PostgreSQL's).
pub const NUMERIC_WEIGHT_DIGITS_MAX: usize = 131_072;

/// What a numeric is, apart from its digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumericKind {
    Finite { negative: bool },
    NaN,
    PosInf,
    NegInf,
}

/// An owned wide or special numeric.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NumericBig(Vec<u8>);

/// A borrowed wide or special numeric (from a stored row or a [`NumericBig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NumericBigRef<'a>(&'a [u8]);

impl NumericBig {
    pub fn nan() -> NumericBig {
        NumericBig(vec![KIND_NAN, 0, 0])
    }

    pub fn infinity(negative: bool) -> NumericBig {
        NumericBig(vec![if negative { KIND_NEG_INF } else { KIND_POS_INF }, 0, 0])
    }

    /// `±digits × 10^-scale` (`digits` ASCII decimal). Leading zeros are
    /// dropped; the small form when the value fits it (so equal values
    /// have one encoding); None when beyond PostgreSQL's (or pgtier's
    /// key) limits.
    pub fn finite(negative: bool, digits: &str, scale: u16) -> Option<Result<Numeric, NumericBig>> {
        let digits = digits.trim_start_matches('0');
        if !digits.bytes().all(|b| b.is_ascii_digit()) || scale > NUMERIC_DSCALE_MAX {
            return None;
        }
        if digits.len().saturating_sub(usize::from(scale)) > NUMERIC_WEIGHT_DIGITS_MAX {
            return None;
        }
        if let Ok(small_scale) = u8::try_from(scale)
            && digits.len() <= 39
            && let Ok(m) = if digits.is_empty() { Ok(0) } else { digits.parse::<i128>() }
        {
            return Some(Ok(Numeric::new(if negative { -m } else { m }, small_scale)));
        }
        let mut out = Vec::with_capacity(3 + digits.len());
        out.push(if negative && !digits.is_empty() { KIND_NEG } else { KIND_POS });
        out.extend_from_slice(&scale.to_le_bytes());
        out.extend_from_slice(digits.as_bytes());
        Some(Err(NumericBig(out)))
    }

    /// Wraps bytes [`NumericBigRef::as_bytes`] produced (None if malformed).
    pub fn from_bytes(bytes: &[u8]) -> Option<NumericBig> {
        NumericBigRef::parse(bytes).map(|r| NumericBig(r.0.to_vec()))
    }

    pub fn as_ref(&self) -> NumericBigRef<'_> {
        NumericBigRef(&self.0)
    }
}

impl<'a> NumericBigRef<'a> {
    pub const NAN: NumericBigRef<'static> = NumericBigRef(&[KIND_NAN, 0, 0]);

    /// Checks bytes read from storage.
    pub fn parse(bytes: &'a [u8]) -> Option<NumericBigRef<'a>> {
        let (&kind, rest) = bytes.split_first()?;
        if rest.len() < 2 || kind > KIND_NEG_INF || !rest[2..].iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(NumericBigRef(bytes))
    }

    pub fn as_bytes(self) -> &'a [u8] {
        self.0
    }

    pub fn kind(self) -> NumericKind {
        match self.0.first() {
            Some(&KIND_NEG) => NumericKind::Finite { negative: true },
            Some(&KIND_NAN) => NumericKind::NaN,
            Some(&KIND_POS_INF) => NumericKind::PosInf,
            Some(&KIND_NEG_INF) => NumericKind::NegInf,
            _ => NumericKind::Finite { negative: false },
        }
    }

    /// Display scale (digits after the point) of a finite value.
    pub fn scale(self) -> u16 {
        u16::from_le_bytes([self.0.get(1).copied().unwrap_or(0), self.0.get(2).copied().unwrap_or(0)])
    }

    /// ASCII digits of the unscaled magnitude (empty for zero and specials).
    pub fn digits(self) -> &'a str {
        // Checked ASCII by `parse` / written from a `&str`.
        std::str::from_utf8(self.0.get(3..).unwrap_or_default()).unwrap_or("")
    }

    /// The same finite value at `scale` in the small form, if exactly so
    /// (only zeros dropped) and it fits.
    pub fn exact_small(self, scale: u8) -> Option<Numeric> {
        let NumericKind::Finite { negative } = self.kind() else { return None };
        let drop = usize::from(self.scale()).checked_sub(usize::from(scale))?;
        let digits = self.digits();
        let kept = digits.get(..digits.len().checked_sub(drop)?)?;
        if !digits[kept.len()..].bytes().all(|b| b == b'0') || kept.len() > 38 {
            return None;
        }
        let m: i128 = if kept.is_empty() { 0 } else { kept.parse().ok()? };
        Some(Numeric::new(if negative { -m } else { m }, scale))
    }

    pub fn to_owned_big(self) -> NumericBig {
        NumericBig(self.0.to_vec())
    }
}

/// A numeric of either form, for ordering and output.
#[derive(Clone, Copy, Debug)]
pub enum AnyNumeric<'a> {
    Small(Numeric),
    Big(NumericBigRef<'a>),
}

impl AnyNumeric<'_> {
    /// Sign and magnitude digits (as text, maybe with leading zeros) and scale.
    fn parts(&self) -> (NumericKind, String, u32) {
        match self {
            AnyNumeric::Small(n) => (
                NumericKind::Finite { negative: n.mantissa < 0 },
                n.mantissa.unsigned_abs().to_string(),
                u32::from(n.scale),
            ),
            AnyNumeric::Big(b) => (b.kind(), b.digits().to_owned(), u32::from(b.scale())),
        }
    }

    /// PostgreSQL's order: -Infinity < finite < +Infinity < NaN; NaN = NaN.
    pub fn total_cmp(&self, other: &AnyNumeric<'_>) -> Ordering {
        let (ka, da, sa) = self.parts();
        let (kb, db, sb) = other.parts();
        let rank = |k: NumericKind| match k {
            NumericKind::NegInf => 0,
            NumericKind::Finite { .. } => 1,
            NumericKind::PosInf => 2,
            NumericKind::NaN => 3,
        };
        match rank(ka).cmp(&rank(kb)) {
            Ordering::Equal if rank(ka) == 1 => {}
            other => return other,
        }
        let (NumericKind::Finite { negative: na }, NumericKind::Finite { negative: nb }) = (ka, kb) else {
            return Ordering::Equal;
        };
        let za = da.bytes().all(|b| b == b'0');
        let zb = db.bytes().all(|b| b == b'0');
        let sign = |neg: bool, zero: bool| {
            if zero {
                0
            } else if neg {
                -1
            } else {
                1
            }
        };
        let (ga, gb) = (sign(na, za), sign(nb, zb));
        if ga != gb || ga == 0 {
            return ga.cmp(&gb);
        }
        let magnitude = compare_magnitude(&da, sa, &db, sb);
        if ga < 0 { magnitude.reverse() } else { magnitude }
    }
}

/// Compares `a × 10^-sa` with `b × 10^-sb` (non-negative digit strings).
fn compare_magnitude(a: &str, sa: u32, b: &str, sb: u32) -> Ordering {
    let (a, b) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
    let int_len = |d: &str, s: u32| i64::try_from(d.len()).unwrap_or(i64::MAX) - i64::from(s);
    match int_len(a, sa).cmp(&int_len(b, sb)) {
        Ordering::Equal => {}
        other => return other,
    }
    // Same exponent: compare digit strings, the shorter padded with zeros.
    let (a, b) = (a.trim_end_matches('0'), b.trim_end_matches('0'));
    a.cmp(b)
}

impl fmt::Display for NumericBigRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let negative = match self.kind() {
            NumericKind::NaN => return f.write_str("NaN"),
            NumericKind::PosInf => return f.write_str("Infinity"),
            NumericKind::NegInf => return f.write_str("-Infinity"),
            NumericKind::Finite { negative } => negative,
        };
        write_decimal(f, negative, self.digits(), usize::from(self.scale()))
    }
}

impl fmt::Display for NumericBig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

/// `±digits × 10^-scale` in PostgreSQL's numeric_out form.
pub(crate) fn write_decimal(f: &mut fmt::Formatter<'_>, negative: bool, digits: &str, scale: usize) -> fmt::Result {
    let sign = if negative && digits.bytes().any(|b| b != b'0') { "-" } else { "" };
    if scale == 0 {
        return write!(f, "{sign}{}", if digits.is_empty() { "0" } else { digits });
    }
    if digits.len() <= scale {
        return write!(f, "{sign}0.{}{digits}", "0".repeat(scale - digits.len()));
    }
    let (int_part, frac_part) = digits.split_at(digits.len() - scale);
    write!(f, "{sign}{int_part}.{frac_part}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big(neg: bool, digits: &str, scale: u16) -> NumericBig {
        match NumericBig::finite(neg, digits, scale) {
            Some(Err(b)) => b,
            other => panic!("not big: {other:?}"),
        }
    }

    #[test]
    fn small_values_keep_the_small_form() {
        assert_eq!(NumericBig::finite(true, "00125", 2), Some(Ok(Numeric::new(-125, 2))));
        assert!(matches!(NumericBig::finite(false, &"9".repeat(40), 0), Some(Err(_))));
        assert!(matches!(NumericBig::finite(false, "1", 300), Some(Err(_))));
        assert_eq!(NumericBig::finite(false, "1", NUMERIC_DSCALE_MAX + 1), None);
    }

    #[test]
    fn display_and_order() {
        let b = big(true, &format!("1{}", "0".repeat(45)), 5);
        assert_eq!(b.to_string(), format!("-1{}.00000", "0".repeat(40)));
        assert_eq!(NumericBig::nan().to_string(), "NaN");
        let (neg_inf, tiny) = (NumericBig::infinity(true), big(false, "1", 300));
        let values = [
            AnyNumeric::Big(neg_inf.as_ref()),
            AnyNumeric::Big(b.as_ref()),
            AnyNumeric::Small(Numeric::new(-5, 0)),
            AnyNumeric::Small(Numeric::new(0, 3)),
            AnyNumeric::Big(tiny.as_ref()),
            AnyNumeric::Small(Numeric::new(15, 1)),
        ];
        for w in values.windows(2) {
            assert_eq!(w[0].total_cmp(&w[1]), Ordering::Less, "{w:?}");
        }
        let inf = NumericBig::infinity(false);
        let nan = NumericBig::nan();
        assert_eq!(AnyNumeric::Big(inf.as_ref()).total_cmp(&AnyNumeric::Big(nan.as_ref())), Ordering::Less);
        assert_eq!(AnyNumeric::Big(nan.as_ref()).total_cmp(&AnyNumeric::Big(nan.as_ref())), Ordering::Equal);
        assert_eq!(
            AnyNumeric::Small(Numeric::new(15, 1)).total_cmp(&AnyNumeric::Small(Numeric::new(150, 2))),
            Ordering::Equal
        );
    }
}
