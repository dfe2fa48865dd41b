//! CREATE TYPE ... AS (...), CREATE DOMAIN, DROP TYPE / DOMAIN
//! (catalog/user_types.rs), and what reads them:
//! `json[b]_populate_record[set](NULL::t, doc)` in FROM, whose row type is
//! composite type t's attributes (crate::value::json_record, as
//! json[b]_to_record[set] with t's attributes as the column definition
//! list; a domain attribute's values checked against the domain).
//!
//! pgtier has no composite, enum or domain values: every other use of a
//! user-defined type's name (a table column, a cast, a populate base that
//! is not NULL) is refused with 0A000.

use std::sync::Arc;

use pgtier_engine::{DataType, TableSchema};
use sqlparser::ast::{self, ObjectName};

use super::{Binder, ExprCtx, Scope, ident, parts};
use crate::catalog::user_types::{AttrType, DomainDoc, TypeDef, TypeDoc, UserType, user_type_named};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::plan::{BoundCheck, ColumnDomain, Plan, TableFunc, VirtualSource};

/// `json[b]_populate_record[set]`: (jsonb, set).
pub(super) fn populate_kind(name: &str) -> Option<(bool, bool)> {
    match name {
        "json_populate_record" => Some((false, false)),
        "jsonb_populate_record" => Some((true, false)),
        "json_populate_recordset" => Some((false, true)),
        "jsonb_populate_recordset" => Some((true, true)),
        _ => None,
    }
}

/// CREATE TYPE, CREATE DOMAIN, DROP TYPE, DROP DOMAIN.
pub(super) fn is_type_statement(stmt: &ast::Statement) -> bool {
    matches!(
        stmt,
        ast::Statement::CreateType { .. }
            | ast::Statement::CreateDomain(_)
            | ast::Statement::DropDomain(_)
            | ast::Statement::Drop { object_type: ast::ObjectType::Type, .. }
    )
}

/// A type name as the unqualified name of a user-defined type: `t` or
/// `public.t` (pgtier makes them in public only). An unqualified name is
/// refused where PostgreSQL would look elsewhere: a CREATE whose search
/// path does not start with public, a lookup whose path lacks it.
fn type_name_of(name: &ObjectName, path: &crate::catalog::search_path::SearchPath, creating: bool) -> Result<String> {
    let outside = || SqlError::unsupported(format!("user-defined types outside schema public ({name})"));
    match parts(name)?.as_slice() {
        [_] if creating && path.schemas.first().map(String::as_str) != Some("public") => Err(outside()),
        [_] if !path.schemas.iter().any(|s| s == "public") => Err(outside()),
        [n] => Ok(n.clone()),
        [s, n] if s == "public" => Ok(n.clone()),
        _ => Err(outside()),
    }
}

/// The user-defined type an AST type names, and whether as an array of it.
fn named_user_type(dt: &ast::DataType) -> Option<(&ObjectName, bool)> {
    match dt {
        ast::DataType::Custom(name, mods) if mods.is_empty() => Some((name, false)),
        ast::DataType::Array(ast::ArrayElemTypeDef::SquareBracket(inner, _)) => match inner.as_ref() {
            ast::DataType::Custom(name, mods) if mods.is_empty() => Some((name, true)),
            _ => None,
        },
        _ => None,
    }
}

impl Binder<'_> {
    /// `map_type`, with a user-defined type's name refused (0A000) where
    /// pgtier would say it does not exist.
    pub(super) fn column_type(&mut self, dt: &ast::DataType) -> Result<DataType> {
        super::map_type(dt).map_err(|e| self.user_type_refusal(e, dt))
    }

    pub(super) fn user_type_refusal(&self, e: SqlError, dt: &ast::DataType) -> SqlError {
        let named = named_user_type(dt).and_then(|(n, _)| type_name_of(n, self.path, false).ok());
        match named.and_then(|n| user_type_named(self.catalog, &n)) {
            Some(t) if e.sqlstate == "42704" => SqlError::unsupported(format!(
                "values of user-defined type {} (only json[b]_populate_record[set] reads one)",
                t.name
            )),
            _ => e,
        }
    }

    /// The user-defined type `name` names, as a dependency of the plan.
    fn use_user_type(&mut self, name: &ObjectName) -> Result<Option<UserType>> {
        let Some(t) = user_type_named(self.catalog, &type_name_of(name, self.path, false)?) else { return Ok(None) };
        if !self.deps.iter().any(|d| Arc::ptr_eq(d, &t.table)) {
            self.deps.push(Arc::clone(&t.table));
        }
        Ok(Some(t))
    }

    /// CREATE TYPE, CREATE DOMAIN, DROP TYPE, DROP DOMAIN.
    pub(super) fn type_statement(&mut self, stmt: &ast::Statement) -> Result<Plan> {
        match stmt {
            ast::Statement::CreateType { name, representation } => self.create_type(name, representation.as_ref()),
            ast::Statement::CreateDomain(d) => self.create_domain(d),
            ast::Statement::Drop { object_type: ast::ObjectType::Type, if_exists, names, cascade, .. } => {
                self.drop_types(names, *if_exists, *cascade, false)
            }
            ast::Statement::DropDomain(d) => self.drop_types(
                std::slice::from_ref(&d.name),
                d.if_exists,
                matches!(d.drop_behavior, Some(ast::DropBehavior::Cascade)),
                true,
            ),
            _ => Err(SqlError::new("XX000", "not a type statement")),
        }
    }

    fn create_type(
        &mut self,
        name: &ObjectName,
        representation: Option<&ast::UserDefinedTypeRepresentation>,
    ) -> Result<Plan> {
        let name = type_name_of(name, self.path, true)?;
        let attributes = match representation {
            Some(ast::UserDefinedTypeRepresentation::Composite { attributes }) => attributes,
            Some(ast::UserDefinedTypeRepresentation::Enum { .. }) => {
                return Err(SqlError::unsupported("CREATE TYPE ... AS ENUM"));
            }
            Some(ast::UserDefinedTypeRepresentation::Range { .. }) => {
                return Err(SqlError::unsupported("CREATE TYPE ... AS RANGE"));
            }
            _ => return Err(SqlError::unsupported("CREATE TYPE of a base or shell type")),
        };
        let mut columns: Vec<(String, DataType)> = Vec::with_capacity(attributes.len());
        let mut attr_types = Vec::with_capacity(attributes.len());
        for a in attributes {
            if a.collation.is_some() {
                return Err(SqlError::unsupported("COLLATE in CREATE TYPE"));
            }
            let attr = ident(&a.name);
            if columns.iter().any(|(n, _)| *n == attr) {
                return Err(SqlError::new("42701", format!("column \"{attr}\" specified more than once")));
            }
            let (ty, user) = self.attribute_type(&a.data_type)?;
            columns.push((attr, ty));
            attr_types.push(user);
        }
        if columns.is_empty() {
            // The engine table that keeps it wants a column.
            return Err(SqlError::unsupported("composite types without attributes"));
        }
        if columns.len() > 1600 {
            return Err(SqlError::new("54011", "tables can have at most 1600 columns"));
        }
        let doc = TypeDoc { owner: String::new(), attr_types, domain: None };
        Ok(Plan::CreateType(Box::new(TypeDef { name, columns, doc })))
    }

    /// An attribute's engine type, and the user-defined type it is of.
    fn attribute_type(&mut self, dt: &ast::DataType) -> Result<(DataType, Option<AttrType>)> {
        let err = match super::map_type(dt) {
            Ok(ty) => return Ok((ty, None)),
            Err(e) => e,
        };
        let Some((name, array)) = named_user_type(dt) else { return Err(err) };
        let Some(t) = self.use_user_type(name)? else { return Err(err) };
        let attr = AttrType { name: t.name.clone(), array };
        match (t.is_domain(), array) {
            (true, true) => Err(SqlError::unsupported("arrays of domains")),
            (true, false) => Ok((t.base_type(), Some(attr))),
            // The engine column of a composite attribute is a placeholder.
            (false, _) => Ok((DataType::Text, Some(attr))),
        }
    }

    fn create_domain(&mut self, d: &ast::CreateDomain) -> Result<Plan> {
        let name = type_name_of(&d.name, self.path, true)?;
        if d.collation.is_some() {
            return Err(SqlError::unsupported("CREATE DOMAIN ... COLLATE"));
        }
        if d.default.is_some() {
            return Err(SqlError::unsupported("CREATE DOMAIN ... DEFAULT"));
        }
        let base = self.column_type(&d.data_type).map_err(|e| match named_user_type(&d.data_type) {
            Some(_) if e.sqlstate == "0A000" => SqlError::unsupported("domains over user-defined types"),
            _ => e,
        })?;
        let mut checks: Vec<(String, String)> = Vec::new();
        let table = crate::bind::detached(&name, vec![("value".to_owned(), base)]);
        let unnamed = d.constraints.iter().filter(|c| matches!(c, ast::TableConstraint::Check(c) if c.name.is_none()));
        let mut not_null = false;
        let mut auto_names = (0..unnamed.count()).map(|k| match k {
            0 => format!("{name}_check"),
            k => format!("{name}_check{k}"),
        });
        for c in &d.constraints {
            let ast::TableConstraint::Check(c) = c else {
                return Err(SqlError::unsupported("domain constraints other than CHECK"));
            };
            if c.name.as_ref().is_some_and(|n| n.value == crate::dialect::DOMAIN_NOT_NULL) {
                not_null = true;
                continue;
            }
            // Bound now for its errors; bound again where the domain is used.
            self.check_expr(&table, &c.expr)?;
            let cname = c.name.as_ref().map(ident).or_else(|| auto_names.next()).unwrap_or_default();
            checks.push((cname, c.expr.to_string()));
        }
        checks.sort_by(|a, b| a.0.cmp(&b.0));
        let doc =
            TypeDoc { owner: String::new(), attr_types: Vec::new(), domain: Some(DomainDoc { not_null, checks }) };
        Ok(Plan::CreateType(Box::new(TypeDef { name, columns: vec![("value".to_owned(), base)], doc })))
    }

    fn drop_types(&self, names: &[ObjectName], if_exists: bool, cascade: bool, domain: bool) -> Result<Plan> {
        let names = names.iter().map(|n| type_name_of(n, self.path, false)).collect::<Result<Vec<_>>>()?;
        Ok(Plan::DropType { names, if_exists, cascade, domain })
    }

    /// `ROW(...)::t`'s fields, each cast to its attribute's type (as
    /// PostgreSQL's coerce_record_to_complex, explicitly); refused for a
    /// type with an attribute of a user-defined type, whose values pgtier
    /// cannot check or hold.
    fn base_record(&mut self, t: &UserType, fields: &[ast::FunctionArg], scope: &Scope<'_>) -> Result<Vec<Expr>> {
        if fields.len() != t.columns.len() {
            let detail = if fields.len() < t.columns.len() { "too few" } else { "too many" };
            return Err(SqlError::new("42846", format!("cannot cast type record to {}", t.name))
                .with_detail(format!("Input has {detail} columns.")));
        }
        if t.uses().next().is_some() {
            return Err(SqlError::unsupported(format!(
                "a ROW(...) base of populate_record for type {} (an attribute of a user-defined type)",
                t.name
            )));
        }
        let mut out = Vec::with_capacity(fields.len());
        for (f, (_, ty)) in fields.iter().zip(&t.columns) {
            let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) = f else {
                return Err(SqlError::unsupported(format!("ROW argument {f}")));
            };
            let (x, xt) = self.expr(e, scope, &mut ExprCtx::plain("functions in FROM"))?;
            out.push(self.explicit_cast(x, xt, *ty)?.0);
        }
        Ok(out)
    }

    /// A domain's constraints bound over its one column `value`.
    fn column_domain(&mut self, t: &UserType) -> Result<ColumnDomain> {
        let doc = t.doc.domain.clone().unwrap_or(DomainDoc { not_null: false, checks: Vec::new() });
        let table: Arc<TableSchema> = crate::bind::detached(&t.name, vec![("value".to_owned(), t.base_type())]);
        let mut checks = Vec::with_capacity(doc.checks.len());
        for (name, sql) in &doc.checks {
            let e = sqlparser::parser::Parser::new(&crate::dialect::PgDialect::default())
                .try_with_sql(sql)
                .and_then(|mut p| p.parse_expr())?;
            checks.push(BoundCheck { name: name.clone(), expr: self.check_expr(&table, &e)? });
        }
        Ok(ColumnDomain { name: t.name.clone(), not_null: doc.not_null, checks })
    }

    /// `json[b]_populate_record[set](NULL::t, doc)` in FROM: the rows of
    /// json[b]_to_record[set] over t's attributes.
    pub(super) fn populate_record(
        &mut self,
        fname: &str,
        (jsonb, set): (bool, bool),
        exprs: &[ast::Expr],
        scope: &Scope<'_>,
        alias: Option<&ast::TableAlias>,
        ordinality: bool,
    ) -> Result<(Arc<TableSchema>, VirtualSource)> {
        let [base, doc] = exprs else {
            return Err(SqlError::unsupported(format!("{fname} with other than two arguments")));
        };
        // NULL::t, or ROW(...)::t: the base record's fields.
        let (ty, fields) = match base {
            ast::Expr::Cast { expr, data_type, .. } => {
                let fields = match expr.as_ref() {
                    ast::Expr::Value(v) if v.value == ast::Value::Null => Some(None),
                    ast::Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("row") => row_fields(f).map(Some),
                    _ => None,
                };
                (named_user_type(data_type).filter(|(_, array)| !array).map(|(n, _)| n), fields)
            }
            _ => (None, None),
        };
        // NULL::record: the row type is the column definition list's, as
        // json[b]_to_record[set]'s.
        if ty.is_some_and(|n| n.to_string().eq_ignore_ascii_case("record")) && fields == Some(None) {
            let doc = self.expr(doc, scope, &mut ExprCtx::plain("functions in FROM"))?;
            return self.json_to_record(fname, (jsonb, set), vec![doc], alias, ordinality);
        }
        let t = match ty {
            Some(name) => self.use_user_type(name)?,
            None => None,
        };
        let (Some(t), Some(fields)) = (t.filter(|t| !t.is_domain()), fields) else {
            // The base's own error first (42704 for a type that does not exist).
            self.expr(base, scope, &mut ExprCtx::plain("functions in FROM"))?;
            return Err(SqlError::unsupported(format!(
                "{fname} other than over NULL cast to a composite type made with CREATE TYPE"
            )));
        };
        if alias.is_some_and(|a| a.columns.iter().any(|c| c.data_type.is_some())) {
            return Err(SqlError::syntax(
                "a column definition list is only allowed for functions returning \"record\"",
            ));
        }
        if ordinality {
            return Err(SqlError::unsupported(format!("{fname} WITH ORDINALITY")));
        }
        let (e, ety) = self.expr(doc, scope, &mut ExprCtx::plain("functions in FROM"))?;
        let want = if jsonb { DataType::Jsonb } else { DataType::Json };
        let sig = format!("{fname}({}, {})", t.name, if jsonb { "jsonb" } else { "json" });
        let e = self.json_arg(e, ety, want, &sig)?;
        let mut args = vec![e];
        if let Some(fields) = fields {
            args.extend(self.base_record(&t, fields, scope)?);
        }
        let mut columns = Vec::with_capacity(t.columns.len());
        let mut domains = Vec::with_capacity(t.columns.len());
        for (k, (name, ty)) in t.columns.iter().enumerate() {
            let attr = t.doc.attr_types.get(k).cloned().flatten();
            let (ty, domain) = match attr {
                None => (*ty, None),
                Some(a) => match self.use_user_type(&ObjectName::from(vec![ast::Ident::new(&a.name)]))? {
                    Some(d) if d.is_domain() && !a.array => (d.base_type(), Some(self.column_domain(&d)?)),
                    _ => (crate::value::types::COMPOSITE_ATTR, None),
                },
            };
            columns.push((name.clone(), ty));
            domains.push(domain);
        }
        let cols = columns.clone();
        let spec = crate::value::json_record::RecordSpec { jsonb, set, columns, populate: true };
        Ok((
            crate::bind::detached(fname, cols),
            VirtualSource::Function {
                func: TableFunc::JsonToRecord(Arc::new(spec), domains.into()),
                args,
                ordinality: false,
            },
        ))
    }
}

/// The arguments of `ROW(...)`, None for another form of it.
fn row_fields(f: &ast::Function) -> Option<&[ast::FunctionArg]> {
    match &f.args {
        ast::FunctionArguments::List(l) if l.duplicate_treatment.is_none() && l.clauses.is_empty() => {
            Some(l.args.as_slice())
        }
        ast::FunctionArguments::None => Some(&[]),
        _ => None,
    }
}

/// A column's type as read: a composite attribute's placeholder is refused.
pub(super) fn readable(ty: DataType) -> Result<DataType> {
    if ty == crate::value::types::COMPOSITE_ATTR {
        return Err(SqlError::unsupported("reading a composite-typed attribute (pgtier has no composite values)"));
    }
    Ok(ty)
}
