//! What the cache's aging reads about a stored row
//! (`Transaction::row_meta`): its access stamp and its share of the
//! table's memory.

/// A stored row's aging facts ([`crate::Transaction::row_meta`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowMeta {
    /// Access tick of its last read by an application transaction while
    /// its table tracked access (or of its insert then); 0: none seen.
    pub last_access: u32,
    /// Its share of [`crate::Database::table_memory`]: its versions, its
    /// primary hash slot, its index entries.
    pub bytes: u64,
}
