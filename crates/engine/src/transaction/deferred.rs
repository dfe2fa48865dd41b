//! Deferred foreign-key checks (PostgreSQL's DEFERRABLE constraints and
//! `SET CONSTRAINTS`). A NO ACTION check of a deferred foreign key that
//! fails when the row is written is not an error yet: it is queued, and run
//! again at commit (or when `SET CONSTRAINTS ... IMMEDIATE` names its
//! constraint), against the rows as the transaction left them. Only then
//! is a reference still missing (child side) or a key still referenced
//! (parent side) a 23503, failing the commit.
//!
//! A check that passes when the row is written is never queued: whatever
//! could break it later in the transaction (deleting the parent, changing
//! the child's reference) runs its own check then. Rolling back to a
//! savepoint leaves queued checks in place: they re-read the rows at the
//! end, where a rolled-back write is simply gone, so they pass or fail as
//! the surviving rows say. A check on a constraint or table dropped since
//! is dropped with it.

use super::Transaction;
use crate::error::Result;
use crate::row_ref::{RowBuf, RowRef};
use crate::schema::{ForeignKey, ForeignKeyId, TableId};
use crate::table::TableStore;
use crate::types::Value;

/// A transaction's deferral state: `SET CONSTRAINTS` modes and queued checks.
#[derive(Debug, Default)]
pub(super) struct Deferred {
    /// `SET CONSTRAINTS ALL DEFERRED | IMMEDIATE` (true: deferred); None:
    /// each constraint's declared INITIALLY mode.
    all: Option<bool>,
    /// `SET CONSTRAINTS name, ...`, newest last; they override `all`.
    named: Vec<(ForeignKeyId, bool)>,
    checks: Vec<DeferredCheck>,
    /// The queued checks are running: every check is immediate.
    running: bool,
}

#[derive(Debug)]
enum DeferredCheck {
    /// The row of `table` with primary key `key` referenced a missing parent.
    Child { fk: ForeignKeyId, table: TableId, key: Vec<Value> },
    /// Parent row `row` of `table` went away (or changed its key) while
    /// rows still referenced it.
    Parent { fk: ForeignKeyId, table: TableId, row: Vec<u8> },
}

impl Deferred {
    pub(super) fn clear(&mut self) {
        self.all = None;
        self.named.clear();
        self.checks.clear();
        self.running = false;
    }
}

impl Transaction {
    /// Is `fk`'s NO ACTION check deferred in this transaction right now?
    pub(super) fn defers(&self, fk: &ForeignKey) -> bool {
        if self.deferred.running || !fk.timing.deferrable() {
            return false;
        }
        if let Some(&(_, deferred)) = self.deferred.named.iter().rev().find(|(id, _)| *id == fk.id) {
            return deferred;
        }
        self.deferred.all.unwrap_or(fk.timing.initially_deferred())
    }

    /// Queues the child-side check of `fk` for the row `row` of `store`.
    pub(super) fn defer_child_check(&mut self, store: &TableStore, fk: &ForeignKey, row: &[u8]) {
        let r = RowRef::new(&store.schema, row);
        let key = store.schema.primary_key.iter().map(|&c| r.get(c).to_owned_value()).collect();
        self.deferred.checks.push(DeferredCheck::Child { fk: fk.id, table: store.schema.id, key });
    }

    /// Queues the parent-side check of `fk` for parent row `old_row` of `store`.
    pub(super) fn defer_parent_check(&mut self, store: &TableStore, fk: &ForeignKey, old_row: &[u8]) {
        self.deferred.checks.push(DeferredCheck::Parent { fk: fk.id, table: store.schema.id, row: old_row.to_vec() });
    }

    /// `SET CONSTRAINTS`: `which` None is ALL (every deferrable foreign
    /// key), else the named ones (the SQL layer has refused names of
    /// constraints that are not deferrable, with 42809). Setting them
    /// IMMEDIATE runs their queued checks now, as PostgreSQL does: a
    /// violation is this statement's error.
    pub fn set_constraints(&mut self, which: Option<&[ForeignKeyId]>, deferred: bool) -> Result<()> {
        self.check_active()?;
        match which {
            None => {
                self.deferred.all = Some(deferred);
                self.deferred.named.clear();
            }
            Some(ids) => self.deferred.named.extend(ids.iter().map(|&id| (id, deferred))),
        }
        if deferred {
            return Ok(());
        }
        let r = self.run_deferred(|fk| which.is_none_or(|ids| ids.contains(&fk)));
        self.check(r)
    }

    /// Runs the queued checks `which` selects (all of them at commit).
    pub(super) fn run_deferred(&mut self, which: impl Fn(ForeignKeyId) -> bool) -> Result<()> {
        if self.deferred.checks.is_empty() {
            return Ok(());
        }
        let (run, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.deferred.checks).into_iter().partition(|c| {
            which(match c {
                DeferredCheck::Child { fk, .. } | DeferredCheck::Parent { fk, .. } => *fk,
            })
        });
        self.deferred.checks = keep;
        self.deferred.running = true;
        let mut result = Ok(());
        for check in run {
            result = self.run_check(check);
            if result.is_err() {
                break;
            }
        }
        self.deferred.running = false;
        result
    }

    fn run_check(&mut self, check: DeferredCheck) -> Result<()> {
        match check {
            DeferredCheck::Child { fk, table, key } => {
                let Some(store) = self.cat.store(table).cloned() else { return Ok(()) };
                let meta = store.meta();
                let Some(link) = meta.as_child.iter().find(|l| l.fk.id == fk) else { return Ok(()) };
                let mut row = RowBuf::new();
                // The row as this transaction left it (its own latest version:
                // it wrote the row, so it holds its lock); gone: nothing to check.
                if !self.get_inner(table, &key, &mut row)? {
                    return Ok(());
                }
                self.check_parent(&store, link, &row.data, None, false)
            }
            DeferredCheck::Parent { fk, table, row } => {
                let Some(store) = self.cat.store(table).cloned() else { return Ok(()) };
                let meta = store.meta();
                let Some(link) = meta.as_parent.iter().find(|l| l.fk.id == fk) else { return Ok(()) };
                // The key is back (inserted again, or another row changed to
                // it): whatever references it references a row that exists.
                if self.key_exists(&store, &link.fk, store.layout(), &row, &link.fk.parent_columns)? {
                    return Ok(());
                }
                self.check_children(&store, link, &row, false)
            }
        }
    }
}
