//! Reading records back: from the open region's buffer while it is in DRAM,
//! else with one aligned read of the block(s) covering the record (a second
//! read only when the record runs past the first). Every record read is
//! checked (checksum, region incarnation, bounds) before its bytes are used;
//! a record that fails is an error, never bytes.

use std::sync::Arc;

use crate::aligned::{AlignedBuf, BLOCK_BYTES, align_down, align_up};
use crate::format::{Invalid, RECORD_HEADER_BYTES, RecordMeta, check_record, record_key, record_value};
use crate::index::{Shard, Slot};
use crate::regions::{State, account};
use crate::stats::bump;
use crate::store::FlashStore;
use crate::{Retention, TierError};

/// A record read and checked.
pub(crate) struct Record {
    pub bytes: Vec<u8>,
    pub meta: RecordMeta,
}

impl Record {
    pub(crate) fn key(&self) -> &[u8] {
        record_key(&self.bytes, &self.meta)
    }

    pub(crate) fn value(&self) -> &[u8] {
        record_value(&self.bytes, &self.meta)
    }
}

/// A key's slot and record.
pub(crate) struct Found {
    pub idx: usize,
    pub slot: Slot,
    pub rec: Record,
}

/// What probing a shard for a key found.
pub(crate) struct Lookup {
    pub found: Option<Found>,
    /// Candidates whose record failed its check (whose key is unknown).
    pub corrupt: Vec<Slot>,
}

impl FlashStore {
    /// The checked record at index location `loc`. The caller holds the
    /// shard lock of the slot it came from, which keeps reclamation from
    /// reusing the region underneath the read.
    pub(crate) fn read_record(&self, loc: u64) -> Result<Record, TierError> {
        let (region, off) = self.geo.split(loc);
        let open = Arc::clone(&*self.open_buf.read());
        if open.region == region {
            let data = open.data.read();
            let bytes = &data.as_slice()[off as usize..self.geo.region_size as usize];
            return match check_record(bytes, open.seq, self.geo.seed(open.seq), bytes.len()) {
                Ok(meta) => Ok(Record { bytes: bytes[..meta.stored_bytes()].to_vec(), meta }),
                Err(_) => Err(self.corrupt(format!("record at region {region} offset {off} (in memory)"))),
            };
        }
        let (seq, state) = {
            let regions = self.regions.read();
            let meta =
                regions.get(region as usize).ok_or_else(|| self.corrupt(format!("location {loc} beyond the end")))?;
            (meta.seq.load(std::sync::atomic::Ordering::Acquire), meta.state())
        };
        if !matches!(state, State::Sealed | State::Reclaiming) {
            return Err(self.corrupt(format!("location in region {region}, which is {state:?}")));
        }
        self.read_from_device(region, off, seq)
    }

    fn read_from_device(&self, region: u32, off: u32, seq: u64) -> Result<Record, TierError> {
        let start = self.geo.region_offset(region) + u64::from(off);
        let first = align_down(start);
        let skip = (start - first) as usize;
        let region_end = self.geo.region_offset(region) + u64::from(self.geo.region_size);
        // One block, or two when the header itself straddles the boundary.
        let blocks = if skip + RECORD_HEADER_BYTES > BLOCK_BYTES { 2 } else { 1 };
        let len = (blocks * BLOCK_BYTES).min((region_end - first) as usize);
        let mut buf = AlignedBuf::zeroed(len);
        self.dev
            .read_at(&mut buf.as_mut_slice()[..len], first)
            .map_err(|e| self.fail_io(format!("reading region {region} at {first}"), e))?;
        let max = (self.geo.region_size - off) as usize;
        let seed = self.geo.seed(seq);
        let bytes = match check_record(&buf.as_slice()[skip..len], seq, seed, max) {
            Err(Invalid::Short { need }) => {
                let total = (align_up(start + need as u64) - first) as usize;
                let mut whole = AlignedBuf::zeroed(total);
                whole.as_mut_slice()[..len].copy_from_slice(&buf.as_slice()[..len]);
                self.dev
                    .read_at(&mut whole.as_mut_slice()[len..total], first + len as u64)
                    .map_err(|e| self.fail_io(format!("reading region {region} at {}", first + len as u64), e))?;
                whole
            }
            _ => buf,
        };
        match check_record(&bytes.as_slice()[skip..], seq, seed, max) {
            Ok(meta) => Ok(Record { bytes: bytes.as_slice()[skip..skip + meta.stored_bytes()].to_vec(), meta }),
            Err(_) => Err(self.corrupt(format!("record at region {region} offset {off} fails its checksum"))),
        }
    }

    fn corrupt(&self, what: String) -> TierError {
        TierError::Corrupt(what)
    }

    /// Probes `shard` for `key`: reads each tag match and compares keys.
    /// I/O errors end the probe; records failing their check are collected
    /// (the caller removes their slots) and the probe goes on.
    pub(crate) fn lookup(&self, shard: &Shard, key: &[u8], tag: u32) -> Result<Lookup, TierError> {
        let mut corrupt = Vec::new();
        for (idx, slot) in shard.candidates(tag) {
            match self.read_record(slot.loc()) {
                Ok(rec) if !rec.meta.flags.tombstone && rec.key() == key => {
                    return Ok(Lookup { found: Some(Found { idx, slot, rec }), corrupt });
                }
                Ok(_) => bump(&self.counters.tag_false_matches, 1),
                Err(TierError::Corrupt(_)) => corrupt.push(slot),
                Err(e) => return Err(e),
            }
        }
        Ok(Lookup { found: None, corrupt })
    }

    /// Removes slots whose records failed their check, under the shard's
    /// write lock. Their sizes are unknown: the region's leftover bytes are
    /// dropped from the totals when it is freed.
    pub(crate) fn drop_corrupt_locked(&self, shard: &mut Shard, corrupt: &[Slot]) {
        for &slot in corrupt {
            if let Some(idx) = shard.find_loc(slot.tag(), slot.loc()).filter(|&i| shard.get(i) == slot) {
                shard.remove(idx);
                let regions = self.regions.read();
                account(&regions[self.geo.region_of(slot.loc()) as usize], &self.live, slot.retention(), 0, true);
                self.counters.count_corrupt(slot.retention());
            }
        }
    }

    /// As `drop_corrupt_locked`, for a caller holding no lock.
    pub(crate) fn drop_corrupt(&self, shard: usize, corrupt: &[Slot]) {
        if !corrupt.is_empty() {
            self.drop_corrupt_locked(&mut self.index.shard(shard).write(), corrupt);
        }
    }

    /// Index accounting for a record of `bytes` at `loc` (sub: removed).
    pub(crate) fn account_loc(&self, loc: u64, r: Retention, bytes: u64, sub: bool) {
        let regions = self.regions.read();
        account(&regions[self.geo.region_of(loc) as usize], &self.live, r, bytes, sub);
    }
}
