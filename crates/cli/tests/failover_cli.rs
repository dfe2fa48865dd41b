//! Automatic failover of a `pgtier serve` pair by the lease in PostgreSQL
//! (`[replication] lease_ms`), against the harness's private PostgreSQL:
//!
//! - rounds of kill -9 of whichever member is active, under 8 TATP
//!   writers (failover/tatp_writers.rs: the standard mix, each writer on
//!   its own subscribers) that reach the pair through a multi-host URL
//!   with `target_session_attrs=read-write`; the standby detects and
//!   promotes on its own, the killed member is re-seeded as the new
//!   standby. After each promotion every writer's rows on the new active
//!   are checked against what was acknowledged: nothing lost in sync mode,
//!   in async mode only writes within the window the active reported
//!   before the kill. PostgreSQL, after write-through drains, equals the
//!   final active row for row. Detection and promotion times per round are
//!   printed. `FAILOVER_ROUNDS` sets the count (2 by default; the
//!   documented full run is 20).
//! - a partition: the active cut off from PostgreSQL and from its standby
//!   (it runs in a network namespace whose link to the host the test takes
//!   down: packets dropped, no reset) while its clients still reach it. It
//!   fences itself before the standby can promote: no write it
//!   acknowledged was acknowledged after the standby's first write, and in
//!   sync mode none is lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "failover/netns.rs"]
mod netns;
#[path = "failover/tatp_writers.rs"]
mod tatp_writers;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: i32 = 8;
const LEASE_MS: u64 = 2000;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn pgtier(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier")).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// One member of the pair: fixed ports across its restarts.
struct Node {
    name: &'static str,
    sql_port: u16,
    repl_port: u16,
    dir: PathBuf,
    /// `[cache] awt_node`: distinct per test, since PostgreSQL's
    /// replication origins (one per node) are cluster-wide.
    awt_node: String,
    /// Serves a standby of its own once promoted (`listen` on a standby).
    serves_standby: bool,
    /// More `[replication]` keys.
    extra: String,
    /// Every line the server wrote to stderr once listening, across its restarts.
    log: Arc<Mutex<Vec<String>>>,
    child: Option<Child>,
    /// Runs in this network namespace, listening on all its addresses.
    isolated: Option<Arc<netns::Isolated>>,
}

impl Node {
    fn new(tmp: &Path, name: &'static str, awt_node: &str) -> Node {
        Node {
            name,
            awt_node: awt_node.to_owned(),
            sql_port: free_port(),
            repl_port: free_port(),
            dir: tmp.join(name),
            serves_standby: true,
            extra: String::new(),
            log: Arc::default(),
            child: None,
            isolated: None,
        }
    }

    /// Where its clients reach it.
    fn url(&self) -> String {
        let host = self.isolated.as_ref().map_or("127.0.0.1", |i| &i.client_address);
        format!("postgresql://app@{host}:{}/app", self.sql_port)
    }

    /// Where its standby reaches it.
    fn primary(&self) -> String {
        let host = self.isolated.as_ref().map_or("127.0.0.1", |i| &i.backend_address);
        format!("{host}:{}", self.repl_port)
    }

    /// `pgtier` as this member runs it.
    fn command(&self) -> Command {
        let program = Path::new(env!("CARGO_BIN_EXE_pgtier"));
        self.isolated.as_ref().map_or_else(|| Command::new(program), |i| i.command(program))
    }

    /// Starts `pgtier serve` as `role`; a standby follows `primary`.
    fn start(&mut self, role: &str, primary: Option<&str>, mode: &str, backend: &str) {
        let primary = primary.map(|p| format!("primary = \"{p}\"\n")).unwrap_or_default();
        // Isolated, it listens beyond loopback: trust its test networks by name.
        let (host, auth) = match &self.isolated {
            Some(_) => (
                "0.0.0.0",
                "[[auth.rules]]\naddress = \"10.0.0.0/8\"\nmethod = \"trust\"\nallow_trust_from_network = true",
            ),
            None => ("127.0.0.1", "method = \"trust\""),
        };
        let listen = if self.serves_standby || role == "active" {
            format!("listen = \"{host}:{}\"\n", self.repl_port)
        } else {
            String::new()
        };
        let config = format!(
            "listen = \"{host}:{sql}\"\ndata_dir = \"{dir}\"\ncommit_mode = \"sync\"\n\
             [auth]\n{auth}\n[backend]\nurl = {backend:?}\n[cache]\nawt_node = \"{node}\"\n\
             [replication]\nrole = \"{role}\"\nmode = \"{mode}\"\n{listen}{primary}\
             sync_timeout_ms = 2000\nlease_ms = {LEASE_MS}\n{extra}",
            sql = self.sql_port,
            dir = self.dir.display(),
            node = self.awt_node,
            extra = self.extra,
        );
        let path = self.dir.with_extension("toml");
        std::fs::write(&path, config).unwrap();
        let mut child = self.command().args(["serve", "--config"]).arg(&path).stderr(Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let name = self.name;
        // Warnings of its start (e.g. a standby still dropped) come first.
        loop {
            let line = lines.next().unwrap_or_else(|| panic!("{name}: exited before listening")).unwrap();
            if line.starts_with("pgtier: listening on ") {
                break;
            }
            eprintln!("[{name}] {line}");
        }
        let log = Arc::clone(&self.log);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                eprintln!("[{name}] {line}");
                log.lock().unwrap().push(line);
            }
        });
        self.child = Some(child);
    }

    fn kill(&mut self, signal: i32) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signals our own child process.
            unsafe {
                libc::kill(child.id() as i32, signal);
            }
            let _ = child.wait();
        }
    }

    /// Re-seeds this (dead) member's directory from `active` and starts it
    /// as that one's standby.
    fn reseed_from(&mut self, active: &Node, mode: &str, backend: &str) {
        let backup = self.dir.with_extension("backup");
        let _ = std::fs::remove_dir_all(&backup);
        let _ = std::fs::remove_dir_all(&self.dir);
        pgtier(&["backup", "--url", &active.url(), backup.to_str().unwrap()]);
        pgtier(&["restore", "--standby", backup.to_str().unwrap(), self.dir.to_str().unwrap()]);
        self.start("standby", Some(&active.primary()), mode, backend);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill(libc::SIGKILL);
    }
}

fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// The one row of `pgtier_replication`, by column name.
fn replication(c: &mut postgres::Client) -> Result<BTreeMap<String, String>, postgres::Error> {
    let mut out = BTreeMap::new();
    for m in c.simple_query("SELECT * FROM pgtier_replication")? {
        if let postgres::SimpleQueryMessage::Row(row) = m {
            for (i, col) in row.columns().iter().enumerate() {
                out.insert(col.name().to_owned(), row.get(i).unwrap_or("").to_owned());
            }
        }
    }
    Ok(out)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `standby` follows `active` and is ready to take over.
fn standby_ready(active: &Node, standby: &Node) {
    let mut c = connect(&active.url());
    wait_for("the standby to connect", Duration::from_secs(30), || {
        replication(&mut c).is_ok_and(|r| r["connected"] == "t")
    });
    let mut s = connect(&standby.url());
    wait_for("the standby to catch up", Duration::from_secs(30), || {
        replication(&mut s).is_ok_and(|r| r["lease"] == "waiting")
    });
}

/// Acknowledged ids, with when the acknowledgement arrived.
type Ledger = Arc<Mutex<BTreeMap<i32, Instant>>>;

/// Inserts events and bumps its counter, reconnecting through `url` after
/// any error; records every id whose COMMIT was acknowledged. Ids are
/// never reused (a failed commit's outcome may be either).
fn writer(url: String, w: i32, stop: Arc<AtomicBool>, acked: Ledger) {
    let mut n = 0;
    let mut client: Option<postgres::Client> = None;
    while !stop.load(Ordering::Relaxed) {
        let Some(c) = client.as_mut() else {
            client = postgres::Client::connect(&url, postgres::NoTls).ok();
            if client.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            continue;
        };
        n += 1;
        let id = w * 1_000_000 + n;
        let r = c.batch_execute(&format!(
            "BEGIN; INSERT INTO events VALUES ({id}, {w}, repeat('x', {})); \
             UPDATE counters SET n = n + 1 WHERE w = {w}; COMMIT",
            n % 200
        ));
        match r {
            Ok(()) => {
                acked.lock().unwrap().insert(id, Instant::now());
            }
            Err(_) => client = None,
        }
    }
}

fn run_writers(url: &str, stop: &Arc<AtomicBool>, acked: &Ledger) -> Vec<std::thread::JoinHandle<()>> {
    (0..WRITERS)
        .map(|w| {
            let (url, stop, acked) = (url.to_owned(), Arc::clone(stop), Arc::clone(acked));
            std::thread::spawn(move || writer(url, w, stop, acked))
        })
        .collect()
}

fn ids(c: &mut postgres::Client) -> BTreeSet<i32> {
    c.query("SELECT id FROM events", &[]).unwrap().iter().map(|r| r.get(0)).collect()
}

fn counters(c: &mut postgres::Client) -> Vec<(i32, i32)> {
    c.query("SELECT w, n FROM counters ORDER BY w", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// Each writer's counter equals its rows: no transaction by half, none twice.
fn assert_counters_match_rows(c: &mut postgres::Client, side: &str) {
    for (w, n) in counters(c) {
        let rows: i64 = c.query_one("SELECT count(*) FROM events WHERE w = $1", &[&w]).unwrap().get(0);
        assert_eq!(i64::from(n), rows, "{side}: writer {w}'s counter and rows disagree");
    }
}

/// Asserts PostgreSQL holds exactly `expected` ids; when not, says which
/// runs of ids differ and what write-through recorded there (its progress
/// rows and refused transactions), so a failure on CI explains itself.
fn assert_pg_ids(pg: &mut postgres::Client, expected: &BTreeSet<i32>, side: &str) {
    let actual = ids(pg);
    if &actual == expected {
        return;
    }
    let runs = |set: Vec<i32>| {
        let mut out: Vec<(i32, i32)> = Vec::new();
        for id in set {
            match out.last_mut() {
                Some((_, end)) if *end + 1 == id => *end = id,
                _ => out.push((id, id)),
            }
        }
        out.iter().map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect::<Vec<_>>().join(", ")
    };
    let missing = runs(expected.difference(&actual).copied().collect());
    let extra = runs(actual.difference(expected).copied().collect());
    let rows = |pg: &mut postgres::Client, sql: &str| -> String {
        match pg.simple_query(sql) {
            Ok(messages) => messages
                .iter()
                .filter_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(r) => {
                        Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL")).collect::<Vec<_>>().join(" | "))
                    }
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n  "),
            Err(e) => e.to_string(),
        }
    };
    let progress =
        rows(pg, "SELECT node, incarnation, grp, stream, next_lsn FROM pgtier.awt_progress ORDER BY 1, 2, 3, 4");
    let errors = rows(pg, "SELECT node, lsn, sqlstate, message FROM pgtier.awt_errors ORDER BY id LIMIT 20");
    let leases = rows(pg, "SELECT * FROM pgtier.leases");
    panic!(
        "PostgreSQL's rows are not {side}'s: missing {missing}; extra {extra}\nprogress:\n  {progress}\nerrors:\n  {errors}\nleases:\n  {leases}"
    );
}

/// PostgreSQL once write-through has drained: its counters are `local`'s.
fn drained(backend: &str, local: &[(i32, i32)], timeout: Duration) -> postgres::Client {
    let mut pg = pgtier_backend::connect(backend).unwrap();
    wait_for("write-through to drain", timeout, || counters(&mut pg) == local);
    pg
}

fn backend_tables(name: &str) -> String {
    tables_in(pgtier_backend::shared_cluster().expect("private PostgreSQL"), name)
}

fn tables_in(cluster: &pgtier_backend::PrivateCluster, name: &str) -> String {
    let backend = cluster.create_database(&format!("{name}_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&backend).unwrap();
    let values: Vec<String> = (0..WRITERS).map(|w| format!("({w}, 0)")).collect();
    pg.batch_execute(&format!(
        "CREATE TABLE events (id int PRIMARY KEY, w int NOT NULL, pad text); \
         CREATE TABLE counters (w int PRIMARY KEY, n int NOT NULL); \
         INSERT INTO counters VALUES {}",
        values.join(", ")
    ))
    .unwrap();
    backend
}

fn cache_both_tables(active: &Node) {
    let mut a = connect(&active.url());
    for statement in [
        "CREATE AWT CACHE GROUP ge FROM events",
        "CREATE AWT CACHE GROUP gc FROM counters",
        "LOAD CACHE GROUP gc",
        "LOAD CACHE GROUP ge",
    ] {
        a.batch_execute(statement).unwrap();
    }
}

/// An active and its standby over `backend`, the events and counters
/// cached, ready for a failover.
fn ready_pair(tmp: &Path, backend: &str, node: &str, mode: &str, b_serves_standby: bool) -> (Node, Node) {
    let (a, b) = start_pair(tmp, backend, node, mode, b_serves_standby);
    cache_both_tables(&a);
    (a, b)
}

/// An active and its standby over `backend`, nothing cached yet.
fn start_pair(tmp: &Path, backend: &str, node: &str, mode: &str, b_serves_standby: bool) -> (Node, Node) {
    let mut a = Node::new(tmp, "a", node);
    let mut b = Node::new(tmp, "b", node);
    b.serves_standby = b_serves_standby;
    a.start("active", None, mode, backend);
    b.reseed_from(&a, mode, backend);
    standby_ready(&a, &b);
    (a, b)
}

/// Both members, for drivers that find the read-write one.
fn multi_host_url(a: &Node, b: &Node) -> String {
    format!(
        "postgresql://app@127.0.0.1:{},127.0.0.1:{}/app?target_session_attrs=read-write&connect_timeout=2",
        a.sql_port, b.sql_port
    )
}

/// What one kill -9 of the active measured.
struct Promotion {
    detect: Duration,
    promote: Duration,
    /// The standby's durable end as last seen while it was the standby.
    standby_end: u64,
    /// `pgtier_replication` on the active just before the kill, and when
    /// it was asked for.
    window: BTreeMap<String, String>,
    asked: Instant,
}

/// Kills `active` with SIGKILL and waits for `standby` to take over;
/// `after_kill` runs right after the signal.
fn kill_and_promote(active: &mut Node, standby: &Node, after_kill: impl FnOnce()) -> Promotion {
    let mut watch = connect(&standby.url());
    let asked = Instant::now();
    let window = replication(&mut connect(&active.url())).unwrap();
    active.kill(libc::SIGKILL);
    let killed = Instant::now();
    after_kill();
    let (mut standby_end, mut detected, mut promoted) = (0u64, None, None);
    let deadline = killed + Duration::from_secs(30);
    while promoted.is_none() {
        assert!(Instant::now() < deadline, "no promotion within 30 s of the kill");
        let r = replication(&mut watch).unwrap();
        if r["role"] == "standby" {
            standby_end = r["standby_durable_lsn"].parse().unwrap();
        }
        if detected.is_none() && r["lease"] == "held" {
            detected = Some(Instant::now());
        }
        if r["role"] == "active" {
            let mut fresh = connect(&standby.url());
            let ro: String = fresh.query_one("SHOW transaction_read_only", &[]).unwrap().get(0);
            if ro == "off" {
                promoted = Some(Instant::now());
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let (detected, promoted) = (detected.unwrap(), promoted.unwrap());
    Promotion { detect: detected - killed, promote: promoted - detected, standby_end, window, asked }
}

/// Every acknowledged write `lost` on the promoted standby is one the
/// active reported as not yet on its standby: in sync mode none; in async
/// mode the promoted log lacks at most `lag_bytes` and every lost write was
/// acknowledged after the oldest commit the standby lacked (`lag_ms` before
/// the report).
fn check_window(p: &Promotion, lost: &[tatp_writers::Lost], async_mode: bool) {
    if !async_mode {
        assert!(lost.is_empty(), "sync mode: acknowledged writes missing on the promoted standby: {lost:#?}");
        return;
    }
    let active_end: u64 = p.window["active_durable_lsn"].parse().unwrap();
    let window_bytes: u64 = p.window["lag_bytes"].parse().unwrap();
    assert!(
        p.standby_end + window_bytes >= active_end,
        "lost more than the window: standby end {}, active end {active_end}, window {window_bytes}",
        p.standby_end
    );
    let lag_ms: u64 = p.window["lag_ms"].parse().unwrap();
    let oldest_unreplicated = p.asked - Duration::from_millis(lag_ms + 2);
    for l in lost {
        assert!(
            l.acked_at >= oldest_unreplicated,
            "lost a write acknowledged {} ms before the window ({lag_ms} ms) began: {}",
            (oldest_unreplicated - l.acked_at).as_millis(),
            l.what
        );
    }
}

/// The four TATP tables as text, in key order.
fn tatp_tables(c: &mut postgres::Client) -> Vec<String> {
    [
        "subscriber ORDER BY s_id",
        "access_info ORDER BY s_id, ai_type",
        "special_facility ORDER BY s_id, sf_type",
        "call_forwarding ORDER BY s_id, sf_type, start_time",
    ]
    .iter()
    .flat_map(|from| {
        let rows = c.simple_query(&format!("SELECT * FROM {from}")).unwrap();
        rows.into_iter().filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL")).collect::<Vec<_>>().join("|"))
            }
            _ => None,
        })
    })
    .collect()
}

/// Rounds of kill -9 of the active under 8 TATP writers (tatp_writers.rs)
/// reaching the pair through a multi-host URL; after each promotion the
/// writers pause and every writer's rows on the new active are checked
/// against what was acknowledged.
fn failover_rounds(mode: &str) {
    let rounds: usize = std::env::var("FAILOVER_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let async_mode = mode == "async";
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let backend = cluster.create_database(&format!("cli_failover_{mode}_{}", std::process::id())).unwrap();
    tatp_writers::populate(&mut pgtier_backend::connect(&backend).unwrap(), WRITERS);
    let tmp = tempfile::tempdir().unwrap();
    let (mut a, mut b) = start_pair(tmp.path(), &backend, &format!("fo{mode}"), mode, true);
    tatp_writers::cache(&a.url());
    let url = multi_host_url(&a, &b);
    let models: Vec<Arc<Mutex<tatp_writers::Model>>> =
        (0..WRITERS).map(|w| Arc::new(Mutex::new(tatp_writers::Model::read(&mut connect(&a.url()), w)))).collect();
    let control = Arc::new(tatp_writers::Control::default());
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (url, model, control) = (url.clone(), Arc::clone(&models[w as usize]), Arc::clone(&control));
            std::thread::spawn(move || tatp_writers::writer(url, w, model, control))
        })
        .collect();
    let acked = || control.acked_writes.load(Ordering::Relaxed);
    let mut results = Vec::new();
    let mut lost_total = 0;
    let (mut active, mut standby) = (&mut a, &mut b);
    for round in 0..rounds {
        let before = acked();
        wait_for("writes on the active", Duration::from_secs(60), || acked() >= before + 200);
        let p = kill_and_promote(active, standby, || control.request_pause());
        control.wait_paused(WRITERS as usize);
        let mut c = connect(&standby.url());
        let lost: Vec<_> = models.iter().flat_map(|m| m.lock().unwrap().verify(&mut c)).collect();
        check_window(&p, &lost, async_mode);
        lost_total += lost.len();
        eprintln!(
            "{mode} round {round}: detection {} ms, promotion {} ms, lost {} (window {} bytes, {} ms), {} writes acknowledged so far",
            p.detect.as_millis(),
            p.promote.as_millis(),
            lost.len(),
            p.window["lag_bytes"],
            p.window["lag_ms"],
            acked()
        );
        results.push(p);
        control.resume();
        active.reseed_from(standby, mode, &backend);
        standby_ready(standby, active);
        std::mem::swap(&mut active, &mut standby);
    }
    let before = acked();
    wait_for("writes after the last round", Duration::from_secs(60), || acked() >= before + 100);
    control.stop();
    for h in writers {
        h.join().unwrap();
    }
    // The final active holds every write acknowledged since the last
    // round's check, and no read contradicted an acknowledged write.
    let mut c = connect(&active.url());
    for m in &models {
        let mut m = m.lock().unwrap();
        let lost = m.verify(&mut c);
        assert!(lost.is_empty(), "acknowledged writes missing on the final active: {lost:#?}");
        assert!(m.wrong_reads.is_empty(), "reads contradicted acknowledged writes: {:#?}", m.wrong_reads);
    }
    // PostgreSQL after write-through drains: exactly the final active, and
    // write-through applied nothing twice (a repeated INSERT would have
    // failed there; a repeated UPDATE or DELETE would show in the rows).
    let local = tatp_tables(&mut c);
    let mut pg = pgtier_backend::connect(&backend).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while tatp_tables(&mut pg) != local {
        if Instant::now() > deadline {
            let remote = tatp_tables(&mut pg);
            let differ: Vec<_> = local.iter().zip(&remote).filter(|(l, r)| l != r).take(10).collect();
            panic!("PostgreSQL differs from the final active ({} vs {} rows): {differ:#?}", remote.len(), local.len());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let errors: i64 = pg.query_one("SELECT count(*) FROM pgtier.awt_errors", &[]).unwrap().get(0);
    assert_eq!(errors, 0, "write-through refused transactions in PostgreSQL");
    let mut detect: Vec<u128> = results.iter().map(|r| r.detect.as_millis()).collect();
    let mut promote: Vec<u128> = results.iter().map(|r| r.promote.as_millis()).collect();
    detect.sort_unstable();
    promote.sort_unstable();
    eprintln!(
        "{mode}: {rounds} rounds, {} writes acknowledged, {lost_total} lost; detection median {} ms max {} ms; promotion median {} ms max {} ms",
        acked(),
        detect[detect.len() / 2],
        detect[detect.len() - 1],
        promote[promote.len() / 2],
        promote[promote.len() - 1]
    );
    assert!(detect[detect.len() - 1] <= 5_000, "detection took over 5 s");
    assert!(promote[promote.len() - 1] <= 10_000, "promotion took over 10 s");
}
#[test]
fn sync_pair_fails_over_on_kill_without_losing_an_acknowledged_commit() {
    failover_rounds("sync");
}

#[test]
fn async_pair_fails_over_on_kill_losing_at_most_the_reported_window() {
    failover_rounds("async");
}

/// A TCP forwarder the test can cut: every connection through it is
/// closed and new ones are refused while cut.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
        let (cut2, open2) = (Arc::clone(&cut), Arc::clone(&open));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if cut2.load(Ordering::Acquire) {
                    continue; // dropped: refused
                }
                let Ok(server) = TcpStream::connect(&target) else { continue };
                let mut open = open2.lock().unwrap();
                open.push(client.try_clone().unwrap());
                open.push(server.try_clone().unwrap());
                for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, cut, open }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::Release);
    }
}

#[test]
fn a_partitioned_sync_active_stops_writing_before_its_standby_promotes() {
    partition("sync");
}

/// Async: the active goes on acknowledging commits after the cut, on its
/// lease alone, and stops before the standby's first write.
#[test]
fn a_partitioned_async_active_stops_writing_before_its_standby_promotes() {
    partition("async");
}

fn partition(mode: &str) {
    // The active runs in a network namespace: it reaches PostgreSQL and is
    // reached by its standby over one link, which the test takes down; its
    // clients reach it over another. PostgreSQL (a cluster of this test's
    // own) listens on the host's end of the first link too.
    let isolated = Arc::new(netns::Isolated::new());
    let cluster = pgtier_backend::PrivateCluster::start(pgtier_backend::ClusterOptions {
        settings: vec![("listen_addresses".to_owned(), format!("127.0.0.1,{}", isolated.host_address))],
        client_networks: vec![format!("{}/32", isolated.backend_address)],
        ..Default::default()
    })
    .unwrap();
    let backend = tables_in(&cluster, &format!("cli_failover_partition_{mode}"));
    let active_backend = backend.replace("@127.0.0.1:", &format!("@{}:", isolated.host_address));
    assert_ne!(active_backend, backend, "the backend URL names the loopback address: {backend}");
    let tmp = tempfile::tempdir().unwrap();
    let node = format!("fopart{mode}");
    let mut a = Node::new(tmp.path(), "a", &node);
    a.isolated = Some(Arc::clone(&isolated));
    let mut b = Node::new(tmp.path(), "b", &node);
    // Promoted, b has no standby: its write-through waits for none.
    b.serves_standby = false;
    a.start("active", None, mode, &active_backend);
    b.reseed_from(&a, mode, &backend);
    standby_ready(&a, &b);
    cache_both_tables(&a);
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Ledger = Arc::new(Mutex::new(BTreeMap::new()));
    let writers = run_writers(&a.url(), &stop, &acked);
    wait_for("writes", Duration::from_secs(60), || acked.lock().unwrap().len() >= 300);
    isolated.cut();
    let cut = Instant::now();
    // The standby's first write: probe it until one commits.
    let first_write = loop {
        assert!(cut.elapsed() < Duration::from_secs(30), "the standby never took over");
        if let Ok(mut c) = postgres::Client::connect(&b.url(), postgres::NoTls)
            && c.batch_execute("UPDATE counters SET n = n WHERE w = 0").is_ok()
            && c.query_one("SHOW transaction_read_only", &[]).is_ok_and(|r| r.get::<_, String>(0) == "off")
        {
            break Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("partition ({mode}): the standby wrote {} ms after the cut", (first_write - cut).as_millis());
    // Clients keep trying the old active for a while past the takeover.
    std::thread::sleep(Duration::from_millis(LEASE_MS));
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let last_ack = acked.values().max().copied().unwrap();
    assert!(
        last_ack < first_write,
        "the old active acknowledged a commit {} ms after the standby's first write",
        (last_ack - first_write).as_millis()
    );
    let present = ids(&mut connect(&b.url()));
    let lost: Vec<_> = acked.keys().filter(|id| !present.contains(id)).collect();
    eprintln!(
        "partition ({mode}): {} acknowledged ({} after the cut), the last {} ms after the cut and {} ms before the standby's first write; {} lost",
        acked.len(),
        acked.values().filter(|at| **at > cut).count(),
        (last_ack.saturating_duration_since(cut)).as_millis(),
        (first_write - last_ack).as_millis(),
        lost.len()
    );
    if mode == "sync" {
        assert!(lost.is_empty(), "sync mode: {} acknowledged commits missing on the new active", lost.len());
    }
    // Healed, the old active finds its lease taken and stays fenced.
    isolated.heal();
    let mut old = connect(&a.url());
    wait_for("the old active to see its lease taken", Duration::from_secs(20), || {
        replication(&mut old).is_ok_and(|r| r["lease"] == "fenced")
    });
    let e = old.batch_execute("UPDATE counters SET n = n + 1 WHERE w = 0").unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("25006"), "{e}");
    // PostgreSQL drains to the new active.
    let mut c = connect(&b.url());
    assert_counters_match_rows(&mut c, "new active");
    let local = counters(&mut c);
    let mut pg = drained(&backend, &local, Duration::from_secs(60));
    assert_pg_ids(&mut pg, &ids(&mut c), "the new active");
    assert_counters_match_rows(&mut pg, "PostgreSQL");
    // Restarted, the old active may not be the active again: the other
    // member holds the lease. It says so and exits.
    drop(old);
    a.kill(libc::SIGKILL);
    let out = a.command().args(["serve", "--config"]).arg(a.dir.with_extension("toml")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the old active started as the active again: {stderr}");
    assert!(stderr.contains("holds the pair's lease") && stderr.contains("re-seed"), "{stderr}");
}

/// `SELECT pgtier_switchover()` on the active under writers: it stops
/// writing, waits for its standby to have everything, gives the lease up;
/// the standby promotes on its next poll; no acknowledged commit is lost
/// (async mode, where only a switchover's wait makes that true); the old
/// active refuses writes (25006) and cannot be switched over again.
#[test]
fn a_switchover_hands_the_writes_over_without_loss() {
    let backend = backend_tables("cli_failover_switchover");
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = ready_pair(tmp.path(), &backend, "foswitch", "async", true);
    let url = multi_host_url(&a, &b);
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Ledger = Arc::new(Mutex::new(BTreeMap::new()));
    let writers = run_writers(&url, &stop, &acked);
    wait_for("writes", Duration::from_secs(60), || acked.lock().unwrap().len() >= 300);
    let mut admin = connect(&a.url());
    let started = Instant::now();
    pgtier(&["switchover", "--url", &a.url()]);
    let mut watch = connect(&b.url());
    wait_for("the standby to promote", Duration::from_secs(20), || {
        replication(&mut watch).is_ok_and(|r| r["role"] == "active")
    });
    eprintln!("switchover: the standby is the active {} ms after the call", started.elapsed().as_millis());
    let before = acked.lock().unwrap().len();
    wait_for("writes on the new active", Duration::from_secs(60), || acked.lock().unwrap().len() >= before + 200);
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    let acked: BTreeSet<i32> = acked.lock().unwrap().keys().copied().collect();
    let mut c = connect(&b.url());
    let present = ids(&mut c);
    let lost = acked.difference(&present).count();
    assert_eq!(lost, 0, "acknowledged commits missing after a switchover");
    assert_counters_match_rows(&mut c, "new active");
    let e = admin.batch_execute("UPDATE counters SET n = n + 1 WHERE w = 0").unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("25006"), "{e}");
    let e = admin.simple_query("SELECT pgtier_switchover()").unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("55000"), "{e}");
    let local = counters(&mut c);
    let mut pg = drained(&backend, &local, Duration::from_secs(60));
    assert_pg_ids(&mut pg, &present, "the active");
}

/// PostgreSQL stopped (`-m immediate`) and the active killed while it is
/// down: the standby cannot take the lease and does not promote (an
/// unreachable PostgreSQL is a reason to wait); once PostgreSQL is back it
/// takes over; in sync mode nothing acknowledged is lost, and PostgreSQL
/// drains to the new active exactly.
#[test]
fn postgres_down_during_a_failover_delays_it_and_loses_nothing() {
    let mut cluster = pgtier_backend::PrivateCluster::start(pgtier_backend::ClusterOptions::default()).unwrap();
    let backend = tables_in(&cluster, "cli_failover_pgdown");
    let tmp = tempfile::tempdir().unwrap();
    let (mut a, b) = ready_pair(tmp.path(), &backend, "fopgdown", "sync", false);
    let url = multi_host_url(&a, &b);
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Ledger = Arc::new(Mutex::new(BTreeMap::new()));
    let writers = run_writers(&url, &stop, &acked);
    wait_for("writes", Duration::from_secs(60), || acked.lock().unwrap().len() >= 300);
    cluster.stop_immediate().unwrap();
    a.kill(libc::SIGKILL);
    let acked_at_kill: BTreeSet<i32> = acked.lock().unwrap().keys().copied().collect();
    // Twice the lease: the standby must still be waiting.
    std::thread::sleep(Duration::from_millis(2 * LEASE_MS));
    let mut watch = connect(&b.url());
    let r = replication(&mut watch).unwrap();
    assert_eq!((r["role"].as_str(), r["lease"].as_str()), ("standby", "waiting"), "{r:?}");
    let restarted = Instant::now();
    cluster.restart().unwrap();
    wait_for("the standby to promote after PostgreSQL returned", Duration::from_secs(30), || {
        replication(&mut watch).is_ok_and(|r| r["role"] == "active")
    });
    eprintln!("pg down: promoted {} ms after PostgreSQL restarted", restarted.elapsed().as_millis());
    let before = acked.lock().unwrap().len();
    wait_for("writes on the new active", Duration::from_secs(60), || acked.lock().unwrap().len() >= before + 100);
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    let mut c = connect(&b.url());
    let present = ids(&mut c);
    assert!(acked_at_kill.is_subset(&present), "acknowledged commits missing after the failover");
    let all: BTreeSet<i32> = acked.lock().unwrap().keys().copied().collect();
    assert!(all.is_subset(&present));
    assert_counters_match_rows(&mut c, "new active");
    let local = counters(&mut c);
    let mut pg = drained(&backend, &local, Duration::from_secs(60));
    assert_pg_ids(&mut pg, &present, "the active");
    assert_counters_match_rows(&mut pg, "PostgreSQL");
}

/// The active killed a few milliseconds after its first write-through
/// commits, before a keepalive could tell the standby where write-through
/// stands: the promoted standby still sends PostgreSQL every commit it
/// has that PostgreSQL lacks (it reads its log from where PostgreSQL's
/// progress rows say, not from its own end).
#[test]
fn a_kill_right_after_the_first_write_through_commits_loses_nothing() {
    let backend = backend_tables("cli_failover_early_kill");
    let tmp = tempfile::tempdir().unwrap();
    let (mut a, b) = ready_pair(tmp.path(), &backend, "foearly", "sync", false);
    write_ids(&a, 1..=20);
    a.kill(libc::SIGKILL);
    let mut watch = connect(&b.url());
    wait_for("the standby to promote", Duration::from_secs(30), || {
        replication(&mut watch).is_ok_and(|r| r["role"] == "active")
    });
    let mut c = connect(&b.url());
    let present = ids(&mut c);
    assert_eq!(present, (1..=20).collect::<BTreeSet<i32>>(), "sync mode: acknowledged commits missing");
    let local = counters(&mut c);
    let mut pg = drained(&backend, &local, Duration::from_secs(60));
    assert_pg_ids(&mut pg, &present, "the promoted standby");
}

/// `pgtier.leases.standby_ok` of `node` in PostgreSQL.
fn standby_ok(pg: &mut postgres::Client, node: &str) -> bool {
    pg.query_one("SELECT standby_ok FROM pgtier.leases WHERE node = $1", &[&node]).unwrap().get(0)
}

/// `[replication] standby_timeout_ms`, sync mode: the standby killed, the
/// active goes on without it after the timeout (it records first that the
/// standby may not take over), so its sync commits are acknowledged and
/// write-through reaches PostgreSQL; restarted, the standby catches up,
/// may take over again, and does on a kill -9 of the active without losing
/// an acknowledged commit.
#[test]
fn a_standby_gone_past_its_timeout_is_dropped_then_rejoins() {
    let backend = backend_tables("cli_failover_standby_gone");
    let tmp = tempfile::tempdir().unwrap();
    let node = "fogone";
    let mut a = Node::new(tmp.path(), "a", node);
    let mut b = Node::new(tmp.path(), "b", node);
    b.serves_standby = false;
    a.extra = "standby_timeout_ms = 1500\n".into();
    a.start("active", None, "sync", &backend);
    b.reseed_from(&a, "sync", &backend);
    standby_ready(&a, &b);
    cache_both_tables(&a);
    let mut pg = pgtier_backend::connect(&backend).unwrap();
    let mut watch = connect(&a.url());
    assert_eq!(replication(&mut watch).unwrap()["standby_link"], "following");
    assert!(standby_ok(&mut pg, node));
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Ledger = Arc::new(Mutex::new(BTreeMap::new()));
    let writers = run_writers(&a.url(), &stop, &acked);
    wait_for("writes", Duration::from_secs(60), || acked.lock().unwrap().len() >= 200);
    b.kill(libc::SIGKILL);
    let killed = Instant::now();
    wait_for("the active to drop its standby", Duration::from_secs(30), || {
        replication(&mut watch).is_ok_and(|r| r["standby_link"] == "dropped")
    });
    eprintln!("standby gone: dropped {} ms after the kill", killed.elapsed().as_millis());
    assert!(!standby_ok(&mut pg, node), "dropped without barring the standby from the lease");
    // Sync commits go on without it.
    let before = acked.lock().unwrap().len();
    wait_for("sync commits without the standby", Duration::from_secs(30), || {
        acked.lock().unwrap().len() >= before + 300
    });
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    // Write-through is not held back by the standby any more.
    let local = counters(&mut watch);
    wait_for("write-through without the standby", Duration::from_secs(60), || counters(&mut pg) == local);
    // Back, it catches up and may take over again.
    b.start("standby", Some(&format!("127.0.0.1:{}", a.repl_port)), "sync", &backend);
    wait_for("the standby to rejoin", Duration::from_secs(60), || {
        replication(&mut watch).is_ok_and(|r| r["standby_link"] == "following")
    });
    assert!(standby_ok(&mut pg, node), "caught up, the standby is still barred from the lease");
    standby_ready(&a, &b);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = run_writers(&a.url(), &stop, &acked);
    let before = acked.lock().unwrap().len();
    wait_for("writes after the rejoin", Duration::from_secs(60), || acked.lock().unwrap().len() >= before + 200);
    a.kill(libc::SIGKILL);
    let mut c = None;
    wait_for("the standby to take over", Duration::from_secs(30), || {
        c = postgres::Client::connect(&b.url(), postgres::NoTls).ok();
        c.as_mut().is_some_and(|c| replication(c).is_ok_and(|r| r["role"] == "active"))
    });
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    let mut c = c.unwrap();
    let present = ids(&mut c);
    let acked = acked.lock().unwrap().clone();
    let lost: Vec<_> = acked.keys().filter(|id| !present.contains(id)).collect();
    assert!(lost.is_empty(), "sync mode: {} acknowledged commits missing on the new active", lost.len());
    assert_counters_match_rows(&mut c, "new active");
    let local = counters(&mut c);
    wait_for("write-through to drain", Duration::from_secs(60), || counters(&mut pg) == local);
    assert_pg_ids(&mut pg, &ids(&mut c), "the new active");
    assert_counters_match_rows(&mut pg, "PostgreSQL");
}

/// Async mode, the standby cut off from its active (not from PostgreSQL):
/// past the timeout the active drops it and acknowledges commits it lacks.
/// Killed then, the active is not replaced by that standby, automatically
/// or by `pg_promote()` (55000): it would lose those commits. The old
/// active restarted holds the lease again; healed, the standby catches up;
/// nothing acknowledged is lost and PostgreSQL equals the active.
#[test]
fn a_dropped_standby_does_not_take_over() {
    let backend = backend_tables("cli_failover_dropped");
    let tmp = tempfile::tempdir().unwrap();
    let node = "fodropped";
    let mut a = Node::new(tmp.path(), "a", node);
    let mut b = Node::new(tmp.path(), "b", node);
    b.serves_standby = false;
    a.extra = "standby_timeout_ms = 1500\n".into();
    a.start("active", None, "async", &backend);
    let repl_proxy = Proxy::start(format!("127.0.0.1:{}", a.repl_port));
    let seed = tmp.path().join("seed");
    pgtier(&["backup", "--url", &a.url(), seed.to_str().unwrap()]);
    pgtier(&["restore", "--standby", seed.to_str().unwrap(), b.dir.to_str().unwrap()]);
    b.start("standby", Some(&format!("127.0.0.1:{}", repl_proxy.port)), "async", &backend);
    standby_ready(&a, &b);
    cache_both_tables(&a);
    let mut pg = pgtier_backend::connect(&backend).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Ledger = Arc::new(Mutex::new(BTreeMap::new()));
    let writers = run_writers(&a.url(), &stop, &acked);
    wait_for("writes", Duration::from_secs(60), || acked.lock().unwrap().len() >= 200);
    repl_proxy.cut();
    let mut watch = connect(&a.url());
    wait_for("the active to drop its standby", Duration::from_secs(30), || {
        replication(&mut watch).is_ok_and(|r| r["standby_link"] == "dropped")
    });
    assert!(!standby_ok(&mut pg, node));
    let before = acked.lock().unwrap().len();
    wait_for("commits without the standby", Duration::from_secs(30), || acked.lock().unwrap().len() >= before + 200);
    drop(watch);
    a.kill(libc::SIGKILL);
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    // Past the lease's expiry the standby is still a standby.
    std::thread::sleep(Duration::from_millis(3 * LEASE_MS));
    let mut s = connect(&b.url());
    let status = replication(&mut s).unwrap();
    assert_eq!((status["role"].as_str(), status["lease"].as_str()), ("standby", "waiting"), "{status:?}");
    let e = s.batch_execute("SELECT pg_promote()").unwrap_err();
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "55000", "{e}");
    assert!(db.message().contains("standby_timeout_ms"), "{}", db.message());
    // The old active comes back as the active; healed, the standby rejoins.
    a.start("active", None, "async", &backend);
    repl_proxy.heal();
    let mut c = connect(&a.url());
    wait_for("the standby to rejoin", Duration::from_secs(60), || {
        replication(&mut c).is_ok_and(|r| r["standby_link"] == "following")
    });
    assert!(standby_ok(&mut pg, node));
    let present = ids(&mut c);
    let acked = acked.lock().unwrap().clone();
    let lost = acked.keys().filter(|id| !present.contains(id)).count();
    assert_eq!(lost, 0, "acknowledged commits missing on the restarted active");
    assert_counters_match_rows(&mut c, "active");
    let local = counters(&mut c);
    wait_for("write-through to drain", Duration::from_secs(60), || counters(&mut pg) == local);
    assert_pg_ids(&mut pg, &ids(&mut c), "the new active");
    assert_counters_match_rows(&mut pg, "PostgreSQL");
}

/// Writes `ids` on `node` one transaction each (events and writer 0's counter).
fn write_ids(node: &Node, ids: std::ops::RangeInclusive<i32>) {
    let mut c = connect(&node.url());
    for id in ids {
        c.batch_execute(&format!(
            "BEGIN; INSERT INTO events VALUES ({id}, 0, 'x'); UPDATE counters SET n = n + 1 WHERE w = 0; COMMIT"
        ))
        .unwrap();
    }
}

/// The old active restarted as the standby of the member that took over,
/// without a re-seed: after a switchover (one history) it follows, and takes
/// over again on a kill -9 without losing a commit; where it holds commits
/// the new active never received (async mode, its standby gone) the new
/// active refuses it, saying to re-seed, rather than stream on from its end
/// into a log that differs.
#[test]
fn an_old_active_rejoins_without_a_reseed_unless_its_history_differs() {
    let backend = backend_tables("cli_failover_rejoin");
    let tmp = tempfile::tempdir().unwrap();
    let (mut a, mut b) = ready_pair(tmp.path(), &backend, "forejoin", "async", true);
    write_ids(&a, 1..=50);
    pgtier(&["switchover", "--url", &a.url()]);
    let mut watch = connect(&b.url());
    wait_for("the standby to promote", Duration::from_secs(20), || {
        replication(&mut watch).is_ok_and(|r| r["role"] == "active")
    });
    a.kill(libc::SIGKILL);
    a.start("standby", Some(&format!("127.0.0.1:{}", b.repl_port)), "async", &backend);
    standby_ready(&b, &a);
    write_ids(&b, 51..=100);
    // Everything on a before b is killed: a promotes with all of it.
    let end: u64 = replication(&mut connect(&b.url())).unwrap()["active_durable_lsn"].parse().unwrap();
    let mut on_a = connect(&a.url());
    wait_for("the rejoined standby to catch up", Duration::from_secs(30), || {
        replication(&mut on_a).is_ok_and(|r| r["standby_durable_lsn"].parse::<u64>().unwrap_or(0) >= end)
    });
    b.kill(libc::SIGKILL);
    wait_for("the rejoined standby to promote", Duration::from_secs(30), || {
        replication(&mut on_a).is_ok_and(|r| r["role"] == "active")
    });
    let mut c = connect(&a.url());
    let present = ids(&mut c);
    assert_eq!(present, (1..=100).collect::<BTreeSet<i32>>(), "commits missing after the rejoin and takeover");
    let local = counters(&mut c);
    let mut pg = drained(&backend, &local, Duration::from_secs(60));
    assert_pg_ids(&mut pg, &present, "the active");
    // Diverged: b is gone, a (async) commits alone, then dies; b comes back,
    // takes over and commits others at the same positions.
    drop((c, on_a));
    b.reseed_from(&a, "async", &backend);
    standby_ready(&a, &b);
    b.kill(libc::SIGKILL);
    write_ids(&a, 101..=105);
    a.kill(libc::SIGKILL);
    b.start("standby", Some(&format!("127.0.0.1:{}", a.repl_port)), "async", &backend);
    let promoting = Instant::now();
    while connect(&b.url()).simple_query("SELECT pg_promote()").is_err() {
        assert!(promoting.elapsed() < Duration::from_secs(30), "b never promoted");
        std::thread::sleep(Duration::from_millis(200));
    }
    write_ids(&b, 201..=230);
    let mut on_b = connect(&b.url());
    let expected: BTreeSet<i32> = (1..=100).chain(201..=230).collect();
    assert_eq!(ids(&mut on_b), expected, "the promoted b's rows");
    assert_counters_match_rows(&mut on_b, "the promoted b");
    a.start("standby", Some(&format!("127.0.0.1:{}", b.repl_port)), "async", &backend);
    wait_for("b to refuse a's history", Duration::from_secs(30), || {
        let said = |n: &Node| n.log.lock().unwrap().iter().any(|l| l.contains("differs from this active's"));
        said(&a) || said(&b)
    });
    let r = replication(&mut connect(&b.url())).unwrap();
    assert_eq!(r["connected"], "f", "b is followed by a standby whose log differs: {r:?}");
    let on_a = ids(&mut connect(&a.url()));
    assert!(on_a.contains(&101) && !on_a.contains(&201), "a's data changed although it was refused");
}
