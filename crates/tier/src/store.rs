//! `FlashStore`: the public operations on records.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use crate::admission::Ghost;
use crate::device::Device;
use crate::format::{Flags, record_bytes};
use crate::hash::key_hash;
use crate::index::{Aux, Index, Slot};
use crate::read::Found;
use crate::reclaim::{Attempt, Reclaimer};
use crate::regions::{ALL_RETENTIONS, Geometry, Live, RegionMeta, Ring};
use crate::stats::{Counters, bump};
use crate::writer::{GroupCommit, Mode, OpenBuf, Writer};
use crate::{Admission, Inserted, IoMode, RejectReason, Retention, TierConfig, TierError};

/// A flash tier store. All methods take `&self`; share it with `Arc`.
pub struct FlashStore {
    pub(crate) path: PathBuf,
    pub(crate) index_path: PathBuf,
    pub(crate) geo: Geometry,
    pub(crate) dev: Device,
    pub(crate) index: Index,
    pub(crate) regions: RwLock<Vec<RegionMeta>>,
    pub(crate) ring: Mutex<Ring>,
    pub(crate) writer: Mutex<Writer>,
    pub(crate) open_buf: RwLock<Arc<OpenBuf>>,
    pub(crate) commit: GroupCommit,
    pub(crate) reclaimer: Mutex<Reclaimer>,
    pub(crate) ghost: Option<Ghost>,
    pub(crate) admission: Admission,
    pub(crate) mean_record_bytes: u32,
    /// Index slots planned per record of `mean_record_bytes`: 1, or 2 once
    /// a caller said it stores a small record beside most records
    /// (`plan_companion_records`).
    pub(crate) slots_per_record: AtomicU32,
    pub(crate) counters: Counters,
    pub(crate) live: Live,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
}

/// A removed record, and the stream position its tombstone must reach
/// stable storage at (None: no tombstone).
type Removed = (Option<Found>, Option<u64>);

/// What an insert attempt under the shard lock came to.
enum InsertOutcome {
    /// Stored; `Some(pos)`: wait until the stream is durable to `pos`.
    Stored(Option<u64>),
    Rejected(RejectReason),
}

impl FlashStore {
    pub(crate) fn assemble(
        config: &TierConfig,
        geo: Geometry,
        dev: Device,
        index: Index,
        regions: Vec<RegionMeta>,
        ring: Ring,
        ghost: Option<Ghost>,
    ) -> FlashStore {
        let mut index_path = config.path.clone().into_os_string();
        index_path.push(".index");
        FlashStore {
            path: config.path.clone(),
            index_path: PathBuf::from(index_path),
            geo,
            dev,
            index,
            regions: RwLock::new(regions),
            ring: Mutex::new(ring),
            writer: Mutex::new(Writer::idle()),
            open_buf: RwLock::new(OpenBuf::none()),
            commit: GroupCommit::new(),
            reclaimer: Mutex::new(Reclaimer::default()),
            ghost,
            admission: config.admission,
            mean_record_bytes: config.mean_record_bytes,
            slots_per_record: AtomicU32::new(1),
            counters: Counters::default(),
            live: Live::default(),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }

    /// Stores `value` under `key`, replacing an older record of the key.
    /// A Durable insert (or any insert replacing a Durable record) returns
    /// after the record is on stable storage. Rejected: nothing changed.
    pub fn insert(&self, key: &[u8], value: &[u8], retention: Retention) -> Result<Inserted, TierError> {
        self.insert_then(key, value, retention, true)
    }

    /// `insert` that leaves a Durable record to the next [`FlashStore::sync`]:
    /// a caller storing many (an eviction batch) syncs once for all of them,
    /// and writes the tail block once instead of once per record (each sync
    /// writes the partly filled block again: one 4 KiB write per record of a
    /// few hundred bytes was most of write-back's write amplification).
    /// Until that sync returns, a crash may lose the record (or bring back
    /// the one it replaced).
    pub fn insert_deferred(&self, key: &[u8], value: &[u8], retention: Retention) -> Result<Inserted, TierError> {
        self.insert_then(key, value, retention, false)
    }

    /// Returns once every record inserted or removed so far is on stable
    /// storage (one write of the tail and one fdatasync, shared by
    /// concurrent callers).
    pub fn sync(&self) -> Result<(), TierError> {
        self.make_durable(self.current_pos())
    }

    fn insert_then(&self, key: &[u8], value: &[u8], retention: Retention, sync: bool) -> Result<Inserted, TierError> {
        if self.failed.load(Ordering::Acquire) {
            return Ok(self.reject(RejectReason::Disabled));
        }
        if key.len() > usize::from(u16::MAX)
            || u32::try_from(value.len()).is_err()
            || record_bytes(key.len(), value.len()) > self.geo.usable() as usize
        {
            return Ok(self.reject(RejectReason::TooLarge));
        }
        let hash = key_hash(key);
        if !self.admit(hash, retention) {
            return Ok(self.reject(RejectReason::NotAdmitted));
        }
        let outcome = self.with_space(|| self.insert_locked(key, value, retention, hash))?;
        match outcome {
            None if retention == Retention::Durable => {
                Err(TierError::Full("no region could be reclaimed for a Durable record".into()))
            }
            None => Ok(self.reject(RejectReason::NoSpace)),
            Some(InsertOutcome::Rejected(reason)) => Ok(self.reject(reason)),
            Some(InsertOutcome::Stored(durable_at)) => {
                if let Some(pos) = durable_at.filter(|_| sync) {
                    self.make_durable(pos)?;
                }
                bump(&self.counters.inserts, 1);
                bump(&self.counters.logical_bytes_written, (key.len() + value.len()) as u64);
                Ok(Inserted::Stored)
            }
        }
    }

    fn reject(&self, reason: RejectReason) -> Inserted {
        self.counters.reject(reason);
        Inserted::Rejected(reason)
    }

    /// Second-touch admission (Durable records and keys on flash always pass).
    fn admit(&self, hash: u64, retention: Retention) -> bool {
        let Some(ghost) = &self.ghost else { return true };
        if self.admission != Admission::SecondTouch || retention == Retention::Durable {
            return true;
        }
        let seen = ghost.touch(hash);
        let (shard, tag) = self.index.place(hash);
        seen || self.index.shard(shard).read().candidates(tag).next().is_some()
    }

    fn insert_locked(
        &self,
        key: &[u8],
        value: &[u8],
        retention: Retention,
        hash: u64,
    ) -> Result<Attempt<InsertOutcome>, TierError> {
        let (si, tag) = self.index.place(hash);
        let mut shard = self.index.shard(si).write();
        let look = self.lookup(&shard, key, tag)?;
        self.drop_corrupt_locked(&mut shard, &look.corrupt);
        let old = look.found.map(|f| {
            // Dropping corrupt slots may have shifted this one.
            let idx = shard.find_loc(tag, f.slot.loc()).expect("the key's slot survives dropping others");
            Found { idx, ..f }
        });
        if old.is_none() && shard.is_full() && !self.index.grow_full(&mut shard) {
            return Ok(Attempt::Done(InsertOutcome::Rejected(RejectReason::IndexFull)));
        }
        let bytes = record_bytes(key.len(), value.len()) as u64;
        if retention == Retention::Durable {
            let freed = old.as_ref().filter(|f| f.slot.retention() == Retention::Durable);
            let after =
                self.live.bytes(Retention::Durable) + bytes - freed.map_or(0, |f| f.rec.meta.stored_bytes() as u64);
            let limit = self.retain_limit_bytes();
            if after > limit {
                return Err(TierError::Full(format!(
                    "Durable records would take {after} bytes; this store keeps at most {limit} while reclaiming"
                )));
            }
        }
        let flags = Flags::record(retention, false);
        let app = match self.append(&mut self.writer.lock(), key, value, flags, Mode::Foreground)? {
            Ok(app) => app,
            Err(_) => return Ok(Attempt::NeedRegion),
        };
        let slot = Slot::new(tag, retention, app.loc);
        let was_durable = old.as_ref().is_some_and(|f| f.slot.retention() == Retention::Durable);
        match old {
            Some(f) => {
                shard.replace(f.idx, slot, Aux::default());
                self.account_loc(f.slot.loc(), f.slot.retention(), f.rec.meta.stored_bytes() as u64, true);
            }
            None => shard.insert(slot, Aux::default()),
        }
        self.account_loc(app.loc, retention, u64::from(app.bytes), false);
        // Replacing a Durable record must be durable too, or a crash could
        // bring back the older Durable version over a newer droppable one.
        let sync = (retention == Retention::Durable || was_durable).then_some(app.pos);
        Ok(Attempt::Done(InsertOutcome::Stored(sync)))
    }

    /// The value and retention of `key`'s newest record, if the store has it.
    /// Err(Corrupt): a candidate record failed its checksum (its index entry
    /// is gone now) and no intact record of the key was found.
    pub fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Retention)>, TierError> {
        let started = Instant::now();
        let hash = key_hash(key);
        let (si, tag) = self.index.place(hash);
        let look = {
            let shard = self.index.shard(si).read();
            self.lookup(&shard, key, tag)?
        };
        self.drop_corrupt(si, &look.corrupt);
        match look.found {
            Some(f) => {
                bump(&self.counters.hits, 1);
                self.counters.read_latency(started.elapsed());
                if f.slot.retention() == Retention::Evictable && !f.slot.referenced() {
                    self.mark_referenced(si, f.slot);
                }
                Ok(Some((f.rec.value().to_vec(), f.slot.retention())))
            }
            None if !look.corrupt.is_empty() => Err(TierError::Corrupt(format!(
                "{} record(s) failed their checksum on the lookup path of a key",
                look.corrupt.len()
            ))),
            None => {
                bump(&self.counters.misses, 1);
                Ok(None)
            }
        }
    }

    /// Marks the Evictable record `slot` points to as read, if the index
    /// still points there (a write or a reclamation since the lookup leaves
    /// it alone: the record it would mark is no longer the key's newest).
    fn mark_referenced(&self, si: usize, slot: Slot) {
        let mut shard = self.index.shard(si).write();
        if let Some(idx) = shard.find_loc(slot.tag(), slot.loc()) {
            let now = shard.get(idx);
            if now.retention() == Retention::Evictable && !now.referenced() {
                let aux = shard.aux(idx);
                shard.replace(idx, now.with_referenced(), aux);
            }
        }
    }

    /// The caller stores a small record beside most of its records (the
    /// cache's key records): the index plans two slots per record of
    /// `TierConfig::mean_record_bytes` from now on, which doubles its
    /// memory. Without it the small records took the slots the large ones
    /// needed: a record that finds its index shard full is rejected while
    /// the store still has bytes to spare. Idempotent.
    pub fn plan_companion_records(&self) {
        if self.slots_per_record.swap(2, Ordering::Relaxed) == 2 {
            return;
        }
        let _reclaimer = self.reclaimer.lock();
        let regions = self.ring.lock().limit;
        self.grow_index(regions);
    }

    /// The share of the index's planned slots (`TierConfig::mean_record_bytes`)
    /// its records take: past 1 only by what full shards grew (at most an
    /// eighth), and a record that finds its shard full is rejected. Cheap:
    /// counters only. A caller storing records it could do without (the
    /// cache's key records) leaves the slots to the others when this is high.
    pub fn index_fill(&self) -> f64 {
        let records: u64 = ALL_RETENTIONS.iter().map(|&r| self.live.count(r)).sum();
        records as f64 / self.index.planned().max(1) as f64
    }

    /// Whether the store holds `key` (read back and compared: a tag match
    /// alone is not enough). An I/O error answers true: it may be there.
    pub fn contains(&self, key: &[u8]) -> bool {
        let (si, tag) = self.index.place(key_hash(key));
        let look = {
            let shard = self.index.shard(si).read();
            self.lookup(&shard, key, tag)
        };
        match look {
            Ok(look) => {
                self.drop_corrupt(si, &look.corrupt);
                look.found.is_some()
            }
            Err(_) => true,
        }
    }

    /// `get` and `remove` in one step: of two concurrent takes of a key,
    /// exactly one gets the record. Taking a Durable record returns after
    /// its tombstone is durable.
    pub fn take(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Retention)>, TierError> {
        let started = Instant::now();
        let taken = self.remove_inner(key, true)?;
        // A hit is a record read (the cache's promotions are takes): its latency counts.
        if taken.is_some() {
            bump(&self.counters.hits, 1);
            self.counters.read_latency(started.elapsed());
        } else {
            bump(&self.counters.misses, 1);
        }
        Ok(taken.map(|f| (f.rec.value().to_vec(), f.slot.retention())))
    }

    /// Removes `key`'s record; true if there was one. Removing a Durable
    /// record appends a tombstone (so recovery never brings it back) and
    /// returns after the tombstone is durable.
    pub fn remove(&self, key: &[u8]) -> Result<bool, TierError> {
        Ok(self.remove_inner(key, true)?.is_some())
    }

    /// [`FlashStore::remove`] that returns once a Durable record's
    /// tombstone is appended, not yet synced: it is durable after the next
    /// `sync` (or a later durable write). For a caller that can tell after
    /// a crash which records are garbage, and would otherwise pay an
    /// fdatasync per removal.
    pub fn remove_deferred(&self, key: &[u8]) -> Result<bool, TierError> {
        Ok(self.remove_inner(key, false)?.is_some())
    }

    fn remove_inner(&self, key: &[u8], durable: bool) -> Result<Option<Found>, TierError> {
        let hash = key_hash(key);
        let outcome = self.with_space(|| self.remove_locked(key, hash))?;
        let Some((found, sync)) = outcome else {
            return Err(TierError::Full("no region could be reclaimed for a tombstone".into()));
        };
        if let Some(pos) = sync
            && durable
        {
            self.make_durable(pos)?;
        }
        if found.is_some() {
            bump(&self.counters.removes, 1);
        }
        Ok(found)
    }

    fn remove_locked(&self, key: &[u8], hash: u64) -> Result<Attempt<Removed>, TierError> {
        let (si, tag) = self.index.place(hash);
        let mut shard = self.index.shard(si).write();
        let look = self.lookup(&shard, key, tag)?;
        self.drop_corrupt_locked(&mut shard, &look.corrupt);
        let Some(found) = look.found else {
            if look.corrupt.is_empty() {
                return Ok(Attempt::Done((None, None)));
            }
            return Err(TierError::Corrupt("a record on the key's lookup path failed its checksum".into()));
        };
        let idx = shard.find_loc(tag, found.slot.loc()).expect("the key's slot survives dropping others");
        let mut sync = None;
        if found.slot.retention() == Retention::Durable {
            let flags = Flags::record(Retention::Durable, true);
            match self.append(&mut self.writer.lock(), key, &[], flags, Mode::Foreground)? {
                Ok(app) => sync = Some(app.pos),
                Err(_) => return Ok(Attempt::NeedRegion),
            }
            bump(&self.counters.tombstones, 1);
        }
        shard.remove(idx);
        self.account_loc(found.slot.loc(), found.slot.retention(), found.rec.meta.stored_bytes() as u64, true);
        Ok(Attempt::Done((Some(found), sync)))
    }

    /// How the store does its I/O.
    pub fn io_mode(&self) -> &IoMode {
        self.dev.io_mode()
    }

    pub(crate) fn check_failed(&self) -> Result<(), TierError> {
        if self.failed.load(Ordering::Acquire) {
            let why = self.failure.lock().clone().unwrap_or_default();
            return Err(TierError::Failed(why));
        }
        Ok(())
    }

    /// Records an I/O error: the store takes no more writes (see README).
    pub(crate) fn fail_io(&self, context: impl Into<String>, e: std::io::Error) -> TierError {
        let err = TierError::io(context, e);
        let mut failure = self.failure.lock();
        if failure.is_none() {
            *failure = Some(err.to_string());
        }
        self.failed.store(true, Ordering::Release);
        err
    }

    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.lock().clone()
    }

    /// Test hook: the `writes`-th device write and the `syncs`-th fdatasync
    /// from now fail with EIO (0: never).
    #[doc(hidden)]
    pub fn debug_fail_io_after(&self, writes: u64, syncs: u64) {
        self.dev.arm_faults(writes, syncs);
    }
}
