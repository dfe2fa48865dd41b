//! Autorefresh: READONLY cache groups kept current from PostgreSQL by
//! logical replication (pgoutput), one worker thread and one slot per group.
//!
//! Lifecycle (see README.md for the guarantees):
//! - The first LOAD of a READONLY group creates its publication and slot
//!   and loads from the snapshot the slot exports, then streams from the
//!   slot's consistent point: nothing committed in PostgreSQL is missed or
//!   applied twice. A DYNAMIC group starts streaming at CREATE.
//! - Each PostgreSQL transaction is applied as one engine transaction with
//!   its end position in `pgtier_autorefresh` ([`progress`]); transactions
//!   pgtier's own write-through made (replication origin `pgtier_<node>_*`)
//!   are skipped.
//! - PostgreSQL is told a position is flushed only once the engine has made
//!   every transaction before it durable; with nothing in flight a
//!   keepalive's position is acknowledged at once, so an idle slot never
//!   pins WAL.
//! - The slot is watched every second: past `retained_wal_max`, or lost
//!   (`wal_status = 'lost'`), or missing, the group re-snapshots once by
//!   itself (new slot, reload) and counts it in `resnapshots`.
//! - A definition change of a cached table in PostgreSQL stops the group
//!   (its slot dropped, so nothing is pinned) with an error naming the resync.

mod apply;
mod progress;
mod slot;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pgtier_backend::replication::{PgLsn, ReplicationConnection, ReplicationEvent, ReplicationStream};
use pgtier_backend::{ConnectParams, connect_backend};
use pgtier_engine::{Database, Value};

pub use apply::{PredicateCompiler, RowTest};
pub use progress::PROGRESS_TABLE;
pub(crate) use slot::current_wal;

use self::apply::{Change, Mapping, TxnApplier, decode_tuple, map_relation, parent_lookups};
use self::progress::{Progress, State};
use crate::awt::LagHistogram;
use crate::drift::{Drift, verify_group};
use crate::error::CacheError;
use crate::instance::InstanceLayout;
use crate::load::{LoadOptions, LoadReport, RefreshReport};
use crate::node::NodeIdentity;
use crate::registry::GroupEntry;
use crate::tuning::LiveTuning;

/// What autorefresh asks of the cache (`Cache` implements it). Workers hold
/// it weakly, so dropping the cache stops them.
pub(crate) trait AutorefreshHost: Send + Sync {
    /// What evaluates a group's WHERE on rows from PostgreSQL, once the SQL
    /// layer installed it.
    fn predicate_compiler(&self) -> Option<Arc<dyn PredicateCompiler>>;
    /// LOAD's reading of `entry`'s group from exported snapshot `snapshot`
    /// (`Cache::load_in_snapshot`).
    fn load_in_snapshot(
        &self,
        entry: &GroupEntry,
        options: &LoadOptions,
        snapshot: Option<&str>,
    ) -> Result<LoadReport, CacheError>;
    /// Instances loaded again, replacing cached ones, and the `cached` ones
    /// PostgreSQL did not send removed (`Cache::reload`).
    #[allow(clippy::too_many_arguments)]
    fn reload(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        predicate: Option<String>,
        only: Option<&[Vec<Value>]>,
        cached: &[Vec<Value>],
        options: &LoadOptions,
        snapshot: Option<&str>,
    ) -> Result<RefreshReport, CacheError>;
    /// Reloads these instances of `entry`'s group from PostgreSQL, removing
    /// those it no longer has (`Cache::refresh_instances`).
    fn refresh_instances(&self, entry: &GroupEntry, keys: &[Vec<Value>]) -> Result<RefreshReport, CacheError>;
}

/// PostgreSQL's epoch (2000-01-01) in Unix microseconds.
const PG_EPOCH_UNIX_US: i64 = 946_684_800_000_000;
/// How long a worker waits for an event before looking at its stop flag.
const POLL: Duration = Duration::from_millis(100);
/// How often the slot is looked at in `pg_replication_slots`.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// How often the group's tables are compared with PostgreSQL's while streaming.
const DEFINITION_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// A status update at least this often (PostgreSQL's wal_sender_timeout is 60 s).
const STATUS_INTERVAL: Duration = Duration::from_secs(5);
/// Acknowledgements of progress at most this often (a keepalive asking
/// for one is answered at once).
const STATUS_MIN_GAP: Duration = Duration::from_millis(50);
/// Tries of one transaction that meets a row held by an application (55P03).
const APPLY_TRIES: u32 = 200;
/// Changes buffered for one PostgreSQL transaction before it is refused (a
/// transaction this large is re-read by a re-snapshot instead).
const TXN_CHANGES_MAX: usize = 4_000_000;

/// Settings of autorefresh (`[cache]` in the server's config).
#[derive(Clone, Debug)]
pub struct AutorefreshConfig {
    /// WAL a group's slot may keep PostgreSQL from removing before the group re-snapshots.
    pub retained_wal_max: u64,
}

impl Default for AutorefreshConfig {
    fn default() -> AutorefreshConfig {
        AutorefreshConfig { retained_wal_max: 1 << 30 }
    }
}

/// Where one READONLY group's autorefresh stands (`pgtier_cache_autorefresh`, `/metrics`).
#[derive(Debug, Default)]
pub struct AutorefreshStatus {
    pub group: String,
    pub slot: String,
    /// `starting`, `loading`, `streaming`, `re-snapshotting`, `reconnecting` or `stopped`.
    pub state: Mutex<&'static str>,
    pub connected: AtomicBool,
    pub applied_txns: AtomicU64,
    pub applied_changes: AtomicU64,
    /// Changes on rows the group does not hold (outside its WHERE, instances not cached).
    pub skipped_changes: AtomicU64,
    /// Transactions pgtier's own write-through made in PostgreSQL, not applied again.
    pub own_txns_skipped: AtomicU64,
    pub resnapshots: AtomicU64,
    pub errors: AtomicU64,
    /// PostgreSQL WAL position up to which the cache holds every change.
    pub applied_lsn: AtomicU64,
    /// What PostgreSQL was last told is flushed.
    pub confirmed_lsn: AtomicU64,
    /// PostgreSQL's current WAL position at the last look.
    pub backend_lsn: AtomicU64,
    /// WAL the slot keeps PostgreSQL from removing, at the last look.
    pub retained_wal_bytes: AtomicU64,
    /// PostgreSQL commit time (Unix µs) of the last transaction applied.
    pub last_applied_commit_us: AtomicU64,
    /// When (Unix µs) a keepalive last found nothing in flight: the cache
    /// held everything PostgreSQL had sent by then.
    pub caught_up_us: AtomicU64,
    /// PostgreSQL commit to cache commit, per applied transaction.
    pub lag: LagHistogram,
    pub last_error: Mutex<Option<String>>,
}

impl AutorefreshStatus {
    /// Bytes of PostgreSQL WAL not yet looked through (0 when caught up).
    pub fn lag_bytes(&self) -> u64 {
        self.backend_lsn.load(Ordering::Relaxed).saturating_sub(self.applied_lsn.load(Ordering::Relaxed))
    }

    /// How far behind PostgreSQL the cache is, in milliseconds: 0 when
    /// caught up, else the time since it last was (the newer of the last
    /// applied commit and the last keepalive that found nothing in flight;
    /// an idle group whose database sees no changes is not behind).
    pub fn lag_ms(&self) -> f64 {
        if self.lag_bytes() == 0 {
            return 0.0;
        }
        let last = self.last_applied_commit_us.load(Ordering::Relaxed).max(self.caught_up_us.load(Ordering::Relaxed));
        if last == 0 {
            return 0.0;
        }
        pgtier_engine::wall_clock_us().saturating_sub(last) as f64 / 1000.0
    }

    fn set_state(&self, state: &'static str) {
        *self.state.lock() = state;
    }

    fn fail(&self, error: &CacheError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let hint = error.hint().map(|hint| format!(" {hint}")).unwrap_or_default();
        *self.last_error.lock() = Some(format!("{error} (SQLSTATE {}).{hint}", error.sqlstate()));
    }
}

/// A running worker.
pub(crate) struct Worker {
    pub status: Arc<AutorefreshStatus>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

/// What a worker needs, without keeping the cache alive.
struct Ctx {
    cache: Weak<dyn AutorefreshHost>,
    db: Database,
    backend: ConnectParams,
    entry: Arc<GroupEntry>,
    node: NodeIdentity,
    /// `autorefresh_retained_wal_max`, read at each slot check (a reload changes it).
    tuning: Arc<LiveTuning>,
    status: Arc<AutorefreshStatus>,
    stop: Arc<AtomicBool>,
}

/// Starts the worker of `entry` (its slot and progress row exist, or it
/// creates them: a DYNAMIC group at CREATE).
pub(crate) fn spawn(
    cache: Weak<dyn AutorefreshHost>,
    db: Database,
    entry: Arc<GroupEntry>,
    backend: ConnectParams,
    node: &NodeIdentity,
    tuning: Arc<LiveTuning>,
) -> Result<Worker, CacheError> {
    let slot = slot::slot_name(&node.name, &slot::database_of(&backend), &entry.def.name);
    let status = Arc::new(AutorefreshStatus { group: entry.def.name.clone(), slot, ..AutorefreshStatus::default() });
    status.set_state("starting");
    let stop = Arc::new(AtomicBool::new(false));
    let ctx = Ctx { cache, db, backend, entry, node: node.clone(), tuning, status: status.clone(), stop: stop.clone() };
    let thread = std::thread::Builder::new()
        .name(format!("autorefresh-{}", ctx.entry.def.name))
        .spawn(move || run(&ctx))
        .map_err(|error| CacheError::InvalidSpec {
            group: String::new(),
            reason: format!("cannot start autorefresh: {error}"),
        })?;
    Ok(Worker { status, stop, thread: Some(thread) })
}

/// The first LOAD of a READONLY group: a new slot, and the load from the
/// snapshot it exports (so the stream starts exactly where the load's state
/// ends). The caller starts the worker afterwards.
pub(crate) fn initial_load(
    cache: &dyn AutorefreshHost,
    db: &Database,
    entry: &GroupEntry,
    backend: &ConnectParams,
    node: &NodeIdentity,
    options: &LoadOptions,
) -> Result<LoadReport, CacheError> {
    let name = slot::slot_name(&node.name, &slot::database_of(backend), &entry.def.name);
    let mut client = connect_backend(backend)?;
    claim(&mut client, node)?;
    slot::check_wal_level(&mut client)?;
    slot::ensure_publication(&mut client, &slot::publication_name(&node.name, &entry.def.name), &entry.group)?;
    progress::store(
        db,
        &Progress { group: entry.def.name.clone(), slot: name.clone(), lsn: 0, state: State::Loading },
    )?;
    let attempt = (|| {
        let mut connection = ReplicationConnection::connect(backend)?;
        let created = slot::create_slot(&mut client, &mut connection, &name, true)?;
        let snapshot = created.snapshot.clone().ok_or_else(|| no_snapshot(&name))?;
        // Instances cached before (AUTOREFRESH turned on for a loaded
        // group, a LOAD that failed half-way) are read again from the same
        // snapshot, so the stream's start holds for every cached row.
        let layout = InstanceLayout::resolve(&db.catalog(), &entry.group)?;
        let cached = layout.root_keys(db)?;
        if !cached.is_empty() {
            cache.reload(
                entry,
                &layout,
                entry.def.root_predicate.clone(),
                Some(&cached),
                &cached,
                &LoadOptions::default(),
                Some(&snapshot),
            )?;
        }
        let report = cache.load_in_snapshot(entry, options, Some(&snapshot))?;
        drop(connection);
        progress::store(
            db,
            &Progress {
                group: entry.def.name.clone(),
                slot: name.clone(),
                lsn: created.consistent_point.0,
                state: State::Streaming,
            },
        )?;
        Ok(report)
    })();
    if attempt.is_err() {
        // No half-started autorefresh: without a slot nothing is pinned.
        let _ = slot::drop_slot(&mut client, &name);
        let _ = progress::remove(db, &entry.def.name);
    }
    attempt
}

/// DROP CACHE GROUP of a READONLY group: its slot and publication go. When
/// PostgreSQL cannot be reached the progress row stays as `dropping` and
/// every later open retries, so a slot never outlives its group for long.
pub(crate) fn drop_group(
    db: &Database,
    backend: Option<&ConnectParams>,
    node: &str,
    group: &str,
) -> Result<(), CacheError> {
    let Some(row) = progress::read(db, group)? else { return Ok(()) };
    let dropped = backend.ok_or(CacheError::NoBackend).and_then(|backend| {
        let mut client = connect_backend(backend)?;
        slot::drop_slot(&mut client, &row.slot)?;
        slot::drop_publication(&mut client, &slot::publication_name(node, group))
    });
    match dropped {
        Ok(()) => progress::remove(db, group),
        Err(error) => {
            progress::store(db, &Progress { state: State::Dropping, ..row })?;
            tracing::warn!(
                group,
                "autorefresh: cannot drop the slot of dropped cache group \"{group}\" now ({error}); retried at the next start"
            );
            Ok(())
        }
    }
}

/// Groups whose progress row says they stream or load (workers to start),
/// after retrying the drop of slots left by groups dropped meanwhile.
pub(crate) fn restore(db: &Database, backend: Option<&ConnectParams>, node: &str) -> Result<Vec<String>, CacheError> {
    let mut groups = Vec::new();
    for row in progress::read_all(db)? {
        match row.state {
            State::Dropping => drop_group(db, backend, node, &row.group)?,
            State::Loading | State::Streaming => groups.push(row.group),
        }
    }
    Ok(groups)
}

/// Whether group `group` has autorefresh state (a slot) in this cache.
pub(crate) fn has_progress(db: &Database, group: &str) -> Result<bool, CacheError> {
    Ok(progress::read(db, group)?.is_some_and(|row| row.state != State::Dropping))
}

fn no_snapshot(slot: &str) -> CacheError {
    CacheError::Autorefresh {
        sqlstate: "XX000",
        message: format!("PostgreSQL created slot \"{slot}\" without exporting a snapshot"),
        hint: None,
    }
}

/// How a session ended.
enum Exit {
    Stopped,
    /// The group cannot go on (its tables changed in PostgreSQL).
    Fatal(CacheError),
    /// Start again with a new slot and a reload (the reason is logged).
    Resnapshot(&'static str),
}

fn run(ctx: &Ctx) {
    let mut backoff = Duration::from_millis(100);
    let mut resnapshot: Option<&'static str> = None;
    let mut failing: Option<String> = None;
    while !ctx.stop.load(Ordering::Relaxed) {
        match session(ctx, resnapshot.take()) {
            Ok(Exit::Stopped) => break,
            Ok(Exit::Fatal(error)) => {
                ctx.status.fail(&error);
                ctx.status.set_state("stopped");
                ctx.status.connected.store(false, Ordering::Relaxed);
                let group = ctx.entry.def.name.as_str();
                tracing::error!(
                    group,
                    sqlstate = error.sqlstate(),
                    "autorefresh of cache group \"{group}\" stopped: {error}"
                );
                // Nothing may stay pinned for a group that no longer follows.
                if let Ok(mut client) = connect_backend(&ctx.backend) {
                    let _ = slot::drop_slot(&mut client, &ctx.status.slot);
                }
                let _ = progress::remove(&ctx.db, &ctx.entry.def.name);
                return;
            }
            Ok(Exit::Resnapshot(reason)) => {
                resnapshot = Some(reason);
                backoff = Duration::from_millis(100);
            }
            Err(error) => {
                // Once per distinct error: a PostgreSQL outage is one line, not one per retry.
                let text = error.to_string();
                if failing.as_deref() != Some(text.as_str()) {
                    let group = ctx.entry.def.name.as_str();
                    tracing::warn!(
                        group,
                        sqlstate = error.sqlstate(),
                        "autorefresh of cache group \"{group}\": {text}; reconnecting"
                    );
                    failing = Some(text);
                }
                ctx.status.fail(&error);
                ctx.status.connected.store(false, Ordering::Relaxed);
                ctx.status.set_state(if matches!(error, CacheError::NodeOwned { .. }) {
                    "refused"
                } else {
                    "reconnecting"
                });
                sleep_unless_stopped(ctx, backoff);
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
    ctx.status.connected.store(false, Ordering::Relaxed);
}

fn sleep_unless_stopped(ctx: &Ctx, pause: Duration) {
    let until = Instant::now() + pause;
    while !ctx.stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
    }
}

/// One connection's worth of streaming: checks, a re-snapshot when needed,
/// then events until stopped or an error.
fn session(ctx: &Ctx, forced: Option<&'static str>) -> Result<Exit, CacheError> {
    let group = &ctx.entry.def.name;
    let name = ctx.status.slot.clone();
    let publication = slot::publication_name(&ctx.node.name, group);
    let mut client = connect_backend(&ctx.backend)?;
    // The slot and publication are named after the node: another data
    // directory's are never streamed from.
    claim(&mut client, &ctx.node)?;
    if let Some(drift) = verify_group(&mut client, &ctx.entry)? {
        return Ok(Exit::Fatal(drift_error(group, &drift)));
    }
    slot::check_wal_level(&mut client)?;
    slot::ensure_publication(&mut client, &publication, &ctx.entry.group)?;
    let mut predicate = match &ctx.entry.def.root_predicate {
        None => None,
        Some(text) => {
            // The server installs its compiler right after opening the cache.
            let compiler = wait_for_compiler(ctx);
            let compiler = compiler.ok_or_else(|| CacheError::Autorefresh {
                sqlstate: "0A000",
                message: format!("cache group \"{group}\" has a WHERE condition and this cache has no SQL layer to evaluate it on rows from PostgreSQL"),
                hint: Some("Run the group in pgtier serve (or install a predicate compiler with Cache::set_predicate_compiler).".into()),
            })?;
            let root = &ctx.entry.group.root().def.name;
            Some(compiler.compile(root, text).map_err(|reason| CacheError::Autorefresh {
                sqlstate: "42601",
                message: format!("cache group \"{group}\": its WHERE cannot be evaluated in the cache: {reason}"),
                hint: None,
            })?)
        }
    };
    let row = progress::read(&ctx.db, group)?;
    let state = slot::slot_state(&mut client, &name)?;
    let reason = forced.or(match (&row, &state) {
        (Some(row), Some(_)) if row.state == State::Loading => Some("a load from the slot's snapshot did not finish"),
        (Some(_), Some(state)) if state.wal_status.as_deref() == Some("lost") => {
            Some("PostgreSQL invalidated the slot (wal_status = 'lost')")
        }
        (Some(_), Some(state)) if state.retained_bytes > ctx.tuning.get().autorefresh_retained_wal_max => {
            Some("the slot retains more WAL than autorefresh_retained_wal_max")
        }
        (Some(_), None) => Some("the slot is missing in PostgreSQL"),
        (None, _) => Some("autorefresh starts"),
        _ => None,
    });
    let mut row = match (reason, row) {
        (None, Some(row)) => row,
        (Some(reason), previous) => {
            if previous.is_some() {
                ctx.status.resnapshots.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    group = group.as_str(),
                    "autorefresh of cache group \"{group}\": {reason}; loading the group again from a new slot"
                );
            }
            ctx.status.set_state("re-snapshotting");
            resnapshot(ctx, &mut client, &name)?
        }
        (None, None) => unreachable_state()?,
    };
    if let Some(state) = slot::slot_state(&mut client, &name)?
        && state.active_pid.is_some()
    {
        // A walsender of a pgtier that crashed (PostgreSQL has not noticed yet).
        client
            .execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", &[&name])
            .map_err(|e| slot::pg_error("ending a stale walsender", &e))?;
        wait_inactive(&mut client, &name)?;
    }
    let connection = ReplicationConnection::connect(&ctx.backend)?;
    let mut stream = connection.start_logical_with(&name, PgLsn(row.lsn), std::slice::from_ref(&publication), true)?;
    ctx.status.connected.store(true, Ordering::Relaxed);
    if *ctx.status.state.lock() == "reconnecting" {
        tracing::info!(group = ctx.entry.def.name.as_str(), "autorefresh of cache group streams from PostgreSQL again");
    }
    ctx.status.set_state("streaming");
    ctx.status.applied_lsn.fetch_max(row.lsn, Ordering::Relaxed);
    // Table ids change only when the group's tables are created again (a
    // new group, a new worker): resolved once per session.
    let layout = InstanceLayout::resolve(&ctx.db.catalog(), &ctx.entry.group)?;
    let parents = parent_lookups(&ctx.entry.group);
    let mut streamer = Streamer {
        ctx,
        client: &mut client,
        predicate: predicate.as_mut(),
        layout,
        parents,
        mappings: HashMap::new(),
        pending: None,
        acks: VecDeque::new(),
        flushed: row.lsn,
        last_status: Instant::now(),
        last_watch: Instant::now() - WATCH_INTERVAL,
        last_definition_check: Instant::now(),
    };
    let exit = streamer.stream(&mut stream, &mut row);
    let _ = stream.close();
    exit
}

fn claim(client: &mut postgres::Client, node: &NodeIdentity) -> Result<(), CacheError> {
    crate::backend_schema::ensure(client)?;
    crate::node::claim(client, node, false).map(|_| ())
}

/// A cached table changed in PostgreSQL: the group stops (its slot dropped).
fn drift_error(group: &str, drift: &Drift) -> CacheError {
    apply::definition_changed(group, &drift.table, &drift.reason)
}

fn wait_for_compiler(ctx: &Ctx) -> Option<Arc<dyn PredicateCompiler>> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let compiler = ctx.cache.upgrade()?.predicate_compiler();
        if compiler.is_some() || Instant::now() >= deadline || ctx.stop.load(Ordering::Relaxed) {
            return compiler;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn unreachable_state() -> Result<Progress, CacheError> {
    Err(CacheError::Autorefresh {
        sqlstate: "XX000",
        message: "autorefresh found no progress row and no reason to load".into(),
        hint: None,
    })
}

fn stopped() -> CacheError {
    CacheError::Autorefresh { sqlstate: "57P01", message: "the cache is shutting down".into(), hint: None }
}

fn wait_inactive(client: &mut postgres::Client, name: &str) -> Result<(), CacheError> {
    for _ in 0..100 {
        match slot::slot_state(client, name)? {
            Some(state) if state.active_pid.is_some() => std::thread::sleep(Duration::from_millis(50)),
            _ => return Ok(()),
        }
    }
    Err(CacheError::Autorefresh {
        sqlstate: "55006",
        message: format!("replication slot \"{name}\" stays active in another process"),
        hint: None,
    })
}

/// A new slot and the group loaded again from its snapshot: every cached
/// instance replaced (a DYNAMIC group: only those cached), the ones
/// PostgreSQL no longer has removed.
fn resnapshot(ctx: &Ctx, client: &mut postgres::Client, name: &str) -> Result<Progress, CacheError> {
    let group = ctx.entry.def.name.clone();
    progress::store(&ctx.db, &Progress { group: group.clone(), slot: name.to_owned(), lsn: 0, state: State::Loading })?;
    let mut connection = ReplicationConnection::connect(&ctx.backend)?;
    let created = slot::create_slot(client, &mut connection, name, true)?;
    let snapshot = created.snapshot.clone().ok_or_else(|| no_snapshot(name))?;
    {
        let cache = ctx.cache.upgrade().ok_or_else(stopped)?;
        let layout = InstanceLayout::resolve(&ctx.db.catalog(), &ctx.entry.group)?;
        let cached = layout.root_keys(&ctx.db)?;
        let only = ctx.entry.def.dynamic.then_some(cached.as_slice());
        cache.reload(
            &ctx.entry,
            &layout,
            ctx.entry.def.root_predicate.clone(),
            only,
            &cached,
            &LoadOptions::default(),
            Some(&snapshot),
        )?;
    }
    drop(connection);
    let row = Progress { group, slot: name.to_owned(), lsn: created.consistent_point.0, state: State::Streaming };
    progress::store(&ctx.db, &row)?;
    Ok(row)
}

/// A PostgreSQL transaction being received.
struct Pending {
    /// Made by pgtier's own write-through: skipped.
    own: bool,
    changes: Vec<Change>,
}

struct Streamer<'a> {
    ctx: &'a Ctx,
    client: &'a mut postgres::Client,
    predicate: Option<&'a mut Box<dyn RowTest>>,
    layout: InstanceLayout,
    parents: Vec<Option<Vec<usize>>>,
    mappings: HashMap<u32, Mapping>,
    pending: Option<Pending>,
    /// Applied transactions not yet acknowledged: (PostgreSQL end position,
    /// the engine commit's WAL position, None when nothing was written).
    acks: VecDeque<(u64, Option<pgtier_engine::Lsn>)>,
    /// What PostgreSQL was last told is flushed.
    flushed: u64,
    last_status: Instant,
    last_watch: Instant,
    last_definition_check: Instant,
}

impl Streamer<'_> {
    fn stream(&mut self, stream: &mut ReplicationStream, row: &mut Progress) -> Result<Exit, CacheError> {
        let own_prefix = crate::node::object(&self.ctx.node.name, crate::node::NodeObject::OriginPrefix);
        let status = self.ctx.status.clone();
        loop {
            if self.ctx.stop.load(Ordering::Relaxed) {
                return Ok(Exit::Stopped);
            }
            let mut reply = false;
            match stream.next_event(POLL)? {
                None => {}
                Some(ReplicationEvent::Begin { .. }) => {
                    self.pending = Some(Pending { own: false, changes: Vec::new() });
                }
                Some(ReplicationEvent::Origin { name, .. }) => {
                    if let Some(pending) = &mut self.pending {
                        pending.own = name.starts_with(&own_prefix);
                    }
                }
                Some(ReplicationEvent::Relation(relation)) => match map_relation(&self.ctx.entry.group, &relation) {
                    Ok(Some(mapping)) => {
                        self.mappings.insert(relation.oid, mapping);
                    }
                    Ok(None) => {}
                    Err(error) => return Ok(Exit::Fatal(error)),
                },
                Some(ReplicationEvent::Insert { relation, new }) => {
                    let pushed = self.push(relation, |table, mapping| {
                        Ok(Some(Change::Write {
                            table,
                            update: false,
                            old_key: None,
                            new: decode_tuple(table_of(self.ctx, table), mapping, &new)?,
                        }))
                    });
                    if let Err(error) = pushed {
                        return value_error(error);
                    }
                }
                Some(ReplicationEvent::Update { relation, old, new }) => {
                    let pushed = self.push(relation, |table, mapping| {
                        let def = table_of(self.ctx, table);
                        let old_key = match &old {
                            Some(old) => Some(key_values(mapping, &decode_tuple(def, mapping, old)?)),
                            None => None,
                        };
                        Ok(Some(Change::Write { table, update: true, old_key, new: decode_tuple(def, mapping, &new)? }))
                    });
                    if let Err(error) = pushed {
                        return value_error(error);
                    }
                }
                Some(ReplicationEvent::Delete { relation, old }) => {
                    let pushed = self.push(relation, |table, mapping| {
                        let old = decode_tuple(table_of(self.ctx, table), mapping, &old)?;
                        Ok(Some(Change::Delete { table, key: key_values(mapping, &old) }))
                    });
                    if let Err(error) = pushed {
                        return value_error(error);
                    }
                }
                Some(ReplicationEvent::Truncate { relations, .. }) => {
                    for relation in relations {
                        self.push(relation, |table, _| Ok(Some(Change::Truncate { table })))?;
                    }
                }
                Some(ReplicationEvent::Commit { end_lsn, commit_time_us, .. }) => {
                    if let Some(exit) = self.commit(end_lsn.0, commit_time_us, row)? {
                        return Ok(exit);
                    }
                }
                Some(ReplicationEvent::Keepalive { wal_end, reply_requested, .. }) => {
                    reply = reply_requested;
                    if self.pending.is_none() && self.acks.is_empty() {
                        // Nothing in flight: everything up to wal_end is looked through.
                        status.applied_lsn.fetch_max(wal_end.0, Ordering::Relaxed);
                        status.caught_up_us.store(pgtier_engine::wall_clock_us(), Ordering::Relaxed);
                        self.flushed_to(wal_end.0);
                        reply = true;
                    }
                }
                Some(ReplicationEvent::Type { .. } | ReplicationEvent::Message { .. }) => {}
            }
            self.ack_durable();
            let since = self.last_status.elapsed();
            let advanced = self.flushed > status.confirmed_lsn.load(Ordering::Relaxed);
            if reply || since >= STATUS_INTERVAL || (advanced && since >= STATUS_MIN_GAP) {
                let at = PgLsn(self.flushed);
                stream.send_status(at, at, at)?;
                status.confirmed_lsn.store(self.flushed, Ordering::Relaxed);
                self.last_status = Instant::now();
            }
            if self.last_watch.elapsed() >= WATCH_INTERVAL {
                self.last_watch = Instant::now();
                if let Some(exit) = self.watch()? {
                    return Ok(exit);
                }
            }
        }
    }

    /// Adds a change of `relation` to the transaction being received.
    fn push(
        &mut self,
        relation: u32,
        build: impl FnOnce(usize, &Mapping) -> Result<Option<Change>, CacheError>,
    ) -> Result<(), CacheError> {
        let Some(mapping) = self.mappings.get(&relation) else { return Ok(()) };
        let Some(pending) = &mut self.pending else {
            return Err(CacheError::Autorefresh {
                sqlstate: "08P01",
                message: "a change arrived outside a transaction".into(),
                hint: None,
            });
        };
        if pending.own {
            return Ok(());
        }
        if pending.changes.len() >= TXN_CHANGES_MAX {
            return Err(CacheError::Autorefresh {
                sqlstate: "54000",
                message: format!(
                    "a PostgreSQL transaction changes more than {TXN_CHANGES_MAX} rows of cache group \"{}\"",
                    self.ctx.entry.def.name
                ),
                hint: None,
            });
        }
        if let Some(change) = build(mapping.table, mapping)? {
            pending.changes.push(change);
        }
        Ok(())
    }

    /// The end of a PostgreSQL transaction: apply it (unless already
    /// applied before a restart, or pgtier's own).
    fn commit(&mut self, end_lsn: u64, commit_time_us: i64, row: &mut Progress) -> Result<Option<Exit>, CacheError> {
        let status = &self.ctx.status;
        let Some(pending) = self.pending.take() else {
            return Err(CacheError::Autorefresh {
                sqlstate: "08P01",
                message: "a commit arrived outside a transaction".into(),
                hint: None,
            });
        };
        if end_lsn <= row.lsn {
            return Ok(None);
        }
        if pending.own {
            status.own_txns_skipped.fetch_add(1, Ordering::Relaxed);
        }
        row.lsn = end_lsn;
        if pending.own || pending.changes.is_empty() {
            self.acks.push_back((end_lsn, None));
            return Ok(None);
        }
        let mut tries = 0;
        let ctx = self.ctx;
        let outcome = loop {
            let mut applier = TxnApplier {
                db: &ctx.db,
                entry: &ctx.entry,
                layout: &self.layout,
                parents: &self.parents,
                predicate: self.predicate.as_deref_mut(),
            };
            match applier.apply(&pending.changes, row, |keys| reload(ctx, keys)) {
                Err(CacheError::Engine(error)) if error.sqlstate() == "55P03" && tries < APPLY_TRIES => {
                    // An application holds a row (SELECT FOR UPDATE): it ends soon.
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                other => break other?,
            }
        };
        if outcome.resnapshot {
            return Ok(Some(Exit::Resnapshot(
                "a row arrived without a value PostgreSQL did not resend (unchanged TOAST) and the cache lacked it",
            )));
        }
        status.applied_txns.fetch_add(1, Ordering::Relaxed);
        status.applied_changes.fetch_add(outcome.applied, Ordering::Relaxed);
        status.skipped_changes.fetch_add(outcome.skipped, Ordering::Relaxed);
        let commit_unix_us = u64::try_from(commit_time_us.saturating_add(PG_EPOCH_UNIX_US)).unwrap_or(0);
        status.last_applied_commit_us.store(commit_unix_us, Ordering::Relaxed);
        status.lag.record(pgtier_engine::wall_clock_us().saturating_sub(commit_unix_us));
        self.acks.push_back((end_lsn, outcome.commit.and_then(|c| c.lsn)));
        Ok(None)
    }

    /// Moves the acknowledged position over every applied transaction the
    /// engine has made durable.
    fn ack_durable(&mut self) {
        let durable = self.ctx.db.wal_durable_end();
        while let Some(&(end, local)) = self.acks.front() {
            if local.is_some_and(|lsn| durable <= lsn) {
                break;
            }
            self.acks.pop_front();
            self.ctx.status.applied_lsn.fetch_max(end, Ordering::Relaxed);
            self.flushed_to(end);
        }
    }

    fn flushed_to(&mut self, lsn: u64) {
        self.flushed = self.flushed.max(lsn);
    }

    /// Looks at the slot: its retained WAL, whether PostgreSQL lost it.
    fn watch(&mut self) -> Result<Option<Exit>, CacheError> {
        let status = &self.ctx.status;
        status.backend_lsn.store(slot::current_wal(self.client)?.0, Ordering::Relaxed);
        let Some(state) = slot::slot_state(self.client, &status.slot)? else {
            return Ok(Some(Exit::Resnapshot("the slot is missing in PostgreSQL")));
        };
        status.retained_wal_bytes.store(state.retained_bytes, Ordering::Relaxed);
        if state.wal_status.as_deref() == Some("lost") {
            return Ok(Some(Exit::Resnapshot("PostgreSQL invalidated the slot (wal_status = 'lost')")));
        }
        if state.retained_bytes > self.ctx.tuning.get().autorefresh_retained_wal_max {
            return Ok(Some(Exit::Resnapshot("the slot retains more WAL than autorefresh_retained_wal_max")));
        }
        // A change that sends no relation message yet (no row of the table
        // changed since) is found here, within the interval.
        if self.last_definition_check.elapsed() >= DEFINITION_CHECK_INTERVAL {
            self.last_definition_check = Instant::now();
            if let Some(drift) = verify_group(self.client, &self.ctx.entry)? {
                return Ok(Some(Exit::Fatal(drift_error(&self.ctx.entry.def.name, &drift))));
            }
        }
        Ok(None)
    }
}

/// A value the cache cannot hold (a numeric NaN, bytes that do not decode)
/// would fail the same way at every retry: the group stops, loudly,
/// instead of looping; anything else is retried.
fn value_error(error: CacheError) -> Result<Exit, CacheError> {
    match error {
        CacheError::BadValue { .. } | CacheError::Backend(pgtier_backend::BackendError::Decode { .. }) => {
            Ok(Exit::Fatal(error))
        }
        other => Err(other),
    }
}

/// Instances that entered the group, read again from PostgreSQL before the
/// transaction that brought them commits (a failure leaves the transaction
/// unapplied, so it comes again).
fn reload(ctx: &Ctx, keys: &[Vec<Value>]) -> Result<(), CacheError> {
    if keys.is_empty() {
        return Ok(());
    }
    let cache = ctx.cache.upgrade().ok_or_else(stopped)?;
    cache.refresh_instances(&ctx.entry, keys)?;
    Ok(())
}

fn table_of(ctx: &Ctx, table: usize) -> &crate::group::GroupTable {
    &ctx.entry.group.tables[table]
}

/// The primary key of a decoded row (key columns are always sent).
fn key_values(mapping: &Mapping, row: &[Option<Value>]) -> Vec<Value> {
    mapping.key.iter().map(|&c| row[c].clone().unwrap_or(Value::Null)).collect()
}
