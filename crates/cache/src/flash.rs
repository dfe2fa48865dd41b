//! The flash tier under the cache's memory, in clean mode (studies 001 and
//! 003): an instance that aging evicts for memory, whose every change
//! PostgreSQL already has, goes to the flash store (`pgtier-tier`) instead of
//! away; a key lookup that misses in memory finds it there and promotes it,
//! before asking PostgreSQL.
//!
//! The invariant that keeps flash from ever answering stale: **an instance
//! has at most one current copy, in memory or on flash, never both.**
//! - Demotion writes the flash record after the eviction's delete holds the
//!   instance's row locks (no writer can change it any more) and before that
//!   delete commits; readers see it in memory until the commit. A failed
//!   eviction forgets the record again (`Demotion::undo`).
//! - Promotion *takes* the record (read and remove, one winner per key) and
//!   inserts the rows as a `Load` transaction. Tiering is not a change to
//!   the data, so that commit does not wait for the WAL's fsync: a crash
//!   that loses it loses nothing (the next miss reloads from PostgreSQL).
//! - Anything else that puts instances of a group in memory or changes
//!   them wholesale (LOAD, REFRESH, UNLOAD, DROP, ACCEPT DEFINITION) first
//!   moves the group to a new generation: records of older generations are
//!   never found again (the generation is part of the record's key).
//! - Only DYNAMIC groups use flash, whose key lookups are the only way an
//!   application reaches an instance not in memory (scans answer from what
//!   is in memory, as for instances PostgreSQL holds and memory does not);
//!   READONLY groups that autorefresh are not offered flash yet, since a
//!   change arriving for an instance on flash would have to race a promotion.
//!
//! Restart: records are reused only when the store's index was written at a
//! clean close whose token (database incarnation, WAL end, generations)
//! matches the database as recovered; otherwise every record is dropped
//! (this mode keeps nothing flash alone holds).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use pgtier_engine::{Database, Value, decode_values, encode_values};
use pgtier_tier::{FlashStore, Inserted, IoMode, OpenReport, Retention, TierConfig, TierStats};
use serde::{Deserialize, Serialize};

use crate::error::CacheError;
use crate::group::GroupKind;
use crate::instance::{Instance, InstanceLayout};
use crate::registry::GroupEntry;
use crate::statement::{CreateGroup, FlashPolicy};

/// Bumped when the record layout below changes.
const RECORD_FORMAT: u8 = 1;

/// What survives a clean close beside the store's own index: the token the
/// store was closed with, and the groups' generations then.
#[derive(Serialize, Deserialize)]
struct Sidecar {
    token: String,
    generations: HashMap<u32, u64>,
    next_generation: u64,
}

/// The flash tier of one `Cache` (None inside when not configured or disabled).
pub(crate) struct Flash {
    config: Option<TierConfig>,
    store: RwLock<Option<Arc<FlashStore>>>,
    /// Per group (its root table's id, never reused), the generation its
    /// records' keys carry.
    generations: Mutex<HashMap<u32, u64>>,
    next_generation: AtomicU64,
    /// What the last open found (shown by status).
    pub opened: Mutex<Option<OpenReport>>,
    /// Why the tier is not in use although configured (an error at open or later).
    pub failure: Mutex<Option<String>>,
}

/// The key a record is stored under: group, generation, root key.
fn record_key(group: u32, generation: u64, root_key: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    encode_values(root_key, &mut out);
    out
}

/// An instance as stored: format, table count, per table its row count and rows.
fn encode_instance(instance: &Instance) -> Vec<u8> {
    let mut out = vec![RECORD_FORMAT];
    out.extend_from_slice(&(instance.rows.len() as u32).to_le_bytes());
    let mut row_bytes = Vec::new();
    for rows in &instance.rows {
        out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
        for row in rows {
            row_bytes.clear();
            encode_values(row, &mut row_bytes);
            out.extend_from_slice(&(row_bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(&row_bytes);
        }
    }
    out
}

/// The instance in `bytes`, when it has the shape of `layout`'s tables
/// (`widths`: each table's column count now); None when it cannot be one
/// (an older format or a table whose columns changed).
fn decode_instance(bytes: &[u8], widths: &[usize]) -> Option<Instance> {
    let mut at = 0usize;
    let mut take = |n: usize| {
        let slice = bytes.get(at..at.checked_add(n)?)?;
        at += n;
        Some(slice)
    };
    let u32_at = |slice: &[u8]| u32::from_le_bytes(slice.try_into().unwrap_or([0xff; 4])) as usize;
    if take(1)? != [RECORD_FORMAT] {
        return None;
    }
    let tables = u32_at(take(4)?);
    if tables != widths.len() {
        return None;
    }
    let mut instance = Instance { rows: Vec::with_capacity(tables) };
    for &width in widths {
        let count = u32_at(take(4)?);
        let mut rows = Vec::with_capacity(count.min(4096));
        for _ in 0..count {
            let len = u32_at(take(4)?);
            let mut row = Vec::with_capacity(width);
            decode_values(take(len)?, &mut row).ok()?;
            if row.len() != width {
                return None;
            }
            rows.push(row);
        }
        instance.rows.push(rows);
    }
    (at == bytes.len() && instance.rows.first().is_some_and(|root| root.len() == 1)).then_some(instance)
}

impl Flash {
    /// The tier as configured (`config` None: no flash), reusing what a
    /// clean close left when its token matches `db` as recovered.
    pub fn open(config: Option<TierConfig>, db: &Database) -> Flash {
        let flash = Flash {
            config,
            store: RwLock::new(None),
            generations: Mutex::new(HashMap::new()),
            next_generation: AtomicU64::new(1),
            opened: Mutex::new(None),
            failure: Mutex::new(None),
        };
        if flash.config.is_some()
            && let Err(error) = flash.start(db, true)
        {
            *flash.failure.lock() = Some(error.to_string());
        }
        flash
    }

    /// The token a clean close writes and an open expects: this database
    /// directory at this WAL position.
    fn token(db: &Database) -> String {
        format!("{}@{}", db.incarnation().id, db.wal_end().0)
    }

    fn sidecar_path(config: &TierConfig) -> PathBuf {
        let mut path = config.path.clone().into_os_string();
        path.push(".groups");
        PathBuf::from(path)
    }

    /// Opens the store; `reuse`: keep clean records when a clean close vouches for them.
    fn start(&self, db: &Database, reuse: bool) -> Result<(), CacheError> {
        let Some(config) = &self.config else { return Err(not_configured()) };
        let token = Flash::token(db);
        let (store, report) = FlashStore::open(config, token.as_bytes()).map_err(tier_error)?;
        let sidecar: Option<Sidecar> = std::fs::read(Flash::sidecar_path(config))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .filter(|sidecar: &Sidecar| sidecar.token == token);
        match sidecar {
            Some(sidecar) if reuse && report.token_matched => {
                *self.generations.lock() = sidecar.generations;
                self.next_generation.store(sidecar.next_generation, Ordering::SeqCst);
            }
            _ => {
                store.drop_droppable();
            }
        }
        // The sidecar vouches for one open only: after a crash it must not.
        let _ = std::fs::remove_file(Flash::sidecar_path(config));
        *self.opened.lock() = Some(report);
        *self.store.write() = Some(Arc::new(store));
        *self.failure.lock() = None;
        Ok(())
    }

    /// The store while the tier is enabled.
    fn store(&self) -> Option<Arc<FlashStore>> {
        self.store.read().clone()
    }

    pub fn configured(&self) -> bool {
        self.config.is_some()
    }

    pub fn enabled(&self) -> bool {
        self.store.read().is_some()
    }

    fn generation(&self, group: u32) -> u64 {
        *self.generations.lock().entry(group).or_insert(0)
    }

    /// Every record of the group is forgotten (LOAD, REFRESH, UNLOAD, DROP).
    pub fn forget_group(&self, group: u32) {
        let next = self.next_generation.fetch_add(1, Ordering::SeqCst);
        self.generations.lock().insert(group, next);
    }

    /// Whether the group's evicted instances go to flash now.
    pub fn accepts(&self, entry: &GroupEntry) -> bool {
        eligible(&entry.def) && entry.def.flash != FlashPolicy::None && self.enabled()
    }

    /// Stores an instance that is leaving memory; false when the tier did
    /// not take it (then it simply goes, as without flash).
    pub fn demote(&self, entry: &GroupEntry, layout: &InstanceLayout, key: &[Value], instance: &Instance) -> bool {
        let Some(store) = self.store() else { return false };
        let group = layout.root().id.0;
        let retention = if entry.def.flash == FlashPolicy::Keep { Retention::Keep } else { Retention::Evictable };
        let record = record_key(group, self.generation(group), key);
        match store.insert(&record, &encode_instance(instance), retention) {
            Ok(Inserted::Stored) => {
                entry.counters.flash_demoted.fetch_add(1, Ordering::Relaxed);
                true
            }
            Ok(Inserted::Rejected(_)) => {
                entry.counters.flash_rejected.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(error) => {
                self.fail(&error.to_string());
                false
            }
        }
    }

    /// Forgets the record of one instance (a demotion whose eviction failed).
    pub fn forget(&self, entry: &GroupEntry, layout: &InstanceLayout, key: &[Value]) {
        let Some(store) = self.store() else { return };
        let group = layout.root().id.0;
        match store.remove(&record_key(group, self.generation(group), key)) {
            Ok(true) => {
                entry.counters.flash_invalidated.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(error) => self.fail(&error.to_string()),
        }
    }

    /// How the store reads and writes (`direct I/O`, or buffered and why).
    pub fn io_mode(&self) -> Option<String> {
        self.store().map(|store| match store.io_mode() {
            IoMode::Direct => "direct I/O".to_owned(),
            IoMode::Buffered { reason } => format!("buffered ({reason})"),
        })
    }

    /// Takes the instance of `key` off flash, if it is there; the caller
    /// puts it in memory. A record that cannot be read is an error for this
    /// lookup only if it could not be dropped.
    pub fn take(
        &self,
        db: &Database,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: &[Value],
    ) -> Result<Option<Instance>, CacheError> {
        let Some(store) = self.store() else { return Ok(None) };
        let group = layout.root().id.0;
        let record = record_key(group, self.generation(group), key);
        let bytes = match store.take(&record) {
            Ok(Some((bytes, _))) => bytes,
            Ok(None) => {
                entry.counters.flash_missed.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
            // A record that fails its checksum is gone from the index now:
            // PostgreSQL answers instead (clean data is never only here).
            Err(error) => {
                entry.counters.flash_missed.fetch_add(1, Ordering::Relaxed);
                self.note_read_error(&error.to_string());
                return Ok(None);
            }
        };
        let catalog = db.catalog();
        let widths: Vec<usize> = layout
            .tables
            .iter()
            .map(|table| catalog.table(table.id).map_or(usize::MAX, |schema| schema.columns.len()))
            .collect();
        match decode_instance(&bytes, &widths) {
            Some(instance) => {
                entry.counters.flash_promoted.fetch_add(1, Ordering::Relaxed);
                Ok(Some(instance))
            }
            None => {
                entry.counters.flash_missed.fetch_add(1, Ordering::Relaxed);
                Ok(None)
            }
        }
    }

    fn note_read_error(&self, error: &str) {
        eprintln!("pgtier: flash tier: a record could not be read ({error}); PostgreSQL answers for it");
    }

    /// An I/O error: the tier steps aside (memory + PostgreSQL answer), loudly.
    fn fail(&self, error: &str) {
        eprintln!("pgtier: flash tier disabled after an error: {error}; memory and PostgreSQL answer from now on");
        *self.failure.lock() = Some(error.to_owned());
        *self.store.write() = None;
    }

    /// `ENABLE`: opens the store (an empty one: records from before are not vouched for).
    pub fn enable(&self, db: &Database) -> Result<(), CacheError> {
        if self.enabled() {
            return Ok(());
        }
        self.start(db, false)
    }

    /// `DISABLE`: the records go (clean mode: PostgreSQL has them all).
    pub fn disable(&self) -> Result<(), CacheError> {
        let Some(store) = self.store.write().take() else { return Ok(()) };
        store.clear().map_err(tier_error)
    }

    /// `RESIZE`: online, records beyond the new end dropped.
    pub fn resize(&self, bytes: u64) -> Result<(), CacheError> {
        let store = self.store().ok_or_else(not_enabled)?;
        store.resize(bytes).map_err(tier_error)
    }

    pub fn stats(&self) -> Option<TierStats> {
        self.store().map(|store| store.stats())
    }

    /// Clean close: the index and the generations, stamped with the token.
    pub fn close(&self, db: &Database) {
        let Some(config) = &self.config else { return };
        let Some(store) = self.store.write().take() else { return };
        // The token's position must be durable: the next open recovers to it.
        if let Err(error) = db.flush_wal() {
            eprintln!(
                "pgtier: flash tier: the WAL could not be flushed at close ({error}); its records will not be reused"
            );
            return;
        }
        let token = Flash::token(db);
        let sidecar = Sidecar {
            token: token.clone(),
            generations: self.generations.lock().clone(),
            next_generation: self.next_generation.load(Ordering::SeqCst),
        };
        let Ok(store) = Arc::try_unwrap(store) else {
            eprintln!("pgtier: flash tier: still in use at close; its records will not be reused");
            return;
        };
        let written = serde_json::to_vec(&sidecar)
            .map_err(|error| error.to_string())
            .and_then(|bytes| write_durably(&Flash::sidecar_path(config), &bytes).map_err(|e| e.to_string()))
            .and_then(|()| store.close(token.as_bytes()).map_err(|error| error.to_string()));
        if let Err(error) = written {
            let _ = std::fs::remove_file(Flash::sidecar_path(config));
            eprintln!("pgtier: flash tier: the clean close failed ({error}); its records will not be reused");
        }
    }
}

/// Groups whose instances may live on flash (see the module comment).
fn eligible(def: &CreateGroup) -> bool {
    def.dynamic && !(def.kind == GroupKind::ReadOnly && def.autorefresh)
}

/// `FLASH KEEP` on a group that cannot use flash is refused (0A000) rather than ignored.
pub(crate) fn check_policy(def: &CreateGroup) -> Result<(), CacheError> {
    if def.flash != FlashPolicy::Keep || eligible(def) {
        return Ok(());
    }
    let why = if def.dynamic {
        "a READONLY group that autorefreshes cannot use it yet (a change from PostgreSQL could race a promotion)"
    } else {
        "only DYNAMIC groups use it (their key lookups are how an instance not in memory is reached)"
    };
    Err(CacheError::Tier { sqlstate: "0A000", reason: format!("cache group \"{}\": FLASH KEEP: {why}", def.name) })
}

/// `bytes` at `path`: temporary file, fsync, rename, directory fsync.
fn write_durably(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut temp = path.to_path_buf().into_os_string();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(if dir.as_os_str().is_empty() { std::path::Path::new(".") } else { dir })?.sync_all()?;
    }
    Ok(())
}

fn tier_error(error: pgtier_tier::TierError) -> CacheError {
    CacheError::Tier { sqlstate: "58030", reason: error.to_string() }
}

fn not_configured() -> CacheError {
    CacheError::Tier {
        sqlstate: "55000",
        reason: "no flash tier is configured: set [tier] path and size in the configuration".into(),
    }
}

fn not_enabled() -> CacheError {
    CacheError::Tier { sqlstate: "55000", reason: "the flash tier is disabled".into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_survives_its_encoding_and_a_changed_table_is_refused() {
        let instance = Instance {
            rows: vec![
                vec![vec![Value::Int8(7), Value::Text("x".into())]],
                vec![
                    vec![Value::Int8(7), Value::Int4(1), Value::Null],
                    vec![Value::Int8(7), Value::Int4(2), Value::Null],
                ],
            ],
        };
        let bytes = encode_instance(&instance);
        let back = decode_instance(&bytes, &[2, 3]).expect("decodes");
        assert_eq!(back.rows, instance.rows);
        assert!(decode_instance(&bytes, &[2, 4]).is_none(), "a column added since");
        assert!(decode_instance(&bytes, &[2]).is_none(), "a table fewer");
        assert!(decode_instance(&bytes[..bytes.len() - 1], &[2, 3]).is_none(), "cut short");
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_instance(&longer, &[2, 3]).is_none(), "trailing bytes");
    }

    #[test]
    fn generations_separate_keys() {
        let key = [Value::Int8(1)];
        assert_ne!(record_key(1, 0, &key), record_key(1, 1, &key));
        assert_ne!(record_key(1, 0, &key), record_key(2, 0, &key));
        assert_eq!(record_key(1, 0, &key), record_key(1, 0, &[Value::Int8(1)]));
    }
}
