//! `pgtier backend start|status|url|stop` end to end, on a real PostgreSQL.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pgtier_backend::connect::{ConnectError, connect};

fn pgtier(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .arg("backend")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .env_remove("PGTIER_BACKEND_PASSWORD")
        .output()
        .unwrap()
}

fn stdout_ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "pgtier failed: {}\nstdout: {}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn last_line(text: &str) -> String {
    text.lines().last().unwrap().to_owned()
}

/// Stops the daemonized server even when an assertion fails, so a failing
/// test leaves nothing running.
struct StopOnDrop(PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = pgtier(&["stop"], &self.0);
    }
}

#[test]
fn start_status_url_stop() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("backend");

    let before = pgtier(&["url"], &dir);
    assert!(!before.status.success());
    assert!(String::from_utf8_lossy(&before.stderr).contains("pgtier backend start"));

    let _guard = StopOnDrop(dir.clone());
    let started = stdout_ok(&pgtier(&["start", "--fsync", "off"], &dir));
    let url = last_line(&started);
    assert!(url.starts_with("postgres://postgres@127.0.0.1:"), "{started}");
    let mut client = connect(&url).unwrap();
    client.batch_execute("CREATE TABLE survives_restart (x int); INSERT INTO survives_restart VALUES (42)").unwrap();
    let shared_buffers: String = client.query_one("SHOW shared_buffers", &[]).unwrap().get(0);
    assert_eq!(shared_buffers, "2GB", "benchmark settings");
    let fsync: String = client.query_one("SHOW fsync", &[]).unwrap().get(0);
    assert_eq!(fsync, "off");
    drop(client);

    let again = stdout_ok(&pgtier(&["start"], &dir));
    assert!(again.contains("already running"), "{again}");
    assert_eq!(last_line(&again), url);

    let status = stdout_ok(&pgtier(&["status"], &dir));
    assert!(status.contains("status:         running"), "{status}");
    assert!(status.contains(&format!("url:            {url}")), "{status}");
    assert!(status.contains("server version: 1"), "{status}");
    assert!(status.contains("MiB"), "{status}");
    assert_eq!(stdout_ok(&pgtier(&["url"], &dir)).trim(), url);

    let stopped = stdout_ok(&pgtier(&["stop"], &dir));
    assert!(stopped.contains("stopped"), "{stopped}");
    assert!(stdout_ok(&pgtier(&["status"], &dir)).contains("status:         stopped"));
    assert!(matches!(connect(&url), Err(ConnectError::Unreachable { .. })));
    assert!(stdout_ok(&pgtier(&["stop"], &dir)).contains("not running"));

    // The port is remembered, and so is the data.
    let restarted = stdout_ok(&pgtier(&["start"], &dir));
    assert_eq!(last_line(&restarted), url);
    let mut client = connect(&url).unwrap();
    let x: i32 = client.query_one("SELECT x FROM survives_restart", &[]).unwrap().get(0);
    assert_eq!(x, 42);
    let fsync: String = client.query_one("SHOW fsync", &[]).unwrap().get(0);
    assert_eq!(fsync, "on", "fsync defaults to on");
}

#[test]
fn password_is_required_and_redacted() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("backend");
    let _guard = StopOnDrop(dir.clone());
    let started = stdout_ok(&pgtier(&["start", "--fsync", "off", "--password", "hunter2"], &dir));
    let url = last_line(&started);
    assert!(url.starts_with("postgres://postgres:hunter2@127.0.0.1:"), "{url}");
    connect(&url).unwrap().batch_execute("SELECT 1").unwrap();
    let wrong = url.replace("hunter2", "hunter3");
    assert!(matches!(connect(&wrong), Err(ConnectError::AuthenticationFailed { .. })));

    let status = stdout_ok(&pgtier(&["status"], &dir));
    assert!(!status.contains("hunter2"), "{status}");
    assert!(status.contains("postgres:***@"), "{status}");
    assert_eq!(stdout_ok(&pgtier(&["url"], &dir)).trim(), url);
}
