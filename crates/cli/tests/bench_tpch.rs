//! `pgtier bench tpch` as a user runs it: bad flags are one line and exit
//! 2; a small run against a private PostgreSQL and the embedded engine
//! prints the summary and writes report.md and tpch.json.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};

fn pgtier(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "tpch"])
        .args(args)
        .env_remove("PGTIER_BENCH_URL")
        .output()
        .unwrap()
}

#[test]
fn bad_flags_are_usage_errors() {
    for (args, says) in [
        (&["--scale", "0"][..], "--scale"),
        (&["--scale", "1000"][..], "--scale"),
        (&["--runs", "0"][..], "--runs"),
        (&["--timeout", "-1"][..], "--timeout"),
        (&["--queries", "23"][..], "--queries"),
        (&["--targets", "oracle"][..], "oracle"),
    ] {
        let out = pgtier(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("pgtier: error: ") && stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn a_small_run_writes_its_report() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let out = pgtier(&[
        "--url",
        &cluster.url(),
        "--scale",
        "0.001",
        "--runs",
        "1",
        "--queries",
        "1,6,14",
        "--targets",
        "postgresql,embedded",
        "--work-dir",
        dir.path().to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("TPC-H SF 0.001"), "{stdout}");
    for q in ["Q1 ", "Q6 ", "Q14 "] {
        let line = stdout.lines().find(|l| l.starts_with(q)).unwrap_or_else(|| panic!("no {q}: {stdout}"));
        assert!(line.ends_with("identical"), "{line}");
    }
    assert!(stdout.contains("2 of 2 identical") || stdout.contains("3 of 3 identical"), "{stdout}");
    assert!(stderr.contains("embedded loaded"), "{stderr}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("## Deviations from the TPC-H specification"), "{report}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("tpch.json")).unwrap()).unwrap();
    assert_eq!(json["queries"].as_array().unwrap().len(), 3);
    assert_eq!(json["queries"][0]["sides"][1]["status"]["status"], "identical");
}
