//! Window functions over the rows of a query.

use std::cmp::Ordering;

use pgtier_engine::Value;

use super::Exec;
use super::aggregate::{accumulate, finish, new_acc};
use super::select::sort_key_cmp;
use crate::error::{Result, SqlError};
use crate::expr::Env;
use crate::plan::{WindowCall, WindowFunc};

impl Exec<'_> {
    /// Appends each window function's value to every row. A partition is
    /// the rows with equal PARTITION BY values (NULLs together); the frame
    /// is PostgreSQL's default: from the partition's start to the current
    /// row's last peer (rows equal in every ORDER BY key), so without ORDER
    /// BY an aggregate covers the whole partition.
    pub(super) fn apply_windows(&mut self, windows: &[WindowCall], env: &Env<'_>, mut rows: Vec<Vec<Value>>) -> Result<Vec<Vec<Value>>> {
        let n = rows.len();
        let mut columns: Vec<Vec<Value>> = Vec::with_capacity(windows.len());
        for w in windows {
            let mut keys: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(n);
            for r in &rows {
                let mut p = Vec::with_capacity(w.partition.len());
                for e in &w.partition {
                    p.push(e.eval(env, self, r)?);
                }
                let mut o = Vec::with_capacity(w.order.len());
                for (e, _, _) in &w.order {
                    o.push(e.eval(env, self, r)?);
                }
                keys.push((p, o));
            }
            let same_partition = |a: usize, b: usize| keys[a].0.iter().zip(&keys[b].0).all(|(x, y)| sort_key_cmp(x, y, false, false) == Ordering::Equal);
            let order_cmp = |a: usize, b: usize| {
                for ((x, y), (_, desc, nulls_first)) in keys[a].1.iter().zip(&keys[b].1).zip(&w.order) {
                    let o = sort_key_cmp(x, y, *desc, *nulls_first);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            };
            let mut order: Vec<usize> = (0..n).collect();
            // As ORDER BY's sort: once interrupted, Equal to the end.
            let interrupt = &mut self.interrupt;
            let mut stopped = Ok(());
            order.sort_by(|&a, &b| {
                if stopped.is_err() {
                    return Ordering::Equal;
                }
                stopped = interrupt.tick();
                for (x, y) in keys[a].0.iter().zip(&keys[b].0) {
                    let o = sort_key_cmp(x, y, false, false);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                order_cmp(a, b)
            });
            stopped?;
            let mut out = vec![Value::Null; n];
            let mut start = 0;
            while start < n {
                let mut end = start + 1;
                while end < n && same_partition(order[start], order[end]) {
                    end += 1;
                }
                let mut acc = match &w.func {
                    WindowFunc::Agg(call) => Some(new_acc(call)),
                    _ => None,
                };
                // The value a lag/lead/first_value/last_value reads, for
                // each row of the partition in window order.
                let mut values = Vec::new();
                if let WindowFunc::Shift { value: e, .. } | WindowFunc::FirstValue(e) | WindowFunc::LastValue(e) = &w.func {
                    for &r in &order[start..end] {
                        values.push(e.eval(env, self, &rows[r])?);
                    }
                }
                #[allow(clippy::cast_precision_loss)]
                let len = (end - start) as f64;
                let (mut peers_start, mut dense) = (start, 0i64);
                while peers_start < end {
                    let mut peers_end = peers_start + 1;
                    while peers_end < end && order_cmp(order[peers_start], order[peers_end]) == Ordering::Equal {
                        peers_end += 1;
                    }
                    dense += 1;
                    let aggregate = match (&w.func, acc.as_mut()) {
                        (WindowFunc::Agg(call), Some(acc)) => {
                            for &r in &order[peers_start..peers_end] {
                                if let Some(f) = &call.filter
                                    && f.eval_bool(env, self, &rows[r])? != Some(true)
                                {
                                    continue;
                                }
                                let v = match &call.arg {
                                    Some(e) => Some(e.eval(env, self, &rows[r])?),
                                    None => None,
                                };
                                accumulate(acc, call, v)?;
                            }
                            finish(acc.clone(), call)?
                        }
                        _ => Value::Null,
                    };
                    for (k, &r) in order[peers_start..peers_end].iter().enumerate() {
                        let position = |at: usize| Value::Int8(i64::try_from(at - start + 1).unwrap_or(i64::MAX));
                        let at = peers_start + k - start;
                        #[allow(clippy::cast_precision_loss)]
                        let v = match &w.func {
                            WindowFunc::RowNumber => position(peers_start + k),
                            WindowFunc::Rank => position(peers_start),
                            WindowFunc::DenseRank => Value::Int8(dense),
                            WindowFunc::Agg(_) => aggregate.clone(),
                            WindowFunc::PercentRank => Value::Float8(if end - start == 1 { 0.0 } else { (peers_start - start) as f64 / (len - 1.0) }),
                            WindowFunc::CumeDist => Value::Float8((peers_end - start) as f64 / len),
                            WindowFunc::Ntile(n) => ntile(n.eval(env, self, &rows[r])?, at, end - start)?,
                            WindowFunc::Shift { offset, default, lead, .. } => {
                                let off = match offset {
                                    Some(e) => match e.eval(env, self, &rows[r])?.as_i64() {
                                        Some(o) => o,
                                        None => {
                                            out[r] = Value::Null;
                                            continue;
                                        }
                                    },
                                    None => 1,
                                };
                                let target = if *lead { i64::try_from(at).ok().and_then(|a| a.checked_add(off)) } else { i64::try_from(at).ok().and_then(|a| a.checked_sub(off)) };
                                match target.and_then(|t| usize::try_from(t).ok()).and_then(|t| values.get(t)) {
                                    Some(v) => v.clone(),
                                    None => match default {
                                        Some(d) => d.eval(env, self, &rows[r])?,
                                        None => Value::Null,
                                    },
                                }
                            }
                            WindowFunc::FirstValue(_) => values.first().cloned().unwrap_or(Value::Null),
                            WindowFunc::LastValue(_) => values.get(peers_end - 1 - start).cloned().unwrap_or(Value::Null),
                        };
                        out[r] = v;
                    }
                    peers_start = peers_end;
                }
                start = end;
            }
            columns.push(out);
        }
        for (r, row) in rows.iter_mut().enumerate() {
            for c in &mut columns {
                row.push(std::mem::replace(&mut c[r], Value::Null));
            }
        }
        Ok(rows)
    }
}

/// ntile(n) for the row at `at` (0-based) of a partition of `len` rows:
/// n buckets, the first `len % n` one row larger (PostgreSQL's split).
fn ntile(n: Value, at: usize, len: usize) -> Result<Value> {
    let Some(n) = n.as_i64() else { return Ok(Value::Null) };
    let n = usize::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| SqlError::new("22014", "argument of ntile must be greater than zero"))?;
    let (size, larger) = (len / n, len % n);
    let bucket = if size == 0 {
        at
    } else if at < larger * (size + 1) {
        at / (size + 1)
    } else {
        larger + (at - larger * (size + 1)) / size
    };
    Ok(Value::Int4(i32::try_from(bucket + 1).unwrap_or(i32::MAX)))
}
