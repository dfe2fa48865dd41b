//! FROM: stored tables, joins, and the items that are not stored tables:
//! WITH queries, system relations, subqueries and table functions.

use std::sync::Arc;

use pgtier_engine::{DataType, TableSchema};
use sqlparser::ast::{self, ObjectName};

use super::function::function_name;
use super::{Binder, ExprCtx, Rel, Scope, Ty, ident};
use crate::error::{Result, SqlError};
use crate::expr::{Expr, registry};
use crate::plan::{SelectPlan, SetTree, TableFunc, VirtualSource};
use crate::value;
use crate::value::types::{Elem, RegKind};

/// A join as written; its condition is bound once every FROM item is known.
pub(super) struct JoinSpec {
    /// The first relation of its JOIN chain (the FROM item after the last
    /// comma): ON and USING see only the chain, as in PostgreSQL.
    pub(super) chain: usize,
    pub(super) left: bool,
    pub(super) on: Option<ast::Expr>,
    pub(super) using: Vec<String>,
    /// NATURAL: USING the columns both sides name.
    pub(super) natural: bool,
    /// RIGHT JOIN (its left side is the chain's one relation).
    pub(super) right: bool,
    /// FULL JOIN (its left side is the chain's one relation; `left` too).
    pub(super) full: bool,
    /// Inner-join conditions of a parenthesized join flattened into the
    /// chain, each with the first relation it sees (from there to this one).
    pub(super) inner_on: Vec<(usize, ast::Expr)>,
}

/// Where [`Binder::add_chain`] appends FROM items and their joins.
struct FromState<'a, 'p> {
    rels: &'a mut Vec<Rel>,
    joins: &'a mut Vec<JoinSpec>,
    offset: &'a mut usize,
    has_target: bool,
    outer: Option<&'a Scope<'p>>,
}

/// A FROM item that is not a stored table: its name, row shape and source.
struct VirtualRel {
    name: String,
    table: Arc<TableSchema>,
    source: Arc<VirtualSource>,
}

impl Binder<'_> {
    pub(super) fn bind_from(
        &mut self,
        from: &[ast::TableWithJoins],
        outer: Option<&'_ Scope<'_>>,
    ) -> Result<(Vec<Rel>, Vec<JoinSpec>)> {
        self.bind_from_after(None, from, outer)
    }

    /// [`Binder::bind_from`] after a DML target (`UPDATE t ... FROM`,
    /// `DELETE FROM t USING`): the target is the first relation (offset 0,
    /// joined to nothing), so a FROM item of the same name is 42712 and
    /// one with another alias is a self-join, as in PostgreSQL.
    pub(super) fn bind_from_after(
        &mut self,
        target: Option<Rel>,
        from: &[ast::TableWithJoins],
        outer: Option<&'_ Scope<'_>>,
    ) -> Result<(Vec<Rel>, Vec<JoinSpec>)> {
        let mut rels: Vec<Rel> = Vec::new();
        let mut joins = Vec::new();
        let mut offset = 0;
        let has_target = target.is_some();
        if let Some(t) = target {
            offset = t.table.columns.len();
            rels.push(t);
            joins.push(join_spec(0, false, false, false, None));
        }
        for twj in from {
            let chain = rels.len();
            let mut from = FromState { rels: &mut rels, joins: &mut joins, offset: &mut offset, has_target, outer };
            self.add_chain(twj, chain, &mut from)?;
        }
        Ok((rels, joins))
    }

    /// One JOIN chain from `chain` on. An unaliased parenthesized join
    /// that starts it is the same chain (joins associate to the left), so
    /// its relations join it one by one, their names visible.
    fn add_chain(&mut self, twj: &ast::TableWithJoins, chain: usize, from: &mut FromState<'_, '_>) -> Result<()> {
        match &twj.relation {
            ast::TableFactor::NestedJoin { table_with_joins, alias: None } if !table_with_joins.joins.is_empty() => {
                self.add_chain(table_with_joins, chain, from)?;
            }
            first => {
                self.add_from_item(first, from.rels, from.offset, from.has_target, from.outer)?;
                from.joins.push(join_spec(chain, false, false, false, None));
            }
        }
        for j in &twj.joins {
            let (left, right, full, constraint) =
                join_kind(&j.join_operator, from.rels.len() - chain, from.has_target)?;
            if let ast::TableFactor::NestedJoin { table_with_joins, alias: None } = &j.relation
                && !table_with_joins.joins.is_empty()
            {
                self.add_inner_nested(table_with_joins, chain, (left, right, full), constraint, from)?;
                continue;
            }
            self.add_from_item(&j.relation, from.rels, from.offset, from.has_target, from.outer)?;
            check_joined_side(from.rels, right, full)?;
            from.joins.push(join_spec(chain, left, right, full, constraint));
        }
        Ok(())
    }

    /// `... JOIN (b JOIN c ON p) ON q` with no alias, its inner table names
    /// visible: when it and every join in it are inner joins with ON (or
    /// CROSS), it is the chain joined to b, then c on p (which sees only b
    /// and c, as in PostgreSQL), q checked once c is joined. Outer joins
    /// would NULL-extend b and c together, which a level per relation
    /// cannot; USING and NATURAL would merge columns across the parentheses.
    fn add_inner_nested(
        &mut self,
        inner: &ast::TableWithJoins,
        chain: usize,
        (left, right, full): (bool, bool, bool),
        constraint: Option<&ast::JoinConstraint>,
        from: &mut FromState<'_, '_>,
    ) -> Result<()> {
        let on = match constraint {
            Some(ast::JoinConstraint::On(e)) => Some(e.clone()),
            Some(ast::JoinConstraint::None) | None => None,
            Some(_) => return Err(nested_unsupported()),
        };
        if left || right || full || !plain_inner(inner) {
            return Err(nested_unsupported());
        }
        self.flatten_inner(inner, chain, chain, on, from)
    }

    /// The relations of an all-inner parenthesized join appended to the
    /// chain (`chain` for `*` and USING further on); `on`, its own
    /// condition, sees the relations from `sees` on.
    fn flatten_inner(
        &mut self,
        inner: &ast::TableWithJoins,
        chain: usize,
        sees: usize,
        on: Option<ast::Expr>,
        from: &mut FromState<'_, '_>,
    ) -> Result<()> {
        let start = from.rels.len();
        let item = |this: &mut Self, f: &ast::TableFactor, on: Option<ast::Expr>, from: &mut FromState<'_, '_>| {
            if let ast::TableFactor::NestedJoin { table_with_joins, alias: None } = f {
                return this.flatten_inner(table_with_joins, chain, start, on, from);
            }
            this.add_from_item(f, from.rels, from.offset, from.has_target, from.outer)?;
            let mut spec = join_spec(chain, false, false, false, None);
            spec.inner_on.extend(on.map(|e| (start, e)));
            from.joins.push(spec);
            Ok(())
        };
        item(self, &inner.relation, None, from)?;
        for j in &inner.joins {
            let on = match &j.join_operator {
                ast::JoinOperator::Join(ast::JoinConstraint::On(e))
                | ast::JoinOperator::Inner(ast::JoinConstraint::On(e)) => Some(e.clone()),
                _ => None,
            };
            item(self, &j.relation, on, from)?;
        }
        if let (Some(e), Some(last)) = (on, from.joins.last_mut()) {
            last.inner_on.push((sees, e));
        }
        Ok(())
    }

    /// One FROM item appended to `rels` at `offset` of the joined row: a
    /// virtual relation (subquery, function, system relation, WITH query)
    /// or a stored table, its reference name unique among them.
    fn add_from_item(
        &mut self,
        factor: &ast::TableFactor,
        rels: &mut Vec<Rel>,
        offset: &mut usize,
        has_target: bool,
        outer: Option<&'_ Scope<'_>>,
    ) -> Result<()> {
        if has_target && matches!(factor, ast::TableFactor::Derived { lateral: true, .. }) {
            // Its rows would be read again for each target row.
            return Err(SqlError::unsupported("LATERAL in UPDATE ... FROM or DELETE ... USING"));
        }
        if let ast::TableFactor::NestedJoin { table_with_joins, .. } = factor
            && table_with_joins.joins.is_empty()
        {
            // gram.y's joined_table: parentheses hold a join, not one item.
            return Err(SqlError::syntax("syntax error at or near \")\""));
        }
        if let ast::TableFactor::NestedJoin { table_with_joins, alias: Some(alias) } = factor {
            let derived = nested_as_subquery(table_with_joins, alias, !rels.is_empty())?;
            return self.add_from_item(&derived, rels, offset, has_target, outer);
        }
        if let Some(VirtualRel { name: rname, table, source }) = self.virtual_from(factor, rels, outer)? {
            if rels.iter().any(|r| r.name == rname) {
                return Err(SqlError::new("42712", format!("table name \"{rname}\" specified more than once")));
            }
            let width = table.columns.len();
            rels.push(Rel { name: rname, table, offset: *offset, source: Some(source) });
            *offset += width;
            return Ok(());
        }
        let ast::TableFactor::Table {
            name,
            alias,
            args: None,
            with_hints,
            version: None,
            partitions,
            sample: None,
            index_hints,
            ..
        } = factor
        else {
            return Err(SqlError::unsupported(match factor {
                ast::TableFactor::Derived { .. } => "subquery in FROM".to_owned(),
                other => format!("FROM item {other}"),
            }));
        };
        if !with_hints.is_empty() || !partitions.is_empty() || !index_hints.is_empty() {
            return Err(SqlError::unsupported("table hints"));
        }
        let mut table = self.table(name)?;
        self.need(&table, crate::catalog::roles::Privs::SELECT);
        let rname = match alias {
            Some(a) => ident(&a.name),
            None => crate::names::short(&table.name).to_owned(),
        };
        if let Some(a) = alias.as_ref().filter(|a| !a.columns.is_empty()) {
            table = with_column_aliases(&table, &rname, &a.columns)?;
        }
        // PostgreSQL lets two unaliased relations of different schemas
        // share a reference name (`public.t, s.t`).
        let clash = |r: &Rel| {
            r.name == rname
                && !(alias.is_none()
                    && r.source.is_none()
                    && r.table.id != table.id
                    && r.name == crate::names::short(&r.table.name))
        };
        if rels.iter().any(clash) {
            return Err(SqlError::new("42712", format!("table name \"{rname}\" specified more than once")));
        }
        let width = table.columns.len();
        rels.push(Rel { name: rname, table, offset: *offset, source: None });
        *offset += width;
        Ok(())
    }

    /// The WITH query an unqualified FROM name refers to, innermost first.
    fn cte_index(&self, name: &ObjectName) -> Option<usize> {
        let [part] = name.0.as_slice() else { return None };
        let n = ident(part.as_ident()?);
        self.ctes.iter().rposition(|c| c.name == n)
    }

    /// Binds WITH query `k` for one reference: its plan, name and declared
    /// column names. Inside it, only the WITH queries before it are visible
    /// (no recursion), and nothing of the referencing query.
    pub(super) fn bind_cte(&mut self, k: usize) -> Result<(SelectPlan, String, Vec<String>)> {
        self.ctes[k].uses += 1;
        let cte = self.ctes[k].cte.clone();
        let later = self.ctes.split_off(k);
        let correlated = self.correlated;
        let plan = self.query(&cte.query, None);
        self.correlated = correlated;
        self.ctes.extend(later);
        Ok((plan?, ident(&cte.alias.name), cte.alias.columns.iter().map(|c| ident(&c.name)).collect()))
    }

    /// A FROM item that is not a stored table, or None for a stored one.
    fn virtual_from(
        &mut self,
        factor: &ast::TableFactor,
        rels: &[Rel],
        outer: Option<&Scope<'_>>,
    ) -> Result<Option<VirtualRel>> {
        let (name, schema, source, alias) = match factor {
            ast::TableFactor::Table { name, alias, args: None, .. } if let Some(k) = self.cte_index(name) => {
                let (cte_name, schema, source) = self.cte_source(k)?;
                (cte_name, schema, source, alias)
            }
            ast::TableFactor::Table { name, alias, args: None, .. } => match self.target(name)? {
                Some(crate::catalog::search_path::Target::System(rel)) => {
                    (rel.def().name.to_owned(), rel.schema(), VirtualSource::System(rel), alias)
                }
                _ if let Some(t) = self.partitioned_named(name)? => {
                    let Some((schema, source)) = self.expand_partitioned(&t)? else { return Ok(None) };
                    (crate::names::short(&t.name).to_owned(), schema, source, alias)
                }
                _ => {
                    let Some(v) = self.view_named(name)? else { return Ok(None) };
                    let (schema, source) = self.expand_view(&v)?;
                    (crate::names::short(&v.name).to_owned(), schema, source, alias)
                }
            },
            ast::TableFactor::Table { name, alias, args: Some(targs), with_ordinality, .. } => {
                if targs.settings.is_some() {
                    return Err(SqlError::unsupported("table function settings"));
                }
                let (fname, schema, source) =
                    self.function_item(name, &targs.args, alias.as_ref(), *with_ordinality, rels, outer)?;
                (fname, schema, source, alias)
            }
            // LATERAL changes nothing for a function: its arguments always
            // see the FROM items before it.
            ast::TableFactor::Function { lateral: true, name, args, with_ordinality, alias } => {
                let (fname, schema, source) =
                    self.function_item(name, args, alias.as_ref(), *with_ordinality, rels, outer)?;
                (fname, schema, source, alias)
            }
            ast::TableFactor::UNNEST {
                alias,
                array_exprs,
                with_offset: false,
                with_offset_alias: None,
                with_ordinality,
            } => {
                let (schema, source) =
                    self.function_from("unnest", array_exprs, alias.as_ref(), *with_ordinality, rels, outer)?;
                ("unnest".to_owned(), schema, source, alias)
            }
            ast::TableFactor::Derived { lateral, subquery, alias, .. } => {
                let Some(a) = alias else {
                    return Err(SqlError::syntax("subquery in FROM must have an alias")
                        .with_hint("For example, FROM (SELECT ...) [AS] foo."));
                };
                // With nothing before it, LATERAL changes nothing.
                let lateral = *lateral && !rels.is_empty();
                let correlated = std::mem::replace(&mut self.correlated, false);
                let plan = if lateral {
                    // The FROM items before it are its enclosing row; the
                    // query around this one is then two levels out (refused).
                    let before =
                        Scope { rels: rels.to_vec(), hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer };
                    self.query(subquery, Some(&before))
                } else {
                    self.query(subquery, outer)
                };
                // Whether it read its enclosing row: the FROM items before
                // it (LATERAL), or the query around this one (which is then
                // correlated too).
                let reads = self.correlated;
                self.correlated = correlated || (!lateral && reads);
                let plan = plan?;
                let cols = plan.columns[..plan.visible]
                    .iter()
                    .map(|c| (c.name.clone(), c.ty.unwrap_or(DataType::Text)))
                    .collect();
                let n = ident(&a.name);
                let tree = SetTree::Select(Box::new(plan));
                let source = match (lateral, reads) {
                    (true, true) => VirtualSource::Lateral(tree),
                    (false, true) => VirtualSource::Correlated(tree),
                    _ if self.in_recursive_term() => VirtualSource::Correlated(tree),
                    (_, false) => VirtualSource::Query(tree),
                };
                (n.clone(), super::detached(&n, cols), source, alias)
            }
            _ => return Ok(None),
        };
        let mut schema = schema;
        let mut rname = name;
        if let Some(a) = alias {
            if !matches!(factor, ast::TableFactor::Table { args: Some(_), .. } | ast::TableFactor::Function { .. }) {
                no_alias_types(&a.columns)?;
            }
            rname = ident(&a.name);
            if !a.columns.is_empty() {
                if a.columns.len() > schema.columns.len() {
                    return Err(SqlError::new(
                        "42P10",
                        format!(
                            "table \"{rname}\" has {} columns available but {} columns specified",
                            schema.columns.len(),
                            a.columns.len()
                        ),
                    ));
                }
                let mut cols: Vec<(String, DataType)> = schema.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
                for (c, new) in cols.iter_mut().zip(&a.columns) {
                    c.0 = ident(&new.name);
                }
                let annotation = schema.annotation.clone();
                let mut renamed = TableSchema::clone(&super::detached(&rname, cols));
                renamed.annotation = annotation;
                schema = Arc::new(renamed);
            }
        }
        Ok(Some(VirtualRel { name: rname, table: schema, source: Arc::new(source) }))
    }

    /// A function call in FROM by its name and arguments as written.
    fn function_item(
        &mut self,
        name: &ObjectName,
        args: &[ast::FunctionArg],
        alias: Option<&ast::TableAlias>,
        ordinality: bool,
        rels: &[Rel],
        outer: Option<&Scope<'_>>,
    ) -> Result<(String, Arc<TableSchema>, VirtualSource)> {
        let fname = function_name(name)?;
        if !from_function(&fname) {
            let (schema, source) = self.scalar_from(name, &fname, args, alias, ordinality, rels, outer)?;
            return Ok((fname, schema, source));
        }
        let exprs = table_function_args(&fname, args)?;
        let (schema, source) = self.function_from(&fname, &exprs, alias, ordinality, rels, outer)?;
        Ok((fname, schema, source))
    }

    /// A function that returns one value in FROM (`FROM repeat('x', 3) s`,
    /// a user's SQL or PL/pgSQL function): bound as the same call in an
    /// expression would be, one row holding its value (NULL too), as
    /// PostgreSQL's function scan of a function that returns no set. Its
    /// column is named after the alias, else the function.
    #[allow(clippy::too_many_arguments)]
    fn scalar_from(
        &mut self,
        name: &ObjectName,
        fname: &str,
        args: &[ast::FunctionArg],
        alias: Option<&ast::TableAlias>,
        ordinality: bool,
        rels: &[Rel],
        outer: Option<&Scope<'_>>,
    ) -> Result<(Arc<TableSchema>, VirtualSource)> {
        no_column_definitions(alias)?;
        let call = ast::Expr::Function(ast::Function {
            name: name.clone(),
            uses_odbc_syntax: false,
            parameters: ast::FunctionArguments::None,
            args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                duplicate_treatment: None,
                args: args.to_vec(),
                clauses: Vec::new(),
            }),
            filter: None,
            null_treatment: None,
            over: None,
            within_group: Vec::new(),
        });
        let scope = Scope { rels: rels.to_vec(), hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer };
        let (e, ty) = self.expr(&call, &scope, &mut ExprCtx::plain("functions in FROM"))?;
        let column = match alias {
            Some(a) if a.columns.is_empty() => ident(&a.name),
            _ => fname.rsplit('.').next().unwrap_or(fname).to_owned(),
        };
        let mut cols = vec![(column, ty.unwrap_or(DataType::Text))];
        if ordinality {
            cols.push(("ordinality".to_owned(), DataType::Int8));
        }
        Ok((
            super::detached(fname, cols),
            VirtualSource::Function { func: TableFunc::Scalar, args: vec![e], ordinality },
        ))
    }

    /// A set-returning function in FROM; its arguments see the FROM items before it.
    fn function_from(
        &mut self,
        fname: &str,
        exprs: &[ast::Expr],
        alias: Option<&ast::TableAlias>,
        ordinality: bool,
        rels: &[Rel],
        outer: Option<&Scope<'_>>,
    ) -> Result<(Arc<TableSchema>, VirtualSource)> {
        let scope = Scope { rels: rels.to_vec(), hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer };
        if let Some(kind) = super::user_type::populate_kind(fname) {
            return self.populate_record(fname, kind, exprs, &scope, alias, ordinality);
        }
        let mut args = Vec::new();
        for e in exprs {
            args.push(self.expr(e, &scope, &mut ExprCtx::plain("functions in FROM"))?);
        }
        if let Some(kind) = super::json::to_record_kind(fname) {
            return self.json_to_record(fname, kind, args, alias, ordinality);
        }
        no_column_definitions(alias)?;
        if fname == super::function::EXPAND_ARRAY {
            let s = signature(fname, &args);
            let [(e, t)] = <[(Expr, Ty); 1]>::try_from(args).map_err(|_| SqlError::undefined_function(&s))?;
            // A catalog array (int2vector, oid[]) or a real one (ARRAY[1, 2]).
            let elem =
                t.and_then(|t| Elem::of(t).or_else(|| crate::value::array::elem_type(t).and_then(Elem::for_element)));
            let elem =
                elem.filter(|e| value::is_integer(e.element_type())).ok_or_else(|| SqlError::undefined_function(&s))?;
            let mut cols = vec![("x".to_owned(), elem.element_type()), ("n".to_owned(), DataType::Int4)];
            if ordinality {
                cols.push(("ordinality".to_owned(), DataType::Int8));
            }
            return Ok((
                super::detached("_pg_expandarray", cols),
                VirtualSource::Function { func: TableFunc::ExpandArray(elem), args: vec![e], ordinality },
            ));
        }
        if let Some(srf) = super::json::json_srf(fname) {
            let sig = signature(fname, &args);
            let e = self.json_srf_args(srf, args, &sig)?;
            let mut cols: Vec<(String, DataType)> = srf
                .columns()
                .into_iter()
                .map(|(n, t)| (if n.is_empty() { fname.to_owned() } else { n.to_owned() }, t))
                .collect();
            if ordinality {
                cols.push(("ordinality".to_owned(), DataType::Int8));
            }
            // A scalar function's column takes the alias's name; the
            // others have named OUT columns (jsonb_array_elements' value).
            if let Some(a) = alias
                && a.columns.is_empty()
                && matches!(
                    srf,
                    crate::value::json::JsonSrf::ObjectKeys { .. } | crate::value::json::JsonSrf::PathQuery
                )
            {
                cols[0].0 = ident(&a.name);
            }
            return Ok((
                super::detached(fname, cols),
                VirtualSource::Function { func: TableFunc::Json(srf), args: e, ordinality },
            ));
        }
        if matches!(fname, "string_to_table" | "regexp_split_to_table") {
            args = self.split_to_array(fname, args)?;
        }
        let unnest = matches!(fname, "unnest" | "string_to_table" | "regexp_split_to_table");
        if unnest && args.iter().any(|(_, t)| crate::value::array::is_array(*t)) {
            let s = signature(fname, &args);
            let n = args.len();
            let mut cols = Vec::new();
            let mut exprs = Vec::new();
            for (e, t) in args {
                let elem =
                    t.and_then(crate::value::array::elem_type).ok_or_else(|| SqlError::undefined_function(&s))?;
                cols.push((fname.to_owned(), elem));
                exprs.push(e);
            }
            if let Some(a) = alias
                && a.columns.is_empty()
                && n == 1
            {
                cols[0].0 = ident(&a.name);
            }
            if ordinality {
                cols.push(("ordinality".to_owned(), DataType::Int8));
            }
            return Ok((
                super::detached(fname, cols),
                VirtualSource::Function { func: TableFunc::UnnestArrays(n), args: exprs, ordinality },
            ));
        }
        let (func, args, ty) = self.table_function(fname, args)?;
        let mut cols = vec![(fname.to_owned(), ty)];
        if ordinality {
            cols.push(("ordinality".to_owned(), DataType::Int8));
        }
        // A scalar function's one column takes the alias's name.
        if let Some(a) = alias
            && a.columns.is_empty()
        {
            cols[0].0 = ident(&a.name);
        }
        Ok((super::detached(fname, cols), VirtualSource::Function { func, args, ordinality }))
    }

    /// string_to_table and regexp_split_to_table are unnest of their
    /// `_to_array` twin: the same split, a row per piece.
    fn split_to_array(&mut self, fname: &str, args: Vec<(Expr, Ty)>) -> Result<Vec<(Expr, Ty)>> {
        let sig = signature(fname, &args);
        if fname == "string_to_table" {
            if !(2..=3).contains(&args.len()) {
                return Err(SqlError::undefined_function(&sig));
            }
            return Ok(vec![self.array_function("string_to_array", args, &sig)?]);
        }
        let def = registry::lookup("regexp_split_to_array").ok_or_else(|| SqlError::undefined_function(&sig))?;
        let (split, _) = registry::resolve(def, self, registry::Call { name: fname, sig: &sig, args })?;
        let text_array = value::array::array_type(DataType::Text).ok_or_else(|| SqlError::undefined_function(&sig))?;
        Ok(vec![(Expr::Cast(split.boxed(), text_array, true), Some(text_array))])
    }

    fn table_function(&mut self, name: &str, args: Vec<(Expr, Ty)>) -> Result<(TableFunc, Vec<Expr>, DataType)> {
        let sig = || {
            let types: Vec<&str> = args.iter().map(|(_, t)| t.map_or("unknown", value::type_name)).collect();
            format!("{name}({})", types.join(", "))
        };
        match (name, args.len()) {
            ("generate_series", 2 | 3) => {
                let int8 = args.iter().any(|(_, t)| *t == Some(DataType::Int8));
                // A numeric argument picks generate_series(numeric, numeric[, numeric]).
                let numeric = args
                    .iter()
                    .any(|(_, t)| matches!(t, Some(t @ DataType::Numeric { .. }) if RegKind::of(*t).is_none()));
                if numeric {
                    let mut out = Vec::new();
                    for (e, t) in args {
                        out.push(match t {
                            None => self.coerce(e, None, value::NUMERIC_ANY, name)?,
                            Some(t) if value::is_integer(t) => {
                                self.result_cast(e, Some(t), Some(value::NUMERIC_ANY))?
                            }
                            Some(DataType::Numeric { .. }) => e,
                            Some(_) => return Err(SqlError::unsupported("generate_series over non-integers")),
                        });
                    }
                    return Ok((TableFunc::GenerateSeries, out, value::NUMERIC_ANY));
                }
                let ty = if int8 { DataType::Int8 } else { DataType::Int4 };
                let mut out = Vec::new();
                for (e, t) in args {
                    out.push(match t {
                        None => self.coerce(e, None, ty, name)?,
                        Some(t) if value::is_integer(t) => e,
                        Some(_) => return Err(SqlError::unsupported("generate_series over non-integers")),
                    });
                }
                Ok((TableFunc::GenerateSeries, out, ty))
            }
            ("unnest", 1) => {
                let s = sig();
                let mut it = args.into_iter();
                let Some((e, t)) = it.next() else { return Err(SqlError::undefined_function(&s)) };
                let elem = t.and_then(Elem::of).ok_or_else(|| SqlError::undefined_function(&s))?;
                let ty =
                    if elem == Elem::Oid || elem == Elem::OidVector { DataType::Int8 } else { elem.element_type() };
                Ok((TableFunc::Unnest(elem), vec![e], ty))
            }
            ("pg_partition_ancestors", 1) => {
                let s = sig();
                let (e, t) = args.into_iter().next().ok_or_else(|| SqlError::undefined_function(&s))?;
                let e = match t {
                    None => self.reg_cast(e, None, RegKind::Class)?.0,
                    Some(t) if value::is_integer(t) || RegKind::of(t).is_some() => e,
                    Some(_) => return Err(SqlError::undefined_function(&s)),
                };
                Ok((TableFunc::PartitionAncestors, vec![e], RegKind::Class.data_type()))
            }
            _ => Err(SqlError::undefined_function(&sig())),
        }
    }
}

/// Whether `fname` is read in FROM by [`Binder::function_from`]: the
/// set-returning functions and the record-returning ones. Any other
/// function in FROM returns one value.
fn from_function(fname: &str) -> bool {
    super::window::set_returning(fname)
        || matches!(fname, "regexp_matches" | "pg_partition_ancestors")
        || fname == super::function::EXPAND_ARRAY
        || super::json::to_record_kind(fname).is_some()
        || super::user_type::populate_kind(fname).is_some()
}

/// A column definition list (`AS x(a int, ...)`) is for the functions
/// that return `record` (json[b]_to_record[set] here): 42601 elsewhere.
fn no_column_definitions(alias: Option<&ast::TableAlias>) -> Result<()> {
    if alias.is_some_and(|a| a.columns.iter().any(|c| c.data_type.is_some())) {
        return Err(SqlError::syntax("a column definition list is only allowed for functions returning \"record\""));
    }
    Ok(())
}

/// A table's or subquery's alias names columns only (gram.y's
/// alias_clause): a type there is PostgreSQL's syntax error.
fn no_alias_types(columns: &[ast::TableAliasColumnDef]) -> Result<()> {
    match columns.iter().find_map(|c| c.data_type.as_ref()) {
        Some(t) => {
            let word = t.to_string().split(['(', ' ']).next().unwrap_or_default().to_lowercase();
            Err(SqlError::syntax(format!("syntax error at or near \"{word}\"")))
        }
        None => Ok(()),
    }
}

/// `name(type, ...)` of a call, as errors print it.
pub(super) fn signature(fname: &str, args: &[(Expr, Ty)]) -> String {
    format!(
        "{fname}({})",
        args.iter().map(|(_, t)| t.map_or("unknown", value::type_name)).collect::<Vec<_>>().join(", ")
    )
}

/// A stored table seen through `FROM t AS x (a, b, ...)`: its first
/// columns renamed, the rest as they are. Only the binder sees the names;
/// the scan reads the table by id, and the plan's dependency stays the
/// catalog's own schema.
fn with_column_aliases(
    table: &Arc<TableSchema>,
    rname: &str,
    aliases: &[ast::TableAliasColumnDef],
) -> Result<Arc<TableSchema>> {
    no_alias_types(aliases)?;
    let available = table.visible_columns().len();
    if aliases.len() > available {
        return Err(SqlError::new(
            "42P10",
            format!("table \"{rname}\" has {available} columns available but {} columns specified", aliases.len()),
        ));
    }
    let mut renamed = TableSchema::clone(table);
    for (c, new) in renamed.columns.iter_mut().zip(aliases) {
        c.name = ident(&new.name);
    }
    Ok(Arc::new(renamed))
}

/// A join's kind as (left, right, full) and its constraint. `left_width`
/// is the number of relations on its left in this FROM item's chain.
fn join_kind(
    op: &ast::JoinOperator,
    left_width: usize,
    has_target: bool,
) -> Result<(bool, bool, bool, Option<&ast::JoinConstraint>)> {
    let mut full = false;
    let (left, right, constraint) = match op {
        ast::JoinOperator::Join(c) | ast::JoinOperator::Inner(c) => (false, false, Some(c)),
        ast::JoinOperator::Left(c) | ast::JoinOperator::LeftOuter(c) => (true, false, Some(c)),
        ast::JoinOperator::CrossJoin(c) => (false, false, Some(c)),
        // A LEFT JOIN whose right side's unmatched rows are added
        // after the left side's loop (exec/scan.rs): a left side of
        // one relation, not in DML.
        ast::JoinOperator::FullOuter(c) if left_width == 1 && !has_target => {
            full = true;
            (true, false, Some(c))
        }
        ast::JoinOperator::FullOuter(_) if left_width > 1 => {
            return Err(SqlError::unsupported("FULL JOIN whose left side is itself a join"));
        }
        // Run as the LEFT JOIN of its sides swapped (planner::execution_order),
        // which a left side of several relations or a DML target would not be.
        ast::JoinOperator::Right(c) | ast::JoinOperator::RightOuter(c) if left_width == 1 && !has_target => {
            (false, true, Some(c))
        }
        ast::JoinOperator::Right(_) | ast::JoinOperator::RightOuter(_) if left_width > 1 => {
            return Err(SqlError::unsupported("RIGHT JOIN whose left side is itself a join"));
        }
        ast::JoinOperator::Right(_) | ast::JoinOperator::RightOuter(_) => {
            return Err(SqlError::unsupported("RIGHT JOIN in UPDATE ... FROM, DELETE ... USING or MERGE"));
        }
        ast::JoinOperator::FullOuter(_) => {
            return Err(SqlError::unsupported("FULL JOIN in UPDATE ... FROM, DELETE ... USING or MERGE"));
        }
        other => {
            return Err(SqlError::unsupported(format!("join {other:?}").chars().take(60).collect::<String>()));
        }
    };
    Ok((left, right, full, constraint))
}

/// The right side just joined, refused where it would be read in an order
/// it cannot be: a RIGHT JOIN's or FULL JOIN's side that depends on others.
fn check_joined_side(rels: &[Rel], right: bool, full: bool) -> Result<()> {
    if right
        && rels
            .last()
            .and_then(|r| r.source.as_deref())
            .is_some_and(|s| matches!(s, VirtualSource::Function { .. } | VirtualSource::Lateral(_)))
    {
        // It may read the left side, which is read after it.
        return Err(SqlError::unsupported("RIGHT JOIN to a function or LATERAL subquery in FROM"));
    }
    if full {
        // Read whole once per execution: a side that depends on
        // an outer row or the left side would not be.
        let side = rels.last().and_then(|r| r.source.as_deref());
        if !matches!(
            side,
            None | Some(
                VirtualSource::System(_)
                    | VirtualSource::Query(_)
                    | VirtualSource::Shared { .. }
                    | VirtualSource::Returning(_)
            )
        ) {
            return Err(SqlError::unsupported("FULL JOIN to a function, LATERAL or correlated subquery"));
        }
    }
    Ok(())
}

fn join_spec(chain: usize, left: bool, right: bool, full: bool, constraint: Option<&ast::JoinConstraint>) -> JoinSpec {
    let mut spec =
        JoinSpec { chain, left, on: None, using: Vec::new(), natural: false, right, full, inner_on: Vec::new() };
    match constraint {
        Some(ast::JoinConstraint::On(e)) => spec.on = Some(e.clone()),
        Some(ast::JoinConstraint::Using(cols)) => {
            spec.using =
                cols.iter().map(|c| c.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default()).collect();
        }
        Some(ast::JoinConstraint::Natural) => spec.natural = true,
        Some(ast::JoinConstraint::None) | None => {}
    }
    spec
}

/// `(a JOIN b ...) AS j` is `(SELECT * FROM a JOIN b ...) AS j`: the
/// join's columns in `*`'s order (USING's merged ones first), a and b
/// hidden behind j, as in PostgreSQL. Its items could not see the FROM
/// items before it (LATERAL) as a subquery that is not LATERAL itself.
fn nested_as_subquery(
    twj: &ast::TableWithJoins,
    alias: &ast::TableAlias,
    after_others: bool,
) -> Result<ast::TableFactor> {
    if after_others && reads_before(twj) {
        return Err(SqlError::unsupported(
            "LATERAL subquery or function inside a parenthesized join with an alias after other FROM items",
        ));
    }
    let sql = "SELECT * FROM pgtier_nested_join";
    let mut subquery = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| SqlError::new("XX000", format!("parenthesized join: {e}")))?;
    let ast::SetExpr::Select(select) = subquery.body.as_mut() else {
        return Err(SqlError::new("XX000", "parenthesized join: not a SELECT"));
    };
    select.from = vec![twj.clone()];
    Ok(ast::TableFactor::Derived { lateral: false, subquery, alias: Some(alias.clone()), sample: None })
}

/// Whether a FROM item in a join may read the FROM items before it.
fn reads_before(twj: &ast::TableWithJoins) -> bool {
    let item = |f: &ast::TableFactor| match f {
        ast::TableFactor::NestedJoin { table_with_joins, .. } => reads_before(table_with_joins),
        ast::TableFactor::Table { args, .. } => args.is_some(),
        ast::TableFactor::Derived { lateral, .. } => *lateral,
        _ => true,
    };
    item(&twj.relation) || twj.joins.iter().any(|j| item(&j.relation))
}

/// A parenthesized join of inner joins with ON or CROSS JOIN, as are the
/// parenthesized joins without an alias in it.
fn plain_inner(twj: &ast::TableWithJoins) -> bool {
    let plain = |f: &ast::TableFactor| match f {
        ast::TableFactor::NestedJoin { table_with_joins, alias: None } => plain_inner(table_with_joins),
        _ => true,
    };
    plain(&twj.relation)
        && twj.joins.iter().all(|j| {
            plain(&j.relation)
                && matches!(
                    j.join_operator,
                    ast::JoinOperator::Join(ast::JoinConstraint::On(_))
                        | ast::JoinOperator::Inner(ast::JoinConstraint::On(_))
                        | ast::JoinOperator::CrossJoin(ast::JoinConstraint::None)
                )
        })
}

fn nested_unsupported() -> SqlError {
    SqlError::unsupported(
        "parenthesized join without an alias on the right of a join, unless it and its joins are inner joins with ON",
    )
}

/// The arguments of a function in FROM, positional (jsonb_path_ functions
/// also take `name => value`).
fn table_function_args(fname: &str, args: &[ast::FunctionArg]) -> Result<Vec<ast::Expr>> {
    let mut exprs = Vec::new();
    let mut named = Vec::new();
    for a in args {
        match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) if named.is_empty() => exprs.push(e.clone()),
            a if super::json::takes_named_args(fname) => named.push(super::json::named_arg(a, fname)?),
            _ => return Err(SqlError::unsupported(format!("argument form in {fname}()"))),
        }
    }
    if !named.is_empty() {
        exprs = super::json::path_named_args(exprs, named, fname)?;
    }
    Ok(exprs)
}
