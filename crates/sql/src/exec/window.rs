//! Window functions over the rows of a query.

use std::cmp::Ordering;

use pgtier_engine::Value;

use super::Exec;
use super::select::sort_key_cmp;
use super::window_frame::{
    AggInput, Offsets, Peers, RangeKeys, Seek, check_chosen_rows, frame_aggregate, frame_bounds, frame_positions,
    peer_closed, unordered_peers,
};
use crate::error::{Result, SqlError};
use crate::expr::{Env, Expr};
use crate::plan::{FrameBound, FrameUnits, WindowCall, WindowFrame, WindowFunc};

/// A row's PARTITION BY values and ORDER BY values.
type Keys = (Vec<Value>, Vec<Value>);

impl Exec<'_> {
    /// Appends each window function's value to every row. A partition is
    /// the rows with equal PARTITION BY values (NULLs together), in ORDER
    /// BY order; peers are rows equal in every ORDER BY key. The rank-like
    /// functions, lag, lead and ntile read the partition; aggregates and
    /// first/last/nth_value read each row's frame (window_frame.rs).
    pub(super) fn apply_windows(
        &mut self,
        windows: &[WindowCall],
        env: &Env<'_>,
        mut rows: Vec<Vec<Value>>,
    ) -> Result<Vec<Vec<Value>>> {
        let n = rows.len();
        let mut columns: Vec<Vec<Value>> = Vec::with_capacity(windows.len());
        let output_window = output_order(windows);
        let mut output: Option<Vec<usize>> = None;
        for (k, w) in windows.iter().enumerate() {
            // Evaluated once, before any row, as PostgreSQL does (so also
            // over no rows).
            let offsets = self.frame_offsets(&w.frame, env)?;
            let mut keys: Vec<Keys> = Vec::with_capacity(n);
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
                order_cmp(w, &keys, a, b)
            });
            stopped?;
            let same_partition = |a: usize, b: usize| {
                keys[a].0.iter().zip(&keys[b].0).all(|(x, y)| sort_key_cmp(x, y, false, false) == Ordering::Equal)
            };
            let mut out = vec![Value::Null; n];
            let mut start = 0;
            while start < n {
                let mut end = start + 1;
                while end < n && same_partition(order[start], order[end]) {
                    end += 1;
                }
                self.partition(w, &offsets, env, &rows, &keys, &order[start..end], &mut out)?;
                start = end;
            }
            columns.push(out);
            if output_window == Some(k) {
                output = Some(order);
            }
        }
        for (r, row) in rows.iter_mut().enumerate() {
            for c in &mut columns {
                row.push(std::mem::replace(&mut c[r], Value::Null));
            }
        }
        Ok(match output {
            Some(order) => {
                let mut slots: Vec<Option<Vec<Value>>> = rows.into_iter().map(Some).collect();
                order.into_iter().filter_map(|r| slots[r].take()).collect()
            }
            None => rows,
        })
    }

    /// The frame's offsets (calculate_frame_offsets): NULL is 22004; a
    /// negative ROWS or GROUPS offset 22013 (a RANGE one is checked by
    /// in_range, when a frame is computed).
    fn frame_offsets(&mut self, frame: &WindowFrame, env: &Env<'_>) -> Result<Offsets> {
        let mut eval = |bound: &FrameBound, which: &str| -> Result<Value> {
            let (FrameBound::Preceding(e) | FrameBound::Following(e)) = bound else { return Ok(Value::Null) };
            let v = e.eval(env, self, &[])?;
            if v.is_null() {
                return Err(SqlError::new("22004", format!("frame {which} offset must not be null")));
            }
            if frame.units != FrameUnits::Range && v.as_i64().is_some_and(|o| o < 0) {
                return Err(SqlError::new("22013", format!("frame {which} offset must not be negative")));
            }
            Ok(v)
        };
        let start = eval(&frame.start, "starting")?;
        let end = eval(&frame.end, "ending")?;
        Ok(Offsets { start, end })
    }

    /// One partition's values of `w`, into `out` at the rows' positions.
    #[allow(clippy::too_many_arguments)]
    fn partition(
        &mut self,
        w: &WindowCall,
        offsets: &Offsets,
        env: &Env<'_>,
        rows: &[Vec<Value>],
        keys: &[Keys],
        part: &[usize],
        out: &mut [Value],
    ) -> Result<()> {
        let len = part.len();
        let peers = Peers::new(len, |a, b| order_cmp(w, keys, part[a], part[b]) == Ordering::Equal);
        // RANGE with an offset finds every row's frame whatever the
        // function (PostgreSQL keeps its frame pointers up to date), so an
        // offset in_range refuses fails any function over it.
        if w.func.uses_frame() || w.frame.range.is_some() {
            let range = w.frame.range.map(|_| RangeKeys {
                values: part.iter().map(|&r| &keys[r].1[0]).collect(),
                desc: w.order[0].1,
                nulls_first: w.order[0].2,
            });
            let bounds = frame_bounds(&w.frame, offsets, &peers, range.as_ref())?;
            // Peers that are whole-row duplicates cannot be told apart, so
            // their order cannot change the answer.
            let ordered = peer_closed(&w.frame)
                || (0..len).all(|i| peers.start(i) == i || rows[part[i]] == rows[part[peers.start(i)]]);
            let values = match &w.func {
                WindowFunc::Agg(call) => {
                    let mut inputs: Vec<AggInput> = Vec::with_capacity(len);
                    for &r in part {
                        if let Some(f) = &call.filter
                            && f.eval_bool(env, self, &rows[r])? != Some(true)
                        {
                            inputs.push(None);
                            continue;
                        }
                        inputs.push(Some(match &call.arg {
                            Some(e) => Some(e.eval(env, self, &rows[r])?),
                            None => None,
                        }));
                    }
                    if !ordered {
                        return Err(unordered_peers());
                    }
                    frame_aggregate(call, &inputs, &bounds, w.frame.exclude, &peers, &mut self.interrupt)?
                }
                WindowFunc::FirstValue(e) | WindowFunc::LastValue(e) | WindowFunc::NthValue(e, _) => {
                    let mut values = Vec::with_capacity(len);
                    for &r in part {
                        values.push(e.eval(env, self, &rows[r])?);
                    }
                    let seek = match &w.func {
                        WindowFunc::FirstValue(_) => Seek::First,
                        WindowFunc::LastValue(_) => Seek::Last,
                        _ => {
                            let WindowFunc::NthValue(_, n) = &w.func else {
                                return Err(SqlError::new("XX000", "nth_value without n"));
                            };
                            let mut ns = Vec::with_capacity(len);
                            for &r in part {
                                ns.push(n.eval(env, self, &rows[r])?.as_i64());
                            }
                            Seek::Nth(ns)
                        }
                    };
                    let chosen = frame_positions(&seek, &bounds, w.frame.exclude, &peers)?;
                    check_chosen_rows(&chosen, &values, &peers, ordered)?;
                    chosen.into_iter().map(|p| p.map_or(Value::Null, |p| values[p].clone())).collect()
                }
                _ => {
                    // Not a frame function: the frame was only checked; the
                    // partition's values follow.
                    return self.partition_values(w, env, rows, part, &peers, out);
                }
            };
            for (&r, v) in part.iter().zip(values) {
                out[r] = v;
            }
            return Ok(());
        }
        self.partition_values(w, env, rows, part, &peers, out)
    }

    /// The rank-like functions, lag, lead and ntile over one partition.
    fn partition_values(
        &mut self,
        w: &WindowCall,
        env: &Env<'_>,
        rows: &[Vec<Value>],
        part: &[usize],
        peers: &Peers,
        out: &mut [Value],
    ) -> Result<()> {
        let len = part.len();
        // The value a lag/lead reads, for each row of the partition in window order.
        let mut values = Vec::new();
        if let WindowFunc::Shift { value: e, .. } = &w.func {
            for &r in part {
                values.push(e.eval(env, self, &rows[r])?);
            }
        }
        #[allow(clippy::cast_precision_loss)]
        let size = len as f64;
        let position = |at: usize| Value::Int8(i64::try_from(at + 1).unwrap_or(i64::MAX));
        for (at, &r) in part.iter().enumerate() {
            #[allow(clippy::cast_precision_loss)]
            let v = match &w.func {
                WindowFunc::RowNumber => position(at),
                WindowFunc::Rank => position(peers.start(at)),
                WindowFunc::DenseRank => Value::Int8(i64::try_from(peers.number(at)).unwrap_or(i64::MAX)),
                WindowFunc::PercentRank => {
                    Value::Float8(if len == 1 { 0.0 } else { peers.start(at) as f64 / (size - 1.0) })
                }
                WindowFunc::CumeDist => Value::Float8(peers.end(at) as f64 / size),
                WindowFunc::Ntile(n) => ntile(n.eval(env, self, &rows[r])?, at, len)?,
                WindowFunc::Shift { offset, default, lead, .. } => {
                    let off = match offset {
                        Some(e) => e.eval(env, self, &rows[r])?.as_i64(),
                        None => Some(1),
                    };
                    let Some(off) = off else {
                        out[r] = Value::Null;
                        continue;
                    };
                    let target = if *lead {
                        i64::try_from(at).ok().and_then(|a| a.checked_add(off))
                    } else {
                        i64::try_from(at).ok().and_then(|a| a.checked_sub(off))
                    };
                    match target.and_then(|t| usize::try_from(t).ok()).and_then(|t| values.get(t)) {
                        Some(v) => v.clone(),
                        None => match default {
                            Some(d) => d.eval(env, self, &rows[r])?,
                            None => Value::Null,
                        },
                    }
                }
                WindowFunc::Agg(_)
                | WindowFunc::FirstValue(_)
                | WindowFunc::LastValue(_)
                | WindowFunc::NthValue(..) => Value::Null,
            };
            out[r] = v;
        }
        // A window without PARTITION BY or ORDER BY is not sorted: its
        // rows come in the input's order, in PostgreSQL too.
        let sorted = !w.partition.is_empty() || !w.order.is_empty();
        if sorted
            && matches!(w.func, WindowFunc::RowNumber | WindowFunc::Ntile(_))
            && !peer_order_free(rows, part, peers, out)
        {
            return Err(SqlError::unsupported(
                "a window function whose result depends on the order of rows its window's ORDER BY leaves tied",
            ));
        }
        Ok(())
    }
}

/// Whether row_number or ntile gave peers answers no other order of them
/// would change. PostgreSQL orders peers as its sort leaves them (its
/// input order, which pgtier's plans do not reproduce), so the answer must
/// not depend on it: peers that are whole-row duplicates cannot be told
/// apart; otherwise every peer must have got the same answer. (lag and
/// lead are left alone: their peers usually differ only in columns the
/// query does not return, which this operator cannot see.)
fn peer_order_free(rows: &[Vec<Value>], part: &[usize], peers: &Peers, out: &[Value]) -> bool {
    let tied = |i: usize| peers.start(i) != i && rows[part[i]] != rows[part[peers.start(i)]];
    (0..part.len()).all(|i| !tied(i) || out[part[i]] == out[part[peers.start(i)]])
}

/// The window whose sort the rows leave in, as PostgreSQL's: it sorts
/// once for windows whose PARTITION BY and ORDER BY keys are each a prefix
/// of the longest's (select_active_windows puts the longest first), and
/// its WindowAgg nodes pass rows on in that order, the query's when it has
/// no ORDER BY of its own. None (the input's order) when no window sorts
/// or two need different sorts (PostgreSQL's order of those sorts is left
/// alone).
fn output_order(windows: &[WindowCall]) -> Option<usize> {
    fn keys(w: &WindowCall) -> Vec<(&Expr, bool, bool)> {
        w.partition.iter().map(|e| (e, false, false)).chain(w.order.iter().map(|(e, d, n)| (e, *d, *n))).collect()
    }
    let (longest, _) = windows.iter().enumerate().max_by_key(|(_, w)| w.partition.len() + w.order.len())?;
    let all = keys(&windows[longest]);
    if all.is_empty() {
        return None;
    }
    windows.iter().all(|w| all.starts_with(&keys(w))).then_some(longest)
}

/// The window's ORDER BY comparison of rows `a` and `b`.
fn order_cmp(w: &WindowCall, keys: &[Keys], a: usize, b: usize) -> Ordering {
    for ((x, y), (_, desc, nulls_first)) in keys[a].1.iter().zip(&keys[b].1).zip(&w.order) {
        let o = sort_key_cmp(x, y, *desc, *nulls_first);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// ntile(n) for the row at `at` (0-based) of a partition of `len` rows:
/// n buckets, the first `len % n` one row larger (PostgreSQL's split).
fn ntile(n: Value, at: usize, len: usize) -> Result<Value> {
    let Some(n) = n.as_i64() else { return Ok(Value::Null) };
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| SqlError::new("22014", "argument of ntile must be greater than zero"))?;
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
