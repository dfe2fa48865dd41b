//! Binding of the builtin functions added after the first set in
//! `function.rs`: format, the mathematical functions (cbrt, exp, ln, log,
//! sign, div, gcd, lcm, pi), to_char / to_timestamp / to_date,
//! make_timestamp[tz]. Each follows PostgreSQL's overload resolution for
//! the types pgtier has: integers and unknown literals go to float8 where
//! PostgreSQL has a float8 and a numeric version (float8 is the numeric
//! category's preferred type), numeric picks the numeric version.

use pgtier_engine::{DataType, Value};

use super::{Binder, Ty};
use crate::catalog::column_type_info;
use crate::error::{Result, SqlError};
use crate::expr::{Expr, Func};
use crate::value::types::{Elem, RegKind};
use crate::value::{self, Category, NUMERIC_ANY, category};

fn not_unique(sig: &str) -> SqlError {
    SqlError::new("42725", format!("function {sig} is not unique"))
        .with_hint("Could not choose a best candidate function. You might need to add explicit type casts.")
}

/// Which version of a function with float8 and numeric versions PostgreSQL
/// picks for an argument of type `t`: Some(true) numeric, Some(false)
/// float8, None no version takes it.
fn float_or_numeric(t: Ty) -> Option<bool> {
    match t {
        None => Some(false),
        Some(t) if RegKind::of(t).is_some() => None,
        Some(DataType::Numeric { .. }) => Some(true),
        Some(t) if category(t) == Category::Numeric => Some(false),
        Some(_) => None,
    }
}

/// The functions [`Binder::more_function`] binds.
pub(super) const MORE_FUNCTIONS: [&str; 24] = [
    "pg_typeof",
    "format",
    "cbrt",
    "exp",
    "ln",
    "log",
    "log10",
    "sign",
    "pi",
    "div",
    "gcd",
    "lcm",
    "to_char",
    "to_timestamp",
    "to_date",
    "make_timestamp",
    "make_timestamptz",
    "regexp_matches",
    "regexp_split_to_table",
    "regexp_split_to_array",
    "regexp_count",
    "regexp_instr",
    "regexp_substr",
    "to_number",
];

/// gcd / lcm (integer, bigint and numeric versions) as PostgreSQL
/// resolves them: among the versions every argument converts to
/// implicitly, the one with the most arguments of exactly its type; a tie
/// is not unique (no version takes float8, the category's preferred type).
/// None: no version; Some(None): not unique.
fn gcd_version(types: &[Ty]) -> Option<Option<DataType>> {
    let mut best: Option<(usize, DataType)> = None;
    let mut tie = false;
    for (k, version) in [DataType::Int4, DataType::Int8, NUMERIC_ANY].into_iter().enumerate() {
        let fits = types.iter().all(|t| match t {
            None => true,
            Some(t) if RegKind::of(*t).is_some() || value::is_float(*t) || category(*t) != Category::Numeric => false,
            Some(DataType::Int2 | DataType::Int4) => true,
            Some(DataType::Int8) => k >= 1,
            Some(_) => k == 2,
        });
        if !fits {
            continue;
        }
        let exact = types
            .iter()
            .filter(|t| match (t, version) {
                (Some(DataType::Numeric { .. }), DataType::Numeric { .. }) => true,
                (Some(t), v) => *t == v,
                (None, _) => false,
            })
            .count();
        match best {
            Some((n, _)) if n > exact => {}
            Some((n, _)) if n == exact => tie = true,
            _ => {
                best = Some((exact, version));
                tie = false;
            }
        }
    }
    let (exact, version) = best?;
    Some(if tie || exact == 0 { None } else { Some(version) })
}

impl Binder<'_> {
    /// Binds a call of one of [`MORE_FUNCTIONS`].
    pub(super) fn more_function(&mut self, name: &str, bound: Vec<(Expr, Ty)>, sig: &str) -> Result<(Expr, Ty)> {
        let n = bound.len();
        let undefined = || SqlError::undefined_function(sig);
        let arity = |lo: usize, hi: usize| if (lo..=hi).contains(&n) { Ok(()) } else { Err(undefined()) };
        let bound_types: Vec<Ty> = bound.iter().map(|b| b.1).collect();
        let out = match name {
            "pg_typeof" => {
                arity(1, 1)?;
                // The argument's type is known when binding: a constant regtype.
                let oid = match bound_types[0] {
                    None => 705,
                    Some(t) => match (Elem::of(t), RegKind::of(t)) {
                        (Some(e), _) => e.type_oid(),
                        (_, Some(k)) => k.type_oid(),
                        _ => u32::try_from(column_type_info(t).type_oid).unwrap_or(0),
                    },
                };
                (Expr::Const(Value::Int8(i64::from(oid))), Some(RegKind::Type.data_type()))
            }
            "format" => {
                if n == 0 {
                    return Err(undefined());
                }
                let mut out = Vec::with_capacity(n);
                for (k, (e, t)) in bound.into_iter().enumerate() {
                    out.push(match t {
                        _ if k == 0 => self.text_arg(e, t, name).map_err(|_| undefined())?,
                        None => self.coerce(e, None, DataType::Text, name)?,
                        Some(t) if RegKind::of(t).is_some() => {
                            return Err(SqlError::unsupported("format() of a reg* value"));
                        }
                        // char(n) keeps its padding: format prints each argument with its output function.
                        Some(_) => e,
                    });
                }
                (Expr::Func(Func::Format, out), Some(DataType::Text))
            }
            "cbrt" | "exp" | "ln" | "log" | "log10" | "sign" => {
                arity(1, if name == "log" { 2 } else { 1 })?;
                if n == 2 {
                    // log(base, x) exists for numeric only.
                    if !bound_types.iter().all(|t| float_or_numeric(*t).is_some() && !t.is_some_and(value::is_float)) {
                        return Err(undefined());
                    }
                    let mut out = Vec::new();
                    for (e, t) in bound {
                        out.push(if t.is_none() {
                            self.coerce(e, None, NUMERIC_ANY, name)?
                        } else {
                            self.result_cast(e, t, Some(NUMERIC_ANY))?
                        });
                    }
                    return Ok((Expr::Func(Func::Log10, out), Some(NUMERIC_ANY)));
                }
                let Some((e, t)) = bound.into_iter().next() else { return Err(undefined()) };
                let numeric = float_or_numeric(t).ok_or_else(undefined)? && name != "cbrt";
                let f = match name {
                    "cbrt" => Func::Cbrt,
                    "exp" => Func::Exp,
                    "ln" => Func::Ln,
                    "sign" => Func::Sign,
                    _ => Func::Log10,
                };

                let want = if numeric { NUMERIC_ANY } else { DataType::Float8 };
                let e = if numeric { e } else { self.result_cast(e, t, Some(want))? };
                (Expr::Func(f, vec![e]), Some(want))
            }
            "pi" => {
                arity(0, 0)?;
                (Expr::Func(Func::Pi, Vec::new()), Some(DataType::Float8))
            }
            "div" => {
                arity(2, 2)?;
                if bound_types.iter().any(|t| float_or_numeric(*t).is_none() || t.is_some_and(value::is_float)) {
                    return Err(undefined());
                }
                let mut out = Vec::new();
                for (e, t) in bound {
                    out.push(self.result_cast(e, t, Some(NUMERIC_ANY))?);
                }
                (Expr::Func(Func::Div, out), Some(NUMERIC_ANY))
            }
            "gcd" | "lcm" => {
                arity(2, 2)?;
                let want = gcd_version(&bound_types).ok_or_else(undefined)?.ok_or_else(|| not_unique(sig))?;
                let mut out = Vec::new();
                for (e, t) in bound {
                    out.push(self.result_cast(e, t, Some(want))?);
                }
                (Expr::Func(if name == "gcd" { Func::Gcd } else { Func::Lcm }, out), Some(want))
            }
            "to_char" => {
                arity(2, 2)?;
                let mut it = bound.into_iter();
                let (Some((x, t)), Some((fmt, ft))) = (it.next(), it.next()) else { return Err(undefined()) };
                let x = match t {
                    Some(DataType::Timestamp(_) | DataType::TimestampTz(_)) => x,
                    // A date goes to timestamptz, the date/time category's preferred type.
                    Some(DataType::Date) => self.result_cast(x, t, Some(DataType::TimestampTz(None)))?,
                    None => return Err(not_unique(sig)),
                    Some(t) if category(t) == Category::Numeric => {
                        return Err(SqlError::unsupported("to_char of a number"));
                    }
                    Some(_) => return Err(undefined()),
                };
                let fmt = self.text_arg(fmt, ft, name).map_err(|_| undefined())?;
                (Expr::Func(Func::ToChar, vec![x, fmt]), Some(DataType::Text))
            }
            "to_timestamp" if n == 1 => {
                let Some((e, t)) = bound.into_iter().next() else { return Err(undefined()) };
                if float_or_numeric(t).is_none() {
                    return Err(undefined());
                }
                let e = self.result_cast(e, t, Some(DataType::Float8))?;
                (Expr::Func(Func::ToTimestampEpoch, vec![e]), Some(DataType::TimestampTz(None)))
            }
            "to_timestamp" | "to_date" => {
                arity(2, 2)?;
                let mut out = Vec::new();
                for (e, t) in bound {
                    out.push(self.text_arg(e, t, name).map_err(|_| undefined())?);
                }
                let date = name == "to_date";
                (
                    Expr::Func(Func::ToTimestamp(date), out),
                    Some(if date { DataType::Date } else { DataType::TimestampTz(None) }),
                )
            }
            "make_timestamp" | "make_timestamptz" => {
                let tz = name == "make_timestamptz";
                if tz && n == 7 {
                    return Err(SqlError::unsupported("make_timestamptz with a time zone"));
                }
                arity(6, 6)?;
                let mut out = Vec::new();
                for (k, (e, t)) in bound.into_iter().enumerate() {
                    out.push(if k < 5 {
                        self.int4_param(e, t, sig)?
                    } else if float_or_numeric(t).is_some() {
                        self.result_cast(e, t, Some(DataType::Float8))?
                    } else {
                        return Err(undefined());
                    });
                }
                (
                    Expr::Func(Func::MakeTimestamp(tz), out),
                    Some(if tz { DataType::TimestampTz(None) } else { DataType::Timestamp(None) }),
                )
            }
            "regexp_matches" | "regexp_split_to_table" => {
                return Err(SqlError::unsupported(format!("set-returning function {name}()")));
            }
            _ => return Err(SqlError::unsupported(format!("{name}()"))),
        };
        Ok(out)
    }
}

/// The result type of regexp_match: text[].
pub(super) fn text_array() -> DataType {
    Elem::Text.data_type()
}
