//! The rate cap of study 000: step the offered rate (open loop, direct
//! mode) and watch write-through; the highest rate at which it stays flat
//! (its backlog does not grow and nothing is stuck: `lag`) is pgtier's
//! sustainable throughput, the most PostgreSQL absorbs behind the cache.
//! Both sides then run at that rate, bounded by what PostgreSQL alone
//! sustains, so latencies are compared at equal throughput.

use std::sync::Arc;

use pgtier_cache::Cache;
use serde::{Deserialize, Serialize};

use super::{BASELINE, CapDecision, Demo, DemoError, DirectDrain, LagFigures};
use crate::target::Target;

/// Rate of the first step, as a fraction of PostgreSQL's peak.
const FIRST_STEP_OF_PEAK: f64 = 0.5;
/// Each step offers this many times the previous one while lag stays flat.
const STEP_FACTOR: f64 = 2.0;
/// A step whose achieved rate falls below this share of the offered one is
/// limited by the client side, not by write-through.
const ACHIEVED_MIN: f64 = 0.95;
/// The lowest rate ever offered (txn/s).
const RATE_MIN: f64 = 10.0;

/// One step of the search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchStep {
    pub offered_per_s: f64,
    pub achieved_per_s: f64,
    pub missed: u64,
    /// Write-through over the step's measure window (None: not sampled,
    /// which is never flat).
    pub lag: Option<LagFigures>,
    pub flat: bool,
    /// The client could not offer the rate (achieved < 95 % or missed > 0).
    pub client_bound: bool,
    pub drain_s: f64,
}

/// Searches the highest flat rate and returns the rate the cache sides run
/// at: PostgreSQL's capped rate `pg_rate`, or lower when write-through
/// cannot keep up with it.
pub(super) fn run(
    demo: &mut Demo<'_, '_>,
    target: &dyn Target,
    cache: &Arc<Cache>,
    pg_rate: f64,
) -> Result<f64, DemoError> {
    let peak = demo.report.run(BASELINE).map_or(0.0, |r| r.iterations.iter().map(|i| i.mqth_mean).fold(0.0, f64::max));
    let mut rate = (peak * FIRST_STEP_OF_PEAK).max(RATE_MIN);
    let (mut flat_max, mut too_high): (Option<f64>, Option<f64>) = (None, None);
    for _ in 0..demo.o.search_steps_max {
        let step = one_step(demo, target, cache, rate)?;
        let ok = step.flat && !step.client_bound;
        demo.report.search.push(step);
        if ok {
            flat_max = Some(rate);
        } else {
            too_high = Some(rate);
        }
        // Doubling until a step fails, then one step between the last good
        // and the first bad rate (geometric middle).
        rate = match (flat_max, too_high) {
            (Some(good), Some(bad)) if bad > good * 1.2 => (good * bad).sqrt(),
            (Some(_), Some(_)) => break,
            (Some(good), None) => good * STEP_FACTOR,
            (None, Some(bad)) => (bad / STEP_FACTOR).max(RATE_MIN),
            (None, None) => break,
        };
        if demo.report.search.iter().any(|s| (s.offered_per_s - rate).abs() < 1e-6) {
            break;
        }
    }
    let (rate, reason) = match flat_max {
        Some(flat) if flat < pg_rate => (
            flat,
            "pgtier's sustainable throughput (the highest rate at which write-through stayed flat), below PostgreSQL's capped rate".to_owned(),
        ),
        Some(_) => (
            pg_rate,
            format!(
                "the rate PostgreSQL alone ran at ({:.0} % of its best closed-loop MQTh{}); write-through kept up with more",
                100.0 * demo.o.cap_fraction,
                demo.report.cap.as_ref().map_or(String::new(), |c| if c.saturated.is_empty() { String::new() } else { format!(", lowered {} time(s) while it saturated", c.saturated.len()) })
            ),
        ),
        None => (
            (demo.report.search.iter().map(|s| s.offered_per_s).fold(f64::INFINITY, f64::min) / STEP_FACTOR).min(pg_rate).max(RATE_MIN),
            "no searched rate kept write-through flat: half the lowest step".to_owned(),
        ),
    };
    let cap = demo.report.cap.get_or_insert_with(CapDecision::default);
    cap.flat_max_per_s = flat_max;
    cap.baseline_peak_per_s = peak;
    cap.rate_per_s = rate;
    cap.reason = reason;
    Ok(rate)
}

fn one_step(
    demo: &mut Demo<'_, '_>,
    target: &dyn Target,
    cache: &Arc<Cache>,
    rate: f64,
) -> Result<SearchStep, DemoError> {
    let threads = demo.o.threads.iter().copied().max().unwrap_or(1);
    let mut spec = demo.spec(threads, Some(rate), demo.o.search_step, 1);
    spec.ramp_down = std::time::Duration::ZERO;
    let (tally, span) = demo.measure(target, &spec, "rate search")?;
    let lag = demo.monitor.lag_over(span.from_s, span.to_s);
    let schedule = tally.schedule.clone().unwrap_or_default();
    let achieved = tally.mqth();
    let client_bound = achieved < ACHIEVED_MIN * rate || schedule.missed > 0;
    let drain_started = std::time::Instant::now();
    demo.drain(&DirectDrain(cache), &format!("search step at {rate:.0} txn/s"))?;
    Ok(SearchStep {
        offered_per_s: rate,
        achieved_per_s: achieved,
        missed: schedule.missed,
        flat: lag.as_ref().is_some_and(|l| l.flat),
        lag,
        client_bound,
        drain_s: drain_started.elapsed().as_secs_f64(),
    })
}
