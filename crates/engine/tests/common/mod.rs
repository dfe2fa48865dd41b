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

/// What `MemCold` holds per reference: table, encoded key, image.
pub type ColdImages = std::collections::HashMap<u64, (TableId, Vec<u8>, Vec<u8>)>;

/// A cold-row store in memory (the engine's `ColdRows` seam), counting
/// what the engine asks of it; `fail_fetch` makes every fetch fail, and
/// `swap_images` hands back the other row's image for a chosen reference.
#[derive(Default)]
pub struct MemCold {
    pub images: std::sync::Mutex<ColdImages>,
    pub next: std::sync::atomic::AtomicU64,
    pub stored: std::sync::atomic::AtomicU64,
    pub fetches: std::sync::atomic::AtomicU64,
    pub releases: std::sync::atomic::AtomicU64,
    /// Releases of an image not held, or held for another row: must stay 0.
    pub bad_releases: std::sync::atomic::AtomicU64,
    pub fail_fetch: std::sync::atomic::AtomicBool,
    pub swap_images: std::sync::Mutex<Option<(u64, u64)>>,
}

impl MemCold {
    pub fn held(&self) -> usize {
        self.images.lock().unwrap().len()
    }

    pub fn count(counter: &std::sync::atomic::AtomicU64) -> u64 {
        counter.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl pgtier_engine::ColdRows for MemCold {
    fn store(
        &self,
        table: TableId,
        rows: &[pgtier_engine::ColdRow<'_>],
    ) -> pgtier_engine::Result<Vec<pgtier_engine::ColdRef>> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut images = self.images.lock().unwrap();
        Ok(rows
            .iter()
            .map(|row| {
                let id = self.next.fetch_add(1, Relaxed) + 1;
                images.insert(id, (table, row.key.to_vec(), row.image.to_vec()));
                self.stored.fetch_add(1, Relaxed);
                pgtier_engine::ColdRef(id)
            })
            .collect())
    }

    fn fetch(
        &self,
        table: TableId,
        key: &[u8],
        cold: pgtier_engine::ColdRef,
        out: &mut Vec<u8>,
    ) -> pgtier_engine::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        self.fetches.fetch_add(1, Relaxed);
        if self.fail_fetch.load(Relaxed) {
            return Err(pgtier_engine::EngineError::Corrupt("injected read failure".into()));
        }
        let mut id = cold.0;
        if let Some((from, to)) = *self.swap_images.lock().unwrap()
            && from == id
        {
            id = to;
        }
        let images = self.images.lock().unwrap();
        let Some((t, k, image)) = images.get(&id) else {
            return Err(pgtier_engine::EngineError::Corrupt(format!("no image {id}")));
        };
        assert_eq!(*t, table, "fetch of another table's image");
        if id == cold.0 {
            assert_eq!(k.as_slice(), key, "fetch of another row's image");
        }
        out.extend_from_slice(image);
        Ok(())
    }

    fn release(&self, table: TableId, key: &[u8], cold: pgtier_engine::ColdRef) {
        self.releases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Counted, not asserted: this runs inside the engine (GC's thread).
        let removed = self.images.lock().unwrap().remove(&cold.0);
        if !removed.is_some_and(|(t, k, _)| t == table && k == key) {
            self.bad_releases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
