//! Executor: runs plans on an engine transaction.
//!
//! Rows of a level are copied out of the engine before the next level runs
//! (the engine's scan callbacks may not call back into the engine), so a
//! nested-loop join holds one materialized batch per level. The primary-key
//! fast path reads straight into a reused [`RowBuf`] and writes the result
//! into reused buffers: in steady state it allocates nothing but what the
//! engine does.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::atomic::AtomicBool;

use pgtier_engine::{RowBuf, RowRef};
use pgtier_engine::EngineError;
use pgtier_engine::{IndexDef, TableDef, TableSchema};
use pgtier_engine::Transaction;
use pgtier_engine::{DataType, Numeric, Value, ValueRef};

use crate::error::{Result, SqlError, SqlNotice};
use crate::expr::{Env, Expr, NoSubqueries, Subquery, SubqueryRunner};
use crate::plan::{
    Access, AggCall, AggFunc, ColumnMask, ConflictAction, DeletePlan, InsertPlan, InsertSource, Level, SelectPlan, UpdatePlan, WindowCall,
    WindowFunc,
};
use crate::value::{self, NUMERIC_ANY};

/// Result rows, flat (`width` values per row); reused across executions.
#[derive(Debug, Default, Clone)]
pub struct ResultBuf {
    pub width: usize,
    pub rows: usize,
    pub values: Vec<Value>,
}

impl ResultBuf {
    pub fn reset(&mut self, width: usize) {
        self.width = width;
        self.rows = 0;
        self.values.clear();
    }

    pub fn push_row(&mut self, row: &[Value]) {
        debug_assert_eq!(row.len(), self.width);
        self.values.extend_from_slice(row);
        self.rows += 1;
    }

    pub fn row(&self, i: usize) -> &[Value] {
        &self.values[i * self.width..(i + 1) * self.width]
    }
}

/// Overwrites `slot` with `v`, reusing a string's buffer (no allocation in
/// steady state for text columns).
pub fn assign_ref(slot: &mut Value, v: ValueRef<'_>) {
    if let (Value::Text(s), ValueRef::Text(t)) = (&mut *slot, v) {
        s.clear();
        s.push_str(t);
        return;
    }
    *slot = v.to_owned_value();
}

/// Writes the row's columns that `projection` (plain columns only) names
/// into `values`, in place.
fn assign_columns(values: &mut [Value], projection: &[Expr], r: &RowRef<'_>) {
    for (slot, e) in values.iter_mut().zip(projection) {
        if let Expr::Column(c) = e {
            assign_ref(slot, r.get(*c));
        }
    }
}

fn set_len(buf: &mut Vec<Value>, n: usize) {
    buf.truncate(n);
    while buf.len() < n {
        buf.push(Value::Null);
    }
}

/// Appends the row's values; columns outside `mask` are appended as NULL
/// without being decoded.
fn read_row(r: &RowRef<'_>, mask: Option<&ColumnMask>, out: &mut Vec<Value>) {
    match mask {
        None => {
            for c in 0..r.len() {
                out.push(r.get(c).to_owned_value());
            }
        }
        Some(m) => {
            for c in 0..r.len() {
                out.push(if m.reads(c) { r.get(c).to_owned_value() } else { Value::Null });
            }
        }
    }
}

pub struct Exec<'a> {
    pub txn: &'a mut Transaction,
    pub now_micros: i64,
    pub rowbuf: &'a mut RowBuf,
    pub keybuf: &'a mut Vec<Value>,
    pub scratch: &'a mut Vec<Value>,
    /// DML buffers reused across executions: primary keys of the target rows
    /// (flat) and the row image the UPDATE closure evaluates on.
    pub dml_keys: &'a mut Vec<Value>,
    pub dml_row: &'a mut Vec<Value>,
    /// Emptied row buffers kept across executions for the join's candidate
    /// rows and joined row: a query allocates none once they have grown.
    pub row_pool: &'a mut Vec<Vec<Value>>,
    /// Results of uncorrelated subqueries, by subquery id (this execution only).
    pub sub_cache: HashMap<usize, Vec<Value>>,
    /// The session's settings: current_setting/set_config and pg_settings read them.
    pub settings: &'a mut HashMap<String, String>,
    /// NOTICEs for the client (`... does not exist, skipping`).
    pub notices: &'a mut Vec<SqlNotice>,
    /// Set from another thread to cancel the running statement (57014).
    pub cancel: Option<&'a AtomicBool>,
    /// Rows visited since the cancel flag was last read.
    pub rows_since_cancel_check: u32,
    /// What `currval`/`lastval` return: this session's last `nextval`s.
    pub sequences: &'a mut SessionSequences,
}

/// A session's view of the sequences it used (PostgreSQL keeps the same
/// per backend): the last value `nextval` (or `setval`) gave it for each,
/// and which sequence `nextval` advanced last.
#[derive(Debug, Default)]
pub struct SessionSequences {
    values: HashMap<pgtier_engine::TableId, i64>,
    last: Option<pgtier_engine::TableId>,
}

/// Rows between reads of the cancel flag: a long statement stops within
/// microseconds, and the hot path pays a counter.
const CANCEL_CHECK_ROWS: u32 = 1024;

/// Counts one row of work against `since`; every [`CANCEL_CHECK_ROWS`]
/// rows, true if `cancel` was raised (and lowers it: one cancel, one statement).
#[inline]
fn cancel_requested(cancel: Option<&AtomicBool>, since: &mut u32) -> bool {
    *since += 1;
    if *since < CANCEL_CHECK_ROWS {
        return false;
    }
    *since = 0;
    cancel.is_some_and(|flag| flag.swap(false, std::sync::atomic::Ordering::Relaxed))
}

impl SubqueryRunner for Exec<'_> {
    fn run(&mut self, sub: &Subquery, env: &Env<'_>, outer: &[Value]) -> Result<Vec<Value>> {
        if !sub.correlated
            && let Some(v) = self.sub_cache.get(&sub.id) {
                return Ok(v.clone());
            }
        let rows = self.select_rows(&sub.plan, env.params, outer)?;
        let firsts: Vec<Value> = rows.into_iter().map(|mut r| if r.is_empty() { Value::Null } else { r.swap_remove(0) }).collect();
        if !sub.correlated {
            self.sub_cache.insert(sub.id, firsts.clone());
        }
        Ok(firsts)
    }

    fn system(&mut self) -> Option<crate::catalog::SysCtx<'_>> {
        Some(crate::catalog::SysCtx { catalog: self.txn.catalog(), settings: self.settings })
    }

    fn sequence(&mut self, call: crate::expr::SeqFunc, args: &[Value]) -> Result<Value> {
        use crate::expr::SeqFunc;
        let (id, name) = match call {
            SeqFunc::Lastval => {
                let id = self.sequences.last.ok_or_else(|| SqlError::new("55000", "lastval is not yet defined in this session"))?;
                let name = self.txn.catalog().table(id).map(|t| t.name.clone());
                (id, name.ok_or_else(|| SqlError::new("55000", "lastval is not yet defined in this session"))?)
            }
            _ => {
                let oid = args.first().and_then(Value::as_i64).unwrap_or(0);
                let t = crate::catalog::table_by_oid(self.txn.catalog(), oid)
                    .ok_or_else(|| SqlError::new("42P01", format!("could not open relation with OID {oid}")))?;
                if t.sequence.is_none() {
                    return Err(SqlError::new("42809", format!("\"{}\" is not a sequence", t.name)));
                }
                (t.id, t.name.clone())
            }
        };
        let current = |s: &SessionSequences| {
            s.values.get(&id).copied().ok_or_else(|| SqlError::new("55000", format!("currval of sequence \"{name}\" is not yet defined in this session")))
        };
        let v = match call {
            SeqFunc::Nextval => {
                let v = self.txn.nextval(id)?;
                self.sequences.values.insert(id, v);
                self.sequences.last = Some(id);
                v
            }
            SeqFunc::Currval | SeqFunc::Lastval => current(self.sequences)?,
            SeqFunc::Setval => {
                let value = args.get(1).and_then(Value::as_i64).unwrap_or(0);
                let is_called = !matches!(args.get(2), Some(Value::Bool(false)));
                let v = self.txn.setval(id, value, is_called)?;
                if is_called {
                    self.sequences.values.insert(id, v);
                }
                v
            }
        };
        Ok(Value::Int8(v))
    }
}

/// Casts a key value to the key column's type; None when no stored value
/// can equal it (NULL, out of range, or not exactly representable).
fn exact_key(v: Value, ty: DataType) -> Option<Value> {
    if v.is_null() {
        return None;
    }
    if matches!(ty, DataType::Char(_)) {
        // char(n) keys are stored padded; compare through the padded form only
        // when the value already is that form.
        return match &v {
            Value::Text(s) if u32::try_from(s.chars().count()).ok() == Some(match ty { DataType::Char(n) => n, _ => 0 }) => Some(v),
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

impl<'a> Exec<'a> {
    fn env<'e>(&self, params: &'e [Value], outer: &'e [Value]) -> Env<'e> {
        Env { params, now_micros: self.now_micros, outer }
    }

    /// Evaluates the key expressions of a PkLookup into `keybuf`; false if
    /// no row can match.
    fn eval_pk(&mut self, table: &TableSchema, key: &[Expr], env: &Env<'_>, row: &[Value]) -> Result<bool> {
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
        Ok(ok)
    }

    /// Candidate rows of `level` for the current joined `row` (flat, table width each).
    /// `mask`: decode only these columns (DML key search); None: all.
    fn fetch(&mut self, level: &Level, env: &Env<'_>, row: &[Value], for_update: bool, mask: Option<&ColumnMask>, out: &mut Vec<Value>) -> Result<()> {
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
                if found
                    && let Some(r) = self.rowbuf.row() {
                        read_row(&r, mask, out);
                    }
            }
            Access::IndexScan { .. } | Access::FullScan => self.scan_level(level, env, row, &mut |r| read_row(r, mask, out))?,
            Access::Virtual(source) => self.virtual_rows(source, env, row, out)?,
        }
        Ok(())
    }

    /// Visits the rows an IndexScan or FullScan level yields at the
    /// snapshot, before its filters; `row` is the joined row so far (the
    /// index key may read earlier levels).
    fn scan_level(&mut self, level: &Level, env: &Env<'_>, row: &[Value], visit: &mut dyn FnMut(&RowRef<'_>)) -> Result<()> {
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
                let (cancel, since) = (self.cancel, &mut self.rows_since_cancel_check);
                let mut canceled = false;
                self.txn.scan(*index, lower_b, upper_b, |r| {
                    visit(&r);
                    canceled = cancel_requested(cancel, since);
                    Ok(!canceled)
                })?;
                self.return_row(prefix);
                if canceled {
                    return Err(SqlError::canceled());
                }
            }
            Access::FullScan => {
                let (cancel, since) = (self.cancel, &mut self.rows_since_cancel_check);
                let mut canceled = false;
                self.txn.scan_table(level.table.id, |r| {
                    visit(&r);
                    canceled = cancel_requested(cancel, since);
                    Ok(!canceled)
                })?;
                if canceled {
                    return Err(SqlError::canceled());
                }
            }
            Access::PkLookup { .. } | Access::Virtual(_) => return Err(SqlError::new("XX000", "scan_level on a key lookup or virtual source")),
        }
        Ok(())
    }

    fn passes(&mut self, filters: &[Expr], env: &Env<'_>, row: &[Value]) -> Result<bool> {
        for f in filters {
            if f.eval_bool(env, self, row)? != Some(true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Runs the join pipeline, calling `sink` with each joined row.
    /// Nested-loop join of `plan`'s levels from `l` on; each complete row
    /// that passes the final filters goes to `sink` (collected, aggregated
    /// or projected straight into the result: no row copies when streaming).
    fn join(&mut self, plan: &SelectPlan, l: usize, row: &mut Vec<Value>, env: &Env<'_>, sink: &mut dyn FnMut(&mut Self, &[Value]) -> Result<()>) -> Result<()> {
        if l == plan.levels.len() {
            if self.passes(&plan.final_filters, env, row)? {
                sink(self, row)?;
            }
            return Ok(());
        }
        let level = &plan.levels[l];
        let w = level.width();
        let mut cands = self.pooled_row();
        self.fetch(level, env, row, false, plan.level_masks.get(l), &mut cands)?;
        let mut matched = false;
        for cand in cands.chunks(w) {
            if cancel_requested(self.cancel, &mut self.rows_since_cancel_check) {
                self.return_row(cands);
                return Err(SqlError::canceled());
            }
            row[level.offset..level.offset + w].clone_from_slice(cand);
            if !self.passes(&level.filters, env, row)? {
                continue;
            }
            matched = true;
            if self.passes(&level.post_filters, env, row)? {
                self.join(plan, l + 1, row, env, sink)?;
            }
        }
        if level.left_join && !matched {
            for v in &mut row[level.offset..level.offset + w] {
                *v = Value::Null;
            }
            if self.passes(&level.post_filters, env, row)? {
                self.join(plan, l + 1, row, env, sink)?;
            }
        }
        self.return_row(cands);
        Ok(())
    }

    /// An empty buffer from [`Exec::row_pool`] (or a new one).
    fn pooled_row(&mut self) -> Vec<Value> {
        self.row_pool.pop().unwrap_or_default()
    }

    /// Gives a buffer back to [`Exec::row_pool`]; the pool stays small
    /// (one buffer per join level in use at once).
    fn return_row(&mut self, mut buf: Vec<Value>) {
        const POOL_BUFFERS_MAX: usize = 16;
        if self.row_pool.len() < POOL_BUFFERS_MAX {
            buf.clear();
            self.row_pool.push(buf);
        }
    }


    /// SELECT into `out` (visible columns only).
    pub fn select(&mut self, plan: &SelectPlan, params: &[Value], out: &mut ResultBuf) -> Result<()> {
        if plan.point_lookup {
            // The result's values are overwritten in place, not cleared:
            // a text column reuses the previous execution's string buffer.
            out.width = plan.visible;
            out.rows = 0;
            let r = self.select_point(plan, params, out);
            if out.rows == 0 {
                out.values.clear();
            }
            return r;
        }
        out.reset(plan.visible);
        let streams = plan.agg.is_none() && plan.windows.is_empty() && !plan.distinct && plan.distinct_on.is_empty() && plan.order_by.is_empty() && plan.limit.is_none() && plan.offset.is_none() && !plan.for_update;
        if streams {
            let env = self.env(params, &[]);
            if let [level] = plan.levels.as_slice()
                && matches!(level.access, Access::IndexScan { .. } | Access::FullScan)
                && level.filters.is_empty()
                && level.post_filters.is_empty()
                && plan.final_filters.is_empty()
                && plan.projects_columns
            {
                // One table, nothing to check per row, plain columns out:
                // each row's columns go from the engine into the result.
                let projection = &plan.projection[..plan.visible];
                let (values, rows) = (&mut out.values, &mut out.rows);
                return self.scan_level(level, &env, &[], &mut |r| {
                    let start = values.len();
                    values.resize(start + projection.len(), Value::Null);
                    assign_columns(&mut values[start..], projection, r);
                    *rows += 1;
                });
            }
            // Each joined row is projected into the result as it is found.
            let mut row = self.pooled_row();
            row.resize(plan.width, Value::Null);
            let projection = &plan.projection[..plan.visible];
            let r = self.join(plan, 0, &mut row, &env, &mut |ex, r| {
                for e in projection {
                    let v = e.eval(&env, ex, r)?;
                    out.values.push(v);
                }
                out.rows += 1;
                Ok(())
            });
            self.return_row(row);
            return r;
        }
        let rows = self.select_rows(plan, params, &[])?;
        for r in rows {
            out.push_row(&r[..plan.visible]);
        }
        Ok(())
    }

    fn select_point(&mut self, plan: &SelectPlan, params: &[Value], out: &mut ResultBuf) -> Result<()> {
        let level = &plan.levels[0];
        let Access::PkLookup { key } = &level.access else { return Ok(()) };
        let env = Env { params, now_micros: self.now_micros, outer: &[] };
        if !self.eval_pk(&level.table, key, &env, &[])? {
            return Ok(());
        }
        let projection = &plan.projection[..plan.visible];
        if plan.projects_columns && !plan.for_update {
            // Decoded from the row in place, under the engine's read lock
            // (no engine calls in here), instead of copying the row out first.
            set_len(&mut out.values, plan.visible);
            let values = &mut out.values;
            let found = self.txn.get_with(level.table.id, self.keybuf, |r| assign_columns(values, projection, &r))?;
            out.rows += usize::from(found.is_some());
            return Ok(());
        }
        let found = if plan.for_update {
            self.txn.get_for_update(level.table.id, self.keybuf, self.rowbuf)?
        } else {
            self.txn.get(level.table.id, self.keybuf, self.rowbuf)?
        };
        let Some(r) = self.rowbuf.row().filter(|_| found) else { return Ok(()) };
        set_len(&mut out.values, plan.visible);
        if plan.projects_columns {
            assign_columns(&mut out.values, projection, &r);
        } else {
            let mut scratch = std::mem::take(self.scratch);
            set_len(&mut scratch, r.len());
            for (c, slot) in scratch.iter_mut().enumerate() {
                assign_ref(slot, r.get(c));
            }
            for (slot, e) in out.values.iter_mut().zip(projection) {
                *slot = e.eval(&env, &mut NoSubqueries, &scratch)?;
            }
            *self.scratch = scratch;
        }
        out.rows += 1;
        Ok(())
    }

    /// Full SELECT pipeline; rows carry every projection column (sort keys too).
    pub fn select_rows(&mut self, plan: &SelectPlan, params: &[Value], outer: &[Value]) -> Result<Vec<Vec<Value>>> {
        let env = self.env(params, outer);
        let mut joined: Vec<Vec<Value>> = Vec::new();
        let mut row = vec![Value::Null; plan.width];
        let mut streamed_groups = None;
        match &plan.agg {
            // Rows feed the aggregates as they are found: memory is per
            // group, not per row (count(*) over a million rows holds one).
            Some(agg) if !plan.for_update => {
                let mut acc = Aggregator::new(&agg.group_by, &agg.aggs);
                self.join(plan, 0, &mut row, &env, &mut |ex, r| acc.add(ex, &env, r))?;
                streamed_groups = Some(acc.finish()?);
            }
            _ => self.join(plan, 0, &mut row, &env, &mut |_, r| {
                joined.push(r.to_vec());
                Ok(())
            })?,
        }
        if plan.for_update {
            joined = self.lock_rows(plan, &env, joined)?;
        }
        let input = match &plan.agg {
            Some(agg) => {
                let mut groups = match streamed_groups {
                    Some(g) => g,
                    None => aggregate(self, &env, &agg.group_by, &agg.aggs, &joined)?,
                };
                if let Some(h) = &agg.having {
                    let mut kept = Vec::with_capacity(groups.len());
                    for g in groups {
                        if h.eval_bool(&env, self, &g)? == Some(true) {
                            kept.push(g);
                        }
                    }
                    groups = kept;
                }
                groups
            }
            None => joined,
        };
        let input = if plan.windows.is_empty() { input } else { self.apply_windows(&plan.windows, &env, input)? };
        let mut rows = Vec::with_capacity(input.len());
        for r in &input {
            let mut o = Vec::with_capacity(plan.projection.len());
            for e in &plan.projection {
                o.push(e.eval(&env, self, r)?);
            }
            rows.push(o);
        }
        if plan.distinct {
            let mut seen = std::collections::HashSet::new();
            rows.retain(|r| seen.insert(GroupKey(r[..plan.visible].to_vec())));
        }
        if !plan.order_by.is_empty() {
            rows.sort_by(|a, b| {
                for k in &plan.order_by {
                    let o = sort_key_cmp(&a[k.column], &b[k.column], k.desc, k.nulls_first);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            });
        }
        if !plan.distinct_on.is_empty() {
            let mut seen = std::collections::HashSet::new();
            rows.retain(|r| seen.insert(GroupKey(plan.distinct_on.iter().map(|&c| r[c].clone()).collect())));
        }
        let offset = match &plan.offset {
            Some(e) => count_arg(e.eval(&env, self, &[])?, "OFFSET")?,
            None => 0,
        };
        let limit = match &plan.limit {
            Some(e) => Some(count_arg(e.eval(&env, self, &[])?, "LIMIT")?),
            None => None,
        };
        let rows: Vec<Vec<Value>> = rows.into_iter().skip(offset).take(limit.unwrap_or(usize::MAX)).collect();
        Ok(rows)
    }

    /// SELECT ... FOR UPDATE: lock each row, re-read its latest version and
    /// recheck the predicates on it (PostgreSQL's EvalPlanQual).
    fn lock_rows(&mut self, plan: &SelectPlan, env: &Env<'_>, rows: Vec<Vec<Value>>) -> Result<Vec<Vec<Value>>> {
        let level = &plan.levels[0];
        let table = level.table.clone();
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let key: Vec<Value> = table.primary_key.iter().map(|&c| r[c].clone()).collect();
            if !self.txn.get_for_update(table.id, &key, self.rowbuf)? {
                continue;
            }
            let latest = self.rowbuf.values();
            let mut keep = self.passes(&level.filters, env, &latest)? && self.passes(&level.key_checks, env, &latest)?;
            if keep && !level.exact_key {
                keep = true;
            }
            if keep && let Access::PkLookup { key: kexprs } = &level.access {
                // The key may have moved away from the looked-up value.
                for (e, &c) in kexprs.iter().zip(&table.primary_key) {
                    let want = e.eval(env, self, &latest)?;
                    keep &= value::compare(&want, &latest[c]) == Some(Ordering::Equal);
                }
            }
            if keep && self.passes(&plan.final_filters, env, &latest)? {
                out.push(latest);
            }
        }
        Ok(out)
    }

    // ------------------------------------------------------------ DML

    /// Rows of a DML target matching its WHERE (full rows).
    fn dml_rows(&mut self, level: &Level, env: &Env<'_>) -> Result<Vec<Vec<Value>>> {
        let mut cands = Vec::new();
        self.fetch(level, env, &[], false, None, &mut cands)?;
        let w = level.width();
        let mut rows = Vec::new();
        for c in cands.chunks(w) {
            if self.passes(&level.filters, env, c)? {
                rows.push(c.to_vec());
            }
        }
        Ok(rows)
    }

    /// Primary keys (flat, `pk_len` values each) of the rows of a DML
    /// target matching its WHERE, appended to `keys`. Candidates are read
    /// into a reused buffer: no allocation per row beyond text values.
    fn matching_keys(&mut self, level: &Level, env: &Env<'_>, search_columns: &ColumnMask, keys: &mut Vec<Value>) -> Result<()> {
        if level.filters.is_empty() && matches!(level.access, Access::IndexScan { .. } | Access::FullScan) {
            // Every row the scan yields matches: take its key in place.
            let pk = &level.table.primary_key;
            return self.scan_level(level, env, &[], &mut |r| keys.extend(pk.iter().map(|&k| r.get(k).to_owned_value())));
        }
        let mut cands = std::mem::take(self.scratch);
        cands.clear();
        let r = self.fetch(level, env, &[], false, Some(search_columns), &mut cands).and_then(|()| {
            for c in cands.chunks(level.width()) {
                if self.passes(&level.filters, env, c)? {
                    keys.extend(level.table.primary_key.iter().map(|&k| c[k].clone()));
                }
            }
            Ok(())
        });
        *self.scratch = cands;
        r
    }

    pub fn insert(&mut self, plan: &InsertPlan, params: &[Value], out: &mut ResultBuf) -> Result<u64> {
        out.reset(plan.returning.len());
        let env = self.env(params, &[]);
        let table = &plan.table;
        let mut sources: Vec<Vec<Value>> = Vec::new();
        match &plan.source {
            InsertSource::Values(rows) => {
                for r in rows {
                    let mut vals = Vec::with_capacity(r.len());
                    for e in r {
                        vals.push(e.eval(&env, self, &[])?);
                    }
                    sources.push(vals);
                }
            }
            InsertSource::Query(q) => {
                for r in self.select_rows(q, params, &[])? {
                    let mut vals = Vec::with_capacity(q.visible);
                    for (k, v) in r.into_iter().take(q.visible).enumerate() {
                        let col = &table.columns[plan.targets[k]];
                        vals.push(value::cast(v, col.ty, false)?);
                    }
                    sources.push(vals);
                }
            }
        }
        let mut count = 0;
        let defaults = table.default_row();
        for vals in sources {
            let mut full = defaults.clone();
            for (k, v) in vals.into_iter().enumerate() {
                full[plan.targets[k]] = v;
            }
            // Sequence defaults of the columns not listed, row by row.
            for (c, e) in &plan.generated {
                full[*c] = e.eval(&env, self, &[])?;
            }
            self.check_row(&plan.checks, &env, table, &full)?;
            if let Some(oc) = &plan.on_conflict
                && let Some(existing) = self.conflicting_row(table, &oc.arbiters, &full)? {
                    match &oc.action {
                        ConflictAction::Nothing => continue,
                        ConflictAction::Update { assignments, filter } => {
                            if let Some(new_row) = self.conflict_update(table, existing, &full, assignments, filter.as_ref(), &plan.checks, &env)? {
                                count += 1;
                                self.returning(&plan.returning, &env, &new_row, out)?;
                            }
                            continue;
                        }
                    }
                }
            self.txn.insert(table.id, &full)?;
            count += 1;
            if !plan.returning.is_empty() {
                // RETURNING sees the row as stored (defaults, padding, rounding).
                let key: Vec<Value> = table.primary_key.iter().map(|&c| full[c].clone()).collect();
                let stored = if self.txn.get(table.id, &key, self.rowbuf)? { self.rowbuf.values() } else { full };
                self.returning(&plan.returning, &env, &stored, out)?;
            }
        }
        Ok(count)
    }

    /// Appends each window function's value to every row. A partition is
    /// the rows with equal PARTITION BY values (NULLs together); the frame
    /// is PostgreSQL's default: from the partition's start to the current
    /// row's last peer (rows equal in every ORDER BY key), so without ORDER
    /// BY an aggregate covers the whole partition.
    fn apply_windows(&mut self, windows: &[WindowCall], env: &Env<'_>, mut rows: Vec<Vec<Value>>) -> Result<Vec<Vec<Value>>> {
        let n = rows.len();
        let mut columns: Vec<Vec<Value>> = Vec::with_capacity(windows.len());
        for w in windows {
            let mut keys: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(n);
            for r in &rows {
                let mut p = Vec::with_capacity(w.partition.len());
                for e in &w.partition {
                    p.push(e.eval(env, self, r)?);
                }
                let mut o = Vec::with_capacity(w.order.len());
                for (e, _, _) in &w.order {
                    o.push(e.eval(env, self, r)?);
                }
                keys.push((p, o));
            }
            let same_partition = |a: usize, b: usize| keys[a].0.iter().zip(&keys[b].0).all(|(x, y)| sort_key_cmp(x, y, false, false) == Ordering::Equal);
            let order_cmp = |a: usize, b: usize| {
                for ((x, y), (_, desc, nulls_first)) in keys[a].1.iter().zip(&keys[b].1).zip(&w.order) {
                    let o = sort_key_cmp(x, y, *desc, *nulls_first);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            };
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| {
                for (x, y) in keys[a].0.iter().zip(&keys[b].0) {
                    let o = sort_key_cmp(x, y, false, false);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                order_cmp(a, b)
            });
            let mut out = vec![Value::Null; n];
            let mut start = 0;
            while start < n {
                let mut end = start + 1;
                while end < n && same_partition(order[start], order[end]) {
                    end += 1;
                }
                let mut acc = match &w.func {
                    WindowFunc::Agg(call) => Some(new_acc(call, None)),
                    _ => None,
                };
                // The value a lag/lead/first_value/last_value reads, for
                // each row of the partition in window order.
                let mut values = Vec::new();
                if let WindowFunc::Shift { value: e, .. } | WindowFunc::FirstValue(e) | WindowFunc::LastValue(e) = &w.func {
                    for &r in &order[start..end] {
                        values.push(e.eval(env, self, &rows[r])?);
                    }
                }
                #[allow(clippy::cast_precision_loss)]
                let len = (end - start) as f64;
                let (mut peers_start, mut dense) = (start, 0i64);
                while peers_start < end {
                    let mut peers_end = peers_start + 1;
                    while peers_end < end && order_cmp(order[peers_start], order[peers_end]) == Ordering::Equal {
                        peers_end += 1;
                    }
                    dense += 1;
                    let aggregate = match (&w.func, acc.as_mut()) {
                        (WindowFunc::Agg(call), Some(acc)) => {
                            for &r in &order[peers_start..peers_end] {
                                if let Some(f) = &call.filter
                                    && f.eval_bool(env, self, &rows[r])? != Some(true)
                                {
                                    continue;
                                }
                                let v = match &call.arg {
                                    Some(e) => Some(e.eval(env, self, &rows[r])?),
                                    None => None,
                                };
                                accumulate(acc, call, v)?;
                            }
                            finish(acc.clone(), call)?
                        }
                        _ => Value::Null,
                    };
                    for (k, &r) in order[peers_start..peers_end].iter().enumerate() {
                        let position = |at: usize| Value::Int8(i64::try_from(at - start + 1).unwrap_or(i64::MAX));
                        let at = peers_start + k - start;
                        #[allow(clippy::cast_precision_loss)]
                        let v = match &w.func {
                            WindowFunc::RowNumber => position(peers_start + k),
                            WindowFunc::Rank => position(peers_start),
                            WindowFunc::DenseRank => Value::Int8(dense),
                            WindowFunc::Agg(_) => aggregate.clone(),
                            WindowFunc::PercentRank => Value::Float8(if end - start == 1 { 0.0 } else { (peers_start - start) as f64 / (len - 1.0) }),
                            WindowFunc::CumeDist => Value::Float8((peers_end - start) as f64 / len),
                            WindowFunc::Ntile(n) => ntile(n.eval(env, self, &rows[r])?, at, end - start)?,
                            WindowFunc::Shift { offset, default, lead, .. } => {
                                let off = match offset {
                                    Some(e) => match e.eval(env, self, &rows[r])?.as_i64() {
                                        Some(o) => o,
                                        None => {
                                            out[r] = Value::Null;
                                            continue;
                                        }
                                    },
                                    None => 1,
                                };
                                let target = if *lead { i64::try_from(at).ok().and_then(|a| a.checked_add(off)) } else { i64::try_from(at).ok().and_then(|a| a.checked_sub(off)) };
                                match target.and_then(|t| usize::try_from(t).ok()).and_then(|t| values.get(t)) {
                                    Some(v) => v.clone(),
                                    None => match default {
                                        Some(d) => d.eval(env, self, &rows[r])?,
                                        None => Value::Null,
                                    },
                                }
                            }
                            WindowFunc::FirstValue(_) => values.first().cloned().unwrap_or(Value::Null),
                            WindowFunc::LastValue(_) => values.get(peers_end - 1 - start).cloned().unwrap_or(Value::Null),
                        };
                        out[r] = v;
                    }
                    peers_start = peers_end;
                }
                start = end;
            }
            columns.push(out);
        }
        for (r, row) in rows.iter_mut().enumerate() {
            for c in &mut columns {
                row.push(std::mem::replace(&mut c[r], Value::Null));
            }
        }
        Ok(rows)
    }

    /// PostgreSQL's CHECK rule: a row passes unless an expression is false
    /// (NULL passes).
    fn check_row(&mut self, checks: &[(String, Expr)], env: &Env<'_>, table: &TableSchema, row: &[Value]) -> Result<()> {
        for (name, e) in checks {
            if e.eval_bool(env, self, row)? == Some(false) {
                return Err(check_violation(table, name, row));
            }
        }
        Ok(())
    }

    fn returning(&mut self, exprs: &[Expr], env: &Env<'_>, row: &[Value], out: &mut ResultBuf) -> Result<()> {
        if exprs.is_empty() {
            return Ok(());
        }
        let mut o = Vec::with_capacity(exprs.len());
        for e in exprs {
            o.push(e.eval(env, self, row)?);
        }
        out.push_row(&o);
        Ok(())
    }

    /// The row that conflicts with `full` on one of the arbiter indexes.
    fn conflicting_row(&mut self, table: &TableSchema, arbiters: &[pgtier_engine::IndexId], full: &[Value]) -> Result<Option<Vec<Value>>> {
        for &id in arbiters {
            let Some(index) = self.txn.catalog().index(id).cloned() else { continue };
            let mut key = Vec::with_capacity(index.columns.len());
            for &c in &index.columns {
                match exact_key(full[c].clone(), table.columns[c].ty).or_else(|| value::cast(full[c].clone(), table.columns[c].ty, false).ok().filter(|v| !v.is_null())) {
                    Some(v) => key.push(v),
                    None => break,
                }
            }
            if key.len() != index.columns.len() {
                continue; // NULLs never conflict
            }
            if index.primary {
                if self.txn.get(table.id, &key, self.rowbuf)? {
                    return Ok(Some(self.rowbuf.values()));
                }
            } else {
                let mut found = None;
                self.txn.scan_prefix(id, &key, |r| {
                    found = Some(r.values());
                    Ok(false)
                })?;
                if found.is_some() {
                    return Ok(found);
                }
            }
        }
        Ok(None)
    }

    #[allow(clippy::too_many_arguments)]
    fn conflict_update(
        &mut self, table: &TableSchema, existing: Vec<Value>, excluded: &[Value], assignments: &[(usize, Expr)], filter: Option<&Expr>, checks: &[(String, Expr)],
        env: &Env<'_>,
    ) -> Result<Option<Vec<Value>>> {
        let mut both = existing.clone();
        both.extend_from_slice(excluded);
        if let Some(f) = filter
            && f.eval_bool(env, self, &both)? != Some(true) {
                return Ok(None);
            }
        let mut changes = Vec::with_capacity(assignments.len());
        for (c, e) in assignments {
            changes.push((*c, e.eval(env, self, &both)?));
        }
        let key: Vec<Value> = table.primary_key.iter().map(|&c| existing[c].clone()).collect();
        let mut new_row = existing;
        for (c, v) in &changes {
            new_row[*c] = v.clone();
        }
        self.check_row(checks, env, table, &new_row)?;
        if !self.txn.update(table.id, &key, &changes)? {
            return Ok(None);
        }
        Ok(Some(new_row))
    }

    pub fn update(&mut self, plan: &UpdatePlan, params: &[Value], out: &mut ResultBuf) -> Result<u64> {
        out.reset(plan.returning.len());
        let env = self.env(params, &[]);
        let level = &plan.level;
        let table = level.table.clone();
        if plan.assignments_have_subqueries {
            return self.update_with_subqueries(plan, &env, out);
        }
        let direct = matches!(level.access, Access::PkLookup { .. }) && level.exact_key && level.filters.is_empty();
        let mut keys = std::mem::take(self.dml_keys);
        keys.clear();
        if direct {
            let Access::PkLookup { key } = &level.access else { return Ok(0) };
            if !self.eval_pk(&table, key, &env, &[])? {
                *self.dml_keys = keys;
                return Ok(0);
            }
            keys.extend_from_slice(self.keybuf);
        } else if let Err(e) = self.matching_keys(level, &env, &plan.search_columns, &mut keys) {
            *self.dml_keys = keys;
            return Err(e);
        }
        let mut new_row = std::mem::take(self.dml_row);
        let r = self.update_keys(plan, params, &env, &keys, &mut new_row, direct, out);
        *self.dml_keys = keys;
        *self.dml_row = new_row;
        r
    }

    /// Updates the rows with primary keys `keys` (flat): locks each row's
    /// latest version, rechecks the WHERE on it unless the key lookup was
    /// exact (READ COMMITTED's re-check), computes the new values.
    #[allow(clippy::too_many_arguments)]
    fn update_keys(&mut self, plan: &UpdatePlan, params: &[Value], env: &Env<'_>, keys: &[Value], new_row: &mut Vec<Value>, direct: bool, out: &mut ResultBuf) -> Result<u64> {
        let level = &plan.level;
        let table = level.table.clone();
        let recheck = !direct && !plan.filters_have_subqueries;
        let mut count = 0;
        for key in keys.chunks(table.primary_key.len().max(1)) {
            let mut failure: Option<SqlError> = None;
            let mut applied = false;
            let now_micros = self.now_micros;
            let updated = self.txn.update_with(table.id, key, |r| {
                let env = Env { params, now_micros, outer: &[] };
                // Slots are overwritten in place: text buffers are reused.
                // Columns nothing reads are not decoded.
                set_len(new_row, r.len());
                for (c, slot) in new_row.iter_mut().enumerate() {
                    if plan.eval_columns.reads(c) {
                        assign_ref(slot, r.get(c));
                    } else if !slot.is_null() {
                        *slot = Value::Null;
                    }
                }
                let outcome = (|| -> Result<Option<Vec<(usize, Value)>>> {
                    if recheck {
                        for f in level.filters.iter().chain(&level.key_checks) {
                            if f.eval_bool(&env, &mut NoSubqueries, new_row)? != Some(true) {
                                return Ok(None);
                            }
                        }
                    }
                    let mut changes = Vec::with_capacity(plan.assignments.len());
                    for (c, e) in &plan.assignments {
                        changes.push((*c, e.eval(&env, &mut NoSubqueries, new_row)?));
                    }
                    // The new row (RETURNING and the CHECKs read it).
                    for (c, v) in &changes {
                        new_row[*c] = v.clone();
                    }
                    for (name, e) in &plan.checks {
                        if e.eval_bool(&env, &mut NoSubqueries, new_row)? == Some(false) {
                            return Err(check_violation(&table, name, new_row));
                        }
                    }
                    Ok(Some(changes))
                })();
                match outcome {
                    Ok(Some(changes)) => {
                        applied = true;
                        Ok(Some(changes))
                    }
                    Ok(None) => {
                        applied = false;
                        Ok(None)
                    }
                    Err(e) => {
                        failure = Some(e);
                        applied = false;
                        Ok(None)
                    }
                }
            });
            let updated = updated?;
            if let Some(e) = failure {
                return Err(e);
            }
            if updated && applied {
                count += 1;
                if !plan.returning.is_empty() {
                    let key2: Vec<Value> = table.primary_key.iter().map(|&c| new_row[c].clone()).collect();
                    let stored = if self.txn.get(table.id, &key2, self.rowbuf)? { self.rowbuf.values() } else { new_row.clone() };
                    self.returning(&plan.returning, env, &stored, out)?;
                }
            }
        }
        Ok(count)
    }

    /// UPDATE whose new values need subqueries: evaluated outside the
    /// engine's row callback (which may not call the engine), on the row
    /// as the statement's snapshot saw it.
    fn update_with_subqueries(&mut self, plan: &UpdatePlan, env: &Env<'_>, out: &mut ResultBuf) -> Result<u64> {
        let table = plan.level.table.clone();
        let mut count = 0;
        for row in self.dml_rows(&plan.level, env)? {
            let key: Vec<Value> = table.primary_key.iter().map(|&c| row[c].clone()).collect();
            let mut changes = Vec::with_capacity(plan.assignments.len());
            for (c, e) in &plan.assignments {
                changes.push((*c, e.eval(env, self, &row)?));
            }
            let mut new_row = row;
            for (c, v) in &changes {
                new_row[*c] = v.clone();
            }
            self.check_row(&plan.checks, env, &table, &new_row)?;
            if self.txn.update(table.id, &key, &changes)? {
                count += 1;
                self.returning(&plan.returning, env, &new_row, out)?;
            }
        }
        Ok(count)
    }

    pub fn delete(&mut self, plan: &DeletePlan, params: &[Value], out: &mut ResultBuf) -> Result<u64> {
        out.reset(plan.returning.len());
        let env = self.env(params, &[]);
        let level = &plan.level;
        let table = level.table.clone();
        let direct = matches!(level.access, Access::PkLookup { .. }) && level.exact_key && level.filters.is_empty() && plan.returning.is_empty();
        if direct {
            let Access::PkLookup { key } = &level.access else { return Ok(0) };
            if !self.eval_pk(&table, key, &env, &[])? {
                return Ok(0);
            }
            return Ok(u64::from(self.txn.delete(table.id, self.keybuf)?));
        }
        if plan.returning.is_empty() {
            // Only the keys are needed: no row copies per match.
            let mut keys = std::mem::take(self.dml_keys);
            keys.clear();
            let r = self.matching_keys(level, &env, &plan.search_columns, &mut keys).and_then(|()| {
                let mut count = 0;
                for key in keys.chunks(table.primary_key.len().max(1)) {
                    count += u64::from(self.delete_rechecked(level, &env, key)?);
                }
                Ok(count)
            });
            *self.dml_keys = keys;
            return r;
        }
        let rows = self.dml_rows(level, &env)?;
        let mut count = 0;
        for r in rows {
            let key: Vec<Value> = table.primary_key.iter().map(|&c| r[c].clone()).collect();
            if self.delete_rechecked(level, &env, &key)? {
                count += 1;
                self.returning(&plan.returning, &env, &r, out)?;
            }
        }
        Ok(count)
    }

    /// Deletes the row with primary key `key` if the WHERE still holds on
    /// its latest version, after waiting for a concurrent writer (READ
    /// COMMITTED's recheck, as UPDATE does). A WHERE with a subquery is not
    /// rechecked (it cannot run inside the engine's row callback).
    fn delete_rechecked(&mut self, level: &Level, env: &Env<'_>, key: &[Value]) -> Result<bool> {
        let table_id = level.table.id;
        if (level.filters.is_empty() && level.key_checks.is_empty()) || level.filters.iter().any(Expr::has_subquery) {
            return Ok(self.txn.delete(table_id, key)?);
        }
        let mut failure = None;
        let deleted = self.txn.delete_with(table_id, key, |r| {
            let row = r.values();
            for f in level.filters.iter().chain(&level.key_checks) {
                match f.eval_bool(env, &mut NoSubqueries, &row) {
                    Ok(Some(true)) => {}
                    Ok(_) => return Ok(false),
                    Err(e) => {
                        failure = Some(e);
                        return Ok(false);
                    }
                }
            }
            Ok(true)
        })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(deleted),
        }
    }

    // ------------------------------------------------------------ DDL

    pub fn create_table(&mut self, def: &TableDef, if_not_exists: bool) -> Result<()> {
        if if_not_exists && self.txn.catalog().table_by_name(&def.name).is_some() {
            self.notices.push(SqlNotice { sqlstate: "42P07", message: format!("relation \"{}\" already exists, skipping", def.name) });
            return Ok(());
        }
        for c in &def.columns {
            if c.ty == NUMERIC_ANY {
                return Err(SqlError::unsupported("numeric column without precision"));
            }
        }
        self.txn.create_table(def)?;
        Ok(())
    }

    /// CREATE TABLE whose serial or identity columns need their sequences
    /// made first (in the same transaction).
    pub fn create_table_with_sequences(&mut self, def: &TableDef, sequences: &[(String, pgtier_engine::SequenceOptions)], if_not_exists: bool) -> Result<()> {
        if !(if_not_exists && self.txn.catalog().table_by_name(&def.name).is_some()) {
            // A name already taken is the engine's 42P07.
            for (name, options) in sequences {
                self.txn.create_sequence(name, options.clone())?;
            }
        }
        self.create_table(def, if_not_exists)
    }

    pub fn create_sequence(&mut self, name: &str, options: &pgtier_engine::SequenceOptions, if_not_exists: bool) -> Result<()> {
        let cat = self.txn.catalog();
        if cat.table_by_name(name).is_some() || cat.index_by_name(name).is_some() {
            if if_not_exists {
                self.notices.push(SqlNotice { sqlstate: "42P07", message: format!("relation \"{name}\" already exists, skipping") });
                return Ok(());
            }
            return Err(SqlError::new("42P07", format!("relation \"{name}\" already exists")));
        }
        self.txn.create_sequence(name, options.clone())?;
        Ok(())
    }

    pub fn create_index(&mut self, def: &IndexDef, if_not_exists: bool) -> Result<()> {
        if if_not_exists && self.txn.catalog().index_by_name(&def.name).is_some() {
            self.notices.push(SqlNotice { sqlstate: "42P07", message: format!("relation \"{}\" already exists, skipping", def.name) });
            return Ok(());
        }
        self.txn.create_index(def)?;
        Ok(())
    }

    /// TRUNCATE: deletes every row this statement sees, table by table in
    /// the planned order; RESTART IDENTITY sets each owned sequence back to
    /// its start.
    pub fn truncate(&mut self, tables: &[std::sync::Arc<TableSchema>], restart_identity: bool) -> Result<()> {
        let mut keys: Vec<Value> = Vec::new();
        for t in tables {
            keys.clear();
            let pk = &t.primary_key;
            self.txn.scan_table(t.id, |r| {
                keys.extend(pk.iter().map(|&k| r.get(k).to_owned_value()));
                Ok(true)
            })?;
            for key in keys.chunks(pk.len().max(1)) {
                self.txn.delete(t.id, key)?;
            }
            if restart_identity {
                for (seq, _) in t.columns.iter().filter_map(|c| c.sequence).filter(|(_, how)| how.owns()) {
                    let start = self.txn.catalog().table(seq).and_then(|s| s.sequence.as_ref()).map(|o| o.start);
                    if let Some(start) = start {
                        self.txn.setval(seq, start, false)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// DROP TABLE, or DROP SEQUENCE when `sequences`: each name must be of
    /// that kind (PostgreSQL's 42809 and its hint otherwise).
    pub fn drop_tables(&mut self, names: &[String], if_exists: bool, sequences: bool) -> Result<()> {
        let (kind, other, other_kind) = if sequences { ("sequence", "table", "TABLE") } else { ("table", "sequence", "SEQUENCE") };
        let mut pending: Vec<String> = Vec::new();
        for n in names {
            if let Some(t) = self.txn.catalog().table_by_name(n) {
                if t.sequence.is_some() != sequences {
                    return Err(SqlError::new("42809", format!("\"{n}\" is not a {kind}")).with_hint(format!("Use DROP {other_kind} to remove a {other}.")));
                }
                pending.push(n.clone());
            } else if if_exists {
                self.notices.push(SqlNotice { sqlstate: "00000", message: format!("{kind} \"{n}\" does not exist, skipping") });
            } else {
                return Err(SqlError::new("42P01", format!("{kind} \"{n}\" does not exist")));
            }
        }
        // Children first, so a statement dropping a parent with its children works.
        while !pending.is_empty() {
            let cat = self.txn.catalog();
            let pick = pending.iter().position(|n| {
                let Some(t) = cat.table_by_name(n) else { return true };
                !cat.referencing(t.id).iter().any(|fk| fk.child != t.id && pending.iter().any(|p| cat.table_by_name(p).is_some_and(|pt| pt.id == fk.child)))
            });
            let name = pending.remove(pick.unwrap_or(0));
            self.txn.drop_table(&name).map_err(drop_error)?;
        }
        Ok(())
    }

    pub fn drop_indexes(&mut self, names: &[String], if_exists: bool) -> Result<()> {
        for n in names {
            if self.txn.catalog().index_by_name(n).is_none() {
                if if_exists {
                    self.notices.push(SqlNotice { sqlstate: "00000", message: format!("index \"{n}\" does not exist, skipping") });
                    continue;
                }
                return Err(SqlError::new("42704", format!("index \"{n}\" does not exist")));
            }
            self.txn.drop_index(n)?;
        }
        Ok(())
    }
}

fn drop_error(e: EngineError) -> SqlError {
    SqlError::from(e)
}

fn count_arg(v: Value, what: &str) -> Result<usize> {
    match v {
        Value::Null => Ok(usize::MAX),
        v => {
            let n = v.as_i64().unwrap_or(0);
            if n < 0 {
                let msg = if what == "LIMIT" { "LIMIT must not be negative" } else { "OFFSET must not be negative" };
                return Err(SqlError::new("2201W", msg));
            }
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        }
    }
}

/// Group/DISTINCT key: values equal under SQL equality hash alike.
#[derive(Clone, Debug)]
pub(crate) struct GroupKey(pub(crate) Vec<Value>);

impl PartialEq for GroupKey {
    fn eq(&self, other: &GroupKey) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(&other.0).all(|(a, b)| match (a.is_null(), b.is_null()) {
                (true, true) => true,
                (false, false) => value::compare(a, b) == Some(Ordering::Equal),
                _ => false,
            })
    }
}

impl Eq for GroupKey {}

impl Hash for GroupKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for v in &self.0 {
            match v {
                Value::Null => 0u8.hash(h),
                Value::Bool(b) => b.hash(h),
                Value::Int2(_) | Value::Int4(_) | Value::Int8(_) | Value::Numeric(_) => {
                    let n = value::numeric_normalize(value::to_numeric(v).unwrap_or(Numeric::new(0, 0)));
                    n.hash(h);
                }
                Value::Float4(_) | Value::Float8(_) => {
                    let x = value::to_f64(v).unwrap_or(0.0);
                    let x = if x == 0.0 { 0.0 } else if x.is_nan() { f64::NAN } else { x };
                    x.to_bits().hash(h);
                }
                Value::Text(s) => s.hash(h),
                Value::Bytea(b) => b.hash(h),
                Value::Date(d) => (i64::from(*d) * 86_400_000_000).hash(h),
                Value::Timestamp(t) | Value::TimestampTz(t) => t.hash(h),
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Acc {
    Count(i64),
    SumInt(Option<i128>),
    SumNum(Option<Numeric>),
    SumFloat(Option<f64>),
    AvgNum(Numeric, i64),
    AvgFloat(f64, i64),
    Extreme(Option<Value>),
    Collect(Vec<Value>),
}

fn new_acc(call: &AggCall, arg_ty_hint: Option<&Value>) -> Acc {
    let _ = arg_ty_hint;
    match call.func {
        AggFunc::Count | AggFunc::CountStar => Acc::Count(0),
        AggFunc::Sum => match call.ty {
            DataType::Int8 => Acc::SumInt(None),
            DataType::Float4 | DataType::Float8 => Acc::SumFloat(None),
            _ => Acc::SumNum(None),
        },
        AggFunc::Avg => match call.ty {
            DataType::Float8 => Acc::AvgFloat(0.0, 0),
            _ => Acc::AvgNum(Numeric::new(0, 0), 0),
        },
        AggFunc::Min | AggFunc::Max => Acc::Extreme(None),
        AggFunc::StringAgg | AggFunc::ArrayAgg => Acc::Collect(Vec::new()),
    }
}

fn accumulate(acc: &mut Acc, call: &AggCall, v: Option<Value>) -> Result<()> {
    let overflow = || SqlError::new("22003", "value overflows numeric format");
    match (acc, v) {
        (Acc::Count(n), None) if call.func == AggFunc::CountStar => *n += 1,
        // array_agg keeps NULLs; string_agg's pair is never NULL.
        (Acc::Collect(items), Some(v)) => items.push(v),
        (_, None) => {}
        (_, Some(Value::Null)) => {}
        (Acc::Count(n), Some(_)) => *n += 1,
        (Acc::SumInt(s), Some(v)) => *s = Some(s.unwrap_or(0).checked_add(i128::from(v.as_i64().unwrap_or(0))).ok_or_else(overflow)?),
        (Acc::SumNum(s), Some(v)) => {
            let n = value::to_numeric(&v).ok_or_else(overflow)?;
            *s = Some(match s {
                Some(prev) => value::numeric_arith(value::ArithOp::Add, *prev, n)?,
                None => n,
            });
        }
        (Acc::SumFloat(s), Some(v)) => *s = Some(s.unwrap_or(0.0) + value::to_f64(&v).unwrap_or(0.0)),
        (Acc::AvgNum(s, c), Some(v)) => {
            *s = value::numeric_arith(value::ArithOp::Add, *s, value::to_numeric(&v).ok_or_else(overflow)?)?;
            *c += 1;
        }
        (Acc::AvgFloat(s, c), Some(v)) => {
            *s += value::to_f64(&v).unwrap_or(0.0);
            *c += 1;
        }
        (Acc::Extreme(cur), Some(v)) => {
            let replace = match cur {
                None => true,
                Some(c) => {
                    let o = value::compare(&v, c).unwrap_or(Ordering::Equal);
                    if call.func == AggFunc::Min { o == Ordering::Less } else { o == Ordering::Greater }
                }
            };
            if replace {
                *cur = Some(v);
            }
        }
    }
    Ok(())
}

fn finish(acc: Acc, call: &AggCall) -> Result<Value> {
    Ok(match acc {
        Acc::Count(n) => Value::Int8(n),
        Acc::Collect(items) => crate::system::funcs::finish_collect(call, items)?,
        Acc::SumInt(s) => match s {
            Some(x) => Value::Int8(i64::try_from(x).map_err(|_| SqlError::out_of_range("bigint"))?),
            None => Value::Null,
        },
        Acc::SumNum(s) => s.map_or(Value::Null, Value::Numeric),
        #[allow(clippy::cast_possible_truncation)]
        Acc::SumFloat(s) => match (s, call.ty) {
            (None, _) => Value::Null,
            (Some(x), DataType::Float4) => Value::Float4(x as f32),
            (Some(x), _) => Value::Float8(x),
        },
        Acc::AvgNum(s, c) => {
            if c == 0 {
                Value::Null
            } else {
                Value::Numeric(value::numeric_div(s, Numeric::new(i128::from(c), 0))?)
            }
        }
        #[allow(clippy::cast_precision_loss)]
        Acc::AvgFloat(s, c) => {
            if c == 0 {
                Value::Null
            } else {
                Value::Float8(s / c as f64)
            }
        }
        Acc::Extreme(v) => v.unwrap_or(Value::Null),
    })
}

/// 23514 with PostgreSQL's detail: the new row's visible columns.
fn check_violation(table: &TableSchema, name: &str, row: &[Value]) -> SqlError {
    let shown: Vec<String> = row.iter().take(table.visible_columns().len()).map(|v| if v.is_null() { "null".to_owned() } else { value::to_text(v) }).collect();
    let mut e = SqlError::new("23514", format!("new row for relation \"{}\" violates check constraint \"{name}\"", table.name))
        .with_detail(format!("Failing row contains ({}).", shown.join(", ")));
    e.constraint = Some(name.to_owned());
    e
}

/// ntile(n) for the row at `at` (0-based) of a partition of `len` rows:
/// n buckets, the first `len % n` one row larger (PostgreSQL's split).
fn ntile(n: Value, at: usize, len: usize) -> Result<Value> {
    let Some(n) = n.as_i64() else { return Ok(Value::Null) };
    let n = usize::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| SqlError::new("22014", "argument of ntile must be greater than zero"))?;
    let (size, larger) = (len / n, len % n);
    let bucket = if size == 0 {
        at
    } else if at < larger * (size + 1) {
        at / (size + 1)
    } else {
        larger + (at - larger * (size + 1)) / size
    };
    Ok(Value::Int4(i32::try_from(bucket + 1).unwrap_or(i32::MAX)))
}

/// ORDER BY's comparison of one key (also window ORDER BY and PARTITION BY).
fn sort_key_cmp(x: &Value, y: &Value, desc: bool, nulls_first: bool) -> Ordering {
    match (x.is_null(), y.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => if nulls_first { Ordering::Less } else { Ordering::Greater },
        (false, true) => if nulls_first { Ordering::Greater } else { Ordering::Less },
        _ => {
            let o = value::compare(x, y).unwrap_or(Ordering::Equal);
            if desc { o.reverse() } else { o }
        }
    }
}

/// Hash aggregation: one output row per group (group values, then aggregates).
fn aggregate(ex: &mut Exec<'_>, env: &Env<'_>, group_by: &[Expr], aggs: &[AggCall], rows: &[Vec<Value>]) -> Result<Vec<Vec<Value>>> {
    let mut acc = Aggregator::new(group_by, aggs);
    for r in rows {
        acc.add(ex, env, r)?;
    }
    acc.finish()
}

/// GROUP BY state fed one row at a time: groups in first-seen order, each
/// with its accumulators (and, for DISTINCT aggregates, the values seen).
struct Aggregator<'p> {
    group_by: &'p [Expr],
    aggs: &'p [AggCall],
    index: HashMap<GroupKey, usize>,
    groups: Vec<AggGroup>,
}

struct AggGroup {
    key: Vec<Value>,
    accs: Vec<Acc>,
    seen: Vec<std::collections::HashSet<GroupKey>>,
}

impl<'p> Aggregator<'p> {
    fn new(group_by: &'p [Expr], aggs: &'p [AggCall]) -> Aggregator<'p> {
        let mut a = Aggregator { group_by, aggs, index: HashMap::new(), groups: Vec::new() };
        if group_by.is_empty() {
            // No GROUP BY: one group even over no rows (count(*) = 0).
            a.groups.push(a.fresh(Vec::new()));
            a.index.insert(GroupKey(Vec::new()), 0);
        }
        a
    }

    fn fresh(&self, key: Vec<Value>) -> AggGroup {
        AggGroup {
            key,
            accs: self.aggs.iter().map(|a| new_acc(a, None)).collect(),
            seen: self.aggs.iter().map(|_| std::collections::HashSet::new()).collect(),
        }
    }

    fn add(&mut self, ex: &mut Exec<'_>, env: &Env<'_>, r: &[Value]) -> Result<()> {
        let gi = if self.group_by.is_empty() {
            0
        } else {
            let mut key = Vec::with_capacity(self.group_by.len());
            for g in self.group_by {
                key.push(g.eval(env, ex, r)?);
            }
            let gk = GroupKey(key);
            match self.index.get(&gk) {
                Some(i) => *i,
                None => {
                    let g = self.fresh(gk.0.clone());
                    self.groups.push(g);
                    self.index.insert(gk, self.groups.len() - 1);
                    self.groups.len() - 1
                }
            }
        };
        for (k, call) in self.aggs.iter().enumerate() {
            if let Some(f) = &call.filter
                && f.eval_bool(env, ex, r)? != Some(true)
            {
                continue;
            }
            let v = match &call.arg {
                Some(e) => Some(e.eval(env, ex, r)?),
                None => None,
            };
            if call.distinct
                && let Some(x) = &v
                && (x.is_null() || !self.groups[gi].seen[k].insert(GroupKey(vec![x.clone()])))
            {
                continue;
            }
            accumulate(&mut self.groups[gi].accs[k], call, v)?;
        }
        Ok(())
    }

    fn finish(self) -> Result<Vec<Vec<Value>>> {
        let mut out = Vec::with_capacity(self.groups.len());
        for g in self.groups {
            let mut row = g.key;
            for (acc, call) in g.accs.into_iter().zip(self.aggs) {
                row.push(finish(acc, call)?);
            }
            out.push(row);
        }
        Ok(out)
    }
}
