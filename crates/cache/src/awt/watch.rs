//! The write-through watchdog: one thread per propagation session.
//!
//! - Every quarter second it looks for a lane (or the control connection)
//!   that has had work for `stall_timeout` without applying any. Such a lane
//!   is reported — counted, its state `stalled`, a log line with what
//!   PostgreSQL says its session is doing (waiting on a lock held by whom,
//!   gone, unreachable) — its statement is cancelled, and the session ends
//!   so it reconnects. Propagation never stalls without a word.
//! - Every `definition_check_interval` it compares the AWT groups' tables
//!   with PostgreSQL's (`drift::verify_group`): a group that changed must be
//!   held, a held group whose tables are back may go again; either way the
//!   session restarts to do so. (Transactions applied meanwhile are safe: each
//!   checks its tables' definitions itself.)

use std::collections::BTreeMap;
use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgtier_backend::{ConnectParams, connect_backend};
use postgres::{Client, NoTls};

use super::lanes::{LaneStatus, Lanes};
use super::{AwtConfig, AwtHost, AwtStatus, awt_groups, drifted_groups};
use crate::error::CacheError;
use crate::tuning::LiveTuning;

/// What the watchdog looks at.
pub(crate) struct WatchContext<'a> {
    pub cache: &'a Weak<dyn AwtHost>,
    pub lanes: &'a Lanes,
    pub params: &'a ConnectParams,
    pub config: &'a AwtConfig,
    /// `awt_stall_timeout`, read at each look (a reload changes it).
    pub tuning: &'a LiveTuning,
    pub status: &'a AwtStatus,
    /// The groups held at the session's start for their definitions.
    pub held: &'a BTreeMap<String, String>,
}

const LOOK_EVERY: Duration = Duration::from_millis(250);

pub(crate) fn watch(ctx: &WatchContext<'_>) {
    let mut client: Option<Client> = None;
    let mut checked = Instant::now();
    while !ctx.lanes.stopping() {
        std::thread::sleep(LOOK_EVERY);
        if stalled(ctx) {
            return;
        }
        if checked.elapsed() >= ctx.config.definition_check_interval {
            checked = Instant::now();
            match definitions_moved(ctx, &mut client) {
                Ok(Some(reason)) => return ctx.lanes.fail(CacheError::Restart { reason }),
                Ok(None) => {}
                // PostgreSQL unreachable: the lanes notice it themselves.
                Err(_) => client = None,
            }
        }
    }
}

/// Whether a lane had work and no progress for `stall_timeout`: then it is
/// reported, the session fails with why, and the lane's statement is cancelled.
fn stalled(ctx: &WatchContext<'_>) -> bool {
    let now_us = pgtier_engine::wall_clock_us();
    let limit_us = u64::try_from(ctx.tuning.get().awt_stall_timeout.as_micros()).unwrap_or(u64::MAX);
    let statuses = ctx.lanes.statuses();
    let Some(lane) = statuses.iter().find(|lane| {
        let since = lane.waiting_since_us.load(Ordering::Relaxed);
        since != 0 && now_us.saturating_sub(since) > limit_us
    }) else {
        return false;
    };
    let seconds = now_us.saturating_sub(lane.waiting_since_us.load(Ordering::Relaxed)) / 1_000_000;
    let name = if lane.lane == ctx.lanes.count() {
        "the control connection (transactions spanning lanes)".to_owned()
    } else {
        format!("lane {}", lane.lane)
    };
    let (cause, running) = diagnose(ctx.params, lane);
    let waiting = lane.queued_txns.load(Ordering::Relaxed).max(1);
    let message = format!(
        "write-through {name} has had {waiting} transactions waiting {seconds} s with none applied: {cause}{running}; cancelling and reconnecting",
    );
    // The log line leaves out the statement PostgreSQL is running: it holds row values as literals.
    tracing::warn!(
        lane = lane.lane,
        "write-through {name} has had {waiting} transactions waiting {seconds} s with none applied: {cause}; cancelling and reconnecting"
    );
    *lane.state.lock() = "stalled";
    *lane.last_error.lock() = Some(message.clone());
    ctx.status.stalls.fetch_add(1, Ordering::Relaxed);
    // The session's error is this report, not the cancel's echo.
    ctx.lanes.fail(CacheError::Stalled { message });
    let token = if lane.lane == ctx.lanes.count() {
        ctx.lanes.control_cancel.lock().clone()
    } else {
        ctx.lanes.lanes[lane.lane].cancel.lock().clone()
    };
    if let Some(token) = token {
        // Best effort: a lane blocked in PostgreSQL gets its error and ends.
        let _ = token.cancel_query(NoTls);
    }
    true
}

/// What PostgreSQL says the lane's session is doing, and the start of the
/// statement it runs (", running: ...", empty when unknown).
fn diagnose(params: &ConnectParams, lane: &LaneStatus) -> (String, String) {
    let pid = lane.backend_pid.load(Ordering::Relaxed);
    if pid == 0 {
        return ("it has not connected to PostgreSQL".into(), String::new());
    }
    let mut client = match connect_backend(params) {
        Ok(client) => client,
        Err(error) => return (format!("PostgreSQL cannot be asked why ({error})"), String::new()),
    };
    let row = client.query_opt(
        "SELECT coalesce(state, ''), coalesce(wait_event_type || '/' || wait_event, 'no wait event'), pg_blocking_pids(pid)::text,
                left(coalesce(query, ''), 120), round(extract(epoch FROM now() - state_change))::bigint
           FROM pg_stat_activity WHERE pid = $1",
        &[&pid],
    );
    match row {
        Ok(Some(row)) => {
            let (state, wait, blockers, query, secs): (String, String, String, String, i64) =
                (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
            let blocked =
                if blockers == "{}" { String::new() } else { format!(", blocked by PostgreSQL pid(s) {blockers}") };
            (
                format!("its PostgreSQL session (pid {pid}) is {state} for {secs} s, waiting on {wait}{blocked}"),
                format!(", running: {query}"),
            )
        }
        Ok(None) => (format!("its PostgreSQL session (pid {pid}) is gone"), String::new()),
        Err(error) => (format!("PostgreSQL cannot be asked why ({error})"), String::new()),
    }
}

/// Some(why) when a group must be held or may go again.
fn definitions_moved(ctx: &WatchContext<'_>, client: &mut Option<Client>) -> Result<Option<String>, CacheError> {
    let Some(cache) = ctx.cache.upgrade() else { return Ok(None) };
    let groups = awt_groups(&*cache);
    drop(cache);
    let client = match client {
        Some(client) => client,
        None => client.insert(connect_backend(ctx.params)?),
    };
    let drifted = drifted_groups(client, &groups)?;
    if let Some((group, reason)) = drifted.iter().find(|(group, _)| !ctx.held.contains_key(*group)) {
        return Ok(Some(format!("cache group \"{group}\": {reason}")));
    }
    if let Some(group) = ctx.held.keys().find(|group| !drifted.contains_key(*group)) {
        if groups.iter().any(|g| &g.def.name == group) {
            tracing::info!(
                group = group.as_str(),
                "write-through of cache group \"{group}\" resumes: its tables are what it was defined from again"
            );
        }
        return Ok(Some(format!("cache group \"{group}\" is no longer held")));
    }
    Ok(None)
}
