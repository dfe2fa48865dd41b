//! TPC-H outputs: the one-screen summary, the Markdown report and the JSON
//! result file.

use std::fmt::Write as _;
use std::path::Path;

use super::{SideKind, SideResult, Status, TpchReport};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("writing {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("encoding {path}: {message}")]
    Encode { path: String, message: String },
}

/// A time in ms with about three significant digits.
pub fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// The median, or what stood in its way.
fn median_cell(s: Option<&SideResult>) -> String {
    match s {
        None => "-".to_owned(),
        Some(s) => match (&s.timing, &s.status) {
            (Some(t), _) => ms(t.median_ms),
            (None, Status::Timeout { after_s }) => format!("> {} s", after_s),
            (None, Status::Refused { sqlstate, .. }) => format!("refused {}", sqlstate.as_deref().unwrap_or("")),
            // --runs 0 (answers only): the warm-up's time, marked.
            (None, Status::Reference | Status::Identical) if s.warmup_ms.is_some() => {
                format!("w {}", ms(s.warmup_ms.unwrap_or(0.0)))
            }
            (None, status) => status.short().to_owned(),
        },
    }
}

/// `side median / PostgreSQL median`, "-" when either is missing.
fn ratio(report_q: &super::QueryResult, kind: SideKind) -> String {
    let pg = report_q.side(SideKind::Postgresql).and_then(|s| s.timing.as_ref());
    let other = report_q.side(kind).and_then(|s| s.timing.as_ref());
    match (pg, other) {
        (Some(p), Some(o)) if p.median_ms > 0.0 => format!("{:.2}x", o.median_ms / p.median_ms),
        _ => "-".to_owned(),
    }
}

fn pgtier_sides(report: &TpchReport) -> Vec<SideKind> {
    report.sides.iter().map(|s| s.side).filter(|k| *k != SideKind::Postgresql).collect()
}

fn pad(cells: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
        if i == 0 {
            let _ = write!(line, "{c:<w$}");
        } else if i + 1 == cells.len() {
            let _ = write!(line, "  {c}");
        } else {
            let _ = write!(line, "  {c:>w$}");
        }
    }
    line.trim_end().to_owned()
}

/// The one-screen summary: per query the medians (ms), each pgtier side's
/// ratio to PostgreSQL, and the answers' status.
pub fn summary(report: &TpchReport) -> String {
    let others = pgtier_sides(report);
    let mut header = vec!["query".to_owned(), "PostgreSQL ms".to_owned()];
    for k in &others {
        header.push(format!("{} ms", k.label()));
        header.push("ratio".to_owned());
    }
    header.push("answers".to_owned());
    let mut rows = vec![header];
    for q in &report.queries {
        let mut row = vec![format!("Q{}", q.query), median_cell(q.side(SideKind::Postgresql))];
        let mut statuses = Vec::new();
        for k in &others {
            row.push(median_cell(q.side(*k)));
            row.push(ratio(q, *k));
            if let Some(s) = q.side(*k) {
                statuses.push(if others.len() > 1 {
                    format!("{}: {}", short_label(*k), s.status.short())
                } else {
                    s.status.short().to_owned()
                });
            }
        }
        if let Some(pg) = q.side(SideKind::Postgresql)
            && !matches!(pg.status, Status::Reference)
        {
            statuses.insert(0, format!("PostgreSQL: {}", pg.status.short()));
        }
        row.push(statuses.join(", "));
        rows.push(row);
    }
    let mut total = vec!["total".to_owned(), total_cell(report, SideKind::Postgresql)];
    let pg_total = report.total(SideKind::Postgresql);
    for k in &others {
        total.push(total_cell(report, *k));
        let t = report.total(*k);
        total.push(if t.answered == t.of && pg_total.answered == pg_total.of && pg_total.median_ms > 0.0 {
            format!("{:.2}x", t.median_ms / pg_total.median_ms)
        } else {
            "-".to_owned()
        });
    }
    let identical = report.queries.iter().flat_map(|q| &q.sides).filter(|s| s.status == Status::Identical).count();
    let compared = report.queries.len() * others.len();
    total.push(format!("{identical} of {compared} identical"));
    rows.push(total);
    let width = rows[0].len();
    let widths: Vec<usize> =
        (0..width).map(|i| rows.iter().map(|r| r.get(i).map_or(0, |c| c.chars().count())).max().unwrap_or(0)).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "TPC-H SF {}: median of {} runs after one warm-up, ms (w: the warm-up only); ratio = pgtier / PostgreSQL; timeout {} s",
        report.scale, report.runs, report.timeout_s
    );
    for (i, r) in rows.iter().enumerate() {
        let _ = writeln!(out, "{}", pad(r, &widths));
        if i == 0 || i + 2 == rows.len() {
            let _ = writeln!(out, "{}", "-".repeat(widths.iter().sum::<usize>() + 2 * (width - 1)));
        }
    }
    out.push_str(&columnar_lines(report));
    if let Some(c) = &report.compression {
        let lineitem = c.tables.iter().find(|t| t.table == "lineitem").map_or(0.0, |t| t.ratio);
        let _ = writeln!(
            out,
            "columnar copy (embedded): {:.2}x overall, lineitem {lineitem:.2}x (study 004: {:.2}x, {:.2}x)",
            c.ratio, c.study_004_overall, c.study_004_lineitem
        );
    }
    out
}

fn short_label(k: SideKind) -> &'static str {
    match k {
        SideKind::Postgresql => "pg",
        SideKind::PgtierServer => "server",
        SideKind::Embedded => "embedded",
        SideKind::Columnar => "columnar",
    }
}

/// The summary's lines on the columnar side: PostgreSQL's total over its
/// total, and on how many queries EXPLAIN named the columnar path.
fn columnar_lines(report: &TpchReport) -> String {
    let mut out = String::new();
    let (columnar, of) = report.columnar_paths();
    if of == 0 {
        return out;
    }
    let (pg, col) = (report.total(SideKind::Postgresql), report.total(SideKind::Columnar));
    let speedup = if col.answered == col.of && pg.answered == pg.of && col.median_ms > 0.0 {
        format!("{:.2}x", pg.median_ms / col.median_ms)
    } else {
        "- (a side did not answer every query)".to_owned()
    };
    let _ = writeln!(out, "PostgreSQL / pgtier columnar (total of the medians): {speedup}");
    let _ = writeln!(out, "pgtier columnar: EXPLAIN names the columnar path on {columnar} of {of} queries");
    let lacking =
        report.queries.iter().filter_map(|q| q.side(SideKind::Columnar)?.path.as_deref()).any(super::lacks_executor);
    if lacking {
        let _ = writeln!(
            out,
            "THIS BUILD OF PGTIER HAS NO ANALYTIC EXECUTOR (cargo feature 'analytics'): the columnar side ran the row path"
        );
    }
    out
}

fn total_cell(report: &TpchReport, kind: SideKind) -> String {
    let t = report.total(kind);
    if t.answered == 0 {
        return "-".to_owned();
    }
    if t.answered == t.of { ms(t.median_ms) } else { format!("{} ({}/{})", ms(t.median_ms), t.answered, t.of) }
}

/// Markdown cell text: pipes escaped, one line.
pub fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown report: settings, population, the per-query table (min /
/// median / max per target), every answer's status in full, deviations.
pub fn markdown(report: &TpchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# TPC-H, scale factor {}\n", report.scale);
    let _ = writeln!(
        out,
        "Started {} (pgtier {}), {} timed runs per query and target after one warm-up run, \
         statement_timeout {} s. Load average before the run: {}. Machine: {} CPUs, {:.1} GiB, {}.\n",
        report.started_at,
        report.tool_version,
        report.runs,
        report.timeout_s,
        report.load_average_before,
        report.machine.cpus,
        report.machine.memory_gib,
        report.machine.kernel
    );
    let _ = writeln!(out, "## Targets\n");
    let _ = writeln!(out, "| target | system | load s | ANALYZE | rows | queries bounded by |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for s in &report.sides {
        let (load, analyze, rows) = match &s.load {
            Some(l) => (
                format!("{:.1}", l.load_s),
                l.analyze.clone(),
                l.rows.iter().map(|(t, n)| format!("{t} {n}")).collect::<Vec<_>>().join(", "),
            ),
            None if s.side == SideKind::Columnar => {
                ("the embedded target's tables".to_owned(), "-".to_owned(), "their columnar copies".to_owned())
            }
            None => ("not loaded (--skip-load)".to_owned(), "-".to_owned(), "-".to_owned()),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {load} | {} | {} | {} |",
            s.side.label(),
            md(&s.target),
            md(&analyze),
            rows,
            md(&s.timeout_method)
        );
    }
    if let Some(c) = &report.compression {
        let _ = writeln!(out, "\n{}", super::compression::markdown(c));
    }
    let _ = writeln!(out, "\n## Summary\n\n```\n{}```\n", summary(report));
    let _ = writeln!(out, "## Per query (ms: min / median / max)\n");
    let kinds: Vec<SideKind> = report.sides.iter().map(|s| s.side).collect();
    let mut header = "| query |".to_owned();
    let mut rule = "|---|".to_owned();
    for k in &kinds {
        let _ = write!(header, " {} |", k.label());
        rule.push_str("---|");
    }
    let paths = report.columnar_paths().1 > 0;
    if paths {
        header.push_str(" columnar side's path (EXPLAIN) |");
        rule.push_str("---|");
    }
    let _ = writeln!(out, "{header} rows |\n{rule}---|");
    for q in &report.queries {
        let _ = write!(out, "| Q{} {} |", q.query, q.title);
        for k in &kinds {
            let cell = match q.side(*k) {
                Some(s) => match &s.timing {
                    Some(t) => format!("{} / {} / {}", ms(t.min_ms), ms(t.median_ms), ms(t.max_ms)),
                    None => s.status.describe(),
                },
                None => "-".to_owned(),
            };
            let _ = write!(out, " {} |", md(&cell));
        }
        if paths {
            let path = q.side(SideKind::Columnar).and_then(|s| s.path.as_deref()).unwrap_or("-");
            let _ = write!(out, " {} |", md(path));
        }
        let rows = q.side(SideKind::Postgresql).and_then(|s| s.rows).map_or("-".to_owned(), |n| n.to_string());
        let _ = writeln!(out, " {rows} |");
    }
    let _ = writeln!(out, "\n## Answers compared with PostgreSQL's\n");
    let _ = writeln!(
        out,
        "Every value in PostgreSQL's text form, compared exactly. Row order is compared where the ORDER BY \
         decides it; rows tied on the ORDER BY values are compared as multisets; at a LIMIT cut, rows tied \
         with the last one are compared on their ORDER BY values only.\n"
    );
    for q in &report.queries {
        for s in q.sides.iter().filter(|s| !matches!(s.status, Status::Reference)) {
            let _ = writeln!(out, "- Q{} on {}: {}", q.query, s.side.label(), s.status.describe());
        }
    }
    let _ = writeln!(out, "\n## Deviations from the TPC-H specification\n");
    for d in &report.deviations {
        let _ = writeln!(out, "- {d}");
    }
    out
}

fn write(path: &Path, text: &str) -> Result<(), OutputError> {
    std::fs::write(path, text).map_err(|source| OutputError::Io { path: path.display().to_string(), source })
}

/// Writes `report.md` and `tpch.json` into `dir` (created if missing);
/// returns their paths.
pub fn write_files(dir: &Path, report: &TpchReport) -> Result<Vec<std::path::PathBuf>, OutputError> {
    std::fs::create_dir_all(dir).map_err(|source| OutputError::Io { path: dir.display().to_string(), source })?;
    let md_path = dir.join("report.md");
    write(&md_path, &markdown(report))?;
    let json_path = dir.join("tpch.json");
    let json = serde_json::to_string_pretty(report)
        .map_err(|e| OutputError::Encode { path: json_path.display().to_string(), message: e.to_string() })?;
    write(&json_path, &json)?;
    Ok(vec![md_path, json_path])
}
