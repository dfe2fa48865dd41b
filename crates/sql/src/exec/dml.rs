//! INSERT (with ON CONFLICT), UPDATE and DELETE, with READ COMMITTED's
//! recheck of the WHERE on each row's latest version, CHECK constraints
//! and RETURNING.

use std::collections::HashSet;
use std::sync::Arc;

use pgtier_engine::{DataType, EngineError, IndexId, TableSchema, Value};

use super::scan::exact_key;
use super::{Exec, ResultBuf, assign_ref, set_len};
use crate::catalog::partitions::{PARTITION_CHECK, PARTITION_MOVE};
use crate::error::{Result, SqlError};
use crate::expr::{Env, Expr, NoSubqueries};
use crate::plan::{
    Access, BoundCheck, ColumnMask, ConflictAction, DeletePlan, InsertPlan, InsertSource, Level, OnConflict,
    PartitionRoute, RouteTarget, TableTriggers, UpdatePlan,
};
use crate::value;

/// A routed row's partition, its checks, where its columns are in the
/// routed row, and its row triggers.
type RoutedTo<'p> = (&'p Arc<TableSchema>, &'p [BoundCheck], Option<&'p [usize]>, Option<&'p TableTriggers>);

/// What INSERT ... ON CONFLICT did with one row.
enum Speculated {
    Inserted,
    /// DO NOTHING met a conflict.
    Skipped,
    /// DO UPDATE met this row (its latest version when a concurrent
    /// insert raced the statement's snapshot, locked).
    Conflict(Vec<Value>),
}

impl Exec<'_> {
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
    fn matching_keys(
        &mut self,
        level: &Level,
        env: &Env<'_>,
        search_columns: &ColumnMask,
        keys: &mut Vec<Value>,
    ) -> Result<()> {
        if level.filters.is_empty() && matches!(level.access, Access::IndexScan { .. } | Access::FullScan) {
            // Every row the scan yields matches: take its key in place.
            let pk = &level.table.primary_key;
            return self.scan_level(level, env, &[], &mut |r| {
                keys.extend(pk.iter().map(|&k| r.get(k).to_owned_value()));
                0
            });
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

    /// The rows an INSERT's source gives, one value per target column.
    fn insert_sources(&mut self, plan: &InsertPlan, params: &[Value], env: &Env<'_>) -> Result<Vec<Vec<Value>>> {
        let table = &plan.table;
        let mut sources: Vec<Vec<Value>> = Vec::new();
        match &plan.source {
            InsertSource::Values(rows) => {
                for r in rows {
                    let mut vals = Vec::with_capacity(r.len());
                    for e in r {
                        vals.push(e.eval(env, self, &[])?);
                    }
                    sources.push(vals);
                }
            }
            InsertSource::Query(q) => {
                for r in self.select_rows(q, params, &[])? {
                    let mut vals = Vec::with_capacity(q.visible);
                    for (k, v) in r.into_iter().take(q.visible).enumerate() {
                        let col = &table.columns[plan.targets[k]];
                        // char(n) into text or varchar loses its padding (the
                        // same rule as `Binder::assign` for VALUES and SET).
                        let v = match v {
                            Value::Text(mut s)
                                if matches!(q.columns[k].ty, Some(DataType::Char(_)))
                                    && matches!(col.ty, DataType::Text | DataType::Varchar(_)) =>
                            {
                                s.truncate(value::bpchar_trim(&s).len());
                                Value::Text(s)
                            }
                            v => v,
                        };
                        vals.push(value::cast(v, col.ty, false)?);
                    }
                    sources.push(vals);
                }
            }
        }
        Ok(sources)
    }

    pub fn insert(&mut self, plan: &InsertPlan, params: &[Value], out: &mut ResultBuf) -> Result<u64> {
        out.reset(plan.returning.len());
        let env = self.env(params, &[]);
        let table = &plan.table;
        let sources = self.insert_sources(plan, params, &env)?;
        let mut count = 0;
        let mut after = Vec::new();
        let defaults = table.default_row();
        // DO UPDATE: the arbiter keys of the rows this statement inserted
        // or updated; a later row conflicting with one of them is 21000.
        let mut touched: Option<HashSet<String>> = plan
            .on_conflict
            .as_ref()
            .filter(|oc| matches!(oc.action, ConflictAction::Update { .. }))
            .map(|_| HashSet::new());
        for vals in sources {
            let mut full = defaults.clone();
            for (k, v) in vals.into_iter().enumerate() {
                full[plan.targets[k]] = v;
            }
            // Sequence defaults of the columns not listed, row by row.
            for (c, e) in &plan.generated {
                full[*c] = e.eval(&env, self, &[])?;
            }
            if !plan.triggers.before.is_empty() {
                match self.before_row(&plan.triggers, "INSERT", Some(full), None)? {
                    Some(row) => full = row,
                    None => continue,
                }
            }
            let (table, checks, map, leaf_triggers) = match &plan.route {
                Some(route) => self.route_row(route, &env, &full)?,
                None => (table, &plan.checks[..], None, Some(&plan.triggers)),
            };
            if let Some(map) = map {
                full = map.iter().map(|&p| full[p].clone()).collect();
            }
            // A routed row fires its partition's BEFORE triggers.
            if plan.route.is_some()
                && let Some(t) = leaf_triggers.filter(|t| !t.before.is_empty())
            {
                match self.before_row(t, "INSERT", Some(full), None)? {
                    Some(row) => full = row,
                    None => continue,
                }
            }
            // PostgreSQL checks NOT NULL before CHECK and before looking
            // for a conflict (ExecConstraints): DO NOTHING does not hide
            // a NULL. Without either, the engine's insert checks it.
            if plan.on_conflict.is_some() || !checks.is_empty() {
                check_not_null(table, &full)?;
            }
            self.check_row(checks, &env, table, &full)?;
            // A row of a group partitioned over nodes goes only to its owner.
            if let Some(cache) = self.cache {
                cache.partition_check_row(table.id, &full)?;
            }
            if let Some(oc) = &plan.on_conflict {
                match self.insert_on_conflict(table, oc, &full)? {
                    Speculated::Inserted => {}
                    Speculated::Skipped => continue,
                    Speculated::Conflict(existing) => {
                        let ConflictAction::Update { assignments, filter } = &oc.action else {
                            continue; // Speculated::Skipped's job; kept total
                        };
                        let keys = self.arbiter_keys(table, &oc.arbiters, &existing);
                        if let Some(t) = &touched
                            && keys.iter().any(|k| t.contains(k))
                        {
                            return Err(SqlError::new("21000", "ON CONFLICT DO UPDATE command cannot affect row a second time")
                                    .with_hint("Ensure that no rows proposed for insertion within the same command have duplicate constrained values."));
                        }
                        if let Some(new_row) = self.conflict_update(
                            table,
                            existing,
                            &full,
                            assignments,
                            filter.as_ref(),
                            &plan.checks,
                            &env,
                        )? {
                            if let Some(t) = &mut touched {
                                t.extend(self.arbiter_keys(table, &oc.arbiters, &new_row));
                            }
                            count += 1;
                            self.returning(&plan.returning, &env, &new_row, out)?;
                        }
                        continue;
                    }
                }
            } else {
                self.txn.insert(table.id, &full)?;
            }
            if let (Some(t), Some(oc)) = (&mut touched, &plan.on_conflict) {
                t.extend(self.arbiter_keys(table, &oc.arbiters, &full));
            }
            count += 1;
            if let Some(t) = leaf_triggers.filter(|t| !t.after.is_empty()) {
                after.push((t, (Some(full.clone()), None)));
            }
            if !plan.returning.is_empty() {
                // RETURNING sees the row as stored (defaults, padding, rounding).
                let key: Vec<Value> = table.primary_key.iter().map(|&c| full[c].clone()).collect();
                let mut stored = if self.txn.get(table.id, &key, self.rowbuf)? { self.rowbuf.values() } else { full };
                if let Some(map) = map {
                    // RETURNING reads the row as the INSERT's target lays it out.
                    let mut routed = vec![Value::Null; plan.table.columns.len()];
                    for (v, &p) in stored.into_iter().zip(map) {
                        routed[p] = v;
                    }
                    stored = routed;
                }
                self.returning(&plan.returning, &env, &stored, out)?;
            }
        }
        for (t, event) in after {
            self.after_rows(t, "INSERT", vec![event])?;
        }
        Ok(count)
    }

    /// The partition `route` sends row `full` to, with its checks and its
    /// columns' positions in `full` when they are in another order
    /// (PostgreSQL's ExecFindPartition).
    fn route_row<'p>(&mut self, route: &'p PartitionRoute, env: &Env<'_>, full: &[Value]) -> Result<RoutedTo<'p>> {
        if let Some(c) = &route.own_constraint
            && c.expr.eval_bool(env, self, full)? != Some(true)
        {
            let t = self.txn.catalog().table_by_name(&route.table).cloned();
            return Err(t.map_or_else(
                || SqlError::new("XX000", "a partitioned table is gone"),
                |t| check_violation(&t, &c.name, full),
            ));
        }
        for (cond, target) in &route.partitions {
            if let Some(cond) = cond
                && cond.eval_bool(env, self, full)? != Some(true)
            {
                continue;
            }
            return match target {
                RouteTarget::Leaf(t, checks, map, triggers) => Ok((t, checks, map.as_deref(), Some(triggers))),
                RouteTarget::Node(inner) => self.route_row(inner, env, full),
            };
        }
        let show = |v: &Value| if v.is_null() { "null".to_owned() } else { value::to_text(v) };
        let names: Vec<&str> = route.key.iter().map(|(_, n)| n.as_str()).collect();
        let mut vals: Vec<String> = Vec::with_capacity(route.key.len());
        for (e, _) in &route.key {
            vals.push(show(&e.eval(env, self, full)?));
        }
        Err(SqlError::new(
            "23514",
            format!("no partition of relation \"{}\" found for row", crate::names::short(&route.table)),
        )
        .with_detail(format!(
            "Partition key of the failing row contains ({}) = ({}).",
            names.join(", "),
            vals.join(", ")
        )))
    }

    /// PostgreSQL's CHECK rule: a row passes unless an expression is false
    /// (NULL passes).
    pub(super) fn check_row(
        &mut self,
        checks: &[BoundCheck],
        env: &Env<'_>,
        table: &TableSchema,
        row: &[Value],
    ) -> Result<()> {
        for c in checks {
            if c.expr.eval_bool(env, self, row)? == Some(false) {
                return Err(check_violation(table, &c.name, row));
            }
        }
        Ok(())
    }

    pub(super) fn returning(
        &mut self,
        exprs: &[Expr],
        env: &Env<'_>,
        row: &[Value],
        out: &mut ResultBuf,
    ) -> Result<()> {
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
    fn conflicting_row(
        &mut self,
        table: &TableSchema,
        arbiters: &[IndexId],
        full: &[Value],
    ) -> Result<Option<Vec<Value>>> {
        for &id in arbiters {
            let Some(index) = self.txn.catalog().index(id).cloned() else { continue };
            let Some(key) = index_key(table, &index.columns, full) else {
                continue; // NULLs never conflict
            };
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

    /// INSERT ... ON CONFLICT for one row, as PostgreSQL's speculative
    /// insertion: a conflict the statement's snapshot shows is handled at
    /// once; otherwise the row goes in unless a writer that inserted its key
    /// after the snapshot commits meanwhile (the insert waits for it). Then,
    /// as in READ COMMITTED, DO NOTHING skips the row and DO UPDATE locks
    /// and updates that writer's version. Without this, two sessions
    /// inserting one key with DO NOTHING could both miss the other and one
    /// fail with 23505, which PostgreSQL never raises there.
    fn insert_on_conflict(&mut self, table: &TableSchema, oc: &OnConflict, full: &[Value]) -> Result<Speculated> {
        // Each lost race means another transaction inserted and then
        // deleted the key: bounded so that a storm of those cannot spin.
        const RACES_MAX: usize = 64;
        let update = matches!(oc.action, ConflictAction::Update { .. });
        for _ in 0..RACES_MAX {
            if let Some(existing) = self.conflicting_row(table, &oc.arbiters, full)? {
                return Ok(if update { Speculated::Conflict(existing) } else { Speculated::Skipped });
            }
            let Some(e) = self.txn.insert_speculative(table.id, full)? else { return Ok(Speculated::Inserted) };
            let catalog = self.txn.catalog();
            let arbiter = match &e {
                EngineError::UniqueViolation { constraint, .. } => oc
                    .arbiters
                    .iter()
                    .filter_map(|&id| catalog.index(id))
                    .find(|i| i.name == *constraint)
                    .map(|i| i.primary),
                _ => None,
            };
            match arbiter {
                None => return Err(e.into()), // not an arbiter's conflict: 23505
                Some(_) if !update => return Ok(Speculated::Skipped),
                Some(true) => {
                    let key: Vec<Value> = table.primary_key.iter().map(|&c| full[c].clone()).collect();
                    if self.txn.get_for_update(table.id, &key, self.rowbuf)? {
                        return Ok(Speculated::Conflict(self.rowbuf.values()));
                    }
                    // Deleted again since it committed: insert again.
                }
                // The row holding a UNIQUE key is found only in the snapshot.
                Some(false) => {
                    return Err(SqlError::new("40001", "could not serialize access due to concurrent update")
                        .with_detail(format!(
                            "Another transaction inserted a conflicting key of {} after this statement began.",
                            table.name
                        )));
                }
            }
        }
        Err(SqlError::new(
            "55P03",
            "could not insert the row: its key kept being inserted and deleted by other transactions",
        ))
    }

    /// `row`'s key on each arbiter index (as text, with the index's
    /// position): a unique index holds one row per key, so equal keys name
    /// the same row.
    fn arbiter_keys(&self, table: &TableSchema, arbiters: &[IndexId], row: &[Value]) -> Vec<String> {
        let mut out = Vec::with_capacity(arbiters.len());
        for (k, &id) in arbiters.iter().enumerate() {
            let Some(index) = self.txn.catalog().index(id) else { continue };
            if let Some(key) = index_key(table, &index.columns, row) {
                let mut text = k.to_string();
                for v in &key {
                    text.push('\0');
                    text.push_str(&value::to_text(v));
                }
                out.push(text);
            }
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn conflict_update(
        &mut self,
        table: &TableSchema,
        existing: Vec<Value>,
        excluded: &[Value],
        assignments: &[(usize, Expr)],
        filter: Option<&Expr>,
        checks: &[BoundCheck],
        env: &Env<'_>,
    ) -> Result<Option<Vec<Value>>> {
        let mut both = existing.clone();
        both.extend_from_slice(excluded);
        if let Some(f) = filter
            && f.eval_bool(env, self, &both)? != Some(true)
        {
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
        if let Some(join) = &plan.from {
            return self.update_join(plan, join, &env, out);
        }
        let level = &plan.level;
        let table = level.table.clone();
        if !plan.triggers.is_empty() {
            return self.update_triggered(plan, &env, out);
        }
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
    fn update_keys(
        &mut self,
        plan: &UpdatePlan,
        params: &[Value],
        env: &Env<'_>,
        keys: &[Value],
        new_row: &mut Vec<Value>,
        direct: bool,
        out: &mut ResultBuf,
    ) -> Result<u64> {
        let level = &plan.level;
        let table = level.table.clone();
        let recheck = !direct && !plan.filters_have_subqueries;
        let cache = self.cache;
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
                    // A root key moved to another node's range is refused.
                    if let Some(cache) = cache {
                        cache.partition_check_row(table.id, new_row)?;
                    }
                    for c in &plan.checks {
                        if c.expr.eval_bool(&env, &mut NoSubqueries, new_row)? == Some(false) {
                            return Err(check_violation(&table, &c.name, new_row));
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
                    let stored = if self.txn.get(table.id, &key2, self.rowbuf)? {
                        self.rowbuf.values()
                    } else {
                        new_row.clone()
                    };
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

    /// UPDATE of a table with row triggers: each row as the statement's
    /// snapshot saw it, its new values, the BEFORE triggers (which may
    /// change or skip it), the write, then the AFTER triggers at the end.
    fn update_triggered(&mut self, plan: &UpdatePlan, env: &Env<'_>, out: &mut ResultBuf) -> Result<u64> {
        let table = plan.level.table.clone();
        let mut count = 0;
        let mut after = Vec::new();
        for row in self.dml_rows(&plan.level, env)? {
            let key: Vec<Value> = table.primary_key.iter().map(|&c| row[c].clone()).collect();
            let mut new_row = row.clone();
            for (c, e) in &plan.assignments {
                new_row[*c] = e.eval(env, self, &row)?;
            }
            let Some(new_row) = self.before_row(&plan.triggers, "UPDATE", Some(new_row), Some(&row))? else {
                continue;
            };
            self.check_row(&plan.checks, env, &table, &new_row)?;
            let changes: Vec<(usize, Value)> =
                (0..new_row.len()).filter(|&c| new_row[c] != row[c]).map(|c| (c, new_row[c].clone())).collect();
            if self.txn.update(table.id, &key, &changes)? {
                count += 1;
                self.returning(&plan.returning, env, &new_row, out)?;
                if !plan.triggers.after.is_empty() {
                    after.push((Some(new_row), Some(row)));
                }
            }
        }
        self.after_rows(&plan.triggers, "UPDATE", after)?;
        Ok(count)
    }

    /// DELETE of a table with row triggers (as `update_triggered`).
    fn delete_triggered(&mut self, plan: &DeletePlan, env: &Env<'_>, out: &mut ResultBuf) -> Result<u64> {
        let table = plan.level.table.clone();
        let mut count = 0;
        let mut after = Vec::new();
        for row in self.dml_rows(&plan.level, env)? {
            if self.before_row(&plan.triggers, "DELETE", None, Some(&row))?.is_none() {
                continue;
            }
            let key: Vec<Value> = table.primary_key.iter().map(|&c| row[c].clone()).collect();
            if self.txn.delete(table.id, &key)? {
                count += 1;
                self.returning(&plan.returning, env, &row, out)?;
                if !plan.triggers.after.is_empty() {
                    after.push((None, Some(row)));
                }
            }
        }
        self.after_rows(&plan.triggers, "DELETE", after)?;
        Ok(count)
    }

    pub fn delete(&mut self, plan: &DeletePlan, params: &[Value], out: &mut ResultBuf) -> Result<u64> {
        out.reset(plan.returning.len());
        let env = self.env(params, &[]);
        if let Some(join) = &plan.from {
            return self.delete_join(plan, join, &env, out);
        }
        let level = &plan.level;
        let table = level.table.clone();
        if !plan.triggers.is_empty() {
            return self.delete_triggered(plan, &env, out);
        }
        let direct = matches!(level.access, Access::PkLookup { .. })
            && level.exact_key
            && level.filters.is_empty()
            && plan.returning.is_empty();
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
}

/// 23514 with PostgreSQL's detail: the new row's visible columns.
/// `row`'s values on `columns` as the index stores them; None with a NULL.
fn index_key(table: &TableSchema, columns: &[usize], row: &[Value]) -> Option<Vec<Value>> {
    columns
        .iter()
        .map(|&c| {
            exact_key(row[c].clone(), table.columns[c].ty)
                .or_else(|| value::cast(row[c].clone(), table.columns[c].ty, false).ok().filter(|v| !v.is_null()))
        })
        .collect()
}

/// 23502 for a NULL in a NOT NULL column, as the engine words it.
pub(super) fn check_not_null(table: &TableSchema, row: &[Value]) -> Result<()> {
    let visible = table.visible_columns().len();
    match table.columns.iter().take(visible).zip(row).find(|(c, v)| !c.nullable && v.is_null()) {
        None => Ok(()),
        Some((c, _)) => {
            let shown: Vec<String> = row
                .iter()
                .take(visible)
                .map(|v| if v.is_null() { "null".to_owned() } else { value::to_text(v) })
                .collect();
            Err(SqlError::from(pgtier_engine::EngineError::NotNullViolation {
                table: table.name.clone(),
                column: c.name.clone(),
                detail: format!("Failing row contains ({}).", shown.join(", ")),
            }))
        }
    }
}

pub(super) fn check_violation(table: &TableSchema, name: &str, row: &[Value]) -> SqlError {
    let shown: Vec<String> = row
        .iter()
        .take(table.visible_columns().len())
        .map(|v| if v.is_null() { "null".to_owned() } else { value::to_text(v) })
        .collect();
    let relation = crate::names::short(&table.name);
    if name == PARTITION_CHECK {
        return SqlError::new("23514", format!("new row for relation \"{relation}\" violates partition constraint"))
            .with_detail(format!("Failing row contains ({}).", shown.join(", ")));
    }
    if name == PARTITION_MOVE {
        return SqlError::unsupported(format!("UPDATE moving a row out of partition \"{relation}\""));
    }
    let mut e = SqlError::new(
        "23514",
        format!("new row for relation \"{}\" violates check constraint \"{name}\"", crate::names::short(&table.name)),
    )
    .with_detail(format!("Failing row contains ({}).", shown.join(", ")));
    e.constraint = Some(name.to_owned());
    e
}
