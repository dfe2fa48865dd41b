//! DDL: one DDL transaction at a time (the DDL lock) edits a private copy
//! of the catalog, published at commit; table metadata changes under the
//! exclusive table lock and is restored on rollback.

use std::sync::Arc;

use super::constraints::key_detail;
use super::{DdlOp, MetaUndo, Step, Transaction};
use crate::error::{EngineError, Result};
use crate::ids::TxnId;
use crate::ordered::{ENTRY_BYTES_MAX, OrderedIndex};
use crate::schema::{
    AlterTableDef, ForeignKey, IndexDef, IndexId, IndexSchema, TableDdl, TableDef, TableId, TableSchema,
};
use crate::table::{FkLink, IndexStore, TableMeta, TableStore};
use crate::types::Value;
use crate::version::{is_deleted, is_lock_only, is_uncommitted, owner_of};

impl Transaction {
    pub(super) fn acquire_ddl(&mut self) -> Result<()> {
        if self.ddl_locked {
            return Ok(());
        }
        super::replica::check_writable(&self.db, self.replica)?;
        self.db.catalog.lock_ddl(self.id, self.db.lock_deadline())?;
        self.ddl_locked = true;
        // Base the private catalog on the latest committed one: no other
        // DDL can commit while we hold the DDL lock.
        self.cat = Arc::new((*self.db.catalog.current()).clone());
        self.private_catalog = true;
        for held in &mut self.held {
            held.meta = held.store.meta();
        }
        Ok(())
    }

    pub(super) fn lock_exclusive(&mut self, store: &Arc<TableStore>) -> Result<()> {
        if self.exclusive.iter().any(|s| Arc::ptr_eq(s, store)) {
            return Ok(());
        }
        if self.db.catalog.current().store(store.schema.id).is_none() {
            return Ok(()); // Created by this transaction: nobody else can see it.
        }
        let own_shared = u64::from(self.held.iter().any(|h| h.shared && Arc::ptr_eq(&h.store, store)));
        store.lock.lock_exclusive(self.db.lock_deadline(), &store.schema.name, own_shared)?;
        self.exclusive.push(Arc::clone(store));
        Ok(())
    }

    fn set_meta(&mut self, store: &Arc<TableStore>, meta: TableMeta) {
        let meta = Arc::new(meta);
        let old = std::mem::replace(&mut *store.meta.write(), Arc::clone(&meta));
        self.meta_undo.push(MetaUndo { store: Arc::clone(store), old });
        for held in &mut self.held {
            if Arc::ptr_eq(&held.store, store) {
                held.meta = Arc::clone(&meta);
            }
        }
    }

    fn catalog_mut(&mut self) -> &mut crate::schema::Catalog {
        Arc::make_mut(&mut Arc::make_mut(&mut self.cat).catalog)
    }

    /// CREATE TABLE (transactional: visible to others at commit).
    pub fn create_table(&mut self, def: &TableDef) -> Result<TableId> {
        self.check_active()?;
        let r = self.create_table_inner(def);
        self.check(r)
    }

    fn create_table_inner(&mut self, def: &TableDef) -> Result<TableId> {
        self.acquire_ddl()?;
        let (table, indexes, fks) = self.cat.catalog.plan_create_table(def)?;
        self.install_table(table, indexes, fks)
    }

    /// Makes a planned table's storage, links its foreign keys (a parent's
    /// or, after ALTER TABLE, a child's metadata changes under its
    /// exclusive lock), adds it to the private catalog and logs it.
    fn install_table(
        &mut self,
        table: TableSchema,
        indexes: Vec<IndexSchema>,
        fks: Vec<ForeignKey>,
    ) -> Result<TableId> {
        let indexes: Vec<Arc<IndexSchema>> = indexes.into_iter().map(Arc::new).collect();
        let fks: Vec<Arc<ForeignKey>> = fks.into_iter().map(Arc::new).collect();
        self.install_table_ddl(TableDdl { table: Arc::new(table), indexes, foreign_keys: fks })
    }

    /// [`Transaction::install_table`] of a table whose ids are decided
    /// already (planned here, or received from an active: replica.rs).
    pub(super) fn install_table_ddl(&mut self, ddl: TableDdl) -> Result<TableId> {
        let TableDdl { table, indexes, foreign_keys: fks } = ddl;
        let store = Arc::new(TableStore::new(Arc::clone(&table)));
        let mut meta = TableMeta::default();
        for index in indexes.iter().filter(|i| i.ordered) {
            meta.indexes.push(Arc::new(store.new_index_store(Arc::clone(index))));
        }
        for fk in &fks {
            if fk.parent == table.id && fk.child == table.id {
                meta.as_child.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&store) });
                meta.as_parent.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&store) });
                continue;
            }
            if fk.child != table.id {
                // Another table's foreign key, re-pointed by ALTER TABLE.
                let child = self.store(fk.child)?;
                self.lock_exclusive(&child)?;
                let mut cmeta = (*child.meta()).clone();
                cmeta.as_child.retain(|l| l.fk.id != fk.id);
                cmeta.as_child.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&store) });
                self.set_meta(&child, cmeta);
                meta.as_parent.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&child) });
                continue;
            }
            let parent = self.store(fk.parent)?;
            self.lock_exclusive(&parent)?;
            let mut pmeta = (*parent.meta()).clone();
            pmeta.as_parent.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&store) });
            self.set_meta(&parent, pmeta);
            meta.as_child.push(FkLink { fk: Arc::clone(fk), other: Arc::downgrade(&parent) });
        }
        *store.meta.write() = Arc::new(meta);
        let id = table.id;
        self.catalog_mut().add_table(Arc::clone(&table), indexes.clone(), fks.clone());
        Arc::make_mut(&mut self.cat).set_store(id, Some(store));
        self.order.push(Step::Ddl(self.ddl.len()));
        self.ddl.push(DdlOp::CreateTable(TableDdl { table, indexes, foreign_keys: fks }));
        Ok(id)
    }

    /// DROP TABLE (RESTRICT: fails if another table's foreign key references it).
    pub fn drop_table(&mut self, name: &str) -> Result<()> {
        self.check_active()?;
        let r = self.drop_table_inner(name);
        self.check(r)
    }

    fn drop_table_inner(&mut self, name: &str) -> Result<()> {
        self.acquire_ddl()?;
        let table = self
            .cat
            .catalog
            .table_by_name(name)
            .cloned()
            .ok_or_else(|| EngineError::UndefinedTable { name: name.to_owned() })?;
        if let Some(fk) = self.cat.catalog.referencing(table.id).into_iter().find(|fk| fk.child != table.id) {
            let child = self.cat.catalog.table(fk.child).map_or_else(String::new, |t| t.name.clone());
            return Err(EngineError::definition(
                "2BP01",
                format!(
                    "cannot drop table {name} because other objects depend on it (constraint {} on table {child})",
                    fk.name
                ),
            ));
        }
        if let Some((user, column)) =
            self.cat.catalog.sequence_users(table.id).into_iter().find(|(t, _)| t.id != table.id)
        {
            return Err(EngineError::definition(
                "2BP01",
                format!(
                    "cannot drop sequence {name} because other objects depend on it (default value for column {} of table {})",
                    user.columns[column].name, user.name
                ),
            ));
        }
        let store = self.store(table.id)?;
        self.lock_exclusive(&store)?;
        self.remove_table(table.id, store)?;
        // Sequences of serial and identity columns go with their table.
        for (seq, _) in table.columns.iter().filter_map(|c| c.sequence).filter(|(_, how)| how.owns()) {
            if let Some(seq_name) = self.cat.catalog.table(seq).map(|t| t.name.clone()) {
                self.drop_table_inner(&seq_name)?;
            }
        }
        Ok(())
    }

    /// ALTER TABLE: replaces `table`'s definition with `alter` and fills the
    /// new table with `rows` (one value per column of the new definition,
    /// NULL for a hidden row id), all in this transaction: the old table is
    /// dropped and the new one created under a new id with the same
    /// machinery as DROP/CREATE TABLE (logged as those ops plus the rows,
    /// replayed, checkpointed and streamed as they are), so others see the
    /// old definition until commit and rollback leaves no trace. Rows are
    /// inserted through the ordinary write path: NOT NULL, UNIQUE, primary
    /// key and (application origin) foreign keys are checked on them.
    /// Other tables' foreign keys to `table` follow it (2BP01 when the key
    /// they reference is gone); owned sequences stay (the caller drops the
    /// ones it no longer uses). Returns the new id.
    pub fn alter_table(
        &mut self,
        table: TableId,
        alter: &AlterTableDef,
        rows: impl IntoIterator<Item = Vec<Value>>,
    ) -> Result<TableId> {
        self.check_active()?;
        let r = self.alter_table_inner(table, alter);
        let id = self.check(r)?;
        for row in rows {
            // An error here has already aborted the transaction.
            self.insert(id, &row)?;
        }
        Ok(id)
    }

    /// Takes the DDL lock and `table`'s exclusive lock (waiting for its
    /// writers to end), then a fresh statement snapshot: the rows read next
    /// are all the table will hold until this transaction ends. ALTER TABLE
    /// reads the rows it rewrites after this; reading them before could
    /// miss a write committed meanwhile.
    pub fn lock_table_exclusive(&mut self, table: TableId) -> Result<()> {
        self.check_active()?;
        let r = self.lock_table_exclusive_inner(table);
        self.check(r)
    }

    fn lock_table_exclusive_inner(&mut self, table: TableId) -> Result<()> {
        self.acquire_ddl()?;
        let store = self.store(table)?;
        self.lock_exclusive(&store)?;
        self.refresh();
        Ok(())
    }

    fn alter_table_inner(&mut self, table: TableId, alter: &AlterTableDef) -> Result<TableId> {
        self.acquire_ddl()?;
        let old = self.cat.catalog.table(table).cloned().ok_or_else(|| super::undefined(table))?;
        if old.sequence.is_some() {
            return Err(EngineError::definition("42809", format!("\"{}\" is not a table", old.name)));
        }
        if alter.sources.iter().flatten().any(|&c| c >= old.visible_columns().len()) {
            return Err(EngineError::definition("42601", "ALTER TABLE: a source column out of range"));
        }
        let store = self.store(table)?;
        self.lock_exclusive(&store)?;
        let referencing: Vec<Arc<ForeignKey>> =
            self.cat.catalog.referencing(table).into_iter().filter(|fk| fk.child != table).collect();
        self.remove_table(table, store)?;
        let (new, indexes, fks) = self.cat.catalog.plan_alter_table(alter, &referencing)?;
        self.install_table(new, indexes, fks)
    }

    /// Takes a table (locked exclusively) out of the private catalog and
    /// logs its drop: its parents forget its foreign keys, its storage is
    /// freed at commit. Foreign keys of other tables to it stay (DROP TABLE
    /// refused them; ALTER TABLE re-points them).
    pub(super) fn remove_table(&mut self, table: TableId, store: Arc<TableStore>) -> Result<()> {
        for fk in self.cat.catalog.foreign_keys_of(table) {
            if fk.parent == table {
                continue;
            }
            let parent = self.store(fk.parent)?;
            self.lock_exclusive(&parent)?;
            let mut pmeta = (*parent.meta()).clone();
            pmeta.as_parent.retain(|l| l.fk.id != fk.id);
            self.set_meta(&parent, pmeta);
        }
        self.catalog_mut().remove_table(table);
        Arc::make_mut(&mut self.cat).set_store(table, None);
        self.dropped.push(store);
        self.order.push(Step::Ddl(self.ddl.len()));
        self.ddl.push(DdlOp::DropTable(table));
        Ok(())
    }

    /// CREATE [UNIQUE] INDEX; builds it from the table's current rows.
    pub fn create_index(&mut self, def: &IndexDef) -> Result<IndexId> {
        self.check_active()?;
        let r = self.create_index_inner(def);
        self.check(r)
    }

    fn create_index_inner(&mut self, def: &IndexDef) -> Result<IndexId> {
        self.acquire_ddl()?;
        let index = Arc::new(self.cat.catalog.plan_create_index(def)?);
        self.install_index(index)
    }

    /// Builds a planned (or received, replica.rs) index and adds it to
    /// the private catalog.
    pub(super) fn install_index(&mut self, index: Arc<IndexSchema>) -> Result<IndexId> {
        self.acquire_ddl()?;
        let store = self.store(index.table)?;
        self.lock_exclusive(&store)?;
        // Stubs keep the columns of the indexes they were made under, not
        // this one's (cold.rs): they come back whole first. The retained
        // checkpoints still name them, and recovery could not build this
        // index from them: two checkpoints, so none of those is left by
        // the time the index can commit. Only then may their images go.
        let promoted = store.promote_stubs()?;
        if !promoted.is_empty() {
            self.db.checkpoint()?;
            self.db.checkpoint()?;
            store.requeue_cold_releases(promoted);
        }
        let built = build_index(&store, Arc::clone(&index), self.id)?;
        let mut meta = (*store.meta()).clone();
        meta.indexes.push(Arc::new(built));
        self.set_meta(&store, meta);
        self.catalog_mut().add_index(Arc::clone(&index));
        let id = index.id;
        self.order.push(Step::Ddl(self.ddl.len()));
        self.ddl.push(DdlOp::CreateIndex(index));
        Ok(id)
    }

    /// Replaces the table's annotation ([`crate::TableDef::annotation`]):
    /// DDL like the others (one DDL transaction at a time, visible to
    /// others at commit, logged, undone by rollback). No table lock: rows
    /// and their readers do not depend on it.
    pub fn set_annotation(&mut self, table: TableId, annotation: Option<String>) -> Result<()> {
        self.check_active()?;
        let r = self.set_annotation_inner(table, annotation);
        self.check(r)
    }

    pub(super) fn set_annotation_inner(&mut self, table: TableId, annotation: Option<String>) -> Result<()> {
        self.acquire_ddl()?;
        if !self.catalog_mut().set_annotation(table, annotation.clone()) {
            return Err(super::undefined(table));
        }
        self.order.push(Step::Ddl(self.ddl.len()));
        self.ddl.push(DdlOp::SetAnnotation(table, annotation));
        Ok(())
    }

    /// DROP INDEX (not the primary key's, nor one a foreign key relies on).
    pub fn drop_index(&mut self, name: &str) -> Result<()> {
        self.check_active()?;
        let r = self.drop_index_inner(name);
        self.check(r)
    }

    fn drop_index_inner(&mut self, name: &str) -> Result<()> {
        self.acquire_ddl()?;
        let index = self
            .cat
            .catalog
            .index_by_name(name)
            .cloned()
            .ok_or_else(|| EngineError::UndefinedObject { what: "index", name: name.to_owned() })?;
        let needed_by_fk = self
            .cat
            .catalog
            .referencing(index.table)
            .iter()
            .chain(self.cat.catalog.foreign_keys_of(index.table).iter())
            .any(|fk| fk.parent_index == index.id || fk.child_index == index.id);
        if index.primary || needed_by_fk {
            return Err(EngineError::definition(
                "2BP01",
                format!("cannot drop index {name} because a constraint requires it"),
            ));
        }
        self.remove_index(&index)
    }

    /// Takes an index out of its table and the private catalog.
    pub(super) fn remove_index(&mut self, index: &IndexSchema) -> Result<()> {
        self.acquire_ddl()?;
        let store = self.store(index.table)?;
        self.lock_exclusive(&store)?;
        let mut meta = (*store.meta()).clone();
        meta.indexes.retain(|i| i.schema.id != index.id);
        self.set_meta(&store, meta);
        self.catalog_mut().remove_index(index.id);
        self.order.push(Step::Ddl(self.ddl.len()));
        self.ddl.push(DdlOp::DropIndex(index.id));
        Ok(())
    }
}

/// Builds an index over the current rows: entries for every version (a
/// concurrent reader's snapshot may need an old one), UNIQUE checked on
/// each row's latest state.
fn build_index(store: &TableStore, schema: Arc<IndexSchema>, me: TxnId) -> Result<IndexStore> {
    let istore = store.new_index_store(Arc::clone(&schema));
    let layout = store.layout();
    let mut entries: Vec<Vec<u8>> = Vec::new();
    let mut latest_keys: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut pk = Vec::new();
    store.primary.try_for_each_head(|head| {
        store.pk_of(head.row(layout), &mut pk);
        let mut latest_seen = false;
        for v in head.chain() {
            let mut e = Vec::new();
            istore.entry(layout, v.row(layout), &pk, &mut e);
            if e.len() > ENTRY_BYTES_MAX {
                return Err(EngineError::ProgramLimitExceeded {
                    message: format!(
                        "index row size {} exceeds maximum {ENTRY_BYTES_MAX} for index \"{}\"",
                        e.len(),
                        schema.name
                    ),
                });
            }
            let w = v.word();
            if !latest_seen && !is_lock_only(w) && (!is_uncommitted(w) || owner_of(w) == me) {
                latest_seen = true;
                if !is_deleted(w) && schema.unique && !istore.spec.row_has_null(layout, v.row(layout)) {
                    let (k, _) = istore.split(&e);
                    latest_keys.push((k.to_vec(), v.row(layout).to_vec()));
                }
            }
            entries.push(e);
        }
        Ok(())
    })?;
    latest_keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if let Some(pair) = latest_keys.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(EngineError::UniqueViolation {
            constraint: schema.name.clone(),
            detail: key_detail(&store.schema, &pair[0].1, &schema.columns, format_args!("is duplicated.")),
        });
    }
    entries.sort_unstable();
    entries.dedup();
    Ok(IndexStore::new(schema, istore.spec, OrderedIndex::from_sorted(entries.iter().map(Vec::as_slice))))
}
