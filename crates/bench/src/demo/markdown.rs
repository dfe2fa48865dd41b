//! The demo's report: one Markdown file (`report.md`) with its charts
//! beside it and the raw figures as `demo.json`. Every section is written
//! even when the run stopped early; a section without data says why.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::charts::draw_all;
use super::{BASELINE, BASELINE_CAPPED, DIRECT, DIRECT_CAPPED, DemoReport, WIRE, WIRE_CAPPED};
use crate::compare::compare;
use crate::report::{ReportError, mean_backend, short_name};
use crate::result::{BackendFigures, RunResult};

pub const REPORT_FILE: &str = "report.md";

/// The section headings, in order; a test checks every one is present.
pub const SECTIONS: [&str; 10] = [
    "## Headline",
    "## Throughput per thread count",
    "## Latency at equal throughput",
    "## Backend CPU and WAL waits",
    "## Propagation lag",
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

fn backend_of(run: Option<&RunResult>) -> Option<BackendFigures> {
    mean_backend(run?.iterations.first()?)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
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
            let _ = writeln!(out, "\n> **Partial report**: the run stopped early ({why}). Sections below hold what was measured before.\n");
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

fn headline(out: &mut String, r: &DemoReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[0]);
    let pg = r.run(BASELINE_CAPPED);
    let (pg_ms, direct_ms, wire_ms) =
        (pg.and_then(mean_latency_us), r.run(DIRECT_CAPPED).and_then(mean_latency_us), r.run(WIRE_CAPPED).and_then(mean_latency_us));
    let rate = r.cap.as_ref().map(|c| c.rate_per_s);
    let _ = writeln!(out, "At the same offered rate ({} txn/s, open loop, latency from each transaction's intended start, or from the load generator's wake-up when that was late):\n", num(rate, 0));
    let _ = writeln!(out, "| | average response time (µs, all transactions) | vs PostgreSQL alone |");
    let _ = writeln!(out, "|---|---:|---:|");
    let _ = writeln!(out, "| PostgreSQL alone | {} | 1× |", num(pg_ms, 1));
    let _ = writeln!(out, "| pgtier direct (in-process) | {} | **{}× lower** |", num(direct_ms, 2), num(ratio(pg_ms, direct_ms), 1));
    let _ = writeln!(out, "| pgtier over the wire | {} | {}× lower |", num(wire_ms, 1), num(ratio(pg_ms, wire_ms), 2));
    let (b, d, w) = (backend_of(pg), backend_of(r.run(DIRECT_CAPPED)), backend_of(r.run(WIRE_CAPPED)));
    let cpu = |f: &Option<BackendFigures>| num(f.as_ref().and_then(|f| f.cpu_percent), 0);
    let wal = |f: &Option<BackendFigures>| num(f.as_ref().map(|f| 100.0 * f.wal_wait_share), 1);
    let waiting = |f: &Option<BackendFigures>| num(f.as_ref().map(|f| f.wal_wait_sessions), 3);
    let _ = writeln!(out, "\nPostgreSQL at that rate:\n");
    let _ = writeln!(out, "| | alone | behind pgtier direct | behind pgtier wire |");
    let _ = writeln!(out, "|---|---:|---:|---:|");
    let _ = writeln!(out, "| server CPU (% of one core) | {} | {} | {} |", cpu(&b), cpu(&d), cpu(&w));
    let _ = writeln!(out, "| share of active backend time in WAL write/fsync waits (%) | {} | {} | {} |", wal(&b), wal(&d), wal(&w));
    let _ = writeln!(out, "| backends in WAL waits on average (s of commit wait per s) | {} | {} | {} |", waiting(&b), waiting(&d), waiting(&w));
    // Open loop near PostgreSQL's capacity measures its queue, not its
    // service: said plainly when its capped average is far above its
    // single-client closed-loop average (the demo lowers the rate until it
    // is not, three tries at most).
    let single = r.run(BASELINE).and_then(|b| b.iterations.iter().min_by_key(|i| i.threads)).and_then(|it| {
        mean_latency_us(&RunResult { iterations: vec![it.clone()], ..RunResult::default() })
    });
    if let (Some(capped), Some(single)) = (pg_ms, single)
        && capped > 10.0 * single
    {
        let _ = writeln!(out, "\n> **Warning**: PostgreSQL was saturated at the capped rate: its average ({capped:.0} µs) is {:.1}x its single-client closed-loop average ({single:.0} µs), so the ratios above are mostly its queueing. Rerun with a lower `--cap-fraction` or on a quieter machine.", capped / single);
    }
    let best = |label: &str| r.run(label).map(|run| run.iterations.iter().map(|i| i.mqth_mean).fold(0.0, f64::max));
    let _ = writeln!(
        out,
        "\nUncapped (closed loop, best over the thread counts): PostgreSQL alone {} txn/s, pgtier direct {} txn/s, pgtier over the wire {} txn/s. \
         PostgreSQL's latency at the capped rate includes open-loop queueing (the rate is {:.0} % of its best closed-loop throughput); its closed-loop latencies per thread count are in the next section.",
        num(best(BASELINE), 0),
        num(best(DIRECT), 0),
        num(best(WIRE), 0),
        r.cap.as_ref().map_or(0.0, |c| 100.0 * c.rate_per_s / c.baseline_peak_per_s.max(1e-9)),
    );
    match &r.verify {
        Some(v) => {
            let _ = writeln!(out, "\nVerify after the lag drained: **{}** ({} instances compared, {} differing).", if v.clean { "clean" } else { "NOT clean" }, v.compared, v.differing);
        }
        None => {
            let _ = writeln!(out, "\nVerify: not reached.");
        }
    }
}

fn throughput(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[1]);
    let _ = writeln!(out, "Closed loop (flooding), subscribers 1..={} for every system.\n", r.run(BASELINE).map_or(0, |b| b.config.max_subscriber_id));
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
            let avg = it.and_then(|it| mean_latency_us(&RunResult { iterations: vec![it.clone()], ..RunResult::default() }));
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
        "Every side open loop at {} txn/s with {} threads (study 000's figures 4 and 9): the fewest of the sweep with which PostgreSQL alone sustains 1.25 times the rate closed loop. Ratio = PostgreSQL ÷ pgtier.\n",
        num(base.config.rate_per_s, 0),
        base.iterations[0].threads
    );
    late_wakes(out, r, BASELINE_CAPPED);
    for (label, name) in [(DIRECT_CAPPED, "direct"), (WIRE_CAPPED, "wire")] {
        let Some(cand) = r.run(label).filter(|c| !c.iterations.is_empty()) else { continue };
        let cmp = compare(base, cand);
        let Some(point) = cmp.points.first() else { continue };
        let _ = writeln!(
            out,
            "**pgtier {name}** (achieved {:.0} txn/s vs PostgreSQL {:.0} txn/s)\n",
            cand.iterations[0].mqth_mean, base.iterations[0].mqth_mean
        );
        let _ = writeln!(out, "| transaction | PostgreSQL avg µs | pgtier avg µs | avg ratio | PostgreSQL p90 µs | pgtier p90 µs | p90 ratio |");
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
        let _ = writeln!(out, "\nGeometric mean over transactions: average {}×, p90 {}×.", num(point.geomean(|t| t.avg_ratio), 1), num(point.geomean(|t| t.p90_ratio), 1));
        late_wakes(out, r, label);
        let stem = format!("compare-{BASELINE_CAPPED}-vs-{label}-latency-{}t", point.threads);
        image(out, files, &stem, &format!("latency at the capped rate, {name}"));
    }
}

/// How often the load generator of capped run `run` woke late (not charged).
fn late_wakes(out: &mut String, r: &DemoReport, run: &str) {
    if let Some((_, late, max_us)) = r.late_wakes.iter().find(|(l, _, _)| l == run) {
        let _ = writeln!(
            out,
            "\n{run}: the load generator woke more than {} µs late {late} times (at most {:.1} ms); not charged to the system measured (crates/bench README).\n",
            crate::driver::LATE_WAKE.as_micros(),
            *max_us as f64 / 1000.0
        );
    }
}

fn backend(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[3]);
    let _ = writeln!(out, "PostgreSQL sampled during every measure window (figures 5-6 and 10-11): server CPU from /proc of its processes (% of one core), WAL-wait share = samples of active client backends in IO WALSync/WALWrite or LWLock WALWrite over all active samples (pg_stat_activity every 10 ms). Behind the cache, PostgreSQL's clients are the write-through apply connections.\n");
    let _ = writeln!(out, "| run | threads | rate | PostgreSQL CPU % | WAL-wait share % | sessions in WAL wait | active sessions | commits/s | WAL MB/s |");
    let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---:|---:|---:|");
    let mut any = false;
    for label in [BASELINE, DIRECT, WIRE, BASELINE_CAPPED, DIRECT_CAPPED, WIRE_CAPPED] {
        let Some(run) = r.run(label) else { continue };
        for it in &run.iterations {
            let Some(b) = mean_backend(it) else { continue };
            any = true;
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {} | {:.1} | {:.3} | {:.3} | {:.0} | {:.2} |",
                it.threads,
                run.config.rate_per_s.map_or_else(|| "closed loop".to_owned(), |x| format!("{x:.0}/s")),
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
    let _ = writeln!(out, "\nSessions in WAL wait = samples of client backends in those waits ÷ samples: seconds of commit wait per second of wall time, the absolute counterpart of the share (a share stays high when the few remaining sessions are the write-through's, which commit in batches).");
    image(out, files, "demo-backend", "backend CPU and WAL waits");
}

fn lag(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[4]);
    if r.lag.is_empty() {
        let _ = writeln!(out, "No lag was sampled (no cache ran).");
        return;
    }
    let mut phases: Vec<&str> = Vec::new();
    for l in &r.lag {
        if !phases.contains(&l.phase.as_str()) {
            phases.push(&l.phase);
        }
    }
    let _ = writeln!(out, "| phase | samples | lag max ms | lag mean ms | backlog max KB |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for p in phases {
        let s: Vec<_> = r.lag.iter().filter(|l| l.phase == p).collect();
        let max = s.iter().map(|l| l.lag_ms).fold(0.0, f64::max);
        let mean = s.iter().map(|l| l.lag_ms).sum::<f64>() / s.len().max(1) as f64;
        let backlog = s.iter().map(|l| l.backlog_bytes).max().unwrap_or(0);
        let _ = writeln!(out, "| {p} | {} | {max:.1} | {mean:.1} | {:.0} |", s.len(), backlog as f64 / 1e3);
    }
    let _ = writeln!(out, "\nWaits for write-through to catch up between runs:\n");
    let _ = writeln!(out, "| after | seconds | drained |");
    let _ = writeln!(out, "|---|---:|---|");
    for d in &r.drains {
        let _ = writeln!(out, "| {} | {:.1} | {} |", d.after, d.seconds, if d.drained { "yes" } else { "NO (timed out)" });
    }
    image(out, files, "demo-lag", "propagation lag over the run");
}

fn memory(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[5]);
    let Some(m) = &r.memory else {
        let _ = writeln!(out, "Not measured (the group was not loaded).");
        return;
    };
    if let Some(l) = &r.load {
        let _ = writeln!(out, "LOAD: {} instances, {} rows in {:.1} s ({:.0} rows/s).\n", l.instances, l.rows, l.seconds, l.rows as f64 / l.seconds.max(1e-9));
    }
    let mb = |b: u64| b as f64 / 1e6;
    let _ = writeln!(out, "| | MB | vs cache |");
    let _ = writeln!(out, "|---|---:|---:|");
    let _ = writeln!(out, "| pgtier cache, {} rows of {} subscribers | {:.1} | 1× |", m.cache_rows, m.instances, mb(m.cache_bytes));
    let vs = |b: u64| if m.cache_bytes > 0 { format!("{:.2}×", b as f64 / m.cache_bytes as f64) } else { "n/a".into() };
    let _ = writeln!(out, "| PostgreSQL, same rows, heap + indexes (pro-rated) | {:.1} | {} |", mb(m.postgres_bytes_prorated), vs(m.postgres_bytes_prorated));
    let _ = writeln!(out, "| PostgreSQL, same rows, tuple data only | {:.1} | {} |", mb(m.postgres_tuple_bytes), vs(m.postgres_tuple_bytes));
    let _ = writeln!(out, "| PostgreSQL, all four tables (every subscriber) | {:.1} | {} |", mb(m.postgres_bytes_total), vs(m.postgres_bytes_total));
    image(out, files, "demo-memory", "cache memory vs PostgreSQL");
}

fn search(out: &mut String, r: &DemoReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[6]);
    if r.search.is_empty() {
        let _ = writeln!(out, "Not reached.");
        return;
    }
    let _ = writeln!(out, "pgtier direct, open loop, offered rate stepped while the AWT lag is watched (study 000: \"the maximum throughput or TPS rate at which the replication lag was not constantly increasing\").\n");
    let _ = writeln!(out, "| offered txn/s | achieved txn/s | missed | lag start ms | lag end ms | lag max ms | slope ms/s | verdict | drain s |");
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for s in &r.search {
        let verdict = if s.client_bound { "client-bound" } else if s.flat { "flat" } else { "lag grows" };
        let _ = writeln!(
            out,
            "| {:.0} | {:.0} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {verdict} | {:.1} |",
            s.offered_per_s, s.achieved_per_s, s.missed, s.lag_start_ms, s.lag_end_ms, s.lag_max_ms, s.lag_slope_ms_per_s, s.drain_s
        );
    }
    if let Some(c) = &r.cap {
        let _ = writeln!(
            out,
            "\nHighest flat rate: {} txn/s; PostgreSQL alone peaked at {:.0} txn/s closed loop. **Capped rate: {:.0} txn/s**, {}.",
            num(c.flat_max_per_s, 0),
            c.baseline_peak_per_s,
            c.rate_per_s,
            c.reason
        );
    }
    if let Some(c) = r.cap.as_ref().filter(|c| !c.saturated.is_empty()) {
        let tries: Vec<String> = c.saturated.iter().map(|(rate, avg)| format!("{rate:.0} txn/s (PostgreSQL average {avg:.0} µs)")).collect();
        let _ = writeln!(out, "\nPostgreSQL alone saturated at {} (average over 10x its single-client closed-loop average): those capped runs were discarded and its rate lowered.", tries.join(", "));
    }
    image(out, files, "demo-rate-search", "rate search steps");
}

fn verify(out: &mut String, r: &DemoReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[7]);
    let Some(v) = &r.verify else {
        let _ = writeln!(out, "Not reached.");
        return;
    };
    let _ = writeln!(out, "After the last run, write-through {} and every cached instance was compared with PostgreSQL's (VERIFY CACHE GROUP).\n", if v.drained { "drained" } else { "did NOT drain within the timeout" });
    let _ = writeln!(out, "| compared | differing | PostgreSQL has, not cached | cached, PostgreSQL has not | refused by PostgreSQL (awt_errors) | result |");
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---|");
    let _ = writeln!(out, "| {} | {} | {} | {} | {} | **{}** |", v.compared, v.differing, v.not_cached, v.only_in_cache, v.awt_errors, if v.clean { "clean" } else { "NOT clean" });
    for d in &v.differences {
        let _ = writeln!(out, "- {d}");
    }
}

fn machine(out: &mut String, r: &DemoReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[8]);
    let m = &r.machine;
    let _ = writeln!(out, "- machine: {} · {} CPUs ({}) · {:.1} GiB · {} · kernel {}", m.hostname, m.cpus, r.cpu_model, m.memory_gib, m.os, m.kernel);
    for (k, v) in &r.settings {
        let _ = writeln!(out, "- {k}: {v}");
    }
    let pg: Vec<String> = r.postgres_settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(out, "- PostgreSQL: {}", pg.join(", "));
    if let Some(p) = &r.population {
        let tables: Vec<String> = p.tables.iter().map(|(t, n, _)| format!("{t} {n}")).collect();
        let _ = writeln!(out, "- population: {} subscribers in {:.1} s ({} COPY streams): {}", p.subscribers, p.total_s, p.streams, tables.join(", "));
    }
    for label in [BASELINE, DIRECT, WIRE] {
        if let Some(run) = r.run(label) {
            let _ = writeln!(out, "- {label}: {} · durability {}", run.config.target, run.config.durability);
        }
    }
    if let Some(run) = r.run(BASELINE) {
        let _ = writeln!(out, "\nDeviations from the TATP specification (all runs):\n");
        for d in &run.config.deviations {
            let _ = writeln!(out, "- {d}");
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
