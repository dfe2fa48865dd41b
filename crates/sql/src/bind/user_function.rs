//! CREATE FUNCTION ... LANGUAGE sql, DROP FUNCTION, and calls of such
//! functions (catalog/functions.rs keeps them).
//!
//! The body is parsed and bound at CREATE (so a missing table is 42P01
//! there, as with PostgreSQL's check_function_bodies) and again at each
//! binding of a statement that calls it: the call becomes a
//! `SubqueryKind::Call` whose plan is the body, run with the arguments as
//! its `$n` (exec's `call_function`). The statement depends on the
//! function's engine table and on the body's tables, so DROP or CREATE OR
//! REPLACE re-plans it.

use pgtier_engine::DataType;
use sqlparser::ast::{self, ObjectName};

use super::{Binder, Ty, map_type, parts};
use crate::catalog::functions::{FunctionDef, FunctionDoc, UserFunction, functions_named, type_identity};
use crate::error::{Result, SqlError};
use crate::expr::{Expr, SubqueryKind};
use crate::plan::{Plan, SelectPlan};

/// Function bodies bound inside one another (a body calling a function
/// that calls ...) before the call is refused with 54001.
pub(super) const BODY_DEPTH_MAX: usize = 32;

/// What a function body's names see besides its relations.
#[derive(Clone, Debug, Default)]
pub(crate) struct BodyScope {
    /// Argument names in order ("" for an unnamed one).
    pub names: Vec<String>,
    /// Bodies bound around this one (1 for a body called from a statement).
    pub depth: usize,
    /// A PL/pgSQL function's: `names` are its slots (variables too, and
    /// a record's fields as `rec.field`; "" for one out of scope), the
    /// innermost declaration wins, and a name that is also a column is
    /// ambiguous (42702), as plpgsql.variable_conflict = error.
    pub plpgsql: bool,
}

/// A function's name: unqualified or in `public` (pgtier keeps functions
/// there only).
fn function_name(name: &ObjectName) -> Result<String> {
    match parts(name)?.as_slice() {
        [n] => Ok(n.clone()),
        [s, n] if s == "public" => Ok(n.clone()),
        _ => Err(SqlError::unsupported(format!("functions outside schema public ({name})"))),
    }
}

fn arg_types(args: Option<&Vec<ast::OperateFunctionArg>>) -> Result<(Vec<DataType>, Vec<String>)> {
    let mut types = Vec::new();
    let mut names = Vec::new();
    for a in args.into_iter().flatten() {
        match &a.mode {
            None | Some(ast::ArgMode::In) => {}
            Some(m) => return Err(SqlError::unsupported(format!("{m} function arguments"))),
        }
        if a.default_expr.is_some() {
            return Err(SqlError::unsupported("function argument defaults"));
        }
        types.push(declared_type(&a.data_type)?);
        names.push(a.name.as_ref().map(super::ident).unwrap_or_default());
    }
    Ok((types, names))
}

/// An argument or return type; the pseudo-types are refused.
fn declared_type(t: &ast::DataType) -> Result<DataType> {
    let text = t.to_string().to_lowercase();
    if ["void", "trigger", "record", "anyelement", "anyarray", "internal", "cstring"].contains(&text.as_str()) {
        return Err(SqlError::unsupported(format!("functions of type {text}")));
    }
    map_type(t)
}

/// The body as text: `AS '...'` / `AS $$...$$`, or `RETURN expr` as the
/// query `SELECT expr`.
fn body_text(f: &ast::CreateFunction) -> Result<String> {
    match &f.function_body {
        Some(ast::CreateFunctionBody::AsBeforeOptions { body, link_symbol: None })
        | Some(ast::CreateFunctionBody::AsAfterOptions(body)) => match body {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) | ast::Value::EscapedStringLiteral(s) => Ok(s.clone()),
                ast::Value::DollarQuotedString(d) => Ok(d.value.clone()),
                _ => Err(SqlError::syntax(format!("syntax error at or near \"{body}\""))),
            },
            _ => Err(SqlError::syntax(format!("syntax error at or near \"{body}\""))),
        },
        Some(ast::CreateFunctionBody::Return(e)) => Ok(format!("SELECT {e}")),
        None => Err(SqlError::new("42P13", "no function body specified")),
        Some(_) => Err(SqlError::unsupported("this form of function body")),
    }
}

fn refuse_options(f: &ast::CreateFunction) -> Result<()> {
    let refused = [
        (f.or_alter, "CREATE OR ALTER FUNCTION"),
        (f.temporary, "CREATE TEMPORARY FUNCTION"),
        (f.if_not_exists, "CREATE FUNCTION IF NOT EXISTS"),
        (f.using.is_some(), "CREATE FUNCTION ... USING"),
        (f.options.is_some(), "CREATE FUNCTION ... OPTIONS"),
        (f.remote_connection.is_some(), "CREATE FUNCTION ... REMOTE WITH CONNECTION"),
        (f.determinism_specifier.is_some(), "CREATE FUNCTION ... DETERMINISTIC"),
        (matches!(f.security, Some(ast::FunctionSecurity::Definer)), "SECURITY DEFINER functions"),
        (!f.set_params.is_empty(), "CREATE FUNCTION ... SET"),
    ];
    match refused.iter().find(|(on, _)| *on) {
        Some((_, what)) => Err(SqlError::unsupported(*what)),
        None => Ok(()),
    }
}

impl Binder<'_> {
    pub(super) fn create_function(&mut self, f: &ast::CreateFunction) -> Result<Plan> {
        refuse_options(f)?;
        let name = function_name(&f.name)?;
        if crate::expr::registry::lookup(&name).is_some() || super::aggregate::aggregate_named(&name, false).is_some() {
            return Err(SqlError::unsupported(format!("a function named {name}, as a built-in function is")));
        }
        let (args, arg_names) = arg_types(f.args.as_ref())?;
        let language = match (&f.language, &f.function_body) {
            (Some(l), _) => super::ident(l),
            (None, Some(ast::CreateFunctionBody::Return(_))) => "sql".to_owned(),
            (None, _) => return Err(SqlError::new("42P13", "no language specified")),
        };
        let trigger = language == "plpgsql"
            && matches!(&f.return_type, Some(ast::FunctionReturnType::DataType(t)) if t.to_string().eq_ignore_ascii_case("trigger"));
        let ret = match &f.return_type {
            _ if trigger => DataType::Bool,
            Some(ast::FunctionReturnType::DataType(ast::DataType::Table(_))) => {
                return Err(SqlError::unsupported("RETURNS TABLE"));
            }
            Some(ast::FunctionReturnType::DataType(t)) => declared_type(t)?,
            Some(ast::FunctionReturnType::SetOf(_)) => return Err(SqlError::unsupported("RETURNS SETOF")),
            None => return Err(SqlError::new("42P13", "function result type must be specified")),
        };
        let body = body_text(f)?;
        match language.as_str() {
            "sql" => {
                let scope = BodyScope { names: arg_names.clone(), depth: 1, plpgsql: false };
                let (_, body_ty) = self.bind_body(&body, &args, scope)?;
                check_result_type(body_ty, ret)?;
            }
            "plpgsql" => {
                if trigger && !args.is_empty() {
                    return Err(SqlError::new("42P13", "trigger functions cannot have declared arguments").with_hint(
                        "The arguments of the trigger can be accessed through TG_NARGS and TG_ARGV instead.",
                    ));
                }
                self.check_plpgsql(&name, &body, &args, &arg_names, (!trigger).then_some(ret))?;
            }
            "c" | "internal" => return Err(SqlError::unsupported(format!("LANGUAGE {language}"))),
            other => return Err(SqlError::new("42704", format!("language \"{other}\" does not exist"))),
        }
        let volatility = match f.behavior {
            Some(ast::FunctionBehavior::Immutable) => 'i',
            Some(ast::FunctionBehavior::Stable) => 's',
            Some(ast::FunctionBehavior::Volatile) | None => 'v',
        };
        let strict = matches!(
            f.called_on_null,
            Some(ast::FunctionCalledOnNull::Strict | ast::FunctionCalledOnNull::ReturnsNullOnNullInput)
        );
        let doc = FunctionDoc { language, body, volatility, strict, owner: String::new(), arg_names, trigger };
        Ok(Plan::CreateFunction(Box::new(FunctionDef { name, args, ret, doc, replace: f.or_replace })))
    }

    pub(super) fn drop_function(&mut self, d: &ast::DropFunction) -> Result<Plan> {
        if matches!(d.drop_behavior, Some(ast::DropBehavior::Cascade)) {
            return Err(SqlError::unsupported("DROP FUNCTION ... CASCADE"));
        }
        let mut targets = Vec::new();
        for f in &d.func_desc {
            let name = function_name(&f.name)?;
            let args = match &f.args {
                None => None,
                Some(a) => Some(arg_types(Some(a))?.0),
            };
            targets.push((name, args));
        }
        Ok(Plan::DropFunction { targets, if_exists: d.if_exists })
    }

    /// Binds `body` as a function's: its `$n` are `args`, its unqualified
    /// names that are no column are the named arguments. The plan and the
    /// type of its first column.
    fn bind_body(&mut self, body: &str, args: &[DataType], scope: BodyScope) -> Result<(SelectPlan, Ty)> {
        if scope.depth > BODY_DEPTH_MAX {
            return Err(SqlError::new("54001", "stack depth limit exceeded").with_hint(
                "Increase the configuration parameter \"max_stack_depth\" (currently 2048kB), after ensuring the \
                 platform's stack depth limit is adequate.",
            ));
        }
        let stmts = crate::parse::parse_sql(body)?;
        let q = match stmts.as_slice() {
            [ast::Statement::Query(q)] => q,
            [] => return Err(SqlError::unsupported("a SQL function body without a statement")),
            [_] => return Err(SqlError::unsupported("SQL function bodies other than one SELECT")),
            _ => return Err(SqlError::unsupported("SQL function bodies of several statements")),
        };
        if matches!(q.body.as_ref(), ast::SetExpr::Select(s) if s.into.is_some()) {
            return Err(SqlError::unsupported("SELECT INTO in a SQL function body"));
        }
        // top_with stays 0: WITH is refused in a body, so no data-modifying query either.
        let mut b = Binder {
            params: args.iter().map(|t| Some(*t)).collect(),
            perm_view: self.perm_view.clone(),
            function: Some(scope),
            ..Binder::new(self.catalog, self.rows, self.path, self.view_path)
        };
        let plan = b.query(q, None)?;
        if b.params.len() > args.len() {
            return Err(SqlError::new("42P02", format!("there is no parameter ${}", b.params.len())));
        }
        if plan.visible != 1 {
            return Err(SqlError::new("42P13", "return type mismatch in function declared to return a scalar")
                .with_detail("Final statement must return exactly one column."));
        }
        let ty = plan.columns[0].ty;
        for d in b.deps {
            if !self.deps.iter().any(|x| std::sync::Arc::ptr_eq(x, &d)) {
                self.deps.push(d);
            }
        }
        self.indexes.extend(b.indexes);
        self.perms.extend(b.perms);
        // What the body reads and the sequences it advances are the calling
        // statement's: a data-modifying WITH query beside the call must not
        // change them (modifying.rs).
        self.touched.merge(b.touched);
        self.volatile_calls |= b.volatile_calls;
        Ok((plan, ty))
    }

    /// `name` of a body's argument: its parameter, when the body has an
    /// argument of that name (columns were looked up first: a column
    /// hides an argument, as in PostgreSQL).
    pub(super) fn function_argument(&mut self, qualifier: Option<&str>, name: &str) -> Option<(Expr, Ty)> {
        let scope = self.function.as_ref()?;
        let k = match qualifier {
            None if scope.plpgsql => scope.names.iter().rposition(|n| !n.is_empty() && n == name)?,
            None => scope.names.iter().position(|n| !n.is_empty() && n == name)?,
            Some(q) if scope.plpgsql => {
                let full = format!("{q}.{name}");
                scope.names.iter().rposition(|n| *n == full)?
            }
            Some(_) => return None,
        };
        Some((Expr::Param(k), self.params.get(k).copied().flatten()))
    }

    /// Whether a PL/pgSQL variable is named `name` (qualified by `qualifier`).
    pub(super) fn plpgsql_variable(&self, qualifier: Option<&str>, name: &str) -> bool {
        let Some(scope) = self.function.as_ref().filter(|s| s.plpgsql) else { return false };
        match qualifier {
            None => scope.names.iter().any(|n| n == name),
            Some(q) => scope.names.iter().any(|n| n.strip_prefix(q).and_then(|r| r.strip_prefix('.')) == Some(name)),
        }
    }

    /// A call of a function made with CREATE FUNCTION; None when no
    /// function of that name exists (the caller reports 42883).
    pub(super) fn user_function_call(
        &mut self,
        name: &str,
        bound: Vec<(Expr, Ty)>,
        sig: &str,
    ) -> Result<Option<(Expr, Ty)>> {
        let candidates = functions_named(self.catalog, name);
        if candidates.is_empty() {
            return Ok(None);
        }
        if self.view_depth > 0 || self.defining_view {
            // PostgreSQL records the view's dependency on the function
            // (DROP FUNCTION then refuses, 2BP01); pgtier does not.
            return Err(SqlError::unsupported("a view calling a function made with CREATE FUNCTION"));
        }
        let f = choose_overload(candidates, &bound, sig)?;
        let mut args = Vec::with_capacity(bound.len());
        for ((e, t), to) in bound.into_iter().zip(&f.args) {
            args.push(self.coerce(e, t, *to, name)?);
        }
        if !self.deps.iter().any(|d| std::sync::Arc::ptr_eq(d, &f.table)) {
            self.deps.push(std::sync::Arc::clone(&f.table));
        }
        let depth = self.function.as_ref().map_or(0, |s| s.depth) + 1;
        self.volatile_calls |= f.doc.volatility == 'v';
        if f.doc.language == "plpgsql" {
            if f.doc.trigger {
                return Err(SqlError::new("0A000", "trigger functions can only be called as triggers"));
            }
            if depth > BODY_DEPTH_MAX {
                return Err(SqlError::new("54001", "stack depth limit exceeded"));
            }
            let program = self.plpgsql_program(&f.name, &f.doc.body, &f.args, &f.doc.arg_names, Some(f.ret), None)?;
            let (plan, _) = self.bind_body("SELECT NULL", &[], BodyScope { depth, ..BodyScope::default() })?;
            let pl = Some(crate::plan::PlRef(std::sync::Arc::new(program)));
            let call = self.sub_expr(SubqueryKind::Call { args, strict: f.doc.strict, pl }, false, false, plan);
            return Ok(Some((call, Some(f.ret))));
        }
        let scope = BodyScope { names: f.doc.arg_names.clone(), depth, plpgsql: false };
        let (plan, body_ty) = self.bind_body(&f.doc.body, &f.args, scope)?;
        let call = self.sub_expr(SubqueryKind::Call { args, strict: f.doc.strict, pl: None }, false, false, plan);
        let call = match body_ty {
            Some(t) if type_identity(t) == type_identity(f.ret) => call,
            _ => self.assign(call, body_ty, f.ret, name)?,
        };
        Ok(Some((call, Some(f.ret))))
    }
}

/// PostgreSQL's check of a body's result against the declared type: the
/// same type, or one with an assignment cast to it.
fn check_result_type(body: Ty, ret: DataType) -> Result<()> {
    // An untyped literal (or NULL) in the body's select list is text,
    // as PostgreSQL resolves it there.
    let t = body.unwrap_or(DataType::Text);
    if type_identity(t) == type_identity(ret) || super::coerce::check_assignable(t, ret, "").is_ok() {
        return Ok(());
    }
    Err(SqlError::new(
        "42P13",
        format!("return type mismatch in function declared to return {}", crate::value::type_name(ret)),
    )
    .with_detail(format!("Actual return type is {}.", crate::value::type_name(t))))
}

/// The position of a numeric type in PostgreSQL's implicit widening.
fn numeric_rank(t: DataType) -> Option<u8> {
    Some(match t {
        DataType::Int2 => 0,
        DataType::Int4 => 1,
        DataType::Int8 => 2,
        DataType::Numeric { .. } => 3,
        DataType::Float4 => 4,
        DataType::Float8 => 5,
        _ => return None,
    })
}

fn is_string(t: DataType) -> bool {
    matches!(t, DataType::Text | DataType::Varchar(_) | DataType::Char(_))
}

/// Whether PostgreSQL converts an argument of type `from` to a parameter
/// of type `to` implicitly.
fn implicit(from: DataType, to: DataType) -> bool {
    if type_identity(from) == type_identity(to) {
        return true;
    }
    match (numeric_rank(from), numeric_rank(to)) {
        (Some(a), Some(b)) => return a <= b,
        (Some(_), None) | (None, Some(_)) => return false,
        _ => {}
    }
    (is_string(from) && is_string(to))
        || matches!((from, to), (DataType::Date, DataType::Timestamp(_) | DataType::TimestampTz(_)))
        || matches!((from, to), (DataType::Timestamp(_), DataType::TimestampTz(_)))
}

/// PostgreSQL's choice among overloads (func_select_candidate,
/// simplified): every argument must convert implicitly; then the most
/// exact matches win, then the most unknown literals given a string
/// parameter (the preferred category of unknown); a tie is 42725.
fn choose_overload(candidates: Vec<UserFunction>, bound: &[(Expr, Ty)], sig: &str) -> Result<UserFunction> {
    let mut best: Vec<((usize, usize), UserFunction)> = Vec::new();
    for f in candidates {
        if f.args.len() != bound.len() {
            continue;
        }
        let (mut exact, mut strings) = (0, 0);
        let fits = bound.iter().zip(&f.args).all(|((_, t), p)| match t {
            None => {
                strings += usize::from(is_string(*p));
                true
            }
            Some(t) => {
                exact += usize::from(type_identity(*t) == type_identity(*p));
                implicit(*t, *p)
            }
        });
        if fits {
            best.push(((exact, strings), f));
        }
    }
    let top = best.iter().map(|(score, _)| *score).max();
    let mut best: Vec<UserFunction> = best.into_iter().filter(|(s, _)| Some(*s) == top).map(|(_, f)| f).collect();
    match best.len() {
        0 => Err(SqlError::undefined_function(sig)),
        1 => Ok(best.remove(0)),
        _ => Err(SqlError::new("42725", format!("function {sig} is not unique"))
            .with_hint("Could not choose a best candidate function. You might need to add explicit type casts.")),
    }
}
