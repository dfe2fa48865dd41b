//! One measured run of the flash demo: PostgreSQL alone, or a pgtier server
//! over a fresh engine directory (group created, every instance loaded,
//! aged down to the DRAM budget, warm-up, measure window, then the check).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgtier_cache::{Aging, Cache, Cancel, FlashPolicy, LoadOptions, TierCommand, TierInfo};
use rand::SeedableRng;

use super::{CheckFigures, CurvePoint, Demo, FlashError, FlashServer, GROUP, ServerSpec, SideFigures, TxnFigures};
use crate::demo::Sampled;
use crate::device::{DiskFigures, device_of, disk_counters};
use crate::driver::{LiveCounters, LoadSpec, RepetitionTally, run_repetition};
use crate::target::{DbError, Target};
use crate::targets::cached::{
    cache_call, caught_up_rate, drop_node_origins, load_when_ready, tatp_group, write_through_drained,
};
use crate::targets::embedded::EmbeddedTarget;
use crate::targets::postgres::{PgTarget, db_error};
use crate::tatp::TatpMixWorkload;
use crate::tatp::random::SubscriberKeys;
use crate::tatp::schema::TABLES;
use crate::tatp::transactions::Mix;
use crate::warmup::{SteadyShare, share_of};

/// The smallest flash tier the demo makes (four regions of 1 MB).
const FLASH_BYTES_MIN: u64 = 4 << 20;
/// Longest wait for write-through to catch up after a run.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(180);
/// Rounds of aging at most to bring a full load down to the budget.
const AGING_ROUNDS_MAX: u32 = 2000;
/// Warm-up windows at most before a measure (`--warm` seconds each).
pub(super) const WARM_WINDOWS_MAX: usize = 12;

/// How the clients reach pgtier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// Over the PostgreSQL protocol: the same client as PostgreSQL alone's.
    Wire,
    /// The engine in this process (study 000's application ran TimesTen so).
    Direct,
}

impl Access {
    fn name(self) -> &'static str {
        match self {
            Access::Wire => "wire",
            Access::Direct => "direct",
        }
    }
}

/// Which transactions the clients run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Load {
    /// TATP's standard mix.
    Standard,
    /// TATP's two updates by key (study 002's random updates).
    Updates,
}

impl Load {
    fn mix(self) -> Mix {
        match self {
            Load::Standard => Mix::Standard,
            Load::Updates => Mix::Updates,
        }
    }
}

/// PostgreSQL's size of the TATP tables (heap, indexes, TOAST).
pub(super) fn postgres_data_bytes(url: &str) -> Result<u64, DbError> {
    let mut client =
        pgtier_backend::connect::connect(url).map_err(|e| DbError::new(Some(e.sqlstate()), e.to_string()))?;
    let list = TABLES.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8 FROM pg_class c WHERE relname IN ({list}) AND relkind = 'r'"
    );
    let bytes: i64 = client.query_one(&sql, &[]).map_err(|e| db_error(&e))?.get(0);
    Ok(bytes.max(0) as u64)
}

/// The flash a cache of `cache_bytes` has beside `dram_bytes` of DRAM, at
/// least [`FLASH_BYTES_MIN`], in whole MB.
pub(super) fn flash_bytes(cache_bytes: u64, dram_bytes: u64) -> u64 {
    (cache_bytes.saturating_sub(dram_bytes).max(FLASH_BYTES_MIN) >> 20) << 20
}

/// Regions small enough that even the smallest tier has a few dozen (FIFO
/// reclaims a region at a time), at most the tier's default 16 MB.
pub(super) fn region_size(flash_bytes: u64) -> u64 {
    let mut region = 16u64 << 20;
    while region > 1 << 20 && flash_bytes / region < 32 {
        region >>= 1;
    }
    region
}

/// The group's row of the tier's figures (counters since the server started).
fn group_tier(cache: &Cache) -> (TierInfo, TierInfo) {
    let rows = cache.tier_stats();
    let store = rows.first().cloned().unwrap_or_default();
    let group = rows.iter().find(|r| r.group.as_deref() == Some(GROUP)).cloned().unwrap_or_default();
    (store, group)
}

fn subscriber_keys(demo: &Demo<'_, '_>) -> SubscriberKeys {
    SubscriberKeys::new(1, demo.o.subscribers, false)
}

/// One repetition of `load` on `target`: `measure` long after `ramp_up`,
/// stopped early on Ctrl-C; `tick` sees the elapsed time and finished count.
fn repetition(
    demo: &Demo<'_, '_>,
    target: &dyn Target,
    load: Load,
    ramp_up: Duration,
    measure: Duration,
    seed: u64,
    tick: &mut dyn FnMut(Duration, u64),
) -> Result<RepetitionTally, FlashError> {
    let workload = TatpMixWorkload { keys: subscriber_keys(demo), mix: load.mix() };
    let spec =
        LoadSpec { threads: demo.o.threads, rate_per_s: None, ramp_up, measure, ramp_down: Duration::ZERO, seed };
    let live = LiveCounters::default();
    let interrupt = demo.control.interrupt;
    // PostgreSQL's figures over the measure window come from the kit's one
    // sampler (WAL position, commits, CPU), on every side and in every
    // repetition alike, so its session is there when PostgreSQL's own
    // memory is measured too.
    let target = Sampled { inner: target, sampler_url: demo.control.backend_url.clone() };
    let tally = run_repetition(&target, &workload, &spec, &live, &mut |_, elapsed| {
        if interrupt.load(Ordering::Relaxed) {
            live.stop.store(true, Ordering::Relaxed);
        }
        tick(elapsed, live.finished.load(Ordering::Relaxed));
    })
    .map_err(|e| demo.fail()(DbError::new(None, e.to_string())))?;
    demo.interrupted()?;
    Ok(tally)
}

/// TATP's standard mix on `target` for `time`, unmeasured; `tick` runs
/// about every 200 ms while the sessions are open.
pub(super) fn load_for(
    demo: &Demo<'_, '_>,
    target: &dyn Target,
    time: Duration,
    tick: &mut dyn FnMut(),
) -> Result<(), FlashError> {
    repetition(demo, target, Load::Standard, Duration::ZERO, time, demo.o.seed ^ 0x5349_5a45, &mut |_, _| tick())?;
    Ok(())
}

/// Warm-up, then the measure window, on `target`; pgtier's counters over
/// the window when `cache` is given.
pub(super) fn measure(
    demo: &Demo<'_, '_>,
    target: &dyn Target,
    cache: Option<&Cache>,
    load: Load,
) -> Result<SideFigures, FlashError> {
    let o = demo.o;
    let detail = |what: &str, elapsed: Duration, total: Duration, finished: u64, last: &mut (Duration, u64)| {
        let dt = elapsed.saturating_sub(last.0).as_secs_f64();
        if dt >= 1.0 {
            let rate = finished.saturating_sub(last.1) as f64 / dt;
            demo.monitor.detail(format!(
                "{what} {:.0}/{:.0} s, {rate:.0} txn/s",
                elapsed.as_secs_f64(),
                total.as_secs_f64()
            ));
            *last = (elapsed, finished);
        }
    };
    let device = device_of(&o.work_dir).ok();
    // Misses of memory so far, each kind a series of its own: pgtier's
    // instances answered from flash and those loaded from PostgreSQL (the
    // first settles as DRAM warms, the second, slower, as flash does), or
    // PostgreSQL alone's reads from its device.
    let misses = || -> Option<Vec<u64>> {
        match cache {
            Some(cache) => {
                let (_, group) = group_tier(cache);
                Some(vec![group.flash_hits, group.backend_loads])
            }
            None => device.as_ref().and_then(|d| disk_counters(d).ok()).map(|c| vec![c.reads()]),
        }
    };
    let mut warm: Vec<SteadyShare> = Vec::new();
    let mut windows: Vec<Vec<f64>> = Vec::new();
    while !o.warm.is_zero() && (windows.is_empty() || !warm.iter().all(SteadyShare::done)) {
        let label = match windows.last() {
            Some(shares) => {
                format!("warm-up window {} (misses/txn before: {})", windows.len() + 1, shares_text(shares))
            }
            None => "warm-up window 1".to_owned(),
        };
        let before = misses();
        let mut last = (Duration::ZERO, 0);
        let seed = o.seed ^ 0x5741_524d ^ (windows.len() as u64) << 32;
        let tally = repetition(demo, target, load, Duration::ZERO, o.warm, seed, &mut |e, f| {
            detail(&label, e, o.warm, f, &mut last);
        })?;
        let (Some(before), Some(after)) = (before, misses()) else {
            // Nothing to tell steadiness by: one window, as a fixed warm-up.
            break;
        };
        let transactions = tally.attempts_per_s() * o.warm.as_secs_f64();
        let shares: Vec<f64> =
            before.iter().zip(&after).map(|(b, a)| share_of(a.saturating_sub(*b), transactions)).collect();
        warm.resize_with(shares.len(), || SteadyShare::new(WARM_WINDOWS_MAX));
        for (series, share) in warm.iter_mut().zip(&shares) {
            series.push(*share);
        }
        windows.push(shares);
    }
    // The measure starts with write-through caught up (the warm-up's
    // backlog is not its own).
    if let Some(cache) = cache {
        demo.monitor.detail("write-through catching up before the measure".into());
        drain(demo, cache);
    }
    let tier_before = cache.map(group_tier);
    let device_before = device.as_ref().and_then(|d| disk_counters(d).ok());
    let began = Instant::now();
    let ramp_up = Duration::from_secs(1);
    let mut last = (Duration::ZERO, 0);
    let tally = repetition(demo, target, load, ramp_up, o.measure, o.seed, &mut |e, f| {
        detail("measure", e, ramp_up + o.measure, f, &mut last);
    })?;
    let elapsed = began.elapsed();
    let mut side = figures(&tally, &crate::tatp::transactions::TxnType::NAMES);
    side.warm_up_windows = windows;
    side.warm_up_steady = !warm.is_empty() && warm.iter().all(SteadyShare::steady);
    if let (Some(device), Some(before)) = (&device, device_before)
        && let Ok(after) = disk_counters(device)
    {
        side.device = Some(DiskFigures::between(&before, &after, elapsed.as_secs_f64()));
        side.device_name = Some(device.name.clone());
    }
    side.postgres_wal_mb_s = tally.backend.as_ref().map(|b| b.wal_bytes_per_s / 1e6);
    if let Some(cache) = cache {
        side.end_memory_bytes = Some(group_memory(cache));
        side.end_backlog_bytes = Some(cache.awt_backlog_bytes());
        demo.monitor.detail("write-through catching up after the measure".into());
        let drained = drain(demo, cache);
        side.drain_s = drained.map(|d| d.as_secs_f64());
        side.caught_up_txn_per_s = Some(drained.map_or(0.0, |d| caught_up_rate(side.txn_per_s, o.measure, d)));
    }
    if let (Some(cache), Some((_, before))) = (cache, tier_before) {
        let (store, after) = group_tier(cache);
        side.memory_instances = Some(after.memory_instances);
        side.flash_records = store.flash_records;
        side.flash_answers = Some(after.flash_hits.saturating_sub(before.flash_hits));
        side.promotions = Some(after.promotions.saturating_sub(before.promotions));
        side.backend_loads = Some(after.backend_loads.saturating_sub(before.backend_loads));
        side.unique_asked = Some(after.unique_asked.saturating_sub(before.unique_asked));
        side.unique_on_flash = Some(after.unique_on_flash.saturating_sub(before.unique_on_flash));
        side.demotions = Some(after.demotions.saturating_sub(before.demotions));
        side.dirty_demotions = Some(after.dirty_demotions.saturating_sub(before.dirty_demotions));
        side.write_amplification = store.write_amplification;
    }
    Ok(side)
}

/// `0.412` or `0.305 + 0.071`: one warm-up window's shares.
pub(super) fn shares_text(shares: &[f64]) -> String {
    shares.iter().map(|share| format!("{share:.3}")).collect::<Vec<_>>().join(" + ")
}

/// Throughput and latency of a measure window, overall and per transaction.
fn figures(tally: &RepetitionTally, names: &[&str]) -> SideFigures {
    let mut all = crate::stats::LatencyHistogram::new();
    let mut txns = Vec::new();
    for (name, txn) in names.iter().zip(&tally.txns) {
        all.merge(&txn.latency);
        if txn.executed > 0 {
            let summary = txn.latency.summary();
            txns.push(TxnFigures {
                name: (*name).to_owned(),
                executed: txn.executed,
                avg_us: summary.avg,
                p90_us: summary.p90,
                p99_us: summary.p99,
            });
        }
    }
    let summary = all.summary();
    SideFigures {
        txn_per_s: tally.attempts_per_s(),
        avg_us: summary.avg,
        p90_us: summary.p90,
        p99_us: summary.p99,
        acceptable_errors: tally.txns.iter().map(|t| t.acceptable_errors).sum(),
        txns,
        ..SideFigures::default()
    }
}

/// A pgtier server over a fresh directory with the group loaded and aged
/// down to the budget; the caller stops it with [`finish`].
fn start_loaded(
    demo: &mut Demo<'_, '_>,
    spec: &ServerSpec,
    tier_enabled: bool,
) -> Result<(Box<dyn FlashServer>, u64), FlashError> {
    if spec.dir.exists() {
        std::fs::remove_dir_all(&spec.dir)
            .map_err(|e| demo.fail()(DbError::new(None, format!("emptying {}: {e}", spec.dir.display()))))?;
    }
    let server = (demo.control.start_server)(spec)
        .map_err(|e| demo.fail()(DbError::new(Some("08006"), format!("starting the pgtier server: {e}"))))?;
    let cache = server.cache();
    let prepared = (|| {
        if spec.tier.is_some() {
            // A tier that did not open would measure memory + PostgreSQL
            // under the tier's name.
            let state = group_tier(&cache).0.state;
            if state != "enabled" {
                return Err(DbError::new(Some("58030"), format!("the flash tier did not open: {state}")));
            }
        }
        if spec.tier.is_some() && !tier_enabled {
            cache_call(cache.tier_command(TierCommand::Disable))?;
        }
        let mut group = tatp_group(GROUP, true, Aging::Lru);
        if spec.tier.is_none() {
            group.flash = FlashPolicy::None;
        }
        cache_call(cache.create_group(&group))?;
        demo.monitor.detail(format!("LOAD CACHE GROUP {GROUP} ({} subscribers)", demo.o.subscribers));
        let options = LoadOptions {
            parallel: 2,
            predicate: Some(format!("s_id <= {}", demo.o.subscribers)),
            ..Default::default()
        };
        // Ctrl-C stops a LOAD between instances, not after all of them.
        let interrupt = demo.control.interrupt;
        let (loaded, interrupted) =
            options.cancel.when(|| interrupt.load(Ordering::Relaxed), || load_when_ready(&cache, GROUP, &options));
        if interrupted {
            return Err(DbError::new(Some("57014"), "LOAD interrupted"));
        }
        loaded?;
        let loaded = group_memory(&cache);
        // Aging brings the full load down to the budget (to flash, or
        // away), so the warm-up starts near the steady state.
        for round in 0..AGING_ROUNDS_MAX {
            if group_memory(&cache) <= spec.memory_budget || demo.control.interrupt.load(Ordering::Relaxed) {
                break;
            }
            if round % 20 == 0 {
                demo.monitor.detail(format!(
                    "aging down to the budget: {} of {} MB",
                    group_memory(&cache) >> 20,
                    spec.memory_budget >> 20
                ));
            }
            cache_call(cache.age_now())?;
        }
        Ok::<u64, DbError>(loaded)
    })();
    match prepared {
        Ok(loaded) => Ok((server, loaded)),
        Err(error) => {
            let _ = finish(demo, server, spec);
            demo.interrupted()?;
            Err(demo.fail()(error))
        }
    }
}

fn group_memory(cache: &Cache) -> u64 {
    cache.stats().iter().find(|s| s.group == GROUP).map_or(0, |s| s.memory_bytes)
}

/// Stops the server, drops its node's replication origins (PostgreSQL
/// keeps few) and its directory.
fn finish(demo: &Demo<'_, '_>, server: Box<dyn FlashServer>, spec: &ServerSpec) -> Result<(), FlashError> {
    server.stop().map_err(|e| demo.fail()(DbError::new(None, format!("stopping the pgtier server: {e}"))))?;
    drop_node_origins(&spec.backend_url, &spec.node).map_err(demo.fail())?;
    let _ = std::fs::remove_dir_all(&spec.dir);
    Ok(())
}

/// A pgtier run: loaded server, measure window, check, stop.
pub(super) fn cache_run(
    demo: &mut Demo<'_, '_>,
    spec: &ServerSpec,
    access: Access,
    load: Load,
) -> Result<SideFigures, FlashError> {
    let (server, loaded) = start_loaded(demo, spec, true)?;
    let cache = server.cache();
    if let Some(data) = demo.report.data.as_mut().filter(|d| d.instance_bytes.is_none()) {
        data.instance_bytes = Some(loaded / demo.o.subscribers.max(1));
    }
    let measured = (|| {
        let mut side = match access {
            Access::Wire => {
                let target = PgTarget::open(&server.url())
                    .map_err(|e| demo.fail()(DbError::new(Some(e.sqlstate()), e.to_string())))?;
                measure(demo, &target, Some(&cache), load)?
            }
            Access::Direct => {
                let target = EmbeddedTarget::from_database(server.database(), &spec.dir, spec.commit_mode);
                measure(demo, &target, Some(&cache), load)?
            }
        };
        side.access = access.name().into();
        side.loaded_bytes = Some(loaded);
        side.dram_budget_bytes = Some(spec.memory_budget);
        side.flash_bytes = spec.tier.map(|(bytes, _, _)| bytes);
        side.check = Some(check(demo, server.as_ref(), &cache)?);
        Ok(side)
    })();
    drop(cache);
    let finished = finish(demo, server, spec);
    let side = measured?;
    finished?;
    Ok(side)
}

/// Study 003's sizes on one loaded server, each pushed to the report as it
/// is measured: `sizes` (share of the data, flash bytes) from the largest
/// down, the tier resized online before each.
pub(super) fn size_runs(demo: &mut Demo<'_, '_>, spec: &ServerSpec, sizes: &[(f64, u64)]) -> Result<(), FlashError> {
    let (server, loaded) = start_loaded(demo, spec, true)?;
    let cache = server.cache();
    if let Some(data) = demo.report.data.as_mut() {
        data.instance_bytes = Some(loaded / demo.o.subscribers.max(1));
    }
    let result = (|| {
        let target =
            PgTarget::open(&server.url()).map_err(|e| demo.fail()(DbError::new(Some(e.sqlstate()), e.to_string())))?;
        let mut current = spec.tier.map_or(0, |(bytes, _, _)| bytes);
        for &(fraction, flash) in sizes {
            demo.interrupted()?;
            let label = super::size_label(fraction);
            if flash != current {
                demo.monitor.detail(format!("{label}: ALTER CACHE TIER RESIZE '{}MB'", flash >> 20));
                cache_call(cache.tier_command(TierCommand::Resize(flash))).map_err(demo.fail())?;
                current = flash;
            }
            demo.monitor.detail(format!("{label}: DRAM {} MB + flash {} MB", spec.memory_budget >> 20, flash >> 20));
            // Over the wire (the same client protocol as PostgreSQL alone's),
            // then in direct mode (the engine in the application's process,
            // pgtier's embedded deployment) on the same cache.
            let direct = EmbeddedTarget::from_database(server.database(), &spec.dir, spec.commit_mode);
            let mut measured = Vec::new();
            for (access, target) in [(Access::Wire, &target as &dyn Target), (Access::Direct, &direct as &dyn Target)] {
                let mut side = measure(demo, target, Some(&cache), Load::Standard)?;
                side.label = match access {
                    Access::Wire => label.clone(),
                    Access::Direct => super::size_label_direct(fraction),
                };
                side.study = "003".into();
                side.access = access.name().into();
                side.cache_fraction = Some(fraction);
                side.loaded_bytes = Some(loaded);
                side.dram_budget_bytes = Some(spec.memory_budget);
                side.flash_bytes = Some(flash);
                measured.push(side);
            }
            // One check of the cache both runs wrote to.
            let checked = check(demo, server.as_ref(), &cache)?;
            for mut side in measured {
                side.check = Some(checked.clone());
                demo.report.sides.push(side);
            }
        }
        Ok(())
    })();
    drop(cache);
    let finished = finish(demo, server, spec);
    result?;
    finished
}

/// The warm-up curve: the group loaded and aged down with the tier
/// disabled (evictions go away), the load started, the tier enabled after
/// `curve_lead`; per second, throughput and where instances came from.
pub(super) fn curve(demo: &mut Demo<'_, '_>, spec: &ServerSpec) -> Result<(), FlashError> {
    let (server, loaded) = start_loaded(demo, spec, false)?;
    let cache = server.cache();
    let result = (|| {
        let target =
            PgTarget::open(&server.url()).map_err(|e| demo.fail()(DbError::new(Some(e.sqlstate()), e.to_string())))?;
        let total = demo.o.curve_lead + demo.o.curve_after;
        let mut points = Vec::new();
        let mut enabled_at = None;
        let mut enable_error = None;
        let mut last = (0u32, 0u64, group_tier(&cache).1);
        repetition(
            demo,
            &target,
            Load::Standard,
            Duration::ZERO,
            total,
            demo.o.seed ^ 0x4355_5256,
            &mut |elapsed, finished| {
                let second = elapsed.as_secs() as u32;
                if second > last.0 {
                    let (store, group) = group_tier(&cache);
                    let span = f64::from(second - last.0);
                    points.push(CurvePoint {
                        second,
                        txn_per_s: finished.saturating_sub(last.1) as f64 / span,
                        flash_answers: group.flash_hits.saturating_sub(last.2.flash_hits),
                        backend_loads: group.backend_loads.saturating_sub(last.2.backend_loads),
                        flash_records: store.flash_records.unwrap_or(0),
                    });
                    demo.monitor.detail(format!(
                        "{second}/{} s, {:.0} txn/s",
                        total.as_secs(),
                        points.last().map_or(0.0, |p| p.txn_per_s)
                    ));
                    last = (second, finished, group);
                }
                if enabled_at.is_none() && elapsed >= demo.o.curve_lead {
                    enabled_at = Some(second);
                    if let Err(e) = cache.tier_command(TierCommand::Enable) {
                        enable_error = Some(DbError::new(Some(e.sqlstate()), e.to_string()));
                    }
                }
            },
        )?;
        if let Some(error) = enable_error {
            return Err(demo.fail()(error));
        }
        demo.report.curve = points;
        demo.report.curve_enabled_at = enabled_at;
        let check = check(demo, server.as_ref(), &cache)?;
        demo.report.sides.push(SideFigures {
            label: "curve".into(),
            study: "003-curve".into(),
            access: "wire".into(),
            loaded_bytes: Some(loaded),
            dram_budget_bytes: Some(spec.memory_budget),
            flash_bytes: spec.tier.map(|(bytes, _, _)| bytes),
            check: Some(check),
            ..SideFigures::default()
        });
        Ok(())
    })();
    drop(cache);
    let finished = finish(demo, server, spec);
    result?;
    finished
}

/// Write-through caught up (at most [`DRAIN_TIMEOUT`], Ctrl-C stops the wait).
fn drain(demo: &Demo<'_, '_>, cache: &Cache) -> Option<Duration> {
    write_through_drained(cache, DRAIN_TIMEOUT, &|| demo.control.interrupt.load(Ordering::Relaxed))
}

/// Write-through drained, VERIFY of what memory holds, and a read check of
/// subscribers drawn as the clients draw them through the server (flash
/// answers included), row by row against PostgreSQL.
fn check(demo: &Demo<'_, '_>, server: &dyn FlashServer, cache: &Cache) -> Result<CheckFigures, FlashError> {
    demo.monitor.detail("waiting for write-through to drain".into());
    let drained = drain(demo, cache).is_some();
    demo.interrupted()?;
    demo.monitor.detail(format!("VERIFY CACHE GROUP {GROUP}"));
    let cancel = Cancel::new();
    let interrupt = demo.control.interrupt;
    let (tally, _) = cancel.when(|| interrupt.load(Ordering::Relaxed), || cache.verify_cancellable(GROUP, &cancel));
    demo.interrupted()?;
    let tally = cache_call(tally).map_err(demo.fail())?;
    let mut figures = CheckFigures {
        drained,
        verified: tally.compared,
        verify_differing: tally.differing + tally.only_in_cache.len() as u64,
        differences: tally.differences.iter().take(5).map(|(k, t, w)| format!("VERIFY s_id {k}, {t}: {w}")).collect(),
        ..CheckFigures::default()
    };
    demo.monitor.detail(format!("reading {} subscribers through the cache and from PostgreSQL", demo.o.read_check));
    read_check(demo, &server.url(), &mut figures).map_err(demo.fail())?;
    figures.clean = drained && figures.verify_differing == 0 && figures.read_differing == 0 && figures.read_failed == 0;
    Ok(figures)
}

fn read_check(demo: &Demo<'_, '_>, cache_url: &str, figures: &mut CheckFigures) -> Result<(), DbError> {
    let connect =
        |url: &str| pgtier_backend::connect::connect(url).map_err(|e| DbError::new(Some(e.sqlstate()), e.to_string()));
    let mut ours = connect(cache_url)?;
    let mut theirs = connect(&demo.control.backend_url)?;
    let keys = subscriber_keys(demo);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(demo.o.seed ^ 0x5245_4144);
    let mut ids = std::collections::BTreeSet::new();
    let wanted = demo.o.read_check.min(demo.o.subscribers);
    for _ in 0..wanted.saturating_mul(20) {
        if ids.len() as u64 >= wanted {
            break;
        }
        ids.insert(keys.next(&mut rng));
    }
    for s_id in ids {
        if demo.control.interrupt.load(Ordering::Relaxed) {
            break;
        }
        let mut same = true;
        for table in TABLES {
            let sql = format!("SELECT * FROM {table} WHERE s_id = {s_id}");
            let cached = match rows_text(&mut ours, &sql) {
                Ok(rows) => rows,
                Err(error) => {
                    figures.read_failed += 1;
                    if figures.differences.len() < 10 {
                        figures.differences.push(format!("{sql}: {error}"));
                    }
                    continue;
                }
            };
            let postgres = rows_text(&mut theirs, &sql)?;
            if cached != postgres {
                same = false;
                if figures.differences.len() < 10 {
                    figures.differences.push(format!("{table} s_id {s_id}: cache {cached:?}, PostgreSQL {postgres:?}"));
                }
            }
        }
        figures.read_checked += 1;
        if !same {
            figures.read_differing += 1;
        }
    }
    Ok(())
}

/// The rows of `sql` as text lines, sorted (both sides print PostgreSQL's text forms).
fn rows_text(client: &mut postgres::Client, sql: &str) -> Result<Vec<String>, DbError> {
    let mut lines: Vec<String> = client
        .simple_query(sql)
        .map_err(|e| db_error(&e))?
        .into_iter()
        .filter_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => {
                Some((0..row.len()).map(|i| row.get(i).unwrap_or("\\N")).collect::<Vec<_>>().join("\t"))
            }
            _ => None,
        })
        .collect();
    lines.sort();
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flash_sizes_are_whole_mb_and_never_below_four_regions() {
        assert_eq!(flash_bytes(100 << 20, 30 << 20), 70 << 20);
        assert_eq!(flash_bytes(10 << 20, 30 << 20), FLASH_BYTES_MIN);
        assert_eq!(flash_bytes((70 << 20) + 12345, 0), 70 << 20);
    }

    #[test]
    fn regions_shrink_until_a_small_tier_has_enough_of_them() {
        assert_eq!(region_size(4 << 30), 16 << 20);
        assert_eq!(region_size(64 << 20), 2 << 20);
        assert_eq!(region_size(4 << 20), 1 << 20);
        for size in [4u64 << 20, 33 << 20, 1 << 30] {
            assert!(size / region_size(size) >= 4, "{size}");
        }
    }
}
