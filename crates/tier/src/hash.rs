//! A stable 64-bit key hash. The index checkpoint stores tags derived from
//! it, so it must give the same value in every process and build: no
//! per-process random seed (std's `RandomState`) may be used.

/// MurmurHash64A (Austin Appleby, public domain): fast on short keys and
/// well mixed in every output bit, which the tag/shard split relies on.
pub(crate) fn hash64(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut k =
            u64::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut k = 0u64;
        for (i, &b) in tail.iter().enumerate() {
            k |= u64::from(b) << (8 * i);
        }
        h ^= k;
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The hash that places a key in the index (shard and tag).
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    hash64(key, 0x7067_7469_6572_0001)
}

/// A second, independent hash: recovery compares keys by (tag, this) instead
/// of reading an older record back from the device for every key seen twice.
pub(crate) fn aux_hash(key: &[u8]) -> u64 {
    hash64(key, 0x7067_7469_6572_0002)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PINNED: [u64; 3] = [0x6680_773d_b878_f27b, 0xe32c_a7f9_f359_b3cf, 0x062a_4ccf_7260_39e8];

    #[test]
    fn stable_and_spread() {
        // Pinned values: a change here breaks every index checkpoint on disk.
        assert_eq!(key_hash(b""), PINNED[0]);
        assert_eq!(key_hash(b"pgtier"), PINNED[1]);
        assert_eq!(aux_hash(b"a key longer than eight bytes"), PINNED[2]);
        assert_ne!(key_hash(b"a"), key_hash(b"b"));
        assert_ne!(key_hash(b"abcdefgh"), key_hash(b"abcdefgh\0"));
        assert_ne!(key_hash(b"k"), aux_hash(b"k"));
        let mut ones = [0u32; 64];
        for i in 0..4096u32 {
            let h = key_hash(&i.to_le_bytes());
            for (bit, count) in ones.iter_mut().enumerate() {
                *count += u32::from(h >> bit & 1 == 1);
            }
        }
        assert!(ones.iter().all(|&c| (1800..2300).contains(&c)), "{ones:?}");
    }
}
