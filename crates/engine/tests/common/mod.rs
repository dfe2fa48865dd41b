#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use pgtier_engine::{
    ColumnDef, CommitMode, DataType, Database, EngineConfig, ForeignKeyDef, TableDef, TableId, Value, WalConfig,
};

pub fn config() -> EngineConfig {
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
    Database::open(dir, config()).unwrap()
}

/// parent(id int PK, name text, v bigint), child(pid int, n smallint, note varchar(10), PK(pid, n), FK pid -> parent).
pub fn create_parent_child(db: &Database) -> (TableId, TableId) {
    let mut t = db.begin().unwrap();
    let parent = t
        .create_table(&TableDef::new(
            "parent",
            vec![
                ColumnDef::new("id", DataType::Int4),
                ColumnDef::new("name", DataType::Text),
                ColumnDef::new("v", DataType::Int8).not_null().default_value(Value::Int8(0)),
            ],
            &["id"],
        ))
        .unwrap();
    let mut child_def = TableDef::new(
        "child",
        vec![
            ColumnDef::new("pid", DataType::Int4),
            ColumnDef::new("n", DataType::Int2),
            ColumnDef::new("note", DataType::Varchar(10)),
        ],
        &["pid", "n"],
    );
    child_def.foreign_keys.push(ForeignKeyDef {
        name: None,
        columns: vec!["pid".into()],
        parent_table: "parent".into(),
        parent_columns: vec![],
        on_delete: Default::default(),
        timing: Default::default(),
    });
    let child = t.create_table(&child_def).unwrap();
    t.commit().unwrap();
    (parent, child)
}

pub fn int(v: i32) -> Value {
    Value::Int4(v)
}

pub fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}
