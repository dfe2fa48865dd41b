//! Connecting to PostgreSQL with the sync `postgres` client, and turning the
//! many ways that can fail into one line a user can act on.
//!
//! The sync client runs its own Tokio runtime; calling [`connect`] from inside
//! an async runtime panics (a `postgres` crate rule). Async code uses
//! `tokio-postgres` directly.

use std::io;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};

/// Applied when the URL sets no `connect_timeout`, so an unreachable host
/// fails in bounded time instead of the OS's multi-minute TCP timeout.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;

const UNREACHABLE_HINT: &str = "is PostgreSQL running? start one with `pgtier backend start`";

/// Why a connection could not be made. Display is one line and never contains
/// a password (URLs are shown through [`redact_url`]).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("invalid PostgreSQL URL {url}: {reason}")]
    BadUrl { url: String, reason: String },

    #[error("cannot reach PostgreSQL at {url}: {reason}; {UNREACHABLE_HINT}")]
    Unreachable { url: String, reason: String },

    #[error("authentication failed for user \"{user}\" at {url} (SQLSTATE {sqlstate}): {message}")]
    AuthenticationFailed { url: String, user: String, sqlstate: String, message: String },

    #[error("database \"{database}\" does not exist at {url} (SQLSTATE 3D000); create it or fix the URL")]
    DatabaseMissing { url: String, database: String },

    #[error("PostgreSQL at {url} refused the connection (SQLSTATE {sqlstate}): {message}")]
    Server { url: String, sqlstate: String, message: String },

    #[error("connection to {url} failed: {reason}")]
    Other { url: String, reason: String },
}

impl ConnectError {
    /// The SQLSTATE a PostgreSQL client library would report for this failure.
    pub fn sqlstate(&self) -> &str {
        match self {
            ConnectError::BadUrl { .. } | ConnectError::Unreachable { .. } => "08001",
            ConnectError::AuthenticationFailed { sqlstate, .. } | ConnectError::Server { sqlstate, .. } => sqlstate,
            ConnectError::DatabaseMissing { .. } => "3D000",
            ConnectError::Other { .. } => "08006",
        }
    }
}

/// Connects with the sync `postgres` crate (NoTls), mapping failures to one clear line.
pub fn connect(url: &str) -> Result<Client, ConnectError> {
    let mut config: Config = url
        .parse()
        .map_err(|error: postgres::Error| ConnectError::BadUrl { url: redact_url(url), reason: error_chain(&error) })?;
    connect_config(&mut config, &redact_url(url))
}

/// Connects to the configured backend (`[backend]`, see
/// [`ConnectParams`](crate::ConnectParams)) with the sync client. That
/// client has no TLS here, so `sslmode` `disable` and `prefer` connect in
/// plain text (libpq's `prefer` against a server without TLS), and
/// `require`, `verify-ca` and `verify-full` are refused rather than
/// silently downgraded.
pub fn connect_backend(params: &crate::ConnectParams) -> Result<Client, ConnectError> {
    use crate::SslMode;
    if !matches!(params.sslmode, SslMode::Disable | SslMode::Prefer) {
        return Err(ConnectError::Other {
            url: params.shown.clone(),
            reason: format!(
                "sslmode \"{}\" needs TLS, which pgtier's catalog and COPY client does not have yet",
                params.sslmode.name()
            ),
        });
    }
    let mut config = params.config.clone();
    config.ssl_mode(postgres::config::SslMode::Disable);
    connect_config(&mut config, &params.shown)
}

/// Sent once on the connections that run pgtier's own prepared key
/// lookups and row changes (dynamic loads, write-through): every execution
/// uses the generic plan. PostgreSQL's plan cache otherwise plans five
/// executions with their values and keeps planning each one anew whenever
/// the generic plan's estimate is not below theirs, which for a statement
/// by primary key it never is, and planning then costs more than running
/// (a dynamic load's `UNION ALL` of four lookups: most of its CPU). The
/// plan is an index lookup whatever the key. A no-op before PostgreSQL 12,
/// which has no such setting. Never on connections that run applications'
/// statements (passthrough), whose plans are theirs to choose.
pub const GENERIC_PLANS: &str = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false) WHERE current_setting('server_version_num')::int >= 120000";

/// Like [`connect`] for an already-built `Config`; `shown_as` names the target
/// in error messages and must not contain a password.
pub fn connect_config(config: &mut Config, shown_as: &str) -> Result<Client, ConnectError> {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_millis(DEFAULT_CONNECT_TIMEOUT_MS));
    }
    config.connect(NoTls).map_err(|error| classify(&error, config, shown_as))
}

fn classify(error: &postgres::Error, config: &Config, url: &str) -> ConnectError {
    let url = url.to_owned();
    let user = config.get_user().unwrap_or("(none)").to_owned();
    if let Some(db) = error.as_db_error() {
        let code = db.code();
        if *code == SqlState::INVALID_PASSWORD || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION {
            return ConnectError::AuthenticationFailed {
                url,
                user,
                sqlstate: code.code().to_owned(),
                message: db.message().to_owned(),
            };
        }
        if *code == SqlState::INVALID_CATALOG_NAME {
            let database = config.get_dbname().unwrap_or(&user).to_owned();
            return ConnectError::DatabaseMissing { url, database };
        }
        return ConnectError::Server {
            url,
            sqlstate: code.code().to_owned(),
            message: db.message().replace('\n', " "),
        };
    }
    let reason = error_chain(error);
    // The client gives up before the server can say 28P01 when it is asked for
    // a password the URL does not have; to the user that is the same failure.
    if reason.contains("password missing") {
        return ConnectError::AuthenticationFailed {
            url,
            user,
            sqlstate: "28P01".to_owned(),
            message: "the server requires a password and the URL has none".to_owned(),
        };
    }
    if source_io_error(error).is_some() {
        return ConnectError::Unreachable { url, reason };
    }
    ConnectError::Other { url, reason }
}

fn source_io_error(error: &postgres::Error) -> Option<&io::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(current) = source {
        if let Some(io_error) = current.downcast_ref::<io::Error>() {
            return Some(io_error);
        }
        source = current.source();
    }
    None
}

/// "error connecting to server: Connection refused (os error 111)" rather than
/// the bare top-level "error connecting to server".
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(current) = source {
        let part = current.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = current.source();
    }
    text.replace('\n', " ")
}

/// What Debug output shows of an optional password: whether there is one.
pub(crate) fn redact_password(password: &Option<String>) -> Option<&'static str> {
    password.as_ref().map(|_| "<redacted>")
}

/// The URL with any password masked, for reports and messages.
///
/// Handles `postgres://user:pw@host/db?password=pw` URLs and libpq
/// `key=value` strings (`password=pw` or `password='p w'`).
pub fn redact_url(url: &str) -> String {
    let trimmed = url.trim_start();
    for scheme in ["postgres://", "postgresql://"] {
        if let Some(rest) = trimmed.strip_prefix(scheme) {
            return format!("{scheme}{}", redact_url_body(rest));
        }
    }
    redact_key_value(url)
}

fn redact_url_body(rest: &str) -> String {
    // Mirrors the `postgres` crate's parser: credentials end at the first '@'.
    let (credentials, after) = match rest.find('@') {
        Some(at) => (Some(&rest[..at]), &rest[at..]),
        None => (None, rest),
    };
    let mut out = String::with_capacity(rest.len());
    if let Some(credentials) = credentials {
        match credentials.split_once(':') {
            Some((user, _password)) => {
                out.push_str(user);
                out.push_str(":***");
            }
            None => out.push_str(credentials),
        }
    }
    match after.split_once('?') {
        Some((head, query)) => {
            out.push_str(head);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                    _ => param.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(after),
    }
    out
}

fn redact_key_value(conninfo: &str) -> String {
    let mut out = String::with_capacity(conninfo.len());
    let mut rest = conninfo;
    while let Some(position) = find_password_key(rest) {
        let (head, tail) = rest.split_at(position);
        out.push_str(head);
        let Some(equals) = tail.find('=') else {
            rest = tail;
            break;
        };
        out.push_str(&tail[..=equals]);
        let value = tail[equals + 1..].trim_start();
        let value_len = value_length(value);
        out.push_str("***");
        rest = &value[value_len..];
    }
    out.push_str(rest);
    out
}

/// Byte offset of the next `password` key (followed by optional spaces and '=').
fn find_password_key(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("password") {
        let start = from + found;
        let at_word_start = start == 0 || lower.as_bytes()[start - 1].is_ascii_whitespace();
        let after = lower[start + "password".len()..].trim_start();
        if at_word_start && after.starts_with('=') {
            return Some(start);
        }
        from = start + "password".len();
    }
    None
}

/// Length of a libpq value: a single-quoted string with backslash escapes, or
/// everything up to the next whitespace.
fn value_length(value: &str) -> usize {
    let bytes = value.as_bytes();
    if bytes.first() == Some(&b'\'') {
        let mut index = 1;
        while index < bytes.len() {
            match bytes[index] {
                b'\\' => index += 2,
                b'\'' => return index + 1,
                _ => index += 1,
            }
        }
        return bytes.len();
    }
    bytes.iter().position(u8::is_ascii_whitespace).unwrap_or(bytes.len())
}

/// Percent-encodes a URL component (user, password, database) so that any
/// byte survives the `postgres` crate's URL parser.
pub(crate) fn encode_url_component(component: &str) -> String {
    let mut out = String::with_capacity(component.len());
    for byte in component.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn redacts_url_password() {
        assert_eq!(
            redact_url("postgres://postgres:s3cr%40t@127.0.0.1:5432/db"),
            "postgres://postgres:***@127.0.0.1:5432/db"
        );
        assert_eq!(
            redact_url("postgresql://u@h/db?sslmode=disable&password=x&application_name=a"),
            "postgresql://u@h/db?sslmode=disable&password=***&application_name=a"
        );
        assert_eq!(redact_url("postgres://h:5432/db"), "postgres://h:5432/db");
    }

    #[test]
    fn redacts_key_value_password() {
        assert_eq!(redact_url("host=h password=secret user=u"), "host=h password=*** user=u");
        assert_eq!(redact_url("host=h password = 'a \\' b' user=u"), "host=h password =*** user=u");
        assert_eq!(redact_url("host=h user=password"), "host=h user=password");
    }

    #[test]
    fn encoded_components_round_trip_through_the_parser() {
        let password = "p@ss:w/rd?&% é";
        let url = format!(
            "postgres://postgres:{}@127.0.0.1:1/{}",
            encode_url_component(password),
            encode_url_component("my db")
        );
        let config: Config = url.parse().unwrap();
        assert_eq!(config.get_password().unwrap(), password.as_bytes());
        assert_eq!(config.get_dbname().unwrap(), "my db");
        assert!(!redact_url(&url).contains("ss"));
    }

    #[test]
    fn bad_url_is_reported_without_password() {
        let error = connect("postgres://u:secret@host:notaport/db").err().unwrap();
        assert!(matches!(error, ConnectError::BadUrl { .. }), "{error}");
        assert!(!error.to_string().contains("secret"), "{error}");
    }
}
