//! Automatic failover (`[replication] lease_ms`): the pair's lease in
//! PostgreSQL (crates/cache lease.rs) decides which member writes.
//!
//! - **The active** takes the lease before its cache opens (its AWT/SWT
//!   sessions carry the lease's epoch, which PostgreSQL checks on every
//!   write-through commit) and keeps it renewed. A watcher fences the
//!   engine (every new write or DDL fails with 25006) whenever the lease is
//!   not valid by this process's own clock, and lifts the fence if a later
//!   renewal succeeds at the same epoch. The commit gate is the last word:
//!   a commit is acknowledged only while the lease is valid (or, in sync
//!   mode, once the standby has it durably), else it fails with 08007 (its
//!   outcome after the failover is unknown). Since the holder's deadline
//!   passes before PostgreSQL lets anyone else take the lease, every
//!   acknowledged commit was acknowledged before the standby could promote.
//! - **The standby**, once it has caught up with the active in this
//!   process (its durable end reached the active's as the active reported
//!   it on the connection, so whatever write-through sent PostgreSQL is
//!   here), polls PostgreSQL for the lease and promotes the moment it can take it
//!   (the active's expired or was given up): detection takes at most the
//!   lease's duration plus one poll. A standby that never reached its
//!   active does not take over on its own (`pg_promote()` still does).
//! - **Switchover** (`SELECT pgtier_switchover()` on the active): fence,
//!   wait until the standby acknowledged everything durable here, give the
//!   lease up; the standby's next poll takes it. The old active stays
//!   fenced; it rejoins as a standby after a re-seed (README).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pgtier_backend::{ConnectParams, connect_backend};
use pgtier_cache::lease::{self, Grant, LeaseConfig, LeaseKeeper};

use super::Replication;

/// The lease side of a pair member.
pub(crate) struct Failover {
    pub(super) config: LeaseConfig,
    pub(super) backend: ConnectParams,
    /// The lease while this member holds it.
    pub(super) keeper: Mutex<Option<LeaseKeeper>>,
    /// The lease was given up (switchover) or taken: the fence stays.
    pub(super) stepped_down: AtomicBool,
    /// Standby: the active was reached at least once by this process.
    pub(super) followed: AtomicBool,
}

/// What `pgtier_replication` and /metrics show of the lease.
#[derive(Clone, Debug, Default)]
pub(crate) struct LeaseStatus {
    /// off | held | fenced | catching_up | waiting | stepped_down
    pub state: &'static str,
    pub epoch: i64,
    /// Milliseconds left of this member's own deadline (0 unless held).
    pub valid_ms: u64,
}

impl Failover {
    pub(crate) fn new(config: LeaseConfig, backend: ConnectParams) -> Failover {
        Failover {
            config,
            backend,
            keeper: Mutex::new(None),
            stepped_down: AtomicBool::new(false),
            followed: AtomicBool::new(false),
        }
    }

    /// May a commit be acknowledged on the lease's account?
    pub(super) fn holds(&self) -> bool {
        self.keeper.lock().as_ref().is_some_and(LeaseKeeper::is_valid)
    }

    fn hold(&self, grant: Grant) -> i64 {
        let keeper = LeaseKeeper::start(self.backend.clone(), self.config.clone(), grant);
        let epoch = keeper.epoch();
        *self.keeper.lock() = Some(keeper);
        epoch
    }

    /// Takes the lease once: the active at its start, `pg_promote()` by
    /// hand. An error names the member holding it.
    pub(crate) fn acquire_now(&self) -> Result<i64, String> {
        let mut client = connect_backend(&self.backend)
            .map_err(|e| format!("cannot reach PostgreSQL to take the pair's lease: {e}"))?;
        match lease::try_acquire(&mut client, &self.config).map_err(|e| format!("the pair's lease: {e}"))? {
            Some(grant) => Ok(self.hold(grant)),
            None => {
                let row = lease::read(&mut client, &self.config.node).ok().flatten();
                match row {
                    Some(row) if row.remaining_ms < 0 && !row.standby_ok => Err(format!(
                        "member {:?}, the active of node {:?}, went on without its standby (standby_timeout_ms): this member may lack commits it acknowledged, so it may not take over. Re-seed it from the active; or, accepting that loss, run UPDATE pgtier.leases SET standby_ok = true WHERE node = '{}' in PostgreSQL",
                        row.holder, self.config.node, self.config.node
                    )),
                    row => {
                        let (holder, ms) = row.map_or_else(|| ("?".to_owned(), 0), |r| (r.holder, r.remaining_ms));
                        Err(format!(
                            "member {holder:?} holds the pair's lease for node {:?} ({ms} ms left): it is the active",
                            self.config.node
                        ))
                    }
                }
            }
        }
    }

    pub(super) fn status(&self, db: &pgtier_engine::Database, standby: bool) -> LeaseStatus {
        let keeper = self.keeper.lock();
        match keeper.as_ref() {
            Some(k) => LeaseStatus {
                state: if db.is_fenced() { "fenced" } else { "held" },
                epoch: k.epoch(),
                valid_ms: k.valid_until().saturating_duration_since(Instant::now()).as_millis() as u64,
            },
            None if self.stepped_down.load(Ordering::Acquire) => {
                LeaseStatus { state: "stepped_down", epoch: 0, valid_ms: 0 }
            }
            // A standby takes over only once it caught up with its active.
            None if standby && !self.followed.load(Ordering::Acquire) => {
                LeaseStatus { state: "catching_up", epoch: 0, valid_ms: 0 }
            }
            None => LeaseStatus { state: if standby { "waiting" } else { "fenced" }, epoch: 0, valid_ms: 0 },
        }
    }
}

/// How often the fence is brought in line with the lease's validity.
const FENCE_EVERY: Duration = Duration::from_millis(10);

impl Replication {
    /// The active (or a standby just promoted): fence the engine whenever
    /// the lease is not valid.
    pub(super) fn spawn_fence_watcher(self: &Arc<Self>) -> std::io::Result<()> {
        let me = Arc::clone(self);
        let handle = std::thread::Builder::new().name("pgtier-lease-fence".into()).spawn(move || {
            let Some(failover) = me.failover.as_ref() else { return };
            let mut lost_logged = false;
            let mut fenced = false;
            while !me.shutdown.load(Ordering::Acquire) {
                let (valid, lost) = match failover.keeper.lock().as_ref() {
                    Some(k) => (k.is_valid(), k.lost()),
                    None => (false, true),
                };
                let keep_fenced = lost || failover.stepped_down.load(Ordering::Acquire);
                me.db.set_fenced(!valid || keep_fenced);
                if me.db.is_fenced() != fenced {
                    fenced = !fenced;
                    // New sessions read-only while fenced: drivers looking
                    // for a read-write server move on to the standby.
                    if let Some(shared) = me.shared.lock().as_ref().and_then(std::sync::Weak::upgrade) {
                        shared.set_read_only(fenced);
                    }
                }
                if keep_fenced && !lost_logged {
                    lost_logged = true;
                    tracing::error!(
                        "replication: this server no longer holds the pair's lease; writes are refused (25006)"
                    );
                }
                std::thread::sleep(FENCE_EVERY);
            }
        })?;
        self.watchers.lock().push(handle);
        Ok(())
    }

    /// The standby: promote as soon as the lease can be taken, once the
    /// active was followed.
    pub(super) fn spawn_lease_waiter(self: &Arc<Self>) -> std::io::Result<()> {
        let me = Arc::clone(self);
        let handle = std::thread::Builder::new().name("pgtier-lease-wait".into()).spawn(move || {
            let Some(failover) = me.failover.as_ref() else { return };
            while !failover.followed.load(Ordering::Acquire) {
                if me.shutdown.load(Ordering::Acquire) || !me.is_standby() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let poll = (failover.config.duration / 10).clamp(Duration::from_millis(50), Duration::from_millis(500));
            let grant = match lease::wait_to_acquire(&failover.backend, &failover.config, poll, &me.shutdown) {
                Ok(Some(grant)) => grant,
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(error = %e, "replication: cannot wait for the pair's lease; no automatic failover");
                    return;
                }
            };
            if !me.is_standby() {
                // Promoted by hand meanwhile: that promotion holds the lease.
                return;
            }
            let started = Instant::now();
            tracing::warn!(epoch = grant.epoch, "replication: took the pair's lease; promoting");
            match me.promote_with(Some(grant)) {
                Ok(cache) => {
                    if let Some(shared) = me.shared.lock().as_ref().and_then(std::sync::Weak::upgrade) {
                        shared.promoted(cache);
                    }
                    tracing::warn!(ms = started.elapsed().as_millis() as u64, "replication: automatic promotion done");
                }
                Err((_, e)) => tracing::error!(error = %e, "replication: automatic promotion failed"),
            }
        })?;
        self.watchers.lock().push(handle);
        Ok(())
    }

    /// Holds `grant` (taken by the waiter) or takes the lease now (by
    /// hand), and installs what an active with a lease runs.
    pub(super) fn hold_lease(self: &Arc<Self>, grant: Option<Grant>) -> Result<i64, String> {
        let Some(failover) = self.failover.as_ref() else { return Ok(0) };
        let epoch = match grant {
            Some(grant) => failover.hold(grant),
            None => failover.acquire_now()?,
        };
        self.db.set_commit_gate(Arc::new(super::Gate(Arc::clone(self))));
        self.spawn_fence_watcher().map_err(|e| e.to_string())?;
        Ok(epoch)
    }

    /// Whether the lease lets the standby take over (true without a lease).
    pub(super) fn standby_may_take_over(&self) -> Result<bool, String> {
        let Some(failover) = self.failover.as_ref() else { return Ok(true) };
        let mut client = connect_backend(&failover.backend).map_err(|e| format!("cannot reach PostgreSQL: {e}"))?;
        let row = lease::read(&mut client, &failover.config.node).map_err(|e| format!("the pair's lease: {e}"))?;
        Ok(row.is_none_or(|r| r.standby_ok))
    }

    /// `SELECT pgtier_switchover()`: hand the writes to the standby.
    pub(crate) fn switchover(&self) -> Result<(), (&'static str, String)> {
        let Some(failover) = self.failover.as_ref() else {
            return Err(("55000", "switchover needs automatic failover: set [replication] lease_ms".into()));
        };
        if self.is_standby() || failover.keeper.lock().is_none() {
            return Err(("55000", "this server is not the active holding the pair's lease".into()));
        }
        if !self.connected.load(Ordering::Acquire) {
            return Err((
                "55000",
                "no standby is connected: a switchover would leave nobody to take the writes".into(),
            ));
        }
        // No new write starts; a commit already past that check is
        // acknowledged from now on only if the standby confirmed it (sync
        // mode), else it fails with 08007: the keeper is out of reach of
        // the commit gate while the standby catches up.
        failover.stepped_down.store(true, Ordering::Release);
        self.db.set_fenced(true);
        let Some(keeper) = failover.keeper.lock().take() else {
            return Err(("55000", "the pair's lease was lost during the switchover".into()));
        };
        let caught_up = self.db.flush_wal().map_err(|e| e.to_string()).and_then(|()| {
            let end = self.db.wal_end().0;
            let deadline = Instant::now() + self.settings.sync_timeout;
            while self.acked.load(Ordering::Acquire) < end {
                if Instant::now() >= deadline {
                    return Err(format!(
                        "the standby did not confirm the log up to {end} within {} ms",
                        self.settings.sync_timeout.as_millis()
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(end)
        });
        // It has everything now: allowed to take over, if it was dropped.
        let caught_up = caught_up.and_then(|end| {
            let mut client = connect_backend(&failover.backend).map_err(|e| e.to_string())?;
            match lease::set_standby_ok(&mut client, &failover.config, keeper.epoch(), true) {
                Ok(true) => Ok(end),
                Ok(false) => Err("the pair's lease is no longer held at its epoch".into()),
                Err(e) => Err(e.to_string()),
            }
        });
        let end = match caught_up {
            Ok(end) => end,
            Err(e) => {
                *failover.keeper.lock() = Some(keeper);
                failover.stepped_down.store(false, Ordering::Release);
                return Err(("57014", format!("switchover cancelled ({e}); writes resume here")));
            }
        };
        match keeper.release(&failover.backend) {
            Ok(_) => {
                tracing::warn!(wal_end = end, "replication: switchover: lease given up; the standby takes over");
                Ok(())
            }
            // Not renewed any more either way: it expires within lease_ms.
            Err(e) => Err(("08006", format!("the lease could not be given up at once ({e}); it expires on its own"))),
        }
    }
}
