//! `pgtier bench ch` as a user runs it: bad flags are one line and exit 2;
//! the help explains the phases; a short run at the test-only scale
//! against a private PostgreSQL and the embedded engine prints NOPM alone,
//! together and kept, the per-query table, and writes report.md and
//! ch.json with every answer compared.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};

fn pgtier(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "ch"])
        .args(args)
        .env_remove("PGTIER_BENCH_URL")
        .output()
        .unwrap()
}

#[test]
fn bad_flags_are_usage_errors() {
    for (args, says) in [
        (&["--warehouses", "0"][..], "--warehouses"),
        (&["--clients", "0"][..], "--clients"),
        (&["--analytic-streams", "0"][..], "--analytic-streams"),
        (&["--duration", "0"][..], "--duration"),
        (&["--query-timeout", "0"][..], "--query-timeout"),
        (&["--targets", "oracle"][..], "oracle"),
        (&["--pgtier-commit", "never"][..], "--pgtier-commit"),
    ] {
        let out = pgtier(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("pgtier: error: ") && stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn help_describes_the_phases() {
    let out = pgtier(&["--help"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for word in [
        "--analytic-streams",
        "--query-timeout",
        "--clients",
        "OLTP alone",
        "OLTP alone again",
        "OLAP alone again",
        "--analytic-sched-idle",
        "NOPM kept",
        "Examples",
    ] {
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
        "--test-scale",
        "--clients",
        "2",
        "--rampup",
        "1",
        "--duration",
        "3",
        "--query-timeout",
        "5",
        "--seed",
        "7",
        "--targets",
        "embedded",
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
    for side in ["PostgreSQL", "embedded"] {
        let line = stdout.lines().find(|l| l.starts_with(side)).unwrap_or_else(|| panic!("no {side}: {stdout}"));
        assert!(line.ends_with("consistent") && line.contains('%'), "{line}");
    }
    assert!(stdout.lines().any(|l| l.starts_with("Q22")), "{stdout}");
    assert!(stderr.contains("answers Q22") && stderr.contains("OLTP + OLAP"), "{stderr}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("## Deviations from CH-benCHmark and from study 004"), "{report}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("ch.json")).unwrap()).unwrap();
    let answers = json["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 22);
    for a in answers {
        let embedded = &a["sides"][1];
        assert_eq!(embedded["side"], "embedded");
        assert_ne!(embedded["status"]["status"], "different", "{a}");
    }
    let sides = json["sides"].as_array().unwrap();
    assert_eq!(sides.len(), 2);
    for s in sides {
        let phases = s["phases"].as_array().unwrap();
        assert_eq!(phases.len(), 5);
        assert_eq!(phases[3]["kind"], "olap_alone_again", "{s}");
        for (p, kind) in [(0, "oltp_alone"), (2, "together"), (4, "oltp_alone_again")] {
            assert_eq!(phases[p]["kind"], kind, "{s}");
            assert!(phases[p]["oltp"]["nopm"].as_f64().unwrap() > 0.0, "{s}");
        }
    }
}
