//! The commit stream: committed transactions in commit order, read from the
//! WAL, for every consumer (AWT propagation, the columnar copy, a standby).
//!
//! Guarantees:
//! - Only durable transactions are delivered (the WAL reader stops at the
//!   durable end), each exactly once per read pass, whole, in commit order.
//! - A consumer is registered by name; its acknowledged position is kept in
//!   `consumers.dat` (written atomically), so WAL retention survives restarts:
//!   the WAL is never truncated past any registered consumer's position.
//! - After a restart a consumer resumes after its last acknowledged
//!   transaction; anything read but not acknowledged is delivered again, so
//!   consumers make their side effects idempotent or record the position in
//!   the same transaction as the effect (as AWT does in PostgreSQL).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pgtier_wal::{Lsn, Wal, WalReader};

use crate::api::RowRef;
use crate::codec::{Reader, Writer};
use crate::db::DbInner;
use crate::error::{EngineError, Result};
use crate::ids::CommitTs;
use crate::origin::Origin;
use crate::schema::{ForeignKey, IndexId, IndexSchema, TableDdl, TableId, TableSchema};
use crate::types::Value;
use crate::walrec::{AssembledTxn, OpRef, RowOp, TxnAssembler, decode_record};

/// Where a newly registered consumer starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamStart {
    /// With the next transaction to commit.
    Now,
    /// With the oldest transaction still in the WAL.
    Oldest,
    /// At a specific position (a `next_lsn` from an earlier read).
    At(Lsn),
}

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

/// A registered consumer ([`crate::Database::consumers`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerPosition {
    pub name: String,
    /// Where it resumes: after its last acknowledged transaction.
    pub position: Lsn,
}

/// The registered consumers and their acknowledged positions, persisted in
/// `consumers.dat`. The mutex is held across the file write (a leaf lock).
pub(crate) struct Consumers(Mutex<ConsumerRegistry>);

struct ConsumerRegistry {
    path: PathBuf,
    positions: BTreeMap<String, Lsn>,
}

impl Consumers {
    pub(crate) fn load(dir: &Path) -> Result<Consumers> {
        Ok(Consumers(Mutex::new(ConsumerRegistry::load(dir)?)))
    }

    /// Registers `name` (idempotent: a restarting consumer keeps its
    /// position); `Now` is the end of `wal`.
    pub(crate) fn register(&self, wal: &Wal, name: &str, start: StreamStart) -> Result<()> {
        let mut reg = self.0.lock();
        if reg.positions.contains_key(name) {
            return Ok(());
        }
        let position = match start {
            StreamStart::Now => wal.end(),
            StreamStart::Oldest => Lsn(0),
            StreamStart::At(lsn) => lsn,
        };
        reg.positions.insert(name.to_owned(), position);
        reg.save()
    }

    pub(crate) fn unregister(&self, name: &str) -> Result<()> {
        let mut reg = self.0.lock();
        if reg.positions.remove(name).is_none() {
            return Err(undefined_consumer(name));
        }
        reg.save()
    }

    /// Where `name` resumes: after its last acknowledged transaction.
    pub(crate) fn position(&self, name: &str) -> Result<Lsn> {
        self.0.lock().positions.get(name).copied().ok_or_else(|| undefined_consumer(name))
    }

    /// Persists `name`'s position `next_lsn`, which must not lie beyond
    /// the durable end of `wal`; an older position than the one kept is
    /// ignored.
    pub(crate) fn ack(&self, wal: &Wal, name: &str, next_lsn: Lsn) -> Result<()> {
        let mut reg = self.0.lock();
        let Some(pos) = reg.positions.get_mut(name) else {
            return Err(undefined_consumer(name));
        };
        if next_lsn <= *pos {
            return Ok(());
        }
        if next_lsn > wal.durable_end() {
            return Err(EngineError::ProgramLimitExceeded {
                message: format!("cannot acknowledge {next_lsn:?}: beyond the durable end of the WAL"),
            });
        }
        *pos = next_lsn;
        reg.save()
    }

    pub(crate) fn list(&self) -> Vec<ConsumerPosition> {
        self.0
            .lock()
            .positions
            .iter()
            .map(|(name, position)| ConsumerPosition { name: name.clone(), position: *position })
            .collect()
    }

    /// The oldest position any consumer still needs (WAL retention).
    pub(crate) fn min_position(&self) -> Option<Lsn> {
        self.0.lock().positions.values().min().copied()
    }
}

fn undefined_consumer(name: &str) -> EngineError {
    EngineError::UndefinedObject { what: "consumer", name: name.to_owned() }
}

impl ConsumerRegistry {
    fn load(dir: &Path) -> Result<ConsumerRegistry> {
        let path = dir.join("consumers.dat");
        let mut positions = BTreeMap::new();
        match fs::read(&path) {
            Ok(data) => {
                if data.len() < 4 {
                    return Err(EngineError::Corrupt("consumers.dat truncated".into()));
                }
                let (body, crc) = data.split_at(data.len() - 4);
                if crc32c::crc32c(body).to_le_bytes() != crc {
                    return Err(EngineError::Corrupt("consumers.dat checksum mismatch".into()));
                }
                let mut r = Reader::new(body);
                for _ in 0..r.u32()? {
                    let name = r.str()?;
                    positions.insert(name, Lsn(r.u64()?));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(EngineError::io("read consumers.dat", e)),
        }
        Ok(ConsumerRegistry { path, positions })
    }

    fn save(&self) -> Result<()> {
        let mut body = Vec::new();
        let mut w = Writer::new(&mut body);
        w.u32(self.positions.len() as u32);
        for (name, lsn) in &self.positions {
            w.str(name);
            w.u64(lsn.0);
        }
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        let tmp = self.path.with_extension("tmp");
        let io = |e| EngineError::io("write consumers.dat", e);
        let mut f = fs::File::create(&tmp).map_err(io)?;
        f.write_all(&body).map_err(io)?;
        f.sync_all().map_err(io)?;
        fs::rename(&tmp, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            crate::checkpoint::sync_dir(dir)?;
        }
        Ok(())
    }
}

/// Opens `name`'s cursor. The stream keeps the database alive and uses its
/// WAL, committed catalog (schemas of the tables it meets) and consumers.
pub(crate) fn open(db: Arc<DbInner>, name: &str) -> Result<CommitStream> {
    let position = db.consumers.position(name)?;
    let reader = db.wal.read_from(position)?;
    Ok(CommitStream { db, name: name.to_owned(), reader, assembler: TxnAssembler::default(), schemas: HashMap::new() })
}

/// A consumer's cursor over the commit stream.
pub struct CommitStream {
    db: Arc<DbInner>,
    name: String,
    reader: WalReader,
    assembler: TxnAssembler,
    schemas: HashMap<TableId, Arc<TableSchema>>,
}

impl CommitStream {
    /// The next committed transaction, waiting up to `timeout` for one.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<CommittedTxn>> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.reader.next() {
                Some(Ok((lsn, payload))) => {
                    if let Some(txn) = self.accept(lsn, payload)? {
                        return Ok(Some(txn));
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
        self.reader.position()
    }

    /// Transactions and bytes of durable WAL not yet read by this cursor.
    pub fn lag_bytes(&self) -> u64 {
        self.db.wal.durable_end().0.saturating_sub(self.reader.position().0)
    }
}
