//! Malformed, oversized and truncated input, half-closed connections and a
//! property test over random and mutated byte streams: every connection
//! ends (with an answer or a close) within a timeout, and the server keeps
//! serving others.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{TIMEOUT, cstr, exchange, message, sqlstates, startup_packet};

use proptest::prelude::*;

fn trust_server(extra: &str) -> common::TestServer {
    common::start_with(&format!("max_message_bytes = 65536\n{extra}\n[auth]\nmethod = \"trust\"\n"))
}

fn still_serving(srv: &common::TestServer) {
    let reply =
        exchange(srv, &[startup_packet("alice"), message(b'Q', &cstr("SELECT 41 + 1")), message(b'X', &[])].concat());
    assert!(reply.windows(2).any(|w| w == b"42"), "server stopped answering: {}", String::from_utf8_lossy(&reply));
}

#[test]
fn malformed_messages_get_08p01_and_close() {
    let srv = trust_server("");
    let start = startup_packet("alice");
    // Unknown message type.
    assert_eq!(sqlstates(&exchange(&srv, &[start.clone(), message(b'?', b"junk")].concat())), ["08P01"]);
    // Length shorter than the length field itself.
    assert_eq!(sqlstates(&exchange(&srv, &[start.clone(), vec![b'Q', 0, 0, 0, 2]].concat())), ["08P01"]);
    // A Bind whose counts run past its end.
    let bind = [cstr(""), cstr(""), vec![0, 5, 0, 1]].concat();
    let reply = exchange(&srv, &[start.clone(), message(b'B', &bind)].concat());
    assert_eq!(sqlstates(&reply), ["08P01"]);
    // Bad startup packets: too short, too long, unknown protocol.
    for bad in [vec![0, 0, 0, 3], vec![0, 0, 0x40, 0, 0, 3, 0, 0], [0, 0, 0, 8, 0, 9, 0, 0].to_vec()] {
        let reply = exchange(&srv, &bad);
        assert!(reply.is_empty() || sqlstates(&reply) == ["08P01"], "{reply:?}");
    }
    still_serving(&srv);
}

#[test]
fn oversized_message_is_refused_before_its_body() {
    let srv = trust_server("");
    // Announces 100 MB but sends only the header: the server must answer
    // from the header alone, not wait for (or buffer) the body.
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(&startup_packet("alice")).unwrap();
    s.write_all(&[b'Q', 0x06, 0, 0, 0]).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(sqlstates(&out).contains(&"08P01".to_owned()), "{out:?}");
    still_serving(&srv);
}

#[test]
fn half_closed_connection_still_gets_its_answers() {
    let srv = trust_server("");
    let pipelined = [
        startup_packet("alice"),
        message(b'Q', &cstr("SELECT 7 * 6")),
        message(b'P', &[cstr(""), cstr("SELECT $1::int + 1"), vec![0, 0]].concat()),
        message(b'B', &[cstr(""), cstr(""), vec![0, 0, 0, 1, 0, 0, 0, 2], b"99".to_vec(), vec![0, 0]].concat()),
        message(b'E', &[cstr(""), vec![0, 0, 0, 0]].concat()),
        message(b'S', &[]),
    ]
    .concat();
    let reply = exchange(&srv, &pipelined);
    let text = String::from_utf8_lossy(&reply);
    assert!(text.contains("42") && text.contains("100"), "{text}");
    // Closed in the middle of a message: the session just ends.
    let cut = exchange(&srv, &[startup_packet("alice"), message(b'Q', &cstr("SELECT 1"))[..7].to_vec()].concat());
    assert!(sqlstates(&cut).is_empty());
    // Closed in the middle of COPY FROM STDIN, inside a transaction.
    let copy = [
        startup_packet("alice"),
        message(b'Q', &cstr("CREATE TABLE h (id int PRIMARY KEY); BEGIN; COPY h FROM STDIN")),
        message(b'd', b"1\n2\n"),
    ]
    .concat();
    exchange(&srv, &copy);
    still_serving(&srv);
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(srv.addr.port()).user("alice").dbname("pgtier");
    let mut c = c.connect(postgres::NoTls).unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM h", &[]).unwrap().get::<_, i64>(0), 0);
}

/// A valid session's bytes: startup, simple and extended queries, COPY.
fn valid_stream() -> Vec<u8> {
    [
        startup_packet("alice"),
        message(b'Q', &cstr("CREATE TABLE IF NOT EXISTS f (id int PRIMARY KEY, v text)")),
        message(
            b'P',
            &[
                cstr("s"),
                cstr("INSERT INTO f VALUES ($1, $2) ON CONFLICT (id) DO NOTHING"),
                vec![0, 2, 0, 0, 0, 23, 0, 0, 0, 25],
            ]
            .concat(),
        ),
        message(
            b'B',
            &[
                cstr(""),
                cstr("s"),
                vec![0, 1, 0, 1, 0, 2, 0, 0, 0, 4, 0, 0, 0, 9, 0, 0, 0, 2],
                b"hi".to_vec(),
                vec![0, 0],
            ]
            .concat(),
        ),
        message(b'D', &[vec![b'P'], cstr("")].concat()),
        message(b'E', &[cstr(""), vec![0, 0, 0, 0]].concat()),
        message(b'S', &[]),
        message(b'Q', &cstr("BEGIN; SELECT * FROM f; COPY f FROM STDIN")),
        message(b'd', b"100\tx\n"),
        message(b'c', &[]),
        message(b'Q', &cstr("COMMIT")),
        message(b'X', &[]),
    ]
    .concat()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_hang_or_crash(bytes in proptest::collection::vec(any::<u8>(), 0..2048), after_startup in any::<bool>()) {
        let srv = shared();
        let stream = if after_startup { [startup_packet("alice"), bytes].concat() } else { bytes };
        exchange(srv, &stream);
        no_session_panicked(srv);
    }

    #[test]
    fn mutated_sessions_never_hang_or_crash(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let srv = shared();
        let mut stream = valid_stream();
        for (at, byte) in flips {
            let i = at.index(stream.len());
            stream[i] = byte;
        }
        stream.truncate(cut.index(stream.len()) + 1);
        exchange(srv, &stream);
        no_session_panicked(srv);
    }
}

/// A caught panic ends only its session and looks like a close from outside:
/// count them, and check another session is still served.
fn no_session_panicked(srv: &common::TestServer) {
    assert_eq!(srv.server.as_ref().unwrap().session_panics(), 0, "a session panicked (see the panic message above)");
    still_serving(srv);
}

fn shared() -> &'static common::TestServer {
    static SERVER: std::sync::OnceLock<common::TestServer> = std::sync::OnceLock::new();
    SERVER.get_or_init(|| trust_server(""))
}

#[test]
fn the_fuzzed_server_still_serves() {
    // Runs after (or alongside) the property tests in this binary.
    let srv = shared();
    exchange(srv, &valid_stream());
    still_serving(srv);
}

/// Deep and wide statements over the wire: each is answered or refused
/// with 54001, and another session is served afterwards. A stack overflow
/// aborts the process, so the server runs in a child process (this test
/// binary re-run with `DEPTH_WIRE` set); before pgtier-sql bounded depth a
/// 1,000-term `+` chain killed it.
#[test]
fn deep_statements_answer_or_54001_and_the_server_survives() {
    if std::env::var("DEPTH_WIRE").is_ok() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "depth_wire_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("DEPTH_WIRE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("DEPTH_WIRE_DONE"),
        "child: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "the child process of a test in this file (run by it with --ignored)"]
fn depth_wire_child() {
    if std::env::var("DEPTH_WIRE").is_err() {
        return;
    }
    let srv = common::start_with("max_message_bytes = 16777216\n[auth]\nmethod = \"trust\"\n");
    let chain = |n: usize, term: &str, op: &str| vec![term; n].join(op);
    let nest = |n: usize, open: &str, inner: &str, close: &str| format!("{}{inner}{}", open.repeat(n), close.repeat(n));
    let list = (0..200_000).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    // (statement, the SQLSTATEs expected: none for an answer)
    let cases: Vec<(String, &[&str])> = vec![
        (format!("SELECT {}", chain(1_000, "1", " + ")), &[]),
        (format!("SELECT {}", chain(1_000, "'a'", " || ")), &[]),
        (format!("SELECT 1 WHERE {}", chain(1_000, "true", " AND ")), &[]),
        (format!("SELECT {}", chain(100_000, "1", " + ")), &["54001"]),
        (format!("SELECT {}", chain(100_000, "'a'", " || ")), &["54001"]),
        (format!("SELECT {}", chain(100_000, "false", " OR ")), &["54001"]),
        (format!("SELECT {}", nest(10_000, "(", "1", ")")), &["54001"]),
        (format!("SELECT {}", nest(10_000, "abs(", "1", ")")), &["54001"]),
        (format!("SELECT {}", nest(10_000, "CASE WHEN true THEN ", "1", " END")), &["54001"]),
        (format!("SELECT {}true", "NOT ".repeat(10_000)), &["54001"]),
        (format!("SELECT {}1", "- ".repeat(10_000)), &["54001"]),
        (format!("SELECT {}", nest(10_000, "(SELECT ", "1", ")")), &["54001"]),
        (format!("SELECT 199999 IN ({list})"), &[]),
    ];
    for (sql, expected) in cases {
        let reply = exchange(&srv, &[startup_packet("alice"), message(b'Q', &cstr(&sql)), message(b'X', &[])].concat());
        assert_eq!(sqlstates(&reply), expected, "{}...", &sql[..60.min(sql.len())]);
        still_serving(&srv);
    }
    println!("DEPTH_WIRE_DONE");
}
