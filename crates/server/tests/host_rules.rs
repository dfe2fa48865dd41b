//! Host rules ([[auth.rules]], as pg_hba.conf), the failed-login delay and
//! counters, per-user connection limits, TLS options, and reloading the
//! configuration. Run with `--nocapture` to see the table of tried
//! connections.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use pgtier_server::ServerConfig;

const BOB_PW: &str = "bob pw";
const CAROL_PW: &str = "carol pw";

/// What a connection attempt got: "ok", or "SQLSTATE: message" (psql,
/// which does not show the SQLSTATE of a connection error: "FATAL: message").
fn attempt(srv: &SocketAddr, source: &str, user: &str, password: &str, database: &str, tls: bool) -> String {
    if tls {
        assert_eq!(source, "127.0.0.1", "psql picks its own source address");
        let out = std::process::Command::new("psql")
            .args(["-X", "-At", "-c", "SELECT 1"])
            .arg(format!("host={} port={} user={user} dbname={database} sslmode=require", srv.ip(), srv.port()))
            .env("PGPASSWORD", password)
            .env("PGCONNECT_TIMEOUT", "10")
            .output()
            .expect("psql");
        if out.status.success() {
            return "ok".into();
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let message = stderr.split("FATAL:").nth(1).unwrap_or(&stderr).trim().to_owned();
        return format!("FATAL: {message}");
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
        let stream = socket.connect(*srv).await.unwrap();
        let mut config = tokio_postgres::Config::new();
        config.user(user).password(password).dbname(database);
        match config.connect_raw(stream, tokio_postgres::NoTls).await {
            Ok((client, connection)) => {
                let task = tokio::spawn(connection);
                client.simple_query("SELECT 1").await.unwrap();
                drop(client);
                let _ = task.await;
                "ok".into()
            }
            Err(e) => match e.as_db_error() {
                Some(db) => format!("{}: {}", db.code().code(), db.message()),
                None => format!("no sqlstate: {e}"),
            },
        }
    })
}

/// A second loopback source address, where the machine lets a socket bind it.
fn second_loopback() -> bool {
    std::net::TcpListener::bind("127.0.0.2:0").is_ok()
}

/// A self-signed server certificate: (cert, key) paths in `dir`.
fn server_certificate(dir: &std::path::Path) -> (String, String) {
    let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
    let status = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success());
    (cert.display().to_string(), key.display().to_string())
}

fn users_toml(delay_ms: u64) -> String {
    format!(
        "[auth]\nfailure_delay_ms = {delay_ms}\n\
         [[auth.users]]\nname = \"{}\"\npassword = \"{}\"\n\
         [[auth.users]]\nname = \"bob\"\npassword = \"{BOB_PW}\"\n\
         [[auth.users]]\nname = \"carol\"\npassword = \"{CAROL_PW}\"\n",
        common::USER,
        common::PASSWORD
    )
}

#[test]
fn rules_decide_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = server_certificate(dir.path());
    let rules = "\
        [[auth.rules]]\naddress = \"127.0.0.2/32\"\nuser = \"all\"\ndatabase = \"all\"\nmethod = \"reject\"\n\
        [[auth.rules]]\naddress = \"127.0.0.1\"\nuser = \"bob\"\ndatabase = \"app\"\nmethod = \"trust\"\n\
        [[auth.rules]]\naddress = \"127.0.0.0/8\"\nuser = [\"alice\", \"carol\"]\nmethod = \"scram-sha-256\"\ntls = \"off\"\n\
        [[auth.rules]]\naddress = \"all\"\nuser = \"carol\"\nmethod = \"scram-sha-256\"\ntls = \"required\"\n\
        [[auth.rules]]\naddress = \"::1/128\"\nmethod = \"scram-sha-256\"\n";
    let srv = common::start_with(&format!("[tls]\ncert = {cert:?}\nkey = {key:?}\n{}{rules}", users_toml(10)));
    let no_entry = |host: &str, user: &str, db: &str, enc: &str| {
        format!("no pg_hba.conf entry for host \"{host}\", user \"{user}\", database \"{db}\", {enc}")
    };
    let alice = common::USER;
    // (source, user, password, database, tls, expected)
    let mut table: Vec<(&str, &str, &str, &str, bool, String)> = vec![
        ("127.0.0.1", "bob", "anything", "app", false, "ok".into()),
        (
            "127.0.0.1",
            "bob",
            BOB_PW,
            "other",
            false,
            format!("28000: {}", no_entry("127.0.0.1", "bob", "other", "no encryption")),
        ),
        ("127.0.0.1", alice, common::PASSWORD, "pgtier", false, "ok".into()),
        (
            "127.0.0.1",
            alice,
            "wrong",
            "pgtier",
            false,
            format!("28P01: password authentication failed for user \"{alice}\""),
        ),
        ("127.0.0.1", "carol", CAROL_PW, "pgtier", false, "ok".into()),
        ("127.0.0.1", "carol", CAROL_PW, "pgtier", true, "ok".into()),
        (
            "127.0.0.1",
            alice,
            common::PASSWORD,
            "pgtier",
            true,
            format!("FATAL: {}", no_entry("127.0.0.1", alice, "pgtier", "SSL encryption")),
        ),
        (
            "127.0.0.1",
            "dave",
            "x",
            "pgtier",
            false,
            format!("28000: {}", no_entry("127.0.0.1", "dave", "pgtier", "no encryption")),
        ),
    ];
    let second = second_loopback();
    if second {
        table.extend([
            ("127.0.0.2", alice, common::PASSWORD, "pgtier", false, format!("28000: pg_hba.conf rejects connection for host \"127.0.0.2\", user \"{alice}\", database \"pgtier\", no encryption")),
            ("127.0.0.2", "bob", "", "app", false, "28000: pg_hba.conf rejects connection for host \"127.0.0.2\", user \"bob\", database \"app\", no encryption".into()),
        ]);
    }
    println!("{:<10} {:<6} {:<9} {:<7} {:<5} outcome", "source", "user", "password", "db", "tls");
    let mut wrong = Vec::new();
    for (source, user, password, db, tls, expected) in &table {
        let observed = attempt(&srv.addr, source, user, password, db, *tls);
        let pw = if *password == common::PASSWORD || *password == BOB_PW || *password == CAROL_PW {
            "right"
        } else {
            password
        };
        println!(
            "{source:<10} {user:<6} {pw:<9} {db:<7} {:<5} expected {expected}\n{:>42} observed {observed}",
            tls, ""
        );
        if observed.trim() != expected {
            wrong.push(format!("{source} {user} {db} tls={tls}: expected {expected}, observed {observed}"));
        }
    }
    if !second {
        println!("(127.0.0.2 cannot be bound here: its rows were skipped)");
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn bad_rules_stop_startup_naming_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let base = format!("listen = \"0.0.0.0:0\"\ndata_dir = {:?}\n{}", dir.path().display().to_string(), users_toml(10));
    for (rule, needle) in [
        ("address = \"10.0.0.0/33\"\nmethod = \"reject\"", "auth.rules[1] address"),
        ("address = \"all\"\nmethod = \"md5\"", "auth.rules[1] method"),
        ("address = \"10.0.0.0/8\"\nmethod = \"trust\"", "allow_trust_from_network"),
        ("address = \"all\"\nmethod = \"reject\"\ntls = \"maybe\"", "auth.rules[1] tls"),
    ] {
        let toml = format!("{base}[[auth.rules]]\naddress = \"::1\"\nmethod = \"reject\"\n[[auth.rules]]\n{rule}\n");
        let e = ServerConfig::from_toml_str(&toml).and_then(pgtier_server::start).err().expect(rule);
        assert!(e.to_string().contains(needle), "{rule}: {e}");
    }
    let toml = format!(
        "{base}[[auth.rules]]\naddress = \"10.0.0.0/8\"\nmethod = \"trust\"\nallow_trust_from_network = true\n"
    );
    pgtier_server::start(ServerConfig::from_toml_str(&toml).unwrap()).unwrap().shutdown();
    let toml = base.replace("failure_delay_ms = 10", "failure_delay_ms = 600000");
    let e = ServerConfig::from_toml_str(&toml).and_then(pgtier_server::start).err().unwrap();
    assert!(e.to_string().contains("failure_delay_ms"), "{e}");
}

/// GET /metrics.
fn scrape(addr: SocketAddr) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn a_failed_login_waits_without_holding_up_other_sessions() {
    // Sessions on an event loop: the delay must not stall the loop.
    let srv =
        common::start_with(&format!("event_loops = 1\n[metrics]\nlisten = \"127.0.0.1:0\"\n{}", users_toml(1500)));
    let mut on_loop = srv.client();
    on_loop.simple_query("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    let addr = srv.addr;
    let failing = std::thread::spawn(move || {
        let started = Instant::now();
        let e = postgres::Config::new()
            .host("127.0.0.1")
            .port(addr.port())
            .user(common::USER)
            .password("wrong")
            .dbname("pgtier")
            .connect(postgres::NoTls)
            .err()
            .unwrap();
        (started.elapsed(), e.code().map(|c| c.code().to_owned()))
    });
    std::thread::sleep(Duration::from_millis(150));
    // While that login waits: the loop's session and a new one are served at once.
    let started = Instant::now();
    for i in 0..20 {
        on_loop.execute("INSERT INTO t VALUES ($1)", &[&i]).unwrap();
    }
    let mut fresh = srv.client();
    fresh.simple_query("SELECT count(*) FROM t").unwrap();
    let served = started.elapsed();
    let still_waiting = !failing.is_finished();
    let (waited, code) = failing.join().unwrap();
    println!("failed login answered after {waited:?}; meanwhile 20 inserts and a new session took {served:?}");
    assert_eq!(code.as_deref(), Some("28P01"));
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    assert!(still_waiting, "the other sessions were served only after the failed login's delay ({served:?})");
    // An unknown user and a wrong database name fail the same way, counted apart.
    for user in ["nobody", "nobody"] {
        let mut c = srv.config();
        c.user(user).password("pw");
        assert!(c.connect(postgres::NoTls).is_err());
    }
    let metrics = scrape(srv.server.as_ref().unwrap().metrics_addr().unwrap());
    for line in [
        "pgtier_auth_failures_total{reason=\"password\"} 1",
        "pgtier_auth_failures_total{reason=\"unknown_user\"} 2",
        "pgtier_auth_failures_total{reason=\"no_rule\"} 0",
        "pgtier_auth_failures_by_user_total{user=\"alice\"} 1",
        "pgtier_auth_failures_by_user_total{user=\"nobody\"} 2",
        "pgtier_auth_failures_by_address_total{address=\"127.0.0.1\"} 3",
        "pgtier_auth_successes_total 2",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    assert!(!metrics.contains(common::PASSWORD) && !metrics.contains("wrong"), "{metrics}");
}

#[test]
fn a_users_connection_limit_answers_53300() {
    let toml = users_toml(10)
        .replace(&format!("password = \"{BOB_PW}\"\n"), &format!("password = \"{BOB_PW}\"\nconnection_limit = 1\n"));
    let srv = common::start_with(&toml);
    let mut bob = srv.config();
    bob.user("bob").password(BOB_PW);
    let first = bob.connect(postgres::NoTls).unwrap();
    let e = bob.connect(postgres::NoTls).err().unwrap();
    let db = e.as_db_error().unwrap();
    assert_eq!((db.code().code(), db.message()), ("53300", "too many connections for role \"bob\""));
    // Another user is not limited by bob's count.
    srv.client().simple_query("SELECT 1").unwrap();
    drop(first);
    let started = Instant::now();
    while let Err(e) = bob.connect(postgres::NoTls) {
        assert!(started.elapsed() < Duration::from_secs(5), "bob's place not released: {e}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn tls_minimum_version_and_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl").current_dir(d).args(args).output().expect("openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let (cert, key) = server_certificate(d);
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=carol",
        "-keyout",
        "carol.key",
        "-out",
        "carol.csr",
    ]);
    // A v3 certificate (webpki refuses v1 ones, what `x509 -req` makes without extensions).
    std::fs::write(d.join("client.ext"), "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "carol.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "client.ext",
        "-out",
        "carol.crt",
    ]);
    std::fs::set_permissions(d.join("carol.key"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let ca = d.join("ca.crt").display().to_string();
    let rules = "\
        [[auth.rules]]\naddress = \"all\"\nuser = \"carol\"\nmethod = \"scram-sha-256\"\ntls = \"required\"\nclient_cert = true\n\
        [[auth.rules]]\naddress = \"all\"\nmethod = \"scram-sha-256\"\n";
    let srv = common::start_with(&format!(
        "[tls]\ncert = {cert:?}\nkey = {key:?}\nmin_version = \"1.3\"\nclient_ca = {ca:?}\n{}{rules}",
        users_toml(10)
    ));
    let psql = |user: &str, password: &str, extra: &str| {
        let out = std::process::Command::new("psql")
            .args(["-X", "-At", "-c", "SELECT 1"])
            .arg(format!(
                "host={} port={} user={user} dbname=pgtier sslmode=require {extra}",
                srv.addr.ip(),
                srv.addr.port()
            ))
            .env("PGPASSWORD", password)
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let carol_cert = format!("sslcert={} sslkey={}", d.join("carol.crt").display(), d.join("carol.key").display());
    assert_eq!(psql(common::USER, common::PASSWORD, ""), (true, String::new()));
    let (ok, err) = psql(common::USER, common::PASSWORD, "ssl_max_protocol_version=TLSv1.2");
    assert!(!ok, "TLS 1.2 refused by min_version = 1.3");
    println!("TLS 1.2 client: {}", err.trim());
    assert_eq!(psql("carol", CAROL_PW, &carol_cert), (true, String::new()));
    let (ok, err) = psql("carol", CAROL_PW, "");
    assert!(!ok && err.contains("connection requires a valid client certificate"), "{err}");
}

/// A server started from a file, as `pgtier serve` starts it.
fn start_from_file(path: &std::path::Path, text: &str) -> pgtier_server::RunningServer {
    std::fs::write(path, text).unwrap();
    pgtier_server::start(ServerConfig::from_toml_file(path).unwrap()).unwrap()
}

#[test]
fn reload_applies_auth_to_new_connections_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pgtier.toml");
    let head = "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\nmax_connections = 20\n";
    let server = start_from_file(&path, &format!("{head}{}", users_toml(10)));
    let addr = server.local_addr();
    let connect = |user: &str, password: &str| attempt(&addr, "127.0.0.1", user, password, "pgtier", false);
    let mut config = postgres::Config::new();
    config.host("127.0.0.1").port(addr.port()).user(common::USER).password(common::PASSWORD).dbname("pgtier");
    let mut open = config.connect(postgres::NoTls).unwrap();
    assert_eq!(connect("bob", BOB_PW), "ok");

    // alice's password changes, bob is rejected, max_connections needs a restart.
    let changed = format!(
        "{}{}[[auth.rules]]\naddress = \"all\"\nuser = \"bob\"\nmethod = \"reject\"\n[[auth.rules]]\naddress = \"all\"\nmethod = \"scram-sha-256\"\n",
        head.replace("20", "30"),
        users_toml(10).replace(common::PASSWORD, "new pw")
    );
    std::fs::write(&path, &changed).unwrap();
    let reloaded = server.reload().unwrap();
    assert_eq!(reloaded.restart_needed, vec!["max_connections"]);
    assert_eq!(
        connect(common::USER, common::PASSWORD),
        format!("28P01: password authentication failed for user \"{}\"", common::USER)
    );
    assert_eq!(connect(common::USER, "new pw"), "ok");
    assert!(
        connect("bob", BOB_PW)
            .starts_with("28000: pg_hba.conf rejects connection for host \"127.0.0.1\", user \"bob\"")
    );
    // The session opened before goes on.
    open.simple_query("CREATE TABLE kept (id int)").unwrap();

    // A bad file changes nothing and says why.
    std::fs::write(&path, changed.replace("method = \"reject\"", "method = \"md5\"")).unwrap();
    let e = server.reload().unwrap_err().to_string();
    assert!(e.contains("auth.rules[0] method"), "{e}");
    assert_eq!(connect(common::USER, "new pw"), "ok");
    assert!(connect("bob", BOB_PW).starts_with("28000"));

    // pg_reload_conf() from a session: bob is let in again.
    std::fs::write(&path, format!("{head}{}", users_toml(10).replace(common::PASSWORD, "new pw"))).unwrap();
    let rows = common::text_rows(&mut open, "SELECT pg_reload_conf()");
    assert_eq!(rows, vec![vec![Some("t".to_owned())]]);
    assert_eq!(connect("bob", BOB_PW), "ok");
    open.simple_query("INSERT INTO kept VALUES (1)").unwrap();

    // [settings] is live for new sessions; an open one keeps its values.
    let with_settings = format!(
        "{head}{}
[settings]
statement_timeout = \"7s\"
",
        users_toml(10).replace(common::PASSWORD, "new pw")
    );
    std::fs::write(&path, &with_settings).unwrap();
    assert!(server.reload().unwrap().restart_needed.is_empty());
    config.password("new pw");
    let mut fresh = config.connect(postgres::NoTls).unwrap();
    assert_eq!(common::text_rows(&mut fresh, "SHOW statement_timeout"), vec![vec![Some("7s".to_owned())]]);
    assert_eq!(common::text_rows(&mut open, "SHOW statement_timeout"), vec![vec![Some("0".to_owned())]]);
    // A value SET would refuse changes nothing.
    std::fs::write(&path, with_settings.replace("7s", "seven")).unwrap();
    assert!(server.reload().unwrap_err().to_string().contains("[settings] statement_timeout"));
    let mut again = config.connect(postgres::NoTls).unwrap();
    assert_eq!(common::text_rows(&mut again, "SHOW statement_timeout"), vec![vec![Some("7s".to_owned())]]);
    drop((open, fresh, again));
    server.shutdown();
}

#[test]
fn reload_retunes_the_cache_and_names_what_needs_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pgtier.toml");
    let head = "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\n";
    let cache = "[cache]\nmemory_budget = \"512MB\"\nawt_batch_delay_ms = 0\nawt_node = \"first\"\n";
    let server = start_from_file(&path, &format!("{head}{}{cache}", users_toml(10)));
    let before = server.cache().unwrap().tuning();
    assert_eq!(before.memory_budget, Some(512 << 20));

    // The budget, watermarks and write-through's delay are live; the node name is not.
    let changed = cache.replace("512MB", "64MB").replace("= 0", "= 5").replace("first", "second")
        + "high_watermark = 0.7\nlow_watermark = 0.5\n";
    std::fs::write(&path, format!("{head}{}{changed}", users_toml(10))).unwrap();
    assert_eq!(server.reload().unwrap().restart_needed, vec!["[cache] awt_node"]);
    let tuned = server.cache().unwrap().tuning();
    assert_eq!(tuned.memory_budget, Some(64 << 20));
    assert_eq!(tuned.awt_batch_delay, std::time::Duration::from_millis(5));
    assert_eq!((tuned.high_watermark, tuned.low_watermark), (0.7, 0.5));
    assert_eq!(server.cache().unwrap().identity().name, "first");

    // A bad value changes nothing and names its key.
    std::fs::write(&path, format!("{head}{}{}", users_toml(10), changed.replace("0.5", "0.9"))).unwrap();
    let e = server.reload().unwrap_err().to_string();
    assert!(e.contains("[cache] low_watermark"), "{e}");
    assert_eq!(server.cache().unwrap().tuning(), tuned);
    server.shutdown();
}
