//! `pgtier bench soak` at CI size, as a user runs it: the real binary, its
//! own private PostgreSQL and spawned `pgtier serve`, 75 s with 5 s
//! samples. The run must pass (no unexpected client error, every check
//! held; growth reported, not gating, as a short run is mostly warm-up),
//! and its report must show samples of the server's RSS, fds and threads,
//! TATP throughput in every interval, and at least one cache-group cycle,
//! clean churn session, refused wrong password, abandoned transaction and
//! confirmed cancel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use pgtier_bench::soak::{CHART_STEMS, JSON_FILE, REPORT_FILE, SoakReport};

#[test]
fn a_short_soak_passes_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "soak", "--duration", "75s", "--sample-every", "5s"])
        .args(["--subscribers", "2000", "--threads", "2", "--rate", "200"])
        .args(["--cycle-accounts", "200", "--cycle-every", "8s", "--churn-pause", "0.3s", "--cancel-every", "4s"])
        .args(["--no-growth-gate", "--seed", "36"])
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(dir.path().join("work"))
        .env_remove("PGTIER_SOAK_BACKEND")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "soak failed: {}\n{stdout}\n{stderr}", output.status);

    let text = std::fs::read_to_string(out.join(REPORT_FILE)).unwrap();
    assert!(text.contains("## Verdict") && text.contains("**PASS**"), "{text}");
    let report: SoakReport = serde_json::from_str(&std::fs::read_to_string(out.join(JSON_FILE)).unwrap()).unwrap();
    assert!(report.samples.len() >= 12, "{} samples", report.samples.len());
    for s in &report.samples {
        assert!(s.rss_bytes > 0 && s.fds > 0 && s.threads > 0, "{s:?}");
        assert!(s.txns > 0, "no TATP transaction in an interval: {s:?}");
    }
    assert_eq!(report.unexpected_errors(), 0, "{:?}", report.errors);
    assert_eq!(report.anomalies_total, 0, "{:?}", report.anomalies);
    let a = &report.activity;
    assert!(a.cycles >= 1, "{a:?}");
    assert!(a.churn_clean >= 1 && a.churn_wrong_password >= 1 && a.churn_abrupt >= 1, "{a:?}");
    assert!(a.cancels_confirmed >= 1, "{a:?}");
    assert!(report.errors.iter().any(|e| e.expected && e.sqlstate == "28P01"), "{:?}", report.errors);
    assert!(report.errors.iter().any(|e| e.expected && e.sqlstate == "57014"), "{:?}", report.errors);
    let end = report.end.as_ref().unwrap();
    assert!(end.drained && end.verify_clean == Some(true), "{end:?}");
    assert_eq!(report.server_stop.as_deref(), Some("clean"));
    let verdict = report.verdict.as_ref().unwrap();
    assert_eq!(verdict.growth.len(), 3, "RSS, fds and threads judged: {verdict:?}");
    assert!(verdict.p99.is_some());
    assert!(verdict.failures.is_empty(), "{:?}", verdict.failures);
    for stem in CHART_STEMS {
        for ext in ["png", "svg"] {
            let chart = out.join(format!("{stem}.{ext}"));
            assert!(chart.metadata().map(|m| m.len() > 0).unwrap_or(false), "{} missing", chart.display());
        }
    }
    assert!(out.join("server.log").exists());
}
