//! Bad input to `pgtier bench tatp` gets one clear line on stderr and a
//! non-zero exit code, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};

/// Runs `pgtier bench tatp ARGS` and returns its single stderr line,
/// asserting the failure shape on the way.
fn fails(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "tatp"])
        .args(args)
        .env_remove("PGTIER_BENCH_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} succeeded; stderr: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{args:?}: exit status {:?}; stderr: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: expected one line, got: {stderr}");
    assert!(lines[0].starts_with("pgtier: error: "), "{args:?}: {stderr}");
    lines[0].to_owned()
}

/// Nothing listens on port 1; argument checks come before connecting, so
/// the invalid-argument cases never reach it.
const NOWHERE: &str = "postgres://postgres@127.0.0.1:1/postgres";

#[test]
fn invalid_thread_lists() {
    let line = fails(&["--url", NOWHERE, "--threads", "1,,x"]);
    assert!(line.contains("invalid --threads '1,,x'") && line.contains("empty"), "{line}");
    let line = fails(&["--url", NOWHERE, "--threads", "1,x"]);
    assert!(line.contains("'x' is not a whole number"), "{line}");
    let line = fails(&["--url", NOWHERE, "--threads", "0"]);
    assert!(line.contains("at least 1"), "{line}");
}

#[test]
fn invalid_rates_durations_and_ranges() {
    let line = fails(&["--url", NOWHERE, "--rate", "0.5"]);
    assert!(line.contains("invalid --rate 0.5") && line.contains("at least 1"), "{line}");
    let line = fails(&["--url", NOWHERE, "--rate", "-3"]);
    assert!(line.contains("invalid --rate"), "{line}");
    let line = fails(&["--url", NOWHERE, "--duration", "0"]);
    assert!(line.contains("invalid --duration"), "{line}");
    let line = fails(&["--url", NOWHERE, "--ramp-up", "-1"]);
    assert!(line.contains("invalid --ramp-up"), "{line}");
    let line = fails(&["--url", NOWHERE, "--min-id", "10", "--max-id", "5"]);
    assert!(line.contains("--min-id 10 is greater than --max-id 5"), "{line}");
    let line = fails(&["--url", NOWHERE, "--subscribers", "1000", "--max-id", "2000"]);
    assert!(line.contains("invalid --max-id 2000") && line.contains("1000 subscribers"), "{line}");
    let line = fails(&["--url", NOWHERE, "--repetitions", "0"]);
    assert!(line.contains("invalid --repetitions"), "{line}");
    let line = fails(&["--url", NOWHERE, "--min-id", "0"]);
    assert!(line.contains("invalid --min-id 0"), "{line}");
}

#[test]
fn unreachable_target() {
    let line = fails(&["--url", NOWHERE, "--threads", "1"]);
    assert!(line.contains("cannot reach PostgreSQL at postgres://postgres@127.0.0.1:1/postgres"), "{line}");
    assert!(line.contains("pgtier backend start"), "hint: {line}");
}

#[test]
fn wrong_password_and_missing_tables() {
    let cluster =
        PrivateCluster::start(ClusterOptions { password: Some("right-secret".into()), ..ClusterOptions::default() })
            .unwrap();
    let wrong = format!("postgres://postgres:wrong-secret@127.0.0.1:{}/postgres", cluster.port());
    let line = fails(&["--url", &wrong, "--threads", "1"]);
    assert!(line.contains("authentication failed"), "{line}");
    assert!(!line.contains("wrong-secret"), "password leaked: {line}");

    let url = cluster.create_database("empty").unwrap();
    let line = fails(&["--url", &url, "--threads", "1", "--duration", "1"]);
    assert!(line.contains("does not exist") && line.contains("--populate"), "{line}");
    assert!(!line.contains("right-secret"), "password leaked: {line}");
}
