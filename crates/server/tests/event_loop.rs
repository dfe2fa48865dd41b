//! The event loops' invariant: a session that waits never stalls the other
//! sessions of its loop (event_loop.rs). Each test puts every session on
//! one loop (`event_loops = 1`) and makes one wait on another.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longer than any wait below should take; shorter than the lock timeout,
/// so a stalled loop fails the test instead of timing out a statement.
const PATIENCE: Duration = Duration::from_secs(5);

fn one_loop(extra: &str) -> common::TestServer {
    loops(1, extra)
}

fn loops(n: usize, extra: &str) -> common::TestServer {
    common::start_with(&format!("event_loops = {n}\n{extra}\n[auth]\nmethod = \"trust\"\n"))
}

fn connect(srv: &common::TestServer) -> postgres::Client {
    let mut c = srv.config();
    c.password("");
    c.connect(postgres::NoTls).unwrap()
}

/// Runs `f` on a thread; its result, or a panic naming `what` after PATIENCE.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(PATIENCE).unwrap_or_else(|_| panic!("{what}: no answer within {PATIENCE:?} (the loop stalled)"))
}

#[test]
fn a_lock_wait_leaves_the_lock_holder_served() {
    lock_wait_on(one_loop(""));
}

#[test]
fn a_thread_per_session_serves_the_same() {
    lock_wait_on(loops(0, ""));
}

fn lock_wait_on(srv: common::TestServer) {
    let mut holder = connect(&srv);
    holder.batch_execute("CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 0)").unwrap();
    holder.batch_execute("BEGIN; UPDATE t SET v = 1 WHERE id = 1").unwrap();
    let waits_before = srv.server.as_ref().unwrap().database().stats().lock_waits;
    let mut waiter = connect(&srv);
    let (started_tx, started_rx) = mpsc::channel();
    let waiting = std::thread::spawn(move || {
        started_tx.send(()).unwrap();
        waiter.execute("UPDATE t SET v = v + 10 WHERE id = 1", &[]).map_err(|e| e.to_string())
    });
    started_rx.recv().unwrap();
    // The waiter reached the lock (and blocks its thread on it), however
    // long a busy machine takes to get it there.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while srv.server.as_ref().unwrap().database().stats().lock_waits == waits_before {
        assert!(std::time::Instant::now() < deadline, "the waiter never waited for the row lock");
        std::thread::sleep(Duration::from_millis(1));
    }
    let committed = within("COMMIT of the lock holder", move || {
        holder.batch_execute("COMMIT").unwrap();
        holder
    });
    assert_eq!(waiting.join().unwrap(), Ok(1));
    let mut holder = committed;
    let v: i32 = holder.query_one("SELECT v FROM t WHERE id = 1", &[]).unwrap().get(0);
    assert_eq!(v, 11, "the waiter updated the holder's committed row");
}

#[test]
fn a_durable_commit_wait_leaves_the_others_served() {
    // Sync commits each wait for an fsync; many sessions on one loop still
    // commit concurrently, and every acknowledged row is there.
    let srv = one_loop("");
    connect(&srv).batch_execute("CREATE TABLE s (k int PRIMARY KEY, who int)").unwrap();
    let sessions = 8;
    let rows = 40;
    let handles: Vec<_> = (0..sessions)
        .map(|who| {
            let mut c = connect(&srv);
            c.batch_execute("SET synchronous_commit = on").unwrap();
            std::thread::spawn(move || {
                for i in 0..rows {
                    c.execute("INSERT INTO s VALUES ($1, $2)", &[&(who * 1000 + i), &who]).unwrap();
                }
            })
        })
        .collect();
    within("sync commits from 8 sessions on one loop", move || {
        for h in handles {
            h.join().unwrap();
        }
    });
    let n: i64 = connect(&srv).query_one("SELECT count(*) FROM s", &[]).unwrap().get(0);
    assert_eq!(n, (sessions * rows) as i64);
}

#[test]
fn a_client_that_does_not_read_leaves_the_others_served() {
    let srv = one_loop("");
    // Several MB of answer the client does not read: the server's write
    // blocks once the socket buffers are full.
    let mut lazy = std::net::TcpStream::connect(srv.addr).unwrap();
    lazy.set_read_timeout(Some(PATIENCE)).unwrap();
    lazy.write_all(&common::startup_packet(common::USER)).unwrap();
    let filler = "x".repeat(200);
    let query = format!("SELECT n, '{filler}' FROM generate_series(1, 40000) AS g(n)");
    lazy.write_all(&common::message(b'Q', &common::cstr(&query))).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let addr = srv.addr;
    let config = srv.config();
    let answer: i32 = within("a query while another client does not read", move || {
        let _ = addr;
        let mut c = config;
        c.password("");
        let mut other = c.connect(postgres::NoTls).unwrap();
        other.query_one("SELECT 41 + 1", &[]).unwrap().get(0)
    });
    assert_eq!(answer, 42);
    // The lazy client gets its whole answer once it reads.
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let started = Instant::now();
    while !got.ends_with(&[b'Z', 0, 0, 0, 5, b'I']) || got.len() < 40_000 * 200 {
        assert!(started.elapsed() < PATIENCE, "the lazy client's answer did not arrive");
        let n = lazy.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(common::sqlstates(&got).is_empty());
}

#[test]
fn a_query_pipelined_behind_the_startup_packet_is_answered() {
    // The handshake thread may read the query along with the startup
    // packet; the loop must serve it without waiting for the socket.
    let srv = one_loop("");
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut bytes = common::startup_packet(common::USER);
    bytes.extend(common::message(b'Q', &common::cstr("SELECT 'pipelined'")));
    s.write_all(&bytes).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Two ReadyForQuery: after the startup, after the query.
    while got.windows(6).filter(|w| *w == [b'Z', 0, 0, 0, 5, b'I']).count() < 2 {
        let n = s.read(&mut buf).expect("the pipelined query was not answered");
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.windows(9).any(|w| w == b"pipelined"));
}
