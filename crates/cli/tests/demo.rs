//! `pgtier demo` at CI size, as a user runs it: the real binary, its own
//! private PostgreSQL, tiny population, two thread counts, second-long
//! points. The report must have every section, every chart, all six runs,
//! and a clean verify of the cache group against PostgreSQL; Ctrl-C must
//! stop PostgreSQL and leave a partial report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pgtier_bench::demo::{self, DemoReport};

const CACHED: u64 = 300;

fn demo_command(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pgtier"));
    command
        .arg("demo")
        .args(["--subscribers", "1500", "--cached-subscribers", &CACHED.to_string(), "--threads", "1,2"])
        .args(["--duration", "1", "--ramp-up", "0.3", "--ramp-down", "0", "--search-step", "0.6", "--search-steps", "3"])
        .args(["--drain-timeout", "60", "--seed", "20"])
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--work-dir")
        .arg(dir.join("engine"))
        .env_remove("PGTIER_DEMO_BACKEND");
    command
}

fn read_report(dir: &Path) -> (String, DemoReport) {
    let out = dir.join("out");
    let text = std::fs::read_to_string(out.join(demo::REPORT_FILE)).expect("report.md written");
    let json = std::fs::read_to_string(out.join("demo.json")).expect("demo.json written");
    (text, serde_json::from_str(&json).expect("demo.json parses"))
}

/// The port of the private PostgreSQL, from the baseline run's target.
fn postgres_port(report: &DemoReport) -> u16 {
    let target = &report.run(demo::BASELINE).expect("baseline run").config.target;
    let after = target.split("127.0.0.1:").nth(1).unwrap_or_else(|| panic!("no port in {target}"));
    after.split('/').next().unwrap().parse().unwrap()
}

fn assert_stopped(port: u16) {
    // The postmaster closes its socket as it exits; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(Instant::now() < deadline, "PostgreSQL on port {port} still accepts connections after the demo");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn demo_runs_end_to_end_and_verifies_clean() {
    let dir = tempfile::tempdir().unwrap();
    let output = demo_command(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "demo failed: {}\n{stderr}", output.status);
    let (text, report) = read_report(dir.path());
    // Printed as well as written.
    assert!(String::from_utf8_lossy(&output.stdout).contains(demo::SECTIONS[0]));
    for heading in demo::SECTIONS {
        assert!(text.contains(&format!("\n{heading}\n")), "report lacks section {heading}:\n{text}");
    }
    assert!(!text.contains("Partial report"), "{text}");
    assert!(report.finished && report.stopped_by.is_none());
    for (i, phase) in ["populate", "baseline", "LOAD", "direct", "search", "capped", "wire", "verify"].iter().enumerate() {
        assert!(stderr.contains(&format!("[{}/8]", i + 1)) && report.phases[i].0.contains(phase), "phase {phase}: {:?}", report.phases);
    }

    // Every run measured, with transactions and PostgreSQL's figures.
    for label in [demo::BASELINE, demo::DIRECT, demo::WIRE, demo::BASELINE_CAPPED, demo::DIRECT_CAPPED, demo::WIRE_CAPPED] {
        let run = report.run(label).unwrap_or_else(|| panic!("run {label} missing"));
        let expected = if label.ends_with("capped") { 1 } else { 2 };
        assert_eq!(run.iterations.len(), expected, "{label}");
        for it in &run.iterations {
            let executed: u64 = it.transactions.iter().map(|t| t.executed).sum();
            assert!(executed > 0 && it.mqth_mean > 0.0, "{label} at {} threads executed nothing", it.threads);
            let backend = it.repetitions[0].backend.as_ref().unwrap_or_else(|| panic!("{label}: no PostgreSQL figures"));
            assert!(backend.samples > 0 && backend.source.starts_with("postgresql"), "{label}: {backend:?}");
            if label.starts_with("postgresql") {
                // Its own clients keep PostgreSQL busy; every commit waits on the WAL.
                assert!(backend.active_sessions > 0.0 && backend.commits > 0, "{label}: {backend:?}");
            }
        }
        assert_eq!(run.config.max_subscriber_id, CACHED, "{label} targets the cached subscribers only");
    }
    let cap = report.cap.as_ref().expect("a capped rate");
    assert!(!report.search.is_empty() && cap.rate_per_s > 0.0);
    for capped in [demo::BASELINE_CAPPED, demo::DIRECT_CAPPED, demo::WIRE_CAPPED] {
        assert_eq!(report.run(capped).unwrap().config.rate_per_s, Some(cap.rate_per_s), "{capped} ran at the capped rate");
    }
    assert!(!report.lag.is_empty(), "no propagation lag sampled");

    // The group holds exactly the cached subscribers, and after the lag
    // drained PostgreSQL has every write the cache took.
    let load = report.load.as_ref().unwrap();
    assert_eq!(load.instances, CACHED);
    let memory = report.memory.as_ref().unwrap();
    assert!(memory.cache_bytes > 0 && memory.postgres_bytes_prorated > 0 && memory.postgres_bytes_prorated < memory.postgres_bytes_total);
    let verify = report.verify.as_ref().expect("verify ran");
    assert!(verify.drained, "write-through did not drain");
    assert_eq!(verify.compared, CACHED, "{verify:?}");
    assert!(verify.clean, "verify not clean: {verify:?}");
    assert!(text.contains("**clean**"));
    let writes: u64 = report
        .run(demo::DIRECT)
        .unwrap()
        .iterations
        .iter()
        .flat_map(|it| it.transactions.iter().filter(|t| t.name.starts_with("UPDATE")).map(|t| t.found))
        .sum();
    assert!(writes > 0, "the direct sweep changed nothing, so verify proved nothing");

    // Charts, PNG and SVG, and the report links them.
    let out = dir.path().join("out");
    for stem in ["demo-throughput", "demo-backend", "demo-lag", "demo-memory", "demo-rate-search"] {
        for ext in ["png", "svg"] {
            let path = out.join(format!("{stem}.{ext}"));
            assert!(std::fs::metadata(&path).map(|m| m.len() > 1000).unwrap_or(false), "{} missing", path.display());
        }
        assert!(text.contains(&format!("({stem}.png)")), "report does not show {stem}");
    }
    let capped_threads = report.run(demo::BASELINE_CAPPED).unwrap().iterations[0].threads;
    for side in ["direct", "wire"] {
        let run = report.run(&format!("pgtier-{side}-capped")).unwrap();
        assert_eq!(run.iterations[0].threads, capped_threads, "every side is offered the rate by the same clients");
        let stem = format!("compare-postgresql-capped-vs-pgtier-{side}-capped-latency-{capped_threads}t");
        assert!(out.join(format!("{stem}.png")).exists() && text.contains(&stem), "{stem} missing");
    }
    assert!(!text.contains("Charts not drawn"), "{text}");
    assert_stopped(postgres_port(&report));
}

#[test]
fn ctrl_c_stops_postgresql_and_writes_a_partial_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = demo_command(dir.path()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    // Interrupt in the middle of the direct-mode sweep.
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push(line.clone());
        if line.contains("[4/8]") {
            break;
        }
    }
    assert!(seen.iter().any(|l| l.contains("[4/8]")), "the demo never reached the direct sweep: {seen:?}");
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signals our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "exit status after Ctrl-C: {status}; stderr: {rest:?}");
    assert!(rest.iter().any(|l| l.contains("private PostgreSQL stopped")), "{rest:?}");
    let (text, report) = read_report(dir.path());
    assert!(text.contains("Partial report") && text.contains("interrupted"), "{text}");
    for heading in demo::SECTIONS {
        assert!(text.contains(heading), "partial report lacks {heading}");
    }
    assert!(!report.finished);
    // What was measured before the interruption is kept.
    assert_eq!(report.run(demo::BASELINE).map(|r| r.iterations.len()), Some(2));
    assert!(report.verify.is_none());
    assert_stopped(postgres_port(&report));
}
