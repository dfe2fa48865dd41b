//! Storage invariant checks, run quiesced (tests, admin checks).

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::atomic::Ordering;

use crate::catalog::CommittedCatalog;
use crate::error::{EngineError, Result};
use crate::gc::Gc;
use crate::ordered::batch_entries;
use crate::probe::ProbeTable;
use crate::version::{is_deleted, is_lock_only, is_uncommitted};

fn broken<T>(what: String) -> Result<T> {
    Err(EngineError::Corrupt(what))
}

/// What [`crate::Database::verify`] found in one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableCheck {
    pub table: String,
    /// Committed live rows.
    pub rows: u64,
    /// Entries of each ordered index (primary key first).
    pub index_entries: Vec<usize>,
}

pub(crate) fn verify(catalog: &CommittedCatalog, gc: &Gc) -> Result<Vec<TableCheck>> {
    let _no_prune_in_flight = gc.exclude_pruning();
    let cat = catalog.current();
    let mut out = Vec::new();
    for store in cat.live_stores() {
        let layout = store.layout();
        let meta = store.meta();
        let mut live: Vec<Vec<u8>> = Vec::new();
        let mut versions: HashSet<(usize, Vec<u8>)> = HashSet::new();
        let mut pk = Vec::new();
        store.primary.try_for_each_head(|head| {
            store.pk_of(head.row(layout), &mut pk);
            let mut newest_committed = None;
            for v in head.chain() {
                let w = v.word();
                if newest_committed.is_none() && !is_uncommitted(w) && !is_lock_only(w) {
                    newest_committed = Some(v);
                }
                for (i, index) in meta.indexes.iter().enumerate() {
                    let mut e = Vec::new();
                    index.entry(layout, v.row(layout), &pk, &mut e);
                    versions.insert((i, e));
                }
                let mut vpk = Vec::new();
                store.pk_of(v.row(layout), &mut vpk);
                if vpk != pk {
                    return broken(format!("{}: version chain mixes primary keys", store.schema.name));
                }
                store.check_stub(v)?;
            }
            if let Some(v) = newest_committed
                && !is_deleted(v.word())
            {
                live.push(v.row(layout).to_vec());
            }
            Ok(())
        })?;
        let rows = live.len() as u64;
        let counted = store.live_rows.load(Ordering::Relaxed);
        if counted != rows as i64 {
            return broken(format!("{}: live row counter {counted} but {rows} live rows", store.schema.name));
        }
        let mut entry_counts = Vec::new();
        for (i, index) in meta.indexes.iter().enumerate() {
            let mut batch = Vec::new();
            index.tree.scan(Bound::Unbounded, Bound::Unbounded, usize::MAX, &mut batch);
            let entries: HashSet<Vec<u8>> = batch_entries(&batch).map(<[u8]>::to_vec).collect();
            if let Some(probe) = &index.probe {
                let mut want: Vec<(u32, u64)> = entries
                    .iter()
                    .map(|e| {
                        let (key_hash, pk_hash) = index.probe_pair(e);
                        (ProbeTable::tag_of(key_hash), pk_hash)
                    })
                    .collect();
                let mut held = probe.read().pairs();
                want.sort_unstable();
                held.sort_unstable();
                if want != held {
                    return broken(format!(
                        "{}: probe of index {} holds {} pairs for {} entries, or different ones",
                        store.schema.name,
                        index.schema.name,
                        held.len(),
                        want.len()
                    ));
                }
            }
            for e in &entries {
                if !versions.contains(&(i, e.clone())) {
                    return broken(format!(
                        "{}: index {} has an entry no version holds",
                        store.schema.name, index.schema.name
                    ));
                }
            }
            let mut keys = HashSet::new();
            for row in &live {
                store.pk_of(row, &mut pk);
                let mut e = Vec::new();
                index.entry(layout, row, &pk, &mut e);
                if !entries.contains(&e) {
                    return broken(format!("{}: live row missing from index {}", store.schema.name, index.schema.name));
                }
                if index.schema.unique && !index.spec.row_has_null(layout, row) {
                    let (k, _) = index.split(&e);
                    if !keys.insert(k.to_vec()) {
                        return broken(format!(
                            "{}: unique index {} has a duplicate",
                            store.schema.name, index.schema.name
                        ));
                    }
                }
            }
            entry_counts.push(entries.len());
        }
        out.push(TableCheck { table: store.schema.name.clone(), rows, index_entries: entry_counts });
    }
    Ok(out)
}
