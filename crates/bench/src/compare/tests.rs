use super::*;
use crate::chart::fixtures::{iteration, run, tatp_run};
use crate::chart::tests::check_written;

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9 * b.abs().max(1.0))
}

#[test]
fn ratios_point_the_same_way() {
    let base = run("pg", vec![iteration(4, 1000.0, &[("READ", 200.0), ("WRITE", 1000.0)])]);
    let cand = run("tier", vec![iteration(4, 1500.0, &[("WRITE", 50.0), ("READ", 10.0)])]);
    let cmp = compare(&base, &cand);
    assert_eq!(cmp.common_threads(), [4]);
    let point = &cmp.points[0];
    assert!(close(point.mqth_ratio, 1.5), "MQTh ratio is candidate ÷ baseline");
    // Transactions keep the baseline's order whatever the candidate's.
    let names: Vec<&str> = point.transactions.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["READ", "WRITE"]);
    assert!(close(point.transactions[0].avg_ratio, 20.0), "latency ratio is baseline ÷ candidate");
    assert!(close(point.transactions[1].avg_ratio, 20.0));
    assert!(close(point.transactions[1].p90_ratio, 20.0));
    assert!(close(point.transactions[1].p99_ratio, 20.0));
    assert!(close(point.geomean(|t| t.avg_ratio), 20.0));
    assert!(cmp.config_differences.is_empty());
}

#[test]
fn geomean_is_not_dominated_by_an_outlier() {
    let base = run("a", vec![iteration(1, 10.0, &[("X", 100.0), ("Y", 100.0)])]);
    let cand = run("b", vec![iteration(1, 10.0, &[("X", 1.0), ("Y", 100.0)])]);
    let cmp = compare(&base, &cand);
    assert!(close(cmp.points[0].geomean(|t| t.avg_ratio), 10.0));
}

#[test]
fn unmatched_iterations_and_transactions_are_listed() {
    let base = run("pg", vec![iteration(1, 100.0, &[("A", 10.0), ("B", 10.0)]), iteration(2, 180.0, &[("A", 10.0)])]);
    let cand = run(
        "tier",
        vec![
            iteration(2, 400.0, &[("A", 1.0), ("C", 1.0)]),
            iteration(2, 1.0, &[]),
            iteration(8, 900.0, &[("A", 1.0)]),
        ],
    );
    let cmp = compare(&base, &cand);
    assert_eq!(cmp.common_threads(), [2]);
    let threads: Vec<u32> = cmp.throughput.iter().map(|r| r.threads).collect();
    assert_eq!(threads, [1, 2, 8]);
    assert!(cmp.throughput[0].candidate.is_none() && cmp.throughput[0].ratio.is_none());
    assert!(cmp.throughput[2].baseline.is_none());
    // The first iteration at a repeated thread count wins.
    assert!(close(cmp.throughput[1].ratio, 400.0 / 180.0));
    let point = &cmp.points[0];
    assert_eq!(point.transactions.len(), 1);
    assert!(point.baseline_only_transactions.is_empty());
    assert_eq!(point.candidate_only_transactions, ["C"]);
    let report = cmp.to_string();
    assert!(report.contains("only in tier: C"), "{report}");
}

#[test]
fn zero_and_nan_give_no_ratio_rather_than_infinity() {
    let base = run("a", vec![iteration(1, 0.0, &[("X", 0.0), ("Y", f64::NAN)])]);
    let cand = run("b", vec![iteration(1, 5.0, &[("X", 3.0), ("Y", 2.0)])]);
    let cmp = compare(&base, &cand);
    let point = &cmp.points[0];
    assert_eq!(point.mqth_ratio, None);
    assert!(point.transactions.iter().all(|t| t.avg_ratio.is_none()));
    assert_eq!(point.geomean(|t| t.avg_ratio), None);
    assert!(cmp.to_string().contains('—'));
}

#[test]
fn no_common_threads_and_unknown_threads_are_errors() {
    let base = run("a", vec![iteration(1, 1.0, &[("X", 1.0)])]);
    let cand = run("b", vec![iteration(2, 1.0, &[("X", 1.0)])]);
    let cmp = compare(&base, &cand);
    let error = cmp.require_common().expect_err("nothing in common");
    assert_eq!(error.to_string(), "no common thread counts (baseline measured 1; candidate measured 2)");
    assert!(draw_comparison_chart(&cmp, std::path::Path::new("/nonexistent")).is_err());

    let both = compare(&tatp_run("a", 1.0, 100.0), &tatp_run("b", 10.0, 100.0));
    assert_eq!(both.restricted_to(4).expect("4 is common").common_threads(), [4]);
    assert_eq!(both.restricted_to(4).expect("4 is common").throughput.len(), 4);
    let error = both.restricted_to(3).expect_err("3 is not measured");
    assert_eq!(error.to_string(), "thread count 3 was not measured by both runs (common: 1, 2, 4, 8)");
}

#[test]
fn config_differences_are_listed() {
    let base = tatp_run("pg", 1.0, 100.0);
    let mut cand = tatp_run("tier", 10.0, 100.0);
    cand.config.subscribers = 1_000_000;
    cand.config.durability = String::new();
    cand.config.key_distribution = "uniform".to_string();
    cand.config.duration_s = 60.0;
    cand.config.target = "something else entirely".to_string();
    let cmp = compare(&base, &cand);
    let settings: Vec<&str> = cmp.config_differences.iter().map(|d| d.setting.as_str()).collect();
    assert_eq!(settings, ["subscribers", "key distribution", "duration", "durability"]);
    assert_eq!(cmp.warnings()[0], "subscribers differs: baseline 100,000, candidate 1,000,000");
    assert!(cmp.warnings()[3].ends_with("candidate (unset)"));
    assert!(cmp.to_string().contains("warning: the runs' settings differ"));
}

#[test]
fn report_shows_labels_and_ratios() {
    let cmp = compare(&tatp_run("postgresql", 1.0, 2000.0), &tatp_run("pgtier", 37.0, 2000.0));
    let report = cmp.to_string();
    assert!(report.contains("MQTh postgresql"), "{report}");
    assert!(report.contains("avg pgtier"), "{report}");
    assert!(report.contains("37.0×"), "{report}");
    assert!(report.contains("Latency at 8 threads"), "{report}");
    assert!(report.contains("geometric mean"), "{report}");

    // Equal labels would make the columns ambiguous.
    let same = compare(&tatp_run("x", 1.0, 1.0), &tatp_run("x", 1.0, 1.0));
    assert!(same.to_string().contains("MQTh candidate"));
}

#[test]
fn comparison_charts_are_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = tatp_run("postgresql", 1.0, 2000.0);
    let mut cand = tatp_run("pgtier", 37.0, 2100.0);
    cand.config.durability = "async".to_string();
    let cmp = compare(&base, &cand);
    let paths = draw_comparison_chart(&cmp, dir.path()).expect("charts drawn");
    // Four thread counts' bars and one throughput chart, PNG and SVG each.
    assert_eq!(paths.len(), 10);
    assert!(paths.iter().any(|p| p.ends_with("compare-postgresql-vs-pgtier-latency-8t.png")));
    assert!(paths.iter().any(|p| p.ends_with("compare-postgresql-vs-pgtier-mqth.svg")));
    let svgs = check_written(&paths);
    let bars = &svgs[3];
    assert!(bars.contains("postgresql (baseline)") && bars.contains("pgtier (candidate)"));
    assert!(bars.contains("37.0× lower"));
    assert!(bars.contains("ICF = INSERT_CALL_FORWARDING") || bars.contains(">INSERT_CALL_FORWARDING<"));
    assert!(bars.contains("settings differ: durability local-sync vs async"));

    let one = cmp.restricted_to(2).expect("2 is common");
    assert_eq!(draw_comparison_chart(&one, dir.path()).expect("charts drawn").len(), 4);
}

#[test]
fn result_files_load_or_say_why_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("good.json");
    // A workload's extra section beside the result fields must not matter.
    let mut value = serde_json::to_value(tatp_run("pg", 1.0, 10.0)).expect("serialize");
    value["tatp"] = serde_json::json!({ "anything": 1 });
    std::fs::write(&good, value.to_string()).expect("write");
    // Compared loosely: serde_json's default float parsing may differ from
    // the written value in the last bit.
    let loaded = load_result(&good).expect("loads");
    assert_eq!(loaded.label, "pg");
    assert_eq!(loaded.iterations.len(), 4);
    assert_eq!(loaded.iterations[3].transactions[5].name, "INSERT_CALL_FORWARDING");

    let chain = |e: LoadError| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text.push_str(&format!(": {s}"));
            source = s.source();
        }
        text
    };
    let missing = chain(load_result(&dir.path().join("nope.json")).expect_err("missing"));
    assert!(missing.starts_with("cannot read ") && missing.contains("No such file"), "{missing}");
    let text = dir.path().join("text.json");
    std::fs::write(&text, "hello").expect("write");
    assert!(matches!(load_result(&text), Err(LoadError::NotJson { .. })));
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"name": "x"}"#).expect("write");
    let error = chain(load_result(&other).expect_err("not ours"));
    assert!(error.contains("is not a pgtier result file: missing field"), "{error}");
}
