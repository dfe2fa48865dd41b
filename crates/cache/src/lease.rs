//! The lease of an active/standby pair: which member may write, kept in
//! PostgreSQL (`pgtier.leases`, one row per node name) because both members
//! already depend on it and it is the one party that must agree on who
//! propagates. A second coordination service (etcd) would add a third
//! thing to fail without removing the need to fence PostgreSQL itself.
//!
//! Safety rests on three rules:
//! - **PostgreSQL's clock decides expiry.** A member takes the lease from
//!   another only when `expires_at < clock_timestamp()` in PostgreSQL
//!   (`pgtier.lease_acquire`).
//! - **The holder stops first.** A holder counts its lease valid until the
//!   instant it *sent* the renewal that succeeded, plus the duration, minus
//!   a margin ([`Grant::valid_until`]). PostgreSQL set `expires_at` from a
//!   clock read after that send, so the holder's own deadline passes before
//!   PostgreSQL's expiry does (the margin covers clock rate differences).
//!   Writes stop at the holder's deadline whether or not it can reach
//!   PostgreSQL: a member cut off from everything fences itself by time.
//! - **PostgreSQL refuses the old epoch.** Taking the lease from another
//!   holder bumps the epoch in `pgtier.nodes` under the node's advisory lock
//!   taken exclusively, after ending the sessions that hold it; every
//!   write-through transaction checks, under that lock taken shared, that
//!   its session's epoch is current (`pgtier.check_node`). So once the new
//!   holder has the lease, no write-through transaction of the old one can
//!   commit in PostgreSQL: AWT and SWT of the member that lost it stop
//!   (`CacheError::NodeTakenOver`).
//!
//! The same holder renewing or re-acquiring keeps its epoch (nobody else
//! held the lease in between), so a renewal that arrives late never
//! invalidates the holder's own sessions.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pgtier_backend::{ConnectParams, connect_backend};
use postgres::Client;

use crate::backend_schema;
use crate::error::{CacheError, connection_error};

/// Shortest lease: renewals go every third of it, over a network.
pub const LEASE_MIN: Duration = Duration::from_millis(600);

/// Who asks for which lease, for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The node name the pair shares (`[cache] awt_node`).
    pub node: String,
    /// This member's name, distinct within the pair (e.g. its address).
    pub member: String,
    /// How long a grant lasts past its renewal. Failover detection takes
    /// at most this plus the standby's poll interval.
    pub duration: Duration,
}

impl LeaseConfig {
    /// What the holder subtracts from its deadline: a tenth, at least 50 ms.
    pub fn margin(&self) -> Duration {
        (self.duration / 10).max(Duration::from_millis(50))
    }

    fn millis(&self) -> i32 {
        i32::try_from(self.duration.as_millis()).unwrap_or(i32::MAX)
    }

    fn check(&self) -> Result<(), CacheError> {
        crate::node::validate_node_name(&self.node)?;
        if self.duration < LEASE_MIN {
            return Err(CacheError::LeaseConfig(format!(
                "a lease of {} ms is shorter than the {} ms minimum",
                self.duration.as_millis(),
                LEASE_MIN.as_millis()
            )));
        }
        if self.member.is_empty() {
            return Err(CacheError::LeaseConfig("a pair member needs a name".into()));
        }
        Ok(())
    }
}

/// A lease held: its epoch, and until when this process may act on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub epoch: i64,
    /// The send instant of the successful request + duration - margin.
    pub valid_until: Instant,
}

/// The lease row as PostgreSQL holds it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRow {
    pub holder: String,
    pub epoch: i64,
    /// Milliseconds until it expires by PostgreSQL's clock (negative: expired).
    pub remaining_ms: i64,
    /// The holder's standby may take it over ([`set_standby_ok`]).
    pub standby_ok: bool,
}

/// Takes the lease if it is free, expired, or already this member's.
/// None: another member holds it and it has not expired.
pub fn try_acquire(client: &mut Client, config: &LeaseConfig) -> Result<Option<Grant>, CacheError> {
    config.check()?;
    backend_schema::ensure(client)?;
    let sent = Instant::now();
    let epoch: Option<i64> = client
        .query_one("SELECT pgtier.lease_acquire($1, $2, $3)", &[&config.node, &config.member, &config.millis()])
        .map_err(|e| connection_error(&e))?
        .get(0);
    Ok(epoch.map(|epoch| Grant { epoch, valid_until: deadline(sent, config) }))
}

/// Extends a lease held at `epoch`. None: it is no longer this member's
/// at that epoch (taken over): stop at once.
pub fn renew(client: &mut Client, config: &LeaseConfig, epoch: i64) -> Result<Option<Grant>, CacheError> {
    let sent = Instant::now();
    let renewed: Option<bool> = client
        .query_opt(
            "SELECT pgtier.lease_renew($1, $2, $3, $4)",
            &[&config.node, &config.member, &epoch, &config.millis()],
        )
        .map_err(|e| connection_error(&e))?
        .and_then(|row| row.get(0));
    Ok(renewed.filter(|&ok| ok).map(|_| Grant { epoch, valid_until: deadline(sent, config) }))
}

/// Gives the lease up at once (a switchover): the standby's next poll takes
/// it. The caller must have stopped writing first. False: it was not held.
pub fn release(client: &mut Client, config: &LeaseConfig, epoch: i64) -> Result<bool, CacheError> {
    let released: Option<bool> = client
        .query_opt("SELECT pgtier.lease_release($1, $2, $3)", &[&config.node, &config.member, &epoch])
        .map_err(|e| connection_error(&e))?
        .and_then(|row| row.get(0));
    Ok(released == Some(true))
}

/// Says whether the holder's standby may take the lease over (false while
/// the holder goes on without it: `[replication] standby_timeout_ms`).
/// False: the lease is not held at `epoch` any more.
pub fn set_standby_ok(client: &mut Client, config: &LeaseConfig, epoch: i64, ok: bool) -> Result<bool, CacheError> {
    let set: Option<bool> = client
        .query_opt("SELECT pgtier.lease_set_standby_ok($1, $2, $3, $4)", &[&config.node, &config.member, &epoch, &ok])
        .map_err(|e| connection_error(&e))?
        .and_then(|row| row.get(0));
    Ok(set == Some(true))
}

/// The lease of `node`, if any was ever taken.
pub fn read(client: &mut Client, node: &str) -> Result<Option<LeaseRow>, CacheError> {
    backend_schema::ensure(client)?;
    let row = client
        .query_opt(
            "SELECT holder, epoch, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::int8, standby_ok
               FROM pgtier.leases WHERE node = $1",
            &[&node],
        )
        .map_err(|e| connection_error(&e))?;
    Ok(row.map(|row| LeaseRow {
        holder: row.get(0),
        epoch: row.get(1),
        remaining_ms: row.get(2),
        standby_ok: row.get(3),
    }))
}

fn deadline(sent: Instant, config: &LeaseConfig) -> Instant {
    sent + config.duration.saturating_sub(config.margin())
}

/// Polls until this member holds the lease (a standby waiting for the
/// active's to expire), or `stop` is raised (None). Connection failures
/// are retried: PostgreSQL being down is a reason to wait, not to promote.
pub fn wait_to_acquire(
    params: &ConnectParams,
    config: &LeaseConfig,
    poll: Duration,
    stop: &AtomicBool,
) -> Result<Option<Grant>, CacheError> {
    config.check()?;
    let mut client: Option<Client> = None;
    while !stop.load(Ordering::Acquire) {
        if client.is_none() {
            client = connect_backend(params).ok();
        }
        if let Some(c) = client.as_mut() {
            match try_acquire(c, config) {
                Ok(Some(grant)) => return Ok(Some(grant)),
                Ok(None) => {}
                Err(_) => client = None,
            }
        }
        std::thread::sleep(poll);
    }
    Ok(None)
}

/// Keeps a held lease renewed on its own thread (every third of the
/// duration) and answers, without touching the network, whether this
/// process may still act on it. Dropping it stops renewing (the lease then
/// expires; [`LeaseKeeper::release`] gives it up at once).
pub struct LeaseKeeper {
    state: Arc<KeeperState>,
    thread: Option<JoinHandle<()>>,
}

struct KeeperState {
    config: LeaseConfig,
    epoch: i64,
    /// `valid_until` as nanoseconds after `base`.
    base: Instant,
    valid_until_ns: AtomicU64,
    /// Another member holds the lease now (a renewal was refused).
    lost: AtomicBool,
    stop: AtomicBool,
}

impl KeeperState {
    fn set_valid_until(&self, until: Instant) {
        let ns = u64::try_from(until.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX);
        self.valid_until_ns.fetch_max(ns, Ordering::AcqRel);
    }

    fn valid_until(&self) -> Instant {
        self.base + Duration::from_nanos(self.valid_until_ns.load(Ordering::Acquire))
    }
}

impl LeaseKeeper {
    /// Starts renewing `grant` (just acquired with `config`).
    pub fn start(params: ConnectParams, config: LeaseConfig, grant: Grant) -> LeaseKeeper {
        let base = Instant::now();
        let state = Arc::new(KeeperState {
            config,
            epoch: grant.epoch,
            base,
            valid_until_ns: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        state.set_valid_until(grant.valid_until);
        let worker = state.clone();
        let thread =
            std::thread::Builder::new().name("pgtier-lease".into()).spawn(move || renew_loop(&params, &worker)).ok();
        LeaseKeeper { state, thread }
    }

    pub fn epoch(&self) -> i64 {
        self.state.epoch
    }

    /// May this process still write? False past the deadline of its last
    /// successful renewal, or once another member took the lease.
    pub fn is_valid(&self) -> bool {
        !self.state.lost.load(Ordering::Acquire) && Instant::now() < self.state.valid_until()
    }

    /// The deadline of the last successful renewal.
    pub fn valid_until(&self) -> Instant {
        self.state.valid_until()
    }

    /// Another member holds the lease now.
    pub fn lost(&self) -> bool {
        self.state.lost.load(Ordering::Acquire)
    }

    /// Stops renewing and gives the lease up at once (a switchover).
    pub fn release(mut self, params: &ConnectParams) -> Result<bool, CacheError> {
        self.stop_thread();
        let mut client = connect_backend(params)?;
        release(&mut client, &self.state.config, self.state.epoch)
    }

    fn stop_thread(&mut self) {
        self.state.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

fn renew_loop(params: &ConnectParams, state: &KeeperState) {
    let every = state.config.duration / 3;
    let mut client: Option<Client> = None;
    while !state.stop.load(Ordering::Acquire) {
        if client.is_none() {
            client = connect_backend(params).ok();
        }
        if let Some(c) = client.as_mut() {
            match renew(c, &state.config, state.epoch) {
                Ok(Some(grant)) => state.set_valid_until(grant.valid_until),
                Ok(None) => {
                    state.lost.store(true, Ordering::Release);
                    tracing::error!(node = %state.config.node, epoch = state.epoch, "the pair's lease was taken by another member: this one stops writing");
                    return;
                }
                Err(error) => {
                    tracing::warn!(node = %state.config.node, %error, "cannot renew the pair's lease; writes stop at its deadline unless a renewal succeeds");
                    client = None;
                }
            }
        }
        std::thread::park_timeout(every);
    }
}
