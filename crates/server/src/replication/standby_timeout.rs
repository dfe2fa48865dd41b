//! `[replication] standby_timeout_ms`: an active whose standby is gone goes
//! on without it, and takes it back once it caught up.
//!
//! While a standby is connected, an active's write-through sends PostgreSQL
//! only what the standby acknowledged (`awt_limit`) and, in sync mode, a
//! commit waits for it: so a standby gone for good would stop write-through
//! and (sync) every commit. After the timeout the active **drops** it:
//!
//! 1. with a lease, it first records in PostgreSQL that its standby may not
//!    take the lease over (`pgtier.leases.standby_ok`): from then on the
//!    standby may lack commits this active acknowledged or sent PostgreSQL,
//!    and a promotion would lose them or make write-through skip (its
//!    progress rows would point past the promoted log). If PostgreSQL
//!    cannot be reached, nothing changes until it can;
//! 2. then write-through runs unlimited, sync commits stop waiting, and
//!    the WAL is no longer kept for the standby (its consumer is dropped:
//!    back after a checkpoint removed what it needs, it must be re-seeded).
//!
//! When a standby connects again (the same directory, still continuing
//! this log), the connection already limits write-through to where it
//! stands (stream.rs). The active then waits for it to acknowledge the
//! durable end as read after that (every transaction write-through can
//! still deliver was read before the limit came down, or passed it:
//! crates/engine stream.rs); then sync commits wait for it again, and once
//! it acknowledged the durable end as read after that too (every commit
//! acknowledged without it), it is allowed to take the lease again.
//!
//! Without a lease there is nothing to record: a dropped standby promoted by
//! hand finds PostgreSQL's progress rows past its log, and its
//! write-through refuses to start (crates/cache awt), which is loud, not
//! lossless.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Replication;

/// How the active stands with its standby.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StandbyLink {
    /// Connected (or not yet missed for long): write-through and sync
    /// commits wait for it.
    Following,
    /// Disconnected since then; dropped once the timeout passes.
    Gone { since: Instant },
    /// Gone past the timeout: the active goes on without it.
    Dropped,
    /// Back and catching up to `until` (a durable end of the active);
    /// `confirming`: sync commits wait for it again, and it is allowed to
    /// take over once it reached `until`.
    Rejoining { until: u64, confirming: bool },
}

impl StandbyLink {
    pub(crate) fn name(self) -> &'static str {
        match self {
            StandbyLink::Following => "following",
            StandbyLink::Gone { .. } => "gone",
            StandbyLink::Dropped => "dropped",
            StandbyLink::Rejoining { .. } => "rejoining",
        }
    }

    /// Commits and write-through go on without the standby.
    pub(crate) fn without_standby(self) -> bool {
        matches!(self, StandbyLink::Dropped | StandbyLink::Rejoining { confirming: false, .. })
    }
}

const WATCH_EVERY: Duration = Duration::from_millis(50);

impl Replication {
    /// The active (or a promoted standby serving one): watch the standby
    /// link when `standby_timeout_ms` is set.
    pub(super) fn spawn_standby_watch(self: &Arc<Self>) -> std::io::Result<()> {
        let Some(timeout) = self.settings.standby_timeout else { return Ok(()) };
        let me = Arc::clone(self);
        let handle = std::thread::Builder::new().name("pgtier-standby-watch".into()).spawn(move || {
            let mut told_unreachable = false;
            while !me.shutdown.load(Ordering::Acquire) {
                if me.serving.load(Ordering::Acquire) && !me.is_standby() {
                    me.watch_standby_once(timeout, &mut told_unreachable);
                }
                std::thread::sleep(WATCH_EVERY);
            }
        })?;
        self.watchers.lock().push(handle);
        Ok(())
    }

    fn watch_standby_once(&self, timeout: Duration, told_unreachable: &mut bool) {
        let connected = self.connected.load(Ordering::Acquire);
        let acked = self.acked.load(Ordering::Acquire);
        let link = *self.standby_link.lock();
        let next = match link {
            StandbyLink::Following if !connected => StandbyLink::Gone { since: Instant::now() },
            StandbyLink::Gone { .. } if connected => StandbyLink::Following,
            StandbyLink::Gone { since } if since.elapsed() >= timeout => {
                // First the lease, then the limits: never a moment where the
                // active goes on without a standby that could still take over.
                match self.allow_standby_takeover(false) {
                    Ok(()) => {
                        *told_unreachable = false;
                        self.awt_limit.store(u64::MAX, Ordering::Release);
                        // Nor is its WAL kept for it any more: a standby back
                        // after a checkpoint removed what it needs is told to
                        // re-seed (stream.rs).
                        let registered = self.db.consumers().iter().any(|c| c.name == super::stream::STANDBY_CONSUMER);
                        if registered && let Err(e) = self.db.unregister_consumer(super::stream::STANDBY_CONSUMER) {
                            tracing::warn!(error = %e, "replication: cannot release the WAL kept for the standby");
                        }
                        tracing::error!(
                            timeout_ms = timeout.as_millis() as u64,
                            "replication: the standby has been gone past standby_timeout_ms; going on without it (write-through resumes{}, its WAL is no longer kept); it may not take over until it reconnects and catches up",
                            if self.settings.sync { ", sync commits stop waiting for it" } else { "" }
                        );
                        StandbyLink::Dropped
                    }
                    Err(e) => {
                        if !*told_unreachable {
                            *told_unreachable = true;
                            tracing::warn!(error = %e, "replication: cannot record in PostgreSQL that the standby is dropped; still waiting for it");
                        }
                        link
                    }
                }
            }
            StandbyLink::Dropped if connected => {
                // Write-through limited to what the standby has (the
                // connection did so too, unless a lapse since lifted it),
                // then the end it must reach read after that.
                self.awt_limit.fetch_min(self.acked.load(Ordering::Acquire), Ordering::AcqRel);
                StandbyLink::Rejoining { until: self.db.wal_durable_end().0, confirming: false }
            }
            StandbyLink::Rejoining { .. } if !connected => {
                self.awt_limit.store(u64::MAX, Ordering::Release);
                StandbyLink::Dropped
            }
            StandbyLink::Rejoining { until, confirming: false } if acked >= until => {
                // Sync commits wait for it from here; what was acknowledged
                // without it ends before the durable end read after this.
                self.set_standby_link(StandbyLink::Rejoining { until, confirming: true });
                StandbyLink::Rejoining { until: self.db.wal_durable_end().0, confirming: true }
            }
            StandbyLink::Rejoining { until, confirming: true } if acked >= until => {
                match self.allow_standby_takeover(true) {
                    Ok(()) => {
                        tracing::warn!(acked, "replication: the standby caught up again; it may take over again");
                        StandbyLink::Following
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "replication: cannot record in PostgreSQL that the standby caught up; retrying");
                        link
                    }
                }
            }
            other => other,
        };
        if next != link {
            self.set_standby_link(next);
        }
    }

    pub(super) fn set_standby_link(&self, link: StandbyLink) {
        *self.standby_link.lock() = link;
        let _waiters = self.ack_lock.lock();
        self.without_standby.store(link.without_standby(), Ordering::Release);
        // Sync commits waiting for a standby just dropped: the lease decides.
        self.ack_cv.notify_all();
    }

    /// Records in the lease whether the standby may take over (nothing to
    /// record without a lease). Not under the keeper's lock, which every
    /// commit takes.
    fn allow_standby_takeover(&self, ok: bool) -> Result<(), String> {
        let Some(failover) = self.failover.as_ref() else { return Ok(()) };
        let Some(epoch) = failover.keeper.lock().as_ref().map(pgtier_cache::lease::LeaseKeeper::epoch) else {
            return Err("this server does not hold the pair's lease".into());
        };
        let mut client = pgtier_backend::connect_backend(&failover.backend).map_err(|e| e.to_string())?;
        match pgtier_cache::lease::set_standby_ok(&mut client, &failover.config, epoch, ok) {
            Ok(true) => Ok(()),
            Ok(false) => Err("the pair's lease is no longer held at its epoch".into()),
            Err(e) => Err(e.to_string()),
        }
    }
}
