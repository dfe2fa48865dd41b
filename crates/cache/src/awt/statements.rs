//! What AWT sends PostgreSQL: a committed transaction's row changes as SQL
//! statements; batches applied in one PostgreSQL transaction that first
//! checks the tables' definitions and ends by moving the progress rows of
//! the (group, lane) streams they advance; refused transactions into the
//! error table; and the writes of the progress rows (`progress` reads them).

use std::collections::BTreeMap;
use std::sync::Arc;

use pgtier_engine::{Change, CommittedTxn, Lsn, Origin};
use postgres::Client;

use super::AwtHost;
use super::progress::Stream;
use crate::apply::{Applied, Applier, Refusal, RowStatement, apply_checked, row_statement};
use crate::backend_schema::{DEFINITION_CHANGED, NODE_NOT_OWNED};
use crate::drift::{check_clause, token_of, verify_group};
use crate::error::{CacheError, connection_error};
use crate::group::GroupKind;
use crate::instance::key_text;
use crate::node::NodeIdentity;
use crate::registry::{GroupEntry, WHOLE_GROUP, lane_of, quote_literal};

/// One application transaction turned into SQL for PostgreSQL.
pub(crate) struct PendingTxn {
    pub lsn: Lsn,
    pub next_lsn: Lsn,
    pub commit_time_us: u64,
    pub statements: Vec<RowStatement>,
    /// (group, root key text) of every instance it changed: marked pending until settled.
    pub dirty: Vec<(Arc<GroupEntry>, String)>,
}

impl PendingTxn {
    pub fn bytes(&self) -> usize {
        self.statements.iter().map(|s| s.execute.len()).sum()
    }

    /// PostgreSQL has it (or the error table does): its marks are no longer pending.
    pub fn settled(&self) {
        for (entry, key) in &self.dirty {
            entry.marks.settle(key, self.lsn.0);
        }
    }

    /// The groups it changed, without repeats.
    pub fn groups(&self) -> Vec<&str> {
        let mut groups: Vec<&str> = Vec::with_capacity(1);
        for (entry, _) in &self.dirty {
            if !groups.contains(&entry.def.name.as_str()) {
                groups.push(&entry.def.name);
            }
        }
        groups
    }

    /// The progress rows it advances with `lanes` lanes: (group, lane) of
    /// each instance, every lane of a group for a change whose instance is
    /// unknown; sorted, without repeats.
    pub fn streams(&self, lanes: usize) -> Vec<Stream> {
        let mut streams: Vec<Stream> = Vec::with_capacity(1);
        for (entry, key) in &self.dirty {
            if key == WHOLE_GROUP {
                streams.extend((0..lanes).map(|lane| (entry.def.name.clone(), lane)));
            } else {
                streams.push((entry.def.name.clone(), lane_of(&entry.def.name, key, lanes)));
            }
        }
        streams.sort_unstable();
        streams.dedup();
        streams
    }
}

/// The statements of `txn` for PostgreSQL, or None when it changes no AWT
/// table. Marks the instances it touches pending until it is settled
/// (marking the same transaction again, read again after a reconnect, is a no-op).
pub(crate) fn statements(cache: &dyn AwtHost, txn: &CommittedTxn) -> Option<PendingTxn> {
    if txn.origin != Origin::Application {
        return None;
    }
    let mut pending = PendingTxn {
        lsn: txn.lsn,
        next_lsn: txn.next_lsn,
        commit_time_us: txn.commit_time_us,
        statements: Vec::new(),
        dirty: Vec::new(),
    };
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
        entry.marks.mark(&key_text, txn.lsn.0);
        if !pending.dirty.iter().any(|(e, k)| Arc::ptr_eq(e, &entry) && *k == key_text) {
            pending.dirty.push((entry, key_text));
        }
    }
    if pending.statements.is_empty() && pending.dirty.is_empty() {
        return None;
    }
    Some(pending)
}

/// Moves every row of `groups` (lanes `0..lanes`) to `next`, and with
/// `replace` first deletes every row of this incarnation: the lane count
/// changes only where everything before one position is applied and nothing
/// after it (lanes hash instances differently after).
pub(crate) fn set_progress(
    client: &mut Client,
    node: &NodeIdentity,
    groups: &[String],
    lanes: usize,
    next: Lsn,
    replace: bool,
) -> Result<(), CacheError> {
    let streams: Vec<(String, usize, Lsn)> =
        groups.iter().flat_map(|g| (0..lanes).map(move |lane| (g.clone(), lane, next))).collect();
    let mut text = String::from("BEGIN;");
    if replace {
        text.push_str(&format!(
            "DELETE FROM pgtier.awt_progress WHERE node = {} AND incarnation = {};",
            quote_literal(&node.name),
            quote_literal(&node.incarnation)
        ));
    }
    if !streams.is_empty() {
        text.push_str(&advance(node, &streams, None));
        text.push(';');
    }
    text.push_str("COMMIT;");
    client.batch_execute(&text).map_err(|e| refused_or_lost(&e, &node.name))
}

/// Makes every (group, lane) row of `groups` exist (at position 0 where
/// missing: nothing of it applied yet), and forgets the rows of groups that
/// no longer exist. A session infers the lane count from the rows, so a lane
/// whose first batch was cut short must still have its row.
pub(crate) fn ensure_rows(
    client: &mut Client,
    node: &NodeIdentity,
    groups: &[String],
    lanes: usize,
    forget_others: bool,
) -> Result<(), CacheError> {
    let mut text = String::from("BEGIN;");
    if forget_others {
        let keep: Vec<String> =
            groups.iter().map(|g| quote_literal(g)).chain(std::iter::once("''".to_owned())).collect();
        text.push_str(&format!(
            "DELETE FROM pgtier.awt_progress WHERE node = {} AND incarnation = {} AND grp NOT IN ({});",
            quote_literal(&node.name),
            quote_literal(&node.incarnation),
            keep.join(", ")
        ));
    }
    let streams: Vec<(String, usize, Lsn)> =
        groups.iter().flat_map(|g| (0..lanes).map(move |lane| (g.clone(), lane, Lsn(0)))).collect();
    if !streams.is_empty() {
        // Positions only move forward (awt_advance): existing rows keep theirs.
        text.push_str(&advance(node, &streams, None));
        text.push(';');
    }
    text.push_str("COMMIT;");
    client.batch_execute(&text).map_err(|e| refused_or_lost(&e, &node.name))
}

/// The call moving progress rows `(group, lane, next position)` (after checking the node is still this directory's).
fn advance(node: &NodeIdentity, streams: &[(String, usize, Lsn)], commit_time_us: Option<u64>) -> String {
    let groups: Vec<String> = streams.iter().map(|(g, _, _)| quote_literal(g)).collect();
    let lanes: Vec<String> = streams.iter().map(|(_, l, _)| l.to_string()).collect();
    let next: Vec<String> = streams.iter().map(|(_, _, n)| n.0.to_string()).collect();
    format!(
        "SELECT pgtier.awt_advance({}, {}, ARRAY[{}]::text[], ARRAY[{}]::int[], ARRAY[{}]::bigint[], {})",
        quote_literal(&node.name),
        quote_literal(&node.incarnation),
        groups.join(","),
        lanes.join(","),
        next.join(","),
        commit_time_us.map_or_else(|| "NULL".to_owned(), |t| t.to_string())
    )
}

/// Where a batch leaves each stream it advances: per stream, the end of
/// its own last transaction in the batch (never past a transaction of that
/// group the batch does not hold).
fn batch_streams(txns: &[&PendingTxn], lanes: usize, spanning: Option<&[Stream]>) -> Vec<(String, usize, Lsn)> {
    let mut ends: BTreeMap<Stream, Lsn> = BTreeMap::new();
    for txn in txns {
        let streams = match spanning {
            Some(streams) => streams.to_vec(),
            None => txn.streams(lanes),
        };
        for stream in streams {
            let end = ends.entry(stream).or_insert(txn.next_lsn);
            *end = (*end).max(txn.next_lsn);
        }
    }
    ends.into_iter().map(|((group, lane), next)| (group, lane, next)).collect()
}

/// How a batch is applied: the node, the lane count, and for a transaction
/// spanning lanes the streams it moves.
pub(crate) struct BatchContext<'a> {
    pub node: &'a NodeIdentity,
    pub lanes: usize,
    pub spanning: Option<&'a [Stream]>,
}

/// Applies `txns` in one PostgreSQL transaction: the definition check of
/// the tables they change first, their statements, the progress rows last.
fn apply(applier: &mut Applier, ctx: &BatchContext<'_>, txns: &[&PendingTxn]) -> Result<Applied, CacheError> {
    let statements: Vec<&RowStatement> = txns.iter().flat_map(|txn| &txn.statements).collect();
    let mut tables: Vec<(u32, String)> = Vec::new();
    for statement in &statements {
        let entry = statement.entry();
        if token_of(entry, statement.index()).is_none() {
            // A group created while this session runs: checked on first use.
            if let Some(drift) = verify_group(&mut applier.client, entry)? {
                return Err(CacheError::DefinitionDrift {
                    group: entry.def.name.clone(),
                    table: drift.table,
                    reason: drift.reason,
                });
            }
        }
        let Some(token) = token_of(entry, statement.index()) else {
            return Err(CacheError::DefinitionDrift {
                group: entry.def.name.clone(),
                table: entry.group.tables[statement.index()].source.name.to_string(),
                reason: "no longer exists in PostgreSQL".into(),
            });
        };
        if !tables.contains(&token) {
            tables.push(token);
        }
    }
    let commit_time_us = txns.last().map(|txn| txn.commit_time_us);
    let tail = advance(ctx.node, &batch_streams(txns, ctx.lanes, ctx.spanning), commit_time_us);
    match apply_checked(applier, check_clause(&tables).as_deref(), &statements, &tail)? {
        // The session ends; the next one reads the progress rows and knows.
        Applied::Unknown(error) => Err(error),
        Applied::Refused(refusal) => match refusal_kind(&refusal, &ctx.node.name) {
            RefusalKind::ForGood => Ok(Applied::Refused(refusal)),
            RefusalKind::Session(error) => Err(error),
        },
        Applied::Yes => Ok(Applied::Yes),
    }
}

enum RefusalKind {
    /// The transaction itself is refused (a constraint, a row changed behind the cache): the error table.
    ForGood,
    /// Not the transaction's fault: the session ends and it is applied again later.
    Session(CacheError),
}

/// A refusal that is the transaction's own goes to the error table; one
/// that says something about the session or the moment (this node taken
/// over, a definition changed, a deadlock or serialization failure with
/// another PostgreSQL session, a cancel, PostgreSQL shutting down, out of
/// resources) must never: the transaction is applied again later.
fn refusal_kind(refusal: &Refusal, node: &str) -> RefusalKind {
    let sqlstate = refusal.sqlstate.as_str();
    if sqlstate == NODE_NOT_OWNED {
        return RefusalKind::Session(CacheError::NodeTakenOver { node: node.to_owned() });
    }
    if sqlstate == DEFINITION_CHANGED {
        return RefusalKind::Session(CacheError::DefinitionDrift {
            group: String::new(),
            table: refusal.detail.clone().unwrap_or_default(),
            reason: refusal.message.clone(),
        });
    }
    let transient_class =
        ["08", "40", "53", "54", "55", "57", "58", "XX", "F0", "HV"].iter().any(|class| sqlstate.starts_with(class));
    if transient_class {
        return RefusalKind::Session(CacheError::Backend(pgtier_backend::BackendError::Server {
            what: "write-through".into(),
            sqlstate: refusal.sqlstate.clone(),
            message: refusal.message.clone(),
            detail: refusal.detail.clone(),
            hint: refusal.hint.clone(),
        }));
    }
    RefusalKind::ForGood
}

/// Applies a batch; when PostgreSQL refuses it for good, applies its
/// transactions one by one and records each refused one in the error table
/// (with its progress, so it is never retried). Returns the number refused.
pub(crate) fn apply_isolating(
    applier: &mut Applier,
    ctx: &BatchContext<'_>,
    txns: &[&PendingTxn],
) -> Result<u64, CacheError> {
    if txns.is_empty() {
        return Ok(0);
    }
    if let Applied::Yes = apply(applier, ctx, txns)? {
        return Ok(0);
    }
    let mut refused = 0;
    for txn in txns {
        if let Applied::Refused(error) = apply(applier, ctx, &[txn])? {
            record_error(&mut applier.client, ctx, txn, &error)?;
            // Its SQLSTATE only: the message and statements can quote row values (they are in the table).
            tracing::warn!(
                lsn = txn.lsn.0,
                sqlstate = error.sqlstate.as_str(),
                "write-through: PostgreSQL refused a transaction for good; it is in pgtier.awt_errors"
            );
            refused += 1;
        }
    }
    Ok(refused)
}

fn record_error(
    client: &mut Client,
    ctx: &BatchContext<'_>,
    txn: &PendingTxn,
    Refusal { sqlstate, message, .. }: &Refusal,
) -> Result<(), CacheError> {
    let text = format!(
        "BEGIN; INSERT INTO pgtier.awt_errors (node, incarnation, lsn, commit_time_us, sqlstate, message, statements) VALUES ({}, {}, {}, {}, {}, {}, {}); {}; COMMIT;",
        quote_literal(&ctx.node.name),
        quote_literal(&ctx.node.incarnation),
        txn.lsn.0,
        txn.commit_time_us,
        quote_literal(sqlstate),
        quote_literal(message),
        quote_literal(&txn.statements.iter().map(RowStatement::plain).collect::<Vec<_>>().join(";\n")),
        advance(ctx.node, &batch_streams(&[txn], ctx.lanes, ctx.spanning), Some(txn.commit_time_us))
    );
    client.batch_execute(&text).map_err(|e| refused_or_lost(&e, &ctx.node.name))
}

/// A bookkeeping statement's failure: this node taken over, or the connection.
pub(crate) fn refused_or_lost(error: &postgres::Error, node: &str) -> CacheError {
    match error.as_db_error() {
        Some(db) if db.code().code() == NODE_NOT_OWNED => CacheError::NodeTakenOver { node: node.to_owned() },
        _ => connection_error(error),
    }
}
