//! Shared by the real-client tests (drivers.rs, pgbench.rs): the two servers
//! every test runs against, and the client programs.
#![allow(dead_code)] // each test binary uses a different part

pub mod clients;

use clients::Endpoint;
use pgtier_backend::{ClusterOptions, PrivateCluster};

/// The one login both servers accept; clients authenticate with SCRAM-SHA-256.
pub const USER: &str = "postgres";
pub const PASSWORD: &str = "drivers-Secret-42";
pub const DBNAME: &str = "postgres";

/// A private PostgreSQL whose TCP logins need scram-sha-256 (the oracle).
pub fn start_postgres() -> PrivateCluster {
    PrivateCluster::start(ClusterOptions { password: Some(PASSWORD.to_owned()), ..ClusterOptions::default() })
        .expect("start a private PostgreSQL (scripts/ensure-postgres.sh installs it)")
}

pub fn postgres_endpoint(cluster: &PrivateCluster) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".to_owned(),
        port: cluster.port(),
        user: USER.to_owned(),
        password: PASSWORD.to_owned(),
        dbname: DBNAME.to_owned(),
    }
}

/// An in-process pgtier server with one SCRAM user, its data in a temp dir.
pub struct Pgtier {
    pub server: pgtier_server::RunningServer,
    pub endpoint: Endpoint,
    _data: tempfile::TempDir,
}

pub fn start_pgtier(commit_mode: &str) -> Pgtier {
    start_pgtier_with(commit_mode, "")
}

/// As [`start_pgtier`], with `sections` (TOML: `[backend]`, `[cache]`, ...) added.
pub fn start_pgtier_with(commit_mode: &str, sections: &str) -> Pgtier {
    let data = tempfile::tempdir().expect("pgtier data dir");
    let config = format!(
        r#"
listen = "127.0.0.1:0"
data_dir = "{}"
commit_mode = "{commit_mode}"
max_connections = 64

[auth]
method = "scram-sha-256"

[[auth.users]]
name = "{USER}"
password = "{PASSWORD}"

{sections}
"#,
        data.path().join("db").display()
    );
    let config = pgtier_server::ServerConfig::from_toml_str(&config).expect("pgtier config");
    let server = pgtier_server::start(config).expect("start pgtier server");
    let endpoint = Endpoint {
        host: "127.0.0.1".to_owned(),
        port: server.local_addr().port(),
        user: USER.to_owned(),
        password: PASSWORD.to_owned(),
        dbname: DBNAME.to_owned(),
    };
    Pgtier { server, endpoint, _data: data }
}
