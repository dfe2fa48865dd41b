//! SQL errors: every error carries the SQLSTATE PostgreSQL would report and
//! a message (plus detail and hint where PostgreSQL gives them) phrased as
//! PostgreSQL phrases it, so a driver or ORM cannot tell the difference.

use pgtier_engine::EngineError;

pub type Result<T, E = SqlError> = std::result::Result<T, E>;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SqlError {
    /// Five-character SQLSTATE (`23505`, `0A000`, ...).
    pub sqlstate: &'static str,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
    /// Violated constraint, for the ErrorResponse `n` field.
    pub constraint: Option<String>,
    /// Where in the statement text the error is: line << 32 | column,
    /// 1-based, from the parser's spans (packed so errors stay small: every
    /// `Result` carries this type). [`SqlError::position_in`] turns it into
    /// the ErrorResponse `P` field.
    location: Option<std::num::NonZeroU64>,
}

/// A NOTICE PostgreSQL would send (`DROP TABLE IF EXISTS` of a missing
/// table: "table \"t\" does not exist, skipping"). Collected per
/// statement; the server sends them as NoticeResponse before the result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlNotice {
    pub sqlstate: &'static str,
    pub message: String,
}

impl SqlError {
    pub fn new(sqlstate: &'static str, message: impl Into<String>) -> SqlError {
        SqlError { sqlstate, message: message.into(), detail: None, hint: None, constraint: None, location: None }
    }

    /// Attaches the place in the statement text that caused the error
    /// (kept if one is already set: the innermost place wins).
    pub fn at(mut self, span: sqlparser::tokenizer::Span) -> SqlError {
        if self.location.is_none()
            && let (Ok(line @ 1..), Ok(column @ 1..)) =
                (u32::try_from(span.start.line), u32::try_from(span.start.column))
        {
            self.set_location(line, column);
        }
        self
    }

    fn set_location(&mut self, line: u32, column: u32) {
        self.location = std::num::NonZeroU64::new(u64::from(line) << 32 | u64::from(column));
    }

    /// (line, column), 1-based, if known.
    pub fn location(&self) -> Option<(u32, u32)> {
        self.location.map(|l| ((l.get() >> 32) as u32, l.get() as u32))
    }

    /// PostgreSQL's error position: the 1-based character offset of the
    /// error's location in `sql`, the text the statement was parsed from.
    pub fn position_in(&self, sql: &str) -> Option<u32> {
        let (line, column) = self.location()?;
        let (line, column) = (usize::try_from(line).ok()?, usize::try_from(column).ok()?);
        let mut offset = 0usize;
        for (i, text) in sql.split('\n').enumerate() {
            if i + 1 == line {
                return (column <= text.chars().count() + 1).then(|| u32::try_from(offset + column).ok()).flatten();
            }
            offset += text.chars().count() + 1;
        }
        None
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> SqlError {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> SqlError {
        self.hint = Some(hint.into());
        self
    }

    /// 0A000: a construct pgtier does not implement. Refusing is always
    /// better than answering differently from PostgreSQL.
    pub fn unsupported(construct: impl AsRef<str>) -> SqlError {
        SqlError::new("0A000", format!("{} is not supported", construct.as_ref()))
    }

    pub fn syntax(message: impl Into<String>) -> SqlError {
        SqlError::new("42601", message)
    }

    pub fn undefined_table(name: &str) -> SqlError {
        SqlError::new("42P01", format!("relation \"{name}\" does not exist"))
    }

    pub fn undefined_column(name: &str) -> SqlError {
        SqlError::new("42703", format!("column {name} does not exist"))
    }

    pub fn ambiguous_column(name: &str) -> SqlError {
        SqlError::new("42702", format!("column reference \"{name}\" is ambiguous"))
    }

    pub fn undefined_function(signature: &str) -> SqlError {
        SqlError::new("42883", format!("function {signature} does not exist")).with_hint(
            "No function matches the given name and argument types. You might need to add explicit type casts.",
        )
    }

    pub fn undefined_operator(signature: &str) -> SqlError {
        SqlError::new("42883", format!("operator does not exist: {signature}")).with_hint(
            "No operator matches the given name and argument types. You might need to add explicit type casts.",
        )
    }

    pub fn datatype_mismatch(message: impl Into<String>) -> SqlError {
        SqlError::new("42804", message)
    }

    pub fn out_of_range(type_name: &str) -> SqlError {
        SqlError::new("22003", format!("{type_name} out of range"))
    }

    pub fn division_by_zero() -> SqlError {
        SqlError::new("22012", "division by zero")
    }

    pub fn invalid_text(type_name: &str, text: &str) -> SqlError {
        SqlError::new("22P02", format!("invalid input syntax for type {type_name}: \"{text}\""))
    }

    pub fn transaction_aborted() -> SqlError {
        SqlError::new("25P02", "current transaction is aborted, commands ignored until end of transaction block")
    }

    /// 57014, as PostgreSQL answers a CancelRequest.
    pub fn canceled() -> SqlError {
        SqlError::new("57014", "canceling statement due to user request")
    }

    /// 57014: the statement ran past statement_timeout.
    pub fn statement_timeout() -> SqlError {
        SqlError::new("57014", "canceling statement due to statement timeout")
    }
}

impl From<EngineError> for SqlError {
    fn from(e: EngineError) -> SqlError {
        let mut out = SqlError::new(e.sqlstate(), e.to_string());
        // The engine names relations and constraints by their stored names
        // (crate::names): PostgreSQL's messages name them without schema.
        if matches!(
            e,
            EngineError::UniqueViolation { .. }
                | EngineError::ForeignKeyViolation { .. }
                | EngineError::NotNullViolation { .. }
                | EngineError::DuplicateTable { .. }
                | EngineError::LockNotAvailable { .. }
        ) {
            out.message = unqualified_quoted(&out.message);
        }
        out.detail = e.detail().map(str::to_owned);
        out.constraint = e.constraint().map(|c| crate::names::short(c).to_owned());
        out.hint = e.hint().map(str::to_owned);
        if let EngineError::DatatypeMismatch { .. } = e {
            out.hint = Some("You will need to rewrite or cast the expression.".to_owned());
        }
        out
    }
}

/// How a dialect hook (dialect.rs) refuses a construct PostgreSQL's
/// grammar has and pgtier does not: a parser error with this prefix is
/// 0A000 naming what follows, not a syntax error.
pub(crate) const UNSUPPORTED_PARSE: &str = "pgtier does not support: ";

impl From<sqlparser::parser::ParserError> for SqlError {
    fn from(e: sqlparser::parser::ParserError) -> SqlError {
        let text = match e {
            sqlparser::parser::ParserError::ParserError(s) if s.starts_with(UNSUPPORTED_PARSE) => {
                let what = s[UNSUPPORTED_PARSE.len()..].split(" at Line: ").next().unwrap_or_default();
                return SqlError::unsupported(what);
            }
            sqlparser::parser::ParserError::TokenizerError(s) | sqlparser::parser::ParserError::ParserError(s) => s,
            sqlparser::parser::ParserError::RecursionLimitExceeded => {
                // PostgreSQL's words; pgtier's limit is described in depth.rs.
                return SqlError::new("54001", "stack depth limit exceeded").with_hint(
                    "Increase the configuration parameter \"max_stack_depth\" (currently 2048kB), after ensuring the platform's stack depth limit is adequate.",
                );
            }
        };
        syntax_error(&text)
    }
}

/// sqlparser says `Expected: X, found: TOKEN at Line: L, Column: C`;
/// PostgreSQL says `syntax error at or near "TOKEN"` (or `at end of
/// input`) with the token's position.
fn syntax_error(text: &str) -> SqlError {
    let location = text.rsplit_once(" at Line: ").and_then(|(_, lc)| {
        let (l, c) = lc.split_once(", Column: ")?;
        Some((l.trim().parse::<u32>().ok()?, c.trim().parse::<u32>().ok()?))
    });
    let found = text.split_once("found: ").map(|(_, rest)| rest.rsplit_once(" at Line: ").map_or(rest, |(tok, _)| tok));
    let mut e = match found {
        Some("EOF") => SqlError::syntax("syntax error at end of input"),
        Some(tok) => SqlError::syntax(format!("syntax error at or near \"{tok}\"")),
        None => SqlError::syntax(format!("syntax error: {text}")),
    };
    if let Some((line, column)) = location {
        e.set_location(line, column);
    }
    e
}

/// `text` with each double-quoted stored name (`"s.t"`) shown without its
/// schema (`"t"`).
fn unqualified_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut parts = text.split('"');
    if let Some(first) = parts.next() {
        out.push_str(first);
    }
    for (k, part) in parts.enumerate() {
        out.push('"');
        out.push_str(if k % 2 == 0 { crate::names::short(part) } else { part });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    #[test]
    fn syntax_errors_read_like_postgres_with_positions() {
        let sql = "SELECT 1;\nSELEC 2";
        let e: SqlError = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap_err().into();
        assert_eq!(e.message, "syntax error at or near \"SELEC\"");
        assert_eq!(e.position_in(sql), Some(11), "{e:?}");
        let e: SqlError = Parser::parse_sql(&PostgreSqlDialect {}, "SELECT (1").unwrap_err().into();
        assert_eq!(e.message, "syntax error at end of input");
    }
}
