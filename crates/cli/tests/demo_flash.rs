//! `pgtier demo flash` at CI size, as a user runs it: the real binary, its
//! own private PostgreSQL (memory-limited), a tiny population, second-long
//! windows. Every section of the report, every run with throughput, every
//! pgtier run checked clean against PostgreSQL with subscribers read back
//! through the cache, flash answering reads in use case 2, the memory limit
//! applied (we run as root, so a cgroup can be made), and bad arguments
//! refused in one line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use pgtier_bench::flash_demo::{self, FlashReport};

fn demo_flash(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pgtier"));
    command
        .args(["demo", "flash", "--subscribers", "4000", "--sizes", "20,40", "--threads", "2"])
        .args(["--warm", "0.5", "--duration", "1", "--curve-lead", "1", "--curve-after", "2"])
        .args(["--read-check", "100", "--no-io", "--seed", "33"])
        .arg("--out")
        .arg(dir.join("out"))
        // Relative, as the README's default is: the flash files must land
        // under it, not under each server's data directory.
        .current_dir(dir)
        .args(["--work-dir", "work"])
        .env_remove("PGTIER_DEMO_BACKEND");
    command
}

#[test]
fn demo_flash_runs_every_study_and_checks_every_answer() {
    let dir = tempfile::tempdir().unwrap();
    let output = demo_flash(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "demo flash failed: {stderr}");
    let out = dir.path().join("out");
    let text = std::fs::read_to_string(out.join(flash_demo::REPORT_FILE)).expect("report.md");
    let report: FlashReport =
        serde_json::from_str(&std::fs::read_to_string(out.join("flash.json")).expect("flash.json")).unwrap();
    for section in flash_demo::SECTIONS {
        assert!(text.contains(section), "{section} missing from the report");
    }
    for chart in ["flash-gain-by-size.png", "flash-gain-by-size.svg", "flash-warm-up.png", "flash-warm-up.svg"] {
        assert!(out.join(chart).exists(), "{chart} not drawn");
    }
    assert!(report.finished, "{:?}", report.stopped_by);
    let labels: Vec<&str> = report.sides.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "postgresql",
            "pgtier-40%",
            "pgtier-direct-40%",
            "pgtier-20%",
            "pgtier-direct-20%",
            "curve",
            "uc1-all-dram",
            "uc2-flash",
            "clean",
            "write-back"
        ]
    );
    for side in report.sides.iter().filter(|s| s.label != "curve") {
        assert!(side.txn_per_s > 0.0, "{}: no throughput", side.label);
        assert!(!side.txns.is_empty(), "{}: no transactions", side.label);
    }
    // Every pgtier measure followed a warm-up of windows until both its
    // shares (flash answers, loads from PostgreSQL per transaction) were
    // steady, or the window limit.
    for side in report.sides.iter().filter(|s| s.label != "curve" && s.label != "postgresql") {
        let windows = &side.warm_up_windows;
        assert!(!windows.is_empty() && windows.iter().all(|w| w.len() == 2), "{}: {windows:?}", side.label);
        assert!(side.warm_up_steady || windows.len() == 12, "{}: stopped unsteady early {windows:?}", side.label);
        assert!(windows.len() >= 2 || !side.warm_up_steady, "{}: steady after one window {windows:?}", side.label);
        // The rate the gains compare: write-through caught up after the
        // window (no faster than the window's), memory then measured.
        let (Some(caught_up), Some(drain)) = (side.caught_up_txn_per_s, side.drain_s) else {
            panic!("{}: no rate with write-through caught up", side.label);
        };
        assert!(caught_up > 0.0 && caught_up <= side.txn_per_s + 1e-6 && drain >= 0.0, "{side:?}");
        assert!(side.end_memory_bytes.is_some() && side.end_backlog_bytes.is_some(), "{}", side.label);
    }
    let baseline = report.side("postgresql").unwrap();
    assert!(baseline.caught_up_txn_per_s.is_none(), "PostgreSQL alone has nothing to catch up");
    for side in report.sides.iter().filter(|s| s.label != "postgresql") {
        let check = side.check.as_ref().unwrap_or_else(|| panic!("{}: not checked", side.label));
        assert!(check.clean, "{}: {check:?}", side.label);
        assert!(check.read_checked > 0 && check.verified > 0, "{}: {check:?}", side.label);
    }
    // A fifth of the instances in DRAM: reads of the rest are answered from flash.
    let uc2 = report.side("uc2-flash").unwrap();
    assert!(uc2.flash_answers.unwrap() > 0, "{uc2:?}");
    assert!(!report.curve.is_empty() && report.curve_enabled_at.is_some());
    // Root can make a memory cgroup: the baseline must have had its limit.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let limit = &report.memory_limit;
        assert!(limit.limit_bytes.is_some() && limit.unavailable.is_none(), "{limit:?}");
        // Tightened after measuring PostgreSQL's own memory under load.
        assert!(limit.process_bytes.is_some() && limit.limit_bytes < limit.sizing_limit_bytes, "{limit:?}");
        // pgtier's runs had the headroom on top of PostgreSQL alone's limit.
        assert!(limit.pgtier_runs_limit_bytes > limit.limit_bytes, "{limit:?}");
        let shared_buffers = report.postgres_settings.iter().find(|(n, _)| n == "shared_buffers").map(|(_, v)| v);
        assert_ne!(shared_buffers.map(String::as_str), Some("2GB"), "shared_buffers not lowered to the budget");
    }
    assert!(!dir.path().join("work").exists(), "the engines' directory was left behind");
}

#[test]
fn bad_arguments_are_refused_in_one_line() {
    for (args, expected) in [
        (vec!["--sizes", "ten"], "invalid --sizes"),
        (vec!["--dram-percent", "0"], "invalid --dram-percent"),
        (vec!["--sizes", "3"], "must be above the DRAM fraction"),
        (vec!["--threads", "0"], "threads 0"),
        (vec!["--postgres-headroom", "lots"], "invalid --postgres-headroom"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_pgtier")).args(["demo", "flash"]).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
}
