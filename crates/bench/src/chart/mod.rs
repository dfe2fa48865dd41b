//! Charts of result files, each written as PNG and SVG: the figures of
//! reference study 000 (throughput and per-transaction latency against thread
//! count; backend vs cache latency bars, drawn by [`crate::compare`]).
//!
//! Charts never fail on odd data: zero, negative or non-finite values become
//! gaps, single-iteration runs draw single points, and empty runs draw "no
//! data". They fail only when a file cannot be written.

mod axis;
mod bars;
mod lines;
mod render;
mod style;

use std::path::{Path, PathBuf};

use crate::result::{Iteration, LatencyUs, RunResult};

pub(crate) use bars::{BarFigure, BarPanel};
pub(crate) use lines::{LineFigure, LineSpec};
pub(crate) use render::write_figure;
pub(crate) use style::{
    MUTED, WARNING, YScale, axis_title, file_stem, format_number, format_ratio, series_color, usable,
};

#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("cannot create chart directory {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("the embedded chart font could not be loaded")]
    Font,
    #[error("cannot draw {path}: {message}")]
    Draw { path: PathBuf, message: String },
    #[error("nothing to chart: {0}")]
    NoData(String),
}

/// Draws the per-run figures into `out_dir` (created if missing) and returns
/// the files written, PNG and SVG of each:
/// `<label>-mqth`, `<label>-latency-avg`, `<label>-latency-relative`,
/// `<label>-latency-p90`.
pub fn draw_run_charts(run: &RunResult, out_dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    if run.iterations.is_empty() {
        return Err(ChartError::NoData(format!("run '{}' has no iterations", run.label)));
    }
    let view = RunView::new(run);
    let stem = file_stem(&run.label);
    let mut written = Vec::new();
    written.extend(write_figure(&view.mqth_figure(), out_dir, &format!("{stem}-mqth"))?);
    let avg = view.latency_figure(|l| l.avg, "Average latency per transaction", "average latency");
    written.extend(write_figure(&avg, out_dir, &format!("{stem}-latency-avg"))?);
    written.extend(write_figure(&view.relative_figure(), out_dir, &format!("{stem}-latency-relative"))?);
    let p90 = view.latency_figure(|l| l.p90, "p90 latency per transaction", "p90 latency");
    written.extend(write_figure(&p90, out_dir, &format!("{stem}-latency-p90"))?);
    Ok(written)
}

/// A curve sampled over time outside a run (e.g. a cache's memory under
/// its budget, once a second): one x slot per sample labelled every
/// `label_every` samples, one line per series, an optional dashed guide
/// (the budget). Writes `<dir>/<stem>.png` and `.svg`.
pub struct TimeSeries<'a> {
    pub title: String,
    pub subtitle: Vec<String>,
    /// One label per sample (e.g. seconds since start).
    pub x_labels: Vec<String>,
    pub label_every: usize,
    pub y_desc: String,
    pub series: Vec<(&'a str, Vec<f64>)>,
    pub reference_y: Option<(f64, String)>,
    /// A log axis when the values span more than 20x (a lag of ms in one
    /// phase and of seconds in another); values <= 0 are then left out.
    pub log_when_wide: bool,
}

pub fn draw_time_series(chart: &TimeSeries<'_>, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, ChartError> {
    if chart.series.iter().all(|(_, values)| values.is_empty()) {
        return Err(ChartError::NoData(chart.title.clone()));
    }
    let y_scale = if chart.log_when_wide {
        YScale::choose(chart.series.iter().flat_map(|(_, values)| values.iter().copied()), 20.0)
    } else {
        YScale::Linear
    };
    let every = chart.label_every.max(1);
    let figure = LineFigure {
        title: chart.title.clone(),
        subtitle: chart.subtitle.clone(),
        x_desc: "seconds".to_string(),
        x_labels: chart
            .x_labels
            .iter()
            .enumerate()
            .map(|(i, l)| if i % every == 0 { l.clone() } else { String::new() })
            .collect(),
        y_desc: if y_scale.is_log() { format!("{} (log scale)", chart.y_desc) } else { chart.y_desc.clone() },
        y_scale,
        y_from_zero: !y_scale.is_log(),
        series: chart
            .series
            .iter()
            .enumerate()
            .map(|(i, (name, values))| LineSpec {
                name: (*name).to_string(),
                color: series_color(i),
                emphasis: false,
                dodge: 0.0,
                values: values.iter().map(|v| usable(*v, y_scale.is_log())).collect(),
                spread: Vec::new(),
                point_labels: Vec::new(),
            })
            .collect(),
        reference_y: chart.reference_y.clone(),
        legend_title: None,
        footnotes: Vec::new(),
    };
    write_figure(&figure, dir, stem)
}

/// A run with its iterations in thread order and its transaction names in a
/// fixed order, so every chart gives a transaction the same colour.
struct RunView<'a> {
    run: &'a RunResult,
    iterations: Vec<&'a Iteration>,
    transactions: Vec<String>,
}

impl<'a> RunView<'a> {
    fn new(run: &'a RunResult) -> Self {
        let mut iterations: Vec<&Iteration> = run.iterations.iter().collect();
        iterations.sort_by_key(|it| it.threads);
        let transactions = transaction_names(iterations.iter().copied());
        Self { run, iterations, transactions }
    }

    fn x_labels(&self) -> Vec<String> {
        self.iterations.iter().map(|it| it.threads.to_string()).collect()
    }

    fn title(&self, what: &str) -> String {
        format!("{what}: {}", headline(self.run))
    }

    /// A latency of zero or less means nothing was measured (no executions),
    /// so it is a gap, not a point.
    fn latency_of(&self, name: &str, pick: impl Fn(&LatencyUs) -> f64) -> Vec<Option<f64>> {
        self.iterations
            .iter()
            .map(|it| {
                let txn = it.transactions.iter().find(|t| t.name == name)?;
                usable(pick(&txn.latency_us), true)
            })
            .collect()
    }

    fn mqth_figure(&self) -> LineFigure {
        let values: Vec<Option<f64>> = self.iterations.iter().map(|it| usable(it.mqth_mean, false)).collect();
        // Relative throughput only means something with more than one point.
        let first = values.iter().flatten().copied().find(|v| *v > 0.0).filter(|_| values.len() > 1);
        let point_labels = values
            .iter()
            .map(|v| {
                let v = (*v)?;
                let relative = first.map(|f| format!(" ({})", format_ratio(v / f))).unwrap_or_default();
                Some(format!("{}{relative}", format_number(v)))
            })
            .collect();
        let repeated = self.iterations.iter().any(|it| it.repetitions.len() > 1) || self.run.config.repetitions > 1;
        let spread = if repeated {
            self.iterations.iter().map(|it| (it.mqth_min < it.mqth_max).then_some((it.mqth_min, it.mqth_max))).collect()
        } else {
            Vec::new()
        };
        let mut footnotes = Vec::new();
        if repeated {
            footnotes.push((
                format!("Points: mean over {} repetitions; whiskers: min–max.", self.run.config.repetitions),
                MUTED,
            ));
        }
        if first.is_some() {
            footnotes.push(("In brackets: throughput relative to the lowest thread count.".to_string(), MUTED));
        }
        LineFigure {
            title: self.title("Throughput vs threads"),
            subtitle: details(self.run),
            x_desc: "threads".to_string(),
            x_labels: self.x_labels(),
            y_desc: "MQTh (successful transactions/s)".to_string(),
            y_scale: YScale::Linear,
            y_from_zero: true,
            series: vec![LineSpec {
                name: "MQTh".to_string(),
                color: series_color(0),
                emphasis: false,
                dodge: 0.0,
                values,
                spread,
                point_labels,
            }],
            reference_y: None,
            legend_title: None,
            footnotes,
        }
    }

    fn latency_figure(&self, pick: impl Fn(&LatencyUs) -> f64 + Copy, what: &str, y_desc: &str) -> LineFigure {
        let series: Vec<LineSpec> = self
            .transactions
            .iter()
            .enumerate()
            .map(|(i, name)| LineSpec {
                name: name.clone(),
                color: series_color(i),
                emphasis: false,
                dodge: 0.0,
                values: self.latency_of(name, pick),
                spread: Vec::new(),
                point_labels: Vec::new(),
            })
            .collect();
        let y_scale = YScale::choose(series.iter().flat_map(|s| s.values.iter().flatten().copied()), 10.0);
        let y_desc = axis_title(y_desc, "µs", y_scale);
        LineFigure {
            title: self.title(what),
            subtitle: details(self.run),
            x_desc: "threads".to_string(),
            x_labels: self.x_labels(),
            y_desc,
            y_scale,
            y_from_zero: !y_scale.is_log(),
            series,
            reference_y: None,
            legend_title: Some("transaction".to_string()),
            footnotes: Vec::new(),
        }
    }

    /// Study 000's figure 3: each transaction's latency, and the throughput,
    /// relative to their own values at the lowest thread count.
    fn relative_figure(&self) -> LineFigure {
        let mut series: Vec<LineSpec> = self
            .transactions
            .iter()
            .enumerate()
            .map(|(i, name)| LineSpec {
                name: name.clone(),
                color: series_color(i),
                emphasis: false,
                dodge: 0.0,
                values: relative(&self.latency_of(name, |l| l.avg)),
                spread: Vec::new(),
                point_labels: Vec::new(),
            })
            .collect();
        let mqth: Vec<Option<f64>> = self.iterations.iter().map(|it| Some(it.mqth_mean)).collect();
        series.push(LineSpec {
            name: "MQTh (throughput)".to_string(),
            color: plotters::style::RGBColor(0x22, 0x22, 0x22),
            emphasis: true,
            dodge: 0.0,
            values: relative(&mqth),
            spread: Vec::new(),
            point_labels: Vec::new(),
        });
        let y_scale = YScale::choose(series.iter().flat_map(|s| s.values.iter().flatten().copied()), 10.0);
        let lowest = self.iterations.first().map_or(0, |it| it.threads);
        let y_desc = axis_title("relative to lowest thread count", "×", y_scale);
        LineFigure {
            title: self.title("Relative latency and throughput"),
            subtitle: details(self.run),
            x_desc: "threads".to_string(),
            x_labels: self.x_labels(),
            y_desc,
            y_scale,
            y_from_zero: !y_scale.is_log(),
            series,
            reference_y: Some((1.0, format!("1× = value at {lowest} thread{}", plural(lowest)))),
            legend_title: None,
            footnotes: vec![(
                "Each line is divided by its own first usable value (normally the lowest thread count).".to_string(),
                MUTED,
            )],
        }
    }
}

/// Divides each value by the first usable one; gaps stay gaps, and a series
/// with no positive value has nothing to be relative to.
fn relative(values: &[Option<f64>]) -> Vec<Option<f64>> {
    let base = values.iter().flatten().copied().find(|v| usable(*v, true).is_some());
    values
        .iter()
        .map(|v| {
            let (v, base) = ((*v)?, base?);
            usable(v / base, false)
        })
        .collect()
}

/// Transaction names in order of first appearance across iterations.
pub(crate) fn transaction_names<'a>(iterations: impl Iterator<Item = &'a Iteration>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for it in iterations {
        for txn in &it.transactions {
            if !names.contains(&txn.name) {
                names.push(txn.name.clone());
            }
        }
    }
    names
}

/// "postgresql · TATP · 100,000 subscribers · closed loop": the facts that
/// tell two charts apart at a glance.
pub(crate) fn headline(run: &RunResult) -> String {
    let label = if run.label.trim().is_empty() { "unlabelled run" } else { run.label.as_str() };
    format!(
        "{label} · {} · {} subscribers · {}",
        workload_name(&run.config.workload),
        thousands(run.config.subscribers),
        loop_mode(run.config.rate_per_s)
    )
}

/// Second-tier settings, printed under the title.
pub(crate) fn details(run: &RunResult) -> Vec<String> {
    let c = &run.config;
    let mut line = vec![
        format!("keys: {}", or_unknown(&c.key_distribution)),
        format!("durability: {}", or_unknown(&c.durability)),
        format!("isolation: {}", or_unknown(&c.isolation)),
        format!("{} s × {} repetition{}", format_number(c.duration_s), c.repetitions, plural(c.repetitions)),
    ];
    if run.machine.cpus > 0 {
        line.push(format!("{} CPUs", run.machine.cpus));
    }
    if !run.started_at.is_empty() {
        line.push(run.started_at.clone());
    }
    let mut lines = vec![line.join(" · ")];
    if !c.target.is_empty() {
        lines.push(format!("target: {}", c.target));
    }
    lines
}

pub(crate) fn loop_mode(rate_per_s: Option<f64>) -> String {
    match rate_per_s {
        Some(rate) if rate.is_finite() && rate > 0.0 => format!("open loop at {} txn/s", format_number(rate)),
        _ => "closed loop".to_string(),
    }
}

fn workload_name(workload: &str) -> String {
    match workload.trim() {
        "" => "workload ?".to_string(),
        w if w.eq_ignore_ascii_case("tatp") => "TATP".to_string(),
        w => w.to_string(),
    }
}

fn or_unknown(value: &str) -> &str {
    if value.trim().is_empty() { "?" } else { value }
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// 1234567 → "1,234,567".
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
pub(crate) mod tests;
