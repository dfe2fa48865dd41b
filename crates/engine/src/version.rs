//! Row versions: a 16-byte header, a 4-byte access stamp, then the row
//! bytes, allocated in the table's slab. A row is a newest-to-oldest chain
//! of versions whose head sits in the primary hash index.
//!
//! Access stamp: the access tick (`DbInner::access_tick`) of the row's
//! last read by an application transaction, on tables that track access
//! (hook_slots.rs); only the chain head's counts. A new version starts with the
//! stamp of the version it supersedes (the row's), a new row with 0 (or the
//! tick, when its table tracks access). It costs 4 bytes a version before
//! rounding to the slab's 8-byte classes: 0 or 8 more, 4 on average.
//!
//! Header word: `[UNCOMMITTED][DELETED][LOCK_ONLY][61 bits: commit ts or txn id]`.
//! - uncommitted: the low bits are the owning transaction's id; the head
//!   version being uncommitted *is* the row's write lock (no lock table).
//! - DELETED: a tombstone carrying a copy of the deleted row (the key stays
//!   readable for hashing, the image feeds the commit stream).
//! - LOCK_ONLY: SELECT FOR UPDATE; a copy readers look through.
//!
//! Safety contract for [`VPtr`] (crate-internal): a version is freed only
//! (a) by the primary-index shard's write-lock holder (GC, rollback,
//! replacing one's own uncommitted version), or (b) when the table drops.
//! So a `VPtr` may be dereferenced while holding that shard's read or write
//! lock, or, for one's own uncommitted versions, at any time before the
//! owning transaction ends.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::ids::{CommitTs, TxnId};
use crate::row::RowLayout;
use crate::slab::Slab;

pub(crate) const UNCOMMITTED: u64 = 1 << 63;
pub(crate) const DELETED: u64 = 1 << 62;
pub(crate) const LOCK_ONLY: u64 = 1 << 61;
pub(crate) const TS_MASK: u64 = LOCK_ONLY - 1;
pub(crate) const FLAGS_MASK: u64 = DELETED | LOCK_ONLY;

#[repr(C)]
pub(crate) struct Version {
    word: AtomicU64,
    prev: AtomicPtr<Version>,
}

/// Where the access stamp (an `AtomicU32`) sits: right after the header,
/// 4-aligned because versions are 8-aligned.
const STAMP_OFFSET: usize = std::mem::size_of::<Version>();
const _: () = assert!(STAMP_OFFSET == 16);
/// Bytes before the row: header and stamp.
pub(crate) const HEADER_BYTES: usize = STAMP_OFFSET + std::mem::size_of::<AtomicU32>();

/// `repr(transparent)` over `NonNull`, so `Option<VPtr>`'s `None` is the null
/// pointer (the hash tables rely on zeroed memory being empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct VPtr(NonNull<Version>);

// SAFETY: versions are shared between threads under the contract above; the
// header fields are atomics and row bytes are immutable once published
// (except one's own uncommitted version, modified under the shard write lock).
unsafe impl Send for VPtr {}
// SAFETY: as above.
unsafe impl Sync for VPtr {}

impl VPtr {
    /// A pointer that is never dereferenced, standing for `id` in tests of
    /// containers of pointers.
    #[cfg(test)]
    pub(crate) fn fake_for_test(id: usize) -> VPtr {
        let addr = std::num::NonZeroUsize::new((id + 1) * std::mem::align_of::<Version>()).unwrap();
        VPtr(NonNull::without_provenance(addr))
    }

    /// The id given to [`VPtr::fake_for_test`].
    #[cfg(test)]
    pub(crate) fn fake_id_for_test(self) -> usize {
        self.0.as_ptr().addr() / std::mem::align_of::<Version>() - 1
    }

    /// A new version over `prev`, whose access stamp it takes over.
    pub(crate) fn alloc(slab: &Slab, word: u64, prev: Option<VPtr>, row: &[u8]) -> VPtr {
        let stamp = prev.map_or(0, VPtr::access);
        let raw = slab.alloc(HEADER_BYTES + row.len());
        let version = raw.cast::<Version>();
        // SAFETY: freshly allocated, 8-aligned, large enough for header,
        // stamp and row.
        unsafe {
            version.as_ptr().write(Version { word: AtomicU64::new(word), prev: AtomicPtr::new(opt_raw(prev)) });
            raw.as_ptr().add(STAMP_OFFSET).cast::<AtomicU32>().write(AtomicU32::new(stamp));
            std::ptr::copy_nonoverlapping(row.as_ptr(), raw.as_ptr().add(HEADER_BYTES), row.len());
        }
        VPtr(version)
    }

    /// Bytes this version takes in the slab (header, stamp, row, rounding).
    pub(crate) fn alloc_bytes(self, layout: &RowLayout) -> u64 {
        crate::slab::round_size(HEADER_BYTES + self.row(layout).len()) as u64
    }

    fn stamp(&self) -> &AtomicU32 {
        // SAFETY: per the module contract the version is alive; `alloc`
        // initialized the stamp, 4-aligned.
        unsafe { &*self.0.as_ptr().cast::<u8>().add(STAMP_OFFSET).cast::<AtomicU32>() }
    }

    /// The access stamp (relaxed: a hint for aging, ordered by nothing).
    #[inline]
    pub(crate) fn access(self) -> u32 {
        self.stamp().load(Ordering::Relaxed)
    }

    /// Records an access at `tick`, writing only when it changes, so the
    /// readers of a hot row do not keep taking its cache line from each
    /// other.
    #[inline]
    pub(crate) fn touch(self, tick: u32) {
        let stamp = self.stamp();
        if stamp.load(Ordering::Relaxed) != tick {
            stamp.store(tick, Ordering::Relaxed);
        }
    }

    /// # Safety
    /// No other reference to the version may be used afterwards; the caller
    /// holds the shard write lock or owns the version.
    pub(crate) unsafe fn free(self, slab: &Slab, layout: &RowLayout) {
        let len = self.row(layout).len();
        // SAFETY: allocated by `alloc` with HEADER_BYTES + len.
        unsafe { slab.free(self.0.cast::<u8>(), HEADER_BYTES + len) };
    }

    fn header(&self) -> &Version {
        // SAFETY: per the module contract the version is alive.
        unsafe { self.0.as_ref() }
    }

    pub(crate) fn word(self) -> u64 {
        self.header().word.load(Ordering::Acquire)
    }

    /// Stamps the commit ts (commit) keeping the flags. Release: readers
    /// that see the ts also see everything the txn wrote.
    pub(crate) fn set_word(self, word: u64) {
        self.header().word.store(word, Ordering::Release);
    }

    pub(crate) fn prev(self) -> Option<VPtr> {
        NonNull::new(self.header().prev.load(Ordering::Acquire)).map(VPtr)
    }

    /// This version and the older ones after it, newest first. Each one's
    /// `prev` is read before it is yielded, so the caller may free it.
    #[inline]
    pub(crate) fn chain(self) -> Chain {
        Chain(Some(self))
    }

    pub(crate) fn set_prev(self, prev: Option<VPtr>) {
        self.header().prev.store(opt_raw(prev), Ordering::Release);
    }

    /// The row bytes. The returned slice must not outlive the protection the
    /// module contract describes; callers keep it within the lock scope.
    pub(crate) fn row<'a>(self, layout: &RowLayout) -> &'a [u8] {
        // SAFETY: the row starts right after the header; its length is
        // derived from its own bytes (flags + var offsets), which lie within
        // the allocation because the encoder wrote at least that much.
        unsafe {
            let base = self.0.as_ptr().cast::<u8>().add(HEADER_BYTES);
            let head = std::slice::from_raw_parts(base, layout.header_len(*base));
            let len = layout.row_len(head);
            std::slice::from_raw_parts(base, len)
        }
    }

    /// Overwrites the row bytes in place; `row` must have the same length.
    /// Only for one's own uncommitted version under the shard write lock.
    pub(crate) fn overwrite_row(self, layout: &RowLayout, row: &[u8]) {
        let current = self.row(layout);
        assert_eq!(current.len(), row.len(), "in-place overwrite needs equal length");
        // SAFETY: same length, exclusive access per the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), current.as_ptr().cast_mut(), row.len()) };
    }
}

/// A row's versions from one on, newest first ([`VPtr::chain`]).
pub(crate) struct Chain(Option<VPtr>);

impl Iterator for Chain {
    type Item = VPtr;

    #[inline]
    fn next(&mut self) -> Option<VPtr> {
        let v = self.0?;
        self.0 = v.prev();
        Some(v)
    }
}

fn opt_raw(p: Option<VPtr>) -> *mut Version {
    p.map_or(std::ptr::null_mut(), |v| v.0.as_ptr())
}

#[inline]
pub(crate) fn is_uncommitted(word: u64) -> bool {
    word & UNCOMMITTED != 0
}
#[inline]
pub(crate) fn is_deleted(word: u64) -> bool {
    word & DELETED != 0
}
#[inline]
pub(crate) fn is_lock_only(word: u64) -> bool {
    word & LOCK_ONLY != 0
}

/// The word of a version `owner` wrote and has not committed yet.
#[inline]
pub(crate) fn uncommitted_word(owner: TxnId, flags: u64) -> u64 {
    debug_assert!(owner.get() & !TS_MASK == 0 && flags & !FLAGS_MASK == 0);
    UNCOMMITTED | flags | owner.get()
}

/// `word` stamped with its commit ts (flags kept).
#[inline]
pub(crate) fn committed_word(word: u64, ts: CommitTs) -> u64 {
    debug_assert!(is_uncommitted(word) && ts.get() & !TS_MASK == 0);
    (word & FLAGS_MASK) | ts.get()
}

/// The transaction that wrote an uncommitted version.
#[inline]
pub(crate) fn owner_of(word: u64) -> TxnId {
    debug_assert!(is_uncommitted(word));
    TxnId::new(word & TS_MASK)
}

/// The commit ts of a committed version.
#[inline]
pub(crate) fn commit_ts_of(word: u64) -> CommitTs {
    debug_assert!(!is_uncommitted(word));
    CommitTs::new(word & TS_MASK)
}

/// The owner of `word` if it is uncommitted and not `me`'s: the
/// transaction holding the row's write lock, for `me` to wait for.
#[inline]
pub(crate) fn locked_by_other(word: u64, me: TxnId) -> Option<TxnId> {
    (is_uncommitted(word) && owner_of(word) != me).then(|| owner_of(word))
}
