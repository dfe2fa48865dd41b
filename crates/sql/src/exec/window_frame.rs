//! Window frames: which rows of its partition each row's frame holds, and
//! the frame functions (aggregates, first_value, last_value, nth_value)
//! over them, as PostgreSQL's nodeWindowAgg.c computes them.
//!
//! Frame heads and tails only move forward as the current row does (every
//! frame PostgreSQL accepts is such), so [`frame_bounds`] finds them with
//! pointers that only advance, PostgreSQL's own scans: O(n) per partition
//! plus one in_range call per step for RANGE with an offset.
//!
//! Aggregates (eval_windowaggregates): rows entering the frame are
//! accumulated; rows leaving it are taken out by an inverse where the
//! result cannot tell (count, and sum/avg of integer values), else the
//! aggregate restarts from the new head, which is PostgreSQL's rule and
//! keeps float sums in its order. min/max/bool_and/bool_or keep a
//! monotone deque of the frame's candidates instead (O(n); PostgreSQL
//! restarts). An EXCLUDE clause recomputes each row's frame. So a sliding
//! frame costs O(n) for count/sum/avg of integers and min/max, and
//! O(n × frame width) otherwise, ticking the statement's interrupt as it goes.
//!
//! PostgreSQL leaves peers (rows equal in the window's ORDER BY) in the
//! order its sort finds them, which follows its heap order; pgtier's scans
//! do not reproduce it. An answer that depends on that order is refused
//! (0A000, [`unordered_peers`]): a frame that cuts through peer groups (ROWS
//! with CURRENT ROW or an offset) over peers that differ, and a
//! first/last/nth_value row chosen among peers that hold other values.

use std::cmp::Ordering;
use std::collections::VecDeque;

use pgtier_engine::{DataType, Value};

use super::Interrupt;
use super::aggregate::{Acc, accumulate, finish, new_acc};
use crate::error::{Result, SqlError};
use crate::plan::{AggCall, AggFunc, FrameBound, FrameExclude, FrameUnits, RangeOffset, WindowFrame};
use crate::value::{self, ArithOp};

/// Peer groups of a partition's rows in window order: rows equal in every
/// ORDER BY key (all of them without ORDER BY).
pub(super) struct Peers {
    /// Per row: its group's first row, one past its last, and its number.
    start: Vec<usize>,
    end: Vec<usize>,
    group: Vec<usize>,
}

impl Peers {
    pub(super) fn new(len: usize, mut peers: impl FnMut(usize, usize) -> bool) -> Peers {
        let (mut start, mut group) = (Vec::with_capacity(len), Vec::with_capacity(len));
        for i in 0..len {
            if i > 0 && peers(i - 1, i) {
                start.push(start[i - 1]);
                group.push(group[i - 1]);
            } else {
                start.push(i);
                group.push(group.last().map_or(0, |g| g + 1));
            }
        }
        let mut end = vec![len; len];
        for i in (0..len.saturating_sub(1)).rev() {
            end[i] = if group[i + 1] == group[i] { end[i + 1] } else { i + 1 };
        }
        Peers { start, end, group }
    }

    pub(super) fn start(&self, i: usize) -> usize {
        self.start[i]
    }

    pub(super) fn end(&self, i: usize) -> usize {
        self.end[i]
    }

    /// 1-based number of the peer group (dense_rank).
    pub(super) fn number(&self, i: usize) -> usize {
        self.group[i] + 1
    }
}

/// The frame's offsets, evaluated once per statement; ROWS and GROUPS
/// offsets are bigints.
pub(super) struct Offsets {
    pub(super) start: Value,
    pub(super) end: Value,
}

/// For RANGE with an offset: the ORDER BY column's value per row and its
/// direction.
pub(super) struct RangeKeys<'a> {
    pub(super) values: Vec<&'a Value>,
    pub(super) desc: bool,
    pub(super) nulls_first: bool,
}

/// Each row's frame as `[head, tail)` positions in the partition, before
/// any exclusion; tail may lie before head (an empty frame).
pub(super) fn frame_bounds(
    frame: &WindowFrame,
    offsets: &Offsets,
    peers: &Peers,
    range: Option<&RangeKeys<'_>>,
) -> Result<Vec<(usize, usize)>> {
    let n = peers.group.len();
    let as_i128 = |v: &Value| i128::from(v.as_i64().unwrap_or(0));
    let clamp = |x: i128| usize::try_from(x.clamp(0, n as i128)).unwrap_or(n);
    let mut out = Vec::with_capacity(n);
    let (mut head, mut tail) = (0usize, 0usize);
    for cur in 0..n {
        let current_group = peers.group[cur] as i128;
        head = match &frame.start {
            FrameBound::UnboundedPreceding => 0,
            FrameBound::CurrentRow if frame.units == FrameUnits::Rows => cur,
            FrameBound::CurrentRow => peers.start[cur],
            FrameBound::UnboundedFollowing => n,
            FrameBound::Preceding(_) | FrameBound::Following(_) => {
                let preceding = matches!(frame.start, FrameBound::Preceding(_));
                let off = if preceding { -as_i128(&offsets.start) } else { as_i128(&offsets.start) };
                match (frame.units, frame.range, range) {
                    (FrameUnits::Rows, ..) => clamp(cur as i128 + off),
                    (FrameUnits::Groups, ..) => {
                        while head < n && (peers.group[head] as i128) < current_group + off {
                            head += 1;
                        }
                        head
                    }
                    (FrameUnits::Range, Some(kind), Some(keys)) => {
                        // update_frameheadpos: the first row at or after the
                        // last head that is in range of the current row.
                        let (sub, less) = if keys.desc { (!preceding, true) } else { (preceding, false) };
                        let current = keys.values[cur];
                        while head < n {
                            let v = keys.values[head];
                            let found = if v.is_null() || current.is_null() {
                                if keys.nulls_first {
                                    !v.is_null() || current.is_null()
                                } else {
                                    v.is_null() || !current.is_null()
                                }
                            } else {
                                in_range(kind, v, current, &offsets.start, sub, less)?
                            };
                            if found {
                                break;
                            }
                            head += 1;
                        }
                        head
                    }
                    _ => return Err(SqlError::new("XX000", "RANGE offset without its ORDER BY column")),
                }
            }
        };
        tail = match &frame.end {
            FrameBound::UnboundedFollowing => n,
            FrameBound::CurrentRow if frame.units == FrameUnits::Rows => cur + 1,
            FrameBound::CurrentRow => peers.end[cur],
            FrameBound::UnboundedPreceding => 0,
            FrameBound::Preceding(_) | FrameBound::Following(_) => {
                let preceding = matches!(frame.end, FrameBound::Preceding(_));
                let off = if preceding { -as_i128(&offsets.end) } else { as_i128(&offsets.end) };
                match (frame.units, frame.range, range) {
                    (FrameUnits::Rows, ..) => clamp(cur as i128 + off + 1),
                    (FrameUnits::Groups, ..) => {
                        while tail < n && (peers.group[tail] as i128) <= current_group + off {
                            tail += 1;
                        }
                        tail
                    }
                    (FrameUnits::Range, Some(kind), Some(keys)) => {
                        // update_frametailpos: past the last row in range.
                        let (sub, less) = if keys.desc { (!preceding, false) } else { (preceding, true) };
                        let current = keys.values[cur];
                        while tail < n {
                            let v = keys.values[tail];
                            let past = if v.is_null() || current.is_null() {
                                if keys.nulls_first { !v.is_null() } else { !current.is_null() }
                            } else {
                                !in_range(kind, v, current, &offsets.end, sub, less)?
                            };
                            if past {
                                break;
                            }
                            tail += 1;
                        }
                        tail
                    }
                    _ => return Err(SqlError::new("XX000", "RANGE offset without its ORDER BY column")),
                }
            }
        };
        out.push((head, tail));
    }
    Ok(out)
}

fn bad_offset() -> SqlError {
    SqlError::new("22013", "invalid preceding or following size in window function")
}

/// in_range_numeric_numeric: NaN sorts after everything and equals
/// itself; an infinite offset or value is decided without the sum (whose
/// +inf - inf would be NaN); a NaN, -Infinity or negative offset is 22013.
fn in_range_numeric(val: &Value, base: &Value, offset: &Value, sub: bool, less: bool) -> Result<bool> {
    use value::Dec;
    let special = |v: &Value| match Dec::of(v) {
        Some(Dec::NaN) => Some(None),
        Some(Dec::Inf { negative }) => Some(Some(negative)),
        _ => None,
    };
    let (v, b, off) = (special(val), special(base), special(offset));
    if matches!(off, Some(None | Some(true))) || value::compare(offset, &Value::Int4(0)) == Some(Ordering::Less) {
        return Err(bad_offset());
    }
    const NAN: Option<Option<bool>> = Some(None);
    const PINF: Option<Option<bool>> = Some(Some(false));
    const NINF: Option<Option<bool>> = Some(Some(true));
    Ok(if v == NAN {
        b == NAN || !less
    } else if b == NAN {
        less
    } else if off == PINF {
        if (sub && b == PINF) || (!sub && b == NINF) {
            true
        } else if sub {
            !less || v == NINF
        } else {
            less || v == PINF
        }
    } else if v.is_some() || b.is_some() {
        if v == PINF {
            b == PINF || !less
        } else if b == PINF {
            less
        } else if v == NINF {
            b == NINF || less
        } else {
            !less
        }
    } else {
        let sum = value::arith(if sub { ArithOp::Sub } else { ArithOp::Add }, base, offset, value::NUMERIC_ANY)?;
        let o = value::compare(val, &sum).unwrap_or(Ordering::Equal);
        if less { o != Ordering::Greater } else { o != Ordering::Less }
    })
}

/// PostgreSQL's in_range(val, base, offset, sub, less): whether `val` is
/// at most (`less`) or at least `base` minus (`sub`) or plus `offset`.
fn in_range(kind: RangeOffset, val: &Value, base: &Value, offset: &Value, sub: bool, less: bool) -> Result<bool> {
    let holds = |o: Ordering| if less { o != Ordering::Greater } else { o != Ordering::Less };
    let interval = |v: &Value| match v {
        Value::Interval(iv) => Ok(*iv),
        _ => Err(SqlError::new("XX000", "a RANGE offset that is not an interval")),
    };
    match kind {
        RangeOffset::Integer => {
            let off = i128::from(offset.as_i64().unwrap_or(0));
            if off < 0 {
                return Err(bad_offset());
            }
            let (v, b) = (i128::from(val.as_i64().unwrap_or(0)), i128::from(base.as_i64().unwrap_or(0)));
            Ok(holds(v.cmp(&if sub { b - off } else { b + off })))
        }
        RangeOffset::Numeric => in_range_numeric(val, base, offset, sub, less),
        RangeOffset::Float => {
            let (v, b, off) = (
                value::to_f64(val).unwrap_or(0.0),
                value::to_f64(base).unwrap_or(0.0),
                value::to_f64(offset).unwrap_or(0.0),
            );
            if off.is_nan() || off < 0.0 {
                return Err(bad_offset());
            }
            // NaN sorts after every other value; +inf infinitely precedes
            // +inf and -inf infinitely follows -inf (in_range_float8_float8).
            if v.is_nan() {
                return Ok(b.is_nan() || !less);
            }
            if b.is_nan() {
                return Ok(less);
            }
            if off.is_infinite() && b.is_infinite() && (if sub { b > 0.0 } else { b < 0.0 }) {
                return Ok(true);
            }
            let sum = if sub { b - off } else { b + off };
            Ok(if less { v <= sum } else { v >= sum })
        }
        RangeOffset::Date | RangeOffset::Timestamp | RangeOffset::TimestampTz => {
            if interval(offset)?.span() < 0 {
                return Err(bad_offset());
            }
            // in_range_date_interval compares the dates as timestamps.
            let stamp = |v: &Value| match v {
                Value::Date(d) => value::date_micros(*d).map(Value::Timestamp),
                other => Ok(other.clone()),
            };
            let ty =
                if kind == RangeOffset::TimestampTz { DataType::TimestampTz(None) } else { DataType::Timestamp(None) };
            let sum = crate::value::interval::arith(
                if sub { ArithOp::Sub } else { ArithOp::Add },
                &stamp(base)?,
                offset,
                ty,
            )?;
            Ok(holds(value::compare(&stamp(val)?, &sum).unwrap_or(Ordering::Equal)))
        }
        RangeOffset::Time => {
            // The month and day fields are disregarded, and the sum does
            // not wrap around midnight (in_range_time_interval).
            let micros = i128::from(interval(offset)?.micros);
            if micros < 0 {
                return Err(bad_offset());
            }
            let time = |v: &Value| if let Value::Time(t) = v { i128::from(*t) } else { 0 };
            let sum = if sub { time(base) - micros } else { time(base) + micros };
            Ok(holds(time(val).cmp(&sum)))
        }
        RangeOffset::TimeTz => {
            // The base's zone, and no wrap around midnight (in_range_timetz_interval).
            let micros = interval(offset)?.micros;
            if micros < 0 {
                return Err(bad_offset());
            }
            let Value::TimeTz(t, zone) = base else { return Ok(false) };
            let sum = if sub { t.saturating_sub(micros) } else { t.saturating_add(micros) };
            Ok(holds(value::compare(val, &Value::TimeTz(sum, *zone)).unwrap_or(Ordering::Equal)))
        }
        RangeOffset::Interval => {
            let off = interval(offset)?;
            if off.span() < 0 {
                return Err(bad_offset());
            }
            let off = if sub { crate::value::interval::negate(off)? } else { off };
            let sum = crate::value::interval::add(interval(base)?, off)?;
            Ok(holds(value::compare(val, &Value::Interval(sum)).unwrap_or(Ordering::Equal)))
        }
    }
}

/// Whether position `pos` of the partition is excluded from the frame of
/// the row at `cur`.
fn excluded(exclude: FrameExclude, peers: &Peers, cur: usize, pos: usize) -> bool {
    match exclude {
        FrameExclude::NoOthers => false,
        FrameExclude::CurrentRow => pos == cur,
        FrameExclude::Group => (peers.start[cur]..peers.end[cur]).contains(&pos),
        FrameExclude::Ties => pos != cur && (peers.start[cur]..peers.end[cur]).contains(&pos),
    }
}

/// One row's input to a window aggregate: None when its FILTER drops it,
/// else the argument (None for count(*)).
pub(super) type AggInput = Option<Option<Value>>;

/// An aggregate's value over each row's frame.
pub(super) fn frame_aggregate(
    call: &AggCall,
    inputs: &[AggInput],
    bounds: &[(usize, usize)],
    exclude: FrameExclude,
    peers: &Peers,
    interrupt: &mut Interrupt<'_>,
) -> Result<Vec<Value>> {
    if exclude != FrameExclude::NoOthers {
        let mut out = Vec::with_capacity(bounds.len());
        for (cur, &(head, tail)) in bounds.iter().enumerate() {
            let mut acc = new_acc(call);
            for (pos, input) in inputs.iter().enumerate().take(tail).skip(head) {
                interrupt.tick()?;
                if let Some(v) = input
                    && !excluded(exclude, peers, cur, pos)
                {
                    accumulate(&mut acc, call, v.clone())?;
                }
            }
            out.push(finish(acc, call)?);
        }
        return Ok(out);
    }
    if matches!(call.func, AggFunc::Min | AggFunc::Max | AggFunc::BoolAnd | AggFunc::BoolOr) {
        return extremes(call, inputs, bounds);
    }
    let mut out = Vec::with_capacity(bounds.len());
    let mut acc = new_acc(call);
    // Non-NULL values in `acc`: back to none, the aggregate is NULL again.
    let mut held = 0i64;
    let (mut base, mut upto) = (0usize, 0usize);
    for (cur, &(head, tail)) in bounds.iter().enumerate() {
        let mut restart = cur == 0 || upto <= head;
        while !restart && base < head {
            interrupt.tick()?;
            restart = !take_out(&mut acc, &mut held, call, &inputs[base])?;
            base += 1;
        }
        base = head;
        if restart {
            (acc, held, upto) = (new_acc(call), 0, head);
        }
        while upto < tail {
            interrupt.tick()?;
            if let Some(v) = &inputs[upto] {
                held += i64::from(v.as_ref().is_some_and(|x| !x.is_null()));
                accumulate(&mut acc, call, v.clone())?;
            }
            upto += 1;
        }
        out.push(finish(acc.clone(), call)?);
    }
    Ok(out)
}

/// The inverse transition: `input` leaves the frame. False where the
/// result could tell it from a restart (float sums, a numeric's scale, the
/// collecting aggregates): the caller restarts then.
fn take_out(acc: &mut Acc, held: &mut i64, call: &AggCall, input: &AggInput) -> Result<bool> {
    let Some(input) = input else { return Ok(true) };
    if let Acc::Count(n) = acc {
        if input.as_ref().is_none_or(|v| !v.is_null()) {
            *n -= 1;
        }
        return Ok(true);
    }
    let v = match input {
        Some(v) if !v.is_null() => v,
        _ => return Ok(!matches!(acc, Acc::Collect(_) | Acc::Sorted(_))),
    };
    let integer = matches!(v, Value::Int2(_) | Value::Int4(_) | Value::Int8(_));
    match acc {
        Acc::SumInt(Some(s)) => *s -= i128::from(v.as_i64().unwrap_or(0)),
        Acc::SumNum(Some(s)) if integer => *s = value::arith(ArithOp::Sub, s, v, value::NUMERIC_ANY)?,
        Acc::AvgNum(s, c) if integer => {
            *s = value::arith(ArithOp::Sub, s, v, value::NUMERIC_ANY)?;
            *c -= 1;
        }
        _ => return Ok(false),
    }
    *held -= 1;
    if *held == 0 {
        *acc = new_acc(call);
    }
    Ok(true)
}

/// min/max/bool_and/bool_or over sliding frames: a deque of the frame's
/// rows that may still be the answer, best first; of equal values the
/// latest, as PostgreSQL's transition functions keep it.
fn extremes(call: &AggCall, inputs: &[AggInput], bounds: &[(usize, usize)]) -> Result<Vec<Value>> {
    let smallest = matches!(call.func, AggFunc::Min | AggFunc::BoolAnd);
    let value_at = |i: usize| inputs[i].as_ref().and_then(Option::as_ref);
    let mut out = Vec::with_capacity(bounds.len());
    let mut deque: VecDeque<usize> = VecDeque::new();
    let mut upto = 0usize;
    for &(head, tail) in bounds {
        if upto < head {
            deque.clear();
            upto = head;
        }
        while upto < tail {
            if let Some(v) = value_at(upto).filter(|v| !v.is_null()) {
                while let Some(old) = deque.back().and_then(|&b| value_at(b)) {
                    let o = value::compare(v, old).unwrap_or(Ordering::Equal);
                    if (smallest && o == Ordering::Greater) || (!smallest && o == Ordering::Less) {
                        break;
                    }
                    deque.pop_back();
                }
                deque.push_back(upto);
            }
            upto += 1;
        }
        while deque.front().is_some_and(|&f| f < head) {
            deque.pop_front();
        }
        let best = deque.front().filter(|&&f| f < tail).and_then(|&f| value_at(f)).cloned();
        out.push(finish(Acc::Extreme(best), call)?);
    }
    Ok(out)
}

/// first_value, last_value or nth_value.
pub(super) enum Seek {
    First,
    Last,
    /// nth_value's n per row (None: NULL).
    Nth(Vec<Option<i64>>),
}

/// The frame row `seek` names, for each row: PostgreSQL's
/// WinGetFuncArgInFrame (its position arithmetic around an excluded group,
/// then row_is_in_frame); None when that row is not in the frame.
pub(super) fn frame_positions(
    seek: &Seek,
    bounds: &[(usize, usize)],
    exclude: FrameExclude,
    peers: &Peers,
) -> Result<Vec<Option<usize>>> {
    let len = bounds.len();
    let mut out = Vec::with_capacity(len);
    for (cur, &(head, tail)) in bounds.iter().enumerate() {
        let (c, h, t) = (cur as i128, head as i128, tail as i128);
        let (gh, gt) = (peers.start[cur] as i128, peers.end[cur] as i128);
        let pos = match seek {
            Seek::First | Seek::Nth(_) => {
                let rel = match seek {
                    Seek::Nth(ns) => match ns[cur] {
                        None => {
                            out.push(None);
                            continue;
                        }
                        Some(n) if n <= 0 => {
                            return Err(SqlError::new("22016", "argument of nth_value must be greater than zero"));
                        }
                        Some(n) => i128::from(n) - 1,
                    },
                    _ => 0,
                };
                let mut pos = h + rel;
                match exclude {
                    FrameExclude::NoOthers => {}
                    FrameExclude::CurrentRow => {
                        if pos >= c && c >= h {
                            pos += 1;
                        }
                    }
                    FrameExclude::Group | FrameExclude::Ties => {
                        if pos >= gh && gt > h {
                            let overlap_start = gh.max(h);
                            pos = match exclude {
                                FrameExclude::Ties if pos == overlap_start => c,
                                FrameExclude::Ties => pos + gt - overlap_start - 1,
                                _ => pos + gt - overlap_start,
                            };
                        }
                    }
                }
                Some(pos)
            }
            Seek::Last => {
                let mut pos = t - 1;
                match exclude {
                    FrameExclude::NoOthers => {}
                    FrameExclude::CurrentRow => {
                        if pos <= c && c < t {
                            pos -= 1;
                        }
                    }
                    FrameExclude::Group | FrameExclude::Ties => {
                        if pos < gt && gh < t {
                            let overlap_end = gt.min(t);
                            pos = match exclude {
                                FrameExclude::Ties if pos == overlap_end - 1 => c,
                                FrameExclude::Ties => pos - (overlap_end - 1 - gh),
                                _ => pos - (overlap_end - gh),
                            };
                        }
                    }
                }
                (exclude == FrameExclude::NoOthers || pos >= h).then_some(pos)
            }
        };
        let in_frame = pos
            .filter(|&p| p >= h && p < t)
            .and_then(|p| usize::try_from(p).ok())
            .filter(|&p| p < len && !excluded(exclude, peers, cur, p));
        out.push(in_frame);
    }
    Ok(out)
}

/// Whether every frame is a union of whole peer groups (its bounds
/// UNBOUNDED, or CURRENT ROW or an offset in RANGE or GROUPS mode), so
/// that which rows it holds does not depend on how peers are ordered.
pub(super) fn peer_closed(frame: &WindowFrame) -> bool {
    let closed = |b: &FrameBound| {
        matches!(b, FrameBound::UnboundedPreceding | FrameBound::UnboundedFollowing) || frame.units != FrameUnits::Rows
    };
    closed(&frame.start) && closed(&frame.end)
}

/// PostgreSQL orders peers as its sort leaves them (its input order, which
/// pgtier's scans do not reproduce): an answer that depends on that order
/// is refused rather than given differently.
pub(super) fn unordered_peers() -> SqlError {
    SqlError::unsupported(
        "a window frame function whose result depends on the order of rows its window's ORDER BY leaves tied",
    )
}

/// Refuses a frame row chosen among peers that differ in the value read
/// (the current row itself is no choice). `ordered`: the frame is
/// peer-closed or no peers differ.
pub(super) fn check_chosen_rows(
    chosen: &[Option<usize>],
    values: &[Value],
    peers: &Peers,
    ordered: bool,
) -> Result<()> {
    if !ordered {
        return Err(unordered_peers());
    }
    // Per row: whether its peer group holds one value (computed once per
    // group, so a partition of peers costs O(n)).
    let mut uniform = vec![true; values.len()];
    let mut g = 0;
    while g < values.len() {
        let end = peers.end[g];
        let same = values[g..end].iter().all(|v| *v == values[g]);
        uniform[g..end].iter_mut().for_each(|u| *u = same);
        g = end;
    }
    if chosen.iter().enumerate().any(|(cur, p)| p.is_some_and(|p| p != cur && !uniform[p])) {
        return Err(unordered_peers());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::plan::FrameExclude;

    #[test]
    fn peer_groups() {
        let keys = [1, 1, 2, 3, 3, 3];
        let p = Peers::new(keys.len(), |a, b| keys[a] == keys[b]);
        assert_eq!(p.start, vec![0, 0, 2, 3, 3, 3]);
        assert_eq!(p.end, vec![2, 2, 3, 6, 6, 6]);
        assert_eq!(p.group, vec![0, 0, 1, 2, 2, 2]);
        let empty = Peers::new(0, |_, _| true);
        assert!(empty.end.is_empty());
    }

    fn rows_frame(start: FrameBound, end: FrameBound) -> WindowFrame {
        WindowFrame { units: FrameUnits::Rows, start, end, exclude: FrameExclude::NoOthers, range: None }
    }

    #[test]
    fn rows_bounds_clamp_to_the_partition() {
        let peers = Peers::new(4, |_, _| false);
        let frame = rows_frame(
            FrameBound::Preceding(crate::expr::Expr::Const(Value::Int8(1))),
            FrameBound::Following(crate::expr::Expr::Const(Value::Int8(i64::MAX))),
        );
        let offsets = Offsets { start: Value::Int8(1), end: Value::Int8(i64::MAX) };
        assert_eq!(frame_bounds(&frame, &offsets, &peers, None).unwrap(), vec![(0, 4), (0, 4), (1, 4), (2, 4)]);
    }

    #[test]
    fn in_range_integers_do_not_overflow() {
        let max = Value::Int8(i64::MAX);
        assert!(
            in_range(RangeOffset::Integer, &max, &Value::Int8(i64::MAX - 1), &Value::Int8(5), false, true).unwrap()
        );
        assert!(in_range(RangeOffset::Integer, &max, &max, &Value::Int8(-1), false, true).is_err());
    }
}
