//! The soak's judgement, from the samples alone (so it can be recomputed
//! from `soak.json`): growth of RSS, fds and threads over the last part of
//! the run, p99 stability, and every failure in words.
//!
//! Growth of a metric: its last sample against the first sample at or
//! after the warm-up (by default the first 25 % of the run: for one hour,
//! growth over the last 45 minutes), in percent of that first sample; the
//! goal is under 5 %. Beside it, the peak in the window against the same
//! baseline and the Theil-Sen trend over the window (percent per hour),
//! which a single late sample cannot move much.

use serde::{Deserialize, Serialize};

use super::{Sample, SoakReport};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Growth {
    pub metric: String,
    pub baseline: f64,
    pub baseline_at_s: f64,
    pub last: f64,
    pub max: f64,
    pub growth_percent: f64,
    pub max_growth_percent: f64,
    pub trend_percent_per_hour: f64,
    pub goal_percent: f64,
    pub pass: bool,
}

/// The interval p99s after the warm-up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct P99Stability {
    pub intervals: usize,
    pub min_us: f64,
    pub median_us: f64,
    pub max_us: f64,
    /// max / median: 1 is perfectly steady.
    pub max_over_median: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// RSS, fds, threads; empty when the window holds fewer than two samples.
    pub growth: Vec<Growth>,
    pub p99: Option<P99Stability>,
    pub unexpected_errors: u64,
    /// What failed, growth apart.
    pub failures: Vec<String>,
}

impl Verdict {
    /// None: not judged (too few samples after the warm-up).
    pub fn growth_pass(&self) -> Option<bool> {
        (!self.growth.is_empty()).then(|| self.growth.iter().all(|g| g.pass))
    }

    /// Every failure; growth's only when `growth_gate`.
    pub fn all_failures(&self, growth_gate: bool) -> Vec<String> {
        let mut out = self.failures.clone();
        if growth_gate {
            match self.growth_pass() {
                None => out.push("growth not judged: fewer than two samples after the warm-up".to_owned()),
                Some(false) => {
                    for g in self.growth.iter().filter(|g| !g.pass) {
                        out.push(format!(
                            "{} grew {:.1} % over the growth window (goal under {} %)",
                            g.metric, g.growth_percent, g.goal_percent
                        ));
                    }
                }
                Some(true) => {}
            }
        }
        out
    }
}

/// Growth of `metric` over `window` (samples at or after the warm-up).
pub fn growth(metric: &str, window: &[&Sample], value: impl Fn(&Sample) -> f64, goal_percent: f64) -> Option<Growth> {
    let (first, last) = (window.first()?, window.last()?);
    if window.len() < 2 {
        return None;
    }
    let baseline = value(first);
    let percent = |v: f64| if baseline > 0.0 { 100.0 * (v - baseline) / baseline } else { 0.0 };
    let max = window.iter().map(|s| value(s)).fold(f64::MIN, f64::max);
    let points: Vec<(f64, f64)> = window.iter().map(|s| (s.t_s, value(s))).collect();
    let per_s = crate::demo::slope(&points);
    let growth_percent = percent(value(last));
    Some(Growth {
        metric: metric.to_owned(),
        baseline,
        baseline_at_s: first.t_s,
        last: value(last),
        max,
        growth_percent,
        max_growth_percent: percent(max),
        trend_percent_per_hour: if baseline > 0.0 { 100.0 * per_s * 3600.0 / baseline } else { 0.0 },
        goal_percent,
        pass: growth_percent < goal_percent,
    })
}

pub fn p99_stability(window: &[&Sample]) -> Option<P99Stability> {
    let mut p99s: Vec<f64> = window.iter().filter(|s| s.txns > 0).map(|s| s.p99_us).collect();
    if p99s.is_empty() {
        return None;
    }
    p99s.sort_by(f64::total_cmp);
    let median = p99s[p99s.len() / 2];
    let max = p99s[p99s.len() - 1];
    Some(P99Stability {
        intervals: p99s.len(),
        min_us: p99s[0],
        median_us: median,
        max_us: max,
        max_over_median: if median > 0.0 { max / median } else { 0.0 },
    })
}

/// Judges `report` (samples, errors, counts, end checks, server stop).
pub fn judge(report: &SoakReport, goal_percent: f64) -> Verdict {
    // Samples are taken at whole multiples of the interval: a small
    // tolerance keeps the one due at the warm-up's end.
    let window: Vec<&Sample> = report.samples.iter().filter(|s| s.t_s + 0.5 >= report.warmup_s).collect();
    let growth = [
        growth("RSS", &window, |s| s.rss_bytes as f64, goal_percent),
        growth("open fds", &window, |s| s.fds as f64, goal_percent),
        growth("threads", &window, |s| s.threads as f64, goal_percent),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut failures = Vec::new();
    let unexpected = report.unexpected_errors();
    if unexpected > 0 {
        let codes: Vec<String> = report
            .errors
            .iter()
            .filter(|e| !e.expected)
            .map(|e| format!("{} {} x{}", e.source, e.sqlstate, e.count))
            .collect();
        failures.push(format!("{unexpected} unexpected client errors ({})", codes.join(", ")));
    }
    if report.anomalies_total > 0 {
        failures.push(format!("{} failed checks (see Anomalies)", report.anomalies_total));
    }
    if let Some(why) = &report.server_died {
        failures.push(format!("the server died during the run: {why}"));
    }
    let a = &report.activity;
    for (n, what, activity) in [
        (report.tatp_total, "TATP transactions after the warm-up", "tatp"),
        (a.cycles, "cache-group cycles", "cycles"),
        (a.churn_clean, "churn sessions", "churn"),
        (a.churn_wrong_password, "wrong-password attempts refused with 28P01", "churn"),
        (a.churn_abrupt, "sessions abandoned mid-transaction", "churn"),
        (a.cancels_confirmed, "cancels answered with 57014", "cancels"),
    ] {
        if n == 0 && !report.interrupted && !report.without.iter().any(|w| w == activity) {
            failures.push(format!("no {what}"));
        }
    }
    match &report.end {
        Some(end) if !end.drained => {
            failures.push(format!("write-through did not drain within {:.0} s after the load", end.drain_s))
        }
        Some(end) if end.verify_clean == Some(false) => {
            failures.push(format!("VERIFY CACHE GROUP found differences: {}", end.verify_message))
        }
        _ => {}
    }
    if let Some(stop) = &report.server_stop
        && stop != "clean"
    {
        failures.push(format!("the server's stop: {stop}"));
    }
    Verdict { growth, p99: p99_stability(&window), unexpected_errors: unexpected, failures }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(t_s: f64, rss: u64, p99_us: f64) -> Sample {
        Sample { t_s, rss_bytes: rss, fds: 20, threads: 10, txns: 5, p99_us, ..Sample::default() }
    }

    #[test]
    fn growth_is_last_against_first_after_warmup() {
        let samples = [at(10.0, 100, 1.0), at(20.0, 200, 1.0), at(30.0, 205, 1.0), at(40.0, 209, 1.0)];
        let window: Vec<&Sample> = samples.iter().filter(|s| s.t_s >= 20.0).collect();
        let g = growth("RSS", &window, |s| s.rss_bytes as f64, 5.0).unwrap();
        assert_eq!(g.baseline, 200.0);
        assert!((g.growth_percent - 4.5).abs() < 1e-9 && g.pass);
        let g = growth("RSS", &window, |s| s.rss_bytes as f64, 4.0).unwrap();
        assert!(!g.pass);
        assert!(growth("RSS", &window[..1], |s| s.rss_bytes as f64, 5.0).is_none());
    }

    #[test]
    fn judged_report() {
        let mut report = SoakReport { warmup_s: 20.0, ..SoakReport::default() };
        report.samples = vec![at(10.0, 100, 9.0), at(20.0, 100, 1.0), at(30.0, 101, 3.0), at(40.0, 102, 2.0)];
        let v = judge(&report, 5.0);
        assert_eq!(v.growth.len(), 3);
        assert_eq!(v.growth_pass(), Some(true));
        let p = v.p99.unwrap();
        assert_eq!((p.intervals, p.median_us, p.max_us), (3, 2.0, 3.0));
        // Nothing else happened: every activity is missing.
        assert!(v.failures.iter().any(|f| f.contains("cancels")), "{:?}", v.failures);
        let without = SoakReport { without: vec!["cancels".into()], ..report.clone() };
        assert!(!judge(&without, 5.0).failures.iter().any(|f| f.contains("cancels")));
        report.samples.push(at(50.0, 150, 1.0));
        let v = judge(&report, 5.0);
        assert_eq!(v.growth_pass(), Some(false));
        assert!(v.all_failures(true).iter().any(|f| f.starts_with("RSS grew 50.0 %")));
        assert_eq!(v.all_failures(false).len(), v.failures.len());
    }
}
