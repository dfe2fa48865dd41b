//! DYNAMIC groups: a lookup that misses in the cache loads the whole
//! instance from PostgreSQL inside the statement.
//!
//! The engine calls its miss hook (installed per table of a dynamic group)
//! when an application read by key or by an equality prefix finds nothing.
//! Here the lookup is mapped to a root key — through the columns that carry
//! the root key down the foreign keys (every TATP table has `s_id`) — and:
//! - a root already cached means the row really does not exist: nothing to do;
//! - a read of an instance the flash tier holds (`flash.rs`) is answered
//!   from the record, which stays there (`MissResolution::Answer`), unless
//!   it was read from flash lately;
//! - otherwise (a write, or a re-read) an instance on flash is taken from
//!   there and inserted as `Origin::Load`, without waiting for the WAL's
//!   fsync (moving a clean instance between tiers changes no data);
//! - otherwise the instance is read from PostgreSQL by one prepared
//!   statement (all its tables' rows, `UNION ALL`, on a pooled connection:
//!   one round trip, one snapshot) and inserted as `Origin::Load` in one
//!   engine transaction, pinned, when that snapshot holds every
//!   write-through commit to the instance (`fence`: an instance deleted in
//!   the cache is not brought back from a snapshot older than the delete's
//!   arrival in PostgreSQL). For an instance with marks the horizon must be
//!   read in the rows' snapshot: it is read again, with the horizon, in one
//!   REPEATABLE READ transaction;
//! - concurrent misses on one key wait for the first one's load (one flight
//!   per key), so an instance is fetched once;
//! - a key PostgreSQL does not have either answers "no row", as PostgreSQL
//!   would; nothing is remembered, so a row inserted there later is found.
//!
//! A lookup by a unique key that does not carry the root key (TATP's
//! `sub_nbr`) names at most one row: PostgreSQL says which root key that
//! row has, and that instance is loaded as above. Other lookups that do not
//! determine the root key answer from what is cached, as TimesTen does.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use pgtier_engine::{CommitMode, Database, EngineError, MissAnswer, Origin, TableId, Transaction, Value, coerce};
use postgres::Client;
use postgres::types::{FromSql, ToSql, Type};

use crate::error::{CacheError, is_conflict};
use crate::fence::{Fence, WriteThroughState};
use crate::flash::OnFlash;
use crate::group::CacheGroup;
use crate::instance::{InstanceLayout, key_text};
use crate::load::{decode_values, instance_union_query, union_offset};
use crate::pool::{Pool, Pooled};
use crate::registry::{GroupEntry, InstancePin};

/// What a dynamic load asks of the cache (`Cache` implements it): what
/// every load's fence asks, and the database. Miss hooks hold it weakly, so
/// they never keep the cache alive.
pub(crate) trait DynamicHost: WriteThroughState {
    fn database(&self) -> &Database;
    /// The group named `group` and its layout, resolved once per miss
    /// (each resolution walks the catalog).
    fn miss_target(&self, group: &str) -> Result<(Arc<GroupEntry>, InstanceLayout), CacheError>;
    /// Makes sure the instance of root key `key` (normalized) is cached
    /// when PostgreSQL has it, and pins it (`Cache::ensure_pinned`).
    fn ensure_pinned_in(
        &self,
        entry: &Arc<GroupEntry>,
        layout: &InstanceLayout,
        key: &[Value],
    ) -> Result<Ensured, CacheError>;
    /// Waits while write-through holds the group's loads back
    /// (`Cache::hold_load`).
    fn hold_load(&self, entry: &GroupEntry);
    /// The root key of PostgreSQL's row for a unique lookup that missed
    /// (`Dynamic::root_key_by_unique`).
    fn root_key_by_unique(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        lookup: &UniqueLookup,
        root_key_columns: &[usize],
    ) -> Result<Option<Vec<Value>>, CacheError>;
    /// The root key flash's key record names for a unique lookup that
    /// missed (`Flash::root_key_by_unique`): a hint the caller checks.
    fn flash_key_hint(&self, entry: &GroupEntry, layout: &InstanceLayout, lookup: &UniqueLookup) -> Option<Vec<Value>>;
    /// For a read that missed: the instance of root key `key` (normalized)
    /// as flash holds it, left there (`Flash::answer`), as the engine's
    /// answer with one cover per `(table, root key columns)` of `covers`.
    /// None: not on flash (or read from there lately); the caller loads it.
    fn flash_answer(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: Vec<Value>,
        covers: &[(TableId, Vec<usize>)],
    ) -> Result<Option<MissAnswer>, CacheError>;
    /// The instance on the flash tier, when it is there (`Flash::find`).
    fn flash_find(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: &[Value],
    ) -> Result<Option<OnFlash>, CacheError>;
    /// Removes a durable record whose instance memory holds durably now.
    fn flash_release_durable(&self, layout: &InstanceLayout, key: &[Value]) -> Result<(), CacheError>;
    /// Whether instances of the group with changes not yet in PostgreSQL
    /// may be on flash (write-back mode).
    fn flash_holds_dirty(&self, entry: &GroupEntry) -> bool;
    /// Whether flash ever found one of its durable records damaged.
    fn flash_lost_durable(&self) -> bool;
}

/// Where a miss's instance came from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Loaded {
    /// Neither flash nor PostgreSQL has it (or the fence kept it out).
    Absent,
    FromFlash,
    FromBackend,
    /// Cached by another way in while this load waited out a conflict.
    Meanwhile,
}

/// The root key carried by a lookup on a table whose root key columns are
/// `map`: `columns` are the positions the lookup's `values` bind (the
/// primary key's, or an index's leading ones).
pub(crate) fn root_key_of(map: &[usize], columns: &[usize], values: &[Value]) -> Option<Vec<Value>> {
    map.iter()
        .map(|column| {
            let at = columns.iter().take(values.len()).position(|c| c == column)?;
            match &values[at] {
                Value::Null => None,
                value => Some(value.clone()),
            }
        })
        .collect()
}

/// What `Dynamic::ensure` did.
pub(crate) struct Ensured {
    /// This call (or the flight it waited for) inserted the instance.
    pub loaded: bool,
    /// It was cached already, at a snapshot taken after the pin: with the
    /// pin held it stays so, and the caller need not look again.
    pub cached: bool,
    /// Taken before anything was looked at: no eviction of the instance
    /// begins until it is dropped (None: the key cannot be a root key).
    pub pin: Option<InstancePin>,
}

/// One load in progress; later misses on the key wait for its outcome.
#[derive(Default)]
struct Flight {
    outcome: Mutex<Option<Result<bool, (String, String)>>>,
    done: Condvar,
}

/// The dynamic-load machinery of one `Cache`.
pub(crate) struct Dynamic {
    pool: Arc<Pool>,
    flights: Mutex<HashMap<String, Arc<Flight>>>,
}

/// A binary field as PostgreSQL sent it (the same bytes binary COPY sends).
struct Raw<'a>(Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Raw<'a>, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw)))
    }
    fn from_sql_null(_: &Type) -> Result<Raw<'a>, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

impl Dynamic {
    pub fn new(pool: Arc<Pool>) -> Dynamic {
        Dynamic { pool, flights: Mutex::new(HashMap::new()) }
    }

    /// Makes sure the instance of `root_key` is cached if PostgreSQL has it,
    /// and pins it (see `Ensured`).
    pub fn ensure(
        &self,
        cache: &dyn DynamicHost,
        entry: &Arc<GroupEntry>,
        layout: &InstanceLayout,
        root_key: &[Value],
    ) -> Result<Ensured, CacheError> {
        let db = cache.database();
        let Some(key) = layout.normalize_root_key(root_key) else {
            return Ok(Ensured { loaded: false, cached: false, pin: None });
        };
        // Pinned first: an eviction that has not begun now never will.
        let pin = Some(InstancePin::new(entry, &key));
        // An eviction of it under way: its end decides whether it is cached.
        entry.evicting.wait_out(&key, std::time::Duration::from_secs(5));
        // An instance with changes PostgreSQL does not have yet is never
        // loaded from there; in write-back mode flash may hold it.
        if layout.root_cached(db, &key)? {
            return Ok(Ensured { loaded: false, cached: true, pin });
        }
        if entry.is_dirty(&key) && !cache.flash_holds_dirty(entry) {
            return Ok(Ensured { loaded: false, cached: false, pin });
        }
        // A load, from flash or PostgreSQL, past the budget while
        // write-through is behind: wait for it (a miss of a row an
        // instance in memory lacks, above, loads nothing and never waits).
        cache.hold_load(entry);
        let flight_key = format!("{}\u{0}{}", entry.def.name, key_text(&key));
        let (flight, leader) = {
            let mut flights = self.flights.lock();
            match flights.get(&flight_key) {
                Some(flight) => (flight.clone(), false),
                None => {
                    let flight = Arc::new(Flight::default());
                    flights.insert(flight_key.clone(), flight.clone());
                    (flight, true)
                }
            }
        };
        if !leader {
            let mut outcome = flight.outcome.lock();
            while outcome.is_none() {
                flight.done.wait(&mut outcome);
            }
            return match outcome.as_ref() {
                Some(Ok(loaded)) => Ok(Ensured { loaded: *loaded, cached: false, pin }),
                Some(Err((sqlstate, message))) => Err(CacheError::DynamicLoad {
                    group: entry.def.name.clone(),
                    sqlstate: sqlstate.clone(),
                    reason: message.clone(),
                }),
                None => Ok(Ensured { loaded: false, cached: false, pin }),
            };
        }
        let started = Instant::now();
        let mut loaded = self.load_instance(cache, entry, layout, &key);
        // A row of the instance held by a transaction that has not ended
        // (an eviction committing as this load wrote, an application's
        // insert beside it): once it ends, the instance is in memory, on
        // flash or in PostgreSQL again. PostgreSQL would not fail the
        // statement, so neither does the cache while the holder is brief.
        for _ in 0..CONFLICT_RETRIES {
            match &loaded {
                Err(error) if error.sqlstate() == "40001" => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    entry.evicting.wait_out(&key, std::time::Duration::from_secs(5));
                    // No `?` here: the flight's waiters must hear the outcome.
                    loaded = match layout.root_cached(db, &key) {
                        Ok(true) => Ok(Loaded::Meanwhile),
                        Ok(false) => self.load_instance(cache, entry, layout, &key),
                        Err(error) => Err(error),
                    };
                }
                _ => break,
            }
        }
        let counters = &entry.counters;
        match &loaded {
            Ok(Loaded::FromBackend) => {
                counters.dynamic_loads.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Loaded::Absent) => {
                counters.dynamic_absent.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Loaded::FromFlash | Loaded::Meanwhile) | Err(_) => {}
        }
        let result = loaded.map(|loaded| loaded != Loaded::Absent);
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        counters.miss_count.fetch_add(1, Ordering::Relaxed);
        counters.miss_us_total.fetch_add(micros, Ordering::Relaxed);
        counters.miss_us_max.fetch_max(micros, Ordering::Relaxed);
        *flight.outcome.lock() = Some(
            result.as_ref().map(|loaded| *loaded).map_err(|error| (error.sqlstate().to_owned(), error.to_string())),
        );
        flight.done.notify_all();
        self.flights.lock().remove(&flight_key);
        result.map(|loaded| Ensured { loaded, cached: false, pin })
    }

    /// The root key PostgreSQL's row for a unique `lookup` on the table
    /// `lookup.table` (of the group laid out as `layout`) carries; None
    /// when PostgreSQL has no such row.
    pub fn root_key_by_unique(
        &self,
        group: &CacheGroup,
        layout: &InstanceLayout,
        lookup: &UniqueLookup,
        root_key_columns: &[usize],
    ) -> Result<Option<Vec<Value>>, CacheError> {
        let Some(index) = layout.tables.iter().position(|table| table.id == lookup.table) else { return Ok(None) };
        self.pool.with(|pooled| fetch_root_key(pooled, group, index, lookup, root_key_columns))
    }

    fn load_instance(
        &self,
        cache: &dyn DynamicHost,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: &[Value],
    ) -> Result<Loaded, CacheError> {
        let db = cache.database();
        match cache.flash_find(entry, layout, key)? {
            // Async: a crash that loses this commit loses no data (the
            // instance is clean; PostgreSQL has it), and an application
            // commit on it comes later in the same log.
            Some(OnFlash::Clean(instance)) => {
                promote(db, CommitMode::Async, &entry.def.name, layout, key, &instance.rows)?;
                return Ok(Loaded::FromFlash);
            }
            // The only copy of its changes: durable in memory before it
            // leaves flash (a crash between leaves two copies; memory wins).
            Some(OnFlash::Durable(instance)) => {
                promote(db, CommitMode::Sync, &entry.def.name, layout, key, &instance.rows)?;
                cache.flash_release_durable(layout, key)?;
                return Ok(Loaded::FromFlash);
            }
            None => {}
        }
        if entry.is_dirty(key) {
            if cache.flash_lost_durable() {
                return Err(CacheError::Tier {
                    sqlstate: "XX001",
                    reason: format!(
                        "cache group \"{}\": a flash record holding changes not yet in PostgreSQL was found damaged; \
                         instance {} has pending changes and may be that one",
                        entry.def.name,
                        key_text(key)
                    ),
                });
            }
            // Not in memory, not on flash, changes pending: deleted in the
            // cache, and PostgreSQL does not know yet.
            return Ok(Loaded::Absent);
        }
        // Registered before the PostgreSQL snapshot, as every load.
        let fence = Fence::open(cache, entry)?;
        let predicate = entry.def.root_predicate.as_deref();
        // One statement, so one snapshot and no transaction to end; the
        // connection goes back before the insert waits for anything.
        let rows = self.pool.with(|pooled| fetch_instance(pooled, &entry.group, predicate, key))?;
        if rows[0].is_empty() {
            return Ok(Loaded::Absent);
        }
        let txn = fence.begin_batch(db, Origin::Load)?;
        if !fence.touched(key) {
            return insert_rows(db, txn, &entry.def.name, layout, key, &rows).map(|_| Loaded::FromBackend);
        }
        // Written through since the fence opened: whether PostgreSQL's rows
        // hold those writes is known only from the horizon read in the
        // snapshot the rows come from, so both are read again in one
        // REPEATABLE READ transaction (rare: the instance was not cached
        // while it was written).
        drop(txn);
        self.pool.with(|pooled| {
            pooled
                .client
                .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .map_err(|e| backend_error("dynamic load", &e))?;
            let written = fetch_instance(pooled, &entry.group, predicate, key).and_then(|rows| {
                if rows[0].is_empty() {
                    Ok(false)
                } else {
                    insert_instance(db, &fence, &mut pooled.client, &entry.def.name, layout, key, &rows)
                }
            });
            // The read-only snapshot transaction ends either way.
            pooled.client.batch_execute("COMMIT").map_err(|e| backend_error("dynamic load", &e))?;
            written.map(|written| if written { Loaded::FromBackend } else { Loaded::Absent })
        })
    }
}

/// Inserts the instance PostgreSQL sent (`rows`, per table) in one pinned
/// engine transaction, when the snapshot it was read in (still open on
/// `snapshot`) holds every write-through commit to it. False when the
/// snapshot is older than a write-through commit to the instance, which
/// then is not cached because the cache deleted it (the delete has not
/// reached PostgreSQL yet): "absent" is the cache's answer.
fn insert_instance(
    db: &Database,
    fence: &Fence<'_>,
    snapshot: &mut Client,
    group: &str,
    layout: &InstanceLayout,
    key: &[Value],
    rows: &[Vec<Vec<Value>>],
) -> Result<bool, CacheError> {
    let txn = fence.begin_batch(db, Origin::Load)?;
    if fence.touched(key) {
        fence.read_horizon(snapshot)?;
        if !fence.admits(key) {
            return Ok(false);
        }
    }
    insert_rows(db, txn, group, layout, key, rows)
}

/// Puts an instance from flash in memory. Its rows are at hand, so a
/// writer holding one of them (another load's batch) is waited out by
/// trying again for a while rather than failing the statement that missed.
fn promote(
    db: &Database,
    mode: CommitMode,
    group: &str,
    layout: &InstanceLayout,
    key: &[Value],
    rows: &[Vec<Vec<Value>>],
) -> Result<(), CacheError> {
    let mut attempt = 0;
    loop {
        let txn = db.begin_with_origin(mode, Origin::Load)?;
        match insert_rows(db, txn, group, layout, key, rows) {
            Err(error) if error.sqlstate() == "40001" && attempt < PROMOTE_ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            other => return other.map(|_| ()),
        }
    }
}

/// How often a miss loads again after a write conflict on its instance
/// (each after its holder had 2 ms more to end).
const CONFLICT_RETRIES: u32 = 100;

/// How often a promotion tries again while a row of its instance is held.
const PROMOTE_ATTEMPTS: u32 = 200;

/// Inserts an instance's `rows` (per table) in `txn` and commits: true
/// once it is cached (by this or by another way in meanwhile).
fn insert_rows(
    db: &Database,
    mut txn: Transaction,
    group: &str,
    layout: &InstanceLayout,
    key: &[Value],
    rows: &[Vec<Vec<Value>>],
) -> Result<bool, CacheError> {
    let inserted = (|| {
        for (table, rows) in layout.tables.iter().zip(rows) {
            for row in rows {
                txn.insert(table.id, row)?;
            }
        }
        Ok::<(), EngineError>(())
    })();
    match inserted {
        Ok(()) => {
            txn.commit()?;
            Ok(true)
        }
        // Loaded meanwhile by another way in (LOAD), or inserted by an
        // application after the pin: it is there now.
        Err(EngineError::UniqueViolation { .. }) => Ok(true),
        // A row of the instance is held, or was written after the pin (a
        // LOAD or REFRESH batch under way on it). PostgreSQL has the
        // instance, so "absent" would be a wrong answer: found if that
        // writer has finished, else a serialization failure to retry.
        Err(error) => {
            let error = CacheError::from(error);
            if !is_conflict(&error) {
                return Err(error);
            }
            drop(txn);
            if layout.root_cached(db, key)? {
                return Ok(true);
            }
            Err(CacheError::DynamicLoad {
                group: group.to_owned(),
                sqlstate: "40001".into(),
                reason: format!(
                    "the instance was being written by another load while this one read it ({error}); retry the transaction"
                ),
            })
        }
    }
}

fn backend_error(what: &str, error: &postgres::Error) -> CacheError {
    CacheError::Backend(pgtier_backend::BackendError::from_postgres(what, error))
}

/// The rows of the instance of `key` in PostgreSQL, per group table, read
/// by one statement ([`instance_union_query`], prepared once per pooled
/// connection) in the caller's transaction or its own snapshot; all lists
/// are empty when PostgreSQL has no such root (or it does not match the
/// group's predicate).
fn fetch_instance(
    pooled: &mut Pooled,
    group: &CacheGroup,
    predicate: Option<&str>,
    key: &[Value],
) -> Result<Vec<Vec<Vec<Value>>>, CacheError> {
    let texts: Vec<String> = key.iter().map(ToString::to_string).collect();
    let params: Vec<&(dyn ToSql + Sync)> = texts.iter().map(|text| text as &(dyn ToSql + Sync)).collect();
    let root = group.root();
    let key_columns: Vec<String> =
        root.def.primary_key.iter().map(|c| pgtier_backend::copy_out::quote_identifier(c)).collect();
    let casts: Vec<String> = root
        .def
        .primary_key
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let type_name = root.source.column(name).map_or("text", |c| c.type_name.as_str());
            format!("${}::text::{type_name}", i + 1)
        })
        .collect();
    let mut filter = format!("({}) = ({})", key_columns.join(", "), casts.join(", "));
    if let Some(predicate) = predicate {
        filter = format!("({predicate}) AND {filter}");
    }
    let statement =
        pooled.statement(&instance_union_query(group, &filter)).map_err(|e| backend_error("dynamic load", &e))?;
    let rows = pooled.client.query(&statement, &params).map_err(|e| backend_error("dynamic load", &e))?;
    let offsets: Vec<usize> = (0..group.tables.len()).map(|index| union_offset(group, index)).collect();
    let mut out: Vec<Vec<Vec<Value>>> = vec![Vec::new(); group.tables.len()];
    for row in &rows {
        let part: i32 = row.try_get(0).map_err(|e| backend_error("dynamic load", &e))?;
        let index = usize::try_from(part).ok().filter(|&index| index < group.tables.len());
        let Some(index) = index else {
            return Err(CacheError::DynamicLoad {
                group: group.name.clone(),
                sqlstate: "XX000".into(),
                reason: format!("PostgreSQL answered a row of table {part}, which the group does not have"),
            });
        };
        let fields: Vec<Option<&[u8]>> =
            (0..row.len()).map(|i| row.try_get::<_, Raw<'_>>(i).map(|raw| raw.0).unwrap_or(None)).collect();
        let (values, _) =
            decode_values(&group.tables[index], |column| fields.get(offsets[index] + column).copied().flatten())?;
        out[index].push(values);
    }
    if out[0].is_empty() {
        // Rows of children whose root PostgreSQL no longer has (or the
        // predicate rejects) are no instance.
        out.iter_mut().for_each(Vec::clear);
    }
    Ok(out)
}

/// The root key of the row of group table `index` whose `lookup` columns
/// equal its values, as PostgreSQL has it now (its own snapshot; None
/// when it has no such row). `root_key_columns`: where that table carries
/// the root key. The row's instance is then loaded like any other, and the
/// lookup runs again on what was loaded; see `TableHook::on_miss` for why
/// two snapshots answer as one would.
fn fetch_root_key(
    pooled: &mut Pooled,
    group: &CacheGroup,
    index: usize,
    lookup: &UniqueLookup,
    root_key_columns: &[usize],
) -> Result<Option<Vec<Value>>, CacheError> {
    let table = &group.tables[index];
    let name = |column: usize| pgtier_backend::copy_out::quote_identifier(&table.source.columns[column].name);
    let select: Vec<String> = root_key_columns.iter().map(|&column| name(column)).collect();
    let bound: Vec<String> = lookup.columns.iter().map(|&column| name(column)).collect();
    let casts: Vec<String> = lookup
        .columns
        .iter()
        .enumerate()
        .map(|(i, &column)| format!("${}::text::{}", i + 1, table.source.columns[column].type_name))
        .collect();
    let sql = format!(
        "SELECT {} FROM {}.{} WHERE ({}) = ({})",
        select.join(", "),
        pgtier_backend::copy_out::quote_identifier(&table.source.name.schema),
        pgtier_backend::copy_out::quote_identifier(&table.source.name.table),
        bound.join(", "),
        casts.join(", ")
    );
    let texts: Vec<String> = lookup.values.iter().map(ToString::to_string).collect();
    let params: Vec<&(dyn ToSql + Sync)> = texts.iter().map(|text| text as &(dyn ToSql + Sync)).collect();
    let statement = pooled.statement(&sql).map_err(|e| backend_error("dynamic load", &e))?;
    let rows = pooled.client.query(&statement, &params).map_err(|e| backend_error("dynamic load", &e))?;
    let Some(row) = rows.first() else { return Ok(None) };
    let fields: Vec<Option<&[u8]>> =
        (0..row.len()).map(|i| row.try_get::<_, Raw<'_>>(i).map(|raw| raw.0).unwrap_or(None)).collect();
    let (values, _) = decode_values(table, |column| {
        root_key_columns.iter().position(|&c| c == column).and_then(|at| fields.get(at).copied().flatten())
    })?;
    let key: Vec<Value> = root_key_columns.iter().map(|&column| values[column].clone()).collect();
    Ok((!key.iter().any(|value| matches!(value, Value::Null))).then_some(key))
}

/// The miss hook installed on each table of a dynamic group.
pub(crate) struct TableHook {
    pub cache: std::sync::Weak<dyn DynamicHost>,
    pub group: String,
    /// Positions of this table's columns holding the root key (root key order).
    pub root_key_columns: Vec<usize>,
    /// The same for every table of the group that has them: what an
    /// answer from flash covers (the instance's rows of each such table).
    pub covers: Arc<Vec<(TableId, Vec<usize>)>>,
}

/// The root key a miss names (`root_key_columns`: the root key's columns
/// in the missed table), None when its lookup does not carry all of it.
fn miss_root_key(db: &Database, root_key_columns: &[usize], miss: pgtier_engine::Miss<'_>) -> Option<Vec<Value>> {
    let catalog = db.catalog();
    match miss {
        pgtier_engine::Miss::Key { table, key } => {
            root_key_of(root_key_columns, &catalog.table(table)?.primary_key, key)
        }
        pgtier_engine::Miss::Prefix { index, prefix, .. } => {
            root_key_of(root_key_columns, &catalog.index(index)?.columns, prefix)
        }
    }
}

/// A lookup that names at most one row of its table without carrying the
/// root key: every column of the primary key or of a UNIQUE index bound to
/// a non-NULL value, each in its column's type exactly (`columns`: their
/// positions, `values`: in those types). A row found so is in PostgreSQL's
/// instance of whatever root key the row carries, so the cache asks
/// PostgreSQL for that key (`Dynamic::root_key_by_unique`) rather than
/// answer "no row" from what it holds.
pub(crate) struct UniqueLookup {
    pub table: TableId,
    pub columns: Vec<usize>,
    pub values: Vec<Value>,
}

pub(crate) fn unique_lookup(db: &Database, miss: pgtier_engine::Miss<'_>) -> Option<UniqueLookup> {
    let catalog = db.catalog();
    let table = catalog.table(miss.table())?;
    let (columns, values, unique) = match miss {
        pgtier_engine::Miss::Key { key, .. } => (table.primary_key.clone(), key, true),
        pgtier_engine::Miss::Prefix { index, prefix, .. } => {
            let index = catalog.index(index)?;
            (index.columns.clone(), prefix, index.unique)
        }
    };
    if !unique || values.len() != columns.len() {
        return None;
    }
    // The key PostgreSQL is asked for must be the lookup's own: a value
    // its column's type would change (rounded, out of range) names a row
    // PostgreSQL would not have found, and equality with NULL finds none.
    let values = columns
        .iter()
        .zip(values)
        .map(|(&column, value)| {
            if matches!(value, Value::Null) {
                return None;
            }
            let typed = coerce(value.clone(), table.columns.get(column)?.ty, "key").ok()?;
            (typed.to_string() == value.to_string()).then_some(typed)
        })
        .collect::<Option<Vec<Value>>>()?;
    Some(UniqueLookup { table: table.id, columns, values })
}

/// A unique lookup's miss that flash has a key record for: that instance
/// is brought into memory (from flash, or from PostgreSQL should flash have
/// dropped its record since) and, when its root row there holds the
/// lookup's values, the lookup runs again on memory, pinned as any miss's
/// instance is. None when there is no key record or it led elsewhere (the
/// instance changed since it left memory): then PostgreSQL is asked.
fn by_key_record(
    db: &Database,
    cache: &dyn DynamicHost,
    entry: &Arc<GroupEntry>,
    layout: &InstanceLayout,
    lookup: &UniqueLookup,
) -> Result<Option<pgtier_engine::MissResolution>, CacheError> {
    let Some(hint) = cache.flash_key_hint(entry, layout, lookup) else { return Ok(None) };
    let Some(key) = layout.normalize_root_key(&hint) else { return Ok(None) };
    let ensured = cache.ensure_pinned_in(entry, layout, &key)?;
    if !layout.root_row_holds(db, &key, &lookup.columns, &lookup.values)? {
        return Ok(None);
    }
    entry.counters.unique_on_flash.fetch_add(1, Ordering::Relaxed);
    let hold = ensured.pin.map(|pin| Box::new(pin) as pgtier_engine::MissHold);
    Ok(Some(pgtier_engine::MissResolution::Retry { hold }))
}

impl pgtier_engine::MissHook for TableHook {
    fn on_miss(
        &self,
        db: &Database,
        miss: pgtier_engine::Miss<'_>,
        intent: pgtier_engine::MissIntent,
    ) -> pgtier_engine::Result<pgtier_engine::MissResolution> {
        use pgtier_engine::MissResolution::NotFound;
        let Some(cache) = self.cache.upgrade() else { return Ok(NotFound) };
        let to_engine = |error: CacheError| error.to_engine();
        let carried = miss_root_key(db, &self.root_key_columns, miss);
        // Neither the root key nor a unique key: what is cached answers.
        let by_unique = match carried {
            Some(_) => None,
            None => match unique_lookup(db, miss) {
                Some(lookup) => Some(lookup),
                None => return Ok(NotFound),
            },
        };
        let (entry, layout) = cache.miss_target(&self.group).map_err(to_engine)?;
        let root_key = match carried {
            Some(key) => key,
            None => {
                let Some(lookup) = &by_unique else { return Ok(NotFound) };
                if let Some(resolution) = by_key_record(db, &*cache, &entry, &layout, lookup).map_err(to_engine)? {
                    return Ok(resolution);
                }
                // A unique key names the row of at most one instance, and
                // PostgreSQL says which, in a snapshot of its own before the
                // load takes another. Two snapshots answer here as one
                // would: where the cache moved or deleted that row since
                // (it is the writer of record), the instance PostgreSQL
                // names is in memory or has changes pending, so nothing is
                // loaded over it and the lookup, run again on memory,
                // answers from the cache's state.
                entry.counters.unique_asked.fetch_add(1, Ordering::Relaxed);
                let found = cache.root_key_by_unique(&entry, &layout, lookup, &self.root_key_columns);
                let Some(key) = found.map_err(to_engine)? else { return Ok(NotFound) };
                key
            }
        };
        // A key of another type than the root key's cannot name a cached instance.
        let Some(key) = layout.normalize_root_key(&root_key) else { return Ok(NotFound) };
        // A read is answered from flash where it can be: no promotion, so
        // no eviction to make room for one. Not a lookup by a unique key:
        // an answer covers rows by their root key, which that lookup does
        // not bind, so the instance is brought into memory for it.
        if intent == pgtier_engine::MissIntent::Read
            && by_unique.is_none()
            && let Some(answer) = cache.flash_answer(&entry, &layout, key.clone(), &self.covers).map_err(to_engine)?
        {
            return Ok(pgtier_engine::MissResolution::Answer(answer));
        }
        let ensured = cache.ensure_pinned_in(&entry, &layout, &key).map_err(to_engine)?;
        // Or cached after this transaction's snapshot was taken (another
        // session's load ended just before this miss): the engine looks
        // again with a fresh snapshot only when told so. Most misses are
        // of rows an instance in memory does not have (TATP's absent
        // access_info types): `ensure` saw it cached, pinned, so no second look.
        if ensured.loaded || ensured.cached || layout.root_cached(db, &key).map_err(to_engine)? {
            // The pin goes with the transaction: its retry, and whatever it
            // reads of the instance until it ends, find it still cached.
            let hold = ensured.pin.map(|pin| Box::new(pin) as pgtier_engine::MissHold);
            return Ok(pgtier_engine::MissResolution::Retry { hold });
        }
        Ok(pgtier_engine::MissResolution::NotFound)
    }

    /// A child row going in under an instance in memory: pinned, so aging
    /// does not evict it before the row is in (see the trait); an eviction
    /// already under way is waited out, and the engine then looks again.
    fn hold_present(
        &self,
        db: &Database,
        lookup: pgtier_engine::Miss<'_>,
    ) -> pgtier_engine::Result<Option<pgtier_engine::MissHold>> {
        let Some(cache) = self.cache.upgrade() else { return Ok(None) };
        let Some(root_key) = miss_root_key(db, &self.root_key_columns, lookup) else { return Ok(None) };
        let (entry, layout) = cache.miss_target(&self.group).map_err(|error| error.to_engine())?;
        let Some(key) = layout.normalize_root_key(&root_key) else { return Ok(None) };
        let pin = InstancePin::new(&entry, &key);
        entry.evicting.wait_out(&key, std::time::Duration::from_secs(5));
        Ok(Some(Box::new(pin)))
    }
}

/// A DYNAMIC group's miss on a standby, whose cache stays closed until it
/// is promoted (no loads: its log is the active's). A miss the active would
/// answer by loading from PostgreSQL is refused rather than answered "no
/// row", which could be wrong (so is one by a unique key, which the active
/// asks PostgreSQL about); any other lookup that carries no root key is
/// answered from the rows present, as the active answers it.
struct StandbyHook {
    group: String,
    root_key_columns: Vec<usize>,
}

impl pgtier_engine::MissHook for StandbyHook {
    fn on_miss(
        &self,
        db: &Database,
        miss: pgtier_engine::Miss<'_>,
        _intent: pgtier_engine::MissIntent,
    ) -> pgtier_engine::Result<pgtier_engine::MissResolution> {
        if miss_root_key(db, &self.root_key_columns, miss).is_none() && unique_lookup(db, miss).is_none() {
            return Ok(pgtier_engine::MissResolution::NotFound);
        }
        Err(EngineError::hook(
            "0A000",
            format!("cache group \"{}\" is DYNAMIC: a key it has not cached cannot be loaded on a standby", self.group),
            Some("Read keys that may not be cached on the active (target_session_attrs=read-write).".into()),
        ))
    }
}

/// On a standby: every DYNAMIC group's tables get [`StandbyHook`]. Call it
/// whenever the catalog's names may have changed (a group created or
/// dropped on the active arrives as DDL), before a statement reads.
pub fn refuse_misses_on_standby(db: &Database) -> Result<(), CacheError> {
    let catalog = db.catalog();
    for (def, group, _, _) in crate::persist::restore(&catalog)? {
        if !def.dynamic {
            continue;
        }
        for (table, columns) in group.tables.iter().zip(crate::registry::root_key_columns(&group)) {
            let (Some(schema), Some(root_key_columns)) = (catalog.table_by_name(&table.def.name), columns) else {
                continue;
            };
            let hook = StandbyHook { group: def.name.clone(), root_key_columns };
            db.set_miss_hook(schema.id, Some(Arc::new(hook)));
        }
    }
    Ok(())
}
