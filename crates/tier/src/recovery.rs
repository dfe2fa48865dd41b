//! `FlashStore::open`: prepare the file, read every region header, load the
//! index checkpoint if it carries the caller's token, scan the regions it
//! does not cover (or all of them), and start writing into a free region.

use std::hash::{BuildHasher, Hasher};
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::admission::Ghost;
use crate::aligned::{AlignedBuf, BLOCK_BYTES, align_down};
use crate::checkpoint::Checkpoint;
use crate::device::{Device, Opened, open_locked, preallocate, sync_parent};
use crate::format::{
    FORMAT_VERSION, HeaderState, Invalid, REGION_HEADER_BYTES, RecordMeta, RegionHeader, SUPERBLOCK_BYTES, Superblock,
    check_record, record_key,
};
use crate::hash::{aux_hash, key_hash};
use crate::index::{Aux, Index, Layout, MAX_LOC, Slot};
use crate::regions::{Geometry, RegionMeta, Ring, State};
use crate::store::FlashStore;
use crate::{Admission, OpenReport, TierConfig, TierError, Warm};

/// Fewest regions a store works with: the open one, one kept free for
/// reclamation, one to switch to, and one holding records.
pub(crate) const MIN_REGIONS: u32 = 4;
const MIN_REGION_SIZE: u32 = 64 << 10;
const MAX_REGION_SIZE: u32 = 1 << 30;
/// Bytes a scan reads at a time: a region is read only as far as it was written.
const SCAN_CHUNK: usize = 1 << 20;

/// The file, opened, locked and sized, before recovery.
struct Prepared {
    dev: Device,
    geo: Geometry,
    regions: u32,
    cold: bool,
}

fn check_config(config: &TierConfig) -> Result<(), TierError> {
    let rs = config.region_size;
    if !rs.is_multiple_of(BLOCK_BYTES as u32) || !(MIN_REGION_SIZE..=MAX_REGION_SIZE).contains(&rs) {
        return Err(TierError::Config(format!("region_size {rs}: a multiple of 4096 from 64 KiB to 1 GiB")));
    }
    if config.size / u64::from(rs) < u64::from(MIN_REGIONS) {
        return Err(TierError::Config(format!("size {}: at least {MIN_REGIONS} regions of {rs} bytes", config.size)));
    }
    if config.mean_record_bytes < 8 {
        return Err(TierError::Config("mean_record_bytes below 8".into()));
    }
    if SUPERBLOCK_BYTES + config.size > (MAX_LOC + 1) * 8 {
        return Err(TierError::Config(format!("size {} beyond the 8 TiB an index location reaches", config.size)));
    }
    Ok(())
}

/// Regions of `region_size` in `size` bytes.
pub(crate) fn regions_for(size: u64, region_size: u32) -> u32 {
    u32::try_from(size / u64::from(region_size)).unwrap_or(u32::MAX)
}

/// A random nonce for a new file (no random-number crate needed: std's
/// hasher keys come from the OS).
fn new_nonce() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.write_u32(std::process::id());
    h.finish() | 1
}

/// Opens and locks the file, reads or writes its superblock, preallocates it.
fn prepare(config: &TierConfig) -> Result<Prepared, TierError> {
    let path = &config.path;
    let opened = open_locked(path)?;
    let mut block = AlignedBuf::zeroed(BLOCK_BYTES);
    // A file shorter than a superblock is read too: a few bytes of someone
    // else's data must not look like a new, empty file.
    let head = opened.len.min(SUPERBLOCK_BYTES) as usize;
    opened
        .file
        .read_exact_at(&mut block.as_mut_slice()[..head], 0)
        .map_err(|e| TierError::io(format!("reading the superblock of {}", path.display()), e))?;
    let (sb, cold) = match Superblock::decode(block.as_slice()).map_err(TierError::Format)? {
        Some(sb) => (sb, false),
        None => (Superblock { region_size: config.region_size, nonce: new_nonce(), version: FORMAT_VERSION }, true),
    };
    let geo = Geometry { region_size: sb.region_size, nonce: sb.nonce };
    let in_file = regions_for(opened.len.saturating_sub(SUPERBLOCK_BYTES), sb.region_size);
    let wanted = regions_for(config.size, sb.region_size);
    let regions = if opened.block_device { wanted.min(in_file) } else { wanted.max(in_file) };
    if regions < MIN_REGIONS {
        return Err(TierError::Config(format!("{} holds fewer than {MIN_REGIONS} regions", path.display())));
    }
    if !opened.block_device && opened.len < geo.file_len(regions) {
        preallocate(&opened.file, geo.file_len(regions), path)?;
    }
    // A new file gets its superblock; an older version's is rewritten as
    // this one (`OLDEST_READABLE_VERSION`) before anything new is appended.
    if cold || sb.version != FORMAT_VERSION {
        sb.encode(block.as_mut_slice());
        write_superblock(&opened, block.as_slice(), path)?;
    }
    let dev = Device::new(opened, path, config.direct_io)?;
    Ok(Prepared { dev, geo, regions, cold })
}

fn write_superblock(opened: &Opened, block: &[u8], path: &std::path::Path) -> Result<(), TierError> {
    let what = |e| TierError::io(format!("writing the superblock of {}", path.display()), e);
    opened.file.write_all_at(block, 0).map_err(what)?;
    opened.file.sync_all().map_err(what)?;
    if !opened.block_device {
        sync_parent(path).map_err(what)?;
    }
    Ok(())
}

fn read_headers(dev: &Device, geo: &Geometry, regions: u32) -> Result<Vec<Option<RegionHeader>>, TierError> {
    let mut block = AlignedBuf::zeroed(BLOCK_BYTES);
    (0..regions)
        .map(|r| {
            dev.read_at(block.as_mut_slice(), geo.region_offset(r))
                .map_err(|e| TierError::io(format!("reading the header of region {r}"), e))?;
            Ok(RegionHeader::decode(block.as_slice(), geo.nonce, r, geo.region_size))
        })
        .collect()
}

impl FlashStore {
    /// Opens (creating if needed) the store at `config.path`; see README.md
    /// for what each `Warm` outcome reads and vouches for.
    pub fn open(config: &TierConfig, token: &[u8]) -> Result<(FlashStore, OpenReport), TierError> {
        let started = Instant::now();
        check_config(config)?;
        let Prepared { dev, geo, regions, cold } = prepare(config)?;
        let headers = read_headers(&dev, &geo, regions)?;
        let capacity = u64::from(regions) * u64::from(geo.region_size);
        let slots = (capacity / u64::from(config.mean_record_bytes)).max(64);
        let ghost = (config.admission == Admission::SecondTouch).then(|| Ghost::new((slots / 4) as usize));
        let ring = Ring { free: Default::default(), sealed: Default::default(), next_seq: 1, limit: regions };
        let metas = (0..regions).map(|_| RegionMeta::new()).collect();
        let mut index_path = config.path.clone().into_os_string();
        index_path.push(".index");
        let (cp, token_matched, mut index_bytes_read) =
            if cold { (None, false, 0) } else { load_checkpoint(std::path::Path::new(&index_path), &geo, token) };
        let layout = cp.as_ref().map_or_else(|| Layout::for_slots(slots), |cp| cp.0);
        let index = Index::new(layout);
        let store = FlashStore::assemble(config, geo, dev, index, metas, ring, ghost);
        let (warm, scanned, clean) = match cp {
            Some((_, cp)) => match store.load_index(&cp, &headers) {
                Ok(scan) => {
                    let scanned = store.scan_regions(&headers, scan)?;
                    (Warm::FromIndex, scanned, cp.final_ && scanned == 0)
                }
                Err(_) => {
                    index_bytes_read = 0;
                    store.reset_index();
                    (Warm::FromScan, store.scan_regions(&headers, ScanFrom::all())?, false)
                }
            },
            None if cold => (Warm::Cold, 0, false),
            None => (Warm::FromScan, store.scan_regions(&headers, ScanFrom::all())?, false),
        };
        store.finish_recovery(&headers, config)?;
        store.index.plan(slots);
        let report = OpenReport {
            warm,
            records: crate::regions::ALL_RETENTIONS.iter().map(|&r| store.live.count(r)).sum(),
            durable_records: store.live.count(crate::Retention::Durable),
            regions_scanned: scanned,
            took: started.elapsed(),
            io_mode: store.dev.io_mode().clone(),
            token_matched,
            clean: clean && warm == Warm::FromIndex,
            bytes_read: store.dev.bytes_read.load(Ordering::Relaxed) + index_bytes_read,
        };
        Ok((store, report))
    }

    /// Replaces the index with an empty one of the planned layout (a
    /// checkpoint that failed to load halfway).
    fn reset_index(&self) {
        for i in 0..self.index.shard_count() {
            self.index.shard(i).write().retain(|_| false);
        }
        for meta in self.regions.read().iter() {
            crate::regions::zero_counters(meta, &self.live, &crate::regions::ALL_RETENTIONS);
            meta.set_state(State::Free);
        }
    }
}

/// Which regions a recovery scans: those with a sequence above `after_seq`
/// whole, and region `partial` from an offset.
#[derive(Clone, Copy, Debug)]
struct ScanFrom {
    after_seq: u64,
    partial: Option<(u32, u32)>,
}

impl ScanFrom {
    fn all() -> ScanFrom {
        ScanFrom { after_seq: 0, partial: None }
    }
}

/// The checkpoint at `path` if it belongs to this file and carries `token`
/// (with its layout), whether the token matched, and the bytes read.
fn load_checkpoint(path: &std::path::Path, geo: &Geometry, token: &[u8]) -> (Option<(Layout, Checkpoint)>, bool, u64) {
    let Ok(Some(cp)) = Checkpoint::read(path) else { return (None, false, 0) };
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    if cp.nonce != geo.nonce || cp.region_size != geo.region_size || cp.token != token {
        return (None, cp.nonce == geo.nonce && cp.token == token, bytes);
    }
    let layout =
        Layout { shard_bits: cp.shard_bits, slots_per_shard: cp.shards.iter().map(Vec::len).max().unwrap_or(0) };
    (Some((layout, cp)), true, bytes)
}

impl FlashStore {
    /// Loads the checkpoint's slots and the counters of the regions it
    /// covers that are unchanged on the device; returns what is left to scan.
    fn load_index(&self, cp: &Checkpoint, headers: &[Option<RegionHeader>]) -> Result<ScanFrom, String> {
        if cp.shards.len() != self.index.shard_count() {
            return Err("shard count differs".into());
        }
        for (i, raw) in cp.shards.iter().enumerate() {
            let mut shard = self.index.shard(i).write();
            if shard.capacity() != raw.len() {
                shard.resize(raw.len());
            }
            shard.load_raw(raw)?;
        }
        let regions = self.regions.read();
        let mut gone = Vec::new();
        for (r, meta) in regions.iter().enumerate() {
            let image = cp.regions.get(r).copied().unwrap_or_default();
            let same = image.used && headers[r] == Some(RegionHeader { state: HeaderState::Used, seq: image.seq });
            if !same {
                if image.used {
                    // Reclaimed (or rewritten) after the checkpoint: its records
                    // that lived on were rewritten into newer regions, scanned below.
                    gone.push(r as u32);
                }
                continue;
            }
            meta.seq.store(image.seq, Ordering::Release);
            meta.end.store(image.end, Ordering::Release);
            meta.set_state(State::Sealed);
            for i in 0..3 {
                meta.count[i].store(image.count[i], Ordering::Relaxed);
                meta.bytes[i].store(image.bytes[i], Ordering::Relaxed);
                self.live.count[i].fetch_add(image.count[i], Ordering::Relaxed);
                self.live.bytes[i].fetch_add(image.bytes[i], Ordering::Relaxed);
            }
        }
        let n = regions.len() as u32;
        drop(regions);
        // Rehashing every shard costs ~50 ns a slot: only when some slots must go.
        let sweep = !gone.is_empty() || cp.regions.iter().skip(n as usize).any(|r| r.used);
        for i in (0..self.index.shard_count()).filter(|_| sweep) {
            let mut shard = self.index.shard(i).write();
            shard.retain(|s| {
                let r = self.geo.region_of(s.loc());
                r < n && !gone.contains(&r)
            });
        }
        let covered = cp.covered_seq;
        let partial = (!cp.final_)
            .then(|| headers.iter().position(|h| h.is_some_and(|h| h.state == HeaderState::Used && h.seq == covered)))
            .flatten()
            .filter(|&r| !gone.contains(&(r as u32)))
            .map(|r| (r as u32, cp.covered_len));
        Ok(ScanFrom { after_seq: covered, partial })
    }

    /// Scans the regions `from` selects, oldest first; returns how many.
    fn scan_regions(&self, headers: &[Option<RegionHeader>], from: ScanFrom) -> Result<u64, TierError> {
        let mut todo: Vec<(u64, u32, u32)> = headers
            .iter()
            .enumerate()
            .filter_map(|(r, h)| {
                let h = (*h)?;
                let r = r as u32;
                if h.state != HeaderState::Used {
                    return None;
                }
                if let Some((pr, off)) = from.partial.filter(|&(pr, _)| pr == r) {
                    return Some((h.seq, pr, off));
                }
                (h.seq > from.after_seq).then_some((h.seq, r, REGION_HEADER_BYTES))
            })
            .collect();
        todo.sort_unstable();
        if todo.is_empty() {
            return Ok(0);
        }
        for i in 0..self.index.shard_count() {
            self.index.shard(i).write().enable_aux();
        }
        let mut window = AlignedBuf::zeroed(SCAN_CHUNK);
        for &(seq, r, off) in &todo {
            {
                let regions = self.regions.read();
                regions[r as usize].seq.store(seq, Ordering::Release);
                regions[r as usize].set_state(State::Sealed);
            }
            let end = self.scan_region(r, seq, off, &mut window)?;
            self.regions.read()[r as usize].end.store(end, Ordering::Release);
        }
        for i in 0..self.index.shard_count() {
            self.index.shard(i).write().drop_aux();
        }
        Ok(todo.len() as u64)
    }

    /// Applies the valid records of region `r` from offset `from` to the
    /// index; returns where they end (the first bytes that are not a record).
    fn scan_region(&self, r: u32, seq: u64, from: u32, window: &mut AlignedBuf) -> Result<u32, TierError> {
        let rs = self.geo.region_size as usize;
        let seed = self.geo.seed(seq);
        let mut at = from as usize;
        let mut want = SCAN_CHUNK;
        while at < rs {
            let start = align_down(at as u64) as usize;
            let len = want.min(rs - start);
            if window.len() < len {
                *window = AlignedBuf::zeroed(len);
            }
            self.dev
                .read_at(&mut window.as_mut_slice()[..len], self.geo.region_offset(r) + start as u64)
                .map_err(|e| TierError::io(format!("scanning region {r}"), e))?;
            loop {
                let p = at - start;
                match check_record(&window.as_slice()[p..len], seq, seed, rs - at) {
                    Ok(meta) => {
                        if !meta.flags.filler {
                            self.apply_scanned(r, at as u32, &window.as_slice()[p..], &meta)?;
                        }
                        at += meta.stored_bytes();
                    }
                    Err(Invalid::Short { need }) if at + need <= rs => {
                        // Runs past the window: read again from its block, big enough.
                        want = (need + BLOCK_BYTES).max(SCAN_CHUNK);
                        break;
                    }
                    Err(_) => return Ok(at as u32),
                }
            }
        }
        Ok(at as u32)
    }

    /// One record found by a scan: the newest record of its key so far
    /// (regions are scanned in sequence order), or a tombstone removing it.
    fn apply_scanned(&self, r: u32, off: u32, bytes: &[u8], meta: &RecordMeta) -> Result<(), TierError> {
        let key = record_key(bytes, meta);
        let (si, tag) = self.index.place(key_hash(key));
        let aux = aux_hash(key).max(1);
        let mut shard = self.index.shard(si).write();
        let mut existing = None;
        let mut corrupt = Vec::new();
        for (idx, s) in shard.candidates(tag) {
            let a = shard.aux(idx);
            if a.hash != 0 {
                if a.hash == aux {
                    existing = Some((s, u64::from(a.bytes)));
                    break;
                }
                continue;
            }
            // Loaded from the checkpoint: compare by reading the record.
            match self.read_record(s.loc()) {
                Ok(rec) if rec.key() == key => {
                    existing = Some((s, rec.meta.stored_bytes() as u64));
                    break;
                }
                Ok(_) => {}
                Err(TierError::Corrupt(_)) => corrupt.push(s),
                Err(e) => return Err(e),
            }
        }
        self.drop_corrupt_locked(&mut shard, &corrupt);
        let existing = existing.map(|(s, b)| (shard.find_loc(tag, s.loc()).expect("slot present"), s, b));
        if let Some((idx, old, old_bytes)) = existing {
            self.account_loc(old.loc(), old.retention(), old_bytes, true);
            if meta.flags.tombstone {
                shard.remove(idx);
                return Ok(());
            }
        } else if meta.flags.tombstone {
            return Ok(());
        }
        let loc = self.geo.loc(r, off);
        let stored = meta.stored_bytes() as u64;
        let slot = Slot::new(tag, meta.flags.retention, loc);
        let new_aux = Aux { hash: aux, bytes: stored as u32 };
        match existing {
            Some((idx, _, _)) => shard.replace(idx, slot, new_aux),
            None => {
                if shard.is_full() {
                    // Never drop a record recovery found (it may be Durable):
                    // the index grows past its planned size instead.
                    let c = shard.capacity();
                    shard.resize(c + c / 4 + 1);
                }
                shard.insert(slot, new_aux);
            }
        }
        self.account_loc(loc, meta.flags.retention, stored, false);
        Ok(())
    }

    /// Builds the ring from what recovery found, removes the used index
    /// file, takes the open region, and shrinks to the configured size.
    fn finish_recovery(&self, headers: &[Option<RegionHeader>], config: &TierConfig) -> Result<(), TierError> {
        let n = headers.len() as u32;
        {
            let regions = self.regions.read();
            let mut sealed: Vec<(u64, u32)> = Vec::new();
            let mut ring = self.ring.lock();
            for r in 0..n {
                let meta = &regions[r as usize];
                if meta.state() == State::Sealed {
                    sealed.push((meta.seq.load(Ordering::Acquire), r));
                } else {
                    ring.free.push_back(r);
                }
            }
            sealed.sort_unstable();
            ring.sealed = sealed.into_iter().map(|(_, r)| r).collect();
            let newest = headers.iter().flatten().map(|h| h.seq).max().unwrap_or(0);
            ring.next_seq = newest.max(self.regions_max_seq()) + 1;
        }
        self.remove_index_file()?;
        self.start_writing()?;
        let wanted = regions_for(config.size, self.geo.region_size);
        if wanted < self.regions.read().len() as u32 && !self.dev.is_block_device() {
            self.resize(u64::from(wanted) * u64::from(self.geo.region_size))?;
        }
        Ok(())
    }

    fn regions_max_seq(&self) -> u64 {
        self.regions.read().iter().map(|m| m.seq.load(Ordering::Acquire)).max().unwrap_or(0)
    }

    /// A checkpoint vouches for one open: once writing starts it is stale.
    pub(crate) fn remove_index_file(&self) -> Result<(), TierError> {
        let mut tmp = self.index_path.clone().into_os_string();
        tmp.push(".tmp");
        for p in [self.index_path.clone(), tmp.into()] {
            match std::fs::remove_file(&p) {
                Ok(()) => sync_parent(&p)
                    .map_err(|e| TierError::io(format!("syncing the directory of {}", p.display()), e))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(TierError::io(format!("removing {}", p.display()), e)),
            }
        }
        Ok(())
    }

    /// Takes a free region as the open one; with none free (a crash in the
    /// middle of reclamation can leave that), grows a file by one region.
    fn start_writing(&self) -> Result<(), TierError> {
        let mut w = self.writer.lock();
        let mut regions = self.regions.write();
        let mut ring = self.ring.lock();
        let region = match ring.free.pop_front() {
            Some(r) => r,
            None if !self.dev.is_block_device() => {
                let r = regions.len() as u32;
                self.dev.set_len(self.geo.file_len(r + 1), &self.path)?;
                regions.push(RegionMeta::new());
                ring.limit = r + 1;
                r
            }
            None => return Err(TierError::Full("no free region on the device to write into".into())),
        };
        let seq = ring.next_seq;
        ring.next_seq += 1;
        drop(ring);
        drop(regions);
        self.begin_region(&mut w, region, seq);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_checks() {
        let mut c = TierConfig::new("/tmp/x", 64 << 20);
        check_config(&c).expect("defaults");
        c.region_size = 5000;
        assert!(check_config(&c).is_err());
        c.region_size = 16 << 20;
        c.size = 63 << 20;
        assert!(check_config(&c).is_err());
        assert_eq!(regions_for(64 << 20, 16 << 20), 4);
    }
}
