//! `[replication]`: an active that streams its WAL to a hot standby, and
//! the standby that applies it, serves read-only sessions and becomes the
//! active on `SELECT pg_promote()`.
//!
//! Physical shipping: the standby's data directory is the active's,
//! continued (seeded by `pgtier backup` on the active and `pgtier restore
//! --standby`, which keeps the directory's incarnation). It connects to the
//! active's `[replication] listen` address with its own TCP connection
//! (not the pgwire port: a replication stream is neither a session nor
//! SQL), says which directory it is and where its log ends, and receives
//! every durable record from there, which the engine appends at the same
//! LSN and applies (crates/engine replica.rs). It acknowledges its durable
//! end after each burst. Promotion is therefore a crash-restart of the
//! active's directory on another machine: write-through resumes from
//! PostgreSQL's progress rows (keyed by node, incarnation and LSN) with no
//! loss and no repeat, and the commit-stream consumers' positions (AWT's)
//! are mirrored from the active so the WAL they need is kept.
//!
//! Modes: `async` (a commit returns once durable here; the loss window,
//! bytes and ms the standby has not acknowledged, is in `pgtier status`
//! and /metrics) and `sync` (a `Sync` commit returns once the standby has
//! acknowledged a durable end past it; after `sync_timeout_ms` it fails
//! with 08007, transaction_resolution_unknown: durable here, not confirmed
//! there). The wait is the engine's `CommitGate`, set only on an active in
//! sync mode or with a lease: without replication a commit pays one
//! branch. An active whose standby is gone past `standby_timeout_ms` goes
//! on without it (standby_timeout.rs).

mod failover;
mod standby_timeout;
mod stream;

pub(crate) use failover::{Failover, LeaseStatus};
use standby_timeout::StandbyLink;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use pgtier_engine::{Database, EngineError, Lsn};

use crate::config::{ReplicationRole, ReplicationSettings};

/// Opens the cache once a standby is promoted (what a restart would do),
/// with the lease epoch it was promoted at (0 without a lease).
pub(crate) type CacheOpener = Box<dyn FnOnce(i64) -> Result<Arc<pgtier_cache::Cache>, String> + Send>;

/// What `pgtier status` and /metrics show.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReplicationStatus {
    pub role: &'static str,
    pub mode: &'static str,
    pub connected: bool,
    /// Active: the standby's acknowledged durable end. Standby: its own.
    pub standby_durable_lsn: u64,
    /// Standby: the end of its applied log (= received whole transactions).
    pub standby_applied_lsn: u64,
    /// The active's durable end (a standby's latest word of it).
    pub active_durable_lsn: u64,
    pub lag_bytes: u64,
    pub lag_ms: u64,
    pub lease: LeaseStatus,
    /// Active: following | gone | dropped | rejoining (standby_timeout.rs);
    /// a standby: "-".
    pub standby_link: &'static str,
}

pub(crate) struct Replication {
    db: Database,
    settings: ReplicationSettings,
    standby: AtomicBool,
    /// Serves a standby: an active, or a standby promoted with `listen`.
    serving: AtomicBool,
    /// Active: the standby's acknowledged durable end (0: none yet).
    acked: AtomicU64,
    /// The end of what AWT may send PostgreSQL (`Database::limit_stream`):
    /// what the standby acknowledged, so PostgreSQL never holds a change
    /// the standby could take over without (its progress rows would then
    /// point past the promoted log). `u64::MAX` until a promoted standby's
    /// own first standby connects.
    awt_limit: Arc<AtomicU64>,
    ack_lock: Mutex<()>,
    ack_cv: Condvar,
    /// Active: ends of sent bursts not yet acknowledged, with when they
    /// were sent (bounded): the loss window's age.
    unacked: Mutex<VecDeque<(u64, Instant)>>,
    connected: AtomicBool,
    /// Standby: the active's durable end as last heard.
    active_end: AtomicU64,
    stop: AtomicBool,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Standby: the receiver's socket, shut down to stop it.
    socket: Mutex<Option<std::net::TcpStream>>,
    cache_opener: Mutex<Option<CacheOpener>>,
    /// Standby: the active's consumer positions as last heard (mirrored
    /// once more at promotion).
    last_consumers: Mutex<Option<stream::ActiveConsumers>>,
    /// Standby: the catalog `names_stamp` under which DYNAMIC groups' tables
    /// last got their standby miss hooks (`guard_standby_reads`).
    hooked_names: Mutex<u64>,
    /// `[replication] lease_ms`: automatic failover (failover.rs).
    failover: Option<Failover>,
    /// The lease's threads, stopped only at shutdown (`stop` ends the
    /// stream's, which promotion does too).
    watchers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    shutdown: AtomicBool,
    /// The server, for an automatic promotion to finish what
    /// `pg_promote()` finishes in its session.
    shared: Mutex<Option<std::sync::Weak<crate::server::Shared>>>,
    /// One promotion at a time (the lease's waiter and `pg_promote()`).
    promoting: Mutex<()>,
    /// Active: how it stands with its standby (standby_timeout.rs).
    standby_link: Mutex<StandbyLink>,
    /// `standby_link.without_standby()`, read by every sync commit.
    without_standby: AtomicBool,
}

const UNACKED_MAX: usize = 4096;

impl Replication {
    pub(crate) fn new(
        db: Database,
        settings: ReplicationSettings,
        failover: Option<Failover>,
    ) -> Result<Arc<Replication>, crate::ServerError> {
        let standby = matches!(settings.role, ReplicationRole::Standby { .. });
        if standby {
            db.set_standby(true);
            // Write-through's position, kept from the start: until the
            // active's first keepalive says where its write-through stands
            // (or that it has none), the WAL it may need stays; a standby
            // promoted before would otherwise start it at its own end
            // and never send PostgreSQL the active's last commits.
            db.register_consumer(pgtier_cache::AWT_CONSUMER, pgtier_engine::StreamStart::Oldest)
                .map_err(|e| crate::ServerError::Engine(format!("registering write-through's position: {e}")))?;
        }
        // A configured active's write-through waits for its standby from
        // the start; a promoted standby's once a standby of its own
        // connects (stream.rs). Set before the cache opens.
        let awt_limit = Arc::new(AtomicU64::new(if standby { u64::MAX } else { 0 }));
        if !standby {
            db.limit_stream(pgtier_cache::AWT_CONSUMER, Arc::clone(&awt_limit));
        }
        Ok(Arc::new(Replication {
            db,
            settings,
            standby: AtomicBool::new(standby),
            serving: AtomicBool::new(!standby),
            acked: AtomicU64::new(0),
            awt_limit,
            ack_lock: Mutex::new(()),
            ack_cv: Condvar::new(),
            unacked: Mutex::new(VecDeque::new()),
            connected: AtomicBool::new(false),
            active_end: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            socket: Mutex::new(None),
            cache_opener: Mutex::new(None),
            last_consumers: Mutex::new(None),
            hooked_names: Mutex::new(0),
            failover,
            watchers: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            shared: Mutex::new(None),
            promoting: Mutex::new(()),
            standby_link: Mutex::new(StandbyLink::Following),
            without_standby: AtomicBool::new(false),
        }))
    }

    pub(crate) fn set_shared(&self, shared: std::sync::Weak<crate::server::Shared>) {
        *self.shared.lock() = Some(shared);
    }

    /// The active at start with `lease_ms`: take the lease before the cache
    /// opens (its write-through carries the epoch). Errors name the holder.
    pub(crate) fn take_lease_at_start(self: &Arc<Self>) -> Result<i64, String> {
        if self.is_standby() || self.failover.is_none() {
            return Ok(0);
        }
        let epoch = self.hold_lease(None).map_err(|e| {
            format!(
                "{e}. This server cannot start as the active: if the other member took over, re-seed this one as its standby (README, High availability)"
            )
        })?;
        // It went on without its standby before this restart: still so.
        if !self.standby_may_take_over()? {
            self.awt_limit.store(u64::MAX, Ordering::Release);
            self.set_standby_link(StandbyLink::Dropped);
            tracing::warn!(
                "replication: the standby was dropped before this restart; it may not take over until it reconnects and catches up"
            );
        }
        Ok(epoch)
    }

    pub(crate) fn is_standby(&self) -> bool {
        self.standby.load(Ordering::Acquire)
    }

    /// Standby, before a planned statement runs: the tables of every
    /// DYNAMIC cache group refuse a miss the active would load from
    /// PostgreSQL (`pgtier_cache::refuse_misses_on_standby`) instead of
    /// answering "no row". Reinstalled whenever the catalog's names
    /// changed (a group created on the active arrives as DDL); the plan was
    /// bound to a catalog no newer than the one checked here.
    pub(crate) fn guard_standby_reads(&self) -> Result<(), pgtier_cache::CacheError> {
        if !self.is_standby() {
            return Ok(());
        }
        let stamp = self.db.catalog().names_stamp();
        let mut hooked = self.hooked_names.lock();
        if *hooked != stamp {
            pgtier_cache::refuse_misses_on_standby(&self.db)?;
            *hooked = stamp;
        }
        Ok(())
    }

    pub(crate) fn set_cache_opener(&self, opener: CacheOpener) {
        *self.cache_opener.lock() = Some(opener);
    }

    /// Starts the sender's listener (active) or the receiver (standby).
    pub(crate) fn start(self: &Arc<Self>) -> Result<(), crate::ServerError> {
        let handle = match self.settings.role.clone() {
            ReplicationRole::Active { listen } => {
                // With a lease the gate was installed when it was taken.
                if self.settings.sync && self.failover.is_none() {
                    self.db.set_commit_gate(Arc::new(Gate(Arc::clone(self))));
                }
                self.spawn_standby_watch()?;
                self.spawn_listener(listen)?
            }
            ReplicationRole::Standby { primary, .. } => {
                let me = Arc::clone(self);
                if self.failover.is_some() {
                    self.spawn_lease_waiter()?;
                }
                std::thread::Builder::new()
                    .name("pgtier-repl-receive".into())
                    .spawn(move || stream::receive_loop(&me, &primary))?
            }
        };
        self.threads.lock().push(handle);
        Ok(())
    }

    fn spawn_listener(
        self: &Arc<Self>,
        listen: std::net::SocketAddr,
    ) -> Result<std::thread::JoinHandle<()>, crate::ServerError> {
        let listener = std::net::TcpListener::bind(listen)
            .map_err(|source| crate::ServerError::Listen { addr: listen, source })?;
        let me = Arc::clone(self);
        Ok(std::thread::Builder::new()
            .name("pgtier-repl-listen".into())
            .spawn(move || stream::listen(&me, listener))?)
    }

    /// Server shutdown: the stream's threads and the lease's.
    pub(crate) fn shut_down(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.stop();
        let watchers = std::mem::take(&mut *self.watchers.lock());
        for t in watchers {
            let _ = t.join();
        }
    }

    /// Stops the threads (server shutdown, promotion).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(sock) = self.socket.lock().take() {
            let _ = sock.shutdown(std::net::Shutdown::Both);
        }
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        // Sync commits waiting for a standby that will not answer now.
        self.ack_cv.notify_all();
    }

    /// `pg_promote()`: with a lease, take it first (refused while the
    /// active holds it); then stop receiving (what was received whole is
    /// applied and durable), leave the standby state, start the cache as a
    /// restart would. Returns the cache opened, if any.
    pub(crate) fn promote(self: &Arc<Self>) -> Result<Option<Arc<pgtier_cache::Cache>>, (&'static str, String)> {
        self.promote_with(None)
    }

    fn promote_with(
        self: &Arc<Self>,
        grant: Option<pgtier_cache::lease::Grant>,
    ) -> Result<Option<Arc<pgtier_cache::Cache>>, (&'static str, String)> {
        let _one = self.promoting.lock();
        if !self.is_standby() {
            return Err(("55000", "recovery is not in progress".into()));
        }
        let epoch = self.hold_lease(grant).map_err(|e| ("55000", e))?;
        self.stop();
        self.db.flush_wal().map_err(|e| ("XX000", e.to_string()))?;
        // The newest positions heard: write-through resumes from them (or
        // from PostgreSQL's progress rows where those are later).
        if let Some(heard) = self.last_consumers.lock().take() {
            stream::mirror_consumers(self, &heard);
        }
        self.db.promote();
        self.standby.store(false, Ordering::Release);
        self.connected.store(false, Ordering::Release);
        tracing::warn!(wal_end = self.db.wal_end().0, "replication: promoted to active");
        if let ReplicationRole::Standby { listen: Some(listen), .. } = self.settings.role {
            // Serve the next standby (the old active, re-seeded); write-
            // through waits for it once it connects.
            self.db.limit_stream(pgtier_cache::AWT_CONSUMER, Arc::clone(&self.awt_limit));
            self.stop.store(false, Ordering::Release);
            self.set_standby_link(StandbyLink::Following);
            self.serving.store(true, Ordering::Release);
            if self.settings.sync && self.failover.is_none() {
                self.db.set_commit_gate(Arc::new(Gate(Arc::clone(self))));
            }
            self.spawn_standby_watch().map_err(|e| ("XX000", e.to_string()))?;
            let handle = self.spawn_listener(listen).map_err(|e| ("XX000", e.to_string()))?;
            self.threads.lock().push(handle);
        }
        match self.cache_opener.lock().take() {
            Some(open) => open(epoch).map(Some).map_err(|e| ("XX000", e)),
            None => Ok(None),
        }
    }

    fn note_ack(&self, end: u64) {
        {
            let _g = self.ack_lock.lock();
            self.acked.fetch_max(end, Ordering::AcqRel);
        }
        if self.awt_limit.load(Ordering::Acquire) != u64::MAX {
            self.awt_limit.fetch_max(end, Ordering::AcqRel);
        }
        self.ack_cv.notify_all();
        let mut q = self.unacked.lock();
        while q.front().is_some_and(|(e, _)| *e <= end) {
            q.pop_front();
        }
    }

    fn note_sent(&self, end: u64) {
        let mut q = self.unacked.lock();
        if q.len() < UNACKED_MAX && q.back().is_none_or(|(e, _)| *e < end) {
            q.push_back((end, Instant::now()));
        }
    }

    pub(crate) fn status(&self) -> ReplicationStatus {
        let mode = if self.settings.sync { "sync" } else { "async" };
        let connected = self.connected.load(Ordering::Acquire);
        let lease = self.failover.as_ref().map_or_else(
            || LeaseStatus { state: "off", epoch: 0, valid_ms: 0 },
            |f| f.status(&self.db, self.is_standby()),
        );
        if self.is_standby() {
            let durable = self.db.wal_durable_end().0;
            let active = self.active_end.load(Ordering::Acquire);
            return ReplicationStatus {
                role: "standby",
                mode,
                connected,
                standby_durable_lsn: durable,
                standby_applied_lsn: self.db.wal_end().0,
                active_durable_lsn: active,
                lag_bytes: active.saturating_sub(durable),
                lag_ms: 0,
                lease,
                standby_link: "-",
            };
        }
        let durable = self.db.wal_durable_end().0;
        let acked = self.acked.load(Ordering::Acquire);
        let promoted = !self.serving.load(Ordering::Acquire);
        let lag_ms =
            if promoted { 0 } else { self.unacked.lock().front().map_or(0, |(_, at)| at.elapsed().as_millis() as u64) };
        ReplicationStatus {
            role: "active",
            mode,
            connected,
            standby_durable_lsn: acked,
            standby_applied_lsn: acked,
            active_durable_lsn: durable,
            lag_bytes: if promoted { 0 } else { durable.saturating_sub(acked) },
            lag_ms,
            lease,
            standby_link: self.standby_link.lock().name(),
        }
    }
}

/// The engine's commit gate: sync mode's wait for the standby, and the
/// lease's last word (failover.rs).
struct Gate(Arc<Replication>);

impl pgtier_engine::CommitGate for Gate {
    fn before_ack(&self, lsn: Lsn, sync_commit: bool) -> pgtier_engine::Result<()> {
        let r = &self.0;
        // A standby promoted without `listen` has no standby to wait for,
        // and an active that dropped its standby waits for it no more.
        let has_standby = r.serving.load(Ordering::Acquire) && !r.without_standby.load(Ordering::Acquire);
        // Confirmed durable on the standby: it survives any failover,
        // whatever became of the lease meanwhile. A standby dropped while
        // this commit waited can no longer take over (standby_timeout.rs):
        // the lease decides, as for an async commit.
        if r.settings.sync && sync_commit && has_standby && r.wait_acked(lsn)? {
            return Ok(());
        }
        match &r.failover {
            Some(f) if !f.holds() => Err(EngineError::hook(
                "08007",
                "the commit is durable on this server, which no longer holds the pair's lease: the standby may have taken over without it, so its outcome is unknown",
                Some(
                    "Reconnect: a multi-host connection string with target_session_attrs=read-write finds the active."
                        .into(),
                ),
            )),
            _ => Ok(()),
        }
    }
}

impl Replication {
    /// Sync mode: until the standby acknowledged a durable end past `lsn`
    /// (true), or was dropped meanwhile (false).
    fn wait_acked(&self, lsn: Lsn) -> pgtier_engine::Result<bool> {
        let r = self;
        if r.acked.load(Ordering::Acquire) > lsn.0 {
            return Ok(true);
        }
        let deadline = Instant::now() + r.settings.sync_timeout;
        let mut g = r.ack_lock.lock();
        while r.acked.load(Ordering::Acquire) <= lsn.0 {
            if r.without_standby.load(Ordering::Acquire) {
                return Ok(false);
            }
            if r.stop.load(Ordering::Acquire) || r.ack_cv.wait_until(&mut g, deadline).timed_out() {
                if r.acked.load(Ordering::Acquire) > lsn.0 {
                    break;
                }
                return Err(EngineError::hook(
                    "08007",
                    format!(
                        "the commit is durable on this server but the standby did not confirm it within {} ms: its outcome after a failover is unknown",
                        r.settings.sync_timeout.as_millis()
                    ),
                    Some("Check the standby ([replication] primary) and pgtier status; the transaction is committed here and is not rolled back.".into()),
                ));
            }
        }
        Ok(true)
    }
}

/// Waits between reconnect attempts and keepalives.
pub(crate) const RETRY: Duration = Duration::from_millis(200);
