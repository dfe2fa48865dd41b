//! Fuzzy checkpoints.
//!
//! 1. Under the commit lock: `start_lsn = wal.end()` and the committed
//!    catalog. Every transaction with an LSN below `start_lsn` has stamped
//!    its versions (stamping happens under the same lock).
//! 2. Without stopping writers: write the newest committed image of every
//!    row, table by table. Images from transactions after `start_lsn` may be
//!    mixed in (fuzzy); replay from `start_lsn` re-applies those
//!    transactions' full after-images, which is idempotent.
//! 3. Wait until the WAL is durable up to the last record appended by the
//!    end of the scan, so every transaction whose effects the file holds can
//!    be replayed whole (otherwise a half-captured, never-durable
//!    transaction could surface after a crash).
//! 4. Write `checkpoint.tmp`, fsync, rename to `checkpoint-<lsn>.ckpt`,
//!    fsync the directory. Keep the newest two files; truncate the WAL below
//!    the older one's start and every consumer's acknowledged position.
//!
//! File: header (magic, start LSN, max commit ts, catalog; CRC), blocks of
//! rows per table (CRC each), end block (row total; CRC). A file that fails
//! any check is ignored by recovery, which falls back to the previous one.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use pgtier_wal::{Lsn, Wal};

use crate::catalog::CommittedCatalog;
use crate::codec::{Reader, Writer};
use crate::commit_order::CommitOrder;
use crate::consumers::Consumers;
use crate::error::{EngineError, Result};
use crate::files::sync_dir;
use crate::primary::SHARD_COUNT;
use crate::schema::{Catalog, Format, TableId};

/// Written now: the catalog in format V6 (foreign key timing).
pub(crate) const MAGIC: &[u8; 8] = b"PGTCKPT6";
/// Still read: files from before foreign key timing (catalog format V5).
const MAGIC_V5: &[u8; 8] = b"PGTCKPT5";
/// Still read: files from before index options (catalog format V4).
const MAGIC_V4: &[u8; 8] = b"PGTCKPT4";
/// Still read: files from before ALTER TABLE (catalog format V3).
const MAGIC_V3: &[u8; 8] = b"PGTCKPT3";
/// Still read: files from before annotations (catalog format V2).
const MAGIC_V2: &[u8; 8] = b"PGTCKPT2";
/// Still read: files from before sequences (catalog format V1).
const MAGIC_V1: &[u8; 8] = b"PGTCKPT1";
const BLOCK_ROWS: u8 = 1;
const BLOCK_END: u8 = 2;
const BLOCK_BYTES_TARGET: usize = 1 << 20;
/// Checkpoint files kept (the WAL is kept from the oldest one's start).
const CHECKPOINTS_KEPT: usize = 2;

/// Result of a checkpoint.
#[derive(Clone, Debug)]
pub struct CheckpointInfo {
    /// Replay starts here; WAL before it is not needed by this checkpoint.
    pub start_lsn: Lsn,
    pub rows: u64,
    pub bytes: u64,
    pub duration: Duration,
    pub completed_at: SystemTime,
    pub path: PathBuf,
}

/// The checkpoint files kept, and the serialization of checkpoints.
pub(crate) struct Checkpoints {
    /// Retained checkpoint files, oldest first.
    retained: Mutex<Vec<CheckpointInfo>>,
    /// One checkpoint at a time.
    serial: Mutex<()>,
    /// Checkpoints written since open.
    taken: AtomicU64,
    /// WAL positions a running backup still copies from (backup.rs): the
    /// WAL is not truncated past the oldest. In memory only: a crash ends
    /// the backup, and a pin must not outlive it.
    pins: Mutex<Vec<(u64, Lsn)>>,
    next_pin: AtomicU64,
}

/// Keeps the WAL from a position on until dropped ([`Checkpoints::take_pinned`]).
pub(crate) struct WalPin<'a> {
    checkpoints: &'a Checkpoints,
    id: u64,
}

impl Drop for WalPin<'_> {
    fn drop(&mut self) {
        self.checkpoints.pins.lock().retain(|(id, _)| *id != self.id);
    }
}

impl Checkpoints {
    /// `retained`: the files recovery found, oldest first.
    pub(crate) fn new(retained: Vec<CheckpointInfo>) -> Checkpoints {
        Checkpoints {
            retained: Mutex::new(retained),
            serial: Mutex::new(()),
            taken: AtomicU64::new(0),
            pins: Mutex::new(Vec::new()),
            next_pin: AtomicU64::new(1),
        }
    }

    pub(crate) fn last(&self) -> Option<CheckpointInfo> {
        self.retained.lock().last().cloned()
    }

    pub(crate) fn count(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }

    /// True when `wal_bytes` of WAL were written since the last checkpoint,
    /// or `interval` has passed and anything was written.
    pub(crate) fn due(&self, wal: &Wal, interval: Option<Duration>, wal_bytes: u64) -> bool {
        let last = self.retained.lock().last().map(|c| (c.start_lsn, c.completed_at));
        let wal_end = wal.end().0;
        match last {
            None => wal_end > wal_bytes.min(64 << 20),
            Some((start, at)) => {
                let by_volume = wal_end.saturating_sub(start.0) > wal_bytes;
                let by_time =
                    interval.is_some_and(|i| at.elapsed().unwrap_or_default() >= i && wal_end > start.0 + 4096);
                by_volume || by_time
            }
        }
    }

    /// Writes a checkpoint of the committed catalog's tables into `dir`,
    /// then truncates `wal` below what the retained checkpoints and the
    /// commit-stream `consumers` still need. `commit` is held only for a
    /// moment, to take a start LSN no commit is halfway past.
    pub(crate) fn take(
        &self,
        dir: &Path,
        wal: &Wal,
        commit: &CommitOrder,
        catalog: &CommittedCatalog,
        consumers: &Consumers,
    ) -> Result<CheckpointInfo> {
        let _serial = self.serial.lock();
        let info = write(dir, wal, commit, catalog, false)?;
        self.retire_old(info.clone(), wal, consumers)?;
        self.taken.fetch_add(1, Ordering::Relaxed);
        Ok(info)
    }

    /// [`Checkpoints::take`] for a backup: also opens the new file (the
    /// handle reads it even after a later checkpoint deletes it) and pins
    /// the WAL from its start, or from the position of any consumer in
    /// `keep_for` that is earlier (returned with the pin), both before the
    /// serial lock is released, so no checkpoint in between can remove
    /// what the backup will copy (truncation happens only under that lock).
    /// Its rows are whole: stubs' images are fetched (cold.rs), since a
    /// backup goes without the store that holds them.
    pub(crate) fn take_pinned(
        &self,
        dir: &Path,
        wal: &Wal,
        commit: &CommitOrder,
        catalog: &CommittedCatalog,
        consumers: &Consumers,
        keep_for: &[&str],
    ) -> Result<(CheckpointInfo, File, WalPin<'_>, Lsn)> {
        let _serial = self.serial.lock();
        let info = write(dir, wal, commit, catalog, true)?;
        let file = File::open(&info.path).map_err(|e| EngineError::io(format!("open {}", info.path.display()), e))?;
        // A consumer at 0 ("from the oldest record", a standby's position
        // before its active's first word) needs what is kept, no more.
        let oldest = wal.stats().oldest_lsn;
        let wal_from = keep_for
            .iter()
            .filter_map(|name| consumers.position(name).ok())
            .fold(info.start_lsn, |from, position| from.min(position.max(oldest)));
        let id = self.next_pin.fetch_add(1, Ordering::Relaxed);
        self.pins.lock().push((id, wal_from));
        let pin = WalPin { checkpoints: self, id };
        self.retire_old(info.clone(), wal, consumers)?;
        self.taken.fetch_add(1, Ordering::Relaxed);
        Ok((info, file, pin, wal_from))
    }

    /// Keeps the newest checkpoints, deletes older files, truncates the WAL.
    fn retire_old(&self, info: CheckpointInfo, wal: &Wal, consumers: &Consumers) -> Result<()> {
        let mut kept = self.retained.lock();
        // Nothing committed since the last checkpoint: the same file was
        // rewritten, and must not be counted (and later deleted) twice.
        kept.retain(|c| c.path != info.path);
        kept.push(info);
        while kept.len() > CHECKPOINTS_KEPT {
            let old = kept.remove(0);
            let _ = fs::remove_file(&old.path);
        }
        let oldest_needed = kept.first().map_or(Lsn(0), |c| c.start_lsn);
        drop(kept);
        let consumers_min = consumers.min_position();
        let mut limit = consumers_min.map_or(oldest_needed, |c| c.min(oldest_needed));
        if let Some(pinned) = self.pins.lock().iter().map(|(_, lsn)| *lsn).min() {
            limit = limit.min(pinned);
        }
        wal.truncate_before(limit)?;
        Ok(())
    }
}

/// Steps 1 to 4 of the module docs: the file, durable under its name.
/// `resolve`: stubs are written as the whole rows they stand for.
fn write(
    dir: &Path,
    wal: &Wal,
    commit: &CommitOrder,
    catalog: &CommittedCatalog,
    resolve: bool,
) -> Result<CheckpointInfo> {
    let started = Instant::now();
    let (start_lsn, cat) = {
        let _c = commit.lock();
        (wal.end(), catalog.current())
    };
    let tmp = dir.join("checkpoint.tmp");
    let file = File::create(&tmp).map_err(|e| EngineError::io("create checkpoint.tmp", e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut header = Vec::new();
    let mut w = Writer::new(&mut header);
    w.u64(start_lsn.0);
    cat.catalog.encode(&mut w);
    let (mut rows_total, mut bytes_total) = (0u64, 0u64);
    write_framed(&mut out, &header, MAGIC)?;
    let mut block = Vec::with_capacity(BLOCK_BYTES_TARGET + 4096);
    for store in cat.live_stores() {
        let mut count = 0u32;
        for shard in 0..SHARD_COUNT {
            // Rows are copied under the shard lock; I/O happens after it is released.
            count += store.committed_rows_of_shard(shard, resolve, &mut block)?;
            if block.len() >= BLOCK_BYTES_TARGET {
                write_block(&mut out, store.schema.id, count, &block)?;
                rows_total += u64::from(count);
                bytes_total += block.len() as u64;
                block.clear();
                count = 0;
            }
        }
        if count > 0 {
            write_block(&mut out, store.schema.id, count, &block)?;
            rows_total += u64::from(count);
            bytes_total += block.len() as u64;
            block.clear();
        }
    }
    let mut end = vec![BLOCK_END];
    end.extend_from_slice(&rows_total.to_le_bytes());
    let crc = crc32c::crc32c(&end);
    end.extend_from_slice(&crc.to_le_bytes());
    out.write_all(&end).map_err(|e| EngineError::io("write checkpoint", e))?;
    // Step 3: everything captured must be replayable from the WAL.
    if let Some(lsn) = commit.last_lsn() {
        wal.wait_durable(lsn)?;
    }
    let file = out.into_inner().map_err(|e| EngineError::io("flush checkpoint", e.into_error()))?;
    file.sync_all().map_err(|e| EngineError::io("fsync checkpoint", e))?;
    drop(file);
    let path = dir.join(format!("checkpoint-{:016x}.ckpt", start_lsn.0));
    fs::rename(&tmp, &path).map_err(|e| EngineError::io("rename checkpoint", e))?;
    sync_dir(dir)?;
    Ok(CheckpointInfo {
        start_lsn,
        rows: rows_total,
        bytes: bytes_total,
        duration: started.elapsed(),
        completed_at: SystemTime::now(),
        path,
    })
}

fn write_framed(out: &mut impl Write, body: &[u8], magic: &[u8; 8]) -> Result<()> {
    let mut buf = Vec::with_capacity(body.len() + 16);
    buf.extend_from_slice(magic);
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
    buf.extend_from_slice(body);
    let crc = crc32c::crc32c(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    out.write_all(&buf).map_err(|e| EngineError::io("write checkpoint", e))
}

fn write_block(out: &mut impl Write, table: TableId, count: u32, payload: &[u8]) -> Result<()> {
    let mut head = Vec::with_capacity(13);
    head.push(BLOCK_ROWS);
    head.extend_from_slice(&table.0.to_le_bytes());
    head.extend_from_slice(&count.to_le_bytes());
    head.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head), payload);
    let io = |e| EngineError::io("write checkpoint", e);
    out.write_all(&head).map_err(io)?;
    out.write_all(payload).map_err(io)?;
    out.write_all(&crc.to_le_bytes()).map_err(io)
}

/// Checkpoint files in `dir`, newest first.
pub(crate) fn list(dir: &Path) -> Result<Vec<(Lsn, PathBuf)>> {
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| EngineError::io("list database directory", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| EngineError::io("list database directory", e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(hex) = name.strip_prefix("checkpoint-").and_then(|n| n.strip_suffix(".ckpt")) else { continue };
        if let Ok(lsn) = u64::from_str_radix(hex, 16) {
            out.push((Lsn(lsn), entry.path()));
        }
    }
    out.sort_by_key(|c| std::cmp::Reverse(c.0));
    Ok(out)
}

/// A block of one table's rows in a checkpoint read back.
pub(crate) struct RowBlock {
    pub(crate) table: TableId,
    pub(crate) rows: u32,
    /// Where its `[u32 len][row]`* lie in `LoadedCheckpoint::data`.
    pub(crate) bytes: std::ops::Range<usize>,
}

/// A checkpoint read back: validated catalog and row blocks.
pub(crate) struct LoadedCheckpoint {
    pub(crate) start_lsn: Lsn,
    pub(crate) catalog: Catalog,
    /// The file's bytes; blocks index into it.
    pub(crate) data: Vec<u8>,
    pub(crate) blocks: Vec<RowBlock>,
    pub(crate) rows: u64,
}

/// Reads and validates a whole checkpoint file.
pub(crate) fn load(path: &Path) -> Result<LoadedCheckpoint> {
    let mut data = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut data))
        .map_err(|e| EngineError::io(format!("read {}", path.display()), e))?;
    let corrupt = |what: &str| EngineError::Corrupt(format!("checkpoint {}: {what}", path.display()));
    let format = match data.get(..8) {
        Some(m) if data.len() >= 16 && m == MAGIC => Format::V6,
        Some(m) if data.len() >= 16 && m == MAGIC_V5 => Format::V5,
        Some(m) if data.len() >= 16 && m == MAGIC_V4 => Format::V4,
        Some(m) if data.len() >= 16 && m == MAGIC_V3 => Format::V3,
        Some(m) if data.len() >= 16 && m == MAGIC_V2 => Format::V2,
        Some(m) if data.len() >= 16 && m == MAGIC_V1 => Format::V1,
        _ => return Err(corrupt("bad magic")),
    };
    let mut r = Reader::new(&data[8..]);
    let header_len = r.u32()? as usize;
    let header_end = 12 + header_len;
    if data.len() < header_end + 4 {
        return Err(corrupt("truncated header"));
    }
    let crc = u32::from_le_bytes([data[header_end], data[header_end + 1], data[header_end + 2], data[header_end + 3]]);
    if crc32c::crc32c(&data[..header_end]) != crc {
        return Err(corrupt("header checksum mismatch"));
    }
    let mut h = Reader::new(&data[12..header_end]);
    let start_lsn = Lsn(h.u64()?);
    let catalog = Catalog::decode(&mut h, format)?;
    let mut at = header_end + 4;
    let mut blocks = Vec::new();
    let mut rows = 0u64;
    loop {
        let Some(&tag) = data.get(at) else { return Err(corrupt("missing end block")) };
        if tag == BLOCK_END {
            if data.len() < at + 13 {
                return Err(corrupt("truncated end block"));
            }
            let total = u64::from_le_bytes(data[at + 1..at + 9].try_into().map_err(|_| corrupt("end block"))?);
            let crc = u32::from_le_bytes(data[at + 9..at + 13].try_into().map_err(|_| corrupt("end block"))?);
            if crc32c::crc32c(&data[at..at + 9]) != crc || total != rows {
                return Err(corrupt("end block mismatch"));
            }
            return Ok(LoadedCheckpoint { start_lsn, catalog, data, blocks, rows });
        }
        if tag != BLOCK_ROWS || data.len() < at + 13 {
            return Err(corrupt("bad block"));
        }
        let mut b = Reader::new(&data[at + 1..at + 13]);
        let (table, count, len) = (TableId(b.u32()?), b.u32()?, b.u32()? as usize);
        let end = at + 13 + len;
        if data.len() < end + 4 {
            return Err(corrupt("truncated block"));
        }
        let crc = u32::from_le_bytes(data[end..end + 4].try_into().map_err(|_| corrupt("block"))?);
        if crc32c::crc32c(&data[at..end]) != crc {
            return Err(corrupt("block checksum mismatch"));
        }
        blocks.push(RowBlock { table, rows: count, bytes: at + 13..end });
        rows += u64::from(count);
        at = end + 4;
    }
}
