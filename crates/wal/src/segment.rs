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
