//! Resource limits over the wire, as PostgreSQL has them: statement_timeout
//! (57014), cancel requests (57014), idle_in_transaction_session_timeout
//! (25P03, the session ends and its transaction rolls back), on the
//! thread-per-session and the event-loop paths, against the private
//! PostgreSQL where both can run the same statements.
//!
//! Timing: every capped statement runs for hours uncapped (a 3-way cross
//! join of 3,000 rows is 2.7e10 rows, on PostgreSQL too), its cap is 200 ms
//! and it must end within 10 s; waits poll an observable state.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const MARGIN: Duration = Duration::from_secs(10);
const LONG: &str = "SELECT count(*) FROM t a, t b, t c";
const TIMEOUT_MSG: &str = "canceling statement due to statement timeout";
const CANCEL_MSG: &str = "canceling statement due to user request";

fn server(event_loops: usize, extra: &str) -> common::TestServer {
    common::start_with(&format!("event_loops = {event_loops}\n{extra}"))
}

/// (SQLSTATE, message) of an error, or of success as ("", "").
fn outcome<T>(r: Result<T, postgres::Error>) -> (String, String) {
    match r {
        Ok(_) => (String::new(), String::new()),
        Err(e) => match e.as_db_error() {
            Some(db) => (db.code().code().to_owned(), db.message().to_owned()),
            None => ("no sqlstate".to_owned(), e.to_string()),
        },
    }
}

fn fill(c: &mut postgres::Client) {
    c.batch_execute("DROP TABLE IF EXISTS t; CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t SELECT g, g FROM generate_series(1, 3000) g")
        .unwrap();
}

/// Runs `sql`, which must fail within MARGIN; returns (SQLSTATE, message).
/// A watchdog cancels it after MARGIN, so a limit that does not work fails
/// the test instead of hanging it for hours.
fn capped(c: &mut postgres::Client, sql: &str) -> (String, String) {
    let token = c.cancel_token();
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            while !done.load(Ordering::Acquire) {
                if started.elapsed() > MARGIN {
                    let _ = token.cancel_query(postgres::NoTls);
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let started = Instant::now();
    let r = outcome(c.simple_query(sql));
    let took = started.elapsed();
    done.store(true, Ordering::Release);
    watchdog.join().unwrap();
    assert!(took < MARGIN, "{sql}: ended after {took:?}");
    r
}

/// The same script on pgtier and PostgreSQL: SET/SHOW of the timeout, its
/// errors, the timeout itself, and the aborted block after it.
fn timeout_script(c: &mut postgres::Client) -> Vec<(String, String)> {
    fill(c);
    let mut out = Vec::new();
    for v in ["5000", "'1min'", "'1.5s'", "100", "'1000us'", "'0.5ms'", "0", "86400000"] {
        c.batch_execute(&format!("SET statement_timeout = {v}")).unwrap();
        out.push(("SHOW".to_owned(), c.query_one("SHOW statement_timeout", &[]).unwrap().get(0)));
    }
    for bad in ["'abc'", "'5 fortnights'", "-1", "3000000000"] {
        out.push(outcome(c.batch_execute(&format!("SET statement_timeout = {bad}"))));
    }
    out.push(outcome(
        c.query_one("SELECT set_config('statement_timeout', '200', false)", &[]).map(|r| r.get::<_, String>(0)),
    ));
    out.push(capped(c, LONG));
    // Over the extended protocol too.
    out.push(outcome(c.query(LONG, &[])));
    out.push(capped(c, "BEGIN; SELECT 1"));
    out.push(capped(c, LONG));
    out.push(outcome(c.simple_query("SELECT 1")));
    out.push(outcome(c.simple_query("ROLLBACK")));
    out.push(("count".to_owned(), c.query_one("SELECT count(*) FROM t", &[]).unwrap().get::<_, i64>(0).to_string()));
    out
}

#[test]
fn statement_timeout_matches_postgresql_on_both_session_paths() {
    let mut pg = common::postgres("limits_timeout");
    let expected = timeout_script(&mut pg);
    assert!(expected.contains(&("57014".to_owned(), TIMEOUT_MSG.to_owned())), "{expected:?}");
    assert!(expected.contains(&(
        "25P02".to_owned(),
        "current transaction is aborted, commands ignored until end of transaction block".to_owned()
    )));
    for loops in [0, 1] {
        let srv = server(loops, "");
        let got = timeout_script(&mut srv.client());
        assert_eq!(got, expected, "event_loops = {loops}");
    }
}

#[test]
fn statement_timeout_from_the_config_and_the_startup_options() {
    for loops in [0, 1] {
        let srv =
            server(loops, "[settings]\nstatement_timeout = \"200ms\"\nidle_in_transaction_session_timeout = 60000");
        let mut c = srv.client();
        assert_eq!(c.query_one("SHOW idle_in_transaction_session_timeout", &[]).unwrap().get::<_, String>(0), "1min");
        fill(&mut c);
        assert_eq!(capped(&mut c, LONG), ("57014".to_owned(), TIMEOUT_MSG.to_owned()));
        c.batch_execute("SET statement_timeout = 0; SET statement_timeout TO DEFAULT").unwrap();
        assert_eq!(c.query_one("SHOW statement_timeout", &[]).unwrap().get::<_, String>(0), "200ms");

        let srv = server(loops, "");
        let mut c = srv.config().options("-c statement_timeout=200ms").connect(postgres::NoTls).unwrap();
        fill(&mut c);
        assert_eq!(capped(&mut c, LONG), ("57014".to_owned(), TIMEOUT_MSG.to_owned()));
    }
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\n[auth]\nmethod = \"trust\"\n[settings]\nstatement_timeout = \"soon\"\n",
        dir.path().display().to_string()
    );
    let config = pgtier_server::ServerConfig::from_toml_str(&toml).unwrap();
    let e = pgtier_server::start(config).err().expect("a bad [settings] value refuses to start");
    assert!(e.to_string().contains("statement_timeout"), "{e}");
}

/// Cancels `c`'s statements until `done`: a cancel that arrives before the
/// statement starts is spent on nothing, so keep asking, as psql's user would.
fn keep_canceling(token: postgres::CancelToken, done: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !done.load(Ordering::Acquire) {
            let _ = token.cancel_query(postgres::NoTls);
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// A CancelRequest with `secret` for each of the first pids.
fn cancel_with_wrong_secret(addr: std::net::SocketAddr) {
    for pid in 1..20i32 {
        let mut packet = 16i32.to_be_bytes().to_vec();
        packet.extend_from_slice(&80_877_102i32.to_be_bytes());
        packet.extend_from_slice(&pid.to_be_bytes());
        packet.extend_from_slice(&0x5eed_i32.to_be_bytes());
        if let Ok(mut s) = std::net::TcpStream::connect(addr) {
            let _ = s.write_all(&packet);
        }
    }
}

#[test]
fn cancel_requests_interrupt_long_statements_on_both_session_paths() {
    for loops in [0, 1] {
        let srv = server(loops, "");
        let mut c = srv.client();
        fill(&mut c);
        for sql in [
            LONG,
            "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b",
            "SELECT a.id FROM t a, t b, t c ORDER BY a.v - b.v LIMIT 1",
        ] {
            let done = Arc::new(AtomicBool::new(false));
            let canceler = keep_canceling(c.cancel_token(), done.clone());
            let r = capped(&mut c, sql);
            done.store(true, Ordering::Release);
            canceler.join().unwrap();
            assert_eq!(r, ("57014".to_owned(), CANCEL_MSG.to_owned()), "event_loops = {loops}: {sql}");
        }
        // The session goes on.
        assert_eq!(c.query_one("SELECT count(*) FROM t", &[]).unwrap().get::<_, i64>(0), 3000);

        // A wrong secret cancels nothing: the statement runs on to its timeout.
        c.batch_execute("SET statement_timeout = '2s'").unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let (addr, flag) = (srv.addr, done.clone());
        let spammer = std::thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                cancel_with_wrong_secret(addr);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let r = capped(&mut c, LONG);
        done.store(true, Ordering::Release);
        spammer.join().unwrap();
        assert_eq!(r, ("57014".to_owned(), TIMEOUT_MSG.to_owned()), "event_loops = {loops}");
    }
}

/// A trust session over a raw socket: BEGIN, an UPDATE of row 1, then
/// silence. Returns every byte the server sent until it closed.
fn idle_raw_session(srv: &common::TestServer) -> Vec<u8> {
    use common::{cstr, message, startup_packet};
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(MARGIN)).unwrap();
    let mut bytes = startup_packet("alice");
    bytes.extend(message(
        b'Q',
        &cstr("SET idle_in_transaction_session_timeout = 300; BEGIN; UPDATE t SET v = -1 WHERE id = 1"),
    ));
    s.write_all(&bytes).unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the idle session was not closed within {MARGIN:?} ({:?}): {e}", started.elapsed()),
        }
    }
    out
}

#[test]
fn idle_in_transaction_session_timeout_ends_the_session_and_its_locks() {
    for loops in [0, 1] {
        let srv = server(loops, "[auth]\nmethod = \"trust\"\n");
        let mut other = {
            let mut c = srv.config();
            c.password("");
            c.connect(postgres::NoTls).unwrap()
        };
        fill(&mut other);
        let stream = idle_raw_session(&srv);
        assert_eq!(common::sqlstates(&stream), ["25P03"], "event_loops = {loops}");
        let text = String::from_utf8_lossy(&stream);
        assert!(
            text.contains("terminating connection due to idle-in-transaction timeout") && text.contains("FATAL"),
            "{text}"
        );
        // Its UPDATE rolled back and its row lock is free (a wait would
        // end with 57014 after 5 s).
        other.batch_execute("SET statement_timeout = '5s'").unwrap();
        assert_eq!(other.query_one("SELECT v FROM t WHERE id = 1", &[]).unwrap().get::<_, i32>(0), 1);
        other.batch_execute("UPDATE t SET v = 7 WHERE id = 1").unwrap();
        // A session idle outside a block, or busy, is not ended.
        other.batch_execute("SET idle_in_transaction_session_timeout = 100").unwrap();
        other.batch_execute("SET statement_timeout = 0").unwrap();
        // An absence can only be waited for: three times its timeout.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(other.query_one("SELECT v FROM t WHERE id = 1", &[]).unwrap().get::<_, i32>(0), 7);
    }
}

/// The same, seen by a driver, on pgtier and PostgreSQL: another session's
/// wait for the idle block's row lock ends when the session is ended (the
/// block rolled back), and the idle client's next statement fails.
fn idle_driver_script(mut c: postgres::Client, mut other: postgres::Client) -> ((String, String), i32) {
    fill(&mut other);
    c.batch_execute("SET idle_in_transaction_session_timeout = 200; BEGIN; UPDATE t SET v = -1 WHERE id = 1").unwrap();
    other.batch_execute("SET statement_timeout = '10s'").unwrap();
    let started = Instant::now();
    other.batch_execute("UPDATE t SET v = v + 1 WHERE id = 1").unwrap();
    assert!(started.elapsed() < MARGIN);
    let next = outcome(c.simple_query("SELECT 1"));
    (next, other.query_one("SELECT v FROM t WHERE id = 1", &[]).unwrap().get(0))
}

#[test]
fn idle_in_transaction_timeout_matches_postgresql() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("limits_idle_{}", std::process::id())).unwrap();
    let expected = idle_driver_script(pgtier_backend::connect(&url).unwrap(), pgtier_backend::connect(&url).unwrap());
    assert_eq!(expected.1, 2, "the idle block's UPDATE rolled back");
    assert_ne!(expected.0, (String::new(), String::new()), "the idle session is gone");
    for loops in [0, 1] {
        let srv = server(loops, "");
        assert_eq!(idle_driver_script(srv.client(), srv.client()), expected, "event_loops = {loops}");
    }
}

#[test]
fn statement_mem_fails_one_statement_and_harms_no_session() {
    for loops in [0, 1] {
        let srv = server(loops, "[settings]\n\"pgtier.statement_mem\" = \"1MB\"");
        let mut c = srv.client();
        let mut other = srv.client();
        c.batch_execute("SET pgtier.statement_mem = 0; CREATE TABLE big (id int PRIMARY KEY, v text); INSERT INTO big SELECT g, 'row' FROM generate_series(1, 50000) g; SET pgtier.statement_mem TO DEFAULT").unwrap();
        assert_eq!(c.query_one("SHOW pgtier.statement_mem", &[]).unwrap().get::<_, String>(0), "1MB");
        for (sql, what) in [
            ("SELECT id, v FROM big ORDER BY id DESC", "sort"),
            ("SELECT id, count(*) FROM big GROUP BY id", "hash aggregate"),
            ("SELECT * FROM big", "result"),
        ] {
            let e = c.query(sql, &[]).expect_err(sql);
            let db = e.as_db_error().expect("an ErrorResponse");
            assert_eq!((db.code().code(), db.message()), ("53200", "out of memory"), "event_loops = {loops}: {sql}");
            assert_eq!(
                db.detail(),
                Some(format!("The {what} of this statement needed more than pgtier.statement_mem (1MB).").as_str())
            );
        }
        // Both sessions go on; one that raises its bound runs the statement.
        assert_eq!(c.query_one("SELECT count(*) FROM big", &[]).unwrap().get::<_, i64>(0), 50_000);
        other.batch_execute("SET pgtier.statement_mem = '64MB'").unwrap();
        assert_eq!(other.query("SELECT id, v FROM big ORDER BY id DESC", &[]).unwrap().len(), 50_000);
    }
}
