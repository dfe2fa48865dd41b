//! Cached tables whose definition changed in PostgreSQL (DESIGN.md §3,
//! "Backend schema changes"). Write-through builds its statements from the
//! definitions a group was created from; applied across an ALTER that keeps
//! them valid (two columns swapped by rename) they would write values into
//! the wrong columns, and other changes would send every later transaction
//! to the error table.
//!
//! Two checks, one authority:
//! - [`verify_group`]: the tables' oids and fingerprints (the catalog import
//!   a group was defined by, `pgtier_backend::catalog`) compared with the
//!   group's, in one snapshot; when they match, each table's *token*
//!   (`pgtier.definition_token`: a digest of its catalog rows) is captured in
//!   that same snapshot. Run when write-through connects, when a transaction
//!   met a changed token, and at an interval.
//! - [`check_clause`]: the statement every write-through transaction starts
//!   with: it locks the tables it is about to change (ROW EXCLUSIVE, so no
//!   ALTER commits until it ends) and compares their tokens, raising `PGT02`
//!   on a difference. So no statement is ever applied across a definition
//!   change. A token differs on changes the fingerprint ignores (a new plain
//!   index) too: then `verify_group` finds nothing and captures new tokens.

use std::fmt::Write as _;

use pgtier_backend::BackendError;
use pgtier_backend::catalog::{TableDef, import_tables_in};
use postgres::{Client, IsolationLevel};

use crate::backend_schema::definition_tokens;
use crate::error::{CacheError, connection_error};
use crate::registry::GroupEntry;

/// A table of a group that is no longer what the group was made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    pub table: String,
    pub reason: String,
}

/// Checks `entry`'s tables in PostgreSQL (one snapshot): Ok(None) when they
/// are what the group was defined from (their tokens are then captured in
/// the entry), Ok(Some) with the first that is not.
pub(crate) fn verify_group(client: &mut Client, entry: &GroupEntry) -> Result<Option<Drift>, CacheError> {
    let mut txn = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(|e| connection_error(&e))?;
    let names: Vec<String> = entry.group.tables.iter().map(|t| t.source.name.to_string()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let now = match import_tables_in(&mut txn, &refs) {
        Ok(now) => now,
        Err(BackendError::TableNotFound { name }) => {
            return Ok(Some(Drift { table: name, reason: "no longer exists in PostgreSQL".into() }));
        }
        Err(error) => return Err(error.into()),
    };
    let accepted = entry.accepted.lock().clone();
    for (index, (table, current)) in entry.group.tables.iter().zip(&now).enumerate() {
        if table.source.oid != current.oid {
            return Ok(Some(Drift {
                table: table.source.name.to_string(),
                reason: "was dropped and created again in PostgreSQL".into(),
            }));
        }
        if accepted.get(index).copied().unwrap_or_else(|| table.source.fingerprint()) != current.fingerprint() {
            return Ok(Some(Drift { table: table.source.name.to_string(), reason: describe(&table.source, current) }));
        }
    }
    let oids: Vec<u32> = entry.group.tables.iter().map(|t| t.source.oid).collect();
    let tokens = definition_tokens(&mut txn, &oids)?;
    txn.commit().map_err(|e| connection_error(&e))?;
    let tokens: Option<Vec<(u32, String)>> =
        oids.into_iter().zip(tokens).map(|(oid, token)| token.map(|t| (oid, t))).collect();
    *entry.tokens.lock() = tokens;
    Ok(None)
}

/// What changed, in words, for the error users read.
fn describe(was: &TableDef, now: &TableDef) -> String {
    match mirrored_change(was, now) {
        Some(change) => format!("changed in PostgreSQL: {change}"),
        None => "changed in PostgreSQL (its constraints, defaults or indexes; the columns the cache holds are the same: ALTER CACHE GROUP ... ACCEPT DEFINITION takes it)".into(),
    }
}

/// How `now` differs from `was` in what the cache mirrors of a table (its
/// identity, columns with their types and NOT NULL, primary key), or None:
/// then write-through's statements and the cached rows mean the same under
/// `now`, and the change can be accepted without touching the cache.
pub(crate) fn mirrored_change(was: &TableDef, now: &TableDef) -> Option<String> {
    if was.oid != now.oid {
        return Some("it was dropped and created again".into());
    }
    let columns = |t: &TableDef| {
        t.columns
            .iter()
            .map(|c| format!("{} {}{}", c.name, c.type_name, if c.not_null { " NOT NULL" } else { "" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (before, after) = (columns(was), columns(now));
    if before != after {
        return Some(format!("its columns were ({before}) and are ({after})"));
    }
    let key = |t: &TableDef| t.primary_key.as_ref().map(|k| k.columns.clone());
    if key(was) != key(now) {
        return Some(format!("its primary key was {:?} and is {:?}", key(was), key(now)));
    }
    None
}

/// The statement a write-through transaction starts with for the tables
/// `(oid, token)` it changes (see the module's text), or None for none.
pub(crate) fn check_clause(tables: &[(u32, String)]) -> Option<String> {
    if tables.is_empty() {
        return None;
    }
    let mut oids = String::new();
    let mut tokens = String::new();
    for (i, (oid, token)) in tables.iter().enumerate() {
        if i > 0 {
            oids.push(',');
            tokens.push(',');
        }
        let _ = write!(oids, "{oid}");
        // Tokens are md5 hex digests: nothing to escape.
        let _ = write!(tokens, "'{token}'");
    }
    Some(format!("SELECT pgtier.check_definitions('{{{oids}}}'::oid[], ARRAY[{tokens}]::text[])"))
}

/// The `(oid, token)` of table `index` of `entry`, when its tokens are captured.
pub(crate) fn token_of(entry: &GroupEntry, index: usize) -> Option<(u32, String)> {
    entry.tokens.lock().as_ref().and_then(|tokens| tokens.get(index).cloned())
}
