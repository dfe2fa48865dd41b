//! Size-class allocator for row versions, one per table.
//!
//! Why not the global allocator: glibc malloc adds 8-16 bytes per object and
//! rounds to 16; for 40-byte TATP rows that is a third more memory. Here a
//! version costs its size rounded up to 8 bytes. Classes are 8 bytes apart
//! up to [`SLAB_OBJECT_BYTES_MAX`]; larger objects use the global allocator.
//! Memory freed to a class is reused by that class and returned to the
//! system only when the table is dropped. Every allocated byte is counted,
//! so the engine reports exact memory use per table (the future tiering
//! budget needs that).

use std::alloc::{Layout, alloc, dealloc};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::pages::{self, CHUNK_BYTES};

pub(crate) const SLAB_ALIGN_BYTES: usize = 8;
pub(crate) const SLAB_OBJECT_BYTES_MAX: usize = 2048;
const CLASS_COUNT: usize = SLAB_OBJECT_BYTES_MAX / SLAB_ALIGN_BYTES + 1;

const _: () = assert!(CHUNK_BYTES >= 16 * SLAB_OBJECT_BYTES_MAX);
const _: () = assert!(SLAB_ALIGN_BYTES >= std::mem::size_of::<usize>());

struct Class {
    /// Intrusive free list: the first word of a free object points to the next.
    free: *mut u8,
    bump: *mut u8,
    bump_end: *mut u8,
    chunks: Vec<NonNull<u8>>,
}

// SAFETY: the raw pointers refer to chunks owned by this class; all access
// goes through the class mutex.
unsafe impl Send for Class {}

pub(crate) struct Slab {
    classes: Box<[Mutex<Class>]>,
    used_bytes: AtomicU64,
    reserved_bytes: AtomicU64,
}

impl Default for Slab {
    fn default() -> Slab {
        Slab::new()
    }
}

pub(crate) fn round_size(bytes: usize) -> usize {
    bytes.div_ceil(SLAB_ALIGN_BYTES) * SLAB_ALIGN_BYTES
}

impl Slab {
    pub(crate) fn new() -> Slab {
        let classes = (0..CLASS_COUNT)
            .map(|_| {
                Mutex::new(Class {
                    free: std::ptr::null_mut(),
                    bump: std::ptr::null_mut(),
                    bump_end: std::ptr::null_mut(),
                    chunks: Vec::new(),
                })
            })
            .collect();
        Slab { classes, used_bytes: AtomicU64::new(0), reserved_bytes: AtomicU64::new(0) }
    }

    /// Allocates `bytes` (> 0), 8-byte aligned, uninitialized.
    pub(crate) fn alloc(&self, bytes: usize) -> NonNull<u8> {
        assert!(bytes > 0);
        let size = round_size(bytes);
        self.used_bytes.fetch_add(size as u64, Ordering::Relaxed);
        if size > SLAB_OBJECT_BYTES_MAX {
            self.reserved_bytes.fetch_add(size as u64, Ordering::Relaxed);
            let layout = large_layout(size);
            // SAFETY: layout has non-zero size.
            let ptr = unsafe { alloc(layout) };
            return NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        }
        let mut class = self.classes[size / SLAB_ALIGN_BYTES].lock();
        if let Some(head) = NonNull::new(class.free) {
            // SAFETY: free objects are at least 8 bytes and hold the next pointer.
            class.free = unsafe { head.as_ptr().cast::<*mut u8>().read() };
            return head;
        }
        if class.bump.is_null() || (class.bump_end as usize - class.bump as usize) < size {
            let chunk = pages::alloc_chunk();
            self.reserved_bytes.fetch_add(CHUNK_BYTES as u64, Ordering::Relaxed);
            class.chunks.push(chunk);
            class.bump = chunk.as_ptr();
            // SAFETY: within the chunk allocation (one past the end).
            class.bump_end = unsafe { chunk.as_ptr().add(CHUNK_BYTES) };
        }
        let out = class.bump;
        // SAFETY: checked above that `size` bytes remain in the chunk.
        class.bump = unsafe { class.bump.add(size) };
        // SAFETY: `out` is inside a live chunk, hence non-null.
        unsafe { NonNull::new_unchecked(out) }
    }

    /// Frees an object from [`Slab::alloc`] with the same `bytes`.
    ///
    /// # Safety
    /// `ptr` came from `self.alloc(bytes)` and is not used afterwards.
    pub(crate) unsafe fn free(&self, ptr: NonNull<u8>, bytes: usize) {
        let size = round_size(bytes);
        self.used_bytes.fetch_sub(size as u64, Ordering::Relaxed);
        if size > SLAB_OBJECT_BYTES_MAX {
            self.reserved_bytes.fetch_sub(size as u64, Ordering::Relaxed);
            // SAFETY: allocated with the same layout in `alloc`.
            unsafe { dealloc(ptr.as_ptr(), large_layout(size)) };
            return;
        }
        let mut class = self.classes[size / SLAB_ALIGN_BYTES].lock();
        // SAFETY: the object is ours again and at least 8 bytes, 8-aligned.
        unsafe { ptr.as_ptr().cast::<*mut u8>().write(class.free) };
        class.free = ptr.as_ptr();
    }

    /// Bytes handed out and not freed.
    pub(crate) fn used_bytes(&self) -> u64 {
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// Bytes taken from the system (chunks plus large objects).
    pub(crate) fn reserved_bytes(&self) -> u64 {
        self.reserved_bytes.load(Ordering::Relaxed)
    }
}

fn large_layout(size: usize) -> Layout {
    Layout::from_size_align(size, SLAB_ALIGN_BYTES).unwrap_or(Layout::new::<u64>())
}

impl Drop for Slab {
    fn drop(&mut self) {
        // Large objects are freed individually by the owner before the slab
        // drops (TableStore::drop frees every version); chunks go here.
        for class in self.classes.iter() {
            let class = class.lock();
            for chunk in &class.chunks {
                // SAFETY: every chunk came from `pages::alloc_chunk`, and the
                // objects in it died with the table.
                unsafe { pages::free_chunk(*chunk) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_reuse_and_accounting() {
        let slab = Slab::new();
        let a = slab.alloc(40);
        let b = slab.alloc(41);
        assert_eq!(slab.used_bytes(), 40 + 48);
        // SAFETY: writing within the allocations.
        unsafe {
            a.as_ptr().write_bytes(0xAB, 40);
            b.as_ptr().write_bytes(0xCD, 41);
        }
        // SAFETY: freed once with the size used to allocate.
        unsafe { slab.free(a, 40) };
        let c = slab.alloc(33);
        assert_eq!(c, a, "same class reuses the freed slot");
        let big = slab.alloc(10_000);
        assert_eq!(slab.used_bytes(), 40 + 48 + 10_000);
        // SAFETY: as above.
        unsafe {
            slab.free(big, 10_000);
            slab.free(b, 41);
            slab.free(c, 33);
        }
        assert_eq!(slab.used_bytes(), 0);
        assert_eq!(slab.reserved_bytes(), 2 * CHUNK_BYTES as u64);
    }
}
