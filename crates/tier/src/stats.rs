//! Counters and the read latency histogram, and the `TierStats` snapshot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::RejectReason;

/// Buckets of the read latency histogram: bucket 0 counts reads under
/// 1 µs, bucket i (i ≥ 1) reads in [2^(i-1), 2^i) µs, the last one the rest.
pub const LATENCY_BUCKETS: usize = 24;

/// Inserts not stored, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rejections {
    pub too_large: u64,
    pub not_admitted: u64,
    pub index_full: u64,
    pub no_space: u64,
    pub disabled: u64,
}

impl Rejections {
    pub fn total(&self) -> u64 {
        self.too_large + self.not_admitted + self.index_full + self.no_space + self.disabled
    }
}

/// A snapshot of the store's state and counters (counters since open).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TierStats {
    /// Bytes of regions (the device size the store uses).
    pub capacity_bytes: u64,
    /// Bytes of regions holding records (sealed and open).
    pub used_bytes: u64,
    /// Bytes of live records on the device (headers and padding included).
    pub live_bytes: u64,
    pub records: u64,
    pub durable_records: u64,
    pub keep_records: u64,
    pub durable_bytes: u64,
    pub keep_bytes: u64,
    /// DRAM the index slots take (allocated, not just used).
    pub index_bytes: u64,
    /// DRAM the second-touch ghost table takes (0 without it).
    pub admission_bytes: u64,
    pub region_size: u64,
    pub regions: u64,
    pub free_regions: u64,
    pub inserts: u64,
    pub rejected: Rejections,
    pub hits: u64,
    pub misses: u64,
    pub removes: u64,
    /// Tombstones written (removal of Durable records).
    pub tombstones: u64,
    pub regions_reclaimed: u64,
    pub dropped_by_reclaim: u64,
    pub reinserted_keep: u64,
    /// Evictable records read since they were written that reclamation
    /// rewrote at the head instead of dropping (a second chance).
    pub reinserted_referenced: u64,
    /// Evictable records a shrink rewrote out of the regions it retired.
    pub kept_by_shrink: u64,
    pub compacted_durable: u64,
    /// Bytes written to the device: records, headers, padding, rewrites.
    pub device_bytes_written: u64,
    /// Key and value bytes of stored inserts; write amplification is
    /// device_bytes_written / logical_bytes_written.
    pub logical_bytes_written: u64,
    pub device_bytes_read: u64,
    /// fdatasync calls (group commit shares one among concurrent Durable inserts).
    pub syncs: u64,
    /// Records that failed their check on a read and left the index.
    pub corrupt_records: u64,
    /// Of those, Durable ones: data lost to corruption (the only copy).
    pub durable_corrupt_records: u64,
    /// Index tag matches that turned out to be another key (a wasted read).
    pub tag_false_matches: u64,
    /// Latency of `get`s that found their key; see `LATENCY_BUCKETS`.
    pub read_latency_us: [u64; LATENCY_BUCKETS],
    /// Set once an I/O error failed the store: why.
    pub failed: Option<String>,
}

impl TierStats {
    /// The upper bound (µs) of the histogram bucket holding quantile `q`
    /// (0..=1) of hit latencies; None before the first hit.
    pub fn read_latency_quantile_us(&self, q: f64) -> Option<f64> {
        let total: u64 = self.read_latency_us.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.read_latency_us.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some((1u64 << i) as f64);
            }
        }
        Some((1u64 << (LATENCY_BUCKETS - 1)) as f64)
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub inserts: AtomicU64,
    rejected: [AtomicU64; 5],
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub removes: AtomicU64,
    pub tombstones: AtomicU64,
    pub regions_reclaimed: AtomicU64,
    pub dropped_by_reclaim: AtomicU64,
    pub reinserted_keep: AtomicU64,
    pub reinserted_referenced: AtomicU64,
    pub kept_by_shrink: AtomicU64,
    pub compacted_durable: AtomicU64,
    pub logical_bytes_written: AtomicU64,
    pub corrupt_records: AtomicU64,
    durable_corrupt_records: AtomicU64,
    pub tag_false_matches: AtomicU64,
    latency: [AtomicU64; LATENCY_BUCKETS],
}

pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn reject(&self, reason: RejectReason) {
        let i = match reason {
            RejectReason::TooLarge => 0,
            RejectReason::NotAdmitted => 1,
            RejectReason::IndexFull => 2,
            RejectReason::NoSpace => 3,
            RejectReason::Disabled => 4,
        };
        bump(&self.rejected[i], 1);
    }

    /// A record removed from the index after failing its check.
    pub(crate) fn count_corrupt(&self, r: crate::Retention) {
        bump(&self.corrupt_records, 1);
        if r == crate::Retention::Durable {
            bump(&self.durable_corrupt_records, 1);
        }
    }

    pub(crate) fn read_latency(&self, took: Duration) {
        let us = took.as_micros();
        let bucket = if us == 0 { 0 } else { (128 - us.leading_zeros()) as usize };
        bump(&self.latency[bucket.min(LATENCY_BUCKETS - 1)], 1);
    }

    /// Fills the counter fields of `s`.
    pub(crate) fn fill(&self, s: &mut TierStats) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let r = &self.rejected;
        s.inserts = get(&self.inserts);
        s.rejected = Rejections {
            too_large: get(&r[0]),
            not_admitted: get(&r[1]),
            index_full: get(&r[2]),
            no_space: get(&r[3]),
            disabled: get(&r[4]),
        };
        s.hits = get(&self.hits);
        s.misses = get(&self.misses);
        s.removes = get(&self.removes);
        s.tombstones = get(&self.tombstones);
        s.regions_reclaimed = get(&self.regions_reclaimed);
        s.dropped_by_reclaim = get(&self.dropped_by_reclaim);
        s.reinserted_keep = get(&self.reinserted_keep);
        s.reinserted_referenced = get(&self.reinserted_referenced);
        s.kept_by_shrink = get(&self.kept_by_shrink);
        s.compacted_durable = get(&self.compacted_durable);
        s.logical_bytes_written = get(&self.logical_bytes_written);
        s.corrupt_records = get(&self.corrupt_records);
        s.durable_corrupt_records = get(&self.durable_corrupt_records);
        s.tag_false_matches = get(&self.tag_false_matches);
        for (out, c) in s.read_latency_us.iter_mut().zip(&self.latency) {
            *out = get(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_buckets_and_quantiles() {
        let c = Counters::default();
        for us in [0u64, 1, 3, 3, 100, 5000] {
            c.read_latency(Duration::from_micros(us));
        }
        let mut s = TierStats::default();
        c.fill(&mut s);
        assert_eq!(&s.read_latency_us[..4], &[1, 1, 2, 0]);
        assert_eq!(s.read_latency_us[7], 1); // 100 µs in [64, 128)
        assert_eq!(s.read_latency_us[13], 1); // 5000 µs in [4096, 8192)
        assert_eq!(s.read_latency_quantile_us(0.5), Some(4.0));
        assert_eq!(s.read_latency_quantile_us(1.0), Some(8192.0));
        assert_eq!(TierStats::default().read_latency_quantile_us(0.5), None);
    }
}
