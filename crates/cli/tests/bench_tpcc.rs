//! `pgtier bench tpcc` as a user runs it: bad flags are one line and exit
//! 2; a short run at the test-only scale against a private PostgreSQL and
//! the embedded engine prints NOPM and TPM, writes report.md and tpcc.json
//! and finds both consistent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};

fn pgtier(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "tpcc"])
        .args(args)
        .env_remove("PGTIER_BENCH_URL")
        .output()
        .unwrap()
}

#[test]
fn bad_flags_are_usage_errors() {
    for (args, says) in [
        (&["--warehouses", "0"][..], "--warehouses"),
        (&["--warehouses", "1001"][..], "--warehouses"),
        (&["--clients", "0"][..], "--clients"),
        (&["--duration", "0"][..], "--duration"),
        (&["--rampup", "x"][..], "--rampup"),
        (&["--targets", "oracle"][..], "oracle"),
        (&["--pgtier-commit", "never"][..], "--pgtier-commit"),
        (&["--no-such-flag"][..], "--no-such-flag"),
    ] {
        let out = pgtier(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("pgtier: error: ") && stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn help_describes_the_method() {
    let out = pgtier(&["--help"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for word in ["--warehouses", "--clients", "--duration", "--rampup", "--targets", "--out", "NOPM", "3.3.2.1"] {
        assert!(stdout.contains(word), "{word}: {stdout}");
    }
}

#[test]
fn a_short_run_writes_its_report() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let out = pgtier(&[
        "--url",
        &cluster.url(),
        "--warehouses",
        "1",
        "--clients",
        "2",
        "--rampup",
        "1",
        "--duration",
        "3",
        "--test-scale",
        "--seed",
        "7",
        "--targets",
        "postgresql,embedded",
        "--pgtier-commit",
        "async",
        "--work-dir",
        dir.path().to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("1 warehouses (test scale"), "{stdout}");
    for side in ["PostgreSQL", "embedded"] {
        let line = stdout.lines().find(|l| l.starts_with(side)).unwrap_or_else(|| panic!("no {side}: {stdout}"));
        assert!(line.ends_with("consistent"), "{line}");
    }
    assert!(stderr.contains("embedded loaded"), "{stderr}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("## Deviations from TPC-C and from HammerDB"), "{report}");
    assert!(report.contains("NOPM pgtier/PostgreSQL"), "{report}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("tpcc.json")).unwrap()).unwrap();
    let sides = json["sides"].as_array().unwrap();
    assert_eq!(sides.len(), 2);
    assert_eq!(sides[1]["side"], "embedded");
    assert!(sides[0]["nopm"].as_f64().unwrap() > 0.0);
    assert_eq!(sides[1]["transactions"].as_array().unwrap().len(), 5);
}
