//! Aggregations for the analytic query, and how pgtier finishes each
//! aggregate's answer columns into the value its own aggregate gives
//! (exec/aggregate.rs): an average is the numeric sum divided by the count
//! here, and a sum over numerics of varying scale (CASE or coalesce
//! branches) takes the largest scale of its inputs, as numeric addition
//! keeps it, rather than DataFusion's fixed one.

use pgtier_engine::{DataType, Numeric, Value};

use super::translate::{Cols, From, Kind, Res, Sql, Translator, cast, push_where, sql};
use crate::error::{Result, SqlError};
use crate::plan::{AggCall, AggFunc, AggPlan};
use crate::value::{self, ArithOp};

/// How pgtier turns one aggregate's answer columns into its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// One column: the value.
    Value,
    /// sum, count: the sum divided by the count.
    Avg,
    /// sum (at scale `from`), the largest scale among its inputs: the sum
    /// at that scale.
    Rescaled { from: u8 },
    /// sum (at scale `from`), count, the largest scale: the rescaled sum
    /// divided by the count.
    AvgRescaled { from: u8 },
}

impl Finish {
    pub(crate) fn columns(self) -> usize {
        match self {
            Finish::Value => 1,
            Finish::Avg | Finish::Rescaled { .. } => 2,
            Finish::AvgRescaled { .. } => 3,
        }
    }

    /// The aggregate's value from its answer columns.
    pub(crate) fn value(self, columns: &mut impl Iterator<Item = Value>) -> Result<Value> {
        let mut next = || columns.next().ok_or_else(mismatch);
        Ok(match self {
            Finish::Value => next()?,
            Finish::Avg => {
                let (sum, count) = (next()?, next()?);
                average(sum, count)?
            }
            Finish::Rescaled { from } => {
                let (sum, largest) = (next()?, next()?);
                rescaled(sum, from, &largest)?
            }
            Finish::AvgRescaled { from } => {
                let (sum, count, largest) = (next()?, next()?, next()?);
                average(rescaled(sum, from, &largest)?, count)?
            }
        })
    }
}

pub(crate) fn mismatch() -> SqlError {
    SqlError::new("XX000", "the analytic answer does not have the shape its query asked for")
}

/// exec/aggregate.rs's avg: the numeric sum divided by the count.
fn average(sum: Value, count: Value) -> Result<Value> {
    match count {
        Value::Int8(0) | Value::Null => Ok(Value::Null),
        Value::Int8(n) => value::arith(ArithOp::Div, &sum, &Value::Int8(n), value::NUMERIC_ANY),
        _ => Err(mismatch()),
    }
}

/// A numeric held at a larger scale than its own (`scale`, an integer):
/// at its own again, exactly.
pub(super) fn unscaled(v: Value, scale: &Value) -> Result<Value> {
    match &v {
        Value::Numeric(n) => {
            let from = n.scale;
            rescaled(v, from, scale)
        }
        _ => Ok(v),
    }
}

/// A sum computed at scale `from` given the scale `largest` its inputs
/// had: the digits below it are zeros (no input had them).
fn rescaled(sum: Value, from: u8, largest: &Value) -> Result<Value> {
    let (Value::Numeric(n), Some(to)) = (&sum, largest.as_i64()) else {
        return if sum.is_null() { Ok(Value::Null) } else { Err(mismatch()) };
    };
    let to = u8::try_from(to).ok().filter(|&t| t <= from && n.scale == from).ok_or_else(mismatch)?;
    let factor = 10i128.pow(u32::from(from - to));
    if n.mantissa % factor != 0 {
        return Err(mismatch());
    }
    Ok(Value::Numeric(Numeric::new(n.mantissa / factor, to)))
}

/// An aggregation's parts (see [`Translator::aggregate`]).
pub(super) struct Aggregation {
    pub(super) select: Vec<String>,
    /// The inner SELECT with its alias.
    pub(super) from: String,
    pub(super) group_by: Vec<String>,
    pub(super) finishes: Vec<Finish>,
    /// The aggregate row as HAVING and a subquery's select list read it:
    /// None for an aggregate pgtier finishes.
    pub(super) row: Vec<Option<Sql>>,
}

impl Translator<'_> {
    /// An aggregation over `from`: the group keys, aggregate arguments and
    /// filters are computed by an inner SELECT as plain columns `k0..`,
    /// `v0..`, `f0..`, `s0..` (scales), which the outer one groups and
    /// aggregates (each aggregate over columns of its own: DataFusion
    /// names an aggregate by its argument with casts dropped, and refuses
    /// two of one name). Gives the outer select list (groups, then each
    /// aggregate's answer columns), its FROM and GROUP BY, the finishes,
    /// and the aggregate row.
    pub(super) fn aggregate(&mut self, agg: &AggPlan, from: &From) -> Res<Aggregation> {
        if agg.group_by.is_empty() && agg.aggs.is_empty() {
            // One row whatever the input (`SELECT 1 FROM t HAVING ...`).
            return Err("an aggregation without groups or aggregates".into());
        }
        let cx = Cols(&from.columns);
        let mut inner = Vec::new();
        let mut out = Aggregation {
            select: Vec::new(),
            from: String::new(),
            group_by: Vec::new(),
            finishes: Vec::new(),
            row: Vec::new(),
        };
        for (i, g) in agg.group_by.iter().enumerate() {
            let e = self.expr(g, &cx)?;
            if e.kind == Kind::Null || e.scale.is_some() {
                return Err("a NULL group key or one of varying numeric scale".into());
            }
            inner.push(format!("{} AS k{i}", e.text));
            out.select.push(format!("k{i}"));
            out.group_by.push(format!("k{i}"));
            out.row.push(Some(sql(format!("k{i}"), e.kind)));
        }
        for (i, call) in agg.aggs.iter().enumerate() {
            let (texts, kind, finish) = self.agg_call(call, i, &cx, &mut inner)?;
            out.row.push(match (&texts[..], kind, finish) {
                ([one], Some(kind), Finish::Value) => Some(sql(one.clone(), kind)),
                _ => None,
            });
            out.finishes.push(finish);
            out.select.extend(texts);
        }
        let mut text = format!("SELECT {} FROM {}", inner.join(", "), from.text);
        push_where(&mut text, &from.conditions);
        out.from = format!("({text}) AS q{}", self.depth);
        self.depth += 1;
        Ok(out)
    }

    /// Aggregate `i`'s answer columns over the inner columns it adds to
    /// `inner`, its value's kind, and how pgtier finishes it.
    fn agg_call(
        &mut self,
        call: &AggCall,
        i: usize,
        cx: &Cols<'_>,
        inner: &mut Vec<String>,
    ) -> Res<(Vec<String>, Option<Kind>, Finish)> {
        if !call.order_by.is_empty() {
            return Err("an aggregate with ORDER BY".into());
        }
        let filter = match &call.filter {
            Some(f) => {
                inner.push(format!("{} AS f{i}", self.condition(f, cx)?));
                format!(" FILTER (WHERE f{i})")
            }
            None => String::new(),
        };
        let distinct = if call.distinct { "DISTINCT " } else { "" };
        let arg = match &call.arg {
            Some(a) => Some(self.expr(a, cx)?),
            None => None,
        };
        let v = format!("v{i}");
        let one = |f: &str| format!("{f}({distinct}{v}){filter}");
        // The largest scale among the rows the aggregate adds up.
        let largest = format!("max(CASE WHEN {v} IS NULL THEN NULL ELSE s{i} END){filter}");
        let varying = arg.as_ref().is_some_and(|a| a.scale.is_some());
        if varying && call.distinct {
            // Of equal values of different scales, which one DISTINCT keeps is open.
            return Err("DISTINCT over numerics of varying scale".into());
        }
        Ok(match (call.func, arg) {
            (AggFunc::CountStar, _) => {
                inner.push(format!("TRUE AS {v}"));
                (vec![one("count")], Some(Kind::Int8), Finish::Value)
            }
            (AggFunc::Count, Some(a)) => {
                inner.push(format!("{} AS {v}", a.text));
                (vec![one("count")], Some(Kind::Int8), Finish::Value)
            }
            (AggFunc::Sum, Some(a)) => {
                let out = sum_kind(a.kind, call.ty)?;
                inner.push(format!("{} AS {v}", cast(&a.text, out)));
                match (a.scale, out) {
                    (Some(scales), Kind::Num(from)) => {
                        inner.push(format!("{scales} AS s{i}"));
                        (vec![one("sum"), largest], None, Finish::Rescaled { from })
                    }
                    _ => (vec![one("sum")], Some(out), Finish::Value),
                }
            }
            (AggFunc::Avg, Some(a)) => {
                let from = match a.kind {
                    k if k.is_int() => 0,
                    Kind::Num(s) => s,
                    k => return Err(format!("avg over {k:?}")),
                };
                if !matches!(call.ty, DataType::Numeric { .. }) {
                    return Err("avg of this type".into());
                }
                inner.push(format!("{} AS {v}", cast(&a.text, Kind::Num(from))));
                match a.scale {
                    Some(scales) => {
                        inner.push(format!("{scales} AS s{i}"));
                        (vec![one("sum"), one("count"), largest], None, Finish::AvgRescaled { from })
                    }
                    None => (vec![one("sum"), one("count")], None, Finish::Avg),
                }
            }
            (AggFunc::Min | AggFunc::Max, Some(a)) => {
                let same_type = Kind::of_type(call.ty) == Some(a.kind)
                    || matches!((a.kind, call.ty), (Kind::Num(_), DataType::Numeric { .. }));
                if a.kind == Kind::Null || !same_type || a.scale.is_some() {
                    return Err("min/max of this type".into());
                }
                inner.push(format!("{} AS {v}", a.text));
                (vec![one(if call.func == AggFunc::Min { "min" } else { "max" })], Some(a.kind), Finish::Value)
            }
            (func, _) => return Err(format!("aggregate {func:?}")),
        })
    }
}

/// sum's result kind over `arg`: int2/int4 give bigint, bigint and
/// numeric give numeric (of the argument's scale), as PostgreSQL's sum.
pub(super) fn sum_kind(arg: Kind, ty: DataType) -> Res<Kind> {
    match (arg, ty) {
        (Kind::Int2 | Kind::Int4, DataType::Int8) => Ok(Kind::Int8),
        (Kind::Int8, DataType::Numeric { .. }) => Ok(Kind::Num(0)),
        (Kind::Num(s), DataType::Numeric { .. }) => Ok(Kind::Num(s)),
        (k, _) => Err(format!("sum over {k:?}")),
    }
}
