//! Record validation, shared by recovery and readers so both apply exactly
//! the same rule: a record is valid iff its header LSN equals its position,
//! its length fits in the segment, and its CRC matches.

use std::io;
use std::sync::Arc;

use crate::format::{self, PAD_MARKER, RECORD_HEADER_BYTES};
use crate::fs;
use crate::segment::Segment;

/// Read-ahead per syscall; bounded so a reader's memory stays small.
const READ_AHEAD_BYTES: u64 = 256 << 10;

pub(crate) enum Step {
    Record {
        lsn: u64,
        next_lsn: u64,
        payload: Option<Vec<u8>>,
    },
    /// A pad record or a tail too small for a header: continue at the next
    /// segment's first record.
    SegmentEnd,
    /// An all-zero header: never-written (preallocated) space. In recovery
    /// this is the clean end of the log; below the durable end it is damage.
    Zero,
    /// A header whose LSN is not its position: bytes left from an older use
    /// of a recycled segment, or a torn header. Also an end in recovery (not
    /// reported as a cut: a damaged record that claims this position is).
    Stale {
        header_lsn: u64,
    },
    Invalid {
        detail: String,
    },
}

/// Reads records of one segment through a read-ahead buffer.
pub(crate) struct SegmentScanner {
    pub seg: Arc<Segment>,
    buf: Vec<u8>,
    buf_lsn: u64,
}

impl SegmentScanner {
    pub fn new(seg: Arc<Segment>) -> SegmentScanner {
        SegmentScanner { seg, buf: Vec::new(), buf_lsn: 0 }
    }

    /// Makes `[lsn, lsn + n_bytes)` available in `buf`, reading ahead no
    /// further than `limit_lsn` (bytes past it may still change). Returns
    /// false if the file ends first.
    fn fill(&mut self, lsn: u64, n_bytes: u64, limit_lsn: u64) -> io::Result<bool> {
        let have_end = self.buf_lsn + self.buf.len() as u64;
        if self.buf_lsn <= lsn && lsn + n_bytes <= have_end {
            return Ok(true);
        }
        let ahead = READ_AHEAD_BYTES.min(limit_lsn.saturating_sub(lsn));
        let want_bytes = n_bytes.max(ahead).min(self.seg.end_lsn() - lsn);
        assert!(want_bytes >= n_bytes, "read past segment end");
        self.buf.resize(want_bytes as usize, 0);
        self.buf_lsn = lsn;
        let got = fs::read_full_at(self.seg.file.as_ref(), &mut self.buf, lsn - self.seg.start_lsn)?;
        self.buf.truncate(got);
        Ok(got as u64 >= n_bytes)
    }

    fn slice(&self, lsn: u64, n_bytes: u64) -> &[u8] {
        let from = (lsn - self.buf_lsn) as usize;
        &self.buf[from..from + n_bytes as usize]
    }

    /// Validates the record at `pos`. `limit_lsn` bounds read-ahead only.
    pub fn step(&mut self, pos: u64, limit_lsn: u64, want_payload: bool) -> io::Result<Step> {
        let seg_end = self.seg.end_lsn();
        assert!(pos >= self.seg.first_record_lsn() && pos <= seg_end, "position outside segment");
        assert_eq!(pos % format::RECORD_ALIGN_BYTES, 0, "record position not aligned");
        if seg_end - pos < RECORD_HEADER_BYTES {
            return Ok(Step::SegmentEnd);
        }
        if !self.fill(pos, RECORD_HEADER_BYTES, limit_lsn)? {
            return Ok(Step::Invalid { detail: "segment file ends inside a record header".into() });
        }
        if self.slice(pos, RECORD_HEADER_BYTES).iter().all(|&b| b == 0) {
            return Ok(Step::Zero);
        }
        let h = format::decode_record_header(self.slice(pos, RECORD_HEADER_BYTES));
        if h.lsn != pos {
            return Ok(Step::Stale { header_lsn: h.lsn });
        }
        if h.len == PAD_MARKER {
            if h.crc != format::record_crc(format::payload_crc(&[]), pos, PAD_MARKER) {
                return Ok(Step::Invalid { detail: "pad record CRC mismatch".into() });
            }
            return Ok(Step::SegmentEnd);
        }
        let framed_bytes = format::framed_bytes(u64::from(h.len));
        if framed_bytes > seg_end - pos {
            return Ok(Step::Invalid { detail: format!("record length {} overruns its segment", h.len) });
        }
        let len = u64::from(h.len);
        if !self.fill(pos, RECORD_HEADER_BYTES + len, limit_lsn)? {
            return Ok(Step::Invalid { detail: "segment file ends inside a record".into() });
        }
        let payload = self.slice(pos + RECORD_HEADER_BYTES, len);
        if format::record_crc(format::payload_crc(payload), pos, h.len) != h.crc {
            return Ok(Step::Invalid { detail: "record CRC mismatch".into() });
        }
        let payload = want_payload.then(|| payload.to_vec());
        Ok(Step::Record { lsn: pos, next_lsn: pos + framed_bytes, payload })
    }
}
