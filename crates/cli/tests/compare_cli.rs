//! `pgtier bench compare` end to end: result files on disk in, a report on
//! stdout and charts on disk out, and one-line errors for bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Threads, MQTh, and (transaction, average latency µs) pairs.
type IterationSpec<'a> = (u32, f64, &'a [(&'a str, f64)]);

/// A result file as `pgtier bench tatp` writes it, built as text so this
/// test also pins the JSON contract (field names) of `result.rs`.
fn result_json(label: &str, subscribers: u64, durability: &str, iterations: &[IterationSpec<'_>]) -> String {
    let txn = |(name, avg): &(&str, f64)| {
        format!(
            r#"{{"name":"{name}","executed":1000,"found":990,"acceptable_errors":0,"success_ratio":0.99,
               "spec_success_ratio":1.0,"latency_us":{{"min":{min},"avg":{avg},"p50":{avg},"p90":{p90},
               "p99":{p99},"p999":{p99},"max":{p99}}}}}"#,
            min = avg / 2.0,
            p90 = avg * 2.0,
            p99 = avg * 4.0,
        )
    };
    let iteration = |(threads, mqth, txns): &IterationSpec<'_>| {
        let txns: Vec<String> = txns.iter().map(txn).collect();
        let txns = txns.join(",");
        format!(
            r#"{{"threads":{threads},"repetitions":[{{"mqth":{mqth},"transactions":[{txns}]}}],
               "mqth_mean":{mqth},"mqth_min":{mqth},"mqth_max":{mqth},"mqth_stddev":0.0,"transactions":[{txns}]}}"#
        )
    };
    let iterations: Vec<String> = iterations.iter().map(iteration).collect();
    format!(
        r#"{{"tool_version":"0.1.0","started_at":"2025-01-01T00:00:00Z","label":"{label}",
           "config":{{"workload":"tatp","target":"postgres://localhost/tatp","subscribers":{subscribers},
             "min_subscriber_id":1,"max_subscriber_id":{subscribers},"key_distribution":"nurand",
             "rate_per_s":null,"duration_s":10.0,"ramp_up_s":1.0,"ramp_down_s":1.0,"repetitions":1,
             "durability":"{durability}","isolation":"read committed","deviations":[]}},
           "machine":{{"hostname":"bench","cpus":2,"memory_gib":4.0,"os":"Debian 12","kernel":"6.1"}},
           "iterations":[{}],
           "tatp":{{"extra":"ignored by compare"}}}}"#,
        iterations.join(",")
    )
}

const PG: &[(&str, f64)] = &[("GET_SUBSCRIBER_DATA", 120.0), ("UPDATE_LOCATION", 2000.0)];
const TIER: &[(&str, f64)] = &[("GET_SUBSCRIBER_DATA", 4.0), ("UPDATE_LOCATION", 50.0)];

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write fixture");
    path
}

fn pgtier(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgtier")).args(args).output().expect("run pgtier")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a comparison expected to fail and returns its one-line error.
fn fails(args: &[&str]) -> String {
    let out = pgtier(args);
    assert_eq!(out.status.code(), Some(1), "stdout: {}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "error is one line: {stderr}");
    assert!(stderr.starts_with("pgtier: error: "), "{stderr}");
    stderr
}

fn two_runs(dir: &Path) -> (String, String) {
    let pg = write(dir, "pg.json", &result_json("postgresql", 1000, "local-sync", &[(1, 900.0, PG), (2, 1700.0, PG)]));
    let tier =
        write(dir, "tier.json", &result_json("pgtier", 1000, "local-sync", &[(1, 950.0, TIER), (2, 1800.0, TIER)]));
    (pg.display().to_string(), tier.display().to_string())
}

#[test]
fn compare_prints_ratios_and_writes_charts_beside_the_candidate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pg, tier) = two_runs(dir.path());
    let out = pgtier(&["bench", "compare", &pg, &tier]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(stdout.contains("MQTh postgresql") && stdout.contains("MQTh pgtier"), "{stdout}");
    // 120 µs ÷ 4 µs and 2000 ÷ 50: both runs' latencies side by side as ratios.
    assert!(stdout.contains("30.0×") && stdout.contains("40.0×"), "{stdout}");
    assert!(stdout.contains("Latency at 1 thread") && stdout.contains("Latency at 2 threads"), "{stdout}");
    assert!(!stdout.contains("warning"), "{stdout}");
    for name in [
        "compare-postgresql-vs-pgtier-latency-1t.png",
        "compare-postgresql-vs-pgtier-latency-2t.svg",
        "compare-postgresql-vs-pgtier-mqth.png",
    ] {
        let path = dir.path().join(name);
        assert!(stdout.contains(&path.display().to_string()), "{name} not listed:\n{stdout}");
        assert!(std::fs::metadata(&path).expect("chart written").len() > 1000);
    }
}

#[test]
fn compare_at_one_thread_count_into_another_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pg, tier) = two_runs(dir.path());
    let out_dir = dir.path().join("charts");
    let out_arg = out_dir.display().to_string();
    let out = pgtier(&["bench", "compare", &pg, &tier, "--threads", "2", "--out", &out_arg]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Latency at 2 threads") && !stdout.contains("Latency at 1 thread"), "{stdout}");
    let mut files: Vec<String> = std::fs::read_dir(&out_dir)
        .expect("out dir created")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "compare-postgresql-vs-pgtier-latency-2t.png",
            "compare-postgresql-vs-pgtier-latency-2t.svg",
            "compare-postgresql-vs-pgtier-mqth.png",
            "compare-postgresql-vs-pgtier-mqth.svg",
        ]
    );
}

#[test]
fn differing_settings_warn_but_do_not_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pg = write(dir.path(), "pg.json", &result_json("postgresql", 1000, "local-sync", &[(1, 900.0, PG)]));
    let tier = write(dir.path(), "tier.json", &result_json("pgtier", 5000, "async", &[(1, 950.0, TIER)]));
    let out = pgtier(&["bench", "compare", &pg.display().to_string(), &tier.display().to_string()]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("warning: the runs' settings differ"), "{stdout}");
    assert!(stdout.contains("subscribers differs: baseline 1,000, candidate 5,000"), "{stdout}");
    assert!(stdout.contains("durability differs: baseline local-sync, candidate async"), "{stdout}");
}

#[test]
fn missing_file_is_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pg, _) = two_runs(dir.path());
    let missing = dir.path().join("missing.json").display().to_string();
    let error = fails(&["bench", "compare", &pg, &missing]);
    assert!(error.contains(&format!("cannot read {missing}: No such file")), "{error}");
}

#[test]
fn non_json_is_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pg, _) = two_runs(dir.path());
    let junk = write(dir.path(), "junk.json", "threads,mqth\n1,900\n").display().to_string();
    let error = fails(&["bench", "compare", &junk, &pg]);
    assert!(error.contains(&format!("{junk} is not JSON: ")), "{error}");
}

#[test]
fn other_json_is_not_a_result_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pg, _) = two_runs(dir.path());
    let other = write(dir.path(), "package.json", r#"{"name": "left-pad", "version": "1.3.0"}"#).display().to_string();
    let error = fails(&["bench", "compare", &pg, &other]);
    assert!(error.contains(&format!("{other} is not a pgtier result file: missing field")), "{error}");
}

#[test]
fn no_common_thread_counts_is_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pg = write(dir.path(), "pg.json", &result_json("postgresql", 1000, "local-sync", &[(1, 900.0, PG)]));
    let tier = write(dir.path(), "tier.json", &result_json("pgtier", 1000, "local-sync", &[(4, 3000.0, TIER)]));
    let error = fails(&["bench", "compare", &pg.display().to_string(), &tier.display().to_string()]);
    assert!(error.contains("no common thread counts (baseline measured 1; candidate measured 4)"), "{error}");
}

#[test]
fn unknown_thread_count_is_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pg, tier) = two_runs(dir.path());
    let error = fails(&["bench", "compare", &pg, &tier, "--threads", "16"]);
    assert!(error.contains("thread count 16 was not measured by both runs (common: 1, 2)"), "{error}");
}
