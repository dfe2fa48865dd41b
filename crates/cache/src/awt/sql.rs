//! What AWT sends PostgreSQL: a committed transaction's row changes as SQL
//! statements, batches applied in one PostgreSQL transaction together with
//! the progress rows of the lanes they advance, refused transactions into
//! the error table, and the tables and session setup this needs.

use std::fmt::Write as _;
use std::sync::Arc;

use pgtier_backend::copy_out::quote_identifier;
use pgtier_engine::{Change, CommittedTxn, Lsn, Origin, RowChange, RowOp, Value};
use postgres::{Client, SimpleQueryMessage};

use crate::error::CacheError;
use crate::group::GroupKind;
use crate::instance::key_text;
use crate::manager::{Cache, GroupEntry, WHOLE_GROUP, quote_literal};

/// One row change for PostgreSQL: an EXECUTE of a statement prepared once
/// per connection and shape (PostgreSQL then skips parsing and planning),
/// and the same as plain SQL (for the error table, and for a connection
/// where the PREPARE itself fails).
pub(crate) struct RowStatement {
    /// The prepared statement's name: one per table and operation.
    pub name: String,
    pub prepare: String,
    pub execute: String,
    pub plain: String,
}

/// One application transaction turned into SQL for PostgreSQL.
pub(crate) struct PendingTxn {
    pub lsn: Lsn,
    pub next_lsn: Lsn,
    pub commit_time_us: u64,
    pub statements: Vec<RowStatement>,
    /// (group, root key text) of every instance it changed; dirty until applied.
    pub dirty: Vec<(Arc<GroupEntry>, String)>,
}

impl PendingTxn {
    pub fn bytes(&self) -> usize {
        self.statements.iter().map(|s| s.execute.len()).sum()
    }

    /// Clears the dirty marks this transaction set (it reached PostgreSQL,
    /// or the error table).
    pub fn applied(&self) {
        for (entry, key) in &self.dirty {
            entry.clear_dirty(key);
        }
    }
}

/// The statements of `txn` for PostgreSQL, or None when it changes no AWT
/// table. Marks the instances it touches dirty until it is applied.
pub(crate) fn statements(cache: &Cache, txn: &CommittedTxn) -> Option<PendingTxn> {
    if txn.origin != Origin::Application {
        return None;
    }
    let mut pending = PendingTxn { lsn: txn.lsn, next_lsn: txn.next_lsn, commit_time_us: txn.commit_time_us, statements: Vec::new(), dirty: Vec::new() };
    for change in &txn.changes {
        let Change::Row(row) = change else { continue };
        let Some((entry, index)) = cache.table_of_group(&row.table.name) else { continue };
        if entry.def.kind != GroupKind::Awt {
            continue;
        }
        if let Some(statement) = row_statement(&entry, index, row) {
            pending.statements.push(statement);
        }
        let key = entry.root_key_of_row(index, &row.row().values());
        let key_text = key.map_or_else(|| WHOLE_GROUP.to_owned(), |key| key_text(&key));
        entry.mark_dirty(&key_text);
        pending.dirty.push((entry, key_text));
    }
    if pending.statements.is_empty() && pending.dirty.is_empty() {
        return None;
    }
    Some(pending)
}

/// INSERT of the after-image, UPDATE of every non-key column by primary key,
/// DELETE by primary key (a key change is a delete and an insert in the
/// engine's log). Values as text literals PostgreSQL casts to the column type.
fn row_statement(entry: &GroupEntry, index: usize, change: &RowChange) -> Option<RowStatement> {
    let table = &entry.group.tables[index];
    let relation = format!("{}.{}", quote_identifier(&table.source.name.schema), quote_identifier(&table.source.name.table));
    let row = change.row();
    let schema = &change.table;
    let literal = |column: usize| match row.get(column).to_owned_value() {
        Value::Null => "NULL".to_owned(),
        value => quote_literal(&value.to_string()),
    };
    let column = |c: usize| quote_identifier(&schema.columns[c].name);
    let columns: Vec<usize> = (0..schema.visible_columns().len()).collect();
    // Parameter order: the columns the statement sets, then the key.
    let (op, targets, keys): (&str, Vec<usize>, Vec<usize>) = match change.op {
        RowOp::Insert => ("ins", columns.clone(), Vec::new()),
        RowOp::Update => ("upd", columns.iter().copied().filter(|c| !schema.primary_key.contains(c)).collect(), schema.primary_key.clone()),
        RowOp::Delete => ("del", Vec::new(), schema.primary_key.clone()),
    };
    if change.op == RowOp::Update && targets.is_empty() {
        return None;
    }
    let shape = |value: &dyn Fn(usize, usize) -> String| -> String {
        let filter = keys.iter().enumerate().map(|(i, &c)| format!("{} = {}", column(c), value(targets.len() + i, c))).collect::<Vec<_>>().join(" AND ");
        match change.op {
            RowOp::Insert => format!(
                "INSERT INTO {relation} ({}) VALUES ({})",
                targets.iter().map(|&c| column(c)).collect::<Vec<_>>().join(", "),
                targets.iter().enumerate().map(|(i, &c)| value(i, c)).collect::<Vec<_>>().join(", ")
            ),
            RowOp::Update => {
                let sets = targets.iter().enumerate().map(|(i, &c)| format!("{} = {}", column(c), value(i, c))).collect::<Vec<_>>().join(", ");
                format!("UPDATE {relation} SET {sets} WHERE {filter}")
            }
            RowOp::Delete => format!("DELETE FROM {relation} WHERE {filter}"),
        }
    };
    let plain = shape(&|_, c| literal(c));
    let name = format!("pgtier_{op}_{:016x}", stable_hash(&relation));
    let types: Vec<&str> = targets.iter().chain(&keys).map(|&c| table.source.columns.get(c).map_or("text", |col| col.type_name.as_str())).collect();
    let prepare = format!("PREPARE {name} ({}) AS {}", types.join(", "), shape(&|i, _| format!("${}", i + 1)));
    let execute = format!("EXECUTE {name}({})", targets.iter().chain(&keys).map(|&c| literal(c)).collect::<Vec<_>>().join(", "));
    Some(RowStatement { name, prepare, execute, plain })
}

/// FNV-1a: the same value in every process and Rust version (prepared
/// statement names must fit PostgreSQL's 63 bytes; lanes must survive restarts).
pub(crate) fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// A PostgreSQL connection that applies, with the statements it has prepared.
pub(crate) struct Applier {
    pub client: Client,
    prepared: std::collections::HashSet<String>,
}

impl Applier {
    pub fn new(client: Client) -> Applier {
        Applier { client, prepared: std::collections::HashSet::new() }
    }

    /// Prepares what `txns` need and this connection lacks. False when
    /// PostgreSQL refuses a PREPARE (a table changed there): then the batch
    /// goes as plain SQL, so the refusal is met per transaction.
    fn prepare(&mut self, txns: &[&PendingTxn]) -> Result<bool, CacheError> {
        let mut text = String::new();
        let mut names = Vec::new();
        for statement in txns.iter().flat_map(|t| &t.statements) {
            if !self.prepared.contains(&statement.name) && !names.contains(&statement.name) {
                text.push_str(&statement.prepare);
                text.push(';');
                names.push(statement.name.clone());
            }
        }
        if names.is_empty() {
            return Ok(true);
        }
        match self.client.batch_execute(&text) {
            Ok(()) => {
                self.prepared.extend(names);
                Ok(true)
            }
            Err(error) if error.as_db_error().is_some() => {
                // Some may have been prepared before the refused one: forget
                // them all (DEALLOCATE ALL), so names and statements agree.
                self.client.batch_execute("DEALLOCATE ALL").map_err(|e| connection_error(&e))?;
                self.prepared.clear();
                Ok(false)
            }
            Err(error) => Err(connection_error(&error)),
        }
    }
}

pub(crate) enum Applied {
    Yes,
    /// PostgreSQL refused a statement (SQLSTATE, message) or a row count differed; rolled back.
    Refused((String, String)),
}

/// Where a batch leaves each lane it advances: (lane, next position).
pub(crate) type Progress = [(usize, Lsn)];

fn progress_statements(node: &str, progress: &Progress, commit_time_us: Option<u64>) -> String {
    let commit = commit_time_us.map_or_else(|| "NULL".to_owned(), |t| t.to_string());
    let rows: Vec<String> = progress.iter().map(|(lane, lsn)| format!("({}, {lane}, {}, {commit}, now())", quote_literal(node), lsn.0)).collect();
    format!(
        "INSERT INTO pgtier.awt_progress (node, stream, next_lsn, commit_time_us, applied_at) VALUES {} \
         ON CONFLICT (node, stream) DO UPDATE SET next_lsn = EXCLUDED.next_lsn, commit_time_us = EXCLUDED.commit_time_us, applied_at = now()",
        rows.join(", ")
    )
}

/// Applies `txns` and moves `progress` in one PostgreSQL transaction: one
/// round trip with every statement, a check that each changed exactly one
/// row, then COMMIT (or ROLLBACK and `Refused`).
pub(crate) fn apply(applier: &mut Applier, node: &str, txns: &[&PendingTxn], progress: &Progress, commit_time_us: Option<u64>) -> Result<Applied, CacheError> {
    let prepared = applier.prepare(txns)?;
    let client = &mut applier.client;
    let mut text = String::from("BEGIN;");
    let mut expected = 0usize;
    for txn in txns {
        for statement in &txn.statements {
            text.push_str(if prepared { &statement.execute } else { &statement.plain });
            text.push(';');
            expected += 1;
        }
    }
    let _ = write!(text, "{};", progress_statements(node, progress, commit_time_us));
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
    // BEGIN, one per statement, the progress rows.
    let wrong = counts.len() != expected + 2 || counts[1..=expected].iter().any(|&n| n != 1);
    if wrong {
        client.batch_execute("ROLLBACK").map_err(|e| connection_error(&e))?;
        let at = counts.iter().skip(1).position(|&n| n != 1).unwrap_or(0);
        let reason = format!("statement {} of the transaction changed no row in PostgreSQL (the row is missing there, or a key differs)", at + 1);
        return Ok(Applied::Refused(("P0002".into(), reason)));
    }
    client.batch_execute("COMMIT").map_err(|e| connection_error(&e))?;
    Ok(Applied::Yes)
}

/// Applies a batch; when PostgreSQL refuses it, applies its transactions one
/// by one and records each refused one in the error table (with the
/// progress, so it is never retried). Returns the number refused.
pub(crate) fn apply_isolating(applier: &mut Applier, node: &str, txns: &[&PendingTxn], progress: &Progress) -> Result<u64, CacheError> {
    let Some(last) = txns.last() else { return Ok(0) };
    if let Applied::Yes = apply(applier, node, txns, progress, Some(last.commit_time_us))? {
        return Ok(0);
    }
    let mut refused = 0;
    for (i, txn) in txns.iter().enumerate() {
        // The last transaction carries the batch's progress; earlier ones their own end.
        let own: Vec<(usize, Lsn)> = if i + 1 == txns.len() { progress.to_vec() } else { progress.iter().map(|(lane, _)| (*lane, txn.next_lsn)).collect() };
        if let Applied::Refused(error) = apply(applier, node, &[txn], &own, Some(txn.commit_time_us))? {
            record_error(&mut applier.client, node, txn, &own, &error)?;
            refused += 1;
        }
    }
    Ok(refused)
}

fn record_error(client: &mut Client, node: &str, txn: &PendingTxn, progress: &Progress, (sqlstate, message): &(String, String)) -> Result<(), CacheError> {
    let text = format!(
        "BEGIN; INSERT INTO pgtier.awt_errors (node, lsn, commit_time_us, sqlstate, message, statements) VALUES ({}, {}, {}, {}, {}, {}); {}; COMMIT;",
        quote_literal(node),
        txn.lsn.0,
        txn.commit_time_us,
        quote_literal(sqlstate),
        quote_literal(message),
        quote_literal(&txn.statements.iter().map(|s| s.plain.as_str()).collect::<Vec<_>>().join(";\n")),
        progress_statements(node, progress, Some(txn.commit_time_us))
    );
    client.batch_execute(&text).map_err(|e| connection_error(&e))
}

/// Moves every lane of `lanes` to `next_lsn` (when nothing is pending), so a
/// restart starts reading there, and lanes agree (their number may change).
pub(crate) fn set_progress(client: &mut Client, node: &str, lanes: usize, next_lsn: Lsn) -> Result<(), CacheError> {
    let progress: Vec<(usize, Lsn)> = (0..lanes).map(|lane| (lane, next_lsn)).collect();
    client.batch_execute(&format!("{};", progress_statements(node, &progress, None))).map_err(|e| connection_error(&e))
}

pub(crate) fn connection_error(error: &postgres::Error) -> CacheError {
    CacheError::Backend(pgtier_backend::BackendError::from_postgres("write-through", error))
}

/// The tables AWT writes to in PostgreSQL, and a replication origin on the
/// session so pgtier's own changes can be told apart by logical decoding.
/// `lane` None: the session's control connection (it creates the tables and
/// applies transactions that span lanes). Each connection has its own origin:
/// PostgreSQL lets one session at a time use an origin.
pub(crate) fn setup(client: &mut Client, node: &str, lane: Option<usize>, create: bool) -> Result<(), CacheError> {
    client.batch_execute("SET standard_conforming_strings = on; SET synchronous_commit = on;").map_err(|e| connection_error(&e))?;
    if create {
        client
            .batch_execute(
                "CREATE SCHEMA IF NOT EXISTS pgtier;
                 CREATE TABLE IF NOT EXISTS pgtier.awt_progress (
                     node text NOT NULL, stream int NOT NULL, next_lsn bigint NOT NULL, commit_time_us bigint,
                     applied_at timestamptz NOT NULL, PRIMARY KEY (node, stream));
                 CREATE TABLE IF NOT EXISTS pgtier.awt_errors (
                     id bigserial PRIMARY KEY, node text NOT NULL, lsn bigint NOT NULL, commit_time_us bigint NOT NULL,
                     sqlstate text NOT NULL, message text NOT NULL, statements text NOT NULL,
                     recorded_at timestamptz NOT NULL DEFAULT now());",
            )
            .map_err(|e| connection_error(&e))?;
    }
    let origin = quote_literal(&format!("pgtier_{node}_{}", lane.map_or_else(|| "x".to_owned(), |lane| lane.to_string())));
    // Needs superuser or a grant on the origin functions; without it pgtier's
    // changes are not marked (autorefresh then cannot skip them).
    let _ = client.batch_execute(&format!(
        "SELECT pg_replication_origin_create({origin}) WHERE NOT EXISTS (SELECT 1 FROM pg_replication_origin WHERE roname = {origin});
         SELECT pg_replication_origin_session_setup({origin});"
    ));
    Ok(())
}

/// This node's lanes and their positions, by lane number.
pub(crate) fn read_progress(client: &mut Client, node: &str) -> Result<Vec<(usize, u64)>, CacheError> {
    let rows = client.query("SELECT stream, next_lsn FROM pgtier.awt_progress WHERE node = $1 ORDER BY stream", &[&node]).map_err(|e| connection_error(&e))?;
    Ok(rows
        .iter()
        .map(|row| (usize::try_from(row.get::<_, i32>(0)).unwrap_or(0), u64::try_from(row.get::<_, i64>(1)).unwrap_or(0)))
        .collect())
}
