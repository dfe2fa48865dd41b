//! The builtin scalar functions by name, as PostgreSQL's pg_proc and fmgr
//! hold them: each function is one [`FunctionDef`] in its family's file
//! (strings.rs, math.rs, ...) declaring its names, its volatility and its
//! resolve step. The resolve step takes the call's arguments, bound and
//! typed, and does the overload resolution PostgreSQL would (implicit
//! casts, 42883 / 42725 with the call's signature); it returns the bound
//! expression, usually `Expr::Func(Func::Builtin(b), args)` where `b` carries
//! the chosen overload's evaluation function. Evaluation then calls that
//! function pointer: no lookup by name per row.

use std::collections::HashMap;
use std::sync::OnceLock;

use pgtier_engine::{DataType, Value};

use super::{DateField, Func, SubqueryRunner};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value::{self, ArithOp};

/// A bound argument's type; None for an unknown literal or parameter.
pub type Ty = Option<DataType>;

/// PostgreSQL's provolatile, as pgtier uses it: a DEFAULT calling a
/// function that is not immutable is not frozen into a constant. Only the
/// clock and randomness are declared (now, clock_timestamp, random,
/// gen_random_uuid, pg_sleep); functions that read a setting (to_char of
/// a timestamptz) are immutable here, as before the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Volatility {
    Immutable,
    /// Fixed within a transaction (now()).
    Stable,
    /// A new value at every call (random(), clock_timestamp()).
    Volatile,
}

/// What an overload's evaluation needs besides its arguments, fixed when
/// the call is bound (a constant unit or field argument, read once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallData {
    None,
    Field(DateField),
}

/// The evaluation side of a call: the transaction's clock and the executor
/// (for pg_sleep's interrupt checks).
pub struct EvalCtx<'a> {
    pub data: CallData,
    pub now_micros: i64,
    pub sq: &'a mut dyn SubqueryRunner,
}

/// An overload's evaluation: its evaluated arguments in, its value out.
pub type EvalFn = fn(&[Value], &mut EvalCtx<'_>) -> Result<Value>;

/// A bound call of a registry function: what its evaluation needs.
#[derive(Clone, Copy, Debug)]
pub struct Builtin {
    /// The function's (first) name, for plans and debugging.
    pub name: &'static str,
    pub eval: EvalFn,
    /// NULL when an argument is NULL, without calling `eval`.
    pub strict: bool,
    pub volatility: Volatility,
    pub data: CallData,
}

// Two calls are the same function when they name the same function with
// the same overload's evaluation (GROUP BY matches a select-list call with
// its GROUP BY twin this way).
impl PartialEq for Builtin {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && std::ptr::fn_addr_eq(self.eval, other.eval)
            && self.strict == other.strict
            && self.data == other.data
    }
}

impl Eq for Builtin {}

impl Builtin {
    /// Not strict: `eval` sees NULL arguments (concat, format, greatest).
    pub const fn lax(self) -> Builtin {
        Builtin { strict: false, ..self }
    }

    pub const fn with(self, data: CallData) -> Builtin {
        Builtin { data, ..self }
    }
}

/// The call being resolved: the name it was called by, its arguments bound
/// with their types, and its signature text for 42883 / 42725.
pub struct Call<'a> {
    pub name: &'a str,
    pub sig: &'a str,
    pub args: Vec<(Expr, Ty)>,
}

impl Call<'_> {
    pub fn undefined(&self) -> SqlError {
        SqlError::undefined_function(self.sig)
    }

    /// 42725: several candidates fit equally well (an unknown argument).
    pub fn not_unique(&self) -> SqlError {
        SqlError::new("42725", format!("function {} is not unique", self.sig))
            .with_hint("Could not choose a best candidate function. You might need to add explicit type casts.")
    }

    /// 42883 unless there are `lo` to `hi` arguments.
    pub fn arity(&self, lo: usize, hi: usize) -> Result<()> {
        if (lo..=hi).contains(&self.args.len()) { Ok(()) } else { Err(self.undefined()) }
    }

    pub fn len(&self) -> usize {
        self.args.len()
    }

    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    pub fn types(&self) -> Vec<Ty> {
        self.args.iter().map(|a| a.1).collect()
    }

    /// The one argument of a one-argument call (42883 otherwise).
    pub fn single(self) -> Result<(Expr, Ty)> {
        let undefined = self.undefined();
        let [arg]: [(Expr, Ty); 1] = self.args.try_into().map_err(|_| undefined)?;
        Ok(arg)
    }

    /// The two arguments of a two-argument call (42883 otherwise).
    pub fn pair(self) -> Result<((Expr, Ty), (Expr, Ty))> {
        let undefined = self.undefined();
        let [x, y]: [(Expr, Ty); 2] = self.args.try_into().map_err(|_| undefined)?;
        Ok((x, y))
    }
}

/// The binder's conversions a resolve step uses (implemented by
/// `bind::Binder`; the function families do not depend on the binder).
pub trait ArgBinder {
    /// An unknown literal or parameter given type `to`; implicit widening.
    fn coerce(&mut self, e: Expr, from: Ty, to: DataType, what: &str) -> Result<Expr>;
    /// A value cast to the parameter's type `to` (no cast when it already is).
    fn result_cast(&mut self, e: Expr, t: Ty, to: Ty) -> Result<Expr>;
    /// An argument for a text parameter (char(n) loses its padding).
    fn text_arg(&mut self, e: Expr, t: Ty, what: &str) -> Result<Expr>;
    /// An argument for an `integer` parameter (42883 with `sig` for bigint and others).
    fn int4_param(&mut self, e: Expr, t: Ty, sig: &str) -> Result<Expr>;
    /// `x op y` as the operator binds it.
    fn arith(&mut self, op: ArithOp, x: (Expr, Ty), y: (Expr, Ty)) -> Result<(Expr, Ty)>;
    /// Both sides of a comparison `x op y` in one type.
    fn unify_cmp(&mut self, x: (Expr, Ty), y: (Expr, Ty), op: &str) -> Result<(Expr, Expr)>;
    /// COALESCE / GREATEST / LEAST's arguments in their common type (`what`
    /// names the construct in errors), and that type.
    fn common(&mut self, args: Vec<(Expr, Ty)>, what: &str) -> Result<(Vec<Expr>, Ty)>;
}

/// A resolve step: the call's arguments to its bound expression and type.
pub type ResolveFn = fn(&'static FunctionDef, &mut dyn ArgBinder, Call<'_>) -> Result<(Expr, Ty)>;

/// One builtin function: pg_proc's row of it (its names, volatility and
/// overloads), the overloads resolved by `resolve`, which names the
/// evaluation of the one it picks.
pub struct FunctionDef {
    pub names: &'static [&'static str],
    pub volatility: Volatility,
    pub resolve: ResolveFn,
}

impl FunctionDef {
    /// A strict call of this function evaluated by `eval`.
    pub const fn call(&self, eval: EvalFn) -> Builtin {
        Builtin { name: self.names[0], eval, strict: true, volatility: self.volatility, data: CallData::None }
    }

    /// `Expr::Func` of this function evaluated by `eval` over `args`.
    pub fn expr(&self, eval: EvalFn, args: Vec<Expr>) -> Expr {
        Expr::Func(Func::Builtin(self.call(eval)), args)
    }
}

/// Every family's definitions.
fn families() -> [&'static [FunctionDef]; 9] {
    [
        super::strings::DEFS,
        super::binary::DEFS,
        super::regex::DEFS,
        super::math::DEFS,
        super::datetime::DEFS,
        super::interval_fns::DEFS,
        super::conditional::DEFS,
        super::misc::DEFS,
        super::textsearch::DEFS,
    ]
}

/// The function called `name`, if the registry has one.
pub fn lookup(name: &str) -> Option<&'static FunctionDef> {
    static BY_NAME: OnceLock<HashMap<&'static str, &'static FunctionDef>> = OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            let mut map = HashMap::new();
            for def in families().into_iter().flatten() {
                for name in def.names {
                    let earlier = map.insert(*name, def);
                    debug_assert!(earlier.is_none(), "function {name} declared twice");
                }
            }
            map
        })
        .get(name)
        .copied()
}

/// Binds a call of `def` (found by [`lookup`]).
pub fn resolve(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    (def.resolve)(def, b, call)
}

/// Evaluates a bound call over already evaluated arguments.
pub(super) fn eval(f: Builtin, vals: &[Value], now_micros: i64, sq: &mut dyn SubqueryRunner) -> Result<Value> {
    if f.strict && vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    (f.eval)(vals, &mut EvalCtx { data: f.data, now_micros, sq })
}

/// A function of string parameters (and integer ones), the most common
/// shape: `lo` to `hi` arguments of `params` (Text, Int4 or Int8; past
/// its end, Text), result `result`. A string argument converts to text, an
/// integer one to an integer parameter when PostgreSQL's implicit casts
/// allow; anything else is 42883.
#[allow(clippy::too_many_arguments)]
pub fn text_fn(
    def: &'static FunctionDef,
    b: &mut dyn ArgBinder,
    call: Call<'_>,
    eval: EvalFn,
    (lo, hi): (usize, usize),
    params: &[DataType],
    result: DataType,
) -> Result<(Expr, Ty)> {
    call.arity(lo, hi)?;
    let undefined = call.undefined();
    let mut out = Vec::with_capacity(call.len());
    for (k, (e, t)) in call.args.into_iter().enumerate() {
        let want = params.get(k).copied().unwrap_or(DataType::Text);
        out.push(if want == DataType::Text {
            b.text_arg(e, t, call.name).map_err(|_| undefined.clone())?
        } else {
            match t {
                Some(tt) if value::is_integer(tt) && (want == DataType::Int8 || value::is_int4_implicit(tt)) => e,
                Some(DataType::Bytea) if want == DataType::Bytea => e,
                None => b.coerce(e, None, want, call.name)?,
                Some(_) => return Err(undefined),
            }
        });
    }
    Ok((def.expr(eval, out), Some(result)))
}

/// A text argument ("" when it is not text).
pub fn text(vals: &[Value], k: usize) -> &str {
    match vals.get(k) {
        Some(Value::Text(s)) => s,
        _ => "",
    }
}

/// An integer argument (0 when it is not one).
pub fn int(vals: &[Value], k: usize) -> i64 {
    vals.get(k).and_then(Value::as_i64).unwrap_or(0)
}

/// A float argument (NaN when it is not a number).
pub fn float(vals: &[Value], k: usize) -> f64 {
    vals.get(k).and_then(value::to_f64).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_declared_once() {
        let mut seen = std::collections::HashSet::new();
        for def in families().into_iter().flatten() {
            for name in def.names {
                assert!(seen.insert(*name), "function {name} declared twice");
            }
        }
        assert!(lookup("lower").is_some() && lookup("no_such_function").is_none());
    }
}
