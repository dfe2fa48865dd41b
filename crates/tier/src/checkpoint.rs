//! The index checkpoint, `<path>.index`: the index slots, the region table
//! they are valid for, and the caller's token. Written to a temporary file,
//! fsynced, renamed into place and the directory fsynced, so a reader finds
//! either a whole checkpoint or none (or the older one).
//!
//! Layout (little endian): a fixed header, the token, one 64-byte entry per
//! region, the slot count of each shard, the slots shard after shard, then a
//! crc32c of everything before.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use crate::device::sync_parent;

const MAGIC: [u8; 8] = *b"PGTIDX\0\x01";
const VERSION: u32 = 1;
const FLAG_FINAL: u32 = 1;
const HEADER_BYTES: usize = 60;
const REGION_ENTRY_BYTES: usize = 64;

/// One region as the checkpoint saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RegionImage {
    pub seq: u64,
    /// Held records (sealed or open) when the checkpoint was taken.
    pub used: bool,
    pub end: u32,
    pub count: [u64; 3],
    pub bytes: [u64; 3],
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// Written by `close`: nothing was written after it.
    pub final_: bool,
    pub nonce: u64,
    pub region_size: u32,
    pub token: Vec<u8>,
    /// Every record before (covered_seq, covered_len) of the stream is in the slots.
    pub covered_seq: u64,
    pub covered_len: u32,
    pub shard_bits: u32,
    pub regions: Vec<RegionImage>,
    /// `1 << shard_bits` raw slot tables (recovery may have grown some).
    pub shards: Vec<Vec<u64>>,
}

/// A writer that checksums what passes through it.
struct Crc<W: Write> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for Crc<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Checkpoint {
    /// Writes the checkpoint to `path` durably (temporary file, fsync,
    /// rename, directory fsync).
    pub(crate) fn write(&self, path: &Path) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let file = File::create(&tmp)?;
        let mut out = Crc { inner: BufWriter::with_capacity(1 << 20, file), crc: 0 };
        self.write_body(&mut out)?;
        let crc = out.crc;
        let mut inner = out.inner;
        inner.write_all(&crc.to_le_bytes())?;
        let file = inner.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)?;
        sync_parent(path)
    }

    fn write_body(&self, out: &mut impl Write) -> io::Result<()> {
        let mut h = Vec::with_capacity(HEADER_BYTES);
        h.extend_from_slice(&MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&(if self.final_ { FLAG_FINAL } else { 0 }).to_le_bytes());
        h.extend_from_slice(&self.nonce.to_le_bytes());
        h.extend_from_slice(&self.region_size.to_le_bytes());
        h.extend_from_slice(&self.shard_bits.to_le_bytes());
        h.extend_from_slice(&(self.shards.len() as u64).to_le_bytes());
        h.extend_from_slice(&self.covered_seq.to_le_bytes());
        h.extend_from_slice(&self.covered_len.to_le_bytes());
        h.extend_from_slice(&(self.regions.len() as u32).to_le_bytes());
        debug_assert_eq!(h.len(), HEADER_BYTES - 4);
        h.extend_from_slice(&(self.token.len() as u32).to_le_bytes());
        out.write_all(&h)?;
        out.write_all(&self.token)?;
        for r in &self.regions {
            let mut e = Vec::with_capacity(REGION_ENTRY_BYTES);
            e.extend_from_slice(&r.seq.to_le_bytes());
            e.extend_from_slice(&u32::from(r.used).to_le_bytes());
            e.extend_from_slice(&r.end.to_le_bytes());
            for v in r.count.iter().chain(&r.bytes) {
                e.extend_from_slice(&v.to_le_bytes());
            }
            out.write_all(&e)?;
        }
        for shard in &self.shards {
            out.write_all(&(shard.len() as u64).to_le_bytes())?;
        }
        let mut chunk = Vec::with_capacity(64 << 10);
        for shard in &self.shards {
            for v in shard {
                chunk.extend_from_slice(&v.to_le_bytes());
                if chunk.len() >= 64 << 10 {
                    out.write_all(&chunk)?;
                    chunk.clear();
                }
            }
        }
        out.write_all(&chunk)
    }

    /// Reads `path`: Ok(None) if there is no file, Err(why) if it is not a
    /// whole checkpoint of this file (then it is ignored and a scan recovers).
    pub(crate) fn read(path: &Path) -> Result<Option<Checkpoint>, String> {
        let mut bytes = Vec::new();
        match File::open(path) {
            Ok(mut f) => f.read_to_end(&mut bytes).map_err(|e| format!("reading {}: {e}", path.display()))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("opening {}: {e}", path.display())),
        };
        Checkpoint::decode(&bytes).map(Some)
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Checkpoint, String> {
        if bytes.len() < HEADER_BYTES + 4 || bytes[..8] != MAGIC {
            return Err("not an index checkpoint".into());
        }
        let (body, tail) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body) != u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) {
            return Err("the index checkpoint fails its checksum".into());
        }
        let mut r = Reader { b: body, at: 8 };
        if r.u32()? != VERSION {
            return Err("index checkpoint of another version".into());
        }
        let final_ = r.u32()? & FLAG_FINAL != 0;
        let nonce = r.u64()?;
        let region_size = r.u32()?;
        let shard_bits = r.u32()?;
        let shard_count = r.u64()?;
        let covered_seq = r.u64()?;
        let covered_len = r.u32()?;
        let region_count = r.u32()? as usize;
        let token_len = r.u32()? as usize;
        let token = r.take(token_len)?.to_vec();
        if shard_bits > 16 || shard_count != 1 << shard_bits {
            return Err("shard count out of range".into());
        }
        let mut regions = Vec::with_capacity(region_count.min(1 << 20));
        for _ in 0..region_count {
            let seq = r.u64()?;
            let used = r.u32()? != 0;
            let end = r.u32()?;
            let mut v = [0u64; 6];
            for x in &mut v {
                *x = r.u64()?;
            }
            regions.push(RegionImage { seq, used, end, count: [v[0], v[1], v[2]], bytes: [v[3], v[4], v[5]] });
        }
        let sizes = (0..shard_count).map(|_| r.u64()).collect::<Result<Vec<u64>, String>>()?;
        let slots: u64 = sizes.iter().try_fold(0u64, |a, &n| a.checked_add(n)).ok_or("slot count out of range")?;
        if (r.b.len() - r.at) as u64 != slots.saturating_mul(8) {
            return Err("the index checkpoint's slot table has the wrong length".into());
        }
        let shards = sizes
            .iter()
            .map(|&n| {
                let raw = r.take(n as usize * 8)?;
                Ok(raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect())
            })
            .collect::<Result<Vec<Vec<u64>>, String>>()?;
        Ok(Checkpoint { final_, nonce, region_size, token, covered_seq, covered_len, shard_bits, regions, shards })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or("index checkpoint cut short")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            final_: true,
            nonce: 77,
            region_size: 1 << 20,
            token: b"db@123".to_vec(),
            covered_seq: 9,
            covered_len: 4160,
            shard_bits: 1,
            regions: vec![RegionImage { seq: 9, used: true, end: 4160, count: [1, 2, 3], bytes: [4, 5, 6] }],
            shards: vec![(0..16).collect(), (100..120).collect()],
        }
    }

    #[test]
    fn round_trip_and_any_damage_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.index");
        let cp = sample();
        cp.write(&path).expect("write");
        assert_eq!(Checkpoint::read(&path).expect("read"), Some(sample()));
        let bytes = std::fs::read(&path).expect("bytes");
        for at in (0..bytes.len()).step_by(7) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(Checkpoint::decode(&bad).is_err(), "flip at {at} accepted");
        }
        assert!(Checkpoint::decode(&bytes[..bytes.len() - 9]).is_err());
        assert_eq!(Checkpoint::read(&dir.path().join("none")), Ok(None));
    }
}
