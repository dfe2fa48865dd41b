//! INSERT (VALUES, SELECT, ON CONFLICT), UPDATE, DELETE and RETURNING.

use std::sync::Arc;

use pgtier_engine::{Column, DataType, IndexId, SequenceDefault, TableSchema, Value};
use sqlparser::ast;

use super::coerce::check_assignable;
use super::ddl::NOW_DEFAULTS;
use super::select::{column_label, flatten_and};
use super::{Binder, ExprCtx, Rel, Scope, ident};
use crate::catalog::roles::Privs;
use crate::error::{Result, SqlError};
use crate::expr::{Expr, Func, SeqFunc, SubqueryKind, SysFunc};
use crate::plan::{
    ColumnMask, ConflictAction, DeletePlan, InsertPlan, InsertSource, Level, OnConflict, OutputColumn, Plan, UpdatePlan,
};
use crate::planner::{self, JoinRel};

impl InsertSource {
    fn with_defaults(self, table: &TableSchema, targets: &[usize], all_defaults: bool) -> Result<InsertSource> {
        if !all_defaults {
            return Ok(self);
        }
        let row = targets.iter().map(|&t| column_default(&table.columns[t])).collect::<Result<_>>()?;
        Ok(InsertSource::Values(vec![row]))
    }
}

impl Binder<'_> {
    pub(super) fn insert(&mut self, i: &ast::Insert) -> Result<Plan> {
        if let Some(plan) = self.apply_rules(super::rules::Original::Insert(i))? {
            return Ok(plan);
        }
        if i.or.is_some()
            || i.ignore
            || i.overwrite
            || i.partitioned.is_some()
            || !i.after_columns.is_empty()
            || i.replace_into
            || i.table_alias.is_some()
        {
            return Err(SqlError::unsupported("this INSERT form"));
        }
        let ast::TableObject::TableName(tname) = &i.table else {
            return Err(SqlError::unsupported("INSERT INTO a function"));
        };
        let table = self.table(tname)?;
        writable(&table)?;
        let partitioned = crate::catalog::partitions::is_partitioned(&table);
        if partitioned && i.on.is_some() {
            return Err(SqlError::unsupported("ON CONFLICT on a partitioned table"));
        }
        self.need(&table, Privs::INSERT);
        if i.returning.is_some() {
            // RETURNING reads only the inserted rows: a privilege, not a
            // read of the table (bind/modifying.rs).
            self.need_kind(&table.name, crate::catalog::roles::ObjectKind::of(&table), Privs::SELECT);
        }
        if i.on.is_some() {
            self.touched.reads.insert(table.name.clone());
            self.touched.upserts.insert(table.name.clone());
        }
        if let Some(ast::OnInsert::OnConflict(ast::OnConflict { action: ast::OnConflictAction::DoUpdate(_), .. })) =
            &i.on
        {
            self.need(&table, Privs::UPDATE.union(Privs::SELECT));
        }
        let targets = insert_targets(&table, &i.columns)?;
        let outer = self.insert_table.replace(table.clone());
        let source = self.insert_source(i, &table, &targets);
        self.insert_table = outer;
        let source = source?;
        let on_conflict = match &i.on {
            None => None,
            Some(ast::OnInsert::OnConflict(oc)) => Some(self.on_conflict(oc, &table)?),
            Some(_) => return Err(SqlError::unsupported("ON DUPLICATE KEY UPDATE")),
        };
        let (returning, columns) = self.returning(i.returning.as_deref(), &table)?;
        let generated = generated_defaults(&table, &targets)?;
        self.touch_sequences(generated.iter().map(|(_, e)| e));
        if let InsertSource::Values(rows) = &source {
            self.touch_sequences(rows.iter().flatten());
        }
        let (checks, route) = if partitioned {
            (Vec::new(), Some(Box::new(self.partition_route(&table)?)))
        } else {
            (self.table_checks(&table)?, None)
        };
        let triggers = self.table_triggers(&table, super::plpgsql::Event::Insert, &[])?;
        if on_conflict.is_some() && (!triggers.is_empty() || route.as_ref().is_some_and(|r| r.has_triggers())) {
            return Err(SqlError::unsupported("INSERT ... ON CONFLICT on a table with triggers"));
        }
        Ok(Plan::Insert(InsertPlan {
            triggers,
            table,
            targets,
            source,
            on_conflict,
            returning,
            columns,
            generated,
            checks,
            route,
        }))
    }

    /// An INSERT's rows: VALUES bound against the target columns, or its query.
    fn insert_source(&mut self, i: &ast::Insert, table: &Arc<TableSchema>, targets: &[usize]) -> Result<InsertSource> {
        Ok(match &i.source {
            None => InsertSource::Values(vec![Vec::new()]).with_defaults(table, targets, true)?,
            Some(q) => match q.body.as_ref() {
                ast::SetExpr::Values(values)
                    if q.order_by.is_none() && q.limit_clause.is_none() && q.fetch.is_none() =>
                {
                    let scope = Scope::default();
                    let mut rows = Vec::new();
                    for row in &values.rows {
                        let out = self.values_row(table, targets, row, !i.columns.is_empty(), &scope)?;
                        rows.push(out);
                    }
                    InsertSource::Values(rows)
                }
                _ => {
                    let sub = self.query(q, None)?;
                    if sub.visible > targets.len() {
                        return Err(SqlError::syntax("INSERT has more expressions than target columns"));
                    }
                    for (k, c) in sub.columns[..sub.visible].iter().enumerate() {
                        let col = &table.columns[targets[k]];
                        always_identity_guard(col)?;
                        if let Some(t) = c.ty {
                            check_assignable(t, col.ty, &col.name)?;
                        }
                    }
                    InsertSource::Query(Box::new(sub))
                }
            },
        })
    }

    /// One VALUES row of an INSERT (or MERGE's INSERT) over `scope`: a
    /// value per target column, cast to its type; DEFAULT and missing
    /// trailing values are the column's default.
    pub(super) fn values_row(
        &mut self,
        table: &TableSchema,
        targets: &[usize],
        row: &[ast::Expr],
        explicit_columns: bool,
        scope: &Scope<'_>,
    ) -> Result<Vec<Expr>> {
        if row.len() > targets.len() {
            return Err(SqlError::syntax("INSERT has more expressions than target columns"));
        }
        if row.len() < targets.len() && explicit_columns {
            return Err(SqlError::syntax("INSERT has more target columns than expressions"));
        }
        let mut out = Vec::new();
        for (k, e) in row.iter().enumerate() {
            let col = &table.columns[targets[k]];
            if is_default_keyword(e) {
                out.push(column_default(col)?);
                continue;
            }
            always_identity_guard(col)?;
            let (b, t) = self.expr(e, scope, &mut ExprCtx::plain("VALUES"))?;
            out.push(self.assign(b, t, col.ty, &col.name)?);
        }
        // Trailing target columns without a value get their default.
        for &t in &targets[row.len()..] {
            out.push(column_default(&table.columns[t])?);
        }
        Ok(out)
    }

    fn on_conflict(&mut self, oc: &ast::OnConflict, table: &Arc<TableSchema>) -> Result<OnConflict> {
        let unique: Vec<Arc<pgtier_engine::IndexSchema>> =
            self.catalog.indexes_of(table.id).into_iter().filter(|i| i.unique).collect();
        let arbiters: Vec<IndexId> = match &oc.conflict_target {
            None => unique.iter().map(|i| i.id).collect(),
            Some(ast::ConflictTarget::Columns(cols)) => {
                let mut positions = Vec::new();
                for c in cols {
                    let n = ident(c);
                    positions.push(
                        table
                            .column_index(&n)
                            .ok_or_else(|| SqlError::new("42703", format!("column \"{n}\" does not exist")))?,
                    );
                }
                let mut sorted = positions.clone();
                sorted.sort_unstable();
                let found: Vec<IndexId> = unique
                    .iter()
                    .filter(|i| {
                        let mut c = i.columns.clone();
                        c.sort_unstable();
                        c == sorted
                    })
                    .map(|i| i.id)
                    .collect();
                if found.is_empty() {
                    return Err(SqlError::new(
                        "42P10",
                        "there is no unique or exclusion constraint matching the ON CONFLICT specification",
                    ));
                }
                found
            }
            Some(ast::ConflictTarget::OnConstraint(name)) => {
                let n = super::parts(name)?.pop().unwrap_or_default();
                let idx = unique.iter().find(|i| crate::names::short(&i.name) == n).ok_or_else(|| {
                    SqlError::new(
                        "42704",
                        format!("constraint \"{n}\" for table \"{}\" does not exist", crate::names::short(&table.name)),
                    )
                })?;
                vec![idx.id]
            }
        };
        self.indexes.extend(arbiters.iter().copied());
        let action = match &oc.action {
            ast::OnConflictAction::DoNothing => ConflictAction::Nothing,
            ast::OnConflictAction::DoUpdate(du) => {
                if oc.conflict_target.is_none() {
                    return Err(SqlError::new(
                        "42601",
                        "ON CONFLICT DO UPDATE requires inference specification or constraint name",
                    )
                    .with_hint("For example, ON CONFLICT (column_name)."));
                }
                let width = table.columns.len();
                let scope = Scope {
                    rels: vec![
                        Rel {
                            name: crate::names::short(&table.name).to_owned(),
                            table: table.clone(),
                            offset: 0,
                            source: None,
                        },
                        Rel { name: "excluded".into(), table: table.clone(), offset: width, source: None },
                    ],
                    hidden: Vec::new(),
                    star: Vec::new(),
                    merged: Vec::new(),
                    outer: None,
                };
                let assignments = self.assignments(&du.assignments, table, &scope)?;
                let filter = match &du.selection {
                    Some(e) => {
                        let (b, t) = self.expr(e, &scope, &mut ExprCtx::plain("WHERE"))?;
                        Some(self.boolean(b, t, "WHERE")?)
                    }
                    None => None,
                };
                ConflictAction::Update { assignments, filter }
            }
        };
        Ok(OnConflict { arbiters, action })
    }

    pub(super) fn assignments(
        &mut self,
        list: &[ast::Assignment],
        table: &Arc<TableSchema>,
        scope: &Scope<'_>,
    ) -> Result<Vec<(usize, Expr)>> {
        let mut out: Vec<(usize, Expr)> = Vec::new();
        // `SET (a, b) = (x, y)` / `= ROW(x, y)` is `SET a = x, b = y`;
        // `= (SELECT x, y ...)` sets each from its column of the sub-SELECT.
        let mut pairs: Vec<(&ast::ObjectName, Source<'_>)> = Vec::new();
        for a in list {
            match &a.target {
                ast::AssignmentTarget::ColumnName(name) => pairs.push((name, Source::Ast(&a.value))),
                ast::AssignmentTarget::Tuple(names) => {
                    let values: Vec<Source<'_>> = match &a.value {
                        ast::Expr::Tuple(values) => values.iter().map(Source::Ast).collect(),
                        ast::Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("row") => {
                            row_arguments(f, scope)?
                        }
                        ast::Expr::Subquery(q) => {
                            let columns = self.multiple_assignment_subquery(q, names.len(), scope)?;
                            pairs.extend(names.iter().zip(columns.into_iter().map(|(e, t)| Source::Bound(e, t))));
                            continue;
                        }
                        _ => {
                            return Err(SqlError::new(
                                "0A000",
                                "source for a multiple-column UPDATE item must be a sub-SELECT or ROW() expression",
                            ));
                        }
                    };
                    if values.len() != names.len() {
                        return Err(SqlError::new("42601", "number of columns does not match number of values"));
                    }
                    pairs.extend(names.iter().zip(values));
                }
            }
        }
        for (name, value) in pairs {
            let n = name.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default();
            let pos = table.column_index(&n).ok_or_else(|| {
                SqlError::new(
                    "42703",
                    format!("column \"{n}\" of relation \"{}\" does not exist", crate::names::short(&table.name)),
                )
            })?;
            system_column_guard(&table.columns[pos])?;
            if out.iter().any(|(p, _)| *p == pos) {
                return Err(SqlError::new("42601", format!("multiple assignments to same column \"{n}\"")));
            }
            let col = &table.columns[pos];
            let e = if matches!(value, Source::Ast(v) if is_default_keyword(v)) {
                let e = column_default(col)?;
                self.touch_sequences([&e]);
                e
            } else if crate::catalog::identity_kind(col) == Some(SequenceDefault::IdentityAlways) {
                return Err(SqlError::new("428C9", format!("column \"{n}\" can only be updated to DEFAULT"))
                    .with_detail(format!("Column \"{n}\" is an identity column defined as GENERATED ALWAYS.")));
            } else {
                let (b, t) = match value {
                    Source::Ast(v) => self.expr(v, scope, &mut ExprCtx::plain("UPDATE"))?,
                    Source::Bound(e, t) => (e, t),
                };
                self.assign(b, t, col.ty, &col.name)?
            };
            out.push((pos, e));
        }
        Ok(out)
    }

    /// `SET (a, b, ...) = (SELECT ...)`: one scalar subquery per target
    /// column, each reading its column of the sub-SELECT's only row (all
    /// NULL without a row, 21000 with more, as PostgreSQL's MULTIEXPR
    /// SubPlan). PostgreSQL runs the sub-SELECT once per row; running it
    /// once per column answers alike unless it calls a volatile function
    /// (random(), nextval()), which is refused.
    fn multiple_assignment_subquery(
        &mut self,
        q: &ast::Query,
        targets: usize,
        scope: &Scope<'_>,
    ) -> Result<Vec<(Expr, Option<DataType>)>> {
        let volatile_before = std::mem::replace(&mut self.volatile_calls, false);
        let bound = self.subquery(q, scope);
        let volatile = self.volatile_calls;
        self.volatile_calls |= volatile_before;
        let (plan, correlated) = bound?;
        if plan.visible != targets {
            return Err(SqlError::new("42601", "number of columns does not match number of values"));
        }
        if volatile {
            return Err(SqlError::unsupported(
                "multiple-column assignment from a sub-SELECT that calls a volatile function",
            ));
        }
        let mut out = Vec::with_capacity(targets);
        for column in 0..targets {
            // A sub-SELECT's literal or NULL leaves it as text (PostgreSQL
            // resolves unknown output columns so), which an integer column
            // does not take (42804).
            let ty = plan.columns[column].ty.or(Some(DataType::Text));
            out.push((self.sub_expr(SubqueryKind::Scalar { column }, false, correlated, plan.clone()), ty));
        }
        Ok(out)
    }

    pub(super) fn single_table(&mut self, twj: &ast::TableWithJoins) -> Result<Rel> {
        if !twj.joins.is_empty() {
            return Err(SqlError::unsupported("joins in UPDATE/DELETE"));
        }
        let ast::TableFactor::Table { name, alias, .. } = &twj.relation else {
            return Err(SqlError::unsupported("this UPDATE/DELETE target"));
        };
        let table = self.table(name)?;
        if !self.partition_fanout && crate::catalog::partitions::is_partitioned(&table) {
            return Err(SqlError::unsupported("this UPDATE or DELETE form on a partitioned table"));
        }
        let rname = alias.as_ref().map_or_else(|| crate::names::short(&table.name).to_owned(), |a| ident(&a.name));
        Ok(Rel { name: rname, table, offset: 0, source: None })
    }

    pub(super) fn update(&mut self, u: &ast::Update) -> Result<Plan> {
        if let Some(plan) = self.apply_rules(super::rules::Original::Update(u))? {
            return Ok(plan);
        }
        if u.or.is_some() || !u.order_by.is_empty() || u.limit.is_some() || u.output.is_some() {
            return Err(SqlError::unsupported("UPDATE with ORDER BY/LIMIT"));
        }
        let text = if u.from.is_some() { "SELECT" } else { &u.to_string() };
        if let Some(plan) = self.partition_fanout(&u.table, text, |b, relation| {
            let mut one = u.clone();
            one.table.relation = relation;
            b.update(&one)
        })? {
            return Ok(plan);
        }
        match &u.from {
            None => {}
            Some(ast::UpdateTableFromKind::AfterSet(from)) => return self.update_from(u, from),
            Some(ast::UpdateTableFromKind::BeforeSet(_)) => {
                return Err(SqlError::syntax("syntax error at or near \"FROM\""));
            }
        }
        let rel = self.single_table(&u.table)?;
        let table = rel.table.clone();
        writable(&table)?;
        let scope = Scope { rels: vec![rel], hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer: None };
        let assignments = self.assignments(&u.assignments, &table, &scope)?;
        self.need_update(&table, u, &assignments);
        let level = self.dml_level(&scope, u.selection.as_ref())?;
        let (returning, columns) = self.returning_in(u.returning.as_deref(), &scope)?;
        let width = table.columns.len();
        let search_columns = ColumnMask::reading(width, &level.filters, &table.primary_key);
        let checks = self.update_checks(&table)?;
        // A CHECK's 23514 detail shows the whole new row.
        let eval_columns = if returning.is_empty() && checks.is_empty() {
            let read = level
                .filters
                .iter()
                .chain(&level.key_checks)
                .chain(assignments.iter().map(|(_, e)| e))
                .chain(checks.iter().map(|c| &c.expr));
            ColumnMask::reading(width, read, &table.primary_key)
        } else {
            ColumnMask::all(width)
        };
        let assignments_have_subqueries = assignments.iter().any(|(_, e)| e.has_subquery());
        let filters_have_subqueries = level.filters.iter().any(Expr::has_subquery);
        let set: Vec<usize> = assignments.iter().map(|(c, _)| *c).collect();
        let triggers = self.table_triggers(&level.table, super::plpgsql::Event::Update, &set)?;
        Ok(Plan::Update(UpdatePlan {
            triggers,
            level,
            search_columns,
            eval_columns,
            assignments_have_subqueries,
            filters_have_subqueries,
            assignments,
            returning,
            columns,
            checks,
            from: None,
        }))
    }

    pub(super) fn delete(&mut self, d: &ast::Delete) -> Result<Plan> {
        if let Some(plan) = self.apply_rules(super::rules::Original::Delete(d))? {
            return Ok(plan);
        }
        if !d.order_by.is_empty() || d.limit.is_some() || !d.tables.is_empty() || d.output.is_some() {
            return Err(SqlError::unsupported("DELETE with ORDER BY/LIMIT"));
        }
        let from = match &d.from {
            ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => v,
        };
        let [twj] = from.as_slice() else {
            return Err(SqlError::unsupported("DELETE from several tables"));
        };
        let text = if d.using.is_some() { "SELECT" } else { &d.to_string() };
        if let Some(plan) = self.partition_fanout(twj, text, |b, relation| {
            let mut one = d.clone();
            let (ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v)) = &mut one.from;
            if let Some(t) = v.first_mut() {
                t.relation = relation;
            }
            b.delete(&one)
        })? {
            return Ok(plan);
        }
        let rel = self.single_table(twj)?;
        writable(&rel.table)?;
        self.need(&rel.table, Privs::DELETE);
        if d.selection.is_some() || d.returning.is_some() || d.using.is_some() {
            self.need(&rel.table, Privs::SELECT);
        }
        if let Some(using) = &d.using {
            return self.delete_using(d, rel, using);
        }
        let scope = Scope { rels: vec![rel], hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer: None };
        let level = self.dml_level(&scope, d.selection.as_ref())?;
        let (returning, columns) = self.returning_in(d.returning.as_deref(), &scope)?;
        let search_columns = ColumnMask::reading(level.width(), &level.filters, &level.table.primary_key);
        self.refuse_cascaded_triggers(&level.table)?;
        let triggers = self.table_triggers(&level.table, super::plpgsql::Event::Delete, &[])?;
        Ok(Plan::Delete(DeletePlan { triggers, level, search_columns, returning, columns, from: None }))
    }

    fn dml_level(&mut self, scope: &Scope<'_>, selection: Option<&ast::Expr>) -> Result<Level> {
        let mut conj = Vec::new();
        if let Some(w) = selection {
            let (b, t) = self.expr(w, scope, &mut ExprCtx::plain("WHERE"))?;
            let b = self.boolean(b, t, "WHERE")?;
            flatten_and(b, &mut conj);
        }
        let (mut levels, finals) = planner::plan_levels(
            self.catalog,
            &scope.rels,
            vec![JoinRel { left: false, right: false, full: false, on: Vec::new() }],
            conj,
            &mut self.indexes,
        )?;
        let mut level = levels.pop().ok_or_else(|| SqlError::new("XX000", "no relation in UPDATE/DELETE"))?;
        // With one table every predicate can be checked on its row.
        level.filters.extend(finals);
        if level.filters.iter().any(Expr::has_subquery) {
            level.exact_key = false;
        }
        Ok(level)
    }

    fn returning(
        &mut self,
        items: Option<&[ast::SelectItem]>,
        table: &Arc<TableSchema>,
    ) -> Result<(Vec<Expr>, Vec<OutputColumn>)> {
        let scope = Scope {
            rels: vec![Rel {
                name: crate::names::short(&table.name).to_owned(),
                table: table.clone(),
                offset: 0,
                source: None,
            }],
            hidden: Vec::new(),
            star: Vec::new(),
            merged: Vec::new(),
            outer: None,
        };
        self.returning_in(items, &scope)
    }

    pub(super) fn returning_in(
        &mut self,
        items: Option<&[ast::SelectItem]>,
        scope: &Scope<'_>,
    ) -> Result<(Vec<Expr>, Vec<OutputColumn>)> {
        let mut exprs = Vec::new();
        let mut cols = Vec::new();
        for item in items.unwrap_or(&[]) {
            match item {
                ast::SelectItem::UnnamedExpr(e) => {
                    let (b, t) = self.expr(e, scope, &mut ExprCtx::plain("RETURNING"))?;
                    exprs.push(b);
                    cols.push(OutputColumn { name: column_label(e), ty: t });
                }
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    let (b, t) = self.expr(expr, scope, &mut ExprCtx::plain("RETURNING"))?;
                    exprs.push(b);
                    cols.push(OutputColumn { name: ident(alias), ty: t });
                }
                ast::SelectItem::ExprWithAliases { .. } => return Err(SqlError::unsupported("multiple aliases")),
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                    // `*`: every relation (UPDATE ... FROM's too); `r.*`: that one.
                    let items = match item {
                        ast::SelectItem::QualifiedWildcard(
                            ast::SelectItemQualifiedWildcardKind::ObjectName(name),
                            _,
                        ) => {
                            let r = scope.qualified(name)?;
                            r.table
                                .visible_columns()
                                .iter()
                                .enumerate()
                                .map(|(i, c)| (c.name.clone(), Expr::Column(r.offset + i), c.ty))
                                .collect()
                        }
                        ast::SelectItem::QualifiedWildcard(..) => {
                            return Err(SqlError::unsupported("this RETURNING item"));
                        }
                        _ => scope.star_items()?,
                    };
                    for (name, e, ty) in items {
                        cols.push(OutputColumn { name, ty: Some(ty) });
                        exprs.push(e);
                    }
                }
            }
        }
        Ok((exprs, cols))
    }
}

/// The target columns of an INSERT: the listed ones, or all visible
/// columns in order.
pub(super) fn insert_targets(table: &TableSchema, columns: &[ast::ObjectName]) -> Result<Vec<usize>> {
    let targets: Vec<usize> = if columns.is_empty() {
        (0..table.visible_columns().len()).collect()
    } else {
        columns
            .iter()
            .map(|c| {
                let n = c.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default();
                table.column_index(&n).ok_or_else(|| {
                    SqlError::new(
                        "42703",
                        format!("column \"{n}\" of relation \"{}\" does not exist", crate::names::short(&table.name)),
                    )
                })
            })
            .collect::<Result<_>>()?
    };
    for (k, t) in targets.iter().enumerate() {
        system_column_guard(&table.columns[*t])?;
        if targets[..k].contains(t) {
            return Err(SqlError::new(
                "42701",
                format!("column \"{}\" specified more than once", table.columns[*t].name),
            ));
        }
    }
    Ok(targets)
}

/// The columns outside `targets` whose default is computed per row
/// (sequences, now()), with that default.
pub(super) fn generated_defaults(table: &TableSchema, targets: &[usize]) -> Result<Vec<(usize, Expr)>> {
    (0..table.columns.len())
        .filter(|c| {
            (table.columns[*c].sequence.is_some() || table.columns[*c].default_sql.is_some()) && !targets.contains(c)
        })
        .map(|c| column_default(&table.columns[c]).map(|e| (c, e)))
        .collect()
}

/// A column's DEFAULT as an expression: its constant, the next value of
/// its sequence (serial, identity, `DEFAULT nextval('s')`; a cached
/// table's from PostgreSQL's sequence, named by text), or the
/// transaction's start time (`DEFAULT now()` and its synonyms).
pub(super) fn column_default(col: &Column) -> Result<Expr> {
    let sequence = match (col.sequence, crate::catalog::backend_key(col)) {
        (Some((seq, _)), _) => Some(Value::Int8(crate::catalog::relation_oid(seq))),
        (None, Some(key)) => Some(Value::Text(pgtier_cache::KeyDefault::sequence_key(&key.sequence))),
        (None, None) => None,
    };
    if let Some(sequence) = sequence {
        let next = Expr::Func(Func::Sys(SysFunc::Sequence(SeqFunc::Nextval)), vec![Expr::Const(sequence)]);
        return Ok(if col.ty == DataType::Int8 { next } else { Expr::Cast(next.boxed(), col.ty, false) });
    }
    if let Some(sql) = &col.default_sql {
        let known = NOW_DEFAULTS.iter().any(|(_, text)| text == sql);
        return match col.ty {
            DataType::TimestampTz(_) if known => Ok(Expr::Func(Func::Now, Vec::new())),
            DataType::Timestamp(_) if known => {
                Ok(Expr::Cast(Expr::Func(Func::Now, Vec::new()).boxed(), DataType::Timestamp(None), false))
            }
            DataType::Date if known => Ok(Expr::Cast(Expr::Func(Func::Now, Vec::new()).boxed(), DataType::Date, false)),
            DataType::Uuid if sql == super::ddl::UUID_DEFAULT => Ok(Expr::Func(Func::GenRandomUuid, Vec::new())),
            _ => Err(SqlError::new(
                "XX000",
                format!("column \"{}\" has a default this version cannot evaluate: {sql}", col.name),
            )),
        };
    }
    Ok(Expr::Const(col.default.clone().unwrap_or(Value::Null)))
}

/// INSERT, UPDATE and DELETE never change a sequence's row directly.
pub(super) fn writable(table: &TableSchema) -> Result<()> {
    if table.sequence.is_some() {
        return Err(SqlError::new("42809", format!("cannot change sequence \"{}\"", table.name)));
    }
    Ok(())
}

/// A GENERATED ALWAYS identity column takes only DEFAULT (pgtier has no
/// OVERRIDING SYSTEM VALUE).
fn always_identity_guard(col: &Column) -> Result<()> {
    if crate::catalog::identity_kind(col) == Some(SequenceDefault::IdentityAlways) {
        return Err(SqlError::new("428C9", format!("cannot insert a non-DEFAULT value into column \"{}\"", col.name))
            .with_detail(format!("Column \"{}\" is an identity column defined as GENERATED ALWAYS.", col.name))
            .with_hint("Use OVERRIDING SYSTEM VALUE to override."));
    }
    Ok(())
}

fn is_default_keyword(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// The engine's hidden row id is a system column: readable, never assigned.
fn system_column_guard(col: &pgtier_engine::Column) -> Result<()> {
    if col.is_hidden() {
        return Err(SqlError::new("0A000", format!("cannot assign to system column \"{}\"", col.name)));
    }
    Ok(())
}

/// `ROW(x, y)`'s arguments (plain expressions only).
/// ROW()'s arguments in `SET (a, b) = ROW(...)`; `r.*` stands for each
/// column of `r` (update.sql's `ROW(v.*) FROM (VALUES (21, 100)) v`).
fn row_arguments<'a>(f: &'a ast::Function, scope: &Scope<'_>) -> Result<Vec<Source<'a>>> {
    let ast::FunctionArguments::List(l) = &f.args else {
        return Err(SqlError::syntax("syntax error at or near \"(\""));
    };
    if l.duplicate_treatment.is_some() || !l.clauses.is_empty() {
        return Err(SqlError::syntax("syntax error at or near \"(\""));
    }
    let mut out = Vec::with_capacity(l.args.len());
    for arg in &l.args {
        match arg {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => out.push(Source::Ast(e)),
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::QualifiedWildcard(name)) => {
                let r = scope.qualified(name)?;
                for (i, c) in r.table.visible_columns().iter().enumerate() {
                    out.push(Source::Bound(Expr::Column(r.offset + i), Some(c.ty)));
                }
            }
            _ => return Err(SqlError::syntax("syntax error in ROW()")),
        }
    }
    Ok(out)
}

/// A value of `SET`: an expression still to bind, or one bound already (a
/// column of a multiple-column assignment's sub-SELECT).
enum Source<'a> {
    Ast(&'a ast::Expr),
    Bound(Expr, Option<DataType>),
}
