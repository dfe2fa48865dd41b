//! AWT write-through: committed application transactions on tables of AWT
//! groups reach PostgreSQL asynchronously, in commit order, exactly once.
//!
//! One propagation thread per `Cache` reads the engine's commit stream as
//! consumer [`CONSUMER`] (so the engine retains WAL until it is propagated),
//! keeps the changes of `Origin::Application` transactions on AWT tables
//! (loads, refreshes, evictions and autorefresh never go back), and applies
//! them in batches (at most `batch_bytes_max` of SQL or `batch_delay` after
//! the first transaction): one PostgreSQL transaction per batch that also
//! moves this node's row in `pgtier.awt_progress` to the batch's end
//! position. That row is the truth after any crash: on (re)start the thread
//! reads it and skips transactions before it, so a crash of pgtier or of
//! PostgreSQL at any moment neither loses nor repeats a transaction. The
//! local consumer position is acknowledged only after PostgreSQL committed.
//!
//! Every UPDATE and DELETE must hit exactly one row and every INSERT insert
//! one; a batch where PostgreSQL refuses a statement or a count differs is
//! rolled back and applied again one transaction per PostgreSQL
//! transaction, so the culprit is isolated: it goes to `pgtier.awt_errors`
//! with its statements and PostgreSQL's error (in the same transaction as the
//! progress row), and propagation goes on. A lost connection is retried with
//! backoff (100 ms doubling to 5 s); local commits never wait for it.
//!
//! Not yet: several apply connections in parallel (one stream today), the
//! retained-WAL bound, SWT.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pgtier_backend::connect_backend;
use pgtier_backend::copy_out::quote_identifier;
use pgtier_engine::{Change, CommittedTxn, Lsn, Origin, RowChange, RowOp, Value};
use postgres::{Client, SimpleQueryMessage};

use crate::error::CacheError;
use crate::group::GroupKind;
use crate::manager::{Cache, GroupEntry, quote_literal};

/// The commit-stream consumer of AWT propagation.
pub const CONSUMER: &str = "pgtier_awt";

/// How AWT propagation batches.
#[derive(Clone, Debug)]
pub struct AwtConfig {
    /// This pgtier's name in `pgtier.awt_progress` (several pgtier nodes may share one PostgreSQL).
    pub node: String,
    pub batch_bytes_max: usize,
    /// How long a batch waits for more transactions after its first.
    pub batch_delay: Duration,
}

impl Default for AwtConfig {
    fn default() -> AwtConfig {
        AwtConfig { node: "pgtier".into(), batch_bytes_max: 256 << 10, batch_delay: Duration::from_millis(2) }
    }
}

/// Propagation figures (`pgtier_cache_propagation`, `pgtier status`).
#[derive(Debug, Default)]
pub struct AwtStatus {
    /// Application transactions applied to PostgreSQL.
    pub applied_txns: AtomicU64,
    pub applied_statements: AtomicU64,
    pub batches: AtomicU64,
    /// Transactions PostgreSQL refused for good (now in `pgtier.awt_errors`).
    pub errors: AtomicU64,
    /// Connection attempts after a failure.
    pub retries: AtomicU64,
    /// Stream position processed (applied or skipped as not AWT).
    pub position: AtomicU64,
    /// Commit time (µs since the Unix epoch) of the last transaction applied.
    pub last_applied_commit_us: AtomicU64,
    pub connected: AtomicBool,
    pub last_error: Mutex<Option<String>>,
}

/// The propagation thread.
pub(crate) struct Awt {
    pub status: Arc<AwtStatus>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Awt {
    pub fn start(cache: Weak<Cache>, config: AwtConfig) -> std::io::Result<Awt> {
        let status = Arc::new(AwtStatus::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_status, thread_stop) = (status.clone(), stop.clone());
        let thread = std::thread::Builder::new().name("pgtier-awt".into()).spawn(move || run(&cache, &config, &thread_status, &thread_stop))?;
        Ok(Awt { status, stop, thread: Mutex::new(Some(thread)) })
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.lock().take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

fn run(cache: &Weak<Cache>, config: &AwtConfig, status: &AwtStatus, stop: &AtomicBool) {
    let mut backoff = Duration::from_millis(100);
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let outcome = session(cache, config, status, stop);
        status.connected.store(false, Ordering::Relaxed);
        match outcome {
            Ok(()) => return,
            Err(error) => {
                *status.last_error.lock() = Some(error.to_string());
                status.retries.fetch_add(1, Ordering::Relaxed);
                if started.elapsed() > Duration::from_secs(10) {
                    backoff = Duration::from_millis(100);
                }
                let deadline = Instant::now() + backoff;
                while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// One connected stretch: set up, then batches until stopped or an error.
/// Holds the cache only while it looks at one transaction, so dropping the
/// cache stops propagation (the thread ends when the cache is gone).
fn session(cache: &Weak<Cache>, config: &AwtConfig, status: &AwtStatus, stop: &AtomicBool) -> Result<(), CacheError> {
    let (db, params) = match cache.upgrade() {
        Some(cache) => (cache.database().clone(), cache.backend().cloned().ok_or(CacheError::NoBackend)?),
        None => return Ok(()),
    };
    let mut client = connect_backend(&params)?;
    setup(&mut client, &config.node)?;
    let applied = read_progress(&mut client, &config.node)?;
    status.connected.store(true, Ordering::Relaxed);
    *status.last_error.lock() = None;
    let mut stream = db.stream(CONSUMER)?;
    let mut acks = Acks::default();
    let mut batch = Batch::default();
    while !stop.load(Ordering::Relaxed) {
        let wait = match batch.started {
            Some(started) => config.batch_delay.saturating_sub(started.elapsed()),
            None => Duration::from_millis(50),
        };
        let next = if wait.is_zero() { None } else { stream.next(wait)? };
        let Some(txn) = next else {
            if !batch.is_empty() {
                flush(&mut client, &config.node, &mut batch, status)?;
            }
            acks.maybe(&mut stream, status, false)?;
            continue;
        };
        if txn.lsn.0 < applied {
            // PostgreSQL has it: applied before a crash that came before the local ack.
            status.position.store(txn.next_lsn.0, Ordering::Relaxed);
            continue;
        }
        let Some(strong) = cache.upgrade() else { break };
        let pending = statements(&strong, &txn);
        drop(strong);
        match pending {
            Some(pending) => batch.push(pending),
            // Nothing for PostgreSQL: the position moves without a round trip.
            None if batch.is_empty() => status.position.store(txn.next_lsn.0, Ordering::Relaxed),
            None => batch.advance(txn.next_lsn),
        }
        if batch.bytes >= config.batch_bytes_max {
            flush(&mut client, &config.node, &mut batch, status)?;
        }
        acks.maybe(&mut stream, status, false)?;
    }
    if !batch.is_empty() {
        flush(&mut client, &config.node, &mut batch, status)?;
    }
    acks.maybe(&mut stream, status, true)
}

/// The local consumer position is written (a small file, fsync'd) at most
/// every [`ACK_INTERVAL`]: it only bounds WAL retention and where a restart
/// begins reading; PostgreSQL's progress row decides what is skipped.
const ACK_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Default)]
struct Acks {
    last: Option<Instant>,
    acked: u64,
}

impl Acks {
    fn maybe(&mut self, stream: &mut pgtier_engine::CommitStream, status: &AwtStatus, force: bool) -> Result<(), CacheError> {
        let position = status.position.load(Ordering::Relaxed);
        let due = self.last.is_none_or(|last| last.elapsed() >= ACK_INTERVAL);
        if position > self.acked && (due || force) {
            stream.ack(Lsn(position))?;
            self.acked = position;
            self.last = Some(Instant::now());
        }
        Ok(())
    }
}

/// One application transaction turned into SQL for PostgreSQL.
struct PendingTxn {
    lsn: Lsn,
    next_lsn: Lsn,
    commit_time_us: u64,
    statements: Vec<String>,
    /// Root keys it made dirty, per group.
    dirty: Vec<(Arc<GroupEntry>, String)>,
}

#[derive(Default)]
struct Batch {
    txns: Vec<PendingTxn>,
    bytes: usize,
    started: Option<Instant>,
    /// Position after the last transaction seen (applied or not AWT).
    next_lsn: Option<Lsn>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.txns.is_empty() && self.next_lsn.is_none()
    }

    fn push(&mut self, txn: PendingTxn) {
        self.bytes += txn.statements.iter().map(String::len).sum::<usize>();
        self.started.get_or_insert_with(Instant::now);
        self.next_lsn = Some(txn.next_lsn);
        self.txns.push(txn);
    }

    fn advance(&mut self, next_lsn: Lsn) {
        self.next_lsn = Some(next_lsn);
    }
}

/// The statements of `txn` for PostgreSQL, or None when it changes no AWT table.
/// Marks the instances it touches dirty until it is applied.
fn statements(cache: &Cache, txn: &CommittedTxn) -> Option<PendingTxn> {
    if txn.origin != Origin::Application {
        return None;
    }
    let mut pending = PendingTxn { lsn: txn.lsn, next_lsn: txn.next_lsn, commit_time_us: txn.commit_time_us, statements: Vec::new(), dirty: Vec::new() };
    for change in &txn.changes {
        let Change::Row(row) = change else { continue };
        let Some((entry, index)) = cache.awt_table(&row.table.name) else { continue };
        if entry.def.kind != GroupKind::Awt {
            continue;
        }
        if let Some(statement) = row_statement(&entry, index, row) {
            pending.statements.push(statement);
        }
        let key = entry.root_key_of_row(index, &row.row().values());
        let key_text = key.map_or_else(|| crate::manager::WHOLE_GROUP.to_owned(), |key| crate::instance::key_text(&key));
        entry.mark_dirty(&key_text);
        pending.dirty.push((entry, key_text));
    }
    if pending.statements.is_empty() && pending.dirty.is_empty() {
        return None;
    }
    Some(pending)
}

fn row_statement(entry: &GroupEntry, index: usize, change: &RowChange) -> Option<String> {
    let table = &entry.group.tables[index];
    let name = format!("{}.{}", quote_identifier(&table.source.name.schema), quote_identifier(&table.source.name.table));
    let row = change.row();
    let schema = &change.table;
    let literal = |column: usize| match row.get(column).to_owned_value() {
        Value::Null => "NULL".to_owned(),
        value => quote_literal(&value.to_string()),
    };
    let column = |c: usize| quote_identifier(&schema.columns[c].name);
    let key_filter = || schema.primary_key.iter().map(|&c| format!("{} = {}", column(c), literal(c))).collect::<Vec<_>>().join(" AND ");
    let columns: Vec<usize> = (0..schema.visible_columns().len()).collect();
    Some(match change.op {
        RowOp::Insert => format!(
            "INSERT INTO {name} ({}) VALUES ({})",
            columns.iter().map(|&c| column(c)).collect::<Vec<_>>().join(", "),
            columns.iter().map(|&c| literal(c)).collect::<Vec<_>>().join(", ")
        ),
        RowOp::Update => {
            let sets: Vec<String> = columns.iter().filter(|c| !schema.primary_key.contains(c)).map(|&c| format!("{} = {}", column(c), literal(c))).collect();
            if sets.is_empty() {
                return None;
            }
            format!("UPDATE {name} SET {} WHERE {}", sets.join(", "), key_filter())
        }
        RowOp::Delete => format!("DELETE FROM {name} WHERE {}", key_filter()),
    })
}

/// Applies `batch` in one PostgreSQL transaction with the progress row; on a
/// refusal, transaction by transaction, refused ones to the error table.
fn flush(client: &mut Client, node: &str, batch: &mut Batch, status: &AwtStatus) -> Result<(), CacheError> {
    let batch = std::mem::take(batch);
    let Some(next_lsn) = batch.next_lsn else { return Ok(()) };
    let all: Vec<&PendingTxn> = batch.txns.iter().collect();
    let last_commit = batch.txns.last().map(|t| t.commit_time_us);
    match apply(client, node, &all, next_lsn, last_commit)? {
        Applied::Yes => {}
        Applied::Refused(_) => {
            for (i, txn) in batch.txns.iter().enumerate() {
                // The last transaction carries the batch's end position
                // (transactions after it that PostgreSQL did not need).
                let position = if i + 1 == batch.txns.len() { next_lsn } else { txn.next_lsn };
                if let Applied::Refused(error) = apply(client, node, &[txn], position, Some(txn.commit_time_us))? {
                    record_error(client, node, txn, position, &error)?;
                    status.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    for txn in &batch.txns {
        for (entry, key) in &txn.dirty {
            entry.clear_dirty(key);
        }
        status.applied_statements.fetch_add(txn.statements.len() as u64, Ordering::Relaxed);
    }
    status.applied_txns.fetch_add(batch.txns.len() as u64, Ordering::Relaxed);
    status.batches.fetch_add(1, Ordering::Relaxed);
    if let Some(commit) = last_commit {
        status.last_applied_commit_us.store(commit, Ordering::Relaxed);
    }
    status.position.store(next_lsn.0, Ordering::Relaxed);
    Ok(())
}

enum Applied {
    Yes,
    /// PostgreSQL refused a statement (SQLSTATE, message) or a row count differed; rolled back.
    Refused((String, String)),
}

fn progress_statement(node: &str, next_lsn: Lsn, commit_time_us: Option<u64>) -> String {
    format!(
        "INSERT INTO pgtier.awt_progress (node, stream, next_lsn, commit_time_us, applied_at) VALUES ({}, 0, {}, {}, now()) \
         ON CONFLICT (node, stream) DO UPDATE SET next_lsn = EXCLUDED.next_lsn, commit_time_us = EXCLUDED.commit_time_us, applied_at = now()",
        quote_literal(node),
        next_lsn.0,
        commit_time_us.map_or_else(|| "NULL".to_owned(), |t| t.to_string())
    )
}

fn apply(client: &mut Client, node: &str, txns: &[&PendingTxn], next_lsn: Lsn, commit_time_us: Option<u64>) -> Result<Applied, CacheError> {
    let mut text = String::from("BEGIN;");
    let mut expected = 0usize;
    for txn in txns {
        for statement in &txn.statements {
            text.push_str(statement);
            text.push(';');
            expected += 1;
        }
    }
    let _ = write!(text, "{};", progress_statement(node, next_lsn, commit_time_us));
    let messages = match client.simple_query(&text) {
        Ok(messages) => messages,
        Err(error) => {
            let Some(db_error) = error.as_db_error() else { return Err(connection_error(&error)) };
            let refused = (db_error.code().code().to_owned(), db_error.message().to_owned());
            client.batch_execute("ROLLBACK").map_err(|e| connection_error(&e))?;
            return Ok(Applied::Refused(refused));
        }
    };
    let counts: Vec<u64> = messages.iter().filter_map(|m| if let SimpleQueryMessage::CommandComplete(n) = m { Some(*n) } else { None }).collect();
    // BEGIN, one per statement, the progress row.
    let wrong = counts.len() != expected + 2 || counts[1..=expected].iter().any(|&n| n != 1);
    if wrong {
        client.batch_execute("ROLLBACK").map_err(|e| connection_error(&e))?;
        let at = counts.iter().skip(1).position(|&n| n != 1).unwrap_or(0);
        return Ok(Applied::Refused(("P0002".into(), format!("statement {} of the transaction changed no row in PostgreSQL (the row is missing there, or a key differs)", at + 1))));
    }
    client.batch_execute("COMMIT").map_err(|e| connection_error(&e))?;
    Ok(Applied::Yes)
}

fn record_error(client: &mut Client, node: &str, txn: &PendingTxn, next_lsn: Lsn, (sqlstate, message): &(String, String)) -> Result<(), CacheError> {
    let text = format!(
        "BEGIN; INSERT INTO pgtier.awt_errors (node, lsn, commit_time_us, sqlstate, message, statements) VALUES ({}, {}, {}, {}, {}, {}); {}; COMMIT;",
        quote_literal(node),
        txn.lsn.0,
        txn.commit_time_us,
        quote_literal(sqlstate),
        quote_literal(message),
        quote_literal(&txn.statements.join(";\n")),
        progress_statement(node, next_lsn, Some(txn.commit_time_us))
    );
    client.batch_execute(&text).map_err(|e| connection_error(&e))
}

fn connection_error(error: &postgres::Error) -> CacheError {
    CacheError::Backend(pgtier_backend::BackendError::from_postgres("write-through", error))
}

/// The tables AWT writes to in PostgreSQL, and a replication origin on the
/// session so pgtier's own changes can be told apart by logical decoding.
fn setup(client: &mut Client, node: &str) -> Result<(), CacheError> {
    client
        .batch_execute(
            "SET standard_conforming_strings = on;
             SET synchronous_commit = on;
             CREATE SCHEMA IF NOT EXISTS pgtier;
             CREATE TABLE IF NOT EXISTS pgtier.awt_progress (
                 node text NOT NULL, stream int NOT NULL, next_lsn bigint NOT NULL, commit_time_us bigint,
                 applied_at timestamptz NOT NULL, PRIMARY KEY (node, stream));
             CREATE TABLE IF NOT EXISTS pgtier.awt_errors (
                 id bigserial PRIMARY KEY, node text NOT NULL, lsn bigint NOT NULL, commit_time_us bigint NOT NULL,
                 sqlstate text NOT NULL, message text NOT NULL, statements text NOT NULL,
                 recorded_at timestamptz NOT NULL DEFAULT now());",
        )
        .map_err(|e| connection_error(&e))?;
    let origin = quote_literal(&format!("pgtier_{node}"));
    // Needs superuser or a grant on the origin functions; without it pgtier's
    // changes are not marked (autorefresh then cannot skip them).
    let _ = client.batch_execute(&format!(
        "SELECT pg_replication_origin_create({origin}) WHERE NOT EXISTS (SELECT 1 FROM pg_replication_origin WHERE roname = {origin});
         SELECT pg_replication_origin_session_setup({origin});"
    ));
    Ok(())
}

fn read_progress(client: &mut Client, node: &str) -> Result<u64, CacheError> {
    let rows = client.query("SELECT next_lsn FROM pgtier.awt_progress WHERE node = $1 AND stream = 0", &[&node]).map_err(|e| connection_error(&e))?;
    Ok(rows.first().map_or(0, |row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)))
}

/// Waits until propagation has processed everything committed before the
/// call (`wal_end`), or `timeout`; true when it has.
pub(crate) fn wait_position(status: &AwtStatus, wal_end: u64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while status.position.load(Ordering::Relaxed) < wal_end {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Table name → (its group, its index in the group), over every group.
pub(crate) type TableMap = HashMap<String, (Arc<GroupEntry>, usize)>;

pub(crate) fn table_map<'a>(groups: impl Iterator<Item = &'a Arc<GroupEntry>>) -> TableMap {
    let mut map = HashMap::new();
    for entry in groups {
        for (index, table) in entry.group.tables.iter().enumerate() {
            map.insert(table.def.name.clone(), (entry.clone(), index));
        }
    }
    map
}
