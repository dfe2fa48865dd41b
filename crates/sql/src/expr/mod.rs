//! Bound expressions and their evaluation.
//!
//! The binder turns sqlparser's AST into [`Expr`]: names are resolved to
//! column positions in the row the expression will see, literals and
//! parameters carry their resolved types, casts PostgreSQL would insert
//! implicitly are explicit nodes. Evaluation follows SQL's three-valued
//! logic: NULL propagates through operators and functions, AND/OR treat it
//! as "unknown", WHERE keeps a row only when the predicate is true.

use std::cmp::Ordering;

use pgtier_engine::{DataType, Value};

mod functions;
pub mod jsonpath;
pub(crate) mod jsonpath_eval;

pub use functions::{
    ArrayFunc, BitOp, Builtin, DateField, Func, SeqFunc, SysFunc, Volatility, eval_array, extract_call, oid_in,
    registry, textsearch,
};

use crate::catalog::SysCtx;
use crate::error::{Result, SqlError};
use crate::plan::SubPlan;
use crate::value::types::Elem;
use crate::value::{self, ArithOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

impl CmpOp {
    pub fn holds(self, ord: Ordering) -> bool {
        match self {
            CmpOp::Eq => ord == Ordering::Equal,
            CmpOp::NotEq => ord != Ordering::Equal,
            CmpOp::Lt => ord == Ordering::Less,
            CmpOp::LtEq => ord != Ordering::Greater,
            CmpOp::Gt => ord == Ordering::Greater,
            CmpOp::GtEq => ord != Ordering::Less,
        }
    }

    /// The operator with its operands swapped (`a < b` is `b > a`).
    pub fn flip(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::LtEq => CmpOp::GtEq,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::GtEq => CmpOp::LtEq,
            other => other,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::NotEq => "<>",
            CmpOp::Lt => "<",
            CmpOp::LtEq => "<=",
            CmpOp::Gt => ">",
            CmpOp::GtEq => ">=",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum SubqueryKind {
    Exists,
    /// A value: the subquery's only column, or (`column` > 0) one column of
    /// a multiple-column assignment's sub-SELECT, `SET (a, b) = (SELECT
    /// x, y ...)`, which binds one subquery per target column.
    Scalar {
        column: usize,
    },
    /// `lhs [NOT] IN (subquery)`; `trim_rows`: the subquery's values are
    /// char(n) compared as text (without trailing blanks), as PostgreSQL's
    /// `text = bpchar` resolves to `text = text`.
    In {
        lhs: Box<Expr>,
        trim_rows: bool,
    },
    /// `ARRAY(subquery)`: the first column's values as a catalog (text-form) array.
    Array(Elem),
    /// `ARRAY(subquery)` as a real array value.
    ArrayValue,
    /// A call of a function made with CREATE FUNCTION ... LANGUAGE sql:
    /// the plan is its body, whose `$n` are these arguments' values; the
    /// value is the first column of the body's first row (NULL without
    /// one). `strict`: a NULL argument is a NULL result, the body not run.
    /// `pl`: a PL/pgSQL function's program, run instead of the plan.
    Call {
        args: Vec<Expr>,
        strict: bool,
        pl: Option<crate::plan::PlRef>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Subquery {
    /// Index into the executing plan's subquery table (for result caching).
    pub id: usize,
    pub kind: SubqueryKind,
    pub negated: bool,
    /// Reads columns of the enclosing row (so it cannot be cached).
    pub correlated: bool,
    pub plan: Box<SubPlan>,
}

impl Subquery {
    /// An IN subquery whose char(n) values compare without their padding.
    pub fn trims_rows(&self) -> bool {
        matches!(self.kind, SubqueryKind::In { trim_rows: true, .. })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A column of the input row.
    Column(usize),
    /// A column of the enclosing query's current row (correlated subquery).
    Outer(usize),
    Param(usize),
    Const(Value),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Arith(ArithOp, Box<Expr>, Box<Expr>, DataType),
    Concat(Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    IsNull(Box<Expr>, bool),
    /// `a IS [NOT] DISTINCT FROM b`.
    IsDistinct(Box<Expr>, Box<Expr>, bool),
    /// `x IS [NOT] TRUE/FALSE`: (expr, target, negated).
    IsBool(Box<Expr>, bool, bool),
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        negated: bool,
        case_insensitive: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
    },
    Coalesce(Vec<Expr>),
    NullIf(Box<Expr>, Box<Expr>),
    /// (expr, target type, explicit CAST).
    Cast(Box<Expr>, DataType, bool),
    /// char(n) used as text: trailing blanks dropped.
    BpcharTrim(Box<Expr>),
    Func(Func, Vec<Expr>),
    Subquery(Box<Subquery>),
    /// Placeholder for an aggregate while binding; never evaluated.
    AggRef(usize),
    /// A window function's value (index into `SelectPlan::windows`); the
    /// binder rewrites it to the column the executor appends.
    WindowRef(usize),
}

/// What an expression sees besides its input row.
pub struct Env<'a> {
    pub params: &'a [Value],
    /// `now()`: the transaction's start, µs since 2000-01-01.
    pub now_micros: i64,
    /// The enclosing query's current row, for correlated subqueries.
    pub outer: &'a [Value],
}

/// Runs subqueries for the evaluator (the executor implements it; contexts
/// where no subquery can occur use [`NoSubqueries`]).
pub trait SubqueryRunner {
    /// Rows of `sub` (first column only) evaluated with `outer` as the enclosing row.
    fn run(&mut self, sub: &Subquery, env: &Env<'_>, outer: &[Value]) -> Result<Vec<Value>>;

    /// The value of a SQL function's body `plan` run with `args` as its
    /// parameters: the first column of its first row, NULL without one.
    fn call_function(&mut self, _plan: &SubPlan, _args: &[Value]) -> Result<Value> {
        Err(SqlError::new("XX000", "function call evaluated where none was planned"))
    }

    /// The value of a PL/pgSQL function's program run with `args`.
    fn call_plpgsql(&mut self, _program: &crate::plan::PlRef, _args: Vec<Value>) -> Result<Value> {
        Err(SqlError::new("XX000", "function call evaluated where none was planned"))
    }

    /// The error that ends the statement now (a cancel, statement_timeout)
    /// if one is due: pg_sleep looks while it waits.
    fn check_interrupt(&mut self) -> Result<()> {
        Ok(())
    }

    /// The catalog snapshot and session settings, for the system functions
    /// (pg_get_indexdef, current_setting, ...); None where there are none
    /// (constant folding at bind time).
    fn system(&mut self) -> Option<SysCtx<'_>> {
        None
    }

    /// Whether `sub` has a row for the enclosing row `outer` (EXISTS);
    /// the executor stops at the first.
    fn exists(&mut self, sub: &Subquery, env: &Env<'_>, outer: &[Value]) -> Result<bool> {
        Ok(!self.run(sub, env, outer)?.is_empty())
    }

    /// `x [NOT] IN (sub)` (`sub.negated`) for the enclosing row `outer`.
    /// The executor answers an uncorrelated one from a hash set.
    fn run_in(&mut self, sub: &Subquery, env: &Env<'_>, outer: &[Value], x: &Value) -> Result<Option<bool>> {
        let rows = self.run(sub, env, outer)?;
        Ok(in_rows(x, &rows, sub.negated, sub.trims_rows()))
    }

    /// nextval/currval/setval/lastval with their evaluated arguments (the
    /// sequence as a regclass oid first); the executor implements it.
    fn sequence(&mut self, call: SeqFunc, _args: &[Value]) -> Result<Value> {
        Err(crate::error::SqlError::unsupported(format!("{call:?} in this context").to_lowercase()))
    }
}

pub struct NoSubqueries;

impl SubqueryRunner for NoSubqueries {
    fn run(&mut self, _: &Subquery, _: &Env<'_>, _: &[Value]) -> Result<Vec<Value>> {
        Err(SqlError::new("XX000", "subquery evaluated where none was planned"))
    }
}

impl Expr {
    pub fn boxed(self) -> Box<Expr> {
        Box::new(self)
    }

    /// Contains a subquery, or a call only the executor can run (nextval
    /// and friends, which advance a sequence): either keeps the expression
    /// off the paths that evaluate without the executor.
    pub fn has_subquery(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| found |= matches!(e, Expr::Subquery(_) | Expr::Func(Func::Sys(SysFunc::Sequence(_)), _)));
        found
    }

    /// Evaluates with [`NoSubqueries`] exactly as with the executor: no
    /// subquery or SQL function call, no sequence call, no system function
    /// reading the catalog or the session's settings. Such an expression
    /// can run inside an engine callback (a scan's row visitor).
    pub fn runs_without_executor(&self) -> bool {
        let mut needs = false;
        self.walk(&mut |e| {
            needs |= match e {
                Expr::Subquery(_) => true,
                Expr::Func(Func::Sys(f), _) => matches!(f, SysFunc::Sequence(_)) || functions::needs_catalog(*f),
                _ => false,
            }
        });
        !needs
    }

    /// Visits this expression and its children (not into subquery plans).
    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Column(_)
            | Expr::Outer(_)
            | Expr::Param(_)
            | Expr::Const(_)
            | Expr::AggRef(_)
            | Expr::WindowRef(_) => {}
            Expr::Neg(e)
            | Expr::Not(e)
            | Expr::IsNull(e, _)
            | Expr::IsBool(e, _, _)
            | Expr::Cast(e, _, _)
            | Expr::BpcharTrim(e) => e.walk(f),
            Expr::Arith(_, a, b, _)
            | Expr::Concat(a, b)
            | Expr::Cmp(_, a, b)
            | Expr::IsDistinct(a, b, _)
            | Expr::NullIf(a, b) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::And(v) | Expr::Or(v) | Expr::Coalesce(v) | Expr::Func(_, v) => v.iter().for_each(|e| e.walk(f)),
            Expr::Like { expr, pattern, .. } => {
                expr.walk(f);
                pattern.walk(f);
            }
            Expr::InList { expr, list, .. } => {
                expr.walk(f);
                list.iter().for_each(|e| e.walk(f));
            }
            Expr::Case { operand, whens, otherwise } => {
                if let Some(o) = operand {
                    o.walk(f);
                }
                for (w, t) in whens {
                    w.walk(f);
                    t.walk(f);
                }
                if let Some(o) = otherwise {
                    o.walk(f);
                }
            }
            Expr::Subquery(s) => match &s.kind {
                SubqueryKind::In { lhs, .. } => lhs.walk(f),
                SubqueryKind::Call { args, .. } => args.iter().for_each(|e| e.walk(f)),
                _ => {}
            },
        }
    }

    /// Rewrites every node bottom-up with `f`.
    pub fn map(self, f: &mut dyn FnMut(Expr) -> Result<Expr>) -> Result<Expr> {
        let out = self.map_children(&mut |c| c.map(f))?;
        f(out)
    }

    /// Rebuilds this node with `f` applied to each direct child.
    pub fn map_children(self, f: &mut dyn FnMut(Expr) -> Result<Expr>) -> Result<Expr> {
        let b = |e: Box<Expr>, f: &mut dyn FnMut(Expr) -> Result<Expr>| -> Result<Box<Expr>> { Ok(Box::new(f(*e)?)) };
        let v = |es: Vec<Expr>, f: &mut dyn FnMut(Expr) -> Result<Expr>| -> Result<Vec<Expr>> {
            es.into_iter().map(f).collect()
        };
        Ok(match self {
            e @ (Expr::Column(_)
            | Expr::Outer(_)
            | Expr::Param(_)
            | Expr::Const(_)
            | Expr::AggRef(_)
            | Expr::WindowRef(_)) => e,
            Expr::Neg(e) => Expr::Neg(b(e, f)?),
            Expr::Not(e) => Expr::Not(b(e, f)?),
            Expr::IsNull(e, n) => Expr::IsNull(b(e, f)?, n),
            Expr::IsBool(e, t, n) => Expr::IsBool(b(e, f)?, t, n),
            Expr::Cast(e, t, x) => Expr::Cast(b(e, f)?, t, x),
            Expr::BpcharTrim(e) => Expr::BpcharTrim(b(e, f)?),
            Expr::Arith(op, x, y, t) => Expr::Arith(op, b(x, f)?, b(y, f)?, t),
            Expr::Concat(x, y) => Expr::Concat(b(x, f)?, b(y, f)?),
            Expr::Cmp(op, x, y) => Expr::Cmp(op, b(x, f)?, b(y, f)?),
            Expr::IsDistinct(x, y, n) => Expr::IsDistinct(b(x, f)?, b(y, f)?, n),
            Expr::NullIf(x, y) => Expr::NullIf(b(x, f)?, b(y, f)?),
            Expr::And(es) => Expr::And(v(es, f)?),
            Expr::Or(es) => Expr::Or(v(es, f)?),
            Expr::Coalesce(es) => Expr::Coalesce(v(es, f)?),
            Expr::Func(func, es) => Expr::Func(func, v(es, f)?),
            Expr::Like { expr, pattern, negated, case_insensitive } => {
                Expr::Like { expr: b(expr, f)?, pattern: b(pattern, f)?, negated, case_insensitive }
            }
            Expr::InList { expr, list, negated } => Expr::InList { expr: b(expr, f)?, list: v(list, f)?, negated },
            Expr::Case { operand, whens, otherwise } => Expr::Case {
                operand: operand.map(|o| b(o, f)).transpose()?,
                whens: whens.into_iter().map(|(w, t)| Ok((f(w)?, f(t)?))).collect::<Result<_>>()?,
                otherwise: otherwise.map(|o| b(o, f)).transpose()?,
            },
            Expr::Subquery(mut s) => {
                match s.kind {
                    SubqueryKind::In { lhs, trim_rows } => s.kind = SubqueryKind::In { lhs: b(lhs, f)?, trim_rows },
                    SubqueryKind::Call { args, strict, pl } => {
                        s.kind = SubqueryKind::Call { args: v(args, f)?, strict, pl }
                    }
                    _ => {}
                }
                Expr::Subquery(s)
            }
        })
    }

    /// Evaluates to a value.
    pub fn eval(&self, env: &Env<'_>, sq: &mut dyn SubqueryRunner, row: &[Value]) -> Result<Value> {
        Ok(match self {
            Expr::Column(_) | Expr::Outer(_) | Expr::Param(_) | Expr::Const(_) => {
                self.leaf_ref(env, row).cloned().unwrap_or(Value::Null)
            }
            Expr::Neg(e) => value::negate(&e.eval(env, sq, row)?)?,
            Expr::Not(e) => match e.eval_bool(env, sq, row)? {
                Some(b) => Value::Bool(!b),
                None => Value::Null,
            },
            Expr::Arith(op, a, b, ty) => {
                let x = a.eval(env, sq, row)?;
                let y = b.eval(env, sq, row)?;
                value::arith(*op, &x, &y, *ty)?
            }
            Expr::Concat(a, b) => {
                let x = a.eval(env, sq, row)?;
                let y = b.eval(env, sq, row)?;
                if x.is_null() || y.is_null() {
                    return Ok(Value::Null);
                }
                let mut s = match x {
                    Value::Text(s) => s,
                    other => value::to_text(&other),
                };
                match y {
                    Value::Text(t) => s.push_str(&t),
                    other => value::write_text(&other, &mut s),
                }
                Value::Text(s)
            }
            Expr::Cmp(..)
            | Expr::And(_)
            | Expr::Or(_)
            | Expr::IsDistinct(..)
            | Expr::Like { .. }
            | Expr::InList { .. } => match self.eval_bool(env, sq, row)? {
                Some(b) => Value::Bool(b),
                None => Value::Null,
            },
            Expr::IsNull(e, negated) => Value::Bool(e.eval(env, sq, row)?.is_null() != *negated),
            Expr::IsBool(e, target, negated) => {
                let v = e.eval_bool(env, sq, row)?;
                Value::Bool((v == Some(*target)) != *negated)
            }
            Expr::Case { operand, whens, otherwise } => {
                let subject = match operand {
                    Some(o) => Some(o.eval(env, sq, row)?),
                    None => None,
                };
                for (when, then) in whens {
                    let hit = match &subject {
                        Some(s) => {
                            let w = when.eval(env, sq, row)?;
                            value::compare(s, &w) == Some(Ordering::Equal)
                        }
                        None => when.eval_bool(env, sq, row)? == Some(true),
                    };
                    if hit {
                        return then.eval(env, sq, row);
                    }
                }
                match otherwise {
                    Some(o) => o.eval(env, sq, row)?,
                    None => Value::Null,
                }
            }
            Expr::Coalesce(es) => {
                for e in es {
                    let v = e.eval(env, sq, row)?;
                    if !v.is_null() {
                        return Ok(v);
                    }
                }
                Value::Null
            }
            Expr::NullIf(a, b) => {
                let x = a.eval(env, sq, row)?;
                let y = b.eval(env, sq, row)?;
                if value::compare(&x, &y) == Some(Ordering::Equal) { Value::Null } else { x }
            }
            Expr::Cast(e, ty, explicit) => value::cast(e.eval(env, sq, row)?, *ty, *explicit)?,
            Expr::BpcharTrim(e) => match e.eval(env, sq, row)? {
                Value::Text(mut s) => {
                    let n = value::bpchar_trim(&s).len();
                    s.truncate(n);
                    Value::Text(s)
                }
                other => other,
            },
            Expr::Func(f, args) => functions::eval_func(*f, args, env, sq, row)?,
            Expr::Subquery(s) => match &s.kind {
                SubqueryKind::Scalar { .. } => {
                    let rows = sq.run(s, env, row)?;
                    if rows.len() > 1 {
                        return Err(SqlError::new(
                            "21000",
                            "more than one row returned by a subquery used as an expression",
                        ));
                    }
                    rows.into_iter().next().unwrap_or(Value::Null)
                }
                SubqueryKind::Array(elem) => Value::Text(crate::value::types::array_text(*elem, &sq.run(s, env, row)?)),
                SubqueryKind::ArrayValue => {
                    let rows = sq.run(s, env, row)?;
                    if rows.iter().any(|v| matches!(v, Value::BoundedArray(_))) {
                        return Err(SqlError::unsupported("ARRAY() of arrays with a lower bound other than 1"));
                    }
                    Value::Array(rows)
                }
                SubqueryKind::Call { args, strict, pl } => call_function(s, args, *strict, pl.as_ref(), env, sq, row)?,
                _ => match self.eval_bool(env, sq, row)? {
                    Some(b) => Value::Bool(b),
                    None => Value::Null,
                },
            },
            Expr::AggRef(_) => return Err(SqlError::new("XX000", "aggregate evaluated outside aggregation")),
            Expr::WindowRef(_) => return Err(SqlError::new("XX000", "window function evaluated outside its window")),
        })
    }

    /// Evaluates a predicate: Some(true/false), or None for unknown (NULL).
    /// The value of a leaf (column, parameter, constant) without copying
    /// it: comparisons of leaves, most WHERE terms, then clone no text.
    fn leaf_ref<'v>(&'v self, env: &'v Env<'_>, row: &'v [Value]) -> Option<&'v Value> {
        const NULL: &Value = &Value::Null;
        match self {
            Expr::Column(i) => Some(row.get(*i).unwrap_or(NULL)),
            Expr::Outer(i) => Some(env.outer.get(*i).unwrap_or(NULL)),
            Expr::Param(i) => Some(env.params.get(*i).unwrap_or(NULL)),
            Expr::Const(v) => Some(v),
            _ => None,
        }
    }

    pub fn eval_bool(&self, env: &Env<'_>, sq: &mut dyn SubqueryRunner, row: &[Value]) -> Result<Option<bool>> {
        Ok(match self {
            Expr::Cmp(op, a, b) => {
                if let (Some(x), Some(y)) = (a.leaf_ref(env, row), b.leaf_ref(env, row)) {
                    return Ok(value::compare(x, y).map(|o| op.holds(o)));
                }
                let x = a.eval(env, sq, row)?;
                let y = b.eval(env, sq, row)?;
                value::compare(&x, &y).map(|o| op.holds(o))
            }
            Expr::And(es) => {
                let mut unknown = false;
                for e in es {
                    match e.eval_bool(env, sq, row)? {
                        Some(false) => return Ok(Some(false)),
                        None => unknown = true,
                        Some(true) => {}
                    }
                }
                if unknown { None } else { Some(true) }
            }
            Expr::Or(es) => {
                let mut unknown = false;
                for e in es {
                    match e.eval_bool(env, sq, row)? {
                        Some(true) => return Ok(Some(true)),
                        None => unknown = true,
                        Some(false) => {}
                    }
                }
                if unknown { None } else { Some(false) }
            }
            Expr::Not(e) => e.eval_bool(env, sq, row)?.map(|b| !b),
            Expr::IsDistinct(a, b, negated) => {
                let x = a.eval(env, sq, row)?;
                let y = b.eval(env, sq, row)?;
                let distinct = match (x.is_null(), y.is_null()) {
                    (true, true) => false,
                    (true, false) | (false, true) => true,
                    _ => value::compare(&x, &y) != Some(Ordering::Equal),
                };
                Some(distinct != *negated)
            }
            Expr::Like { expr, pattern, negated, case_insensitive } => {
                let x = expr.eval(env, sq, row)?;
                let p = pattern.eval(env, sq, row)?;
                match (x, p) {
                    (Value::Text(s), Value::Text(p)) => {
                        let m =
                            if *case_insensitive { like(&s.to_lowercase(), &p.to_lowercase())? } else { like(&s, &p)? };
                        Some(m != *negated)
                    }
                    (Value::Bytea(s), Value::Bytea(p)) => Some(like_bytes(&s, &p)? != *negated),
                    _ => None,
                }
            }
            Expr::InList { expr, list, negated } => {
                let x = expr.eval(env, sq, row)?;
                if x.is_null() {
                    return Ok(None);
                }
                let mut unknown = false;
                for e in list {
                    let y = e.eval(env, sq, row)?;
                    match value::compare(&x, &y) {
                        Some(Ordering::Equal) => return Ok(Some(!*negated)),
                        None => unknown = true,
                        Some(_) => {}
                    }
                }
                if unknown { None } else { Some(*negated) }
            }
            Expr::Subquery(s) => match &s.kind {
                SubqueryKind::Exists => Some(sq.exists(s, env, row)? != s.negated),
                SubqueryKind::In { lhs, .. } => {
                    let x = lhs.eval(env, sq, row)?;
                    sq.run_in(s, env, row, &x)?
                }
                SubqueryKind::Scalar { .. }
                | SubqueryKind::Array(_)
                | SubqueryKind::ArrayValue
                | SubqueryKind::Call { .. } => as_bool(self.eval(env, sq, row)?),
            },
            other => as_bool(other.eval(env, sq, row)?),
        })
    }
}

/// `x [NOT] IN rows` with SQL's three values: empty is false (true
/// negated) whatever x is; otherwise an equal row is true, and without one
/// any comparison with NULL makes it NULL.
/// `trim`: the rows are char(n) values compared without their padding
/// (`SubqueryKind::In::trim_rows`).
pub fn in_rows(x: &Value, rows: &[Value], negated: bool, trim: bool) -> Option<bool> {
    if rows.is_empty() {
        return Some(negated);
    }
    if x.is_null() {
        return None;
    }
    let mut unknown = false;
    for y in rows {
        let cmp = match (y, trim) {
            (Value::Text(padded), true) => value::compare(x, &Value::Text(value::bpchar_trim(padded).to_owned())),
            _ => value::compare(x, y),
        };
        match cmp {
            Some(Ordering::Equal) => return Some(!negated),
            None => unknown = true,
            Some(_) => {}
        }
    }
    if unknown { None } else { Some(negated) }
}

fn as_bool(v: Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(b),
        _ => None,
    }
}

/// SQL LIKE with `%`, `_` and the default escape `\`.
pub fn like(s: &str, pattern: &str) -> Result<bool> {
    let p = pattern.as_bytes();
    check_like_pattern(p)?;
    // A search's usual shapes (`%word%`, `word%`): a substring or prefix
    // test. Exact for UTF-8: a literal's bytes found in valid text start
    // and end on its character boundaries.
    let literal = |l: &str| !l.contains(['%', '_', '\\']);
    if let Some(inner) = pattern.strip_prefix('%').and_then(|rest| rest.strip_suffix('%'))
        && literal(inner)
    {
        return Ok(s.contains(inner));
    }
    if let Some(prefix) = pattern.strip_suffix('%')
        && literal(prefix)
    {
        return Ok(s.starts_with(prefix));
    }
    Ok(like_at(s.as_bytes(), p, utf8_len))
}

/// bytea LIKE (bytealike): `_` is one byte.
pub fn like_bytes(s: &[u8], p: &[u8]) -> Result<bool> {
    check_like_pattern(p)?;
    Ok(like_at(s, p, |_| 1))
}

fn check_like_pattern(p: &[u8]) -> Result<()> {
    if p.last() == Some(&b'\\') && p.iter().rev().take_while(|c| **c == b'\\').count() % 2 == 1 {
        return Err(SqlError::new("22025", "LIKE pattern must not end with escape character"));
    }
    Ok(())
}

/// Bytes of the UTF-8 character that starts with `lead`; 1 for a byte that
/// cannot start one (PostgreSQL's pg_utf_mblen, which to_number's
/// byte-wise stepping can land on).
pub(crate) fn utf8_len(lead: u8) -> usize {
    match lead {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

/// LIKE over the UTF-8 bytes of text and pattern, a character at a time
/// (both offsets stay on character boundaries; `_` consumes one character,
/// a literal matches when its bytes do): no copy of either per row, where
/// matching on `Vec<char>` allocated both for every row a scan filtered.
/// Iterative, backtracking to the last `%` (linear in practice).
/// `char_len`: the bytes of the character a lead byte starts (1 for bytea).
fn like_at(s: &[u8], p: &[u8], char_len: fn(u8) -> usize) -> bool {
    let (mut si, mut pi) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                b'%' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'_' => {
                    si += char_len(s[si]);
                    pi += 1;
                    continue;
                }
                // An escaped character matches only itself: the backslash
                // never matches a backslash of the text.
                b'\\' if pi + 1 < p.len() => {
                    let literal = &p[pi + 1..pi + 1 + char_len(p[pi + 1])];
                    if s[si..].starts_with(literal) {
                        si += literal.len();
                        pi += 1 + literal.len();
                        continue;
                    }
                }
                // One byte compared directly (a call of memcmp per
                // character was a tenth of a LIKE scan's time).
                lead if lead < 0x80 => {
                    if s[si] == lead {
                        si += 1;
                        pi += 1;
                        continue;
                    }
                }
                lead => {
                    let literal = &p[pi..pi + char_len(lead)];
                    if s[si..].starts_with(literal) {
                        si += literal.len();
                        pi += literal.len();
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, ss)) => {
                let next = ss + char_len(s[ss]);
                pi = sp + 1;
                si = next;
                star = Some((sp, next));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|c| *c == b'%')
}

/// A call of a SQL function (`SubqueryKind::Call`): its arguments, then
/// its body with them as parameters (a strict one: NULL for a NULL one).
fn call_function(
    s: &Subquery,
    args: &[Expr],
    strict: bool,
    pl: Option<&crate::plan::PlRef>,
    env: &Env<'_>,
    sq: &mut dyn SubqueryRunner,
    row: &[Value],
) -> Result<Value> {
    let mut vals = Vec::with_capacity(args.len());
    for a in args {
        vals.push(a.eval(env, sq, row)?);
    }
    if strict && vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    match pl {
        Some(p) => sq.call_plpgsql(p, vals),
        None => sq.call_function(&s.plan, &vals),
    }
}

/// A `reg*` value as the name its output function prints (it is carried
/// as its oid, crate::value::types): what `||`, concat and format print,
/// never the number. Any other expression is returned as it is.
pub fn reg_as_name(e: Expr, ty: Option<DataType>) -> Expr {
    match ty.and_then(crate::value::types::RegKind::of) {
        Some(kind) => Expr::Func(Func::Sys(SysFunc::RegOut(kind)), vec![e]),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns() {
        assert!(like("hello", "h%").unwrap());
        assert!(like("hello", "%ll%").unwrap());
        assert!(like("hello", "h_llo").unwrap());
        assert!(!like("hello", "h_lo").unwrap());
        assert!(like("50%", "50\\%").unwrap());
        assert!(!like("50x", "50\\%").unwrap());
        assert!(!like("\\x00", "%\\_%").unwrap());
        assert!(like("a_b", "%\\_%").unwrap());
        assert!(like("", "%").unwrap());
        assert!(like("abcabc", "%abc").unwrap());
        assert!(like("größe", "gr_ße").unwrap());
        assert!(like("größe", "%ß%").unwrap());
        assert!(!like("grösse", "gr_ße").unwrap());
        assert!(like("日本語", "_本_").unwrap());
        assert!(like("a日", "a\\日").unwrap());
        assert!(like("x%日", "x\\%_").unwrap());
        assert!(like("x\\y", "x\\\\y").unwrap());
        assert!(like("ab", "a\\b").unwrap());
        assert!(like("a", "a\\\\").is_ok());
        assert!(like("a", "a\\").is_err());
    }

    /// The byte matcher against the character matcher it replaced, on
    /// random texts and patterns over a small alphabet with multi-byte
    /// characters, wildcards and escapes.
    #[test]
    fn like_on_bytes_agrees_with_like_on_chars() {
        fn on_chars(s: &[char], p: &[char]) -> bool {
            let (mut si, mut pi) = (0, 0);
            let mut star: Option<(usize, usize)> = None;
            while si < s.len() {
                if pi < p.len() {
                    match p[pi] {
                        '%' => {
                            star = Some((pi, si));
                            pi += 1;
                            continue;
                        }
                        '_' => {
                            si += 1;
                            pi += 1;
                            continue;
                        }
                        '\\' if pi + 1 < p.len() && p[pi + 1] == s[si] => {
                            si += 1;
                            pi += 2;
                            continue;
                        }
                        '\\' if pi + 1 < p.len() => {}
                        c if c == s[si] => {
                            si += 1;
                            pi += 1;
                            continue;
                        }
                        _ => {}
                    }
                }
                match star {
                    Some((sp, ss)) => {
                        pi = sp + 1;
                        si = ss + 1;
                        star = Some((sp, ss + 1));
                    }
                    None => return false,
                }
            }
            p[pi..].iter().all(|c| *c == '%')
        }
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let text_alphabet = ['a', 'b', 'ß', '日', '%', '_', '\\'];
        let pattern_alphabet = ['a', 'b', 'ß', '日', '%', '_', '\\', '%', '_'];
        for _ in 0..20_000 {
            let text: String = (0..rng.random_range(0..8)).map(|_| text_alphabet[rng.random_range(0..7)]).collect();
            let pattern: String =
                (0..rng.random_range(0..7)).map(|_| pattern_alphabet[rng.random_range(0..9)]).collect();
            let chars: (Vec<char>, Vec<char>) = (text.chars().collect(), pattern.chars().collect());
            match like(&text, &pattern) {
                Ok(matched) => assert_eq!(matched, on_chars(&chars.0, &chars.1), "{text:?} LIKE {pattern:?}"),
                Err(_) => assert!(pattern.ends_with('\\'), "{pattern:?} refused"),
            }
        }
    }
}
