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
//! - A read that misses is *answered* from the record instead, which stays
//!   (`answer`; the engine reads the rows for the rest of the statement,
//!   `MissResolution::Answer`): nothing moves, so nothing is evicted to
//!   make room and no copy appears in memory. Only a write (which needs
//!   the rows in memory) or a second read within `RecentReads`' memory
//!   (an instance read often belongs in memory) promotes. With a working
//!   set several times the memory budget, moving every instance read into
//!   memory cost an eviction per read and kept nothing hot longer.
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
//! Unique keys: demotion also stores, per UNIQUE index of the root table
//! other than its primary key, a small *key record* from the root row's
//! values to the root key. A miss by such a key (TATP's `sub_nbr`) that
//! finds one brings that instance into memory without asking PostgreSQL
//! whose row it is. A key record is only a hint: nothing removes it when
//! its instance leaves flash or changes, so the miss checks that the root
//! row in memory holds the key's values before the lookup runs again, and
//! asks PostgreSQL otherwise (`dynamic::TableHook::on_miss`). In
//! write-back mode PostgreSQL's answer can be stale for an instance whose
//! durable record holds a key PostgreSQL does not have yet, so those keys
//! are indexed exactly, in memory (`DirtyKeys`).
//!
//! Restart: clean records are reused only when the store's index was written
//! at a clean close whose token (database incarnation, WAL end, generations)
//! matches the database as recovered; otherwise they are dropped.
//!
//! Write-back mode (`[tier] mode = "write-back"`, study 002) lets instances
//! of AWT groups with changes PostgreSQL does not have yet go to flash too,
//! as *durable* records under a generation of their own that whole-group
//! changes never move:
//! - demotion: one instance per engine transaction; the record is on stable
//!   storage before the eviction commits, and an eviction that does not
//!   commit forgets it again;
//! - promotion: the record is read (not taken), the rows committed in memory
//!   with a synchronous commit, and only then the record removed (its
//!   tombstone durable): a crash between leaves two copies, never none;
//! - two copies after a crash: memory wins (`reconcile`, at open), since
//!   every change after a promotion is made in memory;
//! - LOAD, REFRESH, UNLOAD, ACCEPT DEFINITION and DISABLE first bring the
//!   group's durable records back into memory (`restore_durable`), so
//!   nothing reloads from PostgreSQL over them; DROP drops them with the
//!   group's tables;
//! - after an I/O error the store takes no more demotions but stays open for
//!   reading what only it holds.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use pgtier_engine::{CommitMode, Database, MissAnswer, Origin, RowRef, TableId, Value, decode_values, encode_values};
use pgtier_tier::{FlashStore, Inserted, IoMode, OpenReport, Retention, TierConfig, TierError, TierStats};
use serde::{Deserialize, Serialize};

use crate::error::CacheError;
use crate::group::GroupKind;
use crate::instance::{Instance, InstanceLayout, key_text};
use crate::registry::GroupEntry;
use crate::statement::{CreateGroup, FlashPolicy};

/// Bumped when the record layout below changes: `encode_instance`, the
/// rows as values, which durable (write-back) records use.
const RECORD_FORMAT: u8 = 1;

/// Clean records' layout (`encode_images`): the rows as the engine stores
/// them, under the table ids they were written for.
const IMAGE_FORMAT: u8 = 2;

/// The generation of durable (write-back) records: whole-group changes
/// never move it, since such records are the only copy of their changes.
const DURABLE_GENERATION: u64 = u64::MAX;

/// Bytes of a record key before the root key: group, generation.
const KEY_PREFIX: usize = 12;

/// See `Flash::store_key_records`.
const KEY_RECORDS_MAX_INDEX_FILL: f64 = 0.9;

/// Set in the generation of a key record's key (`key_record_key`):
/// generations count up from 1 and the durable one is `u64::MAX`, so no
/// instance's record key has this bit.
const KEY_RECORD_BIT: u64 = 1 << 62;

/// What a miss found on flash.
pub(crate) enum OnFlash {
    /// Taken off flash; PostgreSQL has it too.
    Clean(Instance),
    /// Still on flash until its copy in memory is durable (`release_durable`).
    Durable(Instance),
}

/// A durable record as read back: the instance's root key, the record's key, its value.
struct DurableRecord {
    root_key: Vec<Value>,
    record: Vec<u8>,
    value: Vec<u8>,
}

/// `[tier] mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TierMode {
    /// Only instances PostgreSQL has in full go to flash.
    #[default]
    Clean,
    /// AWT instances with changes not yet in PostgreSQL go too, durably.
    WriteBack,
}

/// What survives a clean close beside the store's own index: the token the
/// store was closed with, and the groups' generations then.
#[derive(Serialize, Deserialize)]
struct Sidecar {
    token: String,
    generations: HashMap<u32, u64>,
    next_generation: u64,
}

/// Which instances a read was answered from flash for lately: a second
/// read of one while it is remembered promotes it (TinyLFU's doorkeeper,
/// as one direct-mapped table of key hashes: a slot remembers the last key
/// hashed to it, so the memory is bounded and an instance read rarely is
/// forgotten before its next read).
///
/// Its size follows what memory holds (`fit`): about a quarter as many
/// slots as instances in memory, a power of two. A promotion costs an
/// insert now and an eviction and a rewrite later, where an answer costs
/// one read; it pays only for an instance read again before memory's LRU
/// would evict it, and a window of that order promotes those. A fixed 64 Ki
/// slots promoted 13 % of uniformly random reads when memory held 4,600
/// instances (each promotion then pushed another instance out); at 4,600 it
/// now has 2 Ki slots. Under TATP's skew (88,000 instances in memory, a
/// simulation of the sessions' keys) a quarter's window promoted 0.053
/// instances per transaction where 64 Ki promoted 0.063, at the same
/// share of transactions answered from flash.
struct RecentReads {
    slots: RwLock<Box<[AtomicU64]>>,
}

/// Bounds of `RecentReads`' slots: 8 KiB to 8 MiB.
const RECENT_READS_MIN: usize = 1 << 10;
const RECENT_READS_MAX: usize = 1 << 20;

/// Instances in memory per `RecentReads` slot.
const INSTANCES_PER_RECENT_READ: u64 = 4;

impl RecentReads {
    fn new() -> RecentReads {
        RecentReads { slots: RwLock::new(Self::table(RECENT_READS_MIN)) }
    }

    fn table(len: usize) -> Box<[AtomicU64]> {
        (0..len).map(|_| AtomicU64::new(0)).collect()
    }

    /// Sizes the table for `instances` in memory. It grows as soon as memory
    /// holds more and shrinks only at a quarter of its size, so that a count
    /// wavering around a power of two does not keep forgetting every read.
    fn fit(&self, instances: u64) {
        let want = usize::try_from(instances / INSTANCES_PER_RECENT_READ)
            .unwrap_or(usize::MAX)
            .clamp(RECENT_READS_MIN, RECENT_READS_MAX)
            .next_power_of_two();
        let have = self.slots.read().len();
        if want > have || want * 4 <= have {
            *self.slots.write() = Self::table(want);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.read().len()
    }

    /// `record`'s hash (never 0, the empty slot).
    fn hash(record: &[u8]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        record.hash(&mut hasher);
        hasher.finish() | 1
    }

    /// True when a read was answered from `record` lately; forgets it (the
    /// promotion that follows ends its stay on flash).
    fn take(&self, record: &[u8]) -> bool {
        let hash = Self::hash(record);
        let slots = self.slots.read();
        let slot = &slots[(hash as usize) & (slots.len() - 1)];
        slot.compare_exchange(hash, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// A read was answered from `record`.
    fn remember(&self, record: &[u8]) {
        let hash = Self::hash(record);
        let slots = self.slots.read();
        slots[(hash as usize) & (slots.len() - 1)].store(hash, Ordering::Relaxed);
    }
}

/// The flash tier of one `Cache` (None inside when not configured or disabled).
pub(crate) struct Flash {
    config: Option<TierConfig>,
    mode: TierMode,
    /// Set by an I/O error in write-back mode: no more demotions, but the
    /// store stays open for the durable records only it holds.
    demotions_stopped: AtomicBool,
    /// Held shared by each demotion from its check of `demotions_stopped`
    /// to its record being stored, and once exclusively by
    /// `stop_demotions`: after that returns, no demotion is under way, so
    /// DISABLE's restore of the durable records sees every one of them.
    demotion_gate: RwLock<()>,
    store: RwLock<Option<Arc<FlashStore>>>,
    /// Per group (its root table's id, never reused), the generation its
    /// records' keys carry.
    generations: Mutex<HashMap<u32, u64>>,
    next_generation: AtomicU64,
    /// What the last open found (shown by status).
    pub opened: Mutex<Option<OpenReport>>,
    /// Why the tier is not in use although configured (an error at open or later).
    pub failure: Mutex<Option<String>>,
    recent_reads: RecentReads,
    dirty_keys: Mutex<DirtyKeys>,
}

/// Write-back: the unique keys (`key_record_key`, under the durable
/// generation) of every instance whose durable record flash holds, to its
/// root key. A miss by such a key must find the instance, since PostgreSQL
/// may not have the key yet; so unlike clean key records, which may be
/// missing, no entry is ever missing here: a group's durable records are
/// read once, at its first lookup since the store opened, and every
/// durable demotion adds its keys. Entries of records gone may stay (a
/// whole-group restore forgets the group's); the miss checks what it finds
/// against the instance in memory, as for clean key records.
#[derive(Default)]
struct DirtyKeys {
    /// Groups whose durable records were read since the store opened.
    read: std::collections::HashSet<u32>,
    root_keys: HashMap<Vec<u8>, Vec<Value>>,
    /// A durable record's key to its keys in `root_keys`.
    of_record: HashMap<Vec<u8>, Vec<Vec<u8>>>,
}

impl DirtyKeys {
    fn add(&mut self, record: Vec<u8>, keys: Vec<Vec<u8>>, root_key: &[Value]) {
        // The record's keys before (a record read again, or replaced) go
        // first: the new ones may be the same.
        self.remove(&record, root_key);
        for key in &keys {
            self.root_keys.insert(key.clone(), root_key.to_vec());
        }
        self.of_record.insert(record, keys);
    }

    fn remove(&mut self, record: &[u8], root_key: &[Value]) {
        if let Some(keys) = self.of_record.remove(record) {
            self.drop_keys(keys, root_key);
        }
    }

    /// Removes `keys` that still name `root_key` (another instance may
    /// have taken one since).
    fn drop_keys(&mut self, keys: Vec<Vec<u8>>, root_key: &[Value]) {
        for key in keys {
            if self.root_keys.get(&key).is_some_and(|named| named == root_key) {
                self.root_keys.remove(&key);
            }
        }
    }

    fn forget_group(&mut self, group: u32) {
        let prefix = group.to_le_bytes();
        self.read.remove(&group);
        self.root_keys.retain(|key, _| !key.starts_with(&prefix));
        self.of_record.retain(|record, _| !record.starts_with(&prefix));
    }
}

/// The key a record is stored under: group, generation, root key.
fn record_key(group: u32, generation: u64, root_key: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    encode_values(root_key, &mut out);
    out
}

/// The key of a key record: group, generation with `KEY_RECORD_BIT`, the
/// unique index's columns (count, positions) and the root row's values there.
fn key_record_key(group: u32, generation: u64, columns: &[usize], values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&(generation | KEY_RECORD_BIT).to_le_bytes());
    out.extend_from_slice(&(columns.len() as u32).to_le_bytes());
    for &column in columns {
        out.extend_from_slice(&(column as u32).to_le_bytes());
    }
    encode_values(values, &mut out);
    out
}

/// The keys (`key_record_key`) of an instance's root row under each UNIQUE
/// index of the root table other than its primary key; none for an index
/// with a NULL among its columns (NULLs are never equal: no lookup finds a
/// row by them).
fn unique_keys(db: &Database, layout: &InstanceLayout, generation: u64, instance: &Instance) -> Vec<Vec<u8>> {
    let Some(root_row) = instance.rows.first().and_then(|rows| rows.first()) else { return Vec::new() };
    let group = layout.root().id.0;
    let mut keys = Vec::new();
    for index in db.catalog().indexes_of(layout.root().id) {
        if !index.unique || index.primary {
            continue;
        }
        let values: Option<Vec<Value>> = index
            .columns
            .iter()
            .map(|&column| root_row.get(column).filter(|value| !matches!(value, Value::Null)).cloned())
            .collect();
        if let Some(values) = values {
            keys.push(key_record_key(group, generation, &index.columns, &values));
        }
    }
    keys
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

/// A clean record: format, table count, per table its id, row count and
/// rows in the engine's row format (`RowRef::bytes`). A read answered from
/// it hands the rows to the engine as they are (`MissAnswer::images`):
/// decoding values and encoding them into rows again had been a third of
/// the CPU a flash-answered read spent outside the kernel. None when a
/// table is gone or a row does not encode for it (the caller then writes
/// `encode_instance`'s values).
///
/// Only clean records: an image is valid for its table id alone, and any
/// change to a table's columns gives it a new id (the engine's ALTER TABLE
/// is a rewrite), so a clean record of an older table is a miss (PostgreSQL
/// has it). A durable record is the only copy of its changes: it keeps the
/// values, which a table with the same columns under a new id still reads.
fn encode_images(db: &Database, layout: &InstanceLayout, instance: &Instance) -> Option<Vec<u8>> {
    let catalog = db.catalog();
    let mut out = vec![IMAGE_FORMAT];
    out.extend_from_slice(&(instance.rows.len() as u32).to_le_bytes());
    let mut image = Vec::new();
    for (table, rows) in layout.tables.iter().zip(&instance.rows) {
        let schema = catalog.table(table.id)?;
        out.extend_from_slice(&table.id.0.to_le_bytes());
        out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
        for row in rows {
            image.clear();
            RowRef::encode(schema, row, &mut image).ok()?;
            out.extend_from_slice(&(image.len() as u32).to_le_bytes());
            out.extend_from_slice(&image);
        }
    }
    Some(out)
}

/// One table's row images in a record.
type TableImages<'a> = (TableId, Vec<&'a [u8]>);

/// The row images of an `IMAGE_FORMAT` record, per table, when it was
/// written for `layout`'s tables as they are now (the same ids, in order,
/// one root row); None otherwise. The images themselves are checked by
/// whoever reads them (`RowRef::from_image`, the engine's answer path).
fn split_images<'a>(bytes: &'a [u8], layout: &InstanceLayout) -> Option<Vec<TableImages<'a>>> {
    let mut reader = RecordReader { bytes, at: 0 };
    if reader.take(1)? != [IMAGE_FORMAT] || reader.u32()? as usize != layout.tables.len() {
        return None;
    }
    let mut tables = Vec::with_capacity(layout.tables.len());
    for table in &layout.tables {
        if TableId(reader.u32()?) != table.id {
            return None;
        }
        let count = reader.u32()? as usize;
        let mut rows = Vec::with_capacity(count.min(4096));
        for _ in 0..count {
            let len = reader.u32()? as usize;
            rows.push(reader.take(len)?);
        }
        tables.push((table.id, rows));
    }
    (reader.done() && tables.first().is_some_and(|(_, root)| root.len() == 1)).then_some(tables)
}

/// Bounds-checked reads through a record's bytes (both formats' framing).
struct RecordReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> RecordReader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// Whether every byte was read.
    fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// The instance a record holds, in either format, when it fits `layout`'s
/// tables now; None when it cannot be one.
fn decode_record(db: &Database, layout: &InstanceLayout, bytes: &[u8]) -> Option<Instance> {
    if bytes.first() != Some(&IMAGE_FORMAT) {
        return decode_instance(bytes, &widths(db, layout));
    }
    let catalog = db.catalog();
    let mut instance = Instance { rows: Vec::with_capacity(layout.tables.len()) };
    for (table, images) in split_images(bytes, layout)? {
        let schema = catalog.table(table)?;
        let rows = images.into_iter().map(|image| RowRef::from_image(schema, image).ok().map(|row| row.values()));
        instance.rows.push(rows.collect::<Option<Vec<_>>>()?);
    }
    Some(instance)
}

/// A record as the rows answering a read (no covers yet), in either
/// format: images as they are, values otherwise.
fn answer_rows(db: &Database, layout: &InstanceLayout, bytes: &[u8]) -> Option<MissAnswer> {
    if bytes.first() != Some(&IMAGE_FORMAT) {
        return decode_instance(bytes, &widths(db, layout)).map(|instance| instance_answer(layout, instance));
    }
    // Checked here as well as by the engine: a record that does not fit is
    // a miss (PostgreSQL answers), not the statement's error.
    let catalog = db.catalog();
    let mut answer = MissAnswer::default();
    for (table, images) in split_images(bytes, layout)? {
        let schema = catalog.table(table)?;
        for image in images {
            RowRef::from_image(schema, image).ok()?;
            answer.images.push((table, image.to_vec()));
        }
    }
    Some(answer)
}

/// An instance's rows as the rows answering a read (no covers yet).
fn instance_answer(layout: &InstanceLayout, instance: Instance) -> MissAnswer {
    let rows = layout
        .tables
        .iter()
        .zip(instance.rows)
        .flat_map(|(table, rows)| rows.into_iter().map(move |row| (table.id, row)))
        .collect();
    MissAnswer { rows, ..MissAnswer::default() }
}

/// The instance in `bytes`, when it has the shape of `layout`'s tables
/// (`widths`: each table's column count now); None when it cannot be one
/// (an older format or a table whose columns changed).
fn decode_instance(bytes: &[u8], widths: &[usize]) -> Option<Instance> {
    let mut reader = RecordReader { bytes, at: 0 };
    if reader.take(1)? != [RECORD_FORMAT] {
        return None;
    }
    let tables = reader.u32()? as usize;
    if tables != widths.len() {
        return None;
    }
    let mut instance = Instance { rows: Vec::with_capacity(tables) };
    for &width in widths {
        let count = reader.u32()? as usize;
        let mut rows = Vec::with_capacity(count.min(4096));
        for _ in 0..count {
            let len = reader.u32()? as usize;
            let mut row = Vec::with_capacity(width);
            decode_values(reader.take(len)?, &mut row).ok()?;
            if row.len() != width {
                return None;
            }
            rows.push(row);
        }
        instance.rows.push(rows);
    }
    (reader.done() && instance.rows.first().is_some_and(|root| root.len() == 1)).then_some(instance)
}

impl Flash {
    /// The tier as configured (`config` None: no flash), reusing what a
    /// clean close left when its token matches `db` as recovered.
    pub fn open(config: Option<TierConfig>, mode: TierMode, db: &Database) -> Flash {
        let flash = Flash {
            config,
            mode,
            demotions_stopped: AtomicBool::new(false),
            demotion_gate: RwLock::new(()),
            store: RwLock::new(None),
            generations: Mutex::new(HashMap::new()),
            next_generation: AtomicU64::new(1),
            opened: Mutex::new(None),
            failure: Mutex::new(None),
            recent_reads: RecentReads::new(),
            dirty_keys: Mutex::new(DirtyKeys::default()),
        };
        if flash.config.is_some()
            && let Err(error) = flash.start(db, true)
        {
            // The server runs without it (memory and PostgreSQL answer),
            // but not silently: `pgtier tier status` shows the reason too.
            tracing::error!(
                "flash tier not opened: {error}; memory and PostgreSQL answer until ALTER CACHE TIER ENABLE"
            );
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
            Some(sidecar) if reuse && report.token_matched && report.clean => {
                *self.generations.lock() = sidecar.generations;
                self.next_generation.store(sidecar.next_generation, Ordering::SeqCst);
            }
            // Durable records stay: they are the only copy of their changes.
            _ => {
                store.drop_droppable();
            }
        }
        // The sidecar vouches for one open only: after a crash it must not.
        let _ = std::fs::remove_file(Flash::sidecar_path(config));
        *self.opened.lock() = Some(report);
        *self.dirty_keys.lock() = DirtyKeys::default();
        *self.store.write() = Some(Arc::new(store));
        *self.failure.lock() = None;
        Ok(())
    }

    /// The store while the tier is enabled.
    pub(crate) fn store(&self) -> Option<Arc<FlashStore>> {
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

    /// Sizes the memory of reads answered from flash for `instances` in
    /// memory across the groups that use flash (`RecentReads::fit`).
    pub fn fit_recent_reads(&self, instances: u64) {
        self.recent_reads.fit(instances);
    }

    /// Whether the group's evicted instances go to flash now.
    pub fn accepts(&self, entry: &GroupEntry) -> bool {
        eligible(&entry.def)
            && entry.def.flash != FlashPolicy::None
            && self.enabled()
            && !self.demotions_stopped.load(Ordering::Relaxed)
    }

    /// Whether rows of local tables may move to flash now (write-back mode:
    /// flash holds their only copy; `local_rows.rs`).
    pub(crate) fn accepts_local_rows(&self) -> bool {
        self.mode == TierMode::WriteBack && self.enabled() && !self.demotions_stopped.load(Ordering::Relaxed)
    }

    /// A pass for a round of local-row demotions: held, DISABLE's
    /// `stop_demotions` waits for the round to end (its records must all
    /// have their stubs before DISABLE looks for leftovers). None: rows may
    /// not move now.
    pub(crate) fn local_demotion_pass(&self) -> Option<parking_lot::RwLockReadGuard<'_, ()>> {
        let gate = self.demotion_gate.read();
        self.accepts_local_rows().then_some(gate)
    }

    /// Whether flash may hold instances of the group with changes
    /// PostgreSQL does not have yet (write-back mode, AWT groups), even
    /// when it takes no more now.
    pub fn holds_dirty(&self, entry: &GroupEntry) -> bool {
        self.mode == TierMode::WriteBack && entry.def.kind == GroupKind::Awt && eligible(&entry.def) && self.enabled()
    }

    /// Whether instances of the group with changes PostgreSQL does not have
    /// yet go to flash too (write-back mode, AWT groups).
    pub fn accepts_dirty(&self, entry: &GroupEntry) -> bool {
        self.mode == TierMode::WriteBack && entry.def.kind == GroupKind::Awt && self.accepts(entry)
    }

    /// Stores an instance with changes PostgreSQL does not have yet, to be
    /// durable at the next `sync_durable` (which its eviction must wait for
    /// before it commits).
    pub fn demote_dirty(
        &self,
        db: &Database,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: &[Value],
        instance: &Instance,
    ) -> bool {
        let _gate = self.demotion_gate.read();
        if self.demotions_stopped.load(Ordering::Acquire) {
            return false;
        }
        let Some(store) = self.store() else { return false };
        let record = record_key(layout.root().id.0, DURABLE_GENERATION, key);
        // A durable record of the instance still there belongs to a promotion
        // (or a restore) that has committed the rows in memory and not yet
        // removed it: a new record now would be the one that removal takes.
        // The instance stays in memory this round.
        if store.contains(&record) {
            return false;
        }
        // Its keys first: from the moment the record is stored, a miss may
        // need them (an entry for a record not stored is harmless).
        let keys = unique_keys(db, layout, DURABLE_GENERATION, instance);
        self.dirty_keys.lock().add(record.clone(), keys, key);
        let stored = self.store_record(&store, entry, &record, &encode_instance(instance), Retention::Durable);
        if stored {
            entry.counters.flash_demoted_dirty.fetch_add(1, Ordering::Relaxed);
        } else {
            self.dirty_keys.lock().remove(&record, key);
        }
        stored
    }

    /// The root key `DirtyKeys` has for `key`, reading the group's durable
    /// records first if this is its first lookup since the store opened. A
    /// record that cannot be read is skipped: a miss that needs that
    /// instance finds it unreadable (XX001) when it promotes it.
    fn dirty_root_key(&self, db: &Database, layout: &InstanceLayout, key: &[u8]) -> Option<Vec<Value>> {
        let group = layout.root().id.0;
        let mut dirty = self.dirty_keys.lock();
        if !dirty.read.contains(&group) {
            match self.durable_records(group) {
                Ok(records) => {
                    for DurableRecord { root_key, record, value } in records {
                        if let Some(instance) = decode_record(db, layout, &value) {
                            dirty.add(record, unique_keys(db, layout, DURABLE_GENERATION, &instance), &root_key);
                        }
                    }
                    dirty.read.insert(group);
                }
                Err(error) => {
                    self.note_read_error(&error.to_string());
                    return None;
                }
            }
        }
        dirty.root_keys.get(key).cloned()
    }

    /// Makes the durable records `demote_dirty` stored so far stable (one
    /// sync for a whole eviction batch); false after an I/O error (the tier
    /// then takes nothing more, `fail`).
    pub fn sync_durable(&self) -> bool {
        let Some(store) = self.store() else { return false };
        match store.sync() {
            Ok(()) => true,
            Err(error) => {
                self.fail(&error.to_string());
                false
            }
        }
    }

    /// Writes an instance's record, counting the demotion or the rejection;
    /// an I/O error takes the tier out of use (`fail`). True when stored.
    fn store_record(
        &self,
        store: &FlashStore,
        entry: &GroupEntry,
        record: &[u8],
        value: &[u8],
        retention: Retention,
    ) -> bool {
        // Durable records are made stable by `sync_durable`, once per batch.
        let insert = if retention == Retention::Durable { FlashStore::insert_deferred } else { FlashStore::insert };
        match insert(store, record, value, retention) {
            Ok(Inserted::Stored) => {
                entry.counters.flash_demoted.fetch_add(1, Ordering::Relaxed);
                true
            }
            // Full: the durable share of the store is used up; the instance stays in memory.
            Ok(Inserted::Rejected(_)) | Err(TierError::Full(_)) => {
                entry.counters.flash_rejected.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(error) => {
                self.fail(&error.to_string());
                false
            }
        }
    }

    /// Whether a durable record was ever found damaged (the only copy of
    /// its changes): from then on an instance with pending changes that
    /// neither memory nor flash holds may be that one, and "absent" could
    /// be a wrong answer.
    pub fn lost_durable(&self) -> bool {
        self.store().is_some_and(|store| store.stats().durable_corrupt_records > 0)
    }

    /// Removes the durable record of `key` (its copy in memory is durable
    /// now, or its eviction did not commit); returns once the removal is durable.
    pub fn release_durable(&self, layout: &InstanceLayout, key: &[Value]) -> Result<(), CacheError> {
        let Some(store) = self.store() else { return Ok(()) };
        let record = record_key(layout.root().id.0, DURABLE_GENERATION, key);
        store.remove(&record).map_err(tier_error)?;
        self.dirty_keys.lock().remove(&record, key);
        Ok(())
    }

    /// Stores an instance that is leaving memory; false when the tier did
    /// not take it (then it simply goes, as without flash).
    pub fn demote(
        &self,
        db: &Database,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: &[Value],
        instance: &Instance,
    ) -> bool {
        let _gate = self.demotion_gate.read();
        if self.demotions_stopped.load(Ordering::Acquire) {
            return false;
        }
        let Some(store) = self.store() else { return false };
        let group = layout.root().id.0;
        let retention = if entry.def.flash == FlashPolicy::Keep { Retention::Keep } else { Retention::Evictable };
        let generation = self.generation(group);
        let record = record_key(group, generation, key);
        let value = encode_images(db, layout, instance).unwrap_or_else(|| encode_instance(instance));
        let stored = self.store_record(&store, entry, &record, &value, retention);
        if stored {
            self.store_key_records(db, &store, layout, generation, key, instance);
        }
        stored
    }

    /// The key records of an instance just stored (see the module comment).
    /// Best effort: one the store does not take costs a later miss by that
    /// key a question to PostgreSQL, nothing more. They need index slots
    /// of their own (`FlashStore::plan_companion_records`: the index plans
    /// two per record from the first one on), and go only while the index
    /// is at most `KEY_RECORDS_MAX_INDEX_FILL` full: a record finding its
    /// index shard full is rejected, and an instance record rejected costs
    /// a whole load from PostgreSQL. (Without either, with TATP's 60 %
    /// cache, the index held 150,000 instances and as many key records,
    /// and 0.28 loads per transaction went to PostgreSQL where 0.01 had.)
    fn store_key_records(
        &self,
        db: &Database,
        store: &FlashStore,
        layout: &InstanceLayout,
        generation: u64,
        key: &[Value],
        instance: &Instance,
    ) {
        let records = unique_keys(db, layout, generation, instance);
        if records.is_empty() {
            return;
        }
        store.plan_companion_records();
        if store.index_fill() > KEY_RECORDS_MAX_INDEX_FILL {
            return;
        }
        let mut root_key = Vec::with_capacity(16);
        encode_values(key, &mut root_key);
        for record in records {
            match store.insert(&record, &root_key, Retention::Evictable) {
                Ok(_) | Err(TierError::Full(_)) => {}
                Err(error) => {
                    self.fail(&error.to_string());
                    return;
                }
            }
        }
    }

    /// The root key a key record names for the root table's unique
    /// `columns` equal to `values` (a hint, see the module comment); None
    /// when flash has none.
    pub fn root_key_by_unique(
        &self,
        db: &Database,
        layout: &InstanceLayout,
        table: TableId,
        columns: &[usize],
        values: &[Value],
    ) -> Option<Vec<Value>> {
        if table != layout.root().id {
            return None;
        }
        let store = self.store()?;
        let group = table.0;
        if self.mode == TierMode::WriteBack
            && let Some(key) =
                self.dirty_root_key(db, layout, &key_record_key(group, DURABLE_GENERATION, columns, values))
        {
            return Some(key);
        }
        match store.get(&key_record_key(group, self.generation(group), columns, values)) {
            Ok(Some((bytes, _))) => {
                let mut key = Vec::new();
                decode_values(&bytes, &mut key).ok()?;
                Some(key)
            }
            Ok(None) => None,
            Err(error) => {
                self.note_read_error(&error.to_string());
                None
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

    /// The instance of `key` on flash, if it is there: a clean record is
    /// taken off, a durable one only read (the caller commits it in memory,
    /// then `release_durable`). A clean record that cannot be read is a miss
    /// (PostgreSQL has it); a durable one is an error (XX001): it was the
    /// only copy.
    pub fn find(
        &self,
        db: &Database,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: &[Value],
    ) -> Result<Option<OnFlash>, CacheError> {
        let Some(store) = self.store() else { return Ok(None) };
        let group = layout.root().id.0;
        match store.take(&record_key(group, self.generation(group), key)) {
            Ok(Some((bytes, _))) => {
                if let Some(instance) = decode_record(db, layout, &bytes) {
                    entry.counters.flash_promoted.fetch_add(1, Ordering::Relaxed);
                    return Ok(Some(OnFlash::Clean(instance)));
                }
            }
            Ok(None) => {}
            Err(error) => self.note_read_error(&error.to_string()),
        }
        if let Some(instance) = self.durable_record(db, &store, entry, layout, key)? {
            entry.counters.flash_promoted.fetch_add(1, Ordering::Relaxed);
            return Ok(Some(OnFlash::Durable(instance)));
        }
        entry.counters.flash_missed.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    }

    /// The durable (write-back) record of `key`, if any: the only copy of
    /// its changes, so one that cannot be read is an error (XX001).
    fn durable_record(
        &self,
        db: &Database,
        store: &FlashStore,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: &[Value],
    ) -> Result<Option<Instance>, CacheError> {
        if self.mode != TierMode::WriteBack {
            return Ok(None);
        }
        match store.get(&record_key(layout.root().id.0, DURABLE_GENERATION, key)) {
            Ok(Some((bytes, _))) => {
                decode_record(db, layout, &bytes).map(Some).ok_or_else(|| lost(&entry.def.name, key))
            }
            Ok(None) => Ok(None),
            Err(error) => Err(CacheError::Tier {
                sqlstate: "XX001",
                reason: format!(
                    "cache group \"{}\": the flash record of instance {} cannot be read: {error}",
                    entry.def.name,
                    key_text(key)
                ),
            }),
        }
    }

    /// The rows of `key`'s instance on flash, for a read that missed in
    /// memory (no covers: the caller adds them), left where they are (see
    /// the module comment). None when flash does not
    /// have it, or when it was read from flash lately: then the caller
    /// promotes it (`find`). A clean record that cannot be read is a miss
    /// (PostgreSQL has it); a durable one an error (XX001), as in `find`.
    pub fn answer(
        &self,
        db: &Database,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: &[Value],
    ) -> Result<Option<MissAnswer>, CacheError> {
        let Some(store) = self.store() else { return Ok(None) };
        let group = layout.root().id.0;
        let clean = record_key(group, self.generation(group), key);
        if self.recent_reads.take(&clean) {
            return Ok(None);
        }
        match store.get(&clean) {
            Ok(Some((bytes, _))) => {
                if let Some(answer) = answer_rows(db, layout, &bytes) {
                    self.recent_reads.remember(&clean);
                    entry.counters.flash_answered.fetch_add(1, Ordering::Relaxed);
                    return Ok(Some(answer));
                }
            }
            Ok(None) => {}
            Err(error) => self.note_read_error(&error.to_string()),
        }
        let Some(durable) = self.durable_record(db, &store, entry, layout, key)? else { return Ok(None) };
        self.recent_reads.remember(&clean);
        entry.counters.flash_answered.fetch_add(1, Ordering::Relaxed);
        Ok(Some(instance_answer(layout, durable)))
    }

    /// Every durable record of the group.
    fn durable_records(&self, group: u32) -> Result<Vec<DurableRecord>, CacheError> {
        let Some(store) = self.store() else { return Ok(Vec::new()) };
        let prefix = record_key(group, DURABLE_GENERATION, &[]);
        let mut found = Vec::new();
        store
            .for_each_durable(|record, value| {
                if record.starts_with(&prefix) {
                    let mut root_key = Vec::new();
                    if decode_values(&record[KEY_PREFIX..], &mut root_key).is_ok() {
                        found.push(DurableRecord { root_key, record: record.to_vec(), value: value.to_vec() });
                    }
                }
                true
            })
            .map_err(tier_error)?;
        Ok(found)
    }

    /// Brings every durable record of the group back into memory (before a
    /// whole-group change, and DISABLE): committed durably there, then
    /// removed; where memory holds the instance already, memory wins.
    pub fn restore_durable(
        &self,
        db: &Database,
        entry: &GroupEntry,
        layout: &InstanceLayout,
    ) -> Result<u64, CacheError> {
        let Some(store) = self.store() else { return Ok(0) };
        let mut restored = 0;
        for DurableRecord { root_key, record, value } in self.durable_records(layout.root().id.0)? {
            if !layout.root_cached(db, &root_key)? {
                let instance = decode_record(db, layout, &value).ok_or_else(|| lost(&entry.def.name, &root_key))?;
                let mut txn = db.begin_with_origin(CommitMode::Sync, Origin::Load)?;
                for (table, rows) in layout.tables.iter().zip(&instance.rows) {
                    for row in rows {
                        txn.insert(table.id, row)?;
                    }
                }
                txn.commit()?;
                restored += 1;
            }
            store.remove(&record).map_err(tier_error)?;
        }
        self.dirty_keys.lock().forget_group(layout.root().id.0);
        Ok(restored)
    }

    /// At open, after a crash: a durable record whose instance memory holds
    /// is the older copy (a promotion whose removal did not finish) and
    /// goes; records of groups that no longer exist go too. Returns the keys
    /// of local tables' rows it passed over (`Cache::reconcile_local_rows`
    /// takes them from this one walk of the durable records).
    pub fn reconcile(
        &self,
        db: &Database,
        groups: &[(Arc<GroupEntry>, InstanceLayout)],
    ) -> Result<Vec<Vec<u8>>, CacheError> {
        let Some(store) = self.store() else { return Ok(Vec::new()) };
        let mut local = Vec::new();
        let mut stale = Vec::new();
        let mut by_group: HashMap<u32, &InstanceLayout> = HashMap::new();
        for (_, layout) in groups {
            by_group.insert(layout.root().id.0, layout);
        }
        let mut records = Vec::new();
        store
            .for_each_durable(|record, _| {
                records.push(record.to_vec());
                true
            })
            .map_err(tier_error)?;
        for record in records {
            // Rows of local tables: `Cache::reconcile_local_rows`'s.
            if record.starts_with(&crate::local_rows::LOCAL_PREFIX) {
                local.push(record);
                continue;
            }
            let group = u32::from_le_bytes(record[..4].try_into().unwrap_or([0xff; 4]));
            let mut root_key = Vec::new();
            let readable = record.len() >= KEY_PREFIX && decode_values(&record[KEY_PREFIX..], &mut root_key).is_ok();
            match by_group.get(&group) {
                Some(layout) if readable && !layout.root_cached(db, &root_key)? => {}
                _ => stale.push(record),
            }
        }
        for record in stale {
            store.remove(&record).map_err(tier_error)?;
        }
        Ok(local)
    }

    /// DROP CACHE GROUP: the group's durable records go with its tables.
    pub fn drop_durable(&self, group: u32) -> Result<(), CacheError> {
        let Some(store) = self.store() else { return Ok(()) };
        for DurableRecord { record, .. } in self.durable_records(group)? {
            store.remove(&record).map_err(tier_error)?;
        }
        self.dirty_keys.lock().forget_group(group);
        Ok(())
    }

    fn note_read_error(&self, error: &str) {
        tracing::warn!("flash tier: a record could not be read ({error}); PostgreSQL answers for it");
    }

    /// An I/O error: the tier steps aside (memory + PostgreSQL answer),
    /// loudly. In write-back mode it stays open for reading what only it
    /// holds, and takes nothing more.
    fn fail(&self, error: &str) {
        *self.failure.lock() = Some(error.to_owned());
        if self.mode == TierMode::WriteBack {
            tracing::error!("flash tier takes no more instances after an error: {error}; what it holds is still read");
            self.demotions_stopped.store(true, Ordering::Relaxed);
            return;
        }
        tracing::error!("flash tier disabled after an error: {error}; memory and PostgreSQL answer from now on");
        *self.store.write() = None;
    }

    /// `ENABLE`: opens the store (an empty one: records from before are not vouched for).
    pub fn enable(&self, db: &Database) -> Result<(), CacheError> {
        if self.enabled() {
            self.demotions_stopped.store(false, Ordering::Relaxed);
            return Ok(());
        }
        self.start(db, false)?;
        self.demotions_stopped.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// `DISABLE`: the records go (PostgreSQL has every clean one; the caller
    /// restored the durable ones into memory first).
    pub fn disable(&self) -> Result<(), CacheError> {
        let Some(store) = self.store.write().take() else { return Ok(()) };
        let store = quiesce(store);
        let mut durable = 0u64;
        store
            .for_each_durable(|_, _| {
                durable += 1;
                true
            })
            .map_err(tier_error)?;
        if durable > 0 {
            // Demoted while the others were restored: keep the tier rather than lose them.
            *self.store.write() = Some(Arc::new(store));
            return Err(CacheError::Tier {
                sqlstate: "55000",
                reason: format!(
                    "{durable} instance(s) with changes not yet in PostgreSQL are still on flash; try again"
                ),
            });
        }
        store.clear().map_err(tier_error)
    }

    /// Before DISABLE restores what only flash holds: nothing more goes there.
    pub fn stop_demotions(&self) {
        self.demotions_stopped.store(true, Ordering::Release);
        // Demotions that checked the flag before it was set end first.
        drop(self.demotion_gate.write());
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
            tracing::warn!(
                "flash tier: the WAL could not be flushed at close ({error}); its records will not be reused"
            );
            return;
        }
        let token = Flash::token(db);
        let sidecar = Sidecar {
            token: token.clone(),
            generations: self.generations.lock().clone(),
            next_generation: self.next_generation.load(Ordering::SeqCst),
        };
        let store = quiesce(store);
        let written = serde_json::to_vec(&sidecar)
            .map_err(|error| error.to_string())
            .and_then(|bytes| write_durably(&Flash::sidecar_path(config), &bytes).map_err(|e| e.to_string()))
            .and_then(|()| store.close(token.as_bytes()).map_err(|error| error.to_string()));
        if let Err(error) = written {
            let _ = std::fs::remove_file(Flash::sidecar_path(config));
            tracing::warn!("flash tier: the clean close failed ({error}); its records will not be reused");
        }
    }
}

/// Each table's column count now, to check a record's rows against.
fn widths(db: &Database, layout: &InstanceLayout) -> Vec<usize> {
    let catalog = db.catalog();
    layout
        .tables
        .iter()
        .map(|table| catalog.table(table.id).map_or(usize::MAX, |schema| schema.columns.len()))
        .collect()
}

/// A durable record that does not decode: the only copy of its changes.
fn lost(group: &str, key: &[Value]) -> CacheError {
    CacheError::Tier {
        sqlstate: "XX001",
        reason: format!(
            "cache group \"{group}\": the flash record of instance {} does not match the group's tables",
            key_text(key)
        ),
    }
}

/// Groups whose instances may live on flash (see the module comment).
pub(crate) fn eligible(def: &CreateGroup) -> bool {
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

/// The store once no operation holds it any more (each holds it for one
/// read or write): two stores must never be open on one file.
fn quiesce(mut store: Arc<FlashStore>) -> FlashStore {
    loop {
        match Arc::try_unwrap(store) {
            Ok(store) => return store,
            Err(shared) => {
                store = shared;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
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

pub(crate) fn tier_error(error: TierError) -> CacheError {
    CacheError::Tier { sqlstate: error.sqlstate(), reason: error.to_string() }
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

    /// A clean record keeps the rows as the engine stores them: read back
    /// as values (a promotion) or as images (an answer) they are the rows
    /// written; a record of other tables, or damaged framing, is no record.
    #[test]
    fn a_clean_record_of_row_images_reads_back_for_its_tables_only() {
        use crate::instance::TableLayout;
        use pgtier_engine::{ColumnDef, DataType, EngineConfig, TableDef};
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), EngineConfig::default()).expect("open");
        let mut txn = db.begin().expect("begin");
        let columns = |names: &[(&str, DataType)]| names.iter().map(|(n, t)| ColumnDef::new(*n, *t)).collect();
        let root = txn
            .create_table(&TableDef::new("root", columns(&[("id", DataType::Int8), ("name", DataType::Text)]), &["id"]))
            .expect("root");
        let child = txn
            .create_table(&TableDef::new(
                "child",
                columns(&[("id", DataType::Int8), ("n", DataType::Int4), ("note", DataType::Varchar(4))]),
                &["id", "n"],
            ))
            .expect("child");
        txn.commit().expect("commit");
        let table = |id, primary_key: Vec<usize>| TableLayout {
            id,
            key_types: primary_key.iter().map(|_| DataType::Int8).collect(),
            primary_key,
            parent: None,
        };
        let layout = InstanceLayout { tables: vec![table(root, vec![0]), table(child, vec![0, 1])] };
        let instance = Instance {
            rows: vec![
                vec![vec![Value::Int8(7), Value::Text("x".into())]],
                vec![
                    vec![Value::Int8(7), Value::Int4(1), Value::Null],
                    vec![Value::Int8(7), Value::Int4(2), Value::Text("abcd".into())],
                ],
            ],
        };
        let bytes = encode_images(&db, &layout, &instance).expect("encodes");
        assert_eq!(bytes[0], IMAGE_FORMAT);
        assert_eq!(decode_record(&db, &layout, &bytes).expect("decodes").rows, instance.rows);
        let answer = answer_rows(&db, &layout, &bytes).expect("answers");
        assert!(answer.rows.is_empty() && answer.covers.is_empty());
        let tables: Vec<TableId> = answer.images.iter().map(|(table, _)| *table).collect();
        assert_eq!(tables, [root, child, child]);
        let schema = db.catalog().table(child).expect("child").clone();
        let second = RowRef::from_image(&schema, &answer.images[2].1).expect("an image of its table").values();
        assert_eq!(second, instance.rows[1][1]);
        // Values the table's types refuse make no image record.
        let wide = Instance {
            rows: vec![
                instance.rows[0].clone(),
                vec![vec![Value::Int8(7), Value::Int4(1), Value::Text("abcde".into())]],
            ],
        };
        assert!(encode_images(&db, &layout, &wide).is_none());
        // Other tables (a table rewritten under a new id, a table fewer).
        let moved = InstanceLayout { tables: vec![table(root, vec![0]), table(TableId(child.0 + 100), vec![0, 1])] };
        assert!(decode_record(&db, &moved, &bytes).is_none());
        assert!(answer_rows(&db, &moved, &bytes).is_none());
        let fewer = InstanceLayout { tables: vec![table(root, vec![0])] };
        assert!(decode_record(&db, &fewer, &bytes).is_none());
        // Framing.
        assert!(decode_record(&db, &layout, &bytes[..bytes.len() - 1]).is_none(), "cut short");
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(answer_rows(&db, &layout, &longer).is_none(), "trailing bytes");
        // A row image that does not fit its layout (its last byte cut, the
        // lengths around it adjusted): no answer, no values.
        let last_image = answer.images[2].1.len();
        let row_len_at = bytes.len() - last_image - 4;
        let mut short = bytes.clone();
        short.pop();
        short[row_len_at..row_len_at + 4].copy_from_slice(&(last_image as u32 - 1).to_le_bytes());
        assert!(split_images(&short, &layout).is_some(), "the framing still holds");
        assert!(answer_rows(&db, &layout, &short).is_none());
        assert!(decode_record(&db, &layout, &short).is_none());
        // The value format still reads (records written before this one).
        let values = encode_instance(&instance);
        assert_eq!(decode_record(&db, &layout, &values).expect("decodes").rows, instance.rows);
        assert_eq!(answer_rows(&db, &layout, &values).expect("answers").rows.len(), 3);
    }

    #[test]
    fn the_memory_of_answered_reads_follows_the_instances_in_memory() {
        let reads = RecentReads::new();
        assert_eq!(reads.len(), RECENT_READS_MIN);
        reads.remember(b"a");
        reads.fit(4_600);
        assert_eq!(reads.len(), 2048, "a quarter of 4,600, rounded up to a power of two");
        assert!(!reads.take(b"a"), "a new table remembers nothing");
        reads.remember(b"b");
        reads.fit(5_000);
        assert!(reads.take(b"b"), "an unchanged size keeps what it remembers");
        reads.fit(88_000);
        assert_eq!(reads.len(), 32_768);
        reads.fit(40_000);
        assert_eq!(reads.len(), 32_768, "no shrink until a quarter of the size would do");
        reads.fit(20_000);
        assert_eq!(reads.len(), 8_192);
        reads.fit(u64::MAX);
        assert_eq!(reads.len(), RECENT_READS_MAX);
        reads.fit(0);
        assert_eq!(reads.len(), RECENT_READS_MIN);
    }

    #[test]
    fn generations_separate_keys() {
        let key = [Value::Int8(1)];
        assert_ne!(record_key(1, 0, &key), record_key(1, 1, &key));
        assert_ne!(record_key(1, 0, &key), record_key(2, 0, &key));
        assert_eq!(record_key(1, 0, &key), record_key(1, 0, &[Value::Int8(1)]));
    }
}
