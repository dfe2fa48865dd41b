//! Write-through's figures as the demo reports them: the commit-in-cache to
//! commit-in-PostgreSQL latency of each propagated transaction (from the
//! AWT lag histogram, per one-second monitoring window), the backlog of WAL
//! not yet propagated, and whether propagation kept up over a span (a run's
//! measure window, a rate-search step).
//!
//! "Flat" is decided on the backlog, not on a lag figure: it is flat when
//! its slope over the span is at most [`FLAT_SLOPE_SHARE`] of the rate at
//! which the cache wrote WAL (the write rate offered to write-through), and
//! nothing was stuck: a monitoring window with a backlog throughout that
//! applied no transaction is stuck, and stuck is never flat. (The age of
//! the newest applied commit, which is 0 when nothing has been applied,
//! would call stuck propagation flat.) The slope is Theil-Sen's, the median
//! of the slopes between every two samples: a backlog that keeps pace
//! hovers within a batch or two, and one batch delayed by a busy machine
//! near the end of a span would tilt a least-squares line past 1 % on its
//! own; a backlog that really grows tilts every pair.

use pgtier_cache::LagCounts;
use serde::{Deserialize, Serialize};

/// The backlog may grow by at most this share of the offered write rate.
pub const FLAT_SLOPE_SHARE: f64 = 0.01;
/// Length of a monitoring window, seconds.
pub const WINDOW_S: f64 = 1.0;

/// Write-through at one moment (every monitor tick).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LagSample {
    /// Seconds since the demo started.
    pub t_s: f64,
    pub phase: String,
    /// WAL committed in the cache and not yet propagated.
    pub backlog_bytes: u64,
    /// WAL the cache has written so far (its durable end).
    pub written_bytes: u64,
    /// Transactions applied to PostgreSQL so far.
    pub applied_txns: u64,
}

/// One monitoring window: what write-through applied in it and how late.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LagWindow {
    pub from_s: f64,
    pub to_s: f64,
    pub phase: String,
    pub applied_txns: u64,
    /// Commit in the cache to commit in PostgreSQL of the transactions
    /// applied in the window (bucket upper bounds, about 19 % resolution;
    /// the max is exact when it was the largest so far).
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    /// Backlog at the window's end, and the least seen in it.
    pub backlog_bytes: u64,
    pub backlog_min_bytes: u64,
    /// WAL the cache wrote in the window.
    pub written_bytes: u64,
}

impl LagWindow {
    /// A backlog throughout and nothing applied.
    pub fn stuck(&self) -> bool {
        self.backlog_min_bytes > 0 && self.applied_txns == 0
    }
}

/// Write-through over a span of the demo.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LagFigures {
    pub from_s: f64,
    pub to_s: f64,
    pub windows: u32,
    pub applied_txns: u64,
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    pub backlog_start_bytes: u64,
    pub backlog_end_bytes: u64,
    pub backlog_max_bytes: u64,
    /// Theil-Sen slope of the backlog over the span.
    pub backlog_slope_bytes_per_s: f64,
    /// The rate the cache wrote WAL at: what write-through was offered.
    pub written_bytes_per_s: f64,
    /// Monitoring windows with a backlog throughout and nothing applied.
    pub stuck_windows: u32,
    pub flat: bool,
}

impl LagFigures {
    pub fn verdict(&self) -> &'static str {
        if self.stuck_windows > 0 {
            "stuck"
        } else if self.flat {
            "flat"
        } else {
            "backlog grows"
        }
    }
}

/// Theil-Sen slope of (t, y): the median of the slopes between every two
/// points with distinct t; 0 for fewer than two.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let mut slopes: Vec<f64> = Vec::with_capacity(points.len() * points.len().saturating_sub(1) / 2);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 != a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    if slopes.is_empty() {
        return 0.0;
    }
    slopes.sort_by(f64::total_cmp);
    let mid = slopes.len() / 2;
    if slopes.len() % 2 == 1 { slopes[mid] } else { (slopes[mid - 1] + slopes[mid]) / 2.0 }
}

/// The figures of `[from_s, to_s]`: samples inside it, windows whose middle
/// is inside it (with their lag counts). None without samples.
pub fn figures(
    samples: &[LagSample],
    windows: &[(LagWindow, LagCounts)],
    from_s: f64,
    to_s: f64,
) -> Option<LagFigures> {
    let inside: Vec<&LagSample> = samples.iter().filter(|s| s.t_s >= from_s && s.t_s <= to_s).collect();
    let (first, last) = (inside.first()?, inside.last()?);
    let spans: Vec<&(LagWindow, LagCounts)> = windows
        .iter()
        .filter(|(w, _)| (w.from_s + w.to_s) / 2.0 >= from_s && (w.from_s + w.to_s) / 2.0 <= to_s)
        .collect();
    let mut counts = LagCounts::default();
    for (_, c) in &spans {
        counts.merge(c);
    }
    let points: Vec<(f64, f64)> = inside.iter().map(|s| (s.t_s, s.backlog_bytes as f64)).collect();
    let backlog_slope = slope(&points);
    let elapsed = last.t_s - first.t_s;
    let written_per_s =
        if elapsed > 0.0 { last.written_bytes.saturating_sub(first.written_bytes) as f64 / elapsed } else { 0.0 };
    let stuck = spans.iter().filter(|(w, _)| w.stuck()).count() as u32;
    Some(LagFigures {
        from_s,
        to_s,
        windows: spans.len() as u32,
        applied_txns: last.applied_txns.saturating_sub(first.applied_txns),
        lag_p50_ms: counts.quantile_us(0.5) / 1000.0,
        lag_p99_ms: counts.quantile_us(0.99) / 1000.0,
        lag_max_ms: counts.max_us as f64 / 1000.0,
        backlog_start_bytes: first.backlog_bytes,
        backlog_end_bytes: last.backlog_bytes,
        backlog_max_bytes: inside.iter().map(|s| s.backlog_bytes).max().unwrap_or(0),
        backlog_slope_bytes_per_s: backlog_slope,
        written_bytes_per_s: written_per_s,
        stuck_windows: stuck,
        flat: stuck == 0 && backlog_slope <= FLAT_SLOPE_SHARE * written_per_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_and_of_noise() {
        let line: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), 3.0 * f64::from(i) + 1.0)).collect();
        assert!((slope(&line) - 3.0).abs() < 1e-9);
        let flat: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), if i % 2 == 0 { 5.0 } else { 6.0 })).collect();
        assert!(slope(&flat).abs() < 0.2);
        assert_eq!(slope(&[(1.0, 2.0)]), 0.0);
        // One spike at the end does not tilt it; a steady rise does.
        let mut spiked = flat.clone();
        spiked.push((10.0, 60.0));
        assert!(slope(&spiked).abs() < 0.2, "{}", slope(&spiked));
    }

    /// Samples every 250 ms for 4 s: the cache writes 100 kB/s, the backlog
    /// follows `backlog(t)`, write-through applies `applied(t)` so far.
    fn run(
        backlog: impl Fn(f64) -> u64,
        applied: impl Fn(f64) -> u64,
    ) -> (Vec<LagSample>, Vec<(LagWindow, LagCounts)>) {
        let samples: Vec<LagSample> = (0..=16)
            .map(|i| {
                let t = f64::from(i) * 0.25;
                LagSample {
                    t_s: t,
                    phase: "p".into(),
                    backlog_bytes: backlog(t),
                    written_bytes: (100_000.0 * t) as u64,
                    applied_txns: applied(t),
                }
            })
            .collect();
        let windows = (0..4)
            .map(|w| {
                let at = |t: f64| samples.iter().find(|s| (s.t_s - t).abs() < 1e-9).cloned().unwrap_or_default();
                let (start, end) = (at(f64::from(w)), at(f64::from(w) + 1.0));
                let min = samples
                    .iter()
                    .filter(|s| s.t_s >= start.t_s && s.t_s <= end.t_s)
                    .map(|s| s.backlog_bytes)
                    .min()
                    .unwrap_or(0);
                let window = LagWindow {
                    from_s: start.t_s,
                    to_s: end.t_s,
                    applied_txns: end.applied_txns - start.applied_txns,
                    backlog_bytes: end.backlog_bytes,
                    backlog_min_bytes: min,
                    ..LagWindow::default()
                };
                (window, LagCounts::default())
            })
            .collect();
        (samples, windows)
    }

    #[test]
    fn flat_means_the_backlog_keeps_pace_and_nothing_is_stuck() {
        // Keeping up: the backlog hovers around a batch.
        let (s, w) = run(|t| if ((t * 4.0) as u64).is_multiple_of(2) { 500 } else { 1500 }, |t| (t * 100.0) as u64);
        let f = figures(&s, &w, 0.0, 4.0).unwrap_or_default();
        assert!(f.flat && f.verdict() == "flat", "{f:?}");
        assert!((f.written_bytes_per_s - 100_000.0).abs() < 1.0);
        // Falling behind by 2 % of the write rate.
        let (s, w) = run(|t| (2_000.0 * t) as u64, |t| (t * 100.0) as u64);
        let f = figures(&s, &w, 0.0, 4.0).unwrap_or_default();
        assert!(!f.flat && f.verdict() == "backlog grows", "{f:?}");
        // Stuck: a constant backlog (slope 0) and nothing applied since t = 2.
        let (s, w) = run(|_| 40_000, |t| (t.min(2.0) * 100.0) as u64);
        let f = figures(&s, &w, 0.0, 4.0).unwrap_or_default();
        assert!(f.backlog_slope_bytes_per_s.abs() < 1.0 && f.stuck_windows == 2, "{f:?}");
        assert!(!f.flat && f.verdict() == "stuck");
        // Idle with an empty backlog is flat, not stuck.
        let (s, w) = run(|_| 0, |_| 7);
        let f = figures(&s, &w, 0.0, 4.0).unwrap_or_default();
        assert!(f.flat && f.stuck_windows == 0, "{f:?}");
        assert!(figures(&s, &w, 10.0, 11.0).is_none());
    }
}
