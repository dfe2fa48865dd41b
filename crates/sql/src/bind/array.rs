//! Arrays: `op ANY/ALL (array)`, `ARRAY[...]`, `ARRAY(subquery)`,
//! subscripts and slices, `||`, `@>` `<@` `&&` on arrays.
//!
//! Two kinds of array meet here: real arrays (`DataType::Array`, what
//! users write and store) and the system catalogs' text-form arrays
//! (`types::Elem`: int2vector, oidvector, oid[], name[] columns). Each
//! construct picks the path of its operand's type; an untyped literal or
//! parameter becomes a real array unless the other operand is a catalog
//! type (an oid, a reg* value).

use pgtier_engine::{DataType, Value};
use sqlparser::ast;

use super::cast::{CastTarget, cast_target};
use super::coerce::common_type;
use super::function::function_name;
use super::{Binder, ExprCtx, Scope, Ty};
use crate::error::{Result, SqlError};
use crate::expr::{ArrayFunc, CmpOp, Expr, Func, SubqueryKind, SysFunc};
use crate::value::array::{array_type, elem_type, multidimensional};
use crate::value::types::{self, Elem, RegKind};
use crate::value::{self, category};

impl Binder<'_> {
    /// `lhs op ANY (array or subquery)`, or ALL when `all`.
    pub(super) fn sys_any(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
        all: bool,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let cmp = match op {
            ast::BinaryOperator::Eq => CmpOp::Eq,
            ast::BinaryOperator::NotEq => CmpOp::NotEq,
            ast::BinaryOperator::Lt => CmpOp::Lt,
            ast::BinaryOperator::LtEq => CmpOp::LtEq,
            ast::BinaryOperator::Gt => CmpOp::Gt,
            ast::BinaryOperator::GtEq => CmpOp::GtEq,
            other => return Err(SqlError::unsupported(format!("operator {other} ANY"))),
        };
        let word = if all { "ALL" } else { "ANY" };
        if let ast::Expr::Subquery(q) = right {
            // `= ANY` is IN, `<> ALL` is NOT IN.
            if cmp == (if all { CmpOp::NotEq } else { CmpOp::Eq }) {
                let e = ast::Expr::InSubquery { expr: Box::new(left.clone()), subquery: q.clone(), negated: all };
                return self.expr(&e, scope, ctx);
            }
            // Any other operator: over the subquery's rows as an array, which
            // ANY/ALL over an array answers alike (true, false or NULL by the
            // same rules; ALL of no rows is true, ANY false).
            let (x, xt) = self.expr(left, scope, ctx)?;
            let (a, at) = self.array_subquery(q, scope)?;
            if !matches!(at, Some(DataType::Array(_))) {
                return Err(SqlError::unsupported(format!("{} {word} (subquery) of this type", cmp.symbol())));
            }
            return self.real_any(cmp, all, x, xt, a, at);
        }
        let (x, xt) = self.expr(left, scope, ctx)?;
        let (a, at) = self.expr(right, scope, ctx)?;
        let catalog_side =
            at.is_some_and(|t| Elem::of(t).is_some()) || (at.is_none() && xt.is_some_and(|t| array_type(t).is_none()));
        if !catalog_side {
            return self.real_any(cmp, all, x, xt, a, at);
        }
        if all {
            return Err(SqlError::unsupported("ALL over a system catalog array"));
        }
        let elem = match at {
            Some(t) => {
                Elem::of(t).ok_or_else(|| SqlError::new("42809", "op ANY/ALL (array) requires array on right side"))?
            }
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
            Some(t) => {
                return Err(SqlError::undefined_operator(&format!(
                    "{} {} {}[]",
                    value::type_name(t),
                    cmp.symbol(),
                    value::type_name(want)
                )));
            }
        };
        Ok((Expr::Func(Func::Sys(SysFunc::Any(cmp, elem)), vec![x, a]), Some(DataType::Bool)))
    }

    /// `x [NOT] LIKE / ILIKE ANY (array or subquery)`, ALL when `all`
    /// (`flags`: negated, case-insensitive, all): PostgreSQL's `~~` (`!~~`,
    /// `~~*`, `!~~*`) over the elements as `op ANY` does.
    pub(super) fn like_any(
        &mut self,
        left: &ast::Expr,
        right: Operand<'_>,
        (negated, ci, all): (bool, bool, bool),
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let op = match (negated, ci) {
            (false, false) => "~~",
            (true, false) => "!~~",
            (false, true) => "~~*",
            (true, true) => "!~~*",
        };
        let (x, xt) = self.expr(left, scope, ctx)?;
        let (a, at) = match right {
            Operand::Query(q) => self.array_subquery(q, scope)?,
            Operand::Expr(e) => self.expr(e, scope, ctx)?,
        };
        let text_array = array_type(DataType::Text).unwrap_or(DataType::Text);
        let a = match at.map(|t| (t, elem_type(t))) {
            None => self.coerce(a, None, text_array, op)?,
            Some((_, Some(e))) if category(e) == value::Category::String && !matches!(e, DataType::Char(_)) => a,
            Some((_, Some(DataType::Char(_)))) => {
                return Err(SqlError::unsupported(format!("{op} ANY/ALL over a character(n) array")));
            }
            Some((t, Some(_))) => {
                let x = xt.map_or("unknown", value::type_name);
                return Err(SqlError::undefined_operator(&format!(
                    "{x} {op} {}",
                    value::type_name(elem_type(t).unwrap_or(t))
                )));
            }
            Some((_, None)) => return Err(SqlError::new("42809", "op ANY/ALL (array) requires array on right side")),
        };
        let x = if matches!(xt, Some(DataType::Char(_))) { x } else { self.text_arg(x, xt, op)? };
        let f = ArrayFunc::Like { all, negated, case_insensitive: ci };
        Ok((Expr::Func(Func::Array(f), vec![x, a]), Some(DataType::Bool)))
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

    /// `x op ANY/ALL (a)` over a real array; an untyped array takes the
    /// array type of `x`'s (text[] when both are untyped).
    fn real_any(&mut self, cmp: CmpOp, all: bool, x: Expr, xt: Ty, a: Expr, at: Ty) -> Result<(Expr, Ty)> {
        let word = if all { "ALL" } else { "ANY" };
        let arr_ty = match at {
            Some(t @ DataType::Array(_)) => t,
            Some(_) => return Err(SqlError::new("42809", "op ANY/ALL (array) requires array on right side")),
            None => array_type(xt.unwrap_or(DataType::Text))
                .ok_or_else(|| SqlError::unsupported(format!("{word} over an array of this type")))?,
        };
        let elem = elem_type(arr_ty).unwrap_or(DataType::Text);
        let a = if at.is_none() { self.coerce(a, None, arr_ty, word)? } else { a };
        let x = match xt {
            None => self.coerce(x, None, elem, word)?,
            Some(DataType::Char(_)) if !matches!(elem, DataType::Char(_)) => Expr::BpcharTrim(x.boxed()),
            Some(t) if comparable(t, elem) => x,
            Some(t) => {
                return Err(SqlError::undefined_operator(&format!(
                    "{} {} {}",
                    value::type_name(t),
                    cmp.symbol(),
                    value::type_name(arr_ty)
                )));
            }
        };
        Ok((Expr::Func(Func::Array(ArrayFunc::Any(cmp, all)), vec![x, a]), Some(DataType::Bool)))
    }

    /// `ARRAY[a, b, ...]`.
    pub(super) fn array_constructor(
        &mut self,
        items: &[ast::Expr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        if items.is_empty() {
            return Err(SqlError::new("42P18", "cannot determine type of empty array")
                .with_hint("Explicitly cast to the desired type, for example ARRAY[]::integer[]."));
        }
        let mut bound = Vec::new();
        let mut rows = 0;
        for i in items {
            let (e, t) = self.expr(i, scope, ctx)?;
            // A catalog array's text form is no row of a real array.
            if t.is_some_and(|t| Elem::of(t).is_some()) {
                return Err(multidimensional());
            }
            if matches!(i, ast::Expr::Array(_)) || matches!(t, Some(DataType::Array(_))) {
                rows += 1;
            }
            bound.push((e, t));
        }
        // ARRAY[[1,2],[3,4]], ARRAY[a1, a2]: the rows of one more dimension.
        if rows > 0 {
            return self.array_of_rows(bound, rows);
        }
        let types: Vec<Ty> = bound.iter().map(|b| b.1).collect();
        let common = common_type(&types, "ARRAY")?.unwrap_or(DataType::Text);
        if let Some(arr_ty) = array_type(common) {
            let mut out = Vec::new();
            for (e, t) in bound {
                out.push(self.result_cast(e, t, Some(common))?);
            }
            // A constant array is one value (an IN list's or a literal's).
            if out.iter().all(|e| matches!(e, Expr::Const(_))) {
                let items =
                    out.into_iter().map(|e| if let Expr::Const(v) = e { v } else { Value::Null }).collect::<Vec<_>>();
                let items = items
                    .into_iter()
                    .map(|v| if v.is_null() { Ok(v) } else { value::cast(v, common, false) })
                    .collect::<Result<Vec<_>>>()?;
                return Ok((Expr::Const(Value::Array(items)), Some(arr_ty)));
            }
            return Ok((Expr::Func(Func::Array(ArrayFunc::Make), out), Some(arr_ty)));
        }
        let elem = Elem::for_element(common)
            .ok_or_else(|| SqlError::unsupported(format!("arrays of {}", value::type_name(common))))?;
        let mut out = Vec::new();
        for (e, t) in bound {
            out.push(self.result_cast(e, t, Some(elem.element_type()))?);
        }
        Ok((Expr::Func(Func::Sys(SysFunc::MakeArray(elem)), out), Some(elem.data_type())))
    }

    /// `ARRAY[row, row, ...]` of arrays: their common element type, each
    /// row cast to its array type; rows of one shape checked when evaluated.
    fn array_of_rows(&mut self, bound: Vec<(Expr, Ty)>, rows: usize) -> Result<(Expr, Ty)> {
        // An untyped item (NULL, '{1,2}') is a row too.
        let rows = rows + bound.iter().filter(|b| b.1.is_none()).count();
        if rows < bound.len() {
            let (Some(a), Some(s)) = (
                bound.iter().find_map(|b| b.1.filter(|t| matches!(t, DataType::Array(_)))),
                bound.iter().find_map(|b| b.1.filter(|t| !matches!(t, DataType::Array(_)))),
            ) else {
                return Err(multidimensional());
            };
            return Err(SqlError::new(
                "42804",
                format!("ARRAY types {} and {} cannot be matched", value::type_name(a), value::type_name(s)),
            ));
        }
        let elems: Vec<Ty> = bound.iter().map(|b| b.1.and_then(elem_type)).collect();
        let common = common_type(&elems, "ARRAY")?.unwrap_or(DataType::Text);
        let arr_ty = array_type(common)
            .ok_or_else(|| SqlError::unsupported(format!("arrays of {}", value::type_name(common))))?;
        let mut out = Vec::new();
        for (e, t) in bound {
            out.push(self.result_cast(e, t, Some(arr_ty))?);
        }
        if out.iter().all(|e| matches!(e, Expr::Const(_))) {
            let vals = out.into_iter().map(|e| if let Expr::Const(v) = e { v } else { Value::Null }).collect();
            return Ok((Expr::Const(crate::expr::eval_array(ArrayFunc::MakeRows, vals)?), Some(arr_ty)));
        }
        Ok((Expr::Func(Func::Array(ArrayFunc::MakeRows), out), Some(arr_ty)))
    }

    /// `ARRAY(subquery)`.
    pub(super) fn array_subquery(&mut self, q: &ast::Query, scope: &Scope<'_>) -> Result<(Expr, Ty)> {
        let (plan, correlated) = self.subquery(q, scope)?;
        if plan.visible != 1 {
            return Err(SqlError::syntax("subquery must return only one column"));
        }
        let t = plan.columns[0].ty.unwrap_or(DataType::Text);
        if matches!(t, DataType::Array(_)) {
            return Err(multidimensional());
        }
        if let Some(arr_ty) = array_type(t) {
            return Ok((self.sub_expr(SubqueryKind::ArrayValue, false, correlated, plan), Some(arr_ty)));
        }
        // A catalog array or vector column is carried as text: for_element
        // would make its ARRAY() a text[] (PostgreSQL's is int2vector[], or
        // a two-dimensional array).
        match Elem::of(t) {
            Some(elem) if elem.is_vector() => return Err(SqlError::unsupported("ARRAY() of int2vector or oidvector")),
            Some(_) => return Err(multidimensional()),
            None => {}
        }
        // PostgreSQL's is regclass[] (or regtype[], ...), printing names;
        // an oid[] would print numbers.
        if let Some(kind) = RegKind::of(t) {
            let name = match kind {
                RegKind::Class => "regclass",
                RegKind::Type => "regtype",
                RegKind::Namespace => "regnamespace",
                RegKind::Role => "regrole",
            };
            return Err(SqlError::unsupported(format!("ARRAY() of {name}")));
        }
        let elem = Elem::for_element(t);
        let elem = elem.ok_or_else(|| SqlError::unsupported(format!("ARRAY() of {}", value::type_name(t))))?;
        Ok((self.sub_expr(SubqueryKind::Array(elem), false, correlated, plan), Some(elem.data_type())))
    }

    /// `arr[i]`.
    pub(super) fn subscript(
        &mut self,
        root: &ast::Expr,
        chain: &[ast::AccessExpr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        if let [ast::AccessExpr::Dot(ast::Expr::Identifier(field))] = chain {
            return self
                .record_field(root, field, scope, ctx)?
                .ok_or_else(|| SqlError::unsupported("this field access"));
        }
        // `t.col[i]`: the parser reads the qualified name as an access chain.
        if let (ast::Expr::Identifier(table), [ast::AccessExpr::Dot(ast::Expr::Identifier(column)), rest @ ..]) =
            (root, chain)
            && !rest.is_empty()
            && rest.iter().all(|a| matches!(a, ast::AccessExpr::Subscript(_)))
        {
            let qualified = ast::Expr::CompoundIdentifier(vec![table.clone(), column.clone()]);
            return self.subscript(&qualified, rest, scope, ctx);
        }
        let (a, at) = self.expr(root, scope, ctx)?;
        if let Some(elem) = at.and_then(elem_type) {
            return self.real_subscript(a, at, elem, chain, scope, ctx);
        }
        if at == Some(DataType::Jsonb) {
            return self.jsonb_subscript(a, chain, scope, ctx);
        }
        let [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] = chain else {
            return Err(SqlError::unsupported("this field access or array slice"));
        };
        let elem = at.and_then(Elem::of).ok_or_else(|| not_subscriptable(at))?;
        let (i, it) = self.expr(index, scope, ctx)?;
        let i = match it {
            None => self.coerce(i, None, DataType::Int4, "subscript")?,
            Some(t) if value::is_integer(t) => i,
            Some(_) => return Err(SqlError::new("42804", "array subscript must have type integer")),
        };
        Ok((Expr::Func(Func::Sys(SysFunc::Subscript(elem)), vec![a, i]), Some(elem.element_type())))
    }

    /// `a[i]`, `a[i][j]`, `a[i:j]`, `a[i:j][k]` on a real array: with one
    /// slice every subscript is one (`[k]` is `[1:k]`), as in PostgreSQL.
    fn real_subscript(
        &mut self,
        a: Expr,
        at: Ty,
        elem: DataType,
        chain: &[ast::AccessExpr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let mut subs = Vec::new();
        for access in chain {
            match access {
                ast::AccessExpr::Subscript(sub) => subs.push(sub),
                ast::AccessExpr::Dot(_) => return Err(SqlError::unsupported("field access on an array")),
            }
        }
        if subs.len() > crate::value::array::DIMS_MAX {
            return Err(crate::value::array::too_many_dims(subs.len()));
        }
        let is_slice = subs.iter().any(|s| matches!(s, ast::Subscript::Slice { .. }));
        let mut args = vec![a];
        let mut given = 0u16;
        for (k, sub) in subs.iter().enumerate() {
            match sub {
                ast::Subscript::Index { index } if is_slice => {
                    args.push(Expr::Const(Value::Int4(1)));
                    args.push(self.subscript_bound(index, scope, ctx)?);
                    given |= 3 << (2 * k);
                }
                ast::Subscript::Index { index } => args.push(self.subscript_bound(index, scope, ctx)?),
                ast::Subscript::Slice { lower_bound, upper_bound, stride: None } => {
                    for (bit, e) in [(0, lower_bound), (1, upper_bound)] {
                        if let Some(e) = e {
                            args.push(self.subscript_bound(e, scope, ctx)?);
                            given |= 1 << (2 * k + bit);
                        }
                    }
                }
                ast::Subscript::Slice { .. } => return Err(SqlError::syntax("syntax error at or near \":\"")),
            }
        }
        if is_slice {
            let n = u8::try_from(subs.len()).unwrap_or(u8::MAX);
            return Ok((Expr::Func(Func::Array(ArrayFunc::Slice(n, given)), args), at));
        }
        Ok((Expr::Func(Func::Array(ArrayFunc::Subscript), args), Some(elem)))
    }

    /// `parse::SUBSCRIPT_ASSIGN(a, value, 'spec', bounds...)`, what UPDATE's
    /// `SET a[i] = value` (`a[i:j]`, `a[i][j]`, ...) is rewritten to: spec
    /// is `i` per index, `s` and two bits (lower, upper given) per slice.
    /// `target` is the call's first argument, naming the column.
    pub(super) fn subscript_assign(&mut self, args: Vec<(Expr, Ty)>, target: Option<&ast::Expr>) -> Result<(Expr, Ty)> {
        let mut args = args.into_iter();
        let (Some((a, at)), Some((v, vt)), Some((Expr::Const(Value::Text(spec)), _))) =
            (args.next(), args.next(), args.next())
        else {
            return Err(SqlError::undefined_function(crate::parse::SUBSCRIPT_ASSIGN));
        };
        // An INSERT's target (parse::rewrite_subscripted_insert): a NULL of
        // the column's type.
        let (spec, column) = match spec.split_once('@') {
            Some((spec, column)) => (spec.to_owned(), Some(column.to_owned())),
            None => (spec, None),
        };
        let at = match (&a, at, &column, &self.insert_table) {
            (Expr::Const(Value::Null), None, Some(c), Some(table)) => {
                table.column_index(c).map(|k| table.columns[k].ty)
            }
            _ => at,
        };
        if at == Some(DataType::Jsonb) {
            let column = target.map_or_else(String::new, assigned_column);
            return self.jsonb_subscript_assign(a, (v, vt), &spec, args.collect(), &column);
        }
        let Some(elem) = at.and_then(elem_type) else {
            return Err(not_subscriptable(at));
        };
        let arr_ty = at.unwrap_or(DataType::Text);
        let slice = spec.contains('s');
        let want = if slice { arr_ty } else { elem };
        let v = match vt {
            None => self.result_cast(v, vt, Some(want))?,
            Some(_) => self.assign(v, vt, want, column.as_deref().unwrap_or("array element"))?,
        };
        let mut out = vec![a, v];
        for (e, t) in args {
            out.push(match t {
                None => self.coerce(e, None, DataType::Int4, "subscript")?,
                Some(t) if value::is_int4_implicit(t) => e,
                Some(t) if value::category(t) == value::Category::Numeric => {
                    Expr::Cast(e.boxed(), DataType::Int4, false)
                }
                Some(_) => return Err(SqlError::new("42804", "array subscript must have type integer")),
            });
        }
        let (n, given) = parse_spec(&spec)?;
        if n > crate::value::array::DIMS_MAX {
            return Err(crate::value::array::too_many_dims(n));
        }
        let n = u8::try_from(n).unwrap_or(u8::MAX);
        let f = if slice { ArrayFunc::AssignSlice(n, given) } else { ArrayFunc::AssignElement };
        Ok((Expr::Func(Func::Array(f), out), Some(arr_ty)))
    }

    /// A subscript's bound: an integer (a numeric one cast to int4).
    fn subscript_bound(&mut self, e: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<Expr> {
        let (i, it) = self.expr(e, scope, ctx)?;
        Ok(match it {
            None => self.coerce(i, None, DataType::Int4, "subscript")?,
            Some(t) if value::is_int4_implicit(t) => i,
            Some(t) if value::category(t) == value::Category::Numeric => Expr::Cast(i.boxed(), DataType::Int4, false),
            Some(_) => return Err(SqlError::new("42804", "array subscript must have type integer")),
        })
    }

    /// `array || array` (either side may be NULL, as in PostgreSQL).
    pub(super) fn array_concat(
        &mut self,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let (x, xt) = self.expr(left, scope, ctx)?;
        let (y, yt) = self.expr(right, scope, ctx)?;
        if crate::value::array::is_array(xt) || crate::value::array::is_array(yt) || (xt.is_none() && yt.is_none()) {
            return self.real_concat(x, xt, y, yt);
        }
        let elem = xt
            .and_then(Elem::of)
            .or_else(|| yt.and_then(Elem::of))
            .ok_or_else(|| SqlError::unsupported("|| on arrays of unknown type"))?;
        let x = if xt.is_none() { self.array_literal(x, elem)? } else { x };
        let y = if yt.is_none() { self.array_literal(y, elem)? } else { y };
        for t in [xt, yt].into_iter().flatten() {
            if Elem::of(t) != Some(elem) {
                return Err(SqlError::undefined_operator(&format!(
                    "{} || {}",
                    value::type_name(t),
                    value::type_name(elem.data_type())
                )));
            }
        }
        Ok((Expr::Func(Func::Sys(SysFunc::ArrayConcat(elem)), vec![x, y]), Some(elem.data_type())))
    }
}

/// The column a [`Binder::subscript_assign`] call assigns: its first
/// argument, the column (qualified) or the call of an earlier assignment
/// to it.
fn assigned_column(target: &ast::Expr) -> String {
    match target {
        ast::Expr::Identifier(id) => id.value.clone(),
        ast::Expr::CompoundIdentifier(parts) => parts.last().map_or_else(String::new, |id| id.value.clone()),
        ast::Expr::Function(f) => match &f.args {
            ast::FunctionArguments::List(list) => match list.args.first() {
                Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))) => assigned_column(e),
                _ => String::new(),
            },
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// sqlparser reads `x LIKE ALL (a)` as LIKE of a call of a function
/// `all` (a reserved word PostgreSQL never takes as a function name
/// unquoted): its operand.
pub(super) fn like_all_operand(pattern: &ast::Expr) -> Option<Operand<'_>> {
    let ast::Expr::Function(f) = pattern else { return None };
    let [ast::ObjectNamePart::Identifier(name)] = f.name.0.as_slice() else { return None };
    if name.quote_style.is_some() || !name.value.eq_ignore_ascii_case("all") {
        return None;
    }
    match &f.args {
        ast::FunctionArguments::Subquery(q) => Some(Operand::Query(q)),
        ast::FunctionArguments::List(l)
            if l.args.len() == 1 && l.clauses.is_empty() && l.duplicate_treatment.is_none() =>
        {
            match &l.args[0] {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(Operand::of(e)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The right operand of ANY / ALL: an array, or a subquery's rows.
pub(super) enum Operand<'a> {
    Expr(&'a ast::Expr),
    Query(&'a ast::Query),
}

impl<'a> Operand<'a> {
    pub(super) fn of(e: &'a ast::Expr) -> Operand<'a> {
        match e {
            ast::Expr::Nested(inner) => Operand::of(inner),
            ast::Expr::Subquery(q) => Operand::Query(q),
            other => Operand::Expr(other),
        }
    }
}

/// 42804 for subscripting a type that has none (an untyped literal is unknown).
fn not_subscriptable(t: Ty) -> SqlError {
    let name = t.map_or("unknown", value::type_name);
    SqlError::new("42804", format!("cannot subscript type {name} because it does not support subscripting"))
}

/// The number of subscripts of a [`Binder::subscript_assign`] spec and which
/// slice bounds it gives (bit 2k lower, 2k+1 upper of subscript k).
fn parse_spec(spec: &str) -> Result<(usize, u16)> {
    let bad = || SqlError::undefined_function(crate::parse::SUBSCRIPT_ASSIGN);
    let mut chars = spec.chars();
    let (mut n, mut given) = (0usize, 0u16);
    while let Some(c) = chars.next() {
        if c == 's' {
            for bit in 0..2 {
                match chars.next() {
                    Some('1') => given |= 1u16.checked_shl(u32::try_from(2 * n + bit).map_err(|_| bad())?).unwrap_or(0),
                    Some('0') => {}
                    _ => return Err(bad()),
                }
            }
        } else if c != 'i' {
            return Err(bad());
        }
        n += 1;
    }
    Ok((n, given))
}

/// Written as an array (`ARRAY[...]`, `ARRAY(subquery)`, `::type[]`): `||` on it is array concatenation.
pub(super) fn is_array_ast(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Array(_) => true,
        ast::Expr::Function(f) => {
            function_name(&f.name).is_ok_and(|n| n == "array") && matches!(f.args, ast::FunctionArguments::Subquery(_))
        }
        ast::Expr::Cast { data_type, .. } => {
            matches!(cast_target(data_type), Some(CastTarget::Array(_))) || matches!(data_type, ast::DataType::Array(_))
        }
        ast::Expr::Nested(inner) => is_array_ast(inner),
        _ => false,
    }
}

/// Element types `=` (and the other comparisons) accept together.
pub(super) fn comparable(a: DataType, b: DataType) -> bool {
    let (ca, cb) = (category(a), category(b));
    ca == cb
        && (ca != value::Category::Array
            || matches!((elem_type(a), elem_type(b)), (Some(x), Some(y)) if comparable(x, y)))
}
