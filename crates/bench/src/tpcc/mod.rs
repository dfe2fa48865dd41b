//! TPC-C in HammerDB TPROC-C's shape (study 004's OLTP side, and later the
//! OLTP stream of CH-benCHmark): the nine tables, the spec's population,
//! the five transactions with no keying or thinking time, NOPM and TPM,
//! and the spec's consistency conditions checked after the run, on every
//! target the kit knows (PostgreSQL, the pgtier server, the embedded
//! engine), one after another.
//!
//! Method.
//! 1. Population ([`population`]): tables dropped and created with the
//!    same DDL on every target ([`schema`]), loaded per spec 4.3.3.1
//!    through the target's bulk path (COPY text on PostgreSQL and the
//!    pgtier server, the engine's typed loader embedded) in parallel
//!    streams; keys after the load on PostgreSQL, with the tables on
//!    pgtier; HammerDB's two secondary indexes; ANALYZE and CHECKPOINT
//!    where accepted. The consistency checks run once on the fresh data.
//! 2. Run ([`transactions`]): `clients` sessions, client t bound to home
//!    warehouse (t mod W) + 1, each drawing from the mix 45/43/4/4/4
//!    (New-Order, Payment, Order-Status, Delivery, Stock-Level), closed
//!    loop, no keying or thinking time; ramp-up, then the measure window.
//!    Transactions started in the window count, timed to their end
//!    (latency from the start of the call: in a closed loop that is the
//!    intended start).
//! 3. Figures: NOPM = committed New-Orders per minute of the window; TPM
//!    = committed transactions of all five types per minute (counted by
//!    the client; HammerDB's TPM is the database's commits + rollbacks
//!    per minute, so `tpm_with_rollbacks` adds New-Order's 1 % rollbacks
//!    for comparison); per type p50/p95/p99/max latency; serialization
//!    failures and deadlocks (40001, 40P01) counted apart, not retried.
//! 4. Consistency ([`consistency`]): 3.3.2.1 to 3.3.2.4, 3.3.2.8 and
//!    3.3.2.9 on each target after its run; a failure is the run's failure.
//!
//! Deviations are in [`deviations`] (and every report).

pub mod consistency;
pub mod output;
pub mod population;
pub mod random;
pub mod schema;
pub mod transactions;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::driver::{self, LiveCounters, LoadSpec, Phase, Workload, WorkloadClient};
use crate::result::MachineInfo;
use crate::target::{DbError, Session, Target};
pub use crate::tpch::{Side, SideKind};
use consistency::Check;
pub use population::{LoadReport, Scale};
use transactions::{TpccClient, TxnType};

/// Most warehouses a run may populate (bounds the load: 1,000 warehouses
/// are about 100 GB).
pub const WAREHOUSES_MAX: u32 = 1_000;

/// TPC-C for the driver: client `thread` gets home warehouse
/// `thread mod W + 1`.
#[derive(Clone, Debug)]
pub struct TpccWorkload {
    pub scale: Scale,
}

impl Workload for TpccWorkload {
    fn transaction_names(&self) -> &[&'static str] {
        &TxnType::NAMES
    }

    fn open_client(
        &self,
        session: Box<dyn Session>,
        thread: u32,
        seed: u64,
    ) -> Result<Box<dyn WorkloadClient>, DbError> {
        let home = i64::from(thread % self.scale.warehouses.max(1)) + 1;
        Ok(Box::new(TpccClient::new(session, self.scale, home, seed)?))
    }
}

pub struct TpccOptions {
    pub scale: Scale,
    pub clients: u32,
    pub rampup: Duration,
    pub measure: Duration,
    pub load_streams: usize,
    /// Seeds population and the clients' random streams.
    pub seed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum TpccError {
    #[error("{side}: {error}")]
    Db { side: &'static str, error: DbError },
    #[error("invalid options: {0}")]
    Options(String),
}

/// Told what the run is doing; every method has a do-nothing default.
pub trait TpccProgress {
    fn loading(&mut self, _side: SideKind, _rows: u64, _expected: u64) {}
    fn loaded(&mut self, _side: SideKind, _report: &LoadReport) {}
    fn running(&mut self, _side: SideKind, _phase: Phase, _elapsed: Duration, _finished: u64) {}
    fn side_done(&mut self, _result: &SideResult) {}
}

pub struct NoProgress;
impl TpccProgress for NoProgress {}

/// One transaction type's figures over the measure window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnResult {
    pub name: String,
    pub committed: u64,
    /// New-Order's rollbacks on the unused item (the spec's 1 %).
    pub rolled_back: u64,
    /// 40001 / 40P01, rolled back and not retried.
    pub serialization_failures: u64,
    pub committed_per_minute: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// One target's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideResult {
    pub side: SideKind,
    pub target: String,
    pub durability: String,
    /// Settings a reader needs to compare the sides (memory, commit).
    pub settings: Vec<(String, String)>,
    pub load: Option<LoadReport>,
    pub checks_after_load: Vec<Check>,
    pub measure_s: f64,
    pub nopm: f64,
    pub tpm: f64,
    pub tpm_with_rollbacks: f64,
    pub transactions: Vec<TxnResult>,
    pub checks: Vec<Check>,
    /// The error that stopped this side's run (with its SQLSTATE).
    pub error: Option<String>,
    /// This process's resident memory after the run, MiB (the embedded
    /// engine and an in-process server live in it).
    pub process_rss_mib: Option<f64>,
}

impl SideResult {
    pub fn checks_passed(&self) -> bool {
        self.checks.iter().chain(&self.checks_after_load).all(Check::passed) && !self.checks.is_empty()
    }
}

/// A whole run: what `pgtier bench tpcc` writes as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TpccReport {
    pub tool_version: String,
    pub started_at: String,
    pub scale: Scale,
    pub clients: u32,
    pub rampup_s: f64,
    pub measure_s: f64,
    pub seed: u64,
    pub sides: Vec<SideResult>,
    pub deviations: Vec<String>,
    pub machine: MachineInfo,
    pub load_average_before: String,
}

impl TpccReport {
    /// Lines saying what failed: a side's error, a failed check.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.sides {
            if let Some(e) = &s.error {
                out.push(format!("{}: run stopped: {e}", s.side.label()));
            }
            for (when, checks) in [("after load", &s.checks_after_load), ("after the run", &s.checks)] {
                for c in checks.iter().filter(|c| !c.passed()) {
                    out.push(format!(
                        "{}: consistency {} ({}) FAILED {when}: {}",
                        s.side.label(),
                        c.clause,
                        c.condition,
                        if c.violations.is_empty() { "nothing to examine".to_owned() } else { c.violations.join("; ") }
                    ));
                }
            }
            if s.checks.is_empty() && s.error.is_none() {
                out.push(format!("{}: consistency not checked", s.side.label()));
            }
        }
        out
    }
}

/// Every way a run departs from the TPC-C specification and from HammerDB.
pub fn deviations(scale: &Scale) -> Vec<String> {
    let mut out: Vec<String> = [
        "client-side SQL over prepared statements; HammerDB's PostgreSQL driver calls stored procedures \
         (one round trip per transaction), here each statement is a round trip",
        "no keying or thinking time, as HammerDB runs TPROC-C; the spec's terminals wait between transactions",
        "Delivery runs in-line in the client, all ten districts in one transaction (spec: deferred to a queue)",
        "the mix is the spec's minimum shares 45/43/4/4/4; HammerDB's driver draws 10/10/1/1/1 of 23 \
         (New-Order and Payment 43.5 % each, the others 4.3 %)",
        "client t's home warehouse is (t mod W) + 1; HammerDB picks each virtual user's home warehouse at random",
        "serialization failures and deadlocks (40001, 40P01) are rolled back, counted apart and not retried",
        "NOPM and TPM are counted by the client (committed transactions); HammerDB reads TPM from the \
         database's commit and rollback counters",
        "New-Order and Payment lock the rows they update with SELECT ... FOR UPDATE (HammerDB: UPDATE ... RETURNING)",
        "no foreign keys; primary keys and HammerDB's two secondary indexes only",
        "timestamps are sent by the client (UTC), not taken by the database",
        "population by parallel bulk-load streams (spec: no rule; HammerDB: one virtual user per warehouse)",
        "random numbers from xoshiro256++ (rand SmallRng)",
        "Stock-Level draws its district at random (spec: the terminal's fixed district)",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if !scale.is_spec() {
        out.push(format!(
            "test-only scale: {} items and stock rows per warehouse, {} customers and orders per district \
             (spec: 100,000 and 3,000), last names 0..{}",
            scale.items,
            scale.customers,
            scale.last_names() - 1
        ));
    }
    out
}

fn check_options(options: &TpccOptions, sides: &[Side<'_>]) -> Result<(), TpccError> {
    let bad = |m: String| Err(TpccError::Options(m));
    if !(1..=WAREHOUSES_MAX).contains(&options.scale.warehouses) {
        return bad(format!("warehouses {} is not from 1 to {WAREHOUSES_MAX}", options.scale.warehouses));
    }
    if options.scale.items < 100 || options.scale.customers < 30 {
        return bad("at least 100 items and 30 customers per district".to_owned());
    }
    if options.clients == 0 {
        return bad("at least one client".to_owned());
    }
    if options.measure.is_zero() {
        return bad("the measure window must be longer than 0 s".to_owned());
    }
    if sides.is_empty() {
        return bad("no target".to_owned());
    }
    Ok(())
}

/// Settings of a target that tell the sides apart: memory and commit.
pub fn settings(target: &dyn Target) -> Vec<(String, String)> {
    let Ok(mut s) = target.connect() else { return Vec::new() };
    let mut out = Vec::new();
    for name in ["server_version", "shared_buffers", "synchronous_commit", "fsync", "default_transaction_isolation"] {
        if let Ok(rows) = s.simple_query(&format!("SHOW {name}"))
            && let Some(Some(v)) = rows.first().and_then(|r| r.first())
        {
            out.push((name.to_owned(), v.clone()));
        }
    }
    out
}

/// This process's VmRSS, MiB.
pub fn process_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn txn_results(tally: &driver::RepetitionTally) -> Vec<TxnResult> {
    let minutes = tally.spec.measure.as_secs_f64() / 60.0;
    TxnType::NAMES
        .iter()
        .zip(&tally.txns)
        .map(|(name, t)| TxnResult {
            name: (*name).to_owned(),
            committed: t.found,
            rolled_back: t.executed - t.found,
            serialization_failures: t.acceptable_errors,
            committed_per_minute: t.found as f64 / minutes,
            p50_us: t.latency.quantile_us(0.50),
            p95_us: t.latency.quantile_us(0.95),
            p99_us: t.latency.quantile_us(0.99),
            max_us: t.latency.max_us(),
        })
        .collect()
}

/// The OLTP figures of one measure window (what a run of the mix gives).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OltpFigures {
    pub measure_s: f64,
    pub nopm: f64,
    pub tpm: f64,
    pub tpm_with_rollbacks: f64,
    pub transactions: Vec<TxnResult>,
    /// The error that stopped the run (with its SQLSTATE).
    pub error: Option<String>,
}

/// Runs the mix on `target` with `clients` sessions: ramp-up, then the
/// measure window; `on_tick` as the driver's. A failure of the run is in
/// the figures' `error` (NOPM 0), not an `Err`.
pub fn run_oltp(
    target: &dyn Target,
    scale: Scale,
    clients: u32,
    window: (Duration, Duration),
    seed: u64,
    live: &LiveCounters,
    on_tick: &mut dyn FnMut(Phase, Duration),
) -> OltpFigures {
    let (rampup, measure) = window;
    let workload = TpccWorkload { scale };
    let spec =
        LoadSpec { threads: clients, rate_per_s: None, ramp_up: rampup, measure, ramp_down: Duration::ZERO, seed };
    let outcome = driver::run_repetition(target, &workload, &spec, live, on_tick);
    let minutes = measure.as_secs_f64() / 60.0;
    let (transactions, error) = match outcome {
        Ok(tally) => (txn_results(&tally), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let committed: u64 = transactions.iter().map(|t| t.committed).sum();
    let rolled_back: u64 = transactions.iter().map(|t| t.rolled_back).sum();
    OltpFigures {
        measure_s: measure.as_secs_f64(),
        nopm: transactions.first().map_or(0.0, |t| t.committed_per_minute),
        tpm: committed as f64 / minutes,
        tpm_with_rollbacks: (committed + rolled_back) as f64 / minutes,
        transactions,
        error,
    }
}

/// Populates and runs one side; a failure of the run itself is recorded
/// in the result (the other sides still run), a failure to load is not.
fn run_side(options: &TpccOptions, side: &Side<'_>, progress: &mut dyn TpccProgress) -> Result<SideResult, TpccError> {
    let target = side.target;
    let db = |error| TpccError::Db { side: side.kind.label(), error };
    let load =
        population::populate(target, options.scale, options.seed, options.load_streams, &mut |rows, expected| {
            progress.loading(side.kind, rows, expected)
        })
        .map_err(db)?;
    progress.loaded(side.kind, &load);
    let checks_after_load = consistency::run_checks(target).map_err(db)?;
    let durability = target.durability().map_err(db)?;
    let live = LiveCounters::default();
    let oltp = run_oltp(
        target,
        options.scale,
        options.clients,
        (options.rampup, options.measure),
        options.seed,
        &live,
        &mut |phase, elapsed| progress.running(side.kind, phase, elapsed, live.finished.load(Ordering::Relaxed)),
    );
    let checks = consistency::run_checks(target).map_err(db)?;
    let result = SideResult {
        side: side.kind,
        target: target.describe(),
        durability,
        settings: settings(target),
        load: Some(load),
        checks_after_load,
        measure_s: oltp.measure_s,
        nopm: oltp.nopm,
        tpm: oltp.tpm,
        tpm_with_rollbacks: oltp.tpm_with_rollbacks,
        transactions: oltp.transactions,
        checks,
        error: oltp.error,
        process_rss_mib: process_rss_mib(),
    };
    progress.side_done(&result);
    Ok(result)
}

/// Populates and runs every side in turn, then checks consistency on it.
pub fn run(
    options: &TpccOptions,
    sides: &[Side<'_>],
    progress: &mut dyn TpccProgress,
) -> Result<TpccReport, TpccError> {
    check_options(options, sides)?;
    let load_average_before = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default();
    let started_at = crate::report::now_rfc3339();
    let mut results = Vec::new();
    for side in sides {
        results.push(run_side(options, side, progress)?);
    }
    Ok(TpccReport {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_at,
        scale: options.scale,
        clients: options.clients,
        rampup_s: options.rampup.as_secs_f64(),
        measure_s: options.measure.as_secs_f64(),
        seed: options.seed,
        sides: results,
        deviations: deviations(&options.scale),
        machine: crate::report::machine_info(),
        load_average_before,
    })
}
