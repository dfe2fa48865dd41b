//! Apply lanes: instances are hashed to `apply_connections` lanes, each
//! with its own PostgreSQL connection and progress row. A transaction whose
//! instances all fall in one lane is applied by that lane, in commit order
//! with the lane's other transactions; one spanning lanes waits until those
//! lanes have applied everything before it and is applied once, moving all
//! their progress rows in its PostgreSQL transaction (DESIGN.md §3).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use pgtier_backend::{ConnectParams, connect_backend};
use pgtier_engine::Lsn;

use super::sql::{PendingTxn, apply_isolating, setup};
use crate::apply::{Applier, stable_hash};
use super::{AwtConfig, AwtStatus};
use crate::error::CacheError;
use crate::manager::WHOLE_GROUP;

/// Transactions queued per lane before the reader waits.
const LANE_QUEUE_MAX: usize = 20_000;

pub(crate) struct Lane {
    /// Transactions not yet applied, in commit order; the front ones may be
    /// in flight (they leave the queue once PostgreSQL committed them).
    queue: Mutex<VecDeque<Arc<PendingTxn>>>,
    changed: Condvar,
}

/// The lanes of one connected session and what stops them.
pub(crate) struct Lanes {
    pub lanes: Vec<Lane>,
    pub stop: AtomicBool,
    /// The first error a lane met; the session ends and reconnects.
    pub failed: Mutex<Option<CacheError>>,
}

impl Lanes {
    pub fn new(count: usize) -> Lanes {
        Lanes {
            lanes: (0..count).map(|_| Lane { queue: Mutex::new(VecDeque::new()), changed: Condvar::new() }).collect(),
            stop: AtomicBool::new(false),
            failed: Mutex::new(None),
        }
    }

    pub fn count(&self) -> usize {
        self.lanes.len()
    }

    /// The lanes a transaction's instances fall in (all of them for a change
    /// whose instance is unknown), sorted, without repeats.
    pub fn lanes_of(&self, txn: &PendingTxn) -> Vec<usize> {
        let mut lanes: Vec<usize> = Vec::with_capacity(1);
        for (entry, key) in &txn.dirty {
            if key == WHOLE_GROUP {
                return (0..self.count()).collect();
            }
            // A hash stable across processes and Rust versions: lanes must
            // mean the same after a restart (their stored positions).
            let lane = (stable_hash(&format!("{}\u{0}{key}", entry.def.name)) % self.count() as u64) as usize;
            if !lanes.contains(&lane) {
                lanes.push(lane);
            }
        }
        lanes.sort_unstable();
        if lanes.is_empty() {
            lanes.push(0);
        }
        lanes
    }

    /// Queues `txn` on `lane`, waiting while the lane is full.
    pub fn push(&self, lane: usize, txn: PendingTxn) {
        let lane = &self.lanes[lane];
        let mut queue = lane.queue.lock();
        while queue.len() >= LANE_QUEUE_MAX && !self.stopping() {
            lane.changed.wait_for(&mut queue, Duration::from_millis(50));
        }
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
    pub fn watermark(&self, read: Lsn) -> Lsn {
        self.lanes.iter().filter_map(|lane| lane.queue.lock().front().map(|txn| txn.lsn)).min().unwrap_or(read).min(read)
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

    /// Forgets what is still queued (the session ended): its dirty marks are
    /// removed, since the next session reads those transactions again and
    /// marks them anew.
    pub fn forget_pending(&self) {
        for lane in &self.lanes {
            for txn in lane.queue.lock().drain(..) {
                txn.applied();
            }
        }
    }

    pub fn shut(&self) {
        self.stop.store(true, Ordering::Relaxed);
        for lane in &self.lanes {
            lane.changed.notify_all();
        }
    }
}

/// A lane's apply loop: batches of its queue, each in one PostgreSQL
/// transaction with the lane's progress row.
pub(crate) fn worker(index: usize, lanes: &Lanes, params: &ConnectParams, config: &AwtConfig, status: &AwtStatus) {
    let mut applier = match connect_backend(params).map_err(CacheError::from).and_then(|mut client| setup(&mut client, &config.node, Some(index), false).map(|()| client)) {
        Ok(client) => Applier::new(client),
        Err(error) => return lanes.fail(error),
    };
    let lane = &lanes.lanes[index];
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
            while queue.iter().map(|t| t.bytes()).sum::<usize>() < config.batch_bytes_max && first_seen.elapsed() < config.batch_delay && !lanes.stopping() {
                let left = config.batch_delay.saturating_sub(first_seen.elapsed());
                lane.changed.wait_for(&mut queue, left);
            }
            let mut bytes = 0;
            queue
                .iter()
                .take_while(|txn| {
                    let take = bytes < config.batch_bytes_max;
                    bytes += txn.bytes();
                    take
                })
                .cloned()
                .collect()
        };
        let Some(last) = batch.last() else { continue };
        let refs: Vec<&PendingTxn> = batch.iter().map(|txn| txn.as_ref()).collect();
        match apply_isolating(&mut applier, &config.node, &refs, &[(index, last.next_lsn)]) {
            Ok(refused) => {
                status.errors.fetch_add(refused, Ordering::Relaxed);
                status.record_applied(&refs);
                let mut queue = lane.queue.lock();
                for txn in &batch {
                    txn.applied();
                    queue.pop_front();
                }
                lane.changed.notify_all();
            }
            Err(error) => return lanes.fail(error),
        }
    }
}
