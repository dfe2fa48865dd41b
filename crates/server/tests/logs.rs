//! Structured logs (server README, "Logging"): the events a session
//! produces, captured from the very layers `pgtier serve` installs (text
//! and JSON, each into a buffer), and what must never be in them: the
//! password (right or wrong), row values, an error's DETAIL, and Bind
//! parameters unless `[log]` asks for them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use common::{PASSWORD, USER, start_with};
use pgtier_server::LogSection;
use tracing_subscriber::layer::SubscriberExt as _;

/// A wrong password; never logged either.
const WRONG: &str = "Wr0ng-pw-5519";
/// A row value; never logged unless `[log]` allows parameters or details.
const VALUE: &str = "zebra-7731";

/// What the layers wrote, shared by the test and the writer.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

/// The process's subscriber (one per process, for every thread: sessions
/// run on the server's threads): the text layer at INFO and the JSON layer
/// at DEBUG, as `pgtier serve` builds them for `[log] level` and `format`.
fn capture() -> &'static (Buffer, Buffer) {
    static BUFFERS: OnceLock<(Buffer, Buffer)> = OnceLock::new();
    BUFFERS.get_or_init(|| {
        let (text, json) = (Buffer::default(), Buffer::default());
        let settings = |level: &str, format: &str| {
            LogSection { level: level.into(), format: format.into(), ..LogSection::default() }.settings().unwrap()
        };
        let (t, j) = (text.clone(), json.clone());
        let subscriber = tracing_subscriber::registry()
            .with(pgtier_server::logging::layer(&settings("info", "text"), move || t.clone()))
            .with(pgtier_server::logging::layer(&settings("debug", "json"), move || j.clone()));
        tracing::subscriber::set_global_default(subscriber).unwrap();
        (text, json)
    })
}

/// The session a client runs: a wrong password and an unknown user
/// refused, rows with a distinctive value, a 23505 on it, a slow statement
/// in each protocol (one with the value as a parameter), a failed
/// cache-group statement.
fn run_session(extra: &str) {
    let srv = start_with(extra);
    let mut refused = srv.config();
    refused.password(WRONG);
    let Err(e) = refused.connect(postgres::NoTls) else { panic!("a wrong password was taken") };
    assert_eq!(e.as_db_error().unwrap().code().code(), "28P01", "{e}");
    refused.user("mallory");
    assert!(refused.connect(postgres::NoTls).is_err());

    let mut client = srv.client();
    client.batch_execute("CREATE TABLE animals (name text PRIMARY KEY, legs int)").unwrap();
    client.execute("INSERT INTO animals VALUES ($1, 4)", &[&VALUE]).unwrap();
    let e = client.execute("INSERT INTO animals VALUES ($1, 4)", &[&VALUE]).unwrap_err();
    let db = e.as_db_error().unwrap();
    assert_eq!(db.code().code(), "23505", "{e}");
    assert!(db.detail().unwrap_or("").contains(VALUE), "the DETAIL quotes the value: {db:?}");
    client.simple_query("SELECT pg_sleep(0.15)").unwrap();
    let row = client.query_one("SELECT pg_sleep(0.15), $1::text", &[&VALUE]).unwrap();
    assert_eq!(row.get::<_, String>(1), VALUE);
    client.simple_query("SELECT legs FROM animals").unwrap();
    let e = client.simple_query("LOAD CACHE GROUP no_such_group").unwrap_err();
    assert!(e.as_db_error().is_some(), "{e}");
    drop(client);
    // Shutdown waits for every session to end: the disconnections are in.
    drop(srv);
}

fn events(json: &str) -> Vec<serde_json::Value> {
    json.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))).collect()
}

fn find<'a>(events: &'a [serde_json::Value], message: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["message"] == message).collect()
}

fn assert_secret_free(text: &str, json: &str) {
    for secret in [PASSWORD, WRONG, "n,,n=", "c=biws"] {
        assert!(!text.contains(secret) && !json.contains(secret), "{secret:?} logged:\n{text}\n{json}");
    }
}

/// Both phases in one test: the subscriber is the process's.
#[test]
fn sessions_log_events_without_secrets_or_row_values() {
    let (text_buffer, json_buffer) = capture();
    text_buffer.take();
    json_buffer.take();

    // Defaults, with slow statements from 100 ms on.
    run_session("[log]\nlog_min_duration_statement = 100\n");
    let (text, json) = (text_buffer.take(), json_buffer.take());
    assert_secret_free(&text, &json);
    assert!(!text.contains(VALUE) && !json.contains(VALUE), "a row value was logged:\n{text}\n{json}");
    let all = events(&json);

    assert!(find(&all, "connection received").len() >= 3, "{json}");
    let ok = find(&all, "authentication succeeded");
    assert!(ok.iter().any(|e| e["user"] == USER && e["method"] == "SCRAM-SHA-256"), "{json}");
    let failed = find(&all, "authentication failed");
    assert_eq!(failed.len(), 2, "{json}");
    assert!(failed.iter().all(|e| e["level"] == "WARN" && e["remote"].as_str().unwrap().starts_with("127.0.0.1:")));
    assert!(failed.iter().any(|e| e["user"] == USER) && failed.iter().any(|e| e["user"] == "mallory"), "{json}");

    let slow = find(&all, "slow statement");
    assert_eq!(slow.len(), 2, "only the two pg_sleep statements are over 100 ms: {json}");
    assert_eq!(slow[0]["statement"], "SELECT pg_sleep(0.15)");
    // As pgtier prepared it (printed back by its parser).
    assert!(slow[1]["statement"].as_str().unwrap().eq_ignore_ascii_case("SELECT pg_sleep(0.15), $1::text"));
    assert!(slow.iter().all(|e| e["duration_ms"].as_f64().unwrap() >= 150.0), "{json}");
    assert!(slow.iter().all(|e| e.get("parameters").is_none()), "parameters are off by default: {json}");
    assert!(slow.iter().all(|e| e["span"]["user"] == USER && e["span"]["name"] == "session"), "{json}");

    let errors = find(&all, "error sent to client");
    let duplicate = errors.iter().find(|e| e["sqlstate"] == "23505").expect("the 23505");
    assert_eq!(duplicate["level"], "DEBUG", "an application's 23505 is not noise");
    assert!(duplicate.get("detail").is_none(), "{duplicate}");
    let cache = find(&all, "cache group statement failed");
    assert!(cache.iter().any(|e| e["operation"] == "LOAD CACHE GROUP" && e["group"] == "no_such_group"), "{json}");

    let ended = find(&all, "disconnection");
    assert!(ended.iter().any(|e| e["statements"].as_u64().unwrap() >= 6 && e["span"]["user"] == USER), "{json}");

    // The text layer at INFO: the same events but the DEBUG one, in lines.
    for expected in [
        "connection received",
        "authentication succeeded",
        "authentication failed",
        "slow statement",
        "disconnection",
        "session{pid=",
    ] {
        assert!(text.contains(expected), "{expected:?} missing:\n{text}");
    }
    assert!(!text.contains("error sent to client"), "DEBUG events stay out at INFO:\n{text}");

    // Opted in (and on an event loop): parameters and the DETAIL, which
    // carry the row value; no connection lines.
    run_session(
        "event_loops = 1\n[log]\nlog_min_duration_statement = 100\nlog_statement_parameters = true\nlog_error_detail = true\nlog_connections = false\n",
    );
    let (text, json) = (text_buffer.take(), json_buffer.take());
    assert_secret_free(&text, &json);
    let all = events(&json);
    assert!(find(&all, "connection received").is_empty() && find(&all, "authentication succeeded").is_empty());
    assert_eq!(find(&all, "authentication failed").len(), 2, "failures are logged whatever log_connections says");
    let slow = find(&all, "slow statement");
    assert_eq!(slow[1]["parameters"], format!("$1 = '{VALUE}'"), "{json}");
    assert!(slow.iter().all(|e| e["span"]["user"] == USER), "the span follows the session to its loop: {json}");
    let errors = find(&all, "error sent to client");
    let duplicate = errors.iter().find(|e| e["sqlstate"] == "23505").expect("the 23505");
    assert!(duplicate["detail"].as_str().unwrap().contains(VALUE), "{duplicate}");
}
