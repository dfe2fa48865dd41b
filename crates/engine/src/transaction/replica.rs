//! A hot standby's apply: a transaction received from the active, whose
//! WAL records the standby appends unchanged, replayed through the
//! ordinary write path (versions, indexes, MVCC stamping) so read-only
//! sessions see it as they would see a local commit.
//!
//! Each op is a full image keyed by primary key (walrec.rs): an insert
//! installs the image, an update replaces the latest version with it, a
//! delete installs a tombstone over it. DDL installs the schemas the
//! record carries, ids and all, so the catalog stays the active's. The
//! transaction does not enforce foreign keys and runs no ON DELETE action
//! (the active did, and logged every row they changed). It commits with
//! the active's commit ts and commit time; its records are appended under
//! the commit lock instead of records built from its write set, and each
//! must land at the LSN it had on the active (else replication stops:
//! the logs would diverge).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use pgtier_wal::Lsn;

use super::commit::final_op;
use super::{Status, Step, Transaction};
use crate::error::{EngineError, Result};
use crate::ids::CommitTs;
use crate::key::hash_key;
use crate::origin::Origin;
use crate::schema::TableId;
use crate::table::{InsertOutcome, TableStore};
use crate::version::{DELETED, is_uncommitted};
use crate::walrec::{OpRef, RowOp};

/// A received transaction: its records with the LSN each had on the
/// active, and what its closing record says.
pub(crate) struct ReplicaTxn {
    pub(crate) records: Vec<(Lsn, Vec<u8>)>,
    pub(crate) commit_ts: CommitTs,
    pub(crate) commit_time_us: u64,
    pub(crate) origin: Origin,
}

/// A transaction's first write or DDL on a standby or a fenced active:
/// 25006, PostgreSQL's answer to a write on a hot standby.
pub(crate) fn check_writable(db: &crate::db::DbInner, replica: bool) -> Result<()> {
    match db.read_only.load(Ordering::Relaxed) {
        crate::replica::READ_WRITE => Ok(()),
        crate::replica::READ_REPLICA_ONLY if replica => Ok(()),
        crate::replica::READ_REPLICA_ONLY => Err(EngineError::definition(
            "25006",
            "cannot execute a write in a read-only transaction (this pgtier is a standby)",
        )),
        _ => Err(EngineError::definition(
            "25006",
            "cannot execute a write in a read-only transaction (this pgtier lost the pair's lease: the standby takes over writes)",
        )),
    }
}

impl Transaction {
    /// Marks this transaction as the standby's apply of a received one.
    pub(crate) fn set_replica(&mut self) {
        self.replica = true;
    }

    /// Applies one decoded op of a received transaction.
    pub(crate) fn apply_op(&mut self, op: OpRef<'_>) -> Result<()> {
        match op {
            OpRef::Row { op, table, row } => self.apply_row(op, table, row),
            OpRef::CreateTable(ddl) => {
                self.acquire_ddl()?;
                self.install_table_ddl(ddl).map(|_| ())
            }
            OpRef::DropTable(id) => {
                self.acquire_ddl()?;
                let store = self.store(id)?;
                self.lock_exclusive(&store)?;
                self.remove_table(id, store)
            }
            OpRef::CreateIndex(index) => self.install_index(Arc::new(index)).map(|_| ()),
            OpRef::DropIndex(id) => {
                self.acquire_ddl()?;
                let index =
                    self.cat.catalog.index(id).cloned().ok_or_else(|| {
                        EngineError::Corrupt(format!("replicated DROP INDEX of unknown index {}", id.0))
                    })?;
                self.remove_index(&index)
            }
            OpRef::SetAnnotation { table, annotation } => self.set_annotation_inner(table, annotation),
        }
    }

    fn apply_row(&mut self, op: RowOp, table: TableId, image: &[u8]) -> Result<()> {
        let h = self.hold(table)?;
        let store = Arc::clone(&self.held[h].store);
        store.layout().validate_image(image)?;
        if op == RowOp::Insert {
            return self.apply_insert(h, &store, image);
        }
        store.pk_of(image, &mut self.s.key);
        let hash = hash_key(&self.s.key);
        let found = self.on_latest(&store, hash, "row kept changing under a replicated write", |t, at| {
            let own = is_uncommitted(at.word);
            let (row, flags) = if op == RowOp::Delete { (t.s.base.clone(), DELETED) } else { (image.to_vec(), 0) };
            let Some(new_head) = store.install(hash, &t.s.key, t.id, at, &row, flags, false, &mut t.s.scratch) else {
                return Ok(None);
            };
            t.record_write(h, hash, own, new_head, true);
            if op == RowOp::Update {
                let meta = Arc::clone(&t.held[h].meta);
                let base = std::mem::take(&mut t.s.base);
                let r = t.after_write(&store, &meta, &row, Some(&base), own, None);
                t.s.base = base;
                r?;
            }
            Ok(Some(true))
        })?;
        if !found {
            return Err(EngineError::Corrupt(format!(
                "replicated {op:?} on table {} found no row: the standby diverged from the active",
                store.schema.name
            )));
        }
        Ok(())
    }

    fn apply_insert(&mut self, h: usize, store: &Arc<TableStore>, image: &[u8]) -> Result<()> {
        store.pk_of(image, &mut self.s.key);
        let hash = hash_key(&self.s.key);
        let (head, replaced) = loop {
            match store.insert(hash, &self.s.key, self.id, image, false, None, &mut self.s.scratch) {
                InsertOutcome::Inserted { head, replaced_tombstone } => break (head, replaced_tombstone),
                InsertOutcome::WaitFor(owner) => self.wait(owner, &store.schema.name)?,
                InsertOutcome::Duplicate | InsertOutcome::DeletedSince => {
                    return Err(EngineError::Corrupt(format!(
                        "replicated insert into {} met an existing row: the standby diverged from the active",
                        store.schema.name
                    )));
                }
            }
        };
        self.record_write(h, hash, replaced.is_some(), head, false);
        let meta = Arc::clone(&self.held[h].meta);
        if let Some(tombstone) = replaced {
            store.cleanup_entries(&meta, &self.s.key, &[tombstone]);
        }
        self.after_write(store, &meta, image, None, false, None)
    }

    /// Commits a received transaction: its records appended under the
    /// commit lock (each at the LSN it had on the active), its versions
    /// stamped with the active's commit ts, DDL published. Returns the end
    /// of its last record. Not durable on return: the caller waits for
    /// the WAL before it acknowledges.
    pub(crate) fn commit_replica(&mut self, txn: &ReplicaTxn) -> Result<()> {
        if self.status != Status::Active {
            return Err(EngineError::Corrupt("a replicated transaction failed while applied".into()));
        }
        let mut deltas = vec![0i64; self.held.len()];
        for step in &self.order {
            let Step::Row(i) = step else { continue };
            let w = &self.writes[*i];
            deltas[w.held as usize] += match final_op(w.head.word(), w.had_base()) {
                Some(RowOp::Insert) => 1,
                Some(RowOp::Delete) => -1,
                _ => 0,
            };
        }
        let r = self.replica_critical(txn);
        if let Err(e) = r {
            self.rollback_internal();
            self.status = Status::Ended;
            return Err(e);
        }
        for (held, delta) in self.held.iter().zip(&deltas) {
            held.store.live_rows.fetch_add(*delta, Ordering::Relaxed);
        }
        let gc = self.gc_item(txn.commit_ts);
        self.release_locks();
        self.dropped.clear();
        self.db.txns.end(self.id);
        self.status = Status::Ended;
        if let Some(item) = gc {
            self.db.gc.push(item);
        }
        self.db.counters.commits.fetch_add(1, Ordering::Relaxed);
        self.db.txns.publish(txn.commit_ts);
        Ok(())
    }

    fn replica_critical(&mut self, txn: &ReplicaTxn) -> Result<()> {
        let mut c = self.db.commit.lock();
        if txn.commit_ts <= c.last_ts {
            return Err(EngineError::Corrupt(format!(
                "replicated commit ts {} is not after the standby's last {}",
                txn.commit_ts.get(),
                c.last_ts.get()
            )));
        }
        let mut last = None;
        for (expected, payload) in &txn.records {
            let lsn = self.db.wal.append(payload)?;
            // The standby's log is the active's, byte for byte: a record
            // anywhere else means the histories differ. Stop, loudly.
            assert_eq!(
                lsn, *expected,
                "standby WAL diverged: a record the active logged at {expected:?} was appended at {lsn:?}"
            );
            last = Some(lsn);
        }
        c.clamp_time(txn.commit_time_us);
        for w in &self.writes {
            TableStore::stamp(w.head, txn.commit_ts);
        }
        if !self.ddl.is_empty() {
            for store in &self.dropped {
                store.dropped.store(true, Ordering::Release);
            }
            self.db.catalog.publish(Arc::clone(&self.cat));
        }
        c.last_ts = txn.commit_ts;
        if let Some(lsn) = last {
            c.last_lsn = Some(lsn);
            if txn.origin == Origin::Application {
                self.db.application_commit_end.fetch_max(lsn.0 + 1, Ordering::Release);
            }
        }
        Ok(())
    }
}
