//! [`Cache`]: the cache groups of one database, and the one entry point the
//! SQL layer, the server and embedded applications call. It owns the group
//! registry (durable in the engine catalog; the entries are `registry`'s),
//! the backend connection parameters, the dynamic-load hook, the aging
//! thread and the write-through and autorefresh workers. It is the top of
//! the crate: it imports every mechanism, and the mechanisms reach it back
//! only through the traits they declare (implemented in `hosts`).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use pgtier_backend::catalog::ColumnDef;
use pgtier_backend::copy_out::quote_identifier;
use pgtier_backend::snapshot::Cancel;
use pgtier_backend::{BackendError, ConnectParams, connect_backend};
use pgtier_engine::{DataType, Database, EngineError, Origin, StreamStart, Value};
use postgres::Client;

use crate::aging::{self, AgerControl, AgingReport};
use crate::autorefresh::{self, AutorefreshConfig, AutorefreshStatus, PredicateCompiler, Worker};
use crate::awt::{self, Awt, AwtConfig, AwtStatus};
use crate::dynamic::{Dynamic, Ensured, TableHook};
use crate::error::CacheError;
use crate::fence::Fence;
use crate::flash::Flash;
use crate::group::{CacheGroup, GroupKind, GroupSpec, GroupTable, create_group_tables, define_group};
use crate::instance::{InstanceLayout, key_text};
use crate::load::{Admission, Existing, LoadOptions, LoadReport, RefreshReport, VerifyTally, load_admitting};
use crate::node::{self, Claim, NodeIdentity};
use crate::persist;
use crate::pool::Pool;
use crate::registry::{
    Admits, Demotion, GroupEntry, TableMap, UnloadReport, quote_literal, remove_instances, root_key_columns, table_map,
};
use crate::sequence::{DEFAULT_SEQUENCE_BLOCK, Sequences};
use crate::statement::{Aging, CreateGroup};
use crate::swt::{Swt, SwtParticipant, SwtStatus};
use crate::tuning::{LiveTuning, Tuning};

mod hosts;
mod local_rows;
mod shards;
mod tier;
mod views;
pub use shards::PartitionAccess;
pub use tier::TierInfo;
pub use views::{GroupInfo, GroupStats, LaneInfo, PropagationInfo, TableInfo};

/// Settings of the `[cache]` config section.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Memory all cache groups may use (bytes); None: no global budget.
    pub memory_budget: Option<u64>,
    /// Aging starts evicting above `high_watermark * budget` ...
    pub high_watermark: f64,
    /// ... and stops below `low_watermark * budget`.
    pub low_watermark: f64,
    /// How often the aging thread looks.
    pub aging_interval: Duration,
    /// PARALLEL when LOAD/REFRESH does not say.
    pub load_parallel: usize,
    /// AWT write-through: node name, apply connections, batching.
    pub awt: AwtConfig,
    /// READONLY groups' autorefresh: the slot's retained-WAL bound.
    pub autorefresh: AutorefreshConfig,
    /// Take the node name over from another data directory at open
    /// (`pgtier serve --takeover`; see `node.rs`): needs PostgreSQL then.
    pub takeover: bool,
    /// The epoch of the active/standby pair's lease this process holds
    /// (`lease::acquire`), 0 outside a pair: write-through sessions carry it
    /// and PostgreSQL refuses them once another member holds the lease.
    pub lease_epoch: i64,
    /// Values of a PostgreSQL sequence reserved at a time for the cached
    /// columns it generates (a CACHE n for this node; see sequence.rs).
    pub sequence_block: u32,
    /// The flash tier under memory (`[tier]`); None: evicted instances go away.
    pub tier: Option<pgtier_tier::TierConfig>,
    /// Clean, or write-back (`[tier] mode`).
    pub tier_mode: crate::flash::TierMode,
    /// `[tier] local_tables`: memory plain local tables may use before
    /// their idle rows move to flash (write-back mode; `local_rows.rs`).
    pub local_tables_budget: Option<u64>,
}

impl Default for CacheConfig {
    fn default() -> CacheConfig {
        CacheConfig {
            memory_budget: None,
            high_watermark: 0.9,
            low_watermark: 0.8,
            aging_interval: Duration::from_secs(1),
            load_parallel: 1,
            awt: AwtConfig::default(),
            autorefresh: AutorefreshConfig::default(),
            takeover: false,
            lease_epoch: 0,
            sequence_block: DEFAULT_SEQUENCE_BLOCK,
            tier: None,
            tier_mode: crate::flash::TierMode::Clean,
            local_tables_budget: None,
        }
    }
}

/// The root table of a group and its key columns, so the SQL layer can
/// evaluate an UNLOAD/REFRESH predicate on the cache:
/// `SELECT key_columns FROM table WHERE predicate`.
#[derive(Clone, Debug, PartialEq)]
pub struct RootKey {
    pub table: String,
    pub key_columns: Vec<String>,
}

/// Root keys per PostgreSQL query when a dynamic group is refreshed.
const REFRESH_KEYS_PER_QUERY: usize = 1000;

/// Least time between an aging round and one a miss runs (`help_aging`).
const AGING_HELP_INTERVAL_MS: u64 = 50;

/// How long a miss reuses the memory another miss measured (`memory_recent`).
const MEMORY_SAMPLE_US: u64 = 1000;

/// Memory past the budget by this factor makes a miss wait for the aging
/// round under way (`Cache::help_aging`).
const AGING_WAIT_ABOVE: f64 = 1.05;

/// The longest one miss waits for write-through (`Cache::hold_load`), and
/// how often it looks whether it may go on.
const LOAD_HOLD_MAX: Duration = Duration::from_secs(1);
const LOAD_HOLD_POLL: Duration = Duration::from_millis(2);

/// How often (µs) a group not held is measured by a miss that loads.
const LOAD_CHECK_US: u64 = 1000;

/// `(k1, k2) IN (('v1'::type1, 'v2'::type2), ...)` over the root key: text
/// literals cast to the PostgreSQL column types, so every key type works.
fn keys_predicate(root: &GroupTable, keys: &[Vec<Value>]) -> String {
    let columns: Vec<&ColumnDef> = root.def.primary_key.iter().filter_map(|name| root.source.column(name)).collect();
    let names: Vec<String> = columns.iter().map(|column| quote_identifier(&column.name)).collect();
    let tuples: Vec<String> = keys
        .iter()
        .map(|key| {
            let literals: Vec<String> = key
                .iter()
                .zip(&columns)
                .map(|(value, column)| format!("{}::{}", quote_literal(&value.to_string()), column.type_name))
                .collect();
            format!("({})", literals.join(", "))
        })
        .collect();
    if tuples.is_empty() {
        return "false".into();
    }
    format!("({}) IN ({})", names.join(", "), tuples.join(", "))
}

/// Claims `identity`'s node name in the PostgreSQL at `params` (schema made first).
fn claim_node(params: &ConnectParams, identity: &NodeIdentity, takeover: bool) -> Result<Claim, CacheError> {
    let mut client = connect_backend(params)?;
    crate::backend_schema::ensure(&mut client)?;
    node::claim(&mut client, identity, takeover)
}

fn report_claim(identity: &NodeIdentity, claim: &Claim) {
    match claim {
        Claim::TakenOver { previous } => {
            let previous = if previous.is_empty() { "a data directory from before incarnation ids" } else { previous };
            tracing::warn!(
                node = identity.name.as_str(),
                "took node \"{}\" over from {previous}; its rows stay in pgtier.awt_progress under that incarnation",
                identity.name
            );
        }
        Claim::Adopted => tracing::info!(
            node = identity.name.as_str(),
            "node \"{}\": the write-through rows PostgreSQL held from before incarnation ids are this data directory's",
            identity.name
        ),
        Claim::Owned => {}
    }
}

/// The cache groups of one database.
pub struct Cache {
    /// This cache, for the hooks it installs (they must not keep it alive).
    this: Weak<Cache>,
    db: Database,
    /// This pgtier in PostgreSQL: node name and data directory incarnation.
    identity: NodeIdentity,
    dynamic: Dynamic,
    /// Blocks of values reserved from PostgreSQL's sequences.
    sequences: Sequences,
    backend: Option<ConnectParams>,
    config: CacheConfig,
    /// The part of `config` a reload changes (`retune`): read from here,
    /// never from `config`, once the cache is open.
    tuning: Arc<LiveTuning>,
    groups: RwLock<BTreeMap<String, Arc<GroupEntry>>>,
    ager: Mutex<Option<JoinHandle<()>>>,
    ager_control: Arc<AgerControl>,
    /// Every group's tables by name (rebuilt when groups change).
    tables_by_name: RwLock<Arc<TableMap>>,
    /// Tables of groups partitioned over nodes (`shards`), and whether there are any.
    shard_tables: RwLock<Arc<shards::ShardTables>>,
    any_sharded: std::sync::atomic::AtomicBool,
    awt: Mutex<Option<Awt>>,
    /// SWT write-through: the commit participant of SWT tables.
    swt: Arc<Swt>,
    swt_participant: Arc<dyn pgtier_engine::CommitParticipant>,
    /// One aging round at a time (the thread's, `age_now`'s and the
    /// misses' that help it).
    aging_round: Mutex<()>,
    /// When the last aging round began (the thread's or a miss's), in ms since `opened`.
    aging_round_began_ms: std::sync::atomic::AtomicU64,
    /// The database's memory as a miss last measured it, and when (µs
    /// since `opened`): see `memory_recent`.
    memory_seen: std::sync::atomic::AtomicU64,
    memory_seen_us: std::sync::atomic::AtomicU64,
    /// Bytes aging rounds evicted that garbage collection has not freed
    /// yet: rounds and misses measuring memory count them as gone.
    uncollected: aging::Uncollected,
    opened: Instant,
    /// READONLY groups' autorefresh workers, by group.
    autorefresh: Mutex<BTreeMap<String, Worker>>,
    /// Evaluates groups' WHERE on rows from PostgreSQL (installed by the SQL layer).
    predicate_compiler: RwLock<Option<Arc<dyn PredicateCompiler>>>,
    /// Held through a READONLY group's first LOAD (slot, snapshot, load).
    autorefresh_first_load: Mutex<()>,
    /// The flash tier under memory (clean mode; `flash.rs`).
    flash: Flash,
    /// Rows of plain local tables on that tier (`local_rows.rs`).
    local_rows: crate::local_rows::LocalRows,
}

impl Cache {
    /// Opens the cache over `db`: restores the groups defined earlier,
    /// installs the dynamic-load hooks and starts aging. `backend` None:
    /// groups already defined keep answering, anything that needs
    /// PostgreSQL fails with 08001 and a hint to configure `[backend]`.
    pub fn open(db: Database, backend: Option<ConnectParams>, config: CacheConfig) -> Result<Arc<Cache>, CacheError> {
        node::validate_node_name(&config.awt.node)?;
        let incarnation = db.incarnation();
        let identity = NodeIdentity {
            name: config.awt.node.clone(),
            incarnation: incarnation.id.clone(),
            adopted: incarnation.adopted,
            epoch: config.lease_epoch,
        };
        if config.takeover {
            let params = backend.as_ref().ok_or(CacheError::NoBackend)?;
            report_claim(&identity, &claim_node(params, &identity, true)?);
        }
        // Before anything writes: its records are reused only at the WAL
        // position of the clean close that wrote its index.
        let flash = Flash::open(config.tier.clone(), config.tier_mode, &db);
        let local_tables_budget = config.local_tables_budget;
        let mut groups = BTreeMap::new();
        for (def, group, accepted, shards) in persist::restore(&db.catalog())? {
            groups.insert(def.name.clone(), Arc::new(GroupEntry::new(def, group, accepted, shards)));
        }
        let pool = Arc::new(Pool::new(backend.clone()));
        let dynamic = Dynamic::new(pool.clone());
        let sequences = Sequences::new(pool, config.sequence_block);
        let cache = Arc::new_cyclic(|this: &Weak<Cache>| {
            let swt = Arc::new(Swt::new(this.clone(), identity.clone()));
            Cache {
                this: this.clone(),
                identity,
                swt_participant: Arc::new(SwtParticipant(swt.clone())),
                swt,
                db,
                dynamic,
                sequences,
                backend,
                tuning: Arc::new(LiveTuning::new(&config)),
                config,
                groups: RwLock::new(groups),
                ager: Mutex::new(None),
                ager_control: Arc::default(),
                tables_by_name: RwLock::new(Arc::default()),
                shard_tables: RwLock::new(Arc::default()),
                any_sharded: std::sync::atomic::AtomicBool::new(false),
                awt: Mutex::new(None),
                aging_round: Mutex::new(()),
                aging_round_began_ms: std::sync::atomic::AtomicU64::new(0),
                memory_seen: std::sync::atomic::AtomicU64::new(0),
                memory_seen_us: std::sync::atomic::AtomicU64::new(0),
                uncollected: aging::Uncollected::default(),
                opened: Instant::now(),
                autorefresh: Mutex::new(BTreeMap::new()),
                predicate_compiler: RwLock::new(None),
                autorefresh_first_load: Mutex::new(()),
                local_rows: crate::local_rows::LocalRows::new(local_tables_budget),
                flash,
            }
        });
        for entry in cache.groups.read().values() {
            cache.install(entry);
        }
        // Before anything reads a local table's stubs.
        cache.attach_local_rows();
        let local_records = cache.reconcile_flash()?;
        cache.reconcile_local_rows(Some(local_records))?;
        cache.groups_changed()?;
        let ager = aging::spawn(Arc::<Cache>::downgrade(&cache), cache.ager_control.clone(), cache.tuning.clone())
            .map_err(|error| CacheError::InvalidSpec {
                group: String::new(),
                reason: format!("cannot start the aging thread: {error}"),
            })?;
        *cache.ager.lock() = Some(ager);
        for group in autorefresh::restore(&cache.db, cache.backend.as_ref(), &cache.config.awt.node)? {
            if let Ok(entry) = cache.entry(&group)
                && entry.def.autorefresh
            {
                cache.start_autorefresh(entry)?;
            }
        }
        Ok(cache)
    }

    /// Installs what evaluates a READONLY group's WHERE on rows arriving
    /// from PostgreSQL (the SQL layer's; without it such groups cannot autorefresh).
    pub fn set_predicate_compiler(&self, compiler: Arc<dyn PredicateCompiler>) {
        *self.predicate_compiler.write() = Some(compiler);
    }

    fn predicate_compiler(&self) -> Option<Arc<dyn PredicateCompiler>> {
        self.predicate_compiler.read().clone()
    }

    /// Starts the autorefresh worker of READONLY group `entry` (no-op
    /// without a backend: it starts at the next open with one).
    fn start_autorefresh(&self, entry: Arc<GroupEntry>) -> Result<(), CacheError> {
        let Some(backend) = self.backend.clone() else { return Ok(()) };
        let mut workers = self.autorefresh.lock();
        if workers.contains_key(&entry.def.name) {
            return Ok(());
        }
        let name = entry.def.name.clone();
        let worker = autorefresh::spawn(
            self.this.clone(),
            self.db.clone(),
            entry,
            backend,
            &self.identity,
            self.tuning.clone(),
        )?;
        workers.insert(name, worker);
        Ok(())
    }

    /// Where each READONLY group's autorefresh stands (`pgtier_cache_autorefresh`).
    pub fn autorefresh_status(&self) -> Vec<Arc<AutorefreshStatus>> {
        self.autorefresh.lock().values().map(|worker| worker.status.clone()).collect()
    }

    /// Waits until group `name` holds every change PostgreSQL committed
    /// before this call; false after `timeout` (or when it does not
    /// autorefresh). The target is PostgreSQL's WAL insert position: with
    /// `synchronous_commit = off` a commit may not be written yet.
    pub fn wait_autorefreshed(&self, name: &str, timeout: Duration) -> Result<bool, CacheError> {
        let Some(status) = self.autorefresh.lock().get(name).map(|w| w.status.clone()) else { return Ok(false) };
        let mut client = self.connect()?;
        let target = autorefresh::current_wal(&mut client)?.0;
        // A keepalive carries the position once nothing is in flight; ask for one.
        client.batch_execute("SELECT pg_logical_emit_message(false, 'pgtier', '')").ok();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if status.applied_lsn.load(Ordering::Relaxed) >= target {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(false)
    }

    /// After groups were created or dropped: the table map, and AWT
    /// propagation running exactly while an AWT group exists (its commit
    /// stream consumer retains WAL until propagated; with no AWT group left it
    /// is removed, so nothing pins WAL for nothing).
    fn groups_changed(&self) -> Result<(), CacheError> {
        let groups = self.groups.read();
        *self.tables_by_name.write() = Arc::new(table_map(groups.values()));
        self.shard_tables_changed(&groups.values().cloned().collect::<Vec<_>>());
        let any_awt = groups.values().any(|entry| entry.def.kind == GroupKind::Awt);
        let any_swt = groups.values().any(|entry| entry.def.kind == GroupKind::Swt);
        drop(groups);
        if any_swt && self.backend.is_some() {
            // Commits wait for the slots to be read and in-doubt ones resolved.
            self.swt.resolve_in_background();
        }
        let registered = self.db.consumers().iter().any(|c| c.name == awt::CONSUMER);
        let mut awt = self.awt.lock();
        if any_awt {
            // Registered even without a backend: the WAL waits for one.
            if !registered {
                self.db.register_consumer(awt::CONSUMER, StreamStart::Now)?;
            }
            if awt.is_none() && self.backend.is_some() {
                let context = awt::SessionContext {
                    config: self.config.awt.clone(),
                    tuning: self.tuning.clone(),
                    node: self.identity.clone(),
                };
                let started = Awt::start(self.this.clone(), context, self.awt_acked()).map_err(|error| {
                    CacheError::InvalidSpec {
                        group: String::new(),
                        reason: format!("cannot start write-through: {error}"),
                    }
                })?;
                *awt = Some(started);
            }
        } else {
            if let Some(running) = awt.take() {
                running.stop();
            }
            if registered {
                self.db.unregister_consumer(awt::CONSUMER)?;
            }
        }
        Ok(())
    }

    /// Where AWT's consumer stands in the WAL (stored position).
    fn awt_acked(&self) -> pgtier_engine::Lsn {
        self.db.consumers().into_iter().find(|c| c.name == awt::CONSUMER).map_or(pgtier_engine::Lsn(0), |c| c.position)
    }

    /// Whether `entry`'s dirty marks cover every transaction committed so
    /// far: always for groups that do not write through; for AWT groups once
    /// write-through has read up to now (waiting briefly). False while it is
    /// not running (no backend, PostgreSQL unreachable).
    fn dirty_current(&self, entry: &GroupEntry) -> Result<bool, CacheError> {
        if entry.def.kind != GroupKind::Awt {
            return Ok(true);
        }
        let Some(status) = self.propagation() else { return Ok(false) };
        awt::wait_read(&self.db, &status, Duration::from_secs(2))
    }

    /// Loads over cached data only when unpropagated changes are known.
    fn require_dirty_current(&self, entry: &GroupEntry) -> Result<(), CacheError> {
        if self.dirty_current(entry)? {
            return Ok(());
        }
        // Why it is not running, when it knows (PostgreSQL out of
        // replication origins after killed nodes left theirs, say).
        let cause = self.propagation().and_then(|status| status.last_error.lock().clone());
        Err(CacheError::WriteThroughBehind { group: entry.def.name.clone(), cause })
    }

    /// A position below every AWT commit PostgreSQL does not have yet (a
    /// running load registers it before its snapshot: marks above it stay).
    fn awt_applied_floor(&self) -> u64 {
        self.propagation().map_or(self.awt_acked().0, |status| status.position.load(Ordering::Relaxed))
    }

    /// Every SWT commit numbered below it is committed in PostgreSQL now.
    fn swt_floor(&self) -> u64 {
        self.swt.floor()
    }

    /// Every group now.
    /// The flash store while the tier is enabled.
    pub(crate) fn flash_store(&self) -> Option<Arc<pgtier_tier::FlashStore>> {
        self.flash.store()
    }

    pub(crate) fn local_rows(&self) -> &crate::local_rows::LocalRows {
        &self.local_rows
    }

    pub(crate) fn group_entries(&self) -> Vec<Arc<GroupEntry>> {
        self.groups.read().values().cloned().collect()
    }

    /// This pgtier in PostgreSQL: its node name and data directory incarnation.
    pub fn identity(&self) -> &NodeIdentity {
        &self.identity
    }

    /// ALTER CACHE GROUP name ACCEPT DEFINITION: takes PostgreSQL's current
    /// definitions of the group's tables when what the cache mirrors of them
    /// (columns, their types and NOT NULL, the primary key) is unchanged: a
    /// constraint, default or index added there. Held write-through resumes
    /// (within `definition_check_interval`), SWT commits go again, loads
    /// accept the tables. Returns the tables whose accepted definition moved.
    /// 55000 when a mirrored part changed: undo it in PostgreSQL, or DROP and
    /// CREATE the group (its transactions not yet in PostgreSQL are lost).
    pub fn accept_definition(&self, name: &str) -> Result<Vec<String>, CacheError> {
        let entry = self.entry(name)?;
        self.forget_flash(&entry)?;
        let names: Vec<String> = entry.group.tables.iter().map(|t| t.source.name.to_string()).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let now = match pgtier_backend::catalog::import_tables(&mut self.connect()?, &refs) {
            Ok(now) => now,
            Err(BackendError::TableNotFound { name: table }) => {
                return Err(CacheError::DefinitionDrift {
                    group: name.to_owned(),
                    table,
                    reason: "no longer exists in PostgreSQL".into(),
                });
            }
            Err(error) => return Err(error.into()),
        };
        let previous = entry.accepted.lock().clone();
        let (mut accepted, mut moved) = (Vec::new(), Vec::new());
        for (index, (table, current)) in entry.group.tables.iter().zip(&now).enumerate() {
            if let Some(change) = crate::drift::mirrored_change(&table.source, current) {
                return Err(CacheError::DefinitionDrift {
                    group: name.to_owned(),
                    table: table.source.name.to_string(),
                    reason: format!("changed in PostgreSQL: {change}"),
                });
            }
            if previous.get(index) != Some(&current.fingerprint()) {
                moved.push(table.source.name.to_string());
            }
            accepted.push(current.fingerprint());
        }
        // Durable before it counts: a restart must not hold the group again.
        let text = persist::root_annotation(&entry.def, &entry.group, &accepted, entry.shards.as_deref())?;
        let root = self
            .db
            .catalog()
            .table_by_name(&entry.group.root().def.name)
            .map(|t| t.id)
            .ok_or_else(|| CacheError::UndefinedGroup { group: name.to_owned() })?;
        let mut txn = self.db.begin()?;
        txn.set_annotation(root, Some(text))?;
        txn.commit()?;
        *entry.accepted.lock() = accepted;
        *entry.tokens.lock() = None;
        self.swt.status.drifted.lock().remove(name);
        Ok(moved)
    }

    /// TAKEOVER CACHE NODE: makes the node name this data directory's in
    /// PostgreSQL, whoever owned it (`node.rs`). Write-through starts within
    /// seconds; the previous owner's rows stay under its incarnation.
    pub fn takeover(&self) -> Result<Claim, CacheError> {
        let params = self.backend.as_ref().ok_or(CacheError::NoBackend)?;
        let claim = claim_node(params, &self.identity, true)?;
        report_claim(&self.identity, &claim);
        Ok(claim)
    }

    /// Removes the cached instances of `keys` (`registry::remove_instances`),
    /// with this cache's view of whether the group's marks are current.
    fn remove_instances(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        keys: &[Vec<Value>],
        gone: Option<Admits<'_>>,
        demotion: Option<&dyn Demotion>,
    ) -> Result<UnloadReport, CacheError> {
        remove_instances(&self.db, &|entry| self.dirty_current(entry), entry, layout, keys, gone, demotion)
    }

    /// Bytes of WAL written that write-through has not yet processed.
    pub fn awt_backlog_bytes(&self) -> u64 {
        let position = match self.propagation() {
            Some(status) => status.position.load(Ordering::Relaxed),
            None => self.awt_acked().0,
        };
        self.db.wal_end().0.saturating_sub(position)
    }

    /// The group and index of table `name`, if a group holds it.
    fn table_of_group(&self, name: &str) -> Option<(Arc<GroupEntry>, usize)> {
        self.tables_by_name.read().get(name).cloned()
    }

    fn backend(&self) -> Option<&ConnectParams> {
        self.backend.as_ref()
    }

    /// Waits until SWT groups take commits: both sides' transaction
    /// counters read and every transaction whose outcome was in doubt
    /// resolved from PostgreSQL (at open, after a crash); false after `timeout`.
    pub fn wait_swt_resolved(&self, timeout: Duration) -> bool {
        self.swt.wait_ready(timeout)
    }

    /// SWT write-through figures, while an SWT group exists.
    pub fn swt_status(&self) -> Option<Arc<SwtStatus>> {
        let any_swt = self.groups.read().values().any(|entry| entry.def.kind == GroupKind::Swt);
        any_swt.then(|| self.swt.status.clone())
    }

    /// Write-through figures, when AWT propagation runs.
    pub fn propagation(&self) -> Option<Arc<AwtStatus>> {
        self.awt.lock().as_ref().map(|awt| awt.status.clone())
    }

    /// Waits until everything committed before this call has been
    /// propagated (or was not for PostgreSQL); false after `timeout`.
    pub fn wait_propagated(&self, timeout: Duration) -> bool {
        let Some(status) = self.propagation() else { return true };
        // The written end, not the durable one: with asynchronous commits the
        // last transactions become durable (and readable) a moment later.
        let end = self.db.stats().wal_end.0;
        awt::wait_position(&status, end, timeout)
    }

    /// The live part of `[cache]` in force.
    pub fn tuning(&self) -> Tuning {
        self.tuning.get()
    }

    /// Changes the live part of `[cache]` (a configuration reload): the
    /// next aging round, miss, AWT write, batch and slot check use it.
    /// Checked whole first; a bad value changes nothing. The aging thread
    /// is woken, so a lowered budget or a shorter interval applies at once.
    pub fn retune(&self, tuning: Tuning) -> Result<(), CacheError> {
        self.tuning.set(tuning)?;
        self.ager_control.wake();
        Ok(())
    }

    /// Runs one aging round now (the aging thread runs one every
    /// `aging_interval`): expired instances and, above the high watermark,
    /// least recently used ones go.
    pub fn age_now(&self) -> Result<AgingReport, CacheError> {
        let report = {
            let _round = self.aging_round.lock();
            self.aging_round_began_ms.store(self.millis_open(), Ordering::Relaxed);
            // A new epoch: reads from now on are newer than everything
            // before, and only what was used before it may go.
            let epoch = self.db.advance_access_tick();
            let report = self.age_round(epoch);
            // Rows of local tables not used during the last whole interval.
            if let Err(error) = self.age_local_rows(epoch.saturating_sub(1)) {
                tracing::warn!("flash tier: rows of local tables did not move this round: {error}");
            }
            report
        };
        // The next round measures memory: it should find this round's
        // deletes freed, not evict for them again (memory swung between
        // 0.5x and 1.5x the budget under 8 promoting sessions, whose open
        // snapshots hold collection back for milliseconds at a time). Waited
        // for outside the round's lock, which misses far past the budget
        // wait on; until it is done they count the deletes as gone.
        if self.uncollected.bytes() > 0 {
            self.db.collect_garbage_committed(aging::GC_WAIT_MAX);
            self.uncollected.check(&self.db);
        }
        self.fit_recent_reads();
        report
    }

    /// Sizes the flash tier's memory of answered reads for the instances
    /// memory now holds in the groups that use flash.
    fn fit_recent_reads(&self) {
        if !self.flash.enabled() {
            return;
        }
        let catalog = self.db.catalog();
        let instances: u64 = self
            .group_entries()
            .iter()
            .filter(|entry| self.flash.accepts(entry))
            .filter_map(|entry| catalog.table_by_name(&entry.group.root().def.name))
            .map(|root| self.db.table_rows(root.id))
            .sum();
        self.flash.fit_recent_reads(instances);
    }

    /// One round (the caller holds `aging_round`), sparing instances used
    /// at or after the access tick `spare_from`.
    fn age_round(&self, spare_from: u32) -> Result<AgingReport, CacheError> {
        let tuning = self.tuning.get();
        let limits =
            aging::Watermarks { budget: tuning.memory_budget, high: tuning.high_watermark, low: tuning.low_watermark };
        let uncollected = self.uncollected.check(&self.db);
        let report = aging::age_round(self, &self.group_entries(), &limits, spare_from, uncollected)?;
        self.uncollected.add(&self.db, report.freed_bytes);
        Ok(report)
    }

    /// Turns on the engine seams a group uses: the write guard (READONLY:
    /// no application writes; AWT: none past the retained-WAL bound), access
    /// stamps for LRU aging, the miss hook on every table of a dynamic group
    /// that carries the root key.
    fn install(&self, entry: &GroupEntry) {
        let catalog = self.db.catalog();
        let guard: Option<Arc<dyn pgtier_engine::WriteGuard>> = match entry.def.kind {
            GroupKind::ReadOnly => Some(Arc::new(ReadOnlyGuard { group: entry.def.name.clone() })),
            GroupKind::Awt => Some(Arc::new(AwtGuard {
                cache: self.this.clone(),
                group: entry.def.name.clone(),
                tuning: self.tuning.clone(),
            })),
            GroupKind::Swt => None,
        };
        let participant = (entry.def.kind == GroupKind::Swt).then(|| self.swt_participant.clone());
        for table in &entry.group.tables {
            if let Some(schema) = catalog.table_by_name(&table.def.name) {
                self.db.set_write_guard(schema.id, guard.clone());
                self.db.set_commit_participant(schema.id, participant.clone());
            }
        }
        if entry.def.aging == Aging::Lru {
            for table in &entry.group.tables {
                if let Some(schema) = catalog.table_by_name(&table.def.name) {
                    self.db.set_access_tracking(schema.id, true);
                }
            }
        }
        if !entry.def.dynamic {
            return;
        }
        let hooked: Vec<(pgtier_engine::TableId, Vec<usize>)> = entry
            .group
            .tables
            .iter()
            .zip(root_key_columns(&entry.group))
            .filter_map(|(table, columns)| Some((catalog.table_by_name(&table.def.name)?.id, columns?)))
            .collect();
        let covers = Arc::new(hooked.clone());
        for (table, root_key_columns) in hooked {
            let hook = TableHook {
                cache: self.this.clone(),
                group: entry.def.name.clone(),
                root_key_columns,
                covers: covers.clone(),
            };
            self.db.set_miss_hook(table, Some(Arc::new(hook)));
        }
    }

    fn uninstall(&self, entry: &GroupEntry) {
        let catalog = self.db.catalog();
        for table in &entry.group.tables {
            if let Some(schema) = catalog.table_by_name(&table.def.name) {
                self.db.set_miss_hook(schema.id, None);
                self.db.set_write_guard(schema.id, None);
                self.db.set_commit_participant(schema.id, None);
                self.db.set_access_tracking(schema.id, false);
            }
        }
    }

    /// Makes sure the instance with root key `root_key` is cached when
    /// PostgreSQL has it (what a miss on a dynamic group does; also usable
    /// to prefetch). Ok(true) when this call loaded it.
    pub fn ensure_instance(&self, group: &str, root_key: &[Value]) -> Result<bool, CacheError> {
        self.ensure_pinned(group, root_key).map(|ensured| ensured.loaded)
    }

    /// `ensure_instance` that also pins the instance: no eviction of it
    /// begins until the pin is dropped (what a miss hands its transaction).
    pub(crate) fn ensure_pinned(&self, group: &str, root_key: &[Value]) -> Result<Ensured, CacheError> {
        let entry = self.entry(group)?;
        let layout = InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
        self.ensure_pinned_in(&entry, &layout, root_key)
    }

    /// `ensure_pinned` for a group and layout the caller resolved.
    pub(crate) fn ensure_pinned_in(
        &self,
        entry: &Arc<GroupEntry>,
        layout: &InstanceLayout,
        root_key: &[Value],
    ) -> Result<Ensured, CacheError> {
        // A key another node owns is never loaded here (`shard.rs`).
        self.check_owned_key(entry, root_key)?;
        // Before the load: the round makes room for it.
        self.help_aging();
        self.dynamic.ensure(self, entry, layout, root_key)
    }

    /// Write-through's backpressure on loads: while the group is held
    /// (`GroupEntry::loads_held`: past its budget while write-through is
    /// behind, so aging may not evict), the miss waits, measuring every
    /// `LOAD_HOLD_POLL`, until the aging thread has evicted what
    /// write-through sent meanwhile. Without it an AWT group's memory grew
    /// with the backlog (4x its budget at 8 sessions of `bench
    /// jpetstore`). The wait is bounded by `LOAD_HOLD_MAX`: write-through
    /// stopped (PostgreSQL down) slows misses, it does not stop them.
    pub(crate) fn hold_load(&self, entry: &GroupEntry) {
        if !entry.loads_held.load(Ordering::Relaxed) {
            // Not only the aging thread decides: its rounds come seconds
            // apart while write-through is behind (each eviction batch
            // waits for it to read up first). One miss per group and
            // `LOAD_CHECK_US` measures.
            let now_us = u64::try_from(self.opened.elapsed().as_micros()).unwrap_or(u64::MAX);
            let checked_us = entry.loads_checked_us.load(Ordering::Relaxed);
            if now_us < checked_us.saturating_add(LOAD_CHECK_US)
                || entry
                    .loads_checked_us
                    .compare_exchange(checked_us, now_us, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                || !self.holds_loads_now(entry)
            {
                return;
            }
            entry.loads_held.store(true, Ordering::Relaxed);
        }
        let started = Instant::now();
        // The aging thread evicts what write-through sends meanwhile; the
        // waiters do not run rounds themselves, whose evictions of an AWT
        // group first wait (up to 2 s) for write-through to read up.
        self.ager_control.wake();
        while started.elapsed() < LOAD_HOLD_MAX {
            // Measured here, not taken from a round's plan: what a round
            // evicts, the misses it would let go promote again at once.
            if !self.holds_loads_now(entry) {
                entry.loads_held.store(false, Ordering::Relaxed);
                break;
            }
            std::thread::sleep(LOAD_HOLD_POLL);
        }
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        entry.counters.loads_held.fetch_add(1, Ordering::Relaxed);
        entry.counters.load_hold_us.fetch_add(micros, Ordering::Relaxed);
    }

    /// The database's memory, measured at most once per
    /// `MEMORY_SAMPLE_US` for all misses: a measure reads every table's
    /// counters, and with every miss measuring, 8 promoting sessions spent
    /// 4 % of the machine on it.
    fn memory_recent(&self) -> u64 {
        let now_us = u64::try_from(self.opened.elapsed().as_micros()).unwrap_or(u64::MAX);
        let seen_us = self.memory_seen_us.load(Ordering::Relaxed);
        if seen_us != 0 && now_us < seen_us.saturating_add(MEMORY_SAMPLE_US) {
            return self.memory_seen.load(Ordering::Relaxed);
        }
        let used = self.db.memory_total();
        self.uncollected.check(&self.db);
        self.memory_seen.store(used, Ordering::Relaxed);
        self.memory_seen_us.store(now_us.max(1), Ordering::Relaxed);
        used
    }

    /// Milliseconds since the cache opened (when the last aging round began).
    fn millis_open(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A miss finds memory past the budget: it runs an aging round itself
    /// before it loads, as a committer helps GC that lags.
    /// The aging thread is one thread among the sessions; when many of them
    /// promote from flash at once it falls behind, and memory would grow
    /// past the budget without bound. Rounds run one at a time. Just past
    /// the budget a miss never waits for another's round, and helps at most
    /// once every `AGING_HELP_INTERVAL_MS` (a round's deletes need a moment
    /// to be collected before memory shows them gone). Past it by more than
    /// `AGING_WAIT_ABOVE`, aging is losing: the miss waits for the round
    /// under way, so promotions go no faster than evictions (8 sessions
    /// promoting from flash held 1.6x the budget before). A round evicts no
    /// instance a transaction holds and waits for no row lock, so the miss
    /// may wait with its own transaction's locks held. Unlike the aging
    /// thread's rounds it spares the epoch before its own as well.
    fn help_aging(&self) {
        let Some(budget) = self.tuning.get().memory_budget else { return };
        let used = self.memory_recent().saturating_sub(self.uncollected.bytes());
        if used <= budget {
            return;
        }
        // Whether a round began less than `AGING_HELP_INTERVAL_MS` ago.
        let recent = || {
            let last_ms = self.aging_round_began_ms.load(Ordering::Relaxed);
            self.millis_open() < last_ms.saturating_add(AGING_HELP_INTERVAL_MS)
        };
        let _round = if used as f64 > budget as f64 * AGING_WAIT_ABOVE {
            let round = self.aging_round.lock();
            // Waiting for the round under way was the point; another right
            // after it would measure its deletes before they are collected.
            if recent() || self.db.memory_total().saturating_sub(self.uncollected.bytes()) <= budget {
                return;
            }
            round
        } else {
            if recent() {
                return;
            }
            let Some(round) = self.aging_round.try_lock() else { return };
            round
        };
        self.aging_round_began_ms.store(self.millis_open(), Ordering::Relaxed);
        // A new epoch, as every round starts, but what was used in the one
        // that ends stays too: these rounds come every few tens of
        // milliseconds while sessions promote, and an instance the sessions
        // read just before one would otherwise rank with those unused for
        // a whole epoch (a hot instance went that way). A failed round (a
        // conflict, shutting down) is the aging thread's to retry; this
        // miss loads either way.
        let spare_from = self.db.access_tick();
        self.db.advance_access_tick();
        let _ = self.age_round(spare_from);
    }

    /// `aging::holds_loads` by the memory and write-through now.
    fn holds_loads_now(&self, entry: &GroupEntry) -> bool {
        let total = self.db.memory_total().saturating_sub(self.uncollected.bytes());
        let budget = self.tuning.get().memory_budget;
        aging::holds_loads(entry, self.group_memory(entry), total, budget, self.flash.accepts_dirty(entry), || {
            self.write_through_behind(entry)
        })
    }

    /// See `AgingHost::write_through_behind`. Not waiting: a miss asks it
    /// every `LOAD_HOLD_POLL` while held.
    fn write_through_behind(&self, entry: &GroupEntry) -> bool {
        if entry.marks.any_pending() {
            return true;
        }
        if entry.def.kind != GroupKind::Awt {
            return false;
        }
        // Not running (no backend, PostgreSQL unreachable): nothing of the
        // group can be evicted until it has read up.
        let Some(status) = self.propagation() else { return true };
        !status.connected.load(Ordering::Acquire)
            || status.read.load(Ordering::Acquire) < self.db.application_commit_end().0
    }

    /// The memory of the group's tables (`pgtier_cache_stats.memory_bytes`).
    fn group_memory(&self, entry: &GroupEntry) -> u64 {
        let catalog = self.db.catalog();
        let tables = entry.group.tables.iter().filter_map(|table| catalog.table_by_name(&table.def.name));
        tables.map(|table| self.db.table_memory(table.id)).sum()
    }

    /// What LOAD, REFRESH, UNLOAD and ACCEPT DEFINITION do first: the
    /// group's durable records (write-back) back into memory, where those
    /// statements see them, and its clean records forgotten.
    fn forget_flash(&self, entry: &GroupEntry) -> Result<(), CacheError> {
        let layout = InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
        self.flash.restore_durable(&self.db, entry, &layout)?;
        self.flash.forget_group(layout.root().id.0);
        Ok(())
    }

    /// Whether the instance of `root_key` of group `group` is cached now (a fresh snapshot).
    pub fn instance_cached(&self, group: &str, root_key: &[Value]) -> Result<bool, CacheError> {
        let entry = self.entry(group)?;
        let layout = InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
        let Some(key) = layout.normalize_root_key(root_key) else { return Ok(false) };
        layout.root_cached(&self.db, &key)
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The next value of PostgreSQL's sequence `sequence` (a cached
    /// column's [`crate::KeyDefault::sequence`], or the name a session gave
    /// nextval), from this cache's reserved block; see sequence.rs.
    pub fn sequence_nextval(&self, sequence: &str) -> Result<i64, CacheError> {
        self.sequences.next(sequence)
    }

    fn connect(&self) -> Result<Client, CacheError> {
        let Some(params) = &self.backend else { return Err(CacheError::NoBackend) };
        Ok(connect_backend(params)?)
    }

    fn entry(&self, name: &str) -> Result<Arc<GroupEntry>, CacheError> {
        self.groups.read().get(name).cloned().ok_or_else(|| CacheError::UndefinedGroup { group: name.to_owned() })
    }

    /// CREATE CACHE GROUP: imports the tables from PostgreSQL and creates them in the cache.
    pub fn create_group(&self, def: &CreateGroup) -> Result<(), CacheError> {
        if self.groups.read().contains_key(&def.name) {
            return Err(CacheError::DuplicateGroup { group: def.name.clone() });
        }
        let spec = GroupSpec {
            name: def.name.clone(),
            root: def.root.clone(),
            children: def.children.clone(),
            kind: def.kind,
        };
        let mut client = self.connect()?;
        // The first group a data directory defines claims the node name:
        // another directory's positions are never taken for this one's.
        crate::backend_schema::ensure(&mut client)?;
        node::claim(&mut client, &self.identity, false)?;
        let mut group = define_group(&mut client, &spec)?;
        check_aging(def, &group)?;
        crate::flash::check_policy(def)?;
        let shards = crate::shard::read(&mut client, &def.name)?;
        if let Some(map) = &shards {
            shards::check_shardable(def, &group, map, &self.identity.name)?;
        }
        persist::annotate(def, &mut group, shards.as_ref())?;
        let mut groups = self.groups.write();
        if groups.contains_key(&def.name) {
            return Err(CacheError::DuplicateGroup { group: def.name.clone() });
        }
        for table in &group.tables {
            if let Some(other) =
                groups.values().find(|entry| entry.group.tables.iter().any(|t| t.def.name == table.def.name))
            {
                return Err(CacheError::TableInOtherGroup {
                    table: table.def.name.clone(),
                    other: other.def.name.clone(),
                });
            }
            if self.db.catalog().table_by_name(&table.def.name).is_some() {
                return Err(CacheError::TableExists { table: table.def.name.clone() });
            }
        }
        create_group_tables(&self.db, &group)?;
        let own = group.tables.iter().map(|t| t.source.fingerprint()).collect();
        let entry = Arc::new(GroupEntry::new(def.clone(), group, own, shards));
        self.install(&entry);
        groups.insert(def.name.clone(), entry.clone());
        drop(groups);
        self.groups_changed()?;
        if def.kind == GroupKind::ReadOnly && def.autorefresh && def.dynamic {
            // Instances come on demand: follow PostgreSQL from now on.
            self.start_autorefresh(entry)?;
        }
        Ok(())
    }

    /// DROP CACHE GROUP: drops the group's tables in the cache (one engine
    /// transaction, children first); PostgreSQL is untouched.
    pub fn drop_group(&self, name: &str, if_exists: bool) -> Result<(), CacheError> {
        let mut groups = self.groups.write();
        let Some(entry) = groups.get(name).cloned() else {
            return if if_exists { Ok(()) } else { Err(CacheError::UndefinedGroup { group: name.to_owned() }) };
        };
        self.uninstall(&entry);
        if let Some(root) = self.db.catalog().table_by_name(&entry.group.root().def.name) {
            // Its instances go with its tables, those only on flash too.
            self.flash.drop_durable(root.id.0)?;
            self.flash.forget_group(root.id.0);
        }
        if let Some(worker) = self.autorefresh.lock().remove(name) {
            worker.stop();
        }
        autorefresh::drop_group(&self.db, self.backend.as_ref(), &self.config.awt.node, name)?;
        let mut txn = self.db.begin_with_origin(self.db.default_commit_mode(), Origin::Application)?;
        for table in entry.group.tables.iter().rev() {
            txn.drop_table(&table.def.name)?;
        }
        txn.commit()?;
        groups.remove(name);
        drop(groups);
        self.groups_changed()
    }

    /// LOAD CACHE GROUP: `options.predicate` is combined with the group's
    /// own. Instances already cached are left as they are.
    pub fn load(&self, name: &str, options: &LoadOptions) -> Result<LoadReport, CacheError> {
        let entry = self.entry(name)?;
        let mut options = options.clone();
        options.predicate = combine(self.own_predicate(&entry).as_deref(), options.predicate.as_deref());
        // One first LOAD at a time: two would each make (and drop) the slot.
        let first_load = self.autorefresh_first_load.lock();
        if entry.def.kind == GroupKind::ReadOnly
            && entry.def.autorefresh
            && !self.autorefresh.lock().contains_key(name)
            && !autorefresh::has_progress(&self.db, name)?
        {
            // The first LOAD of a READONLY group starts its autorefresh from
            // the snapshot it loads.
            let backend = self.backend.clone().ok_or(CacheError::NoBackend)?;
            let report = autorefresh::initial_load(self, &self.db, &entry, &backend, &self.identity, &options)?;
            entry.counters.loaded.fetch_add(report.instances, Ordering::Relaxed);
            self.start_autorefresh(entry)?;
            return Ok(report);
        }
        drop(first_load);
        let report = self.load_in_snapshot(&entry, &options, None)?;
        entry.counters.loaded.fetch_add(report.instances, Ordering::Relaxed);
        Ok(report)
    }

    /// LOAD's reading: from `snapshot` when given (exported elsewhere), else its own.
    fn load_in_snapshot(
        &self,
        entry: &GroupEntry,
        options: &LoadOptions,
        snapshot: Option<&str>,
    ) -> Result<LoadReport, CacheError> {
        let fence = Fence::open(self, entry)?;
        let admission = Admission {
            existing: Existing::Keep,
            verify: None,
            fence: Some(&fence),
            seen: None,
            snapshot,
            accepted: Some(entry.accepted.lock().clone()),
        };
        self.load_from_backend(entry, options, &admission)
    }

    fn load_from_backend(
        &self,
        entry: &GroupEntry,
        options: &LoadOptions,
        admission: &Admission<'_>,
    ) -> Result<LoadReport, CacheError> {
        let backend = self.backend.clone().ok_or(CacheError::NoBackend)?;
        // What it writes replaces what flash holds of the group; a VERIFY
        // writes nothing, and flash's records stay as current as before.
        if admission.verify.is_none() {
            self.forget_flash(entry)?;
        }
        // PARALLEL not given (0): the configured default.
        let mut options = options.clone();
        if options.parallel == 0 {
            options.parallel = self.tuning.get().load_parallel.max(1);
        }
        let options = &options;
        load_admitting(&self.db, || Ok(connect_backend(&backend)?), &entry.group, options, admission)
    }

    /// The root keys of the instances of group `name` cached now.
    fn cached_root_keys(&self, name: &str) -> Result<Vec<Vec<Value>>, CacheError> {
        let entry = self.entry(name)?;
        InstanceLayout::resolve(&self.db.catalog(), &entry.group)?.root_keys(&self.db)
    }

    /// The root table and key columns of group `name`.
    pub fn root_key(&self, name: &str) -> Result<RootKey, CacheError> {
        let entry = self.entry(name)?;
        let root = entry.group.root();
        Ok(RootKey { table: root.def.name.clone(), key_columns: root.def.primary_key.clone() })
    }

    /// UNLOAD CACHE GROUP: removes the instances with these root keys (all
    /// when None) from the cache only, as `Origin::Evict` (not deletes).
    pub fn unload(&self, name: &str, keys: Option<&[Vec<Value>]>) -> Result<UnloadReport, CacheError> {
        let entry = self.entry(name)?;
        let layout = InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
        self.forget_flash(&entry)?;
        let all;
        let keys = match keys {
            Some(keys) => keys,
            None => {
                all = layout.root_keys(&self.db)?;
                &all
            }
        };
        let report = self.remove_instances(&entry, &layout, keys, None, None)?;
        entry.counters.unloaded.fetch_add(report.instances, Ordering::Relaxed);
        Ok(report)
    }

    /// REFRESH CACHE GROUP: reloads from PostgreSQL the instances matching
    /// `options.predicate` there (on a dynamic group: only those in
    /// `cached_keys`), and removes the `cached_keys` PostgreSQL no longer has.
    /// `cached_keys`: the root keys of cached instances matching the predicate
    /// (evaluated on the cache).
    pub fn refresh(
        &self,
        name: &str,
        cached_keys: &[Vec<Value>],
        options: &LoadOptions,
    ) -> Result<RefreshReport, CacheError> {
        let started = Instant::now();
        let entry = self.entry(name)?;
        let layout = InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
        let cached: Vec<Vec<Value>> = cached_keys.iter().filter_map(|key| layout.normalize_root_key(key)).collect();
        let predicate = combine(self.own_predicate(&entry).as_deref(), options.predicate.as_deref());
        // A dynamic group refreshes only instances already cached.
        let only = entry.def.dynamic.then_some(cached.as_slice());
        let mut report = self.reload(&entry, &layout, predicate, only, &cached, options, None)?;
        report.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Reloads from PostgreSQL the instances with root keys `keys`, cached
    /// or not, replacing cached ones, and removes those PostgreSQL no longer
    /// has (SWT's in-doubt resolution: PostgreSQL holds the truth).
    fn refresh_instances(&self, entry: &GroupEntry, keys: &[Vec<Value>]) -> Result<RefreshReport, CacheError> {
        let layout = InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
        let keys: Vec<Vec<Value>> = keys.iter().filter_map(|key| layout.normalize_root_key(key)).collect();
        self.reload(entry, &layout, self.own_predicate(entry), Some(&keys), &keys, &LoadOptions::default(), None)
    }

    /// Loads from PostgreSQL the instances matching `predicate` (only those
    /// with root keys `only`, when given, asked for in chunks), replacing
    /// cached ones but never one with unpropagated changes, then removes the
    /// `cached` instances PostgreSQL did not send (deleted there, or no
    /// longer matching).
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
    ) -> Result<RefreshReport, CacheError> {
        let fence = Fence::open(self, entry)?;
        let seen = Mutex::new(Vec::new());
        let admission = Admission {
            existing: Existing::Replace,
            verify: None,
            fence: Some(&fence),
            seen: Some(&seen),
            snapshot,
            accepted: Some(entry.accepted.lock().clone()),
        };
        let mut report = RefreshReport::default();
        let mut options = options.clone();
        match only {
            Some(keys) => {
                let root = entry.group.root();
                for chunk in keys.chunks(REFRESH_KEYS_PER_QUERY) {
                    options.predicate = combine(predicate.as_deref(), Some(&keys_predicate(root, chunk)));
                    let loaded = self.load_from_backend(entry, &options, &admission)?;
                    report.reloaded += loaded.instances;
                    report.skipped_dirty += loaded.skipped;
                }
            }
            None => {
                options.predicate = predicate;
                let loaded = self.load_from_backend(entry, &options, &admission)?;
                report.reloaded += loaded.instances;
                report.skipped_dirty += loaded.skipped;
            }
        }
        let seen: HashSet<String> = seen.into_inner().iter().map(|key| key_text(key)).collect();
        let gone: Vec<Vec<Value>> = cached.iter().filter(|key| !seen.contains(&key_text(key))).cloned().collect();
        let admits = |key: &[Value]| fence.admits(key);
        let removed = self.remove_instances(entry, layout, &gone, Some(&admits), None)?;
        report.removed = removed.instances;
        report.skipped_dirty += removed.skipped_dirty;
        entry.counters.refreshed.fetch_add(report.reloaded, Ordering::Relaxed);
        Ok(report)
    }

    /// Compares every cached instance of group `name` with PostgreSQL's
    /// (values, read in one PostgreSQL snapshot; the cache at a snapshot per
    /// instance): run it when propagation has drained and nothing writes.
    pub fn verify(&self, name: &str) -> Result<VerifyTally, CacheError> {
        self.verify_cancellable(name, &Cancel::new())
    }

    /// [`Self::verify`], stopped between instances (57014) once `cancel` is.
    pub fn verify_cancellable(&self, name: &str, cancel: &Cancel) -> Result<VerifyTally, CacheError> {
        let entry = self.entry(name)?;
        let layout = InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
        let cached = layout.root_keys(&self.db)?;
        let tally = Mutex::new(VerifyTally::default());
        let seen = Mutex::new(Vec::new());
        let admission = Admission {
            existing: Existing::Keep,
            verify: Some(&tally),
            fence: None,
            seen: Some(&seen),
            snapshot: None,
            accepted: Some(entry.accepted.lock().clone()),
        };
        let mut options =
            LoadOptions { parallel: self.tuning.get().load_parallel, cancel: cancel.clone(), ..LoadOptions::default() };
        if entry.def.dynamic {
            for chunk in cached.chunks(REFRESH_KEYS_PER_QUERY) {
                if cancel.is_cancelled() {
                    return Err(BackendError::Cancelled.into());
                }
                options.predicate =
                    combine(self.own_predicate(&entry).as_deref(), Some(&keys_predicate(entry.group.root(), chunk)));
                self.load_from_backend(&entry, &options, &admission)?;
            }
        } else {
            options.predicate = self.own_predicate(&entry);
            self.load_from_backend(&entry, &options, &admission)?;
        }
        let seen: HashSet<String> = seen.into_inner().iter().map(|key| key_text(key)).collect();
        let mut tally = tally.into_inner();
        tally.only_in_cache = cached.iter().map(|key| key_text(key)).filter(|key| !seen.contains(key)).collect();
        Ok(tally)
    }

    /// Uninstalls the engine hooks, stops aging and closes the flash tier
    /// cleanly (so the next open reuses it); also on drop. The groups stay
    /// defined. The server calls it before it closes the database.
    pub fn shutdown(&self) {
        for entry in self.groups.read().values() {
            self.uninstall(entry);
        }
        self.ager_control.stop();
        if let Some(ager) = self.ager.lock().take()
            && ager.thread().id() != std::thread::current().id()
        {
            // The last reference may be dropped by the aging thread itself
            // (it holds one during a round): it exits on its own then.
            let _ = ager.join();
        }
        // Last: nothing demotes or promotes any more.
        self.flash.close(&self.db);
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.shutdown();
        if let Some(awt) = self.awt.lock().take() {
            awt.stop();
        }
        for (_, worker) in std::mem::take(&mut *self.autorefresh.lock()) {
            worker.stop();
        }
    }
}

/// READONLY groups change only from PostgreSQL (autorefresh): application
/// writes fail as in a read-only transaction.
struct ReadOnlyGuard {
    group: String,
}

impl pgtier_engine::WriteGuard for ReadOnlyGuard {
    fn check_write(&self, table: &pgtier_engine::TableSchema) -> pgtier_engine::Result<()> {
        Err(EngineError::hook(
            "25006",
            format!("cannot change table \"{}\": it is cached by READONLY cache group \"{}\"", table.name, self.group),
            Some("Change it in PostgreSQL: READONLY groups are kept current from there. Cache it in an AWT or SWT group to write through pgtier.".into()),
        ))
    }
}

/// AWT writes wait in the WAL until PostgreSQL has them; past
/// `retained_wal_max` bytes of backlog new writes fail (never a silent drop,
/// never an unbounded disk).
struct AwtGuard {
    cache: Weak<Cache>,
    group: String,
    /// Its bound is `awt_retained_wal_max`, read at each write (a reload changes it).
    tuning: Arc<LiveTuning>,
}

impl pgtier_engine::WriteGuard for AwtGuard {
    fn check_write(&self, table: &pgtier_engine::TableSchema) -> pgtier_engine::Result<()> {
        let Some(cache) = self.cache.upgrade() else { return Ok(()) };
        if let Some(status) = cache.propagation()
            && status.node_refused.load(Ordering::Relaxed)
        {
            // Acknowledged here, such a write would never reach PostgreSQL.
            let refusal = status.last_error.lock().clone().unwrap_or_default();
            return Err(EngineError::hook(
                "55000",
                format!(
                    "cannot change table \"{}\" of AWT cache group \"{}\": write-through is refused: {refusal}",
                    table.name, self.group
                ),
                CacheError::NodeOwned { node: String::new(), owner: String::new(), since: String::new() }.hint(),
            ));
        }
        let backlog = cache.awt_backlog_bytes();
        let bound = self.tuning.get().awt_retained_wal_max;
        if backlog <= bound {
            return Ok(());
        }
        let reason = match cache.propagation() {
            Some(status) => {
                status.last_error.lock().clone().unwrap_or_else(|| "PostgreSQL is slower than the writes".into())
            }
            None => "no [backend] is configured, so nothing propagates".into(),
        };
        Err(EngineError::hook(
            "53400",
            format!(
                "cannot change table \"{}\" of AWT cache group \"{}\": write-through to PostgreSQL is {} MB behind, past the bound of {} MB",
                table.name,
                self.group,
                backlog >> 20,
                bound >> 20
            ),
            Some(format!(
                "Writes resume by themselves once PostgreSQL catches up ({reason}); [cache] awt_retained_wal_max sets the bound."
            )),
        ))
    }
}

/// `AGING USE column` names a date or timestamp column of the root.
fn check_aging(def: &CreateGroup, group: &CacheGroup) -> Result<(), CacheError> {
    let Aging::Time { column, .. } = &def.aging else { return Ok(()) };
    let root = &group.root().def;
    match root.columns.iter().find(|c| &c.name == column) {
        None => Err(CacheError::AgingColumn {
            group: def.name.clone(),
            column: column.clone(),
            reason: format!("is not a column of the root table \"{}\"", root.name),
        }),
        Some(c) if matches!(c.ty, DataType::Date | DataType::Timestamp(_) | DataType::TimestampTz(_)) => Ok(()),
        Some(c) => Err(CacheError::AgingColumn {
            group: def.name.clone(),
            column: column.clone(),
            reason: format!("has type {}; aging by time needs a date or timestamp column", c.ty.pg_name()),
        }),
    }
}

fn combine(group: Option<&str>, statement: Option<&str>) -> Option<String> {
    match (group, statement) {
        (Some(g), Some(s)) => Some(format!("({g}) AND ({s})")),
        (Some(one), None) | (None, Some(one)) => Some(one.to_owned()),
        (None, None) => None,
    }
}
