//! Cache groups: trees of PostgreSQL tables mirrored into the engine
//! (DESIGN.md §3). `group` imports and validates a definition from the
//! PostgreSQL catalog and turns it into engine tables; `load` copies whole
//! cache instances (a root row with all its descendants) from one exported
//! snapshot. See README.md for the guarantees.
//!
//! Knows nothing of SQL text beyond the queries it sends PostgreSQL, and
//! nothing of the network protocol.

mod aging;
mod apply;
mod autorefresh;
mod awt;
mod backend_schema;
mod cache;
mod drift;
mod dynamic;
mod error;
mod fence;
mod flash;
mod group;
mod hash;
mod instance;
pub mod lease;
mod load;
mod local_rows;
mod node;
mod persist;
mod pool;
mod registry;
mod sequence;
mod shard;
mod statement;
mod swt;
mod tuning;
mod types;

pub use aging::AgingReport;
pub use autorefresh::{
    AutorefreshConfig, AutorefreshStatus, PROGRESS_TABLE as AUTOREFRESH_TABLE, PredicateCompiler, RowTest,
};
pub use awt::{AwtConfig, AwtStatus, CONSUMER as AWT_CONSUMER, LagCounts, LagHistogram, LaneStatus};
pub use cache::{
    Cache, CacheConfig, GroupInfo, GroupStats, LaneInfo, PartitionAccess, PropagationInfo, RootKey, TableInfo, TierInfo,
};
pub use drift::Drift;
pub use dynamic::refuse_misses_on_standby;
pub use error::CacheError;
pub use flash::TierMode;
pub use group::{CacheGroup, GroupKind, GroupSpec, GroupTable, create_group_tables, define_group};
pub use load::{LoadOptions, LoadProgress, LoadReport, RefreshReport, VerifyTally, load_group};
pub use node::{Claim, NODE_NAME_MAX, NodeIdentity, validate_node_name};
pub use pgtier_backend::snapshot::Cancel;
pub use pgtier_tier::{Admission, DirectIo, TierConfig, TierStats};
pub use registry::UnloadReport;
pub use sequence::{DEFAULT_SEQUENCE_BLOCK, KeyDefault, KeyGeneration};
pub use shard::{NodeShard, ShardMap, WRONG_NODE, with_own_scans};
pub use statement::{Aging, CACHE_VERBS, CacheStatement, CreateGroup, FlashPolicy, TierCommand, parse_cache_statement};
pub use swt::{SLOTS_TABLE, SwtStatus};
pub use tuning::Tuning;
pub use types::{engine_type, engine_value};
