//! Function calls: builtin scalar functions and the system functions
//! (what drivers and psql call).

use pgtier_engine::DataType;
use sqlparser::ast::{self, ObjectName};

use super::aggregate::aggregate_named;
use super::coerce::{is_untyped_value, refuse_padded_literals};
use super::{Binder, ExprCtx, Scope, Ty, parts, truncate};
use crate::catalog::functions::FnInfo;
use crate::error::{Result, SqlError};
use crate::expr::{CmpOp, Expr, Func, SeqFunc, SysFunc, registry};
use crate::value::types::{Elem, RegKind};
use crate::value::{self, type_name};

impl Binder<'_> {
    pub(super) fn function(&mut self, f: &ast::Function, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        if !f.within_group.is_empty() && f.null_treatment.is_none() && f.parameters == ast::FunctionArguments::None {
            return self.ordered_set_aggregate(f, &function_name(&f.name)?, scope, ctx);
        }
        if !f.within_group.is_empty() || f.null_treatment.is_some() || f.parameters != ast::FunctionArguments::None {
            return Err(SqlError::unsupported(format!("function call {}", truncate(&f.to_string()))));
        }
        let name = function_name(&f.name)?;
        let mut order_by: &[ast::OrderByExpr] = &[];
        let (args, distinct, star) = match &f.args {
            ast::FunctionArguments::None => (Vec::new(), false, false),
            ast::FunctionArguments::Subquery(q) if name == "array" => return self.array_subquery(q, scope),
            ast::FunctionArguments::Subquery(_) => return Err(SqlError::unsupported("subquery as function argument")),
            ast::FunctionArguments::List(list) => {
                for clause in &list.clauses {
                    match clause {
                        ast::FunctionArgumentClause::OrderBy(items) if order_by.is_empty() => order_by = items,
                        _ => return Err(SqlError::unsupported(format!("clauses in {name}()"))),
                    }
                }
                let distinct = matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct));
                let mut args = Vec::new();
                let mut named = Vec::new();
                let mut star = false;
                for (k, a) in list.args.iter().enumerate() {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Prefixed {
                            prefix,
                            value,
                        })) if prefix.value.eq_ignore_ascii_case("variadic") => {
                            if k + 1 != list.args.len() {
                                return Err(SqlError::syntax("syntax error: VARIADIC must be the last argument"));
                            }
                            match variadic_elements(&name, k, value)? {
                                Spread::Args(elements) => args.extend(elements),
                                Spread::Call(call) => return self.call_value(&args, &call, scope, ctx),
                            }
                        }
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) if named.is_empty() => {
                            args.push(e.clone())
                        }
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(_)) => {
                            return Err(SqlError::syntax("positional argument cannot follow named argument"));
                        }
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        ast::FunctionArg::Named { name: arg_name, arg: ast::FunctionArgExpr::Expr(e), .. }
                            if name == "make_interval" =>
                        {
                            named.push((arg_name.value.clone(), e.clone()));
                        }
                        ast::FunctionArg::ExprNamed {
                            name: ast::Expr::Identifier(arg_name),
                            arg: ast::FunctionArgExpr::Expr(e),
                            ..
                        } if name == "make_interval" => {
                            named.push((arg_name.value.clone(), e.clone()));
                        }
                        a if super::json::takes_named_args(&name) => named.push(super::json::named_arg(a, &name)?),
                        _ => return Err(SqlError::unsupported(format!("argument form in {name}()"))),
                    }
                }
                if super::json::takes_named_args(&name) && !named.is_empty() {
                    args = super::json::path_named_args(args, std::mem::take(&mut named), &name)?;
                }
                if name == "make_interval" {
                    args = super::interval_fns::make_interval_args(args, named)?;
                }
                (args, distinct, star)
            }
        };
        let filter = match &f.filter {
            None => None,
            Some(_) if aggregate_named(&name, star).is_none() => {
                return Err(SqlError::new(
                    "42809",
                    format!("FILTER specified, but {name} is not an aggregate function"),
                ));
            }
            Some(cond) => {
                let (b, t) = self.expr(cond, scope, &mut ExprCtx::plain("FILTER"))?;
                Some(self.boolean(b, t, "FILTER")?)
            }
        };
        if !order_by.is_empty() && aggregate_named(&name, star).is_none() {
            return Err(SqlError::new("42809", format!("ORDER BY specified, but {name} is not an aggregate function")));
        }
        if let Some(over) = &f.over {
            if !order_by.is_empty() {
                return Err(SqlError::unsupported("aggregate ORDER BY is not implemented for window functions"));
            }
            return self.window_function(over, &name, &args, star, distinct, filter, scope, ctx);
        }
        if let Some(func) = aggregate_named(&name, star) {
            return self.aggregate(func, &name, &args, distinct, filter, order_by, scope, ctx);
        }
        if star {
            return Err(SqlError::new(
                "42809",
                format!("{name}(*) specified, but {name} is not an aggregate function"),
            ));
        }
        if distinct {
            return Err(SqlError::new("42809", format!("DISTINCT specified, but {name} is not an aggregate function")));
        }
        if let Some(typeof_varchar) = self.typeof_varchar_cast(&name, &args, scope, ctx)? {
            return Ok(typeof_varchar);
        }
        let call = self.scalar_function(&name, &args, scope, ctx)?;
        call.0.walk(&mut |e| {
            self.volatile_calls |= matches!(e, Expr::Func(Func::Sys(SysFunc::Sequence(_)), _))
                || matches!(e, Expr::Func(f, _) if f.volatility() == crate::expr::Volatility::Volatile);
        });
        self.touch_sequences([&call.0]);
        Ok(call)
    }

    /// `call`, the value of a call whatever its arguments `args` hold; they
    /// are still bound, for their errors.
    fn call_value(
        &mut self,
        args: &[ast::Expr],
        call: &ast::Expr,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        for a in args {
            self.expr(a, scope, ctx)?;
        }
        self.expr(call, scope, ctx)
    }

    /// pg_typeof of a cast to varchar without a length, or to an array
    /// of it (`varchar_cast_type`).
    fn typeof_varchar_cast(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<Option<(Expr, Ty)>> {
        let (true, [arg]) = (name == "pg_typeof", args) else { return Ok(None) };
        let Some(oid) = varchar_cast_type(arg) else { return Ok(None) };
        // The argument is still bound, for its errors.
        self.expr(arg, scope, ctx)?;
        Ok(Some((Expr::Const(pgtier_engine::Value::Int8(oid)), Some(RegKind::Type.data_type()))))
    }

    /// An argument for an `integer` parameter: smallint or integer (cast),
    /// an unknown literal or parameter (typed integer); bigint and the
    /// other types have no implicit cast to integer, so no such function
    /// (42883 with the call's signature `sig`).
    pub(super) fn int4_param(&mut self, e: Expr, t: Ty, sig: &str) -> Result<Expr> {
        match t {
            None => self.coerce(e, None, DataType::Int4, "integer argument"),
            Some(t) if value::is_int4_implicit(t) => self.result_cast(e, Some(t), Some(DataType::Int4)),
            Some(_) => Err(SqlError::undefined_function(sig)),
        }
    }

    pub(super) fn scalar_function(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let mut bound: Vec<(Expr, Ty)> = Vec::new();
        for a in args {
            // PostgreSQL drops COALESCE's arguments after a non-null
            // constant without simplifying them.
            let decided = name == "coalesce" && bound.iter().any(|(e, _)| matches!(e, Expr::Const(v) if !v.is_null()));
            bound.push(self.lazily(decided, |b| b.expr(a, scope, ctx))?);
        }
        if name == crate::parse::SUBSCRIPT_ASSIGN {
            return self.subscript_assign(bound, args.first());
        }
        self.bound_function(name, bound)
    }

    /// The call of `name` on arguments already bound (also the prefix
    /// operators that are a function under another name: `@` abs, `|/` sqrt).
    pub(super) fn bound_function(&mut self, name: &str, bound: Vec<(Expr, Ty)>) -> Result<(Expr, Ty)> {
        if let Some(call) = self.function_by_another_name(name, &bound)? {
            return Ok(call);
        }
        let sig = {
            let types: Vec<&str> = bound.iter().map(|(_, t)| t.map_or("unknown", type_name)).collect();
            format!("{name}({})", types.join(", "))
        };
        if super::array_func::is_array_call(name, &bound) {
            return self.array_function(name, bound, &sig);
        }
        if name == "nullif" && bound.len() == 2 {
            return self.nullif(bound);
        }
        if let Some(def) = registry::lookup(name) {
            return registry::resolve(def, self, registry::Call { name, sig: &sig, args: bound });
        }
        if name == "array_to_json" {
            return self.array_to_json(bound, &sig);
        }
        if super::json::is_unsupported_json_function(name) {
            return self
                .json_function(name, bound, &sig)?
                .ok_or_else(|| SqlError::unsupported(format!("function {name}")));
        }
        // pg_catalog comes first in every search path: the system
        // functions, then those made with CREATE FUNCTION (in public).
        if let Some(call) = self.sys_function(name, bound.clone())? {
            return Ok(call);
        }
        // ROW(...) is PostgreSQL's row constructor (a composite value),
        // which pgtier has no type for: refused, not "does not exist".
        self.user_function_call(name, bound, &sig)?.ok_or_else(|| match name {
            "row" => SqlError::unsupported("ROW constructors (composite values)"),
            _ => SqlError::undefined_function(&sig),
        })
    }

    /// pg_catalog's functions that are a cast or an operator by another
    /// name: `float8(bigint)` and the other numeric conversions (i8tod,
    /// ...: the casts' own functions; an untyped literal is read as the
    /// type, as PostgreSQL's function-style cast does), booleq, boolne.
    /// (`numeric(x)` is a syntax error in PostgreSQL: NUMERIC is a keyword.)
    fn function_by_another_name(&mut self, name: &str, bound: &[(Expr, Ty)]) -> Result<Option<(Expr, Ty)>> {
        let target = match name {
            "int2" => DataType::Int2,
            "int4" => DataType::Int4,
            "int8" => DataType::Int8,
            "float4" => DataType::Float4,
            "float8" => DataType::Float8,
            "booleq" | "boolne" if bound.len() == 2 => {
                let op = if name == "booleq" { CmpOp::Eq } else { CmpOp::NotEq };
                let [(x, xt), (y, yt)] = [bound[0].clone(), bound[1].clone()];
                if [xt, yt].iter().any(|t| t.is_some_and(|t| t != DataType::Bool)) {
                    return Ok(None);
                }
                let x = self.coerce(x, xt, DataType::Bool, name)?;
                let y = self.coerce(y, yt, DataType::Bool, name)?;
                return Ok(Some((Expr::Cmp(op, x.boxed(), y.boxed()), Some(DataType::Bool))));
            }
            _ => return Ok(None),
        };
        let [(x, xt)] = bound else { return Ok(None) };
        Ok(match xt {
            Some(t) if value::category(*t) == value::Category::Numeric && RegKind::of(*t).is_none() => {
                Some((Expr::Cast(x.clone().boxed(), target, true), Some(target)))
            }
            None if matches!(x, Expr::Const(_)) => Some((self.coerce(x.clone(), None, target, name)?, Some(target))),
            _ => None,
        })
    }

    /// NULLIF(x, y): a comparison of x and y, x's value unless they are equal.
    fn nullif(&mut self, bound: Vec<(Expr, Ty)>) -> Result<(Expr, Ty)> {
        let [(x, xt), (y, yt)]: [(Expr, Ty); 2] =
            bound.try_into().map_err(|_| SqlError::new("XX000", "NULLIF without two arguments"))?;
        // NULLIF('a', c) returns 'a' as character without a length
        // (unpadded); pgtier's character carries c's length.
        refuse_padded_literals(&[yt], &[is_untyped_value(&x, xt)], "NULLIF")?;
        let (x, y) = self.unify_cmp(x, xt, y, yt, "=")?;
        let t = xt.or(yt).or(Some(DataType::Text));
        Ok((Expr::NullIf(x.boxed(), y.boxed()), t))
    }

    /// System functions, after the builtin scalar functions.
    fn sys_function(&mut self, name: &str, bound: Vec<(Expr, Ty)>) -> Result<Option<(Expr, Ty)>> {
        if name == "pg_partition_ancestors" {
            return Err(SqlError::unsupported("pg_partition_ancestors() outside FROM or a SELECT list without FROM"));
        }
        if let Some(call) = self.backend_sequence_call(name, &bound)? {
            return Ok(Some(call));
        }
        // A regclass argument (nextval('s')) is looked up as `::regclass` would.
        let mut coerce = |e: Expr, t: Ty, to: DataType| match RegKind::of(to) {
            Some(kind) => self.reg_cast(e, t, kind).map(|(e, _)| e),
            None => self.coerce(e, t, to, name),
        };
        bind_function(name, bound, &mut coerce)
    }

    /// nextval('s') / currval('s') of PostgreSQL's sequence `s` that a
    /// cached column's default draws from, when no relation of pgtier's has
    /// that name: bound to the name (the executor draws from the cache's
    /// reserved block), the plan depending on that table (so it re-plans
    /// when the group goes). setval is refused: the values are PostgreSQL's.
    /// None for every other call, which binds as before (a sequence named
    /// nowhere is 42P01, and the server may pass the statement through).
    fn backend_sequence_call(&mut self, name: &str, bound: &[(Expr, Ty)]) -> Result<Option<(Expr, Ty)>> {
        let call = match (name, bound.len()) {
            ("nextval", 1) => SeqFunc::Nextval,
            ("currval", 1) => SeqFunc::Currval,
            ("setval", 2 | 3) => SeqFunc::Setval,
            _ => return Ok(None),
        };
        let Some((Expr::Const(pgtier_engine::Value::Text(text)), None | Some(DataType::Text | DataType::Varchar(_)))) =
            bound.first()
        else {
            return Ok(None);
        };
        let settings = std::collections::HashMap::new();
        match crate::catalog::reg_lookup_in(self.catalog, self.path, &settings, RegKind::Class, text) {
            Err(e) if matches!(e.sqlstate, "42P01" | "3F000") => {}
            _ => return Ok(None),
        }
        let Some((table, sequence)) = crate::catalog::backend_sequence(self.catalog, text) else { return Ok(None) };
        if call == SeqFunc::Setval {
            return Err(SqlError::unsupported(format!("setval of sequence \"{text}\", whose values pgtier reserves from PostgreSQL"))
                .with_hint("Run setval on PostgreSQL: pgtier hands out the values it has already reserved first, as a session with a sequence CACHE does."));
        }
        if !self.deps.iter().any(|d| std::sync::Arc::ptr_eq(d, &table)) {
            self.deps.push(table);
        }
        let key = pgtier_cache::KeyDefault::sequence_key(&sequence);
        Ok(Some((
            Expr::Func(Func::Sys(SysFunc::Sequence(call)), vec![Expr::Const(pgtier_engine::Value::Text(key))]),
            Some(DataType::Int8),
        )))
    }

    /// `EXTRACT(field FROM x)` (numeric) or `date_part('field', x)` (float8).
    pub(super) fn extract(&mut self, field: &str, x: Expr, t: Ty, numeric: bool) -> Result<(Expr, Ty)> {
        crate::expr::extract_call(self, field, x, t, numeric)
    }

    /// `current_schema` written without parentheses.
    pub(super) fn keyword_function(&mut self, name: &str) -> Result<Option<(Expr, Ty)>> {
        match name {
            "current_schema" => self.sys_function(name, Vec::new()),
            _ => Ok(None),
        }
    }
}

/// A function's name: `pg_catalog.f` is `f`.
/// Built-in functions with a VARIADIC parameter whose call with
/// `VARIADIC ARRAY[a, b]` is their call with `a, b`, how many parameters
/// come before it (the VARIADIC argument's place), and what a NULL array
/// makes of the call.
const VARIADIC_FUNCTIONS: &[(&str, usize, NullArray)] = &[
    ("concat", 0, NullArray::Null("text")),
    ("concat_ws", 1, NullArray::Null("text")),
    // text_format: a NULL array is no arguments.
    ("format", 1, NullArray::NoArguments),
    ("json_build_array", 0, NullArray::Null("json")),
    ("json_build_object", 0, NullArray::Null("json")),
    ("jsonb_build_array", 0, NullArray::Null("jsonb")),
    ("jsonb_build_object", 0, NullArray::Null("jsonb")),
    ("json_extract_path", 1, NullArray::Null("json")),
    ("json_extract_path_text", 1, NullArray::Null("text")),
    ("jsonb_extract_path", 1, NullArray::Null("jsonb")),
    ("jsonb_extract_path_text", 1, NullArray::Null("text")),
];

/// The type oid of a cast to varchar without a length (1043) or to an
/// array of it (1015): pgtier keeps such values as text, whose name
/// pg_typeof would otherwise give.
fn varchar_cast_type(arg: &ast::Expr) -> Option<i64> {
    let is_varchar =
        |t: &ast::DataType| matches!(t, ast::DataType::Varchar(None) | ast::DataType::CharacterVarying(None));
    match arg {
        ast::Expr::Cast { data_type, .. } if is_varchar(data_type) => Some(1043),
        ast::Expr::Cast { data_type, .. } if array_element_type(data_type).is_some_and(is_varchar) => Some(1015),
        ast::Expr::Nested(inner) => varchar_cast_type(inner),
        _ => None,
    }
}

/// A variadic function's answer to `VARIADIC NULL::t[]`.
#[derive(Clone, Copy)]
enum NullArray {
    /// The call is NULL of this type (extract_variadic_args' -1).
    Null(&'static str),
    NoArguments,
}

/// `f(..., VARIADIC array)` spread as `f(..., e1, e2)`, which is exactly
/// the same call when the array is a constant PostgreSQL would build from
/// the same elements: `ARRAY[...]` of literals of one kind (their type is
/// the array's element type), `ARRAY[...]::t[]` (each element cast to t),
/// `'{...}'::t[]` (each element's text read as t, as array_in does, every
/// dimension flattened in order as extract_variadic_args does) or
/// `NULL::t[]`. Other forms (an array column, a nested constructor, mixed
/// literals) are refused.
fn variadic_elements(function: &str, place: usize, value: &ast::Expr) -> Result<Spread> {
    let refuse = || SqlError::unsupported(format!("{function}(VARIADIC {})", truncate(&value.to_string())));
    let null_array = match VARIADIC_FUNCTIONS.iter().find(|(name, _, _)| *name == function) {
        Some(&(_, fixed, null_array)) if fixed == place => null_array,
        // PostgreSQL: no such function (the array is not where its
        // variadic parameter is), or not a variadic one.
        Some(_) => {
            return Err(SqlError::new(
                "42883",
                format!("function {function} with VARIADIC at argument {} does not exist", place + 1),
            ));
        }
        None => return Err(refuse()),
    };
    let elements = match value {
        ast::Expr::Array(ast::Array { elem, named: true }) => literal_elements(elem).ok_or_else(refuse)?,
        ast::Expr::Cast {
            kind: ast::CastKind::DoubleColon | ast::CastKind::Cast,
            expr,
            data_type,
            format: None,
            ..
        } => {
            let Some(element_type) = array_element_type(data_type) else { return Err(refuse()) };
            match expr.as_ref() {
                ast::Expr::Value(v) if matches!(v.value, ast::Value::Null) => {
                    return Ok(match null_array {
                        NullArray::Null(result_type) => Spread::Call(Box::new(null_of(result_type))),
                        NullArray::NoArguments => Spread::Args(Vec::new()),
                    });
                }
                ast::Expr::Value(v) => match &v.value {
                    ast::Value::SingleQuotedString(text) => flatten(crate::value::array::parse(text)?)
                        .into_iter()
                        .map(|e| cast_to(e.map_or(ast::Value::Null, ast::Value::SingleQuotedString), element_type))
                        .collect(),
                    _ => return Err(refuse()),
                },
                ast::Expr::Array(ast::Array { elem, named: true })
                    if elem.iter().all(|e| !matches!(e, ast::Expr::Array(_))) =>
                {
                    elem.iter().map(|e| cast_expr(e.clone(), element_type)).collect()
                }
                _ => return Err(refuse()),
            }
        }
        _ => return Err(refuse()),
    };
    if elements.is_empty() && function == "concat" {
        // concat() has no zero-argument form; over no elements it is ''.
        return Ok(Spread::Call(Box::new(ast::Expr::value(ast::Value::SingleQuotedString(String::new())))));
    }
    Ok(Spread::Args(elements))
}

/// What a VARIADIC argument makes of its call.
enum Spread {
    /// The call with these arguments in the array's place.
    Args(Vec<ast::Expr>),
    /// The call's value whatever its other arguments hold.
    Call(Box<ast::Expr>),
}

fn null_of(type_name: &str) -> ast::Expr {
    let data_type = ast::DataType::Custom(ObjectName::from(vec![ast::Ident::new(type_name)]), Vec::new());
    cast_expr(ast::Expr::value(ast::Value::Null), &data_type)
}

/// `t` of `t[]` (or of `t[][]`: PostgreSQL ignores the number of
/// brackets).
fn array_element_type(data_type: &ast::DataType) -> Option<&ast::DataType> {
    match data_type {
        ast::DataType::Array(ast::ArrayElemTypeDef::SquareBracket(inner, _)) => {
            Some(array_element_type(inner).unwrap_or(inner))
        }
        _ => None,
    }
}

fn cast_expr(expr: ast::Expr, data_type: &ast::DataType) -> ast::Expr {
    ast::Expr::Cast {
        kind: ast::CastKind::Cast,
        expr: Box::new(expr),
        data_type: data_type.clone(),
        array: false,
        format: None,
    }
}

fn cast_to(value: ast::Value, data_type: &ast::DataType) -> ast::Expr {
    cast_expr(ast::Expr::value(value), data_type)
}

/// Every element of an array's text form, in order, whatever its
/// dimensions.
fn flatten(level: crate::value::array::Level) -> Vec<Option<String>> {
    match level {
        crate::value::array::Level::Items(items) => items,
        crate::value::array::Level::Lists(lists) => lists.into_iter().flat_map(flatten).collect(),
    }
}

/// The elements of `ARRAY[...]` when they are literals of one kind
/// (strings, numbers, booleans or NULL), so the array's element type is
/// theirs; None otherwise (and for an empty constructor, which has no
/// type).
fn literal_elements(elem: &[ast::Expr]) -> Option<Vec<ast::Expr>> {
    let kind = |e: &ast::Expr| -> Option<u8> {
        match e {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(_) => Some(1),
                ast::Value::Number(..) => Some(2),
                ast::Value::Boolean(_) => Some(3),
                ast::Value::Null => Some(0),
                _ => None,
            },
            ast::Expr::UnaryOp { op: ast::UnaryOperator::Minus, expr } => {
                matches!(expr.as_ref(), ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..))).then_some(2)
            }
            _ => None,
        }
    };
    let mut seen = 0u8;
    for e in elem {
        match kind(e) {
            Some(0) => {}
            Some(k) if seen == 0 || seen == k => seen = k,
            _ => return None,
        }
    }
    (!elem.is_empty()).then(|| elem.to_vec())
}

pub(super) fn function_name(name: &ObjectName) -> Result<String> {
    match parts(name)?.as_slice() {
        [n] => Ok(n.clone()),
        [s, n] if s == "pg_catalog" || s == "public" => Ok(n.clone()),
        // Not on the search path in PostgreSQL either: only by this name.
        [s, n] if s == "information_schema" && n == "_pg_expandarray" => Ok(EXPAND_ARRAY.to_owned()),
        [s, _] => Err(SqlError::new("3F000", format!("schema \"{s}\" does not exist"))),
        _ => Err(SqlError::unsupported(format!("name {name}"))),
    }
}

/// `information_schema._pg_expandarray`, as [`function_name`] gives it.
pub(super) const EXPAND_ARRAY: &str = "information_schema._pg_expandarray";

/// Binds a system function call; None if `name` is not one.
fn bind_function(
    name: &str,
    args: Vec<(Expr, Ty)>,
    coerce: &mut dyn FnMut(Expr, Ty, DataType) -> Result<Expr>,
) -> Result<Option<(Expr, Ty)>> {
    use DataType::{Int8, Text};
    let n = args.len();
    let sig = {
        let types: Vec<&str> = args.iter().map(|(_, t)| t.map_or("unknown", value::type_name)).collect();
        format!("{name}({})", types.join(", "))
    };
    let bad = || SqlError::undefined_function(&sig);
    let Some((f, want, ret)) = sys_signature(name, &args, &bad)? else { return Ok(None) };
    let mut out = Vec::with_capacity(n);
    if f == SysFunc::NullResult {
        // Never looks at its arguments: any types do.
        for (e, t) in args {
            out.push(if t.is_none() { coerce(e, None, Text)? } else { e });
        }
        return Ok(Some((Expr::Func(Func::Sys(f), out), Some(ret))));
    }
    for ((e, t), w) in args.into_iter().zip(want) {
        out.push(match t {
            Some(t) if t == w => e,
            _ if RegKind::of(w).is_some() => coerce(e, t, w)?,
            Some(t) if RegKind::of(t).is_some() && w == Int8 => e,
            Some(t) if value::category(t) == value::category(w) && Elem::of(t).is_none() && Elem::of(w).is_none() => {
                if w == Text {
                    e
                } else {
                    Expr::Cast(e.boxed(), w, false)
                }
            }
            None => coerce(e, None, w)?,
            Some(_) => return Err(bad()),
        });
    }
    Ok(Some((Expr::Func(Func::Sys(f), out), Some(ret))))
}

/// A system function, its parameter types and its result type.
type SysSignature = (SysFunc, Vec<DataType>, DataType);

/// The system function `name` called with `args`; None if there is none.
fn sys_signature(name: &str, args: &[(Expr, Ty)], bad: &dyn Fn() -> SqlError) -> Result<Option<SysSignature>> {
    use DataType::{Bool, Int4, Int8, Text};
    let n = args.len();
    let array_arg = |k: usize| -> Option<Elem> { args.get(k).and_then(|a| a.1).and_then(Elem::of) };
    Ok(Some(match (name, n) {
        ("version", 0) => (SysFunc::Version, vec![], Text),
        ("current_setting", 1) => (SysFunc::CurrentSetting, vec![Text], Text),
        ("current_setting", 2) => (SysFunc::CurrentSetting, vec![Text, Bool], Text),
        ("set_config", 3) => (SysFunc::SetConfig, vec![Text, Text, Bool], Text),
        ("current_database" | "current_catalog", 0) => (SysFunc::CurrentDatabase, vec![], Text),
        ("current_schema", 0) => (SysFunc::CurrentSchema, vec![], Text),
        ("current_schemas", 1) => (SysFunc::CurrentSchemas, vec![Bool], Elem::Text.data_type()),
        ("current_user" | "user" | "current_role" | "getpgusername", 0) => (SysFunc::CurrentUser, vec![], Text),
        ("session_user", 0) => (SysFunc::SessionUser, vec![], Text),
        ("pg_backend_pid", 0) => (SysFunc::BackendPid, vec![], Int4),
        ("format_type", 2) => (SysFunc::FormatType, vec![Int8, Int4], Text),
        ("pg_get_indexdef", 1) => (SysFunc::IndexDef, vec![Int8], Text),
        ("pg_get_indexdef", 3) => (SysFunc::IndexDef, vec![Int8, Int4, Bool], Text),
        ("pg_get_constraintdef", 1) => (SysFunc::ConstraintDef, vec![Int8], Text),
        ("pg_get_constraintdef", 2) => (SysFunc::ConstraintDef, vec![Int8, Bool], Text),
        ("pg_get_expr", 2) => (SysFunc::GetExpr, vec![Text, Int8], Text),
        ("pg_get_expr", 3) => (SysFunc::GetExpr, vec![Text, Int8, Bool], Text),
        ("pg_get_userbyid", 1) => (SysFunc::UserById, vec![Int8], Text),
        ("pg_table_is_visible", 1) => (SysFunc::TableIsVisible, vec![Int8], Bool),
        ("pg_type_is_visible", 1) => (SysFunc::TypeIsVisible, vec![Int8], Bool),
        ("obj_description", 1 | 2) | ("shobj_description", 2) | ("col_description", 2) => {
            (SysFunc::NoDescription, vec![Int8, if name == "col_description" { Int4 } else { Text }], Text)
        }
        ("pg_encoding_to_char", 1) => (SysFunc::EncodingToChar, vec![Int4], Text),
        (
            "has_table_privilege"
            | "has_sequence_privilege"
            | "has_schema_privilege"
            | "has_database_privilege"
            | "has_any_column_privilege"
            | "pg_has_role",
            2 | 3,
        ) => {
            use crate::catalog::roles::PrivilegeFn as P;
            let which = match name {
                "has_table_privilege" | "has_sequence_privilege" => P::Table,
                "has_schema_privilege" => P::Schema,
                "has_database_privilege" => P::Database,
                "has_any_column_privilege" => P::AnyColumn,
                _ => P::Role,
            };
            (SysFunc::HasPrivilege(which), vec![Text; n], Bool)
        }
        ("has_column_privilege", 3 | 4) => {
            (SysFunc::HasPrivilege(crate::catalog::roles::PrivilegeFn::Column), vec![Text; n], Bool)
        }
        ("pg_relation_is_publishable", 1) => (SysFunc::RelationIsPublishable, vec![Int8], Bool),
        // pg_get_viewdef(text) names the view; an untyped literal picks it, as in PostgreSQL.
        ("pg_get_viewdef", 1 | 2) if matches!(args[0].1, None | Some(Text)) => {
            (SysFunc::ViewDefByName, vec![Text, Bool][..n].to_vec(), Text)
        }
        ("pg_get_viewdef", 1 | 2) => (SysFunc::ViewDef, vec![Int8, Bool][..n].to_vec(), Text),
        ("pg_get_partkeydef", 1) => (SysFunc::PartKeyDef, vec![Int8], Text),
        ("pg_get_statisticsobjdef_columns" | "pg_get_triggerdef" | "pg_get_ruledef", 1 | 2) => {
            (SysFunc::NullResult, vec![Int8; n], Text)
        }
        ("pg_get_serial_sequence", 2) => (SysFunc::SerialSequence, vec![Text, Text], Text),
        ("nextval", 1) => (SysFunc::Sequence(SeqFunc::Nextval), vec![RegKind::Class.data_type()], Int8),
        ("currval", 1) => (SysFunc::Sequence(SeqFunc::Currval), vec![RegKind::Class.data_type()], Int8),
        ("setval", 2) => (SysFunc::Sequence(SeqFunc::Setval), vec![RegKind::Class.data_type(), Int8], Int8),
        ("setval", 3) => (SysFunc::Sequence(SeqFunc::Setval), vec![RegKind::Class.data_type(), Int8, Bool], Int8),
        ("lastval", 0) => (SysFunc::Sequence(SeqFunc::Lastval), vec![], Int8),
        // pg_proc lists the functions made with CREATE FUNCTION only.
        ("pg_get_function_result", 1) => (SysFunc::FunctionInfo(FnInfo::Result), vec![Int8], Text),
        ("pg_get_function_arguments", 1) => (SysFunc::FunctionInfo(FnInfo::Arguments), vec![Int8], Text),
        ("pg_get_function_identity_arguments", 1) => {
            (SysFunc::FunctionInfo(FnInfo::IdentityArguments), vec![Int8], Text)
        }
        ("pg_function_is_visible", 1) => (SysFunc::FunctionInfo(FnInfo::IsVisible), vec![Int8], Bool),
        ("pg_is_in_recovery", 0) => (SysFunc::IsInRecovery, vec![], Bool),
        ("quote_ident", 1) => (SysFunc::QuoteIdent, vec![Text], Text),
        // pgtier has no partitioning: no relation has a partition root.
        ("pg_partition_root", 1) => (SysFunc::NullResult, vec![Int8], RegKind::Class.data_type()),
        ("to_regclass", 1) => (SysFunc::RegIn(RegKind::Class, true), vec![Text], RegKind::Class.data_type()),
        ("to_regtype", 1) => (SysFunc::RegIn(RegKind::Type, true), vec![Text], RegKind::Type.data_type()),
        ("to_regnamespace", 1) => {
            (SysFunc::RegIn(RegKind::Namespace, true), vec![Text], RegKind::Namespace.data_type())
        }
        ("array_to_string", 2 | 3) => {
            let e = array_arg(0).ok_or_else(bad)?;
            (SysFunc::ArrayToString(e), vec![e.data_type(), Text, Text][..n].to_vec(), Text)
        }
        ("array_upper" | "array_lower" | "array_length", 2) => {
            let e = array_arg(0).ok_or_else(bad)?;
            let f = match name {
                "array_upper" => SysFunc::ArrayUpper(e),
                "array_lower" => SysFunc::ArrayLower(e),
                _ => SysFunc::ArrayLength(e),
            };
            (f, vec![e.data_type(), Int4], Int4)
        }
        ("cardinality", 1) => {
            let e = array_arg(0).ok_or_else(bad)?;
            (SysFunc::Cardinality(e), vec![e.data_type()], Int4)
        }
        (
            "pg_table_size" | "pg_relation_size" | "pg_total_relation_size" | "pg_indexes_size" | "pg_database_size",
            _,
        ) => {
            return Err(SqlError::unsupported(format!("{name}(): pgtier keeps no relation files to measure")));
        }
        _ => return Ok(None),
    }))
}
