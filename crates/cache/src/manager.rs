//! [`Cache`]: the cache groups of one database, and the one entry point the
//! SQL layer, the server and embedded applications call. It owns the group
//! registry (durable in the engine catalog), the backend connection
//! parameters, the dynamic-load hook and the aging thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use pgtier_backend::{ConnectParams, connect_backend};
use pgtier_engine::{Database, Value};
use postgres::Client;

use crate::error::CacheError;
use crate::group::{CacheGroup, GroupKind, GroupSpec, create_group_tables, define_group};
use crate::load::{LoadOptions, LoadReport, load_group};
use crate::statement::{Aging, CreateGroup};

/// Settings of the `[cache]` config section.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Memory all cache groups may use (bytes); None: no global budget.
    pub memory_budget: Option<u64>,
    /// Aging starts evicting above `high_watermark * budget` ...
    pub high_watermark: f64,
    /// ... and stops below `low_watermark * budget`.
    pub low_watermark: f64,
    /// How often the aging thread looks.
    pub aging_interval: Duration,
    /// PARALLEL when LOAD/REFRESH does not say.
    pub load_parallel: usize,
}

impl Default for CacheConfig {
    fn default() -> CacheConfig {
        CacheConfig { memory_budget: None, high_watermark: 0.9, low_watermark: 0.8, aging_interval: Duration::from_secs(1), load_parallel: 1 }
    }
}

/// The root table of a group and its key columns, so the SQL layer can
/// evaluate an UNLOAD/REFRESH predicate on the cache:
/// `SELECT key_columns FROM table WHERE predicate`.
#[derive(Clone, Debug, PartialEq)]
pub struct RootKey {
    pub table: String,
    pub key_columns: Vec<String>,
}

/// What UNLOAD (or an eviction round) removed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UnloadReport {
    pub instances: u64,
    pub rows: u64,
    /// Instances left in place because they hold changes not yet propagated to PostgreSQL.
    pub skipped_dirty: u64,
}

/// What REFRESH did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RefreshReport {
    /// Instances read again from PostgreSQL (replacing the cached ones).
    pub reloaded: u64,
    /// Cached instances PostgreSQL no longer has (or no longer match), removed.
    pub removed: u64,
    pub skipped_dirty: u64,
    pub seconds: f64,
}

/// A row of `pgtier_cache_groups`.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupInfo {
    pub name: String,
    /// "AWT", "SWT" or "READONLY".
    pub kind: &'static str,
    pub dynamic: bool,
    pub root_table: String,
    pub root_predicate: Option<String>,
    /// "OFF", "LRU" or "USE column LIFETIME n SECONDS".
    pub aging: String,
    pub keep: bool,
    pub memory_budget: Option<u64>,
}

/// A row of `pgtier_cache_tables`.
#[derive(Clone, Debug, PartialEq)]
pub struct TableInfo {
    pub group: String,
    pub table: String,
    /// The PostgreSQL table (`schema.table`).
    pub source: String,
    /// None for the root.
    pub parent: Option<String>,
    pub rows: u64,
    pub memory_bytes: u64,
}

/// A row of `pgtier_cache_stats`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupStats {
    pub group: String,
    pub instances: u64,
    pub rows: u64,
    pub memory_bytes: u64,
    pub loaded_instances: u64,
    pub unloaded_instances: u64,
    pub refreshed_instances: u64,
    pub evicted_instances: u64,
    pub dynamic_loads: u64,
    /// Dynamic lookups of keys PostgreSQL does not have either.
    pub dynamic_absent: u64,
    pub miss_latency_avg_us: f64,
    pub miss_latency_max_us: u64,
}

/// One group as the registry holds it.
struct GroupEntry {
    def: CreateGroup,
    group: CacheGroup,
}

/// The cache groups of one database.
#[allow(dead_code)] // config: read by aging (next step)
pub struct Cache {
    db: Database,
    backend: Option<ConnectParams>,
    config: CacheConfig,
    groups: RwLock<BTreeMap<String, Arc<GroupEntry>>>,
}

impl Cache {
    /// Opens the cache over `db`: restores the groups defined earlier,
    /// installs the dynamic-load hooks and starts aging. `backend` None:
    /// groups already defined keep answering, anything that needs
    /// PostgreSQL fails with 08001 and a hint to configure `[backend]`.
    pub fn open(db: Database, backend: Option<ConnectParams>, config: CacheConfig) -> Result<Arc<Cache>, CacheError> {
        Ok(Arc::new(Cache { db, backend, config, groups: RwLock::new(BTreeMap::new()) }))
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    fn connect(&self) -> Result<Client, CacheError> {
        let Some(params) = &self.backend else { return Err(CacheError::NoBackend) };
        Ok(connect_backend(params)?)
    }

    fn entry(&self, name: &str) -> Result<Arc<GroupEntry>, CacheError> {
        self.groups.read().get(name).cloned().ok_or_else(|| CacheError::UndefinedGroup { group: name.to_owned() })
    }

    /// CREATE CACHE GROUP: imports the tables from PostgreSQL and creates them in the cache.
    pub fn create_group(&self, def: &CreateGroup) -> Result<(), CacheError> {
        if self.groups.read().contains_key(&def.name) {
            return Err(CacheError::DuplicateGroup { group: def.name.clone() });
        }
        let spec = GroupSpec { name: def.name.clone(), root: def.root.clone(), children: def.children.clone(), kind: def.kind };
        let group = define_group(&mut self.connect()?, &spec)?;
        create_group_tables(&self.db, &group)?;
        self.groups.write().insert(def.name.clone(), Arc::new(GroupEntry { def: def.clone(), group }));
        Ok(())
    }

    /// DROP CACHE GROUP: drops the group's tables in the cache; PostgreSQL is untouched.
    pub fn drop_group(&self, name: &str, if_exists: bool) -> Result<(), CacheError> {
        let _ = (name, if_exists);
        Err(CacheError::NotYet { what: "DROP CACHE GROUP" })
    }

    /// LOAD CACHE GROUP: `options.predicate` is combined with the group's own.
    pub fn load(&self, name: &str, options: &LoadOptions) -> Result<LoadReport, CacheError> {
        let entry = self.entry(name)?;
        let mut options = options.clone();
        options.predicate = combine(entry.def.root_predicate.as_deref(), options.predicate.as_deref());
        let backend = self.backend.clone().ok_or(CacheError::NoBackend)?;
        load_group(&self.db, || Ok(connect_backend(&backend)?), &entry.group, &options)
    }

    /// The root table and key columns of group `name`.
    pub fn root_key(&self, name: &str) -> Result<RootKey, CacheError> {
        let entry = self.entry(name)?;
        let root = entry.group.root();
        Ok(RootKey { table: root.def.name.clone(), key_columns: root.def.primary_key.clone() })
    }

    /// UNLOAD CACHE GROUP: removes the instances with these root keys (all
    /// when None) from the cache only, as `Origin::Evict` (not deletes).
    pub fn unload(&self, name: &str, keys: Option<&[Vec<Value>]>) -> Result<UnloadReport, CacheError> {
        let _ = (self.entry(name)?, keys);
        Err(CacheError::NotYet { what: "UNLOAD CACHE GROUP" })
    }

    /// REFRESH CACHE GROUP: reloads from PostgreSQL the instances matching
    /// `options.predicate` there (on a dynamic group: only those in
    /// `cached_keys`), and removes the `cached_keys` PostgreSQL no longer has.
    /// `cached_keys`: the root keys of cached instances matching the predicate
    /// (evaluated on the cache).
    pub fn refresh(&self, name: &str, cached_keys: &[Vec<Value>], options: &LoadOptions) -> Result<RefreshReport, CacheError> {
        let _ = (self.entry(name)?, cached_keys, options);
        Err(CacheError::NotYet { what: "REFRESH CACHE GROUP" })
    }

    /// `pgtier_cache_groups`.
    pub fn groups(&self) -> Vec<GroupInfo> {
        self.groups.read().values().map(|entry| group_info(&entry.def, &entry.group)).collect()
    }

    /// `pgtier_cache_tables`.
    pub fn tables(&self) -> Vec<TableInfo> {
        let mut out = Vec::new();
        for entry in self.groups.read().values() {
            for table in &entry.group.tables {
                out.push(TableInfo {
                    group: entry.def.name.clone(),
                    table: table.def.name.clone(),
                    source: table.source.name.to_string(),
                    parent: table.parent.map(|parent| entry.group.tables[parent].def.name.clone()),
                    rows: 0,
                    memory_bytes: 0,
                });
            }
        }
        out
    }

    /// `pgtier_cache_stats`.
    pub fn stats(&self) -> Vec<GroupStats> {
        self.groups.read().keys().map(|name| GroupStats { group: name.clone(), ..GroupStats::default() }).collect()
    }

    /// The group whose table `table` is, if any.
    pub fn group_of_table(&self, table: &str) -> Option<String> {
        self.groups.read().values().find(|entry| entry.group.tables.iter().any(|t| t.def.name == table)).map(|entry| entry.def.name.clone())
    }

    /// Stops the aging thread and uninstalls the hooks (also on drop).
    pub fn shutdown(&self) {}
}

fn combine(group: Option<&str>, statement: Option<&str>) -> Option<String> {
    match (group, statement) {
        (Some(g), Some(s)) => Some(format!("({g}) AND ({s})")),
        (Some(one), None) | (None, Some(one)) => Some(one.to_owned()),
        (None, None) => None,
    }
}

fn group_info(def: &CreateGroup, group: &CacheGroup) -> GroupInfo {
    GroupInfo {
        name: def.name.clone(),
        kind: match def.kind {
            GroupKind::Awt => "AWT",
            GroupKind::Swt => "SWT",
            GroupKind::ReadOnly => "READONLY",
        },
        dynamic: def.dynamic,
        root_table: group.root().def.name.clone(),
        root_predicate: def.root_predicate.clone(),
        aging: match &def.aging {
            Aging::Off => "OFF".into(),
            Aging::Lru => "LRU".into(),
            Aging::Time { column, lifetime } => format!("USE {column} LIFETIME {} SECONDS", lifetime.as_secs()),
        },
        keep: def.keep,
        memory_budget: def.memory_budget,
    }
}
