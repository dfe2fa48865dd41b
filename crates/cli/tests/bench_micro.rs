//! `pgtier bench micro` end to end: the real binary against a private
//! PostgreSQL and against the embedded engine, at tiny sizes; every test
//! must give plausible figures, and the database must hold exactly what the
//! run says it inserted and updated. Bad flags exit 2 with one line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::device::device_of;
use pgtier_bench::micro::output::read_json;
use pgtier_bench::micro::schema::initial_sum_k;
use pgtier_bench::micro::{INSERT_ROWS_PER_TXN, MicroReport, MicroTest, UPDATE_ROWS_PER_TXN};
use pgtier_bench::target::{Target, Value};
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::targets::postgres::PgTarget;

const ROWS: u64 = 3000;
const SEED: &str = "7";

fn pgtier(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgtier")).args(args).env_remove("PGTIER_BENCH_URL").output().unwrap()
}

fn succeeds(args: &[&str]) -> String {
    let out = pgtier(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The run's arguments, small: two thread counts, short windows.
fn run_args<'a>(target: &[&'a str], json: &'a str, csv: &'a str) -> Vec<&'a str> {
    let mut args = vec!["bench", "micro"];
    args.extend_from_slice(target);
    args.extend([
        "--rows",
        "3000",
        "--threads",
        "1,2",
        "--duration",
        "0.4",
        "--seed",
        SEED,
        "--json",
        json,
        "--csv",
        csv,
    ]);
    args
}

/// Every test at every thread count has figures that fit together.
fn check_figures(report: &MicroReport, server_cpu_known: bool) {
    assert_eq!(report.rows, ROWS);
    assert_eq!(report.results.len(), MicroTest::ALL.len() * 2, "{:?}", report.results);
    for test in MicroTest::ALL {
        for threads in [1, 2] {
            let r = report.result(test, threads).unwrap_or_else(|| panic!("{test:?} at {threads} missing"));
            let f = r.figures.as_ref().unwrap_or_else(|| panic!("{test:?} at {threads}: {:?}", r.refused));
            assert!(f.seconds > 0.0 && f.rows > 0 && f.ops > 0, "{test:?} at {threads}: {f:?}");
            let expected_rows = match test {
                MicroTest::SeqScan => f.ops * ROWS,
                MicroTest::RandomRead => f.ops,
                MicroTest::Insert => f.ops * INSERT_ROWS_PER_TXN,
                MicroTest::Update => f.ops * UPDATE_ROWS_PER_TXN as u64,
                MicroTest::IndexBuild => ROWS,
            };
            assert_eq!(f.rows, expected_rows, "{test:?} at {threads}: {f:?}");
            let rate = f.rows as f64 / f.seconds;
            assert!((f.rows_per_s - rate).abs() <= 1e-6 * rate, "{test:?}: {f:?}");
            // Plausible on any machine: more than a trickle, less than a
            // billion rows a second from a debug build.
            assert!(f.rows_per_s > 10.0 && f.rows_per_s < 1e9, "{test:?} at {threads}: {f:?}");
            assert!(f.process_cpu_percent >= 0.0 && f.process_cpu_percent < 100.0 * 1024.0, "{f:?}");
            assert_eq!(f.server_cpu_percent.is_some(), server_cpu_known, "{test:?}: {f:?}");
            assert_eq!(f.device.is_some(), !report.sources.device.starts_with("unknown"), "{report:?}");
            let wal = f.wal_bytes.unwrap_or_else(|| panic!("{test:?}: no WAL figure: {f:?}"));
            if matches!(test, MicroTest::Insert | MicroTest::Update) {
                // Every committed row is in the WAL, at least its key.
                assert!(wal >= f.rows * 8, "{test:?} at {threads}: {wal} WAL bytes for {} rows", f.rows);
                assert!(f.wal_mb_per_s.unwrap() > 0.0);
            }
        }
    }
    assert_eq!(report.checks.len(), 2, "{:?}", report.checks);
}

fn total_rows(report: &MicroReport, test: MicroTest) -> i64 {
    report.results.iter().filter(|r| r.test == test).map(|r| r.figures.as_ref().unwrap().rows as i64).sum()
}

fn one_int(target: &dyn Target, sql: &str) -> i64 {
    let mut session = target.connect().unwrap();
    let stmt = session.prepare(sql).unwrap();
    let mut out = Vec::new();
    session.query(stmt, &[], &mut out).unwrap();
    match out.first() {
        Some(Value::Int(n)) => *n,
        other => panic!("{sql}: {other:?}"),
    }
}

/// What the database holds is what the run says it did.
fn check_database(target: &dyn Target, report: &MicroReport) {
    let seed: u64 = SEED.parse().unwrap();
    assert_eq!(one_int(target, "SELECT count(*) FROM micro_t"), ROWS as i64);
    assert_eq!(one_int(target, "SELECT count(*) FROM micro_ins"), total_rows(report, MicroTest::Insert));
    let grown = one_int(target, "SELECT sum(k)::int8 FROM micro_t") - initial_sum_k(ROWS, seed);
    assert_eq!(grown, total_rows(report, MicroTest::Update), "sum(k) grew by one per updated row");
}

#[test]
fn postgres_every_test_and_exact_row_counts() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out/micro.json");
    let csv = dir.path().join("out/micro.csv");
    let (json_s, csv_s) = (json.to_str().unwrap(), csv.to_str().unwrap());
    let stdout = succeeds(&run_args(&["--url", &url], json_s, csv_s));
    for expected in
        ["| test | threads | rows/s |", "| seq_scan | 1 |", "| index_build | 2 |", "pg_stat_wal", "Deviations"]
    {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }
    let report = read_json(&json).unwrap();
    check_figures(&report, true);
    // The device is the data directory's, found from SHOW data_directory.
    match device_of(cluster.data_dir()) {
        Ok(device) => assert!(report.sources.device.starts_with(&device.name), "{:?}", report.sources),
        Err(_) => assert!(report.sources.device.starts_with("unknown"), "{:?}", report.sources),
    }
    check_database(&PgTarget::open(&url).unwrap(), &report);
    // pg_stat_wal saw the windows' WAL: at least 90 % of what the WAL
    // position says was written (it leaves out page headers; the position's
    // window is a little shorter).
    for r in report.results.iter().filter(|r| matches!(r.test, MicroTest::Insert | MicroTest::Update)) {
        let f = r.figures.as_ref().unwrap();
        let (stat, lsn) = (f.wal_bytes.unwrap(), f.wal_lsn_bytes.unwrap());
        assert!(stat * 10 >= lsn * 9, "{r:?}: pg_stat_wal {stat} bytes, WAL position {lsn}");
    }
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv_text.lines().count(), 1 + report.results.len(), "{csv_text}");

    // --metrics-url is a pgtier server's: against PostgreSQL it is a bad flag.
    let out = pgtier(&["bench", "micro", "--url", &url, "--metrics-url", "http://127.0.0.1:1/metrics"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--metrics-url is for a pgtier server"), "{out:?}");
}

#[test]
fn embedded_every_test_and_exact_row_counts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db");
    let json = dir.path().join("micro.json");
    let csv = dir.path().join("micro.csv");
    let spec = format!("embedded:{}", data.display());
    let stdout = succeeds(&run_args(
        &["--target", &spec, "--commit-mode", "async"],
        json.to_str().unwrap(),
        csv.to_str().unwrap(),
    ));
    assert!(stdout.contains("engine WAL bytes"), "{stdout}");
    let report = read_json(&json).unwrap();
    check_figures(&report, true);
    // The binary has exited; the engine reopens what it left (recovery included).
    let target = EmbeddedTarget::open(&data, pgtier_engine::CommitMode::Sync).unwrap();
    check_database(&target, &report);
}

/// A `pgtier serve` child with a metrics endpoint; stopped by SIGTERM on drop.
struct Server {
    child: std::process::Child,
    addr: String,
    metrics: String,
}

impl Server {
    fn start(dir: &std::path::Path) -> Server {
        use std::io::{BufRead, BufReader};
        // A free port for /metrics (the server picks its own: port 0).
        let metrics_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = dir.join("pgtier.toml");
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\ncommit_mode = \"sync\"\n[auth]\nmethod = \"trust\"\n\
                 [metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n"
            ),
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_pgtier"))
            .args(["serve", "--config"])
            .arg(&config)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let addr = first.strip_prefix("pgtier: listening on ").unwrap_or_else(|| panic!("{first}"));
        let addr = addr.split(' ').next().unwrap().to_owned();
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        Server { child, addr, metrics: format!("http://127.0.0.1:{metrics_port}/metrics") }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: signals our own child process.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

#[test]
fn pgtier_server_writes_with_its_own_wal_counter_and_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let url = format!("postgresql://app@{}/app", server.addr);
    let json = dir.path().join("micro.json");
    let data = dir.path().join("data");
    #[rustfmt::skip]
    let out = succeeds(&[
        "bench", "micro", "--url", &url, "--metrics-url", &server.metrics, "--device", data.to_str().unwrap(),
        "--rows", "3000", "--threads", "2", "--duration", "0.4", "--seed", SEED, "--tests", "insert,update",
        "--json", json.to_str().unwrap(),
    ]);
    assert!(out.contains("pgtier_engine_wal_end_bytes"), "{out}");
    let report = read_json(&json).unwrap();
    // Found through the socket listening on the URL's port.
    assert!(report.sources.server_cpu.starts_with("server process"), "{:?}", report.sources);
    assert_eq!(report.results.len(), 2);
    for r in &report.results {
        let f = r.figures.as_ref().unwrap();
        assert!(f.rows > 0 && f.server_cpu_percent.is_some(), "{r:?}");
        assert!(f.wal_bytes.unwrap() >= f.rows * 8, "{r:?}");
    }
    let target = PgTarget::open(&url).unwrap();
    assert_eq!(one_int(&target, "SELECT count(*) FROM micro_ins"), total_rows(&report, MicroTest::Insert));
    let grown = one_int(&target, "SELECT sum(k)::int8 FROM micro_t") - initial_sum_k(ROWS, SEED.parse().unwrap());
    assert_eq!(grown, total_rows(&report, MicroTest::Update));
}

/// Runs with bad flags: exit 2, one line on stderr naming the problem.
fn usage_error(args: &[&str]) -> String {
    let mut all = vec!["bench", "micro"];
    all.extend_from_slice(args);
    let out = pgtier(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
    assert!(lines[0].starts_with("pgtier: error: ") && !stderr.contains("panicked"), "{stderr}");
    lines[0].to_owned()
}

/// Nothing listens on port 1; flags are checked before connecting.
const NOWHERE: &str = "postgres://postgres@127.0.0.1:1/postgres";

#[test]
fn bad_flags_exit_2() {
    let line = usage_error(&["--url", NOWHERE, "--threads", "1,,x"]);
    assert!(line.contains("--threads") && line.contains("empty"), "{line}");
    let line = usage_error(&["--url", NOWHERE, "--threads", "0"]);
    assert!(line.contains("at least 1"), "{line}");
    let line = usage_error(&["--url", NOWHERE, "--rows", "5"]);
    assert!(line.contains("--rows") && line.contains("between 100"), "{line}");
    let line = usage_error(&["--url", NOWHERE, "--rows", "many"]);
    assert!(line.contains("not a whole number"), "{line}");
    let line = usage_error(&["--url", NOWHERE, "--duration", "0"]);
    assert!(line.contains("--duration"), "{line}");
    let line = usage_error(&["--url", NOWHERE, "--tests", "seq_scan,bogus"]);
    assert!(line.contains("unknown test 'bogus'"), "{line}");
    let line = usage_error(&["--url", NOWHERE, "--device", "/no/such/device"]);
    assert!(line.contains("/no/such/device"), "{line}");
    let line = usage_error(&["--url", NOWHERE, "--metrics-url", "ftp://x"]);
    assert!(line.contains("http://"), "{line}");
    let line = usage_error(&["--target", "elsewhere:/tmp/x"]);
    assert!(line.contains("embedded:<dir>"), "{line}");
    let line = usage_error(&["--target", "embedded:/tmp/x", "--metrics-url", "http://127.0.0.1:1/metrics"]);
    assert!(line.contains("--metrics-url"), "{line}");
}

#[test]
fn unreachable_target_is_one_line_exit_1() {
    let out = pgtier(&["bench", "micro", "--url", NOWHERE, "--rows", "100"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("cannot reach PostgreSQL at postgres://postgres@127.0.0.1:1/postgres"), "{stderr}");
}
