//! `pgtier demo`: reference study 000 (the HLR/TATP study) end to end on
//! this machine, with the study's method:
//!
//! 1. TATP populated in PostgreSQL; the baseline thread sweep (closed loop)
//!    against PostgreSQL alone over the subscribers the cache will hold;
//! 2. an AWT cache group over those subscribers (`s_id <= C`), LOADed;
//! 3. the same sweep against pgtier in direct mode (the engine in this
//!    process, as the study's application ran TimesTen) and over the wire;
//! 4. the rate cap: the offered rate is stepped (open loop, direct mode)
//!    while the AWT lag is watched; the highest rate whose lag stays flat,
//!    bounded by what PostgreSQL alone sustains, is where both sides run
//!    again, open loop, so latencies are compared at equal throughput;
//! 5. after propagation drains, the group is verified against PostgreSQL.
//!
//! Everything measured goes into a [`DemoReport`] as it is measured, so an
//! interrupted run (Ctrl-C: [`DemoControl::interrupt`]) still leaves a
//! partial report. The command line (crates/cli `demo_cmd.rs`) owns the
//! private PostgreSQL, the wire server and the signal handler.

mod charts;
mod markdown;
mod monitor;
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pgtier_cache::{Aging, Cache, CacheConfig, LoadOptions};
/// The demo's write-through settings are the cache's own.
pub use pgtier_cache::AwtConfig;
use pgtier_engine::CommitMode;
use serde::{Deserialize, Serialize};

use crate::driver::{self, LiveCounters, LoadSpec, RepetitionTally};
use crate::report::{self, PopulationSummary};
use crate::result::{MachineInfo, RunConfig, RunResult};
use crate::target::{BackendSampler, DbError, RowSource, Session, Target};
use crate::targets::cached::{cache_call, open_cache, tatp_group};
use crate::targets::embedded::EmbeddedTarget;
use crate::targets::postgres::{PgSampler, PgTarget, url_is_local};
use crate::tatp::population::{PopulateOptions, populate};
use crate::tatp::random::SubscriberKeys;
use crate::tatp::transactions::TxnType;
use crate::tatp::{self, RunFacts, TatpWorkload};

pub use markdown::{REPORT_FILE, SECTIONS, write_report};
pub use monitor::LagSample;
pub use search::SearchStep;

/// The cache group's name.
pub const GROUP: &str = "tatp";
/// PostgreSQL counts as saturated at the capped rate when its average is
/// above this many times its single-client closed-loop average.
const SATURATED: f64 = 10.0;
/// Tries of the capped rate on PostgreSQL alone, each lower by [`CAP_BACKOFF`].
const CAP_ATTEMPTS: u32 = 3;
const CAP_BACKOFF: f64 = 0.6;
/// A capped run's threads sustain at least this many times the rate closed
/// loop (the rate is at most 80 % of their capacity).
const HEADROOM: f64 = 1.25;

/// Labels of the runs in [`DemoReport::runs`].
pub const BASELINE: &str = "postgresql";
pub const DIRECT: &str = "pgtier-direct";
pub const WIRE: &str = "pgtier-wire";
pub const BASELINE_CAPPED: &str = "postgresql-capped";
pub const DIRECT_CAPPED: &str = "pgtier-direct-capped";
pub const WIRE_CAPPED: &str = "pgtier-wire-capped";

/// What the command line decides.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Subscribers populated in PostgreSQL.
    pub subscribers: u64,
    /// Subscribers 1..=this are cached and targeted by every run (study
    /// 000's Use Case 1 cached 16 % of the database).
    pub cached_subscribers: u64,
    pub threads: Vec<u32>,
    pub ramp_up: Duration,
    pub measure: Duration,
    pub ramp_down: Duration,
    /// Measure window of one rate-search step.
    pub search_step: Duration,
    pub search_steps_max: u32,
    /// The capped rate is at most this fraction of PostgreSQL's best
    /// closed-loop throughput: near 100 % an open-loop queue grows without
    /// bound and the baseline's latency would be all queueing.
    pub cap_fraction: f64,
    /// A step's lag is flat when its least-squares slope stays below this.
    pub lag_slope_max_ms_per_s: f64,
    /// Longest wait for write-through to catch up between runs.
    pub drain_timeout: Duration,
    pub commit_mode: CommitMode,
    /// Write-through's lanes and batching (the rest stays default).
    pub awt: AwtConfig,
    pub load_parallel: usize,
    pub populate_streams: usize,
    pub seed: u64,
    /// The engine's directory (emptied at the start).
    pub work_dir: PathBuf,
    /// Where the report and charts go.
    pub out_dir: PathBuf,
}

/// A pgtier server over the demo's engine directory, for the wire runs.
pub trait WireServer {
    /// `postgresql://...` a client connects to.
    fn url(&self) -> String;
    /// Stops it (sessions end, checkpoint); the directory can then be reopened.
    fn stop(self: Box<Self>) -> Result<(), String>;
}

/// Starts a [`WireServer`] on (engine directory, PostgreSQL URL, commit mode, write-through settings).
pub type StartWire<'a> = &'a dyn Fn(&Path, &str, CommitMode, &AwtConfig) -> Result<Box<dyn WireServer>, String>;

/// What the caller hands the demo besides its options.
pub struct DemoControl<'a> {
    /// PostgreSQL holding (or about to hold) TATP.
    pub backend_url: String,
    /// None: the wire runs are skipped (reported as such).
    pub start_wire: Option<StartWire<'a>>,
    /// Set from a signal handler: the current run stops, the demo returns
    /// [`DemoError::Interrupted`], the report so far stays.
    pub interrupt: &'a AtomicBool,
    /// Draw the progress line on stderr (hidden when it is not a terminal).
    pub progress: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("interrupted during {phase}")]
    Interrupted { phase: String },
    #[error("{phase}: {source}")]
    Failed { phase: String, source: DbError },
    #[error("invalid demo settings: {0}")]
    Invalid(String),
}

impl DemoError {
    /// SQLSTATE of the failure, when one caused it.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            DemoError::Failed { source, .. } => source.sqlstate.as_deref(),
            DemoError::Invalid(_) => Some("22023"),
            DemoError::Interrupted { .. } => Some("57014"),
        }
    }
}

/// Cache memory against PostgreSQL's size for the same rows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryFigures {
    pub instances: u64,
    pub cache_rows: u64,
    pub cache_bytes: u64,
    /// Heap, indexes and TOAST of the four tables, each scaled by the share
    /// of its rows that belong to the cached subscribers.
    pub postgres_bytes_prorated: u64,
    /// `pg_column_size` of the cached rows: tuple data without page and
    /// index overhead.
    pub postgres_tuple_bytes: u64,
    /// The four tables whole (every subscriber).
    pub postgres_bytes_total: u64,
}

/// LOAD of the group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadFigures {
    pub instances: u64,
    pub rows: u64,
    pub seconds: f64,
}

/// How the capped rate was chosen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CapDecision {
    /// Highest searched rate whose lag stayed flat (None: none did).
    pub flat_max_per_s: Option<f64>,
    /// PostgreSQL alone, best closed-loop MQTh of the sweep.
    pub baseline_peak_per_s: f64,
    pub rate_per_s: f64,
    /// Which bound decided, in words.
    pub reason: String,
    /// Rates PostgreSQL alone could not take without its open-loop queue
    /// growing, before the one used: (rate, its average µs there).
    #[serde(default)]
    pub saturated: Vec<(f64, f64)>,
}

/// The verification after the last drain.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VerifyFigures {
    pub drained: bool,
    pub compared: u64,
    pub differing: u64,
    pub not_cached: u64,
    pub only_in_cache: u64,
    /// Write-through transactions PostgreSQL refused (`pgtier.awt_errors`).
    pub awt_errors: u64,
    pub differences: Vec<String>,
    pub clean: bool,
}

/// A wait for write-through to catch up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Drain {
    pub after: String,
    pub seconds: f64,
    pub drained: bool,
}

/// Everything the demo measured, written as `demo.json` beside the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DemoReport {
    pub started_at: String,
    pub machine: MachineInfo,
    pub cpu_model: String,
    /// (name, value) of the demo's own knobs.
    pub settings: Vec<(String, String)>,
    pub postgres_settings: Vec<(String, String)>,
    pub population: Option<PopulationSummary>,
    pub load: Option<LoadFigures>,
    pub memory: Option<MemoryFigures>,
    /// Sweeps and capped runs, by the labels above.
    pub runs: Vec<RunResult>,
    pub search: Vec<SearchStep>,
    pub cap: Option<CapDecision>,
    pub lag: Vec<LagSample>,
    pub drains: Vec<Drain>,
    /// Open-loop runs: (label, wakes of the load generator more than
    /// `driver::LATE_WAKE` late, the largest in µs). Not charged to the
    /// system measured; shown so a reader sees how often it happened.
    #[serde(default)]
    pub late_wakes: Vec<(String, u64, u64)>,
    pub verify: Option<VerifyFigures>,
    /// (phase, wall seconds), in order.
    pub phases: Vec<(String, f64)>,
    /// Why the wire runs are missing, when they are.
    pub wire_skipped: Option<String>,
    pub finished: bool,
    /// The failure or interruption that ended the run early.
    pub stopped_by: Option<String>,
    pub total_s: f64,
}

impl DemoReport {
    pub fn run(&self, label: &str) -> Option<&RunResult> {
        self.runs.iter().find(|r| r.label == label)
    }

    fn run_mut(&mut self, label: &str) -> Option<&mut RunResult> {
        self.runs.iter_mut().find(|r| r.label == label)
    }
}

/// Phases in order, with rough cost estimates (seconds) for the progress ETA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Populate,
    Baseline,
    Load,
    Direct,
    Search,
    Capped,
    Wire,
    Verify,
}

impl Phase {
    const ALL: [Phase; 8] =
        [Phase::Populate, Phase::Baseline, Phase::Load, Phase::Direct, Phase::Search, Phase::Capped, Phase::Wire, Phase::Verify];

    fn name(self) -> &'static str {
        match self {
            Phase::Populate => "populate PostgreSQL",
            Phase::Baseline => "baseline sweep + capped run (PostgreSQL alone)",
            Phase::Load => "create + LOAD cache group",
            Phase::Direct => "sweep (pgtier direct)",
            Phase::Search => "rate-cap search",
            Phase::Capped => "capped run (pgtier direct)",
            Phase::Wire => "sweep + capped (pgtier wire)",
            Phase::Verify => "drain + verify",
        }
    }

    fn estimate_s(self, o: &DemoOptions) -> f64 {
        let point = (o.ramp_up + o.measure + o.ramp_down).as_secs_f64() + 0.5;
        let sweep = point * o.threads.len() as f64;
        match self {
            Phase::Populate => 3.0 + o.subscribers as f64 / 20_000.0,
            Phase::Baseline => sweep + point,
            Phase::Load => 1.0 + o.cached_subscribers as f64 / 30_000.0,
            Phase::Direct => sweep * 1.5,
            Phase::Search => f64::from(o.search_steps_max.min(7)) * (o.search_step.as_secs_f64() + 3.0),
            Phase::Capped => point,
            Phase::Wire => sweep + point + 3.0,
            Phase::Verify => 2.0 + o.cached_subscribers as f64 / 30_000.0,
        }
    }
}

/// Checks the options before anything starts.
pub fn check(options: &DemoOptions) -> Result<(), DemoError> {
    let bad = |m: String| Err(DemoError::Invalid(m));
    if options.cached_subscribers == 0 || options.cached_subscribers > options.subscribers {
        return bad(format!(
            "cached subscribers ({}) must be between 1 and the subscribers ({})",
            options.cached_subscribers, options.subscribers
        ));
    }
    if options.threads.is_empty() || options.threads.contains(&0) {
        return bad("thread counts must be at least 1".into());
    }
    if options.measure.is_zero() || options.search_step.is_zero() {
        return bad("measure windows must be longer than 0 s".into());
    }
    if !(options.cap_fraction > 0.0 && options.cap_fraction <= 1.0) {
        return bad(format!("cap fraction {} must be in (0, 1]", options.cap_fraction));
    }
    if options.search_steps_max == 0 {
        return bad("at least one rate-search step is needed".into());
    }
    Ok(())
}

/// Runs the demo, filling `report` as it goes. On an error or interruption
/// the report holds everything measured before it.
pub fn run(options: &DemoOptions, control: &DemoControl<'_>, report: &mut DemoReport) -> Result<(), DemoError> {
    check(options)?;
    let started = Instant::now();
    report.started_at = report::now_rfc3339();
    report.machine = report::machine_info();
    report.cpu_model = cpu_model();
    report.settings = settings(options);
    let estimates: Vec<(&'static str, f64)> = Phase::ALL.iter().map(|p| (p.name(), p.estimate_s(options))).collect();
    let monitor = monitor::Monitor::start(estimates, control.progress);
    let mut demo = Demo { o: options, control, report, monitor: &monitor, phase: Phase::Populate };
    let outcome = demo.all();
    report.total_s = started.elapsed().as_secs_f64();
    report.lag = monitor.finish();
    match &outcome {
        Ok(()) => report.finished = true,
        Err(e) => report.stopped_by = Some(e.to_string()),
    }
    outcome
}

/// One run of the demo: the options, the report being filled, the monitor.
struct Demo<'a, 'c> {
    o: &'a DemoOptions,
    control: &'a DemoControl<'c>,
    report: &'a mut DemoReport,
    monitor: &'a monitor::Monitor,
    phase: Phase,
}

/// The cache in direct mode: the engine in this process.
struct Direct {
    cache: Arc<Cache>,
    target: EmbeddedTarget,
}

fn failed(phase: Phase) -> impl Fn(DbError) -> DemoError {
    move |source| DemoError::Failed { phase: phase.name().to_owned(), source }
}

impl Demo<'_, '_> {
    fn all(&mut self) -> Result<(), DemoError> {
        let pg = self.step(Phase::Populate, |d| d.populate())?;
        // PostgreSQL alone runs both its sweep and its capped run before the
        // LOAD: once the group is loaded, PostgreSQL's copy of those rows may
        // only change through the cache (AWT), or the cache is stale.
        let pg_rate = self.step(Phase::Baseline, |d| {
            d.sweep(&pg, BASELINE, None)?;
            d.capped_baseline(&pg)
        })?;
        let direct = self.step(Phase::Load, |d| d.load())?;
        let behind = BehindCache { inner: &direct.target, sampler_url: self.control.backend_url.clone() };
        self.monitor.set_lag_source(Some(Box::new(monitor::DirectLag(direct.cache.clone()))));
        self.step(Phase::Direct, |d| d.sweep(&behind, DIRECT, Some(&DirectDrain(&direct.cache))))?;
        let rate = self.step(Phase::Search, |d| d.search(&behind, &direct.cache, pg_rate))?;
        self.step(Phase::Capped, |d| d.capped(&behind, DIRECT_CAPPED, rate, Some(&DirectDrain(&direct.cache))))?;
        self.monitor.set_lag_source(None);
        let db = direct.target.database().clone();
        drop(behind);
        drop(direct);
        db.close().map_err(|e| failed(Phase::Capped)(DbError::new(Some(e.sqlstate()), e.to_string())))?;
        self.step(Phase::Wire, |d| d.wire(rate))?;
        self.step(Phase::Verify, |d| {
            d.verify()?;
            d.rebaseline(&pg, rate)
        })
    }

    /// When write-through's flat maximum set the cap below the rate
    /// PostgreSQL alone ran at, PostgreSQL runs once more at the cap, so
    /// every side is compared at one throughput. Last, after verify: its
    /// writes to the cached rows no longer meet a cache that is measured.
    fn rebaseline(&mut self, pg: &dyn Target, rate: f64) -> Result<(), DemoError> {
        let ran_at = self.report.run(BASELINE_CAPPED).and_then(|run| run.config.rate_per_s);
        if ran_at.is_none_or(|ran_at| ran_at <= rate) {
            return Ok(());
        }
        self.monitor.detail(format!("PostgreSQL alone again, at the capped {rate:.0} txn/s"));
        self.report.runs.retain(|run| run.label != BASELINE_CAPPED);
        self.capped(pg, BASELINE_CAPPED, rate, None)
    }

    /// Runs one phase: progress, timing, interruption check.
    fn step<T>(&mut self, phase: Phase, body: impl FnOnce(&mut Self) -> Result<T, DemoError>) -> Result<T, DemoError> {
        self.interrupted()?;
        self.phase = phase;
        let index = Phase::ALL.iter().position(|p| *p == phase).unwrap_or(0);
        self.monitor.begin(index);
        let started = Instant::now();
        let result = body(self);
        self.report.phases.push((phase.name().to_owned(), started.elapsed().as_secs_f64()));
        self.monitor.end(index);
        result
    }

    fn interrupted(&self) -> Result<(), DemoError> {
        if self.control.interrupt.load(Ordering::Relaxed) {
            return Err(DemoError::Interrupted { phase: self.phase.name().to_owned() });
        }
        Ok(())
    }

    fn fail(&self) -> impl Fn(DbError) -> DemoError {
        failed(self.phase)
    }

    fn populate(&mut self) -> Result<PgTarget, DemoError> {
        let url = &self.control.backend_url;
        let pg = PgTarget::open(url).map_err(|e| self.fail()(DbError::new(Some(e.sqlstate()), e.to_string())))?;
        self.report.postgres_settings = pg.server_settings().map_err(self.fail())?;
        self.monitor.detail(format!("{} subscribers", self.o.subscribers));
        let options = PopulateOptions {
            subscribers: self.o.subscribers,
            streams: self.o.populate_streams,
            seed: self.o.seed,
            progress: false,
        };
        let done = populate(&pg, &options).map_err(|e| self.fail()(DbError::new(None, e.to_string())))?;
        self.report.population = Some(PopulationSummary {
            subscribers: self.o.subscribers,
            total_s: done.total.as_secs_f64(),
            tables: done.tables.iter().map(|t| (t.table.to_owned(), t.rows, t.expected_rows)).collect(),
            phases: done.phases.iter().map(|(p, d)| (p.clone(), d.as_secs_f64())).collect(),
            streams: self.o.populate_streams,
            copy_format: "binary".to_owned(),
        });
        Ok(pg)
    }

    /// The AWT group over the cached subscribers, created and LOADed.
    fn cache_config(&self) -> CacheConfig {
        CacheConfig { load_parallel: self.o.load_parallel, awt: self.o.awt.clone(), ..CacheConfig::default() }
    }

    fn load(&mut self) -> Result<Direct, DemoError> {
        let dir = &self.o.work_dir;
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .map_err(|e| self.fail()(DbError::new(None, format!("emptying {}: {e}", dir.display()))))?;
        }
        let config = self.cache_config();
        let (cache, target) = open_cache(dir, self.o.commit_mode, &self.control.backend_url, config).map_err(self.fail())?;
        let mut group = tatp_group(GROUP, false, Aging::Off);
        group.root_predicate = Some(format!("s_id <= {}", self.o.cached_subscribers));
        cache_call(cache.create_group(&group)).map_err(self.fail())?;
        self.monitor.detail(format!("LOAD CACHE GROUP {GROUP} ({} subscribers)", self.o.cached_subscribers));
        let loaded = cache_call(cache.load(GROUP, &LoadOptions { parallel: self.o.load_parallel, ..LoadOptions::default() }))
            .map_err(self.fail())?;
        self.report.load = Some(LoadFigures {
            instances: loaded.instances,
            rows: loaded.rows.iter().map(|(_, n)| n).sum(),
            seconds: loaded.seconds,
        });
        self.report.memory = Some(self.memory(&cache)?);
        Ok(Direct { cache, target })
    }

    fn memory(&self, cache: &Cache) -> Result<MemoryFigures, DemoError> {
        let stats = cache.stats().into_iter().find(|s| s.group == GROUP).unwrap_or_default();
        let mut client = pgtier_backend::connect::connect(&self.control.backend_url)
            .map_err(|e| self.fail()(DbError::new(Some(e.sqlstate()), e.to_string())))?;
        let mut figures = MemoryFigures {
            instances: stats.instances,
            cache_rows: stats.rows,
            cache_bytes: stats.memory_bytes,
            ..MemoryFigures::default()
        };
        for table in crate::tatp::schema::TABLES {
            let sql = format!(
                "SELECT pg_total_relation_size('{table}')::int8, (SELECT count(*) FROM {table})::int8, \
                 count(*)::int8, coalesce(sum(pg_column_size(t.*)), 0)::int8 FROM {table} t WHERE s_id <= {}",
                self.o.cached_subscribers
            );
            let row = client.query_one(&sql, &[]).map_err(|e| self.fail()(crate::targets::postgres::db_error(&e)))?;
            let (size, all, cached, tuple): (i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
            figures.postgres_bytes_total += size.max(0) as u64;
            if all > 0 {
                figures.postgres_bytes_prorated += (size as f64 * cached as f64 / all as f64).round() as u64;
            }
            figures.postgres_tuple_bytes += tuple.max(0) as u64;
        }
        Ok(figures)
    }

    /// The closed-loop thread sweep against `target`, recorded as `label`.
    fn sweep(&mut self, target: &dyn Target, label: &str, drain: Option<&dyn Drainer>) -> Result<(), DemoError> {
        let run = self.new_run(target, label, None)?;
        self.report.runs.push(run);
        for &threads in &self.o.threads.clone() {
            let spec = self.spec(threads, None, self.o.measure);
            let tally = self.measure(target, &spec, label)?;
            self.record(label, threads, &tally);
            if let Some(d) = drain {
                self.drain(d, &format!("{label} at {threads} threads"))?;
            }
        }
        Ok(())
    }

    /// One open-loop run at `rate` with the most threads of the sweep.
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

    fn capped(&mut self, target: &dyn Target, label: &str, rate: f64, drain: Option<&dyn Drainer>) -> Result<(), DemoError> {
        let threads = self.capped_threads(rate);
        let run = self.new_run(target, label, Some(rate))?;
        self.report.runs.push(run);
        let spec = self.spec(threads, Some(rate), self.o.measure);
        let tally = self.measure(target, &spec, label)?;
        self.record(label, threads, &tally);
        if let Some(d) = drain {
            self.drain(d, label)?;
        }
        Ok(())
    }

    /// PostgreSQL alone, open loop at `cap_fraction` of its best
    /// closed-loop MQTh, lowered (x[`CAP_BACKOFF`]) while it cannot take
    /// that rate on this machine right now: its average above [`SATURATED`]
    /// times its single-client closed-loop average (which already pays a
    /// WAL flush per write; beyond that, open loop measures its queue, not
    /// its service). Returns the rate it ran at.
    fn capped_baseline(&mut self, pg: &dyn Target) -> Result<f64, DemoError> {
        let sweep = self.report.run(BASELINE).map(|b| b.iterations.clone()).unwrap_or_default();
        let peak = sweep.iter().map(|i| i.mqth_mean).fold(0.0, f64::max);
        let single = sweep
            .iter()
            .min_by_key(|i| i.threads)
            .and_then(|it| markdown::mean_latency_us(&RunResult { iterations: vec![it.clone()], ..RunResult::default() }));
        let mut rate = (self.o.cap_fraction * peak).max(1.0);
        let mut saturated = Vec::new();
        for attempt in 1..=CAP_ATTEMPTS {
            self.capped(pg, BASELINE_CAPPED, rate, None)?;
            let capped = self.report.run(BASELINE_CAPPED).and_then(markdown::mean_latency_us).unwrap_or(0.0);
            if !single.is_some_and(|one| capped > SATURATED * one) || attempt == CAP_ATTEMPTS {
                break;
            }
            self.report.runs.retain(|r| r.label != BASELINE_CAPPED);
            saturated.push((rate, capped));
            rate *= CAP_BACKOFF;
        }
        self.report.cap = Some(CapDecision { baseline_peak_per_s: peak, rate_per_s: rate, saturated, ..CapDecision::default() });
        Ok(rate)
    }

    fn spec(&self, threads: u32, rate_per_s: Option<f64>, measure: Duration) -> LoadSpec {
        LoadSpec {
            threads,
            rate_per_s,
            ramp_up: self.o.ramp_up,
            measure,
            ramp_down: self.o.ramp_down,
            seed: self.o.seed ^ (u64::from(threads) << 32) ^ rate_per_s.map_or(0, |r| r as u64),
        }
    }

    fn workload(&self) -> TatpWorkload {
        TatpWorkload { keys: SubscriberKeys::new(1, self.o.cached_subscribers, false) }
    }

    /// One repetition, with the progress line and Ctrl-C wired in.
    fn measure(&self, target: &dyn Target, spec: &LoadSpec, label: &str) -> Result<RepetitionTally, DemoError> {
        let live = LiveCounters::default();
        let mode = spec.rate_per_s.map_or_else(|| "closed loop".to_owned(), |r| format!("{r:.0} txn/s offered"));
        let title = format!("{label}: {} threads, {mode}", spec.threads);
        let total = spec.ramp_up + spec.measure + spec.ramp_down;
        let (mut last_n, mut last_t) = (0u64, Duration::ZERO);
        let result = driver::run_repetition(target, &self.workload(), spec, &live, &mut |phase, elapsed| {
            if self.control.interrupt.load(Ordering::Relaxed) {
                live.stop.store(true, Ordering::Relaxed);
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
        Ok(tally)
    }

    fn new_run(&self, target: &dyn Target, label: &str, rate: Option<f64>) -> Result<RunResult, DemoError> {
        let durability = target.durability().map_err(self.fail())?;
        let deviations = tatp::deviations(&RunFacts {
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
                repetitions: 1,
                durability,
                isolation: "read committed".to_owned(),
                deviations,
            },
            machine: self.report.machine.clone(),
            iterations: Vec::new(),
        })
    }

    fn record(&mut self, label: &str, threads: u32, tally: &RepetitionTally) {
        let iteration =
            report::iteration_result(threads, std::slice::from_ref(tally), &TxnType::NAMES, &TxnType::SPEC_SUCCESS, false);
        if let Some(run) = self.report.run_mut(label) {
            run.iterations.push(iteration);
        }
        if let Some(schedule) = &tally.schedule {
            self.report.late_wakes.push((label.to_owned(), schedule.late_wakes, schedule.max_wake_delay_us));
        }
    }

    /// Waits for write-through to catch up, so the next run starts with
    /// PostgreSQL idle; a drain that times out is recorded, not fatal.
    fn drain(&mut self, drainer: &dyn Drainer, after: &str) -> Result<(), DemoError> {
        self.monitor.detail(format!("waiting for write-through to catch up after {after}"));
        let started = Instant::now();
        let drained = drainer.drain(self.o.drain_timeout, self.control.interrupt).map_err(self.fail())?;
        self.report.drains.push(Drain { after: after.to_owned(), seconds: started.elapsed().as_secs_f64(), drained });
        self.interrupted()
    }

    fn search(&mut self, target: &dyn Target, cache: &Arc<Cache>, pg_rate: f64) -> Result<f64, DemoError> {
        search::run(self, target, cache, pg_rate)
    }

    /// The wire runs: a pgtier server over the same engine directory.
    fn wire(&mut self, rate: f64) -> Result<(), DemoError> {
        let Some(start) = self.control.start_wire else {
            self.report.wire_skipped = Some("no server was started (library use without a wire launcher)".to_owned());
            return Ok(());
        };
        let server = start(&self.o.work_dir, &self.control.backend_url, self.o.commit_mode, &self.o.awt)
            .map_err(|e| self.fail()(DbError::new(Some("08006"), format!("starting the pgtier server: {e}"))))?;
        let result = self.wire_runs(&server.url(), rate);
        self.monitor.set_lag_source(None);
        let stopped = server.stop().map_err(|e| self.fail()(DbError::new(None, format!("stopping the pgtier server: {e}"))));
        result.and(stopped)
    }

    fn wire_runs(&mut self, url: &str, rate: f64) -> Result<(), DemoError> {
        let lag = monitor::WireLag::connect(url).map_err(self.fail())?;
        self.monitor.set_lag_source(Some(Box::new(lag)));
        let drainer = monitor::WireDrain(std::sync::Mutex::new(monitor::WireLag::connect(url).map_err(self.fail())?));
        let target = PgTarget::open(url).map_err(|e| self.fail()(DbError::new(Some(e.sqlstate()), e.to_string())))?;
        let behind = BehindCache { inner: &target, sampler_url: self.control.backend_url.clone() };
        self.sweep(&behind, WIRE, Some(&drainer))?;
        self.capped(&behind, WIRE_CAPPED, rate, Some(&drainer))
    }

    /// Reopens the engine directory, waits for the last writes to reach
    /// PostgreSQL and compares every cached instance with PostgreSQL's.
    fn verify(&mut self) -> Result<(), DemoError> {
        let config = self.cache_config();
        let (cache, target) =
            open_cache(&self.o.work_dir, self.o.commit_mode, &self.control.backend_url, config).map_err(self.fail())?;
        self.monitor.detail("waiting for write-through to drain".to_owned());
        let drained = DirectDrain(&cache).drain(self.o.drain_timeout, self.control.interrupt).map_err(self.fail())?;
        self.interrupted()?;
        self.monitor.detail(format!("VERIFY CACHE GROUP {GROUP}"));
        let tally = cache_call(cache.verify(GROUP)).map_err(self.fail())?;
        let awt_errors = cache.propagation_info().map_or(0, |p| p.errors) + self.awt_errors_in_postgres();
        self.report.verify = Some(VerifyFigures {
            drained,
            compared: tally.compared,
            differing: tally.differing,
            not_cached: tally.not_cached,
            only_in_cache: tally.only_in_cache.len() as u64,
            awt_errors,
            differences: tally.differences.iter().take(10).map(|(k, t, w)| format!("s_id {k}, {t}: {w}")).collect(),
            clean: drained && tally.is_clean() && tally.not_cached == 0 && awt_errors == 0,
        });
        drop(target);
        drop(cache);
        Ok(())
    }

    /// Rows in `pgtier.awt_errors` (transactions PostgreSQL refused for good
    /// during the whole demo, the wire server's included).
    fn awt_errors_in_postgres(&self) -> u64 {
        let Ok(mut client) = pgtier_backend::connect::connect(&self.control.backend_url) else { return 0 };
        client
            .query_one("SELECT count(*)::int8 FROM pgtier.awt_errors", &[])
            .map_or(0, |row| row.get::<_, i64>(0).max(0) as u64)
    }
}

/// Waits until write-through has caught up.
trait Drainer {
    /// True when caught up within `timeout`; stops early on `interrupt`.
    fn drain(&self, timeout: Duration, interrupt: &AtomicBool) -> Result<bool, DbError>;
}

struct DirectDrain<'a>(&'a Arc<Cache>);

impl Drainer for DirectDrain<'_> {
    fn drain(&self, timeout: Duration, interrupt: &AtomicBool) -> Result<bool, DbError> {
        let deadline = Instant::now() + timeout;
        // In slices, so Ctrl-C is seen within a second.
        loop {
            if self.0.wait_propagated(Duration::from_secs(1)) {
                return Ok(true);
            }
            if interrupt.load(Ordering::Relaxed) || Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }
}

/// A target whose backend figures are PostgreSQL's, sampled while the
/// cache in front of it runs: the study's "backend CPU and commit waits
/// with the cache" are PostgreSQL's, applying the write-through.
struct BehindCache<'a> {
    inner: &'a dyn Target,
    sampler_url: String,
}

impl Target for BehindCache<'_> {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn connect(&self) -> Result<Box<dyn Session>, DbError> {
        self.inner.connect()
    }
    fn execute_batch(&self, sql: &str) -> Result<(), DbError> {
        self.inner.execute_batch(sql)
    }
    fn bulk_load(&self, table: &str, columns: &[&str], rows: &mut dyn RowSource) -> Result<u64, DbError> {
        self.inner.bulk_load(table, columns, rows)
    }
    fn sampler(&self) -> Option<Box<dyn BackendSampler>> {
        Some(Box::new(PgSampler::new(self.sampler_url.clone(), url_is_local(&self.sampler_url))))
    }
    fn durability(&self) -> Result<String, DbError> {
        self.inner.durability()
    }
    fn keys_with_tables(&self) -> bool {
        self.inner.keys_with_tables()
    }
    fn bulk_load_method(&self) -> &'static str {
        self.inner.bulk_load_method()
    }
}

fn settings(o: &DemoOptions) -> Vec<(String, String)> {
    let secs = |d: Duration| format!("{} s", d.as_secs_f64());
    let threads: Vec<String> = o.threads.iter().map(u32::to_string).collect();
    vec![
        ("subscribers in PostgreSQL".into(), o.subscribers.to_string()),
        (
            "cached subscribers (targeted by every run)".into(),
            format!("{} (s_id 1..={}, {:.1} %)", o.cached_subscribers, o.cached_subscribers, 100.0 * o.cached_subscribers as f64 / o.subscribers as f64),
        ),
        ("thread counts".into(), threads.join(", ")),
        ("ramp-up / measure / ramp-down".into(), format!("{} / {} / {}", secs(o.ramp_up), secs(o.measure), secs(o.ramp_down))),
        ("rate search".into(), format!("up to {} steps of {}, flat = lag slope < {} ms/s", o.search_steps_max, secs(o.search_step), o.lag_slope_max_ms_per_s)),
        ("rate cap bound".into(), format!("{:.0} % of PostgreSQL's peak closed-loop MQTh", 100.0 * o.cap_fraction)),
        ("pgtier commit mode".into(), format!("{:?}", o.commit_mode).to_lowercase()),
        (
            "write-through (AWT)".into(),
            format!("{} apply lane(s), a batch collects for {} ms after its first transaction", o.awt.apply_connections, o.awt.batch_delay.as_millis()),
        ),
        ("LOAD parallel".into(), o.load_parallel.to_string()),
        ("seed".into(), o.seed.to_string()),
    ]
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| info.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_owned()))
        .unwrap_or_default()
}
