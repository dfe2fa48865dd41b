//! Study 002's micro-benchmark library (the Benchware tests), on every
//! target: PostgreSQL by URL, the pgtier server (also a URL) and the
//! embedded engine.
//!
//! Method. One table of `rows` rows (`schema`) is loaded with the target's
//! bulk loader, then each test runs for each thread count of the sweep:
//! 1. sequential scan: every thread scans the whole table again and again
//!    (`count(*)`, `sum(k)`, `sum(length(pad))`, so every row and column is
//!    read); rows/s, scans/s, MB/s of row data;
//! 2. random read: one row by primary key, uniform keys; rows/s = ops/s;
//! 3. insert: 2 rows per commit into a second table; rows/s, commits/s;
//! 4. update: 32 distinct random rows by primary key per transaction,
//!    `k = k + 1`; rows/s, transactions/s;
//! 5. index build: `CREATE INDEX` on the non-key column `grp`; rows/s and
//!    seconds. On PostgreSQL the thread count is its parallel build
//!    (`max_parallel_maintenance_workers` = threads - 1).
//!
//! Tests 1–4 are closed loop: each thread has one session and starts its
//! next operation when the last one ends, for `duration`; the window runs
//! from when all threads are connected to when the last one stops. Around
//! each window [`probes`] reads the study's other columns: CPU of this
//! process and of the server, read/write IOPS and MB/s of the device
//! holding the target's data (`/proc/diskstats`), and WAL MB/s (the study's
//! REDO MB/s) from the target's own counter. A figure without a source is
//! reported as unknown, never estimated.
//!
//! The run checks itself: the inserts table must hold exactly the rows the
//! run says it inserted, and `sum(k)` must have grown by exactly the rows it
//! says it updated; a mismatch is an error, not a footnote.
//!
//! Deviations from the study (also in every report's `deviations`):
//! - #N (RAC nodes) is always 1 and #J (jobs) equals #T (threads): one
//!   session per thread, one machine.
//! - The study's tables hold 10^9 rows on an Exadata; the default here is
//!   sized for a few minutes on two cores, so most tests run from memory.
//! - The scan's MB/s counts the row data the application sees (8 + 8 + 4 +
//!   100 bytes a row), the same for every target, not each target's pages.
//! - Device figures are the whole device's (other processes included), and
//!   PostgreSQL's WAL figure is the whole cluster's.
//! - A target that cannot run a test gets "refused: SQLSTATE message" in its
//!   row (errors of class 0A, feature not supported, and 42, syntax or
//!   undefined object); any other error ends the run.

pub mod output;
pub mod probes;
mod run;
pub mod schema;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use self::probes::{Probes, TargetKind};
pub use self::run::{INSERT_ROWS_PER_TXN, UPDATE_ROWS_PER_TXN};
pub use crate::device::DiskFigures;
use crate::result::MachineInfo;
use crate::target::{DbError, Target, Value};

/// The study's five tests, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MicroTest {
    SeqScan,
    RandomRead,
    Insert,
    Update,
    IndexBuild,
}

impl MicroTest {
    pub const ALL: [MicroTest; 5] =
        [MicroTest::SeqScan, MicroTest::RandomRead, MicroTest::Insert, MicroTest::Update, MicroTest::IndexBuild];

    /// The name on the command line and in result files.
    pub fn name(self) -> &'static str {
        match self {
            MicroTest::SeqScan => "seq_scan",
            MicroTest::RandomRead => "random_read",
            MicroTest::Insert => "insert",
            MicroTest::Update => "update",
            MicroTest::IndexBuild => "index_build",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            MicroTest::SeqScan => "sequential scan",
            MicroTest::RandomRead => "random read by primary key",
            MicroTest::Insert => "insert, 2 rows per commit",
            MicroTest::Update => "update, 32 rows per transaction by primary key",
            MicroTest::IndexBuild => "index build (CREATE INDEX on grp)",
        }
    }

    /// What one "op" is in this test.
    pub fn op_unit(self) -> &'static str {
        match self {
            MicroTest::SeqScan => "scans/s",
            MicroTest::RandomRead => "reads/s",
            MicroTest::Insert => "commits/s",
            MicroTest::Update => "txn/s",
            MicroTest::IndexBuild => "builds/s",
        }
    }

    pub fn parse(name: &str) -> Option<MicroTest> {
        MicroTest::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// What to run, and where each side figure comes from.
pub struct MicroOptions {
    /// Rows of the table the tests work on (at least [`ROWS_MIN`]).
    pub rows: u64,
    /// Thread counts of the sweep, each ≥ 1.
    pub threads: Vec<u32>,
    /// Measure window of the timed tests (all but the index build).
    pub duration: Duration,
    /// Which tests, run in [`MicroTest::ALL`]'s order.
    pub tests: Vec<MicroTest>,
    /// Seed of the population and of the keys the tests pick.
    pub seed: u64,
    /// Parallel bulk-load streams.
    pub load_streams: usize,
    pub probes: Probes,
}

/// Fewest rows a run accepts: the update test needs 32 distinct keys.
pub const ROWS_MIN: u64 = 100;

/// Told what the run is doing, for a progress display; every method has a
/// do-nothing default.
pub trait MicroProgress {
    fn population(&mut self, _loaded: u64, _total: u64) {}
    fn population_done(&mut self, _seconds: f64) {}
    /// `duration` is `None` for the index build (one statement).
    fn window_started(&mut self, _test: MicroTest, _threads: u32, _duration: Option<Duration>) {}
    fn window_tick(&mut self, _elapsed: Duration, _ops: u64) {}
    fn window_finished(&mut self, _result: &MicroResult) {}
}

/// A [`MicroProgress`] that shows nothing.
pub struct NoProgress;
impl MicroProgress for NoProgress {}

#[derive(Debug, thiserror::Error)]
pub enum MicroError {
    #[error("{0}")]
    Db(DbError),
    #[error("measuring: {0}")]
    Probe(DbError),
    #[error("check failed: {0}")]
    Check(String),
    #[error("invalid options: {0}")]
    Options(String),
}

impl MicroError {
    /// The SQLSTATE, when a server gave one.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            MicroError::Db(e) | MicroError::Probe(e) => e.sqlstate.as_deref(),
            // XX000 internal_error: the numbers disagree with the database.
            MicroError::Check(_) => Some("XX000"),
            MicroError::Options(_) => Some("22023"),
        }
    }
}

/// A window's figures: the study's columns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MicroFigures {
    /// Length of the window (the index build: of the statement).
    pub seconds: f64,
    pub rows: u64,
    pub ops: u64,
    /// Update transactions rolled back on 40001/40P01 and not counted.
    pub retries: u64,
    pub rows_per_s: f64,
    pub ops_per_s: f64,
    /// Row data per second (rows × [`schema::ROW_BYTES`], 10^6 bytes).
    pub mb_per_s: f64,
    /// This process, % of one core (200 = two cores).
    pub process_cpu_percent: f64,
    /// The server's processes, % of one core; `None`: not measurable here.
    pub server_cpu_percent: Option<f64>,
    /// The device under test; `None`: unknown (see the report's sources).
    pub device: Option<DiskFigures>,
    pub wal_bytes: Option<u64>,
    /// WAL written per second, 10^6 bytes (the study's REDO MB/s).
    pub wal_mb_per_s: Option<f64>,
    /// PostgreSQL only: how far the WAL position moved over the window,
    /// beside `wal_bytes` (from pg_stat_wal) as a cross-check.
    #[serde(default)]
    pub wal_lsn_bytes: Option<u64>,
}

/// One test at one thread count: figures, or why the target refused it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MicroResult {
    pub test: MicroTest,
    pub threads: u32,
    pub figures: Option<MicroFigures>,
    /// "SQLSTATE: message" of a target that cannot run the test.
    pub refused: Option<String>,
}

/// Where the side figures came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sources {
    pub device: String,
    pub wal: String,
    pub server_cpu: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Population {
    pub rows: u64,
    pub seconds: f64,
    pub method: String,
    pub streams: usize,
}

/// A whole run: what `pgtier bench micro --json` writes, and what another
/// caller (`pgtier demo flash`) reads per test.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MicroReport {
    pub tool_version: String,
    pub started_at: String,
    pub target: String,
    pub durability: String,
    pub rows: u64,
    pub row_bytes: u64,
    pub threads: Vec<u32>,
    pub duration_s: f64,
    pub seed: u64,
    pub population: Population,
    pub sources: Sources,
    pub results: Vec<MicroResult>,
    /// What the run verified in the database after it.
    pub checks: Vec<String>,
    pub deviations: Vec<String>,
    pub machine: MachineInfo,
    /// The 1-minute load average before the run (the machine may be shared).
    pub load_average_before: String,
}

impl MicroReport {
    /// The result of `test` at `threads`, if it ran.
    pub fn result(&self, test: MicroTest, threads: u32) -> Option<&MicroResult> {
        self.results.iter().find(|r| r.test == test && r.threads == threads)
    }
}

/// True for errors that mean "this target cannot do that", not "it broke".
fn is_refusal(e: &DbError) -> bool {
    e.sqlstate.as_deref().is_some_and(|c| c.starts_with("0A") || c.starts_with("42"))
}

fn figures(counts: run::Counts, w: probes::WindowFigures) -> MicroFigures {
    let s = w.window_s.max(1e-9);
    MicroFigures {
        seconds: w.window_s,
        rows: counts.rows,
        ops: counts.ops,
        retries: counts.retries,
        rows_per_s: counts.rows as f64 / s,
        ops_per_s: counts.ops as f64 / s,
        mb_per_s: (counts.rows * schema::ROW_BYTES) as f64 / s / 1e6,
        process_cpu_percent: w.process_cpu_percent,
        server_cpu_percent: w.server_cpu_percent,
        device: w.disk,
        wal_bytes: w.wal_bytes,
        wal_mb_per_s: w.wal_bytes.map(|b| b as f64 / s / 1e6),
        wal_lsn_bytes: w.wal_lsn_bytes,
    }
}

/// One integer a query answers (count, sum).
fn query_int(target: &dyn Target, sql: &str) -> Result<i64, MicroError> {
    let mut session = target.connect().map_err(MicroError::Db)?;
    let stmt = session.prepare(sql).map_err(MicroError::Db)?;
    let mut out = Vec::new();
    session.query(stmt, &[], &mut out).map_err(MicroError::Db)?;
    match out.first() {
        Some(Value::Int(n)) => Ok(*n),
        other => Err(MicroError::Check(format!("{sql} answered {other:?}"))),
    }
}

pub fn deviations(options: &MicroOptions) -> Vec<String> {
    let mut d = vec![
        "#N (nodes) is 1 and #J (jobs) = #T (threads): one session per thread on one machine".to_owned(),
        format!(
            "{} rows of {} bytes instead of the study's 10^9: most reads are served from memory",
            options.rows,
            schema::ROW_BYTES
        ),
        "scan MB/s counts row data (8+8+4+100 bytes a row), not the target's pages".to_owned(),
        "device figures are the whole device's, other processes included".to_owned(),
    ];
    match options.probes.kind {
        TargetKind::Postgres => {
            d.push("WAL MB/s is pg_stat_wal's, the whole cluster's (autovacuum included)".to_owned());
            d.push(
                "a scan may use PostgreSQL's parallel workers as the server is set (max_parallel_workers_per_gather): \
                 its CPU shows under the server"
                    .to_owned(),
            );
            d.push("server CPU includes the sampler's own queries (one every 10 ms)".to_owned());
            d.push("index build threads = PostgreSQL's leader + max_parallel_maintenance_workers".to_owned());
        }
        TargetKind::PgtierServer | TargetKind::Embedded => {
            d.push("the engine builds an index with one thread: the index build ignores the thread count".to_owned());
        }
    }
    d
}

/// Loads the table, runs every test at every thread count, checks the
/// database agrees with the counts, and returns the figures.
pub fn run_micro(
    target: &dyn Target,
    options: &MicroOptions,
    progress: &mut dyn MicroProgress,
) -> Result<MicroReport, MicroError> {
    if options.rows < ROWS_MIN {
        return Err(MicroError::Options(format!("rows {}: at least {ROWS_MIN}", options.rows)));
    }
    if options.threads.is_empty() || options.threads.contains(&0) {
        return Err(MicroError::Options("thread counts must be at least 1".to_owned()));
    }
    let load_average_before = std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "unknown".to_owned(), |l| l.split_whitespace().next().unwrap_or("unknown").to_owned());
    let mut report = MicroReport {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_at: crate::report::now_rfc3339(),
        target: target.describe(),
        durability: target.durability().map_err(MicroError::Db)?,
        rows: options.rows,
        row_bytes: schema::ROW_BYTES,
        threads: options.threads.clone(),
        duration_s: options.duration.as_secs_f64(),
        seed: options.seed,
        sources: Sources {
            device: options.probes.describe_device(),
            wal: options.probes.describe_wal(),
            server_cpu: options.probes.describe_server_cpu(),
        },
        deviations: deviations(options),
        machine: crate::report::machine_info(),
        load_average_before,
        ..MicroReport::default()
    };
    report.population = populate(target, options, progress)?;

    let next_insert_id = Arc::new(AtomicU64::new(1));
    let mut inserted = 0u64;
    let mut updated = 0u64;
    let mut sum_k_before = None;
    for test in MicroTest::ALL.into_iter().filter(|t| options.tests.contains(t)) {
        if test == MicroTest::Update {
            sum_k_before = Some(query_int(target, &format!("SELECT sum(k)::int8 FROM {}", schema::TABLE))?);
        }
        for &threads in &options.threads {
            let duration = (test != MicroTest::IndexBuild).then_some(options.duration);
            progress.window_started(test, threads, duration);
            let measured = if test == MicroTest::IndexBuild {
                let parallel = options.probes.kind == TargetKind::Postgres;
                run::index_build(target, &options.probes, threads, parallel)
                    .map(|w| figures(run::Counts { rows: options.rows, ops: 1, retries: 0 }, w))
            } else {
                let spec = run::WindowSpec {
                    test,
                    threads,
                    duration: options.duration,
                    rows: options.rows,
                    seed: options.seed,
                    next_insert_id: &next_insert_id,
                };
                run::timed_window(target, &options.probes, &spec, progress).map(|(c, w)| figures(c, w))
            };
            let result = match measured {
                Ok(f) => {
                    match test {
                        MicroTest::Insert => inserted += f.rows,
                        MicroTest::Update => updated += f.rows,
                        _ => {}
                    }
                    MicroResult { test, threads, figures: Some(f), refused: None }
                }
                Err(MicroError::Db(e)) if is_refusal(&e) => {
                    let code = e.sqlstate.clone().unwrap_or_default();
                    MicroResult { test, threads, figures: None, refused: Some(format!("{code}: {}", e.message)) }
                }
                Err(e) => return Err(e),
            };
            progress.window_finished(&result);
            report.results.push(result);
        }
    }
    report.checks = check(target, options, inserted, updated, sum_k_before)?;
    Ok(report)
}

fn populate(
    target: &dyn Target,
    options: &MicroOptions,
    progress: &mut dyn MicroProgress,
) -> Result<Population, MicroError> {
    let started = Instant::now();
    target.execute_batch(&schema::create_sql(target.keys_with_tables())).map_err(MicroError::Db)?;
    let loaded = AtomicU64::new(0);
    let outcome = std::thread::scope(|scope| {
        let loader = scope.spawn(|| schema::load(target, options.rows, options.load_streams, options.seed, &loaded));
        while !loader.is_finished() {
            progress.population(loaded.load(Ordering::Relaxed), options.rows);
            std::thread::sleep(Duration::from_millis(200));
        }
        loader.join().unwrap_or_else(|_| Err(DbError::new(None, "the loader panicked")))
    });
    let rows = outcome.map_err(MicroError::Db)?;
    if rows != options.rows {
        return Err(MicroError::Check(format!("the bulk load reports {rows} rows, {} asked for", options.rows)));
    }
    if !target.keys_with_tables() {
        target.execute_batch(&schema::keys_after_load_sql()).map_err(MicroError::Db)?;
    }
    if options.probes.kind == TargetKind::Postgres {
        // Hint bits and the visibility map set now, not by the first scan
        // (which would then write and log what a later scan does not).
        target.execute_batch(&format!("VACUUM {}", schema::TABLE)).map_err(MicroError::Db)?;
    }
    // The load's dirty data written out before the first window, so that a
    // checkpoint it triggered does not land in the scan's device figures.
    // Not every target or role may checkpoint; then the windows show it.
    let _ = target.execute_batch("CHECKPOINT");
    let seconds = started.elapsed().as_secs_f64();
    progress.population_done(seconds);
    Ok(Population { rows, seconds, method: target.bulk_load_method().to_owned(), streams: options.load_streams })
}

/// The database agrees with what the run says it did: what was checked.
fn check(
    target: &dyn Target,
    options: &MicroOptions,
    inserted: u64,
    updated: u64,
    sum_k_before: Option<i64>,
) -> Result<Vec<String>, MicroError> {
    let mut checks = Vec::new();
    if options.tests.contains(&MicroTest::Insert) {
        let held = query_int(target, &format!("SELECT count(*) FROM {}", schema::INSERT_TABLE))?;
        if held as u64 != inserted {
            return Err(MicroError::Check(format!(
                "{} holds {held} rows; the insert windows counted {inserted}",
                schema::INSERT_TABLE
            )));
        }
        checks.push(format!("{} holds {held} rows, as many as the insert windows inserted", schema::INSERT_TABLE));
    }
    if let Some(before) = sum_k_before {
        let after = query_int(target, &format!("SELECT sum(k)::int8 FROM {}", schema::TABLE))?;
        if (after - before) as u64 != updated {
            return Err(MicroError::Check(format!(
                "sum(k) of {} grew by {}; the update windows counted {updated} rows",
                schema::TABLE,
                after - before
            )));
        }
        checks.push(format!("sum(k) of {} grew by {updated}, one per row the update windows updated", schema::TABLE));
    }
    Ok(checks)
}
