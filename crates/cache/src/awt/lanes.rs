//! Apply lanes: instances are hashed to `apply_connections` lanes, each
//! with its own PostgreSQL connection. A transaction whose instances all
//! fall in one lane is applied by that lane, in commit order with the lane's
//! other transactions; one spanning lanes waits until those lanes have
//! applied everything before it and is applied once on the control
//! connection (DESIGN.md §3). Progress rows are per (group, lane), so one
//! group's transactions can be held (its definition changed in PostgreSQL)
//! while the others' go on.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use pgtier_backend::{ConnectParams, connect_backend};
use postgres::CancelToken;

use super::AwtStatus;
use super::statements::{BatchContext, PendingTxn, apply_isolating};
use crate::apply::{Applier, session_connection};
use crate::error::CacheError;
use crate::node::NodeIdentity;
use crate::tuning::LiveTuning;

/// Transactions queued per lane before the reader waits.
const LANE_QUEUE_MAX: usize = 20_000;

/// What one apply connection is doing (`pgtier_cache_lanes`, `pgtier status`, `/metrics`).
#[derive(Debug, Default)]
pub struct LaneStatus {
    /// The lane number; the control connection (transactions spanning lanes) is `lanes`.
    pub lane: usize,
    /// `connecting`, `idle`, `applying`, `stalled`.
    pub state: Mutex<&'static str>,
    pub queued_txns: AtomicU64,
    pub queued_bytes: AtomicU64,
    pub applied_txns: AtomicU64,
    /// Since when (Unix µs) the lane has had work without applying any (0: none waiting).
    pub waiting_since_us: AtomicU64,
    /// When (Unix µs) the lane last committed a batch in PostgreSQL.
    pub last_applied_us: AtomicU64,
    /// The PostgreSQL backend serving the lane (0 while unconnected).
    pub backend_pid: AtomicI32,
    pub last_error: Mutex<Option<String>>,
}

impl LaneStatus {
    fn set_state(&self, state: &'static str) {
        *self.state.lock() = state;
    }

    /// Work arrived or went: the wait starts when work arrives at an idle
    /// lane and again after each applied batch while work remains.
    fn waiting(&self, any: bool) {
        let now = if any { pgtier_engine::wall_clock_us() } else { 0 };
        self.waiting_since_us.store(now, Ordering::Relaxed);
    }
}

pub(crate) struct Lane {
    /// Transactions not yet applied, in commit order; the front ones may be
    /// in flight (they leave the queue once PostgreSQL committed them).
    queue: Mutex<VecDeque<Arc<PendingTxn>>>,
    changed: Condvar,
    pub status: Arc<LaneStatus>,
    /// Cancels what the lane's connection runs (the watchdog's way to unstick it).
    pub cancel: Mutex<Option<CancelToken>>,
}

/// The lanes of one connected session and what stops them.
pub(crate) struct Lanes {
    pub lanes: Vec<Lane>,
    /// The control connection's status (index `lanes.len()`).
    pub control: Arc<LaneStatus>,
    pub control_cancel: Mutex<Option<CancelToken>>,
    pub stop: AtomicBool,
    /// The first error a lane met; the session ends and reconnects.
    pub failed: Mutex<Option<CacheError>>,
}

impl Lanes {
    pub fn new(count: usize) -> Lanes {
        Lanes {
            lanes: (0..count)
                .map(|lane| Lane {
                    queue: Mutex::new(VecDeque::new()),
                    changed: Condvar::new(),
                    status: Arc::new(LaneStatus { lane, state: Mutex::new("connecting"), ..LaneStatus::default() }),
                    cancel: Mutex::new(None),
                })
                .collect(),
            control: Arc::new(LaneStatus { lane: count, state: Mutex::new("idle"), ..LaneStatus::default() }),
            control_cancel: Mutex::new(None),
            stop: AtomicBool::new(false),
            failed: Mutex::new(None),
        }
    }

    pub fn count(&self) -> usize {
        self.lanes.len()
    }

    /// Every lane's status, the control connection's last.
    pub fn statuses(&self) -> Vec<Arc<LaneStatus>> {
        self.lanes.iter().map(|lane| lane.status.clone()).chain(std::iter::once(self.control.clone())).collect()
    }

    /// Queues `txn` on `lane`, waiting while the lane is full.
    pub fn push(&self, lane: usize, txn: PendingTxn) {
        let lane = &self.lanes[lane];
        let mut queue = lane.queue.lock();
        while queue.len() >= LANE_QUEUE_MAX && !self.stopping() {
            lane.changed.wait_for(&mut queue, Duration::from_millis(50));
        }
        if queue.is_empty() {
            lane.status.waiting(true);
        }
        lane.status.queued_txns.fetch_add(1, Ordering::Relaxed);
        lane.status.queued_bytes.fetch_add(txn.bytes() as u64, Ordering::Relaxed);
        queue.push_back(Arc::new(txn));
        lane.changed.notify_all();
    }

    /// Waits until `lanes` have applied everything queued (or the session stops).
    pub fn drain(&self, lanes: &[usize]) {
        for &lane in lanes {
            let lane = &self.lanes[lane];
            let mut queue = lane.queue.lock();
            while !queue.is_empty() && !self.stopping() {
                lane.changed.wait_for(&mut queue, Duration::from_millis(50));
            }
        }
    }

    /// The position before which every queued transaction is applied: the
    /// oldest one still queued, else `read` (after the last one read).
    pub fn watermark(&self, read: pgtier_engine::Lsn) -> pgtier_engine::Lsn {
        self.lanes
            .iter()
            .filter_map(|lane| lane.queue.lock().front().map(|txn| txn.lsn))
            .min()
            .unwrap_or(read)
            .min(read)
    }

    pub fn idle(&self) -> bool {
        self.lanes.iter().all(|lane| lane.queue.lock().is_empty())
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.failed.lock().is_some()
    }

    pub fn fail(&self, error: CacheError) {
        self.failed.lock().get_or_insert(error);
        for lane in &self.lanes {
            lane.changed.notify_all();
        }
    }

    /// Drops what is still queued (the session ended): the next session
    /// reads those transactions again (marking them again changes nothing).
    pub fn forget_pending(&self) {
        for lane in &self.lanes {
            lane.queue.lock().clear();
        }
    }

    pub fn shut(&self) {
        self.stop.store(true, Ordering::Relaxed);
        for lane in &self.lanes {
            lane.changed.notify_all();
        }
    }
}

/// What every lane worker shares.
pub(crate) struct WorkerContext<'a> {
    pub lanes: &'a Lanes,
    pub params: &'a ConnectParams,
    pub node: &'a NodeIdentity,
    pub batch_bytes_max: usize,
    /// `awt_batch_delay`, read per batch (a reload changes it).
    pub tuning: &'a LiveTuning,
    pub status: &'a AwtStatus,
}

/// A lane's apply loop: batches of its queue, each in one PostgreSQL
/// transaction with the progress rows of the streams it advances.
pub(crate) fn worker(index: usize, ctx: &WorkerContext<'_>) {
    let lanes = ctx.lanes;
    let lane = &lanes.lanes[index];
    let mut applier = match connect_backend(ctx.params)
        .map_err(CacheError::from)
        .and_then(|client| session_connection(client, ctx.node, crate::node::NodeObject::AwtLane(index)))
    {
        Ok((client, pid)) => {
            *lane.cancel.lock() = Some(client.cancel_token());
            lane.status.backend_pid.store(pid, Ordering::Relaxed);
            Applier::new(client)
        }
        Err(error) => {
            *lane.status.last_error.lock() = Some(error.to_string());
            return lanes.fail(error);
        }
    };
    lane.status.set_state("idle");
    let batch_ctx = BatchContext { node: ctx.node, lanes: lanes.count(), spanning: None };
    loop {
        let batch: Vec<Arc<PendingTxn>> = {
            let mut queue = lane.queue.lock();
            while queue.is_empty() && !lanes.stopping() {
                lane.changed.wait_for(&mut queue, Duration::from_millis(50));
            }
            if queue.is_empty() {
                return;
            }
            // Wait a little for more, unless the batch is full already.
            let first_seen = Instant::now();
            let batch_delay = ctx.tuning.get().awt_batch_delay;
            while queue.iter().map(|t| t.bytes()).sum::<usize>() < ctx.batch_bytes_max
                && first_seen.elapsed() < batch_delay
                && !lanes.stopping()
            {
                let left = batch_delay.saturating_sub(first_seen.elapsed());
                lane.changed.wait_for(&mut queue, left);
            }
            let mut bytes = 0;
            queue
                .iter()
                .take_while(|txn| {
                    let take = bytes < ctx.batch_bytes_max;
                    bytes += txn.bytes();
                    take
                })
                .cloned()
                .collect()
        };
        let refs: Vec<&PendingTxn> = batch.iter().map(|txn| txn.as_ref()).collect();
        lane.status.set_state("applying");
        match apply_isolating(&mut applier, &batch_ctx, &refs) {
            Ok(refused) => {
                ctx.status.errors.fetch_add(refused, Ordering::Relaxed);
                ctx.status.record_applied(&refs);
                let bytes: usize = refs.iter().map(|txn| txn.bytes()).sum();
                let mut queue = lane.queue.lock();
                for txn in &batch {
                    txn.settled();
                    queue.pop_front();
                }
                let status = &lane.status;
                status.queued_txns.fetch_sub(batch.len() as u64, Ordering::Relaxed);
                status.queued_bytes.fetch_sub(bytes as u64, Ordering::Relaxed);
                status.applied_txns.fetch_add(batch.len() as u64, Ordering::Relaxed);
                status.last_applied_us.store(pgtier_engine::wall_clock_us(), Ordering::Relaxed);
                status.waiting(!queue.is_empty());
                status.set_state("idle");
                lane.changed.notify_all();
            }
            Err(error) => {
                *lane.status.last_error.lock() = Some(error.to_string());
                return lanes.fail(error);
            }
        }
    }
}
