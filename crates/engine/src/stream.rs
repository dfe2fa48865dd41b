//! The commit stream: committed transactions in commit order, read from the
//! WAL, for every consumer (AWT propagation, the columnar copy, a standby).
//!
//! Guarantees:
//! - Only durable transactions are delivered (the WAL reader stops at the
//!   durable end), each exactly once per read pass, whole, in commit order.
//! - A consumer is registered by name; its acknowledged position is kept in
//!   `consumers.dat` (consumers.rs), so WAL retention survives restarts:
//!   the WAL is never truncated past any registered consumer's position.
//! - After a restart a consumer resumes after its last acknowledged
//!   transaction; anything read but not acknowledged is delivered again, so
//!   consumers make their side effects idempotent or record the position in
//!   the same transaction as the effect (as AWT does in PostgreSQL).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgtier_wal::{Lsn, WalReader};

use crate::db::DbInner;
use crate::error::{EngineError, Result};
use crate::ids::CommitTs;
use crate::origin::Origin;
use crate::row_ref::RowRef;
use crate::schema::{ForeignKey, IndexId, IndexSchema, TableDdl, TableId, TableSchema};
use crate::types::Value;
use crate::walrec::{AssembledTxn, OpRef, RowOp, TxnAssembler, decode_record};

/// A row change: after-image for insert/update, before-image for delete.
#[derive(Clone, Debug)]
pub struct RowChange {
    pub op: RowOp,
    pub table: Arc<TableSchema>,
    pub image: Vec<u8>,
}

impl RowChange {
    pub fn row(&self) -> RowRef<'_> {
        RowRef::new(&self.table, &self.image)
    }
    /// A change from an image kept elsewhere (a commit participant's
    /// record of what it committed): checked against `table`'s layout, so a
    /// damaged image is an error, never a panic.
    pub fn from_image(op: RowOp, table: Arc<TableSchema>, image: Vec<u8>) -> Result<RowChange> {
        table.layout().validate_image(&image)?;
        Ok(RowChange { op, table, image })
    }

    pub fn key_values(&self) -> Vec<Value> {
        let r = self.row();
        self.table.primary_key.iter().map(|&c| r.get(c).to_owned_value()).collect()
    }
}

#[derive(Clone, Debug)]
pub enum Change {
    Row(RowChange),
    CreateTable {
        table: Arc<TableSchema>,
        indexes: Vec<Arc<IndexSchema>>,
        foreign_keys: Vec<Arc<ForeignKey>>,
    },
    DropTable(TableId),
    CreateIndex(Arc<IndexSchema>),
    DropIndex(IndexId),
    /// [`crate::Transaction::set_annotation`].
    SetAnnotation {
        table: TableId,
        annotation: Option<String>,
    },
}

/// One committed transaction.
#[derive(Clone, Debug)]
pub struct CommittedTxn {
    /// Position of its (first) WAL record.
    pub lsn: Lsn,
    /// Position to acknowledge once it has been processed.
    pub next_lsn: Lsn,
    pub commit_ts: CommitTs,
    /// Who committed it: consumers filter on it (write-through propagates
    /// only `Application`; an `Evict` transaction's deletes are not deletes
    /// in PostgreSQL).
    pub origin: Origin,
    /// Wall-clock commit time, microseconds since the Unix epoch, taken
    /// under the commit lock: non-decreasing in commit order (a clock
    /// stepped back is clamped). 0 for transactions logged by a version
    /// before commit times.
    pub commit_time_us: u64,
    pub changes: Vec<Change>,
}

impl CommittedTxn {
    /// How long ago it committed (zero if the clock is behind the commit
    /// time): a consumer's lag behind the writer.
    pub fn age(&self) -> Duration {
        Duration::from_micros(crate::transaction::wall_clock_us().saturating_sub(self.commit_time_us))
    }
}

/// Opens `name`'s cursor. The stream keeps the database alive and uses its
/// WAL, committed catalog (schemas of the tables it meets) and consumers.
pub(crate) fn open(db: Arc<DbInner>, name: &str) -> Result<CommitStream> {
    let position = db.consumers.position(name)?;
    let reader = db.wal.read_from(position)?;
    let limit = db.stream_limits.lock().get(name).cloned();
    Ok(CommitStream {
        db,
        name: name.to_owned(),
        reader,
        assembler: TxnAssembler::default(),
        schemas: HashMap::new(),
        limit,
        held: None,
    })
}

/// How often a stream held at its limit looks again (the limit moves with
/// a standby's acknowledgements, which do not wake WAL waiters).
const LIMIT_POLL: Duration = Duration::from_millis(2);

/// A consumer's cursor over the commit stream.
pub struct CommitStream {
    db: Arc<DbInner>,
    name: String,
    reader: WalReader,
    assembler: TxnAssembler,
    schemas: HashMap<TableId, Arc<TableSchema>>,
    /// [`crate::Database::limit_stream`]: records at or past it wait.
    limit: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// A transaction read whole but past the limit: delivered first once
    /// the limit reaches its end.
    held: Option<CommittedTxn>,
}

impl CommitStream {
    /// The next committed transaction, waiting up to `timeout` for one.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<CommittedTxn>> {
        let deadline = Instant::now() + timeout;
        loop {
            // A transaction is delivered only if it ends at or before the
            // limit as loaded after it was read. So once a limit comes down
            // (a dropped standby rejoining, replication.rs), every later
            // delivery either passed a check against it or was read, and so
            // durable, before it came down: waiting for the standby to
            // acknowledge the durable end read after lowering it covers
            // everything this stream can still hand out.
            if let Some(txn) = self.held.take() {
                if self.within_limit(txn.next_lsn) {
                    return Ok(Some(txn));
                }
                self.held = Some(txn);
                if !Self::pause_until(deadline) {
                    return Ok(None);
                }
                continue;
            }
            // Reading stops at the limit: a record starting at or past it
            // belongs to a transaction it cannot cover.
            if !self.within_limit(Lsn(self.reader.position().0.saturating_add(1))) {
                if !Self::pause_until(deadline) {
                    return Ok(None);
                }
                continue;
            }
            match self.reader.next() {
                Some(Ok((lsn, payload))) => {
                    if let Some(txn) = self.accept(lsn, payload)? {
                        if self.within_limit(txn.next_lsn) {
                            return Ok(Some(txn));
                        }
                        self.held = Some(txn);
                    }
                }
                Some(Err(e)) => return Err(e.into()),
                None => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(None);
                    }
                    let at = self.reader.position();
                    self.db.wal.wait_for_durable_beyond(at, deadline - now);
                    if self.db.wal.durable_end() <= at && Instant::now() >= deadline {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Whether a transaction ending at `end` may be delivered now.
    fn within_limit(&self, end: Lsn) -> bool {
        self.limit.as_ref().is_none_or(|limit| end.0 <= limit.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Sleeps one limit poll, or false if `deadline` has passed.
    fn pause_until(deadline: Instant) -> bool {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(LIMIT_POLL.min(deadline - now));
        true
    }

    fn accept(&mut self, lsn: Lsn, payload: Vec<u8>) -> Result<Option<CommittedTxn>> {
        let Some(AssembledTxn { first_lsn, commit_ts, origin, commit_time_us, records }) =
            self.assembler.push(lsn, payload)?
        else {
            return Ok(None);
        };
        let mut changes = Vec::new();
        for rec in &records {
            let (_, ops) = decode_record(rec)?;
            for op in ops {
                changes.push(self.change(op)?);
            }
        }
        Ok(Some(CommittedTxn {
            lsn: first_lsn,
            next_lsn: self.reader.position(),
            commit_ts,
            origin,
            commit_time_us,
            changes,
        }))
    }

    fn schema(&mut self, id: TableId) -> Result<Arc<TableSchema>> {
        if let Some(s) = self.schemas.get(&id) {
            return Ok(Arc::clone(s));
        }
        let s = self
            .db
            .catalog
            .catalog()
            .table_ever(id)
            .cloned()
            .ok_or_else(|| EngineError::Corrupt(format!("commit stream: unknown table id {}", id.0)))?;
        self.schemas.insert(id, Arc::clone(&s));
        Ok(s)
    }

    fn change(&mut self, op: OpRef<'_>) -> Result<Change> {
        Ok(match op {
            OpRef::Row { op, table, row } => {
                let schema = self.schema(table)?;
                schema.layout().validate_image(row)?;
                Change::Row(RowChange { op, table: schema, image: row.to_vec() })
            }
            OpRef::CreateTable(TableDdl { table, indexes, foreign_keys }) => {
                self.schemas.insert(table.id, Arc::clone(&table));
                Change::CreateTable { table, indexes, foreign_keys }
            }
            OpRef::DropTable(id) => Change::DropTable(id),
            OpRef::CreateIndex(i) => Change::CreateIndex(Arc::new(i)),
            OpRef::DropIndex(i) => Change::DropIndex(i),
            OpRef::SetAnnotation { table, annotation } => Change::SetAnnotation { table, annotation },
        })
    }

    /// Records that everything before `next_lsn` (a [`CommittedTxn::next_lsn`])
    /// is processed; persisted before returning. Batch acknowledgements: each
    /// one is an fsync.
    pub fn ack(&mut self, next_lsn: Lsn) -> Result<()> {
        self.db.consumers.ack(&self.db.wal, &self.name, next_lsn)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where reading stands: every transaction before it has been returned.
    pub fn position(&self) -> Lsn {
        self.held.as_ref().map_or_else(|| self.reader.position(), |txn| txn.lsn)
    }

    /// Transactions and bytes of durable WAL not yet read by this cursor.
    pub fn lag_bytes(&self) -> u64 {
        self.db.wal.durable_end().0.saturating_sub(self.position().0)
    }
}
