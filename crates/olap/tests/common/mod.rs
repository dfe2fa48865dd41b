#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use pgtier_engine::{
    ColumnDef, CommitMode, DataType, Database, EngineConfig, Numeric, Snapshot, TableDef, TableId, Transaction, Value,
    WalConfig,
};
use pgtier_olap::{OlapConfig, OlapEngine};
use rand::Rng;

pub fn engine_config() -> EngineConfig {
    EngineConfig {
        commit_mode: CommitMode::Sync,
        wal: WalConfig {
            segment_bytes: 4 << 20,
            async_flush_interval: Duration::from_millis(5),
            record_bytes_max: 1 << 20,
            ..WalConfig::default()
        },
        lock_timeout: Duration::from_secs(10),
        checkpoint_interval: None,
        checkpoint_wal_bytes: u64::MAX,
        checkpoint_on_close: false,
        ..EngineConfig::default()
    }
}

pub fn open(dir: &Path) -> Database {
    Database::open(dir, engine_config()).unwrap()
}

/// Small chunks and eager merges, so a test of a few thousand rows goes
/// through many chunks, tails, compactions and merges.
pub fn olap_config() -> OlapConfig {
    OlapConfig {
        merge_interval: Duration::from_millis(5),
        merge_delta_rows: 64,
        merge_age: Duration::from_millis(20),
        chunk_rows: 128,
        threads: 2,
        ..OlapConfig::default()
    }
}

pub fn start(db: &Database) -> OlapEngine {
    OlapEngine::start(db, olap_config()).unwrap()
}

/// orders(id bigint PK, cust integer, status text, amount numeric(12,2),
/// day date, price double precision, flag boolean, note varchar(20), at timestamp)
pub fn create_orders(db: &Database, name: &str) -> TableId {
    let mut t = db.begin().unwrap();
    let id = t
        .create_table(&TableDef::new(
            name,
            vec![
                ColumnDef::new("id", DataType::Int8).not_null(),
                ColumnDef::new("cust", DataType::Int4),
                ColumnDef::new("status", DataType::Text),
                ColumnDef::new("amount", DataType::Numeric { precision: 12, scale: 2 }),
                ColumnDef::new("day", DataType::Date),
                ColumnDef::new("price", DataType::Float8),
                ColumnDef::new("flag", DataType::Bool),
                ColumnDef::new("note", DataType::Varchar(20)),
                ColumnDef::new("at", DataType::Timestamp(None)),
            ],
            &["id"],
        ))
        .unwrap();
    t.commit().unwrap();
    id
}

const STATUSES: [&str; 4] = ["open", "shipped", "returned", "lost"];

pub fn random_order(rng: &mut impl Rng, id: i64) -> Vec<Value> {
    let mut row = vec![Value::Int8(id)];
    row.push(Value::Int4(rng.random_range(0..50)));
    row.push(Value::Text(STATUSES[rng.random_range(0..STATUSES.len())].into()));
    row.push(Value::Numeric(Numeric::new(rng.random_range(-100_000..10_000_000), 2)));
    row.push(Value::Date(rng.random_range(-3000..9000)));
    row.push(Value::Float8(f64::from(rng.random_range(0..1_000_000)) / 8.0));
    row.push(Value::Bool(rng.random()));
    row.push(Value::Text(format!("n{}", rng.random_range(0..100_000))));
    row.push(Value::Timestamp(rng.random_range(-1_000_000_000_000i64..1_000_000_000_000)));
    // Some NULLs in every nullable column.
    for v in row.iter_mut().skip(1) {
        if rng.random_range(0..10) == 0 {
            *v = Value::Null;
        }
    }
    row
}

/// Rows as comparable text, sorted: Value has no total order.
pub fn sorted(rows: Vec<Vec<Value>>) -> Vec<String> {
    let mut out: Vec<String> = rows.into_iter().map(|r| format!("{r:?}")).collect();
    out.sort_unstable();
    out
}

/// The row store's rows at `t`'s current statement snapshot.
pub fn row_store(t: &mut Transaction, table: TableId) -> Vec<String> {
    let mut rows = Vec::new();
    t.scan_table(table, |r| {
        rows.push(r.values());
        Ok(true)
    })
    .unwrap();
    sorted(rows)
}

/// The columnar copy's rows at `snapshot`.
pub fn columnar(olap: &OlapEngine, table: TableId, snapshot: Snapshot) -> Vec<String> {
    sorted(olap.view(table, snapshot).unwrap().rows().unwrap())
}

pub fn insert_rows(db: &Database, table: TableId, ids: std::ops::Range<i64>, rng: &mut impl Rng) {
    let mut t = db.begin().unwrap();
    for id in ids {
        t.insert(table, &random_order(rng, id)).unwrap();
    }
    t.commit().unwrap();
}
