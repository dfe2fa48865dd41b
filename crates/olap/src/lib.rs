//! pgtier's columnar copy (DESIGN.md §2, study 004): chosen tables copied
//! into immutable Arrow column chunks, kept current from the engine's
//! commit stream (the one stream every consumer reads), and read at a
//! statement's snapshot so that an analytic answer equals the row store's
//! at that snapshot. With the `datafusion` feature, DataFusion runs SQL
//! over the copies (`OlapEngine::query`). See README.md for the invariants.
//!
//! Knows the engine; never SQL text of the row path, the network or
//! PostgreSQL.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod compression;
mod copy;
mod delta;
mod engine;
mod error;
#[cfg(feature = "datafusion")]
mod executor;
mod resources;
mod rows;
mod types;

#[cfg(feature = "datafusion")]
mod query;

pub use compression::CompressionRow;
pub use copy::{CHUNK_ROWS, CopyStats, TableView};
pub use engine::{ACK_INTERVAL, OlapConfig, OlapEngine, OlapStats};
pub use error::{OlapError, Result};
pub use resources::{Cpu, ExecutorReport, Placement, Topology, executor_threads, place};
pub use rows::{SideTable, batches_to_rows};

/// The Arrow crates the copies are made of, for callers that read
/// [`TableView::batches`] (one arrow in the tree: the version DataFusion uses).
pub mod arrow {
    pub use arrow_array as array;
    pub use arrow_schema as schema;
}
