//! The soak's files: `report.md` (verdict first), `soak.json` (the whole
//! [`SoakReport`]) and PNG + SVG charts of RSS, fds, threads, p99 and
//! throughput over time, drawn with the kit's chart module.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::chart::{TimeSeries, draw_time_series};

use super::verdict::Growth;
use super::{Sample, SoakReport};

pub const REPORT_FILE: &str = "report.md";
pub const JSON_FILE: &str = "soak.json";
/// Chart files: `<stem>.png` and `<stem>.svg`.
pub const CHART_STEMS: [&str; 5] = ["soak-rss", "soak-fds", "soak-threads", "soak-p99", "soak-throughput"];
/// Most rows of the samples table (evenly picked; soak.json has them all).
const TABLE_ROWS_MAX: usize = 60;

/// Writes the three kinds of file into `dir`; returns the report's path
/// and text. `growth_gate`: whether growth decides the exit status.
pub fn write_report(report: &SoakReport, dir: &Path, growth_gate: bool) -> std::io::Result<(PathBuf, String)> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    std::fs::write(dir.join(JSON_FILE), json)?;
    let mut missing = Vec::new();
    for (stem, chart) in charts(report) {
        if let Err(e) = draw_time_series(&chart, dir, stem) {
            missing.push(format!("{stem}: {e}"));
        }
    }
    let text = markdown(report, growth_gate, &missing);
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, &text)?;
    Ok((path, text))
}

fn mib(b: f64) -> f64 {
    b / (1024.0 * 1024.0)
}

fn goal_line(report: &SoakReport, metric: &str, scale: f64) -> Option<(f64, String)> {
    let g = report.verdict.as_ref()?.growth.iter().find(|g| g.metric == metric)?;
    Some((
        g.baseline * (1.0 + g.goal_percent / 100.0) * scale,
        format!("goal: first sample after warm-up + {} %", g.goal_percent),
    ))
}

fn charts(report: &SoakReport) -> Vec<(&'static str, TimeSeries<'static>)> {
    let s = &report.samples;
    let x: Vec<String> = s.iter().map(|s| format!("{:.0}", s.t_s)).collect();
    let every = (s.len() / 12).max(1);
    let subtitle = vec![
        format!("{} ({}), sampled every {:.0} s", report.server, report.machine.hostname, interval_s(report)),
        format!("warm-up until {:.0} s; growth judged from the first sample after it", report.warmup_s),
    ];
    let chart = |title: &str, y: &str, series: Vec<(&'static str, Vec<f64>)>, reference| TimeSeries {
        title: title.to_owned(),
        subtitle: subtitle.clone(),
        x_labels: x.clone(),
        label_every: every,
        y_desc: y.to_owned(),
        series,
        reference_y: reference,
        log_when_wide: false,
    };
    let col = |f: fn(&Sample) -> f64| s.iter().map(f).collect::<Vec<f64>>();
    vec![
        (
            "soak-rss",
            chart(
                "Server resident memory (RSS)",
                "RSS (MiB)",
                vec![("RSS", col(|s| mib(s.rss_bytes as f64)))],
                goal_line(report, "RSS", 1.0 / (1024.0 * 1024.0)),
            ),
        ),
        (
            "soak-fds",
            chart(
                "Server open file descriptors",
                "open fds",
                vec![("fds", col(|s| s.fds as f64))],
                goal_line(report, "open fds", 1.0),
            ),
        ),
        (
            "soak-threads",
            chart(
                "Server threads",
                "threads",
                vec![("threads", col(|s| s.threads as f64))],
                goal_line(report, "threads", 1.0),
            ),
        ),
        (
            "soak-p99",
            chart(
                "TATP latency per interval (from the intended start)",
                "latency (ms)",
                vec![("p99", col(|s| s.p99_us / 1000.0)), ("p50", col(|s| s.p50_us / 1000.0))],
                None,
            ),
        ),
        (
            "soak-throughput",
            chart("TATP throughput per interval", "txn/s", vec![("completed", col(|s| s.txn_per_s))], None),
        ),
    ]
}

fn interval_s(report: &SoakReport) -> f64 {
    report.samples.first().map_or(0.0, |s| s.t_s.round())
}

fn pass(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

fn growth_row(out: &mut String, g: &Growth) {
    let shown = |v: f64| if g.metric == "RSS" { format!("{:.1} MiB", mib(v)) } else { format!("{v:.0}") };
    let _ = writeln!(
        out,
        "| {} | {} at {:.0} s | {} | {} | {:+.2} % | {:+.2} % | {:+.2} %/h | < {} % | **{}** |",
        g.metric,
        shown(g.baseline),
        g.baseline_at_s,
        shown(g.last),
        shown(g.max),
        g.growth_percent,
        g.max_growth_percent,
        g.trend_percent_per_hour,
        g.goal_percent,
        pass(g.pass)
    );
}

fn markdown(report: &SoakReport, growth_gate: bool, missing_charts: &[String]) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "# pgtier soak\n");
    let _ = writeln!(
        w,
        "Started {}, ran {:.0} s (setup {:.0} s) on {} ({} CPUs). Server: {} (pid {}).\n",
        report.started_at,
        report.run_s,
        report.setup_s,
        report.machine.hostname,
        report.machine.cpus,
        report.server,
        report.server_pid
    );
    verdict_section(w, report, growth_gate);
    let _ = writeln!(w, "\n## Settings\n\n| setting | value |\n|---|---|");
    for (k, v) in &report.settings {
        let _ = writeln!(w, "| {k} | {v} |");
    }
    tatp_section(w, report);
    activity_section(w, report);
    errors_section(w, report);
    samples_section(w, report);
    let _ = writeln!(w, "\n## Charts\n");
    for stem in CHART_STEMS {
        let _ = writeln!(w, "![{stem}]({stem}.png)");
    }
    for m in missing_charts {
        let _ = writeln!(w, "\n- not drawn: {m}");
    }
    out
}

fn verdict_section(w: &mut String, report: &SoakReport, growth_gate: bool) {
    let _ = writeln!(w, "## Verdict\n");
    let Some(v) = &report.verdict else {
        let _ = writeln!(w, "Not judged (the run stopped before it could be).");
        return;
    };
    let failures = v.all_failures(growth_gate);
    let _ = writeln!(
        w,
        "**{}**{}{}\n",
        pass(failures.is_empty()),
        if report.interrupted { " (interrupted: partial run)" } else { "" },
        if growth_gate { "" } else { "; growth reported, not gating the exit status (--no-growth-gate)" }
    );
    for f in &failures {
        let _ = writeln!(w, "- {f}");
    }
    let _ = writeln!(
        w,
        "\nUnexpected client errors: **{}** (deliberate ones apart: 28P01 wrong passwords, 57014 cancels). Failed checks: **{}**.\n",
        v.unexpected_errors, report.anomalies_total
    );
    let _ = writeln!(
        w,
        "Growth over the run's last part against its first sample. Readings are taken between cycles and cancelled statements (which hold memory while they run); fds and threads are the fewest of 5 readings 40 ms apart, so short-lived sessions of the churn are left out:\n"
    );
    let _ = writeln!(
        w,
        "| metric | first after warm-up | last | peak | growth | peak growth | trend (Theil-Sen) | goal | |\n|---|---|---|---|---|---|---|---|---|"
    );
    for g in &v.growth {
        growth_row(w, g);
    }
    if v.growth.is_empty() {
        let _ = writeln!(w, "| (fewer than two samples after the warm-up) | | | | | | | | |");
    }
    if let Some(p) = &v.p99 {
        let _ = writeln!(
            w,
            "\np99 stability over {} intervals after the warm-up: median {:.2} ms, min {:.2} ms, max {:.2} ms, max/median **{:.2}**.",
            p.intervals,
            p.median_us / 1000.0,
            p.min_us / 1000.0,
            p.max_us / 1000.0,
            p.max_over_median
        );
    }
}

fn tatp_section(w: &mut String, report: &SoakReport) {
    let _ = writeln!(w, "\n## TATP\n");
    let window: Vec<&Sample> = report.samples.iter().filter(|s| s.t_s + 0.5 >= report.warmup_s).collect();
    let seconds = match (window.first(), window.last()) {
        (Some(a), Some(b)) if b.t_s > a.t_s => b.t_s - a.t_s + interval_s(report),
        _ => 0.0,
    };
    let _ = writeln!(
        w,
        "Open loop (latency from each transaction's intended start), standard mix, AWT cache group over all subscribers. After the warm-up: {} transactions{}.",
        report.tatp_total,
        if seconds > 0.0 { format!(", {:.0} txn/s", report.tatp_total as f64 / seconds) } else { String::new() }
    );
    if let Some(l) = &report.tatp_latency_us {
        let _ = writeln!(
            w,
            "Latency after the warm-up: mean {:.0} µs, p50 {:.0} µs, p90 {:.0} µs, p99 {:.0} µs, p99.9 {:.0} µs, max {:.0} µs.",
            l.avg, l.p50, l.p90, l.p99, l.p999, l.max
        );
    }
    let acceptable: u64 = report.samples.iter().map(|s| s.acceptable_errors).sum();
    let _ = writeln!(w, "Acceptable TATP errors (23505, 23503: rolled back, not counted): {acceptable}.");
    if let Some(end) = &report.end {
        let _ = writeln!(
            w,
            "\nAfter the load: write-through {} in {:.1} s; PostgreSQL refused {} write-through transactions; VERIFY CACHE GROUP: {}.",
            if end.drained { "drained" } else { "did NOT drain" },
            end.drain_s,
            end.awt_errors,
            match end.verify_clean {
                Some(true) => "clean".to_owned(),
                Some(false) => format!("differences: {}", end.verify_message),
                None => "not run".to_owned(),
            }
        );
    }
    if let Some(stop) = &report.server_stop {
        let _ = writeln!(w, "Server stop after the run: {stop}.");
    }
}

fn activity_section(w: &mut String, report: &SoakReport) {
    let a = &report.activity;
    let _ = writeln!(w, "\n## Beside TATP\n\n| activity | count |\n|---|---|");
    for (what, n) in [
        ("cache-group cycles (LOAD, REFRESH, UNLOAD half, UNLOAD rest; each checked)", a.cycles),
        ("churn: clean sessions", a.churn_clean),
        ("churn: wrong passwords refused (28P01)", a.churn_wrong_password),
        ("churn: sessions abandoned mid-transaction, row lock then taken by a new session", a.churn_abrupt),
        ("cancels sent", a.cancels_sent),
        ("cancels answered 57014 (user request)", a.cancels_confirmed),
        ("TATP sessions reopened after an error", a.tatp_reconnects),
    ] {
        let _ = writeln!(w, "| {what} | {n} |");
    }
    if a.cancels_confirmed > 0 {
        let _ = writeln!(
            w,
            "\nCancel to 57014: median {:.1} ms, max {:.1} ms.",
            report.cancel_ms_p50, report.cancel_ms_max
        );
    }
    if !report.cycle_ops.is_empty() {
        let _ = writeln!(w, "\n| cycle step | count | mean | max |\n|---|---|---|---|");
        for op in &report.cycle_ops {
            let _ = writeln!(w, "| {} | {} | {:.3} s | {:.3} s |", op.op, op.count, op.mean_s, op.max_s);
        }
    }
}

fn errors_section(w: &mut String, report: &SoakReport) {
    let _ = writeln!(w, "\n## Errors by SQLSTATE\n");
    if report.errors.is_empty() {
        let _ = writeln!(w, "None.");
    } else {
        let _ = writeln!(
            w,
            "| source | SQLSTATE | count | expected | first at | first message |\n|---|---|---|---|---|---|"
        );
        for e in &report.errors {
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} | {:.1} s | {} |",
                e.source,
                e.sqlstate,
                e.count,
                if e.expected { "yes" } else { "**no**" },
                e.first_at_s,
                e.first_message.replace('|', "\\|").replace('\n', " ")
            );
        }
    }
    if report.anomalies_total > 0 {
        let _ = writeln!(w, "\n### Anomalies ({})\n", report.anomalies_total);
        for a in &report.anomalies {
            let _ = writeln!(w, "- {a}");
        }
    }
    if let Some(why) = &report.server_died {
        let _ = writeln!(w, "\nThe server died: {why}.");
    }
}

fn samples_section(w: &mut String, report: &SoakReport) {
    let s = &report.samples;
    let step = s.len().div_ceil(TABLE_ROWS_MAX).max(1);
    let _ = writeln!(
        w,
        "\n## Samples\n\n{}\n\n| t (s) | RSS (MiB) | fds | threads | txn/s | p50 (ms) | p99 (ms) | max (ms) | unexpected errors | AWT backlog (B) |\n|---|---|---|---|---|---|---|---|---|---|",
        if step > 1 {
            format!("Every {step}th sample of {} (soak.json has all).", s.len())
        } else {
            format!("{} samples.", s.len())
        }
    );
    for x in s.iter().step_by(step) {
        let _ = writeln!(
            w,
            "| {:.0} | {:.1} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} |",
            x.t_s,
            mib(x.rss_bytes as f64),
            x.fds,
            x.threads,
            x.txn_per_s,
            x.p50_us / 1000.0,
            x.p99_us / 1000.0,
            x.max_us / 1000.0,
            x.unexpected_errors,
            x.awt_backlog_bytes.map_or_else(|| "-".to_owned(), |b| b.to_string())
        );
    }
}
