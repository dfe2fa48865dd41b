//! `uuid`: PostgreSQL's text input (uuid_in) and gen_random_uuid().
//! The value is its 16 bytes ([`pgtier_engine::Value::Uuid`]); output and
//! ordering (memcmp) live with the engine's value.

use crate::error::{Result, SqlError};

/// uuid_in: 32 hex digits of either case, optionally in braces, with an
/// optional hyphen after any group of four digits (not after the last).
/// No surrounding blanks, as in PostgreSQL (string_to_uuid).
pub fn parse(text: &str) -> Result<[u8; 16]> {
    parse_bytes(text.as_bytes()).ok_or_else(|| SqlError::invalid_text("uuid", text))
}

fn parse_bytes(src: &[u8]) -> Option<[u8; 16]> {
    let (braces, mut rest) = match src.split_first() {
        Some((b'{', rest)) => (true, rest),
        _ => (false, src),
    };
    let mut out = [0u8; 16];
    for (i, slot) in out.iter_mut().enumerate() {
        let [hi, lo, tail @ ..] = rest else { return None };
        *slot = (hex(*hi)? << 4) | hex(*lo)?;
        rest = tail;
        if i % 2 == 1 && i < 15 && rest.first() == Some(&b'-') {
            rest = &rest[1..];
        }
    }
    if braces {
        rest = rest.strip_prefix(b"}")?;
    }
    rest.is_empty().then_some(out)
}

fn hex(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// gen_random_uuid(): a version 4 (random) uuid from the operating
/// system's generator, as PostgreSQL draws it from pg_strong_random.
pub fn random_v4() -> Result<[u8; 16]> {
    use rand::TryRngCore;
    let mut out = [0u8; 16];
    rand::rngs::OsRng
        .try_fill_bytes(&mut out)
        .map_err(|e| SqlError::new("XX000", format!("could not generate random values: {e}")))?;
    out[6] = (out[6] & 0x0f) | 0x40;
    out[8] = (out[8] & 0x3f) | 0x80;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANON: [u8; 16] =
        [0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11];

    #[test]
    fn accepts_postgres_input_forms() {
        for text in [
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
        ] {
            assert_eq!(parse(text).ok(), Some(CANON), "{text}");
        }
    }

    #[test]
    fn refuses_what_postgres_refuses() {
        for text in [
            "",
            " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 ",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
            "a0e-ebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
        ] {
            assert_eq!(parse(text).err().map(|e| e.sqlstate), Some("22P02"), "{text:?}");
        }
    }

    #[test]
    fn random_is_version_4() {
        let a = random_v4().unwrap();
        let b = random_v4().unwrap();
        assert_ne!(a, b);
        assert_eq!(a[6] >> 4, 4);
        assert_eq!(a[8] >> 6, 0b10);
    }
}
