//! Hash probe of a unique secondary index: from the hash of a whole index
//! key to the hashes of the primary keys whose index entries carry it.
//!
//! Why: an equality lookup on a unique secondary key (TATP's `sub_nbr`)
//! walked the ordered index, which on a 1M-entry index misses the cache
//! about fifteen times (the bottom of the fence search, the leaf's slots,
//! one entry per binary-search step) before the primary lookup misses twice
//! more. Through the probe it misses three times: the probe's bucket, the
//! primary bucket, the row. Range scans still use the ordered index.
//!
//! What it holds: one (key hash, pk hash) pair per entry of the ordered
//! index, a multiset kept in step with it (an entry added to the tree adds
//! its pair, an entry removed removes one). It is only ever a hint: readers
//! recheck every candidate row's visible version against the key, so a hash
//! collision costs a probe and never returns a wrong row. What must hold is
//! that no entry of the tree lacks its pair.
//!
//! Layout: open addressing over 64-byte buckets of five slots, linear
//! probing across buckets; about 17 bytes per pair at the usual load (the
//! ordered index spends ~25 per `sub_nbr` entry). A slot is a 32-bit tag
//! (the key hash's high half with bit 1 set, so 0 = empty and 1 = removed
//! never collide with it) and the 64-bit pk hash. The tag also places the
//! pair, so a rebuild needs nothing else. A lookup stops at the first
//! bucket with an empty slot; removal leaves a tombstone, and growth (or a
//! rebuild when tombstones pile up) drops them.

use crate::pages::ZeroedArray;

const SLOTS: usize = 5;
const EMPTY: u32 = 0;
const REMOVED: u32 = 1;
/// Rebuild when live plus removed slots pass 7/8 of capacity.
const LOAD_NUM: usize = 7;
const LOAD_DEN: usize = 8;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket {
    tags: [u32; SLOTS],
    _pad: u32,
    pks: [u64; SLOTS],
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

/// Bytes a pair occupies in a full bucket (memory accounting).
pub(crate) const PAIR_BYTES: usize = std::mem::size_of::<Bucket>() / SLOTS;

#[inline]
fn stored(key_hash: u64) -> u32 {
    ((key_hash >> 32) as u32) | 2
}

/// Pairs (key hash, pk hash) of one unique secondary index.
pub(crate) struct ProbeTable {
    buckets: ZeroedArray<Bucket>,
    live: usize,
    removed: usize,
}

impl Default for ProbeTable {
    fn default() -> ProbeTable {
        ProbeTable::new()
    }
}

impl ProbeTable {
    pub(crate) fn new() -> ProbeTable {
        ProbeTable { buckets: ZeroedArray::empty(), live: 0, removed: 0 }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn bytes(&self) -> u64 {
        (self.buckets.len() * std::mem::size_of::<Bucket>()) as u64
    }

    /// First bucket of a tag's sequence.
    #[inline]
    fn start(&self, want: u32) -> usize {
        // Above the low bits, which the tag's form fixes.
        ((want >> 2) as usize) & (self.buckets.len() - 1)
    }

    /// Calls `f` with the pk hash of every pair whose key hash equals
    /// `key_hash` (and of the rare pair that only collides with it).
    #[inline]
    pub(crate) fn candidates(&self, key_hash: u64, mut f: impl FnMut(u64)) {
        if self.buckets.is_empty() {
            return;
        }
        let want = stored(key_hash);
        let mask = self.buckets.len() - 1;
        let mut b = self.start(want);
        for _ in 0..self.buckets.len() {
            let bucket = &self.buckets[b];
            for i in 0..SLOTS {
                if bucket.tags[i] == want {
                    f(bucket.pks[i]);
                }
            }
            if bucket.tags.contains(&EMPTY) {
                return;
            }
            b = (b + 1) & mask;
        }
    }

    pub(crate) fn insert(&mut self, key_hash: u64, pk_hash: u64) {
        self.reserve(1);
        self.place(stored(key_hash), pk_hash);
        self.live += 1;
    }

    /// Places a pair in the first free or removed slot of its sequence.
    fn place(&mut self, want: u32, pk_hash: u64) {
        let mask = self.buckets.len() - 1;
        let mut b = self.start(want);
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(i) = bucket.tags.iter().position(|&k| k == EMPTY || k == REMOVED) {
                if bucket.tags[i] == REMOVED {
                    self.removed -= 1;
                }
                bucket.tags[i] = want;
                bucket.pks[i] = pk_hash;
                return;
            }
            b = (b + 1) & mask;
        }
    }

    /// Removes one pair equal to (key_hash, pk_hash); false if none is held.
    pub(crate) fn remove(&mut self, key_hash: u64, pk_hash: u64) -> bool {
        if self.buckets.is_empty() {
            return false;
        }
        let want = stored(key_hash);
        let mask = self.buckets.len() - 1;
        let mut b = self.start(want);
        for _ in 0..self.buckets.len() {
            let bucket = &mut self.buckets[b];
            if let Some(i) = (0..SLOTS).find(|&i| bucket.tags[i] == want && bucket.pks[i] == pk_hash) {
                bucket.tags[i] = REMOVED;
                bucket.pks[i] = 0;
                self.live -= 1;
                self.removed += 1;
                return true;
            }
            if bucket.tags.contains(&EMPTY) {
                return false;
            }
            b = (b + 1) & mask;
        }
        false
    }

    /// Makes room for `more` pairs, rebuilding without tombstones (and
    /// larger if the live pairs need it) when the load passes its limit.
    pub(crate) fn reserve(&mut self, more: usize) {
        let used = self.live + self.removed + more;
        if used * LOAD_DEN <= self.buckets.len() * SLOTS * LOAD_NUM {
            return;
        }
        let need = self.live + more;
        let mut buckets = 1usize;
        // The smallest power of two at most 13/16 full: a bulk build stays
        // dense, and at least 1/16 of the slots are left for inserts and
        // tombstones before the next rebuild (so churn near the limit
        // cannot rebuild at every insert).
        while buckets * SLOTS * 13 < need * 16 {
            buckets *= 2;
        }
        // SAFETY: all-zero slots are empty slots.
        let old = std::mem::replace(&mut self.buckets, unsafe { ZeroedArray::new(buckets) });
        self.removed = 0;
        for bucket in old.iter() {
            for i in 0..SLOTS {
                let k = bucket.tags[i];
                if k != EMPTY && k != REMOVED {
                    self.place(k, bucket.pks[i]);
                }
            }
        }
    }

    /// Every pair held, as (tag, pk hash) (verification).
    pub(crate) fn pairs(&self) -> Vec<(u32, u64)> {
        let mut out = Vec::with_capacity(self.live);
        for bucket in self.buckets.iter() {
            for i in 0..SLOTS {
                if bucket.tags[i] != EMPTY && bucket.tags[i] != REMOVED {
                    out.push((bucket.tags[i], bucket.pks[i]));
                }
            }
        }
        out
    }

    /// The tag of a key hash, as `pairs` reports it.
    pub(crate) fn tag_of(key_hash: u64) -> u32 {
        stored(key_hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn found(t: &ProbeTable, k: u64) -> Vec<u64> {
        let mut v = Vec::new();
        t.candidates(k, |p| v.push(p));
        v.sort_unstable();
        v
    }

    proptest! {
        /// Against a model multiset: every held pair is found, removal
        /// takes exactly one copy, tombstones and rebuilds lose nothing.
        #[test]
        fn matches_a_multiset(ops in proptest::collection::vec((any::<bool>(), 0u64..40, 0u64..6), 1..2000)) {
            let mut t = ProbeTable::new();
            let mut model: Vec<(u64, u64)> = Vec::new();
            for (add, k, p) in ops {
                // Spread keys over the hash space; some differ only in bits
                // the tag drops (0 and 1 of its half, all of the low half).
                let k = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) & !(3u64 << 32)) | ((k & 3) << 32) | (k & 1);
                if add {
                    t.insert(k, p);
                    model.push((k, p));
                } else {
                    let at = model.iter().position(|&m| m == (k, p));
                    prop_assert_eq!(t.remove(k, p), at.is_some());
                    if let Some(at) = at {
                        model.swap_remove(at);
                    }
                }
                prop_assert_eq!(t.len(), model.len());
            }
            for &(k, _) in &model {
                let mut want: Vec<u64> = model.iter().filter(|m| stored(m.0) == stored(k)).map(|m| m.1).collect();
                want.sort_unstable();
                prop_assert_eq!(found(&t, k), want);
            }
        }
    }

    #[test]
    fn a_bulk_build_stays_dense() {
        let mut t = ProbeTable::new();
        let n = 100_000u64;
        t.reserve(n as usize);
        for k in 0..n {
            t.insert(k.wrapping_mul(0x9E37_79B9_7F4A_7C15), k);
        }
        // Dense is 64 / 5 / (13/16) = 15.8 bytes per pair; power-of-two
        // sizes may double that.
        let per_pair = t.bytes() as f64 / n as f64;
        assert!(per_pair < 32.0, "{per_pair:.1} bytes per pair");
        assert_eq!(found(&t, 5u64.wrapping_mul(0x9E37_79B9_7F4A_7C15)), vec![5]);
    }

    #[test]
    fn tombstones_are_reused_and_rebuilt_away() {
        let mut t = ProbeTable::new();
        for round in 0..50u64 {
            for k in 0..100u64 {
                t.insert(k << 32, round);
            }
            for k in 0..100u64 {
                assert!(t.remove(k << 32, round));
            }
        }
        assert_eq!(t.len(), 0);
        assert!(t.bytes() <= 64 * 1024, "churn grew the table to {} bytes", t.bytes());
        t.insert(7 << 32, 1);
        assert_eq!(found(&t, 7 << 32), vec![1]);
    }
}
