//! The harness against real PostgreSQL servers: every test starts its own.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pgtier_backend::connect::{ConnectError, connect};
use pgtier_backend::harness::{ClusterOptions, HarnessError, PrivateCluster};

/// Alive = has a /proc entry that is not a zombie (a killed server whose new
/// parent has not reaped it yet is dead for our purposes).
fn is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

fn wait_until_dead(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !is_alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !is_alive(pid)
}

fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|field| field.parse::<u32>().ok());
        if parent == Some(pid) {
            children.push(child);
        }
    }
    children
}

fn process_uid(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|line| line.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn query_one_text(url: &str, sql: &str) -> String {
    let mut client = connect(url).unwrap();
    client.query_one(sql, &[]).unwrap().get(0)
}

#[test]
fn start_query_stop() {
    let started = Instant::now();
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    eprintln!("cluster started in {} ms", started.elapsed().as_millis());
    let pid = cluster.postmaster_pid();
    let data_dir = cluster.data_dir().to_path_buf();
    assert!(data_dir.join("PG_VERSION").is_file());
    assert!(cluster.url().ends_with(&format!("@127.0.0.1:{}/postgres", cluster.port())));

    let mut client = connect(&cluster.url()).unwrap();
    client.batch_execute("CREATE TABLE t (id int PRIMARY KEY, v text)").unwrap();
    client.execute("INSERT INTO t VALUES ($1, $2)", &[&1_i32, &"one"]).unwrap();
    let v: String = client.query_one("SELECT v FROM t WHERE id = 1", &[]).unwrap().get(0);
    assert_eq!(v, "one");
    // The test profile of the harness: no fsync, C collation, UTF8.
    assert_eq!(query_one_text(&cluster.url(), "SHOW fsync"), "off");
    assert_eq!(query_one_text(&cluster.url(), "SHOW lc_collate"), "C");
    assert_eq!(query_one_text(&cluster.url(), "SHOW server_encoding"), "UTF8");
    drop(client);

    let stopped = Instant::now();
    cluster.stop().unwrap();
    eprintln!("cluster stopped in {} ms", stopped.elapsed().as_millis());
    assert!(!is_alive(pid), "postmaster {pid} still alive after stop");
    assert!(!data_dir.exists(), "{} left behind", data_dir.display());
}

#[test]
fn postgres_never_runs_as_root() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let uid = process_uid(cluster.postmaster_pid());
    assert_ne!(uid, 0, "postmaster runs as root");
    // SAFETY: geteuid has no preconditions.
    let our_uid = unsafe { libc::geteuid() };
    if our_uid != 0 {
        assert_eq!(uid, our_uid, "without root the server runs as ourselves");
    }
}

#[test]
fn two_clusters_at_once() {
    let first = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let second = PrivateCluster::start(ClusterOptions::default()).unwrap();
    assert_ne!(first.port(), second.port());
    assert_ne!(first.data_dir(), second.data_dir());
    let mut a = connect(&first.url()).unwrap();
    let mut b = connect(&second.url()).unwrap();
    a.batch_execute("CREATE TABLE only_in_first (x int)").unwrap();
    let in_second: i64 =
        b.query_one("SELECT count(*) FROM pg_class WHERE relname = 'only_in_first'", &[]).unwrap().get(0);
    assert_eq!(in_second, 0);
    let port: String = b.query_one("SHOW port", &[]).unwrap().get(0);
    assert_eq!(port, second.port().to_string());
}

#[test]
fn drop_stops_the_server() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let pid = cluster.postmaster_pid();
    let data_dir = cluster.data_dir().to_path_buf();
    let url = cluster.url();
    let mut session = connect(&url).unwrap();
    session.batch_execute("SELECT 1").unwrap();
    let backends = children_of(pid);
    assert!(!backends.is_empty(), "a postmaster with a session has children");
    drop(cluster);
    assert!(!is_alive(pid), "postmaster {pid} survived drop");
    for backend in backends {
        assert!(wait_until_dead(backend, Duration::from_secs(5)), "backend {backend} survived");
    }
    assert!(!data_dir.exists());
    assert!(session.batch_execute("SELECT 1").is_err());
    assert!(matches!(connect(&url), Err(ConnectError::Unreachable { .. })));
}

#[test]
fn drop_stops_the_server_when_the_owner_panics() {
    let (pid_sender, pid_receiver) = mpsc::channel();
    let outcome = std::panic::catch_unwind(move || {
        let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
        pid_sender.send((cluster.postmaster_pid(), cluster.data_dir().to_path_buf())).unwrap();
        panic!("test body failed while owning a cluster");
    });
    assert!(outcome.is_err());
    let (pid, data_dir) = pid_receiver.recv().unwrap();
    assert!(!is_alive(pid), "postmaster {pid} survived a panicking owner");
    assert!(!data_dir.exists());
}

#[test]
fn password_cluster_accepts_the_right_password_only() {
    let password = "s3cret: with @ / and spaces";
    let cluster =
        PrivateCluster::start(ClusterOptions { password: Some(password.to_owned()), ..ClusterOptions::default() })
            .unwrap();
    let url = cluster.url();
    assert!(url.starts_with("postgres://postgres:"), "{url}");
    // Debug output (a test's assert message, a log line) never shows it.
    let options = ClusterOptions { password: Some(password.to_owned()), ..ClusterOptions::default() };
    for shown in [format!("{cluster:?}"), format!("{options:?}")] {
        assert!(!shown.contains("s3cret") && shown.contains("<redacted>"), "password in Debug output: {shown}");
    }
    let mut client = connect(&url).unwrap();
    let method: String =
        client.query_one("SELECT auth_method FROM pg_hba_file_rules WHERE type = 'host' LIMIT 1", &[]).unwrap().get(0);
    assert_eq!(method, "scram-sha-256");

    let wrong = format!("postgres://postgres:wrong@127.0.0.1:{}/postgres", cluster.port());
    let error = connect(&wrong).err().unwrap();
    match &error {
        ConnectError::AuthenticationFailed { sqlstate, .. } => assert_eq!(sqlstate, "28P01"),
        other => panic!("expected an authentication failure, got {other:?}"),
    }
    assert!(!error.to_string().contains("wrong"), "password leaked: {error}");

    let none = format!("postgres://postgres@127.0.0.1:{}/postgres", cluster.port());
    let error = connect(&none).err().unwrap();
    assert!(matches!(error, ConnectError::AuthenticationFailed { .. }), "{error:?}");
}

#[test]
fn closed_port_is_unreachable_with_a_hint() {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let error = connect(&format!("postgres://postgres:pw@127.0.0.1:{port}/postgres")).err().unwrap();
    assert!(matches!(error, ConnectError::Unreachable { .. }), "{error:?}");
    let line = error.to_string();
    assert!(line.contains("is PostgreSQL running? start one with `pgtier backend start`"), "{line}");
    assert!(!line.contains("pw@"), "{line}");
    assert!(!line.contains('\n'), "{line}");
    assert_eq!(error.sqlstate(), "08001");
}

#[test]
fn missing_database_is_named() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let error = connect(&cluster.url_for_database("no_such_db")).err().unwrap();
    match &error {
        ConnectError::DatabaseMissing { database, .. } => assert_eq!(database, "no_such_db"),
        other => panic!("expected DatabaseMissing, got {other:?}"),
    }
    assert_eq!(error.sqlstate(), "3D000");

    let url = cluster.create_database("no_such_db").unwrap();
    assert_eq!(url, cluster.url_for_database("no_such_db"));
    assert_eq!(query_one_text(&url, "SELECT current_database()::text"), "no_such_db");
    let odd = cluster.create_database("Mixed \"Case\" db").unwrap();
    assert_eq!(query_one_text(&odd, "SELECT current_database()::text"), "Mixed \"Case\" db");
}

#[test]
fn settings_are_applied() {
    let cluster = PrivateCluster::start(ClusterOptions {
        settings: vec![
            ("work_mem".to_owned(), "7MB".to_owned()),
            ("application_name".to_owned(), "it's quoted".to_owned()),
        ],
        ..ClusterOptions::default()
    })
    .unwrap();
    assert_eq!(query_one_text(&cluster.url(), "SHOW work_mem"), "7MB");
    assert_eq!(query_one_text(&cluster.url(), "SELECT boot_val FROM pg_settings WHERE name = 'work_mem'"), "4096");
}

#[test]
fn benchmark_options_give_a_durable_tuned_server() {
    let cluster = PrivateCluster::start(ClusterOptions::for_benchmark()).unwrap();
    let url = cluster.url();
    assert_eq!(query_one_text(&url, "SHOW fsync"), "on");
    assert_eq!(query_one_text(&url, "SHOW synchronous_commit"), "on");
    assert_eq!(query_one_text(&url, "SHOW full_page_writes"), "on");
    assert_eq!(query_one_text(&url, "SHOW wal_level"), "logical");
    assert_eq!(query_one_text(&url, "SHOW shared_buffers"), "2GB");
    assert_eq!(query_one_text(&url, "SHOW max_connections"), "300");
}

#[test]
fn a_bad_setting_fails_with_the_server_log() {
    let error = PrivateCluster::start(ClusterOptions {
        settings: vec![("shared_buffers".to_owned(), "lots".to_owned())],
        ..ClusterOptions::default()
    })
    .err()
    .unwrap();
    let text = error.to_string();
    assert!(matches!(error, HarnessError::StartFailed { .. }), "{text}");
    assert!(text.contains("shared_buffers"), "log tail missing: {text}");
}

#[test]
fn a_kept_dir_survives_restarts() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("kept cluster");
    let options = ClusterOptions { dir: Some(dir.clone()), ..ClusterOptions::default() };
    let first = PrivateCluster::start(options.clone()).unwrap();
    connect(&first.url()).unwrap().batch_execute("CREATE TABLE kept (x int)").unwrap();
    first.stop().unwrap();
    assert!(dir.join("data/PG_VERSION").is_file());

    let second = PrivateCluster::start(options).unwrap();
    let count: i64 = connect(&second.url()).unwrap().query_one("SELECT count(*) FROM kept", &[]).unwrap().get(0);
    assert_eq!(count, 0);
    drop(second);
    assert!(dir.join("data/PG_VERSION").is_file(), "a given dir is never removed");
}

#[test]
fn a_taken_port_is_reported() {
    let first = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let error =
        PrivateCluster::start(ClusterOptions { port: Some(first.port()), ..ClusterOptions::default() }).err().unwrap();
    assert!(error.to_string().contains("Address already in use"), "{error}");
}

#[test]
fn starts_inside_an_async_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let cluster =
            PrivateCluster::start(ClusterOptions { password: Some("pw".to_owned()), ..ClusterOptions::default() })
                .unwrap();
        cluster.create_database("from_async").unwrap();
        cluster.stop().unwrap();
    });
}

const ORPHAN_CHILD_ENV: &str = "PGTIER_BACKEND_TEST_ORPHAN_CHILD";

/// Run only by `killed_owner_leaves_no_orphan`, in a child process it kills.
#[test]
#[ignore = "helper process for killed_owner_leaves_no_orphan"]
fn orphan_child_helper() {
    if std::env::var_os(ORPHAN_CHILD_ENV).is_none() {
        return;
    }
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    // A live session, so there is a backend that must die too.
    let mut session = connect(&cluster.url()).unwrap();
    session.batch_execute("SELECT 1").unwrap();
    println!("DATA_DIR={}", cluster.data_dir().display());
    println!("POSTMASTER_PID={}", cluster.postmaster_pid());
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn killed_owner_leaves_no_orphan() {
    let mut owner = Command::new(std::env::current_exe().unwrap())
        .args(["orphan_child_helper", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ORPHAN_CHILD_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = owner.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut pid = None;
    let mut data_dir = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while pid.is_none() {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = receiver.recv_timeout(remaining) else {
            let _ = owner.kill();
            panic!("the owner process never reported its postmaster");
        };
        // libtest's "test name ... " may share the line with the first print.
        if let Some((_, value)) = line.split_once("DATA_DIR=") {
            data_dir = Some(PathBuf::from(value));
        }
        if let Some((_, value)) = line.split_once("POSTMASTER_PID=") {
            pid = Some(value.trim().parse::<u32>().unwrap());
        }
    }
    let pid = pid.unwrap();
    let backends = children_of(pid);
    assert!(is_alive(pid));
    assert!(!backends.is_empty());

    owner.kill().unwrap(); // SIGKILL: no destructor, no unwinding
    owner.wait().unwrap();

    let postmaster_died = wait_until_dead(pid, Duration::from_secs(5));
    let orphans: Vec<u32> =
        backends.iter().copied().filter(|backend| !wait_until_dead(*backend, Duration::from_secs(5))).collect();
    // Clean up before asserting, so a failure leaves nothing running: no
    // destructor ran in the owner, so its directory is ours to remove too.
    for survivor in std::iter::once(pid).chain(orphans.iter().copied()) {
        if is_alive(survivor) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(survivor as libc::pid_t, libc::SIGKILL) };
        }
    }
    if let Some(root) = data_dir.as_deref().and_then(Path::parent) {
        let _ = std::fs::remove_dir_all(root);
    }
    assert!(postmaster_died, "postmaster {pid} outlived its SIGKILLed owner");
    assert!(orphans.is_empty(), "backends {orphans:?} outlived their postmaster");
}

/// The fair baseline's premise: a memory limit bounds the page cache a
/// server fills, not only its processes. A table three times the limit is
/// read after the limit applied; without the cgroup the page cache would
/// hold all of it (24 GiB machine), with it the charge stays at the limit.
#[test]
fn a_memory_limit_bounds_the_page_cache_the_server_fills() {
    const LIMIT: u64 = 48 << 20;
    // On disk (fsync on): a tmpfs data directory would be shared memory,
    // which no limit can reclaim.
    let cluster = PrivateCluster::start(ClusterOptions {
        fsync: true,
        memory_limit: Some(LIMIT),
        settings: vec![("shared_buffers".into(), "16MB".into())],
        ..ClusterOptions::default()
    })
    .unwrap();
    let cgroup = match cluster.memory_limit() {
        Ok(Some(cgroup)) => cgroup,
        Ok(None) => panic!("a limit was asked for"),
        // SAFETY: geteuid has no preconditions.
        Err(reason) if unsafe { libc::geteuid() } != 0 => {
            eprintln!("skipped: not root, no memory cgroup: {reason}");
            return;
        }
        Err(reason) => panic!("root could not limit the server's memory: {reason}"),
    };
    let mut client = connect(&cluster.url()).unwrap();
    // A backend forked after the move is inside too.
    let backend: i32 = client.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let procs = std::fs::read_to_string(cgroup.path().join("cgroup.procs")).unwrap();
    assert!(procs.split_whitespace().any(|p| p == backend.to_string()), "backend {backend} not in {procs}");
    client
        .batch_execute("CREATE TABLE big AS SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, 600000) g")
        .unwrap();
    let table_bytes: i64 = client.query_one("SELECT pg_relation_size('big')", &[]).unwrap().get(0);
    assert!(table_bytes as u64 > 2 * LIMIT, "table {table_bytes} B too small to show the limit");
    drop(client);
    assert!(cluster.checkpoint_and_evict_page_cache().unwrap() > 0);
    let mut client = connect(&cluster.url()).unwrap();
    // A sequential scan through a small ring: every block comes from the page cache or the disk.
    let count: i64 = client.query_one("SELECT count(*) FROM big WHERE pad <> ''", &[]).unwrap().get(0);
    assert_eq!(count, 600_000);
    let usage = cgroup.usage_bytes().unwrap();
    let cache = cgroup.page_cache_bytes().unwrap();
    assert!(usage <= LIMIT, "charged {usage} B over the limit {LIMIT}");
    assert!(cache < table_bytes as u64 / 2, "page cache {cache} B of a {table_bytes} B table: not bounded");
    let path = cgroup.path().to_path_buf();
    drop(client);
    cluster.stop().unwrap();
    assert!(!path.exists(), "the cgroup outlived the cluster");
}
