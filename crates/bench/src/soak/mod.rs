//! `pgtier bench soak`: hours of steady load on one pgtier server, watching
//! what only time shows — memory, file descriptors and threads that grow,
//! a latency tail that drifts, errors that appear once in 100,000 requests.
//!
//! Beside each other, against one server process (the command line spawns
//! `pgtier serve` and hands its pid and URL over in [`SoakControl`]):
//!
//! - TATP over the wire on an AWT cache group over the four TATP tables
//!   (this kit's population, client and mix; `tatp_load`), open loop at a
//!   fixed rate with Poisson arrivals, latency from each transaction's
//!   intended start;
//! - cache-group cycles on a second, READONLY group (`setup`, `side`):
//!   LOAD, REFRESH after PostgreSQL changed, UNLOAD of half, UNLOAD of the
//!   rest, every [`SoakOptions::cycle_every`], each step checked against
//!   PostgreSQL. The TATP group itself stays loaded: it is not DYNAMIC, so
//!   the clients would find an unloaded subscriber absent;
//! - connection churn: connect, a few statements, disconnect; every tenth
//!   with a wrong password (28P01 expected), every tenth abandoned inside a
//!   transaction that holds a row lock (the socket closed without
//!   Terminate), after which a new session must update the same row;
//! - cancels: a long statement (pg_sleep, or a three-way cross join) and a
//!   CancelRequest from another thread: 57014 "user request" expected, and
//!   the session usable afterwards.
//!
//! Every [`SoakOptions::sample_every`] the sampler (`sample`) reads the
//! server's RSS, open file descriptors and threads from /proc, takes each
//! TATP worker's interval tally (throughput, p99), the write-through backlog
//! and the counts of the other activities. `verdict` turns the samples into
//! growth over the last 75 % of the run against the first sample after the
//! warm-up (goal: under 5 %), p99 stability, and the list of failures;
//! `output` writes `report.md`, `soak.json` and the charts.

mod output;
pub mod proc;
mod sample;
mod setup;
mod side;
mod tatp_load;
pub mod verdict;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::result::MachineInfo;
use crate::target::DbError;

pub use output::{CHART_STEMS, JSON_FILE, REPORT_FILE, write_report};
pub use setup::{CYCLE_GROUP, TATP_GROUP, prepare_postgres};
pub use verdict::{Growth, P99Stability, Verdict};

/// The activities beside TATP, as `--without` names them.
pub const ACTIVITIES: [&str; 3] = ["cycles", "churn", "cancels"];

/// What the command line decides.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// The whole run (setup and the final drain not included).
    pub duration: Duration,
    pub sample_every: Duration,
    /// The share of the run before the growth baseline (0.25: growth is
    /// judged over the last 75 %).
    pub warmup_fraction: f64,
    /// TATP subscribers populated and cached (the AWT group holds all).
    pub subscribers: u64,
    /// TATP client sessions, one thread each.
    pub threads: u32,
    /// Offered TATP load over all threads, transactions/s (open loop).
    pub rate_per_s: f64,
    /// Roots of the cycled READONLY group (4 child rows each).
    pub cycle_accounts: u64,
    pub cycle_every: Duration,
    /// Pause between two churn connections.
    pub churn_pause: Duration,
    pub cancel_every: Duration,
    /// Activities left out (`cycles`, `churn`, `cancels`): to find which one
    /// makes the server grow.
    pub without: Vec<String>,
    /// Growth goal, percent (RSS, fds, threads).
    pub growth_goal_percent: f64,
    pub seed: u64,
    pub populate_streams: usize,
}

impl SoakOptions {
    pub fn check(&self) -> Result<(), String> {
        if self.sample_every.is_zero() || self.duration < self.sample_every * 2 {
            return Err(format!(
                "the run ({} s) must hold at least two samples of {} s",
                self.duration.as_secs_f64(),
                self.sample_every.as_secs_f64()
            ));
        }
        if !(0.0..1.0).contains(&self.warmup_fraction) {
            return Err(format!("warm-up fraction {} must be in [0, 1)", self.warmup_fraction));
        }
        if self.subscribers == 0 || self.threads == 0 || self.cycle_accounts < 2 {
            return Err("subscribers, threads and cycle accounts (at least 2) must be positive".into());
        }
        if !(self.rate_per_s.is_finite() && self.rate_per_s >= 1.0) {
            return Err(format!("rate {} must be at least 1 txn/s", self.rate_per_s));
        }
        if self.cycle_every.is_zero() || self.cancel_every.is_zero() {
            return Err("cycle and cancel periods must be longer than 0 s".into());
        }
        if let Some(bad) = self.without.iter().find(|w| !ACTIVITIES.contains(&w.as_str())) {
            return Err(format!("unknown activity '{bad}' (expected {})", ACTIVITIES.join(", ")));
        }
        Ok(())
    }

    /// The activity runs (is not in [`SoakOptions::without`]).
    pub fn runs(&self, activity: &str) -> bool {
        !self.without.iter().any(|w| w == activity)
    }

    /// Seconds into the run where the growth window starts.
    pub fn warmup_s(&self) -> f64 {
        self.duration.as_secs_f64() * self.warmup_fraction
    }
}

/// The server under test, started by the caller over PostgreSQL.
#[derive(Clone, Debug)]
pub struct ServerUnderTest {
    /// `postgresql://app:password@host:port/app`.
    pub url: String,
    /// The same with a wrong password.
    pub wrong_password_url: String,
    /// Whose /proc is sampled.
    pub pid: u32,
    /// How it was started, for the report.
    pub describe: String,
}

/// What the caller hands the soak besides its options.
pub struct SoakControl<'a> {
    /// PostgreSQL behind the server (the cycles change rows there).
    pub backend_url: String,
    pub server: ServerUnderTest,
    /// Set from a signal handler: the run ends at the next sample, the
    /// report holds what was measured.
    pub interrupt: &'a AtomicBool,
    pub progress: bool,
}

/// Errors of one (source, SQLSTATE).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorCount {
    /// `tatp`, `churn`, `cancel`, `cycle`, `sampler`, `drain`.
    pub source: String,
    pub sqlstate: String,
    pub count: u64,
    /// The deliberate ones: 28P01 of wrong passwords, 57014 of cancels.
    pub expected: bool,
    pub first_message: String,
    pub first_at_s: f64,
}

/// One cache-group operation kind of the cycles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CycleOpFigures {
    pub op: String,
    pub count: u64,
    pub mean_s: f64,
    pub max_s: f64,
}

/// Counts of the activities beside TATP (cumulative).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ActivityCounts {
    /// Whole cycles (LOAD, REFRESH, UNLOAD half, UNLOAD rest), each checked.
    pub cycles: u64,
    /// Churn sessions that connected, ran their statements and said Terminate.
    pub churn_clean: u64,
    /// Wrong-password attempts refused with 28P01.
    pub churn_wrong_password: u64,
    /// Sessions abandoned inside a transaction holding a row lock, whose
    /// row a new session then updated.
    pub churn_abrupt: u64,
    /// CancelRequests sent.
    pub cancels_sent: u64,
    /// ... answered with 57014 "canceling statement due to user request".
    pub cancels_confirmed: u64,
    /// TATP sessions opened again after an error.
    pub tatp_reconnects: u64,
}

/// One sample of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the load started.
    pub t_s: f64,
    /// Read with no cycle or cancelled statement under way (false: one
    /// outlasted the sampler's wait, and its memory is in this reading).
    #[serde(default)]
    pub quiet: bool,
    pub rss_bytes: u64,
    /// Open file descriptors (the smallest of the sample's readings).
    pub fds: u64,
    /// Threads (the smallest of the sample's readings).
    pub threads: u64,
    /// TATP transactions completed in the interval (acceptable errors not counted).
    pub txns: u64,
    pub txn_per_s: f64,
    pub acceptable_errors: u64,
    /// Latency in the interval, µs from the intended start; 0 without transactions.
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Cumulative.
    pub unexpected_errors: u64,
    pub expected_errors: u64,
    pub activity: ActivityCounts,
    /// Write-through: bytes not yet in PostgreSQL, lag (None: not read).
    pub awt_backlog_bytes: Option<i64>,
    pub awt_lag_ms: Option<f64>,
}

/// After the load: write-through caught up, then VERIFY of the TATP group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EndChecks {
    pub drained: bool,
    pub drain_s: f64,
    /// Transactions PostgreSQL refused (`pgtier_cache_propagation.errors`).
    pub awt_errors: i64,
    /// None: not run (not drained, or interrupted).
    pub verify_clean: Option<bool>,
    pub verify_message: String,
}

/// Everything the soak measured, written as `soak.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakReport {
    pub started_at: String,
    pub machine: MachineInfo,
    pub settings: Vec<(String, String)>,
    /// Activities left out on purpose (not failures when they did not happen).
    #[serde(default)]
    pub without: Vec<String>,
    pub server: String,
    pub server_pid: u32,
    pub setup_s: f64,
    pub run_s: f64,
    pub warmup_s: f64,
    pub samples: Vec<Sample>,
    /// TATP over the run after the warm-up: completed, p50/p99/p99.9/max µs.
    pub tatp_total: u64,
    pub tatp_latency_us: Option<crate::result::LatencyUs>,
    pub errors: Vec<ErrorCount>,
    /// Checks that failed without an error (a count that differs from
    /// PostgreSQL's, a cancel that did not cancel, a wrong password let in).
    pub anomalies: Vec<String>,
    pub anomalies_total: u64,
    pub activity: ActivityCounts,
    pub cycle_ops: Vec<CycleOpFigures>,
    /// Cancel sent to 57014 received, ms: median and max.
    pub cancel_ms_p50: f64,
    pub cancel_ms_max: f64,
    pub end: Option<EndChecks>,
    /// Why the server stopped being there, if it did during the run.
    pub server_died: Option<String>,
    /// The server's clean stop after the run (set by the caller).
    pub server_stop: Option<String>,
    pub interrupted: bool,
    pub verdict: Option<Verdict>,
    pub stopped_by: Option<String>,
}

impl SoakReport {
    pub fn unexpected_errors(&self) -> u64 {
        self.errors.iter().filter(|e| !e.expected).map(|e| e.count).sum()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error("invalid soak settings: {0}")]
    Invalid(String),
    #[error("{phase}: {source}")]
    Failed { phase: String, source: DbError },
}

impl SoakError {
    fn at(phase: &str) -> impl Fn(DbError) -> SoakError + '_ {
        move |source| SoakError::Failed { phase: phase.to_owned(), source }
    }
}

/// The errors and anomalies of all threads (rare: a lock per error is fine).
#[derive(Default)]
pub(crate) struct ErrorLog {
    counts: Mutex<BTreeMap<(String, String), ErrorCount>>,
    anomalies: Mutex<(Vec<String>, u64)>,
    unexpected: AtomicU64,
    expected: AtomicU64,
}

/// Anomaly messages kept (all are counted).
const ANOMALIES_KEPT: usize = 50;

impl ErrorLog {
    pub(crate) fn record(&self, source: &str, error: &DbError, expected: bool, at_s: f64) {
        let code = error.sqlstate.clone().unwrap_or_else(|| "none".to_owned());
        let mut counts = lock(&self.counts);
        let entry = counts.entry((source.to_owned(), code.clone())).or_insert_with(|| ErrorCount {
            source: source.to_owned(),
            sqlstate: code,
            count: 0,
            expected,
            first_message: error.message.chars().take(300).collect(),
            first_at_s: at_s,
        });
        entry.count += 1;
        let counter = if expected { &self.expected } else { &self.unexpected };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn anomaly(&self, at_s: f64, what: String) {
        let mut kept = lock(&self.anomalies);
        kept.1 += 1;
        if kept.0.len() < ANOMALIES_KEPT {
            kept.0.push(format!("{at_s:.1} s: {what}"));
        }
    }

    fn unexpected(&self) -> u64 {
        self.unexpected.load(Ordering::Relaxed) + lock(&self.anomalies).1
    }

    fn expected(&self) -> u64 {
        self.expected.load(Ordering::Relaxed)
    }

    fn errors(&self) -> Vec<ErrorCount> {
        lock(&self.counts).values().cloned().collect()
    }

    fn anomalies(&self) -> (Vec<String>, u64) {
        lock(&self.anomalies).clone()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What every thread of the run shares.
pub(crate) struct Ctx<'a> {
    pub(crate) o: &'a SoakOptions,
    pub(crate) server: &'a ServerUnderTest,
    pub(crate) backend_url: &'a str,
    pub(crate) t0: Instant,
    pub(crate) stop: AtomicBool,
    pub(crate) errors: ErrorLog,
    pub(crate) counts: side::Counters,
    /// TATP transactions finished (for the progress line only).
    pub(crate) finished: AtomicU64,
    /// Cycles and cancelled statements under way: they hold memory for
    /// their duration (a loaded group, a cross join's rows), which a
    /// reading taken then would count as growth.
    busy: AtomicU64,
    /// The sampler is reading: no cycle or cancel starts.
    reading: AtomicBool,
}

impl Ctx<'_> {
    pub(crate) fn at_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Runs `f` (a cycle, a cancelled statement) outside the sampler's
    /// readings: waits while one is taken, and holds the next off until done.
    pub(crate) fn busy<T>(&self, f: impl FnOnce() -> T) -> T {
        loop {
            self.busy.fetch_add(1, Ordering::SeqCst);
            if !self.reading.load(Ordering::SeqCst) {
                break;
            }
            self.busy.fetch_sub(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = f();
        self.busy.fetch_sub(1, Ordering::SeqCst);
        out
    }

    /// The sampler's readings between cycles and cancels (waiting for the
    /// one under way at most `wait`); the flag says whether it was quiet.
    pub(crate) fn quiet<T>(&self, wait: Duration, f: impl FnOnce() -> T) -> (T, bool) {
        self.reading.store(true, Ordering::SeqCst);
        let until = Instant::now() + wait;
        while self.busy.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let quiet = self.busy.load(Ordering::SeqCst) == 0;
        let out = f();
        self.reading.store(false, Ordering::SeqCst);
        (out, quiet)
    }

    /// Sleeps `d` in slices; false when the run stopped meanwhile.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        loop {
            if self.stopped() {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(100)));
        }
    }
}

/// Runs the soak against `control.server`, filling `report` as it goes:
/// the TATP and cycle groups are created and loaded, then load, churn,
/// cancels and cycles run for the duration while the sampler records,
/// then write-through drains and the TATP group is verified.
pub fn run(options: &SoakOptions, control: &SoakControl<'_>, report: &mut SoakReport) -> Result<(), SoakError> {
    options.check().map_err(SoakError::Invalid)?;
    report.started_at = crate::report::now_rfc3339();
    report.machine = crate::report::machine_info();
    report.settings = settings(options);
    report.without = options.without.clone();
    report.server = control.server.describe.clone();
    report.server_pid = control.server.pid;
    report.warmup_s = options.warmup_s();
    let started = Instant::now();
    setup::create_groups(&control.server.url, options)
        .map_err(SoakError::at("creating and loading the cache groups"))?;
    report.setup_s = started.elapsed().as_secs_f64();
    let ctx = Ctx {
        o: options,
        server: &control.server,
        backend_url: &control.backend_url,
        t0: Instant::now(),
        stop: AtomicBool::new(false),
        errors: ErrorLog::default(),
        counts: side::Counters::default(),
        finished: AtomicU64::new(0),
        busy: AtomicU64::new(0),
        reading: AtomicBool::new(false),
    };
    let slots: Vec<Mutex<tatp_load::Interval>> =
        (0..options.threads).map(|_| Mutex::new(tatp_load::Interval::default())).collect();
    let outcome = std::thread::scope(|scope| {
        let ctx = &ctx;
        for (thread, slot) in slots.iter().enumerate() {
            let thread = u32::try_from(thread).unwrap_or(u32::MAX);
            scope.spawn(move || tatp_load::worker(ctx, thread, slot));
        }
        if options.runs("cycles") {
            scope.spawn(move || side::cycles(ctx));
        }
        if options.runs("churn") {
            scope.spawn(move || side::churn(ctx));
        }
        if options.runs("cancels") {
            scope.spawn(move || side::cancels(ctx));
        }
        let outcome = sample::run(ctx, &slots, control, report);
        ctx.stop.store(true, Ordering::Relaxed);
        outcome
    });
    report.run_s = ctx.at_s();
    if report.server_died.is_none() && !report.interrupted {
        report.end = Some(sample::end_checks(&ctx, control.interrupt));
    }
    finish(&ctx, report);
    outcome
}

/// Copies the shared tallies into the report and judges it.
fn finish(ctx: &Ctx<'_>, report: &mut SoakReport) {
    report.errors = ctx.errors.errors();
    (report.anomalies, report.anomalies_total) = ctx.errors.anomalies();
    report.activity = ctx.counts.snapshot();
    report.cycle_ops = ctx.counts.cycle_ops();
    (report.cancel_ms_p50, report.cancel_ms_max) = ctx.counts.cancel_ms();
    report.verdict = Some(verdict::judge(report, ctx.o.growth_goal_percent));
}

fn settings(o: &SoakOptions) -> Vec<(String, String)> {
    let s = |d: Duration| format!("{} s", d.as_secs_f64());
    vec![
        ("duration".into(), s(o.duration)),
        ("sample every".into(), s(o.sample_every)),
        (
            "growth window".into(),
            format!(
                "the last {:.0} % of the run (from {:.0} s), against its first sample; goal under {} %",
                100.0 * (1.0 - o.warmup_fraction),
                o.warmup_s(),
                o.growth_goal_percent
            ),
        ),
        ("TATP subscribers (all cached, AWT group)".into(), o.subscribers.to_string()),
        (
            "TATP load".into(),
            format!(
                "open loop, {} txn/s over {} sessions (Poisson), latency from the intended start",
                o.rate_per_s, o.threads
            ),
        ),
        (
            "cache-group cycles".into(),
            format!(
                "every {}: LOAD, REFRESH, UNLOAD half, UNLOAD rest of READONLY group {CYCLE_GROUP} ({} roots, 4 children each)",
                s(o.cycle_every),
                o.cycle_accounts
            ),
        ),
        (
            "connection churn".into(),
            format!(
                "a session every {}: of ten, one with a wrong password, one abandoned inside a transaction",
                s(o.churn_pause)
            ),
        ),
        ("cancels".into(), format!("every {}: pg_sleep or a cross join, CancelRequest after 0.3 s", s(o.cancel_every))),
        ("left out".into(), if o.without.is_empty() { "nothing".to_owned() } else { o.without.join(", ") }),
        ("seed".into(), o.seed.to_string()),
    ]
}
