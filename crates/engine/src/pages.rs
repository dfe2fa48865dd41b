//! Memory for the row store, the ordered indexes' leaves and the primary hash
//! tables, on transparent huge pages where the kernel offers them.
//!
//! Why: a point lookup in a table larger than the caches lands on a random
//! bucket and then a random row of a heap several GiB large. With 4 KiB
//! pages each of those accesses also misses the TLB (whose reach is a few
//! MiB), and under a hypervisor a TLB miss walks the guest's and the host's
//! page tables. A 2 MiB page cuts the walk short and lets the TLB cover
//! GiBs. Linux's default THP mode, `madvise`, gives huge pages only to
//! regions that ask, and only when a fault covers a whole aligned 2 MiB range
//! inside the mapping: glibc's heap grows in small steps and rarely
//! qualifies, so the engine maps its own aligned regions and asks.
//!
//! Three users:
//! - [`alloc_chunk`]/[`free_chunk`]: fixed 64 KiB chunks for the version slab,
//!   carved in order from 32 MiB regions shared by every table of every
//!   database in the process. Freed chunks are kept for reuse; regions are
//!   never unmapped (a cache's tables are rarely dropped, and a freed chunk
//!   is the next one handed out). Pages are committed only when touched.
//! - [`PageBuf`]: a zeroed 4 KiB buffer (an ordered index leaf), cut from
//!   those chunks; dropped buffers are kept for reuse.
//! - [`ZeroedArray`]: a zero-initialised array (the hash tables' buckets).
//!   From 64 KiB to 1 MiB it is a pooled block from the same regions (the
//!   primary index's shards are that size); larger, its own aligned mapping,
//!   zeroed by the kernel on first touch; smaller, from the global allocator.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::ptr::NonNull;

use parking_lot::Mutex;

pub(crate) const CHUNK_BYTES: usize = 64 << 10;
pub(crate) const PAGE_BUF_BYTES: usize = 4096;
const HUGE_PAGE_BYTES: usize = 2 << 20;
const REGION_BYTES: usize = 32 << 20;

const _: () = assert!(REGION_BYTES.is_multiple_of(HUGE_PAGE_BYTES) && HUGE_PAGE_BYTES.is_multiple_of(CHUNK_BYTES));
const _: () = assert!(CHUNK_BYTES.is_multiple_of(PAGE_BUF_BYTES));

/// Addresses of free memory (blocks or page buffers).
struct FreeList(Vec<NonNull<u8>>);

// SAFETY: the list only holds addresses of memory nobody uses; whoever pops
// one owns that memory.
unsafe impl Send for FreeList {}

/// Block sizes: `CHUNK_BYTES << class` for class 0 (64 KiB) to 4 (1 MiB).
const BLOCK_CLASSES: usize = 5;

struct BlockPool {
    /// Freed blocks per class (their bytes are whatever the last owner left).
    free: [FreeList; BLOCK_CLASSES],
    /// The untouched (hence zero) tail of the newest region: `next..end`.
    next: *mut u8,
    end: *mut u8,
}

// SAFETY: `next..end` is memory nobody else references; see FreeList.
unsafe impl Send for BlockPool {}

static BLOCKS: Mutex<BlockPool> = Mutex::new(BlockPool {
    free: [const { FreeList(Vec::new()) }; BLOCK_CLASSES],
    next: std::ptr::null_mut(),
    end: std::ptr::null_mut(),
});

fn block_bytes(class: usize) -> usize {
    CHUNK_BYTES << class
}

/// A block of `block_bytes(class)`, 64 KiB aligned; `true` if it is known to
/// be all zero.
fn alloc_block(class: usize) -> (NonNull<u8>, bool) {
    assert!(class < BLOCK_CLASSES);
    let mut pool = BLOCKS.lock();
    if let Some(block) = pool.free[class].0.pop() {
        return (block, false);
    }
    let bytes = block_bytes(class);
    if (pool.end as usize) - (pool.next as usize) < bytes {
        // The old tail (whole chunks, as every block is) goes to class 0.
        while pool.next < pool.end {
            let chunk = pool.next;
            // SAFETY: the tail lies inside its region, which ends at `end`.
            pool.next = unsafe { chunk.add(CHUNK_BYTES) };
            // SAFETY: inside a live mapping, so non-null.
            pool.free[0].0.push(unsafe { NonNull::new_unchecked(chunk) });
        }
        let region = map_aligned(REGION_BYTES);
        pool.next = region.as_ptr();
        // SAFETY: one past the end of the region.
        pool.end = unsafe { region.as_ptr().add(REGION_BYTES) };
    }
    let block = pool.next;
    // SAFETY: checked above that `bytes` remain before `end`.
    pool.next = unsafe { block.add(bytes) };
    // SAFETY: inside a live mapping, so non-null.
    (unsafe { NonNull::new_unchecked(block) }, true)
}

/// # Safety
/// `block` came from `alloc_block(class)` and is not used afterwards.
unsafe fn free_block(block: NonNull<u8>, class: usize) {
    debug_assert!((block.as_ptr() as usize).is_multiple_of(CHUNK_BYTES));
    BLOCKS.lock().free[class].0.push(block);
}

/// A 64 KiB chunk, chunk-aligned, uninitialised.
pub(crate) fn alloc_chunk() -> NonNull<u8> {
    alloc_block(0).0
}

/// Returns a chunk from [`alloc_chunk`] for reuse.
///
/// # Safety
/// `chunk` came from [`alloc_chunk`] and is not used afterwards.
pub(crate) unsafe fn free_chunk(chunk: NonNull<u8>) {
    // SAFETY: a class-0 block, per the caller.
    unsafe { free_block(chunk, 0) }
}

/// Free [`PageBuf`] memory.
static PAGE_BUFS: Mutex<FreeList> = Mutex::new(FreeList(Vec::new()));

/// A zeroed 4 KiB buffer on the engine's huge-page memory.
pub(crate) struct PageBuf(NonNull<u8>);

// SAFETY: owns its bytes like a Box<[u8]>.
unsafe impl Send for PageBuf {}
// SAFETY: as above.
unsafe impl Sync for PageBuf {}

impl PageBuf {
    pub(crate) fn new() -> PageBuf {
        let ptr = {
            let free = &mut PAGE_BUFS.lock().0;
            if free.is_empty() {
                let chunk = alloc_chunk();
                for at in (0..CHUNK_BYTES).step_by(PAGE_BUF_BYTES) {
                    // SAFETY: inside the chunk, which is now the pool's.
                    free.push(unsafe { chunk.add(at) });
                }
            }
            free.pop().unwrap_or_else(|| unreachable!("refilled above"))
        };
        // SAFETY: the buffer is ours and PAGE_BUF_BYTES long.
        unsafe { ptr.as_ptr().write_bytes(0, PAGE_BUF_BYTES) };
        PageBuf(ptr)
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: PAGE_BUF_BYTES initialised bytes, owned by self.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr(), PAGE_BUF_BYTES) }
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, uniquely owned.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_ptr(), PAGE_BUF_BYTES) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        PAGE_BUFS.lock().0.push(self.0);
    }
}

/// Maps `bytes` (a multiple of [`HUGE_PAGE_BYTES`]) of zeroed memory aligned
/// to a huge page, asking for huge pages. Aborts like the global allocator
/// when the system is out of address space.
fn map_aligned(bytes: usize) -> NonNull<u8> {
    assert!(bytes > 0 && bytes.is_multiple_of(HUGE_PAGE_BYTES));
    let span = bytes + HUGE_PAGE_BYTES;
    // SAFETY: an anonymous private mapping at an address of the kernel's choice.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        std::alloc::handle_alloc_error(Layout::from_size_align(bytes, HUGE_PAGE_BYTES).unwrap_or(Layout::new::<u64>()));
    }
    let start = raw as usize;
    let aligned = start.next_multiple_of(HUGE_PAGE_BYTES);
    // Give back the slack before and after the aligned range.
    // SAFETY: both ranges lie inside the mapping just made and nobody uses them.
    unsafe {
        if aligned > start {
            libc::munmap(raw, aligned - start);
        }
        let tail = aligned + bytes;
        if start + span > tail {
            libc::munmap(tail as *mut libc::c_void, start + span - tail);
        }
    }
    #[cfg(target_os = "linux")]
    // SAFETY: advice on our own mapping; failure (THP off) only loses the speed-up.
    unsafe {
        libc::madvise(aligned as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
    }
    // SAFETY: mmap never returns null on success.
    unsafe { NonNull::new_unchecked(aligned as *mut u8) }
}

/// A fixed-length array of `T`, created all-zero.
pub(crate) struct ZeroedArray<T> {
    ptr: NonNull<T>,
    len: usize,
    _owns: PhantomData<T>,
}

// SAFETY: owns its elements like a Box<[T]>.
unsafe impl<T: Send> Send for ZeroedArray<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for ZeroedArray<T> {}

impl<T: Copy> ZeroedArray<T> {
    pub(crate) const fn empty() -> ZeroedArray<T> {
        ZeroedArray { ptr: NonNull::dangling(), len: 0, _owns: PhantomData }
    }

    /// # Safety
    /// The all-zero bit pattern is a valid `T`.
    pub(crate) unsafe fn new(len: usize) -> ZeroedArray<T> {
        assert!(std::mem::align_of::<T>() <= HUGE_PAGE_BYTES);
        let bytes = Self::layout(len).size();
        if bytes == 0 {
            return ZeroedArray::empty();
        }
        let ptr = match Placement::of(bytes) {
            Placement::Heap => {
                let layout = Self::layout(len);
                // SAFETY: non-zero size.
                let raw = unsafe { std::alloc::alloc_zeroed(layout) };
                NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
            }
            Placement::Block(class) => {
                let (block, zeroed) = alloc_block(class);
                if !zeroed {
                    // SAFETY: the block is ours and at least `bytes` long.
                    unsafe { block.as_ptr().write_bytes(0, bytes) };
                }
                block
            }
            Placement::Mapping(mapped) => map_aligned(mapped),
        };
        ZeroedArray { ptr: ptr.cast::<T>(), len, _owns: PhantomData }
    }

    fn layout(len: usize) -> Layout {
        Layout::array::<T>(len).unwrap_or_else(|_| panic!("array of {len} elements overflows the address space"))
    }
}

impl<T> std::ops::Deref for ZeroedArray<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements (zeroed, valid by `new`'s contract).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for ZeroedArray<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref; we own the memory uniquely.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// Where a [`ZeroedArray`] of some size lives: small ones on the global
/// heap (a table of a few rows must not cost 64 KiB), mid-sized ones in a
/// pooled block (a sharded hash table's shards are 64 KiB to 1 MiB each),
/// large ones in their own mapping (size rounded up to huge pages).
enum Placement {
    Heap,
    Block(usize),
    Mapping(usize),
}

impl Placement {
    fn of(bytes: usize) -> Placement {
        if bytes < CHUNK_BYTES {
            return Placement::Heap;
        }
        match (0..BLOCK_CLASSES).find(|&class| block_bytes(class) >= bytes) {
            Some(class) => Placement::Block(class),
            None => Placement::Mapping(bytes.next_multiple_of(HUGE_PAGE_BYTES)),
        }
    }
}

impl<T> Drop for ZeroedArray<T> {
    fn drop(&mut self) {
        let Ok(layout) = Layout::array::<T>(self.len) else { return };
        if layout.size() == 0 {
            return;
        }
        let ptr = self.ptr.cast::<u8>();
        // No drop glue runs: `new` requires T: Copy.
        match Placement::of(layout.size()) {
            // SAFETY: allocated by alloc_zeroed with this layout.
            Placement::Heap => unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) },
            // SAFETY: allocated from this class, no longer used.
            Placement::Block(class) => unsafe { free_block(ptr, class) },
            // SAFETY: mapped by map_aligned with this size.
            Placement::Mapping(mapped) => unsafe {
                libc::munmap(ptr.as_ptr().cast(), mapped);
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_aligned_distinct_and_reused() {
        let a = alloc_chunk();
        let b = alloc_chunk();
        assert_ne!(a, b);
        for c in [a, b] {
            assert!((c.as_ptr() as usize).is_multiple_of(CHUNK_BYTES));
            // SAFETY: the chunk is ours and CHUNK_BYTES long.
            unsafe { c.as_ptr().write_bytes(0x5A, CHUNK_BYTES) };
        }
        // SAFETY: freed once, not used afterwards.
        unsafe { free_chunk(b) };
        // Other tests share the pool, so the freed chunk may go to them; the
        // one we get is still a whole, writable chunk.
        let c = alloc_chunk();
        // SAFETY: as above.
        unsafe {
            c.as_ptr().write_bytes(0, CHUNK_BYTES);
            free_chunk(a);
            free_chunk(c);
        }
    }

    #[test]
    fn page_bufs_are_zeroed_and_distinct() {
        let mut a = PageBuf::new();
        a.fill(0xEE);
        let b = PageBuf::new();
        assert!(b.iter().all(|&x| x == 0));
        assert_ne!(a.as_ptr(), b.as_ptr());
        drop(a);
        let c = PageBuf::new();
        assert_eq!(c.len(), PAGE_BUF_BYTES);
        assert!(c.iter().all(|&x| x == 0), "a reused buffer is zeroed again");
    }

    #[test]
    fn zeroed_arrays_small_and_huge() {
        // Heap, block (twice: the second reuses the first's dirty block), mapping.
        for len in [0usize, 1, 1000, 9000, 9000, (HUGE_PAGE_BYTES / 8) + 3] {
            // SAFETY: zero is a valid u64.
            let mut a = unsafe { ZeroedArray::<u64>::new(len) };
            assert_eq!(a.len(), len);
            assert!(a.iter().all(|&x| x == 0));
            if let Some(last) = a.last_mut() {
                *last = 7;
            }
            assert_eq!(a.iter().sum::<u64>(), if len > 0 { 7 } else { 0 });
        }
    }
}
