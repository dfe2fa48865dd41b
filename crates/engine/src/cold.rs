//! Cold rows: committed rows whose images live outside memory (the flash
//! tier, for tables no PostgreSQL stands behind), while the row stays in
//! the table as a *stub* (row.rs): its primary key and every column an
//! index reads, plus a [`ColdRef`] naming the image. The primary hash and
//! the indexes keep their entries, so every lookup and scan still finds
//! the row; whatever hands a row out (reads, scans, a writer's latest
//! version, a resolving checkpoint) fetches the image through the table's
//! [`ColdRows`] under the shard lock that keeps the stub alive.
//!
//! Invariants:
//! - Only a row's sole version becomes a stub: committed, not deleted, not
//!   lock-only, no older version under it (`TableStore::swap_in_stub`). The
//!   stub keeps the version's word, so it is visible exactly where the
//!   version was; demotion is not a logical change and logs nothing.
//! - The image is durable in the store before the stub replaces the
//!   version (`ColdRows::store` returns only then).
//! - A stub carries every column of the primary key and of every index
//!   at the time it is made. CREATE INDEX first brings the table's stubs
//!   back to whole rows (`TableStore::promote_stubs`), so no index ever
//!   reads a column a stub dropped.
//! - A stub freed by GC (the row was updated or deleted and no snapshot
//!   sees it), or by DROP TABLE, is released to the store. Stubs live on in
//!   checkpoints (a restart keeps them); a store must keep a released
//!   image's neighbours and may find, after a crash, images no stub names
//!   (stored, then the process died before the swap, or released and not
//!   yet reclaimed): `Database::for_each_stub` tells it which are live.
//! - A stub met with no store attached, or an image the store cannot give
//!   back, fails the statement (XX001): never a row with NULLs for columns.

use std::sync::Arc;

use crate::error::Result;
use crate::hook_slots::{Hook, HookSlots};
use crate::schema::TableId;

/// What names a cold row's image in its store: opaque to the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ColdRef(pub u64);

/// A stub's image to release: its row's encoded key and its reference.
pub(crate) type ColdRelease = (Vec<u8>, ColdRef);

/// A row about to become a stub: its encoded primary key and whole image.
#[derive(Debug)]
pub struct ColdRow<'a> {
    pub key: &'a [u8],
    pub image: &'a [u8],
}

/// Where a table's cold row images are kept.
pub trait ColdRows: Send + Sync {
    /// Stores `rows` of `table` durably and returns one reference per row,
    /// in order. The engine swaps in the stubs only after this returns; a
    /// row that changed meanwhile keeps its version, and its reference is
    /// released at once.
    fn store(&self, table: TableId, rows: &[ColdRow<'_>]) -> Result<Vec<ColdRef>>;

    /// Appends to `out` the image stored as `cold` for row `key` of
    /// `table`. Called under a primary shard's read lock: it must not call
    /// into the engine. An image that is missing, damaged or of another
    /// row is an error, never another row.
    fn fetch(&self, table: TableId, key: &[u8], cold: ColdRef, out: &mut Vec<u8>) -> Result<()>;

    /// The stub naming `cold` is gone (pruned by GC, or its table dropped):
    /// no reader will fetch it again. Called under a primary shard's write
    /// lock (or from a dropping table): it must not call into the engine.
    fn release(&self, table: TableId, key: &[u8], cold: ColdRef);
}

/// The typed side of a table's cold-rows slot.
impl HookSlots {
    pub(crate) fn cold_rows(&self) -> Option<Arc<dyn ColdRows>> {
        self.object(Hook::Cold)
    }

    pub(crate) fn set_cold_rows(&self, store: Option<Arc<dyn ColdRows>>) {
        self.set_object(Hook::Cold, store);
    }
}
