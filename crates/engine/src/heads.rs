//! The primary index's hash table: chain heads (version pointers) in
//! 64-byte buckets that hold their own tags.
//!
//! Why not hashbrown's `HashTable`: a swiss table keeps its control bytes and
//! its slots in two arrays, so a lookup in a table larger than the caches
//! misses twice (control group, then slot) before it reaches the row, and
//! the row is a third miss. Here a bucket is one cache line: 7 one-byte tags,
//! an overflow flag, then the 7 pointers. A lookup misses once for the bucket
//! and once for the row; a point SELECT on a 1M-row table spent about a third
//! of its lookup time on each of the three misses before.
//!
//! Tags are the hash's top 7 bits with the high bit set (0 = empty slot).
//! Probing is linear over buckets. A bucket's overflow flag says an insert
//! once passed it full, so a lookup that finds no match in a bucket without
//! the flag stops there. Removal empties the slot and leaves flags set (they
//! only lengthen probes, and growth rebuilds them). Keys are not stored:
//! equality and rehashing read them from the rows, as the callers supply.

use crate::pages::ZeroedArray;
use crate::version::VPtr;

const SLOTS: usize = 7;
/// Grow when more than 7/8 of the slots are in use.
const LOAD_NUM: usize = 7;
const LOAD_DEN: usize = 8;
const LOW_BYTES: u64 = 0x0101_0101_0101_0101;
/// The tag bytes' high bits (byte 7 is the overflow flag).
const TAG_HIGH_BITS: u64 = 0x0080_8080_8080_8080;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket {
    /// Bytes 0..7: tags; byte 7: overflow flag.
    meta: [u8; 8],
    slots: [Option<VPtr>; SLOTS],
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

/// All zero bytes: `None` is a null pointer, so [`ZeroedArray`] makes empty
/// tables without writing them.
#[cfg(test)]
const EMPTY_BUCKET: Bucket = Bucket { meta: [0; 8], slots: [None; SLOTS] };

impl Bucket {
    /// Slots whose tag equals `tag`, as a bit set of byte positions (bit 8i+7
    /// for slot i). May include false positives, never misses a match.
    #[inline]
    fn matches(&self, tag: u8) -> u64 {
        let word = u64::from_le_bytes(self.meta);
        let x = word ^ (LOW_BYTES * u64::from(tag));
        x.wrapping_sub(LOW_BYTES) & !x & TAG_HIGH_BITS
    }

    #[inline]
    fn overflowed(&self) -> bool {
        self.meta[SLOTS] != 0
    }

    fn free_slot(&self) -> Option<usize> {
        self.meta[..SLOTS].iter().position(|&t| t == 0)
    }
}

#[inline]
fn tag_of(hash: u64) -> u8 {
    ((hash >> 57) as u8) | 0x80
}

/// Iterates the byte positions set in a [`Bucket::matches`] result.
#[inline]
fn positions(mut bits: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if bits == 0 {
            return None;
        }
        let i = (bits.trailing_zeros() / 8) as usize;
        bits &= bits - 1;
        Some(i)
    })
}

/// A set of chain heads addressed by key hash.
pub(crate) struct HeadTable {
    buckets: ZeroedArray<Bucket>,
    len: usize,
}

impl Default for HeadTable {
    fn default() -> HeadTable {
        HeadTable::new()
    }
}

impl HeadTable {
    pub(crate) fn new() -> HeadTable {
        HeadTable { buckets: ZeroedArray::empty(), len: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slots allocated (memory accounting).
    pub(crate) fn capacity(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    /// Bytes per slot, tags included (memory accounting).
    pub(crate) const SLOT_BYTES: usize = std::mem::size_of::<Bucket>() / SLOTS;

    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    /// (bucket, slot) of the entry with `hash` that `eq` accepts.
    #[inline]
    fn position(&self, hash: u64, mut eq: impl FnMut(&VPtr) -> bool) -> Option<(usize, usize)> {
        if self.buckets.is_empty() {
            return None;
        }
        let tag = tag_of(hash);
        let mask = self.mask();
        let mut b = (hash as usize) & mask;
        for _ in 0..self.buckets.len() {
            let bucket = &self.buckets[b];
            for i in positions(bucket.matches(tag)) {
                if let Some(v) = &bucket.slots[i]
                    && bucket.meta[i] == tag
                    && eq(v)
                {
                    return Some((b, i));
                }
            }
            if !bucket.overflowed() {
                return None;
            }
            b = (b + 1) & mask;
        }
        None
    }

    #[inline(always)]
    pub(crate) fn find(&self, hash: u64, eq: impl FnMut(&VPtr) -> bool) -> Option<&VPtr> {
        let (b, i) = self.position(hash, eq)?;
        self.buckets[b].slots[i].as_ref()
    }

    pub(crate) fn find_mut(&mut self, hash: u64, eq: impl FnMut(&VPtr) -> bool) -> Option<&mut VPtr> {
        let (b, i) = self.position(hash, eq)?;
        self.buckets[b].slots[i].as_mut()
    }

    /// Removes the entry `eq` accepts; returns it.
    pub(crate) fn remove(&mut self, hash: u64, eq: impl FnMut(&VPtr) -> bool) -> Option<VPtr> {
        let (b, i) = self.position(hash, eq)?;
        let bucket = &mut self.buckets[b];
        bucket.meta[i] = 0;
        self.len -= 1;
        bucket.slots[i].take()
    }

    /// Inserts `v` (its key must be absent). `hasher` recomputes the hash of
    /// an entry when the table grows.
    pub(crate) fn insert_unique(&mut self, hash: u64, v: VPtr, hasher: impl Fn(&VPtr) -> u64) {
        self.reserve(1, &hasher);
        self.place(hash, v);
        self.len += 1;
    }

    fn place(&mut self, hash: u64, v: VPtr) {
        let mask = self.mask();
        let mut b = (hash as usize) & mask;
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(i) = bucket.free_slot() {
                bucket.meta[i] = tag_of(hash);
                bucket.slots[i] = Some(v);
                return;
            }
            bucket.meta[SLOTS] = 1;
            b = (b + 1) & mask;
        }
    }

    /// Makes room for `more` entries without growing again.
    pub(crate) fn reserve(&mut self, more: usize, hasher: impl Fn(&VPtr) -> u64) {
        let need = self.len + more;
        if need * LOAD_DEN <= self.capacity() * LOAD_NUM {
            return;
        }
        let mut buckets = 1usize;
        while buckets * SLOTS * LOAD_NUM < need * LOAD_DEN {
            buckets *= 2;
        }
        // SAFETY: the all-zero bucket is the empty bucket (null pointers are None).
        let old = std::mem::replace(&mut self.buckets, unsafe { ZeroedArray::new(buckets) });
        for bucket in old.iter() {
            for v in bucket.slots.iter().flatten() {
                self.place(hasher(v), *v);
            }
        }
    }

    /// Empties the table, yielding every entry.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = VPtr> {
        self.len = 0;
        let buckets = std::mem::replace(&mut self.buckets, ZeroedArray::empty());
        (0..buckets.len()).flat_map(move |b| buckets[b].slots.into_iter().flatten())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &VPtr> {
        self.buckets.iter().flat_map(|b| b.slots.iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn ptr(key: u64) -> VPtr {
        VPtr::fake_for_test(key as usize)
    }

    fn key_of(v: &VPtr) -> u64 {
        v.fake_id_for_test() as u64
    }

    /// A deliberately poor hash (many equal tags and home buckets) so that
    /// probing, overflow flags and false tag matches are exercised.
    fn hash(key: u64) -> u64 {
        (key % 13).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (key % 3)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64),
        Remove(u64),
        Replace(u64),
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec(
            prop_oneof![(0u64..300).prop_map(Op::Insert), (0u64..300).prop_map(Op::Remove), (0u64..300).prop_map(Op::Replace)], 1..600)) {
            let mut table = HeadTable::new();
            let mut model: HashMap<u64, u64> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k) => {
                        if let std::collections::hash_map::Entry::Vacant(e) = model.entry(k) {
                            e.insert(k);
                            table.insert_unique(hash(k), ptr(k), |v| hash(key_of(v)));
                        }
                    }
                    Op::Remove(k) => {
                        let got = table.remove(hash(k), |v| key_of(v) == k).map(|v| key_of(&v));
                        prop_assert_eq!(got, model.remove(&k));
                    }
                    Op::Replace(k) => {
                        // The slot is found again and rewritten in place.
                        if let Some(slot) = table.find_mut(hash(k), |v| key_of(v) == k) {
                            *slot = ptr(k);
                        }
                    }
                }
                prop_assert_eq!(table.len(), model.len());
            }
            for k in 0..300 {
                let found = table.find(hash(k), |v| key_of(v) == k).map(key_of);
                prop_assert_eq!(found, model.get(&k).copied());
            }
            let mut all: Vec<u64> = table.iter().map(key_of).collect();
            all.sort_unstable();
            let mut expected: Vec<u64> = model.keys().copied().collect();
            expected.sort_unstable();
            prop_assert_eq!(all, expected);
            prop_assert!(table.len() * LOAD_DEN <= table.capacity() * LOAD_NUM);
        }
    }

    #[test]
    fn tag_matches_find_every_equal_tag() {
        let mut b = EMPTY_BUCKET;
        b.meta = [0x81, 0x90, 0x81, 0, 0xFF, 0x81, 0x80, 1];
        let found: Vec<usize> = positions(b.matches(0x81)).filter(|&i| b.meta[i] == 0x81).collect();
        assert_eq!(found, vec![0, 2, 5]);
        assert_eq!(positions(b.matches(0x80)).filter(|&i| b.meta[i] == 0x80).collect::<Vec<_>>(), vec![6]);
        assert!(b.overflowed());
    }
}
