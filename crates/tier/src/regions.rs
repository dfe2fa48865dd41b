//! Region bookkeeping: where each region stands in its life, the FIFO of
//! sealed regions, the free list, and the live-record counters per region
//! and per retention.
//!
//! Counters change only under the index shard lock of the entry concerned,
//! so a reader holding every shard lock (a checkpoint) sees them consistent
//! with the index. The region table itself is a leaf lock: taken briefly,
//! never held while waiting for another lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

use crate::Retention;
use crate::aligned::BLOCK_BYTES;
use crate::format::{MAX_FILLER_BYTES, REGION_HEADER_BYTES, SUPERBLOCK_BYTES, record_seed, retention_code};

/// Where a region stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    Free = 0,
    Open = 1,
    Sealed = 2,
    Reclaiming = 3,
}

/// One region's metadata.
pub(crate) struct RegionMeta {
    pub seq: AtomicU64,
    state: AtomicU8,
    /// Bytes written (the sealed length); reads and reclaim stop there.
    pub end: AtomicU32,
    pub count: [AtomicU64; 3],
    pub bytes: [AtomicU64; 3],
}

impl RegionMeta {
    pub(crate) fn new() -> RegionMeta {
        RegionMeta {
            seq: AtomicU64::new(0),
            state: AtomicU8::new(State::Free as u8),
            end: AtomicU32::new(0),
            count: Default::default(),
            bytes: Default::default(),
        }
    }

    pub(crate) fn state(&self) -> State {
        match self.state.load(Ordering::Acquire) {
            1 => State::Open,
            2 => State::Sealed,
            3 => State::Reclaiming,
            _ => State::Free,
        }
    }

    pub(crate) fn set_state(&self, s: State) {
        self.state.store(s as u8, Ordering::Release);
    }

    pub(crate) fn records(&self) -> u64 {
        self.count.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

/// Free and sealed regions; the sequence counter. Guarded by a mutex that
/// is a leaf below the writer lock.
pub(crate) struct Ring {
    /// Regions ready to be written, first out first.
    pub free: VecDeque<u32>,
    /// Sealed regions, oldest (lowest sequence) first: the FIFO reclaim order.
    pub sealed: VecDeque<u32>,
    /// The sequence number the next region taken gets; never reused.
    pub next_seq: u64,
    /// Regions at or beyond this index are being retired by a shrink: never
    /// taken for writing, never returned to `free`.
    pub limit: u32,
}

/// Fixed numbers of the file's layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub region_size: u32,
    pub nonce: u64,
}

impl Geometry {
    /// Bytes of a region records may use.
    pub(crate) fn usable(&self) -> u32 {
        self.region_size - REGION_HEADER_BYTES
    }

    /// Bytes of records `regions` regions can keep while reclamation still
    /// frees regions: all but the open one, the reserve and one more for the
    /// slack of partly filled regions, less what fillers may take
    /// (`MAX_FILLER_BYTES` per block), at 90%.
    pub(crate) fn retainable_bytes(&self, regions: u32) -> u64 {
        let per_region = u64::from(self.usable()) * (BLOCK_BYTES - MAX_FILLER_BYTES) as u64 / BLOCK_BYTES as u64;
        u64::from(regions.saturating_sub(3)) * per_region * 9 / 10
    }

    pub(crate) fn region_offset(&self, region: u32) -> u64 {
        SUPERBLOCK_BYTES + u64::from(region) * u64::from(self.region_size)
    }

    /// The index location (8-byte units) of byte `off` of `region`.
    pub(crate) fn loc(&self, region: u32, off: u32) -> u64 {
        (self.region_offset(region) + u64::from(off)) / 8
    }

    /// (region, offset in region) of an index location.
    pub(crate) fn split(&self, loc: u64) -> (u32, u32) {
        let rel = loc * 8 - SUPERBLOCK_BYTES;
        let rs = u64::from(self.region_size);
        ((rel / rs) as u32, (rel % rs) as u32)
    }

    pub(crate) fn region_of(&self, loc: u64) -> u32 {
        self.split(loc).0
    }

    pub(crate) fn seed(&self, seq: u64) -> u32 {
        record_seed(self.nonce, seq)
    }

    pub(crate) fn file_len(&self, regions: u32) -> u64 {
        self.region_offset(regions)
    }
}

/// A position in the append stream: later appends have larger positions.
pub(crate) fn pos(seq: u64, off: u32) -> u64 {
    assert!(seq < 1 << 32, "region sequence numbers exhausted");
    seq << 32 | u64::from(off)
}

/// Live totals over all regions, per retention.
#[derive(Default)]
pub(crate) struct Live {
    pub count: [AtomicU64; 3],
    pub bytes: [AtomicU64; 3],
}

impl Live {
    pub(crate) fn count(&self, r: Retention) -> u64 {
        self.count[usize::from(retention_code(r))].load(Ordering::Relaxed)
    }

    pub(crate) fn bytes(&self, r: Retention) -> u64 {
        self.bytes[usize::from(retention_code(r))].load(Ordering::Relaxed)
    }
}

/// Adds (or with `sub`, removes) one record of `bytes` to a region's and the global counters.
pub(crate) fn account(meta: &RegionMeta, live: &Live, r: Retention, bytes: u64, sub: bool) {
    let i = usize::from(retention_code(r));
    if sub {
        meta.count[i].fetch_sub(1, Ordering::Relaxed);
        live.count[i].fetch_sub(1, Ordering::Relaxed);
        // Bytes may be unknown for a record removed after failing its
        // checksum (0 passed); a region's leftover bytes go when it is freed.
        let b = bytes.min(meta.bytes[i].load(Ordering::Relaxed));
        meta.bytes[i].fetch_sub(b, Ordering::Relaxed);
        live.bytes[i].fetch_sub(b, Ordering::Relaxed);
    } else {
        meta.count[i].fetch_add(1, Ordering::Relaxed);
        live.count[i].fetch_add(1, Ordering::Relaxed);
        meta.bytes[i].fetch_add(bytes, Ordering::Relaxed);
        live.bytes[i].fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Zeroes a region's counters (its records are all gone), taking what was
/// left off the global totals; `only` limits it to some retentions.
pub(crate) fn zero_counters(meta: &RegionMeta, live: &Live, only: &[Retention]) {
    for &r in only {
        let i = usize::from(retention_code(r));
        let c = meta.count[i].swap(0, Ordering::Relaxed);
        let b = meta.bytes[i].swap(0, Ordering::Relaxed);
        live.count[i].fetch_sub(c, Ordering::Relaxed);
        live.bytes[i].fetch_sub(b, Ordering::Relaxed);
    }
}

pub(crate) const ALL_RETENTIONS: [Retention; 3] = [Retention::Evictable, Retention::Keep, Retention::Durable];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_round_trip() {
        let g = Geometry { region_size: 1 << 20, nonce: 1 };
        for (r, off) in [(0u32, 64u32), (3, 4096), (7, (1 << 20) - 8)] {
            assert_eq!(g.split(g.loc(r, off)), (r, off));
        }
        assert!(pos(2, 0) > pos(1, (1 << 20) - 8));
    }
}
