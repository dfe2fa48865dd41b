//! `pgtier serve`: logs its address, serves, stops cleanly on SIGTERM, and
//! what was committed is there after a restart; bad configs are one line;
//! `--log-format json` writes the session events as JSON lines on stderr.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

fn serve(config: &std::path::Path) -> (Child, String) {
    let (child, addr, _) = serve_with(config, &[]);
    (child, addr)
}

/// The server, its address, and every stderr line after "listening on"
/// (collected until it exits).
fn serve_with(config: &std::path::Path, args: &[&str]) -> (Child, String, Arc<Mutex<Vec<String>>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["serve", "--config"])
        .arg(config)
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("pgtier serve ended before listening").unwrap();
        // Log lines may come first (a deprecated key, the cache's node).
        if let Some(rest) = line.strip_prefix("pgtier: listening on ") {
            break rest.split(' ').next().unwrap().to_owned();
        }
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let collected = seen.clone();
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || lines.by_ref().for_each(|l| collected.lock().unwrap().push(l.unwrap_or_default())));
    (child, addr, seen)
}

fn terminate(child: &mut Child) {
    // SAFETY: signals our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn serve_stops_cleanly_and_keeps_commits() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pgtier.toml");
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\ncommit_mode = \"sync\"\n[auth]\nmethod = \"trust\"\n",
    )
    .unwrap();
    let (mut child, addr) = serve(&config);
    let url = format!("postgresql://app@{addr}/app");
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("CREATE TABLE kept (id int PRIMARY KEY, v text); INSERT INTO kept VALUES (1, 'one'), (2, 'two')")
        .unwrap();
    // An open transaction at shutdown is rolled back, not half-kept.
    c.batch_execute("BEGIN; INSERT INTO kept VALUES (3, 'uncommitted')").unwrap();
    terminate(&mut child);
    drop(c);
    assert!(dir.path().join("data").is_dir(), "data_dir is relative to the config file");
    let (mut child, addr) = serve(&config);
    let mut c = postgres::Client::connect(&format!("postgresql://app@{addr}/app"), postgres::NoTls).unwrap();
    let rows: Vec<i32> = c.query("SELECT id FROM kept ORDER BY id", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(rows, [1, 2]);
    terminate(&mut child);
}

#[test]
fn bad_config_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pgtier.toml");
    std::fs::write(&config, "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\nmax_conections = 3\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier")).args(["serve", "--config"]).arg(&config).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("line 3: unknown field `max_conections`"), "{stderr}");
}

#[test]
fn sighup_reloads_auth_for_new_connections() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pgtier.toml");
    let text = |password: &str, max: u32| {
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\nmax_connections = {max}\n[auth]\nfailure_delay_ms = 10\n[[auth.users]]\nname = \"app\"\npassword = \"{password}\"\n"
        )
    };
    std::fs::write(&config, text("old pw", 10)).unwrap();
    let (mut child, addr) = serve(&config);
    let url = |password: &str| format!("postgresql://app:{}@{addr}/app", password.replace(' ', "%20"));
    let mut open = postgres::Client::connect(&url("old pw"), postgres::NoTls).unwrap();
    std::fs::write(&config, text("new pw", 20)).unwrap();
    // SAFETY: signals our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGHUP);
    }
    let started = std::time::Instant::now();
    while postgres::Client::connect(&url("new pw"), postgres::NoTls).is_err() {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "SIGHUP did not reload");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let e = postgres::Client::connect(&url("old pw"), postgres::NoTls).err().unwrap();
    assert_eq!(e.code().map(|c| c.code()), Some("28P01"));
    // The session opened before the reload goes on.
    open.batch_execute("CREATE TABLE t (id int); INSERT INTO t VALUES (1)").unwrap();
    drop(open);
    terminate(&mut child);
}

#[test]
fn serve_logs_json_lines_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pgtier.toml");
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\n[auth]\nmethod = \"trust\"\n[log]\nlog_min_duration_statement = 0\n",
    )
    .unwrap();
    let (mut child, addr, lines) = serve_with(&config, &["--log-format", "json"]);
    let mut c = postgres::Client::connect(&format!("postgresql://app@{addr}/app"), postgres::NoTls).unwrap();
    c.batch_execute("SELECT 1").unwrap();
    drop(c);
    terminate(&mut child);
    // The reader thread may still be behind the exited process.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !lines.lock().unwrap().iter().any(|l| l == "pgtier: stopped") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let lines = lines.lock().unwrap().clone();
    let events: Vec<serde_json::Value> = lines
        .iter()
        .filter(|l| !l.starts_with("pgtier: "))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for message in ["connection received", "authentication succeeded", "slow statement", "disconnection"] {
        assert!(events.iter().any(|e| e["message"] == message), "{message:?} missing: {lines:#?}");
    }
    let ok = events.iter().find(|e| e["message"] == "authentication succeeded").unwrap();
    assert_eq!((&ok["user"], &ok["method"], &ok["span"]["database"]), (&"app".into(), &"trust".into(), &"app".into()));
    assert!(lines.iter().any(|l| l == "pgtier: stopped"), "{lines:#?}");

    // A bad [log] value: one line naming the key, before anything listens.
    std::fs::write(&config, "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\n[log]\nlevel = \"loud\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier")).args(["serve", "--config"]).arg(&config).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.lines().count() == 1, "{stderr}");
    assert!(stderr.contains("[log] level must be"), "{stderr}");
}
