//! On-disk format: segment header, record framing and segment file names.
//! README.md describes the same layout byte by byte; keep the two in step.

/// Every segment file starts with this header; records follow it.
pub(crate) const SEGMENT_HEADER_BYTES: u64 = 32;
/// `len u32 | crc u32 | lsn u64`, little endian.
pub(crate) const RECORD_HEADER_BYTES: u64 = 16;
/// Records start on 8-byte boundaries so a header never straddles less than
/// a header's worth of segment tail in an odd way: the tail left after the
/// last record is 0 or a multiple of 8 bytes.
pub(crate) const RECORD_ALIGN_BYTES: u64 = 8;
/// `len` value of a pad record: "the rest of this segment is unused".
pub(crate) const PAD_MARKER: u32 = u32::MAX;
/// Largest payload length the format can express (PAD_MARKER is reserved).
pub(crate) const RECORD_BYTES_FORMAT_MAX: u64 = (u32::MAX - 1) as u64;
pub(crate) const SEGMENT_MAGIC: [u8; 8] = *b"PGTWAL\0\x01";
pub(crate) const FORMAT_VERSION: u32 = 1;
pub(crate) const SEGMENT_SUFFIX: &str = ".wal";
pub(crate) const SEGMENT_TMP_SUFFIX: &str = ".wal.tmp";
/// A removed segment kept for reuse as a future segment (see README).
pub(crate) const SEGMENT_SPARE_SUFFIX: &str = ".wal.spare";
const SEGMENT_NAME_DIGITS: usize = 20;

const _: () = assert!(SEGMENT_HEADER_BYTES.is_multiple_of(RECORD_ALIGN_BYTES));
const _: () = assert!(RECORD_HEADER_BYTES.is_multiple_of(RECORD_ALIGN_BYTES));
const _: () = assert!(RECORD_ALIGN_BYTES.is_power_of_two());

pub(crate) fn align_up(n_bytes: u64) -> u64 {
    (n_bytes + RECORD_ALIGN_BYTES - 1) & !(RECORD_ALIGN_BYTES - 1)
}

/// Bytes a record with `payload_bytes` occupies in the log, header and
/// alignment padding included.
pub(crate) fn framed_bytes(payload_bytes: u64) -> u64 {
    RECORD_HEADER_BYTES + align_up(payload_bytes)
}

/// CRC-32C over `payload ‖ lsn_le64 ‖ len_le32`. The payload comes first so
/// committers can checksum it before taking the append lock; the LSN is
/// covered so a stale record left at another position can never validate.
pub(crate) fn payload_crc(payload: &[u8]) -> u32 {
    crc32c::crc32c(payload)
}

pub(crate) fn record_crc(payload_crc: u32, lsn: u64, len: u32) -> u32 {
    let mut tail = [0u8; 12];
    tail[..8].copy_from_slice(&lsn.to_le_bytes());
    tail[8..].copy_from_slice(&len.to_le_bytes());
    crc32c::crc32c_append(payload_crc, &tail)
}

pub(crate) fn encode_record_header(len: u32, crc: u32, lsn: u64) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&len.to_le_bytes());
    h[4..8].copy_from_slice(&crc.to_le_bytes());
    h[8..16].copy_from_slice(&lsn.to_le_bytes());
    h
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub len: u32,
    pub crc: u32,
    pub lsn: u64,
}

pub(crate) fn decode_record_header(h: &[u8]) -> RecordHeader {
    assert!(h.len() >= RECORD_HEADER_BYTES as usize);
    let word = |range: std::ops::Range<usize>| -> [u8; 4] {
        let mut w = [0u8; 4];
        w.copy_from_slice(&h[range]);
        w
    };
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&h[8..16]);
    RecordHeader {
        len: u32::from_le_bytes(word(0..4)),
        crc: u32::from_le_bytes(word(4..8)),
        lsn: u64::from_le_bytes(lsn),
    }
}

pub(crate) fn encode_segment_header(start_lsn: u64, segment_bytes: u64) -> [u8; 32] {
    let mut h = [0u8; 32];
    h[0..8].copy_from_slice(&SEGMENT_MAGIC);
    h[8..16].copy_from_slice(&start_lsn.to_le_bytes());
    h[16..24].copy_from_slice(&segment_bytes.to_le_bytes());
    h[24..28].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Returns `(start_lsn, segment_bytes)` if the header is whole and valid.
pub(crate) fn decode_segment_header(h: &[u8; 32]) -> Option<(u64, u64)> {
    let mut crc = [0u8; 4];
    crc.copy_from_slice(&h[28..32]);
    if crc32c::crc32c(&h[0..28]) != u32::from_le_bytes(crc) || h[0..8] != SEGMENT_MAGIC {
        return None;
    }
    let mut version = [0u8; 4];
    version.copy_from_slice(&h[24..28]);
    if u32::from_le_bytes(version) != FORMAT_VERSION {
        return None;
    }
    let mut start = [0u8; 8];
    start.copy_from_slice(&h[8..16]);
    let mut size = [0u8; 8];
    size.copy_from_slice(&h[16..24]);
    Some((u64::from_le_bytes(start), u64::from_le_bytes(size)))
}

pub(crate) fn segment_file_name(start_lsn: u64) -> String {
    format!("{start_lsn:0SEGMENT_NAME_DIGITS$}{SEGMENT_SUFFIX}")
}

pub(crate) fn segment_spare_name(start_lsn: u64) -> String {
    format!("{start_lsn:0SEGMENT_NAME_DIGITS$}{SEGMENT_SPARE_SUFFIX}")
}

pub(crate) fn segment_tmp_name(start_lsn: u64) -> String {
    format!("{start_lsn:0SEGMENT_NAME_DIGITS$}{SEGMENT_TMP_SUFFIX}")
}

/// Parses `00000000000000065536.wal` into 65536; None for any other name.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != SEGMENT_NAME_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for lsn in [0u64, 65536, u64::MAX] {
            assert_eq!(parse_segment_file_name(&segment_file_name(lsn)), Some(lsn));
        }
        assert_eq!(segment_file_name(0), "00000000000000000000.wal");
        assert_eq!(parse_segment_file_name("0000000000000000000.wal"), None);
        assert_eq!(parse_segment_file_name(&segment_tmp_name(7)), None);
    }

    #[test]
    fn headers_round_trip() {
        let h = encode_record_header(7, 0xdead_beef, 4096);
        assert_eq!(decode_record_header(&h), RecordHeader { len: 7, crc: 0xdead_beef, lsn: 4096 });
        let s = encode_segment_header(1 << 20, 1 << 16);
        assert_eq!(decode_segment_header(&s), Some((1 << 20, 1 << 16)));
        let mut bad = s;
        bad[9] ^= 1;
        assert_eq!(decode_segment_header(&bad), None);
    }

    #[test]
    fn zeroed_header_never_validates() {
        // A zero-filled (preallocated) position reads as len 0, crc 0, lsn 0;
        // records never start at LSN 0 because the segment header is there.
        let h = decode_record_header(&[0u8; 16]);
        assert_eq!(h.lsn, 0);
        assert_ne!(record_crc(payload_crc(&[]), 0, 0), 0);
    }
}
