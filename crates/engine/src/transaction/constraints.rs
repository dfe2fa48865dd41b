//! What follows a row write: index entries (UNIQUE checked atomically with
//! the entry insert), and foreign keys from both sides (child: the parent
//! must exist; parent: no child may still reference a key going away, or
//! ON DELETE CASCADE / SET NULL acts on the children). Foreign keys are
//! left alone in transactions of other origins than `Application`
//! (origin.rs).

use std::ops::Bound;
use std::sync::Arc;

use super::Transaction;
use crate::catalog::CatalogState;
use crate::db::Database;
use crate::error::{EngineError, Result};
use crate::ids::TxnId;
use crate::ordered::{ENTRY_BYTES_MAX, batch_entries, prefix_successor};
use crate::row::RowLayout;
use crate::row_ref::RowRef;
use crate::schema::{ForeignKey, IndexId, TableSchema};
use crate::seams::{Miss, MissHook, MissIntent};
use crate::table::{Conflict, FkLink, IndexStore, TableMeta, TableStore, cols_equal, encode_cols_as};
use crate::types::Value;

impl Transaction {
    /// Index entries and foreign keys of a written row: after installing
    /// `new_row` (whose previous image was `old_row`, if any) for the key in
    /// `self.s.key`. `changed`: what an UPDATE assigned (other columns are
    /// copies of `old_row`), so indexes and foreign keys on none of its
    /// columns need no work.
    pub(super) fn after_write(
        &mut self,
        store: &Arc<TableStore>,
        meta: &TableMeta,
        new_row: &[u8],
        old_row: Option<&[u8]>,
        old_was_own: bool,
        changed: Option<&[(usize, Value)]>,
    ) -> Result<()> {
        let layout = store.layout();
        let pk = std::mem::take(&mut self.s.key);
        let parents_asked = std::mem::take(&mut self.s.parents_asked);
        let r = (|| {
            // Our previous version was replaced in place: drop the entries
            // only it had, before anything below can fail and abort (the
            // rollback only knows the newest image).
            if old_was_own && let Some(old) = old_row {
                store.cleanup_entries(meta, &pk, &[old.to_vec()]);
            }
            let untouched = |cols: &[usize]| changed.is_some_and(|ch| !ch.iter().any(|(c, _)| cols.contains(c)));
            for index in &meta.indexes {
                if old_row.is_some() && untouched(&index.spec.columns) {
                    continue;
                }
                index.entry(layout, new_row, &pk, &mut self.s.entry);
                if let Some(old) = old_row {
                    index.entry(layout, old, &pk, &mut self.s.tmp);
                    if self.s.tmp == self.s.entry {
                        continue;
                    }
                }
                if self.s.entry.len() > ENTRY_BYTES_MAX {
                    return Err(EngineError::ProgramLimitExceeded {
                        message: format!(
                            "index row size {} exceeds maximum {ENTRY_BYTES_MAX} for index \"{}\"",
                            self.s.entry.len(),
                            index.schema.name
                        ),
                    });
                }
                if index.schema.unique && !index.schema.primary && !index.spec.row_has_null(layout, new_row) {
                    self.unique_insert(store, index, &pk, new_row)?;
                } else {
                    index.insert(&self.s.entry);
                }
            }
            if !self.origin.enforces_foreign_keys() {
                return Ok(()); // The cache moves whole instances (origin.rs).
            }
            for (i, link) in meta.as_child.iter().enumerate() {
                if old_row.is_some() && untouched(&link.fk.child_columns) {
                    continue;
                }
                let asked_hook = i < 64 && parents_asked & (1 << i) != 0;
                self.check_parent(store, link, new_row, old_row, asked_hook)?;
            }
            if let Some(old) = old_row {
                for link in &meta.as_parent {
                    if !untouched(&link.fk.parent_columns) && !cols_equal(layout, old, new_row, &link.fk.parent_columns)
                    {
                        self.check_children(store, link, old, false)?;
                    }
                }
            }
            Ok(())
        })();
        self.s.key = pk;
        r
    }

    fn unique_insert(&mut self, store: &TableStore, index: &IndexStore, pk: &[u8], row: &[u8]) -> Result<()> {
        loop {
            match store.unique_insert(index, &self.s.entry, pk, self.id) {
                Conflict::None => return Ok(()),
                Conflict::Committed | Conflict::Mine => {
                    return Err(unique_violation(
                        &store.schema,
                        &index.schema.columns,
                        &self.cat,
                        index.schema.id,
                        row,
                    ));
                }
                Conflict::WaitFor(owner) => self.wait(owner, &store.schema.name)?,
            }
        }
    }

    /// FK, child side: the referenced parent row must exist (or, for a
    /// deferred foreign key, the check is queued for commit: deferred.rs).
    pub(super) fn check_parent(
        &mut self,
        store: &TableStore,
        link: &FkLink,
        new_row: &[u8],
        old_row: Option<&[u8]>,
        mut asked_hook: bool,
    ) -> Result<()> {
        let fk = &link.fk;
        let layout = store.layout();
        if fk.child_columns.iter().any(|&c| layout.is_null(new_row, c)) {
            return Ok(()); // MATCH SIMPLE: a NULL column means no reference.
        }
        if old_row.is_some_and(|old| cols_equal(layout, old, new_row, &fk.child_columns)) {
            return Ok(());
        }
        let Some(parent) = link.other.upgrade() else { return Ok(()) };
        loop {
            match self.probe_parent(&parent, fk, layout, new_row, &fk.child_columns) {
                Ok(true) => return Ok(()),
                Ok(false) if !asked_hook && self.parent_missed(&parent, fk, new_row)? => asked_hook = true,
                Ok(false) if self.defers(fk) => {
                    self.defer_child_check(store, fk, new_row);
                    return Ok(());
                }
                Ok(false) => {
                    return Err(EngineError::ForeignKeyViolation {
                        constraint: fk.name.clone(),
                        message: format!(
                            "insert or update on table \"{}\" violates foreign key constraint \"{}\"",
                            store.schema.name, fk.name
                        ),
                        detail: key_detail(
                            &store.schema,
                            new_row,
                            &fk.child_columns,
                            format_args!("is not present in table \"{}\".", parent.schema.name),
                        ),
                    });
                }
                Err(owner) => self.wait(owner, &parent.schema.name)?,
            }
        }
    }

    /// Does a row of `parent` exist whose key under `fk` is `cols` of `row`
    /// (a row of layout `layout`: the child's referencing columns, or a
    /// parent row's own key columns)? Err: another transaction is changing it.
    fn probe_parent(
        &mut self,
        parent: &TableStore,
        fk: &ForeignKey,
        layout: &RowLayout,
        row: &[u8],
        cols: &[usize],
    ) -> std::result::Result<bool, TxnId> {
        if fk.parent_index == parent.schema.primary_index {
            encode_cols_as(&parent.pk, layout, row, cols, &mut self.s.probe);
            return parent.parent_exists(&self.s.probe, self.id, &mut self.s.scratch);
        }
        let parent_meta = parent.meta();
        let Some(pindex) = parent_meta.index(fk.parent_index) else { return Ok(true) };
        encode_cols_as(&pindex.spec, layout, row, cols, &mut self.s.probe);
        self.parent_exists_unique(parent, pindex)
    }

    /// [`Transaction::probe_parent`], waiting out other transactions.
    pub(super) fn key_exists(
        &mut self,
        parent: &TableStore,
        fk: &ForeignKey,
        layout: &RowLayout,
        row: &[u8],
        cols: &[usize],
    ) -> Result<bool> {
        loop {
            match self.probe_parent(parent, fk, layout, row, cols) {
                Ok(found) => return Ok(found),
                Err(owner) => self.wait(owner, &parent.schema.name)?,
            }
        }
    }

    /// Before a row is inserted into a table whose parents a miss hook
    /// loads (a cache group's child table): loads each missing parent
    /// first. Asked only after the insert (`check_parent`), the hook would
    /// load the parent's instance while the new row is in place, and an
    /// instance holding a row of the same key (PostgreSQL's 23505) met the
    /// lock of the very transaction waiting for the load: no load could
    /// ever finish, and the insert failed with 40001 instead of 23505.
    /// Loaded first, that row is in the cache and the insert meets it as a
    /// duplicate. A parent another transaction is changing is waited for
    /// here too. A parent found present is held there (`hold_present`, the
    /// cache's pin) and looked at again: evicted between this check and the
    /// insert, it was loaded after the new row and met the same lock (TATP's
    /// INSERT_CALL_FORWARDING failed with 40001 once in a 500k-subscriber
    /// run through the flash tier).
    /// Returns the foreign keys it asked for (bit i: `meta.as_child[i]`).
    pub(super) fn load_missing_parents(&mut self, meta: &TableMeta, layout: &RowLayout, new_row: &[u8]) -> Result<u64> {
        let mut asked = 0;
        for (i, link) in meta.as_child.iter().enumerate() {
            let fk = &link.fk;
            let Some(parent) = link.other.upgrade() else { continue };
            let Some(hook) = self.miss_hook(&parent) else { continue };
            if fk.child_columns.iter().any(|&c| layout.is_null(new_row, c)) {
                continue;
            }
            let mut held = false;
            loop {
                match self.probe_parent(&parent, fk, layout, new_row, &fk.child_columns) {
                    Ok(true) if held => break,
                    Ok(true) => {
                        held = true;
                        if !self.hold_parent(&*hook, &parent, fk, new_row)? {
                            break;
                        }
                    }
                    Ok(false) => {
                        self.parent_missed(&parent, fk, new_row)?;
                        if i < 64 {
                            asked |= 1 << i;
                        }
                        break;
                    }
                    // Most often an eviction's uncommitted delete (its batch
                    // stays open for milliseconds): once it ends, the parent
                    // is there or is loaded here, before the row goes in.
                    Err(owner) => self.wait(owner, &parent.schema.name)?,
                }
            }
        }
        Ok(asked)
    }

    /// Before an application's row goes into a table whose rows a miss hook
    /// loads (a DYNAMIC cache group's): its primary key (an insert) or its
    /// values under a UNIQUE index (an insert, or an update that changes
    /// them) may be those of a row PostgreSQL holds and memory does not,
    /// which PostgreSQL refuses as a duplicate (23505). The hook is asked
    /// as a lookup of those values would ask it; it loads that row's
    /// instance, and the write then meets the row and fails as PostgreSQL
    /// would. Before, such an insert was acknowledged and PostgreSQL refused
    /// it later, at write-through. Asked before the row goes in, as for
    /// missing parents (`load_missing_parents`): a load after it would meet
    /// the row's lock. Values memory holds already need no question.
    pub(super) fn load_conflicting_keys(
        &mut self,
        store: &TableStore,
        meta: &TableMeta,
        new_row: &[u8],
        old_row: Option<&[u8]>,
    ) -> Result<()> {
        let layout = store.layout();
        let row = RowRef::new(&store.schema, new_row);
        // A key that carries a foreign key to a parent the hook loads names
        // a row of that parent's instance, which `load_missing_parents` has
        // just loaded or held whole: memory has any row of that key. (Asked
        // anyway, TATP's INSERT_CALL_FORWARDING ran 20x slower on average
        // through the flash tier.)
        // Only an insert brings a new primary key (an update changing it is
        // `update_key`'s delete and insert), so updates skip the walk.
        let key_in_loaded_instance = || {
            meta.as_child.iter().any(|link| {
                link.other.upgrade().is_some_and(|parent| parent.hooks.has_miss_hook())
                    && link.fk.child_columns.iter().all(|c| store.schema.primary_key.contains(c))
                    && !link.fk.child_columns.iter().any(|&c| layout.is_null(new_row, c))
            })
        };
        if old_row.is_none() && !key_in_loaded_instance() {
            let key: Vec<Value> = store.schema.primary_key.iter().map(|&c| row.get(c).to_owned_value()).collect();
            self.key_missed(store.schema.id, &key, MissIntent::Write)?;
        }
        for index in &meta.indexes {
            let columns = &index.schema.columns;
            if !index.schema.unique || index.schema.primary || index.spec.row_has_null(layout, new_row) {
                continue;
            }
            if old_row.is_some_and(|old| cols_equal(layout, old, new_row, columns)) {
                continue;
            }
            encode_cols_as(&index.spec, layout, new_row, columns, &mut self.s.probe);
            let present = loop {
                match self.parent_exists_unique(store, index) {
                    Ok(present) => break present,
                    Err(owner) => self.wait(owner, &store.schema.name)?,
                }
            };
            if present {
                continue;
            }
            let Some(hook) = self.miss_hook(store) else { return Ok(()) };
            let values: Vec<Value> = columns.iter().map(|&c| row.get(c).to_owned_value()).collect();
            let miss = Miss::Prefix { table: store.schema.id, index: index.schema.id, prefix: &values };
            self.resolve_miss(&*hook, miss, MissIntent::Write)?;
        }
        Ok(())
    }

    /// Asks `hook` to keep the present parent of `new_row`'s reference in
    /// memory until this transaction ends; true when it holds it (look
    /// again: it may have gone just before the hold). False at once when
    /// this transaction's last hold is on that parent.
    #[inline]
    fn hold_parent(
        &mut self,
        hook: &dyn MissHook,
        parent: &TableStore,
        fk: &ForeignKey,
        new_row: &[u8],
    ) -> Result<bool> {
        let Some(values) = self.reference_values(fk, new_row) else { return Ok(false) };
        if self.miss_holds.holds_parent(parent.schema.id, &values) {
            return Ok(false);
        }
        let lookup = parent_lookup(parent, fk, &values);
        let db = Database::lent(Arc::clone(&self.db));
        let Some(hold) = crate::seams::enter_hook(|| hook.hold_present(&db, lookup)) else { return Ok(false) };
        match hold? {
            Some(hold) => {
                self.miss_holds.push_parent(hold, parent.schema.id, values);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The parent of a new reference is missing: asks the parent table's
    /// miss hook (a `Key` miss when the foreign key references the primary
    /// key, else a `Prefix` miss on the referenced UNIQUE index). True:
    /// check again.
    #[cold]
    fn parent_missed(&mut self, parent: &TableStore, fk: &ForeignKey, new_row: &[u8]) -> Result<bool> {
        let Some(hook) = self.miss_hook(parent) else { return Ok(false) };
        let Some(values) = self.reference_values(fk, new_row) else { return Ok(false) };
        match parent_lookup(parent, fk, &values) {
            Miss::Key { table, key } => self.key_missed(table, key, MissIntent::Write),
            prefix => self.resolve_miss(&*hook, prefix, MissIntent::Write),
        }
    }

    /// The values of `new_row` (a row of `fk`'s child table) that reference the parent.
    fn reference_values(&self, fk: &ForeignKey, new_row: &[u8]) -> Option<Vec<Value>> {
        let child = self.cat.store(fk.child)?;
        let row = RowRef::new(&child.schema, new_row);
        Some(fk.child_columns.iter().map(|&c| row.get(c).to_owned_value()).collect())
    }

    fn parent_exists_unique(&mut self, parent: &TableStore, pindex: &IndexStore) -> std::result::Result<bool, TxnId> {
        let prefix = self.s.probe.clone();
        let batch = entries_with_prefix(pindex, &prefix);
        let mut tmp = Vec::new();
        for entry in batch_entries(&batch) {
            let (_, pk) = pindex.split(entry);
            let pred = |row: &[u8]| {
                tmp.clear();
                pindex.spec.encode_row(parent.layout(), row, &mut tmp);
                tmp == prefix
            };
            match parent.probe(pk, self.id, &mut self.s.scratch, pred) {
                Conflict::Committed | Conflict::Mine => return Ok(true),
                Conflict::WaitFor(owner) => return Err(owner),
                Conflict::None => {}
            }
        }
        Ok(false)
    }

    /// FK, parent side: `old_row`'s key is going away (deleted, or changed
    /// when not `deleting`). Rows still referencing it are an error, or,
    /// for a delete under ON DELETE CASCADE / SET NULL, are deleted or
    /// have their referencing columns set to NULL (in this transaction;
    /// their own references are followed the same way).
    pub(super) fn check_children(
        &mut self,
        store: &TableStore,
        link: &FkLink,
        old_row: &[u8],
        deleting: bool,
    ) -> Result<()> {
        const FK_ACTION_DEPTH_MAX: u32 = 256;
        let fk = &link.fk;
        let action = if deleting { fk.on_delete } else { crate::schema::FkAction::NoAction };
        let Some((child, cindex, prefix)) = self.children_of(store, link, old_row) else { return Ok(()) };
        'retry: loop {
            let batch = entries_with_prefix(&cindex, &prefix);
            let mut tmp = Vec::new();
            for entry in batch_entries(&batch) {
                let (_, child_pk) = cindex.split(entry);
                let mut child_key: Vec<Value> = Vec::new();
                let pred = |row: &[u8]| {
                    encode_cols_as(&cindex.spec, child.layout(), row, &fk.child_columns, &mut tmp);
                    let refers = tmp == prefix;
                    if refers && action != crate::schema::FkAction::NoAction {
                        let r = RowRef::new(&child.schema, row);
                        child_key = child.schema.primary_key.iter().map(|&c| r.get(c).to_owned_value()).collect();
                    }
                    refers
                };
                match child.probe(child_pk, self.id, &mut self.s.scratch, pred) {
                    Conflict::None => {}
                    Conflict::Committed | Conflict::Mine if action != crate::schema::FkAction::NoAction => {
                        if self.fk_action_depth >= FK_ACTION_DEPTH_MAX {
                            return Err(EngineError::ProgramLimitExceeded {
                                message: format!(
                                    "foreign key actions nested deeper than {FK_ACTION_DEPTH_MAX} (constraint \"{}\")",
                                    fk.name
                                ),
                            });
                        }
                        self.fk_action_depth += 1;
                        let r = if action == crate::schema::FkAction::Cascade {
                            self.delete_inner(child.schema.id, &child_key, |_| Ok(true)).map(|_| ())
                        } else {
                            let changes: Vec<(usize, Value)> =
                                fk.child_columns.iter().map(|&c| (c, Value::Null)).collect();
                            self.update_inner(child.schema.id, &child_key, |_| Ok(Some(changes.clone()))).map(|_| ())
                        };
                        self.fk_action_depth -= 1;
                        r?;
                    }
                    Conflict::Committed | Conflict::Mine if self.defers(fk) => {
                        self.defer_parent_check(store, fk, old_row);
                        return Ok(());
                    }
                    Conflict::Committed | Conflict::Mine => {
                        return Err(EngineError::ForeignKeyViolation {
                            constraint: fk.name.clone(),
                            message: format!(
                                "update or delete on table \"{}\" violates foreign key constraint \"{}\" on table \"{}\"",
                                store.schema.name, fk.name, child.schema.name
                            ),
                            detail: key_detail(
                                &store.schema,
                                old_row,
                                &fk.parent_columns,
                                format_args!("is still referenced from table \"{}\".", child.schema.name),
                            ),
                        });
                    }
                    Conflict::WaitFor(owner) => {
                        self.wait(owner, &child.schema.name)?;
                        continue 'retry;
                    }
                }
            }
            return Ok(());
        }
    }

    /// The child table of `link`, its index on the foreign key, and the
    /// encoded key prefix its rows referencing parent `old_row` carry; None
    /// when nothing can reference it (a NULL key, the child table or its
    /// index gone).
    fn children_of(
        &mut self,
        store: &TableStore,
        link: &FkLink,
        old_row: &[u8],
    ) -> Option<(Arc<TableStore>, Arc<IndexStore>, Vec<u8>)> {
        let fk = &link.fk;
        let layout = store.layout();
        if fk.parent_columns.iter().any(|&c| layout.is_null(old_row, c)) {
            return None;
        }
        let child = link.other.upgrade()?;
        let cindex = child.meta().index(fk.child_index).cloned()?;
        encode_cols_as(&cindex.spec, layout, old_row, &fk.parent_columns, &mut self.s.probe);
        Some((child, cindex, self.s.probe.clone()))
    }

    /// An eviction deletes parent `old_row` (no foreign key is checked for
    /// it: the cache evicts an instance's cached children itself, in any
    /// order). It removes the instance as its snapshot shows it, so a child
    /// the snapshot does not see would stay behind, referencing a parent
    /// the cache no longer holds: an application's uncommitted insert (it
    /// checked the parent before this delete, and takes no lock on it), or
    /// one committed since. The cache would then hold half an instance, and
    /// the next load of it would meet that row. So the delete fails, 55P03
    /// or 40001, without waiting, and the cache leaves the instance for a
    /// later round. Children the snapshot sees are the eviction's to delete
    /// (or rows of tables outside the cache group, left as they are).
    pub(super) fn check_children_seen(&mut self, store: &TableStore, link: &FkLink, old_row: &[u8]) -> Result<()> {
        let fk = &link.fk;
        let Some((child, cindex, prefix)) = self.children_of(store, link, old_row) else { return Ok(()) };
        let batch = entries_with_prefix(&cindex, &prefix);
        let mut tmp = Vec::new();
        for entry in batch_entries(&batch) {
            let (_, child_pk) = cindex.split(entry);
            let refers = |row: &[u8]| {
                encode_cols_as(&cindex.spec, child.layout(), row, &fk.child_columns, &mut tmp);
                tmp == prefix
            };
            match child.holds_unseen_reference(child_pk, self.id, self.snapshot, &mut self.s.scratch, refers) {
                Ok(false) => {}
                Ok(true) => return Err(EngineError::ChangedSincePinned { relation: child.schema.name.clone() }),
                Err(owner) => self.wait(owner, &child.schema.name)?,
            }
        }
        Ok(())
    }
}

/// The entries of `index` whose key starts with `prefix`, as a batch for
/// `batch_entries` (the rows of an FK's either side).
fn entries_with_prefix(index: &IndexStore, prefix: &[u8]) -> Vec<u8> {
    let upper = prefix_successor(prefix);
    let mut batch = Vec::new();
    index.tree.scan(
        Bound::Included(prefix),
        upper.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
        usize::MAX,
        &mut batch,
    );
    batch
}

/// PostgreSQL's DETAIL for a key: `Key (a, b)=(1, x) <then>`, built in one
/// string (a failing INSERT in TATP's mix pays for it every time).
pub(super) fn key_detail(schema: &TableSchema, row: &[u8], cols: &[usize], then: std::fmt::Arguments<'_>) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(64);
    s.push_str("Key (");
    for (i, &c) in cols.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&schema.columns[c].name);
    }
    s.push_str(")=(");
    for (i, &c) in cols.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{}", schema.layout().get(row, c));
    }
    s.push_str(") ");
    let _ = s.write_fmt(then);
    s
}

pub(super) fn unique_violation(
    schema: &TableSchema,
    cols: &[usize],
    cat: &CatalogState,
    index: IndexId,
    row: &[u8],
) -> EngineError {
    let constraint = cat.catalog.index(index).map_or_else(|| format!("{}_pkey", schema.name), |i| i.name.clone());
    EngineError::UniqueViolation { constraint, detail: key_detail(schema, row, cols, format_args!("already exists.")) }
}

/// The lookup of the parent `values` reference through `fk`: by primary key,
/// or by the leading columns of the UNIQUE index it references.
fn parent_lookup<'v>(parent: &TableStore, fk: &ForeignKey, values: &'v [Value]) -> Miss<'v> {
    let table = parent.schema.id;
    if fk.parent_index == parent.schema.primary_index {
        Miss::Key { table, key: values }
    } else {
        Miss::Prefix { table, index: fk.parent_index, prefix: values }
    }
}
