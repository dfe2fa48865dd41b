//! pgtier embedded storage engine: catalog, compact MVCC row store, primary
//! hash and ordered indexes, READ COMMITTED transactions with row locks and
//! deadlock detection, WAL-backed durability with group commit (sync) or
//! bounded-delay (async) commits, fuzzy checkpoints, recovery, and the
//! ordered commit stream. See README.md for the invariants.
//!
//! Knows nothing of SQL text, the network or PostgreSQL.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod array;
mod backup;
mod catalog;
mod checkpoint;
mod codec;
mod cold;
mod commit_mode;
mod commit_order;
mod consumers;
mod db;
mod error;
mod files;
mod gc;
mod heads;
mod hook_slots;
mod ids;
mod incarnation;
pub mod json;
mod key;
mod numeric_big;
mod ordered;
mod origin;
mod pages;
mod primary;
mod probe;
mod recovery;
mod replica;
mod row;
mod row_meta;
mod row_ref;
mod schema;
mod seams;
mod sequence;
mod slab;
mod stats;
mod stream;
mod table;
mod transaction;
mod txn_slots;
mod types;
mod verify;
mod version;
mod wait_hook;
mod walrec;

pub use backup::{
    BackupManifest, BackupReport, CopyProgress, MANIFEST_FILE, ManifestFile, RestoreReport, restore, restore_standby,
    verify_backup,
};
pub use checkpoint::CheckpointInfo;
pub use cold::{ColdRef, ColdRow, ColdRows};
pub use commit_mode::CommitMode;
pub use consumers::{ConsumerPosition, StreamStart};
pub use db::{Database, EngineConfig};
pub use error::{EngineError, Result};
pub use ids::{CommitTs, Snapshot, TxnId};
pub use incarnation::Incarnation;
pub use numeric_big::{
    AnyNumeric, NUMERIC_DSCALE_MAX, NUMERIC_WEIGHT_DIGITS_MAX, NumericBig, NumericBigRef, NumericKind,
};
pub use origin::Origin;
pub use pgtier_wal::{Lsn, WalConfig, WalReader, WalStats};
pub use primary::TABLE_SHARDS;
pub use recovery::RecoveryReport;
pub use replica::{CommitGate, ReplicaApplier};
pub use row::{ROW_BYTES_MAX, decode_values, encode_values};
pub use row_meta::RowMeta;
pub use row_ref::{RowBuf, RowRef};
pub use schema::{
    AlterTableDef, COLUMNS_MAX, Catalog, CheckDef, Column, ColumnDef, FkAction, FkTiming, ForeignKey, ForeignKeyDef,
    ForeignKeyId, IndexDef, IndexId, IndexKeyOptions, IndexOptions, IndexSchema, KEY_COLUMNS_MAX, ROWID_COLUMN,
    SEQUENCE_COLUMNS, SequenceDefault, SequenceOptions, TableDef, TableId, TableSchema,
};
pub use seams::{
    CommitParticipant, Miss, MissAnswer, MissCover, MissHold, MissHook, MissIntent, MissResolution, WriteGuard,
};
pub use stats::{DbStats, TableStats};
pub use stream::{Change, CommitStream, CommittedTxn, RowChange};
pub use transaction::{CommitInfo, Transaction, wall_clock_us};
pub use types::{
    ArrayRef, BoundedArray, DATE_INFINITY, DATE_NEG_INFINITY, DataType, ElemType, Interval, NUMERIC_PRECISION_MAX,
    NUMERIC_SCALE_MAX, NUMERIC_UNCONSTRAINED, Numeric, TIME_PRECISION_MAX, TIMESTAMP_INFINITY, TIMESTAMP_NEG_INFINITY,
    Value, ValueRef, civil_from_days, coerce, days_from_civil, round_to_precision, write_array_element,
};
pub use verify::TableCheck;
pub use wait_hook::set_wait_hook;
pub use walrec::RowOp;
