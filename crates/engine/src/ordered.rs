//! Ordered index: a set of byte strings (encoded keys) in memcomparable
//! order, stored in packed 4 KiB leaves.
//!
//! Why packed leaves instead of `BTreeMap<Vec<u8>, _>`: an index entry costs
//! its key bytes plus a 2-byte slot (a `(s_id, sf_type)` key: 6 + 2 bytes,
//! about 11 bytes at the average fill), where a boxed key per entry costs
//! 40+ bytes. PostgreSQL's btree needs ~20-28 bytes per such entry.
//!
//! Leaves are slotted pages: entry bytes grow from the front, u16 start
//! offsets grow from the back; entries are contiguous and sorted, so an
//! entry ends where the next begins. A sorted array of the leaves' fences
//! (lower bounds; the first leaf's is empty) finds the leaf (see `Tree`).
//!
//! Concurrency: one `RwLock` per index. Readers copy a bounded batch of
//! entries out under the read lock and continue after the last one, so no
//! lock is held while the caller visits rows.

use std::ops::Bound;

use parking_lot::RwLock;

use crate::pages::{PAGE_BUF_BYTES, PageBuf};

const PAGE_BYTES: usize = PAGE_BUF_BYTES;
/// Longest entry (encoded key, plus primary key for secondary indexes).
pub(crate) const ENTRY_BYTES_MAX: usize = 1000;
/// Bulk builds fill leaves to this many bytes, leaving room for inserts.
const BUILD_FILL_BYTES: usize = PAGE_BYTES * 9 / 10;

const _: () = assert!(PAGE_BYTES <= u16::MAX as usize);
const _: () = assert!(4 * (ENTRY_BYTES_MAX + 2) <= PAGE_BYTES);

struct Leaf {
    n: usize,
    data_len: usize,
    buf: PageBuf,
}

impl Leaf {
    fn new() -> Leaf {
        Leaf { n: 0, data_len: 0, buf: PageBuf::new() }
    }

    fn slot_at(&self, i: usize) -> usize {
        PAGE_BYTES - 2 * self.n + 2 * i
    }

    fn start(&self, i: usize) -> usize {
        let at = self.slot_at(i);
        usize::from(u16::from_le_bytes([self.buf[at], self.buf[at + 1]]))
    }

    fn entry(&self, i: usize) -> &[u8] {
        let end = if i + 1 < self.n { self.start(i + 1) } else { self.data_len };
        &self.buf[self.start(i)..end]
    }

    fn free_bytes(&self) -> usize {
        PAGE_BYTES - self.data_len - 2 * self.n
    }

    fn search(&self, key: &[u8]) -> Result<usize, usize> {
        // On a cold leaf every probe misses twice (its slot, then its
        // entry), one after the other. Fetch the slot array (a few lines)
        // up front, and each step the entries of both possible next
        // probes, so the next probe's miss overlaps this comparison.
        for at in (self.slot_at(0)..PAGE_BYTES).step_by(64) {
            prefetch(&self.buf[at]);
        }
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if lo < mid {
                prefetch(&self.buf[self.start((lo + mid) / 2)]);
            }
            if mid + 1 < hi {
                prefetch(&self.buf[self.start((mid + 1 + hi) / 2)]);
            }
            match self.entry(mid).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    fn set_slot(&mut self, i: usize, start: usize) {
        let at = self.slot_at(i);
        let v = u16::try_from(start).unwrap_or(u16::MAX);
        self.buf[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn insert_at(&mut self, i: usize, key: &[u8]) {
        assert!(self.free_bytes() >= key.len() + 2, "leaf overflow");
        let len = key.len();
        let start = if i < self.n { self.start(i) } else { self.data_len };
        self.buf.copy_within(start..self.data_len, start + len);
        self.buf[start..start + len].copy_from_slice(key);
        self.data_len += len;
        // Slots move down by one to make room; slot i gets the new entry.
        let old_slots = PAGE_BYTES - 2 * self.n;
        self.buf.copy_within(old_slots..old_slots + 2 * i, old_slots - 2);
        self.n += 1;
        self.set_slot(i, start);
        for j in i + 1..self.n {
            let s = self.start(j);
            self.set_slot(j, s + len);
        }
        debug_assert!(i == 0 || self.entry(i - 1) < key);
        debug_assert!(i + 1 == self.n || self.entry(i + 1) > key);
    }

    fn remove_at(&mut self, i: usize) {
        assert!(i < self.n);
        let start = self.start(i);
        let end = if i + 1 < self.n { self.start(i + 1) } else { self.data_len };
        let len = end - start;
        self.buf.copy_within(end..self.data_len, start);
        self.data_len -= len;
        for j in i + 1..self.n {
            let s = self.start(j);
            self.set_slot(j, s - len);
        }
        let old_slots = PAGE_BYTES - 2 * self.n;
        self.buf.copy_within(old_slots..old_slots + 2 * i, old_slots + 2);
        self.n -= 1;
    }

    /// Moves the upper half of the entries into a new leaf.
    fn split(&mut self) -> Leaf {
        assert!(self.n >= 2);
        // Halve the bytes, not the count: with keys of different lengths a
        // count split can leave one half nearly as full as before.
        let half = self.data_len / 2;
        let keep = (1..self.n).find(|&k| self.start(k) >= half).unwrap_or(self.n - 1);
        self.split_at(keep)
    }

    /// Moves entries `keep..` into a new leaf (possibly empty).
    fn split_at(&mut self, keep: usize) -> Leaf {
        assert!(keep <= self.n);
        let mut right = Leaf::new();
        for i in keep..self.n {
            let e = self.entry(i).to_vec();
            let at = right.n;
            right.insert_at(at, &e);
        }
        while self.n > keep {
            let last = self.n - 1;
            self.remove_at(last);
        }
        right
    }
}

/// Hints the CPU to bring the line holding `byte` into the caches.
#[inline(always)]
fn prefetch(byte: &u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and `byte` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(std::ptr::from_ref(byte).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}

/// Bytes of a fence kept inline (zero-padded) for the leaf search.
const FENCE_PREFIX_BYTES: usize = 16;
type FencePrefix = [u8; FENCE_PREFIX_BYTES];

fn fence_prefix(key: &[u8]) -> FencePrefix {
    let mut p = [0u8; FENCE_PREFIX_BYTES];
    let n = key.len().min(FENCE_PREFIX_BYTES);
    p[..n].copy_from_slice(&key[..n]);
    p
}

/// Leaves in key order with their fences (lower bounds; the first leaf's is
/// empty). The leaf search is a binary search over `prefixes`, one
/// contiguous array of each fence's first 16 bytes: a 1M-entry index has
/// ~8k leaves, so the search reads ~128 KiB of dense, mostly cached lines
/// instead of chasing a boxed key per comparison through map nodes (which
/// was the index lookup's largest cost). Zero padding keeps prefix order
/// consistent with key order; equal prefixes fall back to the full fence.
struct Tree {
    prefixes: Vec<FencePrefix>,
    fences: Vec<Box<[u8]>>,
    leaves: Vec<Leaf>,
    entries: usize,
    /// Bytes of the entries with their slots ([`ENTRY_SLOT_BYTES`] each).
    entry_bytes: usize,
}

/// Leaf bytes an entry costs besides its own: its u16 slot.
pub(crate) const ENTRY_SLOT_BYTES: usize = 2;

impl Tree {
    fn new() -> Tree {
        Tree {
            prefixes: vec![[0; FENCE_PREFIX_BYTES]],
            fences: vec![Box::default()],
            leaves: vec![Leaf::new()],
            entries: 0,
            entry_bytes: 0,
        }
    }

    /// Index of the leaf whose range holds `key`: the last fence <= key.
    fn leaf_index(&self, key: &[u8]) -> usize {
        let wanted = fence_prefix(key);
        let (mut lo, mut hi) = (0, self.leaves.len());
        // Invariant: fences before `lo` are <= key, fences from `hi` on are > key.
        while lo < hi {
            let mid = (lo + hi) / 2;
            // As in `Leaf::search`: start both possible next probes' misses now.
            if lo < mid {
                prefetch(&self.prefixes[(lo + mid) / 2][0]);
            }
            if mid + 1 < hi {
                prefetch(&self.prefixes[(mid + 1 + hi) / 2][0]);
            }
            let at_most = match self.prefixes[mid].cmp(&wanted) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => &*self.fences[mid] <= key,
            };
            if at_most {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        debug_assert!(lo > 0, "the first fence is empty and precedes every key");
        lo.saturating_sub(1)
    }

    fn insert_leaf(&mut self, at: usize, fence: Box<[u8]>, leaf: Leaf) {
        self.prefixes.insert(at, fence_prefix(&fence));
        self.fences.insert(at, fence);
        self.leaves.insert(at, leaf);
    }

    fn insert(&mut self, key: &[u8]) -> bool {
        assert!(key.len() <= ENTRY_BYTES_MAX && !key.is_empty());
        let li = self.leaf_index(key);
        let rightmost = li + 1 == self.leaves.len();
        let leaf = &mut self.leaves[li];
        let at = match leaf.search(key) {
            Ok(_) => return false,
            Err(at) => at,
        };
        if leaf.free_bytes() >= key.len() + 2 {
            leaf.insert_at(at, key);
            self.count(key, true);
            return true;
        }
        // On the rightmost leaf, inserts near the end are an ascending load
        // (maybe slightly out of order): split at the insertion point so the
        // left leaf stays full (PostgreSQL's rightmost-split heuristic).
        // Elsewhere split in half.
        let right = if rightmost && at >= leaf.n / 2 { leaf.split_at(at) } else { leaf.split() };
        if right.n == 0 {
            let mut right = right;
            right.insert_at(0, key);
            self.insert_leaf(li + 1, key.into(), right);
            self.count(key, true);
            return true;
        }
        let right_fence: Box<[u8]> = right.entry(0).into();
        self.insert_leaf(li + 1, right_fence, right);
        // Insert again: the half that takes the key may still lack room
        // (long keys, or the rightmost split keeping the left leaf full),
        // and is split again. Each split shrinks a leaf of two or more
        // entries, and one entry always fits an otherwise empty leaf.
        self.insert(key)
    }

    fn count(&mut self, key: &[u8], added: bool) {
        if added {
            self.entries += 1;
            self.entry_bytes += key.len() + ENTRY_SLOT_BYTES;
        } else {
            self.entries -= 1;
            self.entry_bytes -= key.len() + ENTRY_SLOT_BYTES;
        }
    }

    fn remove(&mut self, key: &[u8]) -> bool {
        let li = self.leaf_index(key);
        let leaf = &mut self.leaves[li];
        let Ok(i) = leaf.search(key) else { return false };
        leaf.remove_at(i);
        let emptied = leaf.n == 0;
        self.count(key, false);
        if emptied && li > 0 {
            self.prefixes.remove(li);
            self.fences.remove(li);
            self.leaves.remove(li);
        }
        true
    }

    #[cfg(test)]
    fn contains(&self, key: &[u8]) -> bool {
        self.leaves[self.leaf_index(key)].search(key).is_ok()
    }

    /// Appends up to `limit` entries in `(from, to)` to `out` as
    /// `[u16 len][bytes]`; returns how many.
    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, limit: usize, out: &mut Vec<u8>) -> usize {
        let start_key: &[u8] = match from {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        let mut count = 0;
        // Appends the leaf's entries in range; true when the scan is done.
        let mut visit = |leaf: &Leaf| -> bool {
            let first = match from {
                Bound::Included(k) => leaf.search(k).unwrap_or_else(|i| i),
                Bound::Excluded(k) => leaf.search(k).map_or_else(|i| i, |i| i + 1),
                Bound::Unbounded => 0,
            };
            for i in first..leaf.n {
                let e = leaf.entry(i);
                let past = match to {
                    Bound::Included(k) => e > k,
                    Bound::Excluded(k) => e >= k,
                    Bound::Unbounded => false,
                };
                if past || count == limit {
                    return true;
                }
                out.extend_from_slice(&u16::try_from(e.len()).unwrap_or(u16::MAX).to_le_bytes());
                out.extend_from_slice(e);
                count += 1;
            }
            false
        };
        for leaf in &self.leaves[self.leaf_index(start_key)..] {
            if visit(leaf) {
                break;
            }
        }
        count
    }
}

pub(crate) struct OrderedIndex {
    tree: RwLock<Tree>,
}

impl Default for OrderedIndex {
    fn default() -> OrderedIndex {
        OrderedIndex::new()
    }
}

/// Iterates a batch filled by [`OrderedIndex::scan`].
pub(crate) fn batch_entries(batch: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at + 2 > batch.len() {
            return None;
        }
        let len = usize::from(u16::from_le_bytes([batch[at], batch[at + 1]]));
        let e = &batch[at + 2..at + 2 + len];
        at += 2 + len;
        Some(e)
    })
}

impl OrderedIndex {
    pub(crate) fn new() -> OrderedIndex {
        OrderedIndex { tree: RwLock::new(Tree::new()) }
    }

    /// Builds from strictly increasing keys (recovery, CREATE INDEX).
    pub(crate) fn from_sorted<'a>(keys: impl Iterator<Item = &'a [u8]>) -> OrderedIndex {
        let mut tree =
            Tree { prefixes: Vec::new(), fences: Vec::new(), leaves: Vec::new(), entries: 0, entry_bytes: 0 };
        let mut leaf = Leaf::new();
        let mut fence: Box<[u8]> = Box::default();
        let mut prev: Option<&[u8]> = None;
        for key in keys {
            assert!(prev.is_none_or(|p| p < key), "from_sorted needs strictly increasing keys");
            prev = Some(key);
            if leaf.data_len + 2 * leaf.n + key.len() + 2 > BUILD_FILL_BYTES && leaf.n > 0 {
                let full = std::mem::replace(&mut leaf, Leaf::new());
                let at = tree.leaves.len();
                tree.insert_leaf(at, std::mem::replace(&mut fence, key.into()), full);
            }
            let at = leaf.n;
            leaf.insert_at(at, key);
            tree.count(key, true);
        }
        let at = tree.leaves.len();
        tree.insert_leaf(at, fence, leaf);
        OrderedIndex { tree: RwLock::new(tree) }
    }

    /// Inserts; false if present.
    pub(crate) fn insert(&self, key: &[u8]) -> bool {
        self.tree.write().insert(key)
    }

    #[cfg(test)]
    pub(crate) fn remove(&self, key: &[u8]) -> bool {
        self.tree.write().remove(key)
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.tree.read().contains(key)
    }

    pub(crate) fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, limit: usize, out: &mut Vec<u8>) -> usize {
        self.tree.read().scan(from, to, limit, out)
    }

    /// Runs `f` with exclusive access (check-and-insert for UNIQUE).
    pub(crate) fn with_write<R>(&self, f: impl FnOnce(&mut IndexWriter<'_>) -> R) -> R {
        let mut tree = self.tree.write();
        f(&mut IndexWriter { tree: &mut tree })
    }

    pub(crate) fn len(&self) -> usize {
        self.tree.read().entries
    }

    /// (entries, their bytes with slots): what the entries occupy, kept
    /// as they come and go (free space in leaves is not counted).
    pub(crate) fn usage(&self) -> (usize, usize) {
        let tree = self.tree.read();
        (tree.entries, tree.entry_bytes)
    }

    /// Calls `f` with every entry in order, under the read lock, without
    /// copying them out (building a structure over a whole index).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&[u8])) {
        let tree = self.tree.read();
        for leaf in &tree.leaves {
            for i in 0..leaf.n {
                f(leaf.entry(i));
            }
        }
    }

    /// Memory held: leaf pages plus fences and map nodes (estimated).
    pub(crate) fn bytes(&self) -> u64 {
        let tree = self.tree.read();
        let per_leaf = PAGE_BYTES + std::mem::size_of::<Leaf>() + FENCE_PREFIX_BYTES + std::mem::size_of::<Box<[u8]>>();
        let fences: usize = tree.fences.iter().map(|k| k.len()).sum();
        (tree.leaves.len() * per_leaf + fences) as u64
    }
}

pub(crate) struct IndexWriter<'a> {
    tree: &'a mut Tree,
}

impl IndexWriter<'_> {
    pub(crate) fn insert(&mut self, key: &[u8]) -> bool {
        self.tree.insert(key)
    }
    pub(crate) fn remove(&mut self, key: &[u8]) -> bool {
        self.tree.remove(key)
    }
    pub(crate) fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, limit: usize, out: &mut Vec<u8>) -> usize {
        self.tree.scan(from, to, limit, out)
    }
}

/// The smallest byte string greater than every string with prefix `p`
/// (None if there is none, i.e. `p` is all 0xFF).
pub(crate) fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut out = p.to_vec();
    prefix_successor_in_place(&mut out).then_some(out)
}

/// [`prefix_successor`] into the same buffer (no allocation); false (and
/// `p` emptied) when there is none.
pub(crate) fn prefix_successor_in_place(p: &mut Vec<u8>) -> bool {
    while let Some(last) = p.pop() {
        if last != 0xFF {
            p.push(last + 1);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn collect(index: &OrderedIndex, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        index.scan(from, to, usize::MAX, &mut out);
        batch_entries(&out).map(<[u8]>::to_vec).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn matches_btreeset(ops in proptest::collection::vec((any::<bool>(), proptest::collection::vec(0u8..4, 1..40)), 1..600)) {
            let index = OrderedIndex::new();
            let mut model = BTreeSet::new();
            for (insert, key) in &ops {
                if *insert {
                    prop_assert_eq!(index.insert(key), model.insert(key.clone()));
                } else {
                    prop_assert_eq!(index.remove(key), model.remove(key));
                }
            }
            prop_assert_eq!(index.len(), model.len());
            let all = collect(&index, Bound::Unbounded, Bound::Unbounded);
            prop_assert_eq!(&all, &model.iter().cloned().collect::<Vec<_>>());
            let (lo, hi) = (vec![1u8], vec![2u8, 1]);
            let range = collect(&index, Bound::Included(&lo), Bound::Excluded(&hi));
            let expect: Vec<Vec<u8>> = model.range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Excluded(&hi))).cloned().collect();
            prop_assert_eq!(range, expect);
            for key in model.iter().take(20) {
                prop_assert!(index.contains(key));
            }
            let rebuilt = OrderedIndex::from_sorted(model.iter().map(Vec::as_slice));
            prop_assert_eq!(collect(&rebuilt, Bound::Unbounded, Bound::Unbounded), all);
        }
    }

    #[test]
    fn fences_sharing_their_inline_prefix_still_order_by_the_full_key() {
        // 20 shared bytes (zeros, like padding) then a distinguishing tail:
        // every fence prefix is equal, so the leaf search decides on full keys.
        let key = |i: u32, shared: u8| {
            let mut k = vec![shared; 20];
            k.extend_from_slice(&i.to_be_bytes());
            k
        };
        let index = OrderedIndex::new();
        let mut model = BTreeSet::new();
        for i in (0u32..20_000).map(|i| i.wrapping_mul(7919) % 20_000) {
            for shared in [0u8, 1] {
                assert!(index.insert(&key(i, shared)));
                model.insert(key(i, shared));
            }
        }
        // A key that is a proper prefix of others, with trailing zeros.
        assert!(index.insert(&[0u8; 20]));
        model.insert(vec![0u8; 20]);
        for i in (0u32..20_000).step_by(3) {
            assert!(index.remove(&key(i, 0)));
            model.remove(&key(i, 0));
        }
        assert_eq!(collect(&index, Bound::Unbounded, Bound::Unbounded), model.iter().cloned().collect::<Vec<_>>());
        let (lo, hi) = (key(500, 0), key(900, 1));
        let expect: Vec<Vec<u8>> =
            model.range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Excluded(&hi))).cloned().collect();
        assert_eq!(collect(&index, Bound::Included(&lo), Bound::Excluded(&hi)), expect);
        for k in model.iter().step_by(97) {
            assert!(index.contains(k));
        }
    }

    #[test]
    fn long_and_short_keys_never_overflow_a_leaf() {
        // A split by entry count can leave the half that takes the key as
        // full as before when key lengths differ; ascending inserts on the
        // rightmost leaf kept the left half full. Both panicked ("leaf
        // overflow") before inserts re-split until the key fits.
        let index = OrderedIndex::new();
        let mut model = BTreeSet::new();
        let mut x = 7u32;
        for i in 0u32..6000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let len = if x.is_multiple_of(5) { ENTRY_BYTES_MAX } else { 1 + (x % 7) as usize };
            let mut key = (if i % 2 == 0 { i } else { x % 3000 }).to_be_bytes().to_vec();
            key.resize(len.max(4), (x % 256) as u8);
            assert_eq!(index.insert(&key), model.insert(key));
        }
        assert_eq!(collect(&index, Bound::Unbounded, Bound::Unbounded), model.iter().cloned().collect::<Vec<_>>());
    }

    #[test]
    fn many_sequential_and_scan_batches() {
        let index = OrderedIndex::new();
        for i in 0u32..50_000 {
            assert!(index.insert(&i.to_be_bytes()));
        }
        let mut out = Vec::new();
        let n = index.scan(Bound::Excluded(&100u32.to_be_bytes()), Bound::Unbounded, 10, &mut out);
        assert_eq!(n, 10);
        let first: Vec<&[u8]> = batch_entries(&out).collect();
        assert_eq!(first[0], &101u32.to_be_bytes());
        // ~6 bytes per entry at 50-100% fill.
        assert!(index.bytes() < 50_000 * 14, "{} bytes", index.bytes());
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
    }
}
