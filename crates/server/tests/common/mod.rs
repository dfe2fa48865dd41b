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

/// A server with user alice (SCRAM) and `extra` TOML appended.
pub fn start_with(extra: &str) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\ncommit_mode = \"async\"\n{extra}\n",
        dir.path().join("data").display().to_string()
    );
    let toml = if extra.contains("[auth]") {
        toml
    } else {
        format!("{toml}\n[auth]\nmethod = \"scram-sha-256\"\n[[auth.users]]\nname = \"{USER}\"\npassword = \"{PASSWORD}\"\n")
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
    fn to_sql(&self, _: &postgres_types::Type, out: &mut bytes::BytesMut) -> Result<postgres_types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
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
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", &srv.addr.ip().to_string(), "-p", &srv.addr.port().to_string(), "-U", USER, "-d", "pgtier"])
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
