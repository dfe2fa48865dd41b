//! The demo's report: one Markdown file (`report.md`) with its charts
//! beside it and the raw figures as `demo.json`. Every section is written
//! even when the run stopped early; a section without data says why.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::charts::draw_all;
use super::runs::SATURATED;
use super::summary::{self, Median};
use super::{
    BASELINE, BASELINE_CAPPED, CAPPED, DIRECT, DIRECT_CAPPED, DIRECT_SYNC_CAPPED, DemoReport, FLAT_SLOPE_SHARE,
    LagFigures, WIRE, WIRE_CAPPED,
};
use crate::compare::compare;
use crate::cpu::Component;
use crate::report::{ReportError, mean_backend, short_name};
use crate::result::RunResult;

pub const REPORT_FILE: &str = "report.md";

/// The section headings, in order; a test checks every one is present.
pub const SECTIONS: [&str; 10] = [
    "## Headline",
    "## Throughput per thread count",
    "## Latency at equal throughput",
    "## CPU and WAL waits",
    "## Write-through lag",
    "## Cache memory",
    "## Maximum-rate search",
    "## Verify",
    "## Machine and settings",
    "## Phases",
];

/// Writes `report.md`, `demo.json` and the charts into `dir`; returns the
/// report's path and its text.
pub fn write_report(report: &DemoReport, dir: &Path) -> Result<(PathBuf, String), ReportError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| ReportError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let drawn = draw_all(report, dir);
    let names: Vec<String> =
        drawn.files.iter().filter_map(|f| f.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
    let text = markdown(report, &names, &drawn.missing);
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, &text).map_err(io(&path))?;
    let json = dir.join("demo.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?).map_err(io(&json))?;
    Ok((path, text))
}

/// Executions-weighted mean of the per-transaction averages: the average
/// response time over all transactions of a run's first iteration.
pub(super) fn mean_latency_us(run: &RunResult) -> Option<f64> {
    let it = run.iterations.first()?;
    let n: u64 = it.transactions.iter().map(|t| t.executed).sum();
    (n > 0).then(|| it.transactions.iter().map(|t| t.executed as f64 * t.latency_us.avg).sum::<f64>() / n as f64)
}

fn num(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}"))
}

fn image(out: &mut String, files: &[String], stem: &str, alt: &str) {
    if files.iter().any(|f| f == &format!("{stem}.png")) {
        let _ = writeln!(out, "\n![{alt}]({stem}.png) ([SVG]({stem}.svg))\n");
    }
}

fn markdown(r: &DemoReport, files: &[String], missing: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# pgtier demo: study 000 (HLR/TATP) on this machine\n");
    let _ = writeln!(out, "Started {} · {:.0} s in all.", r.started_at, r.total_s);
    match (&r.stopped_by, r.finished) {
        (Some(why), _) => {
            let _ = writeln!(
                out,
                "\n> **Partial report**: the run stopped early ({why}). Sections below hold what was measured before.\n"
            );
        }
        (None, false) => {
            let _ = writeln!(out, "\n> **Partial report**: the run did not finish.\n");
        }
        _ => {}
    }
    headline(&mut out, r);
    throughput(&mut out, r, files);
    latency(&mut out, r, files);
    backend(&mut out, r, files);
    lag(&mut out, r, files);
    memory(&mut out, r, files);
    search(&mut out, r, files);
    verify(&mut out, r);
    machine(&mut out, r);
    phases(&mut out, r, missing);
    out
}

/// Each capped run: its label and what the headline calls it.
const CAPPED_SIDES: [(&str, &str); 4] = [
    (BASELINE_CAPPED, "PostgreSQL alone"),
    (DIRECT_CAPPED, "pgtier direct, async commit: the study's setting (TimesTen DurableCommits=0)"),
    (DIRECT_SYNC_CAPPED, "pgtier direct, sync commit: durability equal to PostgreSQL's"),
    (WIRE_CAPPED, "pgtier over the wire"),
];

/// What an acknowledged commit is in a run: its target's own words, and
/// behind the cache, when PostgreSQL has it.
fn acknowledged(run: &RunResult) -> String {
    if run.label.starts_with(BASELINE) {
        format!("in PostgreSQL ({})", run.config.durability)
    } else {
        format!("{}; in PostgreSQL after the write-through lag", run.config.durability)
    }
}

/// A figure with about three significant digits (a ratio may be 0.004 or 20,000).
fn sig(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// "median (min–max)", or the one value.
fn spread(m: &Median) -> String {
    if m.n > 1 { format!("{} ({}–{})", sig(m.median), sig(m.min), sig(m.max)) } else { sig(m.median) }
}

fn kb(bytes: f64) -> String {
    let kb = bytes / 1e3;
    // "-0" says nothing; small values keep a decimal.
    if kb.abs() < 0.05 {
        "0".to_owned()
    } else if kb.abs() < 10.0 {
        format!("{kb:.1}")
    } else {
        format!("{kb:.0}")
    }
}

/// One line on write-through over `lag`.
fn lag_line(lag: &LagFigures) -> String {
    format!(
        "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} transactions; write-through {} (backlog slope {} KB/s against {} KB/s written, {} KB at the end)",
        lag.lag_p50_ms,
        lag.lag_p99_ms,
        lag.lag_max_ms,
        lag.applied_txns,
        lag.verdict(),
        kb(lag.backlog_slope_bytes_per_s),
        kb(lag.written_bytes_per_s),
        kb(lag.backlog_end_bytes as f64)
    )
}

fn headline(out: &mut String, r: &DemoReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[0]);
    let base = r.run(BASELINE_CAPPED);
    let threads = summary::first(base).map_or(0, |i| i.threads);
    let runs = summary::first(base).map_or(0, |i| i.repetitions.len());
    let _ = writeln!(
        out,
        "Every side offered the same rate, {} txn/s, open loop with {threads} thread{}, {runs} runs each. Latency runs from each transaction's intended start, so any delay of the application thread (by the load generator, pgtier's own threads or PostgreSQL) is charged. Median of the runs (min–max; for a ratio, from the least to the most favourable pairing of runs):\n",
        num(r.cap.as_ref().map(|c| c.rate_per_s), 0),
        if threads == 1 { "" } else { "s" },
    );
    let _ = writeln!(
        out,
        "| system | an acknowledged commit is | average response time (µs, all transactions) | vs PostgreSQL alone |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|");
    let pg = summary::latency(base, false);
    for (label, name) in CAPPED_SIDES {
        let Some(m) = summary::latency(r.run(label), false) else { continue };
        let durability = r.run(label).map(acknowledged).unwrap_or_default();
        let vs = if label == BASELINE_CAPPED {
            "1×".to_owned()
        } else {
            pg.as_ref().and_then(|pg| summary::ratio(pg, &m)).map_or_else(
                || "n/a".to_owned(),
                |x| {
                    if x.n > 1 {
                        format!("**{}× lower** ({}–{}×)", sig(x.median), sig(x.min), sig(x.max))
                    } else {
                        format!("**{}× lower**", sig(x.median))
                    }
                },
            )
        };
        let _ = writeln!(out, "| {name} | {durability} | {} | {vs} |", spread(&m));
    }
    if r.rebaselined {
        let _ = writeln!(
            out,
            "\nPostgreSQL alone was measured again at this rate at the very end: pgtier's sustainable throughput set the cap below the rate it first ran at."
        );
    }
    let _ = writeln!(
        out,
        "\nWrite-through at that rate (commit in pgtier to commit in PostgreSQL, per propagated transaction; medians of the runs' p50 and p99, the largest max):\n"
    );
    for (label, name) in CAPPED_SIDES.iter().skip(1) {
        if let Some(lag) = summary::combined(&summary::capped_lags(r, label)) {
            let _ = writeln!(out, "- {name}: {}", lag_line(&lag));
        }
    }
    let _ = writeln!(out, "\nCPU at that rate (% of one core, mean of the runs):\n");
    for (label, name) in CAPPED_SIDES {
        let run = r.run(label);
        let postgres = summary::first(run).and_then(mean_backend).and_then(|b| b.cpu_percent);
        let own =
            summary::pgtier_cpu(run).map_or_else(String::new, |c| format!("; pgtier {c:.0} ({})", components(run)));
        let _ = writeln!(out, "- {name}: PostgreSQL {}{own}", num(postgres, 0));
    }
    saturation_warning(out, r);
    uncapped(out, r);
    match &r.verify {
        Some(v) => {
            let _ = writeln!(
                out,
                "\nVerify after the lag drained: **{}** ({} instances compared, {} differing).",
                if v.clean { "clean" } else { "NOT clean" },
                v.compared,
                v.differing
            );
        }
        None => {
            let _ = writeln!(out, "\nVerify: not reached.");
        }
    }
}

/// pgtier's components of a run, e.g. "application threads 80, write-through 12".
fn components(run: Option<&RunResult>) -> String {
    let Some(label) = run.map(|r| r.label.as_str()) else { return String::new() };
    summary::pgtier_components(label)
        .iter()
        .filter_map(|&c| summary::cpu(run, c).map(|v| format!("{} {v:.0}", c.name())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Open loop near PostgreSQL's capacity measures its queue, not its
/// service: said plainly when its capped average is far above its
/// single-client closed-loop average (the demo lowers the rate until it is
/// not, three tries at most).
fn saturation_warning(out: &mut String, r: &DemoReport) {
    let single = r
        .run(BASELINE)
        .and_then(|b| b.iterations.iter().min_by_key(|i| i.threads))
        .and_then(|it| mean_latency_us(&RunResult { iterations: vec![it.clone()], ..RunResult::default() }));
    if let (Some(capped), Some(single)) = (summary::latency(r.run(BASELINE_CAPPED), false), single)
        && capped.median > SATURATED * single
    {
        let _ = writeln!(
            out,
            "\n> **Warning**: PostgreSQL was saturated at the capped rate: its average ({:.0} µs) is {:.1}x its single-client closed-loop average ({single:.0} µs), so the ratios above are mostly its queueing. Rerun with a lower `--cap-fraction` or on a quieter machine.",
            capped.median,
            capped.median / single
        );
    }
}

/// The closed-loop figures, each pgtier one with whether write-through kept up.
fn uncapped(out: &mut String, r: &DemoReport) {
    let best = |label: &str| {
        r.run(label)
            .and_then(|run| run.iterations.iter().max_by(|a, b| a.mqth_mean.total_cmp(&b.mqth_mean)))
            .map(|i| (i.threads, i.mqth_mean))
    };
    let _ = writeln!(out, "\nUncapped (closed loop, best over the thread counts):\n");
    if let Some((threads, mqth)) = best(BASELINE) {
        let _ = writeln!(
            out,
            "- PostgreSQL alone: {mqth:.0} txn/s ({threads} thread{})",
            if threads == 1 { "" } else { "s" }
        );
    }
    for (label, name) in [(DIRECT, "pgtier direct"), (WIRE, "pgtier over the wire")] {
        let Some((threads, mqth)) = best(label) else { continue };
        let lags = r.lags(label, threads);
        let kept = match (summary::combined(&lags), lags.first()) {
            (Some(lag), Some(run)) if lag.flat => {
                format!("write-through kept up: {}", lag_line(&lag)) + &format!("; drained {:.1} s after", run.drain_s)
            }
            (Some(lag), Some(run)) => format!(
                "write-through did **NOT** keep up: {}; {}",
                lag_line(&lag),
                if run.drained {
                    format!("PostgreSQL had it all {:.1} s after the run", run.drain_s)
                } else {
                    format!("still not drained {:.0} s after the run", run.drain_s)
                }
            ),
            _ => "write-through not sampled".to_owned(),
        };
        let _ = writeln!(
            out,
            "- {name}: {mqth:.0} txn/s ({threads} thread{}); {kept}",
            if threads == 1 { "" } else { "s" }
        );
    }
    if let Some(c) = &r.cap {
        let _ = writeln!(
            out,
            "- pgtier's sustainable throughput (the highest searched rate at which write-through stayed flat): {} txn/s{}",
            num(c.flat_max_per_s, 0),
            if c.flat_max_per_s.is_none() { " (no searched rate)" } else { "" }
        );
    }
}

fn throughput(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[1]);
    let _ = writeln!(
        out,
        "Closed loop (flooding), subscribers 1..={} for every system.\n",
        r.run(BASELINE).map_or(0, |b| b.config.max_subscriber_id)
    );
    let sweeps: Vec<&RunResult> = [BASELINE, DIRECT, WIRE].iter().filter_map(|l| r.run(l)).collect();
    if sweeps.is_empty() {
        let _ = writeln!(out, "No sweep was measured.");
        return;
    }
    let mut threads: Vec<u32> = sweeps.iter().flat_map(|s| s.iterations.iter().map(|i| i.threads)).collect();
    threads.sort_unstable();
    threads.dedup();
    let _ = write!(out, "| threads |");
    for s in &sweeps {
        let _ = write!(out, " {} MQTh | {} avg µs |", s.label, s.label);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---:|{}", "---:|".repeat(sweeps.len() * 2));
    for t in threads {
        let _ = write!(out, "| {t} |");
        for s in &sweeps {
            let it = s.iterations.iter().find(|i| i.threads == t);
            let avg =
                it.and_then(|it| mean_latency_us(&RunResult { iterations: vec![it.clone()], ..RunResult::default() }));
            let _ = write!(out, " {} | {} |", num(it.map(|i| i.mqth_mean), 0), num(avg, 1));
        }
        let _ = writeln!(out);
    }
    if let Some(why) = &r.wire_skipped {
        let _ = writeln!(out, "\nWire runs skipped: {why}.");
    }
    image(out, files, "demo-throughput", "TPS per thread count");
}

fn latency(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[2]);
    let Some(base) = r.run(BASELINE_CAPPED).filter(|b| !b.iterations.is_empty()) else {
        let _ = writeln!(out, "The capped runs were not reached.");
        return;
    };
    let _ = writeln!(
        out,
        "Every side open loop at {} txn/s with {} threads (study 000's figures 4 and 9): the fewest of the sweep with which PostgreSQL alone sustains 1.25 times the rate closed loop. Per transaction, the histograms of all runs merged; latency from the intended start. Ratio = PostgreSQL ÷ pgtier.\n",
        num(base.config.rate_per_s, 0),
        base.iterations[0].threads
    );
    let _ = writeln!(
        out,
        "| run | mean µs of each run (from the intended start) | median | the same from the load generator's wake-up (lateness not charged) | late wakes (> {} µs) / transactions |",
        crate::driver::LATE_WAKE.as_micros()
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|");
    for label in CAPPED {
        let Some(it) = summary::first(r.run(label)) else { continue };
        let means: Vec<String> = it
            .repetitions
            .iter()
            .filter_map(|rep| summary::repetition_mean_us(rep, false))
            .map(|m| format!("{m:.1}"))
            .collect();
        let late: u64 = r.late_wakes.iter().filter(|l| l.label == label).map(|l| l.late).sum();
        let intended: u64 = r.late_wakes.iter().filter(|l| l.label == label).map(|l| l.intended).sum();
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {late} / {intended} |",
            means.join(", "),
            num(summary::latency(r.run(label), false).map(|m| m.median), 1),
            num(summary::latency(r.run(label), true).map(|m| m.median), 1)
        );
    }
    for (label, name) in [
        (DIRECT_CAPPED, "direct, async commit"),
        (DIRECT_SYNC_CAPPED, "direct, sync commit"),
        (WIRE_CAPPED, "over the wire"),
    ] {
        let Some(cand) = r.run(label).filter(|c| !c.iterations.is_empty()) else { continue };
        let cmp = compare(base, cand);
        let Some(point) = cmp.points.first() else { continue };
        let _ = writeln!(
            out,
            "\n**pgtier {name}** (achieved {:.0} txn/s vs PostgreSQL {:.0} txn/s, mean of the runs)\n",
            cand.iterations[0].mqth_mean, base.iterations[0].mqth_mean
        );
        let _ = writeln!(
            out,
            "| transaction | PostgreSQL avg µs | pgtier avg µs | avg ratio | PostgreSQL p90 µs | pgtier p90 µs | p90 ratio |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
        for t in &point.transactions {
            let _ = writeln!(
                out,
                "| {} ({}) | {:.1} | {:.2} | {}× | {:.1} | {:.2} | {}× |",
                t.name,
                short_name(&t.name),
                t.baseline.avg,
                t.candidate.avg,
                num(t.avg_ratio, 1),
                t.baseline.p90,
                t.candidate.p90,
                num(t.p90_ratio, 1)
            );
        }
        let _ = writeln!(
            out,
            "\nGeometric mean over transactions: average {}×, p90 {}×.",
            num(point.geomean(|t| t.avg_ratio), 1),
            num(point.geomean(|t| t.p90_ratio), 1)
        );
        let stem = format!("compare-{BASELINE_CAPPED}-vs-{label}-latency-{}t", point.threads);
        image(out, files, &stem, &format!("latency at the capped rate, {name}"));
    }
}

fn backend(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[3]);
    let _ = writeln!(
        out,
        "PostgreSQL sampled during every measure window (figures 5-6 and 10-11): server CPU from /proc of its processes (% of one core), WAL-wait share = samples of active client backends in IO WALSync/WALWrite or LWLock WALWrite over all active samples (pg_stat_activity every 10 ms). Behind the cache, PostgreSQL's clients are the write-through apply connections. Capped runs: the mean of their runs.\n"
    );
    let _ = writeln!(
        out,
        "| run | threads | rate | PostgreSQL CPU % | WAL-wait share % | sessions in WAL wait | active sessions | commits/s | WAL MB/s |"
    );
    let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---:|---:|---:|");
    let labels = [BASELINE, DIRECT, WIRE, BASELINE_CAPPED, DIRECT_CAPPED, DIRECT_SYNC_CAPPED, WIRE_CAPPED];
    let mut any = false;
    for label in labels {
        let Some(run) = r.run(label) else { continue };
        for it in &run.iterations {
            let Some(b) = mean_backend(it) else { continue };
            any = true;
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {} | {:.1} | {:.3} | {:.3} | {:.0} | {:.2} |",
                it.threads,
                rate_of(run),
                num(b.cpu_percent, 0),
                100.0 * b.wal_wait_share,
                b.wal_wait_sessions,
                b.active_sessions,
                b.commits_per_s,
                b.wal_bytes_per_s / 1e6
            );
        }
    }
    if !any {
        let _ = writeln!(out, "| (no figures sampled) | | | | | | | | |");
    }
    let _ = writeln!(
        out,
        "\nSessions in WAL wait = samples of client backends in those waits ÷ samples: seconds of commit wait per second of wall time, the absolute counterpart of the share (a share stays high when the few remaining sessions are the write-through's, which commit in batches)."
    );
    let _ = writeln!(
        out,
        "\npgtier's own CPU beside PostgreSQL's (% of one core, this process's threads by name from /proc/self/task). In direct mode the application threads run TATP's client code and pgtier's SQL and engine in-process; over the wire the server threads run pgtier and the application threads are only the load generator. PostgreSQL alone: its clients' CPU, for scale.\n"
    );
    let _ = write!(out, "| run | threads | rate | PostgreSQL |");
    for c in Component::ALL {
        let _ = write!(out, " {} |", c.name());
    }
    let _ = writeln!(out, " pgtier in all |");
    let _ = writeln!(out, "|---|---:|---|---:|{}---:|", "---:|".repeat(Component::ALL.len()));
    for label in labels {
        let Some(run) = r.run(label) else { continue };
        for it in &run.iterations {
            let Some(b) = mean_backend(it).filter(|b| !b.process_cpu.is_empty()) else { continue };
            let one = RunResult { label: label.to_owned(), iterations: vec![it.clone()], ..RunResult::default() };
            let _ = write!(out, "| {label} | {} | {} | {} |", it.threads, rate_of(run), num(b.cpu_percent, 0));
            for c in Component::ALL {
                let _ = write!(
                    out,
                    " {} |",
                    summary::cpu(Some(&one), c).map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"))
                );
            }
            let _ = writeln!(
                out,
                " {} |",
                summary::pgtier_cpu(Some(&one)).map_or_else(|| "–".to_owned(), |c| format!("{c:.0}"))
            );
        }
    }
    image(out, files, "demo-backend", "backend CPU and WAL waits");
    image(out, files, "demo-cpu", "pgtier's and PostgreSQL's CPU at the capped rate");
}

fn rate_of(run: &RunResult) -> String {
    run.config.rate_per_s.map_or_else(|| "closed loop".to_owned(), |x| format!("{x:.0}/s"))
}

fn lag(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[4]);
    if r.lag.is_empty() {
        let _ = writeln!(out, "No write-through was sampled (no cache ran).");
        return;
    }
    let _ = writeln!(
        out,
        "Lag = commit in pgtier to commit in PostgreSQL of each propagated transaction (the AWT histogram, read per 1 s window; bucket bounds, about 19 % resolution). Backlog = WAL committed in pgtier and not yet propagated, read every 250 ms. Flat = the backlog's slope over the measure window (Theil-Sen: the median of the slopes between every two samples, so one delayed batch does not decide) is at most {:.0} % of the WAL rate pgtier wrote (what write-through was offered) and no 1 s window had a backlog throughout with nothing applied (stuck, never flat).\n",
        100.0 * FLAT_SLOPE_SHARE
    );
    let _ = writeln!(
        out,
        "| run | threads | # | applied txns | lag p50 ms | lag p99 ms | lag max ms | backlog start / end / max KB | slope KB/s | written KB/s | verdict | drain s |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|");
    for l in &r.run_lag {
        match &l.lag {
            Some(f) => {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} / {} / {} | {} | {} | {} | {:.1}{} |",
                    l.label,
                    l.threads,
                    l.repetition,
                    f.applied_txns,
                    f.lag_p50_ms,
                    f.lag_p99_ms,
                    f.lag_max_ms,
                    kb(f.backlog_start_bytes as f64),
                    kb(f.backlog_end_bytes as f64),
                    kb(f.backlog_max_bytes as f64),
                    kb(f.backlog_slope_bytes_per_s),
                    kb(f.written_bytes_per_s),
                    f.verdict(),
                    l.drain_s,
                    if l.drained { "" } else { " (NOT drained)" }
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | not sampled | | | | | | | | {:.1} |",
                    l.label, l.threads, l.repetition, l.drain_s
                );
            }
        }
    }
    let timeouts: Vec<&super::Drain> = r.drains.iter().filter(|d| !d.drained).collect();
    let _ = writeln!(
        out,
        "\n{} waits for write-through to catch up between runs, {:.0} s in all{}.",
        r.drains.len(),
        r.drains.iter().map(|d| d.seconds).sum::<f64>(),
        if timeouts.is_empty() { String::new() } else { format!("; {} timed out", timeouts.len()) }
    );
    for d in timeouts {
        let _ = writeln!(out, "- NOT drained after {} ({:.0} s)", d.after, d.seconds);
    }
    image(out, files, "demo-lag", "commit-to-PostgreSQL lag per second");
    image(out, files, "demo-backlog", "write-through backlog over the run");
}

fn memory(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[5]);
    let Some(m) = &r.memory else {
        let _ = writeln!(out, "Not measured (the group was not loaded).");
        return;
    };
    if let Some(l) = &r.load {
        let _ = writeln!(
            out,
            "LOAD: {} instances, {} rows in {:.1} s ({:.0} rows/s).\n",
            l.instances,
            l.rows,
            l.seconds,
            l.rows as f64 / l.seconds.max(1e-9)
        );
    }
    let mb = |b: u64| format!("{:.1}", b as f64 / 1e6);
    let _ = writeln!(
        out,
        "The {} rows of {} subscribers, each side measured alike twice. Ratio = PostgreSQL ÷ pgtier.\n",
        m.cache_rows, m.instances
    );
    let _ = writeln!(out, "| measured as | pgtier MB | PostgreSQL MB | ratio |");
    let _ = writeln!(out, "|---|---:|---:|---:|");
    let rows = [
        (
            "allocated: pgtier = what the engine reserved for the tables (slab chunks for row versions, primary hash slots, ordered-index pages, their free space included); PostgreSQL = pages of the tables, their indexes and TOAST, pro-rated to the cached rows",
            m.cache_allocated_bytes,
            m.postgres_bytes_prorated,
        ),
        (
            "the rows themselves: pgtier = row versions and index entries in use (the engine's count); PostgreSQL = tuple data (pg_column_size), no page, index or free space",
            m.cache_bytes,
            m.postgres_tuple_bytes,
        ),
    ];
    for (what, pgtier, postgres) in rows {
        let ratio = if pgtier > 0 { format!("{:.2}×", postgres as f64 / pgtier as f64) } else { "n/a".to_owned() };
        let _ = writeln!(out, "| {what} | {} | {} | {ratio} |", mb(pgtier), mb(postgres));
    }
    let _ = writeln!(
        out,
        "\nPostgreSQL holds all subscribers: the four tables whole take {} MB.",
        mb(m.postgres_bytes_total)
    );
    image(out, files, "demo-memory", "cache memory vs PostgreSQL");
}

fn search(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[6]);
    if r.search.is_empty() {
        let _ = writeln!(out, "Not reached.");
        return;
    }
    let _ = writeln!(
        out,
        "pgtier direct, open loop, offered rate stepped while write-through is watched (study 000: \"the maximum throughput or TPS rate at which the replication lag was not constantly increasing\"). Flat as in the lag section; the highest flat rate that the clients could offer is pgtier's sustainable throughput.\n"
    );
    let _ = writeln!(
        out,
        "| offered txn/s | achieved txn/s | missed | applied txns | lag p50 / p99 / max ms | backlog end KB | slope KB/s | written KB/s | verdict | drain s |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---|---:|---:|---:|---|---:|");
    for s in &r.search {
        let verdict = if s.client_bound {
            "client-bound".to_owned()
        } else {
            s.lag.as_ref().map_or("not sampled", LagFigures::verdict).to_owned()
        };
        let (applied, lag, end, slope, written) = s.lag.as_ref().map_or_else(
            || ("–".to_owned(), "–".to_owned(), "–".to_owned(), "–".to_owned(), "–".to_owned()),
            |l| {
                (
                    l.applied_txns.to_string(),
                    format!("{:.1} / {:.1} / {:.1}", l.lag_p50_ms, l.lag_p99_ms, l.lag_max_ms),
                    kb(l.backlog_end_bytes as f64),
                    kb(l.backlog_slope_bytes_per_s),
                    kb(l.written_bytes_per_s),
                )
            },
        );
        let _ = writeln!(
            out,
            "| {:.0} | {:.0} | {} | {applied} | {lag} | {end} | {slope} | {written} | {verdict} | {:.1} |",
            s.offered_per_s, s.achieved_per_s, s.missed, s.drain_s
        );
    }
    if let Some(c) = &r.cap {
        let _ = writeln!(
            out,
            "\nSustainable throughput (highest flat rate): {} txn/s; PostgreSQL alone peaked at {:.0} txn/s closed loop. **Capped rate: {:.0} txn/s**, {}.",
            num(c.flat_max_per_s, 0),
            c.baseline_peak_per_s,
            c.rate_per_s,
            c.reason
        );
    }
    if let Some(c) = r.cap.as_ref().filter(|c| !c.saturated.is_empty()) {
        let tries: Vec<String> =
            c.saturated.iter().map(|(rate, avg)| format!("{rate:.0} txn/s (PostgreSQL average {avg:.0} µs)")).collect();
        let _ = writeln!(
            out,
            "\nPostgreSQL alone saturated at {} (average over 10x its single-client closed-loop average): those capped runs were discarded and its rate lowered.",
            tries.join(", ")
        );
    }
    image(out, files, "demo-rate-search", "rate search steps");
}

fn verify(out: &mut String, r: &DemoReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[7]);
    let Some(v) = &r.verify else {
        let _ = writeln!(out, "Not reached.");
        return;
    };
    let _ = writeln!(
        out,
        "After the last run, write-through {} and every cached instance was compared with PostgreSQL's (VERIFY CACHE GROUP).\n",
        if v.drained { "drained" } else { "did NOT drain within the timeout" }
    );
    let _ = writeln!(
        out,
        "| compared | differing | PostgreSQL has, not cached | cached, PostgreSQL has not | refused by PostgreSQL (awt_errors) | result |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---|");
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | **{}** |",
        v.compared,
        v.differing,
        v.not_cached,
        v.only_in_cache,
        v.awt_errors,
        if v.clean { "clean" } else { "NOT clean" }
    );
    for d in &v.differences {
        let _ = writeln!(out, "- {d}");
    }
}

fn machine(out: &mut String, r: &DemoReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[8]);
    let m = &r.machine;
    let _ = writeln!(
        out,
        "- machine: {} · {} CPUs ({}) · {:.1} GiB · {} · kernel {}",
        m.hostname, m.cpus, r.cpu_model, m.memory_gib, m.os, m.kernel
    );
    for (k, v) in &r.settings {
        let _ = writeln!(out, "- {k}: {v}");
    }
    let pg: Vec<String> = r.postgres_settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(out, "- PostgreSQL: {}", pg.join(", "));
    if let Some(p) = &r.population {
        let tables: Vec<String> = p.tables.iter().map(|(t, n, _)| format!("{t} {n}")).collect();
        let _ = writeln!(
            out,
            "- population: {} subscribers in {:.1} s ({} COPY streams): {}",
            p.subscribers,
            p.total_s,
            p.streams,
            tables.join(", ")
        );
    }
    let _ = writeln!(out, "\nDurability of every run (what an acknowledged commit is):\n");
    for run in &r.runs {
        let _ = writeln!(out, "- {}: {} · {}", run.label, run.config.target, run.config.durability);
    }
    // Every line any run departs by, with the runs it applies to: the
    // durability differences are per run.
    let mut lines: Vec<(&str, Vec<&str>)> = Vec::new();
    for run in &r.runs {
        for d in &run.config.deviations {
            match lines.iter_mut().find(|(line, _)| line == d) {
                Some((_, runs)) => runs.push(&run.label),
                None => lines.push((d, vec![&run.label])),
            }
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(out, "\nDeviations from the TATP specification:\n");
        for (line, runs) in lines {
            let which = if runs.len() == r.runs.len() { "all runs".to_owned() } else { runs.join(", ") };
            let _ = writeln!(out, "- {line} ({which})");
        }
    }
}

fn phases(out: &mut String, r: &DemoReport, missing: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[9]);
    let _ = writeln!(out, "| phase | seconds |");
    let _ = writeln!(out, "|---|---:|");
    for (p, s) in &r.phases {
        let _ = writeln!(out, "| {p} | {s:.1} |");
    }
    let _ = writeln!(out, "| total | {:.1} |", r.total_s);
    if !missing.is_empty() {
        let _ = writeln!(out, "\nCharts not drawn:\n");
        for m in missing {
            let _ = writeln!(out, "- {m}");
        }
    }
}
