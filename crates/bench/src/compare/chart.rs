//! The comparison figures: study 000's "average latencies, baseline vs
//! cache" bars at each compared thread count, and both runs' throughput over
//! thread count.

use std::path::{Path, PathBuf};

use super::{Comparison, ThreadComparison, TxnComparison};
use crate::chart::{
    BarFigure, BarPanel, ChartError, LineFigure, LineSpec, MUTED, WARNING, YScale, file_stem, format_number,
    format_ratio, series_color, usable, write_figure,
};
use crate::result::LatencyUs;

/// Draws, into `out_dir`, one latency bar chart per compared thread count
/// (`compare-<b>-vs-<c>-latency-<n>t`) and one throughput chart
/// (`compare-<b>-vs-<c>-mqth`), each as PNG and SVG; returns the paths.
/// Narrow the thread counts first with [`Comparison::restricted_to`].
pub fn draw_comparison_chart(cmp: &Comparison, out_dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    if cmp.points.is_empty() {
        return Err(ChartError::NoData("the two runs share no thread count".to_string()));
    }
    let stem = format!("compare-{}-vs-{}", file_stem(&cmp.baseline.label), file_stem(&cmp.candidate.label));
    let mut written = Vec::new();
    for point in &cmp.points {
        let figure = latency_figure(cmp, point);
        written.extend(write_figure(&figure, out_dir, &format!("{stem}-latency-{}t", point.threads))?);
    }
    written.extend(write_figure(&throughput_figure(cmp), out_dir, &format!("{stem}-mqth"))?);
    Ok(written)
}

fn legend_names(cmp: &Comparison) -> (String, String) {
    let (b, c) = cmp.display_names();
    if b == "baseline" { (b, c) } else { (format!("{b} (baseline)"), format!("{c} (candidate)")) }
}

fn latency_figure(cmp: &Comparison, point: &ThreadComparison) -> BarFigure {
    let (b, c) = legend_names(cmp);
    let (b_name, c_name) = cmp.display_names();
    let mqth_note = match point.mqth_ratio {
        Some(r) => format!(" ({} of baseline)", format_ratio(r)),
        None => String::new(),
    };
    let subtitle = vec![
        format!("baseline: {} · MQTh {}", cmp.baseline.headline, format_number(point.baseline_mqth)),
        format!("candidate: {} · MQTh {}{mqth_note}", cmp.candidate.headline, format_number(point.candidate_mqth)),
    ];
    let panel =
        |heading: &str, y_desc: &str, pick: fn(&LatencyUs) -> f64, ratio: fn(&TxnComparison) -> Option<f64>| BarPanel {
            heading: heading.to_string(),
            y_desc: y_desc.to_string(),
            y_unit: "µs".to_string(),
            values: vec![
                point.transactions.iter().map(|t| usable(pick(&t.baseline), false)).collect(),
                point.transactions.iter().map(|t| usable(pick(&t.candidate), false)).collect(),
            ],
            group_notes: point.transactions.iter().map(|t| ratio(t).map(lower_or_higher)).collect(),
        };
    let mut footnotes = vec![(
        format!(
            "Above each pair: {c_name}'s latency relative to {b_name}'s ({b_name} ÷ {c_name}). \
             Geometric mean over {} transactions: average {}, p90 {}.",
            point.transactions.len(),
            point.geomean(|t| t.avg_ratio).map_or_else(|| "n/a".to_string(), lower_or_higher),
            point.geomean(|t| t.p90_ratio).map_or_else(|| "n/a".to_string(), lower_or_higher),
        ),
        MUTED,
    )];
    let unmatched: Vec<&String> =
        point.baseline_only_transactions.iter().chain(&point.candidate_only_transactions).collect();
    if !unmatched.is_empty() {
        let names: Vec<&str> = unmatched.iter().map(|s| s.as_str()).collect();
        footnotes.push((format!("Not in both runs, not shown: {}.", names.join(", ")), WARNING));
    }
    footnotes.extend(config_warning(cmp));
    BarFigure {
        title: format!(
            "Per-transaction latency at {} thread{}: {b_name} vs {c_name}",
            point.threads,
            if point.threads == 1 { "" } else { "s" }
        ),
        subtitle,
        series: vec![(b, series_color(0)), (c, series_color(1))],
        groups: point.transactions.iter().map(|t| t.name.clone()).collect(),
        panels: vec![
            panel("Average latency", "average latency", |l| l.avg, |t| t.avg_ratio),
            panel("p90 latency", "p90 latency", |l| l.p90, |t| t.p90_ratio),
        ],
        footnotes,
    }
}

/// "37.2× lower" when the candidate is faster, "2.10× higher" when slower.
fn lower_or_higher(ratio: f64) -> String {
    if ratio >= 1.0 {
        format!("{} lower", format_ratio(ratio))
    } else {
        format!("{} higher", format_ratio(1.0 / ratio))
    }
}

fn config_warning(cmp: &Comparison) -> Option<(String, plotters::style::RGBColor)> {
    if cmp.config_differences.is_empty() {
        return None;
    }
    let list: Vec<String> =
        cmp.config_differences.iter().map(|d| format!("{} {} vs {}", d.setting, d.baseline, d.candidate)).collect();
    Some((format!("Warning: settings differ: {}.", list.join("; ")), WARNING))
}

fn throughput_figure(cmp: &Comparison) -> LineFigure {
    let (b, c) = legend_names(cmp);
    let (b_name, c_name) = cmp.display_names();
    // No value labels: two close lines would print them over each other;
    // the printed table has the numbers.
    let series = |name: String, index: usize, dodge: f64, pick: fn(&super::ThroughputRow) -> Option<super::Mqth>| {
        let rows = || cmp.throughput.iter().map(pick);
        LineSpec {
            name,
            color: series_color(index),
            emphasis: false,
            dodge,
            values: rows().map(|m| m.map(|m| m.mean)).collect(),
            spread: rows().map(|m| m.and_then(|m| (m.min < m.max).then_some((m.min, m.max)))).collect(),
            point_labels: Vec::new(),
        }
    };
    let mut footnotes =
        vec![("Whiskers: min–max over repetitions, where a run repeated its measurement.".to_string(), MUTED)];
    footnotes.extend(config_warning(cmp));
    LineFigure {
        title: format!("Throughput vs threads: {b_name} vs {c_name}"),
        subtitle: vec![
            format!("baseline: {}", cmp.baseline.headline),
            format!("candidate: {}", cmp.candidate.headline),
        ],
        x_desc: "threads".to_string(),
        x_labels: cmp.throughput.iter().map(|r| r.threads.to_string()).collect(),
        y_desc: "MQTh (successful transactions/s)".to_string(),
        y_scale: YScale::Linear,
        y_from_zero: true,
        series: vec![series(b, 0, -0.03, |r| r.baseline), series(c, 1, 0.03, |r| r.candidate)],
        reference_y: None,
        legend_title: None,
        footnotes,
    }
}
