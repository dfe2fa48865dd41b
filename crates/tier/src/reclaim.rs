//! Reclamation: when the free list runs low, the oldest sealed region is
//! read back whole; its live records are dropped (Evictable, and Keep over
//! its budget) or rewritten at the head (Keep, Durable; and Evictable ones
//! of the young regions a shrink retires); then the region is marked free
//! on the device and reused.
//!
//! Space invariant: between reclamations at least one region is free.
//! Foreground appends may not take it (they need two free regions to switch
//! and one to append at all), so a reclamation always has room for the
//! live records of one region: the open region's remainder plus that free
//! region, with foreground appends stopped once reclamation has taken it.

use std::sync::atomic::Ordering;

use crate::aligned::{AlignedBuf, BLOCK_BYTES, align_up};
use crate::format::{HeaderState, RecordIter, RecordMeta, RegionHeader, check_record, record_key, record_value};
use crate::hash::key_hash;
use crate::index::{Aux, Slot};
use crate::regions::{ALL_RETENTIONS, State, zero_counters};
use crate::stats::bump;
use crate::store::FlashStore;
use crate::writer::{FOREGROUND_SWITCH_FREE, Mode};
use crate::{Retention, TierError};

/// An operation that may need a free region first.
pub(crate) enum Attempt<T> {
    Done(T),
    NeedRegion,
}

/// How many times one operation may find the regions reclamation freed for
/// it taken by others before it gives up. Only a store under extreme
/// contention gets near it; a store that cannot free a region answers at
/// the first attempt (`ensure_space` false).
const SPACE_ATTEMPTS: usize = 1024;

/// Of a region's bytes, the share (1 / this) that records read since they
/// were written may take again at the head when it is reclaimed.
const REINSERT_SHARE_DIVISOR: u64 = 4;

/// What one reclamation does with the live records it meets.
struct Fate {
    /// The region leaves the store (a shrink), out of FIFO order.
    retiring: bool,
    /// ... and is among the newest, whose Evictable records a shrink keeps.
    young: bool,
    /// Bytes that Evictable records read since written may still take.
    reinsert: u64,
}

/// The reclaimer's state; its mutex serializes reclamations, shrinks and clears.
#[derive(Default)]
pub(crate) struct Reclaimer {
    buf: Option<AlignedBuf>,
    /// During a shrink: regions of this sequence or newer are among those
    /// a store of the new size keeps, so the Evictable records of such a
    /// region past the new end are rewritten (while a region that stays is
    /// free), not dropped: a shrink keeps the newest records, as the FIFO
    /// would.
    pub(crate) young_from: Option<u64>,
}

impl FlashStore {
    /// Runs `op`, reclaiming regions whenever it needs one; None when no
    /// region could be freed (everything left must be kept).
    pub(crate) fn with_space<T>(
        &self,
        mut op: impl FnMut() -> Result<Attempt<T>, TierError>,
    ) -> Result<Option<T>, TierError> {
        for attempt in 0..SPACE_ATTEMPTS {
            if let Attempt::Done(t) = op()? {
                return Ok(Some(t));
            }
            if !self.ensure_space()? {
                return Ok(None);
            }
            if attempt >= 2 {
                // Others keep taking what was freed: let them finish.
                std::thread::yield_now();
            }
        }
        Ok(None)
    }

    fn free_regions(&self) -> usize {
        self.ring.lock().free.len()
    }

    /// A free region a shrink keeps: where a rewrite may go.
    fn free_below_limit(&self) -> bool {
        let ring = self.ring.lock();
        ring.free.iter().any(|&r| r < ring.limit)
    }

    /// Reclaims oldest regions until a foreground append may switch
    /// regions; false if a full pass over the store did not get there.
    pub(crate) fn ensure_space(&self) -> Result<bool, TierError> {
        if self.free_regions() >= FOREGROUND_SWITCH_FREE {
            return Ok(true);
        }
        let mut reclaimer = self.reclaimer.lock();
        let budget = 2 * self.regions.read().len() + 2;
        for _ in 0..budget {
            if self.free_regions() >= FOREGROUND_SWITCH_FREE {
                return Ok(true);
            }
            let victim = self.ring.lock().sealed.pop_front();
            let Some(victim) = victim else { return Ok(false) };
            self.reclaim_or_requeue(&mut reclaimer, victim)?;
        }
        Ok(self.free_regions() >= FOREGROUND_SWITCH_FREE)
    }

    /// Reclaims the oldest sealed region (tests and tools); false if none.
    #[doc(hidden)]
    pub fn debug_reclaim_oldest(&self) -> Result<bool, TierError> {
        let mut reclaimer = self.reclaimer.lock();
        let victim = self.ring.lock().sealed.pop_front();
        let Some(victim) = victim else { return Ok(false) };
        self.reclaim_or_requeue(&mut reclaimer, victim)?;
        Ok(true)
    }

    /// `reclaim_region`; if it fails before the region is freed, the region
    /// goes back to the head of the FIFO (its records that were moved have
    /// newer copies; the rest are still read from it) to be tried again.
    pub(crate) fn reclaim_or_requeue(&self, rc: &mut Reclaimer, victim: u32) -> Result<(), TierError> {
        let result = self.reclaim_region(rc, victim);
        if result.is_err() {
            let regions = self.regions.read();
            if regions[victim as usize].state() == State::Reclaiming {
                regions[victim as usize].set_state(State::Sealed);
                self.ring.lock().sealed.push_front(victim);
            }
        }
        result
    }

    /// Empties `victim` (already taken off the sealed FIFO) and frees it.
    pub(crate) fn reclaim_region(&self, rc: &mut Reclaimer, victim: u32) -> Result<(), TierError> {
        let (seq, end) = {
            let regions = self.regions.read();
            let meta = &regions[victim as usize];
            assert_eq!(meta.state(), State::Sealed, "reclaiming region {victim} that is not sealed");
            meta.set_state(State::Reclaiming);
            (meta.seq.load(Ordering::Acquire), meta.end.load(Ordering::Acquire))
        };
        let retiring = victim >= self.ring.lock().limit;
        let young = retiring && rc.young_from.is_some_and(|from| seq >= from);
        let rs = self.geo.region_size as usize;
        let len = (align_up(u64::from(end.max(1))) as usize).min(rs);
        let buf = rc.buf.get_or_insert_with(|| AlignedBuf::zeroed(rs));
        if buf.len() < rs {
            *buf = AlignedBuf::zeroed(rs);
        }
        let offset = self.geo.region_offset(victim);
        self.dev
            .read_at(&mut buf.as_mut_slice()[..len], offset)
            .map_err(|e| self.fail_io(format!("reading region {victim} to reclaim it"), e))?;
        let bytes = &buf.as_slice()[..len];
        let header = RegionHeader::decode(bytes, self.geo.nonce, victim, self.geo.region_size);
        let mut must_sync = false;
        // Records read since they were written get a second chance, up to
        // a quarter of a region, so each reclamation still frees most of one
        // (every record of a region may have been read) and new records keep
        // most of the FIFO. A shrink retiring regions does not take the time.
        let reinsert = if retiring { 0 } else { u64::from(self.geo.region_size) / REINSERT_SHARE_DIVISOR };
        let mut fate = Fate { retiring, young, reinsert };
        if header == Some(RegionHeader { state: HeaderState::Used, seq }) {
            let iter =
                RecordIter { bytes, at: crate::format::REGION_HEADER_BYTES as usize, seq, seed: self.geo.seed(seq) };
            for (at, meta) in iter {
                let rec = &bytes[at..at + meta.stored_bytes()];
                must_sync |= self.reclaim_record(victim, at as u32, rec, &meta, &mut fate)?;
            }
        }
        if self.regions.read()[victim as usize].records() > 0 {
            // The walk stopped early (a corrupt record): the index still
            // knows where the later live records are.
            must_sync |= self.salvage(victim, seq, bytes, &mut fate)?;
        }
        if must_sync {
            // The copies must be durable before the originals can be overwritten.
            self.make_durable(self.current_pos())?;
        }
        self.release_region(victim, seq, retiring)
    }

    /// Drops or moves one record of the region being reclaimed; true when
    /// what it wrote must be durable before the region is freed.
    fn reclaim_record(
        &self,
        victim: u32,
        at: u32,
        rec: &[u8],
        meta: &RecordMeta,
        fate: &mut Fate,
    ) -> Result<bool, TierError> {
        let Fate { retiring, young, .. } = *fate;
        let key = record_key(rec, meta);
        let (si, tag) = self.index.place(key_hash(key));
        let mut shard = self.index.shard(si).write();
        if meta.flags.tombstone {
            // FIFO order reclaims every older region first, so a tombstone
            // has nothing left to hide. A shrink retires regions out of that
            // order: carry the tombstone along unless a newer record of the
            // key supersedes it.
            if !retiring {
                return Ok(false);
            }
            let look = self.lookup(&shard, key, tag)?;
            self.drop_corrupt_locked(&mut shard, &look.corrupt);
            if look.found.is_some() {
                return Ok(false);
            }
            self.append_for_reclaim(key, &[], meta)?;
            return Ok(true);
        }
        let loc = self.geo.loc(victim, at);
        let Some(idx) = shard.find_loc(tag, loc) else { return Ok(false) };
        let slot = shard.get(idx);
        let retention = slot.retention();
        let stored = meta.stored_bytes() as u64;
        let second_chance = retention == Retention::Evictable && slot.referenced() && fate.reinsert >= stored;
        let keep = match retention {
            Retention::Evictable => second_chance || (young && self.free_below_limit()),
            Retention::Keep => self.keep_fits(),
            Retention::Durable => true,
        };
        if !keep {
            shard.remove(idx);
            self.account_loc(loc, retention, stored, true);
            bump(&self.counters.dropped_by_reclaim, 1);
            return Ok(false);
        }
        let app = self.append_for_reclaim(key, record_value(rec, meta), meta)?;
        // The copy starts unread: it must be read again to earn another chance.
        shard.replace(idx, slot.unmarked().with_loc(app.loc), Aux::default());
        self.account_loc(loc, retention, stored, true);
        self.account_loc(app.loc, retention, u64::from(app.bytes), false);
        match retention {
            Retention::Durable => bump(&self.counters.compacted_durable, 1),
            Retention::Keep => bump(&self.counters.reinserted_keep, 1),
            Retention::Evictable if second_chance => {
                fate.reinsert -= stored;
                bump(&self.counters.reinserted_referenced, 1);
            }
            Retention::Evictable => bump(&self.counters.kept_by_shrink, 1),
        }
        Ok(retention == Retention::Durable)
    }

    /// Moves or drops every live record of `victim` the sequential walk did
    /// not reach, found through the index; a record failing its check is
    /// dropped (counted) since it cannot be copied.
    fn salvage(&self, victim: u32, seq: u64, bytes: &[u8], fate: &mut Fate) -> Result<bool, TierError> {
        let seed = self.geo.seed(seq);
        let mut must_sync = false;
        for si in 0..self.index.shard_count() {
            let left: Vec<Slot> =
                self.index.shard(si).read().iter().filter(|s| self.geo.region_of(s.loc()) == victim).collect();
            for slot in left {
                let at = self.geo.split(slot.loc()).1 as usize;
                let rest = bytes.get(at..).unwrap_or_default();
                match check_record(rest, seq, seed, rest.len()) {
                    Ok(meta) if !meta.flags.tombstone => {
                        let rec = &rest[..meta.stored_bytes()];
                        must_sync |= self.reclaim_record(victim, at as u32, rec, &meta, fate)?;
                    }
                    _ => {
                        let mut shard = self.index.shard(si).write();
                        self.drop_corrupt_locked(&mut shard, &[slot]);
                    }
                }
            }
        }
        Ok(must_sync)
    }

    fn append_for_reclaim(
        &self,
        key: &[u8],
        value: &[u8],
        meta: &RecordMeta,
    ) -> Result<crate::writer::Appended, TierError> {
        let mut w = self.writer.lock();
        match self.append(&mut w, key, value, meta.flags, Mode::Reclaim)? {
            Ok(app) => Ok(app),
            // The space invariant (module comment) makes this unreachable.
            Err(_) => Err(TierError::Full("no free region left for reclamation to write into".into())),
        }
    }

    /// Marks `victim` free on the device (durably, before anything can be
    /// written into it or a later region's tombstones can be dropped), then
    /// in memory.
    fn release_region(&self, victim: u32, seq: u64, retiring: bool) -> Result<(), TierError> {
        let mut block = AlignedBuf::zeroed(BLOCK_BYTES);
        RegionHeader { state: HeaderState::Free, seq }.encode(
            block.as_mut_slice(),
            self.geo.nonce,
            victim,
            self.geo.region_size,
        );
        let offset = self.geo.region_offset(victim);
        self.dev.write_at(block.as_slice(), offset).map_err(|e| self.fail_io(format!("freeing region {victim}"), e))?;
        self.dev.sync().map_err(|e| self.fail_io("fdatasync after freeing a region", e))?;
        let leftover = self.regions.read()[victim as usize].records();
        if leftover > 0 {
            // Slots reclamation could not reach (records past a corrupt one).
            self.sweep_regions(&[victim]);
        }
        {
            let regions = self.regions.read();
            let meta = &regions[victim as usize];
            zero_counters(meta, &self.live, &ALL_RETENTIONS);
            meta.end.store(0, Ordering::Release);
            meta.set_state(State::Free);
        }
        if !retiring {
            self.ring.lock().free.push_back(victim);
        }
        bump(&self.counters.regions_reclaimed, 1);
        Ok(())
    }

    /// Removes every slot pointing into `victims` (their counters are
    /// zeroed by the caller).
    pub(crate) fn sweep_regions(&self, victims: &[u32]) {
        for i in 0..self.index.shard_count() {
            let mut shard = self.index.shard(i).write();
            shard.retain(|s| !victims.contains(&self.geo.region_of(s.loc())));
        }
    }

    /// Bytes of records reclamation can keep and still free regions: all
    /// regions but the open one, the reserve and one more for the slack of
    /// partly filled regions, at 90% of what is left once fillers took
    /// their most (`MAX_FILLER_BYTES` per block).
    pub(crate) fn retain_limit_bytes(&self) -> u64 {
        let n = self.ring.lock().limit;
        self.geo.retainable_bytes(n)
    }

    /// Whether Keep records are still rewritten: Keep and Durable together
    /// under 80% of capacity and under what compaction can hold.
    fn keep_fits(&self) -> bool {
        let kept = self.live.bytes(Retention::Keep) + self.live.bytes(Retention::Durable);
        let n = u64::from(self.ring.lock().limit);
        let capacity = n * u64::from(self.geo.usable());
        kept <= (capacity * 8 / 10).min(self.retain_limit_bytes())
    }
}
