//! `pgtier demo`: reference study 000 (the HLR/TATP study) end to end on
//! this machine, with the study's method:
//!
//! 1. TATP populated in PostgreSQL; the baseline thread sweep (closed loop)
//!    against PostgreSQL alone over the subscribers the cache will hold,
//!    and its capped runs;
//! 2. an AWT cache group over those subscribers (`s_id <= C`), LOADed;
//! 3. the same sweep against pgtier in direct mode (the engine in this
//!    process, as the study's application ran TimesTen) and over the wire;
//! 4. the rate cap: the offered rate is stepped (open loop, direct mode)
//!    while write-through's backlog is watched; the highest rate at which
//!    it stays flat (`lag`) is pgtier's sustainable throughput, and the
//!    capped rate is at most that; every side runs open loop at the capped
//!    rate, [`DemoOptions::repeats`] times, so latencies are compared at
//!    equal throughput, with a median and a spread; pgtier direct runs it
//!    in both commit modes (async: the study's setting; sync: durability
//!    equal to PostgreSQL's);
//! 5. after propagation drains, the group is verified against PostgreSQL.
//!
//! Everything measured goes into a [`DemoReport`] as it is measured, so an
//! interrupted run (Ctrl-C: [`DemoControl::interrupt`]) still leaves a
//! partial report. The command line (crates/cli `demo_cmd.rs`) owns the
//! private PostgreSQL, the wire server and the signal handler.

mod charts;
mod lag;
mod markdown;
mod memory;
pub(crate) mod monitor;
mod runs;
mod search;
mod summary;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The demo's write-through settings are the cache's own.
pub use pgtier_cache::AwtConfig;
/// What a [`WireServer`] hands over to have write-through watched.
pub use pgtier_cache::Cache;
use pgtier_cache::{Aging, CacheConfig, LoadOptions};
use pgtier_engine::CommitMode;
use serde::{Deserialize, Serialize};

use crate::cpu::WithProcessCpu;
use crate::report::{self, PopulationSummary};
use crate::result::{MachineInfo, RunResult};
use crate::target::{BackendSampler, DbError, RowSource, Session, Target};
use crate::targets::cached::{cache_call, open_cache, tatp_group};
use crate::targets::embedded::EmbeddedTarget;
use crate::targets::postgres::{PgSampler, PgTarget, url_is_local};
use crate::tatp::population::{PopulateOptions, populate};

/// Theil-Sen slope, also the soak's growth trend.
pub(crate) use lag::slope;
pub use lag::{FLAT_SLOPE_SHARE, LagFigures, LagSample, LagWindow};
pub use markdown::{REPORT_FILE, SECTIONS, write_report};
pub use search::SearchStep;

/// The cache group's name.
pub const GROUP: &str = "tatp";
/// Labels of the runs in [`DemoReport::runs`].
pub const BASELINE: &str = "postgresql";
pub const DIRECT: &str = "pgtier-direct";
pub const WIRE: &str = "pgtier-wire";
pub const BASELINE_CAPPED: &str = "postgresql-capped";
/// pgtier direct at the capped rate, async commit (the study's setting).
pub const DIRECT_CAPPED: &str = "pgtier-direct-capped";
/// pgtier direct at the capped rate, sync commit (PostgreSQL's durability).
pub const DIRECT_SYNC_CAPPED: &str = "pgtier-direct-sync-capped";
pub const WIRE_CAPPED: &str = "pgtier-wire-capped";
/// The runs at the capped rate, in report order.
pub const CAPPED: [&str; 4] = [BASELINE_CAPPED, DIRECT_CAPPED, DIRECT_SYNC_CAPPED, WIRE_CAPPED];

/// The label of pgtier direct's capped run in `mode`.
pub fn direct_capped(mode: CommitMode) -> &'static str {
    match mode {
        CommitMode::Async => DIRECT_CAPPED,
        CommitMode::Sync => DIRECT_SYNC_CAPPED,
    }
}

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
    /// Runs of every side at the capped rate (median and spread reported).
    pub repeats: u32,
    /// Measure window of one rate-search step.
    pub search_step: Duration,
    pub search_steps_max: u32,
    /// The capped rate is at most this fraction of PostgreSQL's best
    /// closed-loop throughput: near 100 % an open-loop queue grows without
    /// bound and the baseline's latency would be all queueing.
    pub cap_fraction: f64,
    /// Longest wait for write-through to catch up between runs.
    pub drain_timeout: Duration,
    /// Commit mode of the sweeps, the search, the wire server and the first
    /// direct capped run; the direct capped run is repeated in the other.
    pub commit_mode: CommitMode,
    /// Write-through's node name, lanes and batching (the rest stays
    /// default). The command line gives every run a node name of its own:
    /// a node name belongs to one engine directory in PostgreSQL.
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
    /// The server's cache (in this process): write-through's figures.
    fn cache(&self) -> Option<Arc<Cache>>;
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

/// Cache memory against PostgreSQL's size for the same rows, each side
/// twice: as allocated, and as the bytes the rows themselves take.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryFigures {
    pub instances: u64,
    pub cache_rows: u64,
    /// The engine's count of the rows' versions and index entries in use
    /// (no free space, slack or allocator overhead).
    pub cache_bytes: u64,
    /// What the engine reserved for the group's tables: slab chunks for
    /// row versions, primary hash slots, ordered-index pages (free space
    /// in them included).
    #[serde(default)]
    pub cache_allocated_bytes: u64,
    /// Heap, indexes and TOAST of the four tables (pages allocated), each
    /// scaled by the share of its rows that belong to the cached subscribers.
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

/// Write-through during one measure window of a run behind the cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunLag {
    pub label: String,
    pub threads: u32,
    /// 1-based.
    pub repetition: u32,
    /// None when nothing was sampled.
    pub lag: Option<LagFigures>,
    /// The wait for write-through to catch up after the run.
    pub drain_s: f64,
    pub drained: bool,
}

/// How often the load generator of one repetition woke late.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LateWakes {
    pub label: String,
    pub repetition: u32,
    /// Wakes more than `driver::LATE_WAKE` after the intended start.
    pub late: u64,
    pub intended: u64,
    pub max_us: u64,
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
    /// Write-through every 250 ms while a cache ran.
    pub lag: Vec<LagSample>,
    /// Per one-second window: the lag of the transactions applied in it.
    #[serde(default)]
    pub lag_windows: Vec<LagWindow>,
    /// Per measure window behind the cache.
    #[serde(default)]
    pub run_lag: Vec<RunLag>,
    pub drains: Vec<Drain>,
    /// Open-loop repetitions: how often the load generator woke late. The
    /// delay is charged (latency runs from the intended start); a
    /// wake-up-charged figure is kept apart.
    #[serde(default)]
    pub late_wakes: Vec<LateWakes>,
    pub verify: Option<VerifyFigures>,
    /// (phase, wall seconds), in order.
    pub phases: Vec<(String, f64)>,
    /// Why the wire runs are missing, when they are.
    pub wire_skipped: Option<String>,
    /// PostgreSQL alone's capped runs were measured again at the end, at
    /// the lower capped rate write-through's flat maximum set (its writes
    /// then came after verify: PostgreSQL no longer equals the cache).
    #[serde(default)]
    pub rebaselined: bool,
    pub finished: bool,
    /// The failure or interruption that ended the run early.
    pub stopped_by: Option<String>,
    pub total_s: f64,
}

impl DemoReport {
    pub fn run(&self, label: &str) -> Option<&RunResult> {
        self.runs.iter().find(|r| r.label == label)
    }

    /// Write-through during the run's measure windows at `threads`.
    pub fn lags(&self, label: &str, threads: u32) -> Vec<&RunLag> {
        self.run_lag.iter().filter(|l| l.label == label && l.threads == threads).collect()
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
    OtherMode,
    Wire,
    Verify,
}

impl Phase {
    const ALL: [Phase; 9] = [
        Phase::Populate,
        Phase::Baseline,
        Phase::Load,
        Phase::Direct,
        Phase::Search,
        Phase::Capped,
        Phase::OtherMode,
        Phase::Wire,
        Phase::Verify,
    ];

    fn name(self) -> &'static str {
        match self {
            Phase::Populate => "populate PostgreSQL",
            Phase::Baseline => "baseline sweep + capped runs (PostgreSQL alone)",
            Phase::Load => "create + LOAD cache group",
            Phase::Direct => "sweep (pgtier direct)",
            Phase::Search => "rate-cap search",
            Phase::Capped => "capped runs (pgtier direct)",
            Phase::OtherMode => "capped runs (pgtier direct, other commit mode)",
            Phase::Wire => "sweep + capped runs (pgtier wire)",
            Phase::Verify => "drain + verify",
        }
    }

    fn estimate_s(self, o: &DemoOptions) -> f64 {
        let point = (o.ramp_up + o.measure + o.ramp_down).as_secs_f64() + 0.5;
        let sweep = point * o.threads.len() as f64;
        let capped = point * f64::from(o.repeats);
        match self {
            Phase::Populate => 3.0 + o.subscribers as f64 / 20_000.0,
            Phase::Baseline => sweep + capped,
            Phase::Load => 1.0 + o.cached_subscribers as f64 / 30_000.0,
            Phase::Direct => sweep * 1.5,
            Phase::Search => f64::from(o.search_steps_max.min(7)) * (o.search_step.as_secs_f64() + 3.0),
            Phase::Capped => capped,
            Phase::OtherMode => capped + 2.0,
            Phase::Wire => sweep + capped + 3.0,
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
    if options.repeats == 0 {
        return bad("the capped runs need at least one repetition".into());
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
    let mut demo = Demo { o: options, control, report, monitor: &monitor, phase: Phase::Populate, tallies: Vec::new() };
    let outcome = demo.all();
    report.total_s = started.elapsed().as_secs_f64();
    (report.lag, report.lag_windows) = monitor.finish();
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
    /// Every repetition's tally by (label, threads), so an iteration's
    /// histograms can be merged again when a repetition is added.
    tallies: Vec<((String, u32), Vec<crate::driver::RepetitionTally>)>,
}

/// The cache in direct mode: the engine in this process.
struct Direct {
    cache: Arc<Cache>,
    target: EmbeddedTarget,
}

impl Direct {
    /// Stops write-through and closes the engine, so its directory can be
    /// opened again (in another commit mode, or by the wire server).
    fn close(self) -> Result<(), DbError> {
        let db = self.target.database().clone();
        drop(self);
        db.close().map_err(|e| DbError::new(Some(e.sqlstate()), e.to_string()))
    }
}

fn failed(phase: Phase) -> impl Fn(DbError) -> DemoError {
    move |source| DemoError::Failed { phase: phase.name().to_owned(), source }
}

impl Demo<'_, '_> {
    fn all(&mut self) -> Result<(), DemoError> {
        let pg = self.step(Phase::Populate, |d| d.populate())?;
        let pg = Sampled { inner: &pg, sampler_url: self.control.backend_url.clone() };
        // PostgreSQL alone runs both its sweep and its capped runs before
        // the LOAD: once the group is loaded, PostgreSQL's copy of those rows
        // may only change through the cache (AWT), or the cache is stale.
        let pg_rate = self.step(Phase::Baseline, |d| {
            d.sweep(&pg, BASELINE, None)?;
            d.capped_baseline(&pg)
        })?;
        let direct = self.step(Phase::Load, |d| d.load())?;
        let rate = self.direct_runs(direct, pg_rate)?;
        self.step(Phase::OtherMode, |d| d.other_mode(rate))?;
        self.step(Phase::Wire, |d| d.wire(rate))?;
        self.step(Phase::Verify, |d| {
            d.verify()?;
            d.rebaseline(&pg, rate)
        })
    }

    /// The sweep, the search and the capped runs on the engine the LOAD
    /// filled (in the main commit mode); returns the capped rate.
    fn direct_runs(&mut self, direct: Direct, pg_rate: f64) -> Result<f64, DemoError> {
        let behind = Sampled { inner: &direct.target, sampler_url: self.control.backend_url.clone() };
        self.monitor.set_lag_source(Some(Box::new(monitor::CacheLag(direct.cache.clone()))));
        let drain = DirectDrain(&direct.cache);
        let result = (|| {
            self.step(Phase::Direct, |d| d.sweep(&behind, DIRECT, Some(&drain)))?;
            let rate = self.step(Phase::Search, |d| d.search(&behind, &direct.cache, pg_rate))?;
            self.step(Phase::Capped, |d| {
                d.capped(&behind, direct_capped(d.o.commit_mode), rate, Some(&drain), 1..=d.o.repeats)
            })?;
            Ok(rate)
        })();
        self.monitor.set_lag_source(None);
        drop(behind);
        let closed = direct.close().map_err(failed(Phase::Capped));
        let rate = result?;
        closed?;
        Ok(rate)
    }

    /// pgtier direct's capped runs in the other commit mode: the engine
    /// directory reopened with it (write-through resumes from PostgreSQL's
    /// progress rows).
    fn other_mode(&mut self, rate: f64) -> Result<(), DemoError> {
        let mode = match self.o.commit_mode {
            CommitMode::Async => CommitMode::Sync,
            CommitMode::Sync => CommitMode::Async,
        };
        let (cache, target) =
            open_cache(&self.o.work_dir, mode, &self.control.backend_url, self.cache_config()).map_err(self.fail())?;
        let direct = Direct { cache, target };
        self.monitor.set_lag_source(Some(Box::new(monitor::CacheLag(direct.cache.clone()))));
        let behind = Sampled { inner: &direct.target, sampler_url: self.control.backend_url.clone() };
        let result =
            self.capped(&behind, direct_capped(mode), rate, Some(&DirectDrain(&direct.cache)), 1..=self.o.repeats);
        self.monitor.set_lag_source(None);
        drop(behind);
        let closed = direct.close().map_err(self.fail());
        result.and(closed)
    }

    /// Runs one phase: progress, timing, interruption check.
    fn step<T>(&mut self, phase: Phase, body: impl FnOnce(&mut Self) -> Result<T, DemoError>) -> Result<T, DemoError> {
        self.interrupted()?;
        self.phase = phase;
        let index = Phase::ALL.iter().position(|p| *p == phase).unwrap_or(0);
        let monitor = self.monitor;
        let (result, seconds) = monitor.phase(index, || body(self));
        self.report.phases.push((phase.name().to_owned(), seconds));
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
        self.report.population = Some(PopulationSummary::of(&done, &options, "binary"));
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
        let (cache, target) =
            open_cache(dir, self.o.commit_mode, &self.control.backend_url, config).map_err(self.fail())?;
        let mut group = tatp_group(GROUP, false, Aging::Off);
        group.root_predicate = Some(format!("s_id <= {}", self.o.cached_subscribers));
        cache_call(cache.create_group(&group)).map_err(self.fail())?;
        self.monitor.detail(format!("LOAD CACHE GROUP {GROUP} ({} subscribers)", self.o.cached_subscribers));
        let loaded =
            cache_call(cache.load(GROUP, &LoadOptions { parallel: self.o.load_parallel, ..LoadOptions::default() }))
                .map_err(self.fail())?;
        self.report.load = Some(LoadFigures {
            instances: loaded.instances,
            rows: loaded.rows.iter().map(|(_, n)| n).sum(),
            seconds: loaded.seconds,
        });
        self.report.memory =
            Some(memory::figures(&cache, &self.control.backend_url, self.o.cached_subscribers).map_err(self.fail())?);
        Ok(Direct { cache, target })
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
        let result = self.wire_runs(server.as_ref(), rate);
        self.monitor.set_lag_source(None);
        let stopped =
            server.stop().map_err(|e| self.fail()(DbError::new(None, format!("stopping the pgtier server: {e}"))));
        result.and(stopped)
    }

    fn wire_runs(&mut self, server: &dyn WireServer, rate: f64) -> Result<(), DemoError> {
        let cache = server.cache().ok_or_else(|| {
            self.fail()(DbError::new(
                Some("55000"),
                "the pgtier server runs no cache, so write-through cannot be watched",
            ))
        })?;
        self.monitor.set_lag_source(Some(Box::new(monitor::CacheLag(cache.clone()))));
        let target =
            PgTarget::open(&server.url()).map_err(|e| self.fail()(DbError::new(Some(e.sqlstate()), e.to_string())))?;
        let behind = Sampled { inner: &target, sampler_url: self.control.backend_url.clone() };
        let drain = DirectDrain(&cache);
        self.sweep(&behind, WIRE, Some(&drain))?;
        self.capped(&behind, WIRE_CAPPED, rate, Some(&drain), 1..=self.o.repeats)
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

/// A target measured with PostgreSQL's figures (a `PgSampler` on the
/// backend) and this process's CPU per component: PostgreSQL alone, or
/// pgtier in front of it, where the study's "backend CPU and commit waits
/// with the cache" are PostgreSQL's, applying the write-through.
pub(crate) struct Sampled<'a> {
    pub(crate) inner: &'a dyn Target,
    pub(crate) sampler_url: String,
}

impl Target for Sampled<'_> {
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
        let postgres = PgSampler::new(self.sampler_url.clone(), url_is_local(&self.sampler_url));
        Some(Box::new(WithProcessCpu::new(Some(Box::new(postgres)))))
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
            format!(
                "{} (s_id 1..={}, {:.1} %)",
                o.cached_subscribers,
                o.cached_subscribers,
                100.0 * o.cached_subscribers as f64 / o.subscribers as f64
            ),
        ),
        ("thread counts".into(), threads.join(", ")),
        (
            "ramp-up / measure / ramp-down".into(),
            format!("{} / {} / {}", secs(o.ramp_up), secs(o.measure), secs(o.ramp_down)),
        ),
        ("runs at the capped rate, per side".into(), o.repeats.to_string()),
        (
            "rate search".into(),
            format!(
                "up to {} steps of {}; flat = write-through's backlog grows by at most {:.0} % of the WAL rate the cache writes, and no 1 s window has a backlog with nothing applied",
                o.search_steps_max,
                secs(o.search_step),
                100.0 * FLAT_SLOPE_SHARE
            ),
        ),
        ("rate cap bound".into(), format!("{:.0} % of PostgreSQL's peak closed-loop MQTh", 100.0 * o.cap_fraction)),
        ("pgtier commit mode (sweeps, search, wire)".into(), format!("{:?}", o.commit_mode).to_lowercase()),
        (
            "write-through (AWT)".into(),
            format!(
                "node {}, {} apply lane(s), a batch collects for {} ms after its first transaction",
                o.awt.node,
                o.awt.apply_connections,
                o.awt.batch_delay.as_millis()
            ),
        ),
        ("LOAD parallel".into(), o.load_parallel.to_string()),
        ("seed".into(), o.seed.to_string()),
    ]
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_default()
}
