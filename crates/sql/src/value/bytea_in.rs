//! byteain's hex format as encode.c's hex_decode reads it: white space
//! between byte pairs is skipped, and a bad digit or an odd count is 22023
//! naming it (not 22P02).

use crate::error::{Result, SqlError};

/// The bytes of the text after `\x`.
pub(super) fn hex(digits: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(digits.len() / 2);
    let mut chars = digits.chars();
    while let Some(c) = chars.next() {
        if matches!(c, ' ' | '\n' | '\t' | '\r') {
            continue;
        }
        let high = digit(c)?;
        let low =
            chars.next().ok_or_else(|| SqlError::new("22023", "invalid hexadecimal data: odd number of digits"))?;
        out.push(high << 4 | digit(low)?);
    }
    Ok(out)
}

fn digit(c: char) -> Result<u8> {
    c.to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
        .ok_or_else(|| SqlError::new("22023", format!("invalid hexadecimal digit: \"{c}\"")))
}

/// byteain's escape format: a byte per character, `\\\\` for a backslash,
/// `\\ooo` (octal, first digit 0-3) for any byte; another backslash is
/// invalid.
pub(super) fn escape(text: &str) -> Option<Vec<u8>> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
        } else if b.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            let octal = b.get(i + 1..i + 4)?;
            if !(b'0'..=b'3').contains(&octal[0]) || !octal[1..].iter().all(|d| (b'0'..=b'7').contains(d)) {
                return None;
            }
            out.push(octal.iter().fold(0u8, |acc, d| (acc << 3) | (d - b'0')));
            i += 4;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::hex;

    #[test]
    fn reads_as_hex_decode() {
        assert_eq!(hex("DeAdBeEf").unwrap(), vec![0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(hex(" De Ad\tBe Ef \n").unwrap(), vec![0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(hex("").unwrap(), Vec::<u8>::new());
        let e = hex("DeAdBeE").unwrap_err();
        assert_eq!((e.sqlstate, e.message.as_str()), ("22023", "invalid hexadecimal data: odd number of digits"));
        let e = hex("DeAdBeEx").unwrap_err();
        assert_eq!((e.sqlstate, e.message.as_str()), ("22023", "invalid hexadecimal digit: \"x\""));
        // A space inside a pair is a bad digit, as in PostgreSQL.
        assert_eq!(hex("D e").unwrap_err().message, "invalid hexadecimal digit: \" \"");
    }
}
