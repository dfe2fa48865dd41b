//! bytea to text and back: `encode(bytea, format)` and
//! `decode(text, format)` for the formats `hex`, `base64` and `escape`,
//! byte for byte as PostgreSQL 15's encode.c (base64 lines of 76
//! characters, escape's `\ooo` for NUL and high-bit bytes), with its
//! errors (22023 for a bad format name, hex digit or base64 symbol;
//! 22P02 for a lone backslash in escape input). The SHA-2 digests of a
//! bytea (sha224 ... sha512, cryptohashfuncs.c).

use pgtier_engine::{DataType, Value};

use super::registry::{ArgBinder, Call, EvalCtx, EvalFn, FunctionDef, Ty, Volatility, text, text_fn};
use crate::error::{Result, SqlError};
use crate::expr::Expr;

pub(super) const DEFS: &[FunctionDef] = &[
    FunctionDef { names: &["encode"], volatility: Volatility::Immutable, resolve: resolve_encode },
    FunctionDef {
        names: &["decode"],
        volatility: Volatility::Immutable,
        resolve: |def, b, call| {
            text_fn(def, b, call, decode, (2, 2), &[DataType::Text, DataType::Text], DataType::Bytea)
        },
    },
    FunctionDef {
        names: &["sha224"],
        volatility: Volatility::Immutable,
        resolve: |def, b, call| resolve_digest(def, b, call, |v, _| Ok(digest::<sha2::Sha224>(v))),
    },
    FunctionDef {
        names: &["sha256"],
        volatility: Volatility::Immutable,
        resolve: |def, b, call| resolve_digest(def, b, call, |v, _| Ok(digest::<sha2::Sha256>(v))),
    },
    FunctionDef {
        names: &["sha384"],
        volatility: Volatility::Immutable,
        resolve: |def, b, call| resolve_digest(def, b, call, |v, _| Ok(digest::<sha2::Sha384>(v))),
    },
    FunctionDef {
        names: &["sha512"],
        volatility: Volatility::Immutable,
        resolve: |def, b, call| resolve_digest(def, b, call, |v, _| Ok(digest::<sha2::Sha512>(v))),
    },
];

/// A bytea argument: an unknown literal is read as bytea; a value of
/// another type has no implicit cast to bytea (42883, as PostgreSQL).
pub(super) fn bytea_arg(b: &mut dyn ArgBinder, (e, t): (Expr, Ty), name: &str, undefined: SqlError) -> Result<Expr> {
    match t {
        Some(DataType::Bytea) => Ok(e),
        None => b.coerce(e, None, DataType::Bytea, name),
        Some(_) => Err(undefined),
    }
}

/// sha224(bytea) ... sha512(bytea): bytea.
fn resolve_digest(
    def: &'static FunctionDef,
    b: &mut dyn ArgBinder,
    call: Call<'_>,
    eval: EvalFn,
) -> Result<(Expr, Ty)> {
    call.arity(1, 1)?;
    let (name, undefined) = (call.name, call.undefined());
    let data = bytea_arg(b, call.single()?, name, undefined)?;
    Ok((def.expr(eval, vec![data]), Some(DataType::Bytea)))
}

fn digest<D: sha2::Digest>(vals: &[Value]) -> Value {
    match vals.first() {
        Some(Value::Bytea(data)) => Value::Bytea(D::digest(data).to_vec()),
        _ => Value::Null,
    }
}

/// encode(bytea, text).
fn resolve_encode(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    call.arity(2, 2)?;
    let (name, undefined) = (call.name, call.undefined());
    let (data, (format, format_ty)) = call.pair()?;
    let data = bytea_arg(b, data, name, undefined.clone())?;
    let format = b.text_arg(format, format_ty, name).map_err(|_| undefined)?;
    Ok((def.expr(encode, vec![data, format]), Some(DataType::Text)))
}

#[derive(Clone, Copy)]
enum Format {
    Hex,
    Base64,
    Escape,
}

/// pg_find_encoding: the name, case-insensitively.
fn format(name: &str) -> Result<Format> {
    match name.to_ascii_lowercase().as_str() {
        "hex" => Ok(Format::Hex),
        "base64" => Ok(Format::Base64),
        "escape" => Ok(Format::Escape),
        _ => Err(SqlError::new("22023", format!("unrecognized encoding: \"{name}\""))),
    }
}

fn encode(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let data = match vals.first() {
        Some(Value::Bytea(b)) => b.as_slice(),
        _ => &[],
    };
    Ok(Value::Text(match format(text(vals, 1))? {
        Format::Hex => data.iter().map(|b| format!("{b:02x}")).collect(),
        Format::Base64 => base64_encode(data),
        Format::Escape => escape_encode(data),
    }))
}

fn decode(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let data = text(vals, 0);
    Ok(Value::Bytea(match format(text(vals, 1))? {
        Format::Hex => hex_decode(data)?,
        Format::Base64 => base64_decode(data)?,
        Format::Escape => escape_decode(data.as_bytes())?,
    }))
}

/// The character starting at byte `at` of `s` (PostgreSQL's `%.*s` with
/// pg_mblen: a whole multibyte character in the message).
fn char_at(s: &str, at: usize) -> &str {
    let len = s.get(at..).and_then(|r| r.chars().next()).map_or(1, char::len_utf8);
    s.get(at..at + len).unwrap_or("")
}

fn hex_decode(s: &str) -> Result<Vec<u8>> {
    let bytes = s.as_bytes();
    let digit = |at: usize| -> Result<u8> {
        let c = bytes[at];
        (c as char)
            .to_digit(16)
            .filter(|_| c.is_ascii())
            .and_then(|d| u8::try_from(d).ok())
            .ok_or_else(|| SqlError::new("22023", format!("invalid hexadecimal digit: \"{}\"", char_at(s, at))))
    };
    let mut out = Vec::with_capacity(bytes.len() / 2);
    let mut at = 0;
    while at < bytes.len() {
        if matches!(bytes[at], b' ' | b'\n' | b'\t' | b'\r') {
            at += 1;
            continue;
        }
        let high = digit(at)?;
        at += 1;
        if at >= bytes.len() {
            return Err(SqlError::new("22023", "invalid hexadecimal data: odd number of digits"));
        }
        let low = digit(at)?;
        at += 1;
        out.push(high << 4 | low);
    }
    Ok(out)
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// b64_encode: a newline after every 76 characters written (also after
/// the last group when it ends a line exactly and no byte remains: the
/// check follows each input byte).
fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() * 4 / 3 + data.len() / 57 + 4);
    let sym = |v: u32| char::from(BASE64[(v & 0x3f) as usize]);
    let (mut buf, mut pos, mut line) = (0u32, 2i32, 0usize);
    for &b in data {
        buf |= u32::from(b) << (pos * 8);
        pos -= 1;
        if pos < 0 {
            out.extend([sym(buf >> 18), sym(buf >> 12), sym(buf >> 6), sym(buf)]);
            line += 4;
            pos = 2;
            buf = 0;
        }
        if line >= 76 {
            out.push('\n');
            line = 0;
        }
    }
    if pos != 2 {
        out.extend([sym(buf >> 18), sym(buf >> 12)]);
        out.push(if pos == 0 { sym(buf >> 6) } else { '=' });
        out.push('=');
    }
    out
}

fn base64_decode(s: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut buf, mut pos, mut end) = (0u32, 0, 0);
    for (at, c) in s.bytes().enumerate() {
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            continue;
        }
        let b = if c == b'=' {
            if end == 0 {
                end = match pos {
                    2 => 1,
                    3 => 2,
                    _ => return Err(SqlError::new("22023", "unexpected \"=\" while decoding base64 sequence")),
                };
            }
            0
        } else {
            let found = BASE64.iter().position(|&x| x == c).and_then(|p| u32::try_from(p).ok());
            found.ok_or_else(|| {
                SqlError::new(
                    "22023",
                    format!("invalid symbol \"{}\" found while decoding base64 sequence", char_at(s, at)),
                )
            })?
        };
        buf = (buf << 6) + b;
        pos += 1;
        if pos == 4 {
            let [_, b0, b1, b2] = buf.to_be_bytes();
            out.push(b0);
            if end == 0 || end > 1 {
                out.push(b1);
            }
            if end == 0 || end > 2 {
                out.push(b2);
            }
            buf = 0;
            pos = 0;
        }
    }
    if pos != 0 {
        return Err(SqlError::new("22023", "invalid base64 end sequence")
            .with_hint("Input data is missing padding, is truncated, or is otherwise corrupted."));
    }
    Ok(out)
}

/// esc_encode: NUL and bytes with the high bit set as `\ooo`, a
/// backslash doubled, every other byte as itself.
fn escape_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len());
    for &c in data {
        if c == 0 || c >= 0x80 {
            out.extend([
                '\\',
                char::from(b'0' + (c >> 6)),
                char::from(b'0' + ((c >> 3) & 7)),
                char::from(b'0' + (c & 7)),
            ]);
        } else if c == b'\\' {
            out.push_str("\\\\");
        } else {
            out.push(char::from(c));
        }
    }
    out
}

/// esc_decode: `\\` and `\ooo` (first digit 0-3); any other backslash is
/// 22P02.
fn escape_decode(s: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut at = 0;
    let octal = |c: u8, hi: u8| (b'0'..=hi).contains(&c);
    while at < s.len() {
        if s[at] != b'\\' {
            out.push(s[at]);
            at += 1;
        } else if at + 3 < s.len() && octal(s[at + 1], b'3') && octal(s[at + 2], b'7') && octal(s[at + 3], b'7') {
            out.push((s[at + 1] - b'0') << 6 | (s[at + 2] - b'0') << 3 | (s[at + 3] - b'0'));
            at += 4;
        } else if at + 1 < s.len() && s[at + 1] == b'\\' {
            out.push(b'\\');
            at += 2;
        } else {
            return Err(SqlError::new("22P02", "invalid input syntax for type bytea"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_breaks_lines_as_postgres() {
        // 57 bytes are exactly 76 characters: PostgreSQL ends them with a newline.
        assert_eq!(base64_encode(&[0; 57]).len(), 77);
        assert!(base64_encode(&[0; 57]).ends_with('\n'));
        assert_eq!(base64_encode(&[0; 58]).lines().count(), 2);
        assert_eq!(base64_encode(b"ab"), "YWI=");
        assert_eq!(base64_decode("YWI=").ok(), Some(b"ab".to_vec()));
    }

    #[test]
    fn escape_round_trips() {
        let data: Vec<u8> = (0..=255).collect();
        assert_eq!(escape_decode(escape_encode(&data).as_bytes()).ok(), Some(data));
    }
}
