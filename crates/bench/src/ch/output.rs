//! `pgtier bench ch`'s outputs: a one-screen summary, `report.md` and
//! `ch.json`: per target NOPM alone and with the analytic streams, the
//! analytic times alone and with OLTP, per query; the answers check; every
//! deviation stated.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::{ChReport, PhaseKind, SideResult, Status};
pub use crate::tpch::output::OutputError;
use crate::tpch::output::{md, ms};

fn pct(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |v| format!("{v:.0} %"))
}

fn signed_pct(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |v| format!("{v:+.0} %"))
}

fn nopm(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |v| format!("{v:.0}"))
}

fn scale_line(report: &ChReport) -> String {
    let s = &report.scale;
    format!(
        "CH-benCHmark: {} warehouse(s){}, {} OLTP clients, {} analytic stream(s), ramp-up {} s, measure {} s per \
         phase, query timeout {} s, seed {}; pgtier's analytic sessions: {}",
        s.warehouses,
        if s.is_spec() { String::new() } else { format!(" (test scale: {} items)", s.items) },
        report.clients,
        report.analytic_streams,
        report.rampup_s,
        report.measure_s,
        report.query_timeout_s,
        report.seed,
        if report.analytics {
            "pgtier.analytics = on over columnar copies of every table"
        } else {
            "the row path (no columnar copy)"
        }
    )
}

/// The median of `query` in `phase`, or what stood in its way.
fn median_cell(s: &SideResult, phase: PhaseKind, query: u8) -> String {
    let Some(q) = s.phase(phase).and_then(|p| p.analytic.as_ref()).and_then(|a| a.query(query)) else {
        return "-".to_owned();
    };
    match (&q.timing, q.timeouts, q.refused) {
        (Some(t), 0, 0) => ms(t.median_ms),
        (Some(t), timeouts, refused) => format!("{} ({}t {}r)", ms(t.median_ms), timeouts, refused),
        (None, 0, 0) if q.cut > 0 => "cut at end".to_owned(),
        (None, 0, 0) => "not reached".to_owned(),
        (None, t, 0) => format!("timeout x{t}"),
        (None, _, _) => "refused".to_owned(),
    }
}

fn answer_word(report: &ChReport, query: u8, side: &SideResult) -> String {
    report.answers.iter().find(|q| q.query == query).and_then(|q| q.side(side.side)).map_or(
        "-".to_owned(),
        |s| match &s.status {
            Status::Refused { sqlstate, .. } => format!("refused {}", sqlstate.as_deref().unwrap_or("")),
            other => other.short().to_owned(),
        },
    )
}

/// The median alone of `query` (the mean of b's and d's), or what stood
/// in b's way.
fn alone_cell(s: &SideResult, query: u8) -> String {
    s.alone_median_ms(query).map_or_else(|| median_cell(s, PhaseKind::OlapAlone, query), ms)
}

/// Per target: NOPM alone / together / kept, analytic totals, then per
/// query the medians alone and together and the answer's status.
pub fn summary(report: &ChReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", scale_line(report));
    let _ = writeln!(
        out,
        "{:<15} {:>15} {:>6} {:>10} {:>6}  {:>15} {:>6} {:>9} {:>7} {:>7}  checks",
        "target",
        "NOPM alone a/e",
        "drift",
        "together",
        "kept",
        "OLAP alone b/d",
        "drift",
        "together",
        "change",
        "queries"
    );
    for s in &report.sides {
        let t = s.analytic_totals();
        let some = |f: f64| if t.queries > 0 { ms(f) } else { "-".to_owned() };
        let _ = writeln!(
            out,
            "{:<15} {:>15} {:>6} {:>10} {:>6}  {:>15} {:>6} {:>9} {:>7} {:>7}  {}",
            s.side.label(),
            format!("{}/{}", nopm(s.nopm(PhaseKind::OltpAlone)), nopm(s.nopm(PhaseKind::OltpAloneAgain))),
            signed_pct(s.nopm_alone_drift_pct()),
            nopm(s.nopm(PhaseKind::Together)),
            pct(s.nopm_kept_pct()),
            format!("{}/{}", some(t.before_ms), some(t.after_ms)),
            signed_pct(if t.queries > 0 { t.drift_pct() } else { None }),
            some(t.together_ms),
            signed_pct(t.change_pct()),
            format!("{}/22", t.queries),
            if s.checks_passed() { "consistent" } else { "INCONSISTENT" }
        );
    }
    let _ = writeln!(
        out,
        "(NOPM kept = together / the mean of a and e; OLAP: sums of per-query medians (ms) over the queries timed \
         in b, c and d, change = together / the mean of b and d - 1; drift = e / a - 1 and d / b - 1: what changed \
         over the run, the tables' growth and the machine's noise)"
    );
    for line in route_lines(report) {
        let _ = writeln!(out, "{line}");
    }
    let mut sides_line = format!("{:<5}", "");
    let mut header = format!("{:<5}", "query");
    for s in &report.sides {
        let _ = write!(sides_line, " | {:<42}", s.side.label());
        let _ = write!(header, " | {:>10} {:>10} {:>7} {:>12}", "alone b/d", "together", "change", "answer");
    }
    let _ = writeln!(out, "{}\n{header}", sides_line.trim_end());
    for q in 1..=22u8 {
        let mut line = format!("{:<5}", format!("Q{q}"));
        for s in &report.sides {
            let _ = write!(
                line,
                " | {:>10} {:>10} {:>7} {:>12}",
                alone_cell(s, q),
                median_cell(s, PhaseKind::Together, q),
                signed_pct(s.query_change_pct(q)),
                answer_word(report, q, s)
            );
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

fn phases_table(md_out: &mut String, report: &ChReport) {
    let _ = writeln!(md_out, "## Phases\n");
    let _ = writeln!(
        md_out,
        "| target | phase | order_line rows at start | NOPM | TPM | queries done | queries/h | timeouts | refused | \
         left out (ramp-up, cut) |"
    );
    let _ = writeln!(md_out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in &report.sides {
        for p in &s.phases {
            let (n, t) = match &p.oltp {
                Some(o) if o.error.is_none() => (format!("{:.0}", o.nopm), format!("{:.0}", o.tpm)),
                Some(o) => (format!("STOPPED: {}", md(o.error.as_deref().unwrap_or(""))), "-".to_owned()),
                None => ("-".to_owned(), "-".to_owned()),
            };
            let a = p.analytic.as_ref();
            let cell = |f: &dyn Fn(&super::stream::AnalyticFigures) -> String| a.map_or("-".to_owned(), f);
            let _ = writeln!(
                md_out,
                "| {} | {}. {} | {} | {n} | {t} | {} | {} | {} | {} | {} |",
                s.side.label(),
                p.kind.letter(),
                p.kind.label(),
                p.order_lines_before.map_or("?".to_owned(), |n| n.to_string()),
                cell(&|a| a.completed.to_string()),
                cell(&|a| format!("{:.0}", a.queries_per_hour)),
                cell(&|a| a.timeouts.to_string()),
                cell(&|a| a.refused.to_string()),
                cell(&|a| a.outside_window.to_string()),
            );
        }
    }
    let _ = writeln!(md_out);
}

/// Per target and phase that counts them: the analytic SELECTs by path.
fn route_lines(report: &ChReport) -> Vec<String> {
    let mut out = Vec::new();
    for s in &report.sides {
        for p in &s.phases {
            let Some(r) = &p.route else { continue };
            let mut line = format!(
                "{} {}: {} analytic SELECT(s) on the columnar path, {} back on the row path after an analytic error",
                s.side.label(),
                p.kind.label(),
                r.columnar,
                r.fallbacks
            );
            if let Some(why) = &r.last_fallback {
                let _ = write!(line, " (the last: {why})");
            }
            let _ = write!(
                line,
                "; waits for the commit stream's applier: {} totalling {:.0} ms; {} scans made their batches in {:.0} ms; \
                 {} merges folded {} delta rows in {:.0} ms, {} unmerged at the end",
                r.catch_up_waits,
                r.catch_up_wait_ms,
                r.scans,
                r.scan_ms,
                r.merges,
                r.merged_rows,
                r.merge_ms,
                r.delta_rows
            );
            out.push(line);
        }
    }
    out
}

fn queries_table(md_out: &mut String, report: &ChReport) {
    let _ = writeln!(
        md_out,
        "## Per query (median ms of the counted runs (how many); change: together over the mean of b and d)\n"
    );
    let mut header = "| query |".to_owned();
    let mut rule = "|---|".to_owned();
    for s in &report.sides {
        let _ = write!(header, " {0} alone b | {0} together c | {0} alone d | change | answer |", s.side.label());
        rule.push_str("---:|---:|---:|---:|---|");
    }
    let _ = writeln!(md_out, "{header}\n{rule}");
    for q in 1..=22u8 {
        let title = report.answers.iter().find(|a| a.query == q).map_or("", |a| a.title.as_str());
        let _ = write!(md_out, "| Q{q} {title} |");
        for s in &report.sides {
            let runs = |kind| {
                s.phase(kind)
                    .and_then(|p| p.analytic.as_ref())
                    .and_then(|a| a.query(q))
                    .and_then(|t| t.timing.as_ref())
                    .map_or(String::new(), |t| format!(" ({})", t.runs_ms.len()))
            };
            let _ = write!(
                md_out,
                " {}{} | {}{} | {}{} | {} | {} |",
                median_cell(s, PhaseKind::OlapAlone, q),
                runs(PhaseKind::OlapAlone),
                median_cell(s, PhaseKind::Together, q),
                runs(PhaseKind::Together),
                median_cell(s, PhaseKind::OlapAloneAgain, q),
                runs(PhaseKind::OlapAloneAgain),
                signed_pct(s.query_change_pct(q)),
                answer_word(report, q, s)
            );
        }
        let _ = writeln!(md_out);
    }
    let _ = writeln!(md_out, "\n(Nt Nr: timeouts and refusals beside the timed runs.)\n");
}

fn answers_section(md_out: &mut String, report: &ChReport) {
    let _ = writeln!(md_out, "## Answers compared with PostgreSQL's (after population, before any phase)\n");
    let _ = writeln!(
        md_out,
        "Each query once on every target, every value in PostgreSQL's text form, compared exactly; row order \
         where the ORDER BY decides it, rows tied on it as multisets.\n"
    );
    for q in &report.answers {
        for s in &q.sides {
            let rows = s.rows.map_or(String::new(), |n| format!(", {n} rows"));
            let time = s.warmup_ms.map_or(String::new(), |m| format!(", {} ms", ms(m)));
            let path = s.path.as_deref().map_or(String::new(), |p| format!("; path: {}", md(p)));
            let _ = writeln!(md_out, "- Q{} on {}: {}{rows}{time}{path}", q.query, s.side.label(), s.status.describe());
        }
    }
    let _ = writeln!(md_out);
}

fn sides_section(md_out: &mut String, report: &ChReport) {
    let _ = writeln!(md_out, "## The targets\n");
    for s in &report.sides {
        let _ = writeln!(md_out, "- {}: {}; durability {}", s.side.label(), s.target, s.durability);
        let rows: u64 = s.load.tpcc.rows.iter().chain(&s.load.ch_rows).map(|(_, n)| n).sum();
        let _ = writeln!(
            md_out,
            "  - loaded {rows} rows: TPC-C's tables in {:.1} s (+ keys/indexes/ANALYZE {:.1} s{}), region/nation/supplier \
             in {:.1} s (ANALYZE {})",
            s.load.tpcc.load_s,
            s.load.tpcc.build_s,
            if s.load.tpcc.refused.is_empty() {
                String::new()
            } else {
                format!("; refused: {}", md(&s.load.tpcc.refused.join("; ")))
            },
            s.load.ch_load_s,
            md(&s.load.analyze)
        );
        let _ = writeln!(md_out, "  - analytic queries bounded by {}", md(&s.timeout_method));
        if let Some(c) = &s.copies {
            let refused: Vec<String> = c.refused.iter().map(|(t, e)| format!("{t}: {e}")).collect();
            let _ = writeln!(
                md_out,
                "  - columnar copies of every table enabled in {:.1} s{}",
                c.enable_s,
                if refused.is_empty() { String::new() } else { format!("; refused: {}", md(&refused.join("; "))) }
            );
        }
        if !s.settings.is_empty() {
            let set: Vec<String> = s.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(md_out, "  - settings: {}", set.join(", "));
        }
        if let Some(m) = s.process_rss_mib {
            let _ = writeln!(md_out, "  - this process's RSS after the phases: {m:.0} MiB");
        }
        let failed: Vec<String> = s
            .checks
            .iter()
            .filter(|c| !c.passed())
            .map(|c| format!("{} {}", c.clause, c.violations.join("; ")))
            .collect();
        let _ = writeln!(
            md_out,
            "  - TPC-C consistency after the last phase ({} conditions): {}",
            s.checks.len(),
            if failed.is_empty() && !s.checks.is_empty() { "all hold".to_owned() } else { md(&failed.join("; ")) }
        );
    }
    let _ = writeln!(md_out);
}

pub fn markdown(report: &ChReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# pgtier bench ch\n");
    let _ = writeln!(out, "{}\n", scale_line(report));
    let _ = writeln!(
        out,
        "Started {}; pgtier {}; {} ({} CPUs, {:.1} GiB); load average before: {}. The machine may be shared with \
         other work: compare the phases of one run, not runs of different days.\n",
        report.started_at,
        report.tool_version,
        report.machine.hostname,
        report.machine.cpus,
        report.machine.memory_gib,
        report.load_average_before
    );
    let _ = writeln!(out, "## Summary\n\n```\n{}```\n", summary(report));
    phases_table(&mut out, report);
    queries_table(&mut out, report);
    answers_section(&mut out, report);
    sides_section(&mut out, report);
    let _ = writeln!(out, "## Deviations from CH-benCHmark and from study 004\n");
    for d in &report.deviations {
        let _ = writeln!(out, "- {d}");
    }
    out
}

fn write(path: &Path, text: &str) -> Result<(), OutputError> {
    std::fs::write(path, text).map_err(|source| OutputError::Io { path: path.display().to_string(), source })
}

/// Writes `report.md` and `ch.json` into `dir` (created if missing).
pub fn write_files(dir: &Path, report: &ChReport) -> Result<Vec<PathBuf>, OutputError> {
    std::fs::create_dir_all(dir).map_err(|source| OutputError::Io { path: dir.display().to_string(), source })?;
    let md_path = dir.join("report.md");
    write(&md_path, &markdown(report))?;
    let json_path = dir.join("ch.json");
    let json = serde_json::to_string_pretty(report)
        .map_err(|e| OutputError::Encode { path: json_path.display().to_string(), message: e.to_string() })?;
    write(&json_path, &json)?;
    Ok(vec![md_path, json_path])
}
