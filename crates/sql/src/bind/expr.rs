//! Expressions: names, literals, parameters, CASE, subqueries, and the
//! dispatch to operators, functions and casts.

use std::sync::Arc;

use pgtier_engine::{DataType, Value};
use sqlparser::ast;

use super::cast::{CastTarget, cast_target};
use super::coerce::{common_type, constant_truth, is_untyped_value, map_type, refuse_padded_literals};
use super::{Binder, ExprCtx, Scope, Ty, ident, missing_from, truncate};
use crate::catalog::partitions::{PARTITIONED_READ, is_partitioned};
use crate::error::{Result, SqlError};
use crate::expr::{CmpOp, Expr, Func, Subquery, SubqueryKind, SysFunc};
use crate::plan::{SelectPlan, TableFunc, VirtualSource};
use crate::value::types;
use crate::value::{self, Category, NUMERIC_ANY, category, type_name};

impl Binder<'_> {
    fn param(&mut self, text: &str) -> Result<(Expr, Ty)> {
        let n: usize = text
            .strip_prefix('$')
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| SqlError::syntax(format!("syntax error at or near \"{text}\"")))?;
        if n == 0 || n > 65_535 {
            return Err(SqlError::new("42P02", format!("there is no parameter ${n}")));
        }
        if self.params.len() < n {
            self.params.resize(n, None);
        }
        Ok((Expr::Param(n - 1), self.params[n - 1]))
    }

    fn resolve_column(&mut self, qualifier: Option<&str>, name: &str, scope: &Scope<'_>) -> Result<(Expr, Ty)> {
        if let Some((pos, ty)) = lookup(scope, qualifier, name)? {
            if self.plpgsql_variable(qualifier, name) {
                return Err(plpgsql_ambiguous(qualifier, name));
            }
            // Unqualified, a merged USING column is its conversion.
            if qualifier.is_none()
                && let Some((_, e, t)) = scope.merged.iter().find(|(p, ..)| *p == pos)
            {
                return Ok((e.clone(), Some(*t)));
            }
            return Ok((Expr::Column(pos), Some(ty)));
        }
        if name == "tableoid"
            && let Some(found) = self.tableoid(scope, qualifier)?
        {
            return Ok(found);
        }
        if let Some(outer) = scope.outer {
            if name == "tableoid" && !system_column_rels(outer, qualifier).is_empty() {
                return Err(SqlError::unsupported("tableoid of a row of an enclosing query"));
            }
            if let Some((pos, ty)) = lookup(outer, qualifier, name)? {
                if qualifier.is_none() && outer.merged.iter().any(|(p, ..)| *p == pos) {
                    return Err(SqlError::unsupported(
                        "a merged JOIN USING column of another type referenced from a subquery",
                    ));
                }
                self.correlated = true;
                return Ok((Expr::Outer(pos), Some(ty)));
            }
            if let Some(o2) = outer.outer
                && lookup(o2, qualifier, name)?.is_some()
            {
                return Err(SqlError::unsupported("a subquery referencing a query two levels out"));
            }
        }
        if let Some(arg) = self.function_argument(qualifier, name) {
            return Ok(arg);
        }
        match qualifier {
            Some(q)
                if !scope.rels.iter().any(|r| r.name == q)
                    && !scope.outer.is_some_and(|o| o.rels.iter().any(|r| r.name == q)) =>
            {
                Err(missing_from(q))
            }
            Some(q) => Err(SqlError::undefined_column(&format!("{q}.{name}"))),
            None => Err(SqlError::undefined_column(&format!("\"{name}\""))),
        }
    }

    /// The system column `tableoid` of the FROM item `qualifier` names
    /// (or the only one with system columns): a stored table's OID, or
    /// for a partitioned table the partition that holds the row.
    fn tableoid(&mut self, scope: &Scope<'_>, qualifier: Option<&str>) -> Result<Option<(Expr, Ty)>> {
        let rels = system_column_rels(scope, qualifier);
        let rel = match rels.as_slice() {
            [] => return Ok(None),
            [rel] => *rel,
            _ => return Err(SqlError::ambiguous_column("tableoid")),
        };
        let read = rel.table.annotation.as_deref().and_then(|a| a.strip_prefix(PARTITIONED_READ));
        let stored = match (&rel.source, read) {
            (None, _) => Arc::clone(&rel.table),
            (Some(_), Some(name)) => self
                .catalog
                .table_by_name(name)
                .cloned()
                .ok_or_else(|| SqlError::new("XX000", "a partitioned table read in FROM is gone"))?,
            (Some(_), None) => return Err(SqlError::unsupported("tableoid of a system catalog")),
        };
        let e = if is_partitioned(&stored) {
            self.routed_tableoid(&stored, &stored, rel.offset)?
        } else {
            Expr::Const(Value::Int8(crate::catalog::table_oid(&stored)))
        };
        Ok(Some((e, Some(types::OID))))
    }

    /// `(row).field` on a `_pg_expandarray` row (fields x and n).
    pub(super) fn record_field(
        &mut self,
        root: &ast::Expr,
        field: &ast::Ident,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<Option<(Expr, Ty)>> {
        let (row, ty) = self.expr(root, scope, ctx)?;
        let Some(elem) = ty.and_then(types::expand_record_elem) else { return Ok(None) };
        let (k, field_ty) = match ident(field).as_str() {
            "x" => (0, elem.element_type()),
            "n" => (1, DataType::Int4),
            other => {
                return Err(SqlError::new(
                    "42703",
                    format!("could not identify column \"{other}\" in record data type"),
                ));
            }
        };
        Ok(Some((Expr::Func(Func::Sys(SysFunc::RecordField(elem, k)), vec![row]), Some(field_ty))))
    }

    pub(super) fn expr(&mut self, e: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        use ast::Expr as E;
        match e {
            E::Identifier(i) => self.identifier(i, scope),
            E::CompoundIdentifier(parts) => match parts.as_slice() {
                [q, c] => self.resolve_column(Some(&ident(q)), &ident(c), scope).map_err(|err| err.at(q.span)),
                [s, q, c] => self.schema_qualified_column(s, q, c, scope),
                _ => Err(SqlError::unsupported(format!("name {e}"))),
            },
            E::Value(v) => self.literal(&v.value),
            E::TypedString(ts) => typed_string(ts),
            E::Interval(iv) => self.interval_literal(iv),
            E::Nested(inner) => self.expr(inner, scope, ctx),
            E::UnaryOp { op, expr } => self.unary(op, expr, scope, ctx),
            E::BinaryOp { left, op, right } => match self.regex_op(left, op, right, scope, ctx)? {
                Some(done) => Ok(done),
                None => match self.json_op(left, op, right, scope, ctx)? {
                    Some(done) => Ok(done),
                    None => self.binary(left, op, right, scope, ctx),
                },
            },
            E::AnyOp { left, compare_op, right, .. } => self.sys_any(left, compare_op, right, false, scope, ctx),
            E::AllOp { left, compare_op, right } => self.sys_any(left, compare_op, right, true, scope, ctx),
            E::Collate { expr, collation } => self.collate(expr, collation, scope, ctx),
            E::Array(a) => self.array_constructor(&a.elem, scope, ctx),
            E::CompoundFieldAccess { root, access_chain } => self.subscript(root, access_chain, scope, ctx),
            E::IsNull(x)
            | E::IsNotNull(x)
            | E::IsUnknown(x)
            | E::IsNotUnknown(x)
            | E::IsTrue(x)
            | E::IsNotTrue(x)
            | E::IsFalse(x)
            | E::IsNotFalse(x) => self.is_test(e, x, scope, ctx),
            E::IsDistinctFrom(a, b) | E::IsNotDistinctFrom(a, b) => {
                let (x, y) = self.comparable(a, b, scope, ctx, "IS DISTINCT FROM")?;
                Ok((
                    Expr::IsDistinct(x.boxed(), y.boxed(), matches!(e, E::IsNotDistinctFrom(..))),
                    Some(DataType::Bool),
                ))
            }
            E::Between { expr, negated, low, high } => self.between(expr, low, high, *negated, scope, ctx),
            E::InList { expr, list, negated } => self.in_list(expr, list, *negated, scope, ctx),
            E::Like { .. } | E::ILike { .. } => self.like_forms(e, scope, ctx),
            E::SimilarTo { negated, expr, pattern, escape_char } => {
                self.similar_to(expr, pattern, escape_char.as_ref(), *negated, scope, ctx)
            }
            E::Case { operand, conditions, else_result, .. } => {
                self.case(operand.as_deref(), conditions, else_result.as_deref(), scope, ctx)
            }
            E::Cast { kind, expr, data_type, format: None, .. } => self.cast_expr(kind, expr, data_type, scope, ctx),
            E::Function(f) => self.function(f, scope, ctx),
            E::AtTimeZone { timestamp, time_zone } => self.at_time_zone(timestamp, time_zone, scope, ctx),
            E::Extract { field, expr, .. } => {
                let (x, t) = self.expr(expr, scope, ctx)?;
                self.extract(&field.to_string(), x, t, true)
            }
            E::Substring { expr, substring_from, substring_for, .. } => {
                let mut args = vec![(**expr).clone()];
                args.push(
                    substring_from
                        .as_deref()
                        .cloned()
                        .unwrap_or(ast::Expr::value(ast::Value::Number("1".into(), false))),
                );
                if let Some(f) = substring_for {
                    args.push((**f).clone());
                }
                // substring(x FROM pattern) is a regular expression when the pattern is text.
                self.scalar_function("substring", &args, scope, ctx)
            }
            E::Trim { expr, trim_where, trim_what, trim_characters: None } => {
                let name = match trim_where {
                    None | Some(ast::TrimWhereField::Both) => "btrim",
                    Some(ast::TrimWhereField::Leading) => "ltrim",
                    Some(ast::TrimWhereField::Trailing) => "rtrim",
                };
                let mut args = vec![(**expr).clone()];
                if let Some(w) = trim_what {
                    args.push((**w).clone());
                }
                self.scalar_function(name, &args, scope, ctx)
            }
            E::Overlay { expr, overlay_what, overlay_from, overlay_for } => {
                let mut args = vec![(**expr).clone(), (**overlay_what).clone(), (**overlay_from).clone()];
                args.extend(overlay_for.as_deref().cloned());
                self.scalar_function("overlay", &args, scope, ctx)
            }
            E::Position { expr, r#in } => {
                self.scalar_function("position", &[(**expr).clone(), (**r#in).clone()], scope, ctx)
            }
            E::Ceil { expr, field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime) } => {
                self.scalar_function("ceil", &[(**expr).clone()], scope, ctx)
            }
            E::Floor { expr, field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime) } => {
                self.scalar_function("floor", &[(**expr).clone()], scope, ctx)
            }
            E::Exists { subquery, negated } => {
                let (plan, correlated) = self.subquery(subquery, scope)?;
                Ok((self.sub_expr(SubqueryKind::Exists, *negated, correlated, plan), Some(DataType::Bool)))
            }
            E::Subquery(q) => {
                let (plan, correlated) = self.subquery(q, scope)?;
                if plan.visible != 1 {
                    return Err(SqlError::syntax("subquery must return only one column"));
                }
                // An untyped literal or NULL the sub-SELECT returns is text,
                // as PostgreSQL resolves a subquery's unknown output columns
                // (so `1 = (SELECT '1')` is 42883, not true).
                let ty = plan.columns[0].ty.or(Some(DataType::Text));
                Ok((self.sub_expr(SubqueryKind::Scalar { column: 0 }, false, correlated, plan), ty))
            }
            E::InSubquery { expr, subquery, negated } => self.in_subquery(expr, subquery, *negated, scope, ctx),
            other => Err(SqlError::unsupported(format!("expression {}", truncate(&other.to_string())))),
        }
    }

    /// `x [NOT] BETWEEN low AND high`: both comparisons, each resolved on its own.
    fn between(
        &mut self,
        expr: &ast::Expr,
        low: &ast::Expr,
        high: &ast::Expr,
        negated: bool,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let (x1, lo) = self.comparable(expr, low, scope, ctx, "BETWEEN")?;
        let (x2, hi) = self.comparable(expr, high, scope, ctx, "BETWEEN")?;
        let both = Expr::And(vec![
            Expr::Cmp(CmpOp::GtEq, x1.boxed(), lo.boxed()),
            Expr::Cmp(CmpOp::LtEq, x2.boxed(), hi.boxed()),
        ]);
        Ok((if negated { Expr::Not(both.boxed()) } else { both }, Some(DataType::Bool)))
    }

    /// `x IS [NOT] NULL | UNKNOWN | TRUE | FALSE`, `e` being the test.
    fn is_test(&mut self, e: &ast::Expr, x: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        use ast::Expr as E;
        let (b, t) = self.expr(x, scope, ctx)?;
        let test = match e {
            E::IsNull(_) | E::IsNotNull(_) => Expr::IsNull(b.boxed(), matches!(e, E::IsNotNull(_))),
            // IS [NOT] UNKNOWN: IS [NOT] NULL of a boolean.
            E::IsUnknown(_) | E::IsNotUnknown(_) => {
                let b = self.boolean(b, t, "IS UNKNOWN")?;
                Expr::IsNull(b.boxed(), matches!(e, E::IsNotUnknown(_)))
            }
            _ => {
                let b = self.boolean(b, t, "IS TRUE")?;
                let target = matches!(e, E::IsTrue(_) | E::IsNotTrue(_));
                let negated = matches!(e, E::IsNotTrue(_) | E::IsNotFalse(_));
                Expr::IsBool(b.boxed(), target, negated)
            }
        };
        Ok((test, Some(DataType::Bool)))
    }

    /// A bare name: a column, else a FROM item's whole row, else a function
    /// SQL spells without parentheses (current_date).
    fn identifier(&mut self, i: &ast::Ident, scope: &Scope<'_>) -> Result<(Expr, Ty)> {
        match self.resolve_column(None, &ident(i), scope) {
            Err(err)
                if err.sqlstate == "42703"
                    && let Some(row) = whole_row(scope, &ident(i)) =>
            {
                Ok(row)
            }
            Err(err) if err.sqlstate == "42703" && i.quote_style.is_none() => {
                self.keyword_function(&ident(i))?.ok_or_else(|| err.at(i.span))
            }
            Err(err) => Err(err.at(i.span)),
            other => other,
        }
    }

    /// `schema.table.column` (ORMs qualify catalog columns so): the innermost
    /// FROM item named `table` must come from that schema.
    fn schema_qualified_column(
        &mut self,
        s: &ast::Ident,
        q: &ast::Ident,
        c: &ast::Ident,
        scope: &Scope<'_>,
    ) -> Result<(Expr, Ty)> {
        let (schema, table) = (ident(s), ident(q));
        // Two FROM items may share a reference name when they
        // are different relations of different schemas.
        if let Some(r) = scope.rels.iter().find(|r| r.name == table && r.schema_name() == Some(schema.as_str())) {
            let col = ident(c);
            if let Some(k) = r.table.visible_columns().iter().position(|x| x.name == col) {
                return Ok((Expr::Column(r.offset + k), Some(r.table.visible_columns()[k].ty)));
            }
        }
        let named =
            std::iter::successors(Some(scope), |sc| sc.outer).find_map(|sc| sc.rels.iter().find(|r| r.name == table));
        match named {
            Some(rel) if rel.schema_name() == Some(schema.as_str()) => {
                self.resolve_column(Some(&table), &ident(c), scope).map_err(|err| err.at(s.span))
            }
            _ => Err(missing_from(&table).at(s.span)),
        }
    }

    /// `INTERVAL '...'`, with the precision the dialect's `interval(p) '...'` gives.
    fn interval_literal(&mut self, iv: &ast::Interval) -> Result<(Expr, Ty)> {
        let ast::Expr::Value(v) = iv.value.as_ref() else {
            return Err(SqlError::unsupported("INTERVAL of an expression"));
        };
        let ast::Value::SingleQuotedString(text) = &v.value else {
            return Err(SqlError::unsupported("INTERVAL of a non-string literal"));
        };
        // `interval(p) '...'` (the dialect's form) prints as `INTERVAL
        // '...' (p)` and reads back as a leading precision without a
        // field (a view's stored query).
        let typmod = super::interval_fns::literal_typmod(iv)?;
        let v = crate::value::interval_in::parse(text, typmod)?;
        Ok((Expr::Const(Value::Interval(v)), Some(DataType::Interval)))
    }

    /// NOT, unary minus and plus.
    fn unary(
        &mut self,
        op: &ast::UnaryOperator,
        expr: &ast::Expr,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        if matches!(op, ast::UnaryOperator::Minus)
            && let ast::Expr::Value(v) = expr
            && let ast::Value::Number(n, long) = &v.value
        {
            // PostgreSQL folds the sign into the literal: -2147483648 is an integer.
            return self.literal(&ast::Value::Number(format!("-{n}"), *long));
        }
        let (x, t) = self.expr(expr, scope, ctx)?;
        match op {
            ast::UnaryOperator::Not => Ok((Expr::Not(self.boolean(x, t, "NOT")?.boxed()), Some(DataType::Bool))),
            ast::UnaryOperator::Minus => {
                // Folded only once the type has a `-` (a NULL
                // text constant has none either).
                if let (Expr::Const(v), Some(ty)) = (&x, t)
                    && matches!(category(ty), Category::Numeric | Category::Interval)
                {
                    return Ok((self.folded(value::negate(v), || Expr::Neg(x.clone().boxed()))?, t));
                }
                match t {
                    Some(ty) if matches!(category(ty), Category::Numeric | Category::Interval) => {
                        Ok((Expr::Neg(x.boxed()), t))
                    }
                    None => {
                        let x = self.coerce(x, None, DataType::Float8, "-")?;
                        Ok((Expr::Neg(x.boxed()), Some(DataType::Float8)))
                    }
                    Some(ty) => Err(SqlError::undefined_operator(&format!("- {}", type_name(ty)))),
                }
            }
            ast::UnaryOperator::Plus => Ok((x, t)),
            other => self.prefix_operator(other, x, t),
        }
    }

    /// `x [NOT] IN (items)`: one IN of the items' common type, unless the
    /// items read columns.
    fn in_list(
        &mut self,
        expr: &ast::Expr,
        list: &[ast::Expr],
        negated: bool,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let (x, xt) = self.expr(expr, scope, ctx)?;
        let mut items = Vec::new();
        let mut types = vec![xt];
        for item in list {
            let (b, t) = self.expr(item, scope, ctx)?;
            items.push(b);
            types.push(t);
        }
        // One item, or items reading columns: PostgreSQL compares
        // item by item (transformAExprIn).
        if items.len() == 1 || items.iter().any(has_vars) {
            return self.in_list_with_vars(x, xt, items, &types[1..], negated);
        }
        let common = common_type(&types, "IN")?;
        let x = self.coerce_common(x, xt, common)?;
        let mut out = Vec::new();
        for (b, t) in items.into_iter().zip(types.into_iter().skip(1)) {
            out.push(self.coerce_common(b, t, common)?);
        }
        Ok((Expr::InList { expr: x.boxed(), list: out, negated }, Some(DataType::Bool)))
    }

    /// [NOT] LIKE / ILIKE without ESCAPE: of a pattern, or ANY / ALL of an array.
    fn like_forms(&mut self, e: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        let (ast::Expr::Like { negated, any, expr, pattern, escape_char }
        | ast::Expr::ILike { negated, any, expr, pattern, escape_char }) = e
        else {
            return Err(SqlError::unsupported("this LIKE form"));
        };
        let ci = matches!(e, ast::Expr::ILike { .. });
        if let Some(esc) = escape_char {
            if *any || super::array::like_all_operand(pattern).is_some() {
                return Err(SqlError::unsupported("LIKE ANY / ALL with ESCAPE"));
            }
            let pattern = like_pattern(pattern, Some(esc))?;
            return self.like(expr, &pattern, *negated, ci, scope, ctx);
        }
        match (any, super::array::like_all_operand(pattern)) {
            (true, _) => self.like_any(expr, super::array::Operand::of(pattern), (*negated, ci, false), scope, ctx),
            (false, Some(list)) => self.like_any(expr, list, (*negated, ci, true), scope, ctx),
            (false, None) => self.like(expr, pattern, *negated, ci, scope, ctx),
        }
    }

    /// [NOT] LIKE / ILIKE without ANY (the pattern rewritten by like_pattern when it had an ESCAPE).
    fn like(
        &mut self,
        expr: &ast::Expr,
        pattern: &ast::Expr,
        negated: bool,
        case_insensitive: bool,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let (x, xt) = self.expr(expr, scope, ctx)?;
        let (p, pt) = self.expr(pattern, scope, ctx)?;
        // bytea LIKE bytea (bytealike; no ILIKE of bytea), an unknown
        // literal read as bytea.
        let bytea = Some(DataType::Bytea);
        if !case_insensitive
            && (xt == bytea || pt == bytea)
            && xt.is_none_or(|t| t == DataType::Bytea)
            && pt.is_none_or(|t| t == DataType::Bytea)
        {
            let x = self.coerce(x, xt, DataType::Bytea, "~~")?;
            let p = self.coerce(p, pt, DataType::Bytea, "~~")?;
            return Ok((
                Expr::Like { expr: x.boxed(), pattern: p.boxed(), negated, case_insensitive },
                Some(DataType::Bool),
            ));
        }
        // char(n) LIKE matches the padded value (PostgreSQL's
        // bpcharlike); the pattern, a text argument, loses its padding.
        let x = if matches!(xt, Some(DataType::Char(_))) { x } else { self.text_arg(x, xt, "~~")? };
        let p = self.text_arg(p, pt, "~~")?;
        Ok((Expr::Like { expr: x.boxed(), pattern: p.boxed(), negated, case_insensitive }, Some(DataType::Bool)))
    }

    /// `x [NOT] SIMILAR TO p [ESCAPE e]` is PostgreSQL's rewrite of it:
    /// `x ~ similar_to_escape(p [, e])` (`!~` when negated).
    fn similar_to(
        &mut self,
        expr: &ast::Expr,
        pattern: &ast::Expr,
        escape: Option<&ast::ValueWithSpan>,
        negated: bool,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let x = self.expr(expr, scope, ctx)?;
        let mut args = vec![pattern.clone()];
        args.extend(escape.map(|e| ast::Expr::Value(e.clone())));
        let p = self.scalar_function("similar_to_escape", &args, scope, ctx)?;
        self.regex_match(x, p, negated, false)
    }

    /// `CAST(x AS t)` and `x::t`.
    fn cast_expr(
        &mut self,
        kind: &ast::CastKind,
        expr: &ast::Expr,
        data_type: &ast::DataType,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        if !matches!(kind, ast::CastKind::Cast | ast::CastKind::DoubleColon) {
            return Err(SqlError::unsupported(format!("{kind:?}")));
        }
        if let ast::DataType::Interval { fields, precision } = data_type
            && let Some(typmod) = super::interval_fns::type_typmod(*fields, *precision)?
        {
            return self.interval_typmod_cast(kind, expr, typmod, scope, ctx);
        }
        let target = cast_target(data_type);
        // ARRAY[] has no type of its own: only a cast gives it one.
        if let (ast::Expr::Array(a), Some(CastTarget::Array(elem))) = (expr, target)
            && a.elem.is_empty()
        {
            return Ok((Expr::Const(crate::value::types::array_input("{}", elem)?), Some(elem.data_type())));
        }
        if let (ast::Expr::Array(a), None) = (expr, target)
            && a.elem.is_empty()
        {
            let ty = map_type(data_type)?;
            if matches!(ty, DataType::Array(_)) {
                return Ok((Expr::Const(Value::Array(Vec::new())), Some(ty)));
            }
        }
        let ty = match target {
            Some(_) => DataType::Text,
            None => self.column_type(data_type)?,
        };
        if matches!(ty, DataType::Float4 | DataType::Float8)
            && let Some(f) = wide_numeric_literal(expr)
        {
            // A literal beyond numeric's 38 digits (-1e300): PostgreSQL
            // converts numeric to float through its text, as this does.
            let v = if ty == DataType::Float4 { value::cast(Value::Float8(f), ty, true)? } else { Value::Float8(f) };
            return Ok((Expr::Const(v), Some(ty)));
        }
        let (x, t) = self.expr(expr, scope, ctx)?;
        let pseudo = |t: DataType| crate::value::types::is_pseudo(t) && !crate::value::types::is_text_search(t);
        if target.is_some() || t.is_some_and(pseudo) {
            return self
                .sys_cast(x, t, target, target.is_none().then_some(ty))?
                .ok_or_else(|| SqlError::unsupported(format!("cast to {data_type}")));
        }
        self.explicit_cast(x, t, ty)
    }

    /// A bound expression of type `t` cast explicitly to `ty` (its check,
    /// an unknown literal read as `ty`, a constant folded).
    pub(super) fn explicit_cast(&mut self, x: Expr, t: Ty, ty: DataType) -> Result<(Expr, Ty)> {
        if let Some(from) = t {
            super::cast::check_cast(from, ty)?;
        }
        // char(n) to text or varchar drops its trailing blanks (rtrim1).
        let x = match (t, x) {
            (Some(DataType::Char(_)), Expr::Const(Value::Text(s)))
                if matches!(ty, DataType::Text | DataType::Varchar(_)) =>
            {
                Expr::Const(Value::Text(value::bpchar_trim(&s).to_owned()))
            }
            (Some(DataType::Char(_)), x) if matches!(ty, DataType::Text | DataType::Varchar(_)) => {
                Expr::BpcharTrim(x.boxed())
            }
            (_, x) => x,
        };
        match (t, x) {
            (None, Expr::Const(Value::Text(s))) if category(ty) == Category::String => {
                Ok((Expr::Const(value::cast(Value::Text(s), ty, true)?), Some(ty)))
            }
            (None, Expr::Const(Value::Text(s))) => Ok((Expr::Const(value::parse_input(&s, ty)?), Some(ty))),
            (None, Expr::Param(i)) => {
                self.params[i] = Some(ty);
                Ok((Expr::Param(i), Some(ty)))
            }
            (_, Expr::Const(v)) => Ok((
                self.folded(value::cast(v.clone(), ty, true), || Expr::Cast(Expr::Const(v).boxed(), ty, true))?,
                Some(ty),
            )),
            (_, x) => Ok((Expr::Cast(x.boxed(), ty, true), Some(ty))),
        }
    }

    /// `x::interval <fields>(p)`: an unknown literal read with the typmod
    /// (its fields decide what `1:2` means); anything else cast to
    /// interval, then cut to the typmod as interval(interval, int4) does.
    fn interval_typmod_cast(
        &mut self,
        kind: &ast::CastKind,
        expr: &ast::Expr,
        typmod: crate::value::interval_in::Typmod,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        use crate::value::interval_in;
        if let ast::Expr::Value(v) = expr
            && let ast::Value::SingleQuotedString(s) = &v.value
        {
            return Ok((Expr::Const(Value::Interval(interval_in::parse(s, typmod)?)), Some(DataType::Interval)));
        }
        let plain = ast::DataType::Interval { fields: None, precision: None };
        let (x, t) = self.cast_expr(kind, expr, &plain, scope, ctx)?;
        let x = match x {
            Expr::Const(Value::Interval(v)) => Expr::Const(Value::Interval(interval_in::adjust(v, typmod)?)),
            Expr::Const(Value::Null) => x,
            x => Expr::Func(Func::IntervalTypmod, vec![x, Expr::Const(Value::Int4(typmod.encode()))]),
        };
        Ok((x, t))
    }

    /// `x AT TIME ZONE zone`, either way between timestamp and timestamptz.
    fn at_time_zone(
        &mut self,
        timestamp: &ast::Expr,
        time_zone: &ast::Expr,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let (x, t) = self.expr(timestamp, scope, ctx)?;
        let (z, zt) = self.expr(time_zone, scope, ctx)?;
        // timezone(zone, timestamptz) is the preferred candidate for
        // an unknown literal or a date, as PostgreSQL resolves it.
        let to_instant = matches!(t, Some(DataType::Timestamp(_)));
        let x = match t {
            Some(DataType::Timestamp(_) | DataType::TimestampTz(_) | DataType::TimeTz(_)) => x,
            None | Some(DataType::Date) => self.result_cast(x, t, Some(DataType::TimestampTz(None)))?,
            Some(other) => {
                return Err(SqlError::undefined_function(&format!("timezone(unknown, {})", value::type_name(other))));
            }
        };
        let z = if zt == Some(DataType::Interval) { z } else { self.text_arg(z, zt, "timezone")? };
        let ty = match t {
            // timetz_zone, timetz_izone: the same instant's clock there.
            Some(DataType::TimeTz(_)) => DataType::TimeTz(None),
            _ if to_instant => DataType::TimestampTz(None),
            _ => DataType::Timestamp(None),
        };
        Ok((Expr::Func(crate::expr::Func::AtTimeZone(to_instant), vec![z, x]), Some(ty)))
    }

    /// `x [NOT] IN (subquery)`.
    fn in_subquery(
        &mut self,
        expr: &ast::Expr,
        subquery: &ast::Query,
        negated: bool,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let (x, xt) = self.expr(expr, scope, ctx)?;
        let (plan, correlated) = self.subquery(subquery, scope)?;
        if plan.visible != 1 {
            return Err(SqlError::syntax("subquery has too many columns"));
        }
        let st = plan.columns[0].ty;
        // `x = c` resolves as a comparison does (unify_cmp): char(n)
        // with varchar or another char(m) as bpchar (both sides
        // without trailing blanks), char(n) with text as text.
        if let (Some(a), Some(b)) = (xt, st)
            && matches!(
                (a, b),
                (DataType::Char(_), DataType::Varchar(_))
                    | (DataType::Varchar(_), DataType::Char(_))
                    | (DataType::Char(_), DataType::Char(_))
            )
            && a != b
        {
            let lhs = Expr::BpcharTrim(x.boxed()).boxed();
            return Ok((
                self.sub_expr(SubqueryKind::In { lhs, trim_rows: true }, negated, correlated, plan),
                Some(DataType::Bool),
            ));
        }
        // char(n) with text: as text, the char side without its padding.
        if let (Some(DataType::Char(_)), Some(DataType::Text)) = (xt, st) {
            let lhs = Expr::BpcharTrim(x.boxed()).boxed();
            return Ok((
                self.sub_expr(SubqueryKind::In { lhs, trim_rows: false }, negated, correlated, plan),
                Some(DataType::Bool),
            ));
        }
        let common = common_type(&[xt, st], "IN")?;
        let x = self.coerce_common(x, xt, common)?;
        if let (Some(c), Some(s)) = (common, st)
            && category(c) != category(s)
        {
            return Err(SqlError::undefined_operator(&format!("{} = {}", type_name(c), type_name(s))));
        }
        let trim_rows = matches!(st, Some(DataType::Char(_))) && common == Some(DataType::Text);
        Ok((
            self.sub_expr(SubqueryKind::In { lhs: x.boxed(), trim_rows }, negated, correlated, plan),
            Some(DataType::Bool),
        ))
    }

    /// `x IN (...)` of one item or with items that reference the query's
    /// columns, as PostgreSQL's transformAExprIn: the column-free items (two or more,
    /// with a common type with x) are one `IN` of that type; every other
    /// item is compared with x by its own `=` (as `x = item` alone would
    /// resolve), and the comparisons are ORed (NOT IN: negated).
    fn in_list_with_vars(
        &mut self,
        x: Expr,
        xt: Ty,
        items: Vec<Expr>,
        types: &[Ty],
        negated: bool,
    ) -> Result<(Expr, Ty)> {
        let constant: Vec<usize> = (0..items.len()).filter(|&k| !has_vars(&items[k])).collect();
        let mut group_types = vec![xt];
        group_types.extend(constant.iter().map(|&k| types[k]));
        let common = if constant.len() > 1 { common_type(&group_types, "IN").ok() } else { None };
        let mut arms = Vec::new();
        let mut grouped = Vec::new();
        for (k, item) in items.into_iter().enumerate() {
            match common {
                Some(c) if constant.contains(&k) => grouped.push(self.coerce_common(item, types[k], c)?),
                _ => {
                    let (a, b) = self.unify_cmp(x.clone(), xt, item, types[k], "=")?;
                    arms.push(Expr::Cmp(CmpOp::Eq, a.boxed(), b.boxed()));
                }
            }
        }
        if let Some(c) = common {
            let x = self.coerce_common(x, xt, c)?;
            arms.push(Expr::InList { expr: x.boxed(), list: grouped, negated: false });
        }
        let any = if arms.len() == 1 { arms.remove(0) } else { Expr::Or(arms) };
        Ok((if negated { Expr::Not(any.boxed()) } else { any }, Some(DataType::Bool)))
    }

    pub(super) fn sub_expr(&mut self, kind: SubqueryKind, negated: bool, correlated: bool, plan: SelectPlan) -> Expr {
        // In a function body a subquery may read the arguments: never
        // cached (exec's `call_function`).
        let correlated = correlated || self.function.is_some();
        let id = self.next_subquery;
        self.next_subquery += 1;
        Expr::Subquery(Box::new(Subquery { id, kind, negated, correlated, plan: Box::new(plan) }))
    }

    pub(super) fn subquery(&mut self, q: &ast::Query, scope: &Scope<'_>) -> Result<(SelectPlan, bool)> {
        let saved = std::mem::replace(&mut self.correlated, false);
        self.sublink_depth += 1;
        let plan = self.query(q, Some(scope));
        self.sublink_depth -= 1;
        let correlated = std::mem::replace(&mut self.correlated, saved);
        Ok((plan?, correlated))
    }

    fn literal(&mut self, v: &ast::Value) -> Result<(Expr, Ty)> {
        use ast::Value as V;
        Ok(match v {
            V::Number(n, _) => {
                if !n.contains(['.', 'e', 'E']) {
                    if let Ok(i) = n.parse::<i32>() {
                        return Ok((Expr::Const(Value::Int4(i)), Some(DataType::Int4)));
                    }
                    if let Ok(i) = n.parse::<i64>() {
                        return Ok((Expr::Const(Value::Int8(i)), Some(DataType::Int8)));
                    }
                }
                let num = match value::parse_numeric(n) {
                    Some(num) => Value::Numeric(num),
                    None => value::Dec::parse(n).ok_or_else(|| SqlError::invalid_text("numeric", n))??.into_value()?,
                };
                (Expr::Const(num), Some(NUMERIC_ANY))
            }
            V::SingleQuotedString(s) | V::EscapedStringLiteral(s) => (Expr::Const(Value::Text(s.clone())), None),
            // `$$...$$` / `$tag$...$tag$`: a string constant as written, no escapes.
            V::DollarQuotedString(d) => (Expr::Const(Value::Text(d.value.clone())), None),
            V::Boolean(b) => (Expr::Const(Value::Bool(*b)), Some(DataType::Bool)),
            V::Null => (Expr::Const(Value::Null), None),
            V::Placeholder(p) => self.param(p)?,
            other => return Err(SqlError::unsupported(format!("literal {other}"))),
        })
    }

    fn case(
        &mut self,
        operand: Option<&ast::Expr>,
        conditions: &[ast::CaseWhen],
        otherwise: Option<&ast::Expr>,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let mut whens = Vec::new();
        let mut results = Vec::new();
        let op = match operand {
            Some(o) => Some(self.expr(o, scope, ctx)?),
            None => None,
        };
        let mut op_expr = None;
        // PostgreSQL drops, unsimplified, the arms after a constant true
        // condition and the result of a constant false (or NULL) one.
        let mut decided = false;
        for cw in conditions {
            let cond = match &op {
                Some((ox, ot)) => {
                    let (w, wt) = self.lazily(decided, |b| b.expr(&cw.condition, scope, ctx))?;
                    let (o2, w2) = self.unify_cmp(ox.clone(), *ot, w, wt, "=")?;
                    op_expr = Some(o2);
                    w2
                }
                None => {
                    let (w, wt) = self.lazily(decided, |b| b.expr(&cw.condition, scope, ctx))?;
                    self.boolean(w, wt, "CASE/WHEN")?
                }
            };
            // A constant operand is substituted into each WHEN's comparison
            // before folding (eval_const_expressions' case_val), so
            // `CASE 1 WHEN 0 THEN 1/0 ...` drops that arm as the searched form does.
            let truth = match &op_expr {
                Some(o) if op.is_some() => {
                    constant_truth(&Expr::Cmp(CmpOp::Eq, o.clone().boxed(), cond.clone().boxed()))
                }
                _ => constant_truth(&cond),
            };
            let never = matches!(truth, Some(Some(false) | None));
            let always = truth == Some(Some(true));
            whens.push(cond);
            results.push(self.lazily(decided || never, |b| b.expr(&cw.result, scope, ctx))?);
            decided |= always;
        }
        let else_bound = match otherwise {
            Some(e) => Some(self.lazily(decided, |b| b.expr(e, scope, ctx))?),
            None => None,
        };
        // PostgreSQL resolves the ELSE result's type first
        // (transformCaseExpr), then the THEN results'.
        let mut types: Vec<Ty> = else_bound.iter().map(|(_, t)| *t).collect();
        types.extend(results.iter().map(|r| r.1));
        let mut untyped: Vec<bool> = results.iter().map(|(e, t)| is_untyped_value(e, *t)).collect();
        if let Some((e, t)) = &else_bound {
            untyped.push(is_untyped_value(e, *t));
        }
        refuse_padded_literals(&types, &untyped, "CASE")?;
        let common = common_type(&types, "CASE")?.or(Some(DataType::Text));
        let mut pairs = Vec::new();
        for (w, (r, t)) in whens.into_iter().zip(results) {
            pairs.push((w, self.result_cast(r, t, common)?));
        }
        let otherwise = match else_bound {
            Some((e, t)) => Some(self.result_cast(e, t, common)?.boxed()),
            None => None,
        };
        let operand = match (op, op_expr) {
            (_, Some(o)) => Some(o.boxed()),
            (Some((o, _)), None) => Some(o.boxed()),
            (None, None) => None,
        };
        Ok((Expr::Case { operand, whens: pairs, otherwise }, common))
    }
}

/// The column `name` (of relation `qualifier`) in `scope`. A column
/// `hidden` by JOIN ... USING is never ambiguous with the merged one and
/// is found only qualified (or when nothing else has the name).
/// The FROM items of `scope` that `qualifier` names (all of them
/// without one) that have PostgreSQL's system columns: stored tables,
/// partitioned tables and system catalogs (not subqueries, functions,
/// views or WITH queries).
fn system_column_rels<'s>(scope: &'s Scope<'_>, qualifier: Option<&str>) -> Vec<&'s crate::plan::Rel> {
    scope
        .rels
        .iter()
        .filter(|r| qualifier.is_none_or(|q| q == r.name))
        .filter(|r| match r.source.as_deref() {
            None | Some(VirtualSource::System(_)) => true,
            Some(_) => r.table.annotation.as_deref().is_some_and(|a| a.starts_with(PARTITIONED_READ)),
        })
        .collect()
}

fn lookup(scope: &Scope<'_>, qualifier: Option<&str>, name: &str) -> Result<Option<(usize, DataType)>> {
    let mut visible: Option<(usize, DataType)> = None;
    let mut hidden: Option<(usize, DataType)> = None;
    for r in &scope.rels {
        if qualifier.is_some_and(|q| q != r.name) {
            continue;
        }
        if let Some(c) = r.table.column_index(name) {
            // A subquery's or parenthesized join's columns may share a name.
            if r.table.columns[c + 1..].iter().any(|other| other.name == r.table.columns[c].name) {
                return Err(SqlError::ambiguous_column(name));
            }
            let pos = r.offset + c;
            let found = Some((pos, super::user_type::readable(r.table.columns[c].ty)?));
            if scope.hidden.contains(&pos) {
                hidden = hidden.or(found);
            } else if visible.is_some() {
                return Err(SqlError::ambiguous_column(name));
            } else {
                visible = found;
            }
        }
    }
    Ok(visible.or(hidden))
}

/// A numeric literal (optionally negated) too wide for pgtier's 38-digit
/// numeric, as a double; None for anything else or a literal that fits.
fn wide_numeric_literal(e: &ast::Expr) -> Option<f64> {
    match e {
        ast::Expr::UnaryOp { op: ast::UnaryOperator::Minus, expr } => wide_numeric_literal(expr).map(|f| -f),
        ast::Expr::Nested(inner) => wide_numeric_literal(inner),
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) if value::parse_numeric(n).is_none() => {
                n.parse::<f64>().ok().filter(|f| f.is_finite())
            }
            _ => None,
        },
        _ => None,
    }
}

/// Whether `e` reads a column of the query's own rows (PostgreSQL's
/// contain_vars_of_level 0): a column, an aggregate or window result, or
/// a correlated subquery (pgtier's correlate only one level out).
pub(super) fn has_vars(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |n| {
        if matches!(n, Expr::Column(_) | Expr::AggRef(_) | Expr::WindowRef(_))
            || matches!(n, Expr::Subquery(s) if s.correlated)
        {
            found = true;
        }
    });
    found
}

/// A FROM item named alone, as PostgreSQL reads a whole row: only the rows
/// of `_pg_expandarray` (pgJDBC's metadata queries), as their `(x,n)` record.
fn whole_row(scope: &Scope<'_>, name: &str) -> Option<(Expr, Ty)> {
    let rel = scope.rels.iter().find(|r| r.name == name)?;
    let Some(VirtualSource::Function { func: TableFunc::ExpandArray(elem), .. }) = rel.source.as_deref() else {
        return None;
    };
    let row = Expr::Func(
        Func::Sys(SysFunc::ExpandRecord(*elem)),
        vec![Expr::Column(rel.offset), Expr::Column(rel.offset + 1)],
    );
    Some((row, Some(types::expand_record_type(*elem))))
}

/// `type 'text'`: the text read as that type's input.
fn typed_string(ts: &ast::TypedString) -> Result<(Expr, Ty)> {
    let ty = map_type(&ts.data_type)?;
    let text = match &ts.value.value {
        ast::Value::SingleQuotedString(s) => s.clone(),
        other => return Err(SqlError::unsupported(format!("typed literal {other}"))),
    };
    Ok((Expr::Const(value::parse_input(&text, ty)?), Some(ty)))
}

/// A name that is a PL/pgSQL variable and a column (plpgsql.variable_conflict = error).
fn plpgsql_ambiguous(qualifier: Option<&str>, name: &str) -> SqlError {
    let full = match qualifier {
        Some(q) => format!("{q}.{name}"),
        None => name.to_owned(),
    };
    SqlError::new("42702", format!("column reference \"{full}\" is ambiguous"))
        .with_detail("It could refer to either a PL/pgSQL variable or a table column.")
}

/// The pattern of `LIKE p [ESCAPE e]`: `ESCAPE e` is PostgreSQL's
/// like_escape(p, e), done here when both are string literals.
fn like_pattern(pattern: &ast::Expr, escape: Option<&ast::ValueWithSpan>) -> Result<ast::Expr> {
    let Some(esc) = escape else { return Ok(pattern.clone()) };
    if let (ast::Value::SingleQuotedString(esc), ast::Expr::Value(p)) = (&esc.value, pattern)
        && let ast::Value::SingleQuotedString(p) = &p.value
    {
        return Ok(ast::Expr::value(ast::Value::SingleQuotedString(like_escape(p, esc)?)));
    }
    Err(SqlError::unsupported("LIKE ... ESCAPE of a pattern or escape that is not a string literal"))
}

/// PostgreSQL's like_escape (do_like_escape): the pattern rewritten to
/// use backslash as its escape; an empty escape doubles every backslash.
fn like_escape(p: &str, esc: &str) -> Result<String> {
    let mut chars = esc.chars();
    let e = match (chars.next(), chars.next()) {
        (None, _) => return Ok(p.replace('\\', "\\\\")),
        (Some(e), None) => e,
        _ => {
            return Err(SqlError::new("22025", "invalid escape string")
                .with_hint("Escape string must be empty or one character."));
        }
    };
    if e == '\\' {
        return Ok(p.to_string());
    }
    let mut out = String::with_capacity(p.len() * 2);
    let mut after_escape = false;
    for c in p.chars() {
        if c == e && !after_escape {
            out.push('\\');
            after_escape = true;
        } else if c == '\\' {
            out.push('\\');
            if !after_escape {
                out.push('\\');
            }
            after_escape = false;
        } else {
            out.push(c);
            after_escape = false;
        }
    }
    Ok(out)
}
