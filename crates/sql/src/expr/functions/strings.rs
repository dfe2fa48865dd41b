//! String functions beyond the basic ones in the parent module: reverse,
//! chr, ascii and format().

use pgtier_engine::Value;

use crate::catalog::quote_ident;
use crate::error::{Result, SqlError};
use crate::value;

/// chr(n): the character with code point `n` (UTF-8), PostgreSQL's errors.
pub(super) fn chr(n: i64) -> Result<Value> {
    if n < 0 {
        return Err(SqlError::new("22023", "character number must be positive"));
    }
    if n == 0 {
        return Err(SqlError::new("54000", "null character not permitted"));
    }
    let code = u32::try_from(n).ok().filter(|&c| c <= 0x10_FFFF);
    let Some(code) = code else {
        return Err(SqlError::new("54000", format!("requested character too large for encoding: {n}")));
    };
    let c = char::from_u32(code)
        .ok_or_else(|| SqlError::new("54000", format!("requested character not valid for encoding: {n}")))?;
    Ok(Value::Text(c.to_string()))
}

/// ascii(s): the code point of the first character; 0 for ''.
pub(super) fn ascii(s: &str) -> Value {
    Value::Int4(s.chars().next().map_or(0, |c| i32::try_from(u32::from(c)).unwrap_or(0)))
}

/// quote_literal: a string constant, E'' when it holds a backslash.
pub(super) fn quote_literal(s: &str, out: &mut String) {
    if s.contains('\\') {
        out.push('E');
    }
    out.push('\'');
    for c in s.chars() {
        if c == '\'' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
}

fn format_error(msg: impl Into<String>) -> SqlError {
    SqlError::new("22023", msg)
}

/// format(template, args...) (`vals[0]` the template): %s, %I, %L, %%,
/// positions `%n$`, the `-` flag and a width; a width taken from an
/// argument (`*`) is 0A000.
pub(super) fn format(vals: &[Value]) -> Result<Value> {
    let Some(Value::Text(template)) = vals.first() else { return Ok(Value::Null) };
    let args = &vals[1..];
    let chars: Vec<char> = template.chars().collect();
    let mut out = String::with_capacity(template.len());
    let mut next_arg = 0usize;
    let mut i = 0;
    let unterminated =
        || format_error("unterminated format() type specifier").with_hint("For a single \"%\" use \"%%\".");
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(&first) = chars.get(i) else { return Err(unterminated()) };
        if first == '%' {
            out.push('%');
            i += 1;
            continue;
        }
        let digits = |i: &mut usize| -> Result<Option<usize>> {
            let start = *i;
            while chars.get(*i).is_some_and(char::is_ascii_digit) {
                *i += 1;
            }
            if *i == start {
                return Ok(None);
            }
            let text: String = chars[start..*i].iter().collect();
            text.parse::<usize>()
                .ok()
                .filter(|n| i32::try_from(*n).is_ok())
                .map(Some)
                .ok_or_else(|| SqlError::new("22003", "number is out of range"))
        };
        let mut position = None;
        let mut width = None;
        let mut left = false;
        match digits(&mut i)? {
            Some(n) if chars.get(i) == Some(&'$') => {
                if n == 0 {
                    return Err(format_error("format specifies argument 0, but arguments are numbered from 1"));
                }
                position = Some(n);
                i += 1;
            }
            Some(n) => width = Some(n),
            None => {}
        }
        if width.is_none() {
            while chars.get(i) == Some(&'-') {
                left = true;
                i += 1;
            }
            if chars.get(i) == Some(&'*') {
                return Err(SqlError::unsupported("format() width taken from an argument (*)"));
            }
            width = digits(&mut i)?;
        }
        let Some(&kind) = chars.get(i) else { return Err(unterminated()) };
        i += 1;
        if !matches!(kind, 's' | 'I' | 'L') {
            return Err(format_error(format!("unrecognized format() type specifier \"{kind}\""))
                .with_hint("For a single \"%\" use \"%%\"."));
        }
        let index = position.map_or(next_arg, |p| p - 1);
        let Some(arg) = args.get(index) else { return Err(format_error("too few arguments for format()")) };
        next_arg = index + 1;
        let mut piece = String::new();
        match (kind, arg) {
            ('I', Value::Null) => {
                return Err(SqlError::new("22004", "null values cannot be formatted as an SQL identifier"));
            }
            ('L', Value::Null) => piece.push_str("NULL"),
            (_, Value::Null) => {}
            ('s', v) => value::write_text(v, &mut piece),
            (k, v) => {
                let text = value::to_text(v);
                if k == 'I' { piece.push_str(&quote_ident(&text)) } else { quote_literal(&text, &mut piece) }
            }
        }
        let pad = width.unwrap_or(0).saturating_sub(piece.chars().count());
        if !left {
            out.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(&piece);
        if left {
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    Ok(Value::Text(out))
}
