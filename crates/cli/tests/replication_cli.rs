//! `[replication]` between two `pgtier serve` processes over TCP: a
//! standby seeded with `pgtier backup` + `pgtier restore --standby`
//! follows its active (same rows, compared by full scans of both), refuses
//! writes with 25006, answers `pg_is_in_recovery()` and reports
//! `transaction_read_only`; in sync mode a kill -9 of the active under
//! writers loses no acknowledged commit once the standby is promoted with
//! `SELECT pg_promote()`, after which it takes writes; a sync commit whose
//! standby is gone fails with 08007 instead of succeeding.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: i32 = 4;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn write_config(path: &Path, data_dir: &Path, replication: &str) {
    let config = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\ncommit_mode = \"sync\"\n[auth]\nmethod = \"trust\"\n[replication]\n{replication}\n",
        data_dir.display()
    );
    std::fs::write(path, config).unwrap();
}

fn serve(config: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["serve", "--config"])
        .arg(config)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr =
        first.strip_prefix("pgtier: listening on ").unwrap_or_else(|| panic!("{first}")).split(' ').next().unwrap();
    let addr = addr.to_owned();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            eprintln!("[server] {line}");
        }
    });
    (child, format!("postgresql://app@{addr}/app"))
}

fn kill(child: &mut Child, signal: i32) {
    // SAFETY: signals our own child process.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let _ = child.wait();
}

fn pgtier(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier")).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// The one row of `pgtier_replication`, by column name.
fn replication(c: &mut postgres::Client) -> std::collections::HashMap<String, String> {
    let mut out = std::collections::HashMap::new();
    for m in c.simple_query("SELECT * FROM pgtier_replication").unwrap() {
        if let postgres::SimpleQueryMessage::Row(row) = m {
            for (i, col) in row.columns().iter().enumerate() {
                out.insert(col.name().to_owned(), row.get(i).unwrap_or("").to_owned());
            }
        }
    }
    out
}

/// An active and a standby seeded from it, both serving.
struct Pair {
    _tmp: tempfile::TempDir,
    active: Child,
    active_url: String,
    standby: Child,
    standby_url: String,
}

fn pair(mode: &str, timeout_ms: u64) -> Pair {
    let tmp = tempfile::tempdir().unwrap();
    let repl = format!("127.0.0.1:{}", free_port());
    let active_config = tmp.path().join("active.toml");
    write_config(
        &active_config,
        &tmp.path().join("active"),
        &format!("role = \"active\"\nmode = \"{mode}\"\nlisten = \"{repl}\"\nsync_timeout_ms = {timeout_ms}"),
    );
    let (active, active_url) = serve(&active_config);
    let backup = tmp.path().join("backup");
    pgtier(&["backup", "--url", &active_url, backup.to_str().unwrap()]);
    let standby_dir = tmp.path().join("standby");
    pgtier(&["restore", "--standby", backup.to_str().unwrap(), standby_dir.to_str().unwrap()]);
    let standby_config = tmp.path().join("standby.toml");
    write_config(
        &standby_config,
        &standby_dir,
        &format!("role = \"standby\"\nmode = \"{mode}\"\nprimary = \"{repl}\""),
    );
    let (standby, standby_url) = serve(&standby_config);
    let mut c = connect(&active_url);
    let deadline = Instant::now() + Duration::from_secs(20);
    while replication(&mut c)["connected"] != "t" {
        assert!(Instant::now() < deadline, "the standby never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    Pair { _tmp: tmp, active, active_url, standby, standby_url }
}

fn caught_up(active: &mut postgres::Client) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = replication(active);
        if r["lag_bytes"] == "0" && r["standby_durable_lsn"] != "0" {
            return;
        }
        assert!(Instant::now() < deadline, "the standby did not catch up: {r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn scan(c: &mut postgres::Client) -> Vec<(i32, i32, String)> {
    c.query("SELECT id, w, pad FROM events ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// Inserts events and bumps counters until told to stop or the server
/// fails; records every id whose COMMIT was acknowledged.
fn writer(url: &str, w: i32, stop: &AtomicBool, acked: &Mutex<BTreeSet<i32>>) {
    let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) else { return };
    // Ids continue after the writer's earlier runs.
    let mut n = acked.lock().unwrap().iter().filter(|id| **id / 1_000_000 == w).count() as i32 * 2;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let id = w * 1_000_000 + n;
        let r = c.batch_execute(&format!(
            "BEGIN; INSERT INTO events VALUES ({id}, {w}, repeat('x', {})); \
             UPDATE counters SET n = n + 1 WHERE w = {w}; COMMIT",
            n % 300
        ));
        if let Err(e) = r {
            eprintln!(
                "writer {w}: {e} {:?}",
                e.as_db_error().map(|d| (d.code().code().to_owned(), d.message().to_owned()))
            );
            return;
        }
        acked.lock().unwrap().insert(id);
    }
}

fn setup(c: &mut postgres::Client) {
    c.batch_execute(
        "CREATE TABLE events (id int PRIMARY KEY, w int NOT NULL, pad text); \
         CREATE INDEX events_w ON events (w); \
         CREATE TABLE counters (w int PRIMARY KEY, n int NOT NULL); \
         INSERT INTO counters VALUES (0, 0), (1, 0), (2, 0), (3, 0)",
    )
    .unwrap();
}

/// Waits until `n` commits are acknowledged (the writers stop on an error).
fn wait_acked(acked: &Mutex<BTreeSet<i32>>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.lock().unwrap().len() < n {
        assert!(Instant::now() < deadline, "only {} of {n} commits acknowledged", acked.lock().unwrap().len());
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn run_writers(
    url: &str,
    stop: &Arc<AtomicBool>,
    acked: &Arc<Mutex<BTreeSet<i32>>>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..WRITERS)
        .map(|w| {
            let (url, stop, acked) = (url.to_owned(), Arc::clone(stop), Arc::clone(acked));
            std::thread::spawn(move || writer(&url, w, &stop, &acked))
        })
        .collect()
}

#[test]
fn a_sync_standby_follows_refuses_writes_and_keeps_every_acknowledged_commit_across_a_kill() {
    let mut p = pair("sync", 10_000);
    let mut a = connect(&p.active_url);
    setup(&mut a);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let writers = run_writers(&p.active_url, &stop, &acked);
    wait_acked(&acked, 400);
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    caught_up(&mut a);
    let mut s = connect(&p.standby_url);
    // Differential: the standby's rows are the active's.
    let rows = scan(&mut a);
    assert_eq!(rows.len(), acked.lock().unwrap().len());
    assert_eq!(scan(&mut s), rows);
    let count_w1 = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT count(*) FROM events WHERE w = 1", &[]).unwrap().get(0)
    };
    assert_eq!(count_w1(&mut s), count_w1(&mut a), "the index on the standby answers as the active's");
    let counters = |c: &mut postgres::Client| -> Vec<(i32, i32)> {
        c.query("SELECT w, n FROM counters ORDER BY w", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect()
    };
    assert_eq!(counters(&mut s), counters(&mut a));

    // Read-only, as a PostgreSQL hot standby.
    let e = s.batch_execute("INSERT INTO counters VALUES (9, 0)").unwrap_err();
    assert_eq!(e.code().unwrap().code(), "25006", "{e}");
    let e = s.batch_execute("CREATE TABLE nope (k int PRIMARY KEY)").unwrap_err();
    assert_eq!(e.code().unwrap().code(), "25006", "{e}");
    let in_recovery =
        |c: &mut postgres::Client| -> bool { c.query_one("SELECT pg_is_in_recovery()", &[]).unwrap().get(0) };
    assert!(in_recovery(&mut s));
    assert!(!in_recovery(&mut a));
    let show = |c: &mut postgres::Client| -> String { c.query_one("SHOW transaction_read_only", &[]).unwrap().get(0) };
    assert_eq!(show(&mut s), "on");
    assert_eq!(show(&mut a), "off");
    let e = a.batch_execute("SELECT pg_promote()").unwrap_err();
    assert_eq!(e.code().unwrap().code(), "55000", "an active is not in recovery");

    // kill -9 the active under writers: every acknowledged commit survives.
    let writers = {
        stop.store(false, Ordering::Relaxed);
        run_writers(&p.active_url, &stop, &acked)
    };
    let before = acked.lock().unwrap().len();
    wait_acked(&acked, before + 300);
    kill(&mut p.active, libc::SIGKILL);
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let promoted = Instant::now();
    let mut messages = s.simple_query("SELECT pg_promote()").unwrap();
    let answer = messages.drain(..).find_map(|m| match m {
        postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
        _ => None,
    });
    assert_eq!(answer.as_deref(), Some("t"));
    eprintln!("promotion took {:?}", promoted.elapsed());
    let present: BTreeSet<i32> = scan(&mut s).into_iter().map(|(id, _, _)| id).collect();
    let lost: Vec<_> = acked.difference(&present).collect();
    assert!(
        lost.is_empty(),
        "acknowledged on the active, missing on the promoted standby: {} of {}",
        lost.len(),
        acked.len()
    );
    eprintln!("acknowledged {}, present {} (the difference: committed, not acknowledged)", acked.len(), present.len());
    // Counters agree with the rows: no transaction by half.
    for (w, n) in counters(&mut s) {
        let rows: i64 = s.query_one("SELECT count(*) FROM events WHERE w = $1", &[&w]).unwrap().get(0);
        assert_eq!(i64::from(n), rows, "writer {w}");
    }
    // Promoted: read-write, not in recovery, for new sessions.
    let mut s2 = connect(&p.standby_url);
    assert!(!in_recovery(&mut s2));
    s2.batch_execute("INSERT INTO counters VALUES (9, 0); CREATE TABLE after_promote (k int PRIMARY KEY)").unwrap();
    assert_eq!(s2.query_one("SELECT count(*) FROM counters", &[]).unwrap().get::<_, i64>(0), 5);
    kill(&mut p.standby, libc::SIGTERM);
}

#[test]
fn a_sync_commit_whose_standby_is_gone_fails_with_08007_not_success() {
    let mut p = pair("sync", 500);
    let mut a = connect(&p.active_url);
    setup(&mut a);
    kill(&mut p.standby, libc::SIGTERM);
    let e = a.batch_execute("INSERT INTO counters VALUES (7, 7)").unwrap_err();
    assert_eq!(e.code().unwrap().code(), "08007", "{e}");
    // Durable here all the same: the outcome is unknown, not a rollback.
    let n: i64 = a.query_one("SELECT count(*) FROM counters WHERE w = 7", &[]).unwrap().get(0);
    assert_eq!(n, 1);
    let r = replication(&mut a);
    assert_eq!(r["connected"], "f");
    assert_ne!(r["lag_bytes"], "0", "{r:?}");
    kill(&mut p.active, libc::SIGTERM);
}

#[test]
fn async_mode_loses_at_most_the_reported_window() {
    let mut p = pair("async", 10_000);
    let mut a = connect(&p.active_url);
    setup(&mut a);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let writers = run_writers(&p.active_url, &stop, &acked);
    wait_acked(&acked, 500);
    // The window just before the kill, and the WAL end then.
    let window = replication(&mut a);
    kill(&mut p.active, libc::SIGKILL);
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let mut s = connect(&p.standby_url);
    s.simple_query("SELECT pg_promote()").unwrap();
    let present: BTreeSet<i32> = scan(&mut s).into_iter().map(|(id, _, _)| id).collect();
    let lost = acked.difference(&present).count();
    let standby_end: u64 = replication_end(&mut s);
    let active_end: u64 = window["active_durable_lsn"].parse().unwrap();
    let window_bytes: u64 = window["lag_bytes"].parse().unwrap();
    eprintln!(
        "async: {} acknowledged, {lost} lost; window before the kill {window_bytes} bytes / {} ms",
        acked.len(),
        window["lag_ms"]
    );
    // What the standby has reaches at least the active's durable end at the
    // moment the window was read, minus that window.
    assert!(
        standby_end + window_bytes >= active_end,
        "standby end {standby_end}, active end {active_end}, window {window_bytes}"
    );
    // No duplicate, no half transaction.
    for w in 0..WRITERS {
        let n: i32 = s.query_one("SELECT n FROM counters WHERE w = $1", &[&w]).unwrap().get(0);
        let rows: i64 = s.query_one("SELECT count(*) FROM events WHERE w = $1", &[&w]).unwrap().get(0);
        assert_eq!(i64::from(n), rows);
    }
    kill(&mut p.standby, libc::SIGTERM);
}

fn replication_end(c: &mut postgres::Client) -> u64 {
    replication(c)["active_durable_lsn"].parse().unwrap()
}

/// An active and a standby seeded from it over `backend`, in sync mode,
/// with `[cache]` lines `cache`: (active, its URL, standby, its URL).
fn backend_pair(tmp: &Path, backend: &str, cache: &str) -> (Child, String, Child, String) {
    let repl = format!("127.0.0.1:{}", free_port());
    let extra = |role: &str| format!("{role}\nmode = \"sync\"\n[backend]\nurl = {backend:?}\n[cache]\n{cache}\n");
    let active_config = tmp.join("active.toml");
    write_config(&active_config, &tmp.join("active"), &extra(&format!("role = \"active\"\nlisten = \"{repl}\"")));
    let (active, active_url) = serve(&active_config);
    let backup = tmp.join("backup");
    pgtier(&["backup", "--url", &active_url, backup.to_str().unwrap()]);
    let standby_dir = tmp.join("standby");
    pgtier(&["restore", "--standby", backup.to_str().unwrap(), standby_dir.to_str().unwrap()]);
    let standby_config = tmp.join("standby.toml");
    write_config(&standby_config, &standby_dir, &extra(&format!("role = \"standby\"\nprimary = \"{repl}\"")));
    let (standby, standby_url) = serve(&standby_config);
    (active, active_url, standby, standby_url)
}

/// AWT over the private PostgreSQL: kill -9 of the active under writers,
/// promotion, drain. PostgreSQL ends with every acknowledged write exactly
/// once (each writer's counter equals its rows; no acknowledged row
/// missing): write-through resumed on the promoted standby from
/// PostgreSQL's progress rows, which are keyed by the incarnation the
/// standby shares.
#[test]
fn awt_resumes_on_the_promoted_standby_without_loss_or_repeat() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let backend = cluster.create_database(&format!("cli_ha_awt_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&backend).unwrap();
    pg.batch_execute(
        "CREATE TABLE events (id int PRIMARY KEY, w int NOT NULL, pad text); \
         CREATE TABLE counters (w int PRIMARY KEY, n int NOT NULL); \
         INSERT INTO counters VALUES (0, 0), (1, 0), (2, 0), (3, 0)",
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (mut active, active_url, mut standby, standby_url) =
        backend_pair(tmp.path(), &backend, "awt_node = \"ha\"\nawt_apply_connections = 2");
    let mut a = connect(&active_url);
    for statement in [
        "CREATE AWT CACHE GROUP ge FROM events",
        "CREATE AWT CACHE GROUP gc FROM counters",
        "LOAD CACHE GROUP gc",
        "LOAD CACHE GROUP ge",
    ] {
        a.batch_execute(statement).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let writers = run_writers(&active_url, &stop, &acked);
    wait_acked(&acked, 600);
    kill(&mut active, libc::SIGKILL);
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let mut s = connect(&standby_url);
    s.simple_query("SELECT pg_promote()").unwrap();
    // Drain: PostgreSQL reaches the promoted node's rows.
    let local: Vec<(i32, i32)> = {
        let mut s2 = connect(&standby_url);
        s2.query("SELECT w, n FROM counters ORDER BY w", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let remote: Vec<(i32, i32)> = pg
            .query("SELECT w, n FROM counters ORDER BY w", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        if remote == local {
            break;
        }
        assert!(Instant::now() < deadline, "PostgreSQL {remote:?}, promoted pgtier {local:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let in_pg: BTreeSet<i32> = pg.query("SELECT id FROM events", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    let lost: Vec<_> = acked.difference(&in_pg).collect();
    assert!(lost.is_empty(), "{} acknowledged writes missing in PostgreSQL", lost.len());
    for (w, n) in &local {
        let rows: i64 = pg.query_one("SELECT count(*) FROM events WHERE w = $1", &[w]).unwrap().get(0);
        assert_eq!(i64::from(*n), rows, "writer {w}: counter and rows disagree in PostgreSQL (a repeat or a loss)");
    }
    eprintln!("awt: {} acknowledged, {} in PostgreSQL after the failover", acked.len(), in_pg.len());
    kill(&mut standby, libc::SIGTERM);
}

/// A DYNAMIC group on a standby: its cache stays closed until promotion,
/// so a key the active would load from PostgreSQL must be refused there,
/// never answered "no row"; keys it has cached answer as on the active.
/// Also a group created while the standby runs (it arrives as DDL).
#[test]
fn a_dynamic_group_on_a_standby_refuses_what_it_would_load() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let backend = cluster.create_database(&format!("cli_ha_dynamic_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&backend).unwrap();
    pg.batch_execute(
        "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL); \
         INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 100) g",
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (mut active, active_url, mut standby, standby_url) = backend_pair(tmp.path(), &backend, "awt_node = \"dyn\"");
    let mut a = connect(&active_url);
    a.batch_execute("CREATE DYNAMIC AWT CACHE GROUP gi FROM items").unwrap();
    // Key 7 is loaded on the active by its miss; key 8 never is.
    let name: String = a.query_one("SELECT name FROM items WHERE id = 7", &[]).unwrap().get(0);
    assert_eq!(name, "item 7");
    caught_up(&mut a);
    let mut s = connect(&standby_url);
    let cached: String = s.query_one("SELECT name FROM items WHERE id = 7", &[]).unwrap().get(0);
    assert_eq!(cached, "item 7");
    let error = s.query("SELECT name FROM items WHERE id = 8", &[]).unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("0A000"), "{error}");
    let message = error.as_db_error().map(|e| e.message().to_owned()).unwrap_or_default();
    assert!(message.contains("gi"), "{message}");
    // Promoted, the cache opens: the miss loads from PostgreSQL.
    kill(&mut active, libc::SIGKILL);
    s.simple_query("SELECT pg_promote()").unwrap();
    let mut s2 = connect(&standby_url);
    let loaded: String = s2.query_one("SELECT name FROM items WHERE id = 8", &[]).unwrap().get(0);
    assert_eq!(loaded, "item 8");
    kill(&mut standby, libc::SIGTERM);
}
