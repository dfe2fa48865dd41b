//! Temporary tables (CREATE TEMP TABLE): relations of the session's own
//! schema `pg_temp_N` (crate::names), made with the first one. They are
//! engine tables like others, logged and recovered, so three things make
//! them temporary:
//! - the session drops its schema, CASCADE, when it ends (`Drop`);
//! - a session starting drops every `pg_temp_*` schema no live session of
//!   this process owns: what a crash or a Database dropped without a clean
//!   close left (`drop_orphans`). N is unique per process run and within
//!   it, so a new session never inherits an old schema;
//! - only the owning session resolves names in it (crate::catalog::search_path::resolve refuses
//!   another session's temporary schema, 0A000).
//!
//! ON COMMIT DELETE ROWS / DROP run inside the committing transaction,
//! before the engine commits (`on_commit`); a session without such tables
//! pays one branch on an empty list.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use pgtier_engine::{TableId, Value};

use super::Connection;
use crate::error::{Result, SqlError};
use crate::plan::OnCommit;

/// The next session's schema number; seeded from the clock so that
/// numbers of a previous run are not reused.
static NEXT: AtomicU64 = AtomicU64::new(0);
/// Temporary schemas of live sessions of this process.
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub(crate) struct Temp {
    pub(crate) schema: String,
    /// Tables with ON COMMIT DELETE ROWS or DROP, by id (a dropped one is
    /// forgotten at the next commit).
    pub(crate) on_commit: Vec<(TableId, OnCommit)>,
    /// How many of `on_commit` belong to committed transactions: a
    /// rollback forgets the rest, since the engine reuses the ids of the
    /// tables a rolled-back transaction created.
    pub(crate) committed: usize,
}

impl Temp {
    pub(crate) fn new() -> Temp {
        if NEXT.load(Ordering::Relaxed) == 0 {
            let seed = u64::try_from(crate::clock::now_micros()).unwrap_or(1).max(1);
            let _ = NEXT.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
        }
        let schema = format!("pg_temp_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        LIVE.lock().push(schema.clone());
        Temp { schema, on_commit: Vec::new(), committed: 0 }
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        LIVE.lock().retain(|s| *s != self.schema);
    }
}

impl Connection {
    /// Records the session's temporary schema where name resolution reads
    /// it, and drops the ones no live session owns.
    pub(super) fn with_temp_schema(mut self) -> Connection {
        self.settings.set(crate::names::TEMP_SCHEMA_SETTING, self.temp.schema.clone());
        self.drop_orphans();
        self
    }

    fn drop_orphans(&mut self) {
        let orphans: Vec<String> = {
            let live = LIVE.lock();
            crate::catalog::user_schemas(&self.db.catalog())
                .into_iter()
                .map(|s| s.name)
                .filter(|n| crate::names::is_temp_schema(n) && !live.contains(n))
                .collect()
        };
        for n in orphans {
            // Another session starting at once may have dropped it first.
            let _ = self.execute_sql(&format!("DROP SCHEMA IF EXISTS {} CASCADE", crate::catalog::quote_ident(&n)));
        }
        self.notices.clear();
    }

    /// At session end: the session's temporary relations go.
    fn drop_temp_schema(&mut self) {
        if crate::catalog::user_schema_named(&self.db.catalog(), &self.temp.schema).is_none() {
            return;
        }
        if self.open_txn().is_some() {
            let _ = self.execute_sql("ROLLBACK");
        }
        let _ = self.execute_sql(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.temp.schema));
    }

    /// ON COMMIT DELETE ROWS / DROP, in the committing transaction.
    pub(super) fn on_commit(&mut self) -> Result<()> {
        let Some(txn) = self.txn.as_mut() else { return Ok(()) };
        // heap_truncate_check_FKs: a table emptied at commit may only be
        // referenced by tables emptied with it.
        let emptied: Vec<TableId> =
            self.temp.on_commit.iter().filter(|(_, a)| !matches!(a, OnCommit::Drop)).map(|(id, _)| *id).collect();
        for &id in &emptied {
            for fk in txn.catalog().referencing(id) {
                if !emptied.contains(&fk.child) {
                    let name = |t: TableId| {
                        txn.catalog().table(t).map_or_else(String::new, |t| crate::names::short(&t.name).to_owned())
                    };
                    return Err(SqlError::new("0A000", "unsupported ON COMMIT and foreign key combination")
                        .with_detail(format!(
                            "Table \"{}\" references \"{}\", but they do not have the same ON COMMIT setting.",
                            name(fk.child),
                            name(id)
                        )));
                }
            }
        }
        let mut keys: Vec<Value> = Vec::new();
        let mut kept = Vec::new();
        for (id, action) in std::mem::take(&mut self.temp.on_commit) {
            let Some(t) = txn.catalog().table(id).cloned() else { continue };
            txn.begin_statement()?;
            match action {
                OnCommit::Drop => txn.drop_table(&t.name)?,
                _ => {
                    keys.clear();
                    let pk = &t.primary_key;
                    txn.scan_table(t.id, |r| {
                        keys.extend(pk.iter().map(|&k| r.get(k).to_owned_value()));
                        Ok(true)
                    })?;
                    for key in keys.chunks(pk.len().max(1)) {
                        txn.delete(t.id, key)?;
                    }
                    kept.push((id, action));
                }
            }
        }
        self.temp.on_commit = kept;
        Ok(())
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.drop_temp_schema();
    }
}
