//! Rows a miss hook answered a read with (`MissResolution::Answer`): the
//! cache's flash tier hands over an instance it holds instead of putting
//! it in memory. The transaction keeps them for its current statement
//! snapshot only, and its point reads and scans read them after the tables
//! found nothing (reads.rs), as if they were there.
//!
//! They are never in a table. A write to one of them misses as any write
//! to a row not in memory does, with `MissIntent::Write`: the hook puts the
//! rows in memory, the snapshot is refreshed, and these are dropped, so a
//! statement never reads an answered row beside its own change to it.
//! Dropped as well at every other snapshot change (the next statement, the
//! transaction's end): the hook vouched for them as the latest committed
//! state *now*, which a later statement must ask again.

use std::ops::Bound;

use super::Transaction;
use crate::error::{EngineError, Result};
use crate::key::KeySpec;
use crate::schema::{IndexId, TableId};
use crate::seams::MissAnswer;
use crate::table::TableStore;
use crate::types::Value;

/// Rows one table was answered with, and the lookups they answer in full.
struct AnsweredTable {
    table: TableId,
    /// Encoded in the table's row layout.
    rows: Vec<Vec<u8>>,
    /// (the cover's columns, their values encoded by that spec).
    covers: Vec<(KeySpec, Vec<u8>)>,
}

/// Answers one statement keeps at most. Lookups search them linearly, so
/// a statement that reads many instances from flash (a join over a large
/// key range) would otherwise slow down quadratically; past this the older
/// ones are dropped, which only means asking the hook again for them.
const ANSWERS_MAX: usize = 32;

#[derive(Default)]
pub(super) struct MissRows {
    tables: Vec<AnsweredTable>,
    answers: usize,
}

impl MissRows {
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.tables.clear();
        self.answers = 0;
    }

    fn table(&self, table: TableId) -> Option<&AnsweredTable> {
        self.tables.iter().find(|t| t.table == table)
    }

    fn table_mut(&mut self, table: TableId) -> &mut AnsweredTable {
        let at = match self.tables.iter().position(|t| t.table == table) {
            Some(at) => at,
            None => {
                self.tables.push(AnsweredTable { table, rows: Vec::new(), covers: Vec::new() });
                self.tables.len() - 1
            }
        };
        &mut self.tables[at]
    }

    /// Whether a lookup of `table` binding `values` to its leading
    /// `columns` lies inside one of the answered covers.
    fn covers(&self, table: TableId, columns: &[usize], values: &[Value]) -> bool {
        let Some(answered) = self.table(table) else { return false };
        let bound = &columns[..values.len().min(columns.len())];
        answered.covers.iter().any(|(spec, key)| {
            let picked: Option<Vec<Value>> =
                spec.columns.iter().map(|c| bound.iter().position(|b| b == c).map(|at| values[at].clone())).collect();
            let Some(picked) = picked else { return false };
            let mut encoded = Vec::with_capacity(key.len());
            spec.encode_values(&picked, &mut encoded) && encoded == *key
        })
    }
}

impl Transaction {
    /// Takes a hook's answer for this statement (see the module comment).
    pub(super) fn add_miss_answer(&mut self, answer: MissAnswer) -> Result<()> {
        if self.miss_rows.answers >= ANSWERS_MAX {
            self.miss_rows.clear();
        }
        self.miss_rows.answers += 1;
        let mut encoded = Vec::new();
        for (table, values) in answer.rows {
            let store = self.store(table)?;
            encoded.clear();
            super::writes::encode_row(&store.schema, &values, &mut encoded)?;
            self.miss_rows.table_mut(table).rows.push(encoded.clone());
        }
        for (table, image) in answer.images {
            self.store(table)?.layout().validate_image(&image)?;
            self.miss_rows.table_mut(table).rows.push(image);
        }
        for cover in answer.covers {
            let store = self.store(cover.table)?;
            if cover.columns.iter().any(|&c| c >= store.schema.columns.len())
                || cover.columns.len() != cover.values.len()
            {
                return Err(EngineError::hook(
                    "XX000",
                    format!(
                        "a miss hook's answer covers columns {:?} of table \"{}\"",
                        cover.columns, store.schema.name
                    ),
                    None,
                ));
            }
            let spec = KeySpec::new(&cover.columns, store.layout(), &[], true);
            let mut key = Vec::new();
            // Values no stored key can equal cover nothing.
            if spec.encode_values(&cover.values, &mut key) {
                self.miss_rows.table_mut(cover.table).covers.push((spec, key));
            }
        }
        Ok(())
    }

    /// Whether a point read of `key` in `store` lies inside an answer.
    pub(super) fn answered_key_covered(&self, store: &TableStore, key: &[Value]) -> bool {
        !self.miss_rows.is_empty() && self.miss_rows.covers(store.schema.id, &store.schema.primary_key, key)
    }

    /// The answered row of `store` whose primary key encodes as `pk`.
    pub(super) fn answered_row(&self, store: &TableStore, pk: &[u8]) -> Option<&[u8]> {
        let answered = self.miss_rows.table(store.schema.id)?;
        let mut encoded = Vec::with_capacity(pk.len());
        answered.rows.iter().map(Vec::as_slice).find(|row| {
            encoded.clear();
            store.pk.encode_row(store.layout(), row, &mut encoded);
            encoded == pk
        })
    }

    /// For a scan of `index` over `[lower, upper]` that found nothing in
    /// the table: the answered rows inside the bounds, in index order
    /// (entries encoded as the index's tree holds them); None when no
    /// answer covers the whole range (the caller asks the hook).
    pub(super) fn answered_scan(
        &self,
        index: IndexId,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        if self.miss_rows.is_empty() {
            return Ok(None);
        }
        let Some(ischema) = self.cat.catalog.index(index) else { return Ok(None) };
        // The leading columns both bounds fix to one value: every key in
        // between has them too.
        let (Bound::Included(lo) | Bound::Excluded(lo)) = lower else { return Ok(None) };
        let (Bound::Included(hi) | Bound::Excluded(hi)) = upper else { return Ok(None) };
        let fixed = lo.iter().zip(hi).take_while(|(l, h)| l == h).count();
        if fixed == 0 || !self.miss_rows.covers(ischema.table, &ischema.columns, &lo[..fixed]) {
            return Ok(None);
        }
        let store = self.store(ischema.table)?;
        let meta = store.meta();
        let Some(istore) = meta.index(index) else { return Ok(None) };
        let Some(answered) = self.miss_rows.table(ischema.table) else { return Ok(None) };
        let (mut lo_key, mut hi_key) = (Vec::new(), Vec::new());
        let (from, to) = super::reads::encode_bounds(istore, lower, upper, &mut lo_key, &mut hi_key)?;
        let range = (from.of(&lo_key), to.of(&hi_key));
        let layout = store.layout();
        let mut found: Vec<(Vec<u8>, &Vec<u8>)> = Vec::new();
        for row in &answered.rows {
            // The tree's entry for this row: its index key, then (for a
            // secondary index) its primary key.
            let mut entry = Vec::new();
            istore.spec.encode_row(layout, row, &mut entry);
            if !istore.schema.primary {
                store.pk.encode_row(layout, row, &mut entry);
            }
            if std::ops::RangeBounds::<[u8]>::contains(&range, entry.as_slice()) {
                found.push((entry, row));
            }
        }
        found.sort();
        Ok(Some(found.into_iter().map(|(_, row)| row.clone()).collect()))
    }
}
