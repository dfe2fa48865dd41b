//! Shared by the server's integration tests: an in-process server on a free
//! loopback port over a fresh data directory, and clients for it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;

use pgtier_server::{RunningServer, ServerConfig};

pub const USER: &str = "alice";
pub const PASSWORD: &str = "s3cret pw";

pub struct TestServer {
    pub server: Option<RunningServer>,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
}

/// With `PGTIER_LOG_ALL` set, every event of the test process at DEBUG on
/// stderr, as `pgtier serve` writes them (to search a whole run's logs for
/// secrets: server README, "Logging"). A test that installed its own
/// subscriber first keeps it.
fn log_all_if_asked() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if std::env::var_os("PGTIER_LOG_ALL").is_some() {
        ONCE.call_once(|| {
            let all = pgtier_server::LogSection { level: "debug".into(), ..pgtier_server::LogSection::default() };
            let _ = pgtier_server::logging::init(&all.settings().unwrap());
        });
    }
}

/// A server with user alice (SCRAM) and `extra` TOML appended.
pub fn start_with(extra: &str) -> TestServer {
    log_all_if_asked();
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\ncommit_mode = \"async\"\n{extra}\n",
        dir.path().join("data").display().to_string()
    );
    let toml = if extra.contains("[auth]") {
        toml
    } else {
        format!(
            "{toml}\n[auth]\nmethod = \"scram-sha-256\"\n[[auth.users]]\nname = \"{USER}\"\npassword = \"{PASSWORD}\"\n"
        )
    };
    let config = ServerConfig::from_toml_str(&toml).unwrap();
    let server = pgtier_server::start(config).unwrap();
    let addr = server.local_addr();
    TestServer { server: Some(server), addr, dir }
}

pub fn start() -> TestServer {
    start_with("")
}

impl TestServer {
    pub fn url(&self) -> String {
        format!("postgresql://{USER}:{}@{}:{}/pgtier", PASSWORD.replace(' ', "%20"), self.addr.ip(), self.addr.port())
    }

    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url(), postgres::NoTls).unwrap()
    }

    pub fn config(&self) -> postgres::Config {
        let mut c = postgres::Config::new();
        c.host(&self.addr.ip().to_string()).port(self.addr.port()).user(USER).password(PASSWORD).dbname("pgtier");
        c
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

/// A pgtier server and a PostgreSQL database, both given `setup` (DDL
/// and rows): (server, pgtier client, PostgreSQL client).
pub fn both(name: &str, setup: &[&str]) -> (TestServer, postgres::Client, postgres::Client) {
    let srv = start();
    let mut tier = srv.client();
    let mut pg = postgres(name);
    for c in [&mut tier, &mut pg] {
        for sql in setup {
            c.batch_execute(sql).unwrap();
        }
    }
    (srv, tier, pg)
}

/// A fresh database on the shared private PostgreSQL (the oracle).
pub fn postgres(name: &str) -> postgres::Client {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("{name}_{}", std::process::id())).unwrap();
    pgtier_backend::connect(&url).unwrap()
}

/// Any column's value in its binary wire form, untouched.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Raw(pub Vec<u8>);

impl<'a> postgres_types::FromSql<'a> for Raw {
    fn from_sql(_: &postgres_types::Type, raw: &'a [u8]) -> Result<Raw, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(raw.to_vec()))
    }
    fn accepts(_: &postgres_types::Type) -> bool {
        true
    }
}

impl postgres_types::ToSql for Raw {
    fn to_sql(
        &self,
        _: &postgres_types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres_types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(postgres_types::IsNull::No)
    }
    fn accepts(_: &postgres_types::Type) -> bool {
        true
    }
    postgres_types::to_sql_checked!();
}

/// Every column of every row: Some(bytes) in binary form, None for NULL.
pub fn binary_rows(c: &mut postgres::Client, sql: &str) -> Vec<Vec<Option<Raw>>> {
    c.query(sql, &[]).unwrap().iter().map(|r| (0..r.len()).map(|i| r.get::<_, Option<Raw>>(i)).collect()).collect()
}

/// The bytes of `COPY ... TO STDOUT`.
pub fn copy_out(c: &mut postgres::Client, sql: &str) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut c.copy_out(sql).unwrap(), &mut out).unwrap();
    out
}

/// `table` COPYed out of pgtier and PostgreSQL, in binary and in text
/// (ordered by `id`), byte for byte alike; then PostgreSQL's output loaded
/// into the emptied table on each side (`rows` rows) copies out unchanged.
pub fn copy_round_trip(tier: &mut postgres::Client, pg: &mut postgres::Client, table: &str, rows: u64) {
    let binary = format!("COPY (SELECT * FROM {table} ORDER BY id) TO STDOUT (FORMAT binary)");
    let text = format!("COPY (SELECT * FROM {table} ORDER BY id) TO STDOUT");
    let pg_binary = copy_out(pg, &binary);
    assert_eq!(copy_out(tier, &binary), pg_binary);
    let pg_text = copy_out(pg, &text);
    let tier_text = copy_out(tier, &text);
    assert_eq!(tier_text, pg_text, "{}", String::from_utf8_lossy(&tier_text));
    for c in [tier, pg] {
        for (format, data) in [("(FORMAT binary)", &pg_binary), ("", &pg_text)] {
            c.batch_execute(&format!("DELETE FROM {table}")).unwrap();
            let mut w = c.copy_in(&format!("COPY {table} FROM STDIN {format}")).unwrap();
            std::io::Write::write_all(&mut w, data).unwrap();
            assert_eq!(w.finish().unwrap(), rows);
            assert_eq!(copy_out(c, &binary), pg_binary);
        }
    }
}

/// Every row in text form through the simple protocol.
pub fn text_rows(c: &mut postgres::Client, sql: &str) -> Vec<Vec<Option<String>>> {
    c.simple_query(sql)
        .unwrap()
        .iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect()),
            _ => None,
        })
        .collect()
}

/// Runs `psql` with `script` on stdin against the server (no .psqlrc).
pub fn psql(srv: &TestServer, script: &str, extra: &[&str]) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new("psql")
        .args([
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            &srv.addr.ip().to_string(),
            "-p",
            &srv.addr.port().to_string(),
            "-U",
            USER,
            "-d",
            "pgtier",
        ])
        .args(extra)
        .env("PGPASSWORD", PASSWORD)
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql (apt-get install postgresql-client)");
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

// ---- raw protocol, for what drivers never send

/// How long a raw exchange may wait for the server to close.
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub fn startup_packet(user: &str) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&196_608i32.to_be_bytes());
    for s in ["user", user, "database", "pgtier", ""] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    let mut p = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    p.extend_from_slice(&body);
    p
}

pub fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

pub fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// Sends `bytes`, half-closes, and reads until the server closes. Panics
/// if that takes longer than the timeout (a hang).
pub fn exchange(srv: &TestServer, bytes: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    // The server may close before reading everything: ignore write errors.
    let _ = std::io::Write::write_all(&mut s, bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let started = std::time::Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match std::io::Read::read(&mut s, &mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("no close within {TIMEOUT:?} ({:?}): {e}", started.elapsed()),
        }
    }
}

/// The SQLSTATEs of the ErrorResponses in a backend byte stream.
pub fn sqlstates(stream: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 5 <= stream.len() {
        let tag = stream[i];
        let len = i32::from_be_bytes(stream[i + 1..i + 5].try_into().unwrap()) as usize;
        // 'N' from SSLRequest answers is one byte, not a message.
        if len < 4 || i + 1 + len > stream.len() {
            break;
        }
        if tag == b'E' {
            let body = &stream[i + 5..i + 1 + len];
            let mut j = 0;
            while j < body.len() && body[j] != 0 {
                let end = body[j + 1..].iter().position(|&b| b == 0).map_or(body.len(), |p| j + 1 + p);
                if body[j] == b'C' {
                    out.push(String::from_utf8_lossy(&body[j + 1..end]).into_owned());
                }
                j = end + 1;
            }
        }
        i += 1 + len;
    }
    out
}
