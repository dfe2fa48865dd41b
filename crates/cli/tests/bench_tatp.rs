//! `pgtier bench tatp` end to end against a private PostgreSQL: populate, a
//! two-point sweep with repetitions, the printed report, JSON and CSV files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::report::read_run_file;

fn pgtier(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier")).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr)
}

#[test]
fn populate_sweep_and_write_results() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r/tatp.json");
    let csv = dir.path().join("r/tatp.csv");
    let (stdout, _) = pgtier(&[
        "bench",
        "tatp",
        "--url",
        &url,
        "--populate",
        "--subscribers",
        "2000",
        "--threads",
        "1,2",
        "--repetitions",
        "2",
        "--duration",
        "0.7",
        "--ramp-up",
        "0.2",
        "--ramp-down",
        "0.1",
        "--per-thread",
        "--label",
        "pg-test",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    for expected in [
        "Population: 2000 subscribers",
        "call_forwarding",
        "Deviations from the TATP specification:",
        "smallint",
        "== 1 threads: MQTh",
        "== 2 threads: MQTh",
        "mean of 2",
        "GET_NEW_DESTINATION",
        "the population rules give 14.8 %",
        "WAL-wait share",
        "Summary (pg-test):",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }

    let file = read_run_file(&json).unwrap();
    let run = &file.run;
    assert_eq!(run.label, "pg-test");
    assert_eq!(run.config.subscribers, 2000);
    assert!(!run.config.deviations.is_empty());
    assert_eq!(run.iterations.iter().map(|i| i.threads).collect::<Vec<_>>(), vec![1, 2]);
    for it in &run.iterations {
        assert_eq!(it.repetitions.len(), 2);
        assert_eq!(it.transactions.len(), 7);
        assert!(it.mqth_mean > 0.0 && it.mqth_min <= it.mqth_mean && it.mqth_mean <= it.mqth_max);
        assert!(it.repetitions.iter().all(|r| r.backend.is_some()));
        assert_eq!(it.repetitions[0].per_thread.len(), it.threads as usize);
        let merged: u64 = it.transactions.iter().map(|t| t.executed).sum();
        let per_rep: u64 = it.repetitions.iter().flat_map(|r| &r.transactions).map(|t| t.executed).sum();
        assert_eq!(merged, per_rep, "iteration stats merge the repetitions");
    }
    let population = file.tatp.population.clone().unwrap();
    assert_eq!(population.tables.len(), 4);
    assert_eq!(file.tatp.repetitions.len(), 4);

    // Header, 2 iterations × 7 transactions, per-thread rows (1 + 2) × 2 reps.
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv_text.lines().count(), 1 + 14 + 6, "{csv_text}");
    assert!(csv_text.lines().skip(1).all(|l| l.starts_with("pg-test,")));

    // Without --populate the run uses what is there and says so.
    let (stdout, _) = pgtier(&[
        "bench",
        "tatp",
        "--url",
        &url,
        "--threads",
        "1",
        "--duration",
        "0.3",
        "--ramp-up",
        "0",
        "--ramp-down",
        "0",
        "--uniform",
        "--min-id",
        "100",
        "--max-id",
        "200",
    ]);
    assert!(stdout.contains("uniform [100, 200]"), "{stdout}");
    assert!(stdout.contains("existing population"), "{stdout}");
}
