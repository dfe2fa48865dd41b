//! `[schema.]table` names as PostgreSQL reads them: unquoted identifiers are
//! folded to lower case (ASCII only, as in a UTF-8 database), quoted ones keep
//! their case and may contain anything (`""` is a quote), names longer than
//! 63 bytes are truncated, and the schema defaults to `public`.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::backend_error::BackendError;

/// PostgreSQL's NAMEDATALEN - 1.
const IDENTIFIER_BYTES_MAX: usize = 63;

/// A table name as stored in the catalog (already case-folded / unquoted).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct QualifiedName {
    pub schema: String,
    pub table: String,
}

impl QualifiedName {
    pub fn new(schema: impl Into<String>, table: impl Into<String>) -> QualifiedName {
        QualifiedName { schema: schema.into(), table: table.into() }
    }

    /// Parses `table`, `schema.table`, `"Mixed Case"."t"` as PostgreSQL would.
    pub fn parse(input: &str) -> Result<QualifiedName, BackendError> {
        let invalid = |reason: &str| BackendError::InvalidName { name: input.to_owned(), reason: reason.to_owned() };
        let mut parts = Vec::with_capacity(2);
        let mut rest = input.trim_start();
        loop {
            let (part, after) = parse_identifier(rest).map_err(&invalid)?;
            parts.push(part);
            rest = after.trim_start();
            match rest.strip_prefix('.') {
                Some(after_dot) => rest = after_dot.trim_start(),
                None if rest.is_empty() => break,
                None => return Err(invalid("unexpected text after the name")),
            }
        }
        let mut parts = parts.into_iter();
        match (parts.next(), parts.next(), parts.next()) {
            (Some(table), None, None) => Ok(QualifiedName::new("public", table)),
            (Some(schema), Some(table), None) => Ok(QualifiedName::new(schema, table)),
            _ => Err(invalid("expected [schema.]table (cross-database references are not supported)")),
        }
    }
}

/// `schema.table`, each part quoted only where PostgreSQL would need it.
impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_identifier(f, &self.schema)?;
        f.write_str(".")?;
        write_identifier(f, &self.table)
    }
}

fn write_identifier(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    let plain = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$');
    if plain {
        return f.write_str(name);
    }
    f.write_str(&crate::copy_out::quote_identifier(name))
}

/// One identifier at the start of `input` and the text after it.
fn parse_identifier(input: &str) -> Result<(String, &str), &'static str> {
    if let Some(quoted) = input.strip_prefix('"') {
        let mut name = String::new();
        let mut chars = quoted.char_indices();
        while let Some((index, character)) = chars.next() {
            if character != '"' {
                name.push(character);
                continue;
            }
            if quoted[index + 1..].starts_with('"') {
                name.push('"');
                chars.next();
                continue;
            }
            if name.is_empty() {
                return Err("zero-length delimited identifier");
            }
            return Ok((truncate(name), &quoted[index + 1..]));
        }
        return Err("unterminated quoted identifier");
    }
    let starts_well = input.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || !c.is_ascii());
    if !starts_well {
        return Err("expected an identifier");
    }
    let end = input
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$' || !c.is_ascii()))
        .unwrap_or(input.len());
    Ok((truncate(input[..end].to_ascii_lowercase()), &input[end..]))
}

fn truncate(mut name: String) -> String {
    if name.len() > IDENTIFIER_BYTES_MAX {
        let mut end = IDENTIFIER_BYTES_MAX;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    name
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(input: &str) -> (String, String) {
        let name = QualifiedName::parse(input).unwrap();
        (name.schema, name.table)
    }

    #[test]
    fn folds_and_quotes_like_postgres() {
        assert_eq!(parse("Subscriber"), ("public".into(), "subscriber".into()));
        assert_eq!(parse(" Bench . Sub_1 "), ("bench".into(), "sub_1".into()));
        assert_eq!(parse(r#""My Schema"."Tab""le""#), ("My Schema".into(), "Tab\"le".into()));
        assert_eq!(parse(r#"s."a.b""#), ("s".into(), "a.b".into()));
        assert_eq!(parse(&"x".repeat(70)).1.len(), 63);
        for bad in ["", "a.b.c", "\"\"", "\"open", "a b", "1abc", "a.", ".a"] {
            assert!(QualifiedName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn displays_with_quotes_only_when_needed() {
        assert_eq!(QualifiedName::new("public", "t").to_string(), "public.t");
        assert_eq!(QualifiedName::new("My S", "T\"x").to_string(), r#""My S"."T""x""#);
    }
}
