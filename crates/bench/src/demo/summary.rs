//! Figures the report and the charts derive from the runs: the median and
//! spread of a capped run's repetitions, write-through over a run, the CPU
//! of pgtier's components.

use super::{DemoReport, LagFigures, RunLag};
use crate::cpu::Component;
use crate::report::mean_backend;
use crate::result::{Iteration, Repetition, RunResult};

/// Median and range of a few repeated measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Median {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Median {
    pub fn of(values: &[f64]) -> Option<Median> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let (first, last) = (*v.first()?, *v.last()?);
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 };
        Some(Median { median, min: first, max: last, n: v.len() })
    }
}

/// Executions-weighted mean latency (µs) of one repetition, over all its
/// transactions: from the intended start, or (`from_wake`) from the load
/// generator's wake-up.
pub fn repetition_mean_us(rep: &Repetition, from_wake: bool) -> Option<f64> {
    let mut n = 0u64;
    let mut sum = 0.0;
    for t in &rep.transactions {
        let avg = if from_wake { t.latency_from_wake_us.as_ref()?.avg } else { t.latency_us.avg };
        n += t.executed;
        sum += t.executed as f64 * avg;
    }
    (n > 0).then(|| sum / n as f64)
}

/// The first iteration of a run (capped runs have one).
pub fn first(run: Option<&RunResult>) -> Option<&Iteration> {
    run?.iterations.first()
}

/// Mean latency of a run's repetitions: median and spread.
pub fn latency(run: Option<&RunResult>, from_wake: bool) -> Option<Median> {
    let means: Vec<f64> = first(run)?.repetitions.iter().filter_map(|r| repetition_mean_us(r, from_wake)).collect();
    Median::of(&means)
}

/// PostgreSQL ÷ pgtier: the ratio of the medians, and its range from the
/// least favourable pairing (PostgreSQL's fastest over pgtier's slowest) to
/// the most favourable.
pub fn ratio(postgres: &Median, pgtier: &Median) -> Option<Median> {
    (pgtier.median > 0.0 && pgtier.min > 0.0 && pgtier.max > 0.0).then(|| Median {
        median: postgres.median / pgtier.median,
        min: postgres.min / pgtier.max,
        max: postgres.max / pgtier.min,
        n: postgres.n.min(pgtier.n),
    })
}

/// The repetitions' write-through figures of `label` at its capped threads.
pub fn capped_lags<'a>(report: &'a DemoReport, label: &str) -> Vec<&'a RunLag> {
    let Some(threads) = first(report.run(label)).map(|i| i.threads) else { return Vec::new() };
    report.lags(label, threads)
}

/// Write-through over several windows: the medians of p50 and p99, the
/// largest max and backlog, flat only when every window was.
pub fn combined(lags: &[&RunLag]) -> Option<LagFigures> {
    let all: Vec<&LagFigures> = lags.iter().filter_map(|l| l.lag.as_ref()).collect();
    let median =
        |f: fn(&LagFigures) -> f64| Median::of(&all.iter().map(|l| f(l)).collect::<Vec<_>>()).map_or(0.0, |m| m.median);
    let last = *all.last()?;
    Some(LagFigures {
        from_s: all.first().map_or(0.0, |l| l.from_s),
        to_s: last.to_s,
        windows: all.iter().map(|l| l.windows).sum(),
        applied_txns: all.iter().map(|l| l.applied_txns).sum(),
        lag_p50_ms: median(|l| l.lag_p50_ms),
        lag_p99_ms: median(|l| l.lag_p99_ms),
        lag_max_ms: all.iter().map(|l| l.lag_max_ms).fold(0.0, f64::max),
        backlog_start_bytes: all.first().map_or(0, |l| l.backlog_start_bytes),
        backlog_end_bytes: last.backlog_end_bytes,
        backlog_max_bytes: all.iter().map(|l| l.backlog_max_bytes).max().unwrap_or(0),
        backlog_slope_bytes_per_s: median(|l| l.backlog_slope_bytes_per_s),
        written_bytes_per_s: median(|l| l.written_bytes_per_s),
        stuck_windows: all.iter().map(|l| l.stuck_windows).sum(),
        flat: all.iter().all(|l| l.flat),
    })
}

/// The components that are pgtier's own in a run of `label`: in direct
/// mode the application threads run pgtier's SQL and engine in-process;
/// over the wire the server does, and the clients are the load generator.
pub fn pgtier_components(label: &str) -> &'static [Component] {
    if label.starts_with(super::BASELINE) {
        &[]
    } else if label.starts_with(super::WIRE) {
        &[Component::Server, Component::Engine, Component::WriteThrough, Component::CacheBackground]
    } else {
        &[Component::Clients, Component::Engine, Component::WriteThrough, Component::CacheBackground]
    }
}

/// A component's CPU (% of one core) in a run's first iteration, averaged
/// over its repetitions; None when it had no thread.
pub fn cpu(run: Option<&RunResult>, component: Component) -> Option<f64> {
    let backend = mean_backend(first(run)?)?;
    backend.process_cpu.iter().find(|s| s.component == component.name()).map(|s| s.percent)
}

/// pgtier's own CPU in a run (None for PostgreSQL alone or when not sampled).
pub fn pgtier_cpu(run: Option<&RunResult>) -> Option<f64> {
    let components = pgtier_components(&run?.label);
    let backend = mean_backend(first(run)?)?;
    let shares: Vec<f64> = backend
        .process_cpu
        .iter()
        .filter(|s| components.iter().any(|c| c.name() == s.component))
        .map(|s| s.percent)
        .collect();
    (!components.is_empty() && !backend.process_cpu.is_empty()).then(|| shares.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_ratio_spread() {
        let pg = Median::of(&[900.0, 1000.0, 1100.0]).unwrap_or_default();
        assert_eq!((pg.median, pg.min, pg.max, pg.n), (1000.0, 900.0, 1100.0, 3));
        let even = Median::of(&[1.0, 3.0]).unwrap_or_default();
        assert_eq!(even.median, 2.0);
        assert!(Median::of(&[]).is_none());
        let cache = Median::of(&[10.0, 8.0, 12.0]).unwrap_or_default();
        let r = ratio(&pg, &cache).unwrap_or_default();
        assert_eq!(r.median, 100.0);
        assert_eq!(r.min, 75.0);
        assert!((r.max - 137.5).abs() < 1e-9);
    }
}
