//! The engine's WAL payloads. One committed transaction = one record
//! (`REC_TXN`), or, when larger than the WAL's record limit, a run of
//! `REC_TXN_PART` records closed by a `REC_TXN` with the same commit ts;
//! replay and the commit stream apply a run only once its closing record is
//! read, so a torn run is discarded whole. Aborted transactions write
//! nothing.
//!
//! ```text
//! record: [kind u8][commit_ts u64][chunk u32][op count u32][commit_time_us u64] op*
//!   kind: 0x10 | origin  closing (or only) record of a transaction
//!         0x20 | origin  earlier record of a run
//!         1, 2           the same before origins and commit times (no
//!                        commit_time_us field): read as origin Application,
//!                        commit time 0
//! op:     INSERT|UPDATE [table u32][row bytes]     (full after-image)
//!         DELETE        [table u32][row bytes]     (full before-image)
//!         CREATE_TABLE  [table, indexes, fks]      DROP_TABLE [table u32]
//!           (op 10: catalog format V1; op 14: V2, with sequences;
//!            op 15: V3, with the table annotation;
//!            op 17: V4, with dropped attribute numbers;
//!            op 19: V5, with index options;
//!            op 20: V6, with foreign key timing)
//!         CREATE_INDEX  [index]                    DROP_INDEX [index u32]
//!           (op 12: catalog format V4; op 18: V5, with index options)
//!         SET_ANNOTATION [table u32][present u8][text]   (op 16)
//! ```
//! The origin rides in the kind byte, so origin and commit time cost 8
//! bytes per record (records are 8-byte aligned in the log: 8 bytes framed
//! too). `commit_time_us` is wall-clock time taken under the commit lock,
//! never lower than the previous commit's. Every record of a run carries
//! the same header (one layout, written when a chunk starts; 8 bytes are
//! nothing in a part of up to `record_bytes_max`).
//! Row images are the engine's row format (row.rs) for the table's schema,
//! which never changes for a table id; replay is idempotent because every
//! op carries the full image keyed by primary key.

use crate::codec::{Reader, Writer};
use crate::error::{EngineError, Result};
use crate::ids::CommitTs;
use crate::origin::Origin;
use crate::schema::{
    Format, IndexId, IndexSchema, TableDdl, TableId, decode_annotation, decode_index_ddl, decode_table_ddl,
    encode_annotation, encode_index_ddl, encode_table_ddl,
};

/// Closing record; the kind byte's low nibble is the origin.
const REC_TXN: u8 = 0x10;
/// Earlier record of a run; low nibble: the origin.
const REC_TXN_PART: u8 = 0x20;
const KIND_MASK: u8 = 0xf0;
const ORIGIN_MASK: u8 = 0x0f;
/// Kinds of the format before origins and commit times (header without
/// `commit_time_us`), still read.
const REC_TXN_V1: u8 = 1;
const REC_TXN_PART_V1: u8 = 2;
const HEADER_BYTES: usize = 1 + 8 + 4 + 4 + 8;
const TS_OFFSET: usize = 1;
const COUNT_OFFSET: usize = 13;
const TIME_OFFSET: usize = 17;

const OP_INSERT: u8 = 1;
const OP_UPDATE: u8 = 2;
const OP_DELETE: u8 = 3;
const OP_CREATE_TABLE: u8 = 10;
const OP_DROP_TABLE: u8 = 11;
const OP_CREATE_INDEX: u8 = 12;
const OP_DROP_INDEX: u8 = 13;
/// CREATE_TABLE in catalog format V2 (sequences); 10 keeps meaning V1.
const OP_CREATE_TABLE_V2: u8 = 14;
/// CREATE_TABLE in catalog format V3 (annotations).
const OP_CREATE_TABLE_V3: u8 = 15;
const OP_SET_ANNOTATION: u8 = 16;
/// CREATE_TABLE in catalog format V4 (dropped attribute numbers).
const OP_CREATE_TABLE_V4: u8 = 17;
/// CREATE_INDEX in catalog format V5 (index options), written now; 12
/// keeps meaning V4.
const OP_CREATE_INDEX_V5: u8 = 18;
/// CREATE_TABLE in catalog format V5 (index options).
const OP_CREATE_TABLE_V5: u8 = 19;
/// CREATE_TABLE in catalog format V6 (foreign key timing), written now.
const OP_CREATE_TABLE_V6: u8 = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOp {
    Insert,
    Update,
    Delete,
}

/// Builds the records of one transaction, splitting at op boundaries so no
/// record exceeds `record_bytes_max`.
pub(crate) struct RecordBuilder {
    record_bytes_max: usize,
    pub(crate) chunks: Vec<Vec<u8>>,
    count: u32,
}

impl RecordBuilder {
    pub(crate) fn new(record_bytes_max: usize) -> RecordBuilder {
        assert!(record_bytes_max >= 4096);
        let mut b = RecordBuilder { record_bytes_max, chunks: Vec::new(), count: 0 };
        b.start_chunk();
        b
    }

    pub(crate) fn record_bytes_max(&self) -> usize {
        self.record_bytes_max
    }

    /// Empties the builder for another transaction, keeping its first buffer
    /// unless a large transaction grew it (a commit then allocates nothing).
    pub(crate) fn reset(&mut self) {
        const KEPT_BYTES_MAX: usize = 64 << 10;
        self.chunks.truncate(1);
        let kept = self.chunks.pop().filter(|b| b.capacity() <= KEPT_BYTES_MAX);
        self.start_chunk_in(kept.unwrap_or_default());
    }

    fn start_chunk(&mut self) {
        self.start_chunk_in(Vec::with_capacity(256));
    }

    fn start_chunk_in(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        buf.push(REC_TXN);
        buf.extend_from_slice(&0u64.to_le_bytes());
        buf.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.extend_from_slice(&0u64.to_le_bytes());
        debug_assert_eq!(buf.len(), HEADER_BYTES);
        self.chunks.push(buf);
        self.count = 0;
    }

    fn room_for(&mut self, bytes: usize) -> Result<()> {
        if HEADER_BYTES + bytes > self.record_bytes_max {
            return Err(EngineError::ProgramLimitExceeded {
                message: format!(
                    "a single change of {bytes} bytes exceeds the WAL record limit of {} bytes",
                    self.record_bytes_max
                ),
            });
        }
        let current = self.chunks.last().map_or(0, Vec::len);
        if current + bytes > self.record_bytes_max && self.count > 0 {
            self.finish_chunk();
            self.start_chunk();
        }
        Ok(())
    }

    fn finish_chunk(&mut self) {
        let count = self.count;
        if let Some(c) = self.chunks.last_mut() {
            c[COUNT_OFFSET..COUNT_OFFSET + 4].copy_from_slice(&count.to_le_bytes());
        }
    }

    fn buf(&mut self) -> Writer<'_> {
        self.count += 1;
        let Some(buf) = self.chunks.last_mut() else { unreachable!("a chunk always exists") };
        Writer::new(buf)
    }

    pub(crate) fn row(&mut self, op: RowOp, table: TableId, row: &[u8]) -> Result<()> {
        self.room_for(1 + 4 + 4 + row.len())?;
        let mut w = self.buf();
        w.u8(match op {
            RowOp::Insert => OP_INSERT,
            RowOp::Update => OP_UPDATE,
            RowOp::Delete => OP_DELETE,
        });
        w.u32(table.0);
        w.bytes(row);
        Ok(())
    }

    pub(crate) fn create_table(&mut self, ddl: &TableDdl) -> Result<()> {
        let mut tmp = Vec::new();
        encode_table_ddl(&mut Writer::new(&mut tmp), ddl);
        self.room_for(1 + tmp.len())?;
        let mut w = self.buf();
        w.u8(OP_CREATE_TABLE_V6);
        w.buf.extend_from_slice(&tmp);
        Ok(())
    }

    pub(crate) fn set_annotation(&mut self, t: TableId, annotation: Option<&str>) -> Result<()> {
        let mut tmp = Vec::new();
        encode_annotation(&mut Writer::new(&mut tmp), annotation);
        self.room_for(5 + tmp.len())?;
        let mut w = self.buf();
        w.u8(OP_SET_ANNOTATION);
        w.u32(t.0);
        w.buf.extend_from_slice(&tmp);
        Ok(())
    }

    pub(crate) fn drop_table(&mut self, t: TableId) -> Result<()> {
        self.room_for(5)?;
        let mut w = self.buf();
        w.u8(OP_DROP_TABLE);
        w.u32(t.0);
        Ok(())
    }

    pub(crate) fn create_index(&mut self, i: &IndexSchema) -> Result<()> {
        let mut tmp = Vec::new();
        encode_index_ddl(&mut Writer::new(&mut tmp), i);
        self.room_for(1 + tmp.len())?;
        let mut w = self.buf();
        w.u8(OP_CREATE_INDEX_V5);
        w.buf.extend_from_slice(&tmp);
        Ok(())
    }

    pub(crate) fn drop_index(&mut self, i: IndexId) -> Result<()> {
        self.room_for(5)?;
        let mut w = self.buf();
        w.u8(OP_DROP_INDEX);
        w.u32(i.0);
        Ok(())
    }

    /// Closes the last chunk and marks every chunk with `origin` and its
    /// place in the run; the records are ready for [`RecordBuilder::seal`].
    pub(crate) fn finish(&mut self, origin: Origin) {
        self.finish_chunk();
        let last = self.chunks.len() - 1;
        for (i, c) in self.chunks.iter_mut().enumerate() {
            let kind = if i == last { REC_TXN } else { REC_TXN_PART };
            c[0] = kind | origin as u8;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.len() == 1 && self.count == 0
    }

    /// Writes the commit ts and commit time into every chunk (under the
    /// commit lock).
    pub(crate) fn seal(&mut self, commit_ts: CommitTs, commit_time_us: u64) {
        for c in &mut self.chunks {
            c[TS_OFFSET..TS_OFFSET + 8].copy_from_slice(&commit_ts.get().to_le_bytes());
            c[TIME_OFFSET..TIME_OFFSET + 8].copy_from_slice(&commit_time_us.to_le_bytes());
        }
    }
}

/// A decoded op; row images borrow from the record.
pub(crate) enum OpRef<'a> {
    Row { op: RowOp, table: TableId, row: &'a [u8] },
    CreateTable(TableDdl),
    DropTable(TableId),
    CreateIndex(IndexSchema),
    DropIndex(IndexId),
    SetAnnotation { table: TableId, annotation: Option<String> },
}

pub(crate) struct RecordHeader {
    /// The closing (or only) record of its transaction.
    pub(crate) last: bool,
    pub(crate) origin: Origin,
    pub(crate) commit_ts: u64,
    pub(crate) chunk: u32,
    pub(crate) ops: u32,
    /// Microseconds since the Unix epoch; 0 in records of the old format.
    pub(crate) commit_time_us: u64,
}

pub(crate) fn decode_header(r: &mut Reader<'_>) -> Result<RecordHeader> {
    let kind = r.u8()?;
    let (commit_ts, chunk, ops) = (r.u64()?, r.u32()?, r.u32()?);
    let (last, origin, commit_time_us) = match kind {
        REC_TXN_V1 => (true, Origin::Application, 0),
        REC_TXN_PART_V1 => (false, Origin::Application, 0),
        _ => {
            let last = match kind & KIND_MASK {
                REC_TXN => true,
                REC_TXN_PART => false,
                _ => return Err(EngineError::Corrupt(format!("unknown WAL record kind {kind}"))),
            };
            (last, Origin::from_u8(kind & ORIGIN_MASK)?, r.u64()?)
        }
    };
    Ok(RecordHeader { last, origin, commit_ts, chunk, ops, commit_time_us })
}

pub(crate) fn decode_op<'a>(r: &mut Reader<'a>) -> Result<OpRef<'a>> {
    let tag = r.u8()?;
    Ok(match tag {
        OP_INSERT | OP_UPDATE | OP_DELETE => {
            let op = match tag {
                OP_INSERT => RowOp::Insert,
                OP_UPDATE => RowOp::Update,
                _ => RowOp::Delete,
            };
            OpRef::Row { op, table: TableId(r.u32()?), row: r.bytes()? }
        }
        OP_CREATE_TABLE => OpRef::CreateTable(decode_table_ddl(r, Format::V1)?),
        OP_CREATE_TABLE_V2 => OpRef::CreateTable(decode_table_ddl(r, Format::V2)?),
        OP_CREATE_TABLE_V3 => OpRef::CreateTable(decode_table_ddl(r, Format::V3)?),
        OP_CREATE_TABLE_V4 => OpRef::CreateTable(decode_table_ddl(r, Format::V4)?),
        OP_CREATE_TABLE_V5 => OpRef::CreateTable(decode_table_ddl(r, Format::V5)?),
        OP_CREATE_TABLE_V6 => OpRef::CreateTable(decode_table_ddl(r, Format::V6)?),
        OP_SET_ANNOTATION => OpRef::SetAnnotation { table: TableId(r.u32()?), annotation: decode_annotation(r)? },
        OP_DROP_TABLE => OpRef::DropTable(TableId(r.u32()?)),
        OP_CREATE_INDEX => OpRef::CreateIndex(decode_index_ddl(r, Format::V4)?),
        OP_CREATE_INDEX_V5 => OpRef::CreateIndex(decode_index_ddl(r, Format::V5)?),
        OP_DROP_INDEX => OpRef::DropIndex(IndexId(r.u32()?)),
        other => return Err(EngineError::Corrupt(format!("unknown WAL op {other}"))),
    })
}

/// Decodes a whole record: header plus ops, checking the op count.
pub(crate) fn decode_record(payload: &[u8]) -> Result<(RecordHeader, Vec<OpRef<'_>>)> {
    let mut r = Reader::new(payload);
    let header = decode_header(&mut r)?;
    let mut ops = Vec::with_capacity(header.ops.min(1 << 16) as usize);
    for _ in 0..header.ops {
        ops.push(decode_op(&mut r)?);
    }
    if !r.is_empty() {
        return Err(EngineError::Corrupt(format!("{} trailing bytes in WAL record", payload.len() - r.position())));
    }
    Ok((header, ops))
}

/// A whole transaction as read back from the WAL.
pub(crate) struct AssembledTxn {
    /// LSN of its first record.
    pub(crate) first_lsn: pgtier_wal::Lsn,
    pub(crate) commit_ts: CommitTs,
    pub(crate) origin: Origin,
    pub(crate) commit_time_us: u64,
    pub(crate) records: Vec<Vec<u8>>,
}

/// Reassembles transactions that span several records. A run is returned
/// only when its closing record arrives; a run cut by a crash (chunks with
/// no closing record, followed by another transaction) is dropped.
#[derive(Default)]
pub(crate) struct TxnAssembler {
    parts: Vec<(pgtier_wal::Lsn, Vec<u8>)>,
    parts_ts: u64,
    parts_origin: Origin,
}

impl TxnAssembler {
    /// Returns a transaction once its last record has arrived.
    pub(crate) fn push(&mut self, lsn: pgtier_wal::Lsn, payload: Vec<u8>) -> Result<Option<AssembledTxn>> {
        let header = decode_header(&mut Reader::new(&payload))?;
        if header.chunk == 0 {
            self.parts.clear();
        } else if header.chunk as usize != self.parts.len()
            || header.commit_ts != self.parts_ts
            || header.origin != self.parts_origin
        {
            self.parts.clear();
            return Ok(None); // continuation of a run we did not see start: torn
        }
        self.parts_ts = header.commit_ts;
        self.parts_origin = header.origin;
        if !header.last {
            self.parts.push((lsn, payload));
            return Ok(None);
        }
        let first_lsn = self.parts.first().map_or(lsn, |p| p.0);
        let mut records: Vec<Vec<u8>> = self.parts.drain(..).map(|p| p.1).collect();
        records.push(payload);
        Ok(Some(AssembledTxn {
            first_lsn,
            commit_ts: CommitTs::new(header.commit_ts),
            origin: header.origin,
            commit_time_us: header.commit_time_us,
            records,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_split_and_decode() {
        let mut b = RecordBuilder::new(4096);
        for i in 0..100u32 {
            b.row(RowOp::Insert, TableId(i % 3), &[7u8; 100]).unwrap();
        }
        b.drop_table(TableId(9)).unwrap();
        b.finish(Origin::Evict);
        b.seal(CommitTs::new(42), 1_700_000_000_000_000);
        assert!(b.chunks.len() > 2);
        let mut total = 0;
        for (n, c) in b.chunks.iter().enumerate() {
            assert!(c.len() <= 4096);
            let (h, ops) = decode_record(c).unwrap();
            assert_eq!((h.commit_ts, h.origin, h.commit_time_us), (42, Origin::Evict, 1_700_000_000_000_000));
            assert_eq!(h.chunk as usize, n);
            assert_eq!(h.last, n + 1 == b.chunks.len());
            total += ops.len();
        }
        assert_eq!(total, 101);
        assert!(b.row(RowOp::Insert, TableId(0), &[0u8; 5000]).is_err());
    }

    #[test]
    fn the_assembler_hands_over_a_run_with_its_origin_and_time() {
        let mut b = RecordBuilder::new(4096);
        for _ in 0..100 {
            b.row(RowOp::Delete, TableId(1), &[3u8; 100]).unwrap();
        }
        b.finish(Origin::Load);
        b.seal(CommitTs::new(9), 123);
        let mut a = TxnAssembler::default();
        let n = b.chunks.len();
        for (i, c) in b.chunks.iter().enumerate() {
            let got = a.push(pgtier_wal::Lsn(i as u64 * 8192), c.clone()).unwrap();
            if i + 1 < n {
                assert!(got.is_none());
                continue;
            }
            let t = got.unwrap();
            assert_eq!(
                (t.commit_ts, t.origin, t.commit_time_us, t.records.len()),
                (CommitTs::new(9), Origin::Load, 123, n)
            );
            assert_eq!(t.first_lsn, pgtier_wal::Lsn(0));
        }
    }

    /// A record of the format before origins: 17-byte header, kind 1.
    #[test]
    fn old_records_read_as_application_at_time_zero() {
        let mut rec = vec![REC_TXN_V1];
        rec.extend_from_slice(&5u64.to_le_bytes());
        rec.extend_from_slice(&0u32.to_le_bytes());
        rec.extend_from_slice(&1u32.to_le_bytes());
        rec.push(OP_DROP_TABLE);
        rec.extend_from_slice(&7u32.to_le_bytes());
        let (h, ops) = decode_record(&rec).unwrap();
        assert!(h.last);
        assert_eq!((h.commit_ts, h.origin, h.commit_time_us, ops.len()), (5, Origin::Application, 0, 1));
        assert!(matches!(ops[0], OpRef::DropTable(TableId(7))));
        let t = TxnAssembler::default().push(pgtier_wal::Lsn(0), rec).unwrap().unwrap();
        assert_eq!((t.origin, t.commit_time_us), (Origin::Application, 0));
        // Unknown kinds and origins are corruption, not guesses.
        let mut bad = vec![0x30];
        bad.extend_from_slice(&[0u8; 24]);
        assert!(decode_header(&mut Reader::new(&bad)).is_err());
        bad[0] = REC_TXN | 5;
        assert!(decode_header(&mut Reader::new(&bad)).is_err());
    }

    /// Origin and commit time add 8 bytes to every record, framed too.
    #[test]
    fn header_overhead_is_eight_bytes() {
        let mut b = RecordBuilder::new(4096);
        b.row(RowOp::Update, TableId(1), &[5u8; 100]).unwrap();
        b.finish(Origin::Application);
        assert_eq!(b.chunks[0].len(), 17 + 8 + 1 + 4 + 4 + 100);
    }

    #[test]
    fn a_reset_builder_writes_what_a_new_one_does() {
        let build = |b: &mut RecordBuilder| {
            b.row(RowOp::Update, TableId(1), &[5u8; 40]).unwrap();
            b.finish(Origin::Refresh);
            b.seal(CommitTs::new(7), 99);
        };
        let mut fresh = RecordBuilder::new(4096);
        build(&mut fresh);
        // A reused builder whose last transaction took several records.
        let mut reused = RecordBuilder::new(4096);
        for _ in 0..100 {
            reused.row(RowOp::Insert, TableId(0), &[1u8; 100]).unwrap();
        }
        reused.finish(Origin::Load);
        reused.seal(CommitTs::new(6), 98);
        assert!(reused.chunks.len() > 2);
        reused.reset();
        assert!(reused.is_empty());
        build(&mut reused);
        assert_eq!(reused.chunks, fresh.chunks);
    }
}
