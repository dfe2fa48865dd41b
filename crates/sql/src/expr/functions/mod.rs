//! Function calls: the builtin scalar functions (lower, substr, round,
//! now, ...) here, the system functions in [`system`].

mod array;
mod datetime;
mod infinity;
mod interval_fns;
mod math;
mod numeric_wide_fns;
mod regex;
mod strings;
mod system;

use std::cmp::Ordering;

use pgtier_engine::{DataType, Numeric, Value};

use super::{Env, Expr, SubqueryRunner};
use crate::error::{Result, SqlError};
use crate::value::types::{Elem, array_text};
use crate::value::{self, ArithOp, MICROS_PER_DAY};

pub use array::ArrayFunc;
pub use datetime::DateField;
pub use system::{BitOp, SeqFunc, SysFunc, oid_in};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Lower,
    Upper,
    Length,
    /// octet_length(text | bytea), length(bytea): bytes.
    OctetLength,
    /// bytea || bytea.
    ByteaConcat,
    /// pg_sleep(float8): void, printed as an empty text.
    PgSleep,
    Substr,
    Lpad,
    Rpad,
    Abs,
    Round,
    Now,
    Btrim,
    Ltrim,
    Rtrim,
    Mod,
    Ceil,
    Floor,
    Concat,
    Replace,
    Position,
    Greatest,
    Least,
    Repeat,
    SplitPart,
    Left,
    Right,
    Initcap,
    Translate,
    StartsWith,
    /// to_hex of an int4 (false) or int8 (true): two's complement of that width.
    ToHex(bool),
    ConcatWs,
    /// trunc(numeric [, scale]) or trunc(float8).
    Trunc,
    WidthBucket,
    MakeDate,
    SizePretty,
    /// md5 of a text's UTF-8 or of a bytea, as 32 hex digits.
    Md5,
    /// power and sqrt, of float8 or (arguments numeric) of numeric.
    Power,
    Sqrt,
    /// factorial(bigint), a numeric.
    Factorial,
    /// The wall clock now (it changes within a statement, unlike now()).
    ClockTimestamp,
    /// random(): uniform in [0, 1), a new value at every call.
    Random,
    /// gen_random_uuid(): a version 4 uuid, a new one at every call.
    GenRandomUuid,
    /// date_trunc of a timestamp (false) or timestamptz (true) to a unit.
    DateTrunc(DateField, bool),
    /// extract (numeric, true: PostgreSQL 14+) or date_part (float8, false) of a field.
    Extract(DateField, bool),
    Reverse,
    Chr,
    Ascii,
    /// format(template, args...): not strict (a NULL argument prints empty).
    Format,
    /// regexp_replace(s, pattern, replacement [, flags]).
    RegexpReplace,
    /// regexp_match(s, pattern [, flags]): text[].
    RegexpMatch,
    /// regexp_like(s, pattern [, flags]).
    RegexpLike,
    /// substring(s FROM pattern): the first group's match, or the whole match.
    RegexpSubstring,
    /// scale, min_scale, trim_scale of a numeric; float4send / float8send (bytea).
    Scale,
    MinScale,
    TrimScale,
    Float4Send,
    Float8Send,
    /// sinh, cosh, tanh of a float8.
    Sinh,
    Cosh,
    Tanh,
    /// regexp_replace(s, pattern, replacement, start [, n [, flags]]).
    RegexpReplaceAt,
    /// regexp_split_to_array(s, pattern [, flags]): text[].
    RegexpSplitToArray,
    /// regexp_count(s, pattern [, start [, flags]]).
    RegexpCount,
    /// regexp_instr(s, pattern [, start [, n [, endoption [, flags [, subexpr]]]]]).
    RegexpInstr,
    /// regexp_substr(s, pattern [, start [, n [, flags [, subexpr]]]]).
    RegexpSubstr,
    /// cbrt, exp, ln, log10 of a float8.
    Cbrt,
    Exp,
    Ln,
    Log10,
    /// sign of a float8 or numeric.
    Sign,
    /// div(numeric, numeric).
    Div,
    /// gcd / lcm of int4, int8 or numeric.
    Gcd,
    Lcm,
    Pi,
    /// to_char(timestamp | timestamptz, template).
    ToChar,
    /// to_timestamp(double precision).
    ToTimestampEpoch,
    /// to_timestamp(text, template) (false) or to_date (true).
    ToTimestamp(bool),
    /// make_timestamp (false) or make_timestamptz (true).
    MakeTimestamp(bool),
    /// age(timestamp, timestamp) or age(timestamptz, timestamptz) (fields in the session's zone).
    Age,
    /// make_interval(years, months, weeks, days, hours, mins, secs).
    MakeInterval,
    JustifyDays,
    JustifyHours,
    JustifyInterval,
    /// isfinite(date | timestamp | timestamptz | interval).
    IsFinite,
    /// `x AT TIME ZONE zone` (timezone(zone, x)): of a timestamp, its instant
    /// in that zone (true); of a timestamptz, its local time there (false).
    AtTimeZone(bool),
    /// A system function ([`SysFunc`]).
    Sys(SysFunc),
    /// A json / jsonb operator or function (crate::value::json).
    Json(crate::value::json::JsonFunc),
    /// An array function or operator ([`ArrayFunc`]).
    Array(ArrayFunc),
}

/// The second argument's text ("" if it is not text).
fn s1(vals: &[Value]) -> &str {
    vals.get(1).and_then(text_arg).unwrap_or("")
}

/// pg_sleep: waits `secs` (nothing for a negative or NaN value) in short
/// slices, so a cancel or statement_timeout ends it as promptly as in
/// PostgreSQL.
fn sleep_interruptibly(secs: f64, sq: &mut dyn SubqueryRunner) -> Result<()> {
    const SLICE: std::time::Duration = std::time::Duration::from_millis(10);
    if secs.is_nan() || secs <= 0.0 {
        return Ok(());
    }
    let until = std::time::Instant::now()
        + std::time::Duration::try_from_secs_f64(secs).unwrap_or(std::time::Duration::MAX / 4);
    loop {
        sq.check_interrupt()?;
        let now = std::time::Instant::now();
        if now >= until {
            return Ok(());
        }
        std::thread::sleep(SLICE.min(until - now));
    }
}

fn text_arg(v: &Value) -> Option<&str> {
    match v {
        Value::Text(s) => Some(s),
        _ => None,
    }
}

pub(super) fn eval_func(
    f: Func,
    args: &[Expr],
    env: &Env<'_>,
    sq: &mut dyn SubqueryRunner,
    row: &[Value],
) -> Result<Value> {
    if let Func::Sys(s) = f {
        return system::eval(s, args, env, sq, row);
    }
    if let Func::Array(a) = f {
        let vals = args.iter().map(|e| e.eval(env, sq, row)).collect::<Result<Vec<_>>>()?;
        return array::eval(a, vals);
    }
    if f == Func::Now {
        return Ok(Value::TimestampTz(env.now_micros));
    }
    if f == Func::ClockTimestamp {
        return Ok(Value::TimestampTz(crate::clock::now_micros()));
    }
    if f == Func::Random {
        return Ok(Value::Float8(random_unit()));
    }
    if f == Func::PgSleep {
        let secs = match args.first().map(|e| e.eval(env, sq, row)).transpose()? {
            Some(Value::Float8(x)) => x,
            // Strict: NULL in, NULL out, no wait.
            _ => return Ok(Value::Null),
        };
        sleep_interruptibly(secs, sq)?;
        return Ok(Value::Text(String::new()));
    }
    if let Func::Json(j) = f {
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            vals.push(a.eval(env, sq, row)?);
        }
        return crate::value::json::eval(j, &vals);
    }
    if f == Func::GenRandomUuid {
        return Ok(Value::Uuid(crate::value::uuid::random_v4()?));
    }
    let mut vals = Vec::with_capacity(args.len());
    for a in args {
        vals.push(a.eval(env, sq, row)?);
    }
    match f {
        Func::Concat => {
            let mut s = String::new();
            for v in &vals {
                if !v.is_null() {
                    value::write_text(v, &mut s);
                }
            }
            return Ok(Value::Text(s));
        }
        // concat_ws skips NULL arguments; only a NULL separator makes it NULL.
        Func::ConcatWs => {
            let Some(sep) = vals.first().filter(|v| !v.is_null()) else { return Ok(Value::Null) };
            let sep = text_arg(sep).unwrap_or("");
            let mut s = String::new();
            for (k, v) in vals[1..].iter().filter(|v| !v.is_null()).enumerate() {
                if k > 0 {
                    s.push_str(sep);
                }
                value::write_text(v, &mut s);
            }
            return Ok(Value::Text(s));
        }
        Func::Format => return strings::format(&vals),
        Func::Greatest | Func::Least => {
            let mut best: Option<Value> = None;
            for v in vals.into_iter().filter(|v| !v.is_null()) {
                let better = match &best {
                    None => true,
                    Some(b) => {
                        let o = value::sort_cmp(&v, b);
                        if f == Func::Greatest { o == Ordering::Greater } else { o == Ordering::Less }
                    }
                };
                if better {
                    best = Some(v);
                }
            }
            return Ok(best.unwrap_or(Value::Null));
        }
        _ => {}
    }
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    // A wide, NaN or infinite numeric argument: numeric.c's semantics.
    if vals.iter().any(|v| matches!(v, Value::NumericBig(_)))
        && let Some(r) = numeric_wide_fns::eval(f, &vals)
    {
        return r;
    }
    let int = |i: usize| vals.get(i).and_then(Value::as_i64).unwrap_or(0);
    let s0 = vals.first().and_then(text_arg).unwrap_or("");
    Ok(match f {
        // The C locale's case mapping (pgtier's collation, DESIGN.md §3):
        // ASCII letters only, as PostgreSQL's lower/upper/initcap under C.
        Func::Lower => Value::Text(s0.to_ascii_lowercase()),
        Func::Upper => Value::Text(s0.to_ascii_uppercase()),
        Func::Length => Value::Int4(i32::try_from(s0.chars().count()).unwrap_or(i32::MAX)),
        Func::ByteaConcat => match (&vals[0], &vals[1]) {
            (Value::Bytea(a), Value::Bytea(b)) => Value::Bytea([a.as_slice(), b.as_slice()].concat()),
            _ => return Err(SqlError::new("XX000", "bytea || given another type")),
        },
        Func::OctetLength => Value::Int4(
            i32::try_from(match &vals[0] {
                Value::Bytea(b) => b.len(),
                _ => s0.len(),
            })
            .unwrap_or(i32::MAX),
        ),
        Func::Substr => {
            let start = int(1);
            let (from, to) = if vals.len() > 2 {
                let len = int(2);
                if len < 0 {
                    return Err(SqlError::new("22011", "negative substring length not allowed"));
                }
                (start, start.saturating_add(len))
            } else {
                (start, i64::MAX)
            };
            let from = from.max(1);
            if to <= from {
                return Ok(Value::Text(String::new()));
            }
            let skip = usize::try_from(from - 1).unwrap_or(usize::MAX);
            let take = usize::try_from(to - from).unwrap_or(usize::MAX);
            Value::Text(s0.chars().skip(skip).take(take).collect())
        }
        Func::Lpad | Func::Rpad => {
            let len = usize::try_from(int(1).max(0)).unwrap_or(0);
            let fill: Vec<char> = match vals.get(2) {
                Some(v) => text_arg(v).unwrap_or(" ").chars().collect(),
                None => vec![' '],
            };
            let chars: Vec<char> = s0.chars().collect();
            if chars.len() >= len || fill.is_empty() {
                return Ok(Value::Text(chars.iter().take(len).collect()));
            }
            let pad: String = fill.iter().cycle().take(len - chars.len()).collect();
            let body: String = chars.iter().collect();
            Value::Text(if f == Func::Lpad { pad + &body } else { body + &pad })
        }
        Func::Btrim | Func::Ltrim | Func::Rtrim => {
            let set: Vec<char> = match vals.get(1) {
                Some(v) => text_arg(v).unwrap_or(" ").chars().collect(),
                None => vec![' '],
            };
            let t = match f {
                Func::Btrim => s0.trim_matches(|c| set.contains(&c)),
                Func::Ltrim => s0.trim_start_matches(|c| set.contains(&c)),
                _ => s0.trim_end_matches(|c| set.contains(&c)),
            };
            Value::Text(t.to_owned())
        }
        Func::Replace => {
            let from = vals.get(1).and_then(text_arg).unwrap_or("");
            let to = vals.get(2).and_then(text_arg).unwrap_or("");
            Value::Text(if from.is_empty() { s0.to_owned() } else { s0.replace(from, to) })
        }
        Func::Position => {
            // position(sub IN s): args are (sub, s).
            let hay = vals.get(1).and_then(text_arg).unwrap_or("");
            let pos = hay.find(s0).map_or(0, |b| hay[..b].chars().count() + 1);
            Value::Int4(i32::try_from(pos).unwrap_or(0))
        }
        Func::Abs => match &vals[0] {
            Value::Int2(x) => Value::Int2(x.checked_abs().ok_or_else(|| SqlError::out_of_range("smallint"))?),
            Value::Int4(x) => Value::Int4(x.checked_abs().ok_or_else(|| SqlError::out_of_range("integer"))?),
            Value::Int8(x) => Value::Int8(x.checked_abs().ok_or_else(|| SqlError::out_of_range("bigint"))?),
            Value::Numeric(n) => Value::Numeric(Numeric::new(n.mantissa.abs(), n.scale)),
            Value::Float4(x) => Value::Float4(x.abs()),
            Value::Float8(x) => Value::Float8(x.abs()),
            other => return Err(SqlError::undefined_function(&format!("abs({})", value::value_type_name(other)))),
        },
        Func::Round => match &vals[0] {
            Value::Float8(x) => Value::Float8(x.round_ties_even()),
            Value::Numeric(n) => match value::round_numeric(*n, if vals.len() > 1 { int(1) } else { 0 }) {
                Ok(r) => Value::Numeric(r),
                Err(e) => return numeric_wide_fns::eval(f, &vals).unwrap_or(Err(e)),
            },
            other => return Err(SqlError::undefined_function(&format!("round({})", value::value_type_name(other)))),
        },
        Func::Ceil | Func::Floor => match &vals[0] {
            Value::Float8(x) => Value::Float8(if f == Func::Ceil { x.ceil() } else { x.floor() }),
            Value::Numeric(n) => {
                let t = n.rescale(0).map(|r| r.mantissa).unwrap_or(0);
                let back = Numeric::new(t, 0);
                let cmp = value::numeric_cmp(back, *n);
                let m = match (f, cmp) {
                    (Func::Ceil, Ordering::Less) => t + 1,
                    (Func::Floor, Ordering::Greater) => t - 1,
                    _ => t,
                };
                Value::Numeric(Numeric::new(m, 0))
            }
            other => return Err(SqlError::undefined_function(&format!("ceil({})", value::value_type_name(other)))),
        },
        Func::Mod => {
            let ty = match (&vals[0], &vals[1]) {
                (Value::Numeric(_), _) | (_, Value::Numeric(_)) => value::NUMERIC_ANY,
                (Value::Int8(_), _) | (_, Value::Int8(_)) => DataType::Int8,
                (Value::Int4(_), _) | (_, Value::Int4(_)) => DataType::Int4,
                _ => DataType::Int2,
            };
            value::arith(ArithOp::Mod, &vals[0], &vals[1], ty)?
        }
        Func::Repeat => {
            let n = usize::try_from(int(1).max(0)).unwrap_or(0);
            if s0.len().saturating_mul(n) > TEXT_BYTES_MAX {
                return Err(SqlError::new("54000", "requested length too large"));
            }
            Value::Text(s0.repeat(n))
        }
        Func::SplitPart => split_part(s0, vals.get(1).and_then(text_arg).unwrap_or(""), int(2))?,
        Func::Left | Func::Right => {
            let chars: Vec<char> = s0.chars().collect();
            let len = i64::try_from(chars.len()).unwrap_or(i64::MAX);
            let n = int(1);
            // A negative count keeps all but that many from the other end.
            let keep = usize::try_from(if n >= 0 { n.min(len) } else { (len + n).max(0) }).unwrap_or(0);
            let taken: String = if f == Func::Left {
                chars[..keep].iter().collect()
            } else {
                chars[chars.len() - keep..].iter().collect()
            };
            Value::Text(taken)
        }
        Func::Initcap => {
            // Words are runs of letters and digits; under the C locale only
            // ASCII ones are (and change case).
            let mut out = String::with_capacity(s0.len());
            let mut in_word = false;
            for c in s0.chars() {
                out.push(if in_word { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() });
                in_word = c.is_ascii_alphanumeric();
            }
            Value::Text(out)
        }
        Func::Translate => {
            let from: Vec<char> = vals.get(1).and_then(text_arg).unwrap_or("").chars().collect();
            let to: Vec<char> = vals.get(2).and_then(text_arg).unwrap_or("").chars().collect();
            let out: String = s0
                .chars()
                .filter_map(|c| match from.iter().position(|&x| x == c) {
                    Some(i) => to.get(i).copied(),
                    None => Some(c),
                })
                .collect();
            Value::Text(out)
        }
        Func::StartsWith => Value::Bool(s0.starts_with(vals.get(1).and_then(text_arg).unwrap_or(""))),
        #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)]
        Func::ToHex(wide) => {
            Value::Text(if wide { format!("{:x}", int(0) as u64) } else { format!("{:x}", int(0) as i32 as u32) })
        }
        Func::Trunc => match &vals[0] {
            Value::Float8(x) => Value::Float8(x.trunc()),
            Value::Numeric(n) => match trunc_numeric(*n, if vals.len() > 1 { int(1) } else { 0 }) {
                Ok(r) => Value::Numeric(r),
                Err(e) => return numeric_wide_fns::eval(f, &vals).unwrap_or(Err(e)),
            },
            other => return Err(SqlError::undefined_function(&format!("trunc({})", value::value_type_name(other)))),
        },
        Func::WidthBucket => width_bucket(&vals[0], &vals[1], &vals[2], int(3))?,
        Func::SizePretty => Value::Text(size_pretty(int(0))),
        Func::Factorial => numeric_wide_fns::factorial(int(0))?,
        Func::Sqrt => {
            if let Value::Numeric(n) = &vals[0] {
                return match math::numeric_sqrt(*n) {
                    Ok(r) => Ok(Value::Numeric(r)),
                    Err(e) if e.sqlstate == "0A000" => numeric_wide_fns::eval(f, &vals).unwrap_or(Err(e)),
                    Err(e) => Err(e),
                };
            }
            let x = value::to_f64(&vals[0]).unwrap_or(f64::NAN);
            if x < 0.0 {
                return Err(SqlError::new("2201F", "cannot take square root of a negative number"));
            }
            Value::Float8(x.sqrt())
        }
        Func::Power if matches!(vals[0], Value::Numeric(_)) => {
            numeric_wide_fns::eval(f, &vals).unwrap_or(Ok(Value::Null))?
        }
        Func::Power => Value::Float8(math::dpow(
            value::to_f64(&vals[0]).unwrap_or(f64::NAN),
            value::to_f64(&vals[1]).unwrap_or(f64::NAN),
        )?),
        Func::Md5 => {
            use md5::Digest as _;
            let digest = match &vals[0] {
                Value::Bytea(b) => md5::Md5::digest(b),
                _ => md5::Md5::digest(s0.as_bytes()),
            };
            Value::Text(digest.iter().map(|b| format!("{b:02x}")).collect())
        }
        Func::DateTrunc(_, _) if value::is_infinite_datetime(&vals[0]) => vals[0].clone(),
        Func::DateTrunc(unit, tz) => match &vals[0] {
            Value::Timestamp(t) => {
                let truncated = datetime::date_trunc(unit, *t)?;
                if tz { Value::TimestampTz(truncated) } else { Value::Timestamp(truncated) }
            }
            Value::TimestampTz(t) => Value::TimestampTz(datetime::date_trunc_tz(unit, *t)?),
            other => {
                return Err(SqlError::undefined_function(&format!(
                    "date_trunc(text, {})",
                    value::value_type_name(other)
                )));
            }
        },
        Func::MakeDate => datetime::make_date(int(0), int(1), int(2))?,
        Func::Extract(field, numeric) => match &vals[0] {
            v @ (Value::Interval(_) | Value::Time(_)) => interval_fns::extract(field, v, numeric)?,
            v if value::is_infinite_datetime(v) => infinity::extract(field, v, numeric)?,
            v => datetime::extract(field, v, numeric)?,
        },
        // PostgreSQL 15 answers with the fields of i64's ends (292277 years ...).
        Func::Age if vals.iter().any(value::is_infinite_datetime) => {
            return Err(SqlError::unsupported("age of an infinite timestamp"));
        }
        Func::Age => match (&vals[0], &vals[1]) {
            // timestamptz_age takes both fields in the session's zone.
            (Value::TimestampTz(a), Value::TimestampTz(b)) => {
                Value::Interval(interval_fns::age(crate::tz::to_local(*a), crate::tz::to_local(*b))?)
            }
            (Value::Timestamp(a) | Value::TimestampTz(a), Value::Timestamp(b) | Value::TimestampTz(b)) => {
                Value::Interval(interval_fns::age(*a, *b)?)
            }
            (a, b) => {
                return Err(SqlError::undefined_function(&format!(
                    "age({}, {})",
                    value::value_type_name(a),
                    value::value_type_name(b)
                )));
            }
        },
        Func::IsFinite => Value::Bool(!value::is_infinite_datetime(&vals[0])),
        Func::MakeInterval => Value::Interval(interval_fns::make_interval(
            int(0),
            int(1),
            int(2),
            int(3),
            int(4),
            int(5),
            value::to_f64(&vals[6]).unwrap_or(f64::NAN),
        )?),
        Func::JustifyDays | Func::JustifyHours | Func::JustifyInterval => {
            let Value::Interval(v) = vals[0] else {
                return Err(SqlError::undefined_function(&format!("justify({})", value::value_type_name(&vals[0]))));
            };
            Value::Interval(match f {
                Func::JustifyDays => interval_fns::justify_days(v)?,
                Func::JustifyHours => interval_fns::justify_hours(v)?,
                _ => interval_fns::justify_interval(v)?,
            })
        }
        Func::Reverse => Value::Text(s0.chars().rev().collect()),
        Func::Chr => strings::chr(int(0))?,
        Func::Ascii => strings::ascii(s0),
        Func::RegexpReplace => {
            let text = |k: usize| vals.get(k).and_then(text_arg).unwrap_or("");
            Value::Text(regex::regexp_replace(s0, text(1), text(2), text(3))?)
        }
        Func::RegexpMatch => {
            let text = |k: usize| vals.get(k).and_then(text_arg).unwrap_or("");
            match regex::regexp_match(s0, text(1), text(2))? {
                Some(items) => {
                    let items: Vec<Value> = items.into_iter().map(|i| i.map_or(Value::Null, Value::Text)).collect();
                    Value::Text(array_text(Elem::Text, &items))
                }
                None => Value::Null,
            }
        }
        Func::RegexpSubstring => regex::substring(s0, s1(&vals))?.map_or(Value::Null, Value::Text),
        Func::RegexpSplitToArray => {
            let text = |k: usize| vals.get(k).and_then(text_arg).unwrap_or("");
            let items: Vec<Value> = regex::regexp_split(s0, text(1), text(2))?.into_iter().map(Value::Text).collect();
            Value::Text(array_text(Elem::Text, &items))
        }
        Func::RegexpLike => {
            let text = |k: usize| vals.get(k).and_then(text_arg).unwrap_or("");
            Value::Bool(regex::regexp_like(s0, text(1), text(2))?)
        }
        Func::Scale
        | Func::MinScale
        | Func::TrimScale
        | Func::Float4Send
        | Func::Float8Send
        | Func::Sinh
        | Func::Cosh
        | Func::Tanh => math::scale_or_send(f, &vals[0])?,
        Func::RegexpReplaceAt => {
            let text = |k: usize| vals.get(k).and_then(text_arg).unwrap_or("");
            let n = vals.get(4).and_then(Value::as_i64);
            Value::Text(regex::regexp_replace_at(s0, text(1), text(2), int(3), n, text(5))?)
        }
        Func::RegexpCount | Func::RegexpInstr | Func::RegexpSubstr => {
            let text = |k: usize| vals.get(k).and_then(text_arg).unwrap_or("");
            let int_or = |k: usize, default: i64| vals.get(k).and_then(Value::as_i64).unwrap_or(default);
            let int4 = |n: i64| Value::Int4(i32::try_from(n).unwrap_or(i32::MAX));
            match f {
                Func::RegexpCount => int4(regex::regexp_count(s0, text(1), int_or(2, 1), text(3))?),
                Func::RegexpInstr => int4(regex::regexp_instr(
                    s0,
                    text(1),
                    int_or(2, 1),
                    int_or(3, 1),
                    int_or(4, 0),
                    text(5),
                    int_or(6, 0),
                )?),
                _ => regex::regexp_substr(s0, text(1), int_or(2, 1), int_or(3, 1), text(4), int_or(5, 0))?
                    .map_or(Value::Null, Value::Text),
            }
        }
        // The numeric versions (the binder kept the argument numeric).
        Func::Exp | Func::Ln | Func::Log10 if matches!(vals[0], Value::Numeric(_)) => {
            numeric_wide_fns::eval(f, &vals).unwrap_or(Ok(Value::Null))?
        }
        Func::Cbrt | Func::Exp | Func::Ln | Func::Log10 => {
            Value::Float8(math::float_fn(f, value::to_f64(&vals[0]).unwrap_or(f64::NAN))?)
        }
        Func::Sign => math::sign(&vals[0]),
        Func::Div => math::div(&vals[0], &vals[1])?,
        Func::Gcd | Func::Lcm => math::gcd_lcm(f == Func::Lcm, &vals[0], &vals[1])?,
        Func::Pi => Value::Float8(std::f64::consts::PI),
        Func::ToChar => match &vals[0] {
            // An empty template gives NULL, as PostgreSQL's; so does an infinity.
            v if s1(&vals).is_empty() || value::is_infinite_datetime(v) => Value::Null,
            Value::Timestamp(t) => Value::Text(datetime::to_char(*t, s1(&vals))?),
            Value::TimestampTz(t) => Value::Text(datetime::to_char(crate::tz::to_local(*t), s1(&vals))?),
            other => {
                return Err(SqlError::undefined_function(&format!("to_char({}, text)", value::value_type_name(other))));
            }
        },
        Func::ToTimestampEpoch => {
            Value::TimestampTz(datetime::to_timestamp_epoch(value::to_f64(&vals[0]).unwrap_or(f64::NAN))?)
        }
        Func::ToTimestamp(date) => {
            let t = datetime::parse_with_template(s0, vals.get(1).and_then(text_arg).unwrap_or(""))?;
            if date {
                Value::Date(
                    i32::try_from(t.div_euclid(MICROS_PER_DAY))
                        .map_err(|_| SqlError::new("22008", "date out of range"))?,
                )
            } else {
                Value::TimestampTz(crate::tz::from_local(t))
            }
        }
        Func::MakeTimestamp(tz) => {
            let t = datetime::make_timestamp(
                int(0),
                int(1),
                int(2),
                int(3),
                int(4),
                value::to_f64(&vals[5]).unwrap_or(f64::NAN),
            )?;
            if tz { Value::TimestampTz(crate::tz::from_local(t)) } else { Value::Timestamp(t) }
        }
        Func::AtTimeZone(to_instant) => {
            let zone = match &vals[0] {
                Value::Interval(iv) if iv.months == 0 && iv.days == 0 => {
                    crate::tz::fixed_setting(
                        i32::try_from(iv.micros / 1_000_000)
                            .map_err(|_| SqlError::new("22023", "interval time zone out of range"))?,
                    )
                    .0
                }
                Value::Interval(iv) => {
                    return Err(SqlError::new(
                        "22023",
                        format!("interval time zone \"{}\" must not include months or days", Value::Interval(*iv)),
                    ));
                }
                _ => crate::tz::zone_arg(s0)?,
            };
            match &vals[1] {
                Value::Timestamp(t) if to_instant => Value::TimestampTz(zone.from_local(*t)),
                Value::TimestampTz(t) => Value::Timestamp(zone.to_local(*t)),
                other => {
                    return Err(SqlError::undefined_function(&format!(
                        "timezone(text, {})",
                        value::value_type_name(other)
                    )));
                }
            }
        }
        Func::Now
        | Func::ClockTimestamp
        | Func::Random
        | Func::PgSleep
        | Func::GenRandomUuid
        | Func::Json(_)
        | Func::Concat
        | Func::ConcatWs
        | Func::Format
        | Func::Greatest
        | Func::Least
        | Func::Sys(_)
        | Func::Array(_) => Value::Null,
    })
}

/// A uniform double in [0, 1) from a per-thread xorshift64* generator
/// seeded from the clock and the thread: random() is not for secrets (nor
/// is PostgreSQL's), and setseed() is not supported.
fn random_unit() -> f64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            let here = &nanos as *const u64 as u64;
            (nanos ^ here.rotate_left(32)) | 1
        });
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        // The top 53 bits of the output, scaled: exactly representable, < 1.
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// The longest text value PostgreSQL builds (1 GB less its header).
const TEXT_BYTES_MAX: usize = (1 << 30) - 5;

/// split_part: field `n` of `s` split at `delimiter`, counted from the end
/// when negative (PostgreSQL 14+); field 0 is an error.
fn split_part(s: &str, delimiter: &str, n: i64) -> Result<Value> {
    if n == 0 {
        return Err(SqlError::new("22023", "field position must not be zero"));
    }
    if delimiter.is_empty() {
        return Ok(Value::Text(if n == 1 || n == -1 { s.to_owned() } else { String::new() }));
    }
    let parts: Vec<&str> = s.split(delimiter).collect();
    let len = i64::try_from(parts.len()).unwrap_or(i64::MAX);
    let index = if n > 0 { n - 1 } else { len + n };
    Ok(Value::Text(usize::try_from(index).ok().and_then(|i| parts.get(i)).map_or(String::new(), |p| (*p).to_owned())))
}

/// trunc(numeric, scale): toward zero at `scale` digits (negative: left of
/// the point); the result keeps max(scale, 0) digits, as PostgreSQL's.
fn trunc_numeric(n: Numeric, scale: i64) -> Result<Numeric> {
    let overflow = || SqlError::new("22003", "value overflows numeric format");
    let target = scale.clamp(-38, 38);
    let from = i64::from(n.scale);
    let mut mantissa = n.mantissa;
    if target >= from {
        let up = u32::try_from(target - from).map_err(|_| overflow())?;
        mantissa = mantissa.checked_mul(10i128.checked_pow(up).ok_or_else(overflow)?).ok_or_else(overflow)?;
        return Ok(Numeric::new(mantissa, u8::try_from(target).map_err(|_| overflow())?));
    }
    let down = u32::try_from(from - target).map_err(|_| overflow())?;
    mantissa /= 10i128.checked_pow(down).ok_or_else(overflow)?;
    if target < 0 {
        let up = u32::try_from(-target).map_err(|_| overflow())?;
        mantissa = mantissa.checked_mul(10i128.checked_pow(up).ok_or_else(overflow)?).ok_or_else(overflow)?;
        return Ok(Numeric::new(mantissa, 0));
    }
    Ok(Numeric::new(mantissa, u8::try_from(target).map_err(|_| overflow())?))
}

/// width_bucket(operand, low, high, count), exact for numerics.
fn width_bucket(operand: &Value, low: &Value, high: &Value, count: i64) -> Result<Value> {
    let bad = |m: &str| SqlError::new("2201G", m.to_owned());
    if count <= 0 {
        return Err(bad("count must be greater than zero"));
    }
    let as_exact = |v: &Value| value::to_numeric(v);
    let bucket = match (as_exact(operand), as_exact(low), as_exact(high)) {
        (Some(x), Some(lo), Some(hi))
            if ![operand, low, high].iter().any(|v| matches!(v, Value::Float4(_) | Value::Float8(_))) =>
        {
            // Scale all three to one scale, then integer arithmetic.
            let scale = x.scale.max(lo.scale).max(hi.scale);
            let at = |n: Numeric| {
                n.rescale(scale)
                    .map(|r| r.mantissa)
                    .ok_or_else(|| SqlError::new("22003", "value overflows numeric format"))
            };
            let (x, lo, hi) = (at(x)?, at(lo)?, at(hi)?);
            if lo == hi {
                return Err(bad("lower bound cannot equal upper bound"));
            }
            let count = i128::from(count);
            let (x, lo, hi) = if lo < hi { (x, lo, hi) } else { (-x, -lo, -hi) };
            if x < lo {
                0
            } else if x >= hi {
                count + 1
            } else {
                (x - lo).checked_mul(count).ok_or_else(|| SqlError::new("22003", "value overflows numeric format"))?
                    / (hi - lo)
                    + 1
            }
        }
        _ => {
            let f = |v: &Value| value::to_f64(v).unwrap_or(f64::NAN);
            let (x, lo, hi) = (f(operand), f(low), f(high));
            if x.is_nan() || lo.is_nan() || hi.is_nan() {
                return Err(bad("operand, lower bound, and upper bound cannot be NaN"));
            }
            // An infinite operand is allowed; infinite bounds are not (width_bucket_float8).
            if lo.is_infinite() || hi.is_infinite() {
                return Err(bad("lower and upper bounds must be finite"));
            }
            if lo == hi {
                return Err(bad("lower bound cannot equal upper bound"));
            }
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            let inside = |x: f64, lo: f64, hi: f64| ((count as f64) * (x - lo) / (hi - lo)).floor() as i128 + 1;
            let count = i128::from(count);
            if lo < hi {
                if x < lo {
                    0
                } else if x >= hi {
                    count + 1
                } else {
                    inside(x, lo, hi)
                }
            } else if x > lo {
                0
            } else if x <= hi {
                count + 1
            } else {
                inside(lo - x, 0.0, lo - hi)
            }
        }
    };
    i32::try_from(bucket).map(Value::Int4).map_err(|_| SqlError::out_of_range("integer"))
}

/// pg_size_pretty(bigint), PostgreSQL 15's: bytes below 10 kB, then the
/// largest unit keeping the number under 20 * 1024 - 1, halves rounded away from zero.
fn size_pretty(mut size: i64) -> String {
    // (name, limit, round, bits)
    const UNITS: [(&str, i64, bool, u32); 6] = [
        ("bytes", 10 * 1024, false, 0),
        ("kB", 20 * 1024 - 1, true, 10),
        ("MB", 20 * 1024 - 1, true, 20),
        ("GB", 20 * 1024 - 1, true, 30),
        ("TB", 20 * 1024 - 1, true, 40),
        ("PB", 20 * 1024 - 1, true, 50),
    ];
    for (i, &(name, limit, round, bits)) in UNITS.iter().enumerate() {
        let Some(&(_, _, next_round, next_bits)) = UNITS.get(i + 1) else {
            return format!("{} {name}", if round { half_rounded(size) } else { size });
        };
        if size.unsigned_abs() < limit.unsigned_abs() {
            return format!("{} {name}", if round { half_rounded(size) } else { size });
        }
        let shift = next_bits - bits - u32::from(next_round) + u32::from(round);
        // C's division: toward zero, as PostgreSQL's.
        size /= 1i64 << shift;
    }
    String::new()
}

fn half_rounded(x: i64) -> i64 {
    (x + if x < 0 { -1 } else { 1 }) / 2
}
