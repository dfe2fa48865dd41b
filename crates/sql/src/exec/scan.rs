//! Reading a level: primary-key lookup, ordered-index scan, full scan or a
//! virtual source, and the nested-loop join over the levels.

use std::cmp::Ordering;
use std::ops::Bound;

use pgtier_cache::PartitionAccess;
use pgtier_engine::{DataType, IndexId, RowRef, TABLE_SHARDS, TableSchema, Value};

use super::hash_join::{CHAIN_END, Probe};
use super::{Exec, read_row};
use crate::error::{Result, SqlError};
use crate::expr::{Env, Expr};
use crate::plan::{Access, ColumnMask, Level, SelectPlan};
use crate::value;

/// Casts a key value to the key column's type; None when no stored value
/// can equal it (NULL, out of range, or not exactly representable).
pub(super) fn exact_key(v: Value, ty: DataType) -> Option<Value> {
    if v.is_null() {
        return None;
    }
    if matches!(ty, DataType::Char(_)) {
        // char(n) keys are stored padded; compare through the padded form only
        // when the value already is that form.
        return match &v {
            Value::Text(s)
                if u32::try_from(s.chars().count()).ok()
                    == Some(match ty {
                        DataType::Char(n) => n,
                        _ => 0,
                    }) =>
            {
                Some(v)
            }
            _ => None,
        };
    }
    if v.is_of_type(ty) {
        return Some(v);
    }
    if let (Value::Text(s), DataType::Varchar(n)) = (&v, ty) {
        // Stored values are at most n characters: a longer one matches none.
        return (s.chars().count() <= n as usize).then_some(v);
    }
    let cast = value::cast(v.clone(), ty, false).ok()?;
    (value::compare(&v, &cast) == Some(Ordering::Equal)).then_some(cast)
}

impl Exec<'_> {
    /// Evaluates the key expressions of a PkLookup into `keybuf`; false if
    /// no row can match.
    pub(super) fn eval_pk(&mut self, table: &TableSchema, key: &[Expr], env: &Env<'_>, row: &[Value]) -> Result<bool> {
        let mut keys = std::mem::take(self.keybuf);
        keys.clear();
        let mut ok = true;
        for (e, &col) in key.iter().zip(&table.primary_key) {
            let v = e.eval(env, self, row)?;
            match exact_key(v, table.columns[col].ty) {
                Some(k) => keys.push(k),
                None => {
                    ok = false;
                    break;
                }
            }
        }
        *self.keybuf = keys;
        if ok {
            self.partition_pk(table)?;
        }
        Ok(ok)
    }

    /// Node partitions (pgtier_cache's `shard`): a key lookup on a table of
    /// a group partitioned over nodes must bind the root key to a value
    /// this node owns (another node's is refused with 0AP01, naming it).
    /// One that does not bind it is refused (0A000): whether no row means
    /// "none" or "on another node" cannot be told here.
    fn partition_pk(&self, table: &TableSchema) -> Result<()> {
        let Some(cache) = self.cache.filter(|c| c.has_node_partitions()) else { return Ok(()) };
        let bound: Vec<(usize, &Value)> = table.primary_key.iter().copied().zip(self.keybuf.iter()).collect();
        match cache.partition_access(table.id, &bound)? {
            PartitionAccess::Unbound => {
                Err(cache.partition_refusal(table.id, "a key lookup that does not bind it").into())
            }
            _ => Ok(()),
        }
    }

    /// Node partitions, for a scan of `table` (by `index` with `prefix`
    /// bound by equality and `ranged` when a range follows): Ok(false)
    /// when it may go on; Ok(true) when it answers only if it finds a row
    /// (an equality on every column of a unique index not carrying the
    /// root key: found, the row is the only one anywhere; not found, it may
    /// be another node's); refused when it binds another node's key (0AP01)
    /// or would answer from this node's range only (0A000).
    fn partition_gate(&self, table: &TableSchema, index: Option<(IndexId, &[Value], bool)>) -> Result<bool> {
        let Some(cache) = self.cache.filter(|c| c.has_node_partitions()) else { return Ok(false) };
        let catalog = self.txn.catalog();
        let schema = index.and_then(|(id, _, _)| catalog.index(id));
        let bound: Vec<(usize, &Value)> = match (schema, index) {
            (Some(schema), Some((_, prefix, _))) => schema.columns.iter().copied().zip(prefix.iter()).collect(),
            _ => Vec::new(),
        };
        match cache.partition_access(table.id, &bound)? {
            PartitionAccess::Unrestricted | PartitionAccess::Owned => Ok(false),
            PartitionAccess::Unbound => {
                let unique_equality = matches!((schema, index), (Some(schema), Some((_, prefix, false)))
                    if schema.unique && prefix.len() == schema.columns.len());
                if unique_equality {
                    return Ok(true);
                }
                let reason = "a scan that does not bind it by equality would answer from this node's range only";
                Err(cache.partition_refusal(table.id, reason).into())
            }
        }
    }

    /// A unique lookup that does not bind the root key found nothing here.
    fn partition_not_found(&self, table: &TableSchema) -> SqlError {
        match self.cache {
            Some(cache) => cache
                .partition_refusal(
                    table.id,
                    "a lookup that does not bind it found no row on this node, and another node may hold it",
                )
                .into(),
            None => SqlError::new("XX000", "node partition check without a cache"),
        }
    }

    /// Candidate rows of `level` for the current joined `row` (flat, table width each).
    /// `mask`: decode only these columns (DML key search); None: all.
    pub(super) fn fetch(
        &mut self,
        level: &Level,
        env: &Env<'_>,
        row: &[Value],
        for_update: bool,
        mask: Option<&ColumnMask>,
        out: &mut Vec<Value>,
    ) -> Result<()> {
        let table = &level.table;
        match &level.access {
            Access::PkLookup { key } => {
                if !self.eval_pk(table, key, env, row)? {
                    return Ok(());
                }
                let found = if for_update {
                    self.txn.get_for_update(table.id, self.keybuf, self.rowbuf)?
                } else {
                    self.txn.get(table.id, self.keybuf, self.rowbuf)?
                };
                if found && let Some(r) = self.rowbuf.row() {
                    read_row(&r, mask, out);
                }
            }
            // A level's candidates last one outer row: not charged.
            Access::IndexScan { .. } | Access::FullScan => self.scan_level(level, env, row, &mut |r| {
                read_row(r, mask, out);
                0
            })?,
            Access::Virtual(source) if self.hash_joins && matches!(**source, crate::plan::VirtualSource::Query(_)) => {
                out.extend_from_slice(&self.fixed_rows(level, env)?);
            }
            Access::Virtual(source) => self.virtual_rows(source, env, row, out)?,
        }
        Ok(())
    }

    /// Visits the rows an IndexScan or FullScan level yields at the
    /// snapshot, before its filters; `row` is the joined row so far (the
    /// index key may read earlier levels). `visit` returns the bytes it
    /// kept for the rest of the statement (charged as result memory).
    pub(super) fn scan_level(
        &mut self,
        level: &Level,
        env: &Env<'_>,
        row: &[Value],
        visit: &mut dyn FnMut(&RowRef<'_>) -> usize,
    ) -> Result<()> {
        match &level.access {
            Access::IndexScan { index, eq, lower, upper, key_types } => {
                let mut prefix = self.pooled_row();
                for (e, ty) in eq.iter().zip(key_types) {
                    match exact_key(e.eval(env, self, row)?, *ty) {
                        Some(v) => prefix.push(v),
                        None => {
                            self.return_row(prefix);
                            return Ok(());
                        }
                    }
                }
                let range_ty = key_types.get(eq.len()).copied();
                let bound = |b: &Option<(Expr, bool)>, this: &mut Self| -> Result<Option<(Vec<Value>, bool)>> {
                    let (Some((e, inclusive)), Some(ty)) = (b, range_ty) else { return Ok(None) };
                    let v = e.eval(env, this, row)?;
                    if v.is_null() {
                        return Ok(Some((Vec::new(), false)));
                    }
                    // An inexact or out-of-range bound is dropped: the filter rechecks.
                    Ok(exact_key(v, ty).map(|k| {
                        let mut p = prefix.clone();
                        p.push(k);
                        (p, *inclusive)
                    }))
                };
                let lo = bound(lower, self)?;
                let hi = bound(upper, self)?;
                if matches!(&lo, Some((v, _)) if v.is_empty()) || matches!(&hi, Some((v, _)) if v.is_empty()) {
                    self.return_row(prefix);
                    return Ok(()); // comparison with NULL matches nothing
                }
                let lower_b = match &lo {
                    Some((v, true)) => Bound::Included(v.as_slice()),
                    Some((v, false)) => Bound::Excluded(v.as_slice()),
                    None if prefix.is_empty() => Bound::Unbounded,
                    None => Bound::Included(prefix.as_slice()),
                };
                let upper_b = match &hi {
                    Some((v, true)) => Bound::Included(v.as_slice()),
                    Some((v, false)) => Bound::Excluded(v.as_slice()),
                    None if prefix.is_empty() => Bound::Unbounded,
                    None => Bound::Included(prefix.as_slice()),
                };
                let needs_row = match self
                    .partition_gate(&level.table, Some((*index, &prefix, lower.is_some() || upper.is_some())))
                {
                    Ok(needs_row) => needs_row,
                    Err(e) => {
                        self.return_row(prefix);
                        return Err(e);
                    }
                };
                let interrupt = &mut self.interrupt;
                let mut stopped = Ok(());
                let mut found = false;
                self.txn.scan(*index, lower_b, upper_b, |r| {
                    found = true;
                    let kept = visit(&r);
                    stopped = interrupt.charge(kept, "result").and_then(|()| interrupt.tick());
                    Ok(stopped.is_ok())
                })?;
                self.return_row(prefix);
                stopped?;
                if needs_row && !found {
                    return Err(self.partition_not_found(&level.table));
                }
            }
            Access::FullScan => {
                self.partition_gate(&level.table, None)?;
                let interrupt = &mut self.interrupt;
                let mut stopped = Ok(());
                self.txn.scan_table(level.table.id, |r| {
                    let kept = visit(&r);
                    stopped = interrupt.charge(kept, "result").and_then(|()| interrupt.tick());
                    Ok(stopped.is_ok())
                })?;
                stopped?;
            }
            Access::PkLookup { .. } | Access::Virtual(_) => {
                return Err(SqlError::new("XX000", "scan_level on a key lookup or virtual source"));
            }
        }
        Ok(())
    }

    /// Runs the join pipeline, calling `sink` with each joined row.
    /// Nested-loop join of `plan`'s levels from `l` on; each complete row
    /// that passes the final filters goes to `sink` (collected, aggregated
    /// or projected straight into the result: no row copies when streaming).
    pub(super) fn join(
        &mut self,
        plan: &SelectPlan,
        l: usize,
        row: &mut Vec<Value>,
        env: &Env<'_>,
        sink: &mut dyn FnMut(&mut Self, &[Value]) -> Result<()>,
    ) -> Result<()> {
        if l == plan.levels.len() {
            if self.passes(&plan.final_filters, env, row)? {
                sink(self, row)?;
            }
            return Ok(());
        }
        let level = &plan.levels[l];
        let w = level.width();
        if w == 0 {
            // Candidates are kept flat, w values a row: rows of no columns
            // (`SELECT FROM ... UNION ...` as a source) have no count here.
            return Err(SqlError::unsupported("a subquery, set operation or table with no columns as a FROM item"));
        }
        if level.full_join {
            return self.join_full_right(plan, l, row, env, sink);
        }
        // The left side of a FULL JOIN: which right rows its rows match.
        let full_right = match plan.levels.get(l + 1).filter(|next| next.full_join) {
            Some(next) => {
                let side = self.full_side(next, env, plan.level_masks.get(l + 1))?;
                self.level_hashes.full_marks.push(vec![false; side.len()]);
                Some(side)
            }
            None => None,
        };
        let mut cands = self.pooled_row();
        let probe = if self.hash_joins && !level.hash_keys.is_empty() {
            match self.hashed_candidates(level, env, row, plan.level_masks.get(l), &mut cands) {
                Ok(probe) => probe,
                Err(e) => {
                    self.return_row(cands);
                    return Err(e);
                }
            }
        } else {
            Probe::Scan
        };
        let mut matched = false;
        let walked = match probe {
            Probe::Chain(table, first) => {
                // Straight from the table: no copy of the chain first.
                let mut at = first;
                let mut walked = Ok(());
                while at != CHAIN_END && walked.is_ok() && !self.join_stop {
                    let (cand, next) = table.row(at);
                    walked = self.join_candidate(plan, l, cand, false, row, env, sink).map(|m| matched |= m);
                    at = next;
                }
                walked
            }
            Probe::Scan | Probe::Buffered => {
                let pieces = if matches!(probe, Probe::Scan) { self.piecewise(level) } else { Ok(None) };
                let walked = match pieces {
                    Ok(Some(per)) => self.join_pieces(plan, l, per, row, env, &mut cands, sink),
                    Ok(None) if matches!(probe, Probe::Scan) => match ReadFilter::of(plan, l, env) {
                        Some(mut filter) => self
                            .scan_level(level, env, row, &mut |r| {
                                filter.read(r, &mut cands);
                                0
                            })
                            .and_then(|()| self.join_candidates(plan, l, &cands, filter.checked(), row, env, sink)),
                        None => self
                            .fetch(level, env, row, false, plan.level_masks.get(l), &mut cands)
                            .and_then(|()| self.join_candidates(plan, l, &cands, 0, row, env, sink)),
                    },
                    Ok(None) => self.join_candidates(plan, l, &cands, 0, row, env, sink),
                    Err(e) => Err(e),
                }
                .map(|m| matched |= m);
                if walked.is_ok() && matches!(probe, Probe::Scan) && !level.hash_keys.is_empty() && self.hash_joins {
                    self.keep_first_scan(level, std::mem::take(&mut cands));
                }
                walked
            }
        };
        let marks = full_right.as_ref().and_then(|_| self.level_hashes.full_marks.pop());
        if let Err(e) = walked {
            self.return_row(cands);
            return Err(e);
        }
        if let (Some(side), Some(marks)) = (full_right, marks) {
            self.return_row(cands);
            return self.join_full_unmatched(plan, l, &side, &marks, row, env, sink);
        }
        if level.left_join && !matched && !self.join_stop {
            self.join_null_extended(plan, l, row, env, sink)?;
        }
        self.return_row(cands);
        Ok(())
    }

    /// Shards per piece when level `l`'s whole-table scan may be walked a
    /// piece at a time (see [`Exec::join_pieces`]); None: fetched whole.
    /// Not when the candidates are kept to hash (they are needed whole),
    /// nor once the transaction has written: the pieces are read with
    /// [`pgtier_engine::Transaction::scan_committed_shards`], which for a
    /// transaction that had written nothing is the statement's snapshot
    /// even when a function called per row writes the table mid-scan (the
    /// whole copy, taken before any row is acted on, ensures that otherwise).
    fn piecewise(&mut self, level: &Level) -> Result<Option<usize>> {
        if !matches!(level.access, Access::FullScan)
            || (self.hash_joins && !level.hash_keys.is_empty())
            || !self.txn.is_read_only()
        {
            return Ok(None);
        }
        Ok(self.txn.scan_piece_shards(level.table.id)?.filter(|&per| per < TABLE_SHARDS))
    }

    /// Level `l`'s whole-table scan walked a piece of `per` shards at a
    /// time: each piece's rows are copied out and joined before the next
    /// is read, so the level holds a piece's rows, not the table's (a
    /// `count(*)` over 6M rows held 4 GB of values). Same rows, same order
    /// as the whole copy. True if any candidate matched.
    #[allow(clippy::too_many_arguments)]
    fn join_pieces(
        &mut self,
        plan: &SelectPlan,
        l: usize,
        per: usize,
        row: &mut Vec<Value>,
        env: &Env<'_>,
        cands: &mut Vec<Value>,
        sink: &mut dyn FnMut(&mut Self, &[Value]) -> Result<()>,
    ) -> Result<bool> {
        let level = &plan.levels[l];
        let mask = plan.level_masks.get(l);
        self.partition_gate(&level.table, None)?;
        let mut filter = ReadFilter::of(plan, l, env);
        let mut matched = false;
        let mut start = 0;
        while start < TABLE_SHARDS && !self.join_stop {
            let end = (start + per).min(TABLE_SHARDS);
            cands.clear();
            let interrupt = &mut self.interrupt;
            let mut stopped = Ok(());
            self.txn.scan_committed_shards(level.table.id, start..end, |r| {
                match filter.as_mut() {
                    Some(filter) => filter.read(&r, cands),
                    None => read_row(&r, mask, cands),
                }
                stopped = interrupt.tick();
                Ok(stopped.is_ok())
            })?;
            stopped?;
            let checked = filter.as_mut().map_or(0, ReadFilter::checked);
            matched |= self.join_candidates(plan, l, cands, checked, row, env, sink)?;
            start = end;
        }
        Ok(matched)
    }

    /// Joins each of `cands` (level `l`'s rows, flat) on; true if any
    /// matched. The first `checked` rows passed the level's filters as
    /// they were read ([`ReadFilter`]). Stops early when a LIMIT is
    /// reached (`join_stop`).
    #[allow(clippy::too_many_arguments)]
    fn join_candidates(
        &mut self,
        plan: &SelectPlan,
        l: usize,
        cands: &[Value],
        checked: usize,
        row: &mut Vec<Value>,
        env: &Env<'_>,
        sink: &mut dyn FnMut(&mut Self, &[Value]) -> Result<()>,
    ) -> Result<bool> {
        let mut matched = false;
        for (i, cand) in cands.chunks(plan.levels[l].width()).enumerate() {
            matched |= self.join_candidate(plan, l, cand, i < checked, row, env, sink)?;
            if self.join_stop {
                break;
            }
        }
        Ok(matched)
    }

    /// Level `l`, the right side of a FULL JOIN: its rows the probe's key
    /// finds (all, without hash keys), marked for the left side's loop
    /// when they match, NULL-extended when none does, as a LEFT JOIN's.
    fn join_full_right(
        &mut self,
        plan: &SelectPlan,
        l: usize,
        row: &mut Vec<Value>,
        env: &Env<'_>,
        sink: &mut dyn FnMut(&mut Self, &[Value]) -> Result<()>,
    ) -> Result<()> {
        let level = &plan.levels[l];
        let side = self.full_side(level, env, plan.level_masks.get(l))?;
        let mut at = self.full_candidates(level, &side, env, row)?.unwrap_or(CHAIN_END);
        let mut matched = false;
        while at != CHAIN_END && !self.join_stop {
            let (cand, next) = side.row(at);
            if self.join_candidate(plan, l, cand, false, row, env, sink)? {
                matched = true;
                if let Some(mark) = self.level_hashes.full_marks.last_mut().and_then(|m| m.get_mut(at as usize)) {
                    *mark = true;
                }
            }
            at = next;
        }
        if !matched && !self.join_stop {
            self.join_null_extended(plan, l, row, env, sink)?;
        }
        Ok(())
    }

    /// A LEFT JOIN's miss: level `l` NULL in the joined `row`, through its
    /// post-filters (the WHERE) and on to the next level.
    fn join_null_extended(
        &mut self,
        plan: &SelectPlan,
        l: usize,
        row: &mut Vec<Value>,
        env: &Env<'_>,
        sink: &mut dyn FnMut(&mut Self, &[Value]) -> Result<()>,
    ) -> Result<()> {
        let level = &plan.levels[l];
        for v in &mut row[level.offset..level.offset + level.width()] {
            *v = Value::Null;
        }
        if self.passes(&level.post_filters, env, row)? {
            self.join(plan, l + 1, row, env, sink)?;
        }
        Ok(())
    }

    /// After the loop of level `l`, the left side of a FULL JOIN: each row
    /// of the right side (`side`, level l + 1) no left row matched, with
    /// the left side NULL, through the right level's post-filters (the
    /// WHERE) and on to the levels after.
    #[allow(clippy::too_many_arguments)]
    fn join_full_unmatched(
        &mut self,
        plan: &SelectPlan,
        l: usize,
        side: &super::hash_join::LevelHash,
        marks: &[bool],
        row: &mut Vec<Value>,
        env: &Env<'_>,
        sink: &mut dyn FnMut(&mut Self, &[Value]) -> Result<()>,
    ) -> Result<()> {
        let (left, right) = (&plan.levels[l], &plan.levels[l + 1]);
        for (i, _) in marks.iter().enumerate().filter(|(_, m)| !**m) {
            if self.join_stop {
                break;
            }
            self.interrupt.tick()?;
            for v in &mut row[left.offset..left.offset + left.width()] {
                *v = Value::Null;
            }
            let Ok(at) = u32::try_from(i) else { break };
            let (cand, _) = side.row(at);
            row[right.offset..right.offset + cand.len()].clone_from_slice(cand);
            if self.passes(&right.post_filters, env, row)? {
                self.join(plan, l + 2, row, env, sink)?;
            }
        }
        Ok(())
    }

    /// One candidate of level `l` in the joined `row`: through the level's
    /// filters, then on to the next level. Says whether it matched the
    /// level's filters (a LEFT JOIN's miss is then not NULL-extended).
    /// `checked`: it passed them as it was read ([`ReadFilter`]), and they
    /// are not evaluated twice (a volatile one would answer differently).
    #[allow(clippy::too_many_arguments)]
    fn join_candidate(
        &mut self,
        plan: &SelectPlan,
        l: usize,
        cand: &[Value],
        checked: bool,
        row: &mut Vec<Value>,
        env: &Env<'_>,
        sink: &mut dyn FnMut(&mut Self, &[Value]) -> Result<()>,
    ) -> Result<bool> {
        let level = &plan.levels[l];
        self.interrupt.tick()?;
        row[level.offset..level.offset + cand.len()].clone_from_slice(cand);
        if !checked && !self.passes(&level.filters, env, row)? {
            return Ok(false);
        }
        if self.passes(&level.post_filters, env, row)? {
            self.join(plan, l + 1, row, env, sink)?;
        }
        Ok(true)
    }
}

/// The first level's filters evaluated on each row as a scan reads it,
/// before the row is copied: a row that fails them is decoded only in the
/// columns they read, into a buffer reused row after row, and never
/// copied. Copying every row and filtering after cost a keyword search
/// (`lower(name) LIKE $1` over a few thousand products, study 001's
/// SEARCH) six allocations a row that fails, twice PostgreSQL's time.
///
/// Only where the result is the same as filtering after: the first level
/// read by a scan (its filters read its own columns and the statement's
/// parameters), filters that need nothing of the executor
/// ([`Expr::runs_without_executor`]), no hash kept of the level's rows. A
/// filter that fails with an error on a row does not raise it here: that
/// row and every row after it are kept unfiltered ([`ReadFilter::checked`]),
/// and the join evaluates their filters when it reaches them, so the error
/// comes where it would have, and never for a row past a LIMIT.
struct ReadFilter<'p> {
    filters: &'p [Expr],
    env: &'p Env<'p>,
    /// Columns the filters read (decoded for every row).
    filter_columns: ColumnMask,
    /// Columns the statement reads (decoded for a row that passes).
    mask: Option<&'p ColumnMask>,
    /// The row being read, decoded in place.
    row: Vec<Value>,
    /// Candidates kept so far, and how many of them passed the filters
    /// (all of them until a filter fails with an error).
    kept: usize,
    checked: Option<usize>,
}

impl<'p> ReadFilter<'p> {
    fn of(plan: &'p SelectPlan, l: usize, env: &'p Env<'p>) -> Option<ReadFilter<'p>> {
        let level = &plan.levels[l];
        let width = level.width();
        let own_columns = |e: &Expr| {
            let mut own = true;
            e.walk(&mut |x| own &= !matches!(x, Expr::Column(c) if *c >= width));
            own
        };
        let applies = l == 0
            && level.offset == 0
            && matches!(level.access, Access::FullScan | Access::IndexScan { .. })
            && !level.filters.is_empty()
            && level.hash_keys.is_empty()
            && !level.full_join
            && level.filters.iter().all(|f| f.runs_without_executor() && own_columns(f));
        applies.then(|| ReadFilter {
            filters: &level.filters,
            env,
            filter_columns: ColumnMask::reading(width, &level.filters, &[]),
            mask: plan.level_masks.get(l),
            row: vec![Value::Null; width],
            kept: 0,
            checked: None,
        })
    }

    /// Reads row `r`: appended to `out` (flat) when it passes the filters
    /// (or when they are no longer evaluated here).
    fn read(&mut self, r: &RowRef<'_>, out: &mut Vec<Value>) {
        if self.checked.is_some() {
            read_row(r, self.mask, out);
            self.kept += 1;
            return;
        }
        for (c, slot) in self.row.iter_mut().enumerate() {
            if self.filter_columns.reads(c) {
                super::assign_ref(slot, r.get(c));
            }
        }
        let passed = (|| {
            for f in self.filters {
                if f.eval_bool(self.env, &mut crate::expr::NoSubqueries, &self.row)? != Some(true) {
                    return Ok(false);
                }
            }
            Ok::<bool, SqlError>(true)
        })();
        match passed {
            Ok(false) => return,
            Ok(true) => {}
            Err(_) => self.checked = Some(self.kept),
        }
        for (c, slot) in self.row.iter_mut().enumerate() {
            if self.filter_columns.reads(c) {
                out.push(std::mem::replace(slot, Value::Null));
            } else if self.mask.is_none_or(|m| m.reads(c)) {
                out.push(r.get(c).to_owned_value());
            } else {
                out.push(Value::Null);
            }
        }
        self.kept += 1;
        debug_assert_eq!(out.len() % self.row.len(), 0, "candidates are whole rows");
    }

    /// How many of the rows read so far (since the last call) passed the
    /// filters here; starts the count anew for the next batch.
    fn checked(&mut self) -> usize {
        let checked = self.checked.unwrap_or(self.kept);
        self.kept = 0;
        self.checked = None;
        checked
    }
}
