//! Binder extensions for the system catalogs and the query forms catalog
//! queries use: system relations, subqueries / VALUES / table functions in
//! FROM, set operations, `reg*`/`oid`/array casts, `= ANY(array)`,
//! `ARRAY[...]`, `ARRAY(subquery)`, subscripts, regular-expression
//! operators, `COLLATE "default"`, and the system functions.

use std::sync::Arc;

use pgtier_engine::{DataType, TableSchema, Value};
use sqlparser::ast::{self, ObjectName};

use super::funcs;
use crate::expr::SysFunc;
use crate::types::{self, Elem, RegKind};
use crate::plan::{SetOp, SetTree, TableFunc, VirtualSource};
use crate::bind::{Binder, ExprCtx, Rel, Scope, Ty, common_type, ident, ordinal, output_name_match};
use crate::error::{Result, SqlError};
use crate::expr::{CmpOp, Expr, Func, SubqueryKind};
use crate::plan::{Access, Level, OutputColumn, SelectPlan, SortKey};
use crate::value::{self, Category, category};

/// Name parts as identifiers.
fn parts(name: &ObjectName) -> Result<Vec<String>> {
    name.0.iter().map(|p| p.as_ident().map(ident).ok_or_else(|| SqlError::unsupported(format!("name {name}")))).collect()
}

/// A function's name: `pg_catalog.f` is `f`.
pub fn function_name(name: &ObjectName) -> Result<String> {
    match parts(name)?.as_slice() {
        [n] => Ok(n.clone()),
        [s, n] if s == "pg_catalog" || s == "public" => Ok(n.clone()),
        [s, _] => Err(SqlError::new("3F000", format!("schema \"{s}\" does not exist"))),
        _ => Err(SqlError::unsupported(format!("name {name}"))),
    }
}

/// The system relation a table name refers to, if any.
pub fn system_relation(name: &ObjectName) -> Result<Option<crate::catalog::SystemRel>> {
    match parts(name)?.as_slice() {
        [n] => crate::catalog::resolve(None, n),
        [s, n] => match crate::catalog::resolve(Some(s), n)? {
            Some(r) => Ok(Some(r)),
            None if s == "pg_catalog" || s == "information_schema" => Err(SqlError::undefined_table(&format!("{s}.{n}"))),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}

/// What a `::type` names among the types only the SQL layer has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastTarget {
    Oid,
    /// `name`, `"char"`: text here.
    Name,
    Char,
    Reg(RegKind),
    RegProc,
    Array(Elem),
}

pub fn cast_target(t: &ast::DataType) -> Option<CastTarget> {
    match t {
        ast::DataType::Regclass => Some(CastTarget::Reg(RegKind::Class)),
        ast::DataType::Custom(name, mods) if mods.is_empty() => {
            let last = name.0.last()?.as_ident()?;
            let quoted = last.quote_style.is_some();
            let n = last.value.to_lowercase();
            Some(match n.as_str() {
                "char" if quoted => CastTarget::Char,
                "oid" => CastTarget::Oid,
                "name" => CastTarget::Name,
                "regclass" => CastTarget::Reg(RegKind::Class),
                "regtype" => CastTarget::Reg(RegKind::Type),
                "regnamespace" => CastTarget::Reg(RegKind::Namespace),
                "regrole" => CastTarget::Reg(RegKind::Role),
                "regproc" | "regprocedure" => CastTarget::RegProc,
                "int2vector" => CastTarget::Array(Elem::Int2Vector),
                "oidvector" => CastTarget::Array(Elem::OidVector),
                _ => return None,
            })
        }
        ast::DataType::Array(ast::ArrayElemTypeDef::SquareBracket(inner, None) | ast::ArrayElemTypeDef::AngleBracket(inner)) => {
            let elem = match cast_target(inner) {
                Some(CastTarget::Oid | CastTarget::Reg(_)) => Elem::Oid,
                Some(CastTarget::Name) => Elem::Text,
                Some(CastTarget::Char) => Elem::Char,
                Some(_) => return None,
                None => Elem::for_element(crate::bind::map_type(inner).ok()?)?,
            };
            Some(CastTarget::Array(elem))
        }
        _ => None,
    }
}

/// A FROM item that is not a stored table: its name, row shape and source.
pub(crate) type VirtualRel = (String, Arc<TableSchema>, Arc<VirtualSource>);

fn is_string(t: Ty) -> bool {
    t.is_some_and(|t| category(t) == Category::String && Elem::of(t).is_none())
}

impl Binder<'_> {
    /// The WITH query an unqualified FROM name refers to, innermost first.
    fn cte_index(&self, name: &ObjectName) -> Option<usize> {
        let [part] = name.0.as_slice() else { return None };
        let n = ident(part.as_ident()?);
        self.ctes.iter().rposition(|c| c.name == n)
    }

    /// Binds WITH query `k` for one reference: its plan, name and declared
    /// column names. Inside it, only the WITH queries before it are visible
    /// (no recursion), and nothing of the referencing query.
    fn bind_cte(&mut self, k: usize) -> Result<(SelectPlan, String, Vec<String>)> {
        self.ctes[k].uses += 1;
        let cte = self.ctes[k].cte.clone();
        let later = self.ctes.split_off(k);
        let correlated = self.correlated;
        let plan = self.query(&cte.query, None);
        self.correlated = correlated;
        self.ctes.extend(later);
        Ok((plan?, ident(&cte.alias.name), cte.alias.columns.iter().map(|c| ident(&c.name)).collect()))
    }

    /// A FROM item that is not a stored table: (default name, row shape, source).
    pub(crate) fn virtual_from(
        &mut self, factor: &ast::TableFactor, rels: &[Rel], outer: Option<&Scope<'_>>,
    ) -> Result<Option<VirtualRel>> {
        let (name, schema, source, alias) = match factor {
            ast::TableFactor::Table { name, alias, args: None, .. } if self.cte_index(name).is_some() => {
                let k = self.cte_index(name).unwrap_or_default();
                let (plan, cte_name, columns) = self.bind_cte(k)?;
                let mut cols: Vec<(String, DataType)> = plan.columns[..plan.visible].iter().map(|c| (c.name.clone(), c.ty.unwrap_or(DataType::Text))).collect();
                if columns.len() > cols.len() {
                    return Err(SqlError::new("42P10", format!("WITH query \"{cte_name}\" has {} columns available but {} columns specified", cols.len(), columns.len())));
                }
                for (c, new) in cols.iter_mut().zip(columns) {
                    c.0 = new;
                }
                (cte_name.clone(), super::detached(&cte_name, cols), VirtualSource::Query(SetTree::Select(Box::new(plan))), alias)
            }
            ast::TableFactor::Table { name, alias, args: None, .. } => {
                let Some(rel) = system_relation(name)? else { return Ok(None) };
                (rel.def().name.to_owned(), rel.schema(), VirtualSource::System(rel), alias)
            }
            ast::TableFactor::Table { name, alias, args: Some(targs), with_ordinality, .. } => {
                if targs.settings.is_some() {
                    return Err(SqlError::unsupported("table function settings"));
                }
                let fname = function_name(name)?;
                let mut exprs = Vec::new();
                for a in &targs.args {
                    let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) = a else {
                        return Err(SqlError::unsupported(format!("argument form in {fname}()")));
                    };
                    exprs.push(e.clone());
                }
                let (schema, source) = self.function_from(&fname, &exprs, alias.as_ref(), *with_ordinality, rels, outer)?;
                (fname, schema, source, alias)
            }
            ast::TableFactor::UNNEST { alias, array_exprs, with_offset: false, with_offset_alias: None, with_ordinality } => {
                let (schema, source) = self.function_from("unnest", array_exprs, alias.as_ref(), *with_ordinality, rels, outer)?;
                ("unnest".to_owned(), schema, source, alias)
            }
            ast::TableFactor::Derived { lateral, subquery, alias, .. } => {
                if *lateral {
                    return Err(SqlError::unsupported("LATERAL"));
                }
                let Some(a) = alias else {
                    return Err(SqlError::syntax("subquery in FROM must have an alias").with_hint("For example, FROM (SELECT ...) [AS] foo."));
                };
                let plan = self.query(subquery, outer)?;
                let cols = plan.columns[..plan.visible].iter().map(|c| (c.name.clone(), c.ty.unwrap_or(DataType::Text))).collect();
                let n = ident(&a.name);
                (n.clone(), super::detached(&n, cols), VirtualSource::Query(SetTree::Select(Box::new(plan))), alias)
            }
            _ => return Ok(None),
        };
        let mut schema = schema;
        let mut rname = name;
        if let Some(a) = alias {
            rname = ident(&a.name);
            if !a.columns.is_empty() {
                if a.columns.len() > schema.columns.len() {
                    return Err(SqlError::new("42P10", format!("table \"{rname}\" has {} columns available but {} columns specified", schema.columns.len(), a.columns.len())));
                }
                let mut cols: Vec<(String, DataType)> = schema.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
                for (c, new) in cols.iter_mut().zip(&a.columns) {
                    c.0 = ident(&new.name);
                }
                schema = super::detached(&rname, cols);
            }
        }
        Ok(Some((rname, schema, Arc::new(source))))
    }

    /// A set-returning function in FROM; its arguments see the FROM items before it.
    fn function_from(
        &mut self, fname: &str, exprs: &[ast::Expr], alias: Option<&ast::TableAlias>, ordinality: bool, rels: &[Rel], outer: Option<&Scope<'_>>,
    ) -> Result<(Arc<TableSchema>, VirtualSource)> {
        let scope = Scope { rels: rels.to_vec(), hidden: Vec::new(), outer };
        let mut args = Vec::new();
        for e in exprs {
            args.push(self.expr(e, &scope, &mut ExprCtx::plain("functions in FROM"))?);
        }
        let (func, args, ty) = self.table_function(fname, args)?;
        let mut cols = vec![(fname.to_owned(), ty)];
        if ordinality {
            cols.push(("ordinality".to_owned(), DataType::Int8));
        }
        // A scalar function's one column takes the alias's name.
        if let Some(a) = alias
            && a.columns.is_empty() {
                cols[0].0 = ident(&a.name);
            }
        Ok((super::detached(fname, cols), VirtualSource::Function { func, args, ordinality }))
    }

    fn table_function(&mut self, name: &str, args: Vec<(Expr, Ty)>) -> Result<(TableFunc, Vec<Expr>, DataType)> {
        let sig = || {
            let types: Vec<&str> = args.iter().map(|(_, t)| t.map_or("unknown", value::type_name)).collect();
            format!("{name}({})", types.join(", "))
        };
        match (name, args.len()) {
            ("generate_series", 2 | 3) => {
                let int8 = args.iter().any(|(_, t)| *t == Some(DataType::Int8));
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
                let ty = if elem == Elem::Oid || elem == Elem::OidVector { DataType::Int8 } else { elem.element_type() };
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

    /// A query whose body is a set operation or VALUES.
    pub(crate) fn set_query(&mut self, q: &ast::Query, outer: Option<&Scope<'_>>) -> Result<SelectPlan> {
        let (mut tree, mut leaves) = self.set_tree(&q.body, outer)?;
        let width = leaves.first().map_or(0, |l| l.len());
        let mut types = Vec::with_capacity(width);
        for k in 0..width {
            let col: Vec<Ty> = leaves.iter().map(|l| l[k].ty).collect();
            types.push(common_type(&col, "UNION")?.unwrap_or(DataType::Text));
        }
        self.cast_leaves(&mut tree, &types, &mut leaves.iter())?;
        let names: Vec<String> = leaves.swap_remove(0).into_iter().map(|c| c.name).collect();
        let columns: Vec<OutputColumn> = names.iter().zip(&types).map(|(n, t)| OutputColumn { name: n.clone(), ty: Some(*t) }).collect();
        let table = super::detached("*SELECT*", names.iter().cloned().zip(types.iter().copied()).collect());
        let mut order_by = Vec::new();
        if let Some(ob) = &q.order_by {
            let ast::OrderByKind::Expressions(items) = &ob.kind else { return Err(SqlError::unsupported("ORDER BY ALL")) };
            for item in items {
                let desc = item.options.asc == Some(false);
                let nulls_first = item.options.nulls_first.unwrap_or(desc);
                let column = match ordinal(&item.expr) {
                    Some(pos) if pos >= 1 && pos <= width => pos - 1,
                    Some(pos) => return Err(SqlError::new("42P10", format!("ORDER BY position {pos} is not in select list"))),
                    None => output_name_match(&item.expr, &columns).ok_or_else(|| {
                        SqlError::unsupported("ORDER BY on a UNION/INTERSECT/EXCEPT result other than column names or numbers")
                    })?,
                };
                order_by.push(SortKey { column, desc, nulls_first });
            }
        }
        let (limit, offset) = self.limit_offset(q)?;
        if !q.locks.is_empty() {
            return Err(SqlError::unsupported("FOR UPDATE with UNION/INTERSECT/EXCEPT"));
        }
        let level = Level {
            table,
            offset: 0,
            access: Access::Virtual(Arc::new(VirtualSource::Query(tree))),
            exact_key: false,
            left_join: false,
            filters: Vec::new(),
            key_checks: Vec::new(),
            post_filters: Vec::new(),
        };
        Ok(SelectPlan {
            levels: vec![level],
            width,
            final_filters: Vec::new(),
            agg: None,
            windows: Vec::new(),
            projection: (0..width).map(Expr::Column).collect(),
            visible: width,
            distinct: false,
            distinct_on: Vec::new(),
            order_by,
            limit,
            offset,
            for_update: false,
            columns,
            point_lookup: false,
            projects_columns: false,
            level_masks: Vec::new(),
        })
    }

    /// Binds a set-operation tree; returns it and the output columns of each leaf, left to right.
    fn set_tree(&mut self, body: &ast::SetExpr, outer: Option<&Scope<'_>>) -> Result<(SetTree, Vec<Vec<OutputColumn>>)> {
        match body {
            ast::SetExpr::Select(s) => {
                let q = ast::Query {
                    with: None,
                    body: Box::new(ast::SetExpr::Select(s.clone())),
                    order_by: None,
                    limit_clause: None,
                    fetch: None,
                    locks: Vec::new(),
                    for_clause: None,
                    settings: None,
                    format_clause: None,
                    pipe_operators: Vec::new(),
                };
                let plan = self.select(s, &q, outer)?;
                let cols = plan.columns[..plan.visible].to_vec();
                Ok((SetTree::Select(Box::new(plan)), vec![cols]))
            }
            ast::SetExpr::Query(q) => {
                let plan = self.query(q, outer)?;
                let cols = plan.columns[..plan.visible].to_vec();
                Ok((SetTree::Select(Box::new(plan)), vec![cols]))
            }
            ast::SetExpr::Values(v) => {
                let scope = Scope { rels: Vec::new(), hidden: Vec::new(), outer };
                let mut rows = Vec::new();
                let mut types: Vec<Vec<Ty>> = Vec::new();
                for row in &v.rows {
                    if rows.first().is_some_and(|r: &Vec<Expr>| r.len() != row.len()) {
                        return Err(SqlError::syntax("VALUES lists must all be the same length"));
                    }
                    let mut out = Vec::new();
                    for (k, e) in row.iter().enumerate() {
                        let (b, t) = self.expr(e, &scope, &mut ExprCtx::plain("VALUES"))?;
                        if types.len() <= k {
                            types.push(Vec::new());
                        }
                        types[k].push(t);
                        out.push(b);
                    }
                    rows.push(out);
                }
                let mut cols = Vec::new();
                for (k, ts) in types.iter().enumerate() {
                    let common = common_type(ts, "VALUES")?.or(Some(DataType::Text));
                    for (r, t) in rows.iter_mut().zip(ts) {
                        let e = std::mem::replace(&mut r[k], Expr::Const(Value::Null));
                        r[k] = self.result_cast(e, *t, common)?;
                    }
                    cols.push(OutputColumn { name: format!("column{}", k + 1), ty: common });
                }
                Ok((SetTree::Values(rows), vec![cols]))
            }
            ast::SetExpr::SetOperation { op, set_quantifier, left, right } => {
                let op = match op {
                    ast::SetOperator::Union => SetOp::Union,
                    ast::SetOperator::Intersect => SetOp::Intersect,
                    ast::SetOperator::Except => SetOp::Except,
                    other => return Err(SqlError::unsupported(format!("{other}"))),
                };
                let all = match set_quantifier {
                    ast::SetQuantifier::All => true,
                    ast::SetQuantifier::Distinct | ast::SetQuantifier::None => false,
                    other => return Err(SqlError::unsupported(format!("{other}"))),
                };
                let (l, mut lcols) = self.set_tree(left, outer)?;
                let (r, rcols) = self.set_tree(right, outer)?;
                let (lw, rw) = (lcols[0].len(), rcols[0].len());
                if lw != rw {
                    let name = match op {
                        SetOp::Union => "UNION",
                        SetOp::Intersect => "INTERSECT",
                        SetOp::Except => "EXCEPT",
                    };
                    return Err(SqlError::syntax(format!("each {name} query must have the same number of columns")));
                }
                lcols.extend(rcols);
                Ok((SetTree::Op { op, all, left: Box::new(l), right: Box::new(r) }, lcols))
            }
            _ => Err(SqlError::unsupported("this query form")),
        }
    }

    /// Casts each leaf's columns to the set's column types (`leaves` in
    /// the order [`Self::set_tree`] returned them).
    fn cast_leaves(&mut self, tree: &mut SetTree, types: &[DataType], leaves: &mut std::slice::Iter<'_, Vec<OutputColumn>>) -> Result<()> {
        match tree {
            SetTree::Op { left, right, .. } => {
                self.cast_leaves(left, types, leaves)?;
                self.cast_leaves(right, types, leaves)?;
            }
            leaf => {
                let cols = leaves.next().ok_or_else(|| SqlError::new("XX000", "set operation leaves out of step"))?;
                for (k, ty) in types.iter().enumerate() {
                    let t = cols[k].ty;
                    if t == Some(*ty) {
                        continue;
                    }
                    match leaf {
                        SetTree::Select(plan) => {
                            let e = std::mem::replace(&mut plan.projection[k], Expr::Const(Value::Null));
                            plan.projection[k] = self.result_cast(e, t, Some(*ty))?;
                        }
                        SetTree::Values(rows) => {
                            for r in rows.iter_mut() {
                                let e = std::mem::replace(&mut r[k], Expr::Const(Value::Null));
                                r[k] = self.result_cast(e, t, Some(*ty))?;
                            }
                        }
                        SetTree::Op { .. } => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// `x::regclass` and friends.
    fn reg_cast(&mut self, x: Expr, t: Ty, kind: RegKind) -> Result<(Expr, Ty)> {
        let ty = Some(kind.data_type());
        match (&x, t) {
            (Expr::Const(Value::Text(s)), None) | (Expr::Const(Value::Text(s)), Some(DataType::Text | DataType::Varchar(_))) if kind != RegKind::Role => {
                let settings = std::collections::HashMap::new();
                let oid = crate::catalog::reg_lookup(self.catalog, &settings, kind, s)?;
                // The plan depends on the table it named: re-plan when it goes.
                if let Some(t) = crate::catalog::table_by_oid(self.catalog, oid)
                    && !self.deps.iter().any(|d| Arc::ptr_eq(d, t)) {
                        self.deps.push(t.clone());
                    }
                Ok((Expr::Const(Value::Int8(oid)), ty))
            }
            (Expr::Const(Value::Null), _) => Ok((x, ty)),
            (_, None) => {
                let x = self.coerce(x, None, DataType::Text, "::")?;
                Ok((Expr::Func(Func::Sys(SysFunc::RegIn(kind, false)), vec![x]), ty))
            }
            (_, Some(t)) if value::is_integer(t) || RegKind::of(t).is_some() => Ok((x, ty)),
            (_, Some(t)) if is_string(Some(t)) => Ok((Expr::Func(Func::Sys(SysFunc::RegIn(kind, false)), vec![x]), ty)),
            (_, Some(t)) => Err(cannot_cast(t, &format!("reg{:?}", kind).to_lowercase())),
        }
    }

    /// Casts involving the SQL-layer-only types; None for ordinary casts.
    pub(crate) fn sys_cast(&mut self, x: Expr, t: Ty, target: Option<CastTarget>, plain: Option<DataType>) -> Result<Option<(Expr, Ty)>> {
        if let Some(target) = target {
            return Ok(Some(match target {
                CastTarget::Reg(kind) => self.reg_cast(x, t, kind)?,
                CastTarget::Oid => match t {
                    Some(t) if RegKind::of(t).is_some() || value::is_integer(t) => (if t == DataType::Int8 || RegKind::of(t).is_some() { x } else { Expr::Cast(x.boxed(), DataType::Int8, true) }, Some(types::OID)),
                    None => (self.coerce(x, None, types::OID, "::")?, Some(types::OID)),
                    Some(t) if is_string(Some(t)) => (Expr::Cast(x.boxed(), types::OID, true), Some(types::OID)),
                    Some(t) => return Err(cannot_cast(t, "oid")),
                },
                CastTarget::Name | CastTarget::Char | CastTarget::RegProc => {
                    let x = match (t, &x) {
                        (Some(t), _) if RegKind::of(t).is_some() => Expr::Func(Func::Sys(SysFunc::RegOut(RegKind::of(t).unwrap_or(RegKind::Class))), vec![x]),
                        (None, Expr::Const(Value::Text(s))) if target == CastTarget::RegProc => {
                            Expr::Const(Value::Text(s.strip_prefix("pg_catalog.").unwrap_or(s).to_owned()))
                        }
                        (None, _) => self.coerce(x, None, DataType::Text, "::")?,
                        (Some(DataType::Char(_)), _) => Expr::BpcharTrim(x.boxed()),
                        (Some(t), _) if is_string(Some(t)) => x,
                        (Some(_), _) if target == CastTarget::RegProc => return Err(SqlError::unsupported("regproc from an oid")),
                        (Some(_), _) => Expr::Cast(x.boxed(), DataType::Text, true),
                    };
                    (x, Some(DataType::Text))
                }
                CastTarget::Array(elem) => {
                    let ty = elem.data_type();
                    match (t, x) {
                        (None | Some(DataType::Text), Expr::Const(Value::Text(s))) => (Expr::Const(types::array_input(&s, elem)?), Some(ty)),
                        (_, Expr::Const(Value::Null)) => (Expr::Const(Value::Null), Some(ty)),
                        (None, x) => (self.coerce(x, None, DataType::Text, "::")?, Some(ty)),
                        (Some(from), x) if Elem::of(from) == Some(elem) => (x, Some(ty)),
                        (Some(from), x) => match Elem::of(from) {
                            Some(f) => (Expr::Func(Func::Sys(SysFunc::ArrayCast(f, elem)), vec![x]), Some(ty)),
                            None => return Err(cannot_cast(from, "array")),
                        },
                    }
                }
            }));
        }
        // An ordinary target type from a pseudo type.
        let (Some(from), Some(to)) = (t, plain) else { return Ok(None) };
        if let Some(kind) = RegKind::of(from) {
            if category(to) == Category::String {
                let name = Expr::Func(Func::Sys(SysFunc::RegOut(kind)), vec![x]);
                return Ok(Some((if to == DataType::Text { name } else { Expr::Cast(name.boxed(), to, true) }, Some(to))));
            }
            if value::is_integer(to) {
                return Ok(Some((Expr::Cast(x.boxed(), to, true), Some(to))));
            }
            return Err(cannot_cast(from, value::type_name(to)));
        }
        if Elem::of(from).is_some() {
            if category(to) == Category::String {
                return Ok(Some((if to == DataType::Text { x } else { Expr::Cast(x.boxed(), to, true) }, Some(to))));
            }
            return Err(cannot_cast(from, value::type_name(to)));
        }
        Ok(None)
    }

    /// `lhs op ANY (array or subquery)`.
    pub(crate) fn sys_any(&mut self, left: &ast::Expr, op: &ast::BinaryOperator, right: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        let cmp = match op {
            ast::BinaryOperator::Eq => CmpOp::Eq,
            ast::BinaryOperator::NotEq => CmpOp::NotEq,
            ast::BinaryOperator::Lt => CmpOp::Lt,
            ast::BinaryOperator::LtEq => CmpOp::LtEq,
            ast::BinaryOperator::Gt => CmpOp::Gt,
            ast::BinaryOperator::GtEq => CmpOp::GtEq,
            other => return Err(SqlError::unsupported(format!("operator {other} ANY"))),
        };
        if let ast::Expr::Subquery(q) = right {
            if cmp != CmpOp::Eq {
                return Err(SqlError::unsupported(format!("{} ANY (subquery)", cmp.symbol())));
            }
            let e = ast::Expr::InSubquery { expr: Box::new(left.clone()), subquery: q.clone(), negated: false };
            return self.expr(&e, scope, ctx);
        }
        let (x, xt) = self.expr(left, scope, ctx)?;
        let (a, at) = self.expr(right, scope, ctx)?;
        let elem = match at {
            Some(t) => Elem::of(t).ok_or_else(|| SqlError::new("42809", "op ANY/ALL (array) requires array on right side"))?,
            None => match xt.and_then(Elem::for_element) {
                Some(e) => e,
                None => Elem::Text,
            },
        };
        let a = if at.is_none() { self.array_literal(a, elem)? } else { a };
        let want = elem.element_type();
        let x = match xt {
            None => self.coerce(x, None, want, "ANY")?,
            Some(DataType::Char(_)) => Expr::BpcharTrim(x.boxed()),
            Some(t) if category(t) == category(want) || RegKind::of(t).is_some() => x,
            Some(t) => return Err(SqlError::undefined_operator(&format!("{} {} {}[]", value::type_name(t), cmp.symbol(), value::type_name(want)))),
        };
        Ok((Expr::Func(Func::Sys(SysFunc::Any(cmp, elem)), vec![x, a]), Some(DataType::Bool)))
    }

    fn array_literal(&mut self, a: Expr, elem: Elem) -> Result<Expr> {
        match a {
            Expr::Const(Value::Text(s)) => Ok(Expr::Const(types::array_input(&s, elem)?)),
            Expr::Param(i) => {
                self.params[i] = Some(DataType::Text);
                Ok(Expr::Param(i))
            }
            other => Ok(other),
        }
    }

    /// `ARRAY[a, b, ...]`.
    pub(crate) fn array_constructor(&mut self, items: &[ast::Expr], scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        let mut bound = Vec::new();
        for i in items {
            bound.push(self.expr(i, scope, ctx)?);
        }
        let types: Vec<Ty> = bound.iter().map(|b| b.1).collect();
        let common = common_type(&types, "ARRAY")?.unwrap_or(DataType::Text);
        let elem = Elem::for_element(common).ok_or_else(|| SqlError::unsupported(format!("arrays of {}", value::type_name(common))))?;
        let mut out = Vec::new();
        for (e, t) in bound {
            out.push(self.result_cast(e, t, Some(elem.element_type()))?);
        }
        Ok((Expr::Func(Func::Sys(SysFunc::MakeArray(elem)), out), Some(elem.data_type())))
    }

    /// `ARRAY(subquery)`.
    pub(crate) fn array_subquery(&mut self, q: &ast::Query, scope: &Scope<'_>) -> Result<(Expr, Ty)> {
        let (plan, correlated) = self.subquery(q, scope)?;
        if plan.visible != 1 {
            return Err(SqlError::syntax("subquery must return only one column"));
        }
        let t = plan.columns[0].ty.unwrap_or(DataType::Text);
        let elem = if RegKind::of(t).is_some() { Some(Elem::Oid) } else { Elem::for_element(t) };
        let elem = elem.ok_or_else(|| SqlError::unsupported(format!("ARRAY() of {}", value::type_name(t))))?;
        Ok((self.sub_expr(SubqueryKind::Array(elem), false, correlated, plan), Some(elem.data_type())))
    }

    /// `arr[i]`.
    pub(crate) fn subscript(&mut self, root: &ast::Expr, chain: &[ast::AccessExpr], scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        let [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] = chain else {
            return Err(SqlError::unsupported("this field access or array slice"));
        };
        let (a, at) = self.expr(root, scope, ctx)?;
        let elem = at.and_then(Elem::of).ok_or_else(|| SqlError::new("42804", "cannot subscript type because it does not support subscripting"))?;
        let (i, it) = self.expr(index, scope, ctx)?;
        let i = match it {
            None => self.coerce(i, None, DataType::Int4, "subscript")?,
            Some(t) if value::is_integer(t) => i,
            Some(_) => return Err(SqlError::new("42804", "array subscript must have type integer")),
        };
        Ok((Expr::Func(Func::Sys(SysFunc::Subscript(elem)), vec![a, i]), Some(elem.element_type())))
    }

    /// `~`, `~*`, `!~`, `!~*` (also as `OPERATOR(pg_catalog.~)`); None if `op` is not one.
    pub(crate) fn regex_op(&mut self, left: &ast::Expr, op: &ast::BinaryOperator, right: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<Option<(Expr, Ty)>> {
        use ast::BinaryOperator as B;
        let (negated, case_insensitive) = match op {
            B::StringConcat if is_array_ast(left) || is_array_ast(right) => return self.array_concat(left, right, scope, ctx).map(Some),
            B::PGRegexMatch => (false, false),
            B::PGRegexIMatch => (false, true),
            B::PGRegexNotMatch => (true, false),
            B::PGRegexNotIMatch => (true, true),
            B::PGCustomBinaryOperator(parts) => {
                let sym = match parts.as_slice() {
                    [s] => s.as_str(),
                    [schema, s] if schema.eq_ignore_ascii_case("pg_catalog") => s.as_str(),
                    _ => return Err(SqlError::unsupported(format!("operator {op}"))),
                };
                let plain = match sym {
                    "~" => return self.regex_op(left, &B::PGRegexMatch, right, scope, ctx),
                    "~*" => return self.regex_op(left, &B::PGRegexIMatch, right, scope, ctx),
                    "!~" => return self.regex_op(left, &B::PGRegexNotMatch, right, scope, ctx),
                    "!~*" => return self.regex_op(left, &B::PGRegexNotIMatch, right, scope, ctx),
                    "=" => B::Eq,
                    "<>" | "!=" => B::NotEq,
                    "<" => B::Lt,
                    "<=" => B::LtEq,
                    ">" => B::Gt,
                    ">=" => B::GtEq,
                    "~~" => {
                        let e = ast::Expr::Like { negated: false, any: false, expr: Box::new(left.clone()), pattern: Box::new(right.clone()), escape_char: None };
                        return self.expr(&e, scope, ctx).map(Some);
                    }
                    _ => return Err(SqlError::unsupported(format!("operator {op}"))),
                };
                let e = ast::Expr::BinaryOp { left: Box::new(left.clone()), op: plain, right: Box::new(right.clone()) };
                return self.expr(&e, scope, ctx).map(Some);
            }
            _ => return Ok(None),
        };
        let (x, xt) = self.expr(left, scope, ctx)?;
        let (p, pt) = self.expr(right, scope, ctx)?;
        let sym = op.to_string();
        let x = self.text_arg(x, xt, &sym)?;
        let p = self.text_arg(p, pt, &sym)?;
        Ok(Some((Expr::Func(Func::Sys(SysFunc::Regex { negated, case_insensitive }), vec![x, p]), Some(DataType::Bool))))
    }

    /// `array || array` (either side may be NULL, as in PostgreSQL).
    fn array_concat(&mut self, left: &ast::Expr, right: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        let (x, xt) = self.expr(left, scope, ctx)?;
        let (y, yt) = self.expr(right, scope, ctx)?;
        let elem = xt.and_then(Elem::of).or_else(|| yt.and_then(Elem::of)).ok_or_else(|| SqlError::unsupported("|| on arrays of unknown type"))?;
        let x = if xt.is_none() { self.array_literal(x, elem)? } else { x };
        let y = if yt.is_none() { self.array_literal(y, elem)? } else { y };
        for t in [xt, yt].into_iter().flatten() {
            if Elem::of(t) != Some(elem) {
                return Err(SqlError::undefined_operator(&format!("{} || {}", value::type_name(t), value::type_name(elem.data_type()))));
            }
        }
        Ok((Expr::Func(Func::Sys(SysFunc::ArrayConcat(elem)), vec![x, y]), Some(elem.data_type())))
    }

    /// `x COLLATE name`: only the collations that compare as pgtier does.
    pub(crate) fn collate(&mut self, x: &ast::Expr, collation: &ObjectName, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        let name = parts(collation)?;
        let last = name.last().map(String::as_str).unwrap_or("");
        let schema_ok = name.len() == 1 || name[0] == "pg_catalog";
        if !(schema_ok && matches!(last, "default" | "C" | "POSIX" | "c" | "posix")) {
            return Err(SqlError::unsupported(format!("COLLATE {collation} (only \"default\", \"C\" and \"POSIX\")")));
        }
        self.expr(x, scope, ctx)
    }

    /// System functions, after the builtin scalar functions.
    pub(crate) fn sys_function(&mut self, name: &str, bound: Vec<(Expr, Ty)>) -> Result<Option<(Expr, Ty)>> {
        if name == "pg_partition_ancestors" {
            return Err(SqlError::unsupported("pg_partition_ancestors() outside FROM or a SELECT list without FROM"));
        }
        // A regclass argument (nextval('s')) is looked up as `::regclass` would.
        let mut coerce = |e: Expr, t: Ty, to: DataType| match RegKind::of(to) {
            Some(kind) => self.reg_cast(e, t, kind).map(|(e, _)| e),
            None => self.coerce(e, t, to, name),
        };
        funcs::bind_function(name, bound, &mut coerce)
    }

    /// `current_schema` written without parentheses.
    pub(crate) fn keyword_function(&mut self, name: &str) -> Result<Option<(Expr, Ty)>> {
        match name {
            "current_schema" => self.sys_function(name, Vec::new()),
            _ => Ok(None),
        }
    }
}

/// Written as an array (`ARRAY[...]`, `ARRAY(subquery)`, `::type[]`): `||` on it is array concatenation.
fn is_array_ast(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Array(_) => true,
        ast::Expr::Function(f) => function_name(&f.name).is_ok_and(|n| n == "array") && matches!(f.args, ast::FunctionArguments::Subquery(_)),
        ast::Expr::Cast { data_type, .. } => matches!(cast_target(data_type), Some(CastTarget::Array(_))),
        ast::Expr::Nested(inner) => is_array_ast(inner),
        _ => false,
    }
}

fn cannot_cast(from: DataType, to: &str) -> SqlError {
    SqlError::new("42846", format!("cannot cast type {} to {to}", value::type_name(from)))
}

/// Top-level output: reg* columns print as names; pseudo types show as text.
pub fn finish_output(plan: &mut SelectPlan) {
    for k in 0..plan.visible {
        let Some(t) = plan.columns[k].ty else { continue };
        if let Some(kind) = RegKind::of(t) {
            // Sorting stays by OID, as PostgreSQL sorts regclass: sort keys
            // on this column move to a hidden copy.
            if plan.order_by.iter().any(|s| s.column == k) {
                plan.projection.push(plan.projection[k].clone());
                plan.columns.push(OutputColumn { name: "?column?".into(), ty: Some(t) });
                let hidden = plan.projection.len() - 1;
                for s in &mut plan.order_by {
                    if s.column == k {
                        s.column = hidden;
                    }
                }
            }
            let e = std::mem::replace(&mut plan.projection[k], Expr::Const(Value::Null));
            plan.projection[k] = Expr::Func(Func::Sys(SysFunc::RegOut(kind)), vec![e]);
        }
        plan.columns[k].ty = Some(types::output_type(t));
    }
}

/// `SELECT srf(args) [AS a]` without FROM, for the set-returning functions
/// pgtier has, as `SELECT f AS a FROM srf(args) f`: the function's rows,
/// possibly none (PostgreSQL's SRF-in-target-list for this simple case).
pub fn srf_select(s: &ast::Select) -> Option<ast::Select> {
    if !s.from.is_empty() || s.selection.is_some() || s.projection.len() != 1 {
        return None;
    }
    let (e, alias) = match &s.projection[0] {
        ast::SelectItem::UnnamedExpr(e) => (e, None),
        ast::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.clone())),
        _ => return None,
    };
    let ast::Expr::Function(f) = e else { return None };
    let name = function_name(&f.name).ok()?;
    if !matches!(name.as_str(), "pg_partition_ancestors" | "generate_series" | "unnest") {
        return None;
    }
    let ast::FunctionArguments::List(list) = &f.args else { return None };
    let fn_alias = ast::Ident::new("__srf");
    let mut out = s.clone();
    out.from = vec![ast::TableWithJoins {
        relation: ast::TableFactor::Table {
            name: f.name.clone(),
            alias: Some(ast::TableAlias { explicit: true, name: fn_alias.clone(), columns: Vec::new(), at: None }),
            args: Some(ast::TableFunctionArgs { args: list.args.clone(), settings: None }),
            with_hints: Vec::new(),
            version: None,
            with_ordinality: false,
            partitions: Vec::new(),
            json_path: None,
            sample: None,
            index_hints: Vec::new(),
        },
        joins: Vec::new(),
    }];
    out.projection = vec![ast::SelectItem::ExprWithAlias { expr: ast::Expr::Identifier(fn_alias), alias: alias.unwrap_or_else(|| ast::Ident::new(name)) }];
    Some(out)
}
