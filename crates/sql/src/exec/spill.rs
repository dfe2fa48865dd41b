//! The sort-based fallback of a hash join whose table does not fit in
//! pgtier.statement_mem: the level's rows, each under its encoded hash key
//! (hash_join.rs `push_key`), sorted by key in a temporary file, with a
//! sparse in-memory index (the first key of every block). A probe finds
//! its block by binary search and reads the rows of its key from there.
//!
//! Memory stays bounded: the rows are sorted in batches of at most the
//! budget, each written as a run, and the runs merged into one sorted
//! file, at most 16 at a time (a fixed amount of read buffers however
//! many runs a small budget makes); only the index (one key per [`BLOCK_BYTES`]) stays in memory, and
//! is charged to the statement. The file is unlinked from its creation
//! (`tempfile::tempfile`), so neither a finished statement nor a crash
//! leaves anything behind, and reads of recent blocks come from the page
//! cache.
//!
//! Record format, in key order: key length (u32), key, row length (u32),
//! row in the engine's self-describing value encoding
//! (`pgtier_engine::encode_values`).

use std::cmp::Ordering;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use pgtier_engine::Value;

use crate::error::{Result, SqlError};

/// Bytes between two entries of the sparse index.
const BLOCK_BYTES: u64 = 8 * 1024;

/// How many bytes a positional reader fetches at once.
const READ_CHUNK: usize = 16 * 1024;

fn io_error(e: &std::io::Error) -> SqlError {
    SqlError::new("58030", format!("could not use a temporary file for a join: {e}"))
}

/// Rows being collected, sorted batch by batch into runs.
pub(super) struct SpillBuilder {
    file: BufWriter<File>,
    /// (offset, length) of each sorted run in `file`.
    runs: Vec<(u64, u64)>,
    written: u64,
    batch: Vec<(Vec<u8>, Vec<u8>)>,
    batch_bytes: usize,
    budget: usize,
}

impl SpillBuilder {
    /// A builder that sorts batches of about `budget` bytes.
    pub(super) fn new(budget: usize) -> Result<SpillBuilder> {
        let file = tempfile::tempfile().map_err(|e| io_error(&e))?;
        Ok(SpillBuilder {
            file: BufWriter::new(file),
            runs: Vec::new(),
            written: 0,
            batch: Vec::new(),
            batch_bytes: 0,
            budget: budget.max(BLOCK_BYTES as usize),
        })
    }

    /// Adds the row `values` under `key`.
    pub(super) fn push(&mut self, key: Vec<u8>, values: &[Value]) -> Result<()> {
        let mut row = Vec::new();
        pgtier_engine::encode_values(values, &mut row);
        self.batch_bytes += key.len() + row.len() + 2 * std::mem::size_of::<Vec<u8>>();
        self.batch.push((key, row));
        if self.batch_bytes >= self.budget {
            self.write_run()?;
        }
        Ok(())
    }

    fn write_run(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        // Stable: rows of one key keep their scan order.
        self.batch.sort_by(|a, b| a.0.cmp(&b.0));
        let start = self.written;
        for (key, row) in self.batch.drain(..) {
            self.written += write_record(&mut self.file, &key, &row)?;
        }
        self.runs.push((start, self.written - start));
        self.batch_bytes = 0;
        Ok(())
    }

    /// The sorted file: the runs merged, with its index. `width` is the
    /// number of values of each row; `tick` is called per record merged
    /// (`Interrupt::tick`: a cancel or statement_timeout ends the merge).
    pub(super) fn finish(mut self, width: usize, tick: &mut dyn FnMut() -> Result<()>) -> Result<SortedSpill> {
        self.write_run()?;
        let mut file = self.file.into_inner().map_err(|e| io_error(e.error()))?;
        let mut runs = self.runs;
        // Merge passes of at most MERGE_FAN_IN runs each, so the readers'
        // buffers stay a fixed amount however many runs a small budget made.
        while runs.len() > MERGE_FAN_IN {
            let mut out = BufWriter::new(tempfile::tempfile().map_err(|e| io_error(&e))?);
            let mut merged = Vec::with_capacity(runs.len().div_ceil(MERGE_FAN_IN));
            let mut written = 0;
            for group in runs.chunks(MERGE_FAN_IN) {
                let start = written;
                merge_runs(&file, group, |key, row| {
                    tick()?;
                    written += write_record(&mut out, key, row)?;
                    Ok(())
                })?;
                merged.push((start, written - start));
            }
            file = out.into_inner().map_err(|e| io_error(e.error()))?;
            runs = merged;
        }
        let mut out = BufWriter::new(tempfile::tempfile().map_err(|e| io_error(&e))?);
        let mut index: Vec<(Vec<u8>, u64)> = Vec::new();
        let mut written = 0u64;
        let mut next_block = 0u64;
        merge_runs(&file, &runs, |key, row| {
            tick()?;
            if written >= next_block {
                index.push((key.to_vec(), written));
                next_block = written + BLOCK_BYTES;
            }
            written += write_record(&mut out, key, row)?;
            Ok(())
        })?;
        let mut file = out.into_inner().map_err(|e| io_error(e.error()))?;
        file.seek(SeekFrom::Start(0)).map_err(|e| io_error(&e))?;
        Ok(SortedSpill { file, index, len: written, width })
    }
}

/// Runs merged in one pass.
const MERGE_FAN_IN: usize = 16;

/// Hands the records of `runs` (offset, length in `file`) to `emit` in key
/// order: a k-way merge by linear choice over at most [`MERGE_FAN_IN`]
/// runs; ties go to the earlier run, so rows of one key keep their scan
/// order.
fn merge_runs(file: &File, runs: &[(u64, u64)], mut emit: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
    let mut readers: Vec<RecordReader<'_>> =
        runs.iter().map(|&(at, len)| RecordReader::new(file, at, at + len)).collect();
    let mut heads: Vec<Option<(Vec<u8>, Vec<u8>)>> =
        readers.iter_mut().map(RecordReader::next).collect::<Result<_>>()?;
    while let Some(k) = heads
        .iter()
        .enumerate()
        .filter_map(|(k, h)| h.as_ref().map(|h| (k, &h.0)))
        .min_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(&b.0)))
        .map(|(k, _)| k)
    {
        let Some((key, row)) = heads[k].take() else { break };
        emit(&key, &row)?;
        heads[k] = readers[k].next()?;
    }
    Ok(())
}

fn write_record(out: &mut impl Write, key: &[u8], row: &[u8]) -> Result<u64> {
    let len = |n: usize| u32::try_from(n).map_err(|_| SqlError::new("54000", "a row of a join is too large to spill"));
    out.write_all(&len(key.len())?.to_le_bytes()).map_err(|e| io_error(&e))?;
    out.write_all(key).map_err(|e| io_error(&e))?;
    out.write_all(&len(row.len())?.to_le_bytes()).map_err(|e| io_error(&e))?;
    out.write_all(row).map_err(|e| io_error(&e))?;
    Ok(8 + key.len() as u64 + row.len() as u64)
}

/// Reads records from `file` between two offsets, a chunk at a time.
struct RecordReader<'f> {
    file: &'f File,
    at: u64,
    end: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl<'f> RecordReader<'f> {
    fn new(file: &'f File, at: u64, end: u64) -> RecordReader<'f> {
        RecordReader { file, at, end, buf: Vec::new(), pos: 0 }
    }

    /// Makes `n` bytes available at `pos`; false at the end of the range.
    fn fill(&mut self, n: usize) -> Result<bool> {
        if self.buf.len() - self.pos >= n {
            return Ok(true);
        }
        self.buf.drain(..self.pos);
        self.pos = 0;
        while self.buf.len() < n && self.at < self.end {
            let want =
                usize::try_from(self.end - self.at).unwrap_or(usize::MAX).min(READ_CHUNK.max(n - self.buf.len()));
            let old = self.buf.len();
            self.buf.resize(old + want, 0);
            let got = self.file.read_at(&mut self.buf[old..], self.at).map_err(|e| io_error(&e))?;
            self.buf.truncate(old + got);
            if got == 0 {
                return Err(SqlError::new("XX001", "a join's temporary file ended early"));
            }
            self.at += got as u64;
        }
        Ok(self.buf.len() >= n)
    }

    fn u32(&mut self) -> Result<Option<usize>> {
        if !self.fill(4)? {
            return Ok(None);
        }
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.buf[self.pos..self.pos + 4]);
        self.pos += 4;
        Ok(Some(u32::from_le_bytes(b) as usize))
    }

    fn take(&mut self, n: usize) -> Result<Vec<u8>> {
        if !self.fill(n)? {
            return Err(SqlError::new("XX001", "a join's temporary file holds a truncated record"));
        }
        let out = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        Ok(out)
    }

    fn next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(key_len) = self.u32()? else { return Ok(None) };
        let key = self.take(key_len)?;
        let row_len =
            self.u32()?.ok_or_else(|| SqlError::new("XX001", "a join's temporary file holds a truncated record"))?;
        Ok(Some((key, self.take(row_len)?)))
    }
}

/// A level's rows sorted by key on disk (see the module comment).
pub(super) struct SortedSpill {
    file: File,
    /// The first key of each block and the block's offset.
    index: Vec<(Vec<u8>, u64)>,
    len: u64,
    width: usize,
}

impl SortedSpill {
    /// Bytes the index holds in memory (charged to the statement).
    pub(super) fn index_bytes(&self) -> usize {
        self.index.iter().map(|(k, _)| k.len() + std::mem::size_of::<(Vec<u8>, u64)>()).sum()
    }

    /// Appends the rows stored under `key` to `out`: one read of the
    /// block the index points to (more only when the key's rows run on),
    /// the records compared in place, only the matching rows decoded.
    pub(super) fn candidates(&self, key: &[u8], out: &mut Vec<Value>) -> Result<()> {
        // The last block starting below the key may hold its first rows.
        let mut block = self.index.partition_point(|(first, _)| first.as_slice() < key).saturating_sub(1);
        let mut buf = Vec::new();
        while let Some(&(_, at)) = self.index.get(block) {
            let end = self.index.get(block + 1).map_or(self.len, |&(_, next)| next);
            buf.resize(
                usize::try_from(end - at)
                    .map_err(|_| SqlError::new("XX001", "a join's temporary file block is too large"))?,
                0,
            );
            self.file.read_exact_at(&mut buf, at).map_err(|e| io_error(&e))?;
            let mut pos = 0;
            while pos < buf.len() {
                let (k, row, next) = record_at(&buf, pos)?;
                pos = next;
                match k.cmp(key) {
                    Ordering::Less => {}
                    Ordering::Equal => {
                        let before = out.len();
                        pgtier_engine::decode_values(row, out)
                            .map_err(|e| SqlError::new("XX001", format!("a join's temporary file: {e}")))?;
                        if out.len() - before != self.width {
                            return Err(SqlError::new("XX001", "a join's temporary file holds a row of another width"));
                        }
                    }
                    Ordering::Greater => return Ok(()),
                }
            }
            block += 1;
        }
        Ok(())
    }
}

/// The record at `pos` of a block: its key, its row and where the next
/// one starts.
fn record_at(buf: &[u8], pos: usize) -> Result<(&[u8], &[u8], usize)> {
    let truncated = || SqlError::new("XX001", "a join's temporary file holds a truncated record");
    let len_at = |at: usize| -> Result<usize> {
        let b: [u8; 4] = buf.get(at..at + 4).and_then(|s| s.try_into().ok()).ok_or_else(truncated)?;
        Ok(u32::from_le_bytes(b) as usize)
    };
    let key_len = len_at(pos)?;
    let key = buf.get(pos + 4..pos + 4 + key_len).ok_or_else(truncated)?;
    let row_at = pos + 4 + key_len;
    let row_len = len_at(row_at)?;
    let row = buf.get(row_at + 4..row_at + 4 + row_len).ok_or_else(truncated)?;
    Ok((key, row, row_at + 4 + row_len))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Many runs (a budget far below the data), duplicate keys, keys of
    /// several lengths: every probe finds exactly the rows of its key, in
    /// their insertion order, and absent keys find none.
    #[test]
    fn sorted_spill_finds_every_key_across_runs() {
        let mut builder = SpillBuilder::new(0).unwrap();
        let mut expected: BTreeMap<Vec<u8>, Vec<Value>> = BTreeMap::new();
        for i in 0..20_000u32 {
            let k = (i * 7919) % 5_003;
            let key = if k % 3 == 0 { k.to_le_bytes().to_vec() } else { format!("key-{k}").into_bytes() };
            let row = [Value::Int4(i.cast_signed()), Value::Text("x".repeat((i % 50) as usize))];
            builder.push(key.clone(), &row).unwrap();
            expected.entry(key).or_default().extend(row);
        }
        assert!(
            builder.runs.len() > 2 * MERGE_FAN_IN,
            "the test must take several merge passes, got {} runs",
            builder.runs.len()
        );
        let spill = builder.finish(2, &mut || Ok(())).unwrap();
        assert!(spill.index.len() > 10);
        for (key, rows) in &expected {
            let mut got = Vec::new();
            spill.candidates(key, &mut got).unwrap();
            assert_eq!(&got, rows, "key {key:?}");
        }
        for absent in [b"".to_vec(), b"key-".to_vec(), b"zzz".to_vec(), 5_003u32.to_le_bytes().to_vec()] {
            let mut got = Vec::new();
            spill.candidates(&absent, &mut got).unwrap();
            assert!(got.is_empty(), "{absent:?}");
        }
    }

    /// The merge asks `tick` once per record: the error it returns (a
    /// cancel, statement_timeout) ends the merge with that error.
    #[test]
    fn merge_stops_when_tick_fails() {
        let mut builder = SpillBuilder::new(0).unwrap();
        for i in 0..5_000u32 {
            builder.push(i.to_le_bytes().to_vec(), &[Value::Int4(i.cast_signed())]).unwrap();
        }
        let mut ticks = 0;
        let stopped = builder.finish(1, &mut || {
            ticks += 1;
            if ticks > 100 { Err(SqlError::new("57014", "canceling statement due to user request")) } else { Ok(()) }
        });
        assert_eq!(stopped.err().map(|e| e.sqlstate), Some("57014"));
        assert_eq!(ticks, 101);
    }
}
