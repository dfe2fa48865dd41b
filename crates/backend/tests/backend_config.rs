//! `[backend]` resolved and connected with the sync client against a private
//! PostgreSQL that requires a password: the password from a file logs in, a
//! wrong one is a clear 28P01 without the secret, and modes that need TLS
//! are refused instead of silently connecting in plain text.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use pgtier_backend::{BackendConfig, ClusterOptions, ConnectError, PrivateCluster, SslMode, connect_backend};

const SECRET: &str = "sync-client-secret-7Qa";

#[test]
fn the_sync_client_connects_with_resolved_params() {
    let cluster =
        PrivateCluster::start(ClusterOptions { password: Some(SECRET.to_owned()), ..ClusterOptions::default() })
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    };
    let mut config = BackendConfig {
        url: Some(format!("postgresql://postgres@127.0.0.1:{}/postgres", cluster.port())),
        password_file: Some(file("pw", &format!("{SECRET}\n"))),
        ..BackendConfig::default()
    };
    let one: i32 = connect_backend(&config.resolve().unwrap()).unwrap().query_one("SELECT 1", &[]).unwrap().get(0);
    assert_eq!(one, 1);

    config.password_file = Some(file("wrong", "not-the-password"));
    let error = connect_backend(&config.resolve().unwrap()).err().unwrap();
    assert!(matches!(&error, ConnectError::AuthenticationFailed { sqlstate, .. } if sqlstate == "28P01"), "{error}");
    assert!(!error.to_string().contains(SECRET) && !error.to_string().contains("not-the-password"), "{error}");

    config.password_file = Some(dir.path().join("pw"));
    for mode in [SslMode::Require, SslMode::VerifyFull] {
        config.sslmode = Some(mode);
        config.sslrootcert = Some(dir.path().join("ca.pem"));
        let error = connect_backend(&config.resolve().unwrap()).err().unwrap();
        assert!(error.to_string().contains("needs TLS"), "{error}");
    }
}
