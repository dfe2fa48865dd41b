//! Views: CREATE [OR REPLACE] VIEW, DROP VIEW, and a view named in FROM,
//! which is its stored query bound again in place (as a subquery in FROM
//! would be), so it always reads the current rows of its tables.

use std::sync::Arc;

use pgtier_engine::{ColumnDef, DataType, TableDef, TableSchema};
use sqlparser::ast::{self, ObjectName};

use super::{Binder, ident};
use crate::catalog::{ViewDef, is_view, view_def};
use crate::error::{Result, SqlError};
use crate::plan::{Plan, SetTree, VirtualSource};
use crate::value::type_name;

/// How deep views may name views: PostgreSQL reports a cycle (which
/// CREATE OR REPLACE can make) as infinite recursion; this bound turns it
/// into that error before the stack runs out.
const VIEW_DEPTH_MAX: usize = 32;

impl Binder<'_> {
    pub(super) fn create_view(&mut self, cv: &ast::CreateView) -> Result<Plan> {
        if cv.materialized {
            return Err(SqlError::unsupported("CREATE MATERIALIZED VIEW"));
        }
        if cv.if_not_exists {
            // Not PostgreSQL's grammar.
            return Err(SqlError::syntax("syntax error at or near \"NOT\""));
        }
        if cv.or_alter
            || cv.secure
            || cv.to.is_some()
            || cv.params.is_some()
            || cv.comment.is_some()
            || !cv.cluster_by.is_empty()
            || cv.with_no_schema_binding
            || cv.copy_grants
        {
            return Err(SqlError::unsupported("this CREATE VIEW form"));
        }
        if !matches!(cv.options, ast::CreateTableOptions::None) {
            return Err(SqlError::unsupported("CREATE VIEW ... WITH (options)"));
        }
        if cv.columns.iter().any(|c| c.data_type.is_some() || c.options.is_some()) {
            return Err(SqlError::syntax("syntax error in the CREATE VIEW column list"));
        }
        // TEMP: in the session's temporary schema, as CREATE VIEW pg_temp.v.
        let name = if cv.temporary { self.new_temp_key(&cv.name)? } else { self.new_relation_key(&cv.name)? };
        // Replacing a view is its owner's.
        if cv.or_replace
            && let Some(old) = self.catalog.table_by_name(&name).cloned()
        {
            self.need_owner(&old);
        }
        let params_before = self.params.len();
        let deps_before = self.deps.len();
        // A 'now' in the query is frozen at CREATE VIEW in PostgreSQL;
        // pgtier binds the text at each use.
        self.defining_view = true;
        let plan = crate::clock::refused(|| self.query(&cv.query, None));
        self.defining_view = false;
        let plan = plan?;
        if self.params.len() > params_before {
            return Err(SqlError::new("42P02", format!("there is no parameter ${}", params_before + 1)));
        }
        self.same_under_view_path(&cv.query, deps_before)?;
        if !crate::names::is_temp_schema(crate::names::split(&name).0)
            && self.deps[deps_before..].iter().any(|t| crate::names::is_temp_schema(crate::names::split(&t.name).0))
        {
            return Err(SqlError::unsupported(
                "a view of temporary tables outside the temporary schema (PostgreSQL makes such a view temporary)",
            ));
        }
        let out = &plan.columns[..plan.visible];
        if cv.columns.len() > out.len() {
            return Err(SqlError::syntax("CREATE VIEW specifies more column names than columns"));
        }
        let mut columns: Vec<ColumnDef> = Vec::with_capacity(out.len());
        let mut numeric_any = Vec::new();
        for (k, oc) in out.iter().enumerate() {
            let cname = cv.columns.get(k).map_or_else(|| oc.name.clone(), |c| ident(&c.name));
            if columns.iter().any(|c| c.name == cname) {
                return Err(SqlError::new("42701", format!("column \"{cname}\" specified more than once")));
            }
            let ty = oc.ty.unwrap_or(DataType::Text);
            if crate::value::types::is_pseudo(ty) {
                return Err(SqlError::unsupported(format!("a view column of type {}", type_name(ty))));
            }
            if ty == crate::value::NUMERIC_ANY {
                numeric_any.push(k);
                columns.push(ColumnDef::new(cname, crate::catalog::NUMERIC_ANY_STAND_IN));
            } else {
                columns.push(ColumnDef::new(cname, ty));
            }
        }
        let mut deps: Vec<String> = self.deps[deps_before..].iter().map(|t| t.name.clone()).collect();
        // A view made over itself (through another, by CREATE OR REPLACE) does not list itself.
        deps.retain(|d| *d != name);
        deps.sort_unstable();
        deps.dedup();
        let mut query = (*cv.query).clone();
        self.expand_stars(&mut query);
        let mut def = TableDef::new(name, columns, &[]);
        def.annotation = Some(ViewDef { query: query.to_string(), deps, numeric_any }.encode());
        Ok(Plan::CreateView { def, replace: cv.or_replace })
    }

    /// Writes the select list's `*` and `t.*` out as the columns they stand
    /// for now, as PostgreSQL fixes a view's columns at CREATE: a column
    /// added to a table later is not the view's. Only for a FROM list of
    /// stored tables and views joined with ON (what `*` means there is
    /// plain); other queries are stored as written.
    fn expand_stars(&self, q: &mut ast::Query) {
        if q.with.is_some() {
            return;
        }
        let ast::SetExpr::Select(s) = q.body.as_mut() else { return };
        let mut rels: Vec<(String, Vec<String>)> = Vec::new();
        for twj in &s.from {
            let factors = std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation));
            for (k, f) in factors.enumerate() {
                if k > 0
                    && !matches!(
                        &twj.joins[k - 1].join_operator,
                        ast::JoinOperator::Join(ast::JoinConstraint::On(_))
                            | ast::JoinOperator::Inner(ast::JoinConstraint::On(_))
                            | ast::JoinOperator::Left(ast::JoinConstraint::On(_))
                            | ast::JoinOperator::LeftOuter(ast::JoinConstraint::On(_))
                            | ast::JoinOperator::CrossJoin(ast::JoinConstraint::None)
                    )
                {
                    return;
                }
                let ast::TableFactor::Table { name, alias, args: None, .. } = f else { return };
                let Ok(Some(key)) = self.stored_relation(name) else { return };
                let Some(t) = self.catalog.table_by_name(&key) else { return };
                let tname = crate::names::short(&key).to_owned();
                if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
                    return;
                }
                let refname = alias.as_ref().map_or(tname, |a| ident(&a.name));
                rels.push((refname, t.visible_columns().iter().map(|c| c.name.clone()).collect()));
            }
        }
        let column = |rel: &str, col: &str| {
            ast::SelectItem::UnnamedExpr(ast::Expr::CompoundIdentifier(vec![
                ast::Ident::with_quote('"', rel),
                ast::Ident::with_quote('"', col),
            ]))
        };
        let mut items = Vec::with_capacity(s.projection.len());
        for item in std::mem::take(&mut s.projection) {
            match &item {
                ast::SelectItem::Wildcard(o) if *o == ast::WildcardAdditionalOptions::default() => {
                    items.extend(rels.iter().flat_map(|(r, cols)| cols.iter().map(|c| column(r, c))));
                }
                ast::SelectItem::QualifiedWildcard(ast::SelectItemQualifiedWildcardKind::ObjectName(n), o)
                    if *o == ast::WildcardAdditionalOptions::default() =>
                {
                    let q = n.0.last().and_then(|p| p.as_ident()).map(ident);
                    match rels.iter().find(|(r, _)| Some(r) == q.as_ref()) {
                        Some((r, cols)) if n.0.len() == 1 => items.extend(cols.iter().map(|c| column(r, c))),
                        _ => items.push(item),
                    }
                }
                _ => items.push(item),
            }
        }
        s.projection = items;
    }

    /// The view `name` names, if it names one.
    pub(super) fn view_named(&self, name: &ObjectName) -> Result<Option<Arc<TableSchema>>> {
        Ok(match self.target(name)? {
            Some(crate::catalog::search_path::Target::Stored(k)) => {
                self.catalog.table_by_name(&k).filter(|t| is_view(t)).cloned()
            }
            _ => None,
        })
    }

    /// A view in FROM: its query bound as a subquery named after the view,
    /// with the view's column names. Nothing of the referencing query
    /// (its WITH queries, its outer rows) is visible inside.
    pub(super) fn expand_view(&mut self, v: &Arc<TableSchema>) -> Result<(Arc<TableSchema>, VirtualSource)> {
        let def =
            view_def(v).ok_or_else(|| SqlError::new("XX000", format!("view \"{}\" has no stored query", v.name)))?;
        if self.view_depth >= VIEW_DEPTH_MAX {
            return Err(SqlError::new(
                "42P17",
                format!("infinite recursion detected in rules for relation \"{}\"", crate::names::short(&v.name)),
            ));
        }
        if !self.deps.iter().any(|d| Arc::ptr_eq(d, v)) {
            self.deps.push(Arc::clone(v));
        }
        let q = match crate::parse::parse_sql(&def.query) {
            Ok(mut stmts) if stmts.len() == 1 => match stmts.pop() {
                Some(ast::Statement::Query(q)) => q,
                _ => return Err(SqlError::new("XX000", format!("view \"{}\" stores no query", v.name))),
            },
            // It parsed when the view was made: what fails now is the depth
            // bound, with the stack that nested views have used.
            _ => {
                return Err(SqlError::new("54001", "stack depth limit exceeded")
                    .with_detail(format!("expanding view \"{}\"", v.name)));
            }
        };
        let ctes = std::mem::take(&mut self.ctes);
        let correlated = self.correlated;
        // The view's query is bound as a statement of its own.
        let lazy = std::mem::replace(&mut self.lazy_folding, false);
        self.view_depth += 1;
        let path = std::mem::replace(&mut self.path, self.view_path);
        // Its relations are read with its owner's privileges.
        let plan = self.as_view_owner(v, |b| b.query(&q, None));
        self.path = path;
        self.view_depth -= 1;
        self.lazy_folding = lazy;
        self.ctes = ctes;
        self.correlated = correlated;
        let plan = plan?;
        let names = v.visible_columns();
        let out = &plan.columns[..plan.visible];
        if out.len() != names.len() {
            return Err(SqlError::new("XX000", format!("view \"{}\" no longer matches its tables", v.name)));
        }
        let cols = names.iter().zip(out).map(|(c, oc)| (c.name.clone(), oc.ty.unwrap_or(DataType::Text))).collect();
        Ok((super::detached(&v.name, cols), VirtualSource::Query(SetTree::Select(Box::new(plan)))))
    }
}

impl Binder<'_> {
    /// A view's query is bound under the default search path when read
    /// (`expand_view`): one whose relations the session's path resolves
    /// otherwise is refused rather than read from other tables later.
    fn same_under_view_path(&mut self, q: &ast::Query, deps_before: usize) -> Result<()> {
        if std::ptr::eq(self.path, self.view_path) {
            return Ok(());
        }
        let ids = |deps: &[Arc<TableSchema>]| {
            let mut v: Vec<_> = deps.iter().map(|t| t.id).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let now = ids(&self.deps[deps_before..]);
        let saved = (
            std::mem::take(&mut self.deps),
            std::mem::take(&mut self.indexes),
            self.params.len(),
            self.next_subquery,
            self.work_tables,
        );
        let path = std::mem::replace(&mut self.path, self.view_path);
        let again = self.query(q, None);
        self.path = path;
        let later = ids(&self.deps);
        self.deps = saved.0;
        self.indexes = saved.1;
        self.params.truncate(saved.2);
        self.next_subquery = saved.3;
        self.work_tables = saved.4;
        if again.is_err() || now != later {
            return Err(SqlError::unsupported(
                "a view whose relations the search_path resolves otherwise than the default \"$user\", public does",
            ));
        }
        Ok(())
    }
}
