//! The load driver: one worker thread per client, each owning a [`Session`],
//! closed loop (flooding, the TATP default) or open loop at a fixed total rate
//! with Poisson arrivals.
//!
//! Timeline of one repetition, shared by all workers:
//!
//! ```text
//!   t0 ── ramp-up ── measure_start ══ measure ══ measure_end ── ramp-down ── end
//! ```
//!
//! Only transactions that *start* (closed loop) or are *intended to start*
//! (open loop) inside the measure window count; they are timed to their
//! completion even if that falls into the ramp-down.
//!
//! Open loop is honest about queueing (no coordinated omission): each worker
//! follows its own Poisson schedule and a transaction's latency runs from its
//! intended start, always: when the server stalls, everything scheduled
//! during the stall is charged the wait, and when the worker itself wakes
//! late from sleeping until an intended start, that lateness is charged too.
//! In direct mode the worker thread *is* the application thread that
//! pgtier's own threads (WAL writer, write-through) and PostgreSQL compete
//! with for the CPU, so a late wake is part of what the application sees;
//! on the 2-core dev VM one wake in seven is over 100 µs late and a few in
//! ten thousand over 3 ms. A second histogram charges each transaction from
//! the worker's last wake-up instead ([`TxnTally::latency_from_wake`]): the
//! figure without the load generator's lateness, which a report may show
//! beside the first, labelled as such. Late wakes are counted
//! ([`ScheduleTally::late_wakes`]). A worker that falls behind keeps working through
//! its backlog after `end` until every in-window transaction has run (bounded
//! by [`BACKLOG_GRACE`]; anything left is reported as missed, never dropped
//! silently).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::result::{BackendFigures, LatencyUs};
use crate::stats::LatencyHistogram;
use crate::target::{BackendSampler, DbError, Session, Target};

/// How long a worker may keep executing its open-loop backlog after the
/// ramp-down ended before the rest is counted as missed.
pub const BACKLOG_GRACE: Duration = Duration::from_secs(30);
/// Delay between "all sessions ready" and t0, so every worker is waiting on
/// the same instant when the run starts.
const START_DELAY: Duration = Duration::from_millis(20);
/// A wake-up this much after its target counts as late in [`ScheduleTally`].
pub const LATE_WAKE: Duration = Duration::from_micros(100);

/// What one transaction execution produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Executed and found/changed the rows it was after.
    Found,
    /// Executed validly without finding its rows ("not found" is a valid
    /// execution in TATP, not an error).
    NotFound,
    /// An error the workload's spec accepts (TATP: unique or foreign-key
    /// violation); rolled back, excluded from throughput and latency.
    AcceptableError,
}

/// A workload the driver can run: names its transaction types and opens one
/// client per worker. Implementations keep all target specifics behind
/// [`Session`].
pub trait Workload: Sync {
    /// Transaction type names, indexed by the `usize` a client returns.
    fn transaction_names(&self) -> &[&'static str];
    /// Prepares a client on `session` for worker `thread`; `seed` makes its
    /// random choices reproducible.
    fn open_client(
        &self,
        session: Box<dyn Session>,
        thread: u32,
        seed: u64,
    ) -> Result<Box<dyn WorkloadClient>, DbError>;
}

/// One worker's view of the workload.
pub trait WorkloadClient: Send {
    /// Picks the next transaction by the workload's mix and runs it. An `Err`
    /// is fatal: the run stops and reports it.
    fn run_next(&mut self) -> Result<(usize, Outcome), DbError>;
}

/// How to drive one repetition.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadSpec {
    pub threads: u32,
    /// `None` = closed loop; `Some(r)` = open loop, r transactions/s in total.
    pub rate_per_s: Option<f64>,
    pub ramp_up: Duration,
    pub measure: Duration,
    pub ramp_down: Duration,
    pub seed: u64,
}

/// Counts and latencies of one transaction type.
#[derive(Clone, Debug, Default)]
pub struct TxnTally {
    pub executed: u64,
    pub found: u64,
    pub acceptable_errors: u64,
    /// Closed loop: from the start of the call. Open loop: from the intended start.
    pub latency: LatencyHistogram,
    /// Open loop only: from the intended start, or from the worker's last
    /// wake-up when that came later (the load generator's lateness left out).
    pub latency_from_wake: LatencyHistogram,
}

impl TxnTally {
    pub fn merge(&mut self, other: &TxnTally) {
        self.executed += other.executed;
        self.found += other.found;
        self.acceptable_errors += other.acceptable_errors;
        self.latency.merge(&other.latency);
        self.latency_from_wake.merge(&other.latency_from_wake);
    }
}

/// Open-loop bookkeeping of one worker (or all, merged).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScheduleTally {
    /// Transactions whose intended start fell inside the measure window.
    pub intended: u64,
    /// Of those, the ones that ran (executed or acceptable error).
    pub completed: u64,
    /// Of those, the ones never run because the backlog outlasted
    /// [`BACKLOG_GRACE`].
    pub missed: u64,
    /// Largest delay between intended and actual start (µs).
    pub max_start_lag_us: u64,
    /// Wakes, for an in-window transaction, more than [`LATE_WAKE`] after
    /// the intended start the worker slept until.
    pub late_wakes: u64,
    /// Largest such wake delay (µs).
    pub max_wake_delay_us: u64,
}

/// What one worker measured inside the window.
#[derive(Clone, Debug, Default)]
pub struct WorkerTally {
    pub thread: u32,
    pub txns: Vec<TxnTally>,
    pub schedule: ScheduleTally,
}

/// Everything one repetition measured, before it is summarised for a report.
#[derive(Clone, Debug)]
pub struct RepetitionTally {
    pub spec: LoadSpec,
    pub workers: Vec<WorkerTally>,
    /// Transaction tallies merged over workers.
    pub txns: Vec<TxnTally>,
    pub schedule: Option<ScheduleTally>,
    pub backend: Option<BackendFigures>,
    /// Why backend figures are missing although a sampler exists.
    pub sampler_error: Option<DbError>,
}

impl RepetitionTally {
    pub fn executed(&self) -> u64 {
        self.txns.iter().map(|t| t.executed).sum()
    }

    /// Mean qualified throughput: executed transactions per second of the
    /// measure window (acceptable errors excluded, as the spec says).
    pub fn mqth(&self) -> f64 {
        self.executed() as f64 / self.spec.measure.as_secs_f64()
    }

    /// All attempts per second, acceptable errors included: what a tool that
    /// does not separate them (pgbench) would report.
    pub fn attempts_per_s(&self) -> f64 {
        let attempts: u64 = self.txns.iter().map(|t| t.executed + t.acceptable_errors).sum();
        attempts as f64 / self.spec.measure.as_secs_f64()
    }

    pub fn worker_latency(&self, worker: &WorkerTally) -> LatencyUs {
        let mut all = LatencyHistogram::new();
        for t in &worker.txns {
            all.merge(&t.latency);
        }
        all.summary()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("thread {thread}: connecting: {source}")]
    Connect { thread: u32, source: DbError },
    #[error("thread {thread}: preparing the workload: {source}")]
    Prepare { thread: u32, source: DbError },
    #[error("thread {thread}: transaction failed, run stopped: {source}")]
    Transaction { thread: u32, source: DbError },
    #[error("invalid load: {0}")]
    Invalid(String),
    #[error("a worker thread panicked")]
    Panicked,
}

/// Live counters the caller may poll to draw progress.
#[derive(Debug, Default)]
pub struct LiveCounters {
    /// Transactions finished since t0 (all phases).
    pub finished: AtomicU64,
    /// Set by the caller to end the repetition early (Ctrl-C): workers stop
    /// at their next transaction and the tally holds what was measured.
    pub stop: AtomicBool,
}

/// Phase the run is in, for progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Connecting,
    RampUp,
    Measure,
    RampDown,
    Draining,
}

/// Runs one repetition. `on_tick` is called about every 200 ms from the
/// calling thread with the current phase (for a progress bar).
pub fn run_repetition(
    target: &dyn Target,
    workload: &dyn Workload,
    spec: &LoadSpec,
    live: &LiveCounters,
    on_tick: &mut dyn FnMut(Phase, Duration),
) -> Result<RepetitionTally, DriverError> {
    validate(spec)?;
    let shared = Shared {
        ready: Barrier::new(spec.threads as usize + 1),
        go: Barrier::new(spec.threads as usize + 1),
        t0: OnceLock::new(),
        stop: AtomicBool::new(false),
        setup_error: Mutex::new(None),
    };
    let ntxn = workload.transaction_names().len();
    let mut sampler = target.sampler();

    let (workers, backend, sampler_error) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..spec.threads)
            .map(|thread| {
                let shared = &shared;
                scope.spawn(move || worker(target, workload, spec, shared, live, thread, ntxn))
            })
            .collect();

        on_tick(Phase::Connecting, Duration::ZERO);
        shared.ready.wait();
        let t0 = Instant::now() + START_DELAY;
        let _ = shared.t0.set(t0);
        if lock(&shared.setup_error).is_some() {
            shared.stop.store(true, Ordering::Relaxed);
        }
        shared.go.wait();

        let window = Window::new(t0, spec);
        let stops = Stops { run: &shared.stop, caller: &live.stop };
        let (backend, sampler_error) = monitor(&window, &stops, sampler.as_deref_mut(), on_tick, &handles);
        let workers: Vec<_> = handles.into_iter().map(|h| h.join().map_err(|_| DriverError::Panicked)).collect();
        (workers, backend, sampler_error)
    });

    if let Some(e) = lock(&shared.setup_error).take() {
        return Err(e);
    }
    let mut tallies = Vec::with_capacity(workers.len());
    let mut first_error = None;
    for w in workers {
        match w {
            Ok(Ok(t)) => tallies.push(t),
            Ok(Err(e)) | Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }

    let mut txns: Vec<TxnTally> = (0..ntxn).map(|_| TxnTally::default()).collect();
    let mut schedule = ScheduleTally::default();
    for w in &tallies {
        for (all, t) in txns.iter_mut().zip(&w.txns) {
            all.merge(t);
        }
        schedule.intended += w.schedule.intended;
        schedule.completed += w.schedule.completed;
        schedule.missed += w.schedule.missed;
        schedule.max_start_lag_us = schedule.max_start_lag_us.max(w.schedule.max_start_lag_us);
        schedule.late_wakes += w.schedule.late_wakes;
        schedule.max_wake_delay_us = schedule.max_wake_delay_us.max(w.schedule.max_wake_delay_us);
    }
    Ok(RepetitionTally {
        spec: spec.clone(),
        workers: tallies,
        txns,
        schedule: spec.rate_per_s.map(|_| schedule),
        backend,
        sampler_error,
    })
}

/// A seed nobody chose: by default every run draws different keys, so a run
/// does not replay the inserts and deletes of the previous one on the same
/// data (which would make INSERT_CALL_FORWARDING fail and
/// DELETE_CALL_FORWARDING find nothing). Reports print it for reruns.
pub fn fresh_seed() -> u64 {
    let mut rng = SmallRng::from_os_rng();
    rng.random()
}

fn validate(spec: &LoadSpec) -> Result<(), DriverError> {
    if spec.threads == 0 {
        return Err(DriverError::Invalid("at least one thread is needed".to_owned()));
    }
    if spec.measure.is_zero() {
        return Err(DriverError::Invalid("the measure window must be longer than 0 s".to_owned()));
    }
    if let Some(rate) = spec.rate_per_s
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(DriverError::Invalid(format!("rate {rate} is not a positive number")));
    }
    Ok(())
}

struct Shared {
    ready: Barrier,
    go: Barrier,
    t0: OnceLock<Instant>,
    stop: AtomicBool,
    /// First connect/prepare failure; the run does not start if set.
    setup_error: Mutex<Option<DriverError>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A worker that panicked while holding the lock leaves valid data (an
    // Option); keep going and report the panic through its join handle.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Clone, Copy, Debug)]
struct Window {
    t0: Instant,
    measure_start: Instant,
    measure_end: Instant,
    end: Instant,
}

impl Window {
    fn new(t0: Instant, spec: &LoadSpec) -> Window {
        let measure_start = t0 + spec.ramp_up;
        let measure_end = measure_start + spec.measure;
        Window { t0, measure_start, measure_end, end: measure_end + spec.ramp_down }
    }

    fn contains(&self, t: Instant) -> bool {
        t >= self.measure_start && t < self.measure_end
    }
}

fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now);
    }
}

/// The run's own stop flag (a worker failed) and the caller's (Ctrl-C).
struct Stops<'a> {
    run: &'a AtomicBool,
    caller: &'a AtomicBool,
}

impl Stops<'_> {
    /// True once either is set; a caller's stop is passed on to the workers.
    fn requested(&self) -> bool {
        if self.caller.load(Ordering::Relaxed) {
            self.run.store(true, Ordering::Relaxed);
        }
        self.run.load(Ordering::Relaxed)
    }
}

/// The calling thread's part: progress ticks and backend sampling aligned
/// with the measure window.
fn monitor<T>(
    window: &Window,
    stop: &Stops<'_>,
    mut sampler: Option<&mut (dyn BackendSampler + '_)>,
    on_tick: &mut dyn FnMut(Phase, Duration),
    workers: &[std::thread::ScopedJoinHandle<'_, T>],
) -> (Option<BackendFigures>, Option<DbError>) {
    const TICK: Duration = Duration::from_millis(200);
    let mut sampling = false;
    let mut figures = None;
    let mut error = None;
    loop {
        let now = Instant::now();
        let done = workers.iter().all(|w| w.is_finished());
        if done || stop.requested() {
            if sampling {
                // A failed run still gets its (partial) figures, and the
                // sampler's connection is released.
                if let Some(s) = sampler.as_deref_mut() {
                    match s.finish() {
                        Ok(f) => figures = Some(f),
                        Err(e) => error = Some(e),
                    }
                }
            }
            break;
        }
        if !sampling
            && figures.is_none()
            && error.is_none()
            && now >= window.measure_start
            && let Some(s) = sampler.as_deref_mut()
        {
            match s.start() {
                Ok(()) => sampling = true,
                Err(e) => error = Some(e),
            }
        }
        if sampling && (now >= window.measure_end || stop.requested()) {
            if let Some(s) = sampler.as_deref_mut() {
                match s.finish() {
                    Ok(f) => figures = Some(f),
                    Err(e) => error = Some(e),
                }
            }
            sampling = false;
        }
        let phase = if now < window.measure_start {
            Phase::RampUp
        } else if now < window.measure_end {
            Phase::Measure
        } else if now < window.end {
            Phase::RampDown
        } else {
            Phase::Draining
        };
        on_tick(phase, now.saturating_duration_since(window.t0));
        // Wake at the next boundary or tick, whichever is first.
        let next = [window.measure_start, window.measure_end]
            .into_iter()
            .filter(|&b| b > now)
            .min()
            .map_or(now + TICK, |b| b.min(now + TICK));
        sleep_until(next);
    }
    (figures, error)
}

/// Lets sleeps end within a few µs of the deadline instead of the default
/// 50 µs timer slack, which would otherwise be charged to every open-loop
/// transaction that starts on schedule.
pub(crate) fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack and
    // takes plain integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

fn worker(
    target: &dyn Target,
    workload: &dyn Workload,
    spec: &LoadSpec,
    shared: &Shared,
    live: &LiveCounters,
    thread: u32,
    ntxn: usize,
) -> Result<WorkerTally, DriverError> {
    let seed = spec.seed ^ (u64::from(thread) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let client = target.connect().map_err(|source| DriverError::Connect { thread, source }).and_then(|session| {
        workload.open_client(session, thread, seed).map_err(|source| DriverError::Prepare { thread, source })
    });
    let mut client = match client {
        Ok(c) => Some(c),
        Err(e) => {
            lock(&shared.setup_error).get_or_insert(e);
            None
        }
    };
    shared.ready.wait();
    shared.go.wait();
    let (Some(client), Some(&t0)) = (client.as_deref_mut(), shared.t0.get()) else {
        return Ok(WorkerTally::default());
    };
    if shared.stop.load(Ordering::Relaxed) {
        return Ok(WorkerTally::default());
    }
    crate::cpu::name_current_thread(&format!("bench-client-{thread}"));
    tighten_timer_slack();
    let window = Window::new(t0, spec);
    let mut tally = WorkerTally {
        thread,
        txns: (0..ntxn).map(|_| TxnTally::default()).collect(),
        schedule: ScheduleTally::default(),
    };
    let result = match spec.rate_per_s {
        None => closed_loop(client, &window, shared, live, &mut tally),
        Some(rate) => {
            let rate_per_thread = rate / f64::from(spec.threads);
            let rng = SmallRng::seed_from_u64(seed ^ 0xA5A5_A5A5);
            open_loop(client, &window, rate_per_thread, rng, shared, live, &mut tally)
        }
    };
    match result {
        Ok(()) => Ok(tally),
        Err(source) => {
            shared.stop.store(true, Ordering::Relaxed);
            Err(DriverError::Transaction { thread, source })
        }
    }
}

/// Counts one transaction; `from_wake` is the open loop's second figure.
fn record(tally: &mut WorkerTally, kind: usize, outcome: Outcome, latency: Duration, from_wake: Option<Duration>) {
    let Some(t) = tally.txns.get_mut(kind) else {
        debug_assert!(false, "workload returned transaction type {kind} out of range");
        return;
    };
    if outcome == Outcome::AcceptableError {
        t.acceptable_errors += 1;
        return;
    }
    t.executed += 1;
    if outcome == Outcome::Found {
        t.found += 1;
    }
    t.latency.record(latency);
    if let Some(from_wake) = from_wake {
        t.latency_from_wake.record(from_wake);
    }
}

fn closed_loop(
    client: &mut dyn WorkloadClient,
    window: &Window,
    shared: &Shared,
    live: &LiveCounters,
    tally: &mut WorkerTally,
) -> Result<(), DbError> {
    sleep_until(window.t0);
    loop {
        let start = Instant::now();
        if start >= window.end || shared.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (kind, outcome) = client.run_next()?;
        let done = Instant::now();
        if window.contains(start) {
            record(tally, kind, outcome, done - start, None);
        }
        live.finished.fetch_add(1, Ordering::Relaxed);
    }
}

fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Exponentially distributed gap of a Poisson process with `rate_per_s`.
pub(crate) fn poisson_gap(rng: &mut SmallRng, rate_per_s: f64) -> Duration {
    // 1 − U lies in (0, 1], so ln() is finite.
    let u: f64 = 1.0 - rng.random::<f64>();
    Duration::from_secs_f64(-u.ln() / rate_per_s)
}

fn open_loop(
    client: &mut dyn WorkloadClient,
    window: &Window,
    rate_per_s: f64,
    mut rng: SmallRng,
    shared: &Shared,
    live: &LiveCounters,
    tally: &mut WorkerTally,
) -> Result<(), DbError> {
    let deadline = window.end + BACKLOG_GRACE;
    let mut intended = window.t0 + poisson_gap(&mut rng, rate_per_s);
    // When the worker last returned from sleeping until an intended start.
    let mut woke = window.t0;
    while intended < window.end {
        if shared.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let in_window = window.contains(intended);
        if Instant::now() >= deadline {
            // Count what the backlog still holds, so the report shows it.
            while intended < window.end {
                if window.contains(intended) {
                    tally.schedule.intended += 1;
                    tally.schedule.missed += 1;
                }
                intended += poisson_gap(&mut rng, rate_per_s);
            }
            return Ok(());
        }
        let idle = Instant::now() < intended;
        sleep_until(intended);
        let start = Instant::now();
        if idle {
            woke = start;
        }
        let (kind, outcome) = client.run_next()?;
        let done = Instant::now();
        if in_window {
            // From the intended start: time spent queued behind a slow
            // transaction, or waiting for this thread to be run again, is
            // part of what the user would have waited (see the module
            // comment). Beside it, the same from the last wake-up.
            let from_wake = done.saturating_duration_since(intended.max(woke));
            record(tally, kind, outcome, done.saturating_duration_since(intended), Some(from_wake));
            tally.schedule.intended += 1;
            tally.schedule.completed += 1;
            let lag_us = duration_us(start.saturating_duration_since(intended));
            tally.schedule.max_start_lag_us = tally.schedule.max_start_lag_us.max(lag_us);
            if idle {
                let wake_delay = start.saturating_duration_since(intended);
                if wake_delay > LATE_WAKE {
                    tally.schedule.late_wakes += 1;
                    tally.schedule.max_wake_delay_us = tally.schedule.max_wake_delay_us.max(duration_us(wake_delay));
                }
            }
        }
        live.finished.fetch_add(1, Ordering::Relaxed);
        intended += poisson_gap(&mut rng, rate_per_s);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn poisson_gaps_average_to_the_rate() {
        let mut rng = SmallRng::seed_from_u64(1);
        let n = 100_000;
        let total: f64 = (0..n).map(|_| poisson_gap(&mut rng, 250.0).as_secs_f64()).sum();
        let mean = total / n as f64;
        assert!((mean - 0.004).abs() < 0.0001, "mean gap {mean}");
    }

    #[test]
    fn fresh_seeds_differ() {
        assert_ne!(fresh_seed(), fresh_seed());
    }

    #[test]
    fn window_bounds() {
        let t0 = Instant::now();
        let spec = LoadSpec {
            threads: 1,
            rate_per_s: None,
            ramp_up: Duration::from_secs(1),
            measure: Duration::from_secs(2),
            ramp_down: Duration::from_secs(1),
            seed: 0,
        };
        let w = Window::new(t0, &spec);
        assert!(!w.contains(t0));
        assert!(w.contains(t0 + Duration::from_secs(1)));
        assert!(w.contains(t0 + Duration::from_millis(2999)));
        assert!(!w.contains(t0 + Duration::from_secs(3)));
        assert_eq!(w.end, t0 + Duration::from_secs(4));
    }

    #[test]
    fn invalid_specs_are_rejected() {
        let ok = LoadSpec {
            threads: 2,
            rate_per_s: Some(10.0),
            ramp_up: Duration::ZERO,
            measure: Duration::from_secs(1),
            ramp_down: Duration::ZERO,
            seed: 0,
        };
        assert!(validate(&ok).is_ok());
        assert!(validate(&LoadSpec { threads: 0, ..ok.clone() }).is_err());
        assert!(validate(&LoadSpec { measure: Duration::ZERO, ..ok.clone() }).is_err());
        assert!(validate(&LoadSpec { rate_per_s: Some(0.0), ..ok.clone() }).is_err());
        assert!(validate(&LoadSpec { rate_per_s: Some(f64::NAN), ..ok }).is_err());
    }
}
