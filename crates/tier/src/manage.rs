//! Whole-store operations: checkpoint and close, dropping droppable
//! records, draining Durable ones, clear, online resize, stats.

use std::sync::atomic::Ordering;

use crate::aligned::{AlignedBuf, BLOCK_BYTES};
use crate::checkpoint::{Checkpoint, RegionImage};
use crate::format::{HeaderState, RegionHeader};
use crate::index::Slot;
use crate::reclaim::Reclaimer;
use crate::recovery::{MIN_REGIONS, regions_for};
use crate::regions::{ALL_RETENTIONS, RegionMeta, Ring, State, pos, zero_counters};
use crate::store::FlashStore;
use crate::{Retention, TierError, TierStats};

impl FlashStore {
    /// Writes the index to `<path>.index` with `token` and the stream
    /// position it covers, after making every covered record durable.
    /// The store keeps running; a later crash restarts from it plus a scan
    /// of what was written after it (`OpenReport::clean` false).
    pub fn checkpoint(&self, token: &[u8]) -> Result<(), TierError> {
        self.write_checkpoint(token, false)
    }

    /// Flushes and checkpoints (`clean` on the next open with `token`).
    pub fn close(self, token: &[u8]) -> Result<(), TierError> {
        self.write_checkpoint(token, true)
    }

    fn write_checkpoint(&self, token: &[u8], final_: bool) -> Result<(), TierError> {
        self.check_failed()?;
        // No reclamation, resize or clear while the picture is taken.
        let _reclaimer = self.reclaimer.lock();
        let (cp, covered) = {
            // Every shard lock: no insert or move is half done (they hold one).
            let guards = self.index.read_all();
            let (covered_seq, covered_len) = {
                let mut w = self.writer.lock();
                self.write_out(&mut w)?;
                (w.seq, w.len)
            };
            let regions = self.regions.read();
            let images = regions.iter().map(|m| region_image(m, covered_seq, covered_len)).collect();
            let shards: Vec<Vec<u64>> = guards.iter().map(|g| g.raw().collect()).collect();
            let cp = Checkpoint {
                final_,
                nonce: self.geo.nonce,
                region_size: self.geo.region_size,
                token: token.to_vec(),
                covered_seq,
                covered_len,
                shard_bits: self.index.shard_bits(),
                regions: images,
                shards,
            };
            (cp, pos(covered_seq, covered_len))
        };
        // The records the slots point to are durable before the slots are.
        self.make_durable(covered)?;
        cp.write(&self.index_path)
            .map_err(|e| TierError::io(format!("writing the index checkpoint {}", self.index_path.display()), e))
    }

    /// Drops every Evictable and Keep record from the index (for when their
    /// validity cannot be vouched for); returns how many.
    pub fn drop_droppable(&self) -> u64 {
        let mut guards = self.index.write_all();
        let dropped: usize = guards.iter_mut().map(|g| g.retain(|s| s.retention() == Retention::Durable)).sum();
        for meta in self.regions.read().iter() {
            zero_counters(meta, &self.live, &[Retention::Evictable, Retention::Keep]);
        }
        dropped as u64
    }

    /// Calls `f(key, value)` for every Durable record until it returns
    /// false. Records are read shard by shard (under the shard's read
    /// lock); `f` runs with no lock held, so it may call into the store.
    pub fn for_each_durable(&self, mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Result<(), TierError> {
        for si in 0..self.index.shard_count() {
            let mut batch = Vec::new();
            let mut corrupt = Vec::new();
            {
                let shard = self.index.shard(si).read();
                let mut slots: Vec<Slot> = shard.iter().filter(|s| s.retention() == Retention::Durable).collect();
                slots.sort_unstable_by_key(|s| s.loc());
                for s in slots {
                    match self.read_record(s.loc()) {
                        Ok(rec) => batch.push((rec.key().to_vec(), rec.value().to_vec())),
                        Err(TierError::Corrupt(_)) => corrupt.push(s),
                        Err(e) => return Err(e),
                    }
                }
            }
            self.drop_corrupt(si, &corrupt);
            for (k, v) in &batch {
                if !f(k, v) {
                    return Ok(());
                }
            }
            if !corrupt.is_empty() {
                return Err(TierError::Corrupt(format!("{} Durable record(s) failed their checksum", corrupt.len())));
            }
        }
        Ok(())
    }

    /// Removes every record, Durable ones included (drain them first).
    pub fn clear(&self) -> Result<(), TierError> {
        self.check_failed()?;
        let _reclaimer = self.reclaimer.lock();
        let mut guards = self.index.write_all();
        let mut w = self.writer.lock();
        // Every region that may hold records is marked free on the device
        // (durably) before the index forgets them: a crash in between
        // recovers either all of them or none.
        // Oldest first: a crash in the middle never leaves a record whose
        // tombstone (in a newer region) is already gone.
        let mut used: Vec<(u64, u32)> = {
            let regions = self.regions.read();
            (0..regions.len() as u32)
                .filter(|&r| regions[r as usize].state() != State::Free)
                .map(|r| (regions[r as usize].seq.load(Ordering::Acquire), r))
                .collect()
        };
        used.sort_unstable();
        for (seq, r) in used {
            self.write_free_header(r, seq)?;
        }
        let n = self.regions.read().len() as u32;
        self.dev.sync().map_err(|e| self.fail_io("fdatasync after clearing", e))?;
        for g in guards.iter_mut() {
            g.retain(|_| false);
        }
        let (region, seq) = {
            let regions = self.regions.read();
            let mut ring = self.ring.lock();
            for meta in regions.iter() {
                zero_counters(meta, &self.live, &ALL_RETENTIONS);
                meta.end.store(0, Ordering::Release);
                meta.set_state(State::Free);
            }
            ring.sealed.clear();
            ring.free = (0..ring.limit.min(n)).collect();
            let region = ring.free.pop_front().expect("a store has at least four regions");
            let seq = ring.next_seq;
            ring.next_seq += 1;
            (region, seq)
        };
        self.begin_region(&mut w, region, seq);
        drop(w);
        drop(guards);
        self.remove_index_file()
    }

    pub(crate) fn write_free_header(&self, region: u32, seq: u64) -> Result<(), TierError> {
        let mut block = AlignedBuf::zeroed(BLOCK_BYTES);
        RegionHeader { state: HeaderState::Free, seq }.encode(
            block.as_mut_slice(),
            self.geo.nonce,
            region,
            self.geo.region_size,
        );
        self.dev
            .write_at(block.as_slice(), self.geo.region_offset(region))
            .map_err(|e| self.fail_io(format!("freeing region {region}"), e))
    }

    /// Changes the store's size online. Growing extends (and preallocates)
    /// the file; shrinking rewrites the live Keep/Durable records of the
    /// regions beyond the new end into the rest (dropping Evictable ones)
    /// and truncates, or fails with `Full` if the Durable ones would not fit.
    pub fn resize(&self, new_size: u64) -> Result<(), TierError> {
        self.check_failed()?;
        let new_n = regions_for(new_size, self.geo.region_size);
        if new_n < MIN_REGIONS {
            return Err(TierError::Config(format!("size {new_size}: at least {MIN_REGIONS} regions")));
        }
        let mut rc = self.reclaimer.lock();
        let n = self.regions.read().len() as u32;
        if new_n > n {
            self.grow(n, new_n);
            return self.dev.set_len(self.geo.file_len(new_n), &self.path).map(|()| self.grow_index(new_n));
        }
        if new_n < n { self.shrink(&mut rc, n, new_n) } else { Ok(()) }
    }

    fn grow(&self, n: u32, new_n: u32) {
        self.regions.write().extend((n..new_n).map(|_| RegionMeta::new()));
        let mut ring = self.ring.lock();
        ring.free.extend(n..new_n);
        ring.limit = new_n;
    }

    /// Gives the index the slots a store of `regions` regions plans for
    /// (shards only grow).
    pub(crate) fn grow_index(&self, regions: u32) {
        let capacity = u64::from(regions) * u64::from(self.geo.region_size);
        let per_record = u64::from(self.slots_per_record.load(Ordering::Relaxed));
        let planned = capacity / u64::from(self.mean_record_bytes) * per_record;
        let per = usize::try_from(planned.div_ceil(self.index.shard_count() as u64)).unwrap_or(usize::MAX);
        for i in 0..self.index.shard_count() {
            let mut shard = self.index.shard(i).write();
            if shard.capacity() < per {
                shard.resize(per);
            }
        }
        self.index.plan(planned);
    }

    fn shrink(&self, rc: &mut Reclaimer, n: u32, new_n: u32) -> Result<(), TierError> {
        let keepable = self.geo.retainable_bytes(new_n);
        let durable = self.live.bytes(Retention::Durable);
        if durable > keepable {
            return Err(TierError::Full(format!(
                "{durable} bytes of Durable records do not fit in {new_n} regions (at most {keepable})"
            )));
        }
        self.ring.lock().limit = new_n;
        // What a store of the new size holds after the FIFO has turned: its
        // newest regions. The regions past the new end go first, out of FIFO
        // order (the old ones dropped, the young ones' records rewritten
        // into regions that stay, freed by dropping the oldest of those).
        // In plain FIFO order a shrink reclaimed every region older than the
        // newest retiring one: after a sequential fill (the retiring regions
        // written last) that emptied the whole store.
        let young_from = self.newest_seqs(new_n.saturating_sub(3) as usize);
        rc.young_from = Some(young_from);
        let result = self.retire_past(rc, n, new_n, young_from);
        rc.young_from = None;
        result
    }

    /// The sequence number from which the `count` newest regions holding
    /// records (sealed or open) start; 0 when fewer hold records.
    fn newest_seqs(&self, count: usize) -> u64 {
        let regions = self.regions.read();
        let mut seqs: Vec<u64> = regions
            .iter()
            .filter(|m| matches!(m.state(), State::Sealed | State::Open))
            .map(|m| m.seq.load(Ordering::Acquire))
            .collect();
        seqs.sort_unstable_by(|a, b| b.cmp(a));
        match count.checked_sub(1) {
            Some(last) => seqs.get(last).copied().unwrap_or(0),
            None => u64::MAX,
        }
    }

    fn retire_past(&self, rc: &mut Reclaimer, n: u32, new_n: u32, young_from: u64) -> Result<(), TierError> {
        for _ in 0..4 * n + 4 {
            if self.retired_all(new_n)? {
                self.regions.write().truncate(new_n as usize);
                return self.dev.set_len(self.geo.file_len(new_n), &self.path);
            }
            let victim = {
                let regions = self.regions.read();
                shrink_victim(&mut self.ring.lock(), new_n, |r| {
                    regions[r as usize].seq.load(Ordering::Acquire) >= young_from
                })
            };
            match victim {
                Some(victim) => self.reclaim_or_requeue(rc, victim)?,
                None => {
                    return Err(TierError::Full("shrinking found no region to reclaim and none to move to".into()));
                }
            }
        }
        let regions = self.regions.read();
        let mut ring = self.ring.lock();
        ring.limit = n;
        let back: Vec<u32> =
            (new_n..n).filter(|&r| regions[r as usize].state() == State::Free && !ring.free.contains(&r)).collect();
        ring.free.extend(back);
        Err(TierError::Full("shrinking did not converge: the records still written would not fit".into()))
    }

    /// True once no region at or past `new_n` holds records; then the free
    /// list forgets them (under the writer lock: no switch takes one after).
    fn retired_all(&self, new_n: u32) -> Result<bool, TierError> {
        let mut w = self.writer.lock();
        if w.region >= new_n {
            let has_free = self.ring.lock().free.iter().any(|&r| r < new_n);
            if has_free {
                self.switch_region(&mut w)?;
            }
        }
        let mut ring = self.ring.lock();
        let busy = w.region >= new_n || ring.sealed.iter().any(|&r| r >= new_n);
        if !busy {
            ring.free.retain(|&r| r < new_n);
        }
        Ok(!busy)
    }

    /// A snapshot of the counters and state.
    pub fn stats(&self) -> TierStats {
        let mut s = TierStats::default();
        self.counters.fill(&mut s);
        let rs = u64::from(self.geo.region_size);
        {
            let regions = self.regions.read();
            s.regions = regions.len() as u64;
            s.capacity_bytes = s.regions * rs;
            s.used_bytes = regions.iter().filter(|m| m.state() != State::Free).count() as u64 * rs;
        }
        s.region_size = rs;
        s.free_regions = self.ring.lock().free.len() as u64;
        s.records = ALL_RETENTIONS.iter().map(|&r| self.live.count(r)).sum();
        s.live_bytes = ALL_RETENTIONS.iter().map(|&r| self.live.bytes(r)).sum();
        s.durable_records = self.live.count(Retention::Durable);
        s.keep_records = self.live.count(Retention::Keep);
        s.durable_bytes = self.live.bytes(Retention::Durable);
        s.keep_bytes = self.live.bytes(Retention::Keep);
        s.index_bytes = self.index.bytes();
        s.admission_bytes = self.ghost.as_ref().map_or(0, |g| g.bytes());
        s.device_bytes_written = self.dev.bytes_written.load(Ordering::Relaxed);
        s.device_bytes_read = self.dev.bytes_read.load(Ordering::Relaxed);
        s.syncs = self.dev.syncs.load(Ordering::Relaxed);
        s.failed = self.failure();
        s
    }
}

fn region_image(m: &RegionMeta, covered_seq: u64, covered_len: u32) -> RegionImage {
    let seq = m.seq.load(Ordering::Acquire);
    let state = m.state();
    let end = if state == State::Open && seq == covered_seq { covered_len } else { m.end.load(Ordering::Acquire) };
    RegionImage {
        seq,
        used: state != State::Free,
        end,
        count: std::array::from_fn(|i| m.count[i].load(Ordering::Relaxed)),
        bytes: std::array::from_fn(|i| m.bytes[i].load(Ordering::Relaxed)),
    }
}

/// The next region a shrink to `new_n` regions reclaims: an old sealed one
/// past the new end (dropped whole); else a young one past it while a
/// region that stays is free (to take its records); else the oldest of all
/// (which frees one).
fn shrink_victim(ring: &mut Ring, new_n: u32, young: impl Fn(u32) -> bool) -> Option<u32> {
    if let Some(i) = ring.sealed.iter().position(|&r| r >= new_n && !young(r)) {
        return ring.sealed.remove(i);
    }
    let room = ring.free.iter().any(|&r| r < new_n);
    match ring.sealed.iter().position(|&r| r >= new_n) {
        Some(i) if room => ring.sealed.remove(i),
        _ => ring.sealed.pop_front(),
    }
}
