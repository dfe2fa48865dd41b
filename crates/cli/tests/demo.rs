//! `pgtier demo` at CI size, as a user runs it: the real binary, tiny
//! population, two thread counts, second-long points. The report must have
//! every section, every chart, every run (each capped one three times, the
//! direct one in both commit modes), write-through's figures for every run
//! behind the cache, and a clean verify; after it, PostgreSQL must hold
//! exactly the rows pgtier's engine holds (checked here, apart from the
//! demo's own verify, on the PostgreSQL the test gives it with
//! `--backend`), and a second demo on that PostgreSQL must get through its
//! LOAD and direct sweep. Ctrl-C must stop the demo's private PostgreSQL and
//! leave a partial report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pgtier_backend::harness::shared_cluster;
use pgtier_bench::demo::{self, DemoReport};
use pgtier_bench::targets::cached::{engine_checksum, postgres_checksum};
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::tatp::schema::TABLES;
use pgtier_engine::CommitMode;

const CACHED: u64 = 300;
/// Phases as the progress lines number them.
const PHASES: [&str; 9] =
    ["populate", "baseline", "LOAD", "direct", "search", "capped", "other commit mode", "wire", "verify"];

fn demo_command(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pgtier"));
    command
        .arg("demo")
        .args(["--subscribers", "1500", "--cached-subscribers", &CACHED.to_string(), "--threads", "1,2"])
        .args([
            "--duration",
            "1",
            "--ramp-up",
            "0.3",
            "--ramp-down",
            "0.2",
            "--search-step",
            "1.5",
            "--search-steps",
            "3",
        ])
        // PostgreSQL's capped rate well below the search's first step (half
        // its peak), so write-through's flat maximum does not lower the cap
        // and PostgreSQL alone is not run again after verify.
        .args(["--cap-fraction", "0.25"])
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
fn demo_runs_end_to_end_and_postgres_holds_what_pgtier_committed() {
    let dir = tempfile::tempdir().unwrap();
    let url = shared_cluster().unwrap().create_database("demo_end_to_end").unwrap();
    let output = demo_command(dir.path()).args(["--backend", &url]).output().unwrap();
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
    for (i, phase) in PHASES.iter().enumerate() {
        assert!(
            stderr.contains(&format!("[{}/9]", i + 1)) && report.phases[i].0.contains(phase),
            "phase {phase}: {:?}",
            report.phases
        );
    }

    // Every run measured, with transactions, PostgreSQL's figures and this
    // process's CPU; each capped run three times.
    let pgtier_runs = [demo::DIRECT, demo::WIRE, demo::DIRECT_CAPPED, demo::DIRECT_SYNC_CAPPED, demo::WIRE_CAPPED];
    for label in [demo::BASELINE, demo::BASELINE_CAPPED].iter().chain(&pgtier_runs) {
        let run = report.run(label).unwrap_or_else(|| panic!("run {label} missing"));
        let capped = label.ends_with("capped");
        assert_eq!(run.iterations.len(), if capped { 1 } else { 2 }, "{label}");
        for it in &run.iterations {
            assert_eq!(it.repetitions.len(), if capped { 3 } else { 1 }, "{label}");
            let executed: u64 = it.transactions.iter().map(|t| t.executed).sum();
            assert!(executed > 0 && it.mqth_mean > 0.0, "{label} at {} threads executed nothing", it.threads);
            for rep in &it.repetitions {
                let backend = rep.backend.as_ref().unwrap_or_else(|| panic!("{label}: no PostgreSQL figures"));
                assert!(backend.samples > 0 && backend.source.starts_with("postgresql"), "{label}: {backend:?}");
                // The workers outlive the window by the ramp-down (unless this machine is very busy).
                let clients = backend.process_cpu.iter().find(|c| c.component == "application threads");
                assert!(
                    clients.is_some_and(|c| c.threads >= 1 && c.threads <= it.threads),
                    "{label}: the clients' CPU: {:?}",
                    backend.process_cpu
                );
                if label.starts_with("postgresql") {
                    // Its own clients keep PostgreSQL busy (closed loop, always).
                    assert!(backend.commits > 0 && (capped || backend.active_sessions > 0.0), "{label}: {backend:?}");
                } else {
                    assert!(
                        backend.process_cpu.iter().any(|c| c.component == "write-through"),
                        "{label}: {:?}",
                        backend.process_cpu
                    );
                }
            }
            if capped {
                // Open loop: the figure from the intended start and the wake-up-charged one beside it.
                assert!(it.transactions.iter().all(|t| t.executed == 0 || t.latency_from_wake_us.is_some()), "{label}");
            }
        }
        assert_eq!(run.config.max_subscriber_id, CACHED, "{label} targets the cached subscribers only");
    }
    assert!(report.run(demo::DIRECT_SYNC_CAPPED).unwrap().config.durability.contains("commit_mode=sync"));
    assert!(report.run(demo::DIRECT_CAPPED).unwrap().config.durability.contains("commit_mode=async"));
    let cap = report.cap.as_ref().expect("a capped rate");
    assert!(!report.search.is_empty() && cap.rate_per_s > 0.0);
    for capped in demo::CAPPED {
        assert_eq!(
            report.run(capped).unwrap().config.rate_per_s,
            Some(cap.rate_per_s),
            "{capped} ran at the capped rate"
        );
    }
    assert_eq!(report.late_wakes.iter().filter(|l| l.label == demo::DIRECT_SYNC_CAPPED).count(), 3);

    // Write-through was watched in every run behind the cache, and every
    // one of them propagated transactions to PostgreSQL while it ran.
    assert!(!report.lag.is_empty() && !report.lag_windows.is_empty(), "no write-through sampled");
    for label in pgtier_runs {
        let run = report.run(label).unwrap();
        for it in &run.iterations {
            let lags = report.lags(label, it.threads);
            assert_eq!(lags.len(), it.repetitions.len(), "{label} at {} threads: {lags:?}", it.threads);
            for l in lags {
                let lag = l.lag.as_ref().unwrap_or_else(|| panic!("{label}: write-through not sampled"));
                // Applies are seen by the samples' counter, or (in a run
                // as short as CI's, where one batch can land just before the
                // first sample and the next after the last) by the lag
                // recorded in the windows inside the run.
                assert!(
                    (lag.applied_txns > 0 || lag.lag_max_ms > 0.0) && lag.written_bytes_per_s > 0.0,
                    "{label}: nothing propagated while it ran: {lag:?}"
                );
                assert!(lag.lag_p50_ms <= lag.lag_p99_ms && lag.lag_p99_ms <= lag.lag_max_ms * 1.2, "{label}: {lag:?}");
                assert!(l.drained, "{label}: write-through did not catch up after the run");
            }
        }
    }

    let lags: Vec<f64> = report.run_lag.iter().filter_map(|l| l.lag.as_ref()).map(|l| l.lag_p50_ms).collect();
    assert!(
        lags.iter().filter(|&&p50| p50 > 0.0).count() * 2 > lags.len(),
        "commit-to-PostgreSQL lag mostly not measured: {lags:?}"
    );

    // The group holds exactly the cached subscribers, and after the lag
    // drained PostgreSQL has every write the cache took.
    let load = report.load.as_ref().unwrap();
    assert_eq!(load.instances, CACHED);
    let memory = report.memory.as_ref().unwrap();
    assert!(
        memory.cache_bytes > 0
            && memory.postgres_bytes_prorated > 0
            && memory.postgres_bytes_prorated < memory.postgres_bytes_total
    );
    assert!(memory.cache_allocated_bytes >= memory.cache_bytes, "allocated includes what is in use: {memory:?}");
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
    assert!(writes > 0, "the direct sweep changed nothing, so the comparison below proves nothing");

    // Apart from the demo's verify: PostgreSQL's rows of the cached
    // subscribers are exactly the rows in pgtier's engine directory, which
    // holds every commit of the direct, sync and wire runs.
    if report.rebaselined {
        eprintln!(
            "PostgreSQL alone ran again after verify (cap {:?}); its rows no longer equal the cache's, comparison skipped",
            report.cap
        );
    } else {
        let engine = EmbeddedTarget::open(&dir.path().join("engine"), CommitMode::Sync).unwrap();
        let mut client = pgtier_backend::connect::connect(&url).unwrap();
        for table in TABLES {
            let cached = engine_checksum(engine.database(), table).unwrap();
            let postgres =
                postgres_checksum(&mut client, &format!("(SELECT * FROM {table} WHERE s_id <= {CACHED})")).unwrap();
            assert!(cached.rows > 0, "{table}: the engine holds no rows");
            assert_eq!(cached, postgres, "{table}: PostgreSQL does not hold what pgtier committed");
        }
    }

    // Charts, PNG and SVG, and the report links them.
    let out = dir.path().join("out");
    for stem in
        ["demo-throughput", "demo-backend", "demo-cpu", "demo-lag", "demo-backlog", "demo-memory", "demo-rate-search"]
    {
        for ext in ["png", "svg"] {
            let path = out.join(format!("{stem}.{ext}"));
            assert!(std::fs::metadata(&path).map(|m| m.len() > 1000).unwrap_or(false), "{} missing", path.display());
        }
        assert!(text.contains(&format!("({stem}.png)")), "report does not show {stem}");
    }
    let capped_threads = report.run(demo::BASELINE_CAPPED).unwrap().iterations[0].threads;
    for side in ["direct", "direct-sync", "wire"] {
        let run = report.run(&format!("pgtier-{side}-capped")).unwrap();
        assert_eq!(run.iterations[0].threads, capped_threads, "every side is offered the rate by the same clients");
        let stem = format!("compare-postgresql-capped-vs-pgtier-{side}-capped-latency-{capped_threads}t");
        assert!(out.join(format!("{stem}.png")).exists() && text.contains(&stem), "{stem} missing");
    }
    assert!(!text.contains("Charts not drawn"), "{text}");
    again_on_the_same_postgres(&url);
    // Both commit modes' ratios in the headline, durability named.
    let headline = text.split(demo::SECTIONS[1]).next().unwrap();
    for words in [
        "async commit",
        "sync commit",
        "DurableCommits=0",
        "× lower",
        "Write-through at that rate",
        "pgtier's sustainable throughput",
    ] {
        assert!(headline.contains(words), "headline lacks {words:?}:\n{headline}");
    }
}

/// A second demo on the PostgreSQL the first used: its new engine
/// directory's write-through starts (a node name of its own, not the first
/// run's) and the direct sweep, behind LOAD and write-through, runs past
/// its first drain; then Ctrl-C.
fn again_on_the_same_postgres(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut child =
        demo_command(dir.path()).args(["--backend", url]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut seen = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        seen.push(line.clone());
        if line.contains("[5/9]") {
            break;
        }
    }
    // SAFETY: signals our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert!(
        seen.iter().any(|l| l.contains("[5/9]")),
        "a second demo on the same PostgreSQL did not get past the direct sweep ({status}): {seen:?}"
    );
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
        if line.contains("[4/9]") {
            break;
        }
    }
    assert!(seen.iter().any(|l| l.contains("[4/9]")), "the demo never reached the direct sweep: {seen:?}");
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
