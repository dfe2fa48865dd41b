//! Writes: the write set, and insert, update, delete and SELECT FOR UPDATE.
//! A writer works on the latest version of a row, not the snapshot's: it
//! waits for a writer holding the row, then re-reads it (PostgreSQL's
//! update re-check).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::constraints::unique_violation;
use super::{Held, Step, Transaction, WriteEntry, encode_pk};
use crate::error::{EngineError, Result};
use crate::key::hash_key;
use crate::origin::Origin;
use crate::row_ref::{RowBuf, RowRef};
use crate::schema::{TableId, TableSchema};
use crate::seams::MissIntent;
use crate::table::{InsertOutcome, Latest, LatestVersion, TableStore};
use crate::types::{Value, coerce};
use crate::version::{DELETED, LOCK_ONLY, VPtr, commit_ts_of, is_deleted, is_uncommitted};

/// Write sets up to this size are searched linearly.
const WRITE_INDEX_THRESHOLD: usize = 16;
/// Bound on optimistic install retries (each one means another commit
/// changed the row between our read and our install).
const INSTALL_RETRIES_MAX: usize = 10_000;

impl Transaction {
    pub(super) fn hold(&mut self, table: TableId) -> Result<usize> {
        if let Some(i) = self.held.iter().position(|h| h.store.schema.id == table) {
            return Ok(i);
        }
        super::replica::check_writable(&self.db, self.replica)?;
        let store = self.store(table)?;
        if store.hooks.has_write_guard()
            && self.origin == Origin::Application
            && let Some(guard) = store.hooks.write_guard()
        {
            guard.check_write(&store.schema)?;
        }
        let own_exclusive = self.exclusive.iter().any(|s| Arc::ptr_eq(s, &store));
        let created_here = self.private_catalog && self.db.catalog.current().store(table).is_none();
        let shared = !own_exclusive && !created_here;
        if shared {
            store.lock.lock_shared(self.db.lock_deadline(), &store.schema.name)?;
            if store.dropped.load(Ordering::Acquire) {
                store.lock.unlock_shared();
                return Err(EngineError::UndefinedTable { name: store.schema.name.clone() });
            }
        }
        let meta = store.meta();
        self.held.push(Held { store, meta, shared });
        Ok(self.held.len() - 1)
    }

    fn find_write(&self, held: usize, hash: u64, key: &[u8]) -> Option<usize> {
        let matches = |i: usize| {
            let w = &self.writes[i];
            w.held as usize == held
                && w.hash == hash
                && &self.keys[w.key_off as usize..(w.key_off + w.key_len) as usize] == key
        };
        if let Some(map) = &self.write_index {
            if let Some(&i) = map.get(&(held as u32, hash))
                && matches(i as usize)
            {
                return Some(i as usize);
            }
            // Hash collision within the map: fall back to a scan.
            return (0..self.writes.len()).find(|&i| matches(i));
        }
        (0..self.writes.len()).find(|&i| matches(i))
    }

    /// A write over our own version of the row in `self.s.key` stacks a
    /// new version (instead of overwriting it) when that version was made
    /// before the innermost savepoint: ROLLBACK TO brings it back. One
    /// predictable branch without savepoints.
    #[inline]
    fn must_stack(&self, held: usize, hash: u64) -> bool {
        self.sp_current != 0
            && self.find_write(held, hash, &self.s.key).is_some_and(|i| self.writes[i].sp() < self.sp_current)
    }

    pub(super) fn record_write(&mut self, held: usize, hash: u64, own_before: bool, head: VPtr, had_base: bool) {
        if own_before {
            let key = std::mem::take(&mut self.s.key);
            let found = self.find_write(held, hash, &key);
            self.s.key = key;
            let Some(i) = found else { unreachable!("own version without a write-set entry") };
            let w = &mut self.writes[i];
            if w.sp() < self.sp_current {
                // `must_stack` said so: the version stacked over is kept.
                self.sp_undo.push(super::savepoint::Undo { entry: i as u32, head: w.head, sp: w.sp() });
                w.set_sp(self.sp_current);
            }
            w.head = head;
            return;
        }
        let key_off = self.keys.len() as u32;
        self.keys.extend_from_slice(&self.s.key);
        let idx = self.writes.len();
        let bits = if had_base { super::HAD_BASE | self.sp_current } else { self.sp_current };
        self.writes.push(WriteEntry { held: held as u32, hash, key_off, key_len: self.s.key.len() as u32, head, bits });
        self.order.push(Step::Row(idx));
        if self.writes.len() > WRITE_INDEX_THRESHOLD {
            let map = self.write_index.get_or_insert_with(|| {
                let mut m = HashMap::new();
                for (i, w) in self.writes.iter().enumerate().take(idx) {
                    m.entry((w.held, w.hash)).or_insert(i as u32);
                }
                m
            });
            map.entry((held as u32, hash)).or_insert(idx as u32);
        }
    }

    /// Inserts a row (one value per column; start from
    /// [`TableSchema::default_row`] for INSERT with a column list).
    pub fn insert(&mut self, table: TableId, values: &[Value]) -> Result<()> {
        self.prologue()?;
        let r = self.insert_inner(table, values);
        self.check(r)
    }

    /// INSERT ... ON CONFLICT's insert (PostgreSQL's speculative
    /// insertion): inserts the row or, when a unique index already holds
    /// its key, undoes whatever the attempt wrote and returns that 23505
    /// (always [`EngineError::UniqueViolation`]) without failing the
    /// transaction. The caller looked for a conflict in its snapshot first;
    /// this closes the race with a writer that inserted the key after that
    /// snapshot: the insert waits for that writer to end as any insert
    /// does, and its commit turns into a conflict here, not an error. The
    /// attempt runs under an internal savepoint, popped before returning.
    pub fn insert_speculative(&mut self, table: TableId, values: &[Value]) -> Result<Option<EngineError>> {
        self.prologue()?;
        let depth = self.savepoint()?;
        match self.insert_inner(table, values) {
            Ok(()) => {
                self.release_savepoint(depth)?;
                Ok(None)
            }
            Err(e @ EngineError::UniqueViolation { .. }) => {
                self.rollback_to_savepoint(depth)?;
                self.release_savepoint(depth)?;
                Ok(Some(e))
            }
            Err(e) => {
                // The statement's error: the transaction fails as after a
                // plain insert (its changes go with it, or wait for the
                // user's ROLLBACK TO, which the popped mark lies inside).
                self.forget_savepoints_from(depth);
                self.check(Err(e))
            }
        }
    }

    fn insert_inner(&mut self, table: TableId, values: &[Value]) -> Result<()> {
        let h = self.hold(table)?;
        let store = Arc::clone(&self.held[h].store);
        refuse_nested_keys(&store, values.iter().enumerate())?;
        if store.schema.has_rowid() && values.last().is_some_and(Value::is_null) {
            let mut with_id = values.to_vec();
            if let Some(last) = with_id.last_mut() {
                *last = Value::Int8(store.allocate_rowid());
            }
            encode_row(&store.schema, &with_id, &mut self.s.row)?;
        } else {
            encode_row(&store.schema, values, &mut self.s.row)?;
        }
        self.insert_encoded(h, &store)
    }

    /// Inserts the row in `self.s.row`.
    fn insert_encoded(&mut self, h: usize, store: &Arc<TableStore>) -> Result<()> {
        let meta = Arc::clone(&self.held[h].meta);
        let mut parents_asked = 0;
        if !meta.as_child.is_empty() && store.hooks.has_miss_hook() && self.origin.enforces_foreign_keys() {
            let row = std::mem::take(&mut self.s.row);
            let r = self.load_missing_parents(&meta, store.layout(), &row);
            self.s.row = row;
            parents_asked = r?;
        }
        if store.hooks.has_miss_hook() && self.origin == Origin::Application {
            let row = std::mem::take(&mut self.s.row);
            let r = self.load_conflicting_keys(store, &meta, &row, None);
            self.s.row = row;
            r?;
        }
        store.pk_of(&self.s.row, &mut self.s.key);
        let hash = hash_key(&self.s.key);
        let stack = self.must_stack(h, hash);
        let (head, replaced_tombstone) = loop {
            let pinned = self.pinned.then_some(self.snapshot);
            match store.insert(hash, &self.s.key, self.id, &self.s.row, stack, pinned, &mut self.s.scratch) {
                InsertOutcome::Inserted { head, replaced_tombstone } => {
                    if store.hooks.tracks_access() {
                        // A new row (a load too) starts as just used.
                        head.touch(self.db.access_tick.load(Ordering::Relaxed));
                    }
                    break (head, replaced_tombstone);
                }
                InsertOutcome::Duplicate => {
                    return Err(unique_violation(
                        &store.schema,
                        &store.schema.primary_key,
                        &self.cat,
                        store.schema.primary_index,
                        &self.s.row,
                    ));
                }
                InsertOutcome::WaitFor(owner) => self.wait(owner, &store.schema.name)?,
                InsertOutcome::DeletedSince => {
                    return Err(EngineError::ChangedSincePinned { relation: store.schema.name.clone() });
                }
            }
        };
        // Stacking happens only over our own version (here a tombstone).
        let over_own_delete = replaced_tombstone.is_some() || stack;
        self.record_write(h, hash, over_own_delete, head, false);
        if let Some(tombstone) = replaced_tombstone {
            // Entries only the replaced tombstone had; the new version is a
            // fresh insert for constraint purposes (its key may be taken now).
            store.cleanup_entries(&meta, &self.s.key, &[tombstone]);
        }
        let row = std::mem::take(&mut self.s.row);
        self.s.parents_asked = parents_asked; // after_write takes it first thing.
        let r = self.after_write(store, &meta, &row, None, false, None);
        self.s.row = row;
        r
    }

    /// Sets columns of the row with primary key `key`; false if no such row.
    pub fn update(&mut self, table: TableId, key: &[Value], changes: &[(usize, Value)]) -> Result<bool> {
        self.update_with(table, key, |_| Ok(Some(changes.to_vec())))
    }

    /// Locks the latest committed version of the row (waiting for another
    /// writer to finish first) and calls `f` with it; `f` returns the column
    /// changes, or None to leave the row alone (its WHERE no longer holds).
    /// `f` may run more than once if the row changes under it.
    ///
    /// An application transaction that finds no row asks the table's miss
    /// hook, if it has one (transaction/miss.rs), and then looks again; so
    /// do `delete`, `delete_with` and `get_for_update`.
    pub fn update_with(
        &mut self,
        table: TableId,
        key: &[Value],
        mut f: impl FnMut(RowRef<'_>) -> Result<Option<Vec<(usize, Value)>>>,
    ) -> Result<bool> {
        self.prologue()?;
        self.retrying_key_miss(table, key, MissIntent::Write, |t| t.update_inner(table, key, &mut f))
    }

    pub(super) fn update_inner(
        &mut self,
        table: TableId,
        key: &[Value],
        mut f: impl FnMut(RowRef<'_>) -> Result<Option<Vec<(usize, Value)>>>,
    ) -> Result<bool> {
        let h = self.hold(table)?;
        let store = Arc::clone(&self.held[h].store);
        let Some(hash) = encode_pk(&store, key, &mut self.s.key)? else { return Ok(false) };
        self.on_latest(&store, hash, "row kept changing under an update", |t, at| {
            let Some(changes) = f(RowRef::new(&store.schema, &t.s.base))? else { return Ok(Some(false)) };
            refuse_nested_keys(&store, changes.iter().map(|(c, v)| (*c, v)))?;
            apply_changes(&store.schema, &t.s.base, &changes, &mut t.s.row)?;
            t.s.tmp.clear();
            store.pk.encode_row(store.layout(), &t.s.row, &mut t.s.tmp);
            if t.s.tmp != t.s.key {
                return t.update_key(h, &store, hash, at).map(|()| Some(true));
            }
            if store.hooks.has_miss_hook() && t.origin == Origin::Application {
                let meta = Arc::clone(&t.held[h].meta);
                let (row, base) = (std::mem::take(&mut t.s.row), std::mem::take(&mut t.s.base));
                let r = t.load_conflicting_keys(&store, &meta, &row, Some(&base));
                (t.s.row, t.s.base) = (row, base);
                r?;
            }
            let own = is_uncommitted(at.word);
            let stack = own && t.must_stack(h, hash);
            let Some(new_head) = store.install(hash, &t.s.key, t.id, at, &t.s.row, 0, stack, &mut t.s.scratch) else {
                return Ok(None);
            };
            t.record_write(h, hash, own, new_head, true);
            let meta = Arc::clone(&t.held[h].meta);
            let (row, base) = (std::mem::take(&mut t.s.row), std::mem::take(&mut t.s.base));
            // A stacked-over version keeps its index entries (it may come back).
            let r = t.after_write(&store, &meta, &row, Some(&base), own && !stack, Some(&changes));
            (t.s.row, t.s.base) = (row, base);
            r.map(|()| Some(true))
        })
    }

    /// UPDATE that changes the primary key: delete the old row, insert the new.
    fn update_key(&mut self, h: usize, store: &Arc<TableStore>, hash: u64, at: LatestVersion) -> Result<()> {
        // The old key goes by an UPDATE: its children are refused, never
        // deleted or detached (ON DELETE actions are for DELETE only).
        if !self.delete_installed(h, store, hash, at, false)? {
            return Err(EngineError::LockTimeout { detail: "row changed during a key update".into() });
        }
        self.insert_encoded(h, store)
    }

    /// Deletes the row with primary key `key`; false if no such row.
    pub fn delete(&mut self, table: TableId, key: &[Value]) -> Result<bool> {
        self.delete_with(table, key, |_| Ok(true))
    }

    /// DELETE of the row with primary key `key` if `f` holds on its latest
    /// version (after waiting for a writer that holds it): READ
    /// COMMITTED's recheck. False if there is no such row or `f` says no.
    pub fn delete_with(
        &mut self,
        table: TableId,
        key: &[Value],
        mut f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<bool> {
        self.prologue()?;
        self.retrying_key_miss(table, key, MissIntent::Write, |t| t.delete_inner(table, key, &mut f))
    }

    pub(super) fn delete_inner(
        &mut self,
        table: TableId,
        key: &[Value],
        mut f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<bool> {
        let h = self.hold(table)?;
        let store = Arc::clone(&self.held[h].store);
        let Some(hash) = encode_pk(&store, key, &mut self.s.key)? else { return Ok(false) };
        self.on_latest(&store, hash, "row kept changing under a delete", |t, at| {
            if !f(RowRef::new(&store.schema, &t.s.base))? {
                return Ok(Some(false));
            }
            Ok(t.delete_installed(h, &store, hash, at, true)?.then_some(true))
        })
    }

    /// Installs a tombstone over `at`, whose image is in `self.s.base`;
    /// false if the head changed meanwhile.
    /// `deleting`: a DELETE (ON DELETE actions apply), not the delete half
    /// of a primary-key UPDATE. Children are checked only when the origin
    /// enforces foreign keys (an evicted parent leaves PostgreSQL's children
    /// alone; the cache evicts the cached ones itself), except that an
    /// eviction must see every child it leaves (`check_children_seen`).
    fn delete_installed(
        &mut self,
        h: usize,
        store: &Arc<TableStore>,
        hash: u64,
        at: LatestVersion,
        deleting: bool,
    ) -> Result<bool> {
        let own = is_uncommitted(at.word);
        let stack = own && self.must_stack(h, hash);
        let Some(new_head) =
            store.install(hash, &self.s.key, self.id, at, &self.s.base, DELETED, stack, &mut self.s.scratch)
        else {
            return Ok(false);
        };
        self.record_write(h, hash, own, new_head, true);
        let meta = Arc::clone(&self.held[h].meta);
        let base = std::mem::take(&mut self.s.base);
        let mut r = Ok(());
        for link in &meta.as_parent {
            r = if self.origin.enforces_foreign_keys() {
                self.check_children(store, link, &base, deleting)
            } else if self.origin == Origin::Evict {
                self.check_children_seen(store, link, &base)
            } else {
                Ok(())
            };
            if r.is_err() {
                break;
            }
        }
        self.s.base = base;
        r.map(|()| true)
    }

    /// SELECT ... FOR UPDATE: locks the row and returns its latest
    /// committed version; false if it does not exist.
    pub fn get_for_update(&mut self, table: TableId, key: &[Value], out: &mut RowBuf) -> Result<bool> {
        self.prologue()?;
        self.retrying_key_miss(table, key, MissIntent::Write, |t| t.lock_inner(table, key, out))
    }

    fn lock_inner(&mut self, table: TableId, key: &[Value], out: &mut RowBuf) -> Result<bool> {
        let h = self.hold(table)?;
        let store = Arc::clone(&self.held[h].store);
        let Some(hash) = encode_pk(&store, key, &mut self.s.key)? else { return Ok(false) };
        // The latest image goes straight to the caller's buffer.
        std::mem::swap(&mut self.s.base, &mut out.data);
        let r = self.on_latest(&store, hash, "row kept changing under a lock", |t, at| {
            out.set_schema(&store.schema);
            if is_uncommitted(at.word) {
                return Ok(Some(true)); // Already ours.
            }
            let Some(new_head) = store.install(hash, &t.s.key, t.id, at, &t.s.base, LOCK_ONLY, false, &mut t.s.scratch)
            else {
                return Ok(None);
            };
            t.record_write(h, hash, false, new_head, true);
            Ok(Some(true))
        });
        std::mem::swap(&mut self.s.base, &mut out.data);
        r
    }

    /// The step every writer of an existing row (UPDATE, DELETE, SELECT FOR
    /// UPDATE) starts with: locate the latest version of the row whose
    /// primary key is in `self.s.key`, copying its image into `self.s.base`;
    /// if another writer holds the row, wait for it to end and look again.
    /// `act` gets the version and returns the answer, or None when it lost a
    /// race (the head changed before its install), to run again on the
    /// version located anew. False when there is no such row, or it is
    /// deleted. `gave_up`: the 55P03 detail after too many lost races.
    #[inline]
    pub(super) fn on_latest(
        &mut self,
        store: &TableStore,
        hash: u64,
        gave_up: &str,
        mut act: impl FnMut(&mut Transaction, LatestVersion) -> Result<Option<bool>>,
    ) -> Result<bool> {
        let tick = self.touch_tick(store);
        for _ in 0..INSTALL_RETRIES_MAX {
            let at = match store.latest(hash, &self.s.key, self.id, tick, &mut self.s.scratch, &mut self.s.base)? {
                Latest::Absent => return Ok(false),
                Latest::Locked(owner) => {
                    self.wait(owner, &store.schema.name)?;
                    continue;
                }
                Latest::Head(at) => at,
            };
            // A pinned transaction decided from its snapshot: a version
            // committed after it (even a tombstone) is a change it never saw.
            if self.pinned && !is_uncommitted(at.word) && !self.snapshot.sees(commit_ts_of(at.word)) {
                return Err(EngineError::ChangedSincePinned { relation: store.schema.name.clone() });
            }
            if is_deleted(at.word) {
                return Ok(false);
            }
            if let Some(answer) = act(self, at)? {
                return Ok(answer);
            }
        }
        Err(EngineError::LockTimeout { detail: gave_up.into() })
    }
}

/// Coerces `values` to the table's column types, checks NOT NULL, encodes.
/// A multidimensional array (nested `Value::Array` rows) has no key
/// encoding in PostgreSQL's array_cmp order (the nested one would order
/// rows before elements, and its length is not readable without the
/// nesting): refused in a primary-key or index column. So is an array with
/// a lower bound other than 1, whose key would equal the same elements'
/// with lower bound 1 (array_eq tells them apart).
fn refuse_nested_keys<'a>(store: &TableStore, values: impl Iterator<Item = (usize, &'a Value)>) -> Result<()> {
    let nested = |v: &Value| {
        matches!(v, Value::BoundedArray(_))
            || matches!(v, Value::Array(items) if matches!(items.first(), Some(Value::Array(_))))
    };
    let mut meta = None;
    for (col, v) in values {
        if !nested(v) {
            continue;
        }
        let meta = meta.get_or_insert_with(|| store.meta());
        if store.pk.columns.contains(&col) || meta.indexes.iter().any(|i| i.spec.columns.contains(&col)) {
            let what = if matches!(v, Value::BoundedArray(_)) {
                "arrays with a lower bound other than 1"
            } else {
                "multidimensional arrays"
            };
            return Err(EngineError::FeatureNotSupported(format!("{what} in a primary key or index column")));
        }
    }
    Ok(())
}

pub(crate) fn encode_row(schema: &TableSchema, values: &[Value], out: &mut Vec<u8>) -> Result<()> {
    if values.len() != schema.columns.len() {
        return Err(EngineError::definition(
            "42601",
            format!(
                "table \"{}\" has {} columns but {} values were supplied",
                schema.name,
                schema.columns.len(),
                values.len()
            ),
        ));
    }
    let mut coerced: Vec<Cow<'_, Value>> = Vec::with_capacity(values.len());
    for (col, v) in schema.columns.iter().zip(values) {
        let c =
            if !v.is_of_type(col.ty) { Cow::Owned(coerce(v.clone(), col.ty, &col.name)?) } else { Cow::Borrowed(v) };
        if c.is_null() && !col.nullable {
            let detail = failing_row(schema, |k| values[k].to_string());
            return Err(EngineError::NotNullViolation { table: schema.name.clone(), column: col.name.clone(), detail });
        }
        coerced.push(c);
    }
    schema.layout().encode(&coerced, out)
}

/// New row = `base` with `changes`; fixed-width-only changes patch a copy.
fn apply_changes(schema: &TableSchema, base: &[u8], changes: &[(usize, Value)], out: &mut Vec<u8>) -> Result<()> {
    let layout = schema.layout();
    for (col, _) in changes {
        if *col >= schema.columns.len() {
            return Err(EngineError::UndefinedColumn { table: schema.name.clone(), column: format!("#{col}") });
        }
    }
    let check_null = |col: usize, v: &Value| {
        if v.is_null() && !schema.columns[col].nullable {
            let detail = failing_row(schema, |k| match changes.iter().rev().find(|(c, _)| *c == k) {
                Some((_, changed)) => changed.to_string(),
                None => layout.get(base, k).to_string(),
            });
            return Err(EngineError::NotNullViolation {
                table: schema.name.clone(),
                column: schema.columns[col].name.clone(),
                detail,
            });
        }
        Ok(())
    };
    // A wide numeric lives in the row's side area: such rows are re-encoded.
    if !layout.has_side(base) && changes.iter().all(|(c, v)| layout.is_fixed(*c) && !matches!(v, Value::NumericBig(_)))
    {
        out.clear();
        out.extend_from_slice(base);
        for (col, v) in changes {
            let ty = schema.columns[*col].ty;
            let v = if !v.is_of_type(ty) {
                Cow::Owned(coerce(v.clone(), ty, &schema.columns[*col].name)?)
            } else {
                Cow::Borrowed(v)
            };
            check_null(*col, &v)?;
            layout.patch_fixed(out, *col, &v);
        }
        return Ok(());
    }
    let mut values: Vec<Value> = (0..schema.columns.len()).map(|c| layout.get(base, c).to_owned_value()).collect();
    for (col, v) in changes {
        values[*col] = v.clone();
    }
    encode_row(schema, &values, out)
}

/// PostgreSQL's DETAIL of a NOT NULL violation: the new row's user
/// columns in text form, `null` for NULL.
fn failing_row(schema: &TableSchema, value_text: impl Fn(usize) -> String) -> String {
    let vals: Vec<String> = (0..schema.visible_columns().len()).map(value_text).collect();
    format!("Failing row contains ({}).", vals.join(", "))
}
