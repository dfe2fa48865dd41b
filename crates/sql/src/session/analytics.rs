//! `ALTER TABLE t SET ANALYTICS ON | OFF` (a pgtier extension) and the
//! lifetime of a database's columnar copies (crates/olap).
//!
//! - **One `OlapEngine` per database** (one commit-stream consumer,
//!   `olap`), kept in a process-wide registry keyed by the open database's
//!   identity (the address of its incarnation record, stable while the
//!   registry's engine holds a handle on the database). Started the first
//!   time a table is enabled, or when a session opens on a database whose
//!   catalog has flagged tables: then every flagged table's copy is rebuilt
//!   by a scan on a thread of its own (state `building` in
//!   `pgtier_analytics_tables`), and a table that can no longer be enabled
//!   keeps its flag and shows `failed` with the error; the session opens
//!   either way. A session opening on a database without flagged tables
//!   drops a consumer `olap` left registered (it would hold back the WAL).
//! - The registry holds a handle on the database: its copies live until the
//!   process ends or [`stop_analytics`] (call it before reopening the same
//!   directory in one process; sessions that hold the copies keep them
//!   until their next statement, a rebuild running until it ends).
//! - **Outside a transaction block only** (25001, as PostgreSQL refuses
//!   CREATE INDEX CONCURRENTLY there): the copy is scanned from committed
//!   rows, and ON returns once it is ready, so the flag is written in a
//!   transaction of its own after the copy is built (a failure leaves no
//!   flag), and OFF drops the flag and then the copy.
//! - The table's owner only (42501); views, sequences (42809), partitioned
//!   and temporary tables (0A000) are refused; a type without an exact
//!   Arrow form fails ON with the olap error (0A000 naming the column).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use pgtier_engine::{Database, TableSchema};
use pgtier_olap::{OlapConfig, OlapEngine, OlapError};

use super::Connection;
use super::rows::Tag;
use crate::catalog::analytics::{Analytics, CopyState, flag_of, flag_table_def, flagged_tables, refusal};
use crate::catalog::roles::RelationPerm;
use crate::error::{Result, SqlError, SqlNotice};

/// The `OlapConfig` every database's copies start with (the server's
/// `[analytics]` section); None: `OlapConfig::default()`.
static CONFIG: Mutex<Option<OlapConfig>> = Mutex::new(None);

/// Sets the `OlapConfig` the copies of every database opened from now on
/// start with (the analytic executor's CPU share, nice, placement and
/// memory limit). Call before opening databases: copies already running
/// keep theirs until [`stop_analytics`].
pub fn set_analytics_config(config: OlapConfig) {
    *CONFIG.lock() = Some(config);
}

/// The `OlapConfig` copies opened now start with.
pub fn analytics_config() -> OlapConfig {
    CONFIG.lock().clone().unwrap_or_default()
}

/// The worker threads the analytic executor of copies opened now runs on
/// `cpus` CPUs (olap's rule over [`analytics_config`]).
pub fn analytics_executor_threads(cpus: usize) -> usize {
    pgtier_olap::executor_threads(&analytics_config(), cpus)
}

/// The running copies, by database identity.
static RUNNING: Mutex<Vec<(usize, Arc<Analytics>)>> = Mutex::new(Vec::new());
/// Moves each time an entry is added or removed: a session looks again.
static GENERATION: AtomicU64 = AtomicU64::new(1);

fn identity(db: &Database) -> usize {
    std::ptr::from_ref(db.incarnation()) as usize
}

fn running(db: &Database) -> Option<Arc<Analytics>> {
    let key = identity(db);
    RUNNING.lock().iter().find(|(k, _)| *k == key).map(|(_, a)| Arc::clone(a))
}

/// The database's copies, started if they do not run: (them, started now).
fn start(db: &Database) -> Result<(Arc<Analytics>, bool)> {
    let key = identity(db);
    let mut all = RUNNING.lock();
    if let Some((_, a)) = all.iter().find(|(k, _)| *k == key) {
        return Ok((Arc::clone(a), false));
    }
    let olap = OlapEngine::start(db, analytics_config()).map_err(olap_error)?;
    let analytics = Arc::new(Analytics::new(olap));
    all.push((key, Arc::clone(&analytics)));
    GENERATION.fetch_add(1, Ordering::Release);
    Ok((analytics, true))
}

/// Stops `db`'s columnar copies (their flags stay: the next session to open
/// rebuilds them). True if they ran.
pub fn stop_analytics(db: &Database) -> bool {
    let key = identity(db);
    let removed = {
        let mut all = RUNNING.lock();
        let before = all.len();
        all.retain(|(k, _)| *k != key);
        before != all.len()
    };
    if removed {
        GENERATION.fetch_add(1, Ordering::Release);
    }
    removed
}

fn olap_error(e: OlapError) -> SqlError {
    match e {
        OlapError::Engine(engine) => SqlError::from(engine),
        other => SqlError::new(other.sqlstate(), other.to_string()),
    }
}

/// Rebuilds the copies of `tables` on a thread of its own.
fn rebuild(analytics: Arc<Analytics>, tables: Vec<Arc<TableSchema>>) {
    {
        let mut states = analytics.states.lock();
        for t in &tables {
            states.insert(t.id, CopyState::Building);
        }
    }
    let a = Arc::clone(&analytics);
    let spawned = std::thread::Builder::new().name("pgtier-olap-rebuild".into()).spawn(move || {
        for t in tables {
            let result = a.olap.enable(t.id, |_, _| {});
            let mut states = a.states.lock();
            match result {
                Ok(()) => states.remove(&t.id),
                Err(e) => states.insert(t.id, CopyState::Failed(e.to_string())),
            };
        }
    });
    if let Err(e) = spawned {
        for state in analytics.states.lock().values_mut() {
            *state = CopyState::Failed(format!("cannot start the rebuild: {e}"));
        }
    }
}

impl Connection {
    /// (SELECTs the columnar path answered, SELECTs that went back to the
    /// row path after the analytic executor failed) since the database's
    /// copies started: tests and benchmarks check the path they measure.
    pub fn columnar_statements(&self) -> (u64, u64) {
        running(&self.db).map_or((0, 0), |a| {
            (a.columnar_statements.load(Ordering::Relaxed), a.columnar_fallbacks.load(Ordering::Relaxed))
        })
    }

    /// The copies' upkeep since they started (readers' waits for the
    /// applier, merges) and the delta entries not merged yet, over every
    /// table: benchmarks report them beside their figures.
    pub fn analytics_upkeep(&self) -> Option<(pgtier_olap::OlapStats, u64)> {
        let a = running(&self.db)?;
        let delta =
            a.olap.tables().into_iter().filter_map(|t| a.olap.table_stats(t).ok()).map(|s| s.delta_rows as u64).sum();
        Some((a.olap.stats(), delta))
    }

    /// The latest analytic query that failed and went back to the row
    /// path, with its error (see [`Connection::columnar_statements`]).
    pub fn columnar_last_fallback(&self) -> Option<String> {
        running(&self.db).and_then(|a| a.last_fallback.lock().clone())
    }

    /// Finds the database's running copies, or starts them and their
    /// rebuild when the catalog has flagged tables (the session opens
    /// whatever happens: the view shows what failed).
    pub(super) fn with_analytics(mut self) -> Connection {
        self.analytics_seen = GENERATION.load(Ordering::Acquire);
        self.analytics = running(&self.db);
        if self.analytics.is_some() {
            return self;
        }
        let flagged = flagged_tables(&self.db.catalog());
        if flagged.is_empty() {
            let olap = analytics_config().consumer;
            if self.db.consumers().iter().any(|c| c.name == olap) {
                // Best effort: a standby cannot, and it holds nothing back.
                let _ = self.db.unregister_consumer(&olap);
            }
            return self;
        }
        if let Ok((analytics, started)) = start(&self.db) {
            if started {
                rebuild(Arc::clone(&analytics), flagged);
            }
            self.analytics = Some(analytics);
        }
        self
    }

    /// Looks the copies up again when another session started or stopped
    /// some (one atomic load otherwise).
    pub(super) fn refresh_analytics(&mut self) {
        let now = GENERATION.load(Ordering::Acquire);
        if now != self.analytics_seen {
            self.analytics_seen = now;
            self.analytics = running(&self.db);
        }
    }

    /// `ALTER TABLE table SET ANALYTICS ON | OFF`.
    pub(super) fn set_analytics(&mut self, perms: &[RelationPerm], table: &str, on: bool) -> Result<(Tag, u64)> {
        if self.in_transaction() {
            return Err(SqlError::new("25001", "ALTER TABLE ... SET ANALYTICS cannot run inside a transaction block"));
        }
        let catalog = self.db.catalog();
        crate::catalog::roles::check_relations(perms, &catalog, &mut self.settings)?;
        let schema = catalog.table_by_name(table).cloned().ok_or_else(|| SqlError::undefined_table(table))?;
        if let Some(refused) = refusal(&schema) {
            return Err(refused);
        }
        if on {
            self.analytics_on(&schema)?;
        } else {
            self.analytics_off(&schema)?;
        }
        Ok((Tag::Plain("ALTER TABLE"), 0))
    }

    fn analytics_on(&mut self, table: &Arc<TableSchema>) -> Result<()> {
        let (analytics, _) = start(&self.db)?;
        self.analytics = Some(Arc::clone(&analytics));
        analytics.states.lock().insert(table.id, CopyState::Building);
        let started = Instant::now();
        let mut rows = 0;
        let enabled = analytics.olap.enable(table.id, |done, _| rows = done);
        analytics.states.lock().remove(&table.id);
        enabled.map_err(olap_error)?;
        let seconds = started.elapsed().as_secs_f64();
        if let Err(e) = self.write_flag(table, true) {
            analytics.olap.disable(table.id);
            return Err(e);
        }
        let rate = if seconds > 0.0 { rows as f64 / seconds } else { 0.0 };
        self.notices.push(SqlNotice {
            sqlstate: "00000",
            message: format!(
                "analytics on for \"{}\": {rows} rows copied in {seconds:.3} s ({rate:.0} rows/s)",
                crate::names::short(&table.name)
            ),
        });
        Ok(())
    }

    fn analytics_off(&mut self, table: &Arc<TableSchema>) -> Result<()> {
        self.write_flag(table, false)?;
        if let Some(analytics) = running(&self.db) {
            analytics.olap.disable(table.id);
            analytics.states.lock().remove(&table.id);
        }
        Ok(())
    }

    /// Writes (or drops) `table`'s flag in a transaction of its own.
    fn write_flag(&mut self, table: &TableSchema, on: bool) -> Result<()> {
        let mut txn = self.db.begin()?;
        if let Some(old) = flag_of(txn.catalog(), &table.name).map(|f| f.name.clone()) {
            txn.drop_table(&old)?;
        }
        if on {
            txn.create_table(&flag_table_def(table)?)?;
        }
        txn.commit()?;
        Ok(())
    }
}
