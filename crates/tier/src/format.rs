//! The on-device format (version 2, little endian); README.md draws it.
//!
//! A superblock in the first 4 KiB, then regions of `region_size` bytes.
//! Each region starts with a 64-byte header; records follow, 8-byte aligned.
//! A record that fits in a 4 KiB block does not cross into the next one: a
//! filler record takes the rest of the block instead (version 2), so
//! reading such a record back is one block, one I/O.
//! Every record's checksum is seeded with the file's random nonce and the
//! region's sequence number, and the header repeats the sequence: bytes left
//! from an earlier use of a region (or of another file) can never validate
//! as a record of the current one.

use crate::Retention;
use crate::aligned::BLOCK_BYTES;

pub(crate) const SUPERBLOCK_BYTES: u64 = 4096;
pub(crate) const REGION_HEADER_BYTES: u32 = 64;
pub(crate) const RECORD_HEADER_BYTES: usize = 20;
pub(crate) const RECORD_ALIGN: usize = 8;
pub(crate) const FORMAT_VERSION: u32 = 2;
/// The oldest version this build reads. Version 1 differs only in having no
/// fillers; a version-1 file's superblock is rewritten as version 2 when it
/// is opened, so that a version-1 build refuses it instead of taking its
/// first filler for the end of a region's records.
pub(crate) const OLDEST_READABLE_VERSION: u32 = 1;
/// The smallest filler: a header, rounded to the record alignment.
pub(crate) const MIN_FILLER_BYTES: usize = RECORD_HEADER_BYTES.next_multiple_of(RECORD_ALIGN);
/// The largest filler: at most 1/8 of a block goes to padding, so that
/// records of a few KiB (which would leave most of a block empty) still
/// pack, and what regions hold stays within the limits reclamation plans
/// with (`retain_limit_bytes`).
pub(crate) const MAX_FILLER_BYTES: usize = BLOCK_BYTES / 8;

const SUPER_MAGIC: [u8; 8] = *b"PGTFLSH\x01";
const REGION_MAGIC: [u8; 8] = *b"PGTREGN\x01";
const SUPER_CRC_AT: usize = 24;
const REGION_CRC_AT: usize = 60;

const FLAG_RETENTION_MASK: u8 = 0b11;
const FLAG_TOMBSTONE: u8 = 0b100;
const FLAG_FILLER: u8 = 0b1000;

/// The file's identity, written at creation (and again, as this version,
/// when a file of an older version is opened).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Superblock {
    pub region_size: u32,
    pub nonce: u64,
    /// The version the file was written in (this build writes `FORMAT_VERSION`).
    pub version: u32,
}

impl Superblock {
    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[..SUPERBLOCK_BYTES as usize].fill(0);
        out[0..8].copy_from_slice(&SUPER_MAGIC);
        // Always this build's version: a file opened here may get fillers.
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&self.region_size.to_le_bytes());
        out[16..24].copy_from_slice(&self.nonce.to_le_bytes());
        let crc = crc32c::crc32c(&out[..SUPER_CRC_AT]);
        out[SUPER_CRC_AT..SUPER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    }

    /// `Ok(None)`: the block is all zeros (a new file). `Err`: something
    /// else is there, which the store must not overwrite.
    pub(crate) fn decode(block: &[u8]) -> Result<Option<Superblock>, String> {
        if block.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        if block[0..8] != SUPER_MAGIC {
            return Err("no flash tier superblock at offset 0 (another file's data?)".into());
        }
        let crc = u32_at(block, SUPER_CRC_AT);
        if crc != crc32c::crc32c(&block[..SUPER_CRC_AT]) {
            return Err("the superblock fails its checksum".into());
        }
        let version = u32_at(block, 8);
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(format!(
                "format version {version}, this build reads {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}"
            ));
        }
        Ok(Some(Superblock { region_size: u32_at(block, 12), nonce: u64_at(block, 16), version }))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderState {
    /// Records follow (the region is sealed or was open at a crash).
    Used,
    /// Reclaimed: whatever follows is garbage. The sequence is kept so a
    /// restart never hands out a sequence number a stale record still carries.
    Free,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegionHeader {
    pub state: HeaderState,
    pub seq: u64,
}

impl RegionHeader {
    pub(crate) fn encode(&self, out: &mut [u8], nonce: u64, region: u32, region_size: u32) {
        out[..REGION_HEADER_BYTES as usize].fill(0);
        out[0..8].copy_from_slice(&REGION_MAGIC);
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        let state: u32 = match self.state {
            HeaderState::Used => 1,
            HeaderState::Free => 2,
        };
        out[12..16].copy_from_slice(&state.to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..32].copy_from_slice(&nonce.to_le_bytes());
        out[32..36].copy_from_slice(&region.to_le_bytes());
        out[36..40].copy_from_slice(&region_size.to_le_bytes());
        let crc = crc32c::crc32c(&out[..REGION_CRC_AT]);
        out[REGION_CRC_AT..REGION_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    }

    /// None when the bytes are not a header of this file at this region
    /// (zeros of a never-used region, a torn write, another file's data).
    pub(crate) fn decode(bytes: &[u8], nonce: u64, region: u32, region_size: u32) -> Option<RegionHeader> {
        let ok = bytes[0..8] == REGION_MAGIC
            && u32_at(bytes, REGION_CRC_AT) == crc32c::crc32c(&bytes[..REGION_CRC_AT])
            && (OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&u32_at(bytes, 8))
            && u64_at(bytes, 24) == nonce
            && u32_at(bytes, 32) == region
            && u32_at(bytes, 36) == region_size;
        let state = match u32_at(bytes, 12) {
            1 => HeaderState::Used,
            2 => HeaderState::Free,
            _ => return None,
        };
        ok.then(|| RegionHeader { state, seq: u64_at(bytes, 16) })
    }
}

/// What a record's flags byte says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flags {
    pub retention: Retention,
    pub tombstone: bool,
    /// Padding to the next block: no key, zeros for a value, never indexed.
    pub filler: bool,
}

impl Flags {
    /// A record's flags.
    pub(crate) fn record(retention: Retention, tombstone: bool) -> Flags {
        Flags { retention, tombstone, filler: false }
    }

    fn encode(self) -> u8 {
        retention_code(self.retention)
            | if self.tombstone { FLAG_TOMBSTONE } else { 0 }
            | if self.filler { FLAG_FILLER } else { 0 }
    }

    fn decode(byte: u8) -> Option<Flags> {
        if byte & !(FLAG_RETENTION_MASK | FLAG_TOMBSTONE | FLAG_FILLER) != 0 {
            return None;
        }
        let retention = retention_from_code(u64::from(byte & FLAG_RETENTION_MASK))?;
        Some(Flags { retention, tombstone: byte & FLAG_TOMBSTONE != 0, filler: byte & FLAG_FILLER != 0 })
    }
}

pub(crate) fn retention_code(r: Retention) -> u8 {
    match r {
        Retention::Evictable => 0,
        Retention::Keep => 1,
        Retention::Durable => 2,
    }
}

pub(crate) fn retention_from_code(code: u64) -> Option<Retention> {
    match code {
        0 => Some(Retention::Evictable),
        1 => Some(Retention::Keep),
        2 => Some(Retention::Durable),
        _ => None,
    }
}

/// A record header, decoded but not yet checked against its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordMeta {
    pub flags: Flags,
    pub key_len: usize,
    pub value_len: usize,
    pub seq: u64,
}

impl RecordMeta {
    /// Bytes the record takes on the device, header and padding included.
    pub(crate) fn stored_bytes(&self) -> usize {
        record_bytes(self.key_len, self.value_len)
    }
}

pub(crate) fn record_bytes(key_len: usize, value_len: usize) -> usize {
    (RECORD_HEADER_BYTES + key_len + value_len).next_multiple_of(RECORD_ALIGN)
}

/// The checksum seed of records in the region incarnation `seq` of the file `nonce`.
pub(crate) fn record_seed(nonce: u64, seq: u64) -> u32 {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&nonce.to_le_bytes());
    b[8..].copy_from_slice(&seq.to_le_bytes());
    crc32c::crc32c(&b)
}

/// Writes one record into `out` (exactly `record_bytes(key, value)` long).
pub(crate) fn encode_record(out: &mut [u8], key: &[u8], value: &[u8], flags: Flags, seq: u64, seed: u32) {
    let total = record_bytes(key.len(), value.len());
    assert_eq!(out.len(), total, "record buffer of the wrong size");
    let body = RECORD_HEADER_BYTES + key.len();
    out[RECORD_HEADER_BYTES..body].copy_from_slice(key);
    out[body..body + value.len()].copy_from_slice(value);
    out[body + value.len()..].fill(0);
    seal_record(out, key.len(), value.len(), flags, seq, seed);
}

/// Writes the header of the record whose key and value are already in
/// `out` after it, the checksum last.
fn seal_record(out: &mut [u8], key_len: usize, value_len: usize, flags: Flags, seq: u64, seed: u32) {
    let body = RECORD_HEADER_BYTES + key_len + value_len;
    let key_len = u16::try_from(key_len).expect("key length checked by the caller");
    let value_len = u32::try_from(value_len).expect("value length checked by the caller");
    out[4..8].copy_from_slice(&value_len.to_le_bytes());
    out[8..10].copy_from_slice(&key_len.to_le_bytes());
    out[10] = flags.encode();
    out[11] = 0;
    out[12..20].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32c::crc32c_append(seed, &out[4..body]);
    out[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Bytes of filler to write at region offset `at` before a record of
/// `need` bytes (stored size), so that a record that fits in a block does
/// not start in one block and end in the next. 0 when it does not cross,
/// when it is larger than a block anyway, or when the gap is too small for
/// a filler's header (8 or 16 bytes) or larger than `MAX_FILLER_BYTES`:
/// the record then crosses (a second read of the block after).
pub(crate) fn filler_before(at: usize, need: usize) -> usize {
    let in_block = at % BLOCK_BYTES;
    if need > BLOCK_BYTES || in_block == 0 || in_block + need <= BLOCK_BYTES {
        return 0;
    }
    let gap = BLOCK_BYTES - in_block;
    if (MIN_FILLER_BYTES..=MAX_FILLER_BYTES).contains(&gap) { gap } else { 0 }
}

/// Writes a filler record that takes all of `out` (at least
/// `MIN_FILLER_BYTES`, a multiple of the record alignment).
pub(crate) fn encode_filler(out: &mut [u8], seq: u64, seed: u32) {
    assert!(out.len() >= MIN_FILLER_BYTES && out.len().is_multiple_of(RECORD_ALIGN), "filler of {} bytes", out.len());
    out[RECORD_HEADER_BYTES..].fill(0);
    let flags = Flags { retention: Retention::Evictable, tombstone: false, filler: true };
    seal_record(out, 0, out.len() - RECORD_HEADER_BYTES, flags, seq, seed);
}

/// Why bytes are not a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Invalid {
    /// Fewer bytes than the header says the record needs: read more.
    Short { need: usize },
    /// Not a record of this region incarnation (garbage, torn, corrupted).
    Bad,
}

/// Decodes the header at the start of `bytes` without checking the checksum.
pub(crate) fn peek_header(bytes: &[u8], max_bytes: usize) -> Result<RecordMeta, Invalid> {
    if bytes.len() < RECORD_HEADER_BYTES {
        return Err(Invalid::Short { need: RECORD_HEADER_BYTES });
    }
    if bytes[11] != 0 {
        return Err(Invalid::Bad);
    }
    let flags = Flags::decode(bytes[10]).ok_or(Invalid::Bad)?;
    let meta = RecordMeta {
        flags,
        key_len: usize::from(u16::from_le_bytes([bytes[8], bytes[9]])),
        value_len: u32_at(bytes, 4) as usize,
        seq: u64_at(bytes, 12),
    };
    if meta.stored_bytes() > max_bytes
        || (meta.flags.tombstone && meta.value_len != 0)
        || (meta.flags.filler
            && (meta.key_len != 0 || meta.flags.tombstone || meta.flags.retention != Retention::Evictable))
    {
        return Err(Invalid::Bad);
    }
    Ok(meta)
}

/// Checks the record at the start of `bytes`: it must belong to region
/// incarnation `seq`, fit in `max_bytes`, and match its checksum.
pub(crate) fn check_record(bytes: &[u8], seq: u64, seed: u32, max_bytes: usize) -> Result<RecordMeta, Invalid> {
    let meta = peek_header(bytes, max_bytes)?;
    if meta.seq != seq {
        return Err(Invalid::Bad);
    }
    let body = RECORD_HEADER_BYTES + meta.key_len + meta.value_len;
    if bytes.len() < meta.stored_bytes() {
        return Err(Invalid::Short { need: meta.stored_bytes() });
    }
    if crc32c::crc32c_append(seed, &bytes[4..body]) != u32_at(bytes, 0) {
        return Err(Invalid::Bad);
    }
    Ok(meta)
}

/// The key of a checked record.
pub(crate) fn record_key<'a>(bytes: &'a [u8], meta: &RecordMeta) -> &'a [u8] {
    &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + meta.key_len]
}

/// The value of a checked record.
pub(crate) fn record_value<'a>(bytes: &'a [u8], meta: &RecordMeta) -> &'a [u8] {
    let at = RECORD_HEADER_BYTES + meta.key_len;
    &bytes[at..at + meta.value_len]
}

/// The valid records of a region image, in order, starting at `from`, fillers
/// skipped; stops at the first bytes that are not a record (the end of what
/// was written, a torn write, or corruption: nothing after it is trusted).
pub(crate) struct RecordIter<'a> {
    pub bytes: &'a [u8],
    pub at: usize,
    pub seq: u64,
    pub seed: u32,
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = (usize, RecordMeta);

    fn next(&mut self) -> Option<(usize, RecordMeta)> {
        loop {
            let rest = self.bytes.get(self.at..)?;
            let meta = check_record(rest, self.seq, self.seed, rest.len()).ok()?;
            let at = self.at;
            self.at += meta.stored_bytes();
            if !meta.flags.filler {
                return Some((at, meta));
            }
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: u64 = 0x1234_5678_9abc_def0;

    fn encoded(key: &[u8], value: &[u8], flags: Flags, seq: u64) -> Vec<u8> {
        let mut out = vec![0xAAu8; record_bytes(key.len(), value.len())];
        encode_record(&mut out, key, value, flags, seq, record_seed(NONCE, seq));
        out
    }

    #[test]
    fn fillers_pad_to_the_block_only_when_a_small_record_would_cross_it() {
        assert_eq!(filler_before(64, 500), 0, "fits in the first block");
        assert_eq!(filler_before(4096 - 400, 500), 400, "crosses: pad to the boundary");
        assert_eq!(filler_before(4096 - 16, 500), 0, "gap too small for a filler's header");
        assert_eq!(filler_before(4096 - 600, 700), 0, "gap larger than MAX_FILLER_BYTES");
        assert_eq!(filler_before(8192, 500), 0, "already at a boundary");
        assert_eq!(filler_before(100, 5000), 0, "larger than a block: crosses anyway");
        assert_eq!(filler_before(4096 + 3800, 400), 296);
    }

    #[test]
    fn the_iterator_steps_over_fillers() {
        let seed = record_seed(NONCE, 9);
        let a = encoded(b"a", b"1", Flags::record(Retention::Evictable, false), 9);
        let b = encoded(b"b", b"2", Flags::record(Retention::Durable, false), 9);
        let mut region = a.clone();
        let filler_at = region.len();
        region.resize(filler_at + 40, 0xAA);
        encode_filler(&mut region[filler_at..], 9, seed);
        region.extend_from_slice(&b);
        region.extend_from_slice(&[0u8; 64]);
        let meta = check_record(&region[filler_at..], 9, seed, 1 << 20).expect("a filler is a valid record");
        assert!(meta.flags.filler && meta.key_len == 0 && meta.stored_bytes() == 40);
        let seen: Vec<usize> = RecordIter { bytes: &region, at: 0, seq: 9, seed }.map(|(at, _)| at).collect();
        assert_eq!(seen, vec![0, filler_at + 40]);
        // A filler claiming a key, or a retention, is not one.
        let mut bad = region[filler_at..filler_at + 40].to_vec();
        bad[10] |= 0b01;
        assert_eq!(peek_header(&bad, 1 << 20), Err(Invalid::Bad));
    }

    #[test]
    fn record_round_trip() {
        let flags = Flags::record(Retention::Keep, false);
        let rec = encoded(b"key", b"a value", flags, 7);
        assert_eq!(rec.len(), 32);
        let meta = check_record(&rec, 7, record_seed(NONCE, 7), 1 << 20).expect("valid");
        assert_eq!(meta.flags, flags);
        assert_eq!(record_key(&rec, &meta), b"key");
        assert_eq!(record_value(&rec, &meta), b"a value");
        // Another incarnation of the region, or another file: never valid.
        assert_eq!(check_record(&rec, 8, record_seed(NONCE, 8), 1 << 20), Err(Invalid::Bad));
        assert_eq!(check_record(&rec, 7, record_seed(NONCE + 1, 7), 1 << 20), Err(Invalid::Bad));
        assert_eq!(check_record(&rec[..25], 7, record_seed(NONCE, 7), 1 << 20), Err(Invalid::Short { need: 32 }));
        assert_eq!(check_record(&rec, 7, record_seed(NONCE, 7), 24), Err(Invalid::Bad));
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let flags = Flags::record(Retention::Durable, false);
        let rec = encoded(b"some key", b"and its value, 29 bytes long.", flags, 3);
        let seed = record_seed(NONCE, 3);
        let body = RECORD_HEADER_BYTES + 8 + 29;
        for bit in 0..body * 8 {
            let mut bad = rec.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(check_record(&bad, 3, seed, 1 << 20).is_err(), "bit {bit} flipped and not noticed");
        }
        let zeros = vec![0u8; 64];
        assert!(check_record(&zeros, 3, seed, 1 << 20).is_err());
    }

    #[test]
    fn iterator_stops_at_first_bad_record() {
        let f = Flags::record(Retention::Evictable, false);
        let mut region = Vec::new();
        for i in 0..5u8 {
            region.extend(encoded(&[i], &[i; 10], f, 9));
        }
        let third = region.len() / 5 * 2;
        region[third + RECORD_HEADER_BYTES] ^= 0xFF;
        let seed = record_seed(NONCE, 9);
        let seen: Vec<usize> = RecordIter { bytes: &region, at: 0, seq: 9, seed }.map(|(at, _)| at).collect();
        assert_eq!(seen, vec![0, region.len() / 5]);
    }

    #[test]
    fn headers_round_trip_and_reject_strangers() {
        let mut block = vec![0u8; 4096];
        assert_eq!(Superblock::decode(&block), Ok(None));
        let sb = Superblock { region_size: 1 << 20, nonce: NONCE, version: FORMAT_VERSION };
        sb.encode(&mut block);
        assert_eq!(Superblock::decode(&block), Ok(Some(sb)));
        block[13] ^= 1;
        assert!(Superblock::decode(&block).is_err());
        let h = RegionHeader { state: HeaderState::Used, seq: 42 };
        let mut b = [0u8; 64];
        h.encode(&mut b, NONCE, 3, 1 << 20);
        assert_eq!(RegionHeader::decode(&b, NONCE, 3, 1 << 20), Some(h));
        assert_eq!(RegionHeader::decode(&b, NONCE, 4, 1 << 20), None);
        assert_eq!(RegionHeader::decode(&b, NONCE ^ 1, 3, 1 << 20), None);
        assert_eq!(RegionHeader::decode(&[0u8; 64], NONCE, 3, 1 << 20), None);
    }
}
