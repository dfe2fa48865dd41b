//! `pgtier demo flash`: the flash studies (001, 002, 003, and study 000's
//! use case 2) end to end on this machine, with their method at laptop
//! scale:
//!
//! 1. TATP populated in a private PostgreSQL, which is then restarted in a
//!    memory cgroup of pgtier's DRAM budget (plus its processes' own
//!    memory): the fair baseline, PostgreSQL alone with the memory pgtier's
//!    DRAM has, page cache included ([`pgtier_backend::memory_limit`]);
//! 2. study 003's table: TATP against PostgreSQL alone, then against pgtier
//!    (over the wire, the same client protocol) as a DYNAMIC AWT cache group
//!    whose DRAM budget plus flash tier hold 10/20/40/60 % of the data;
//!    each gain beside the study's 2.4x/3.2x/4.6x/5.2x;
//! 3. the warm-up curve: the tier enabled online while the load runs, per
//!    second throughput and where the instances came from;
//! 4. study 000's use case 2: every subscriber in DRAM (use case 1) against
//!    a DRAM budget of a fifth of them with flash under it, per transaction
//!    latency side by side (direct mode, as the study's application ran);
//! 5. study 002's write-back against clean flash: TATP's two updates by key,
//!    throughput, device writes, PostgreSQL's WAL;
//! 6. after every pgtier run: write-through drained, `VERIFY CACHE GROUP`
//!    (memory against PostgreSQL) and a read check of subscribers drawn as
//!    the clients draw them, read through the cache (flash answers
//!    included) and compared row by row with PostgreSQL's.
//!
//! Everything measured goes into a [`FlashReport`] as it is measured; an
//! interrupted run keeps what it had. The command line (crates/cli
//! `demo_cmd.rs`) owns the private PostgreSQL, the servers (through
//! [`FlashControl::start_server`]), the device table of `pgtier bench io`
//! and the signal handler.

mod markdown;
mod sides;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pgtier_cache::Cache;
use pgtier_engine::{CommitMode, Database};
use serde::{Deserialize, Serialize};

use crate::demo::monitor::Monitor;
use crate::report::{self, PopulationSummary};
use crate::result::MachineInfo;
use crate::target::DbError;
use crate::targets::postgres::PgTarget;
use crate::tatp::population::{PopulateOptions, populate};
use crate::tatp::random::SubscriberKeys;

pub use crate::device::DiskFigures;
pub use markdown::{REPORT_FILE, SECTIONS, write_report};

/// The cache group's name in every pgtier run.
pub const GROUP: &str = "tatp";
/// Study 003's Table 3: (cache size in % of the database, relative TPS).
pub const STUDY_003: [(f64, f64); 4] = [(0.10, 2.4), (0.20, 3.2), (0.40, 4.6), (0.60, 5.2)];

/// What the command line decides.
#[derive(Clone, Debug)]
pub struct FlashOptions {
    pub subscribers: u64,
    /// pgtier's DRAM budget as a share of PostgreSQL's size of the data
    /// (study 003: 62 GB of RAM beside a 1.2 TB database, about 5 %).
    pub dram_fraction: f64,
    /// Cache sizes (DRAM budget + flash) as shares of the data.
    pub sizes: Vec<f64>,
    /// Closed-loop sessions of every run (study 003: 58 virtual users).
    pub threads: u32,
    /// One unmeasured warm-up window: before each measure such windows run
    /// until the share of transactions missing memory is steady
    /// (`crate::warmup`), at most `sides::WARM_WINDOWS_MAX` of them.
    pub warm: Duration,
    pub measure: Duration,
    /// Load before the tier is enabled, and after it, in the warm-up curve.
    pub curve_lead: Duration,
    pub curve_after: Duration,
    /// Study 000 use case 2's DRAM budget as a share of all instances (a fifth: 5x the DRAM budget).
    pub uc2_dram_share: f64,
    /// PostgreSQL's memory limit is the DRAM budget plus its processes'
    /// own memory (backends, shared memory beside the buffer pool), measured
    /// under the baseline's load; pgtier's runs add this room for the
    /// connections they open (pool, LOAD streams, write-through).
    pub postgres_headroom_bytes: u64,
    pub commit_mode: CommitMode,
    /// PostgreSQL's reads from its disk held to this many a second, as
    /// slower primary storage (study 003's spinning disks); None: the
    /// machine's disk as it is.
    pub primary_read_iops: Option<u64>,
    /// Subscribers read back through the cache after each pgtier run.
    pub read_check: u64,
    pub seed: u64,
    pub populate_streams: usize,
    pub work_dir: PathBuf,
    pub out_dir: PathBuf,
}

impl FlashOptions {
    pub fn check(&self) -> Result<(), FlashError> {
        let bad = |m: String| Err(FlashError::Invalid(m));
        if self.subscribers < 1000 {
            return bad(format!("subscribers {}: at least 1000", self.subscribers));
        }
        if !(self.dram_fraction > 0.0 && self.dram_fraction < 1.0) {
            return bad(format!("DRAM fraction {} must be in (0, 1)", self.dram_fraction));
        }
        if self.sizes.is_empty() {
            return bad("at least one cache size is needed".into());
        }
        if let Some(size) = self.sizes.iter().find(|s| !(**s > self.dram_fraction && **s <= 4.0)) {
            return bad(format!(
                "cache size {size} must be above the DRAM fraction {} (the flash holds the difference) and at most 4",
                self.dram_fraction
            ));
        }
        if self.threads == 0 || self.threads > 256 {
            return bad(format!("threads {}: 1 to 256", self.threads));
        }
        if self.measure.is_zero() {
            return bad("the measure window must be longer than 0 s".into());
        }
        if !(self.uc2_dram_share > 0.0 && self.uc2_dram_share < 1.0) {
            return bad(format!("use case 2's DRAM share {} must be in (0, 1)", self.uc2_dram_share));
        }
        Ok(())
    }

    /// Seconds each phase is expected to take, for the progress ETA.
    fn estimates(&self) -> Vec<(&'static str, f64)> {
        // Warm-ups ran three windows typically (two at the least).
        let run = (3 * self.warm + self.measure).as_secs_f64() + 4.0;
        let load = 5.0 + self.subscribers as f64 / 15_000.0;
        let side = run + load + 8.0;
        vec![
            (Phase::Populate.name(), 5.0 + self.subscribers as f64 / 12_000.0),
            (Phase::Limit.name(), 10.0),
            (Phase::Baseline.name(), run),
            (Phase::Sizes.name(), load + 2.0 * run * self.sizes.len() as f64),
            (Phase::Curve.name(), load + (self.curve_lead + self.curve_after).as_secs_f64() + 8.0),
            (Phase::UseCase2.name(), 2.0 * side),
            (Phase::WriteBack.name(), 2.0 * side),
        ]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Populate,
    Limit,
    Baseline,
    Sizes,
    Curve,
    UseCase2,
    WriteBack,
}

impl Phase {
    const ALL: [Phase; 7] =
        [Phase::Populate, Phase::Limit, Phase::Baseline, Phase::Sizes, Phase::Curve, Phase::UseCase2, Phase::WriteBack];

    fn name(self) -> &'static str {
        match self {
            Phase::Populate => "populate PostgreSQL",
            Phase::Limit => "PostgreSQL restarted with the DRAM budget's memory",
            Phase::Baseline => "PostgreSQL alone (study 003's baseline)",
            Phase::Sizes => "pgtier at each cache size (study 003)",
            Phase::Curve => "warm-up curve: the tier enabled online",
            Phase::UseCase2 => "study 000 use case 2: all in DRAM vs a fifth in DRAM + flash",
            Phase::WriteBack => "study 002: write-back vs clean flash, random updates",
        }
    }
}

/// A pgtier server in this process, over one run's engine directory.
pub trait FlashServer {
    /// `postgresql://...` a client connects to.
    fn url(&self) -> String;
    fn cache(&self) -> Arc<Cache>;
    /// The server's engine, for direct-mode runs beside its sessions.
    fn database(&self) -> Database;
    /// Stops it (sessions end, checkpoint).
    fn stop(self: Box<Self>) -> Result<(), String>;
}

/// What a pgtier run's server is started with.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    pub dir: PathBuf,
    pub backend_url: String,
    pub commit_mode: CommitMode,
    /// Write-through's node name (one per run: it belongs to one directory).
    pub node: String,
    pub memory_budget: u64,
    /// The flash tier: (file size, region size, write-back).
    pub tier: Option<(u64, u64, bool)>,
}

pub type StartServer<'a> = &'a dyn Fn(&ServerSpec) -> Result<Box<dyn FlashServer>, String>;

/// What PostgreSQL's memory limit is, as the command line applied it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryLimitFigures {
    /// The cgroup's limit; None when there is none.
    pub limit_bytes: Option<u64>,
    /// Why there is no limit, when there is none.
    pub unavailable: Option<String>,
    pub shared_buffers: String,
    /// Read at the end of the demo.
    pub page_cache_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
    /// The most ever charged.
    #[serde(default)]
    pub peak_bytes: Option<u64>,
    /// PostgreSQL's own memory under the baseline's load, measured: what
    /// was charged less page cache and the buffer pool.
    #[serde(default)]
    pub process_bytes: Option<u64>,
    /// The limit while PostgreSQL's processes were measured.
    #[serde(default)]
    pub sizing_limit_bytes: Option<u64>,
    /// The limit during pgtier's runs (the headroom added).
    #[serde(default)]
    pub pgtier_runs_limit_bytes: Option<u64>,
    /// PostgreSQL alone's page cache at the end of its run.
    #[serde(default)]
    pub baseline_page_cache_bytes: Option<u64>,
    /// Times the kernel reclaimed at the limit.
    pub limit_hits: Option<u64>,
}

/// How the command line limits PostgreSQL's memory and, when asked, its
/// storage; the demo calls it once the population is in (its pages must
/// not stay charged outside).
pub trait PostgresLimits {
    /// Applies `bytes` (restarting PostgreSQL so that every page it touches
    /// is charged inside) with `shared_buffers`; returns what was applied.
    fn limit(&mut self, bytes: u64, shared_buffers: &str) -> MemoryLimitFigures;
    /// A new limit for the running server (the kernel reclaims page cache
    /// down to it).
    fn set_limit(&mut self, bytes: u64) -> Result<(), String>;
    /// The figures now (usage, page cache, reclaims at the limit).
    fn read(&self) -> MemoryLimitFigures;
    /// Holds PostgreSQL's reads from its data's disk to `read_iops` a
    /// second (`pgtier_backend::read_throttle`); the disk's name on success.
    fn throttle_reads(&mut self, read_iops: u64) -> Result<String, String>;
    /// Lifts [`Self::throttle_reads`]'s ceiling.
    fn lift_read_ceiling(&mut self);
}

/// PostgreSQL's storage in the demo: the machine's disk as it is, or held
/// to a read ceiling standing in for the studies' primary storage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageFigures {
    /// The ceiling asked for (`--primary-read-iops`).
    pub read_iops_ceiling: Option<u64>,
    /// The disk it applies to (`major:minor`), once applied.
    pub disk: Option<String>,
    /// Why it was asked for and not applied.
    pub unavailable: Option<String>,
    /// The phase before which it was lifted: it holds for study 003's
    /// phases only (the baseline, the sizes, the warm-up curve).
    pub lifted_before: Option<String>,
}

/// What the caller hands the demo besides its options.
pub struct FlashControl<'a> {
    pub backend_url: String,
    pub start_server: StartServer<'a>,
    /// None: PostgreSQL runs unlimited (an external one), said in the report.
    pub limiter: Option<&'a mut dyn PostgresLimits>,
    pub interrupt: &'a AtomicBool,
    pub progress: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum FlashError {
    #[error("interrupted during {phase}")]
    Interrupted { phase: String },
    #[error("{phase}: {source}")]
    Failed { phase: String, source: DbError },
    #[error("invalid demo settings: {0}")]
    Invalid(String),
}

/// The data's size, which the cache sizes are shares of.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DataFigures {
    pub subscribers: u64,
    /// PostgreSQL's four TATP tables: heap, indexes, TOAST.
    pub postgres_bytes: u64,
    /// pgtier's DRAM budget in the study 003 runs.
    pub dram_budget_bytes: u64,
    /// pgtier's memory for one instance (a subscriber and its rows), from
    /// the first run's full load.
    pub instance_bytes: Option<u64>,
    /// (share of the subscribers, share of the transactions whose key is
    /// among that many of the hottest), sampled from the clients' own key
    /// generator at each cache size and the DRAM budget.
    #[serde(default)]
    pub hottest_shares: Vec<(f64, f64)>,
}

/// One transaction type's latency in one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TxnFigures {
    pub name: String,
    pub executed: u64,
    pub avg_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
}

/// The check after a pgtier run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckFigures {
    pub drained: bool,
    /// Instances in memory compared by VERIFY.
    pub verified: u64,
    pub verify_differing: u64,
    /// Subscribers read through the cache and compared with PostgreSQL.
    pub read_checked: u64,
    pub read_differing: u64,
    pub read_failed: u64,
    pub differences: Vec<String>,
    pub clean: bool,
}

/// One measured run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SideFigures {
    /// `postgresql`, `pgtier-10%`, `uc1-all-dram`, `write-back`, ...
    pub label: String,
    /// Which table it belongs to: `003`, `000-uc2`, `002`.
    pub study: String,
    /// `wire` or `direct` (pgtier), `postgresql`.
    pub access: String,
    /// Cache size (DRAM + flash) as a share of the data.
    pub cache_fraction: Option<f64>,
    pub dram_budget_bytes: Option<u64>,
    pub flash_bytes: Option<u64>,
    pub txn_per_s: f64,
    pub avg_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub acceptable_errors: u64,
    pub txns: Vec<TxnFigures>,
    /// pgtier's memory once every instance was loaded (before aging).
    pub loaded_bytes: Option<u64>,
    /// Instances in memory and records on flash at the end of the window.
    pub memory_instances: Option<u64>,
    pub flash_records: Option<u64>,
    /// Over the measure window.
    pub flash_answers: Option<u64>,
    pub promotions: Option<u64>,
    pub backend_loads: Option<u64>,
    /// Misses by a unique key without the root key (TATP's sub_nbr): the
    /// ones that asked PostgreSQL whose row it is, and the ones a key
    /// record on flash named the instance for.
    #[serde(default)]
    pub unique_asked: Option<u64>,
    #[serde(default)]
    pub unique_on_flash: Option<u64>,
    pub demotions: Option<u64>,
    pub dirty_demotions: Option<u64>,
    pub write_amplification: Option<f64>,
    /// The device holding the flash file (and here PostgreSQL's data), over the window.
    pub device: Option<DiskFigures>,
    pub device_name: Option<String>,
    /// PostgreSQL's WAL over the measure window (its WAL position's advance,
    /// from the kit's sampler).
    pub postgres_wal_mb_s: Option<f64>,
    pub check: Option<CheckFigures>,
    /// Each warm-up window's misses of memory per transaction (pgtier:
    /// answered from flash, loaded from PostgreSQL; PostgreSQL alone: reads
    /// from its device), and whether the last window was steady in each.
    #[serde(default)]
    pub warm_up_windows: Vec<Vec<f64>>,
    #[serde(default)]
    pub warm_up_steady: bool,
    /// pgtier: the window's rate with write-through caught up
    /// (`targets::cached::caught_up_rate`; the drain after the window, in
    /// seconds), what the gains compare; None for PostgreSQL alone, or
    /// `Some(0.0)` when write-through did not catch up within the bound.
    #[serde(default)]
    pub caught_up_txn_per_s: Option<f64>,
    #[serde(default)]
    pub drain_s: Option<f64>,
    /// The group's memory at the end of the window (against
    /// `dram_budget_bytes`: instances with changes PostgreSQL does not have
    /// yet are never evicted) and the write-through backlog then.
    #[serde(default)]
    pub end_memory_bytes: Option<u64>,
    #[serde(default)]
    pub end_backlog_bytes: Option<u64>,
}

impl SideFigures {
    /// The rate the report compares: pgtier's with write-through caught
    /// up, PostgreSQL alone's as measured.
    pub fn sustained(&self) -> f64 {
        self.caught_up_txn_per_s.unwrap_or(self.txn_per_s)
    }
}

/// One second of the warm-up curve.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Seconds since the load started.
    pub second: u32,
    pub txn_per_s: f64,
    /// Per second: instances answered from flash (and promoted), loaded from PostgreSQL.
    pub flash_answers: u64,
    pub backend_loads: u64,
    pub flash_records: u64,
}

/// Everything the demo measured, written as `flash.json` beside the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlashReport {
    pub started_at: String,
    pub machine: MachineInfo,
    pub settings: Vec<(String, String)>,
    pub postgres_settings: Vec<(String, String)>,
    pub memory_limit: MemoryLimitFigures,
    #[serde(default)]
    pub storage: StorageFigures,
    pub population: Option<PopulationSummary>,
    pub data: Option<DataFigures>,
    pub sides: Vec<SideFigures>,
    pub curve: Vec<CurvePoint>,
    /// Second of the curve at which the tier was enabled.
    pub curve_enabled_at: Option<u32>,
    /// The device table of `pgtier bench io` (Markdown), added by the caller.
    pub io_table: Option<String>,
    pub io_notes: Vec<String>,
    /// (phase, wall seconds), in order.
    pub phases: Vec<(String, f64)>,
    pub finished: bool,
    pub stopped_by: Option<String>,
    pub total_s: f64,
}

impl FlashReport {
    pub fn side(&self, label: &str) -> Option<&SideFigures> {
        self.sides.iter().find(|s| s.label == label)
    }

    /// Every pgtier run's check was clean (and there was at least one).
    pub fn checks_clean(&self) -> bool {
        let checks: Vec<&CheckFigures> = self.sides.iter().filter_map(|s| s.check.as_ref()).collect();
        !checks.is_empty() && checks.iter().all(|c| c.clean)
    }
}

/// Room above the budget while PostgreSQL's own memory is measured.
const SIZING_ROOM: u64 = 512 << 20;
/// Room above the budget and PostgreSQL's measured own memory for the
/// baseline: kernel memory and a backend's transient allocations.
const BASELINE_SLACK: u64 = 8 << 20;

/// PostgreSQL's buffer pool: a quarter of the memory it has for caching.
fn shared_buffers_bytes(budget: u64) -> u64 {
    (budget / 4).max(1 << 20)
}

/// Label of PostgreSQL alone's run.
pub const BASELINE: &str = "postgresql";

/// Label of the study 003 run at `fraction` over the wire ...
pub fn size_label(fraction: f64) -> String {
    format!("pgtier-{:.0}%", fraction * 100.0)
}

/// ... and in direct mode, on the same cache right after it.
pub fn size_label_direct(fraction: f64) -> String {
    format!("pgtier-direct-{:.0}%", fraction * 100.0)
}

/// Runs the demo, filling `report` as it goes.
pub fn run(options: &FlashOptions, control: &mut FlashControl<'_>, report: &mut FlashReport) -> Result<(), FlashError> {
    options.check()?;
    let started = Instant::now();
    report.started_at = report::now_rfc3339();
    report.machine = report::machine_info();
    report.settings = settings(options);
    let monitor = Monitor::start(options.estimates(), control.progress);
    let outcome = Demo { o: options, control, report, monitor: &monitor, phase: Phase::Populate }.all();
    let _ = monitor.finish();
    report.total_s = started.elapsed().as_secs_f64();
    match &outcome {
        Ok(()) => report.finished = true,
        Err(e) => report.stopped_by = Some(e.to_string()),
    }
    outcome
}

struct Demo<'a, 'c> {
    o: &'a FlashOptions,
    control: &'a mut FlashControl<'c>,
    report: &'a mut FlashReport,
    monitor: &'a Monitor,
    phase: Phase,
}

impl Demo<'_, '_> {
    fn all(&mut self) -> Result<(), FlashError> {
        self.step(Phase::Populate, Demo::populate)?;
        self.step(Phase::Limit, Demo::limit)?;
        self.step(Phase::Baseline, Demo::baseline)?;
        self.step(Phase::Sizes, Demo::size_runs)?;
        self.step(Phase::Curve, Demo::curve)?;
        self.lift_read_ceiling(Phase::UseCase2);
        self.step(Phase::UseCase2, Demo::use_case_2)?;
        self.step(Phase::WriteBack, Demo::write_back)?;
        if let Some(limiter) = &self.control.limiter {
            let read = limiter.read();
            self.report.memory_limit.page_cache_bytes = read.page_cache_bytes;
            self.report.memory_limit.usage_bytes = read.usage_bytes;
            self.report.memory_limit.peak_bytes = read.peak_bytes;
            self.report.memory_limit.limit_hits = read.limit_hits;
        }
        Ok(())
    }

    fn step(&mut self, phase: Phase, body: impl FnOnce(&mut Self) -> Result<(), FlashError>) -> Result<(), FlashError> {
        self.interrupted()?;
        self.phase = phase;
        let index = Phase::ALL.iter().position(|p| *p == phase).unwrap_or(0);
        let monitor = self.monitor;
        let (result, seconds) = monitor.phase(index, || body(self));
        self.report.phases.push((phase.name().to_owned(), seconds));
        result
    }

    fn interrupted(&self) -> Result<(), FlashError> {
        if self.control.interrupt.load(Ordering::Relaxed) {
            return Err(FlashError::Interrupted { phase: self.phase.name().to_owned() });
        }
        Ok(())
    }

    fn fail(&self) -> impl Fn(DbError) -> FlashError + use<> {
        let phase = self.phase.name().to_owned();
        move |source| FlashError::Failed { phase: phase.clone(), source }
    }

    fn populate(&mut self) -> Result<(), FlashError> {
        let pg = self.postgres()?;
        self.monitor.detail(format!("{} subscribers", self.o.subscribers));
        let options = PopulateOptions {
            subscribers: self.o.subscribers,
            streams: self.o.populate_streams,
            seed: self.o.seed,
            progress: false,
        };
        let done = populate(&pg, &options).map_err(|e| self.fail()(DbError::new(None, e.to_string())))?;
        self.report.population = Some(PopulationSummary::of(&done, &options, "binary"));
        let postgres_bytes = sides::postgres_data_bytes(&self.control.backend_url).map_err(self.fail())?;
        self.report.data = Some(DataFigures {
            subscribers: self.o.subscribers,
            postgres_bytes,
            dram_budget_bytes: (postgres_bytes as f64 * self.o.dram_fraction) as u64,
            instance_bytes: None,
            hottest_shares: hottest_shares(self.o),
        });
        Ok(())
    }

    fn postgres(&self) -> Result<PgTarget, FlashError> {
        PgTarget::open(&self.control.backend_url)
            .map_err(|e| self.fail()(DbError::new(Some(e.sqlstate()), e.to_string())))
    }

    fn budget(&self) -> u64 {
        self.report.data.as_ref().map_or(0, |d| d.dram_budget_bytes)
    }

    /// PostgreSQL is restarted in a memory cgroup, first with room to spare
    /// ([`SIZING_ROOM`]) so its processes' own memory can be measured under
    /// load ([`Self::baseline`] then tightens the limit), a quarter of the
    /// budget as shared_buffers (PostgreSQL's usual advice).
    fn limit(&mut self) -> Result<(), FlashError> {
        let budget = self.budget();
        let shared_buffers = format!("{}kB", shared_buffers_bytes(budget) >> 10);
        match self.control.limiter.as_deref_mut() {
            Some(limiter) => {
                self.monitor.detail(format!("memory limit {} MB while sizing", (budget + SIZING_ROOM) >> 20));
                self.report.memory_limit = limiter.limit(budget + SIZING_ROOM, &shared_buffers);
                self.report.memory_limit.sizing_limit_bytes = self.report.memory_limit.limit_bytes;
            }
            None => {
                self.report.memory_limit = MemoryLimitFigures {
                    unavailable: Some("an external PostgreSQL (--backend): its memory is not limited".into()),
                    ..MemoryLimitFigures::default()
                };
            }
        }
        if let Some(iops) = self.o.primary_read_iops {
            self.report.storage.read_iops_ceiling = Some(iops);
            match self.control.limiter.as_deref_mut() {
                Some(limiter) => {
                    self.monitor.detail(format!("PostgreSQL's reads held to {iops}/s"));
                    match limiter.throttle_reads(iops) {
                        Ok(disk) => self.report.storage.disk = Some(disk),
                        Err(why) => self.report.storage.unavailable = Some(why),
                    }
                }
                None => {
                    self.report.storage.unavailable =
                        Some("an external PostgreSQL (--backend): its storage is not held".into());
                }
            }
        }
        // The settings after the restart: what every run below ran with.
        self.report.postgres_settings = self.postgres()?.server_settings().map_err(self.fail())?;
        Ok(())
    }

    /// Study 003 asks what a flash tier gives a database on slow storage;
    /// use case 2 and study 002 compare pgtier with itself, and use case 2
    /// LOADs and VERIFYs every subscriber, two full reads of PostgreSQL
    /// that at a spinning disk's rate would take longer than the whole demo.
    fn lift_read_ceiling(&mut self, before: Phase) {
        if self.report.storage.disk.is_none() {
            return;
        }
        if let Some(limiter) = self.control.limiter.as_deref_mut() {
            limiter.lift_read_ceiling();
            self.report.storage.lifted_before = Some(before.name().to_owned());
        }
    }

    /// Under the sizing limit, the baseline's load runs for the warm-up
    /// time; what PostgreSQL holds beyond page cache and its buffer pool
    /// while the sessions are open is its processes' own memory (sampled
    /// through the load, the most seen: read after the load, with the
    /// backends gone, it missed their memory, and a 60 s baseline was then
    /// killed at the limit). The limit becomes the DRAM budget plus that
    /// plus [`BASELINE_SLACK`], so what PostgreSQL alone can cache (buffer
    /// pool and page cache) is about pgtier's DRAM budget.
    fn tighten(&mut self, pg: &PgTarget) -> Result<(), FlashError> {
        if self.control.limiter.is_none() || self.report.memory_limit.limit_bytes.is_none() {
            return Ok(());
        }
        self.monitor.detail("measuring PostgreSQL's own memory under load".into());
        let warm = self.o.warm.max(Duration::from_secs(3));
        let budget = self.report.data.as_ref().map_or(0, |d| d.dram_budget_bytes);
        let mut process: Option<u64> = None;
        let limiter = self.control.limiter.as_deref();
        let mut sample = || {
            let read = limiter.map(|l| l.read()).unwrap_or_default();
            if let (Some(usage), Some(cache)) = (read.usage_bytes, read.page_cache_bytes) {
                let own = usage.saturating_sub(cache).saturating_sub(shared_buffers_bytes(budget));
                process = Some(process.map_or(own, |seen| seen.max(own)));
            }
        };
        sides::load_for(self, pg, warm, &mut sample)?;
        let Some(process) = process else { return Ok(()) };
        let Some(limiter) = self.control.limiter.as_deref_mut() else { return Ok(()) };
        let limit = (budget + process + BASELINE_SLACK).max(pgtier_backend::memory_limit::MEMORY_LIMIT_MIN);
        self.report.memory_limit.process_bytes = Some(process);
        match limiter.set_limit(limit) {
            Ok(()) => self.report.memory_limit.limit_bytes = Some(limit),
            Err(why) => {
                self.report.memory_limit.limit_bytes = None;
                self.report.memory_limit.unavailable = Some(format!("tightening the limit: {why}"));
            }
        }
        Ok(())
    }

    /// pgtier's runs open connections PostgreSQL alone's did not (pool,
    /// LOAD streams, write-through), whose backends need memory the
    /// baseline's measurement did not see: the headroom is added now, or
    /// the kernel would kill a backend mid-run. What they leave unused
    /// PostgreSQL may cache with, which can only help pgtier's misses; the
    /// report says so.
    fn widen(&mut self) {
        let Some(limit) = self.report.memory_limit.limit_bytes else { return };
        let Some(limiter) = self.control.limiter.as_deref_mut() else { return };
        // The page cache PostgreSQL alone ran with, before the wider limit.
        self.report.memory_limit.baseline_page_cache_bytes = limiter.read().page_cache_bytes;
        let widened = limit + self.o.postgres_headroom_bytes;
        match limiter.set_limit(widened) {
            Ok(()) => self.report.memory_limit.pgtier_runs_limit_bytes = Some(widened),
            Err(why) => self.report.memory_limit.unavailable = Some(format!("widening the limit: {why}")),
        }
    }

    fn baseline(&mut self) -> Result<(), FlashError> {
        let pg = self.postgres()?;
        self.tighten(&pg)?;
        let mut side = sides::measure(self, &pg, None, sides::Load::Standard)?;
        side.label = BASELINE.into();
        side.study = "003".into();
        side.access = "postgresql".into();
        self.report.sides.push(side);
        Ok(())
    }

    /// One server for every size: loaded once with the largest flash, then
    /// measured at each size from the largest down, the tier resized online
    /// in between (`ALTER CACHE TIER RESIZE`, as study 003 resized its cache
    /// while the workload ran). A shrink drops the oldest regions first.
    fn size_runs(&mut self) -> Result<(), FlashError> {
        self.widen();
        let data = self.report.data.clone().unwrap_or_default();
        let budget = data.dram_budget_bytes;
        let mut sizes: Vec<(f64, u64)> = self
            .o
            .sizes
            .iter()
            .map(|&f| (f, sides::flash_bytes((data.postgres_bytes as f64 * f) as u64, budget)))
            .collect();
        sizes.sort_by(|a, b| b.0.total_cmp(&a.0));
        let (largest, smallest) = (sizes[0].1, sizes[sizes.len() - 1].1);
        let mut spec = self.spec("sizes", budget, Some((largest, false)));
        // Regions small enough for the smallest size to hold several.
        spec.tier = Some((largest, sides::region_size(smallest), false));
        sides::size_runs(self, &spec, &sizes)
    }

    fn curve(&mut self) -> Result<(), FlashError> {
        let data = self.report.data.clone().unwrap_or_default();
        let fraction = self.o.sizes.iter().copied().find(|s| (*s - 0.2).abs() < 1e-9).unwrap_or(self.o.sizes[0]);
        let flash = sides::flash_bytes((data.postgres_bytes as f64 * fraction) as u64, data.dram_budget_bytes);
        let spec = self.spec("curve", data.dram_budget_bytes, Some((flash, false)));
        sides::curve(self, &spec)
    }

    fn use_case_2(&mut self) -> Result<(), FlashError> {
        // Use case 1: every subscriber in DRAM (the budget far above them).
        let spec = self.spec("uc1", u64::MAX >> 2, None);
        let mut all = sides::cache_run(self, &spec, sides::Access::Direct, sides::Load::Standard)?;
        all.label = "uc1-all-dram".into();
        all.study = "000-uc2".into();
        let all_bytes = all.loaded_bytes.unwrap_or(0);
        all.dram_budget_bytes = all.loaded_bytes;
        self.report.sides.push(all);
        self.interrupted()?;
        // Use case 2: a fifth of that in DRAM, flash with room for all of it.
        let budget = ((all_bytes as f64) * self.o.uc2_dram_share) as u64;
        let spec = self.spec("uc2", budget, Some((sides::flash_bytes(all_bytes * 2, 0), false)));
        let mut flash = sides::cache_run(self, &spec, sides::Access::Direct, sides::Load::Standard)?;
        flash.label = "uc2-flash".into();
        flash.study = "000-uc2".into();
        self.report.sides.push(flash);
        Ok(())
    }

    fn write_back(&mut self) -> Result<(), FlashError> {
        let data = self.report.data.clone().unwrap_or_default();
        // Flash with room for every instance: the two modes differ only in
        // what may go there, not in how much fits.
        let flash = sides::flash_bytes(data.postgres_bytes * 2, 0);
        for (label, write_back) in [("clean", false), ("write-back", true)] {
            self.interrupted()?;
            let spec = self.spec(label, data.dram_budget_bytes, Some((flash, write_back)));
            let mut side = sides::cache_run(self, &spec, sides::Access::Wire, sides::Load::Updates)?;
            side.label = label.into();
            side.study = "002".into();
            self.report.sides.push(side);
        }
        Ok(())
    }

    fn spec(&self, run: &str, budget: u64, tier: Option<(u64, bool)>) -> ServerSpec {
        let tag: String = run.chars().filter(char::is_ascii_alphanumeric).collect();
        ServerSpec {
            dir: self.o.work_dir.join(&tag),
            backend_url: self.control.backend_url.clone(),
            commit_mode: self.o.commit_mode,
            node: format!("fd{:06x}{tag}", self.o.seed & 0xff_ffff),
            memory_budget: budget,
            tier: tier.map(|(bytes, write_back)| (bytes, sides::region_size(bytes), write_back)),
        }
    }
}

/// Draws enough keys that the hottest subscribers' counts are stable to
/// about a percent, in well under a second.
pub(crate) const SKEW_DRAWS: u64 = 4_000_000;

fn hottest_shares(o: &FlashOptions) -> Vec<(f64, f64)> {
    let mut fractions = o.sizes.clone();
    fractions.push(o.dram_fraction);
    fractions.sort_by(f64::total_cmp);
    fractions.dedup();
    let shares = SubscriberKeys::new(1, o.subscribers, false).hottest_shares(&fractions, SKEW_DRAWS, o.seed);
    fractions.into_iter().zip(shares).collect()
}

fn settings(o: &FlashOptions) -> Vec<(String, String)> {
    let secs = |d: Duration| format!("{} s", d.as_secs_f64());
    vec![
        ("subscribers".into(), o.subscribers.to_string()),
        ("pgtier DRAM budget".into(), format!("{:.1} % of PostgreSQL's size of the data", o.dram_fraction * 100.0)),
        (
            "cache sizes (DRAM + flash)".into(),
            o.sizes.iter().map(|s| format!("{:.0} %", s * 100.0)).collect::<Vec<_>>().join(", "),
        ),
        ("sessions (closed loop)".into(), o.threads.to_string()),
        (
            "warm-up / measure per run".into(),
            format!(
                "windows of {} until the share of transactions missing memory moves less than {} % (at most {}) / {}",
                secs(o.warm),
                crate::warmup::RELATIVE_TOLERANCE * 100.0,
                sides::WARM_WINDOWS_MAX,
                secs(o.measure)
            ),
        ),
        ("warm-up curve".into(), format!("{} before ENABLE, {} after", secs(o.curve_lead), secs(o.curve_after))),
        ("use case 2's DRAM".into(), format!("{:.0} % of all instances", o.uc2_dram_share * 100.0)),
        (
            "PostgreSQL's memory limit".into(),
            format!(
                "the DRAM budget + its processes' memory measured under load (+ {} MB headroom in pgtier's runs)",
                o.postgres_headroom_bytes >> 20
            ),
        ),
        ("pgtier commit mode".into(), format!("{:?}", o.commit_mode).to_lowercase()),
        (
            "PostgreSQL's storage".into(),
            o.primary_read_iops.map_or_else(
                || "the machine's disk as it is".to_owned(),
                |iops| format!("reads held to {iops}/s (emulated primary storage; flash not held)"),
            ),
        ),
        ("seed".into(), o.seed.to_string()),
    ]
}
