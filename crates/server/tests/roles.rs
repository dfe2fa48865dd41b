//! Roles over the wire: a role made with CREATE ROLE ... PASSWORD logs in
//! with SCRAM, NOLOGIN / VALID UNTIL / CONNECTION LIMIT are enforced as
//! PostgreSQL enforces them, privileges granted and revoked take effect
//! for open sessions, the server's own statements and cache-group
//! statements are a superuser's, passthrough is a superuser's unless the
//! configuration allows others, and roles survive a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{PASSWORD, USER};

fn code(e: &postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

fn connect(addr: std::net::SocketAddr, user: &str, password: &str) -> Result<postgres::Client, postgres::Error> {
    let mut c = postgres::Config::new();
    c.host(&addr.ip().to_string()).port(addr.port()).user(user).password(password).dbname("pgtier");
    c.connect(postgres::NoTls)
}

/// The server config of `dir` with alice as the configured user.
fn config(dir: &std::path::Path, extra: &str) -> pgtier_server::ServerConfig {
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\ncommit_mode = \"async\"\n{extra}\n[auth]\nfailure_delay_ms = 0\n[[auth.users]]\nname = \"{USER}\"\npassword = \"{PASSWORD}\"\n",
        dir.join("data").display().to_string()
    );
    pgtier_server::ServerConfig::from_toml_str(&toml).unwrap()
}

#[test]
fn created_roles_log_in_and_get_only_what_is_granted() {
    let dir = tempfile::tempdir().unwrap();
    let server = pgtier_server::start(config(dir.path(), "")).unwrap();
    let addr = server.local_addr();
    let mut alice = connect(addr, USER, PASSWORD).unwrap();
    alice
        .batch_execute(
            "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'one');
             CREATE ROLE bob LOGIN PASSWORD 'bob pw';
             CREATE ROLE sleeper NOLOGIN PASSWORD 'sleeper pw';
             CREATE ROLE expired LOGIN PASSWORD 'old pw' VALID UNTIL '2001-01-01';
             CREATE ROLE single LOGIN PASSWORD 'one pw' CONNECTION LIMIT 1",
        )
        .unwrap();

    // The configuration file's user is a superuser role, OID 10.
    let row = alice.query_one("SELECT rolsuper, oid::int8 FROM pg_roles WHERE rolname = $1", &[&USER]).unwrap();
    assert_eq!((row.get::<_, bool>(0), row.get::<_, i64>(1)), (true, 10));
    assert_eq!(code(&alice.batch_execute(&format!("DROP ROLE {USER}")).unwrap_err()), "55006");

    // Logins as PostgreSQL answers them.
    assert_eq!(code(&connect(addr, "bob", "wrong").err().unwrap()), "28P01");
    assert_eq!(code(&connect(addr, "sleeper", "sleeper pw").err().unwrap()), "28000");
    assert_eq!(code(&connect(addr, "expired", "old pw").err().unwrap()), "28P01");
    assert_eq!(code(&connect(addr, "nobody", "x").err().unwrap()), "28P01");
    let first = connect(addr, "single", "one pw").unwrap();
    assert_eq!(code(&connect(addr, "single", "one pw").err().unwrap()), "53300");
    drop(first);

    let mut bob = connect(addr, "bob", "bob pw").unwrap();
    let who = bob.query_one("SELECT current_user, session_user, current_setting('is_superuser')", &[]).unwrap();
    assert_eq!((who.get::<_, String>(0), who.get::<_, String>(2)), ("bob".to_owned(), "off".to_owned()));
    assert_eq!(code(&bob.query("SELECT * FROM t", &[]).unwrap_err()), "42501");
    // Granted: the open session sees it at its next statement, prepared
    // statements included (checked at each run).
    let select = bob.prepare("SELECT v FROM t WHERE id = $1").unwrap();
    assert_eq!(code(&bob.query(&select, &[&1i32]).unwrap_err()), "42501");
    alice.batch_execute("GRANT SELECT ON t TO bob").unwrap();
    assert_eq!(bob.query_one(&select, &[&1i32]).unwrap().get::<_, String>(0), "one");
    assert_eq!(code(&bob.execute("INSERT INTO t VALUES (2, 'two')", &[]).unwrap_err()), "42501");
    alice.batch_execute("REVOKE SELECT ON t FROM bob").unwrap();
    assert_eq!(code(&bob.query(&select, &[&1i32]).unwrap_err()), "42501");

    // The server's own statements and the cache-group ones: superusers only.
    assert_eq!(code(&bob.batch_execute("CHECKPOINT").unwrap_err()), "42501");
    assert_eq!(code(&bob.batch_execute("SELECT pg_reload_conf()").unwrap_err()), "42501");
    let backup = dir.path().join("backup");
    let e = bob.batch_execute(&format!("BACKUP TO '{}'", backup.display())).unwrap_err();
    assert_eq!(code(&e), "42501");
    assert!(!backup.exists(), "a refused backup wrote nothing");
    let e = bob.batch_execute("CREATE READONLY CACHE GROUP g FROM remote_only").unwrap_err();
    assert_eq!(code(&e), "42501");
    assert_eq!(code(&bob.batch_execute("CREATE ROLE carol").unwrap_err()), "42501");
    assert_eq!(code(&bob.batch_execute("SET lc_messages = 'C'").unwrap_err()), "42501");
    assert_eq!(code(&bob.batch_execute(&format!("SET SESSION AUTHORIZATION {USER}")).unwrap_err()), "42501");
    assert_eq!(code(&bob.batch_execute(&format!("SET ROLE {USER}")).unwrap_err()), "42501");
    // Its own password it may change.
    bob.batch_execute("ALTER ROLE bob PASSWORD 'new bob pw'").unwrap();
    drop(bob);
    assert_eq!(code(&connect(addr, "bob", "bob pw").err().unwrap()), "28P01");
    connect(addr, "bob", "new bob pw").unwrap();

    // pg_cache_admin may run cache-group statements (this server has no
    // backend: the statement gets as far as needing one).
    alice.batch_execute("GRANT pg_cache_admin TO bob").unwrap();
    let mut bob = connect(addr, "bob", "new bob pw").unwrap();
    let e = bob.batch_execute("CREATE READONLY CACHE GROUP g FROM remote_only").unwrap_err();
    assert_ne!(code(&e), "42501", "{e}");
    drop((alice, bob));

    // Roles, their passwords and grants outlive a restart.
    server.shutdown();
    let server = pgtier_server::start(config(dir.path(), "")).unwrap();
    let addr = server.local_addr();
    let mut alice = connect(addr, USER, PASSWORD).unwrap();
    alice.batch_execute("GRANT SELECT ON t TO bob").unwrap();
    let mut bob = connect(addr, "bob", "new bob pw").unwrap();
    assert_eq!(bob.query("SELECT * FROM t", &[]).unwrap().len(), 1);
    server.shutdown();
}

#[test]
fn passthrough_is_for_superusers_unless_allowed() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("roles_pt_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute("CREATE TABLE remote_t (id int PRIMARY KEY); INSERT INTO remote_t VALUES (1)").unwrap();
    for (allowed, expect_bob) in [(false, Some("42501")), (true, None)] {
        let dir = tempfile::tempdir().unwrap();
        let extra = format!(
            "[backend]\nurl = {url:?}\npool_size = 2\n[passthrough]\nmode = \"reads\"\nnon_superusers = {allowed}\n"
        );
        let server = pgtier_server::start(config(dir.path(), &extra)).unwrap();
        let addr = server.local_addr();
        let mut alice = connect(addr, USER, PASSWORD).unwrap();
        assert_eq!(alice.query("SELECT id FROM remote_t", &[]).unwrap().len(), 1);
        alice.batch_execute("CREATE ROLE bob LOGIN PASSWORD 'bob pw'").unwrap();
        let mut bob = connect(addr, "bob", "bob pw").unwrap();
        match (bob.query("SELECT id FROM remote_t", &[]), expect_bob) {
            (Err(e), Some(expected)) => assert_eq!(code(&e), expected),
            (Ok(rows), None) => assert_eq!(rows.len(), 1),
            (other, _) => panic!("non_superusers = {allowed}: {other:?}"),
        }
        server.shutdown();
    }
}
