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
