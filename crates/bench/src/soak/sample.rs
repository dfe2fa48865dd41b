//! The sampler (the calling thread): every `sample_every` the server's
//! /proc figures, the TATP workers' intervals, write-through's backlog and
//! the activity counts become one [`Sample`]; a progress line shows the
//! run. After the load: write-through's drain and VERIFY of the TATP group.

use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::driver::Phase;
use crate::progress::RunProgress;
use crate::stats::LatencyHistogram;
use crate::target::DbError;
use crate::targets::postgres::db_error;

use super::setup::{TATP_GROUP, connect};
use super::tatp_load::Interval;
use super::{Ctx, EndChecks, Sample, SoakControl, SoakError, SoakReport, lock, proc};

/// Readings per sample (fds and threads: the smallest) and their spacing.
const READINGS: u32 = 5;
const READING_GAP: Duration = Duration::from_millis(40);
/// The longest wait for a cycle or cancel under way before the readings.
const QUIET_WAIT: Duration = Duration::from_secs(10);
/// The longest wait for write-through to catch up after the load.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// (backlog bytes, lag ms, refused transactions) summed over write-through's rows.
fn propagation(client: &mut postgres::Client) -> Result<(i64, f64, i64), DbError> {
    let rows = client
        .query("SELECT backlog_bytes, lag_ms, errors FROM pgtier_cache_propagation", &[])
        .map_err(|e| db_error(&e))?;
    let mut out = (0i64, 0f64, 0i64);
    for row in rows {
        let backlog: i64 = row.try_get(0).map_err(|e| db_error(&e))?;
        let lag: f64 = row.try_get(1).map_err(|e| db_error(&e))?;
        let errors: i64 = row.try_get(2).map_err(|e| db_error(&e))?;
        out = (out.0 + backlog, out.1.max(lag), out.2 + errors);
    }
    Ok(out)
}

/// Samples until the duration is over, the server is gone or the caller
/// interrupts; the report's samples, TATP totals and flags are filled here.
pub(crate) fn run(
    ctx: &Ctx<'_>,
    slots: &[Mutex<Interval>],
    control: &SoakControl<'_>,
    report: &mut SoakReport,
) -> Result<(), SoakError> {
    let o = ctx.o;
    let mut progress = control.progress.then(|| RunProgress::new(o.duration, "soak"));
    let mut watcher: Option<postgres::Client> = None;
    let mut total = LatencyHistogram::new();
    let mut last_at = ctx.t0;
    let mut k = 1u32;
    loop {
        let due = ctx.t0 + o.sample_every * k;
        if due > ctx.t0 + o.duration + Duration::from_millis(1) {
            break;
        }
        // Wait in slices: the progress line moves and Ctrl-C is seen.
        while Instant::now() < due {
            if control.interrupt.load(Ordering::Relaxed) {
                report.interrupted = true;
                break;
            }
            if let Some(p) = progress.as_mut() {
                let elapsed = ctx.t0.elapsed();
                let phase = if elapsed.as_secs_f64() < o.warmup_s() { Phase::RampUp } else { Phase::Measure };
                p.tick(phase, elapsed, ctx.finished.load(Ordering::Relaxed));
            }
            std::thread::sleep((due - Instant::now().min(due)).min(Duration::from_millis(200)));
        }
        if report.interrupted {
            break;
        }
        let (reading, quiet) = ctx.quiet(QUIET_WAIT, || proc::settled(ctx.server.pid, READINGS, READING_GAP));
        let reading = match reading {
            Ok(r) => r,
            Err(why) => {
                report.server_died = Some(why);
                break;
            }
        };
        let mut interval = Interval::default();
        for slot in slots {
            let taken = std::mem::take(&mut *lock(slot));
            interval.merge(&taken);
        }
        let now = Instant::now();
        let seconds = now.duration_since(last_at).as_secs_f64().max(1e-9);
        last_at = now;
        let t_s = ctx.at_s();
        if t_s >= o.warmup_s() {
            total.merge(&interval.latency);
        }
        let awt = watch(ctx, &mut watcher);
        let has = !interval.latency.is_empty();
        let q = |p: f64| if has { interval.latency.quantile_us(p) } else { 0.0 };
        let sample = Sample {
            t_s,
            quiet,
            rss_bytes: reading.rss_bytes,
            fds: reading.fds,
            threads: reading.threads,
            txns: interval.executed,
            txn_per_s: interval.executed as f64 / seconds,
            acceptable_errors: interval.acceptable,
            p50_us: q(0.5),
            p99_us: q(0.99),
            max_us: if has { interval.latency.max_us() } else { 0.0 },
            unexpected_errors: ctx.errors.unexpected(),
            expected_errors: ctx.errors.expected(),
            activity: ctx.counts.snapshot(),
            awt_backlog_bytes: awt.map(|a| a.0),
            awt_lag_ms: awt.map(|a| a.1),
        };
        let line = sample_line(&sample);
        match progress.as_ref() {
            Some(p) => p.println(&line),
            None => eprintln!("{line}"),
        }
        report.samples.push(sample);
        k += 1;
    }
    if let Some(p) = progress {
        p.finish();
    }
    report.tatp_total = total.count();
    report.tatp_latency_us = (!total.is_empty()).then(|| total.summary());
    Ok(())
}

/// Write-through's row, on a session kept for it (opened again after an error).
fn watch(ctx: &Ctx<'_>, watcher: &mut Option<postgres::Client>) -> Option<(i64, f64, i64)> {
    let result = (|| {
        if watcher.is_none() {
            *watcher = Some(connect(&ctx.server.url)?);
        }
        match watcher.as_mut() {
            Some(client) => propagation(client),
            None => Err(DbError::new(None, "no session")),
        }
    })();
    match result {
        Ok(p) => Some(p),
        Err(e) => {
            ctx.errors.record("sampler", &e, false, ctx.at_s());
            *watcher = None;
            None
        }
    }
}

fn sample_line(s: &Sample) -> String {
    let a = &s.activity;
    format!(
        "soak {:>7.0} s  rss {:>7.1} MiB  fds {:>4}  threads {:>4}  {:>7.0} txn/s  p99 {:>8.2} ms  \
         errors {} unexpected / {} expected  cycles {}  churn {}  cancels {}{}",
        s.t_s,
        s.rss_bytes as f64 / (1024.0 * 1024.0),
        s.fds,
        s.threads,
        s.txn_per_s,
        s.p99_us / 1000.0,
        s.unexpected_errors,
        s.expected_errors,
        a.cycles,
        a.churn_clean + a.churn_wrong_password + a.churn_abrupt,
        a.cancels_confirmed,
        s.awt_backlog_bytes.map(|b| format!("  awt backlog {b} B")).unwrap_or_default(),
    ) + if s.quiet { "" } else { "  (read while a cycle or cancel ran)" }
}

/// After the load: wait for write-through to catch up, then VERIFY the
/// TATP group against PostgreSQL (XX001 when they differ).
pub(crate) fn end_checks(ctx: &Ctx<'_>, interrupt: &std::sync::atomic::AtomicBool) -> EndChecks {
    let mut end = EndChecks::default();
    let started = Instant::now();
    let mut client = match connect(&ctx.server.url) {
        Ok(c) => c,
        Err(e) => {
            ctx.errors.record("drain", &e, false, ctx.at_s());
            return end;
        }
    };
    loop {
        match propagation(&mut client) {
            Ok((backlog, _, errors)) => {
                end.awt_errors = errors;
                if backlog == 0 {
                    end.drained = true;
                    break;
                }
            }
            Err(e) => {
                ctx.errors.record("drain", &e, false, ctx.at_s());
                return end;
            }
        }
        if started.elapsed() > DRAIN_TIMEOUT || interrupt.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    end.drain_s = started.elapsed().as_secs_f64();
    if !end.drained {
        return end;
    }
    match client.simple_query(&format!("VERIFY CACHE GROUP {TATP_GROUP}")) {
        Ok(_) => {
            end.verify_clean = Some(true);
            end.verify_message = "the cache equals PostgreSQL".to_owned();
        }
        Err(e) => {
            let e = db_error(&e);
            end.verify_clean = Some(false);
            end.verify_message = e.to_string().chars().take(500).collect();
            if !e.sqlstate_is("XX001") {
                ctx.errors.record("verify", &e, false, ctx.at_s());
            }
        }
    }
    if end.awt_errors > 0 {
        ctx.errors.anomaly(ctx.at_s(), format!("write-through: PostgreSQL refused {} transactions", end.awt_errors));
    }
    end
}
