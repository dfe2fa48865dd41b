//! The append path: one open region buffer in DRAM takes appends; a full
//! region is written with one pwrite and the next free region is taken;
//! group commit makes the tail durable for Durable inserts.
//!
//! Lock order (outer to inner): reclaimer → index shards (in index order
//! when several) → writer → region table → ring; the open buffer pointer,
//! a buffer's bytes and the failure note are leaves. No thread waits for
//! durability (group commit) while holding a shard lock.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock, RwLockWriteGuard};

use crate::TierError;
use crate::aligned::{AlignedBuf, align_down, align_up};
use crate::format::{
    Flags, HeaderState, REGION_HEADER_BYTES, RegionHeader, encode_filler, encode_record, filler_before, record_bytes,
};
use crate::regions::{Ring, State, pos};
use crate::store::FlashStore;

/// The open region's bytes, shared with readers of records not yet on the
/// device. Appends write past every published record, so readers (who only
/// read published records) never see a byte change under them.
pub(crate) struct OpenBuf {
    pub region: u32,
    pub seq: u64,
    pub data: RwLock<AlignedBuf>,
}

impl OpenBuf {
    pub(crate) fn none() -> Arc<OpenBuf> {
        Arc::new(OpenBuf { region: u32::MAX, seq: 0, data: RwLock::new(AlignedBuf::zeroed(0)) })
    }
}

pub(crate) struct Writer {
    pub region: u32,
    pub seq: u64,
    /// Offset of the next append.
    pub len: u32,
    /// Bytes `[0, written)` of the region are on the device.
    pub written: u32,
    pub buf: Arc<OpenBuf>,
    /// The previous region's buffer, reused once no reader holds it.
    spare: Option<Arc<OpenBuf>>,
}

impl Writer {
    /// A writer with no region yet (`begin_region` gives it one).
    pub(crate) fn idle() -> Writer {
        Writer { region: u32::MAX, seq: 0, len: 0, written: 0, buf: OpenBuf::none(), spare: None }
    }
}

/// Who appends: foreground inserts must leave a free region to reclamation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Foreground,
    Reclaim,
}

/// Free regions a foreground append needs: one held back for reclamation
/// to write into, and one more to switch to.
pub(crate) const FOREGROUND_APPEND_FREE: usize = 1;
pub(crate) const FOREGROUND_SWITCH_FREE: usize = 2;

/// Where an append landed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Appended {
    pub loc: u64,
    pub bytes: u32,
    /// The stream position just past the record (for `make_durable`).
    pub pos: u64,
}

/// The append needs a region the free list cannot give it now.
#[derive(Debug)]
pub(crate) struct NeedRegion;

pub(crate) struct GroupCommit {
    state: Mutex<CommitState>,
    cv: Condvar,
}

struct CommitState {
    /// Everything before this stream position is on stable storage.
    durable: u64,
    /// A thread is writing and syncing for everyone.
    leader: bool,
}

impl GroupCommit {
    pub(crate) fn new() -> GroupCommit {
        GroupCommit { state: Mutex::new(CommitState { durable: 0, leader: false }), cv: Condvar::new() }
    }
}

/// The next free region to write, preferring those a shrink keeps.
pub(crate) fn take_free(ring: &mut Ring) -> Option<u32> {
    let limit = ring.limit;
    let i = ring.free.iter().position(|&r| r < limit).unwrap_or(0);
    ring.free.remove(i)
}

impl FlashStore {
    /// Appends one record to the open region, switching regions if it does not fit.
    pub(crate) fn append(
        &self,
        w: &mut Writer,
        key: &[u8],
        value: &[u8],
        flags: Flags,
        mode: Mode,
    ) -> Result<Result<Appended, NeedRegion>, TierError> {
        self.check_failed()?;
        let need = u32::try_from(record_bytes(key.len(), value.len())).expect("record size checked by the caller");
        assert!(need <= self.geo.usable(), "record of {need} bytes larger than a region");
        let free = self.ring.lock().free.len();
        if mode == Mode::Foreground && free < FOREGROUND_APPEND_FREE {
            return Ok(Err(NeedRegion));
        }
        let filler = filler_before(w.len as usize, need as usize) as u32;
        if w.len + filler + need > self.geo.region_size {
            let may_switch = match mode {
                Mode::Foreground => free >= FOREGROUND_SWITCH_FREE,
                Mode::Reclaim => free >= 1,
            };
            if !may_switch {
                return Ok(Err(NeedRegion));
            }
            self.switch_region(w)?;
        }
        // A fresh region starts its records at the header's end, inside the first block.
        let filler = filler_before(w.len as usize, need as usize);
        let at = w.len as usize + filler;
        {
            let mut data = w.buf.data.write();
            let seed = self.geo.seed(w.seq);
            if filler > 0 {
                encode_filler(&mut data.as_mut_slice()[w.len as usize..at], w.seq, seed);
            }
            let out = &mut data.as_mut_slice()[at..at + need as usize];
            encode_record(out, key, value, flags, w.seq, seed);
        }
        w.len = (at as u32) + need;
        Ok(Ok(Appended { loc: self.geo.loc(w.region, at as u32), bytes: need, pos: pos(w.seq, w.len) }))
    }

    /// Seals the open region (all of it written) and opens the next free one.
    pub(crate) fn switch_region(&self, w: &mut Writer) -> Result<(), TierError> {
        self.write_out(w)?;
        {
            let regions = self.regions.read();
            let meta = &regions[w.region as usize];
            meta.end.store(w.len, std::sync::atomic::Ordering::Release);
            meta.set_state(State::Sealed);
        }
        let (next, seq) = {
            let mut ring = self.ring.lock();
            ring.sealed.push_back(w.region);
            let next = take_free(&mut ring).expect("the caller checked for a free region");
            let seq = ring.next_seq;
            ring.next_seq += 1;
            (next, seq)
        };
        self.begin_region(w, next, seq);
        Ok(())
    }

    /// Makes `region` the open region with sequence `seq` (its header goes
    /// out with the region's first write).
    pub(crate) fn begin_region(&self, w: &mut Writer, region: u32, seq: u64) {
        {
            let regions = self.regions.read();
            let meta = &regions[region as usize];
            assert_eq!(meta.records(), 0, "region {region} taken with live records");
            meta.seq.store(seq, std::sync::atomic::Ordering::Release);
            meta.end.store(0, std::sync::atomic::Ordering::Release);
            meta.set_state(State::Open);
        }
        let rs = self.geo.region_size as usize;
        let mut data = match w.spare.take().map(Arc::try_unwrap) {
            Some(Ok(old)) if old.data.read().len() == rs => old.data.into_inner(),
            _ => AlignedBuf::zeroed(rs),
        };
        let header = RegionHeader { state: HeaderState::Used, seq };
        header.encode(
            &mut data.as_mut_slice()[..REGION_HEADER_BYTES as usize],
            self.geo.nonce,
            region,
            self.geo.region_size,
        );
        let buf = Arc::new(OpenBuf { region, seq, data: RwLock::new(data) });
        *self.open_buf.write() = Arc::clone(&buf);
        w.spare = Some(std::mem::replace(&mut w.buf, buf));
        w.region = region;
        w.seq = seq;
        w.len = REGION_HEADER_BYTES;
        w.written = 0;
    }

    /// Writes the appended bytes not yet on the device: the aligned blocks
    /// from the one holding `written` to the one holding `len`. A block
    /// written before is written again whole; its earlier bytes are the
    /// same, so a torn rewrite leaves them intact sector by sector.
    pub(crate) fn write_out(&self, w: &mut Writer) -> Result<(), TierError> {
        if w.written == w.len {
            return Ok(());
        }
        let start = align_down(u64::from(w.written)) as usize;
        let end = (align_up(u64::from(w.len)) as usize).min(self.geo.region_size as usize);
        let mut data = w.buf.data.write();
        // Zero padding, not bytes of the buffer's previous region, after the last record.
        data.as_mut_slice()[w.len as usize..end].fill(0);
        let data = RwLockWriteGuard::downgrade(data);
        let offset = self.geo.region_offset(w.region) + start as u64;
        self.dev
            .write_at(&data.as_slice()[start..end], offset)
            .map_err(|e| self.fail_io(format!("writing region {} at {offset}", w.region), e))?;
        w.written = w.len;
        Ok(())
    }

    /// Writes the open region's tail; returns the stream position it covers.
    pub(crate) fn flush_tail(&self) -> Result<u64, TierError> {
        let mut w = self.writer.lock();
        self.write_out(&mut w)?;
        Ok(pos(w.seq, w.len))
    }

    pub(crate) fn current_pos(&self) -> u64 {
        let w = self.writer.lock();
        pos(w.seq, w.len)
    }

    /// Returns once everything before stream position `target` is on stable
    /// storage. One caller at a time writes the tail and syncs; the others
    /// wait and are covered by its sync if they appended before it began.
    pub(crate) fn make_durable(&self, target: u64) -> Result<(), TierError> {
        let mut st = self.commit.state.lock();
        loop {
            if st.durable >= target {
                return Ok(());
            }
            self.check_failed()?;
            if !st.leader {
                st.leader = true;
                break;
            }
            self.commit.cv.wait(&mut st);
        }
        drop(st);
        let result = self.flush_tail().and_then(|covered| {
            self.dev.sync().map_err(|e| self.fail_io("fdatasync", e))?;
            Ok(covered)
        });
        let mut st = self.commit.state.lock();
        st.leader = false;
        if let Ok(covered) = result {
            assert!(covered >= target, "a sync after the append must cover it");
            st.durable = st.durable.max(covered);
        }
        self.commit.cv.notify_all();
        result.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use crate::aligned::BLOCK_BYTES;
    use crate::format::{MAX_FILLER_BYTES, MIN_FILLER_BYTES};
    use crate::{Admission, DirectIo, FlashStore, Retention, TierConfig};

    fn value_of(i: u64) -> Vec<u8> {
        let len = 30 + (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize % 700;
        (0..len).map(|b| (i as usize + b) as u8).collect()
    }

    /// Counts records of at most a block that cross a block boundary, and
    /// checks each such crossing is one a filler could not prevent.
    fn crossings(store: &FlashStore) -> (usize, usize) {
        let (mut records, mut crossing) = (0, 0);
        for si in 0..store.index.shard_count() {
            let shard = store.index.shard(si).read();
            for slot in shard.iter() {
                let (_, off) = store.geo.split(slot.loc());
                let stored = store.read_record(slot.loc()).expect("readable").meta.stored_bytes();
                let in_block = off as usize % BLOCK_BYTES;
                records += 1;
                if stored <= BLOCK_BYTES && in_block + stored > BLOCK_BYTES {
                    let gap = BLOCK_BYTES - in_block;
                    assert!(
                        !(MIN_FILLER_BYTES..=MAX_FILLER_BYTES).contains(&gap),
                        "a {stored}-byte record at offset {off} crosses a block with a gap of {gap} a filler could take"
                    );
                    crossing += 1;
                }
            }
        }
        (records, crossing)
    }

    #[test]
    fn small_records_stay_inside_one_block_and_fillers_survive_a_region_scan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = TierConfig {
            path: dir.path().join("flash.tier"),
            size: 32 * (64 << 10),
            region_size: 64 << 10,
            direct_io: DirectIo::Auto,
            mean_record_bytes: 256,
            admission: Admission::All,
        };
        let (store, _) = FlashStore::open(&config, b"t").expect("open");
        let n = 1500u64;
        for i in 0..n {
            let retention = if i % 3 == 0 { Retention::Durable } else { Retention::Evictable };
            store.insert(format!("k{i}").as_bytes(), &value_of(i), retention).expect("insert");
        }
        let (records, crossing) = crossings(&store);
        // Packed, about one record in ten of these sizes (30-730 B) would
        // cross; with fillers only gaps over MAX_FILLER_BYTES are left.
        assert!(records > 1000, "{records} records indexed");
        assert!(crossing * 20 < records, "{crossing} of {records} records cross a block boundary");
        store.close(b"t").expect("close");
        // Without the index checkpoint the next open scans every region.
        let mut index = config.path.clone().into_os_string();
        index.push(".index");
        std::fs::remove_file(&index).expect("remove the checkpoint");
        let (store, _) = FlashStore::open(&config, b"t").expect("reopen");
        let mut found = 0;
        for i in 0..n {
            if let Some((value, _)) = store.get(format!("k{i}").as_bytes()).expect("get") {
                assert_eq!(value, value_of(i), "record {i} after the scan");
                found += 1;
            } else {
                assert!(i % 3 != 0, "durable record {i} lost by the scan");
            }
        }
        assert_eq!(found, records, "the scan found what the index held");
    }
}
