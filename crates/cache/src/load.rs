//! LOAD: copies whole cache instances from one PostgreSQL snapshot.
//!
//! The leader exports a snapshot and keeps its transaction open until every
//! worker has finished; each worker joins it with one connection per table.
//! Per table a worker streams `COPY (SELECT root key, table columns FROM
//! table JOIN parent ... JOIN (root WHERE predicate AND part) ORDER BY root
//! key)`: every stream is ordered by the same root key, so rows of one
//! instance are adjacent in each stream and a merge driven by the root
//! stream only compares root keys for equality (no collation question).
//!
//! PARALLEL n: root rows are split into n disjoint parts by
//! `(hashtextextended(ROW(root key)::text, 0) & i64::MAX) % n` — works for any
//! key type and spreads skewed key ranges evenly; each part is one worker.
//!
//! Instances are committed with `Origin::Load` in batches of at most
//! `batch_instances_max` instances or `batch_bytes_max` field bytes, and a
//! batch only ever ends between instances: a cancel, an error or a crash
//! leaves whole instances only. An instance whose root key is already
//! cached is left as it is (LOAD) or replaced in the same batch (REFRESH);
//! the caller may also exclude keys (instances with changes not yet
//! propagated are never loaded over).

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use pgtier_backend::BackendError;
use pgtier_backend::catalog::import_tables_in;
use pgtier_backend::copy_out::{CopyReader, quote_identifier, start_copy};
use pgtier_backend::snapshot::{Cancel, ExportedSnapshot, join_snapshot};
use pgtier_engine::{Database, Origin, Transaction, Value};
use postgres::Client;

use crate::error::{CacheError, is_conflict};
use crate::fence::Fence;
use crate::group::{CacheGroup, GroupTable};
use crate::instance::InstanceLayout;
use crate::types::engine_value;

/// How to load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// SQL condition on the root table's columns (unqualified), used as given.
    pub predicate: Option<String>,
    /// Workers (each with its own connections); 0 counts as 1.
    pub parallel: usize,
    pub batch_instances_max: usize,
    pub batch_bytes_max: usize,
    /// Stops every stream; also tripped by the load itself when one worker fails.
    pub cancel: Cancel,
    pub progress: Arc<LoadProgress>,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            predicate: None,
            parallel: 1,
            batch_instances_max: 1000,
            batch_bytes_max: 8 << 20,
            cancel: Cancel::new(),
            progress: Arc::default(),
        }
    }
}

/// Committed so far; poll it from another thread while a load runs.
#[derive(Debug, Default)]
pub struct LoadProgress {
    instances: AtomicU64,
    rows: AtomicU64,
    bytes: AtomicU64,
}

impl LoadProgress {
    pub fn instances(&self) -> u64 {
        self.instances.load(Ordering::Relaxed)
    }
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// What a finished load committed.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadReport {
    pub instances: u64,
    /// Instances PostgreSQL sent that were left alone: already cached (LOAD)
    /// or excluded by the caller.
    pub skipped: u64,
    /// (table, rows) in group order, root first.
    pub rows: Vec<(String, u64)>,
    /// Bytes of field data read (COPY payload without framing).
    pub bytes: u64,
    pub seconds: f64,
}

/// What REFRESH did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RefreshReport {
    /// Instances read again from PostgreSQL (replacing the cached ones).
    pub reloaded: u64,
    /// Cached instances PostgreSQL no longer has (or no longer match), removed.
    pub removed: u64,
    pub skipped_dirty: u64,
    pub seconds: f64,
}

/// What a verification found (see `Cache::verify`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VerifyTally {
    /// Cached instances compared with PostgreSQL's.
    pub compared: u64,
    /// Instances PostgreSQL has (for the predicate) that are not cached.
    pub not_cached: u64,
    /// Cached instances whose rows differ from PostgreSQL's.
    pub differing: u64,
    /// The first differences: (root key, table, what).
    pub differences: Vec<(String, String, String)>,
    /// Cached instances PostgreSQL does not have (for the predicate).
    pub only_in_cache: Vec<String>,
}

/// Differences listed at most (the counts stay exact).
const DIFFERENCES_MAX: usize = 100;

impl VerifyTally {
    fn compare(
        &mut self,
        group: &CacheGroup,
        key: &[Value],
        cached: Option<Vec<Vec<Vec<Value>>>>,
        remote: Vec<Vec<Vec<Value>>>,
    ) {
        let Some(cached) = cached else {
            self.not_cached += 1;
            return;
        };
        self.compared += 1;
        let mut differs = false;
        for (index, (mine, theirs)) in cached.into_iter().zip(remote).enumerate() {
            let same = same_rows(&mine, &theirs);
            differs |= !same;
            if !same && self.differences.len() < DIFFERENCES_MAX {
                let only_mine: Vec<&Vec<Value>> = mine.iter().filter(|row| !theirs.contains(row)).collect();
                let only_theirs: Vec<&Vec<Value>> = theirs.iter().filter(|row| !mine.contains(row)).collect();
                self.differences.push((
                    crate::instance::key_text(key),
                    group.tables[index].def.name.clone(),
                    format!("cache only: {only_mine:?}; PostgreSQL only: {only_theirs:?}"),
                ));
            }
        }
        if differs {
            self.differing += 1;
        }
    }

    pub fn is_clean(&self) -> bool {
        self.differing == 0 && self.only_in_cache.is_empty()
    }
}

/// Whether two tables' rows of one instance are the same multiset. Rows
/// arrive in no particular order on either side, and an instance has few
/// rows of each table: each of `mine` is matched with an equal row of
/// `theirs` not matched yet (quadratic, but with no allocation per row,
/// where sorting by a rendering of each row made VERIFY format every
/// value of the group).
fn same_rows(mine: &[Vec<Value>], theirs: &[Vec<Value>]) -> bool {
    if mine.len() != theirs.len() {
        return false;
    }
    if mine.len() > SAME_ROWS_QUADRATIC_MAX {
        let order = |rows: &[Vec<Value>]| {
            let mut texts: Vec<String> = rows.iter().map(|row| format!("{row:?}")).collect();
            texts.sort_unstable();
            texts
        };
        return order(mine) == order(theirs);
    }
    let mut matched = vec![false; theirs.len()];
    mine.iter().all(|row| {
        let found = theirs.iter().zip(&matched).position(|(other, taken)| !taken && other == row);
        found.map(|at| matched[at] = true).is_some()
    })
}

/// Past this many rows of one table in one instance, [`same_rows`] sorts.
const SAME_ROWS_QUADRATIC_MAX: usize = 64;

/// What to do with an instance whose root key is already cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Existing {
    /// Leave the cached instance (LOAD).
    Keep,
    /// Delete the cached instance and insert PostgreSQL's in the same batch (REFRESH).
    Replace,
}

/// How a load treats keys: what `load_group` does by default, what REFRESH
/// asks for; or, with `verify`, nothing is written and each instance
/// PostgreSQL sends is compared with the cached one.
pub(crate) struct Admission<'a> {
    pub existing: Existing,
    pub verify: Option<&'a Mutex<VerifyTally>>,
    /// The group's write-through marks (`fence`): which instances the
    /// snapshot may write. None: every instance (a group nothing writes through).
    pub fence: Option<&'a Fence<'a>>,
    /// Collects the root keys of instances PostgreSQL sent (REFRESH removes the cached ones it did not).
    pub seen: Option<&'a Mutex<Vec<Vec<Value>>>>,
    /// Read from this snapshot, exported elsewhere and kept open by its
    /// exporter (autorefresh's replication slot), instead of exporting one.
    pub snapshot: Option<&'a str>,
    /// Per table, the definition fingerprint PostgreSQL's must have (None: the imported one's).
    pub accepted: Option<Vec<u64>>,
}

impl Default for Admission<'_> {
    fn default() -> Self {
        Admission { existing: Existing::Keep, verify: None, fence: None, seen: None, snapshot: None, accepted: None }
    }
}

#[derive(Default)]
struct Totals {
    instances: u64,
    skipped: u64,
    rows: Vec<u64>,
    bytes: u64,
}

/// Loads the instances of `group` whose root matches `options.predicate`.
/// The group's tables must exist in `db` ([`crate::create_group_tables`]).
pub fn load_group(
    db: &Database,
    connect: impl Fn() -> Result<Client, CacheError> + Sync,
    group: &CacheGroup,
    options: &LoadOptions,
) -> Result<LoadReport, CacheError> {
    load_admitting(db, connect, group, options, &Admission::default())
}

pub(crate) fn load_admitting(
    db: &Database,
    connect: impl Fn() -> Result<Client, CacheError> + Sync,
    group: &CacheGroup,
    options: &LoadOptions,
    admission: &Admission<'_>,
) -> Result<LoadReport, CacheError> {
    let started = Instant::now();
    let catalog = db.catalog();
    let layout = InstanceLayout::resolve(&catalog, group)?;
    let mut leader = connect()?;
    // The leader's statements (the split's SELECT) can wait on PostgreSQL
    // too, behind a lock for one: a cancel must reach them.
    options.cancel.register(leader.cancel_token());
    let mut snapshot = match admission.snapshot {
        Some(id) => Leader::Joined(join_snapshot(&mut leader, id)?, id.to_owned()),
        None => Leader::Exported(ExportedSnapshot::export(&mut leader)?),
    };
    check_definitions(snapshot.transaction(), group, admission.accepted.as_deref())?;
    if let Some(fence) = admission.fence {
        fence.read_horizon(snapshot.transaction())?;
    }
    let split = plan_split(snapshot.transaction(), group, options.predicate.as_deref(), options.parallel.max(1))
        .map_err(|error| if options.cancel.is_cancelled() { BackendError::Cancelled.into() } else { error })?;
    let parts = split.parts();
    let snapshot_id = snapshot.id().to_owned();
    let results: Vec<Result<Totals, CacheError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..parts)
            .map(|part| {
                let queries: Vec<String> = (0..group.tables.len())
                    .map(|table| stream_query(group, table, options.predicate.as_deref(), &split, part))
                    .collect();
                let job = Job { db, group, layout: &layout, options, admission };
                let (connect, snapshot_id) = (&connect, &snapshot_id);
                scope.spawn(move || {
                    let result = stream_part(&job, connect, snapshot_id, &queries);
                    if result.is_err() && !options.cancel.is_cancelled() {
                        // A worker that could not even start stops the others too.
                        options.cancel.cancel();
                    }
                    result
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker.join().unwrap_or_else(|_| {
                    Err(CacheError::StreamOrder { group: group.name.clone(), reason: "a load worker panicked".into() })
                })
            })
            .collect()
    });
    snapshot.finish()?;
    let mut report = LoadReport {
        instances: 0,
        skipped: 0,
        rows: group.tables.iter().map(|table| (table.def.name.clone(), 0)).collect(),
        bytes: 0,
        seconds: 0.0,
    };
    // Prefer the error that stopped the load over the cancellations it caused.
    let mut first_error = None;
    for result in results {
        match result {
            Ok(totals) => {
                report.instances += totals.instances;
                report.skipped += totals.skipped;
                report.bytes += totals.bytes;
                report.rows.iter_mut().zip(&totals.rows).for_each(|(row, n)| row.1 += n);
            }
            Err(error) => {
                let cancelled = matches!(error, CacheError::Backend(BackendError::Cancelled));
                if first_error.is_none()
                    || (!cancelled && matches!(first_error, Some(CacheError::Backend(BackendError::Cancelled))))
                {
                    first_error = Some(error);
                }
            }
        }
    }
    if let Some(error) = first_error {
        return Err(error);
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The leader's transaction: its own exported snapshot, or one it joined.
enum Leader<'c> {
    Exported(ExportedSnapshot<'c>),
    Joined(postgres::Transaction<'c>, String),
}

impl<'c> Leader<'c> {
    fn transaction(&mut self) -> &mut postgres::Transaction<'c> {
        match self {
            Leader::Exported(snapshot) => snapshot.transaction(),
            Leader::Joined(transaction, _) => transaction,
        }
    }

    fn id(&self) -> &str {
        match self {
            Leader::Exported(snapshot) => snapshot.id(),
            Leader::Joined(_, id) => id,
        }
    }

    fn finish(self) -> Result<(), CacheError> {
        match self {
            Leader::Exported(snapshot) => Ok(snapshot.finish()?),
            Leader::Joined(transaction, _) => transaction
                .commit()
                .map_err(|e| CacheError::Backend(BackendError::from_postgres("ending the snapshot transaction", &e))),
        }
    }
}

/// Refuses a load when PostgreSQL's tables are no longer what the group was defined from.
/// `accepted`: per table, the fingerprint accepted for it (None: its own).
fn check_definitions<C: postgres::GenericClient>(
    client: &mut C,
    group: &CacheGroup,
    accepted: Option<&[u64]>,
) -> Result<(), CacheError> {
    let names: Vec<String> = group.tables.iter().map(|table| table.source.name.to_string()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let now = import_tables_in(client, &refs)?;
    for (index, (table, current)) in group.tables.iter().zip(&now).enumerate() {
        let expected = accepted.and_then(|a| a.get(index).copied()).unwrap_or_else(|| table.source.fingerprint());
        if table.source.oid != current.oid || expected != current.fingerprint() {
            return Err(CacheError::DefinitionChanged {
                group: group.name.clone(),
                table: table.source.name.to_string(),
            });
        }
    }
    Ok(())
}

fn quoted(table: &GroupTable) -> String {
    format!("{}.{}", quote_identifier(&table.source.name.schema), quote_identifier(&table.source.name.table))
}

fn column_list(alias: &str, columns: impl IntoIterator<Item = impl AsRef<str>>) -> Vec<String> {
    columns.into_iter().map(|column| format!("{alias}.{}", quote_identifier(column.as_ref()))).collect()
}

/// How PARALLEL n splits the root rows into parts.
#[derive(Debug)]
enum Split {
    /// One part.
    Whole,
    /// By a hash of the root key: any key type; each part's COPY of a child
    /// joins the whole child table, so PostgreSQL's work grows with n.
    Hash(usize),
    /// Key ranges `[low, high)` of a single integer root key, applied to the
    /// root and to every table carrying the key, so each part reads only its
    /// range through the indexes.
    Ranges(Vec<(i64, i64)>),
}

impl Split {
    fn parts(&self) -> usize {
        match self {
            Split::Whole => 1,
            Split::Hash(n) => *n,
            Split::Ranges(ranges) => ranges.len(),
        }
    }
}

/// Ranges when the root key is one integer column (the key's span under the
/// predicate, cut evenly), else a hash split.
fn plan_split<C: postgres::GenericClient>(
    client: &mut C,
    group: &CacheGroup,
    predicate: Option<&str>,
    parts: usize,
) -> Result<Split, CacheError> {
    if parts <= 1 {
        return Ok(Split::Whole);
    }
    let root = group.root();
    let integer_key = match &root.def.primary_key[..] {
        [key] => root
            .source
            .column(key)
            .filter(|c| matches!(c.type_name.as_str(), "smallint" | "integer" | "bigint"))
            .map(|c| c.name.clone()),
        _ => None,
    };
    let Some(key) = integer_key else { return Ok(Split::Hash(parts)) };
    let filter = predicate.map(|p| format!(" WHERE {p}")).unwrap_or_default();
    let sql = format!("SELECT min({0})::int8, max({0})::int8 FROM {1}{filter}", quote_identifier(&key), quoted(root));
    let row = client
        .query_one(sql.as_str(), &[])
        .map_err(|e| BackendError::from_postgres("planning the parts of a LOAD", &e))?;
    let (Some(low), Some(high)) = (row.get::<_, Option<i64>>(0), row.get::<_, Option<i64>>(1)) else {
        return Ok(Split::Whole);
    };
    let span = i128::from(high) - i128::from(low) + 1;
    let parts_wide = i128::try_from(parts).unwrap_or(1);
    let ranges = (0..parts_wide)
        .map(|i| {
            let start = i128::from(low) + span * i / parts_wide;
            let end = i128::from(low) + span * (i + 1) / parts_wide;
            (i64::try_from(start).unwrap_or(i64::MAX), i64::try_from(end).unwrap_or(i64::MAX))
        })
        .filter(|(start, end)| start < end)
        .collect();
    Ok(Split::Ranges(ranges))
}

/// The COPY of table `index` for one part: root key columns, then the table's columns.
fn stream_query(group: &CacheGroup, index: usize, predicate: Option<&str>, split: &Split, part: usize) -> String {
    let mut filters = Vec::new();
    if let Some(predicate) = predicate {
        filters.push(format!("({predicate})"));
    }
    let mut table_filter = None;
    match split {
        Split::Whole => {}
        Split::Hash(parts) => {
            let key: Vec<String> = group.root().def.primary_key.iter().map(|c| quote_identifier(c)).collect();
            filters.push(format!(
                "(hashtextextended(ROW({})::text, 0) & 9223372036854775807) % {parts} = {part}",
                key.join(", ")
            ));
        }
        Split::Ranges(ranges) => {
            let (low, high) = ranges[part];
            let range = |column: &str| format!("{column} >= {low} AND {column} < {high}");
            filters.push(range(&quote_identifier(&group.root().def.primary_key[0])));
            // PostgreSQL carries equalities, not ranges, across a join: the
            // child gets the range on its own copy of the key.
            if index > 0
                && let Some(Some(columns)) = crate::registry::root_key_columns(group).get(index)
                && let [column] = columns[..]
            {
                table_filter =
                    Some(range(&format!("t0.{}", quote_identifier(&group.tables[index].def.columns[column].name))));
            }
        }
    }
    let filter = if filters.is_empty() { None } else { Some(filters.join(" AND ")) };
    format!(
        "COPY ({}) TO STDOUT (FORMAT binary)",
        instance_query(group, index, filter.as_deref(), table_filter.as_deref())
    )
}

/// `SELECT root key, table columns FROM table JOIN parent ... JOIN (root
/// WHERE root_filter) [WHERE table_filter] ORDER BY root key`: the rows of
/// table `index` (alias `t0` for a child) of the instances whose root
/// matches `root_filter`.
pub(crate) fn instance_query(
    group: &CacheGroup,
    index: usize,
    root_filter: Option<&str>,
    table_filter: Option<&str>,
) -> String {
    let (from, alias) = instance_from(group, index, root_filter);
    let key = column_list("r", &group.root().def.primary_key).join(", ");
    let columns = column_list(alias, group.tables[index].source.columns.iter().map(|c| c.name.as_str())).join(", ");
    let table_filter = table_filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
    format!("SELECT {key}, {columns} FROM {from}{table_filter} ORDER BY {key}")
}

/// One statement for the whole of the instances whose root matches
/// `root_filter`, every table at once, so that a dynamic load costs
/// PostgreSQL one round trip and one snapshot: `SELECT 0, root columns,
/// NULLs ... UNION ALL SELECT 1, NULLs, child columns, NULLs ...`. Column
/// 0 is the table's index in the group; table `i`'s columns start at
/// [`union_offset`]`(group, i)`, the other tables' positions are NULL.
pub(crate) fn instance_union_query(group: &CacheGroup, root_filter: &str) -> String {
    let nulls = |table: &GroupTable| -> Vec<String> {
        table.source.columns.iter().map(|column| format!("NULL::{}", column.type_name)).collect()
    };
    let branches: Vec<String> = (0..group.tables.len())
        .map(|index| {
            let (from, alias) = instance_from(group, index, Some(root_filter));
            let mut select = vec![index.to_string()];
            for (other, table) in group.tables.iter().enumerate() {
                if other == index {
                    select.extend(column_list(alias, table.source.columns.iter().map(|c| c.name.as_str())));
                } else {
                    select.extend(nulls(table));
                }
            }
            format!("SELECT {} FROM {from}", select.join(", "))
        })
        .collect();
    branches.join(" UNION ALL ")
}

/// Where table `index`'s columns start in a row of [`instance_union_query`].
pub(crate) fn union_offset(group: &CacheGroup, index: usize) -> usize {
    1 + group.tables[..index].iter().map(|table| table.source.columns.len()).sum::<usize>()
}

/// `table JOIN parent ... JOIN (root WHERE root_filter) AS r` for table
/// `index` of the group, and the alias its own columns go by (`r` for the
/// root, `t0` for a child).
fn instance_from(group: &CacheGroup, index: usize, root_filter: Option<&str>) -> (String, &'static str) {
    let root = group.root();
    let filter = root_filter.map(|filter| format!(" WHERE {filter}")).unwrap_or_default();
    let root_relation = format!("(SELECT * FROM {}{filter}) AS r", quoted(root));
    let chain = group.chain(index);
    let alias = |position: usize| if position == chain.len() - 1 { "r".to_owned() } else { format!("t{position}") };
    let mut from = if index == 0 { root_relation.clone() } else { format!("{} AS t0", quoted(&group.tables[index])) };
    for position in 1..chain.len() {
        let child = &group.tables[chain[position - 1]];
        let relation = if position == chain.len() - 1 {
            root_relation.clone()
        } else {
            format!("{} AS {}", quoted(&group.tables[chain[position]]), alias(position))
        };
        let Some((child_columns, parent_columns)) = &child.parent_key else { continue };
        let on: Vec<String> = column_list(&alias(position - 1), child_columns)
            .into_iter()
            .zip(column_list(&alias(position), parent_columns))
            .map(|(c, p)| format!("{c} = {p}"))
            .collect();
        from.push_str(&format!(" JOIN {relation} ON {}", on.join(" AND ")));
    }
    (from, if index == 0 { "r" } else { "t0" })
}

/// What every worker of one load shares.
struct Job<'a> {
    db: &'a Database,
    group: &'a CacheGroup,
    layout: &'a InstanceLayout,
    options: &'a LoadOptions,
    admission: &'a Admission<'a>,
}

fn stream_part(
    job: &Job<'_>,
    connect: &(impl Fn() -> Result<Client, CacheError> + Sync),
    snapshot_id: &str,
    queries: &[String],
) -> Result<Totals, CacheError> {
    let Job { group, options, .. } = *job;
    let key_len = group.root().def.primary_key.len();
    let mut clients = Vec::with_capacity(queries.len());
    let mut tokens = Vec::with_capacity(queries.len());
    for _ in queries {
        let client = connect()?;
        options.cancel.register(client.cancel_token());
        tokens.push(client.cancel_token());
        clients.push(client);
    }
    let mut transactions = Vec::with_capacity(clients.len());
    for client in &mut clients {
        transactions.push(join_snapshot(client, snapshot_id)?);
    }
    let mut readers = Vec::with_capacity(queries.len());
    for (((transaction, query), table), token) in transactions.iter_mut().zip(queries).zip(&group.tables).zip(&tokens) {
        // A cancel cancels only the statements running at that moment: no
        // COPY may start after it (its sort could run for long before the
        // first row), and one that started while it happened is cancelled
        // again (registering after a cancel cancels at once).
        if options.cancel.is_cancelled() {
            return Err(BackendError::Cancelled.into());
        }
        let reader = start_copy(transaction, query, &table.def.name, key_len + table.types.len())?;
        options.cancel.register(token.clone());
        readers.push(reader.with_cancel(options.cancel.clone()));
    }
    let result = merge(job, &mut readers);
    if result.is_err() {
        // Stop the other workers, and this worker's own COPYs before the
        // connections drain them on drop.
        options.cancel.cancel();
    }
    result
}

/// One row read from a stream: its root key (length-prefixed field bytes) and values.
struct StreamRow {
    key: Vec<u8>,
    values: Vec<Value>,
    bytes: u64,
}

fn read_row<R: Read>(
    reader: &mut CopyReader<R>,
    table: &GroupTable,
    key_len: usize,
) -> Result<Option<StreamRow>, CacheError> {
    let Some(row) = reader.next_row()? else { return Ok(None) };
    let mut key = Vec::new();
    let mut bytes = 0u64;
    for index in 0..key_len {
        match row.field(index) {
            Some(field) => {
                key.extend_from_slice(&(field.len() as u32).to_le_bytes());
                key.extend_from_slice(field);
            }
            None => key.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
    }
    let (values, field_bytes) = decode_values(table, |column| row.field(key_len + column))?;
    bytes += field_bytes;
    Ok(Some(StreamRow { key, values, bytes }))
}

/// A row of `table` from PostgreSQL's binary fields (`field(column)`, None
/// for NULL) as engine values, with the field bytes read.
pub(crate) fn decode_values<'f>(
    table: &GroupTable,
    field: impl Fn(usize) -> Option<&'f [u8]>,
) -> Result<(Vec<Value>, u64), CacheError> {
    let mut values = Vec::with_capacity(table.types.len());
    let mut bytes = 0u64;
    for (column, (ty, kind)) in table.types.iter().zip(&table.kinds).enumerate() {
        let Some(field) = field(column) else {
            values.push(Value::Null);
            continue;
        };
        bytes += field.len() as u64;
        let name = &table.source.columns[column].name;
        let decoded = kind.decode(field).map_err(|error| BackendError::Decode {
            what: table.def.name.clone(),
            column: name.clone(),
            error,
        })?;
        let value = engine_value(*ty, decoded).map_err(|reason| CacheError::BadValue {
            table: table.def.name.clone(),
            column: name.clone(),
            reason,
        })?;
        values.push(value);
    }
    Ok((values, bytes))
}

/// One instance as the streams delivered it: per table, its rows.
struct Instance {
    key: Vec<Value>,
    /// (table index, values) in stream order, root first.
    rows: Vec<(usize, Vec<Value>)>,
    bytes: u64,
}

/// An engine transaction collecting whole instances, pinned to one
/// snapshot (`fence`). When an application commits on an instance's rows
/// after the pin, the batch is redone an instance at a time; an instance
/// still changing then is left as it is.
struct Batch<'a> {
    job: &'a Job<'a>,
    /// None only while a redo runs.
    txn: Option<Transaction>,
    /// The instances written into `txn`, for a redo.
    written: Vec<Instance>,
    bytes: u64,
}

impl<'a> Batch<'a> {
    fn begin(job: &'a Job<'a>) -> Result<Batch<'a>, CacheError> {
        Ok(Batch { job, txn: Some(begin_pinned(job)?), written: Vec::new(), bytes: 0 })
    }

    /// Writes `instance` when it is admitted; false when left alone.
    fn offer(&mut self, instance: Instance, totals: &mut Totals) -> Result<bool, CacheError> {
        let Some(txn) = self.txn.as_mut() else {
            return Err(CacheError::StreamOrder {
                group: self.job.group.name.clone(),
                reason: "a load batch lost its transaction".into(),
            });
        };
        match write_instance(self.job, txn, &instance) {
            Ok(true) => {
                self.bytes += instance.bytes;
                self.written.push(instance);
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(error) if is_conflict(&error) => {
                // An application committed on these rows after the pin:
                // everything written so far again, one at a time, then this one.
                if let Some(txn) = self.txn.take() {
                    txn.rollback();
                }
                self.bytes = 0;
                for earlier in std::mem::take(&mut self.written) {
                    if !commit_alone(self.job, &earlier, totals)? {
                        totals.skipped += 1;
                    }
                }
                let written = commit_alone(self.job, &instance, totals)?;
                self.txn = Some(begin_pinned(self.job)?);
                Ok(written)
            }
            Err(error) => Err(error),
        }
    }

    fn len(&self) -> usize {
        self.written.len()
    }

    fn commit(self, totals: &mut Totals) -> Result<(), CacheError> {
        if let Some(txn) = self.txn {
            txn.commit()?;
        }
        for instance in &self.written {
            count(self.job, instance, totals);
        }
        Ok(())
    }
}

fn begin_pinned(job: &Job<'_>) -> Result<Transaction, CacheError> {
    match job.admission.fence {
        Some(fence) => fence.begin_batch(job.db, Origin::Load),
        None => {
            let mut txn = job.db.begin_with_origin(job.db.default_commit_mode(), Origin::Load)?;
            txn.pin_snapshot()?;
            Ok(txn)
        }
    }
}

/// `instance` in a transaction of its own; false when it is not written (not admitted, or changing still).
fn commit_alone(job: &Job<'_>, instance: &Instance, totals: &mut Totals) -> Result<bool, CacheError> {
    let mut txn = begin_pinned(job)?;
    match write_instance(job, &mut txn, instance) {
        Ok(true) => {
            txn.commit()?;
            count(job, instance, totals);
            Ok(true)
        }
        Ok(false) => Ok(false),
        Err(error) if is_conflict(&error) => Ok(false),
        Err(error) => Err(error),
    }
}

/// Decides `instance` at `txn`'s pinned snapshot and writes it: true when
/// written. Not when the fence says the snapshot may be older than a commit
/// to it; LOAD leaves a cached one as it is, REFRESH replaces it.
fn write_instance(job: &Job<'_>, txn: &mut Transaction, instance: &Instance) -> Result<bool, CacheError> {
    if job.admission.fence.is_some_and(|fence| !fence.admits(&instance.key)) {
        return Ok(false);
    }
    match job.layout.read(txn, &instance.key)? {
        None => {}
        Some(_) if job.admission.existing == Existing::Keep => return Ok(false),
        Some(cached) => job.layout.delete(txn, &cached)?,
    }
    for (table, values) in &instance.rows {
        txn.insert(job.layout.tables[*table].id, values)?;
    }
    Ok(true)
}

fn count(job: &Job<'_>, instance: &Instance, totals: &mut Totals) {
    totals.instances += 1;
    totals.bytes += instance.bytes;
    let progress = &job.options.progress;
    progress.instances.fetch_add(1, Ordering::Relaxed);
    progress.bytes.fetch_add(instance.bytes, Ordering::Relaxed);
    progress.rows.fetch_add(instance.rows.len() as u64, Ordering::Relaxed);
    for (table, _) in &instance.rows {
        totals.rows[*table] += 1;
    }
}

/// Merges the streams (root first) into instances and commits them in batches.
fn merge<R: Read>(job: &Job<'_>, readers: &mut [CopyReader<R>]) -> Result<Totals, CacheError> {
    let Job { db, group, layout, options, admission } = *job;
    let key_len = group.root().def.primary_key.len();
    let tables = group.tables.len();
    let mut totals = Totals { rows: vec![0; tables], ..Totals::default() };
    let mut pending: Vec<Option<StreamRow>> = (0..tables).map(|_| None).collect();
    let mut batch = if admission.verify.is_some() { None } else { Some(Batch::begin(job)?) };
    while let Some(root) = read_row(&mut readers[0], &group.tables[0], key_len)? {
        let key: Vec<Value> = layout.root().primary_key.iter().map(|&c| root.values[c].clone()).collect();
        let mut instance = Instance { key, bytes: root.bytes, rows: vec![(0, root.values)] };
        for child in 1..tables {
            loop {
                if pending[child].is_none() {
                    pending[child] = read_row(&mut readers[child], &group.tables[child], key_len)?;
                }
                match pending[child].take() {
                    Some(row) if row.key == root.key => {
                        instance.bytes += row.bytes;
                        instance.rows.push((child, row.values));
                    }
                    other => {
                        pending[child] = other;
                        break;
                    }
                }
            }
        }
        if let Some(seen) = admission.seen {
            seen.lock().push(instance.key.clone());
        }
        let Some(current) = batch.as_mut() else {
            if let Some(tally) = admission.verify {
                verify_instance(db, group, layout, tally, instance)?;
            }
            totals.skipped += 1;
            continue;
        };
        if !current.offer(instance, &mut totals)? {
            totals.skipped += 1;
            continue;
        }
        if current.len() >= options.batch_instances_max || current.bytes as usize >= options.batch_bytes_max {
            if let Some(full) = batch.take() {
                full.commit(&mut totals)?;
            }
            batch = Some(Batch::begin(job)?);
        }
    }
    for child in 1..tables {
        if pending[child].is_some() || read_row(&mut readers[child], &group.tables[child], key_len)?.is_some() {
            return Err(CacheError::StreamOrder {
                group: group.name.clone(),
                reason: format!("rows of \"{}\" did not follow their root rows' order", group.tables[child].def.name),
            });
        }
    }
    if let Some(batch) = batch {
        batch.commit(&mut totals)?;
    }
    Ok(totals)
}

/// VERIFY: compares `instance` (PostgreSQL's) with the cached one.
fn verify_instance(
    db: &Database,
    group: &CacheGroup,
    layout: &InstanceLayout,
    tally: &Mutex<VerifyTally>,
    instance: Instance,
) -> Result<(), CacheError> {
    let mut remote = vec![Vec::new(); group.tables.len()];
    for (table, values) in instance.rows {
        remote[table].push(values);
    }
    let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Load)?;
    let cached = layout.read(&mut txn, &instance.key)?;
    txn.rollback();
    tally.lock().compare(group, &instance.key, cached.map(|c| c.rows), remote);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(values: &[i32]) -> Vec<Value> {
        values.iter().map(|&v| Value::Int4(v)).collect()
    }

    #[test]
    fn same_rows_ignores_order_but_not_multiplicity() {
        let a = vec![row(&[1, 2]), row(&[3, 4]), row(&[3, 4])];
        let shuffled = vec![row(&[3, 4]), row(&[1, 2]), row(&[3, 4])];
        assert!(same_rows(&a, &shuffled));
        // Same set, other counts: one duplicate stands for another row.
        let recounted = vec![row(&[1, 2]), row(&[1, 2]), row(&[3, 4])];
        assert!(!same_rows(&a, &recounted));
        assert!(!same_rows(&a, &a[..2]));
        assert!(!same_rows(&[row(&[1])], &[vec![Value::Null]]));
        assert!(same_rows(&[], &[]));
    }

    #[test]
    fn same_rows_sorts_past_the_quadratic_bound() {
        let many: Vec<Vec<Value>> = (0..200).map(|i| row(&[i, i % 7])).collect();
        let reversed: Vec<Vec<Value>> = many.iter().rev().cloned().collect();
        assert!(same_rows(&many, &reversed));
        let mut changed = reversed.clone();
        changed[10] = row(&[-1, 0]);
        assert!(!same_rows(&many, &changed));
    }
}
