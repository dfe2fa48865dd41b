//! Authentication, TLS, the connection limit, cancel, and psql.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use pgtier_server::ServerConfig;

fn code(e: &postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no sqlstate: {e}"))
}

#[test]
fn scram_accepts_the_right_password_only() {
    let verifier = postgres_protocol::password::scram_sha_256(b"from-verifier");
    let srv = common::start_with(&format!(
        "[auth]\nmethod = \"scram-sha-256\"\n[[auth.users]]\nname = \"{}\"\npassword = \"{}\"\n[[auth.users]]\nname = \"bob\"\npassword = \"{verifier}\"\n",
        common::USER,
        common::PASSWORD
    ));
    srv.client().simple_query("SELECT 1").unwrap();
    let mut bob = srv.config();
    bob.user("bob").password("from-verifier");
    bob.connect(postgres::NoTls).unwrap();
    for (user, pw) in [(common::USER, "wrong"), ("bob", common::PASSWORD), ("nobody", "x")] {
        let mut c = srv.config();
        c.user(user).password(pw);
        let e = c.connect(postgres::NoTls).err().expect("refused");
        assert_eq!(code(&e), "28P01", "{user}");
    }
}

#[test]
fn unsafe_configurations_are_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let base = format!("data_dir = {:?}\n", dir.path().display().to_string());
    let refuse = |toml: &str, needle: &str| {
        let e = ServerConfig::from_toml_str(toml).and_then(pgtier_server::start).err().expect(toml);
        assert!(e.to_string().contains(needle), "{e}");
    };
    refuse(&format!("listen = \"0.0.0.0:0\"\n{base}[auth]\nmethod = \"trust\"\n"), "loopback");
    refuse(&format!("listen = \"127.0.0.1:0\"\n{base}[auth]\nmethod = \"scram-sha-256\"\n"), "auth.users");
    refuse(
        &format!("listen = \"127.0.0.1:0\"\nevent_loops = 100000\n{base}[auth]\nmethod = \"trust\"\n"),
        "event_loops",
    );
    refuse(
        &format!("listen = \"127.0.0.1:0\"\n{base}[auth]\nmethod = \"trust\"\n[passthrough]\nmode = \"reads\"\n"),
        "no backend is configured",
    );
    refuse(
        &format!(
            "listen = \"127.0.0.1:0\"\n{base}[auth]\nmethod = \"trust\"\n[passthrough]\nmode = \"all\"\nbackend_url = \"postgresql://x@h/db\"\npool_size = 0\n"
        ),
        "pool_size",
    );
    refuse(
        &format!(
            "listen = \"127.0.0.1:0\"\n{base}[auth]\nmethod = \"trust\"\n[tls]\ncert = \"/nonexistent.crt\"\nkey = \"/nonexistent.key\"\n"
        ),
        "nonexistent",
    );
    refuse(&format!("listen = \"127.0.0.1:0\"\n{base}bogus = 1\n"), "bogus");
    // Trust on loopback is fine.
    let s = pgtier_server::start(
        ServerConfig::from_toml_str(&format!("listen = \"127.0.0.1:0\"\n{base}[auth]\nmethod = \"trust\"\n")).unwrap(),
    )
    .unwrap();
    s.shutdown();
}

#[test]
fn port_in_use_is_a_clear_error() {
    let srv = common::start();
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "listen = \"{}\"\ndata_dir = {:?}\n[auth]\nmethod = \"trust\"\n",
        srv.addr,
        dir.path().display().to_string()
    );
    let e = pgtier_server::start(ServerConfig::from_toml_str(&toml).unwrap()).err().unwrap();
    assert!(e.to_string().contains("cannot listen"), "{e}");
}

#[test]
fn tls_with_a_configured_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("server.crt"), dir.path().join("server.key"));
    let status = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success());
    let srv = common::start_with(&format!(
        "[tls]\ncert = {:?}\nkey = {:?}\n",
        cert.display().to_string(),
        key.display().to_string()
    ));
    let out = std::process::Command::new("psql")
        .args(["-X", "-At", "-c", "\\conninfo", "-c", "SELECT 40 + 2"])
        .arg(format!(
            "host={} port={} user={} dbname=pgtier sslmode=require",
            srv.addr.ip(),
            srv.addr.port(),
            common::USER
        ))
        .env("PGPASSWORD", common::PASSWORD)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("SSL connection"), "{stdout}");
    assert!(stdout.contains("42"), "{stdout}");
    // Without [tls], sslmode=require is refused ('N' to SSLRequest).
    let plain = common::start();
    let out = std::process::Command::new("psql")
        .args(["-X", "-At", "-c", "SELECT 1"])
        .arg(format!(
            "host={} port={} user={} dbname=pgtier sslmode=require",
            plain.addr.ip(),
            plain.addr.port(),
            common::USER
        ))
        .env("PGPASSWORD", common::PASSWORD)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not support SSL"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn connection_limit_answers_53300() {
    let srv = common::start_with("max_connections = 2");
    let a = srv.client();
    let _b = srv.client();
    let e = srv.config().connect(postgres::NoTls).err().expect("refused");
    assert_eq!(code(&e), "53300");
    assert_eq!(e.as_db_error().unwrap().message(), "sorry, too many clients already");
    drop(a);
    let started = Instant::now();
    loop {
        match srv.config().connect(postgres::NoTls) {
            Ok(_) => break,
            Err(e) if started.elapsed() < Duration::from_secs(5) => assert_eq!(code(&e), "53300"),
            Err(e) => panic!("slot not released: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cancel_stops_a_copy_and_leaves_nothing() {
    let srv = common::start();
    let mut c = srv.client();
    c.batch_execute("CREATE TABLE big (id int PRIMARY KEY)").unwrap();
    let token = c.cancel_token();
    let mut w = c.copy_in("COPY big FROM STDIN").unwrap();
    let chunk: String = (0..5000).map(|i| format!("{i}\n")).collect();
    w.write_all(chunk.as_bytes()).unwrap();
    w.flush().unwrap();
    token.cancel_query(postgres::NoTls).unwrap();
    for round in 1..200 {
        let more: String = (round * 5000..(round + 1) * 5000).map(|i| format!("{i}\n")).collect();
        if w.write_all(more.as_bytes()).and_then(|()| w.flush()).is_err() {
            break;
        }
    }
    let e = w.finish().expect_err("COPY canceled");
    assert_eq!(code(&e), "57014");
    assert_eq!(c.query_one("SELECT count(*) FROM big", &[]).unwrap().get::<_, i64>(0), 0);
}

#[test]
fn cancel_stops_a_long_statement() {
    let srv = common::start();
    let mut c = srv.client();
    c.batch_execute("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    let mut w = c.copy_in("COPY t FROM STDIN").unwrap();
    let rows: String = (0..3000).map(|i| format!("{i}\n")).collect();
    w.write_all(rows.as_bytes()).unwrap();
    w.finish().unwrap();
    let token = c.cancel_token();
    // A cancel that arrives before the statement starts cancels nothing
    // (as in PostgreSQL): keep asking until it ends, rather than guess
    // when it has started.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = done.clone();
    let canceler = std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::Acquire) {
            token.cancel_query(postgres::NoTls).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let started = Instant::now();
    // 2.7e10 joined rows: hours, unless the executor notices the cancel.
    let e = c.query_one("SELECT count(*) FROM t a, t b, t c", &[]).expect_err("canceled");
    done.store(true, std::sync::atomic::Ordering::Release);
    canceler.join().unwrap();
    assert_eq!(code(&e), "57014", "{e}");
    assert!(started.elapsed() < Duration::from_secs(30), "cancel took {:?}", started.elapsed());
    // The session goes on, and the next statement is not canceled.
    assert_eq!(c.query_one("SELECT count(*) FROM t", &[]).unwrap().get::<_, i64>(0), 3000);
}

#[test]
fn psql_session_states_and_errors() {
    let srv = common::start();
    let script = "CREATE TABLE s (id int PRIMARY KEY, v text);\n\
        INSERT INTO s VALUES (1, 'a');\n\
        BEGIN;\n\
        INSERT INTO s VALUES (1, 'dup');\n\
        \\echo state :LAST_ERROR_SQLSTATE\n\
        SELECT 1;\n\
        \\echo state :LAST_ERROR_SQLSTATE\n\
        ROLLBACK;\n\
        SELECT v FROM s; SELECT count(*) FROM s;\n\
        COMMIT;\n\
        SELECT 1/0;\n\
        \\echo state :LAST_ERROR_SQLSTATE\n";
    let out = std::process::Command::new("psql")
        .args([
            "-X",
            "-At",
            "-h",
            &srv.addr.ip().to_string(),
            "-p",
            &srv.addr.port().to_string(),
            "-U",
            common::USER,
            "-d",
            "pgtier",
        ])
        .env("PGPASSWORD", common::PASSWORD)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(script.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("state 23505\n"), "{stdout}\n{stderr}");
    assert!(stdout.contains("state 25P02\n"), "{stdout}\n{stderr}");
    assert!(stdout.contains("a\n1\n"), "{stdout}\n{stderr}");
    assert!(stdout.contains("state 22012\n"), "{stdout}\n{stderr}");
    assert!(stderr.contains("duplicate key value violates unique constraint"), "{stderr}");
    assert!(stderr.contains("current transaction is aborted"), "{stderr}");
    assert!(stderr.contains("WARNING:  there is no transaction in progress"), "{stderr}");
}
