//! Structured logs: the `[log]` settings once resolved, the subscriber that
//! formats events (text or JSON lines), and the events of sessions
//! (connections, authentication, disconnections, slow statements, errors
//! sent to clients, cache-group statements).
//!
//! Libraries (this crate, pgtier-cache) only emit `tracing` events; a
//! process has one subscriber, installed by whoever owns the process: the
//! `pgtier` binary ([`init`], from `[log]`) or a test. The subscriber is
//! built here rather than in the CLI because `[log]` is this crate's
//! configuration and the server's tests must format lines exactly as
//! `pgtier serve` does to check them (tests/logs.rs); nothing in this crate
//! ever calls [`init`].
//!
//! What never reaches a log line: a password or any SCRAM message, the
//! values of rows. Statement text (which can hold literals) only in the
//! slow-statement event, which is opt-in (`log_min_duration_statement`);
//! Bind parameters only with `log_statement_parameters`; an error's DETAIL
//! (23505 quotes the key: "Key (id)=(42) already exists") only with
//! `log_error_detail`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use pgtier_engine::Value;
use pgtier_sql::SqlError;
use tracing::Subscriber;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;

use crate::ServerError;

/// How lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `2026-11-30T14:02:11.123Z  INFO session{pid=3 ...}: pgtier_server::session: message key=value`
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, target, message and the
    /// event's fields at the top level, the session's span under `span`.
    Json,
}

/// `[log]`, checked (`config::LogSection::settings`).
#[derive(Clone, Debug)]
pub struct LogSettings {
    pub level: LevelFilter,
    pub format: LogFormat,
    /// Statements that run at least this long are logged with their text
    /// (None: off; zero: every statement), as PostgreSQL's
    /// `log_min_duration_statement`.
    pub min_duration_statement: Option<Duration>,
    /// Bind parameters in the slow-statement event.
    pub statement_parameters: bool,
    pub connections: bool,
    pub disconnections: bool,
    /// An error's DETAIL in the client-error event (it can quote row values).
    pub error_detail: bool,
}

impl Default for LogSettings {
    fn default() -> LogSettings {
        LogSettings {
            level: LevelFilter::INFO,
            format: LogFormat::Text,
            min_duration_statement: None,
            statement_parameters: false,
            connections: true,
            disconnections: true,
            error_detail: false,
        }
    }
}

/// The formatting layer for `settings`, writing to `writer` (stderr for
/// the binary, a buffer in tests), filtered at `settings.level`.
pub fn layer<S, W>(settings: &LogSettings, writer: W) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let base = tracing_subscriber::fmt::layer().with_ansi(false).with_writer(writer);
    match settings.format {
        LogFormat::Text => base.with_filter(settings.level).boxed(),
        LogFormat::Json => base
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(settings.level)
            .boxed(),
    }
}

/// Installs the process's subscriber: `settings`' format and level, to
/// stderr. For binaries only (once per process).
pub fn init(settings: &LogSettings) -> Result<(), ServerError> {
    // The level can change on a reload: the filter is behind a handle.
    let (filter, handle) = tracing_subscriber::reload::Layer::new(settings.level);
    let fixed = LogSettings { level: LevelFilter::TRACE, ..settings.clone() };
    let subscriber = tracing_subscriber::registry().with(filter).with(layer(&fixed, std::io::stderr));
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| ServerError::Config(format!("cannot install the log subscriber: {e}")))?;
    let _ = LEVEL.set(handle);
    Ok(())
}

/// The installed subscriber's level, changeable by a reload.
static LEVEL: std::sync::OnceLock<tracing_subscriber::reload::Handle<LevelFilter, tracing_subscriber::Registry>> =
    std::sync::OnceLock::new();

/// A reload's `[log] level`; nothing when the process installed no
/// subscriber of its own (tests, an embedding program).
pub(crate) fn set_level(level: LevelFilter) {
    if let Some(handle) = LEVEL.get() {
        let _ = handle.modify(|current| *current = level);
    }
}

/// A session's span: every event of the session carries its pid (the
/// BackendKeyData pid) and the client's address; user and database once
/// known. At ERROR level so that it is enabled whenever anything is.
pub(crate) fn session_span(pid: i32, remote: &str) -> tracing::Span {
    tracing::error_span!("session", pid, remote, user = tracing::field::Empty, database = tracing::field::Empty)
}

/// What a session counts for its disconnection event.
pub(crate) struct SessionStats {
    pub started: Instant,
    /// Query and Execute messages.
    pub statements: u64,
}

impl SessionStats {
    pub fn new() -> SessionStats {
        SessionStats { started: Instant::now(), statements: 0 }
    }
}

pub(crate) fn disconnected(stats: &SessionStats) {
    let session_seconds = (stats.started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    tracing::info!(session_seconds, statements = stats.statements, "disconnection");
}

/// An ErrorResponse sent to a client. Ordinary statement errors (a 23505,
/// a syntax error: the application's business) are DEBUG; trouble the
/// operator should see is higher: FATAL and internal errors (XX, 58) at
/// ERROR, resources (53) and connection failures (08, PostgreSQL
/// unreachable) at WARN. Authentication failures (class 28) have their own
/// event. The DETAIL only with `log_error_detail`.
pub(crate) fn client_error(e: &SqlError, severity: &str, detail: bool) {
    let class = e.sqlstate.get(..2).unwrap_or("");
    let detail = if detail { e.detail.as_deref() } else { None };
    let (sqlstate, message) = (e.sqlstate, e.message.as_str());
    macro_rules! event {
        ($level:expr) => {
            match detail {
                Some(detail) => {
                    tracing::event!($level, severity, sqlstate, error = message, detail, "error sent to client")
                }
                None => tracing::event!($level, severity, sqlstate, error = message, "error sent to client"),
            }
        };
    }
    match class {
        "28" => {}
        "XX" | "58" => event!(tracing::Level::ERROR),
        _ if severity != "ERROR" => event!(tracing::Level::ERROR),
        "53" | "08" => event!(tracing::Level::WARN),
        _ => event!(tracing::Level::DEBUG),
    }
}

/// A statement that ran at least `log_min_duration_statement`: its
/// duration and text, and its parameters when `log_statement_parameters`
/// is on (PostgreSQL's "duration: ... statement: ..." line).
pub(crate) fn slow_statement(started: Instant, text: &str, params: Option<&[Value]>) {
    let duration_ms = millis(started.elapsed());
    // CREATE / ALTER ROLE ... PASSWORD 'x' carries a password in its text
    // (PostgreSQL logs it; pgtier does not).
    let text = if mentions_password(text) { "<a statement with a PASSWORD clause, not logged>" } else { text };
    match params.filter(|p| !p.is_empty()) {
        Some(params) => {
            let parameters = format_parameters(params);
            tracing::info!(duration_ms, statement = text, parameters, "slow statement")
        }
        None => tracing::info!(duration_ms, statement = text, "slow statement"),
    }
}

/// The statement may hold a password: it names PASSWORD (any case).
fn mentions_password(text: &str) -> bool {
    text.as_bytes().windows(8).any(|w| w.eq_ignore_ascii_case(b"password"))
}

/// Milliseconds to the microsecond.
fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1000.0
}

/// `$1 = '42', $2 = NULL`, as PostgreSQL's log prints parameters.
fn format_parameters(params: &[Value]) -> String {
    let mut out = String::new();
    let mut text = String::new();
    for (i, value) in params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "${} = ", i + 1);
        if matches!(value, Value::Null) {
            out.push_str("NULL");
            continue;
        }
        text.clear();
        pgtier_sql::value::write_text(value, &mut text);
        let _ = write!(out, "'{}'", text.replace('\'', "''"));
    }
    out
}

/// A cache-group statement's outcome: what and which group (never its
/// WHERE predicate, which can hold values), how long, and its SQLSTATE
/// when it failed.
pub(crate) fn cache_statement(
    statement: &pgtier_cache::CacheStatement,
    started: Instant,
    outcome: Result<&str, &SqlError>,
) {
    use pgtier_cache::CacheStatement as C;
    let (operation, group) = match statement {
        C::Create(create) => ("CREATE CACHE GROUP", create.name.as_str()),
        C::Drop { name, .. } => ("DROP CACHE GROUP", name.as_str()),
        C::Load { name, .. } => ("LOAD CACHE GROUP", name.as_str()),
        C::Unload { name, .. } => ("UNLOAD CACHE GROUP", name.as_str()),
        C::Refresh { name, .. } => ("REFRESH CACHE GROUP", name.as_str()),
        C::Verify { name } => ("VERIFY CACHE GROUP", name.as_str()),
        C::AcceptDefinition { name } => ("ALTER CACHE GROUP ACCEPT DEFINITION", name.as_str()),
        C::Partition(map) => ("ALTER CACHE GROUP PARTITION BY RANGE", map.group.as_str()),
        C::Takeover => ("TAKEOVER CACHE NODE", ""),
        C::Tier(_) => ("ALTER CACHE TIER", ""),
    };
    let duration_ms = millis(started.elapsed());
    match outcome {
        Ok(tag) => tracing::info!(operation, group, duration_ms, tag, "cache group statement"),
        Err(e) => tracing::warn!(
            operation,
            group,
            duration_ms,
            sqlstate = e.sqlstate,
            error = e.message.as_str(),
            "cache group statement failed"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_print_as_postgresql_logs_them() {
        let params = [Value::Int4(42), Value::Null, Value::Text("it's".into())];
        assert_eq!(format_parameters(&params), "$1 = '42', $2 = NULL, $3 = 'it''s'");
    }

    #[test]
    fn statements_naming_a_password_are_not_logged() {
        assert!(mentions_password("CREATE ROLE bob LOGIN PASSWORD 'secret'"));
        assert!(mentions_password("alter user bob with password 'x'"));
        assert!(!mentions_password("SELECT pass, word FROM t"));
    }
}
