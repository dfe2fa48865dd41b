//! The activities beside TATP, one thread each: cache-group cycles,
//! connection churn, cancels. Each counts what it did in [`Counters`] and
//! what went wrong in the run's error log: SQLSTATEs as errors (expected
//! only for 28P01 of a wrong password and 57014 of a cancel), checks that
//! fail without an error as anomalies.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::target::{DbError, Session};
use crate::targets::pgwire::WireSession;
use crate::targets::postgres::db_error;

use super::setup::{CYCLE_GROUP, ENTRIES_PER_ACCOUNT, connect};
use super::{ActivityCounts, Ctx, CycleOpFigures, lock};

/// SQLSTATE of a refused password.
pub const WRONG_PASSWORD: &str = "28P01";
/// SQLSTATE of a cancelled statement.
pub const CANCELED: &str = "57014";
/// How long after the statement starts the CancelRequest goes out.
const CANCEL_AFTER: Duration = Duration::from_millis(300);
/// Of every ten churn sessions, which is a wrong password and which is abandoned.
const WRONG_PASSWORD_SLOT: u64 = 3;
const ABANDON_SLOT: u64 = 7;

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) cycles: AtomicU64,
    pub(crate) churn_clean: AtomicU64,
    pub(crate) churn_wrong_password: AtomicU64,
    pub(crate) churn_abrupt: AtomicU64,
    pub(crate) cancels_sent: AtomicU64,
    pub(crate) cancels_confirmed: AtomicU64,
    pub(crate) tatp_reconnects: AtomicU64,
    /// (op, seconds) of every cycle step; a few per cycle.
    ops: Mutex<Vec<(&'static str, f64)>>,
    /// CancelRequest sent to 57014 received, ms.
    cancel_ms: Mutex<Vec<f64>>,
}

impl Counters {
    pub(crate) fn add(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ActivityCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ActivityCounts {
            cycles: get(&self.cycles),
            churn_clean: get(&self.churn_clean),
            churn_wrong_password: get(&self.churn_wrong_password),
            churn_abrupt: get(&self.churn_abrupt),
            cancels_sent: get(&self.cancels_sent),
            cancels_confirmed: get(&self.cancels_confirmed),
            tatp_reconnects: get(&self.tatp_reconnects),
        }
    }

    pub(crate) fn cycle_ops(&self) -> Vec<CycleOpFigures> {
        let ops = lock(&self.ops);
        let mut out: Vec<CycleOpFigures> = Vec::new();
        for (op, s) in ops.iter() {
            match out.iter_mut().find(|f| f.op == *op) {
                Some(f) => {
                    f.mean_s = (f.mean_s * f.count as f64 + s) / (f.count + 1) as f64;
                    f.count += 1;
                    f.max_s = f.max_s.max(*s);
                }
                None => out.push(CycleOpFigures { op: (*op).to_owned(), count: 1, mean_s: *s, max_s: *s }),
            }
        }
        out
    }

    /// Median and max of the cancel times, ms (0 without any).
    pub(crate) fn cancel_ms(&self) -> (f64, f64) {
        let mut ms = lock(&self.cancel_ms).clone();
        if ms.is_empty() {
            return (0.0, 0.0);
        }
        ms.sort_by(f64::total_cmp);
        (ms[ms.len() / 2], ms[ms.len() - 1])
    }
}

/// Why a cycle stopped: an error of a step, or a count that differs.
enum Failure {
    Db(DbError),
    Check(String),
}

impl From<DbError> for Failure {
    fn from(e: DbError) -> Failure {
        Failure::Db(e)
    }
}

/// `count(*)` and `sum(balance)` of the cycled root table, as text (the same
/// query on pgtier and on PostgreSQL).
fn accounts(client: &mut postgres::Client) -> Result<(String, String), DbError> {
    let rows = client
        .simple_query("SELECT count(*), coalesce(sum(balance), 0) FROM soak_account")
        .map_err(|e| db_error(&e))?;
    for m in rows {
        if let postgres::SimpleQueryMessage::Row(row) = m {
            return Ok((row.get(0).unwrap_or("").to_owned(), row.get(1).unwrap_or("").to_owned()));
        }
    }
    Err(DbError::new(None, "no row from count(*)"))
}

fn entries(client: &mut postgres::Client) -> Result<u64, DbError> {
    let row = client.query_one("SELECT count(*) FROM soak_entry", &[]).map_err(|e| db_error(&e))?;
    Ok(row.try_get::<_, i64>(0).map_err(|e| db_error(&e))?.max(0) as u64)
}

/// Every `cycle_every`: LOAD; PostgreSQL changes a seventh of the roots;
/// REFRESH (the cache must then equal PostgreSQL); UNLOAD of the upper
/// half; UNLOAD of the rest. The cycled group is READONLY without
/// autorefresh: only these statements move its rows.
pub(crate) fn cycles(ctx: &Ctx<'_>) {
    crate::cpu::name_current_thread("soak-cycles");
    let mut k = 0u64;
    let mut tier: Option<postgres::Client> = None;
    let mut pg: Option<postgres::Client> = None;
    while ctx.sleep(ctx.o.cycle_every) {
        k += 1;
        let result = (|| -> Result<(), Failure> {
            if tier.is_none() {
                tier = Some(connect(&ctx.server.url)?);
            }
            if pg.is_none() {
                pg = Some(connect(ctx.backend_url)?);
            }
            let (Some(t), Some(p)) = (tier.as_mut(), pg.as_mut()) else { return Ok(()) };
            ctx.busy(|| one_cycle(ctx, t, p, k))
        })();
        match result {
            Ok(()) => ctx.counts.add(&ctx.counts.cycles),
            Err(Failure::Db(e)) => {
                ctx.errors.record("cycle", &e, false, ctx.at_s());
                tier = None;
                pg = None;
            }
            Err(Failure::Check(what)) => ctx.errors.anomaly(ctx.at_s(), format!("cycle {k}: {what}")),
        }
    }
}

fn one_cycle(ctx: &Ctx<'_>, tier: &mut postgres::Client, pg: &mut postgres::Client, k: u64) -> Result<(), Failure> {
    let n = ctx.o.cycle_accounts;
    let half = n / 2;
    let timed = |op: &'static str, client: &mut postgres::Client, sql: &str| -> Result<u64, DbError> {
        let started = Instant::now();
        let rows = client.execute(sql, &[]).map_err(|e| db_error(&e))?;
        lock(&ctx.counts.ops).push((op, started.elapsed().as_secs_f64()));
        Ok(rows)
    };
    let loaded = timed("LOAD", tier, &format!("LOAD CACHE GROUP {CYCLE_GROUP}"))?;
    let (count, _) = accounts(tier)?;
    if loaded != n || count != n.to_string() || entries(tier)? != n * ENTRIES_PER_ACCOUNT {
        return Err(Failure::Check(format!("after LOAD: {loaded} loaded, {count} roots cached, expected {n}")));
    }
    pg.execute(&format!("UPDATE soak_account SET balance = balance + 1 WHERE a_id % 7 = {}", k % 7), &[])
        .map_err(|e| db_error(&e))?;
    timed("REFRESH", tier, &format!("REFRESH CACHE GROUP {CYCLE_GROUP}"))?;
    let (cached, expected) = (accounts(tier)?, accounts(pg)?);
    if cached != expected {
        return Err(Failure::Check(format!(
            "after REFRESH: cache has (count, sum) {cached:?}, PostgreSQL {expected:?}"
        )));
    }
    timed("UNLOAD half", tier, &format!("UNLOAD CACHE GROUP {CYCLE_GROUP} WHERE a_id > {half}"))?;
    let (count, _) = accounts(tier)?;
    if count != half.to_string() {
        return Err(Failure::Check(format!("after UNLOAD of a_id > {half}: {count} roots cached, expected {half}")));
    }
    timed("UNLOAD rest", tier, &format!("UNLOAD CACHE GROUP {CYCLE_GROUP}"))?;
    let (count, _) = accounts(tier)?;
    if count != "0" || entries(tier)? != 0 {
        return Err(Failure::Check(format!("after UNLOAD: {count} roots still cached")));
    }
    Ok(())
}

/// A session every `churn_pause`: most connect, run a few statements
/// (a block among them) and say Terminate; one in ten gives a wrong
/// password; one in ten opens a block, updates a subscriber (a row lock)
/// and closes its socket without Terminate, after which a new session
/// must update that row within 5 s (the lock released by the rollback).
pub(crate) fn churn(ctx: &Ctx<'_>) {
    crate::cpu::name_current_thread("soak-churn");
    let mut i = 0u64;
    while ctx.sleep(ctx.o.churn_pause) {
        i += 1;
        let s_id = 1 + splitmix(i ^ ctx.o.seed) % ctx.o.subscribers;
        let result = match i % 10 {
            WRONG_PASSWORD_SLOT => wrong_password(ctx),
            ABANDON_SLOT => abandon(ctx, s_id),
            _ => clean(ctx, s_id),
        };
        if let Err(e) = result {
            ctx.errors.record("churn", &e, false, ctx.at_s());
        }
    }
}

fn splitmix(x: u64) -> u64 {
    crate::tatp::random::splitmix64(x)
}

fn rows(session: &mut WireSession, sql: &str) -> Result<usize, DbError> {
    Ok(session.simple_query(sql)?.len())
}

fn clean(ctx: &Ctx<'_>, s_id: u64) -> Result<(), DbError> {
    let mut s = WireSession::connect(&ctx.server.url)?;
    rows(&mut s, "SELECT 1")?;
    let found = rows(&mut s, &format!("SELECT s_id, sub_nbr FROM subscriber WHERE s_id = {s_id}"))?;
    rows(&mut s, "BEGIN")?;
    rows(&mut s, &format!("SELECT count(*) FROM access_info WHERE s_id = {s_id}"))?;
    rows(&mut s, "COMMIT")?;
    drop(s);
    if found != 1 {
        ctx.errors.anomaly(ctx.at_s(), format!("churn: subscriber {s_id} answered {found} rows, not 1"));
    }
    ctx.counts.add(&ctx.counts.churn_clean);
    Ok(())
}

fn wrong_password(ctx: &Ctx<'_>) -> Result<(), DbError> {
    match WireSession::connect(&ctx.server.wrong_password_url) {
        Ok(_) => {
            ctx.errors.anomaly(ctx.at_s(), "churn: a wrong password was accepted".to_owned());
            Ok(())
        }
        Err(e) if e.sqlstate_is(WRONG_PASSWORD) => {
            ctx.errors.record("churn", &e, true, ctx.at_s());
            ctx.counts.add(&ctx.counts.churn_wrong_password);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

fn abandon(ctx: &Ctx<'_>, s_id: u64) -> Result<(), DbError> {
    let update = format!("UPDATE subscriber SET bit_1 = bit_1 WHERE s_id = {s_id}");
    let mut s = WireSession::connect(&ctx.server.url)?;
    rows(&mut s, "BEGIN")?;
    rows(&mut s, &update)?;
    s.abandon();
    // The abandoned block's row lock must go with it.
    let mut next = WireSession::connect(&ctx.server.url)?;
    rows(&mut next, "SET statement_timeout = '5s'")?;
    rows(&mut next, &update)?;
    drop(next);
    ctx.counts.add(&ctx.counts.churn_abrupt);
    Ok(())
}

/// Every `cancel_every`: a statement that would run for long (pg_sleep, or
/// a three-way cross join of the subscribers, in turn) and a CancelRequest
/// from another thread after [`CANCEL_AFTER`]; 57014 "due to user request"
/// is expected, then the same session must answer `SELECT 1`.
pub(crate) fn cancels(ctx: &Ctx<'_>) {
    crate::cpu::name_current_thread("soak-cancels");
    let mut k = 0u64;
    while ctx.sleep(ctx.o.cancel_every) {
        k += 1;
        if let Err(e) = ctx.busy(|| one_cancel(ctx, k)) {
            ctx.errors.record("cancel", &e, false, ctx.at_s());
        }
    }
}

fn one_cancel(ctx: &Ctx<'_>, k: u64) -> Result<(), DbError> {
    let mut client = connect(&ctx.server.url)?;
    // A bound in case the cancel is lost: the timeout's 57014 says
    // "statement timeout", which is told apart below.
    client.batch_execute("SET statement_timeout = '60s'").map_err(|e| db_error(&e))?;
    let statement = if k % 2 == 1 {
        "SELECT pg_sleep(30)"
    } else {
        "SELECT count(*) FROM subscriber a, subscriber b, subscriber c"
    };
    let token = client.cancel_token();
    let (answer, sent) = std::thread::scope(|scope| {
        let canceller = scope.spawn(|| {
            std::thread::sleep(CANCEL_AFTER);
            let sent = Instant::now();
            token.cancel_query(postgres::NoTls).map(|()| sent).map_err(|e| db_error(&e))
        });
        let answer = client.simple_query(statement).map(|_| ()).map_err(|e| db_error(&e));
        let answered = Instant::now();
        let sent = canceller.join().unwrap_or_else(|_| Err(DbError::new(None, "the canceller panicked")));
        (answer, sent.map(|at| answered.saturating_duration_since(at)))
    });
    let took = sent?;
    ctx.counts.add(&ctx.counts.cancels_sent);
    match answer {
        Ok(()) => ctx.errors.anomaly(ctx.at_s(), format!("cancel: `{statement}` finished although cancelled")),
        Err(e) if e.sqlstate_is(CANCELED) && e.message.contains("user request") => {
            ctx.errors.record("cancel", &e, true, ctx.at_s());
            ctx.counts.add(&ctx.counts.cancels_confirmed);
            lock(&ctx.counts.cancel_ms).push(took.as_secs_f64() * 1000.0);
        }
        Err(e) => return Err(e),
    }
    client.simple_query("SELECT 1").map_err(|e| db_error(&e))?;
    Ok(())
}
