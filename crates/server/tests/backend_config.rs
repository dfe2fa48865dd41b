//! `[backend]` against a real private PostgreSQL that requires a password:
//! passthrough logs in with the password from a file and from an
//! environment variable, the deprecated `[passthrough]` keys still work and
//! warn, a wrong password is a clear error for the client while the server
//! goes on, the secret never appears in anything the process prints, every
//! configuration mistake is one line before anything listens, and TLS to
//! the backend in each `sslmode` (certificates made with the openssl CLI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{TestServer, text_rows};
use pgtier_backend::{ClusterOptions, PrivateCluster};
use pgtier_server::ServerConfig;

/// The backend superuser's password. Must never be printed.
const SECRET: &str = "Xq7-backend-secret-Zk2";
/// A wrong password, never printed either.
const WRONG: &str = "Wr0ng-backend-secret-Pp9";
/// Set in the child process of `secrets_never_reach_output`.
const CHILD: &str = "PGTIER_TEST_SECRETS_CHILD";
const PASSWORD_ENV: &str = "PGTIER_TEST_BACKEND_PASSWORD";
const REMOTE: &str =
    "CREATE TABLE remote_t (id int PRIMARY KEY, name text); INSERT INTO remote_t VALUES (1, 'one'), (2, 'two')";

fn code(e: &postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

fn password_cluster() -> PrivateCluster {
    PrivateCluster::start(ClusterOptions { password: Some(SECRET.to_owned()), ..ClusterOptions::default() })
        .expect("private PostgreSQL")
}

/// Database `name` with `remote_t`; its URL without a password, for `host`.
fn remote_database(cluster: &PrivateCluster, name: &str, host: &str) -> String {
    let admin = cluster.create_database(name).unwrap();
    pgtier_backend::connect(&admin).unwrap().batch_execute(REMOTE).unwrap();
    format!("postgresql://postgres@{host}:{}/{name}", cluster.port())
}

fn secret_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn quoted(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

fn remote_count(srv: &TestServer) -> Result<i64, postgres::Error> {
    srv.client().query_one("SELECT count(*) FROM remote_t", &[]).map(|r| r.get(0))
}

/// Runs the real test in a child process (this binary again) so that
/// everything the server prints can be captured and searched for the
/// secret: the deprecation warnings, errors, Debug dumps of the config,
/// and PostgreSQL's own log.
#[test]
fn secrets_never_reach_output() {
    if std::env::var_os(CHILD).is_some() {
        return password_sources_in_child();
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "secrets_never_reach_output", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .env(PASSWORD_ENV, SECRET)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("child: done"), "the child did not run its checks:\n{text}");
    let warned = |line: &str| text.lines().any(|l| l.contains(" WARN ") && l.ends_with(line));
    assert!(warned("[passthrough] backend_url is deprecated; use [backend] url"), "{text}");
    assert!(warned("[passthrough] pool_size is deprecated; use [backend] pool_size"), "{text}");
    for secret in [SECRET, WRONG] {
        assert!(!text.contains(secret), "a password was printed:\n{text}");
    }
}

fn password_sources_in_child() {
    // Every event at every level goes to stderr, searched for the secret too.
    let all = pgtier_server::LogSection { level: "debug".into(), ..pgtier_server::LogSection::default() };
    pgtier_server::logging::init(&all.settings().unwrap()).unwrap();
    let cluster = password_cluster();
    let url = remote_database(&cluster, "secrets", "127.0.0.1");
    let dir = tempfile::tempdir().unwrap();
    let good = secret_file(dir.path(), "pw", &format!("{SECRET}\n"), 0o600);
    let wrong = secret_file(dir.path(), "wrong", WRONG, 0o600);
    let reads = "[passthrough]\nmode = \"reads\"\n";

    // The password from a file, then from the environment.
    for source in [format!("password_file = {}", quoted(&good)), format!("password_env = \"{PASSWORD_ENV}\"")] {
        let toml = format!("[backend]\nurl = {url:?}\n{source}\npool_size = 2\n{reads}");
        let srv = common::start_with(&toml);
        assert_eq!(remote_count(&srv).unwrap(), 2, "{source}");
        eprintln!("child: config {:?}", srv_config(&toml));
        eprintln!("child: resolved {:?}", srv_config(&toml).backend().unwrap().unwrap());
    }

    // The deprecated keys, the password in the URL: works, and warns.
    let with_password = url.replace("postgres@", &format!("postgres:{SECRET}@"));
    let toml = format!("[passthrough]\nmode = \"reads\"\nbackend_url = {with_password:?}\npool_size = 2\n");
    assert_eq!(srv_config(&toml).deprecations().len(), 2);
    let srv = common::start_with(&toml);
    assert_eq!(remote_count(&srv).unwrap(), 2);
    eprintln!("child: deprecated config {:?}", srv_config(&toml));
    drop(srv);

    // A wrong password: PostgreSQL's 28P01 reaches the client inside a
    // clear 08001, every time; the session and the server go on.
    let srv = common::start_with(&format!("[backend]\nurl = {url:?}\npassword_file = {}\n{reads}", quoted(&wrong)));
    let mut tier = srv.client();
    for _ in 0..2 {
        let e = tier.simple_query("SELECT * FROM remote_t").unwrap_err();
        assert_eq!(code(&e), "08001", "{e}");
        let db = e.as_db_error().unwrap();
        eprintln!("child: wrong password: {db:?}");
        assert!(
            db.message().contains("password authentication failed") && db.message().contains("SQLSTATE 28P01"),
            "{db:?}"
        );
        assert!(db.message().contains(&url), "{db:?}");
        assert!(db.hint().unwrap().contains("password_file"), "{db:?}");
        let e = tier.query("SELECT * FROM remote_t WHERE id = $1", &[&1i32]).unwrap_err();
        assert_eq!(code(&e), "08001", "{e}");
    }
    tier.batch_execute("CREATE TABLE here (id int PRIMARY KEY); INSERT INTO here VALUES (1)").unwrap();
    assert_eq!(text_rows(&mut tier, "SELECT id FROM here"), vec![vec![Some("1".into())]]);
    assert_eq!(text_rows(&mut srv.client(), "SELECT count(*) FROM here"), vec![vec![Some("1".into())]]);
    drop(srv);

    // Configuration errors that involve the secret.
    for toml in [
        format!("[backend]\nurl = {with_password:?}\npassword_file = {}\n", quoted(&good)),
        format!("[backend]\nurl = {with_password:?}\npassword_env = \"{PASSWORD_ENV}\"\n"),
        format!("[backend]\nurl = {:?}\n", with_password.replace("/secrets", ":notaport/secrets")),
        format!("[backend]\nurl = {with_password:?}\n[passthrough]\nbackend_url = {with_password:?}\n"),
    ] {
        let e = start_error(&toml);
        eprintln!("child: refused: {e}");
    }
    eprintln!("child: PostgreSQL's log:\n{}", std::fs::read_to_string(cluster.log_file()).unwrap_or_default());
    println!("child: done");
}

fn srv_config(extra: &str) -> ServerConfig {
    ServerConfig::from_toml_str(&format!("data_dir = \"unused\"\n{extra}")).unwrap()
}

/// The error `start` refuses `extra` with: one line, and nothing created.
fn start_error(extra: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let toml = format!("listen = \"127.0.0.1:0\"\ndata_dir = {}\n[auth]\nmethod = \"trust\"\n{extra}", quoted(&data));
    let e = ServerConfig::from_toml_str(&toml).and_then(pgtier_server::start).err().expect(extra).to_string();
    assert!(!e.contains('\n'), "{e}");
    assert!(!data.exists(), "the data directory was created before the configuration error: {e}");
    e
}

#[test]
fn configuration_errors_are_one_clear_line_before_anything_listens() {
    let dir = tempfile::tempdir().unwrap();
    let ok = secret_file(dir.path(), "pw", "pw", 0o600);
    let open = secret_file(dir.path(), "open", "pw", 0o644);
    let url = "postgresql://app@db.example:5432/app";
    let backend = |extra: &str| format!("[backend]\nurl = {url:?}\n{extra}");
    let cases = [
        ("[backend]\nurl = \"mysql://app@db/app\"\n".to_owned(), "must be a postgres:// or postgresql:// URL"),
        (format!("[backend]\nurl = \"postgresql://app:{SECRET}@db:notaport/app\"\n"), "postgresql://app:***@db"),
        ("[backend]\npassword_env = \"X\"\n".to_owned(), "[backend] url is missing"),
        (backend(&format!("password_file = {}\n", quoted(&dir.path().join("missing")))), "No such file"),
        (backend(&format!("password_file = {}\n", quoted(&open))), "has group or world access (mode 0644)"),
        (backend(&format!("password_file = {}\n", quoted(dir.path()))), "is not a regular file"),
        (
            backend("password_env = \"PGTIER_TEST_SURELY_UNSET_7F3A\"\n"),
            "environment variable PGTIER_TEST_SURELY_UNSET_7F3A is not set",
        ),
        (
            backend(&format!("password_file = {}\npassword_env = \"X\"\n", quoted(&ok))),
            "both password_file and password_env",
        ),
        (
            format!("[backend]\nurl = \"postgresql://app:pw@db/app\"\npassword_file = {}\n", quoted(&ok)),
            "carries a password and [backend] password_file",
        ),
        (backend("sslmode = \"verify_full\"\n"), "unknown variant `verify_full`"),
        (backend("sslmode = \"verify-full\"\n"), "needs sslrootcert"),
        (
            backend(&format!("sslmode = \"require\"\nsslrootcert = {}\n", quoted(&dir.path().join("ca.pem")))),
            "[backend] sslrootcert",
        ),
        (backend("pool_size = 0\n"), "[backend] pool_size must be at least 1"),
        (backend("passwrd_file = \"x\"\n"), "unknown field `passwrd_file`"),
        ("[backend]\nurl = \"postgresql://app@db/app?sslmode=require\"\n".to_owned(), "set sslmode as its own key"),
        (
            "[passthrough]\nmode = \"reads\"\n".to_owned(),
            "[passthrough] mode is \"reads\" but no backend is configured; set [backend] url",
        ),
        (backend(&format!("[passthrough]\nmode = \"all\"\nbackend_url = {url:?}\n")), "keep [backend] url"),
        (backend("pool_size = 2\n[passthrough]\npool_size = 3\n"), "keep [backend] pool_size"),
        (
            format!("[passthrough]\nmode = \"all\"\nbackend_url = {url:?}\npool_size = 0\n"),
            "pool_size must be at least 1",
        ),
    ];
    for (toml, needle) in cases {
        let e = start_error(&toml);
        assert!(e.contains(needle), "{toml}\n=> {e}\n(expected {needle:?})");
        assert!(!e.contains(SECRET), "{e}");
    }
    // A root-owned file others cannot read, group-readable, is accepted
    // (libpq's rule for key files: a secret mounted for a group).
    let group = secret_file(dir.path(), "group", "pw", 0o640);
    let toml = format!("data_dir = \"d\"\n{}", backend(&format!("password_file = {}\n", quoted(&group))));
    let resolved = ServerConfig::from_toml_str(&toml).unwrap().backend();
    let root = std::fs::metadata(&group).map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap();
    assert_eq!(resolved.is_ok(), root, "{resolved:?}");
}

/// Relative password_file and sslrootcert paths are the config file's.
#[test]
fn relative_paths_are_taken_from_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    secret_file(dir.path(), "pw", "pw", 0o600);
    let file = dir.path().join("pgtier.toml");
    std::fs::write(&file, "data_dir = \"d\"\n[backend]\nurl = \"postgresql://app@db/app\"\npassword_file = \"pw\"\nsslrootcert = \"ca.pem\"\n").unwrap();
    let config = ServerConfig::from_toml_file(&file).unwrap();
    let params = config.backend().unwrap().unwrap();
    assert_eq!(params.config.get_password(), Some(&b"pw"[..]));
    assert_eq!(params.sslrootcert, Some(dir.path().join("ca.pem")));
    assert!(format!("{config:?}").contains("password_file"));
}

// ------------------------------------------------------------ TLS

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success(), "openssl {args:?}");
}

/// A CA, a server certificate it signed for DNS:localhost only, and an
/// unrelated CA.
fn certificates(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let ca = |name: &str| {
        let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
        let mut args = vec![
            "req",
            "-x509",
            "-days",
            "2",
            "-subj",
            "/CN=pgtier test CA",
            "-keyout",
            key.as_str(),
            "-out",
            crt.as_str(),
        ];
        args.extend(ec);
        openssl(dir, &args);
    };
    ca("ca");
    ca("other");
    let mut args = vec!["req", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr"];
    args.extend(ec);
    openssl(dir, &args);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName = DNS:localhost\nbasicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature\nextendedKeyUsage = serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.crt",
        ],
    );
}

/// Turns `ssl = on` with the server certificate from `dir`, and waits
/// until new connections see it.
fn enable_ssl(cluster: &PrivateCluster, dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let data = cluster.data_dir();
    let owner = std::fs::metadata(data).unwrap();
    for name in ["server.crt", "server.key"] {
        let to = data.join(name);
        std::fs::copy(dir.join(name), &to).unwrap();
        std::os::unix::fs::chown(&to, Some(owner.uid()), Some(owner.gid())).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut admin = pgtier_backend::connect(&cluster.url()).unwrap();
    for sql in [
        "ALTER SYSTEM SET ssl_cert_file = 'server.crt'",
        "ALTER SYSTEM SET ssl_key_file = 'server.key'",
        "ALTER SYSTEM SET ssl = on",
        "SELECT pg_reload_conf()",
    ] {
        admin.batch_execute(sql).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let on: String = pgtier_backend::connect(&cluster.url()).unwrap().query_one("SHOW ssl", &[]).unwrap().get(0);
        if on == "on" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "ssl not on after reload: {}",
            std::fs::read_to_string(cluster.log_file()).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether passthrough's connections to database `db` use TLS (None: none open).
fn backend_ssl(cluster: &PrivateCluster, db: &str) -> Option<bool> {
    let mut admin = pgtier_backend::connect(&cluster.url()).unwrap();
    let row = admin
        .query_one(
            "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'pgtier-passthrough' AND a.datname = $1",
            &[&db],
        )
        .unwrap();
    row.get(0)
}

#[test]
fn tls_to_the_backend_in_each_sslmode() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let cluster = password_cluster();
    enable_ssl(&cluster, dir.path());
    let pw = secret_file(dir.path(), "pw", SECRET, 0o600);
    let (ca, other) = (quoted(&dir.path().join("ca.crt")), quoted(&dir.path().join("other.crt")));
    let server = |db: &str, host: &str, tls: &str| {
        let url = remote_database(&cluster, db, host);
        common::start_with(&format!(
            "[backend]\nurl = {url:?}\npassword_file = {}\n{tls}\n[passthrough]\nmode = \"reads\"\n",
            quoted(&pw)
        ))
    };
    // Encrypted, certificate checked as far as the mode asks.
    for (db, host, tls, encrypted) in [
        ("tls_default", "127.0.0.1", String::new(), true),
        ("tls_disable", "127.0.0.1", "sslmode = \"disable\"".to_owned(), false),
        ("tls_require", "127.0.0.1", "sslmode = \"require\"".to_owned(), true),
        ("tls_verify_ca", "127.0.0.1", format!("sslmode = \"verify-ca\"\nsslrootcert = {ca}"), true),
        ("tls_verify_full", "localhost", format!("sslmode = \"verify-full\"\nsslrootcert = {ca}"), true),
    ] {
        let srv = server(db, host, &tls);
        assert_eq!(remote_count(&srv).unwrap(), 2, "{db}");
        // Extended protocol and a block, over the same connection kind.
        let mut tier = srv.client();
        let mut txn = tier.transaction().unwrap();
        assert_eq!(
            txn.query("SELECT name FROM remote_t WHERE id = $1", &[&2i32]).unwrap()[0].get::<_, String>(0),
            "two"
        );
        txn.commit().unwrap();
        assert_eq!(backend_ssl(&cluster, db), Some(encrypted), "{db}");
    }
    // Refused: the name (verify-full to 127.0.0.1, the certificate names
    // localhost), an unknown CA.
    for (db, host, tls, needle) in [
        (
            "tls_wrong_name",
            "127.0.0.1",
            format!("sslmode = \"verify-full\"\nsslrootcert = {ca}"),
            "invalid peer certificate",
        ),
        (
            "tls_wrong_ca",
            "localhost",
            format!("sslmode = \"verify-ca\"\nsslrootcert = {other}"),
            "invalid peer certificate",
        ),
    ] {
        let srv = server(db, host, &tls);
        let e = remote_count(&srv).unwrap_err();
        assert_eq!(code(&e), "08001", "{db}: {e}");
        let message = e.as_db_error().unwrap().message().to_owned();
        assert!(message.contains("TLS handshake") && message.contains(needle), "{db}: {message}");
        assert_eq!(backend_ssl(&cluster, db), None, "{db}");
        // The server goes on.
        srv.client().batch_execute("CREATE TABLE here (id int)").unwrap();
    }
    // require against a PostgreSQL without TLS (the shared one).
    let plain = pgtier_backend::shared_cluster().unwrap();
    let url = plain.create_database(&format!("tls_plain_{}", std::process::id())).unwrap();
    pgtier_backend::connect(&url).unwrap().batch_execute(REMOTE).unwrap();
    let srv = common::start_with(&format!(
        "[backend]\nurl = {url:?}\nsslmode = \"require\"\n[passthrough]\nmode = \"reads\"\n"
    ));
    let e = remote_count(&srv).unwrap_err();
    assert_eq!(code(&e), "08001", "{e}");
    assert!(e.as_db_error().unwrap().message().contains("does not support SSL"), "{e}");
    let srv = common::start_with(&format!(
        "[backend]\nurl = {url:?}\nsslmode = \"prefer\"\n[passthrough]\nmode = \"reads\"\n"
    ));
    assert_eq!(remote_count(&srv).unwrap(), 2, "prefer falls back to plain");
}
