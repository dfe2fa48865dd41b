//! The sweep: search ranges × sides × thread counts, each pgtier side on
//! a cache of its own per search range, checked against PostgreSQL after.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use pgtier_cache::{Aging, Cache, CacheConfig, CreateGroup, FlashPolicy, GroupKind, LoadOptions, TierConfig};
use pgtier_engine::CommitMode;

use super::population::{ITEMS_PER_PRODUCT, Sizes, itemid};
use super::transactions::{Counters, EXPECTED_SQLSTATES, ErrorCount, TxnType};
use super::{CheckError, JpetWorkload, check_population};
use crate::driver::{DriverError, LiveCounters, LoadSpec, run_repetition};
use crate::target::{DbError, Target, Value};
use crate::targets::cached::{
    cache_call, caught_up_rate, drop_node_origins, load_when_ready, open_cache, write_through_drained,
};
use crate::targets::postgres::{PgTarget, db_error};

/// What runs the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Side {
    /// PostgreSQL alone.
    #[serde(rename = "postgresql")]
    PostgreSql,
    /// pgtier in direct mode, the item group under its memory budget,
    /// evicted instances gone (a miss asks PostgreSQL).
    #[serde(rename = "pgtier")]
    Pgtier,
    /// The same with the flash tier holding what memory does not.
    #[serde(rename = "pgtier-flash")]
    PgtierFlash,
}

impl Side {
    pub const ALL: [Side; 3] = [Side::PostgreSql, Side::Pgtier, Side::PgtierFlash];

    pub fn name(self) -> &'static str {
        match self {
            Side::PostgreSql => "postgresql",
            Side::Pgtier => "pgtier",
            Side::PgtierFlash => "pgtier-flash",
        }
    }

    pub fn parse(name: &str) -> Option<Side> {
        Side::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Everything a sweep needs; nothing here is checked against the network.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// PostgreSQL (the system of record, and the `postgresql` side).
    pub url: String,
    pub search_ranges: Vec<u32>,
    pub threads: Vec<u32>,
    pub sides: Vec<Side>,
    pub ramp_up: Duration,
    pub measure: Duration,
    pub ramp_down: Duration,
    /// Unmeasured run of the mix (the largest thread count, closed loop)
    /// on each side and search range before its first point.
    pub warmup: Duration,
    /// None: closed loop; Some: open loop at this total rate.
    pub rate_per_s: Option<f64>,
    pub seed: u64,
    /// The item group's budget in bytes; None: `budget_fraction` of what
    /// the whole item group takes in memory (measured on the first pgtier
    /// side by loading it all once).
    pub memory_budget: Option<u64>,
    pub budget_fraction: f64,
    /// Bytes of the flash tier; None: twice the item group, at least 256 MiB.
    pub flash_size: Option<u64>,
    pub commit_mode: CommitMode,
    /// Where each pgtier side's data directory and flash file go (removed after).
    pub work_dir: PathBuf,
}

/// A pgtier side's cache, open, and how the workload reaches it.
pub struct OpenedCache {
    pub cache: Arc<Cache>,
    pub target: Box<dyn Target>,
    /// Stops what the opener started (the cache's threads; a server),
    /// called after `cache` and `target` are dropped.
    pub close: Box<dyn FnOnce() -> Result<(), DbError>>,
}

/// How a pgtier side opens its cache: in this process with the workload
/// calling the engine ([`Direct`]), or behind a server the workload reaches
/// over the PostgreSQL protocol (the CLI's `--wire`: the server crate
/// depends on this one, so it lives there).
pub trait CacheOpener {
    /// "direct" or "wire", for the report.
    fn mode(&self) -> &'static str;
    /// A cache over PostgreSQL at `url` with `config` (node name, tier),
    /// its data directory under `dir`.
    fn open(&self, dir: &Path, config: CacheConfig, commit: CommitMode, url: &str) -> Result<OpenedCache, DbError>;
}

/// The engine in-process, driven through [`crate::targets::embedded::EmbeddedTarget`].
pub struct Direct;

impl CacheOpener for Direct {
    fn mode(&self) -> &'static str {
        "direct"
    }

    fn open(&self, dir: &Path, config: CacheConfig, commit: CommitMode, url: &str) -> Result<OpenedCache, DbError> {
        let (cache, target) = open_cache(&dir.join("db"), commit, url, config)?;
        let closing = cache.clone();
        Ok(OpenedCache {
            cache,
            target: Box::new(target),
            close: Box::new(move || {
                closing.shutdown();
                Ok(())
            }),
        })
    }
}

/// One transaction type at one point.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TxnPoint {
    pub name: &'static str,
    pub executed: u64,
    /// Executions whose every lookup found its rows.
    pub found: u64,
    /// Rolled back with an error (counted by SQLSTATE in [`PointResult::errors`]).
    pub errors: u64,
    pub avg_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
}

/// The item group during one point (deltas over the measure and ramps).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CacheFigures {
    pub budget_bytes: u64,
    pub memory_bytes: u64,
    pub instances_in_memory: u64,
    pub flash_hits: u64,
    pub promotions: u64,
    pub backend_loads: u64,
    pub demotions: u64,
    /// Instances aging took out of memory (to flash or dropped).
    pub evictions: u64,
    /// Write-through at the end of the point: bytes of the log PostgreSQL
    /// has not received yet, and the age of the oldest of them. An
    /// instance with changes PostgreSQL does not have is never evicted, so
    /// a growing backlog holds memory past the budget.
    pub write_through_backlog_bytes: u64,
    pub write_through_lag_ms: f64,
    /// Misses that waited for write-through before loading (the group
    /// past its budget with changes PostgreSQL does not have), and their
    /// waits in all.
    pub loads_held: u64,
    pub load_hold_ms: f64,
}

/// One (side, search range, threads) measurement.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PointResult {
    pub side: Side,
    pub search_range_percent: u32,
    pub threads: u32,
    /// Committed transactions per second of the measure window.
    pub txn_per_s: f64,
    /// pgtier: the rate with write-through caught up
    /// ([`caught_up_rate`]), the drain after the window it counts, seconds.
    /// The tables and the crossover compare this (PostgreSQL alone has
    /// nothing to catch up: its rate is `txn_per_s`).
    pub caught_up_txn_per_s: Option<f64>,
    pub drain_s: Option<f64>,
    pub open_loop: bool,
    pub transactions: Vec<TxnPoint>,
    /// Every error of the point (all phases), by SQLSTATE.
    pub errors: BTreeMap<String, ErrorCount>,
    /// Errors whose SQLSTATE is not in [`EXPECTED_SQLSTATES`].
    pub unexpected_errors: u64,
    pub orders_committed: u64,
    pub cache: Option<CacheFigures>,
}

impl PointResult {
    /// The rate the tables and the crossover compare: pgtier's with
    /// write-through caught up, PostgreSQL's as measured.
    pub fn sustained(&self) -> f64 {
        self.caught_up_txn_per_s.unwrap_or(self.txn_per_s)
    }
}

/// How long a point waits for write-through to catch up, before and after.
const DRAIN_MAX: Duration = Duration::from_secs(120);

/// A group compared with PostgreSQL by `Cache::verify`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GroupCheck {
    pub group: String,
    pub compared: u64,
    pub differing: u64,
    pub not_cached: u64,
    pub only_in_cache: u64,
    pub first_differences: Vec<String>,
}

/// After a side's points at one search range: what PostgreSQL holds
/// against what the run committed, and the cache against PostgreSQL.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SideCheck {
    pub side: Side,
    pub search_range_percent: u32,
    /// pgtier: write-through drained before the comparison.
    pub drained: bool,
    pub groups: Vec<GroupCheck>,
    pub orders_committed: u64,
    pub orders_in_postgres: u64,
    pub lines_committed: u64,
    pub lines_in_postgres: u64,
    /// Units the committed transactions added to stock, and what
    /// PostgreSQL's total stock moved by.
    pub stock_change_committed: i64,
    pub stock_change_in_postgres: i64,
    pub clean: bool,
}

/// Writes `result` as pretty JSON to `path`, creating its directory.
pub fn write_json(result: &SweepResult, path: &std::path::Path) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_json::to_string_pretty(result).map_err(std::io::Error::other)?;
    std::fs::write(path, text)
}

/// Per thread count: the smallest search range at which pgtier without
/// flash falls below pgtier with flash, and at which PostgreSQL alone
/// overtakes pgtier without flash (throughput, by more than
/// [`CROSSOVER_MARGIN`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Crossover {
    pub threads: u32,
    pub flash_overtakes_at: Option<u32>,
    pub postgresql_overtakes_at: Option<u32>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct SweepResult {
    /// How pgtier sides were reached: "direct" or "wire".
    pub pgtier_mode: &'static str,
    pub scale: u64,
    pub items: u64,
    pub products: u64,
    /// What the whole item group takes in memory (None: no pgtier side ran).
    pub item_group_bytes: Option<u64>,
    pub memory_budget_bytes: Option<u64>,
    pub mix_percent: [u32; 4],
    pub deviations: Vec<String>,
    pub seed: u64,
    pub points: Vec<PointResult>,
    pub checks: Vec<SideCheck>,
    pub crossovers: Vec<Crossover>,
}

impl SweepResult {
    pub fn all_clean(&self) -> bool {
        self.checks.iter().all(|c| c.clean)
    }
}

/// Progress as it happens, for a caller to print.
pub enum Report<'a> {
    Note(String),
    Point(&'a PointResult),
    Check(&'a SideCheck),
}

#[derive(Debug, thiserror::Error)]
pub enum JpetError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Check(#[from] CheckError),
    #[error("{side}, search range {range} %: {what}: {source}")]
    Side { side: &'static str, range: u32, what: &'static str, source: DbError },
    #[error("{side}, search range {range} %, {threads} threads: {source}")]
    Driver { side: &'static str, range: u32, threads: u32, source: DriverError },
}

const ITEM_GROUP: &str = "jp_items";

fn group(name: &str, root: &str, children: &[&str]) -> CreateGroup {
    CreateGroup {
        name: name.to_owned(),
        kind: GroupKind::Awt,
        dynamic: false,
        root: root.to_owned(),
        root_predicate: None,
        children: children.iter().map(|c| (*c).to_owned()).collect(),
        aging: Aging::Off,
        keep: false,
        memory_budget: None,
        autorefresh: false,
        flash: FlashPolicy::None,
    }
}

fn item_group(budget: Option<u64>, flash: bool) -> CreateGroup {
    CreateGroup {
        dynamic: true,
        aging: Aging::Lru,
        memory_budget: budget,
        flash: if flash { FlashPolicy::Default } else { FlashPolicy::None },
        ..group(ITEM_GROUP, "item", &["inventory"])
    }
}

/// Orders, line items and stock as PostgreSQL holds them.
#[derive(Clone, Copy, Debug, Default)]
struct Ledger {
    max_order_id: i64,
    orders: u64,
    lines: u64,
    stock: i64,
}

fn ledger(url: &str) -> Result<Ledger, DbError> {
    let mut client = pgtier_backend::connect::connect(url).map_err(|e| DbError::new(None, e.to_string()))?;
    let row = client
        .query_one(
            "SELECT (SELECT coalesce(max(orderid), 0)::bigint FROM orders), (SELECT count(*) FROM orders), \
             (SELECT count(*) FROM lineitem), (SELECT coalesce(sum(qty), 0)::bigint FROM inventory)",
            &[],
        )
        .map_err(|e| db_error(&e))?;
    let get = |i: usize| -> Result<i64, DbError> { row.try_get::<_, i64>(i).map_err(|e| db_error(&e)) };
    Ok(Ledger { max_order_id: get(0)?, orders: get(1)? as u64, lines: get(2)? as u64, stock: get(3)? })
}

/// Runs one point: one repetition of the mix at `spec` on `target`.
pub fn run_point(
    target: &dyn Target,
    workload: &JpetWorkload,
    spec: &LoadSpec,
    side: Side,
) -> Result<PointResult, DriverError> {
    let live = LiveCounters::default();
    let tally = run_repetition(target, workload, spec, &live, &mut |_, _| {})?;
    let transactions = TxnType::NAMES
        .iter()
        .zip(&tally.txns)
        .map(|(name, t)| {
            let l = t.latency.summary();
            TxnPoint {
                name,
                executed: t.executed,
                found: t.found,
                errors: t.acceptable_errors,
                avg_us: l.avg,
                p90_us: l.p90,
                p99_us: l.p99,
            }
        })
        .collect();
    let errors = workload.counters.errors();
    let unexpected_errors =
        errors.iter().filter(|(code, _)| !EXPECTED_SQLSTATES.contains(&code.as_str())).map(|(_, e)| e.count).sum();
    Ok(PointResult {
        side,
        search_range_percent: workload.search_range_percent,
        threads: spec.threads,
        txn_per_s: tally.mqth(),
        caught_up_txn_per_s: None,
        drain_s: None,
        open_loop: spec.rate_per_s.is_some(),
        transactions,
        errors,
        unexpected_errors,
        orders_committed: workload.counters.orders_committed.load(Ordering::Relaxed),
        cache: None,
    })
}

/// Runs the whole sweep on a populated PostgreSQL at `config.url`.
pub fn run_sweep(
    config: &SweepConfig,
    opener: &dyn CacheOpener,
    report: &mut dyn FnMut(Report<'_>),
) -> Result<SweepResult, JpetError> {
    if config.search_ranges.iter().any(|&r| r == 0 || r > 100) {
        return Err(JpetError::Invalid("search ranges are percentages from 1 to 100".to_owned()));
    }
    if config.threads.is_empty() || config.sides.is_empty() || config.search_ranges.is_empty() {
        return Err(JpetError::Invalid("nothing to run: no search range, thread count or side".to_owned()));
    }
    let pg = PgTarget::open(&config.url).map_err(|e| JpetError::Invalid(format!("connecting to PostgreSQL: {e}")))?;
    let scale = check_population(&pg)?;
    let sizes = Sizes::of(scale);
    let mut result = SweepResult {
        pgtier_mode: opener.mode(),
        scale,
        items: sizes.items,
        products: sizes.products,
        item_group_bytes: None,
        memory_budget_bytes: config.memory_budget,
        mix_percent: TxnType::MIX_PERCENT,
        deviations: super::deviations(config.rate_per_s.is_some()),
        seed: config.seed,
        points: Vec::new(),
        checks: Vec::new(),
        crossovers: Vec::new(),
    };
    for &range in &config.search_ranges {
        for &side in &config.sides {
            let run = SideRun { config, side, range, sizes };
            let (points, check) = match side {
                Side::PostgreSql => run.postgresql(&pg, report)?,
                Side::Pgtier | Side::PgtierFlash => run.pgtier(opener, &mut result, report)?,
            };
            report(Report::Check(&check));
            result.points.extend(points);
            result.checks.push(check);
        }
    }
    result.crossovers = crossovers(&result.points, &config.threads);
    Ok(result)
}

struct SideRun<'a> {
    config: &'a SweepConfig,
    side: Side,
    range: u32,
    sizes: Sizes,
}

impl SideRun<'_> {
    fn fail(&self, what: &'static str) -> impl FnOnce(DbError) -> JpetError + use<'_> {
        move |source| JpetError::Side { side: self.side.name(), range: self.range, what, source }
    }

    fn spec(&self, threads: u32) -> LoadSpec {
        LoadSpec {
            threads,
            rate_per_s: self.config.rate_per_s,
            ramp_up: self.config.ramp_up,
            measure: self.config.measure,
            ramp_down: self.config.ramp_down,
            seed: self.config.seed ^ (u64::from(self.range) << 32) ^ u64::from(threads),
        }
    }

    /// Every thread count on `target`; returns the points and the
    /// committed orders, lines and stock change over all of them.
    /// Every thread count on `target`, after the warm-up; returns the
    /// points and the orders, lines and stock change committed over all
    /// of them, warm-up and ramps included (what PostgreSQL must hold).
    fn points(
        &self,
        target: &dyn Target,
        before: &Ledger,
        cache: Option<(&Cache, u64)>,
        report: &mut dyn FnMut(Report<'_>),
    ) -> Result<(Vec<PointResult>, [i64; 3]), JpetError> {
        let mut points = Vec::new();
        let mut next_order = before.max_order_id;
        let mut committed = [0i64; 3];
        let mut run = |spec: &LoadSpec| -> Result<PointResult, JpetError> {
            let counters = Counters::starting_after(next_order);
            let workload =
                JpetWorkload { sizes: self.sizes, search_range_percent: self.range, counters: counters.clone() };
            // Each point starts with write-through caught up: a backlog
            // the point before left is not this one's.
            if let Some((cache, _)) = cache {
                write_through_drained(cache, DRAIN_MAX, &|| false);
            }
            let tier_before = cache.map(|(c, _)| (item_tier(c), item_stats(c)));
            let threads = spec.threads;
            let mut point = run_point(target, &workload, spec, self.side).map_err(|source| JpetError::Driver {
                side: self.side.name(),
                range: self.range,
                threads,
                source,
            })?;
            if let (Some((cache, budget)), Some(before)) = (cache, tier_before) {
                point.cache = Some(cache_figures(cache, budget, &before));
                let drain = write_through_drained(cache, DRAIN_MAX, &|| false);
                point.drain_s = drain.map(|d| d.as_secs_f64());
                // Not caught up within the bound: no rate it sustains is known.
                point.caught_up_txn_per_s =
                    Some(drain.map_or(0.0, |d| caught_up_rate(point.txn_per_s, spec.measure, d)));
            }
            next_order = counters.next_order_id.load(Ordering::Relaxed) - 1;
            committed[0] += counters.orders_committed.load(Ordering::Relaxed) as i64;
            committed[1] += counters.lines_committed.load(Ordering::Relaxed) as i64;
            committed[2] += counters.stock_change.load(Ordering::Relaxed);
            Ok(point)
        };
        if !self.config.warmup.is_zero() {
            // The hot set of this range settles (memory holds an arbitrary
            // quarter after the load and the aging down) before any point
            // is measured; otherwise the first thread count pays for it.
            let threads = self.config.threads.iter().copied().max().unwrap_or(1);
            let spec = LoadSpec {
                threads,
                rate_per_s: None,
                ramp_up: Duration::ZERO,
                measure: self.config.warmup,
                ramp_down: Duration::ZERO,
                seed: self.config.seed ^ 0x5741_524d,
            };
            let warm = run(&spec)?;
            let errors: u64 = warm.errors.values().map(|e| e.count).sum();
            report(Report::Note(format!(
                "{}, search range {} %: warm-up {:.0} s with {threads} threads: {:.0} txn/s, {errors} errors{}",
                self.side.name(),
                self.range,
                self.config.warmup.as_secs_f64(),
                warm.txn_per_s,
                if warm.unexpected_errors > 0 { " (UNEXPECTED ones among them)" } else { "" }
            )));
        }
        for &threads in &self.config.threads {
            let point = run(&self.spec(threads))?;
            report(Report::Point(&point));
            points.push(point);
        }
        Ok((points, committed))
    }

    fn check(
        &self,
        before: &Ledger,
        committed: [i64; 3],
        drained: bool,
        groups: Vec<GroupCheck>,
    ) -> Result<SideCheck, JpetError> {
        let after = ledger(&self.config.url).map_err(self.fail("counting orders in PostgreSQL"))?;
        let mut check = SideCheck {
            side: self.side,
            search_range_percent: self.range,
            drained,
            groups,
            orders_committed: committed[0] as u64,
            orders_in_postgres: after.orders - before.orders,
            lines_committed: committed[1] as u64,
            lines_in_postgres: after.lines - before.lines,
            stock_change_committed: committed[2],
            stock_change_in_postgres: after.stock - before.stock,
            clean: false,
        };
        check.clean = check.drained
            && check.orders_committed == check.orders_in_postgres
            && check.lines_committed == check.lines_in_postgres
            && check.stock_change_committed == check.stock_change_in_postgres
            && check.groups.iter().all(|g| {
                // A DYNAMIC group's instance that aging evicts while verify
                // walks the group shows as "not cached": not a wrong answer
                // (the differential read covers those instances).
                let missing_is_wrong = g.group != ITEM_GROUP;
                g.differing == 0 && g.only_in_cache == 0 && (g.not_cached == 0 || !missing_is_wrong)
            });
        Ok(check)
    }

    fn postgresql(
        &self,
        pg: &PgTarget,
        report: &mut dyn FnMut(Report<'_>),
    ) -> Result<(Vec<PointResult>, SideCheck), JpetError> {
        let before = ledger(&self.config.url).map_err(self.fail("reading PostgreSQL's orders"))?;
        let (points, committed) = self.points(pg, &before, None, report)?;
        Ok((points, self.check(&before, committed, true, Vec::new())?))
    }

    /// A node name of its own per side and range ([a-z][a-z0-9]*, at most
    /// 24), so no side takes over another's while that one winds down.
    fn node(&self) -> String {
        let code = if self.side == Side::PgtierFlash { "f" } else { "m" };
        format!("jp{}{code}{}", std::process::id() % 100_000, self.range)
    }

    fn pgtier(
        &self,
        opener: &dyn CacheOpener,
        result: &mut SweepResult,
        report: &mut dyn FnMut(Report<'_>),
    ) -> Result<(Vec<PointResult>, SideCheck), JpetError> {
        let dir = self.config.work_dir.join(format!("{}-{}", self.side.name(), self.range));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| DbError::new(None, format!("creating {}: {e}", dir.display())))
            .map_err(self.fail("work directory"))?;
        let flash = self.side == Side::PgtierFlash;
        let tier = flash.then(|| {
            let size = self
                .config
                .flash_size
                .unwrap_or_else(|| result.item_group_bytes.unwrap_or(0).saturating_mul(2).max(256 << 20));
            TierConfig::new(dir.join("flash.tier"), size)
        });
        let mut cache_config = CacheConfig { tier, ..CacheConfig::default() };
        let node = self.node();
        cache_config.awt.node = node.clone();
        let before = ledger(&self.config.url).map_err(self.fail("reading PostgreSQL's orders"))?;
        let opened = opener
            .open(&dir, cache_config, self.config.commit_mode, &self.config.url)
            .map_err(self.fail("opening the cache"))?;
        let outcome = self.on_cache(&opened.cache, opened.target.as_ref(), &before, result, report);
        let OpenedCache { cache, target, close } = opened;
        drop(target);
        drop(cache);
        let closed = close().map_err(self.fail("closing the cache"));
        // PostgreSQL keeps at most max_replication_slots origins, and they
        // outlive the node: drop this side's before the next one starts.
        let dropped = drop_node_origins(&self.config.url, &node).map_err(self.fail("dropping replication origins"));
        let _ = std::fs::remove_dir_all(&dir);
        let outcome = outcome?;
        closed?;
        dropped?;
        Ok(outcome)
    }

    fn on_cache(
        &self,
        cache: &Cache,
        target: &dyn Target,
        before: &Ledger,
        result: &mut SweepResult,
        report: &mut dyn FnMut(Report<'_>),
    ) -> Result<(Vec<PointResult>, SideCheck), JpetError> {
        let all = LoadOptions { parallel: 2, ..LoadOptions::default() };
        for def in [group("jp_catalog", "category", &["product"]), group("jp_account", "account", &[])] {
            cache_call(cache.create_group(&def)).map_err(self.fail("creating a cache group"))?;
            load_when_ready(cache, &def.name, &all).map_err(self.fail("loading a cache group"))?;
        }
        let orders = CreateGroup {
            root_predicate: Some(format!("orderid > {}", before.max_order_id)),
            ..group("jp_orders", "orders", &["lineitem"])
        };
        cache_call(cache.create_group(&orders)).map_err(self.fail("creating the orders group"))?;
        let item_bytes = match result.item_group_bytes {
            Some(bytes) => bytes,
            None => {
                // What every item with its inventory takes in memory: load
                // them all once without a budget (the first pgtier side).
                cache_call(cache.create_group(&item_group(None, false))).map_err(self.fail("creating jp_items"))?;
                load_when_ready(cache, ITEM_GROUP, &all).map_err(self.fail("loading jp_items"))?;
                let bytes = item_memory(cache);
                cache_call(cache.drop_group(ITEM_GROUP, false)).map_err(self.fail("dropping jp_items"))?;
                result.item_group_bytes = Some(bytes);
                bytes
            }
        };
        let budget = self.config.memory_budget.unwrap_or((item_bytes as f64 * self.config.budget_fraction) as u64);
        result.memory_budget_bytes = Some(budget);
        let flash = self.side == Side::PgtierFlash;
        cache_call(cache.create_group(&item_group(Some(budget), flash))).map_err(self.fail("creating jp_items"))?;
        // Every item loaded, then aged down to the budget: with flash the
        // evicted go to the tier, without they go away. Measuring starts
        // near the steady state instead of from a cold cache.
        load_when_ready(cache, ITEM_GROUP, &all).map_err(self.fail("loading jp_items"))?;
        for _ in 0..600 {
            if item_memory(cache) <= budget {
                break;
            }
            cache_call(cache.age_now()).map_err(self.fail("aging jp_items"))?;
        }
        report(Report::Note(format!(
            "{}, search range {} %: item group {} KiB in memory of {} KiB, budget {} KiB{}",
            self.side.name(),
            self.range,
            item_memory(cache) >> 10,
            item_bytes >> 10,
            budget >> 10,
            if flash { ", the rest on flash" } else { "" }
        )));
        let (points, committed) = self.points(target, before, Some((cache, budget)), report)?;
        let drained = cache.wait_propagated(Duration::from_secs(120));
        let mut groups = Vec::new();
        for name in ["jp_catalog", "jp_account", "jp_orders", ITEM_GROUP] {
            let tally = cache_call(cache.verify(name)).map_err(self.fail("verifying a cache group"))?;
            groups.push(GroupCheck {
                group: name.to_owned(),
                compared: tally.compared,
                differing: tally.differing,
                not_cached: tally.not_cached,
                only_in_cache: tally.only_in_cache.len() as u64,
                first_differences: tally
                    .differences
                    .iter()
                    .take(5)
                    .map(|(key, table, what)| format!("{table} {key}: {what}"))
                    .collect(),
            });
        }
        groups.push(self.read_stock_through(target).map_err(self.fail("reading stock through the cache"))?);
        Ok((points, self.check(before, committed, drained, groups)?))
    }

    /// The differential read: every item of the search range (what the run
    /// could have changed) read through the cache, where a miss is answered
    /// by flash or PostgreSQL, against PostgreSQL's own rows. `verify` sees
    /// only what memory holds; this sees what flash answers too.
    fn read_stock_through(&self, target: &dyn Target) -> Result<GroupCheck, DbError> {
        let items = self.sizes.products_in_range(self.range) * ITEMS_PER_PRODUCT;
        let mut client =
            pgtier_backend::connect::connect(&self.config.url).map_err(|e| DbError::new(None, e.to_string()))?;
        let rows = client
            .query("SELECT itemid::text, qty::bigint FROM inventory WHERE itemid < $1", &[&itemid(items)])
            .map_err(|e| db_error(&e))?;
        let postgres: BTreeMap<String, i64> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let mut session = target.connect()?;
        let stmt = session.prepare("SELECT qty FROM inventory WHERE itemid = $1")?;
        let mut check = GroupCheck {
            group: "inventory read through the cache".to_owned(),
            compared: 0,
            differing: 0,
            not_cached: 0,
            only_in_cache: 0,
            first_differences: Vec::new(),
        };
        let mut out = Vec::new();
        for item in 0..items {
            let id = itemid(item);
            session.query(stmt, &[Value::Text(id.clone())], &mut out)?;
            check.compared += 1;
            let cached = match out.first() {
                Some(Value::Int(qty)) => Some(*qty),
                _ => None,
            };
            let expected = postgres.get(&id).copied();
            if cached != expected {
                check.differing += 1;
                if check.first_differences.len() < 5 {
                    check.first_differences.push(format!("{id}: cache {cached:?}, PostgreSQL {expected:?}"));
                }
            }
        }
        Ok(check)
    }
}

fn item_memory(cache: &Cache) -> u64 {
    cache.stats().iter().find(|s| s.group == ITEM_GROUP).map_or(0, |s| s.memory_bytes)
}

fn item_tier(cache: &Cache) -> pgtier_cache::TierInfo {
    cache.tier_stats().into_iter().find(|t| t.group.as_deref() == Some(ITEM_GROUP)).unwrap_or_default()
}

fn item_stats(cache: &Cache) -> pgtier_cache::GroupStats {
    cache.stats().into_iter().find(|s| s.group == ITEM_GROUP).unwrap_or_default()
}

fn cache_figures(
    cache: &Cache,
    budget: u64,
    (before, stats_before): &(pgtier_cache::TierInfo, pgtier_cache::GroupStats),
) -> CacheFigures {
    let now = item_tier(cache);
    let stats = item_stats(cache);
    let propagation = cache.propagation_info().unwrap_or_default();
    CacheFigures {
        evictions: stats.evicted_instances.saturating_sub(stats_before.evicted_instances),
        loads_held: stats.loads_held.saturating_sub(stats_before.loads_held),
        load_hold_ms: stats.load_hold_us.saturating_sub(stats_before.load_hold_us) as f64 / 1000.0,
        write_through_backlog_bytes: propagation.backlog_bytes,
        write_through_lag_ms: propagation.lag_ms,
        budget_bytes: budget,
        memory_bytes: stats.memory_bytes,
        instances_in_memory: stats.instances,
        flash_hits: now.flash_hits.saturating_sub(before.flash_hits),
        promotions: now.promotions.saturating_sub(before.promotions),
        backend_loads: now.backend_loads.saturating_sub(before.backend_loads),
        demotions: now.demotions.saturating_sub(before.demotions),
    }
}

/// How far below the other side pgtier without flash must fall for a
/// crossover: one repetition on a shared 2-core machine moves a point by a
/// few percent (701 vs 703 txn/s read as a crossover without it).
pub const CROSSOVER_MARGIN: f64 = 0.05;

/// [`Crossover`] per thread count, from the points of a sweep.
pub fn crossovers(points: &[PointResult], threads: &[u32]) -> Vec<Crossover> {
    let tput = |side: Side, range: u32, t: u32| {
        points
            .iter()
            .find(|p| p.side == side && p.search_range_percent == range && p.threads == t)
            .map(PointResult::sustained)
    };
    let mut ranges: Vec<u32> = points.iter().map(|p| p.search_range_percent).collect();
    ranges.sort_unstable();
    ranges.dedup();
    threads
        .iter()
        .map(|&t| {
            // The first range where pgtier without flash is below `other`
            // by more than the margin.
            let first = |other: Side| {
                ranges.iter().copied().find(|&r| match (tput(Side::Pgtier, r, t), tput(other, r, t)) {
                    (Some(mine), Some(theirs)) => mine < theirs * (1.0 - CROSSOVER_MARGIN),
                    _ => false,
                })
            };
            Crossover {
                threads: t,
                flash_overtakes_at: first(Side::PgtierFlash),
                postgresql_overtakes_at: first(Side::PostgreSql),
            }
        })
        .collect()
}

/// A point as a few lines of text.
pub fn format_point(p: &PointResult) -> String {
    let mut s = format!(
        "== {}, search range {} %, {} threads: {:.0} txn/s{}{}\n",
        p.side.name(),
        p.search_range_percent,
        p.threads,
        p.txn_per_s,
        match (p.caught_up_txn_per_s, p.drain_s) {
            (Some(rate), Some(drain)) => format!(" ({rate:.0} with write-through caught up: {drain:.1} s to drain)"),
            (Some(_), None) => format!(" (write-through did not catch up within {} s)", DRAIN_MAX.as_secs()),
            _ => String::new(),
        },
        if p.open_loop { " (open loop, latency from the intended start)" } else { "" }
    );
    let _ = writeln!(
        s,
        "   {:<12} {:>9} {:>7} {:>7} {:>10} {:>10} {:>10}",
        "transaction", "executed", "found%", "errors", "avg ms", "p90 ms", "p99 ms"
    );
    for t in &p.transactions {
        let found = if t.executed == 0 { 0.0 } else { 100.0 * t.found as f64 / t.executed as f64 };
        let _ = writeln!(
            s,
            "   {:<12} {:>9} {:>7.1} {:>7} {:>10.3} {:>10.3} {:>10.3}",
            t.name,
            t.executed,
            found,
            t.errors,
            t.avg_us / 1000.0,
            t.p90_us / 1000.0,
            t.p99_us / 1000.0
        );
    }
    if let Some(c) = &p.cache {
        let _ = writeln!(
            s,
            "   items in memory: {} KiB of {} KiB budget, {} instances; misses answered by flash {} (promoted {}), by PostgreSQL {}; evicted {}, to flash {}; write-through backlog {} KiB, lag {:.0} ms; loads held {} ({:.0} ms in all)",
            c.memory_bytes >> 10,
            c.budget_bytes >> 10,
            c.instances_in_memory,
            c.flash_hits,
            c.promotions,
            c.backend_loads,
            c.evictions,
            c.demotions,
            c.write_through_backlog_bytes >> 10,
            c.write_through_lag_ms,
            c.loads_held,
            c.load_hold_ms
        );
    }
    if p.errors.is_empty() {
        let _ = writeln!(s, "   errors: none");
    } else {
        for (code, e) in &p.errors {
            let flag = if EXPECTED_SQLSTATES.contains(&code.as_str()) { "" } else { " UNEXPECTED" };
            let _ = writeln!(s, "   errors {code}: {}{flag} (first: {})", e.count, e.first_message);
        }
    }
    s
}

fn format_check(c: &SideCheck) -> String {
    let mut s = format!(
        "check {}, search range {} %: {} (orders committed {} / in PostgreSQL {}, line items {} / {}, stock change {} / {}",
        c.side.name(),
        c.search_range_percent,
        if c.clean { "clean" } else { "DIRTY" },
        c.orders_committed,
        c.orders_in_postgres,
        c.lines_committed,
        c.lines_in_postgres,
        c.stock_change_committed,
        c.stock_change_in_postgres,
    );
    if c.side != Side::PostgreSql {
        let _ = write!(s, "; write-through {}", if c.drained { "drained" } else { "NOT drained" });
        for g in &c.groups {
            let _ = write!(
                s,
                "; {} {} compared, {} differ, {} not cached, {} only in cache",
                g.group, g.compared, g.differing, g.not_cached, g.only_in_cache
            );
            for d in &g.first_differences {
                let _ = write!(s, " [{d}]");
            }
        }
    }
    s.push(')');
    s
}

/// A figure of a point for the summary's tables.
type Metric = fn(&PointResult) -> f64;

/// The check lines; tables of throughput and of each transaction's
/// average latency (search range × side, per thread count); the crossover.
pub fn format_summary(r: &SweepResult) -> String {
    let mut s = String::new();
    for c in &r.checks {
        let _ = writeln!(s, "{}", format_check(c));
    }
    let mut ranges: Vec<u32> = r.points.iter().map(|p| p.search_range_percent).collect();
    ranges.sort_unstable();
    ranges.dedup();
    let mut sides: Vec<Side> = Vec::new();
    for p in &r.points {
        if !sides.contains(&p.side) {
            sides.push(p.side);
        }
    }
    // Throughput, and the average latency of each transaction type: the
    // item lookups (BROWSE) show the tiers apart from the product scans
    // (SEARCH), which every side runs on fully cached or local data.
    let metrics: [(&str, Metric, usize); 5] = [
        ("throughput (txn/s; pgtier with write-through caught up)", PointResult::sustained, 0),
        ("BROWSE average (ms)", |p| p.transactions[0].avg_us / 1000.0, 3),
        ("SEARCH average (ms)", |p| p.transactions[1].avg_us / 1000.0, 3),
        ("UPDATE_CART average (ms)", |p| p.transactions[2].avg_us / 1000.0, 3),
        ("PLACE_ORDER average (ms)", |p| p.transactions[3].avg_us / 1000.0, 3),
    ];
    for x in &r.crossovers {
        for (title, metric, decimals) in metrics {
            let _ = write!(s, "\n{title}, {} threads\n   {:>12}", x.threads, "search range");
            for side in &sides {
                let _ = write!(s, " {:>13}", side.name());
            }
            s.push('\n');
            for &range in &ranges {
                let _ = write!(s, "   {range:>10} %");
                let point = |side: &Side| {
                    r.points
                        .iter()
                        .find(|p| p.side == *side && p.search_range_percent == range && p.threads == x.threads)
                };
                for side in &sides {
                    match point(side) {
                        Some(p) => {
                            let _ = write!(s, " {:>13.*}", decimals, metric(p));
                        }
                        None => {
                            let _ = write!(s, " {:>13}", "-");
                        }
                    }
                }
                s.push('\n');
            }
        }
    }
    s.push('\n');
    for x in &r.crossovers {
        // "never" only when both sides ran: a crossover with a side left
        // out was not looked for.
        let ran = |side: Side| sides.contains(&Side::Pgtier) && sides.contains(&side);
        let flash = match x.flash_overtakes_at {
            Some(range) => format!(
                "pgtier without flash falls below pgtier-flash at search range {range} % (by more than {:.0} %)",
                CROSSOVER_MARGIN * 100.0
            ),
            None if ran(Side::PgtierFlash) => "pgtier without flash never falls below pgtier-flash".to_owned(),
            None => "pgtier vs pgtier-flash not measured (both sides needed)".to_owned(),
        };
        let pg = match x.postgresql_overtakes_at {
            Some(range) => format!("PostgreSQL overtakes pgtier without flash at {range} %"),
            None if ran(Side::PostgreSql) => "PostgreSQL never overtakes pgtier without flash".to_owned(),
            None => "PostgreSQL vs pgtier not measured (both sides needed)".to_owned(),
        };
        let _ = writeln!(s, "crossover, {} threads: {flash}; {pg}", x.threads);
    }
    let _ = writeln!(
        s,
        "answers: {}",
        if r.all_clean() { "clean (every check above)" } else { "DIRTY (see the checks above)" }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(side: Side, range: u32, txn_per_s: f64) -> PointResult {
        PointResult {
            side,
            search_range_percent: range,
            threads: 2,
            txn_per_s,
            caught_up_txn_per_s: None,
            drain_s: None,
            open_loop: false,
            transactions: Vec::new(),
            errors: BTreeMap::new(),
            unexpected_errors: 0,
            orders_committed: 0,
            cache: None,
        }
    }

    #[test]
    fn crossover_is_the_first_range_past_the_margin() {
        let points = [
            point(Side::PostgreSql, 10, 900.0),
            point(Side::Pgtier, 10, 1000.0),
            point(Side::PgtierFlash, 10, 1010.0), // within the margin: no crossover
            point(Side::PostgreSql, 50, 900.0),
            point(Side::Pgtier, 50, 800.0),
            point(Side::PgtierFlash, 50, 1000.0),
            point(Side::PostgreSql, 100, 900.0),
            point(Side::Pgtier, 100, 300.0),
            point(Side::PgtierFlash, 100, 950.0),
        ];
        let x = crossovers(&points, &[2, 4]);
        assert_eq!(x[0], Crossover { threads: 2, flash_overtakes_at: Some(50), postgresql_overtakes_at: Some(50) });
        assert_eq!(x[1], Crossover { threads: 4, flash_overtakes_at: None, postgresql_overtakes_at: None });
    }
}
