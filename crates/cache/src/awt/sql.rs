//! What AWT sends PostgreSQL: a committed transaction's row changes as SQL
//! statements, batches applied in one PostgreSQL transaction together with
//! the progress rows of the lanes they advance, refused transactions into
//! the error table, and the tables and session setup this needs.

use std::sync::Arc;

use pgtier_engine::{Change, CommittedTxn, Lsn, Origin};
use postgres::Client;

use crate::apply::{Applied, Applier, Refusal, RowStatement, apply_checked, connection_error, row_statement, session_setup, setup_schema};
use crate::error::CacheError;
use crate::group::GroupKind;
use crate::instance::key_text;
use crate::manager::{Cache, GroupEntry, WHOLE_GROUP, quote_literal};

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

/// Applies `txns` and moves `progress` in one PostgreSQL transaction.
fn apply(applier: &mut Applier, node: &str, txns: &[&PendingTxn], progress: &Progress, commit_time_us: Option<u64>) -> Result<Applied, CacheError> {
    let statements: Vec<&RowStatement> = txns.iter().flat_map(|txn| &txn.statements).collect();
    match apply_checked(applier, &statements, &progress_statements(node, progress, commit_time_us))? {
        // The session ends; the next one reads the progress rows and knows.
        Applied::Unknown(error) => Err(error),
        applied => Ok(applied),
    }
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

fn record_error(client: &mut Client, node: &str, txn: &PendingTxn, progress: &Progress, Refusal { sqlstate, message, .. }: &Refusal) -> Result<(), CacheError> {
    let text = format!(
        "BEGIN; INSERT INTO pgtier.awt_errors (node, lsn, commit_time_us, sqlstate, message, statements) VALUES ({}, {}, {}, {}, {}, {}); {}; COMMIT;",
        quote_literal(node),
        txn.lsn.0,
        txn.commit_time_us,
        quote_literal(sqlstate),
        quote_literal(message),
        quote_literal(&txn.statements.iter().map(RowStatement::plain).collect::<Vec<_>>().join(";\n")),
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

/// The tables AWT writes to in PostgreSQL, and a replication origin on the
/// session so pgtier's own changes can be told apart by logical decoding.
/// `lane` None: the session's control connection (it creates the tables and
/// applies transactions that span lanes). Each connection has its own origin:
/// PostgreSQL lets one session at a time use an origin.
pub(crate) fn setup(client: &mut Client, node: &str, lane: Option<usize>, create: bool) -> Result<(), CacheError> {
    if create {
        setup_schema(client)?;
    }
    session_setup(client, &format!("pgtier_{node}_{}", lane.map_or_else(|| "x".to_owned(), |lane| lane.to_string())))
}

/// This node's lanes and their positions, by lane number.
pub(crate) fn read_progress(client: &mut Client, node: &str) -> Result<Vec<(usize, u64)>, CacheError> {
    let rows = client.query("SELECT stream, next_lsn FROM pgtier.awt_progress WHERE node = $1 ORDER BY stream", &[&node]).map_err(|e| connection_error(&e))?;
    Ok(rows
        .iter()
        .map(|row| (usize::try_from(row.get::<_, i32>(0)).unwrap_or(0), u64::try_from(row.get::<_, i64>(1)).unwrap_or(0)))
        .collect())
}
