//! Segment files: creation by writing zeros (so later fdatasyncs do not pay
//! for block allocation or unwritten-extent conversion), the map of live
//! segments, and removal.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::format::{self, SEGMENT_HEADER_BYTES};
use crate::fs::{self, FileSystem, WalFile};

/// Zero-fill chunk when creating a segment; each chunk is written back
/// before the next so the device queue never holds more than this much
/// preallocation I/O ahead of a commit's fdatasync.
const ZERO_CHUNK_BYTES: usize = 1 << 20;

pub(crate) struct Segment {
    pub start_lsn: u64,
    pub size_bytes: u64,
    pub file: Box<dyn WalFile>,
}

impl Segment {
    pub fn end_lsn(&self) -> u64 {
        self.start_lsn + self.size_bytes
    }
    pub fn first_record_lsn(&self) -> u64 {
        self.start_lsn + SEGMENT_HEADER_BYTES
    }
    pub fn contains(&self, lsn: u64) -> bool {
        self.start_lsn <= lsn && lsn < self.end_lsn()
    }
}

/// Live segments by start LSN. Readers and the writer hold `Arc`s, so a
/// segment removed by `truncate_before` stays readable for them (Linux keeps
/// unlinked files open).
#[derive(Default)]
pub(crate) struct SegmentMap {
    pub by_start: BTreeMap<u64, Arc<Segment>>,
}

impl SegmentMap {
    pub fn containing(&self, lsn: u64) -> Option<Arc<Segment>> {
        let (_, seg) = self.by_start.range(..=lsn).next_back()?;
        seg.contains(lsn).then(|| Arc::clone(seg))
    }
    pub fn first(&self) -> Option<Arc<Segment>> {
        self.by_start.values().next().cloned()
    }
}

/// Creates segment `start_lsn`: writes header + zeros to a temporary file,
/// fsyncs it, renames it into place and fsyncs the directory. A file with a
/// final segment name therefore always has a whole header and full length.
/// `keep_going` is polled between chunks so shutdown need not wait.
pub(crate) fn create_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    start_lsn: u64,
    size_bytes: u64,
    keep_going: &dyn Fn() -> bool,
) -> io::Result<Option<Segment>> {
    assert!(size_bytes > SEGMENT_HEADER_BYTES);
    assert!(size_bytes.is_multiple_of(format::RECORD_ALIGN_BYTES));
    let tmp_path = dir.join(format::segment_tmp_name(start_lsn));
    let final_path = dir.join(format::segment_file_name(start_lsn));
    let file = fs.create(&tmp_path)?;
    let zeros = vec![0u8; ZERO_CHUNK_BYTES.min(size_bytes as usize)];
    let mut offset_bytes = 0u64;
    while offset_bytes < size_bytes {
        if !keep_going() {
            drop(file);
            let _ = fs.remove(&tmp_path);
            return Ok(None);
        }
        let n = (size_bytes - offset_bytes).min(zeros.len() as u64) as usize;
        fs::write_all_at(file.as_ref(), &zeros[..n], offset_bytes)?;
        file.write_back(offset_bytes, n as u64)?;
        offset_bytes += n as u64;
    }
    let header = format::encode_segment_header(start_lsn, size_bytes);
    fs::write_all_at(file.as_ref(), &header, 0)?;
    file.sync_all()?;
    assert_eq!(file.len_bytes()?, size_bytes);
    fs.rename(&tmp_path, &final_path)?;
    fs.sync_dir(dir)?;
    Ok(Some(Segment { start_lsn, size_bytes, file }))
}

/// Chunk for scrubbing; a multiple of the record alignment.
const SCRUB_CHUNK_BYTES: u64 = 256 << 10;
const _: () = assert!(SCRUB_CHUNK_BYTES.is_multiple_of(format::RECORD_ALIGN_BYTES));

/// Makes `[from_offset, size_bytes)` of a segment starting at `start_lsn`
/// unable to ever validate as a record: zeroes every 16-byte window at an
/// 8-aligned offset whose LSN field equals the LSN of that offset (a record
/// validates only where its LSN field equals its position, so nothing else
/// can), and restores a short file to full length with zeros. Used on the
/// tail after recovery's end (a torn batch may have left whole records past
/// it) and on a recycled segment (stale payload bytes could hold a forged
/// header for the new position). Reads the range; writes only what matches.
/// Returns whether it wrote anything (the caller then syncs).
pub(crate) fn scrub(file: &dyn WalFile, start_lsn: u64, from_offset: u64, size_bytes: u64) -> io::Result<bool> {
    assert!(from_offset.is_multiple_of(format::RECORD_ALIGN_BYTES));
    assert!(from_offset >= SEGMENT_HEADER_BYTES && from_offset <= size_bytes);
    let mut wrote = false;
    let len_bytes = file.len_bytes()?;
    if len_bytes < size_bytes {
        let zeros = vec![0u8; ZERO_CHUNK_BYTES];
        let mut off = len_bytes;
        while off < size_bytes {
            let n = (size_bytes - off).min(ZERO_CHUNK_BYTES as u64) as usize;
            fs::write_all_at(file, &zeros[..n], off)?;
            off += n as u64;
        }
        wrote = true;
    }
    let header_bytes = format::RECORD_HEADER_BYTES;
    let mut buf = vec![0u8; (SCRUB_CHUNK_BYTES + header_bytes) as usize];
    let mut off = from_offset;
    while off + header_bytes <= size_bytes {
        let want = (size_bytes - off).min(SCRUB_CHUNK_BYTES + header_bytes) as usize;
        let got = fs::read_full_at(file, &mut buf[..want], off)?;
        let mut p = 0usize;
        while p < SCRUB_CHUNK_BYTES as usize && p + header_bytes as usize <= got {
            let mut field = [0u8; 8];
            field.copy_from_slice(&buf[p + 8..p + 16]);
            let at = off + p as u64;
            if u64::from_le_bytes(field) == start_lsn + at {
                fs::write_all_at(file, &[0u8; 16], at)?;
                wrote = true;
            }
            p += format::RECORD_ALIGN_BYTES as usize;
        }
        off += SCRUB_CHUNK_BYTES;
    }
    Ok(wrote)
}

/// Turns a spare (a removed segment kept for reuse) into segment
/// `start_lsn`: scrub, new header, sync, rename into place, sync the
/// directory. No 64 MiB zero fill: the blocks are already allocated and
/// written, so fdatasync stays cheap and the disk does half the writing.
pub(crate) fn recycle_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    spare_path: &Path,
    start_lsn: u64,
    size_bytes: u64,
) -> io::Result<Segment> {
    let file = fs.open(spare_path)?;
    if file.len_bytes()? != size_bytes {
        return Err(io::Error::other(format!("spare segment {} has the wrong size", spare_path.display())));
    }
    scrub(file.as_ref(), start_lsn, SEGMENT_HEADER_BYTES, size_bytes)?;
    let header = format::encode_segment_header(start_lsn, size_bytes);
    fs::write_all_at(file.as_ref(), &header, 0)?;
    file.sync_all()?;
    fs.rename(spare_path, &segment_path(dir, start_lsn))?;
    fs.sync_dir(dir)?;
    Ok(Segment { start_lsn, size_bytes, file })
}

pub(crate) fn segment_path(dir: &Path, start_lsn: u64) -> PathBuf {
    dir.join(format::segment_file_name(start_lsn))
}

/// Opens an existing segment and validates its header against its name.
/// Returns None if the header is not a valid header for `start_lsn`.
pub(crate) fn open_segment(fs: &dyn FileSystem, dir: &Path, start_lsn: u64) -> io::Result<Option<Segment>> {
    let file = fs.open(&segment_path(dir, start_lsn))?;
    let mut header = [0u8; SEGMENT_HEADER_BYTES as usize];
    if fs::read_full_at(file.as_ref(), &mut header, 0)? != header.len() {
        return Ok(None);
    }
    match format::decode_segment_header(&header) {
        Some((lsn, size_bytes))
            if lsn == start_lsn
                && size_bytes > SEGMENT_HEADER_BYTES
                && size_bytes.is_multiple_of(format::RECORD_ALIGN_BYTES) =>
        {
            Ok(Some(Segment { start_lsn, size_bytes, file }))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::StdFileSystem;

    #[test]
    fn scrub_zeroes_exactly_the_headers_that_could_validate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = StdFileSystem;
        let size_bytes = 64 << 10;
        let start_lsn = 1 << 20;
        let file = fs.create(&dir.path().join("s")).expect("create");
        fs::write_all_at(file.as_ref(), &vec![0xabu8; size_bytes as usize], 0).expect("fill");
        // A header forged for this position (valid CRC and all), one for an
        // older use of the file, and one straddling a scrub chunk boundary.
        let forged_at = 4096u64;
        let payload = b"forged";
        let crc = format::record_crc(format::payload_crc(payload), start_lsn + forged_at, 6);
        let forged = format::encode_record_header(6, crc, start_lsn + forged_at);
        fs::write_all_at(file.as_ref(), &forged, forged_at).expect("write");
        fs::write_all_at(file.as_ref(), payload, forged_at + 16).expect("write");
        let old = format::encode_record_header(6, crc, forged_at + 8);
        fs::write_all_at(file.as_ref(), &old, 8192 + 8).expect("write");
        let edge_at = SCRUB_CHUNK_BYTES - 8 + SEGMENT_HEADER_BYTES;
        let edge_at = edge_at.min(size_bytes - 16) / 8 * 8;
        let edge = format::encode_record_header(1, 2, start_lsn + edge_at);
        fs::write_all_at(file.as_ref(), &edge, edge_at).expect("write");
        assert!(scrub(file.as_ref(), start_lsn, SEGMENT_HEADER_BYTES, size_bytes).expect("scrub"));
        let mut buf = [0u8; 16];
        fs::read_full_at(file.as_ref(), &mut buf, forged_at).expect("read");
        assert_eq!(buf, [0u8; 16]);
        fs::read_full_at(file.as_ref(), &mut buf, edge_at).expect("read");
        assert_eq!(buf, [0u8; 16]);
        fs::read_full_at(file.as_ref(), &mut buf, 8192 + 8).expect("read");
        assert_eq!(buf, old, "a header for another position is harmless and stays");
        // Idempotent: nothing left to zero.
        assert!(!scrub(file.as_ref(), start_lsn, SEGMENT_HEADER_BYTES, size_bytes).expect("scrub"));
    }

    #[test]
    fn scrub_restores_a_short_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = StdFileSystem;
        let file = fs.create(&dir.path().join("s")).expect("create");
        fs::write_all_at(file.as_ref(), &[1u8; 1000], 0).expect("write");
        assert!(scrub(file.as_ref(), 0, 1000, 8192).expect("scrub"));
        assert_eq!(file.len_bytes().expect("len"), 8192);
    }
}
