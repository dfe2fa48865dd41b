//! `pgtier bench io` end to end: the quick grid on a temporary file gives
//! every point with I/O and ordered percentiles; bad input gets one line and
//! exit 2 (flag syntax) or 1 (flags that do not fit together); with fio
//! installed, fio's figures stand beside pgtier's for every point.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn pgtier_io(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgtier")).args(["bench", "io"]).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs and expects success; returns stdout and the parsed results.json.
fn run_ok(args: &[&str], out: &Path) -> (String, Value) {
    let output = pgtier_io(args);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{args:?} failed: {stderr}\n{stdout}");
    let json = std::fs::read_to_string(out.join("results.json")).unwrap();
    (stdout, serde_json::from_str(&json).unwrap())
}

fn f(v: &Value, path: &[&str]) -> f64 {
    path.iter().fold(v, |v, k| &v[*k]).as_f64().unwrap_or_else(|| panic!("no number at {path:?} in {v}"))
}

/// Every (mode, block size, queue depth) of the grid once, with I/O done
/// and p50 <= p99 <= max.
fn check_points(json: &Value, modes: &[&str], sizes: &[u64], depths: &[u64], side: &str) {
    let points = json["points"].as_array().unwrap();
    assert_eq!(points.len(), modes.len() * sizes.len() * depths.len(), "{json}");
    for mode in modes {
        for &bs in sizes {
            for &qd in depths {
                let p = points
                    .iter()
                    .find(|p| p["mode"] == *mode && p["block_size"] == bs && p["queue_depth"] == qd)
                    .unwrap_or_else(|| panic!("no point {mode} {bs} QD{qd}"));
                let what = format!("{side} at {mode} {bs} QD{qd}: {}", p[side]);
                assert!(f(p, &[side, "iops"]) > 0.0, "{what}");
                assert!(f(p, &[side, "mb_per_s"]) > 0.0, "{what}");
                let (p50, p99, max) = (
                    f(p, &[side, "latency_us", "p50"]),
                    f(p, &[side, "latency_us", "p99"]),
                    f(p, &[side, "latency_us", "max"]),
                );
                assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{what}");
            }
        }
    }
}

#[test]
fn quick_grid_without_fio() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("quick.bench");
    let out = dir.path().join("out");
    let args = ["--quick", "--no-fio", "--seed", "1", "--file", file.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let (stdout, json) = run_ok(&args, &out);
    check_points(&json, &["randread", "randwrite"], &[4096, 65536], &[1, 4], "pgtier");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 64 << 20);
    assert!(json["points"][0]["fio"].is_null() && json["fio_version"].is_null(), "{json}");
    assert_eq!(json["target"]["direct"], true, "{json}");
    assert!(json["target"]["prepared"].as_str().unwrap().starts_with("created"), "{json}");
    for want in ["queue depth N = N threads", "--numjobs=N", "no fsync", "not run (--no-fio)", "p99.9 µs", "randwrite"]
    {
        assert!(stdout.contains(want), "stdout lacks {want:?}:\n{stdout}");
    }
    assert!(!stdout.contains("fio IOPS"), "{stdout}");
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 8, "{csv}");
    let png = std::fs::metadata(out.join("iops-by-block-size.png")).unwrap();
    assert!(png.len() > 1000);

    // The filled file is reused by the next run of the same size.
    let again = ["--quick", "--no-fio", "--mode", "randread", "--block-sizes", "4k", "--queue-depths", "2"];
    let mut args2: Vec<&str> = again.to_vec();
    args2.extend([
        "--duration",
        "0.3",
        "--warmup",
        "0",
        "--file",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let (_, json) = run_ok(&args2, &out);
    check_points(&json, &["randread"], &[4096], &[2], "pgtier");
    assert!(json["target"]["prepared"].as_str().unwrap().starts_with("reused"), "{json}");
}

/// Runs with bad input; returns the single stderr line after checking the
/// exit code.
fn fails(args: &[&str], code: i32) -> String {
    let output = pgtier_io(args);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: expected one line: {stderr}");
    assert!(lines[0].starts_with("pgtier: error: "), "{stderr}");
    lines[0].to_owned()
}

#[test]
fn bad_input_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.bench");
    let file = file.to_str().unwrap();
    let line = fails(&["--file", file, "--mode", "randread,sideways"], 2);
    assert!(line.contains("--mode") && line.contains("unknown mode 'sideways'"), "{line}");
    let line = fails(&["--file", file, "--block-sizes", "4k,3k"], 2);
    assert!(line.contains("--block-sizes") && line.contains("power of two from 512 to 16m"), "{line}");
    let line = fails(&["--file", file, "--block-sizes", "32m"], 2);
    assert!(line.contains("--block-sizes"), "{line}");
    let line = fails(&["--file", file, "--queue-depths", "0"], 2);
    assert!(line.contains("--queue-depths") && line.contains("from 1 to 1024"), "{line}");
    let line = fails(&["--file", file, "--queue-depths", "2000"], 2);
    assert!(line.contains("--queue-depths"), "{line}");
    let line = fails(&["--file", file, "--read-pct", "101"], 2);
    assert!(line.contains("--read-pct"), "{line}");
    let line = fails(&["--file", file, "--size", "512k", "--block-sizes", "4k,1m"], 1);
    assert!(line.contains("invalid --size 512k: smaller than the largest block size 1m"), "{line}");
    let missing = dir.path().join("no/such/dir/x.bench");
    let line = fails(&["--quick", "--file", missing.to_str().unwrap()], 1);
    assert!(line.contains("invalid --file") && line.contains("does not exist"), "{line}");
    let line = fails(&["--quick", "--file", file, "--duration", "0"], 1);
    assert!(line.contains("invalid --duration 0"), "{line}");
    let line = fails(&["--quick", "--file", file, "--fsync-every", "0"], 1);
    assert!(line.contains("invalid --fsync-every 0"), "{line}");
    assert!(!Path::new(file).exists(), "bad input must not create the file");
}

#[test]
fn help_explains_queue_depth_and_fio() {
    let output = pgtier_io(&["--help"]);
    assert!(output.status.success());
    let help = text(&output.stdout);
    for want in ["QD N = N threads", "--ioengine=psync --numjobs=N", "apt-get install fio", "--quick", "--no-fio"] {
        assert!(help.contains(want), "help lacks {want:?}:\n{help}");
    }
}

#[test]
fn quick_grid_beside_fio() {
    if Command::new("fio").arg("--version").output().is_err() {
        eprintln!("skipped: fio is not installed (apt-get install fio); the fio comparison is not tested here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fio.bench");
    let out = dir.path().join("out");
    let (file, out_s) = (file.to_str().unwrap(), out.to_str().unwrap());
    let args = ["--quick", "--mode", "randread,mixed", "--block-sizes", "4k", "--file", file, "--out", out_s];
    let (stdout, json) = run_ok(&args, &out);
    check_points(&json, &["randread", "mixed"], &[4096], &[1, 4], "pgtier");
    check_points(&json, &["randread", "mixed"], &[4096], &[1, 4], "fio");
    assert!(json["fio_version"].as_str().unwrap().starts_with("fio-"), "{json}");
    for p in json["points"].as_array().unwrap() {
        // The same job on the same device: far apart only if the job were not the same.
        let ratio = f(p, &["pgtier", "iops"]) / f(p, &["fio", "iops"]);
        assert!((0.25..4.0).contains(&ratio), "pgtier/fio IOPS {ratio} at {p}");
        let command = p["fio_command"].as_str().unwrap();
        assert!(command.contains("--ioengine=psync") && command.contains(&format!("--filename={file}")), "{command}");
    }
    assert!(stdout.contains("fio IOPS") && stdout.contains("IOPS pgtier/fio: median"), "{stdout}");
}
