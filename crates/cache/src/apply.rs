//! What pgtier sends PostgreSQL for its cached tables' row changes, shared
//! by both write-through modes (AWT applies committed transactions in
//! batches, SWT one transaction inside the cache's commit): a row change as
//! an EXECUTE of a statement prepared once per connection and table shape,
//! and one PostgreSQL transaction that runs them, checks that each changed
//! exactly one row, and commits only then.

use std::sync::Arc;

use pgtier_backend::catalog::Identity;
use pgtier_backend::copy_out::quote_identifier;
use pgtier_engine::{RowChange, RowOp, Value};
use postgres::Client;

use crate::error::{CacheError, connection_error};
use crate::hash::stable_hash;
use crate::node::{self, NodeIdentity, NodeObject};
use crate::registry::{GroupEntry, Shape, quote_literal};

/// One row change for PostgreSQL: an EXECUTE of a statement prepared once
/// per connection and shape (PostgreSQL then skips parsing and planning).
/// An UPDATE or DELETE checks in PostgreSQL that it changed exactly one row
/// (`pgtier.expect_one` raises P0002 otherwise), so a whole transaction and
/// its COMMIT go in one round trip. Only the EXECUTE is built per change
/// (write-through builds one per row it propagates); the prepared text is
/// built once per table and kind, the plain SQL only when needed (a
/// connection where the PREPARE fails, the error table).
pub(crate) struct RowStatement {
    shape: Arc<Shape>,
    pub execute: String,
    entry: Arc<GroupEntry>,
    index: usize,
    change: RowChange,
}

impl RowStatement {
    /// The group of the table it changes.
    pub fn entry(&self) -> &GroupEntry {
        &self.entry
    }

    /// The index of the table it changes in its group.
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn name(&self) -> &str {
        &self.shape.name
    }

    pub fn prepare(&self) -> &str {
        &self.shape.prepare
    }

    /// The checked statement with literal values.
    pub fn checked_plain(&self) -> String {
        statement_text(&self.entry, self.index, &self.change, Values::Literals, true)
    }

    /// The bare statement with literal values, for people (the error table).
    pub fn plain(&self) -> String {
        statement_text(&self.entry, self.index, &self.change, Values::Literals, false)
    }
}

/// INSERT of the after-image, UPDATE of every non-key column by primary key,
/// DELETE by primary key (a key change is a delete and an insert in the
/// engine's log). Values as text literals PostgreSQL casts to the column
/// type. None for an UPDATE that sets nothing (a table of key columns only).
pub(crate) fn row_statement(entry: &Arc<GroupEntry>, index: usize, change: &RowChange) -> Option<RowStatement> {
    let (targets, keys) = parameters(change);
    if change.op == RowOp::Update && targets.is_empty() {
        return None;
    }
    let shape = entry.shape(index, change.op, || {
        let table = &entry.group.tables[index];
        let relation = relation(entry, index);
        let op = match change.op {
            RowOp::Insert => "ins",
            RowOp::Update => "upd",
            RowOp::Delete => "del",
        };
        let name = format!("pgtier_{op}_{:016x}", stable_hash(&relation));
        let types: Vec<&str> = targets
            .iter()
            .chain(&keys)
            .map(|&c| table.source.columns.get(c).map_or("text", |col| col.type_name.as_str()))
            .collect();
        let prepare = format!(
            "PREPARE {name} ({}) AS {}",
            types.join(", "),
            statement_text(entry, index, change, Values::Parameters, true)
        );
        Shape { name, prepare }
    });
    let row = change.row();
    let mut execute = String::with_capacity(shape.name.len() + 16 * (targets.len() + keys.len()));
    execute.push_str("EXECUTE ");
    execute.push_str(&shape.name);
    execute.push('(');
    for (i, &column) in targets.iter().chain(&keys).enumerate() {
        if i > 0 {
            execute.push_str(", ");
        }
        push_literal(&mut execute, &row.get(column).to_owned_value());
    }
    execute.push(')');
    Some(RowStatement { shape, execute, entry: Arc::clone(entry), index, change: change.clone() })
}

/// The columns a change's statement sets, then its key columns (the parameter order).
fn parameters(change: &RowChange) -> (Vec<usize>, Vec<usize>) {
    let schema = &change.table;
    let columns = 0..schema.visible_columns().len();
    match change.op {
        RowOp::Insert => (columns.collect(), Vec::new()),
        RowOp::Update => (columns.filter(|c| !schema.primary_key.contains(c)).collect(), schema.primary_key.clone()),
        RowOp::Delete => (Vec::new(), schema.primary_key.clone()),
    }
}

fn relation(entry: &GroupEntry, index: usize) -> String {
    let source = &entry.group.tables[index].source.name;
    format!("{}.{}", quote_identifier(&source.schema), quote_identifier(&source.table))
}

fn push_literal(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("NULL"),
        value => out.push_str(&quote_literal(&value.to_string())),
    }
}

#[derive(Clone, Copy)]
enum Values {
    /// `$1`, `$2`, ... (the prepared form).
    Parameters,
    /// The change's values as literals.
    Literals,
}

/// The statement of `change`; `checked`: an UPDATE/DELETE wrapped so that
/// PostgreSQL raises P0002 unless it changed exactly one row.
fn statement_text(entry: &GroupEntry, index: usize, change: &RowChange, values: Values, checked: bool) -> String {
    let relation = relation(entry, index);
    let schema = &change.table;
    let row = change.row();
    let (targets, keys) = parameters(change);
    let value = |i: usize, c: usize| match values {
        Values::Parameters => format!("${}", i + 1),
        Values::Literals => {
            let mut text = String::new();
            push_literal(&mut text, &row.get(c).to_owned_value());
            text
        }
    };
    let column = |c: usize| quote_identifier(&schema.columns[c].name);
    let filter = keys
        .iter()
        .enumerate()
        .map(|(i, &c)| format!("{} = {}", column(c), value(targets.len() + i, c)))
        .collect::<Vec<_>>()
        .join(" AND ");
    let body = match change.op {
        RowOp::Insert => {
            // A GENERATED ALWAYS identity takes the value the cache drew from
            // the same sequence only when told so.
            let always = entry.group.tables[index]
                .source
                .columns
                .iter()
                .any(|c| matches!(c.identity, Some(Identity::Always { .. })));
            return format!(
                "INSERT INTO {relation} ({}){} VALUES ({})",
                targets.iter().map(|&c| column(c)).collect::<Vec<_>>().join(", "),
                if always { " OVERRIDING SYSTEM VALUE" } else { "" },
                targets.iter().enumerate().map(|(i, &c)| value(i, c)).collect::<Vec<_>>().join(", ")
            );
        }
        RowOp::Update => {
            let sets = targets
                .iter()
                .enumerate()
                .map(|(i, &c)| format!("{} = {}", column(c), value(i, c)))
                .collect::<Vec<_>>()
                .join(", ");
            format!("UPDATE {relation} SET {sets} WHERE {filter}")
        }
        RowOp::Delete => format!("DELETE FROM {relation} WHERE {filter}"),
    };
    if !checked {
        return body;
    }
    let what = quote_literal(&format!(
        "{} of a row of {relation}",
        if change.op == RowOp::Update { "UPDATE" } else { "DELETE" }
    ));
    format!("WITH changed AS ({body} RETURNING 1) SELECT pgtier.expect_one(count(*), {what}) FROM changed")
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

    /// Prepares what `statements` need and this connection lacks. False when
    /// PostgreSQL refuses a PREPARE (a table changed there): then they go
    /// as plain SQL, so the refusal is met statement by statement.
    fn prepare(&mut self, statements: &[&RowStatement]) -> Result<bool, CacheError> {
        let mut text = String::new();
        let mut names = Vec::new();
        for statement in statements {
            if !self.prepared.contains(statement.name()) && !names.iter().any(|n| n == statement.name()) {
                text.push_str(statement.prepare());
                text.push(';');
                names.push(statement.name().to_owned());
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
    /// PostgreSQL refused a statement (P0002: one changed no row); rolled back.
    Refused(Refusal),
    /// The connection broke: committed or not, only PostgreSQL can tell
    /// (the caller's progress row says which).
    Unknown(CacheError),
}

/// Why PostgreSQL did not take a transaction.
#[derive(Clone, Debug)]
pub(crate) struct Refusal {
    pub sqlstate: String,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

/// Runs `check` (the definition check of the tables, `drift::check_clause`),
/// `statements`, then `tail` (the caller's bookkeeping, e.g. the
/// progress rows, one statement), then COMMIT, in one PostgreSQL
/// transaction and one round trip. PostgreSQL stops at the first error
/// (a constraint, a statement that changed no row): that comes back as
/// `Refused` with its SQLSTATE, rolled back. A connection lost on the way
/// is `Unknown`: only PostgreSQL can tell whether the COMMIT ran (the
/// caller's progress row says).
pub(crate) fn apply_checked(
    applier: &mut Applier,
    check: Option<&str>,
    statements: &[&RowStatement],
    tail: &str,
) -> Result<Applied, CacheError> {
    let prepared = applier.prepare(statements)?;
    let client = &mut applier.client;
    let mut text = String::from("BEGIN;");
    if let Some(check) = check {
        text.push_str(check);
        text.push(';');
    }
    for statement in statements {
        if prepared {
            text.push_str(&statement.execute);
        } else {
            text.push_str(&statement.checked_plain());
        }
        text.push(';');
    }
    text.push_str(tail);
    text.push_str(";COMMIT;");
    match client.simple_query(&text) {
        Ok(_) => Ok(Applied::Yes),
        Err(error) if error.as_db_error().is_some() => {
            // Aborted at the error (or ended by a refused COMMIT: then this is a no-op).
            client.batch_execute("ROLLBACK").map_err(|e| connection_error(&e))?;
            Ok(Applied::Refused(refusal(&error)))
        }
        Err(error) => Ok(Applied::Unknown(connection_error(&error))),
    }
}

fn refusal(error: &postgres::Error) -> Refusal {
    match error.as_db_error() {
        Some(db) => Refusal {
            sqlstate: db.code().code().to_owned(),
            message: db.message().to_owned(),
            detail: db.detail().map(str::to_owned),
            hint: db.hint().map(str::to_owned),
        },
        None => Refusal { sqlstate: "08006".into(), message: error.to_string(), detail: None, hint: None },
    }
}

/// A write-through session on `client`: standard strings (the literals
/// pgtier sends), synchronous commit (an acknowledged apply survives a
/// PostgreSQL crash), and the replication origin named after `object`, so
/// logical decoding can tell pgtier's own changes apart (autorefresh must
/// not echo them back; one session at a time may use an origin, so every
/// connection has its own). A session that cannot set its origin is refused
/// (42501): its changes would come back through autorefresh as if someone
/// else had made them. Returns the client and its backend pid.
pub(crate) fn session_connection(
    mut client: Client,
    node: &NodeIdentity,
    object: NodeObject<'_>,
) -> Result<(Client, i32), CacheError> {
    client
        .batch_execute("SET standard_conforming_strings = on; SET synchronous_commit = on;")
        .and_then(|()| client.batch_execute(pgtier_backend::connect::GENERIC_PLANS))
        .map_err(|e| connection_error(&e))?;
    if node.epoch != 0 {
        // Read by pgtier.check_node in every transaction of the session.
        client
            .execute("SELECT set_config('pgtier.epoch', $1, false)", &[&node.epoch.to_string()])
            .map_err(|e| connection_error(&e))?;
    }
    let origin = node::object(&node.name, object);
    let set_up = client
        .execute("SELECT pg_replication_origin_create($1) WHERE pg_replication_origin_oid($1) IS NULL", &[&origin])
        .and_then(|_| client.execute("SELECT pg_replication_origin_session_setup($1)", &[&origin]));
    if let Err(error) = set_up {
        return match error.as_db_error() {
            Some(db) => Err(CacheError::ReplicationOrigin {
                origin,
                sqlstate: db.code().code().to_owned(),
                message: db.message().to_owned(),
            }),
            None => Err(connection_error(&error)),
        };
    }
    let pid: i32 = client.query_one("SELECT pg_backend_pid()", &[]).map_err(|e| connection_error(&e))?.get(0);
    Ok((client, pid))
}
