//! Savepoints (subtransactions): SAVEPOINT, ROLLBACK TO, RELEASE with
//! PostgreSQL's semantics, as marks in the transaction's undo state.
//!
//! A savepoint is a [`Mark`]: the lengths of the write set, its keys and
//! order, the held tables and the DDL lists when it was made. Rows first
//! written after it are write-set entries past the mark; ROLLBACK TO undoes
//! them entirely, as the full rollback does. A row whose own version was
//! made *before* the innermost savepoint is not overwritten in place by a
//! later write (the usual case without savepoints): a new version is
//! stacked over it and [`Undo`] records the version it stacked over. Such
//! an own version keeps its index entries (index cleanup checks every
//! version of the chain), so ROLLBACK TO pops the newer versions and the
//! row, its UNIQUE keys and its foreign-key references are as they were.
//! Other transactions' UNIQUE probes see every own version
//! (`TableStore::probe`): they wait for a key that could come back.
//!
//! After ROLLBACK TO, rows locked after the mark are unlocked (as in
//! PostgreSQL) and so are tables first written after it; transactions
//! waiting for this one are woken to look at their row again
//! (`TxnManager::released_rows`).
//!
//! DDL after a savepoint is not undone: ROLLBACK TO across it is refused
//! with 0A000 (the transaction stays aborted: ROLLBACK, or ROLLBACK TO an
//! older savepoint, still work). So is ROLLBACK TO across `nextval` of a
//! sequence created in this transaction (which advances inside it, and a
//! sequence value must never be given back).
//!
//! Commit logs only the surviving head versions; the stacked-over ones are
//! stamped with the same commit ts (never visible: a newer version carries
//! it too) and left to GC.

use super::{Status, Transaction};
use crate::error::{EngineError, Result};
use crate::version::VPtr;

/// The undo state's lengths when a savepoint was made.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mark {
    /// Savepoint ids grow within a transaction, so "made after savepoint
    /// s" is `WriteEntry::sp() >= s.id`.
    id: u32,
    writes: usize,
    keys: usize,
    order: usize,
    undo: usize,
    held: usize,
    ddl: usize,
    meta_undo: usize,
    exclusive: usize,
    ddl_locked: bool,
}

/// An own version a later write stacked a new one over.
#[derive(Clone, Copy, Debug)]
pub(super) struct Undo {
    /// Its write-set entry.
    pub(super) entry: u32,
    /// The version, the entry's head again after ROLLBACK TO.
    pub(super) head: VPtr,
    /// The entry's savepoint id then.
    pub(super) sp: u32,
}

impl Transaction {
    /// SAVEPOINT: returns the new savepoint's depth (0 for the outermost),
    /// which [`Transaction::rollback_to_savepoint`] and
    /// [`Transaction::release_savepoint`] take. Names are the caller's.
    pub fn savepoint(&mut self) -> Result<usize> {
        self.check_active()?;
        let Some(id) = self.sp_last.checked_add(1).filter(|id| id & super::HAD_BASE == 0) else {
            let e = EngineError::ProgramLimitExceeded { message: "too many savepoints in one transaction".into() };
            return self.check(Err(e));
        };
        self.sp_last = id;
        self.sp_current = id;
        self.savepoints.push(Mark {
            id,
            writes: self.writes.len(),
            keys: self.keys.len(),
            order: self.order.len(),
            undo: self.sp_undo.len(),
            held: self.held.len(),
            ddl: self.ddl.len(),
            meta_undo: self.meta_undo.len(),
            exclusive: self.exclusive.len(),
            ddl_locked: self.ddl_locked,
        });
        Ok(self.savepoints.len() - 1)
    }

    /// How many savepoints are defined.
    pub fn savepoint_depth(&self) -> usize {
        self.savepoints.len()
    }

    /// RELEASE: forgets the savepoint at `depth` and every later one,
    /// keeping their changes (they now belong to the enclosing savepoint,
    /// if any). Fails with 25P02 in an aborted transaction, as PostgreSQL.
    pub fn release_savepoint(&mut self, depth: usize) -> Result<()> {
        self.check_active()?;
        if depth >= self.savepoints.len() {
            return Err(no_savepoint(depth));
        }
        self.forget_savepoints_from(depth);
        Ok(())
    }

    /// Forgets the savepoints from `depth` on, whatever the status.
    pub(super) fn forget_savepoints_from(&mut self, depth: usize) {
        self.savepoints.truncate(depth);
        self.sp_current = self.savepoints.last().map_or(0, |m| m.id);
    }

    /// ROLLBACK TO: undoes every change made after the savepoint at `depth`
    /// (which stays defined; later ones are forgotten) and, in an aborted
    /// transaction, makes it active again. 0A000 when DDL (or `nextval`
    /// of a sequence this transaction created) happened since the
    /// savepoint: the transaction is then aborted (see the module comment).
    pub fn rollback_to_savepoint(&mut self, depth: usize) -> Result<()> {
        if !matches!(self.status, Status::Active | Status::Aborted) {
            return Err(EngineError::TransactionAborted);
        }
        let Some(&m) = self.savepoints.get(depth) else { return Err(no_savepoint(depth)) };
        if let Some(e) = self.rollback_refused(&m) {
            return self.check(Err(e));
        }
        let mut images = Vec::new();
        while self.sp_undo.len() > m.undo {
            let Some(u) = self.sp_undo.pop() else { break };
            let entry = u.entry as usize;
            // Entries made after the mark go entirely below.
            if entry < m.writes {
                self.undo_row(entry, Some(u.head), &mut images);
                let w = &mut self.writes[entry];
                w.head = u.head;
                w.set_sp(u.sp);
            }
        }
        for i in (m.writes..self.writes.len()).rev() {
            self.undo_row(i, None, &mut images);
        }
        self.writes.truncate(m.writes);
        self.keys.truncate(m.keys);
        self.order.truncate(m.order);
        if let Some(map) = &mut self.write_index {
            map.retain(|_, i| (*i as usize) < m.writes);
        }
        // Tables first written after the mark: no entry refers to them now.
        for held in self.held.drain(m.held..) {
            if held.shared {
                held.store.lock.unlock_shared();
            }
        }
        self.savepoints.truncate(depth + 1);
        self.sp_current = m.id;
        self.status = Status::Active;
        self.db.txns.released_rows(self.id);
        Ok(())
    }

    /// Why ROLLBACK TO `m` cannot be done, if it cannot.
    fn rollback_refused(&self, m: &Mark) -> Option<EngineError> {
        if self.ddl.len() > m.ddl
            || self.meta_undo.len() > m.meta_undo
            || self.exclusive.len() > m.exclusive
            || self.ddl_locked != m.ddl_locked
        {
            return Some(EngineError::FeatureNotSupported(
                "ROLLBACK TO SAVEPOINT across DDL (CREATE/DROP TABLE, INDEX or SEQUENCE after the savepoint) is not supported".into(),
            ));
        }
        let undone = self.sp_undo[m.undo..].iter().map(|u| u.entry as usize).chain(m.writes..self.writes.len());
        for i in undone {
            if self.held[self.writes[i].held as usize].store.schema.sequence.is_some() {
                return Some(EngineError::FeatureNotSupported(
                    "ROLLBACK TO SAVEPOINT across nextval of a sequence created in this transaction is not supported"
                        .into(),
                ));
            }
        }
        None
    }

    /// Undoes write entry `i`: its own versions from the head down to
    /// `stop` (None: all), and the index entries only they had.
    pub(super) fn undo_row(&mut self, i: usize, stop: Option<VPtr>, images: &mut Vec<Vec<u8>>) {
        let w = &self.writes[i];
        let held = &self.held[w.held as usize];
        let key = &self.keys[w.key_off as usize..(w.key_off + w.key_len) as usize];
        images.clear();
        held.store.rollback_row(w.hash, key, self.id, stop, &mut self.s.scratch, images);
        held.store.cleanup_entries(&held.meta, key, images);
    }

    pub(super) fn clear_savepoints(&mut self) {
        self.savepoints.clear();
        self.sp_undo.clear();
        self.sp_current = 0;
        self.sp_last = 0;
    }
}

fn no_savepoint(depth: usize) -> EngineError {
    EngineError::definition("3B001", format!("savepoint at depth {depth} does not exist"))
}
