//! Readers of durable records: recovery replay and commit-stream consumers.
//! A reader never looks past the durable end, so everything it has buffered
//! is final and never changes under it.

use std::sync::Arc;

use crate::scan::{SegmentScanner, Step};
use crate::wal::Shared;
use crate::{Lsn, WalError};

/// Iterator over durable records `(lsn, payload)` in log order.
///
/// `next()` returns `None` at the current durable end; it is not fused: poll
/// again after [`crate::Wal::wait_for_durable_beyond`] to continue tailing.
/// After an `Err` (a segment removed under a lagging reader, or corruption
/// inside the durable region) the reader stays finished.
pub struct WalReader {
    shared: Arc<Shared>,
    /// Always a record boundary (or a segment end / header start that
    /// normalises to the next record position).
    pos_lsn: u64,
    /// Records before this LSN are validated and skipped, not returned.
    skip_before_lsn: u64,
    scanner: Option<SegmentScanner>,
    failed: bool,
}

impl WalReader {
    pub(crate) fn new(shared: Arc<Shared>, from_lsn: u64) -> WalReader {
        let durable_end_lsn = shared.durable_end();
        let (pos_lsn, skip_before_lsn) = {
            let segments = shared.segments.lock();
            match (segments.first(), segments.containing(from_lsn)) {
                (Some(first), _) if from_lsn <= first.first_record_lsn() => (first.first_record_lsn(), 0),
                // Known boundaries need no scan.
                (_, Some(seg)) if from_lsn <= seg.first_record_lsn() => (seg.first_record_lsn(), 0),
                _ if from_lsn == durable_end_lsn => (from_lsn, 0),
                // Otherwise scan from the segment start to find the record
                // boundary at or after `from` (payload bytes could mimic a
                // header; only the chain of lengths is trustworthy).
                (_, Some(seg)) => (seg.first_record_lsn(), from_lsn),
                (Some(_), None) => {
                    let newest = segments.by_start.values().next_back().map(|s| s.first_record_lsn());
                    (newest.unwrap_or(from_lsn), from_lsn)
                }
                (None, None) => (from_lsn, from_lsn),
            }
        };
        WalReader { shared, pos_lsn, skip_before_lsn, scanner: None, failed: false }
    }

    /// Position of the next record this reader will return (or of the end of
    /// the log so far). A consumer can persist it and resume with
    /// `read_from(position)`.
    pub fn position(&self) -> Lsn {
        Lsn(self.pos_lsn.max(self.skip_before_lsn))
    }

    fn fail(&mut self, detail: String) -> Option<Result<(Lsn, Vec<u8>), WalError>> {
        self.failed = true;
        Some(Err(WalError::Corrupt { lsn: Lsn(self.pos_lsn), detail }))
    }
}

impl std::fmt::Debug for WalReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalReader").field("position", &self.position()).finish_non_exhaustive()
    }
}

impl Iterator for WalReader {
    type Item = Result<(Lsn, Vec<u8>), WalError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            let durable_end_lsn = self.shared.durable_end();
            if self.pos_lsn >= durable_end_lsn {
                return None;
            }
            let in_scanner = self.scanner.as_ref().is_some_and(|s| s.seg.contains(self.pos_lsn));
            if !in_scanner {
                let Some(seg) = self.shared.segments.lock().containing(self.pos_lsn) else {
                    return self.fail("segment removed by truncate_before before it was read".into());
                };
                self.scanner = Some(SegmentScanner::new(seg));
            }
            let Some(scanner) = self.scanner.as_mut() else { unreachable!("scanner set above") };
            let first_record_lsn = scanner.seg.first_record_lsn();
            if self.pos_lsn < first_record_lsn {
                self.pos_lsn = first_record_lsn;
                continue;
            }
            let step = match scanner.step(self.pos_lsn, durable_end_lsn, true) {
                Ok(step) => step,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(WalError::Io(e)));
                }
            };
            match step {
                Step::Record { lsn, next_lsn, payload } => {
                    assert!(lsn == self.pos_lsn && next_lsn <= durable_end_lsn.max(scanner.seg.end_lsn()));
                    self.pos_lsn = next_lsn;
                    if lsn < self.skip_before_lsn {
                        continue;
                    }
                    return Some(Ok((Lsn(lsn), payload.unwrap_or_default())));
                }
                Step::SegmentEnd => {
                    self.pos_lsn = scanner.seg.end_lsn();
                    self.scanner = None;
                }
                Step::Zero => return self.fail("zeroed record header in the durable log".into()),
                Step::Stale { header_lsn } => {
                    return self.fail(format!(
                        "record header says LSN {header_lsn}: segment removed or recycled under this reader, or damaged"
                    ));
                }
                Step::Invalid { detail } => return self.fail(format!("invalid record in the durable log: {detail}")),
            }
        }
    }
}
