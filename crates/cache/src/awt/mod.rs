//! AWT write-through: committed application transactions on tables of AWT
//! groups reach PostgreSQL asynchronously, in commit order per instance,
//! exactly once.
//!
//! One propagation thread per `Cache` reads the engine's commit stream as
//! consumer [`CONSUMER`] (so the engine retains WAL until it is propagated),
//! keeps the changes of `Origin::Application` transactions on AWT tables
//! (loads, refreshes, evictions and autorefresh never go back), and hands
//! each to an apply lane by its instances (`lanes`). A lane applies batches
//! (at most `batch_bytes_max` of SQL, `batch_delay` after its first) in one
//! PostgreSQL transaction that first checks the definitions of the tables it
//! changes (`drift`) and ends by moving the rows of `pgtier.awt_progress` of
//! the (group, lane) streams it advances, under this data directory's
//! incarnation. Those rows are the truth after any crash: on (re)start each
//! stream skips the transactions before its position, so a crash of pgtier
//! or of PostgreSQL at any moment neither loses nor repeats a transaction.
//! Only this directory's rows count: a node name another directory owns is
//! refused at the start (`node::claim`), and a takeover stops the old owner
//! at its next batch. The local consumer position (WAL retention, where
//! reading restarts) trails: it is acknowledged only below every lane's
//! unapplied work and every held transaction, at most every [`ACK_INTERVAL`].
//!
//! Every UPDATE and DELETE must hit exactly one row and every INSERT insert
//! one; a batch PostgreSQL refuses for good (a constraint, a row changed
//! behind the cache) is rolled back and applied one transaction at a time, so
//! the culprit is isolated: it goes to `pgtier.awt_errors` with its
//! statements and PostgreSQL's error (with the progress, in one transaction)
//! and propagation goes on. A refusal that is not the transaction's own (a
//! deadlock, a cancel, PostgreSQL shutting down) and a lost connection end
//! the session; it reconnects with backoff (100 ms doubling to 5 s) and
//! resumes from the progress rows.
//!
//! A group whose tables changed in PostgreSQL is *held*: its transactions
//! stay in the WAL, unapplied and pending (its instances are never loaded
//! over or evicted), while other groups go on; the change is reported in the
//! status, the views, `/metrics` and the log. Once the definition is back
//! (or the group is dropped and created again) propagation resumes. A lane
//! with work and no progress for `stall_timeout` is reported with what
//! PostgreSQL says it waits for, cancelled, and the session reconnects.
//!
//! Writes to AWT groups fail with 53400 while propagation is more than
//! `retained_wal_max` behind, and with 55000 while the node name is another
//! directory's (the write guard in `cache`). SWT, where PostgreSQL commits
//! first, is `crate::swt`.

mod lanes;
pub(crate) mod progress;
mod statements;
mod watch;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pgtier_backend::{ConnectParams, connect_backend};
use pgtier_engine::{CommitStream, Database, Lsn};

pub use self::lanes::LaneStatus;
use self::lanes::{Lanes, WorkerContext, worker};
use self::progress::{Positions, Stream, read_progress};
use self::statements::{BatchContext, PendingTxn, apply_isolating, set_progress, statements};
use crate::apply::{Applier, session_connection};
use crate::drift::verify_group;
use crate::error::CacheError;
use crate::group::GroupKind;
use crate::node::{self, NodeIdentity, NodeObject};
use crate::registry::GroupEntry;
use crate::tuning::LiveTuning;

/// What propagation asks of the cache (`Cache` implements it). The thread
/// holds it weakly and only while it looks at one transaction, so dropping
/// the cache stops propagation.
pub(crate) trait AwtHost: Send + Sync {
    fn database(&self) -> &Database;
    fn backend(&self) -> Option<&ConnectParams>;
    /// Every group now.
    fn group_entries(&self) -> Vec<Arc<GroupEntry>>;
    /// The group and index of table `name`, if a group holds it.
    fn table_of_group(&self, name: &str) -> Option<(Arc<GroupEntry>, usize)>;
}

/// The commit-stream consumer of AWT propagation.
pub const CONSUMER: &str = "pgtier_awt";

/// How AWT propagation applies.
#[derive(Clone, Debug)]
pub struct AwtConfig {
    /// This pgtier's name in PostgreSQL (several pgtier nodes may share one
    /// PostgreSQL): `[a-z][a-z0-9]*`, at most 24 characters (`node::validate_node_name`).
    pub node: String,
    /// Apply lanes, each with its own PostgreSQL connection. A new number
    /// takes effect at a start where every lane stands at the same position
    /// (propagation was idle); otherwise the stored number is kept.
    pub apply_connections: usize,
    pub batch_bytes_max: usize,
    /// How long a batch waits for more transactions after its first. Zero
    /// by default: a lane batches what queued while its last batch was in
    /// flight, so waiting only adds latency.
    pub batch_delay: Duration,
    /// WAL (bytes) kept for write-through before new writes to AWT groups fail (53400).
    pub retained_wal_max: u64,
    /// A lane with work and no progress this long is reported and reconnected.
    pub stall_timeout: Duration,
    /// How often the definitions of cached tables are compared with PostgreSQL's while nothing is applied.
    pub definition_check_interval: Duration,
}

impl Default for AwtConfig {
    fn default() -> AwtConfig {
        AwtConfig {
            node: "pgtier".into(),
            apply_connections: 4,
            batch_bytes_max: 256 << 10,
            batch_delay: Duration::ZERO,
            retained_wal_max: 4 << 30,
            stall_timeout: Duration::from_secs(20),
            definition_check_interval: Duration::from_secs(10),
        }
    }
}

/// Propagation figures (`pgtier_cache_propagation`, `pgtier status`).
#[derive(Debug, Default)]
pub struct AwtStatus {
    /// Application transactions applied to PostgreSQL (or recorded as refused).
    pub applied_txns: AtomicU64,
    pub applied_statements: AtomicU64,
    pub batches: AtomicU64,
    /// Transactions PostgreSQL refused for good (now in `pgtier.awt_errors`).
    pub errors: AtomicU64,
    /// Sessions ended by an error (reconnects).
    pub retries: AtomicU64,
    /// Stream position before which everything is applied (or was not for PostgreSQL).
    pub position: AtomicU64,
    /// Stream position read so far (every transaction before it is marked dirty or applied).
    pub read: AtomicU64,
    /// Wakes loads waiting in [`wait_read`] when `read` moves.
    pub read_moved: ReadSignal,
    /// Commit time (µs since the Unix epoch) of the newest transaction applied.
    pub last_applied_commit_us: AtomicU64,
    pub connected: AtomicBool,
    pub lanes: AtomicU64,
    /// Transactions that spanned lanes (applied after a drain of those lanes).
    pub spanning: AtomicU64,
    /// Lanes found with work and no progress for `stall_timeout` (each reconnected).
    pub stalls: AtomicU64,
    /// The node name is another data directory's: nothing propagates, AWT writes are refused.
    pub node_refused: AtomicBool,
    /// `starting`, `streaming`, `reconnecting`, `refused`.
    pub state: Mutex<&'static str>,
    /// The current session's lanes, the control connection last.
    pub lane_status: Mutex<Vec<Arc<LaneStatus>>>,
    /// Groups whose transactions are held, with why.
    pub held: Mutex<BTreeMap<String, String>>,
    /// Commit-to-PostgreSQL-commit time of every applied transaction.
    pub lag: LagHistogram,
    pub last_error: Mutex<Option<String>>,
}

/// Microsecond latencies in buckets a quarter of a power of two wide (about
/// 19 % resolution) from 1 µs to about 70 minutes: fixed memory, lock-free.
/// Counts only grow (until `reset`), so a reader that keeps a
/// [`LagHistogram::snapshot`] gets any interval's own distribution with
/// [`LagCounts::since`], without disturbing other readers.
#[derive(Debug)]
pub struct LagHistogram {
    buckets: [AtomicU64; LAG_BUCKETS],
    /// The largest value recorded, exact.
    max_us: AtomicU64,
}

const LAG_BUCKETS: usize = 128;

impl Default for LagHistogram {
    fn default() -> LagHistogram {
        LagHistogram { buckets: std::array::from_fn(|_| AtomicU64::new(0)), max_us: AtomicU64::new(0) }
    }
}

impl LagHistogram {
    fn bucket(us: u64) -> usize {
        let us = us.max(1) as f64;
        ((us.log2() * 4.0) as usize).min(LAG_BUCKETS - 1)
    }

    pub fn record(&self, us: u64) {
        self.buckets[Self::bucket(us)].fetch_add(1, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The upper bound of the bucket holding quantile `q` (0..=1), in µs; 0 when empty.
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.snapshot().quantile_us(q)
    }

    /// The largest value recorded (µs), exact; 0 when empty.
    pub fn max_us(&self) -> u64 {
        self.max_us.load(Ordering::Relaxed)
    }

    /// The counts now (each bucket read once; records racing with the read
    /// land in this snapshot or the next).
    pub fn snapshot(&self) -> LagCounts {
        LagCounts { buckets: self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect(), max_us: self.max_us() }
    }

    pub fn reset(&self) {
        self.buckets.iter().for_each(|b| b.store(0, Ordering::Relaxed));
        self.max_us.store(0, Ordering::Relaxed);
    }
}

/// A [`LagHistogram`]'s counts at one moment, or over an interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LagCounts {
    buckets: Vec<u64>,
    /// Exact largest value when it was recorded in the interval; else the
    /// upper bound of the highest non-empty bucket (see [`LagCounts::since`]).
    pub max_us: u64,
}

impl LagCounts {
    fn upper_bound_us(index: usize) -> f64 {
        2f64.powf((index + 1) as f64 / 4.0)
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// What was recorded after `earlier` (a snapshot of the same histogram).
    /// The maximum is exact when a new largest value was recorded in
    /// between; otherwise the interval's largest value lies in its highest
    /// non-empty bucket, whose upper bound (capped by the histogram's
    /// maximum) stands for it.
    pub fn since(&self, earlier: &LagCounts) -> LagCounts {
        let buckets: Vec<u64> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, n)| n.saturating_sub(earlier.buckets.get(i).copied().unwrap_or(0)))
            .collect();
        let max_us = if self.max_us > earlier.max_us {
            self.max_us
        } else {
            buckets.iter().rposition(|&n| n > 0).map_or(0, |i| (Self::upper_bound_us(i) as u64).min(self.max_us))
        };
        LagCounts { buckets, max_us }
    }

    /// Adds another interval's counts (of the same histogram).
    pub fn merge(&mut self, other: &LagCounts) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.max_us = self.max_us.max(other.max_us);
    }

    /// The upper bound of the bucket holding quantile `q` (0..=1), in µs,
    /// at most the maximum (no quantile lies above it); 0 when empty.
    pub fn quantile_us(&self, q: f64) -> f64 {
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        let target = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        let mut bound = Self::upper_bound_us(LAG_BUCKETS - 1);
        for (index, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= target {
                bound = Self::upper_bound_us(index);
                break;
            }
        }
        if self.max_us > 0 { bound.min(self.max_us as f64) } else { bound }
    }
}

impl AwtStatus {
    pub(crate) fn record_applied(&self, txns: &[&PendingTxn]) {
        let now_us = pgtier_engine::wall_clock_us();
        for txn in txns {
            self.lag.record(now_us.saturating_sub(txn.commit_time_us));
        }
        self.applied_txns.fetch_add(txns.len() as u64, Ordering::Relaxed);
        self.applied_statements.fetch_add(txns.iter().map(|t| t.statements.len() as u64).sum(), Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        if let Some(newest) = txns.iter().map(|t| t.commit_time_us).max() {
            self.last_applied_commit_us.fetch_max(newest, Ordering::Relaxed);
        }
    }
}

/// The propagation thread.
pub(crate) struct Awt {
    pub status: Arc<AwtStatus>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// What a propagation session knows for its whole life.
pub(crate) struct SessionContext {
    pub config: AwtConfig,
    /// batch_delay and stall_timeout in force (a reload changes them; `config`'s are the initial ones).
    pub tuning: Arc<LiveTuning>,
    pub node: NodeIdentity,
}

impl Awt {
    /// `acked`: the consumer's stored position (the backlog starts from there).
    pub fn start(cache: Weak<dyn AwtHost>, context: SessionContext, acked: Lsn) -> std::io::Result<Awt> {
        let status = Arc::new(AwtStatus::default());
        status.position.store(acked.0, Ordering::Relaxed);
        status.read.store(acked.0, Ordering::Relaxed);
        status.read_moved.notify();
        *status.state.lock() = "starting";
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_status, thread_stop) = (status.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("pgtier-awt".into())
            .spawn(move || run(&cache, &context, &thread_status, &thread_stop))?;
        Ok(Awt { status, stop, thread: Mutex::new(Some(thread)) })
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.lock().take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

/// How a session ended without an error.
enum SessionEnd {
    /// Propagation stops (the cache is closing, or stop was asked).
    Stopped,
    /// Start a new session at once: a held group may go again, or another needs holding.
    Restart,
}

fn run(cache: &Weak<dyn AwtHost>, context: &SessionContext, status: &AwtStatus, stop: &AtomicBool) {
    let mut backoff = Duration::from_millis(100);
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let outcome = session(cache, context, status, stop);
        status.connected.store(false, Ordering::Relaxed);
        match outcome {
            Ok(SessionEnd::Stopped) => return,
            Ok(SessionEnd::Restart) => backoff = Duration::from_millis(100),
            Err(error) => {
                let refused = matches!(error, CacheError::NodeOwned { .. } | CacheError::NodeTakenOver { .. });
                status.node_refused.store(refused, Ordering::Relaxed);
                *status.state.lock() = if refused { "refused" } else { "reconnecting" };
                let text = error.to_string();
                // (A stall was logged by the watchdog with its cause.)
                if status.last_error.lock().as_deref() != Some(text.as_str())
                    && !matches!(error, CacheError::Stalled { .. })
                {
                    let hint = error.hint().map(|hint| format!("; HINT: {hint}")).unwrap_or_default();
                    tracing::warn!(sqlstate = error.sqlstate(), "write-through: {text}{hint}");
                }
                *status.last_error.lock() = Some(text);
                status.retries.fetch_add(1, Ordering::Relaxed);
                if started.elapsed() > Duration::from_secs(10) {
                    backoff = Duration::from_millis(100);
                }
                let deadline = Instant::now() + backoff;
                while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// The AWT groups now.
fn awt_groups(cache: &dyn AwtHost) -> Vec<Arc<GroupEntry>> {
    cache.group_entries().into_iter().filter(|entry| entry.def.kind == GroupKind::Awt).collect()
}

/// Checks every AWT group's tables against PostgreSQL: the ones that changed, with why.
pub(crate) fn drifted_groups(
    client: &mut postgres::Client,
    groups: &[Arc<GroupEntry>],
) -> Result<BTreeMap<String, String>, CacheError> {
    let mut drifted = BTreeMap::new();
    for entry in groups {
        if let Some(drift) = verify_group(client, entry)? {
            drifted.insert(entry.def.name.clone(), format!("table \"{}\" {}", drift.table, drift.reason));
        }
    }
    Ok(drifted)
}

/// The lane count for this session and the rows it starts from: the stored
/// rows' count, unless every row agrees and no group is held (then the
/// configured count, the rows rewritten for it if it differs).
fn choose_lanes(
    control: &mut postgres::Client,
    context: &SessionContext,
    groups: &[Arc<GroupEntry>],
    held: bool,
) -> Result<(usize, Positions), CacheError> {
    let configured = context.config.apply_connections.max(1);
    let stored = read_progress(control, &context.node, None)?;
    if stored.is_empty() {
        return Ok((configured, stored));
    }
    match stored.common() {
        Some(position) if !held && stored.lanes() != configured => {
            let mut names = stored.groups();
            names.extend(groups.iter().map(|entry| entry.def.name.clone()));
            names.sort();
            names.dedup();
            set_progress(control, &context.node, &names, configured, Lsn(position), true)?;
            Ok((configured, read_progress(control, &context.node, None)?))
        }
        _ => Ok((stored.lanes(), stored)),
    }
}

/// One connected stretch: the node claimed, the definitions checked, lanes
/// started, then the stream read and dispatched until stopped or an error.
/// Holds the cache only while it looks at one transaction, so dropping the
/// cache stops propagation.
fn session(
    cache: &Weak<dyn AwtHost>,
    context: &SessionContext,
    status: &AwtStatus,
    stop: &AtomicBool,
) -> Result<SessionEnd, CacheError> {
    let (db, params, groups) = match cache.upgrade() {
        Some(cache) => {
            (cache.database().clone(), cache.backend().cloned().ok_or(CacheError::NoBackend)?, awt_groups(&*cache))
        }
        None => return Ok(SessionEnd::Stopped),
    };
    let mut control = connect_backend(&params)?;
    crate::backend_schema::ensure(&mut control)?;
    node::claim(&mut control, &context.node, false)?;
    status.node_refused.store(false, Ordering::Relaxed);
    let (mut control, control_pid) = session_connection(control, &context.node, NodeObject::AwtControl)?;
    let drifted = drifted_groups(&mut control, &groups)?;
    for (group, reason) in &drifted {
        tracing::warn!(
            group = group.as_str(),
            "write-through of cache group \"{group}\" is held: {reason}; its transactions wait in the log (see pgtier_cache_propagation)"
        );
    }
    *status.held.lock() = drifted.clone();
    let (lane_count, positions) = choose_lanes(&mut control, context, &groups, !drifted.is_empty())?;
    // Write-through sends only durable transactions, so PostgreSQL's rows
    // never pass this log's durable end, unless this log is behind what was
    // propagated under its identity: then its next transactions would be
    // taken for applied ones and skipped.
    let end = db.wal_durable_end().0;
    if positions.furthest() > end {
        return Err(CacheError::LogBehindPostgres {
            node: context.node.name.clone(),
            progress: positions.furthest(),
            end,
        });
    }
    let known: Vec<String> = groups.iter().map(|entry| entry.def.name.clone()).collect();
    statements::ensure_rows(&mut control, &context.node, &known, lane_count, true)?;
    let lanes = Lanes::new(lane_count);
    lanes.control.backend_pid.store(control_pid, Ordering::Relaxed);
    *lanes.control_cancel.lock() = Some(control.cancel_token());
    *status.lane_status.lock() = lanes.statuses();
    status.lanes.store(lane_count as u64, Ordering::Relaxed);
    let mut stream = db.stream(CONSUMER)?;
    // Reading starts over from the stored position: what lies after it is
    // marked again as it is read, so "read up to" starts there too (before
    // `connected` says the marks can be trusted).
    status.read.store(stream.position().0, Ordering::Release);
    status.connected.store(true, Ordering::Release);
    status.read_moved.notify();
    if *status.state.lock() == "reconnecting" {
        tracing::info!(lanes = lane_count, "write-through connected to PostgreSQL again");
    }
    *status.state.lock() = "streaming";
    *status.last_error.lock() = None;
    let worker_context = WorkerContext {
        lanes: &lanes,
        params: &params,
        node: &context.node,
        batch_bytes_max: context.config.batch_bytes_max,
        tuning: &context.tuning,
        status,
    };
    let outcome = std::thread::scope(|scope| {
        for index in 0..lanes.count() {
            let worker_context = &worker_context;
            let spawned = std::thread::Builder::new()
                .name(format!("pgtier-awt-lane{index}"))
                .spawn_scoped(scope, move || worker(index, worker_context));
            if let Err(error) = spawned {
                lanes.fail(CacheError::InvalidSpec {
                    group: String::new(),
                    reason: format!("cannot start an apply lane: {error}"),
                });
            }
        }
        let watch_context = watch::WatchContext {
            cache,
            lanes: &lanes,
            params: &params,
            config: &context.config,
            tuning: &context.tuning,
            status,
            held: &drifted,
        };
        let watcher = std::thread::Builder::new()
            .name("pgtier-awt-watch".into())
            .spawn_scoped(scope, move || watch::watch(&watch_context));
        if let Err(error) = watcher {
            lanes.fail(CacheError::InvalidSpec {
                group: String::new(),
                reason: format!("cannot start the write-through watchdog: {error}"),
            });
        }
        let mut dispatch = Dispatch {
            cache,
            context,
            status,
            stream: &mut stream,
            control: Applier::new(control),
            lanes: &lanes,
            positions,
            held: drifted.clone(),
            held_floor: None,
            known,
        };
        let outcome = dispatch.run(stop);
        // Lanes apply what they hold, then end (at once if they fail).
        lanes.shut();
        outcome.map(|()| dispatch.held_floor)
    });
    // What a failed session leaves queued is read again by the next one.
    lanes.forget_pending();
    let held_floor = outcome?;
    if let Some(error) = lanes.failed.lock().take() {
        return match error {
            // A changed definition is held by the next session.
            CacheError::Restart { .. } | CacheError::DefinitionDrift { .. } => Ok(SessionEnd::Restart),
            error => Err(error),
        };
    }
    // Everything queued was applied: the position is final.
    let watermark = lanes.watermark(Lsn(status.position.load(Ordering::Relaxed)));
    status.position.store(held_floor.map_or(watermark, |floor| watermark.min(floor)).0, Ordering::Relaxed);
    Acks::default().maybe(&mut stream, status, true)?;
    Ok(SessionEnd::Stopped)
}

/// The reader: the stream read and each transaction skipped (PostgreSQL
/// has it), held (a group it changes is held), queued on its lane, or
/// applied on the control connection (it spans lanes).
struct Dispatch<'a> {
    cache: &'a Weak<dyn AwtHost>,
    context: &'a SessionContext,
    status: &'a AwtStatus,
    stream: &'a mut CommitStream,
    control: Applier,
    lanes: &'a Lanes,
    positions: Positions,
    /// Held groups and why (a drift, or a transaction shared with a held group).
    held: BTreeMap<String, String>,
    /// The first held transaction: acknowledgements stay below it.
    held_floor: Option<Lsn>,
    /// Groups whose progress rows exist for every lane.
    known: Vec<String>,
}

impl Dispatch<'_> {
    fn run(&mut self, stop: &AtomicBool) -> Result<(), CacheError> {
        let mut acks = Acks::default();
        let mut read = self.stream.position();
        let mut equalized = 0;
        let mut idle_since = Instant::now();
        let mut pruned = Instant::now();
        while !stop.load(Ordering::Relaxed) && !self.lanes.stopping() {
            let Some(txn) = self.stream.next(Duration::from_millis(20))? else {
                // Nothing more to read: past records that are no transaction too.
                read = read.max(self.stream.position());
                self.status.read.store(read.0, Ordering::Release);
                self.status.read_moved.notify();
                let watermark = self.watermark(read);
                self.status.position.store(watermark.0, Ordering::Relaxed);
                acks.maybe(self.stream, self.status, false)?;
                // Idle for a while: every stream of the groups not held to
                // one position, so a new lane count can take effect.
                if read.0 > equalized
                    && self.held.is_empty()
                    && idle_since.elapsed() > Duration::from_secs(1)
                    && self.lanes.idle()
                {
                    let Some(cache) = self.cache.upgrade() else { break };
                    let names: Vec<String> = awt_groups(&*cache).iter().map(|entry| entry.def.name.clone()).collect();
                    drop(cache);
                    set_progress(
                        &mut self.control.client,
                        &self.context.node,
                        &names,
                        self.lanes.count(),
                        read,
                        false,
                    )?;
                    equalized = read.0;
                }
                self.prune_marks(&mut pruned, watermark);
                continue;
            };
            idle_since = Instant::now();
            read = txn.next_lsn;
            let Some(strong) = self.cache.upgrade() else { break };
            let pending = statements(&*strong, &txn);
            drop(strong);
            self.status.read.store(read.0, Ordering::Release);
            self.status.read_moved.notify();
            if let Some(pending) = pending {
                self.dispatch(pending)?;
            }
            let watermark = self.watermark(read);
            self.status.position.store(watermark.0, Ordering::Relaxed);
            acks.maybe(self.stream, self.status, false)?;
            self.prune_marks(&mut pruned, watermark);
        }
        Ok(())
    }

    fn dispatch(&mut self, pending: PendingTxn) -> Result<(), CacheError> {
        let groups: Vec<String> = pending.groups().into_iter().map(str::to_owned).collect();
        if let Some(reason) = groups.iter().find_map(|g| self.held.get(g)).cloned() {
            // Left pending in the WAL (and marked): the next session reads it again.
            for group in &groups {
                if !self.held.contains_key(group) {
                    let why = format!("a transaction changed it together with a held group ({reason})");
                    tracing::warn!(group = group.as_str(), "write-through of cache group \"{group}\" is held: {why}");
                    self.held.insert(group.clone(), why);
                }
            }
            *self.status.held.lock() = self.held.clone();
            self.held_floor.get_or_insert(pending.lsn);
            return Ok(());
        }
        // A group created while this session runs: its rows first.
        let new: Vec<String> = groups.iter().filter(|g| !self.known.contains(g)).cloned().collect();
        if !new.is_empty() {
            statements::ensure_rows(&mut self.control.client, &self.context.node, &new, self.lanes.count(), false)?;
            self.known.extend(new);
        }
        let streams = pending.streams(self.lanes.count());
        let mut involved: Vec<usize> = streams.iter().map(|(_, lane)| *lane).collect();
        involved.dedup();
        if self.positions.has(pending.lsn, &streams) {
            // PostgreSQL has it: applied before a crash that came before the local ack.
            pending.settled();
        } else if let [lane] = involved[..] {
            self.lanes.push(lane, pending);
        } else {
            self.apply_spanning(&pending, &streams, &involved)?;
        }
        Ok(())
    }

    /// A transaction spanning lanes: once they applied everything before
    /// it, applied once for all of them on the control connection.
    fn apply_spanning(
        &mut self,
        pending: &PendingTxn,
        streams: &[Stream],
        involved: &[usize],
    ) -> Result<(), CacheError> {
        self.lanes.drain(involved);
        if self.lanes.stopping() {
            // Read again by the next session.
            return Ok(());
        }
        self.status.spanning.fetch_add(1, Ordering::Relaxed);
        let control = self.lanes.control.clone();
        control.waiting_since_us.store(pgtier_engine::wall_clock_us(), Ordering::Relaxed);
        *control.state.lock() = "applying";
        let batch = BatchContext { node: &self.context.node, lanes: self.lanes.count(), spanning: Some(streams) };
        let outcome = apply_isolating(&mut self.control, &batch, &[pending]);
        control.waiting_since_us.store(0, Ordering::Relaxed);
        *control.state.lock() = "idle";
        // Applied or refused for good: settled. Else read again by the next session.
        let refused = outcome?;
        pending.settled();
        control.applied_txns.fetch_add(1, Ordering::Relaxed);
        control.last_applied_us.store(pgtier_engine::wall_clock_us(), Ordering::Relaxed);
        self.status.errors.fetch_add(refused, Ordering::Relaxed);
        self.status.record_applied(&[pending]);
        Ok(())
    }

    /// The position before which everything read is applied or not for
    /// PostgreSQL: below every queued and every held transaction.
    fn watermark(&self, read: Lsn) -> Lsn {
        let queued = self.lanes.watermark(read);
        self.held_floor.map_or(queued, |floor| queued.min(floor))
    }

    /// Once a second: forgets marks no load needs (below what PostgreSQL has).
    fn prune_marks(&self, last: &mut Instant, watermark: Lsn) {
        if last.elapsed() < Duration::from_secs(1) {
            return;
        }
        *last = Instant::now();
        if let Some(cache) = self.cache.upgrade() {
            for entry in awt_groups(&*cache) {
                entry.marks.prune(watermark.0);
            }
        }
    }
}

/// Waits until propagation has read (marked) every application transaction
/// committed before the call, flushing the WAL so asynchronous commits are
/// readable at once; false after `timeout` (propagation stopped or far behind).
pub(crate) fn wait_read(
    db: &pgtier_engine::Database,
    status: &AwtStatus,
    timeout: Duration,
) -> Result<bool, CacheError> {
    // Only application commits mark instances: loads and evictions after
    // the newest one need not be read (a run of misses flushes nothing).
    let end = db.application_commit_end().0;
    let caught_up = || status.connected.load(Ordering::Acquire) && status.read.load(Ordering::Acquire) >= end;
    if caught_up() {
        return Ok(true);
    }
    db.flush_wal()?;
    // Woken as the reader moves (a dynamic load waits here twice, so
    // polling added its period to every miss); the poll period below
    // covers a session still connecting (at start, after an outage), which
    // sets `connected` without reading anything.
    Ok(status.read_moved.wait_until(caught_up, Instant::now() + timeout))
}

/// A wake-up for [`wait_read`]'s waiters whenever [`AwtStatus::read`]
/// moves. The reader pays a load of `waiting` per transaction when no one
/// waits.
#[derive(Debug, Default)]
pub struct ReadSignal {
    waiting: AtomicU64,
    lock: Mutex<()>,
    moved: parking_lot::Condvar,
}

impl ReadSignal {
    /// After `read` was stored.
    pub(crate) fn notify(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            // Taken and dropped: a waiter between its check and its wait
            // holds the lock, so it is waiting by the time this notifies.
            drop(self.lock.lock());
            self.moved.notify_all();
        }
    }

    /// Waits for `done` until `deadline`; its last answer.
    fn wait_until(&self, done: impl Fn() -> bool, deadline: Instant) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.lock.lock();
        let mut finished = done();
        while !finished && Instant::now() < deadline {
            let poll = (Instant::now() + Duration::from_millis(5)).min(deadline);
            self.moved.wait_until(&mut guard, poll);
            finished = done();
        }
        drop(guard);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        finished
    }
}

/// The local consumer position is written (a small file, fsync'd) at most
/// every [`ACK_INTERVAL`]: it only bounds WAL retention and where a restart
/// begins reading; PostgreSQL's progress rows decide what is skipped.
const ACK_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Default)]
struct Acks {
    last: Option<Instant>,
    acked: u64,
}

impl Acks {
    fn maybe(&mut self, stream: &mut CommitStream, status: &AwtStatus, force: bool) -> Result<(), CacheError> {
        let position = status.position.load(Ordering::Relaxed);
        let due = self.last.is_none_or(|last| last.elapsed() >= ACK_INTERVAL);
        if position > self.acked && (due || force) {
            stream.ack(Lsn(position))?;
            self.acked = position;
            self.last = Some(Instant::now());
        }
        Ok(())
    }
}

/// Waits until propagation has processed everything committed before the
/// call (`wal_end`), or `timeout`; true when it has.
pub(crate) fn wait_position(status: &AwtStatus, wal_end: u64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while status.position.load(Ordering::Relaxed) < wal_end {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::LagHistogram;

    #[test]
    fn intervals_of_the_lag_histogram() {
        let lag = LagHistogram::default();
        for us in [100, 200, 300] {
            lag.record(us);
        }
        let first = lag.snapshot();
        assert_eq!((first.count(), first.max_us), (3, 300));
        lag.record(50_000);
        lag.record(1_000);
        let second = lag.snapshot();
        // The interval holds only what came after the first snapshot, and
        // its maximum is exact (a new largest value was recorded in it).
        let window = second.since(&first);
        assert_eq!((window.count(), window.max_us), (2, 50_000));
        assert!(window.quantile_us(0.5) >= 1_000.0 && window.quantile_us(0.5) < 1_200.0, "{}", window.quantile_us(0.5));
        // No quantile above the maximum (a bucket's bound may be).
        assert_eq!(window.quantile_us(1.0), 50_000.0);
        // No new maximum: the interval's largest value is its top bucket's bound.
        lag.record(150);
        let quiet = lag.snapshot().since(&second);
        assert_eq!(quiet.count(), 1);
        assert!(quiet.max_us >= 150 && quiet.max_us < 180, "{}", quiet.max_us);
        let mut both = window.clone();
        both.merge(&quiet);
        assert_eq!((both.count(), both.max_us), (3, 50_000));
        assert_eq!(lag.max_us(), 50_000);
        assert_eq!(lag.quantile_us(1.0), lag.snapshot().quantile_us(1.0));
        lag.reset();
        assert_eq!((lag.count(), lag.max_us()), (0, 0));
    }
}
