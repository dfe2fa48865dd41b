//! What the mechanisms ask of the [`Cache`]: each declares a narrow trait
//! of the calls it makes back (aging, AWT, SWT, autorefresh, dynamic load,
//! a load's fence), and the cache answers here. So no mechanism imports the
//! front object, and none keeps it alive: the threads and hooks hold the
//! trait objects weakly.

use std::sync::Arc;

use pgtier_backend::ConnectParams;
use pgtier_engine::{Database, MissAnswer, MissCover, TableId, Value};

use super::Cache;
use crate::aging::{AgingHost, AgingReport};
use crate::autorefresh::{AutorefreshHost, PredicateCompiler};
use crate::awt::AwtHost;
use crate::dynamic::{DynamicHost, Ensured, UniqueLookup};
use crate::error::CacheError;
use crate::fence::WriteThroughState;
use crate::flash::{Flash, OnFlash};
use crate::instance::{Instance, InstanceLayout};
use crate::load::{LoadOptions, LoadReport, RefreshReport};
use crate::node::NodeIdentity;
use crate::registry::{Demotion, GroupEntry, UnloadReport};
use crate::swt::SwtHost;

impl AgingHost for Cache {
    fn database(&self) -> &Database {
        &self.db
    }

    fn age_now(&self) -> Result<AgingReport, CacheError> {
        Cache::age_now(self)
    }

    fn remove_instances(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        keys: &[Vec<Value>],
        to_flash: bool,
    ) -> Result<UnloadReport, CacheError> {
        let demotion = FlashDemotion { flash: &self.flash, db: &self.db, entry, layout };
        let demotion = (to_flash && self.flash.accepts(entry)).then_some(&demotion as &dyn Demotion);
        Cache::remove_instances(self, entry, layout, keys, None, demotion)
    }

    fn evicts_dirty(&self, entry: &GroupEntry) -> bool {
        self.flash.accepts_dirty(entry)
    }

    fn write_through_behind(&self, entry: &GroupEntry) -> bool {
        Cache::write_through_behind(self, entry)
    }
}

/// Aging's evictions for memory go to the flash tier.
struct FlashDemotion<'a> {
    flash: &'a Flash,
    db: &'a Database,
    entry: &'a GroupEntry,
    layout: &'a InstanceLayout,
}

impl Demotion for FlashDemotion<'_> {
    fn demote(&self, key: &[Value], instance: &Instance) -> bool {
        self.flash.demote(self.db, self.entry, self.layout, key, instance)
    }

    fn undo(&self, key: &[Value]) {
        self.flash.forget(self.entry, self.layout, key);
    }

    fn takes_dirty(&self) -> bool {
        self.flash.accepts_dirty(self.entry)
    }

    fn demote_dirty(&self, key: &[Value], instance: &Instance) -> bool {
        self.flash.demote_dirty(self.db, self.entry, self.layout, key, instance)
    }

    fn sync_dirty(&self) -> bool {
        self.flash.sync_durable()
    }

    fn undo_dirty(&self, key: &[Value]) -> Result<(), CacheError> {
        self.flash.release_durable(self.layout, key)
    }
}

impl AwtHost for Cache {
    fn database(&self) -> &Database {
        &self.db
    }

    fn backend(&self) -> Option<&ConnectParams> {
        Cache::backend(self)
    }

    fn group_entries(&self) -> Vec<Arc<GroupEntry>> {
        Cache::group_entries(self)
    }

    fn table_of_group(&self, name: &str) -> Option<(Arc<GroupEntry>, usize)> {
        Cache::table_of_group(self, name)
    }
}

impl SwtHost for Cache {
    fn database(&self) -> &Database {
        &self.db
    }

    fn backend(&self) -> Option<&ConnectParams> {
        Cache::backend(self)
    }

    fn group_entries(&self) -> Vec<Arc<GroupEntry>> {
        Cache::group_entries(self)
    }

    fn table_of_group(&self, name: &str) -> Option<(Arc<GroupEntry>, usize)> {
        Cache::table_of_group(self, name)
    }

    fn entry(&self, name: &str) -> Result<Arc<GroupEntry>, CacheError> {
        Cache::entry(self, name)
    }

    fn cached_root_keys(&self, name: &str) -> Result<Vec<Vec<Value>>, CacheError> {
        Cache::cached_root_keys(self, name)
    }

    fn refresh(
        &self,
        name: &str,
        cached_keys: &[Vec<Value>],
        options: &LoadOptions,
    ) -> Result<RefreshReport, CacheError> {
        Cache::refresh(self, name, cached_keys, options)
    }

    fn refresh_instances(&self, entry: &GroupEntry, keys: &[Vec<Value>]) -> Result<RefreshReport, CacheError> {
        Cache::refresh_instances(self, entry, keys)
    }
}

impl AutorefreshHost for Cache {
    fn predicate_compiler(&self) -> Option<Arc<dyn PredicateCompiler>> {
        Cache::predicate_compiler(self)
    }

    fn load_in_snapshot(
        &self,
        entry: &GroupEntry,
        options: &LoadOptions,
        snapshot: Option<&str>,
    ) -> Result<LoadReport, CacheError> {
        Cache::load_in_snapshot(self, entry, options, snapshot)
    }

    fn reload(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        predicate: Option<String>,
        only: Option<&[Vec<Value>]>,
        cached: &[Vec<Value>],
        options: &LoadOptions,
        snapshot: Option<&str>,
    ) -> Result<RefreshReport, CacheError> {
        Cache::reload(self, entry, layout, predicate, only, cached, options, snapshot)
    }

    fn refresh_instances(&self, entry: &GroupEntry, keys: &[Vec<Value>]) -> Result<RefreshReport, CacheError> {
        Cache::refresh_instances(self, entry, keys)
    }
}

impl WriteThroughState for Cache {
    fn require_dirty_current(&self, entry: &GroupEntry) -> Result<(), CacheError> {
        Cache::require_dirty_current(self, entry)
    }

    fn awt_applied_floor(&self) -> u64 {
        Cache::awt_applied_floor(self)
    }

    fn swt_floor(&self) -> u64 {
        Cache::swt_floor(self)
    }

    fn identity(&self) -> &NodeIdentity {
        Cache::identity(self)
    }
}

impl DynamicHost for Cache {
    fn database(&self) -> &Database {
        &self.db
    }

    fn miss_target(&self, group: &str) -> Result<(Arc<GroupEntry>, InstanceLayout), CacheError> {
        let entry = self.entry(group)?;
        let layout = InstanceLayout::resolve(&self.db.catalog(), &entry.group)?;
        Ok((entry, layout))
    }

    fn ensure_pinned_in(
        &self,
        entry: &Arc<GroupEntry>,
        layout: &InstanceLayout,
        key: &[Value],
    ) -> Result<Ensured, CacheError> {
        Cache::ensure_pinned_in(self, entry, layout, key)
    }

    fn hold_load(&self, entry: &GroupEntry) {
        Cache::hold_load(self, entry);
    }

    fn root_key_by_unique(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        lookup: &UniqueLookup,
        root_key_columns: &[usize],
    ) -> Result<Option<Vec<Value>>, CacheError> {
        self.dynamic.root_key_by_unique(&entry.group, layout, lookup, root_key_columns)
    }

    fn flash_key_hint(&self, entry: &GroupEntry, layout: &InstanceLayout, lookup: &UniqueLookup) -> Option<Vec<Value>> {
        if !self.flash.enabled() || !crate::flash::eligible(&entry.def) {
            return None;
        }
        self.flash.root_key_by_unique(&self.db, layout, lookup.table, &lookup.columns, &lookup.values)
    }

    fn flash_answer(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: Vec<Value>,
        covers: &[(TableId, Vec<usize>)],
    ) -> Result<Option<MissAnswer>, CacheError> {
        if !self.flash.enabled() || !crate::flash::eligible(&entry.def) {
            return Ok(None);
        }
        // An instance in memory has no current record on flash (its
        // promotion took it): the miss is of a row it does not have, and
        // one lookup here saves the index's and the record key's.
        if layout.root_cached(&self.db, &key)? {
            return Ok(None);
        }
        let Some(mut answer) = self.flash.answer(&self.db, entry, layout, &key)? else { return Ok(None) };
        answer.covers = covers
            .iter()
            .map(|(table, columns)| MissCover { table: *table, columns: columns.clone(), values: key.clone() })
            .collect();
        Ok(Some(answer))
    }

    fn flash_find(
        &self,
        entry: &GroupEntry,
        layout: &InstanceLayout,
        key: &[Value],
    ) -> Result<Option<OnFlash>, CacheError> {
        if !self.flash.enabled() || !crate::flash::eligible(&entry.def) {
            return Ok(None);
        }
        self.flash.find(&self.db, entry, layout, key)
    }

    fn flash_release_durable(&self, layout: &InstanceLayout, key: &[Value]) -> Result<(), CacheError> {
        self.flash.release_durable(layout, key)
    }

    fn flash_holds_dirty(&self, entry: &GroupEntry) -> bool {
        self.flash.holds_dirty(entry)
    }

    fn flash_lost_durable(&self) -> bool {
        self.flash.lost_durable()
    }
}
