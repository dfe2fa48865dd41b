//! Primary-key hash index: encoded key -> head of the row's version chain.
//!
//! Sharded hash tables of bare version pointers in cache-line buckets
//! (heads.rs): 64 bytes per 7 slots, ~13 bytes per row at the average load.
//! Keys are not stored; equality and rehashing read the key out of the row.
//! Each shard has its own `RwLock`: readers share it (uncontended read lock
//! is one atomic add), writers of other shards never meet. The shard lock
//! also protects the versions of its rows from being freed (see version.rs),
//! which is what lets readers walk chains without epochs or hazard pointers.
//! papaya was the suggested map; it allocates every entry separately (32+
//! bytes per row with malloc overhead) and would need its own reclamation
//! scheme for the version chains on top.

use std::cell::RefCell;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::heads::HeadTable;
use crate::key::{KeySpec, hash_key};
use crate::row::RowLayout;
use crate::version::VPtr;

pub(crate) const SHARD_COUNT: usize = 256;

/// How many parts [`crate::Transaction::scan_table_shards`] divides a table into.
pub const TABLE_SHARDS: usize = SHARD_COUNT;
const _: () = assert!(SHARD_COUNT.is_power_of_two());

#[repr(align(64))]
struct Shard {
    map: RwLock<HeadTable>,
}

pub(crate) struct PrimaryIndex {
    shards: Box<[Shard]>,
}

pub(crate) type ShardRead<'a> = RwLockReadGuard<'a, HeadTable>;
pub(crate) type ShardWrite<'a> = RwLockWriteGuard<'a, HeadTable>;

impl Default for PrimaryIndex {
    fn default() -> PrimaryIndex {
        PrimaryIndex::new()
    }
}

impl PrimaryIndex {
    pub(crate) fn new() -> PrimaryIndex {
        PrimaryIndex { shards: (0..SHARD_COUNT).map(|_| Shard { map: RwLock::new(HeadTable::new()) }).collect() }
    }

    #[inline]
    fn shard_of(hash: u64) -> usize {
        shard_of(hash)
    }

    pub(crate) fn read(&self, hash: u64) -> ShardRead<'_> {
        self.shards[Self::shard_of(hash)].map.read()
    }

    pub(crate) fn write(&self, hash: u64) -> ShardWrite<'_> {
        self.shards[Self::shard_of(hash)].map.write()
    }

    /// Calls `f` with the head of every row in shard `shard`, under the
    /// shard's read lock: `f` may walk the chain ([`VPtr::chain`]) and must
    /// not call into the engine. Callers that work between shards with no
    /// lock held (copying rows out, then I/O or pruning) go shard by shard.
    #[inline]
    pub(crate) fn for_each_head_in(&self, shard: usize, mut f: impl FnMut(VPtr)) {
        for head in self.shards[shard].map.read().iter() {
            f(*head);
        }
    }

    /// [`PrimaryIndex::for_each_head_in`] that stops at `f`'s first error.
    pub(crate) fn try_for_each_head_in<E>(
        &self,
        shard: usize,
        mut f: impl FnMut(VPtr) -> Result<(), E>,
    ) -> Result<(), E> {
        for head in self.shards[shard].map.read().iter() {
            f(*head)?;
        }
        Ok(())
    }

    /// Shard `shard`'s write lock, for work over all its rows.
    pub(crate) fn write_shard(&self, shard: usize) -> ShardWrite<'_> {
        self.shards[shard].map.write()
    }

    /// [`PrimaryIndex::for_each_head_in`] over every shard in turn.
    pub(crate) fn for_each_head(&self, mut f: impl FnMut(VPtr)) {
        for shard in 0..SHARD_COUNT {
            self.for_each_head_in(shard, &mut f);
        }
    }

    /// [`PrimaryIndex::for_each_head`] that stops at `f`'s first error.
    pub(crate) fn try_for_each_head<E>(&self, mut f: impl FnMut(VPtr) -> Result<(), E>) -> Result<(), E> {
        for shard in self.shards.iter() {
            for head in shard.map.read().iter() {
                f(*head)?;
            }
        }
        Ok(())
    }

    /// Rows (chains) in all shards.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.map.read().len()).sum()
    }

    /// Unlinks every row, calling `f` with each head; for dropping a table.
    pub(crate) fn drain(&self, mut f: impl FnMut(VPtr)) {
        for shard in self.shards.iter() {
            shard.map.write().drain().for_each(&mut f);
        }
    }

    pub(crate) fn slots_bytes(&self) -> u64 {
        self.shards.iter().map(|s| (s.map.read().capacity() * HeadTable::SLOT_BYTES) as u64).sum()
    }

    pub(crate) fn reserve_total(&self, rows: usize, pk: &KeySpec, layout: &RowLayout) {
        let per_shard = rows / SHARD_COUNT + 1;
        for shard in self.shards.iter() {
            let mut map = shard.map.write();
            let scratch = RefCell::new(Vec::new());
            map.reserve(per_shard, |v| rehash(pk, layout, *v, &scratch));
        }
    }
}

/// The table uses the top 7 bits as tags and the low bits for the bucket;
/// the shard comes from the middle so all stay well distributed.
#[inline]
pub(crate) fn shard_of(hash: u64) -> usize {
    ((hash >> 40) as usize) & (SHARD_COUNT - 1)
}

/// Finds the chain head for `key` in a locked shard.
#[inline]
pub(crate) fn find(
    map: &HeadTable,
    hash: u64,
    key: &[u8],
    pk: &KeySpec,
    layout: &RowLayout,
    scratch: &mut Vec<u8>,
) -> Option<VPtr> {
    map.find(hash, |v| key_eq(pk, layout, *v, key, scratch)).copied()
}

#[inline]
pub(crate) fn key_eq(pk: &KeySpec, layout: &RowLayout, v: VPtr, key: &[u8], scratch: &mut Vec<u8>) -> bool {
    scratch.clear();
    pk.encode_row(layout, v.row(layout), scratch);
    scratch.as_slice() == key
}

pub(crate) fn rehash(pk: &KeySpec, layout: &RowLayout, v: VPtr, scratch: &RefCell<Vec<u8>>) -> u64 {
    let mut buf = scratch.borrow_mut();
    buf.clear();
    pk.encode_row(layout, v.row(layout), &mut buf);
    hash_key(&buf)
}

/// Replaces the head for `key` (which must exist) with `new_head`.
pub(crate) fn replace(
    map: &mut HeadTable,
    hash: u64,
    key: &[u8],
    pk: &KeySpec,
    layout: &RowLayout,
    new_head: VPtr,
    scratch: &mut Vec<u8>,
) {
    let slot = map.find_mut(hash, |v| key_eq(pk, layout, *v, key, scratch));
    match slot {
        Some(slot) => *slot = new_head,
        None => unreachable!("replace of a key that is not in the primary index"),
    }
}

/// Inserts a head for a key known to be absent.
pub(crate) fn insert_new(map: &mut HeadTable, hash: u64, pk: &KeySpec, layout: &RowLayout, head: VPtr) {
    let scratch = RefCell::new(Vec::new());
    map.insert_unique(hash, head, |v| rehash(pk, layout, *v, &scratch));
}

/// Removes the entry for `key`; returns its head.
pub(crate) fn remove(
    map: &mut HeadTable,
    hash: u64,
    key: &[u8],
    pk: &KeySpec,
    layout: &RowLayout,
    scratch: &mut Vec<u8>,
) -> Option<VPtr> {
    map.remove(hash, |v| key_eq(pk, layout, *v, key, scratch))
}
