//! The DRAM index: key hash → location of the key's newest record, 8 bytes
//! per slot, no key stored.
//!
//! A slot is `tag:22 | retention:2 | location:40` (retention 3: an Evictable
//! record read since written, see `Slot`; location in 8-byte units
//! of the file, so up to 8 TiB). Slot value 0 means empty: location 0 is the
//! superblock, never a record. The hash picks a shard (a `RwLock` over an
//! open-addressed table) and a tag; the tag also picks the home slot inside
//! the shard (`tag * slots >> tag_bits`), so the home of any stored slot can
//! be computed from the slot alone. That is what lets the table use Robin
//! Hood probing with early exit, delete by shifting entries back (no
//! tombstones that would pile up under a cache's churn), and be resized or
//! filtered without reading a single key from the device.
//!
//! Tags collide (two keys of one shard with one tag): a tag match is only a
//! candidate, the caller reads the record and compares the full key.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::Retention;
use crate::format::{retention_code, retention_from_code};

pub(crate) const TAG_BITS: u32 = 22;
pub(crate) const LOC_BITS: u32 = 40;
pub(crate) const MAX_LOC: u64 = (1 << LOC_BITS) - 1;
const RET_SHIFT: u32 = LOC_BITS;
const TAG_SHIFT: u32 = LOC_BITS + 2;
/// Target slots per shard: small shards keep the tag's discriminating power
/// high (a false tag match costs a device read); large ones keep shards
/// filling evenly (one full shard rejects inserts while others have room).
const SHARD_SLOTS_TARGET: u64 = 8192;
const MAX_SHARD_BITS: u32 = 16;
const MIN_SHARD_SLOTS: usize = 16;
/// Robin Hood probing stays short (a few cache lines) up to here.
const MAX_LOAD_PERCENT: usize = 97;
/// Shards fill unevenly (a 10K-slot shard's occupancy varies by ~1%), so a
/// full shard may grow by 1/32 at a time from a budget of this fraction
/// (1/8) of the planned slots: DRAM goes only where a shard overflows.
const GROW_BUDGET_DIVISOR: u64 = 8;
const GROW_STEP_DIVISOR: usize = 32;

/// One index entry.
///
/// Retention code 3, which no record header carries, marks an Evictable
/// record *read since it was written* (`referenced`): reclamation rewrites
/// such a record at the head once instead of dropping it (FIFO with
/// reinsertion, a second chance). Reads that answer in place (the cache's
/// `answer`) never move a record, so without it a record read all the time
/// was dropped as soon as its region was the oldest, and came back from
/// PostgreSQL. The mark is a hint: checkpoints store the slot without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot(pub u64);

/// The retention code of an Evictable record read since it was written.
const REFERENCED_CODE: u64 = 0b11;

impl Slot {
    pub(crate) fn new(tag: u32, retention: Retention, loc: u64) -> Slot {
        assert!(loc != 0 && loc <= MAX_LOC, "location {loc} out of range");
        debug_assert!(tag < 1 << TAG_BITS);
        Slot(u64::from(tag) << TAG_SHIFT | u64::from(retention_code(retention)) << RET_SHIFT | loc)
    }

    pub(crate) fn tag(self) -> u32 {
        (self.0 >> TAG_SHIFT) as u32
    }

    pub(crate) fn retention(self) -> Retention {
        if self.referenced() {
            return Retention::Evictable;
        }
        retention_from_code(self.0 >> RET_SHIFT & 0b11).expect("codes 0 to 2 are retentions, 3 a referenced Evictable")
    }

    /// An Evictable record read since it was written.
    pub(crate) fn referenced(self) -> bool {
        self.0 >> RET_SHIFT & 0b11 == REFERENCED_CODE
    }

    /// This Evictable slot marked read (see the type's comment).
    pub(crate) fn with_referenced(self) -> Slot {
        assert_eq!(self.retention(), Retention::Evictable, "only Evictable records carry the read mark");
        Slot(self.0 | REFERENCED_CODE << RET_SHIFT)
    }

    /// The slot as a checkpoint stores it: without the read mark.
    pub(crate) fn unmarked(self) -> Slot {
        if self.referenced() { Slot(self.0 & !(REFERENCED_CODE << RET_SHIFT)) } else { self }
    }

    pub(crate) fn loc(self) -> u64 {
        self.0 & MAX_LOC
    }

    pub(crate) fn with_loc(self, loc: u64) -> Slot {
        assert!(loc != 0 && loc <= MAX_LOC);
        Slot(self.0 & !MAX_LOC | loc)
    }

    fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Recovery-only companion of a slot: a second key hash (so recovery can
/// tell keys apart without reading them back) and the record's size (so
/// superseding it adjusts the byte counters). `hash` 0: unknown (loaded from
/// a checkpoint; compare by reading the record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Aux {
    pub hash: u64,
    pub bytes: u32,
}

/// One shard: an open-addressed table of slots.
pub(crate) struct Shard {
    slots: Vec<Slot>,
    /// Parallel to `slots` while recovering, empty otherwise.
    aux: Vec<Aux>,
    len: usize,
    max_len: usize,
    tag_bits: u32,
}

impl Shard {
    fn new(slots: usize, tag_bits: u32) -> Shard {
        let n = slots.max(MIN_SHARD_SLOTS);
        Shard { slots: vec![Slot(0); n], aux: Vec::new(), len: 0, max_len: max_len_for(n), tag_bits }
    }

    fn home(&self, tag: u32) -> usize {
        ((u64::from(tag) * self.slots.len() as u64) >> self.tag_bits) as usize
    }

    fn dist(&self, idx: usize, tag: u32) -> usize {
        let n = self.slots.len();
        (idx + n - self.home(tag)) % n
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len >= self.max_len
    }

    pub(crate) fn get(&self, idx: usize) -> Slot {
        self.slots[idx]
    }

    pub(crate) fn aux(&self, idx: usize) -> Aux {
        self.aux.get(idx).copied().unwrap_or_default()
    }

    /// Slots whose tag is `tag`, in probe order (indexes stay valid until
    /// the shard is modified).
    pub(crate) fn candidates(&self, tag: u32) -> Candidates<'_> {
        Candidates { shard: self, tag, idx: self.home(tag), d: 0 }
    }

    /// The slot of the record at `loc`, if the index still points to it.
    pub(crate) fn find_loc(&self, tag: u32, loc: u64) -> Option<usize> {
        self.candidates(tag).find(|(_, s)| s.loc() == loc).map(|(i, _)| i)
    }

    /// Adds a slot; the caller checked `!is_full()` (and that the key has no slot yet).
    pub(crate) fn insert(&mut self, slot: Slot, aux: Aux) {
        assert!(!self.is_full(), "insert into a full shard");
        assert!(!slot.is_empty());
        let n = self.slots.len();
        let (mut cur, mut cur_aux) = (slot, aux);
        let mut idx = self.home(cur.tag());
        let mut d = 0;
        loop {
            let here = self.slots[idx];
            if here.is_empty() {
                self.put(idx, cur, cur_aux);
                self.len += 1;
                return;
            }
            let here_d = self.dist(idx, here.tag());
            if here_d < d {
                // Robin Hood: the entry nearer its home moves on.
                let here_aux = self.aux(idx);
                self.put(idx, cur, cur_aux);
                (cur, cur_aux, d) = (here, here_aux, here_d);
            }
            idx = (idx + 1) % n;
            d += 1;
        }
    }

    /// Points an existing slot elsewhere (same key, so same tag and home).
    pub(crate) fn replace(&mut self, idx: usize, slot: Slot, aux: Aux) {
        assert_eq!(self.slots[idx].tag(), slot.tag(), "replace must keep the tag");
        assert!(!self.slots[idx].is_empty());
        self.put(idx, slot, aux);
    }

    /// Removes a slot, shifting the entries after it back (no tombstones).
    pub(crate) fn remove(&mut self, idx: usize) -> Slot {
        let gone = self.slots[idx];
        assert!(!gone.is_empty(), "remove of an empty slot");
        let n = self.slots.len();
        let mut hole = idx;
        loop {
            let next = (hole + 1) % n;
            let s = self.slots[next];
            if s.is_empty() || self.dist(next, s.tag()) == 0 {
                self.put(hole, Slot(0), Aux::default());
                break;
            }
            let a = self.aux(next);
            self.put(hole, s, a);
            hole = next;
        }
        self.len -= 1;
        gone
    }

    /// Keeps the slots `keep` approves; returns how many went.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(Slot) -> bool) -> usize {
        let before = self.len;
        let entries = self.take_entries();
        for (slot, aux) in entries.into_iter().filter(|(s, _)| keep(*s)) {
            self.insert(slot, aux);
        }
        before - self.len
    }

    /// Rehashes into `slots` slots (never fewer than the entries need).
    pub(crate) fn resize(&mut self, slots: usize) {
        let entries = self.take_entries();
        let n = slots.max(MIN_SHARD_SLOTS).max(entries.len() * 100 / MAX_LOAD_PERCENT + 2);
        let with_aux = !self.aux.is_empty();
        self.slots = vec![Slot(0); n];
        self.aux = if with_aux { vec![Aux::default(); n] } else { Vec::new() };
        self.max_len = max_len_for(n);
        for (slot, aux) in entries {
            self.insert(slot, aux);
        }
    }

    /// Every occupied slot.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        self.slots.iter().copied().filter(|s| !s.is_empty())
    }

    /// The raw table (checkpoints store it as is).
    pub(crate) fn raw(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots.iter().map(|s| s.unmarked().0)
    }

    /// Loads a raw table written by `raw` (a checkpoint of the same layout).
    pub(crate) fn load_raw(&mut self, raw: &[u64]) -> Result<(), String> {
        if raw.len() != self.slots.len() {
            return Err(format!("{} slots in the checkpoint, {} in the shard", raw.len(), self.slots.len()));
        }
        self.slots = raw.iter().map(|&v| Slot(v)).collect();
        self.len = self.slots.iter().filter(|s| !s.is_empty()).count();
        for (i, s) in self.slots.iter().enumerate() {
            if s.is_empty() {
                continue;
            }
            // A slot farther from home than the run before it allows would
            // break early-exit lookups: the table must be a valid Robin Hood table.
            let prev_idx = (i + self.slots.len() - 1) % self.slots.len();
            let prev = self.slots[prev_idx];
            let d = self.dist(i, s.tag());
            if s.0 >> RET_SHIFT & 0b11 == 3 || (d > 0 && (prev.is_empty() || self.dist(prev_idx, prev.tag()) + 1 < d)) {
                return Err(format!("slot {i} is not a valid entry"));
            }
        }
        if self.len > self.max_len {
            return Err("more entries than the shard may hold".into());
        }
        Ok(())
    }

    pub(crate) fn enable_aux(&mut self) {
        self.aux = vec![Aux::default(); self.slots.len()];
    }

    pub(crate) fn drop_aux(&mut self) {
        self.aux = Vec::new();
    }

    fn put(&mut self, idx: usize, slot: Slot, aux: Aux) {
        self.slots[idx] = slot;
        if !self.aux.is_empty() {
            self.aux[idx] = aux;
        }
    }

    fn take_entries(&mut self) -> Vec<(Slot, Aux)> {
        let mut out = Vec::with_capacity(self.len);
        for i in 0..self.slots.len() {
            if !self.slots[i].is_empty() {
                out.push((self.slots[i], self.aux(i)));
                self.put(i, Slot(0), Aux::default());
            }
        }
        self.len = 0;
        out
    }
}

fn max_len_for(n: usize) -> usize {
    (n * MAX_LOAD_PERCENT / 100).min(n - 1)
}

/// Iterator of `Shard::candidates`.
pub(crate) struct Candidates<'a> {
    shard: &'a Shard,
    tag: u32,
    idx: usize,
    d: usize,
}

impl Iterator for Candidates<'_> {
    type Item = (usize, Slot);

    fn next(&mut self) -> Option<(usize, Slot)> {
        let n = self.shard.slots.len();
        loop {
            let s = self.shard.slots[self.idx];
            // Robin Hood early exit: an empty slot, or an entry nearer its
            // home than we are to ours, means the tag is not further on.
            if s.is_empty() || self.shard.dist(self.idx, s.tag()) < self.d || self.d >= n {
                return None;
            }
            let here = self.idx;
            self.idx = (self.idx + 1) % n;
            self.d += 1;
            if s.tag() == self.tag {
                return Some((here, s));
            }
        }
    }
}

/// The sharded index.
pub(crate) struct Index {
    shards: Box<[RwLock<Shard>]>,
    shard_bits: u32,
    tag_bits: u32,
    /// Slots full shards may still add.
    grow_budget: AtomicU64,
    /// The slots last planned for (`plan`).
    planned: AtomicU64,
}

/// How an index of `total_slots` is cut into shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub shard_bits: u32,
    pub slots_per_shard: usize,
}

impl Layout {
    pub(crate) fn for_slots(total_slots: u64) -> Layout {
        let mut shard_bits = 0;
        while shard_bits < MAX_SHARD_BITS && total_slots >> (shard_bits + 1) >= SHARD_SLOTS_TARGET {
            shard_bits += 1;
        }
        let per = total_slots.div_ceil(1 << shard_bits);
        Layout { shard_bits, slots_per_shard: usize::try_from(per).unwrap_or(usize::MAX).max(MIN_SHARD_SLOTS) }
    }
}

impl Index {
    pub(crate) fn new(layout: Layout) -> Index {
        Index::with_tag_bits(layout, TAG_BITS)
    }

    /// `tag_bits` below 22 only in tests, to force tag collisions.
    pub(crate) fn with_tag_bits(layout: Layout, tag_bits: u32) -> Index {
        assert!(tag_bits <= TAG_BITS && layout.shard_bits <= MAX_SHARD_BITS);
        let shards = (0..1usize << layout.shard_bits)
            .map(|_| RwLock::new(Shard::new(layout.slots_per_shard, tag_bits)))
            .collect();
        let planned = AtomicU64::new(layout.slots_per_shard as u64 * (1u64 << layout.shard_bits));
        Index { shards, shard_bits: layout.shard_bits, tag_bits, grow_budget: AtomicU64::new(0), planned }
    }

    /// Sets the growth budget for an index planned at `planned` slots (what
    /// shards already grew past the plan counts against it).
    pub(crate) fn plan(&self, planned: u64) {
        let have: u64 = self.shards.iter().map(|s| s.read().capacity() as u64).sum();
        let budget = (planned + planned / GROW_BUDGET_DIVISOR).saturating_sub(have.max(planned));
        self.grow_budget.store(budget, Ordering::Relaxed);
        self.planned.store(planned, Ordering::Relaxed);
    }

    pub(crate) fn planned(&self) -> u64 {
        self.planned.load(Ordering::Relaxed)
    }

    /// Grows a full shard by one step if the budget allows; false if not.
    pub(crate) fn grow_full(&self, shard: &mut Shard) -> bool {
        let step = (shard.capacity() / GROW_STEP_DIVISOR).max(MIN_SHARD_SLOTS) as u64;
        let took = self.grow_budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(step));
        if took.is_err() {
            return false;
        }
        shard.resize(shard.capacity() + step as usize);
        true
    }

    pub(crate) fn shard_bits(&self) -> u32 {
        self.shard_bits
    }

    pub(crate) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// (shard, tag) of a key hash: disjoint bit ranges from the top.
    pub(crate) fn place(&self, hash: u64) -> (usize, u32) {
        let tag = (hash >> (64 - self.tag_bits)) as u32;
        let shard = if self.shard_bits == 0 { 0 } else { (hash << TAG_BITS >> (64 - self.shard_bits)) as usize };
        (shard, tag)
    }

    pub(crate) fn shard(&self, i: usize) -> &RwLock<Shard> {
        &self.shards[i]
    }

    /// Every shard, read-locked in order (one consistent picture).
    pub(crate) fn read_all(&self) -> Vec<RwLockReadGuard<'_, Shard>> {
        self.shards.iter().map(|s| s.read()).collect()
    }

    /// Every shard, write-locked in order.
    pub(crate) fn write_all(&self) -> Vec<RwLockWriteGuard<'_, Shard>> {
        self.shards.iter().map(|s| s.write()).collect()
    }

    /// Bytes of DRAM the slot tables hold.
    pub(crate) fn bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.read().capacity() as u64 * 8).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn slot(tag: u32, loc: u64) -> Slot {
        Slot::new(tag, Retention::Evictable, loc)
    }

    /// Checks every entry is reachable by lookup and the count is right.
    fn check(shard: &Shard, model: &HashMap<u64, u32>) {
        assert_eq!(shard.len(), model.len());
        for (&loc, &tag) in model {
            assert!(shard.find_loc(tag, loc).is_some(), "loc {loc} tag {tag} lost");
        }
    }

    #[test]
    fn slot_fields() {
        let s = Slot::new((1 << TAG_BITS) - 1, Retention::Durable, MAX_LOC);
        assert_eq!((s.tag(), s.retention(), s.loc()), ((1 << TAG_BITS) - 1, Retention::Durable, MAX_LOC));
        let t = s.with_loc(5);
        assert_eq!((t.tag(), t.retention(), t.loc()), (s.tag(), Retention::Durable, 5));
    }

    #[test]
    fn colliding_tags_insert_probe_remove() {
        // Two tag bits: four tags for 64 slots, everything collides.
        let mut shard = Shard::new(64, 2);
        let mut model = HashMap::new();
        let mut rng = 0x9e37_79b9_u64;
        let mut next_loc = 1u64;
        for round in 0..4000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let tag = (rng % 4) as u32;
            if rng >> 8 & 1 == 0 && !shard.is_full() {
                shard.insert(slot(tag, next_loc), Aux::default());
                model.insert(next_loc, tag);
                next_loc += 1;
            } else if let Some((&loc, &tag)) = model.iter().nth((rng >> 16) as usize % model.len().max(1)) {
                let idx = shard.find_loc(tag, loc).expect("present");
                assert_eq!(shard.remove(idx).loc(), loc);
                model.remove(&loc);
            }
            if round % 97 == 0 {
                check(&shard, &model);
                for tag in 0..4 {
                    let got = shard.candidates(tag).count();
                    assert_eq!(got, model.values().filter(|&&t| t == tag).count(), "tag {tag}");
                }
            }
        }
        check(&shard, &model);
    }

    #[test]
    fn full_shard_says_so_and_resize_keeps_entries() {
        let mut shard = Shard::new(32, 3);
        let mut model = HashMap::new();
        let mut loc = 1;
        while !shard.is_full() {
            shard.insert(slot((loc % 8) as u32, loc), Aux { hash: loc, bytes: 0 });
            model.insert(loc, (loc % 8) as u32);
            loc += 1;
        }
        assert_eq!(shard.len(), max_len_for(32));
        check(&shard, &model);
        shard.resize(200);
        assert!(!shard.is_full() && shard.capacity() == 200);
        check(&shard, &model);
        let gone = shard.retain(|s| s.loc() % 2 == 0);
        model.retain(|l, _| l % 2 == 0);
        assert_eq!(gone, max_len_for(32) - model.len());
        check(&shard, &model);
        let mut copy = Shard::new(200, 3);
        copy.load_raw(&shard.raw().collect::<Vec<_>>()).expect("valid table");
        check(&copy, &model);
    }

    #[test]
    fn wrapped_run_loads() {
        // Entries whose home is the last slot wrap around to slot 0.
        let mut shard = Shard::new(16, 4);
        for loc in 1..=3 {
            shard.insert(slot(15, loc), Aux::default());
        }
        let raw: Vec<u64> = shard.raw().collect();
        assert!(raw[0] != 0 && raw[15] != 0);
        let mut copy = Shard::new(16, 4);
        copy.load_raw(&raw).expect("a wrapped run is valid");
        assert_eq!(copy.candidates(15).count(), 3);
    }

    #[test]
    fn corrupt_raw_table_is_refused() {
        let mut shard = Shard::new(16, 4);
        let mut raw = vec![0u64; 16];
        // A slot whose home is 0 sitting at index 5 after empty slots.
        raw[5] = slot(0, 9).0;
        assert!(shard.load_raw(&raw).is_err());
        raw[5] = 0;
        raw[0] = slot(0, 9).0;
        shard.load_raw(&raw).expect("valid");
        assert_eq!(shard.len(), 1);
    }

    #[test]
    fn full_shards_grow_within_the_budget() {
        let idx = Index::new(Layout { shard_bits: 0, slots_per_shard: 1024 });
        idx.plan(1024);
        let mut shard = idx.shard(0).write();
        let mut loc = 1;
        let mut grown = 0;
        loop {
            if shard.is_full() {
                if !idx.grow_full(&mut shard) {
                    break;
                }
                grown += 1;
            }
            shard.insert(slot((loc % 64) as u32, loc), Aux::default());
            loc += 1;
        }
        // 1024 planned + 128 of budget, in steps of 32 (then 33, 34 ...).
        assert!(grown >= 3 && shard.capacity() <= 1024 + 128, "{grown} {}", shard.capacity());
        assert_eq!(shard.len(), max_len_for(shard.capacity()));
    }

    #[test]
    fn layout_and_placement() {
        assert_eq!(Layout::for_slots(100), Layout { shard_bits: 0, slots_per_shard: 100 });
        let l = Layout::for_slots(10_000_000);
        assert_eq!(l.shard_bits, 10);
        assert!(l.slots_per_shard * 1024 >= 10_000_000);
        let idx = Index::new(l);
        let (s, t) = idx.place(u64::MAX);
        assert_eq!((s, t), (1023, (1 << TAG_BITS) - 1));
        assert_eq!(idx.place(0), (0, 0));
    }
}
