//! The demo's figures, PNG and SVG each, drawn with the kit's chart code:
//! throughput per thread count, latency bars at the capped rate (study
//! 000's figures 4 and 9, by [`crate::compare`]), backend CPU and WAL waits
//! (figures 5-6, 10-11), pgtier's CPU beside PostgreSQL's, write-through
//! lag and backlog, memory, the rate search.

use std::path::{Path, PathBuf};

use super::summary;
use super::{
    BASELINE, BASELINE_CAPPED, CAPPED, DIRECT, DIRECT_CAPPED, DIRECT_SYNC_CAPPED, DemoReport, FLAT_SLOPE_SHARE, WIRE,
    WIRE_CAPPED,
};
use crate::chart::{
    BarFigure, BarPanel, ChartError, LineFigure, LineSpec, MUTED, TimeSeries, YScale, axis_title, draw_time_series,
    format_number, series_color, usable, write_figure,
};
use crate::compare::{compare, draw_comparison_chart};
use crate::cpu::Component;
use crate::report::mean_backend;
use crate::result::RunResult;

/// (sweep label, capped label, legend name) of the systems, in colour
/// order; direct's sync commit mode has a capped run only.
const SIDES: [(&str, &str, &str); 4] = [
    (BASELINE, BASELINE_CAPPED, "PostgreSQL alone"),
    (DIRECT, DIRECT_CAPPED, "pgtier direct (in-process; async commit when capped)"),
    ("", DIRECT_SYNC_CAPPED, "pgtier direct, sync commit"),
    (WIRE, WIRE_CAPPED, "pgtier over the wire"),
];

/// A chart drawn (files), or why it could not be.
pub(super) struct Drawn {
    pub files: Vec<PathBuf>,
    pub missing: Vec<String>,
}

/// Draws every chart the report has data for into `dir`.
pub(super) fn draw_all(report: &DemoReport, dir: &Path) -> Drawn {
    let mut drawn = Drawn { files: Vec::new(), missing: Vec::new() };
    let mut keep = |what: &str, result: Result<Vec<PathBuf>, ChartError>| match result {
        Ok(files) => drawn.files.extend(files),
        Err(e) => drawn.missing.push(format!("{what}: {e}")),
    };
    keep("throughput per thread count", throughput(report, dir));
    for (capped, name) in
        [(DIRECT_CAPPED, "direct, async"), (DIRECT_SYNC_CAPPED, "direct, sync"), (WIRE_CAPPED, "wire")]
    {
        if let (Some(b), Some(c)) = (complete(report, BASELINE_CAPPED), complete(report, capped)) {
            keep(&format!("latency at the capped rate ({name})"), draw_comparison_chart(&compare(b, c), dir));
        }
    }
    keep("backend CPU and WAL waits", backend(report, dir));
    keep("CPU at the capped rate", cpu(report, dir));
    keep("write-through lag", lag(report, dir));
    keep("write-through backlog", backlog(report, dir));
    keep("memory", memory(report, dir));
    keep("rate search", search(report, dir));
    drawn
}

fn complete<'a>(report: &'a DemoReport, label: &str) -> Option<&'a RunResult> {
    report.run(label).filter(|r| !r.iterations.is_empty())
}

fn throughput(report: &DemoReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let mut threads: Vec<u32> =
        SIDES.iter().filter_map(|s| report.run(s.0)).flat_map(|r| r.iterations.iter().map(|i| i.threads)).collect();
    threads.sort_unstable();
    threads.dedup();
    if threads.is_empty() {
        return Err(ChartError::NoData("no sweep was measured".into()));
    }
    let series: Vec<LineSpec> = SIDES
        .iter()
        .enumerate()
        .filter(|(_, (label, _, _))| !label.is_empty())
        .filter_map(|(i, (label, _, name))| {
            let run = report.run(label)?;
            let values: Vec<Option<f64>> = threads
                .iter()
                .map(|t| run.iterations.iter().find(|it| it.threads == *t).and_then(|it| usable(it.mqth_mean, false)))
                .collect();
            Some(LineSpec {
                name: (*name).to_owned(),
                color: series_color(i),
                emphasis: false,
                dodge: 0.0,
                point_labels: values.iter().map(|v| v.map(format_number)).collect(),
                values,
                spread: Vec::new(),
            })
        })
        .collect();
    let scale = YScale::choose(series.iter().flat_map(|s| s.values.iter().flatten().copied()), 20.0);
    let figure = LineFigure {
        title: "TATP throughput per thread count (closed loop)".into(),
        subtitle: subtitle(report),
        x_desc: "threads".into(),
        x_labels: threads.iter().map(u32::to_string).collect(),
        y_desc: axis_title("MQTh (successful transactions/s)", "", scale),
        y_scale: scale,
        y_from_zero: !scale.is_log(),
        series,
        reference_y: None,
        legend_title: None,
        footnotes: vec![(
            "Uncapped: each thread runs its next transaction as soon as the last one ends.".into(),
            MUTED,
        )],
    };
    write_figure(&figure, dir, "demo-throughput")
}

/// Backend CPU and WAL-wait share, PostgreSQL alone vs behind the cache, at
/// every sweep point and at the capped rate.
fn backend(report: &DemoReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let mut groups: Vec<String> = Vec::new();
    let mut points: Vec<(Option<u32>, String)> = Vec::new();
    if let Some(run) = report.run(BASELINE) {
        for it in &run.iterations {
            points.push((Some(it.threads), format!("{} threads", it.threads)));
        }
    }
    points.push((None, "capped rate".into()));
    let mut cpu = Vec::new();
    let mut wal = Vec::new();
    let mut waiting = Vec::new();
    for (sweep, capped, _) in SIDES {
        let figures: Vec<Option<crate::result::BackendFigures>> = points
            .iter()
            .map(|(threads, _)| {
                let run = report.run(if threads.is_some() { sweep } else { capped })?;
                let it = run.iterations.iter().find(|it| threads.is_none_or(|t| it.threads == t))?;
                mean_backend(it)
            })
            .collect();
        cpu.push(figures.iter().map(|f| f.as_ref().and_then(|f| f.cpu_percent)).collect::<Vec<_>>());
        wal.push(figures.iter().map(|f| f.as_ref().map(|f| 100.0 * f.wal_wait_share)).collect::<Vec<_>>());
        waiting.push(figures.iter().map(|f| f.as_ref().map(|f| f.wal_wait_sessions)).collect::<Vec<_>>());
    }
    groups.extend(points.iter().map(|p| p.1.clone()));
    if cpu.iter().chain(&wal).flatten().all(Option::is_none) {
        return Err(ChartError::NoData("no backend figures were sampled".into()));
    }
    let panel = |heading: &str, y_desc: &str, unit: &str, values: Vec<Vec<Option<f64>>>| BarPanel {
        heading: heading.into(),
        y_desc: y_desc.into(),
        y_unit: unit.into(),
        values,
        group_notes: Vec::new(),
    };
    let figure = BarFigure {
        title: "PostgreSQL's CPU and WAL waits: alone vs behind the cache".into(),
        subtitle: subtitle(report),
        series: SIDES.iter().enumerate().map(|(i, s)| (s.2.to_owned(), series_color(i))).collect(),
        groups,
        panels: vec![
            panel("PostgreSQL server CPU (% of one core)", "CPU", "%", cpu),
            panel("Share of active backend time waiting on WAL write/fsync", "WAL-wait share", "%", wal),
            panel("Backends waiting on WAL write/fsync, on average (s of commit wait per s)", "backends", "", waiting),
        ],
        footnotes: vec![(
            "Behind the cache, PostgreSQL's work is write-through applying the cache's commits in batches. \
             Wait share: pg_stat_activity sampled every 10 ms (IO WALSync/WALWrite, LWLock WALWrite); CPU: /proc of the server processes."
                .into(),
            MUTED,
        )],
    };
    write_figure(&figure, dir, "demo-backend")
}

/// PostgreSQL's CPU and pgtier's per component, at the capped rate.
fn cpu(report: &DemoReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let runs: Vec<&str> =
        CAPPED.iter().copied().filter(|l| report.run(l).is_some_and(|r| !r.iterations.is_empty())).collect();
    let parts =
        [Component::Clients, Component::Server, Component::Engine, Component::WriteThrough, Component::CacheBackground];
    let mut values: Vec<Vec<Option<f64>>> = vec![
        runs.iter().map(|l| summary::first(report.run(l)).and_then(mean_backend).and_then(|b| b.cpu_percent)).collect(),
    ];
    for c in parts {
        values.push(runs.iter().map(|l| summary::cpu(report.run(l), c)).collect());
    }
    if values.iter().flatten().all(Option::is_none) {
        return Err(ChartError::NoData("no CPU figures were sampled at the capped rate".into()));
    }
    let notes = runs.iter().map(|l| summary::pgtier_cpu(report.run(l)).map(|c| format!("pgtier {c:.0} %"))).collect();
    let mut series = vec![("PostgreSQL".to_owned(), series_color(0))];
    series.extend(parts.iter().enumerate().map(|(i, c)| (c.name().to_owned(), series_color(i + 1))));
    let figure = BarFigure {
        title: "CPU at the capped rate: PostgreSQL's server, and this process's threads by component".into(),
        subtitle: subtitle(report),
        series,
        groups: runs.iter().map(|l| (*l).to_owned()).collect(),
        panels: vec![BarPanel { heading: "CPU (% of one core), mean of the runs".into(), y_desc: "CPU".into(), y_unit: "%".into(), values, group_notes: notes }],
        footnotes: vec![(
            "Direct mode: the application threads run TATP and pgtier's SQL and engine in-process. Wire: the server threads run pgtier; the application threads are the load generator. Above each group: pgtier's own CPU."
                .into(),
            MUTED,
        )],
    };
    write_figure(&figure, dir, "demo-cpu")
}

/// Commit-to-PostgreSQL lag per one-second window.
fn lag(report: &DemoReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let windows = &report.lag_windows;
    if windows.is_empty() {
        return Err(ChartError::NoData("no write-through window was sampled".into()));
    }
    let chart = TimeSeries {
        title: "Write-through lag per second: commit in pgtier to commit in PostgreSQL".into(),
        subtitle: vec![
            "Of the transactions applied in each 1 s window while a cache ran (the AWT lag histogram)".into(),
        ],
        x_labels: windows.iter().map(|w| format!("{:.0}", w.to_s)).collect(),
        label_every: (windows.len() / 12).max(1),
        y_desc: "lag (ms)".into(),
        series: vec![
            ("p50", windows.iter().map(|w| w.lag_p50_ms).collect()),
            ("p99", windows.iter().map(|w| w.lag_p99_ms).collect()),
            ("max", windows.iter().map(|w| w.lag_max_ms).collect()),
        ],
        reference_y: None,
        log_when_wide: true,
    };
    draw_time_series(&chart, dir, "demo-lag")
}

/// WAL committed in pgtier and not yet in PostgreSQL, every 250 ms.
fn backlog(report: &DemoReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    if report.lag.is_empty() {
        return Err(ChartError::NoData("no write-through backlog was sampled".into()));
    }
    let chart = TimeSeries {
        title: "Write-through backlog over the run".into(),
        subtitle: vec![
            "WAL committed in pgtier and not yet propagated to PostgreSQL, sampled every 250 ms while a cache ran"
                .into(),
        ],
        x_labels: report.lag.iter().map(|l| format!("{:.0}", l.t_s)).collect(),
        label_every: (report.lag.len() / 12).max(1),
        y_desc: "backlog (KB)".into(),
        series: vec![("backlog", report.lag.iter().map(|l| l.backlog_bytes as f64 / 1e3).collect())],
        reference_y: None,
        log_when_wide: true,
    };
    draw_time_series(&chart, dir, "demo-backlog")
}

fn memory(report: &DemoReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let m = report.memory.as_ref().ok_or_else(|| ChartError::NoData("no memory figures".into()))?;
    let mb = |b: u64| Some(b as f64 / 1e6);
    let figure = BarFigure {
        title: format!("Memory for the {} cached subscribers' {} rows", m.instances, m.cache_rows),
        subtitle: subtitle(report),
        series: vec![("pgtier".into(), series_color(1)), ("PostgreSQL".into(), series_color(0))],
        groups: vec!["allocated".into(), "the rows themselves".into()],
        panels: vec![BarPanel {
            heading: "Size of the same rows, each side measured alike".into(),
            y_desc: "size".into(),
            y_unit: "MB".into(),
            values: vec![
                vec![mb(m.cache_allocated_bytes), mb(m.cache_bytes)],
                vec![mb(m.postgres_bytes_prorated), mb(m.postgres_tuple_bytes)],
            ],
            group_notes: vec![None, None],
        }],
        footnotes: vec![(
            format!(
                "Allocated: what pgtier's engine reserved for the tables (row slab chunks, hash slots, index pages, free space included) vs PostgreSQL's table, index and TOAST pages pro-rated to the cached rows. \
                 The rows themselves: pgtier's row versions and index entries in use vs PostgreSQL's tuple data. PostgreSQL holds all {} subscribers ({:.0} MB).",
                report.population.as_ref().map_or(0, |p| p.subscribers),
                m.postgres_bytes_total as f64 / 1e6
            ),
            MUTED,
        )],
    };
    write_figure(&figure, dir, "demo-memory")
}

fn search(report: &DemoReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    if report.search.is_empty() {
        return Err(ChartError::NoData("no rate-search step was measured".into()));
    }
    let groups: Vec<String> =
        report.search.iter().map(|s| format!("{} offered", format_number(s.offered_per_s))).collect();
    let notes = report
        .search
        .iter()
        .map(|s| {
            Some(if s.client_bound {
                "client-bound".to_owned()
            } else {
                s.lag.as_ref().map_or("not sampled", |l| l.verdict()).to_owned()
            })
        })
        .collect();
    let growth = |s: &super::SearchStep| {
        s.lag
            .as_ref()
            .filter(|l| l.written_bytes_per_s > 0.0)
            .map(|l| 100.0 * l.backlog_slope_bytes_per_s / l.written_bytes_per_s)
    };
    let figure = BarFigure {
        title: "Rate-cap search: offered rate vs write-through (pgtier direct, open loop)".into(),
        subtitle: subtitle(report),
        series: vec![
            ("achieved txn/s".into(), series_color(1)),
            ("lag p99 (ms)".into(), series_color(3)),
            ("backlog growth (% of WAL written)".into(), series_color(4)),
        ],
        groups,
        panels: vec![
            BarPanel {
                heading: "Achieved throughput".into(),
                y_desc: "MQTh".into(),
                y_unit: "txn/s".into(),
                values: vec![
                    report.search.iter().map(|s| usable(s.achieved_per_s, false)).collect(),
                    Vec::new(),
                    Vec::new(),
                ],
                group_notes: notes,
            },
            BarPanel {
                heading: "Commit-to-PostgreSQL lag p99 of the transactions applied during the step".into(),
                y_desc: "lag".into(),
                y_unit: "ms".into(),
                values: vec![
                    Vec::new(),
                    report.search.iter().map(|s| s.lag.as_ref().map(|l| l.lag_p99_ms)).collect(),
                    Vec::new(),
                ],
                group_notes: Vec::new(),
            },
            BarPanel {
                heading: format!(
                    "Backlog slope as % of the WAL rate written (flat: at most {:.0} %, nothing stuck)",
                    100.0 * FLAT_SLOPE_SHARE
                ),
                y_desc: "growth".into(),
                y_unit: "%".into(),
                values: vec![Vec::new(), Vec::new(), report.search.iter().map(growth).collect()],
                group_notes: Vec::new(),
            },
        ],
        footnotes: vec![(
            report.cap.as_ref().map_or_else(
                || "No capped rate was chosen.".to_owned(),
                |c| format!("Capped rate: {} txn/s, {}.", format_number(c.rate_per_s), c.reason),
            ),
            MUTED,
        )],
    };
    write_figure(&figure, dir, "demo-rate-search")
}

fn subtitle(report: &DemoReport) -> Vec<String> {
    let population = report.population.as_ref().map_or(0, |p| p.subscribers);
    let cached = report.memory.as_ref().map_or(0, |m| m.instances);
    vec![format!(
        "TATP · {population} subscribers in PostgreSQL, {cached} cached · {} CPUs ({}) · {}",
        report.machine.cpus, report.cpu_model, report.started_at
    )]
}
