//! The measured runs: the closed-loop sweeps, the open-loop runs at the
//! capped rate (each [`DemoOptions::repeats`] times), and what is recorded
//! around each: its figures, the late wakes of its load generator, and,
//! behind the cache, write-through over its measure window and the wait
//! for it to catch up afterwards.

use std::ops::RangeInclusive;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{
    BASELINE, BASELINE_CAPPED, CapDecision, Demo, DemoError, DemoOptions, Drain, Drainer, LateWakes, RunLag, markdown,
};
use crate::driver::{self, LiveCounters, LoadSpec, RepetitionTally};
use crate::report;
use crate::result::{RunConfig, RunResult};
use crate::target::{DbError, Target};
use crate::tatp::random::SubscriberKeys;
use crate::tatp::transactions::TxnType;
use crate::tatp::{self, RunFacts, TatpWorkload};

/// PostgreSQL counts as saturated at the capped rate when its average is
/// above this many times its single-client closed-loop average.
pub(super) const SATURATED: f64 = 10.0;
/// Tries of the capped rate on PostgreSQL alone, each lower by [`CAP_BACKOFF`].
const CAP_ATTEMPTS: u32 = 3;
const CAP_BACKOFF: f64 = 0.6;
/// A capped run's threads sustain at least this many times the rate closed
/// loop (the rate is at most 80 % of their capacity).
const HEADROOM: f64 = 1.25;

/// A measure window in the monitor's time (seconds since the demo started).
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub from_s: f64,
    pub to_s: f64,
}

impl Demo<'_, '_> {
    /// The closed-loop thread sweep against `target`, recorded as `label`.
    pub(super) fn sweep(
        &mut self,
        target: &dyn Target,
        label: &str,
        drain: Option<&dyn Drainer>,
    ) -> Result<(), DemoError> {
        let run = self.new_run(target, label, None)?;
        self.report.runs.push(run);
        for &threads in &self.o.threads.clone() {
            let spec = self.spec(threads, None, self.o.measure, 1);
            let (tally, span) = self.measure(target, &spec, label)?;
            self.record(label, threads, tally);
            self.after_run(label, threads, 1, span, drain)?;
        }
        Ok(())
    }

    /// Threads of every capped run: the fewest of the sweep with which
    /// PostgreSQL alone sustains at least [`HEADROOM`] times `rate` closed
    /// loop, else the most. The same for all sides (same clients); no more
    /// than PostgreSQL needs, since idle threads on two cores only add
    /// scheduling noise to the cache's µs latencies.
    fn capped_threads(&self, rate: f64) -> u32 {
        let most = self.o.threads.iter().copied().max().unwrap_or(1);
        let Some(run) = self.report.run(BASELINE) else { return most };
        let mut sweep: Vec<(u32, f64)> = run.iterations.iter().map(|i| (i.threads, i.mqth_mean)).collect();
        sweep.sort_by_key(|(t, _)| *t);
        sweep.iter().find(|(_, mqth)| *mqth >= HEADROOM * rate).map_or(most, |(t, _)| *t)
    }

    /// Repetitions `reps` of the open-loop run at `rate`, recorded as
    /// `label` (created by the first repetition), each followed by the
    /// drain when the target is behind the cache.
    pub(super) fn capped(
        &mut self,
        target: &dyn Target,
        label: &str,
        rate: f64,
        drain: Option<&dyn Drainer>,
        reps: RangeInclusive<u32>,
    ) -> Result<(), DemoError> {
        let threads = self.capped_threads(rate);
        if *reps.start() <= 1 {
            let run = self.new_run(target, label, Some(rate))?;
            self.report.runs.push(run);
        }
        for rep in reps {
            let spec = self.spec(threads, Some(rate), self.o.measure, rep);
            let (tally, span) = self.measure(target, &spec, &format!("{label} ({rep}/{})", self.o.repeats))?;
            self.record(label, threads, tally);
            self.after_run(label, threads, rep, span, drain)?;
        }
        Ok(())
    }

    /// PostgreSQL alone, open loop at `cap_fraction` of its best
    /// closed-loop MQTh, lowered (x[`CAP_BACKOFF`]) while it cannot take
    /// that rate on this machine right now: its first repetition's average
    /// above [`SATURATED`] times its single-client closed-loop average
    /// (which already pays a WAL flush per write; beyond that, open loop
    /// measures its queue, not its service). Returns the rate it ran at.
    pub(super) fn capped_baseline(&mut self, pg: &dyn Target) -> Result<f64, DemoError> {
        let sweep = self.report.run(BASELINE).map(|b| b.iterations.clone()).unwrap_or_default();
        let peak = sweep.iter().map(|i| i.mqth_mean).fold(0.0, f64::max);
        let single = sweep.iter().min_by_key(|i| i.threads).and_then(|it| {
            markdown::mean_latency_us(&RunResult { iterations: vec![it.clone()], ..RunResult::default() })
        });
        let mut rate = (self.o.cap_fraction * peak).max(1.0);
        let mut saturated = Vec::new();
        for attempt in 1..=CAP_ATTEMPTS {
            self.capped(pg, BASELINE_CAPPED, rate, None, 1..=1)?;
            let capped = self.report.run(BASELINE_CAPPED).and_then(markdown::mean_latency_us).unwrap_or(0.0);
            if !single.is_some_and(|one| capped > SATURATED * one) || attempt == CAP_ATTEMPTS {
                break;
            }
            self.forget(BASELINE_CAPPED);
            saturated.push((rate, capped));
            rate *= CAP_BACKOFF;
        }
        self.capped(pg, BASELINE_CAPPED, rate, None, 2..=self.o.repeats)?;
        self.report.cap =
            Some(CapDecision { baseline_peak_per_s: peak, rate_per_s: rate, saturated, ..CapDecision::default() });
        Ok(rate)
    }

    /// When write-through's flat maximum set the cap below the rate
    /// PostgreSQL alone ran at, PostgreSQL runs once more at the cap, so
    /// every side is compared at one throughput. Last, after verify: its
    /// writes to the cached rows no longer meet a cache that is measured.
    pub(super) fn rebaseline(&mut self, pg: &dyn Target, rate: f64) -> Result<(), DemoError> {
        let ran_at = self.report.run(BASELINE_CAPPED).and_then(|run| run.config.rate_per_s);
        if ran_at.is_none_or(|ran_at| ran_at <= rate) {
            return Ok(());
        }
        self.monitor.detail(format!("PostgreSQL alone again, at the capped {rate:.0} txn/s"));
        self.forget(BASELINE_CAPPED);
        self.report.rebaselined = true;
        self.capped(pg, BASELINE_CAPPED, rate, None, 1..=self.o.repeats)
    }

    /// Drops everything recorded under `label` (a discarded run).
    fn forget(&mut self, label: &str) {
        self.report.runs.retain(|r| r.label != label);
        self.report.late_wakes.retain(|l| l.label != label);
        self.report.run_lag.retain(|l| l.label != label);
        self.tallies.retain(|((l, _), _)| l != label);
    }

    pub(super) fn spec(&self, threads: u32, rate_per_s: Option<f64>, measure: Duration, repetition: u32) -> LoadSpec {
        spec(self.o, threads, rate_per_s, measure, repetition)
    }

    fn workload(&self) -> TatpWorkload {
        TatpWorkload { keys: SubscriberKeys::new(1, self.o.cached_subscribers, false) }
    }

    /// One repetition, with the progress line and Ctrl-C wired in; returns
    /// its tally and its measure window in the monitor's time.
    pub(super) fn measure(
        &self,
        target: &dyn Target,
        spec: &LoadSpec,
        label: &str,
    ) -> Result<(RepetitionTally, Span), DemoError> {
        let live = LiveCounters::default();
        let mode = spec.rate_per_s.map_or_else(|| "closed loop".to_owned(), |r| format!("{r:.0} txn/s offered"));
        let title = format!("{label}: {} threads, {mode}", spec.threads);
        let total = spec.ramp_up + spec.measure + spec.ramp_down;
        let (mut last_n, mut last_t) = (0u64, Duration::ZERO);
        let mut t0_s: Option<f64> = None;
        let result = driver::run_repetition(target, &self.workload(), spec, &live, &mut |phase, elapsed| {
            if self.control.interrupt.load(Ordering::Relaxed) {
                live.stop.store(true, Ordering::Relaxed);
            }
            if t0_s.is_none() && phase != driver::Phase::Connecting {
                t0_s = Some(self.monitor.now_s() - elapsed.as_secs_f64());
            }
            let n = live.finished.load(Ordering::Relaxed);
            let dt = elapsed.saturating_sub(last_t).as_secs_f64();
            let rate = if dt > 0.0 { n.saturating_sub(last_n) as f64 / dt } else { 0.0 };
            (last_n, last_t) = (n, elapsed);
            let pct = 100.0 * elapsed.as_secs_f64() / total.as_secs_f64().max(1e-9);
            self.monitor.detail(format!("{title} · {phase:?} {pct:.0} % · {rate:.0} txn/s"));
        });
        self.interrupted()?;
        let tally = result.map_err(|e| self.fail()(DbError::new(None, format!("{title}: {e}"))))?;
        let from_s = t0_s.unwrap_or_else(|| self.monitor.now_s() - total.as_secs_f64()) + spec.ramp_up.as_secs_f64();
        Ok((tally, Span { from_s, to_s: from_s + spec.measure.as_secs_f64() }))
    }

    pub(super) fn new_run(&self, target: &dyn Target, label: &str, rate: Option<f64>) -> Result<RunResult, DemoError> {
        let durability = target.durability().map_err(self.fail())?;
        let mut deviations = tatp::deviations(&RunFacts {
            uniform: false,
            populated_now: true,
            parallel_load_streams: self.o.populate_streams,
            load_method: "COPY",
            keys_with_tables: false,
            windows_per_population: u32::try_from(self.o.threads.len()).unwrap_or(u32::MAX),
            open_loop: rate.is_some(),
            measure_s: self.o.measure.as_secs_f64(),
            durability: durability.clone(),
        });
        if !label.starts_with(BASELINE) {
            deviations.push(
                "write-through is asynchronous (AWT): an acknowledged commit reaches PostgreSQL, the system of record, \
                 only after the commit-to-PostgreSQL lag reported for the run; until then it is only in the pgtier \
                 node's WAL (PostgreSQL alone has it at the acknowledgement)"
                    .to_owned(),
            );
        }
        Ok(RunResult {
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: report::now_rfc3339(),
            label: label.to_owned(),
            config: RunConfig {
                workload: "tatp".to_owned(),
                target: target.describe(),
                subscribers: self.o.subscribers,
                min_subscriber_id: 1,
                max_subscriber_id: self.o.cached_subscribers,
                key_distribution: "nurand".to_owned(),
                rate_per_s: rate,
                duration_s: self.o.measure.as_secs_f64(),
                ramp_up_s: self.o.ramp_up.as_secs_f64(),
                ramp_down_s: self.o.ramp_down.as_secs_f64(),
                repetitions: if rate.is_some() { self.o.repeats } else { 1 },
                durability,
                isolation: "read committed".to_owned(),
                deviations,
            },
            machine: self.report.machine.clone(),
            iterations: Vec::new(),
        })
    }

    /// Adds a repetition to the run's iteration at `threads` (histograms
    /// merged over its repetitions so far).
    fn record(&mut self, label: &str, threads: u32, tally: RepetitionTally) {
        let repetition = if let Some(s) = &tally.schedule {
            let repetition = 1 + self.report.late_wakes.iter().filter(|l| l.label == label).count() as u32;
            Some(LateWakes {
                label: label.to_owned(),
                repetition,
                late: s.late_wakes,
                intended: s.intended,
                max_us: s.max_wake_delay_us,
            })
        } else {
            None
        };
        self.report.late_wakes.extend(repetition);
        let key = (label.to_owned(), threads);
        let index = match self.tallies.iter().position(|(k, _)| *k == key) {
            Some(index) => index,
            None => {
                self.tallies.push((key, Vec::new()));
                self.tallies.len() - 1
            }
        };
        let tallies = &mut self.tallies[index].1;
        tallies.push(tally);
        let iteration = report::iteration_result(threads, tallies, &TxnType::NAMES, &TxnType::SPEC_SUCCESS, false);
        if let Some(run) = self.report.run_mut(label) {
            match run.iterations.iter_mut().find(|i| i.threads == threads) {
                Some(existing) => *existing = iteration,
                None => run.iterations.push(iteration),
            }
        }
    }

    /// Behind the cache: write-through over the measure window, and the
    /// wait for it to catch up, so the next run starts with PostgreSQL idle.
    fn after_run(
        &mut self,
        label: &str,
        threads: u32,
        repetition: u32,
        span: Span,
        drain: Option<&dyn Drainer>,
    ) -> Result<(), DemoError> {
        let Some(drainer) = drain else { return Ok(()) };
        let started = Instant::now();
        let drained = self.drain(drainer, &format!("{label} at {threads} threads (run {repetition})"))?;
        let drain_s = started.elapsed().as_secs_f64();
        let lag = self.monitor.lag_over(span.from_s, span.to_s);
        self.report.run_lag.push(RunLag { label: label.to_owned(), threads, repetition, lag, drain_s, drained });
        Ok(())
    }

    /// Waits for write-through to catch up; a drain that times out is
    /// recorded, not fatal.
    pub(super) fn drain(&mut self, drainer: &dyn Drainer, after: &str) -> Result<bool, DemoError> {
        self.monitor.detail(format!("waiting for write-through to catch up after {after}"));
        let started = Instant::now();
        let drained = drainer.drain(self.o.drain_timeout, self.control.interrupt).map_err(self.fail())?;
        self.report.drains.push(Drain { after: after.to_owned(), seconds: started.elapsed().as_secs_f64(), drained });
        self.interrupted()?;
        Ok(drained)
    }
}

/// A run's load: each repetition and thread count draws other keys.
fn spec(o: &DemoOptions, threads: u32, rate_per_s: Option<f64>, measure: Duration, repetition: u32) -> LoadSpec {
    LoadSpec {
        threads,
        rate_per_s,
        ramp_up: o.ramp_up,
        measure,
        ramp_down: o.ramp_down,
        seed: o.seed ^ (u64::from(threads) << 32) ^ rate_per_s.map_or(0, |r| r as u64) ^ (u64::from(repetition) << 48),
    }
}
