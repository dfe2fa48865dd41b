//! Heap buffers aligned to 4096 bytes, as O_DIRECT requires of the memory
//! it transfers to and from.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

use super::spec::ALIGN_BYTES;

/// `len` bytes at a 4096-aligned address, zeroed at first.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the buffer owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize) -> std::io::Result<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(1), ALIGN_BYTES as usize)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout's size is at least 1.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        Ok(AlignedBuf { ptr, layout })
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr points to layout.size() initialised (zeroed) bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice, and &mut self makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_sized() -> std::io::Result<()> {
        for len in [512usize, 4096, 1 << 20] {
            let mut b = AlignedBuf::new(len)?;
            assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
            assert_eq!(b.as_mut_slice().len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
        }
        Ok(())
    }
}
