//! Recovery at open: find the end of the log and make everything after it
//! zero, so new appends continue cleanly from the last whole record.
//!
//! Rule (PostgreSQL's): the first invalid record is the end of the log.
//! Anything after it — a torn tail, or valid-looking records after a
//! corrupted one — is discarded. Records after the end were never
//! acknowledged if the damage is a torn write; if it is media corruption in
//! the middle, `WalStats::recovery_segments_discarded` says so.

use std::path::Path;
use std::sync::Arc;

use crate::format::{self, SEGMENT_HEADER_BYTES, SEGMENT_SPARE_SUFFIX, SEGMENT_TMP_SUFFIX};
use crate::fs::FileSystem;
use crate::scan::{SegmentScanner, Step};
use crate::segment::{self, Segment, SegmentMap};
use crate::{Lsn, WalError};

pub(crate) struct Recovered {
    pub segments: SegmentMap,
    /// Next append position; also the durable end.
    pub end_lsn: u64,
    /// Start LSN of the segment holding `end_lsn`.
    pub current_start_lsn: u64,
    pub records: u64,
    pub cut: Option<(Lsn, String)>,
    pub segments_discarded: u64,
    pub segments_created: u64,
    /// Spare files found (removed segments kept for reuse); the caller
    /// decides which to keep.
    pub spares: Vec<std::path::PathBuf>,
}

pub(crate) fn recover(fs: &dyn FileSystem, dir: &Path, segment_bytes: u64) -> Result<Recovered, WalError> {
    let mut starts = Vec::new();
    let mut spares = Vec::new();
    let mut removed_tmp = false;
    for name in fs.list_dir(dir)? {
        if name.ends_with(SEGMENT_SPARE_SUFFIX) {
            spares.push(dir.join(&name));
        } else if name.ends_with(SEGMENT_TMP_SUFFIX) {
            // An interrupted segment creation: never held records.
            fs.remove(&dir.join(&name))?;
            removed_tmp = true;
        } else if let Some(start) = format::parse_segment_file_name(&name) {
            starts.push(start);
        }
    }
    if removed_tmp {
        fs.sync_dir(dir)?;
    }
    starts.sort_unstable();
    if starts.is_empty() {
        let seg = segment::create_segment(fs, dir, 0, segment_bytes, &|| true)?
            .ok_or_else(|| WalError::Io(std::io::Error::other("segment creation interrupted")))?;
        let mut segments = SegmentMap::default();
        let end_lsn = seg.first_record_lsn();
        segments.by_start.insert(0, Arc::new(seg));
        return Ok(Recovered {
            segments,
            end_lsn,
            current_start_lsn: 0,
            records: 0,
            cut: None,
            segments_discarded: 0,
            segments_created: 1,
            spares,
        });
    }
    let chain = open_chain(fs, dir, &starts)?;
    // Records we are about to call durable may exist only in the page cache
    // (the previous process died, the kernel did not): force them down first.
    for seg in &chain {
        seg.file.sync_data()?;
    }
    // Likewise a rename into place whose directory fsync never ran.
    fs.sync_dir(dir)?;
    let scan = scan_chain(&chain)?;
    let current = &chain[scan.segment_index];
    zero_after(current, scan.end_lsn)?;
    let mut segments_discarded = 0;
    let mut removed_any = false;
    for &start in starts.iter().filter(|&&s| s > current.start_lsn) {
        if holds_records(fs, dir, start)? {
            segments_discarded += 1;
        }
        fs.remove(&segment::segment_path(dir, start))?;
        removed_any = true;
    }
    if removed_any {
        fs.sync_dir(dir)?;
    }
    let mut segments = SegmentMap::default();
    for seg in chain.into_iter().take(scan.segment_index + 1) {
        segments.by_start.insert(seg.start_lsn, seg);
    }
    let current_start_lsn = segments.by_start.keys().next_back().copied().unwrap_or(0);
    Ok(Recovered {
        segments,
        end_lsn: scan.end_lsn,
        current_start_lsn,
        records: scan.records,
        cut: scan.cut,
        segments_discarded,
        segments_created: 0,
        spares,
    })
}

/// Opens the segments that form one contiguous run from the oldest; stops at
/// the first missing, misnamed or headerless segment (it is past the end).
fn open_chain(fs: &dyn FileSystem, dir: &Path, starts: &[u64]) -> Result<Vec<Arc<Segment>>, WalError> {
    let mut chain: Vec<Arc<Segment>> = Vec::new();
    for &start in starts {
        if let Some(prev) = chain.last()
            && prev.end_lsn() != start
        {
            break;
        }
        match segment::open_segment(fs, dir, start)? {
            Some(seg) => chain.push(Arc::new(seg)),
            None if chain.is_empty() => {
                return Err(WalError::Corrupt {
                    lsn: Lsn(start),
                    detail: "oldest segment has an invalid header".into(),
                });
            }
            None => break,
        }
    }
    assert!(!chain.is_empty());
    Ok(chain)
}

struct ScanResult {
    segment_index: usize,
    end_lsn: u64,
    records: u64,
    cut: Option<(Lsn, String)>,
}

fn scan_chain(chain: &[Arc<Segment>]) -> Result<ScanResult, WalError> {
    let mut index = 0;
    let mut scanner = SegmentScanner::new(Arc::clone(&chain[0]));
    let mut pos = chain[0].first_record_lsn();
    let mut records = 0u64;
    loop {
        let seg_end = scanner.seg.end_lsn();
        match scanner.step(pos, seg_end, false)? {
            Step::Record { lsn, next_lsn, .. } => {
                assert!(lsn == pos && next_lsn > pos && next_lsn <= seg_end);
                pos = next_lsn;
                records += 1;
            }
            Step::SegmentEnd if index + 1 < chain.len() => {
                index += 1;
                scanner = SegmentScanner::new(Arc::clone(&chain[index]));
                pos = chain[index].first_record_lsn();
            }
            Step::SegmentEnd | Step::Zero | Step::Stale { .. } => {
                return Ok(ScanResult { segment_index: index, end_lsn: pos, records, cut: None });
            }
            Step::Invalid { detail } => {
                let cut = Some((Lsn(pos), detail));
                return Ok(ScanResult { segment_index: index, end_lsn: pos, records, cut });
            }
        }
    }
}

/// Scrubs `[end_lsn, segment end)` (see `segment::scrub`) and restores a
/// short file's length. Records past the end (a partly written batch) must
/// go, not just be skipped: a later record boundary could otherwise land
/// exactly on one of them and resurrect a never-acknowledged record.
fn zero_after(seg: &Segment, end_lsn: u64) -> Result<(), WalError> {
    assert!(seg.contains(end_lsn) || end_lsn == seg.end_lsn());
    assert!(end_lsn >= seg.start_lsn + SEGMENT_HEADER_BYTES);
    if segment::scrub(seg.file.as_ref(), seg.start_lsn, end_lsn - seg.start_lsn, seg.size_bytes)? {
        seg.file.sync_all()?;
    }
    Ok(())
}

/// Whether a segment past the end begins with a valid record (then cutting
/// it discards log data, not just a preallocated file).
fn holds_records(fs: &dyn FileSystem, dir: &Path, start: u64) -> Result<bool, WalError> {
    let Some(seg) = segment::open_segment(fs, dir, start)? else {
        return Ok(false);
    };
    let seg = Arc::new(seg);
    let first = seg.first_record_lsn();
    let mut scanner = SegmentScanner::new(Arc::clone(&seg));
    Ok(matches!(scanner.step(first, first, false)?, Step::Record { .. }))
}
