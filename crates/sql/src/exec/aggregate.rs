//! GROUP BY and aggregates: the group key, the accumulators and the hash
//! aggregation (also the window aggregates' accumulators).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use pgtier_engine::{DataType, Interval, Numeric, Value};

use super::{Exec, row_bytes};
use crate::error::{Result, SqlError};
use crate::expr::{Env, Expr};
use crate::plan::{AggCall, AggFunc, RegrFunc};
use crate::value;
use crate::value::types::{self, Elem};

/// Group/DISTINCT key: values equal under SQL equality hash alike.
#[derive(Clone, Debug)]
pub(crate) struct GroupKey(pub(crate) Vec<Value>);

impl PartialEq for GroupKey {
    fn eq(&self, other: &GroupKey) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(&other.0).all(|(a, b)| match (a.is_null(), b.is_null()) {
                (true, true) => true,
                (false, false) => value::compare(a, b) == Some(Ordering::Equal),
                _ => false,
            })
    }
}

impl Eq for GroupKey {}

impl Hash for GroupKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for v in &self.0 {
            hash_value(v, h);
        }
    }
}

/// Values `value::compare` finds equal hash alike.
fn hash_value<H: Hasher>(v: &Value, h: &mut H) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => b.hash(h),
        Value::Int2(_) | Value::Int4(_) | Value::Int8(_) | Value::Numeric(_) => {
            let n = value::numeric_normalize(value::to_numeric(v).unwrap_or(Numeric::new(0, 0)));
            n.hash(h);
        }
        Value::NumericBig(_) => match value::numeric_wide_normalized(v) {
            small @ Value::Numeric(_) => hash_value(&small, h),
            Value::NumericBig(b) => b.hash(h),
            _ => 0u8.hash(h),
        },
        Value::Float4(_) | Value::Float8(_) => {
            let x = value::to_f64(v).unwrap_or(0.0);
            let x = if x == 0.0 {
                0.0
            } else if x.is_nan() {
                f64::NAN
            } else {
                x
            };
            x.to_bits().hash(h);
        }
        Value::Text(s) => s.hash(h),
        Value::Bytea(b) => b.hash(h),
        // As the timestamp it equals (past that range none does,
        // and wrapping only shares a hash).
        Value::Date(d) => value::date_micros(*d).unwrap_or_else(|_| i64::from(*d).wrapping_mul(86_400_000_000)).hash(h),
        Value::Timestamp(t) | Value::TimestampTz(t) => t.hash(h),
        Value::Uuid(u) => u.hash(h),
        Value::Time(t) => t.hash(h),
        // timetz_eq: equal clocks in equal zones.
        Value::TimeTz(t, z) => (t, z).hash(h),
        Value::Interval(v) => v.span().hash(h),
        // Equal jsonb values ('1.0', '1') share their sort key.
        Value::Jsonb(s) => pgtier_engine::json::sort_key(s).hash(h),
        Value::Json(s) => s.hash(h),
        // Equal arrays have equal lower bounds: the elements suffice.
        Value::Array(items) => hash_items(items, h),
        Value::BoundedArray(b) => hash_items(&b.items, h),
    }
}

fn hash_items<H: Hasher>(items: &[Value], h: &mut H) {
    items.len().hash(h);
    for item in items {
        hash_value(item, h);
    }
}

#[derive(Clone, Debug)]
pub(super) enum Acc {
    Count(i64),
    SumInt(Option<i128>),
    /// A numeric of either form (value::arith widens past i128).
    SumNum(Option<Value>),
    SumFloat(Option<f64>),
    /// sum(float4): float4pl, rounding to float4 at every step.
    SumFloat4(Option<f32>),
    AvgNum(Value, i64),
    /// avg/variance/stddev of float4 and float8: float8_accum's state.
    Youngs(YoungsCramer),
    /// sum(interval) (no count) and avg(interval): PostgreSQL's interval
    /// sum, field by field, and its count.
    SumInterval(Option<Interval>, i64),
    Extreme(Option<Value>),
    Collect(Vec<Value>),
    /// array_agg/string_agg with ORDER BY: each value with its sort keys.
    Sorted(Vec<(Vec<Value>, Value)>),
    /// variance/stddev: count, sum, sum of squares (exact), any NaN or infinity.
    Variance(i64, value::Dec, value::Dec, bool),
    /// regr_*, covar_*, corr: float8_regr_accum's state.
    Regr(RegrState),
}

/// PostgreSQL's float8_regr_accum state (N, Sx, Sxx, Sy, Syy, Sxy): the
/// Youngs-Cramer update of both variables and their co-moment, with its
/// overflow rule, so the finals round exactly as PostgreSQL's do.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RegrState {
    n: f64,
    sx: f64,
    sxx: f64,
    sy: f64,
    syy: f64,
    sxy: f64,
}

impl RegrState {
    fn add(&mut self, y: f64, x: f64) -> Result<()> {
        let old = *self;
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
        if old.n > 0.0 {
            let tmp_x = x * self.n - self.sx;
            let tmp_y = y * self.n - self.sy;
            let scale = 1.0 / (self.n * old.n);
            self.sxx += tmp_x * tmp_x * scale;
            self.syy += tmp_y * tmp_y * scale;
            self.sxy += tmp_x * tmp_y * scale;
            let inf = f64::is_infinite;
            if inf(self.sx) || inf(self.sxx) || inf(self.sy) || inf(self.syy) || inf(self.sxy) {
                let x_finite = !inf(old.sx) && !inf(x);
                let y_finite = !inf(old.sy) && !inf(y);
                if ((inf(self.sx) || inf(self.sxx)) && x_finite)
                    || ((inf(self.sy) || inf(self.syy)) && y_finite)
                    || (inf(self.sxy) && x_finite && y_finite)
                {
                    return Err(float_overflow());
                }
                for v in [&mut self.sxx, &mut self.syy, &mut self.sxy] {
                    if v.is_infinite() {
                        *v = f64::NAN;
                    }
                }
            }
        } else {
            if x.is_nan() || x.is_infinite() {
                self.sxx = f64::NAN;
                self.sxy = f64::NAN;
            }
            if y.is_nan() || y.is_infinite() {
                self.syy = f64::NAN;
                self.sxy = f64::NAN;
            }
        }
        Ok(())
    }

    /// float.c's float8_regr_* / float8_covar_* / float8_corr finals.
    #[allow(clippy::float_cmp, clippy::cast_possible_truncation)]
    fn finish(self, kind: RegrFunc) -> Value {
        let RegrState { n, sx, sxx, sy, syy, sxy } = self;
        let float = |v: Option<f64>| v.map_or(Value::Null, Value::Float8);
        if kind == RegrFunc::Count {
            return Value::Int8(n as i64);
        }
        if n < 1.0 {
            return Value::Null;
        }
        float(match kind {
            RegrFunc::Count => None,
            RegrFunc::Sxx => Some(sxx),
            RegrFunc::Syy => Some(syy),
            RegrFunc::Sxy => Some(sxy),
            RegrFunc::AvgX => Some(sx / n),
            RegrFunc::AvgY => Some(sy / n),
            RegrFunc::CovarPop => Some(sxy / n),
            RegrFunc::CovarSamp if n < 2.0 => None,
            RegrFunc::CovarSamp => Some(sxy / (n - 1.0)),
            RegrFunc::Corr if sxx == 0.0 || syy == 0.0 => None,
            RegrFunc::Corr => Some(sxy / (sxx * syy).sqrt()),
            RegrFunc::R2 if sxx == 0.0 => None,
            RegrFunc::R2 if syy == 0.0 => Some(1.0),
            RegrFunc::R2 => Some((sxy * sxy) / (sxx * syy)),
            RegrFunc::Slope if sxx == 0.0 => None,
            RegrFunc::Slope => Some(sxy / sxx),
            RegrFunc::Intercept if sxx == 0.0 => None,
            RegrFunc::Intercept => Some((sy - sx * sxy / sxx) / n),
        })
    }
}

/// A regr_* / covar_* / corr call's argument: its (y, x) pair, NULLs kept
/// (a row with either NULL is skipped, the functions being strict).
pub(crate) const REGR_PAIR: crate::expr::Builtin = crate::expr::Builtin {
    name: "regr_pair",
    eval: |args, _| Ok(Value::Array(args.to_vec())),
    strict: false,
    volatility: crate::expr::Volatility::Immutable,
    data: crate::expr::registry::CallData::None,
};

/// PostgreSQL's float8_accum state (N, Sx, Sxx) for avg, variance and
/// stddev of float4/float8: the Youngs-Cramer update, with its overflow
/// rule, so results round exactly as PostgreSQL's do.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct YoungsCramer {
    n: f64,
    sx: f64,
    sxx: f64,
}

impl YoungsCramer {
    fn add(&mut self, x: f64) -> Result<()> {
        let (n0, sx0) = (self.n, self.sx);
        self.n += 1.0;
        self.sx += x;
        if n0 > 0.0 {
            let tmp = x * self.n - self.sx;
            self.sxx += tmp * tmp / (self.n * n0);
            if self.sx.is_infinite() || self.sxx.is_infinite() {
                if !sx0.is_infinite() && !x.is_infinite() {
                    return Err(float_overflow());
                }
                self.sxx = f64::NAN;
            }
        } else if x.is_nan() || x.is_infinite() {
            self.sxx = f64::NAN;
        }
        Ok(())
    }

    /// float8_avg, float8_var_pop/samp, float8_stddev_pop/samp.
    fn finish(self, func: AggFunc) -> Option<f64> {
        match func {
            AggFunc::Variance { sample, stddev } => {
                let divisor = if sample { self.n - 1.0 } else { self.n };
                if divisor <= 0.0 {
                    return None;
                }
                let variance = self.sxx / divisor;
                Some(if stddev { variance.sqrt() } else { variance })
            }
            _ if self.n == 0.0 => None,
            _ => Some(self.sx / self.n),
        }
    }
}

/// float8pl's and float4pl's overflow: an infinite result from finite inputs.
fn float_overflow() -> SqlError {
    SqlError::new("22003", "value out of range: overflow")
}

fn checked_float(result: f64, an_input_was_infinite: bool) -> Result<f64> {
    if result.is_infinite() && !an_input_was_infinite {
        return Err(float_overflow());
    }
    Ok(result)
}

pub(super) fn new_acc(call: &AggCall) -> Acc {
    match call.func {
        AggFunc::Count | AggFunc::CountStar => Acc::Count(0),
        AggFunc::Sum | AggFunc::Avg if call.ty == DataType::Interval => Acc::SumInterval(None, 0),
        AggFunc::Sum => match call.ty {
            DataType::Int8 => Acc::SumInt(None),
            DataType::Float4 => Acc::SumFloat4(None),
            DataType::Float8 => Acc::SumFloat(None),
            _ => Acc::SumNum(None),
        },
        AggFunc::Avg | AggFunc::Variance { .. } if call.ty == DataType::Float8 => Acc::Youngs(YoungsCramer::default()),
        AggFunc::Avg => Acc::AvgNum(Value::Numeric(Numeric::new(0, 0)), 0),
        AggFunc::Min | AggFunc::Max | AggFunc::BoolAnd | AggFunc::BoolOr => Acc::Extreme(None),
        AggFunc::Variance { .. } => Acc::Variance(0, value::Dec::zero(), value::Dec::zero(), false),
        AggFunc::Regr(_) => Acc::Regr(RegrState::default()),
        AggFunc::StringAgg | AggFunc::ArrayAgg | AggFunc::Json(_) | AggFunc::OrderedSet { .. }
            if !call.order_by.is_empty() =>
        {
            Acc::Sorted(Vec::new())
        }
        AggFunc::StringAgg | AggFunc::ArrayAgg | AggFunc::Json(_) | AggFunc::OrderedSet { .. } => {
            Acc::Collect(Vec::new())
        }
    }
}

pub(super) fn accumulate(acc: &mut Acc, call: &AggCall, v: Option<Value>) -> Result<()> {
    let overflow = || SqlError::new("22003", "value overflows numeric format");
    match (acc, v) {
        (Acc::Count(n), None) if call.func == AggFunc::CountStar => *n += 1,
        // array_agg keeps NULLs; string_agg's pair is never NULL.
        (Acc::Collect(items), Some(v)) => items.push(v),
        (Acc::Sorted(_), _) => {
            return Err(SqlError::new("XX000", "an ordered aggregate's value without its sort keys"));
        }
        (_, None) => {}
        (_, Some(Value::Null)) => {}
        (Acc::Regr(state), Some(Value::Array(pair))) => {
            if let [y, x] = pair.as_slice()
                && !y.is_null()
                && !x.is_null()
            {
                state.add(value::to_f64(y).unwrap_or(f64::NAN), value::to_f64(x).unwrap_or(f64::NAN))?;
            }
        }
        (Acc::Regr(_), Some(other)) => {
            return Err(SqlError::new("XX000", format!("a regression aggregate given {}", other.type_name())));
        }
        (Acc::Count(n), Some(_)) => *n += 1,
        (Acc::SumInt(s), Some(v)) => {
            *s = Some(s.unwrap_or(0).checked_add(i128::from(v.as_i64().unwrap_or(0))).ok_or_else(overflow)?)
        }
        (Acc::SumNum(s), Some(v)) => {
            *s = Some(match s {
                Some(prev) => value::arith(value::ArithOp::Add, prev, &v, value::NUMERIC_ANY)?,
                None => value::cast(v, value::NUMERIC_ANY, false)?,
            });
        }
        (Acc::Variance(n, sum, sum_sq, special), Some(v)) => {
            let x = value::Dec::of(&v).ok_or_else(overflow)?;
            *n += 1;
            if matches!(x, value::Dec::Fin(..)) {
                *sum_sq = sum_sq.add(&x.mul_exact(&x));
                *sum = sum.add(&x);
            } else {
                *special = true;
            }
        }
        (Acc::SumFloat(s), Some(v)) => {
            let (a, b) = (s.unwrap_or(0.0), value::to_f64(&v).unwrap_or(0.0));
            *s = Some(checked_float(a + b, a.is_infinite() || b.is_infinite())?);
        }
        #[allow(clippy::cast_possible_truncation)]
        (Acc::SumFloat4(s), Some(v)) => {
            let (a, b) = (s.unwrap_or(0.0), value::to_f64(&v).unwrap_or(0.0) as f32);
            let sum = a + b;
            if sum.is_infinite() && !a.is_infinite() && !b.is_infinite() {
                return Err(float_overflow());
            }
            *s = Some(sum);
        }
        (Acc::Youngs(state), Some(v)) => state.add(value::to_f64(&v).unwrap_or(0.0))?,
        (Acc::AvgNum(s, c), Some(v)) => {
            *s = value::arith(value::ArithOp::Add, s, &v, value::NUMERIC_ANY)?;
            *c += 1;
        }
        (Acc::SumInterval(s, c), Some(Value::Interval(v))) => {
            *s = Some(match s {
                Some(prev) => crate::value::interval::add(*prev, v)?,
                None => v,
            });
            *c += 1;
        }
        (Acc::SumInterval(..), Some(other)) => {
            return Err(SqlError::new("XX000", format!("an interval sum given {}", other.type_name())));
        }
        (Acc::Extreme(cur), Some(v)) => {
            // Of equal values the later one (numeric_larger, interval_smaller
            // ...: 1.0 and 1.00 give 1.00).
            let replace = match cur {
                None => true,
                Some(c) => {
                    let o = value::compare(&v, c).unwrap_or(Ordering::Equal);
                    if matches!(call.func, AggFunc::Min | AggFunc::BoolAnd) {
                        o != Ordering::Greater
                    } else {
                        o != Ordering::Less
                    }
                }
            };
            if replace {
                *cur = Some(v);
            }
        }
    }
    Ok(())
}

pub(super) fn finish(acc: Acc, call: &AggCall) -> Result<Value> {
    Ok(match acc {
        Acc::Count(n) => Value::Int8(n),
        Acc::Collect(items) => finish_collect(call, items)?,
        Acc::Sorted(mut keyed) => {
            // Stable: rows with equal keys keep their input order.
            keyed.sort_by(|(a, _), (b, _)| {
                for (o, (x, y)) in call.order_by.iter().zip(a.iter().zip(b)) {
                    let ord = super::select::sort_key_cmp(x, y, o.desc, o.nulls_first);
                    if ord != Ordering::Equal {
                        return ord;
                    }
                }
                Ordering::Equal
            });
            if let AggFunc::OrderedSet { hypothetical } = call.func {
                return Ok(Value::Array(
                    keyed.into_iter().map(|(keys, v)| if hypothetical { Value::Array(keys) } else { v }).collect(),
                ));
            }
            let mut ordered = AggCall { distinct: false, ..call.clone() };
            ordered.order_by.clear();
            finish_collect(&ordered, keyed.into_iter().map(|(_, v)| v).collect())?
        }
        Acc::SumInt(s) => match s {
            Some(x) => Value::Int8(i64::try_from(x).map_err(|_| SqlError::out_of_range("bigint"))?),
            None => Value::Null,
        },
        Acc::SumNum(s) => s.unwrap_or(Value::Null),
        Acc::SumFloat(s) => s.map_or(Value::Null, Value::Float8),
        Acc::SumFloat4(s) => s.map_or(Value::Null, Value::Float4),
        Acc::AvgNum(s, c) => {
            if c == 0 {
                Value::Null
            } else {
                value::arith(value::ArithOp::Div, &s, &Value::Int8(c), value::NUMERIC_ANY)?
            }
        }
        Acc::Youngs(state) => state.finish(call.func).map_or(Value::Null, Value::Float8),
        Acc::Regr(state) => match call.func {
            AggFunc::Regr(kind) => state.finish(kind),
            _ => Value::Null,
        },
        Acc::Extreme(v) => v.unwrap_or(Value::Null),
        Acc::Variance(n, sum, sum_sq, special) => match call.func {
            AggFunc::Variance { sample, stddev } => value::numeric_variance(n, &sum, &sum_sq, special, sample, stddev)?,
            _ => Value::Null,
        },
        Acc::SumInterval(None, _) => Value::Null,
        Acc::SumInterval(Some(s), _) if call.func == AggFunc::Sum => Value::Interval(s),
        // interval_avg: the sum divided by the count as a float8.
        #[allow(clippy::cast_precision_loss)]
        Acc::SumInterval(Some(s), c) => Value::Interval(crate::value::interval::scale(s, c as f64, true)?),
    })
}

/// Hash aggregation: one output row per group (group values, then aggregates).
pub(super) fn aggregate(
    ex: &mut Exec<'_>,
    env: &Env<'_>,
    group_by: &[Expr],
    aggs: &[AggCall],
    rows: &[Vec<Value>],
) -> Result<Vec<Vec<Value>>> {
    let mut acc = Aggregator::new(group_by, aggs);
    for r in rows {
        acc.add(ex, env, r)?;
    }
    acc.finish()
}

/// GROUP BY state fed one row at a time: groups in first-seen order, each
/// with its accumulators (and, for DISTINCT aggregates, the values seen).
pub(super) struct Aggregator<'p> {
    group_by: &'p [Expr],
    aggs: &'p [AggCall],
    index: HashMap<GroupKey, usize>,
    groups: Vec<AggGroup>,
}

struct AggGroup {
    key: Vec<Value>,
    accs: Vec<Acc>,
    seen: Vec<std::collections::HashSet<GroupKey>>,
}

impl<'p> Aggregator<'p> {
    pub(super) fn new(group_by: &'p [Expr], aggs: &'p [AggCall]) -> Aggregator<'p> {
        let mut a = Aggregator { group_by, aggs, index: HashMap::new(), groups: Vec::new() };
        if group_by.is_empty() {
            // No GROUP BY: one group even over no rows (count(*) = 0).
            a.groups.push(a.fresh(Vec::new()));
            a.index.insert(GroupKey(Vec::new()), 0);
        }
        a
    }

    fn fresh(&self, key: Vec<Value>) -> AggGroup {
        AggGroup {
            key,
            accs: self.aggs.iter().map(new_acc).collect(),
            seen: self.aggs.iter().map(|_| std::collections::HashSet::new()).collect(),
        }
    }

    pub(super) fn add(&mut self, ex: &mut Exec<'_>, env: &Env<'_>, r: &[Value]) -> Result<()> {
        let gi = if self.group_by.is_empty() {
            0
        } else {
            let mut key = Vec::with_capacity(self.group_by.len());
            for g in self.group_by {
                key.push(g.eval(env, ex, r)?);
            }
            let gk = GroupKey(key);
            match self.index.get(&gk) {
                Some(i) => *i,
                None => {
                    // The key twice (index and group) and a slot per aggregate.
                    ex.interrupt.charge(2 * row_bytes(&gk.0) + self.aggs.len() * 64, "hash aggregate")?;
                    let g = self.fresh(gk.0.clone());
                    self.groups.push(g);
                    self.index.insert(gk, self.groups.len() - 1);
                    self.groups.len() - 1
                }
            }
        };
        for (k, call) in self.aggs.iter().enumerate() {
            if let Some(f) = &call.filter
                && f.eval_bool(env, ex, r)? != Some(true)
            {
                continue;
            }
            let v = match &call.arg {
                Some(e) => Some(e.eval(env, ex, r)?),
                None => None,
            };
            // DISTINCT drops NULLs for the strict aggregates; array_agg
            // keeps one, as PostgreSQL does.
            if call.distinct
                && let Some(x) = &v
                && ((x.is_null() && !matches!(call.func, AggFunc::ArrayAgg | AggFunc::Json(_)))
                    || !self.groups[gi].seen[k].insert(GroupKey(vec![x.clone()])))
            {
                continue;
            }
            if let (Acc::Sorted(items), Some(v)) = (&mut self.groups[gi].accs[k], &v) {
                if v.is_null() && call.func == (AggFunc::OrderedSet { hypothetical: false }) {
                    // The percentiles and mode skip NULL inputs.
                    continue;
                }
                let v = v.clone();
                let mut keys = Vec::with_capacity(call.order_by.len());
                for o in &call.order_by {
                    keys.push(o.key.eval(env, ex, r)?);
                }
                ex.interrupt.charge(row_bytes(&keys) + super::value_bytes(&v), "hash aggregate")?;
                items.push((keys, v));
                continue;
            }
            accumulate(&mut self.groups[gi].accs[k], call, v)?;
        }
        Ok(())
    }

    pub(super) fn finish(self) -> Result<Vec<Vec<Value>>> {
        let mut out = Vec::with_capacity(self.groups.len());
        for g in self.groups {
            let mut row = g.key;
            for (acc, call) in g.accs.into_iter().zip(self.aggs) {
                row.push(finish(acc, call)?);
            }
            out.push(row);
        }
        Ok(out)
    }
}

/// The result of string_agg / array_agg over the collected values.
fn finish_collect(call: &AggCall, mut items: Vec<Value>) -> Result<Value> {
    if items.is_empty() {
        return Ok(Value::Null);
    }
    if call.distinct {
        // PostgreSQL sorts a DISTINCT aggregate's input (NULL last); string_agg's
        // items are (value, delimiter) pairs, ordered by the value.
        if matches!(call.func, AggFunc::ArrayAgg | AggFunc::Json(_)) {
            items.sort_by(value::sort_cmp);
        } else if call.ty == pgtier_engine::DataType::Bytea {
            let first = |pair: &Value| match pair {
                Value::Array(pair) => pair.first().cloned().unwrap_or(Value::Null),
                _ => Value::Null,
            };
            items.sort_by(|a, b| value::sort_cmp(&first(a), &first(b)));
        } else {
            let first = |pair: &Value| {
                types::parse_array(pair.as_str().unwrap_or("{}"), Elem::Text)
                    .ok()
                    .and_then(|p| p.into_iter().next().flatten())
            };
            items.sort_by(|a, b| match (first(a), first(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                (x, y) => y.is_none().cmp(&x.is_none()).reverse(),
            });
        }
    }
    if let AggFunc::Json(agg) = call.func {
        return crate::value::json::finish_agg(agg, &items);
    }
    if call.func == AggFunc::ArrayAgg && items.iter().any(|v| matches!(v, Value::BoundedArray(_))) {
        return Err(SqlError::unsupported("array_agg of arrays with a lower bound other than 1"));
    }
    if call.func == AggFunc::ArrayAgg && matches!(call.ty, pgtier_engine::DataType::Array(_)) {
        return Ok(Value::Array(items));
    }
    if call.func == AggFunc::ArrayAgg {
        let elem = Elem::of(call.ty).ok_or_else(|| SqlError::new("XX000", "array_agg without an array type"))?;
        return Ok(Value::Text(types::array_text(elem, &items)));
    }
    if call.ty == pgtier_engine::DataType::Bytea {
        return Ok(bytea_agg(items));
    }
    let mut out: Option<String> = None;
    for pair in items {
        let parts = types::parse_array(pair.as_str().unwrap_or("{}"), Elem::Text)?;
        let (Some(Some(v)), Some(d)) = (parts.first(), parts.get(1)) else { continue };
        match &mut out {
            None => out = Some(v.clone()),
            Some(s) => {
                if let Some(d) = d {
                    s.push_str(d);
                }
                s.push_str(v);
            }
        }
    }
    Ok(out.map_or(Value::Null, Value::Text))
}

/// string_agg(bytea, bytea) over (value, delimiter) pairs: NULL values
/// skipped, a NULL delimiter as empty, NULL without a value.
fn bytea_agg(items: Vec<Value>) -> Value {
    let mut out: Option<Vec<u8>> = None;
    for pair in items {
        let Value::Array(pair) = pair else { continue };
        let (Some(Value::Bytea(v)), d) = (pair.first(), pair.get(1)) else { continue };
        match &mut out {
            None => out = Some(v.clone()),
            Some(bytes) => {
                if let Some(Value::Bytea(d)) = d {
                    bytes.extend_from_slice(d);
                }
                bytes.extend_from_slice(v);
            }
        }
    }
    out.map_or(Value::Null, Value::Bytea)
}

/// The hypothetical-set aggregates: where a row of the direct arguments
/// would rank among the group's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HypotheticalRank {
    Rank,
    DenseRank,
    PercentRank,
    CumeDist,
}

impl HypotheticalRank {
    pub(crate) fn name(self) -> &'static str {
        match self {
            HypotheticalRank::Rank => "rank",
            HypotheticalRank::DenseRank => "dense_rank",
            HypotheticalRank::PercentRank => "percent_rank",
            HypotheticalRank::CumeDist => "cume_dist",
        }
    }
}

/// The final functions of the ordered-set aggregates (PostgreSQL's
/// orderedsetaggs.c). Each gets the group's rows as the
/// `AggFunc::OrderedSet` aggregate collected them, sorted (an array of the
/// values, or for the hypothetical-set ones an array of rows, each an
/// array of its keys), then the direct arguments.
pub(crate) mod ordered_set {
    use std::cmp::Ordering;

    use pgtier_engine::{Interval, Value};

    use super::HypotheticalRank;
    use crate::error::{Result, SqlError};
    use crate::expr::registry::{EvalCtx, EvalFn};
    use crate::value;

    fn sorted(args: &[Value]) -> &[Value] {
        match args.first() {
            Some(Value::Array(items)) => items,
            _ => &[],
        }
    }

    /// The percentile argument, checked as PostgreSQL checks it.
    fn percentile(args: &[Value]) -> Result<f64> {
        let p = args.get(1).and_then(value::to_f64).unwrap_or(f64::NAN);
        if !(0.0..=1.0).contains(&p) {
            return Err(SqlError::new("22003", format!("percentile value {} is not between 0 and 1", format_g(p))));
        }
        Ok(p)
    }

    /// C's `%g`: six significant digits, trailing zeros dropped, an exponent
    /// below 1e-4 or from 1e6.
    fn format_g(x: f64) -> String {
        if x.is_nan() {
            return "nan".to_owned();
        }
        if x.is_infinite() {
            return if x < 0.0 { "-inf".to_owned() } else { "inf".to_owned() };
        }
        let sci = format!("{x:.5e}");
        let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let trim = |s: &str| -> String {
            if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_owned() } else { s.to_owned() }
        };
        if !(-4..6).contains(&exp) {
            let sign = if exp < 0 { '-' } else { '+' };
            return format!("{}e{sign}{:02}", trim(mantissa), exp.abs());
        }
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        trim(&format!("{x:.decimals$}"))
    }

    /// The first and second rows percentile_cont interpolates between, and the proportion.
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    fn cont_rows(n: usize, p: f64) -> (usize, usize, f64) {
        let at = p * (n as f64 - 1.0);
        let (first, second) = (at.floor(), at.ceil());
        (first as usize, second as usize, at - first)
    }

    /// A percentile final over its fraction, or over an array of fractions
    /// (percentile_*_multi_final: the array's shape, NULL for a NULL
    /// fraction, NULL for a group of no rows before any fraction is checked).
    fn by_fraction(args: &[Value], one: fn(&[Value], f64) -> Result<Value>) -> Result<Value> {
        let rows = sorted(args);
        if matches!(args.get(1), Some(Value::BoundedArray(_))) {
            return Err(SqlError::unsupported("percentiles of an array with a lower bound other than 1"));
        }
        let Some(Value::Array(fractions)) = args.get(1) else {
            let p = percentile(args)?;
            return if rows.is_empty() { Ok(Value::Null) } else { one(rows, p) };
        };
        if rows.is_empty() {
            return Ok(Value::Null);
        }
        fn each(items: &[Value], rows: &[Value], one: fn(&[Value], f64) -> Result<Value>) -> Result<Value> {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(match item {
                    Value::Null => Value::Null,
                    Value::Array(inner) => each(inner, rows, one)?,
                    p => one(rows, percentile(&[Value::Null, p.clone()])?)?,
                });
            }
            Ok(Value::Array(out))
        }
        each(fractions, rows, one)
    }

    /// percentile_cont(float8) WITHIN GROUP (ORDER BY float8).
    pub(crate) fn percentile_cont_float8(args: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
        by_fraction(args, |rows, p| {
            let (first, second, proportion) = cont_rows(rows.len(), p);
            let lo = value::to_f64(&rows[first]).unwrap_or(f64::NAN);
            if first == second {
                return Ok(Value::Float8(lo));
            }
            let hi = value::to_f64(&rows[second]).unwrap_or(f64::NAN);
            // float8_lerp.
            Ok(Value::Float8(lo + proportion * (hi - lo)))
        })
    }

    /// percentile_cont(float8) WITHIN GROUP (ORDER BY interval).
    pub(crate) fn percentile_cont_interval(args: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
        by_fraction(args, |rows, p| {
            let (first, second, proportion) = cont_rows(rows.len(), p);
            let (Value::Interval(lo), Value::Interval(hi)) = (&rows[first], &rows[second]) else {
                return Err(SqlError::new("XX000", "percentile_cont of an interval given another type"));
            };
            if first == second {
                return Ok(Value::Interval(*lo));
            }
            // interval_lerp: lo + (hi - lo) * proportion.
            let err = || SqlError::out_of_range("interval");
            let diff = Interval {
                months: hi.months.checked_sub(lo.months).ok_or_else(err)?,
                days: hi.days.checked_sub(lo.days).ok_or_else(err)?,
                micros: hi.micros.checked_sub(lo.micros).ok_or_else(err)?,
            };
            let step = crate::value::interval::scale(diff, proportion, false)?;
            Ok(Value::Interval(crate::value::interval::add(step, *lo)?))
        })
    }

    /// percentile_disc(float8) WITHIN GROUP (ORDER BY anyelement): the
    /// first value whose position is at least the fraction.
    pub(crate) fn percentile_disc(args: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        by_fraction(args, |rows, p| {
            let rownum = (p * rows.len() as f64).ceil() as usize;
            Ok(rows[rownum.max(1) - 1].clone())
        })
    }

    /// mode() WITHIN GROUP (ORDER BY anyelement): the most frequent value,
    /// the first in the order among equally frequent ones.
    pub(crate) fn mode(args: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
        let rows = sorted(args);
        let mut best: Option<(&Value, usize)> = None;
        let mut run = 0;
        for (k, v) in rows.iter().enumerate() {
            let same = k > 0 && value::compare(&rows[k - 1], v) == Some(Ordering::Equal);
            run = if same { run + 1 } else { 1 };
            let run_start = &rows[k + 1 - run];
            if best.is_none_or(|(_, freq)| run > freq) {
                best = Some((run_start, run));
            }
        }
        Ok(best.map_or(Value::Null, |(v, _)| v.clone()))
    }

    pub(crate) fn hypothetical(rank: HypotheticalRank) -> EvalFn {
        match rank {
            HypotheticalRank::Rank => |a, _| Ok(Value::Int8(i64::try_from(place(a, false)?.0).unwrap_or(i64::MAX))),
            HypotheticalRank::DenseRank => |a, _| Ok(Value::Int8(i64::try_from(dense_place(a)?).unwrap_or(i64::MAX))),
            HypotheticalRank::PercentRank => percent_rank,
            HypotheticalRank::CumeDist => cume_dist,
        }
    }

    #[allow(clippy::cast_precision_loss)]
    fn percent_rank(args: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
        let (rank, rows) = place(args, false)?;
        if rows == 0 {
            return Ok(Value::Float8(0.0));
        }
        Ok(Value::Float8((rank - 1) as f64 / rows as f64))
    }

    #[allow(clippy::cast_precision_loss)]
    fn cume_dist(args: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
        let (rank, rows) = place(args, true)?;
        Ok(Value::Float8(rank as f64 / (rows + 1) as f64))
    }

    /// The hypothetical row (the direct arguments) against a sorted row: its order.
    fn against(args: &[Value], row: &Value) -> Result<Ordering> {
        let (Some(Value::Array(flags)), Value::Array(keys)) = (args.last(), row) else {
            return Err(SqlError::new("XX000", "a hypothetical-set aggregate without its rows"));
        };
        let direct = &args[1..args.len() - 1];
        for (k, (d, x)) in direct.iter().zip(keys).enumerate() {
            let flag = |i: usize| matches!(flags.get(2 * k + i), Some(Value::Bool(true)));
            let o = crate::exec::select::sort_key_cmp(d, x, flag(0), flag(1));
            if o != Ordering::Equal {
                return Ok(o);
            }
        }
        Ok(Ordering::Equal)
    }

    /// hypothetical_rank_common: 1 + the rows sorted before the hypothetical
    /// row, which goes before its peers (after them with `after_peers`), and
    /// the number of rows.
    fn place(args: &[Value], after_peers: bool) -> Result<(usize, usize)> {
        let rows = sorted(args);
        let mut before = 0;
        for row in rows {
            match against(args, row)? {
                Ordering::Greater => before += 1,
                Ordering::Equal if after_peers => before += 1,
                _ => {}
            }
        }
        Ok((before + 1, rows.len()))
    }

    /// hypothetical_dense_rank_final: 1 + the distinct rows before it.
    fn dense_place(args: &[Value]) -> Result<usize> {
        let rows = sorted(args);
        let mut distinct_before = 0;
        let mut previous: Option<&Value> = None;
        for row in rows {
            if against(args, row)? != Ordering::Greater {
                break;
            }
            let peer = previous.is_some_and(|p| rows_equal(p, row));
            if !peer {
                distinct_before += 1;
            }
            previous = Some(row);
        }
        Ok(distinct_before + 1)
    }

    /// Two sorted rows are peers: every key equal, NULL equal to NULL.
    fn rows_equal(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Array(x), Value::Array(y)) => x.iter().zip(y).all(|(p, q)| match (p.is_null(), q.is_null()) {
                (true, true) => true,
                (false, false) => value::compare(p, q) == Some(Ordering::Equal),
                _ => false,
            }),
            _ => false,
        }
    }
}
