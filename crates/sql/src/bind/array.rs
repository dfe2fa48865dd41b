//! Arrays: `op ANY (array)`, `ARRAY[...]`, `ARRAY(subquery)`, subscripts
//! and `||` on arrays.

use pgtier_engine::{DataType, Value};
use sqlparser::ast;

use super::cast::{CastTarget, cast_target};
use super::coerce::common_type;
use super::function::function_name;
use super::{Binder, ExprCtx, Scope, Ty};
use crate::error::{Result, SqlError};
use crate::expr::{CmpOp, Expr, Func, SubqueryKind, SysFunc};
use crate::types::{self, Elem, RegKind};
use crate::value::{self, category};

impl Binder<'_> {
    /// `lhs op ANY (array or subquery)`.
    pub(super) fn sys_any(&mut self, left: &ast::Expr, op: &ast::BinaryOperator, right: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
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
    pub(super) fn array_constructor(&mut self, items: &[ast::Expr], scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        if items.is_empty() {
            return Err(SqlError::new("42P18", "cannot determine type of empty array")
                .with_hint("Explicitly cast to the desired type, for example ARRAY[]::integer[]."));
        }
        let mut bound = Vec::new();
        for i in items {
            let (e, t) = self.expr(i, scope, ctx)?;
            // ARRAY[[1,2],[3,4]] is one two-dimensional array in PostgreSQL,
            // which pgtier does not have. Taken as an array of the inner
            // arrays' text, each level doubled the quoting (60 levels built a
            // string of 2^60 bytes).
            if matches!(i, ast::Expr::Array(_)) || t.is_some_and(|t| Elem::of(t).is_some()) {
                return Err(SqlError::unsupported("multidimensional arrays"));
            }
            bound.push((e, t));
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
    pub(super) fn array_subquery(&mut self, q: &ast::Query, scope: &Scope<'_>) -> Result<(Expr, Ty)> {
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
    pub(super) fn subscript(&mut self, root: &ast::Expr, chain: &[ast::AccessExpr], scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        if let [ast::AccessExpr::Dot(ast::Expr::Identifier(field))] = chain {
            return self.record_field(root, field, scope, ctx)?.ok_or_else(|| SqlError::unsupported("this field access"));
        }
        // `t.col[i]`: the parser reads the qualified name as an access chain.
        if let (ast::Expr::Identifier(table), [ast::AccessExpr::Dot(ast::Expr::Identifier(column)), index @ ast::AccessExpr::Subscript(_)]) = (root, chain) {
            let qualified = ast::Expr::CompoundIdentifier(vec![table.clone(), column.clone()]);
            return self.subscript(&qualified, std::slice::from_ref(index), scope, ctx);
        }
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

    /// `array || array` (either side may be NULL, as in PostgreSQL).
    pub(super) fn array_concat(&mut self, left: &ast::Expr, right: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
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
}

/// Written as an array (`ARRAY[...]`, `ARRAY(subquery)`, `::type[]`): `||` on it is array concatenation.
pub(super) fn is_array_ast(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Array(_) => true,
        ast::Expr::Function(f) => function_name(&f.name).is_ok_and(|n| n == "array") && matches!(f.args, ast::FunctionArguments::Subquery(_)),
        ast::Expr::Cast { data_type, .. } => matches!(cast_target(data_type), Some(CastTarget::Array(_))),
        ast::Expr::Nested(inner) => is_array_ast(inner),
        _ => false,
    }
}
