//! Buffers aligned to 4096 bytes: O_DIRECT wants the memory address, the
//! file offset and the length of every transfer aligned to the logical
//! block size, and 4096 covers every common device.

pub(crate) const BLOCK_BYTES: usize = 4096;

#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Block([u8; BLOCK_BYTES]);

/// A zeroed byte buffer whose start is 4096-aligned and whose capacity is a
/// whole number of blocks.
pub(crate) struct AlignedBuf {
    blocks: Vec<Block>,
}

impl AlignedBuf {
    /// At least `bytes` bytes, rounded up to whole blocks, all zero.
    pub(crate) fn zeroed(bytes: usize) -> AlignedBuf {
        AlignedBuf { blocks: vec![Block([0; BLOCK_BYTES]); bytes.div_ceil(BLOCK_BYTES)] }
    }

    pub(crate) fn len(&self) -> usize {
        self.blocks.len() * BLOCK_BYTES
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `Block` is repr(C) around a byte array, so the vector's
        // storage is `len()` initialized bytes with no padding between blocks.
        unsafe { std::slice::from_raw_parts(self.blocks.as_ptr().cast::<u8>(), self.len()) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.blocks.as_mut_ptr().cast::<u8>(), self.len()) }
    }
}

pub(crate) fn align_down(n: u64) -> u64 {
    n & !(BLOCK_BYTES as u64 - 1)
}

pub(crate) fn align_up(n: u64) -> u64 {
    n.div_ceil(BLOCK_BYTES as u64) * BLOCK_BYTES as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        let mut b = AlignedBuf::zeroed(5000);
        assert_eq!(b.len(), 8192);
        assert_eq!(b.as_slice().as_ptr() as usize % BLOCK_BYTES, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[8191] = 7;
        assert_eq!(b.as_slice()[8191], 7);
        assert_eq!((align_down(4097), align_up(4097), align_up(4096)), (4096, 8192, 4096));
    }
}
