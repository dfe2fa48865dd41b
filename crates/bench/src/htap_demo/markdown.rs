//! The HTAP demo's report: `report.md` with its charts (PNG and SVG)
//! beside it and the raw figures as `htap.json`. Every section is written
//! even when the run stopped early; a section without data says so.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{HtapReport, STUDY_004_NOPM_KEPT, STUDY_004_QUERY_CHANGE};
use crate::ch::{self, PhaseKind};
use crate::chart::{BarFigure, BarPanel, ChartError, MUTED, series_color, write_figure};
use crate::report::ReportError;
use crate::tpch::output::{md, ms};
use crate::tpch::{self, SideKind, SideResult, Status};

pub const REPORT_FILE: &str = "report.md";

/// The section headings, in order; a test checks every one is present.
pub const SECTIONS: [&str; 7] = [
    "## TPC-H: PostgreSQL, pgtier row path, pgtier columnar",
    "## Compression of the columnar copy",
    "## Freshness: analytic queries right after commits",
    "## CH-benCHmark: OLTP and analytics at once",
    "## Answers compared with PostgreSQL's",
    "## Deviations from study 004",
    "## Machine, settings, phases",
];

/// Writes `report.md`, `htap.json` and the charts into `dir`; returns the
/// report's path and its text.
pub fn write_report(report: &HtapReport, dir: &Path) -> Result<(PathBuf, String), ReportError> {
    // The charts are drawn first: the report names the ones that failed.
    let charts = vec![("TPC-H times", tpch_chart(report, dir)), ("CH-benCHmark", ch_chart(report, dir))];
    crate::report::write_demo_report(
        dir,
        charts,
        |files, missing| markdown(report, files, missing),
        REPORT_FILE,
        "htap.json",
        report,
    )
}

fn image(out: &mut String, files: &[String], stem: &str, alt: &str) {
    if files.iter().any(|f| f == &format!("{stem}.png")) {
        let _ = writeln!(out, "\n![{alt}]({stem}.png) ([SVG]({stem}.svg))\n");
    }
}

fn median(s: Option<&SideResult>) -> Option<f64> {
    s?.timing.as_ref().map(|t| t.median_ms)
}

fn cell(s: Option<&SideResult>) -> String {
    match s {
        None => "-".into(),
        Some(s) => match &s.timing {
            Some(t) => ms(t.median_ms),
            None => md(&s.status.describe()),
        },
    }
}

pub(crate) fn markdown(r: &HtapReport, files: &[String], missing: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# pgtier demo htap: study 004 (analytics beside OLTP) on this machine\n");
    let _ = writeln!(out, "Started {} · {:.0} s in all.", r.started_at, r.total_s);
    if r.executor.present == Some(false) {
        let _ = writeln!(
            out,
            "\n> **THIS BUILD OF PGTIER HAS NO ANALYTIC EXECUTOR** (it was built without the cargo feature \
             `analytics`): every \"pgtier columnar\" figure below is the row path's. EXPLAIN said: `{}`. Run \
             `scripts/demo-htap.sh`, which builds it with the feature.",
            r.executor.evidence
        );
    }
    if let Some(why) = &r.stopped_by {
        let _ = writeln!(out, "\n**Stopped early: {why}.** The sections below hold what was measured before.");
    }
    headline(&mut out, r);
    tpch_section(&mut out, r, files);
    compression_section(&mut out, r);
    freshness_section(&mut out, r);
    ch_section(&mut out, r, files);
    answers_section(&mut out, r);
    let _ = writeln!(out, "\n{}\n", SECTIONS[5]);
    for d in &r.deviations {
        let _ = writeln!(out, "- {d}");
    }
    machine_section(&mut out, r, missing);
    out
}

/// The figures study 004 reports, side by side, first.
fn headline(out: &mut String, r: &HtapReport) {
    let _ = writeln!(out, "\n| figure | this run | study 004 |\n|---|---|---|");
    if let Some(t) = &r.tpch {
        let (pg, col) = (t.total(SideKind::Postgresql), t.total(SideKind::Columnar));
        let row = t.total(SideKind::Embedded);
        let speedup = |other: tpch::Total| {
            if other.answered == other.of && pg.answered == pg.of && other.median_ms > 0.0 {
                format!("{:.2}x", pg.median_ms / other.median_ms)
            } else {
                format!("- ({} of {} answered)", other.answered, other.of)
            }
        };
        let (on, of) = t.columnar_paths();
        let _ = writeln!(
            out,
            "| TPC-H SF {}: PostgreSQL's {}-query total / pgtier columnar's | {} (columnar path on {on} of {of}; row \
             path: {}) | - |",
            t.scale,
            t.queries.len(),
            speedup(col),
            speedup(row)
        );
    }
    if let Some(c) = r.tpch.as_ref().and_then(|t| t.compression.as_ref()) {
        let lineitem = c.tables.iter().find(|t| t.table == "lineitem").map_or(0.0, |t| t.ratio);
        let _ = writeln!(
            out,
            "| compression, all tables / lineitem | {:.2}x / {lineitem:.2}x | {:.2}x / {:.2}x |",
            c.ratio, c.study_004_overall, c.study_004_lineitem
        );
    }
    if let Some(f) = &r.freshness {
        let _ = writeln!(
            out,
            "| stale analytic answers | {} of {} ({}) | none |",
            f.stale,
            f.queries,
            if f.columnar() { "columnar path" } else { "ROW PATH: proves nothing about the copy" }
        );
    }
    if let Some(s) = r.ch.as_ref().and_then(|c| c.sides.iter().find(|s| s.side == SideKind::Embedded)) {
        let _ = writeln!(
            out,
            "| CH-benCHmark, pgtier: NOPM kept / analytic time change | {} / {} | {:.0}-{:.0} % / +{:.0}-{:.0} % |",
            pct(s.nopm_kept_pct()),
            signed(s.analytic_totals().change_pct()),
            STUDY_004_NOPM_KEPT.0,
            STUDY_004_NOPM_KEPT.1,
            STUDY_004_QUERY_CHANGE.0,
            STUDY_004_QUERY_CHANGE.1
        );
    }
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.0} %"))
}

fn signed(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:+.0} %"))
}

fn tpch_section(out: &mut String, r: &HtapReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[0]);
    let Some(t) = &r.tpch else {
        let _ = writeln!(out, "Not measured.");
        return;
    };
    let duck = r.duckdb.as_ref().filter(|d| d.skipped.is_none());
    let _ = writeln!(
        out,
        "SF {}, median of {} runs after a warm-up, ms, client-side. pgtier row path: the embedded engine with \
         `pgtier.analytics = off`; pgtier columnar: the same engine and tables with `on` (path: what its EXPLAIN \
         names).{}\n",
        t.scale,
        t.runs,
        match (&r.duckdb, duck) {
            (_, Some(d)) => format!(
                " DuckDB {} ({} threads; pgtier's analytic executor: {} worker threads): a reference only, the same \
                 rows exported from PostgreSQL, answers not compared, row counts are (one unlike PostgreSQL's is \
                 shown beside the time).",
                d.version.as_deref().unwrap_or("?"),
                d.threads.as_deref().unwrap_or("?"),
                d.pgtier_threads.map_or_else(|| "?".to_owned(), |t| t.to_string())
            ),
            (Some(d), None) => format!(" DuckDB: skipped ({}).", d.skipped.as_deref().unwrap_or("")),
            (None, None) => String::new(),
        }
    );
    let duck_col = if duck.is_some() { " DuckDB (reference) |" } else { "" };
    let _ = writeln!(
        out,
        "| query | PostgreSQL | pgtier row path | pgtier columnar | PostgreSQL / columnar | columnar path |{duck_col}"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---|{}", if duck.is_some() { "---:|" } else { "" });
    for q in &t.queries {
        let col = q.side(SideKind::Columnar);
        let ratio = match (median(q.side(SideKind::Postgresql)), median(col)) {
            (Some(p), Some(c)) if c > 0.0 => format!("{:.1}x", p / c),
            _ => "-".into(),
        };
        let path = col.and_then(|s| s.path.as_deref()).unwrap_or("-");
        let _ = write!(
            out,
            "| Q{} | {} | {} | {} | {ratio} | {} |",
            q.query,
            cell(q.side(SideKind::Postgresql)),
            cell(q.side(SideKind::Embedded)),
            cell(col),
            md(path)
        );
        if let Some(d) = duck {
            let pg_rows = q.side(SideKind::Postgresql).and_then(|s| s.rows);
            let v = d.query(q.query).map_or("-".into(), |dq| match (&dq.timing, &dq.error) {
                // A different answer's time is no reference: said so.
                (Some(t), _) if pg_rows.is_some() && dq.rows != pg_rows => format!(
                    "{} ({} rows, PostgreSQL {})",
                    ms(t.median_ms),
                    dq.rows.map_or("?".into(), |n| n.to_string()),
                    pg_rows.unwrap_or(0)
                ),
                (Some(t), _) => ms(t.median_ms),
                (None, Some(e)) => format!("error: {}", md(e)),
                (None, None) => "-".into(),
            });
            let _ = write!(out, " {v} |");
        }
        let _ = writeln!(out);
    }
    let total = |k| {
        let x = t.total(k);
        if x.answered == x.of { ms(x.median_ms) } else { format!("{} ({}/{})", ms(x.median_ms), x.answered, x.of) }
    };
    let _ = write!(
        out,
        "| total | {} | {} | {} | | |",
        total(SideKind::Postgresql),
        total(SideKind::Embedded),
        total(SideKind::Columnar)
    );
    if let Some(d) = duck {
        let _ = write!(out, " {} |", d.total_ms().map_or("-".into(), ms));
    }
    let _ = writeln!(out);
    image(out, files, "htap-tpch-times", "TPC-H per-query medians");
}

fn compression_section(out: &mut String, r: &HtapReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[1]);
    match r.tpch.as_ref().and_then(|t| t.compression.as_ref()) {
        // tpch's own section, its heading dropped (this one stands for it).
        Some(c) => {
            let text = tpch::compression::markdown(c);
            let _ = writeln!(out, "{}", text.split_once("\n\n").map_or(text.as_str(), |(_, rest)| rest));
        }
        None => {
            let _ = writeln!(out, "Not measured.");
        }
    }
}

fn freshness_section(out: &mut String, r: &HtapReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[2]);
    let Some(f) = &r.freshness else {
        let _ = writeln!(out, "Not measured.");
        return;
    };
    let _ = writeln!(
        out,
        "On the TPC-H engine (orders has its columnar copy): a writer session inserts one order, committed on its \
         own; right after the commit a reader session (`pgtier.analytics = on`) runs `{}`, which must count every \
         order inserted so far. Its EXPLAIN: `Analytics: {}`.{}\n",
        md(&f.query),
        md(&f.path),
        if f.columnar() {
            ""
        } else {
            " **The reader ran on the row path: this proves nothing about the columnar copy.**"
        }
    );
    let _ = writeln!(out, "| queries | fresh | stale | failed | query p50 / p99 / max ms | insert p50 / p99 ms |");
    let _ = writeln!(out, "|---:|---:|---:|---:|---|---|");
    let _ = writeln!(
        out,
        "| {}{} | {} | {} | {} | {} / {} / {} | {} / {} |",
        f.queries,
        if f.queries < f.asked { format!(" of {}", f.asked) } else { String::new() },
        f.fresh,
        f.stale,
        f.failed,
        ms(f.query_p50_ms),
        ms(f.query_p99_ms),
        ms(f.query_max_ms),
        ms(f.insert_p50_ms),
        ms(f.insert_p99_ms)
    );
    if let Some(p) = &f.first_problem {
        let _ = writeln!(out, "\nFirst problem: {}", md(p));
    }
}

fn ch_section(out: &mut String, r: &HtapReport, files: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[3]);
    let Some(c) = &r.ch else {
        let _ = writeln!(out, "Not measured.");
        return;
    };
    let _ = writeln!(
        out,
        "Each target in turn: a. OLTP alone (TPC-C clients, NOPM), b. OLAP alone (the 22 CH queries in a loop), \
         c. both at once, d. OLAP alone again, e. OLTP alone again. Kept is NOPM together over the mean of the two \
         OLTP-alone phases, the change each query's median together over the mean of its two alone medians: the \
         alone phases bracket c, so the tables c's OLTP grows and the machine's drift weigh on both sides alike; \
         each pair's difference (drift) is reported. pgtier's analytic sessions run with `pgtier.analytics = on` over columnar copies of every table; its \
         OLTP sessions keep the default. Study 004: OLTP kept {:.0}-{:.0} % of its NOPM, queries {:.0}-{:.0} % \
         slower.\n",
        STUDY_004_NOPM_KEPT.0, STUDY_004_NOPM_KEPT.1, STUDY_004_QUERY_CHANGE.0, STUDY_004_QUERY_CHANGE.1
    );
    let _ = writeln!(
        out,
        "| target | NOPM alone (a / e) | drift | NOPM together | kept | OLAP alone ms (b / d) | drift | together ms | \
         change | queries |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in &c.sides {
        let t = s.analytic_totals();
        let nopm = |k| s.nopm(k).map_or("-".into(), |n| format!("{n:.0}"));
        let _ = writeln!(
            out,
            "| {} | {} / {} | {} | {} | {} | {} / {} | {} | {} | {} | {}/22 |",
            if s.side == SideKind::Embedded { "pgtier columnar" } else { s.side.label() },
            nopm(PhaseKind::OltpAlone),
            nopm(PhaseKind::OltpAloneAgain),
            signed(s.nopm_alone_drift_pct()),
            nopm(PhaseKind::Together),
            pct(s.nopm_kept_pct()),
            ms(t.before_ms),
            ms(t.after_ms),
            signed(t.drift_pct()),
            ms(t.together_ms),
            signed(t.change_pct()),
            t.queries
        );
    }
    image(out, files, "htap-ch", "CH-benCHmark: NOPM kept and analytic time together");
    let _ = writeln!(out, "\n```\n{}```", ch::output::summary(c));
}

fn answers_section(out: &mut String, r: &HtapReport) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[4]);
    let mut lines = Vec::new();
    let mut identical = 0;
    let all = r.tpch.iter().map(|t| ("TPC-H", &t.queries)).chain(r.ch.iter().map(|c| ("CH-benCHmark", &c.answers)));
    for (bench, queries) in all {
        for q in queries {
            for s in q.sides.iter().filter(|s| s.side != SideKind::Postgresql) {
                match &s.status {
                    Status::Identical => identical += 1,
                    other => {
                        lines.push(format!("- {bench} Q{} on {}: {}", q.query, s.side.label(), md(&other.describe())))
                    }
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "Every value in PostgreSQL's text form, compared exactly (ORDER BY-aware). {identical} answers identical{}",
        if lines.is_empty() { "; no other.".to_owned() } else { format!("; {} not:\n", lines.len()) }
    );
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
}

fn machine_section(out: &mut String, r: &HtapReport, missing: &[String]) {
    let _ = writeln!(out, "\n{}\n", SECTIONS[6]);
    let _ = writeln!(
        out,
        "{} CPUs, {:.1} GiB, {}; {}.\n",
        r.machine.cpus, r.machine.memory_gib, r.machine.kernel, r.executor.evidence
    );
    for (k, v) in &r.settings {
        let _ = writeln!(out, "- {k}: {v}");
    }
    let _ = writeln!(out, "\n| phase | s |\n|---|---:|");
    for (p, s) in &r.phases {
        let _ = writeln!(out, "| {p} | {s:.1} |");
    }
    for m in missing {
        let _ = writeln!(out, "\nChart not drawn: {m}");
    }
}

fn tpch_chart(r: &HtapReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let t = r.tpch.as_ref().ok_or_else(|| ChartError::NoData("TPC-H was not run".into()))?;
    let mut series = vec![
        ("PostgreSQL".to_owned(), SideKind::Postgresql),
        ("pgtier row path".to_owned(), SideKind::Embedded),
        ("pgtier columnar".to_owned(), SideKind::Columnar),
    ];
    let mut values: Vec<Vec<Option<f64>>> =
        series.iter().map(|(_, k)| t.queries.iter().map(|q| median(q.side(*k))).collect()).collect();
    if let Some(d) = r.duckdb.as_ref().filter(|d| d.skipped.is_none()) {
        series.push(("DuckDB (reference)".to_owned(), SideKind::Postgresql));
        values.push(t.queries.iter().map(|q| d.query(q.query)?.timing.as_ref().map(|x| x.median_ms)).collect());
    }
    let figure = BarFigure {
        title: format!("TPC-H SF {}: median time per query", t.scale),
        subtitle: vec![format!("{} runs after a warm-up; lower is better", t.runs)],
        series: series.iter().enumerate().map(|(i, (name, _))| (name.clone(), series_color(i))).collect(),
        groups: t.queries.iter().map(|q| format!("Q{}", q.query)).collect(),
        panels: vec![BarPanel {
            heading: String::new(),
            y_desc: "median time".into(),
            y_unit: "ms".into(),
            values,
            group_notes: vec![None; t.queries.len()],
        }],
        footnotes: vec![("pgtier columnar: the path its EXPLAIN names is in the report's table".into(), MUTED)],
    };
    write_figure(&figure, dir, "htap-tpch-times")
}

fn ch_chart(r: &HtapReport, dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let c = r.ch.as_ref().ok_or_else(|| ChartError::NoData("CH-benCHmark was not run".into()))?;
    let mut series = Vec::new();
    let mut values = Vec::new();
    for s in &c.sides {
        let name = if s.side == SideKind::Embedded { "pgtier columnar" } else { s.side.label() };
        series.push(name.to_owned());
        let t = s.analytic_totals();
        values.push(vec![s.nopm_kept_pct(), t.change_pct().map(|p| 100.0 + p)]);
    }
    series.push("study 004 (best)".into());
    values.push(vec![Some(STUDY_004_NOPM_KEPT.1), Some(100.0 + STUDY_004_QUERY_CHANGE.0)]);
    series.push("study 004 (worst)".into());
    values.push(vec![Some(STUDY_004_NOPM_KEPT.0), Some(100.0 + STUDY_004_QUERY_CHANGE.1)]);
    let figure = BarFigure {
        title: "CH-benCHmark: OLTP and analytics at once".into(),
        subtitle: vec![format!(
            "{} warehouse(s), {} OLTP clients, {} analytic stream(s), {} s per phase",
            c.scale.warehouses, c.clients, c.analytic_streams, c.measure_s
        )],
        series: series.iter().enumerate().map(|(i, n)| (n.clone(), series_color(i))).collect(),
        groups: vec!["NOPM together, % of alone".into(), "analytic time together, % of alone".into()],
        panels: vec![BarPanel {
            heading: String::new(),
            y_desc: "share of alone".into(),
            y_unit: "%".into(),
            values,
            group_notes: vec![None, None],
        }],
        footnotes: vec![(
            "NOPM: higher is better; analytic time: lower is better (100 % = as fast as alone)".into(),
            MUTED,
        )],
    };
    write_figure(&figure, dir, "htap-ch")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_report_still_has_every_section() {
        let text = markdown(&HtapReport::default(), &[], &[]);
        for section in SECTIONS {
            assert!(text.contains(section), "{section} missing");
        }
        assert!(!text.contains("NO ANALYTIC EXECUTOR"));
        let lacking = HtapReport {
            executor: super::super::ExecutorFigures { present: Some(false), evidence: "Analytics: row path".into() },
            ..HtapReport::default()
        };
        assert!(markdown(&lacking, &[], &[]).contains("NO ANALYTIC EXECUTOR"));
    }
}
