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
//! PostgreSQL transaction that also moves the lane's row in
//! `pgtier.awt_progress`. Those rows are the truth after any crash: on
//! (re)start each lane skips the transactions before its position, so a
//! crash of pgtier or of PostgreSQL at any moment neither loses nor repeats a
//! transaction. The local consumer position (WAL retention, where reading
//! restarts) trails: it is acknowledged only below every lane's unapplied
//! work, at most every [`ACK_INTERVAL`].
//!
//! Every UPDATE and DELETE must hit exactly one row and every INSERT insert
//! one; a batch PostgreSQL refuses (or where a count differs) is rolled back
//! and applied one transaction at a time, so the culprit is isolated: it goes
//! to `pgtier.awt_errors` with its statements and PostgreSQL's error (with
//! the progress, in one transaction) and propagation goes on. A lost
//! connection ends the session; it reconnects with backoff (100 ms doubling
//! to 5 s) and resumes from the progress rows. Local commits never wait.
//!
//! Writes to AWT groups fail with 53400 while propagation is more than
//! `retained_wal_max` behind (the write guard in `manager`). SWT, where
//! PostgreSQL commits first, is `crate::swt`.

mod lanes;
mod sql;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pgtier_backend::connect_backend;
use pgtier_engine::{CommitStream, EngineError, Lsn};

use self::lanes::{Lanes, worker};
use self::sql::{PendingTxn, apply_isolating, read_progress, set_progress, setup, statements};
use crate::apply::Applier;
use crate::error::CacheError;
use crate::manager::Cache;

/// The commit-stream consumer of AWT propagation.
pub const CONSUMER: &str = "pgtier_awt";

/// How AWT propagation applies.
#[derive(Clone, Debug)]
pub struct AwtConfig {
    /// This pgtier's name in `pgtier.awt_progress` (several pgtier nodes may share one PostgreSQL).
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
}

impl Default for AwtConfig {
    fn default() -> AwtConfig {
        AwtConfig { node: "pgtier".into(), apply_connections: 4, batch_bytes_max: 256 << 10, batch_delay: Duration::ZERO, retained_wal_max: 4 << 30 }
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
    /// Commit time (µs since the Unix epoch) of the newest transaction applied.
    pub last_applied_commit_us: AtomicU64,
    pub connected: AtomicBool,
    pub lanes: AtomicU64,
    /// Transactions that spanned lanes (applied after a drain of those lanes).
    pub spanning: AtomicU64,
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
        let buckets: Vec<u64> =
            self.buckets.iter().enumerate().map(|(i, n)| n.saturating_sub(earlier.buckets.get(i).copied().unwrap_or(0))).collect();
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
    fn record_applied(&self, txns: &[&PendingTxn]) {
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

impl Awt {
    /// `acked`: the consumer's stored position (the backlog starts from there).
    pub fn start(cache: Weak<Cache>, config: AwtConfig, acked: Lsn) -> std::io::Result<Awt> {
        let status = Arc::new(AwtStatus::default());
        status.position.store(acked.0, Ordering::Relaxed);
        status.read.store(acked.0, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_status, thread_stop) = (status.clone(), stop.clone());
        let thread = std::thread::Builder::new().name("pgtier-awt".into()).spawn(move || run(&cache, &config, &thread_status, &thread_stop))?;
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

fn run(cache: &Weak<Cache>, config: &AwtConfig, status: &AwtStatus, stop: &AtomicBool) {
    let mut backoff = Duration::from_millis(100);
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let outcome = session(cache, config, status, stop);
        status.connected.store(false, Ordering::Relaxed);
        match outcome {
            Ok(()) => return,
            Err(error) => {
                *status.last_error.lock() = Some(error.to_string());
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

/// The lane count and each lane's position for this session: the stored
/// lanes, unless they all agree (then the configured number, all there).
fn choose_lanes(configured: usize, stored: &[(usize, u64)]) -> Vec<u64> {
    let Some(&(_, first)) = stored.first() else { return vec![0; configured] };
    if stored.iter().all(|&(_, lsn)| lsn == first) {
        return vec![first; configured];
    }
    let count = stored.iter().map(|&(lane, _)| lane + 1).max().unwrap_or(1);
    let mut positions = vec![0; count];
    for &(lane, lsn) in stored {
        positions[lane] = lsn;
    }
    positions
}

/// One connected stretch: lanes started, then the stream read and dispatched
/// until stopped or an error. Holds the cache only while it looks at one
/// transaction, so dropping the cache stops propagation.
fn session(cache: &Weak<Cache>, config: &AwtConfig, status: &AwtStatus, stop: &AtomicBool) -> Result<(), CacheError> {
    let (db, params) = match cache.upgrade() {
        Some(cache) => (cache.database().clone(), cache.backend().cloned().ok_or(CacheError::NoBackend)?),
        None => return Ok(()),
    };
    let mut control = connect_backend(&params)?;
    setup(&mut control, &config.node, None, true)?;
    let positions = choose_lanes(config.apply_connections.max(1), &read_progress(&mut control, &config.node)?);
    let lanes = Lanes::new(positions.len());
    status.lanes.store(positions.len() as u64, Ordering::Relaxed);
    let mut stream = db.stream(CONSUMER)?;
    // Reading starts over from the stored position: what lies after it is
    // marked dirty again as it is read, so "read up to" starts there too
    // (before `connected` says the marks can be trusted).
    status.read.store(stream.position().0, Ordering::Release);
    status.connected.store(true, Ordering::Release);
    *status.last_error.lock() = None;
    let outcome = std::thread::scope(|scope| {
        for index in 0..lanes.count() {
            let (lanes, params) = (&lanes, &params);
            // Named, so a thread's CPU can be told apart (the demo's table).
            let spawned = std::thread::Builder::new()
                .name(format!("pgtier-awt-{index}"))
                .spawn_scoped(scope, move || worker(index, lanes, params, config, status));
            if let Err(source) = spawned {
                // The lanes already started see the failure and end.
                lanes.fail(CacheError::Engine(EngineError::Io { context: format!("starting write-through lane {index}"), source }));
                break;
            }
        }
        let mut control = Applier::new(control);
        let outcome = dispatch(cache, config, status, stop, &mut stream, &mut control, &lanes, &positions);
        // Lanes apply what they hold, then end (at once if they fail).
        lanes.shut();
        outcome
    });
    // What a failed session leaves queued is read again by the next one.
    lanes.forget_pending();
    outcome?;
    if let Some(error) = lanes.failed.lock().take() {
        return Err(error);
    }
    // Everything queued was applied: the position is final.
    status.position.store(lanes.watermark(Lsn(status.position.load(Ordering::Relaxed))).0, Ordering::Relaxed);
    Acks::default().maybe(&mut stream, status, true)
}

/// Reads the stream and hands transactions to the lanes.
#[allow(clippy::too_many_arguments)]
fn dispatch(
    cache: &Weak<Cache>,
    config: &AwtConfig,
    status: &AwtStatus,
    stop: &AtomicBool,
    stream: &mut CommitStream,
    control: &mut Applier,
    lanes: &Lanes,
    positions: &[u64],
) -> Result<(), CacheError> {
    let mut acks = Acks::default();
    let mut read = stream.position();
    let mut equalized = positions.iter().copied().min().unwrap_or(0);
    let mut idle_since = Instant::now();
    while !stop.load(Ordering::Relaxed) && !lanes.stopping() {
        let Some(txn) = stream.next(Duration::from_millis(20))? else {
            // Nothing more to read: past records that are no transaction too.
            read = read.max(stream.position());
            status.read.store(read.0, Ordering::Release);
            let watermark = lanes.watermark(read);
            status.position.store(watermark.0, Ordering::Relaxed);
            acks.maybe(stream, status, false)?;
            // Idle for a while: every lane to the same position, so restarts
            // read little and a new lane count can take effect.
            if watermark.0 > equalized && idle_since.elapsed() > Duration::from_secs(1) && lanes.idle() {
                set_progress(&mut control.client, &config.node, lanes.count(), watermark)?;
                equalized = watermark.0;
            }
            continue;
        };
        idle_since = Instant::now();
        read = txn.next_lsn;
        let Some(strong) = cache.upgrade() else { break };
        let pending = statements(&strong, &txn);
        drop(strong);
        status.read.store(read.0, Ordering::Release);
        if let Some(pending) = pending {
            let involved = lanes.lanes_of(&pending);
            if txn.lsn.0 < positions[involved[0]] {
                // PostgreSQL has it: applied before a crash that came before the local ack.
                pending.applied();
            } else if let [lane] = involved[..] {
                lanes.push(lane, pending);
            } else {
                // Spans lanes: once they applied everything before it, applied once for all.
                lanes.drain(&involved);
                if lanes.stopping() {
                    // Read again (and marked again) by the next session.
                    pending.applied();
                    break;
                }
                status.spanning.fetch_add(1, Ordering::Relaxed);
                let progress: Vec<(usize, Lsn)> = involved.iter().map(|&lane| (lane, pending.next_lsn)).collect();
                let outcome = apply_isolating(control, &config.node, &[&pending], &progress);
                // Applied, refused for good, or to be read again: unmarked either way.
                pending.applied();
                status.errors.fetch_add(outcome?, Ordering::Relaxed);
                status.record_applied(&[&pending]);
            }
        }
        status.position.store(lanes.watermark(read).0, Ordering::Relaxed);
        acks.maybe(stream, status, false)?;
    }
    Ok(())
}

/// Waits until propagation has read (marked dirty) every transaction
/// committed before the call, flushing the WAL so asynchronous commits are
/// readable at once; false after `timeout` (propagation stopped or far behind).
pub(crate) fn wait_read(db: &pgtier_engine::Database, status: &AwtStatus, timeout: Duration) -> Result<bool, CacheError> {
    // Only application commits mark instances dirty: loads and evictions
    // after the newest one need not be read (a run of misses flushes nothing).
    let end = db.application_commit_end().0;
    let caught_up = || status.connected.load(Ordering::Acquire) && status.read.load(Ordering::Acquire) >= end;
    if caught_up() {
        return Ok(true);
    }
    db.flush_wal()?;
    let deadline = Instant::now() + timeout;
    // Also covers a session still connecting (at start, after an outage).
    while !caught_up() {
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(true)
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
