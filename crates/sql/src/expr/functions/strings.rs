//! The string functions: lower, upper, length, substr, pads and trims,
//! replace, position, repeat, split_part, left / right, initcap,
//! translate, starts_with, to_hex, concat[_ws], format(), reverse, unistr, chr,
//! ascii, md5, and bytea's `||`. Each is declared in [`DEFS`].

use pgtier_engine::{DataType, Value};

use super::binary::bytea_arg;
use super::registry::{ArgBinder, Builtin, Call, EvalCtx, EvalFn, FunctionDef, Ty, Volatility, int, text, text_fn};
use crate::catalog::quote_ident;
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value;

use DataType::{Bool, Int4, Text};
use Volatility::Immutable;

/// The string functions.
pub(super) const DEFS: &[FunctionDef] = &[
    FunctionDef {
        names: &["lower"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, lower, (1, 1), &[Text], Text),
    },
    FunctionDef {
        names: &["upper"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, upper, (1, 1), &[Text], Text),
    },
    FunctionDef {
        names: &["length", "char_length", "character_length"],
        volatility: Immutable,
        resolve: |def, b, call| {
            if call.name == "length" && is_one_bytea(&call) {
                return Ok((def.expr(octet_length, call.args.into_iter().map(|a| a.0).collect()), Some(Int4)));
            }
            text_fn(def, b, call, length, (1, 1), &[Text], Int4)
        },
    },
    FunctionDef {
        names: &["octet_length"],
        volatility: Immutable,
        resolve: |def, b, call| {
            if is_one_bytea(&call) {
                return Ok((def.expr(octet_length, call.args.into_iter().map(|a| a.0).collect()), Some(Int4)));
            }
            text_fn(def, b, call, octet_length, (1, 1), &[Text], Int4)
        },
    },
    FunctionDef { names: &["substr", "substring"], volatility: Immutable, resolve: resolve_substr },
    FunctionDef {
        names: &["lpad"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, lpad, (2, 3), &[Text, Int4, Text], Text),
    },
    FunctionDef {
        names: &["rpad"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, rpad, (2, 3), &[Text, Int4, Text], Text),
    },
    FunctionDef {
        names: &["btrim"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_trim(def, b, call, btrim, |v, _| Ok(trim_bytes(v, true, true))),
    },
    FunctionDef {
        names: &["ltrim"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_trim(def, b, call, ltrim, |v, _| Ok(trim_bytes(v, true, false))),
    },
    FunctionDef {
        names: &["rtrim"],
        volatility: Immutable,
        resolve: |def, b, call| resolve_trim(def, b, call, rtrim, |v, _| Ok(trim_bytes(v, false, true))),
    },
    FunctionDef { names: &["overlay"], volatility: Immutable, resolve: resolve_overlay },
    FunctionDef {
        names: &["replace"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, replace, (3, 3), &[Text, Text, Text], Text),
    },
    FunctionDef {
        names: &["position", "strpos"],
        volatility: Immutable,
        resolve: |def, b, mut call| {
            // position(sub IN s) is (sub, s); strpos(s, sub) is the other way round.
            if call.name == "strpos" {
                call.args.reverse();
            }
            text_fn(def, b, call, position, (2, 2), &[Text, Text], Int4)
        },
    },
    FunctionDef {
        names: &["repeat"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, repeat, (2, 2), &[Text, Int4], Text),
    },
    FunctionDef {
        names: &["split_part"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, split_part, (3, 3), &[Text, Text, Int4], Text),
    },
    FunctionDef {
        names: &["left"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, left, (2, 2), &[Text, Int4], Text),
    },
    FunctionDef {
        names: &["right"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, right, (2, 2), &[Text, Int4], Text),
    },
    FunctionDef {
        names: &["initcap"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, initcap, (1, 1), &[Text], Text),
    },
    FunctionDef {
        names: &["translate"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, translate, (3, 3), &[Text, Text, Text], Text),
    },
    FunctionDef {
        names: &["starts_with"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, starts_with, (2, 2), &[Text, Text], Bool),
    },
    FunctionDef { names: &["to_hex"], volatility: Immutable, resolve: resolve_to_hex },
    FunctionDef {
        names: &["concat_ws"],
        volatility: Immutable,
        resolve: |def, b, call| {
            call.arity(2, usize::MAX)?;
            resolve_variadic(def, b, call, concat_ws)
        },
    },
    FunctionDef {
        names: &["concat"],
        volatility: Immutable,
        resolve: |def, b, call| {
            // VARIADIC "any": at least one argument.
            call.arity(1, usize::MAX)?;
            resolve_variadic(def, b, call, concat)
        },
    },
    FunctionDef { names: &["format"], volatility: Immutable, resolve: resolve_format },
    FunctionDef {
        names: &["reverse"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, reverse, (1, 1), &[Text], Text),
    },
    FunctionDef {
        names: &["quote_ident"],
        volatility: Immutable,
        resolve: |def, b, call| {
            text_fn(def, b, call, |v, _| Ok(Value::Text(quote_ident(text(v, 0)))), (1, 1), &[Text], Text)
        },
    },
    FunctionDef {
        names: &["quote_literal"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, quoted_literal, (1, 1), &[Text], Text),
    },
    FunctionDef {
        names: &["quote_nullable"],
        volatility: Immutable,
        resolve: |def, b, call| {
            // Not strict: NULL is the word NULL.
            let (e, t) = text_fn(def, b, call, quote_nullable, (1, 1), &[Text], Text)?;
            match e {
                Expr::Func(super::Func::Builtin(f), args) => Ok((Expr::Func(super::Func::Builtin(f.lax()), args), t)),
                other => Ok((other, t)),
            }
        },
    },
    FunctionDef {
        names: &["unistr"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, unistr, (1, 1), &[Text], Text),
    },
    FunctionDef {
        names: &["chr"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, |v, _| chr(int(v, 0)), (1, 1), &[Int4], Text),
    },
    FunctionDef {
        names: &["ascii"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, |v, _| Ok(ascii(text(v, 0))), (1, 1), &[Text], Int4),
    },
    FunctionDef {
        names: &["md5"],
        volatility: Immutable,
        resolve: |def, b, call| {
            call.arity(1, 1)?;
            if is_one_bytea(&call) {
                return Ok((def.expr(md5, call.args.into_iter().map(|a| a.0).collect()), Some(Text)));
            }
            text_fn(def, b, call, md5, (1, 1), &[Text], Text)
        },
    },
];

/// `bytea || bytea` (byteacat): bound by the operator, not callable by name.
pub(super) const BYTEA_CONCAT: Builtin =
    FunctionDef { names: &["byteacat"], volatility: Immutable, resolve: |_, _, call| Err(call.undefined()) }
        .call(bytea_concat);

fn is_one_bytea(call: &Call<'_>) -> bool {
    matches!(call.args.as_slice(), [(_, Some(DataType::Bytea))])
}

fn resolve_substr(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    let string_like = |t: &Ty| t.is_none_or(|t| value::category(t) == value::Category::String);
    if call.name == "substring" && call.args.get(1).is_some_and(|a| string_like(&a.1)) {
        // substring(text, text): a POSIX regular expression (an unknown
        // literal prefers the string category); with a third text
        // argument, SQL's SIMILAR TO form.
        if call.len() == 3 && string_like(&call.args[2].1) {
            return text_fn(def, b, call, super::regex::eval_similar_substring, (3, 3), &[Text, Text, Text], Text);
        }
        if call.len() != 3 {
            return text_fn(def, b, call, super::regex::eval_substring, (2, 2), &[Text, Text], Text);
        }
    }
    if call.args.first().is_some_and(|(_, t)| *t == Some(DataType::Bytea)) {
        // bytea_substr: the same positions, counted in bytes.
        call.arity(2, 3)?;
        let sig = call.sig;
        let mut out = Vec::with_capacity(call.len());
        for (k, (e, t)) in call.args.into_iter().enumerate() {
            out.push(if k == 0 { e } else { b.int4_param(e, t, sig)? });
        }
        return Ok((def.expr(substr_bytes, out), Some(DataType::Bytea)));
    }
    text_fn(def, b, call, substr, (2, 3), &[Text, Int4, Int4], Text)
}

fn resolve_to_hex(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    call.arity(1, 1)?;
    // smallint and unknown fit to_hex(integer) and to_hex(bigint) alike.
    if matches!(call.args[0].1, None | Some(DataType::Int2)) {
        return Err(call.not_unique());
    }
    if call.args[0].1 == Some(DataType::Int8) {
        return text_fn(def, b, call, to_hex_int8, (1, 1), &[DataType::Int8], Text);
    }
    text_fn(def, b, call, to_hex_int4, (1, 1), &[Int4], Text)
}

/// concat / concat_ws: any arguments, printed with their output functions
/// (char(n) keeps its padding: concat('a'::char(3), 'x') is 'a  x').
fn resolve_variadic(
    def: &'static FunctionDef,
    b: &mut dyn ArgBinder,
    call: Call<'_>,
    eval: super::registry::EvalFn,
) -> Result<(Expr, Ty)> {
    let mut out = Vec::with_capacity(call.len());
    for (e, t) in call.args {
        out.push(match t {
            None => b.coerce(e, None, Text, call.name)?,
            _ => crate::expr::reg_as_name(e, t),
        });
    }
    Ok((Expr::Func(super::Func::Builtin(def.call(eval).lax()), out), Some(Text)))
}

fn resolve_format(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    call.arity(1, usize::MAX)?;
    let undefined = call.undefined();
    let mut out = Vec::with_capacity(call.len());
    for (k, (e, t)) in call.args.into_iter().enumerate() {
        out.push(match t {
            _ if k == 0 => b.text_arg(e, t, call.name).map_err(|_| undefined.clone())?,
            None => b.coerce(e, None, Text, call.name)?,
            // char(n) keeps its padding: format prints each argument with
            // its output function (a reg* value's is its name).
            Some(_) => crate::expr::reg_as_name(e, t),
        });
    }
    // Not strict: a NULL argument prints empty.
    Ok((Expr::Func(super::Func::Builtin(def.call(|v, _| format(v)).lax()), out), Some(Text)))
}

// The C locale's case mapping (pgtier's collation, DESIGN.md §3): ASCII
// letters only, as PostgreSQL's lower/upper/initcap under C.
fn lower(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Text(text(vals, 0).to_ascii_lowercase()))
}

fn upper(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Text(text(vals, 0).to_ascii_uppercase()))
}

fn length(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Int4(i32::try_from(text(vals, 0).chars().count()).unwrap_or(i32::MAX)))
}

/// octet_length(text | bytea), length(bytea): bytes.
fn octet_length(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let bytes = match &vals[0] {
        Value::Bytea(b) => b.len(),
        _ => text(vals, 0).len(),
    };
    Ok(Value::Int4(i32::try_from(bytes).unwrap_or(i32::MAX)))
}

fn bytea_concat(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    match (&vals[0], &vals[1]) {
        (Value::Bytea(a), Value::Bytea(b)) => Ok(Value::Bytea([a.as_slice(), b.as_slice()].concat())),
        _ => Err(SqlError::new("XX000", "bytea || given another type")),
    }
}

fn substr(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Text(match substr_range(vals)? {
        Some((skip, take)) => text(vals, 0).chars().skip(skip).take(take).collect(),
        None => String::new(),
    }))
}

fn substr_bytes(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Some(Value::Bytea(bytes)) = vals.first() else {
        return Err(SqlError::new("XX000", "substring of bytea given another type"));
    };
    Ok(Value::Bytea(match substr_range(vals)? {
        Some((skip, take)) => bytes.iter().skip(skip).take(take).copied().collect(),
        None => Vec::new(),
    }))
}

/// substr's (skip, take) from its start and length arguments (`vals[1..]`),
/// None when nothing is taken; a negative length is 22011.
fn substr_range(vals: &[Value]) -> Result<Option<(usize, usize)>> {
    let start = int(vals, 1);
    let (from, to) = if vals.len() > 2 {
        let len = int(vals, 2);
        if len < 0 {
            return Err(SqlError::new("22011", "negative substring length not allowed"));
        }
        (start, start.saturating_add(len))
    } else {
        (start, i64::MAX)
    };
    let from = from.max(1);
    if to <= from {
        return Ok(None);
    }
    let skip = usize::try_from(from - 1).unwrap_or(usize::MAX);
    let take = usize::try_from(to - from).unwrap_or(usize::MAX);
    Ok(Some((skip, take)))
}

/// lpad / rpad: to `vals[1]` characters, cut or filled with `vals[2]` (a blank).
fn pad(vals: &[Value], left: bool) -> Value {
    let len = usize::try_from(int(vals, 1).max(0)).unwrap_or(0);
    let fill: Vec<char> = match vals.get(2) {
        Some(Value::Text(s)) => s.chars().collect(),
        Some(_) => vec![' '],
        None => vec![' '],
    };
    let chars: Vec<char> = text(vals, 0).chars().collect();
    if chars.len() >= len || fill.is_empty() {
        return Value::Text(chars.iter().take(len).collect());
    }
    let pad: String = fill.iter().cycle().take(len - chars.len()).collect();
    let body: String = chars.iter().collect();
    Value::Text(if left { pad + &body } else { body + &pad })
}

fn lpad(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(pad(vals, true))
}

fn rpad(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(pad(vals, false))
}

/// The characters btrim / ltrim / rtrim remove: `vals[1]`'s, or a blank.
fn trim_set(vals: &[Value]) -> Vec<char> {
    match vals.get(1) {
        Some(Value::Text(s)) => s.chars().collect(),
        _ => vec![' '],
    }
}

/// btrim / ltrim / rtrim: of two bytea (byteatrim, bytealtrim,
/// byteartrim) when an argument is bytea and the other bytea or an unknown
/// literal; of text otherwise.
fn resolve_trim(
    def: &'static FunctionDef,
    b: &mut dyn ArgBinder,
    call: Call<'_>,
    of_text: EvalFn,
    of_bytea: EvalFn,
) -> Result<(Expr, Ty)> {
    let of_bytes = call.len() == 2
        && call.args.iter().any(|a| a.1 == Some(DataType::Bytea))
        && call.args.iter().all(|a| matches!(a.1, None | Some(DataType::Bytea)));
    if !of_bytes {
        return text_fn(def, b, call, of_text, (1, 2), &[Text, Text], Text);
    }
    let (name, undefined) = (call.name, call.undefined());
    let (x, y) = call.pair()?;
    let args = vec![bytea_arg(b, x, name, undefined.clone())?, bytea_arg(b, y, name, undefined)?];
    Ok((def.expr(of_bytea, args), Some(DataType::Bytea)))
}

/// The bytes of the first bytea without the leading and/or trailing bytes
/// that are in the second.
fn trim_bytes(vals: &[Value], leading: bool, trailing: bool) -> Value {
    let (Some(Value::Bytea(bytes)), Some(Value::Bytea(set))) = (vals.first(), vals.get(1)) else {
        return Value::Null;
    };
    let (mut start, mut end) = (0, bytes.len());
    while leading && start < end && set.contains(&bytes[start]) {
        start += 1;
    }
    while trailing && end > start && set.contains(&bytes[end - 1]) {
        end -= 1;
    }
    Value::Bytea(bytes[start..end].to_vec())
}

/// overlay(s PLACING r FROM n [FOR m]) (textoverlay, byteaoverlay): of
/// bytea when one of the two strings is bytea and the other bytea or an
/// unknown literal, of text otherwise.
fn resolve_overlay(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    let strings = &call.args[..call.args.len().min(2)];
    let of_bytes = strings.iter().any(|a| a.1 == Some(DataType::Bytea))
        && strings.iter().all(|a| matches!(a.1, None | Some(DataType::Bytea)));
    if of_bytes {
        let params = [DataType::Bytea, DataType::Bytea, Int4, Int4];
        return text_fn(def, b, call, overlay_bytes, (3, 4), &params, DataType::Bytea);
    }
    text_fn(def, b, call, overlay_text, (3, 4), &[Text, Text, Int4, Int4], Text)
}

/// text_overlay's split of a string of `len` characters (or bytes) for
/// `overlay(.. FROM from FOR count)`: the length of the head kept before
/// the replacement and where the kept tail starts (substring from
/// `from + count` to the end, from the start when that is below 1).
fn overlay_split(len: usize, from: i64, count: i64) -> Result<(usize, usize)> {
    if from <= 0 {
        return Err(SqlError::new("22011", "negative substring length not allowed"));
    }
    let tail_from = from + count;
    if i32::try_from(tail_from).is_err() {
        return Err(SqlError::new("22003", "integer out of range"));
    }
    let at = |n: i64| usize::try_from(n).unwrap_or(0).min(len);
    Ok((at(from - 1), at(tail_from.max(1) - 1)))
}

fn overlay_text(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let (s, r) = (text(vals, 0), text(vals, 1));
    let chars: Vec<char> = s.chars().collect();
    let count = if vals.len() > 3 { int(vals, 3) } else { i64::try_from(r.chars().count()).unwrap_or(i64::MAX) };
    let (head, tail) = overlay_split(chars.len(), int(vals, 2), count)?;
    Ok(Value::Text(chars[..head].iter().copied().chain(r.chars()).chain(chars[tail..].iter().copied()).collect()))
}

fn overlay_bytes(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let (Some(Value::Bytea(s)), Some(Value::Bytea(r))) = (vals.first(), vals.get(1)) else { return Ok(Value::Null) };
    let count = if vals.len() > 3 { int(vals, 3) } else { i64::try_from(r.len()).unwrap_or(i64::MAX) };
    let (head, tail) = overlay_split(s.len(), int(vals, 2), count)?;
    Ok(Value::Bytea([&s[..head], r.as_slice(), &s[tail..]].concat()))
}

fn btrim(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let set = trim_set(vals);
    Ok(Value::Text(text(vals, 0).trim_matches(|c| set.contains(&c)).to_owned()))
}

fn ltrim(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let set = trim_set(vals);
    Ok(Value::Text(text(vals, 0).trim_start_matches(|c| set.contains(&c)).to_owned()))
}

fn rtrim(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let set = trim_set(vals);
    Ok(Value::Text(text(vals, 0).trim_end_matches(|c| set.contains(&c)).to_owned()))
}

fn replace(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let (s, from, to) = (text(vals, 0), text(vals, 1), text(vals, 2));
    Ok(Value::Text(if from.is_empty() { s.to_owned() } else { s.replace(from, to) }))
}

/// position(sub IN s): the arguments are (sub, s).
fn position(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let (sub, hay) = (text(vals, 0), text(vals, 1));
    let pos = hay.find(sub).map_or(0, |b| hay[..b].chars().count() + 1);
    Ok(Value::Int4(i32::try_from(pos).unwrap_or(0)))
}

/// The longest text value PostgreSQL builds (1 GB less its header).
const TEXT_BYTES_MAX: usize = (1 << 30) - 5;

fn repeat(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let s = text(vals, 0);
    let n = usize::try_from(int(vals, 1).max(0)).unwrap_or(0);
    if s.len().saturating_mul(n) > TEXT_BYTES_MAX {
        return Err(SqlError::new("54000", "requested length too large"));
    }
    Ok(Value::Text(s.repeat(n)))
}

/// split_part: field `n` of `s` split at `delimiter`, counted from the end
/// when negative (PostgreSQL 14+); field 0 is an error.
fn split_part(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let (s, delimiter, n) = (text(vals, 0), text(vals, 1), int(vals, 2));
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

/// left / right: the first or last `vals[1]` characters; a negative count
/// keeps all but that many from the other end.
fn left_or_right(vals: &[Value], left: bool) -> Value {
    let chars: Vec<char> = text(vals, 0).chars().collect();
    let len = i64::try_from(chars.len()).unwrap_or(i64::MAX);
    let n = int(vals, 1);
    let keep = usize::try_from(if n >= 0 { n.min(len) } else { (len + n).max(0) }).unwrap_or(0);
    Value::Text(if left { chars[..keep].iter().collect() } else { chars[chars.len() - keep..].iter().collect() })
}

fn left(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(left_or_right(vals, true))
}

fn right(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(left_or_right(vals, false))
}

fn initcap(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    // Words are runs of letters and digits; under the C locale only
    // ASCII ones are (and change case).
    let s = text(vals, 0);
    let mut out = String::with_capacity(s.len());
    let mut in_word = false;
    for c in s.chars() {
        out.push(if in_word { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() });
        in_word = c.is_ascii_alphanumeric();
    }
    Ok(Value::Text(out))
}

fn translate(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let from: Vec<char> = text(vals, 1).chars().collect();
    let to: Vec<char> = text(vals, 2).chars().collect();
    let out: String = text(vals, 0)
        .chars()
        .filter_map(|c| match from.iter().position(|&x| x == c) {
            Some(i) => to.get(i).copied(),
            None => Some(c),
        })
        .collect();
    Ok(Value::Text(out))
}

fn starts_with(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Bool(text(vals, 0).starts_with(text(vals, 1))))
}

/// to_hex of an int4: two's complement of that width.
#[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)]
fn to_hex_int4(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Text(format!("{:x}", int(vals, 0) as i32 as u32)))
}

#[allow(clippy::cast_sign_loss)]
fn to_hex_int8(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Text(format!("{:x}", int(vals, 0) as u64)))
}

fn concat(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let mut s = String::new();
    for v in vals {
        if !v.is_null() {
            value::write_text(v, &mut s);
        }
    }
    Ok(Value::Text(s))
}

/// concat_ws skips NULL arguments; only a NULL separator makes it NULL.
fn concat_ws(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let Some(sep) = vals.first().filter(|v| !v.is_null()) else { return Ok(Value::Null) };
    let sep = match sep {
        Value::Text(s) => s.as_str(),
        _ => "",
    };
    let mut s = String::new();
    for (k, v) in vals[1..].iter().filter(|v| !v.is_null()).enumerate() {
        if k > 0 {
            s.push_str(sep);
        }
        value::write_text(v, &mut s);
    }
    Ok(Value::Text(s))
}

fn reverse(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Text(text(vals, 0).chars().rev().collect()))
}

/// unistr (varlena.c): `\\` is a backslash; `\XXXX`, `\uXXXX`,
/// `\+XXXXXX` and `\UXXXXXXXX` are code points (UTF-16 surrogates only in
/// pairs); anything else after a backslash is 42601.
fn unistr(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let invalid_pair = || SqlError::new("42601", "invalid Unicode surrogate pair");
    let input = text(vals, 0);
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut pair_first: Option<u32> = None;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            if pair_first.is_some() {
                return Err(invalid_pair());
            }
            let c = input[i..].chars().next().unwrap_or('\0');
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let hex = |from: usize, n: usize| {
            input
                .get(from..from + n)
                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
        };
        let (code, used) = if bytes.get(i + 1) == Some(&b'\\') {
            if pair_first.is_some() {
                return Err(invalid_pair());
            }
            out.push('\\');
            i += 2;
            continue;
        } else if let Some(c) = hex(i + 1, 4) {
            (c, 5)
        } else if let (Some(b'u'), Some(c)) = (bytes.get(i + 1), hex(i + 2, 4)) {
            (c, 6)
        } else if let (Some(b'+'), Some(c)) = (bytes.get(i + 1), hex(i + 2, 6)) {
            (c, 8)
        } else if let (Some(b'U'), Some(c)) = (bytes.get(i + 1), hex(i + 2, 8)) {
            (c, 10)
        } else {
            return Err(SqlError::new("42601", "invalid Unicode escape")
                .with_hint("Unicode escapes must be \\XXXX, \\+XXXXXX, \\uXXXX, or \\UXXXXXXXX."));
        };
        if code == 0 || code > 0x10_FFFF {
            return Err(SqlError::new("22023", format!("invalid Unicode code point: {code:04X}")));
        }
        let second = (0xDC00..=0xDFFF).contains(&code);
        let code = match pair_first.take() {
            Some(first) if second => 0x10000 + ((first - 0xD800) << 10) + (code - 0xDC00),
            Some(_) => return Err(invalid_pair()),
            None if second => return Err(invalid_pair()),
            None if (0xD800..=0xDBFF).contains(&code) => {
                pair_first = Some(code);
                i += used;
                continue;
            }
            None => code,
        };
        out.push(char::from_u32(code).ok_or_else(invalid_pair)?);
        i += used;
    }
    if pair_first.is_some() {
        return Err(invalid_pair());
    }
    Ok(Value::Text(out))
}

/// md5 of a text's UTF-8 or of a bytea, as 32 hex digits.
fn md5(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    use md5::Digest as _;
    let digest = match &vals[0] {
        Value::Bytea(b) => md5::Md5::digest(b),
        _ => md5::Md5::digest(text(vals, 0).as_bytes()),
    };
    Ok(Value::Text(digest.iter().map(|b| format!("{b:02x}")).collect()))
}

/// chr(n): the character with code point `n` (UTF-8), PostgreSQL's errors.
pub(super) fn chr(n: i64) -> Result<Value> {
    if n < 0 {
        return Err(SqlError::new("22023", "character number must be positive"));
    }
    if n == 0 {
        return Err(SqlError::new("54000", "null character not permitted"));
    }
    let code = u32::try_from(n).ok().filter(|&c| c <= 0x10_FFFF);
    let Some(code) = code else {
        return Err(SqlError::new("54000", format!("requested character too large for encoding: {n}")));
    };
    let c = char::from_u32(code)
        .ok_or_else(|| SqlError::new("54000", format!("requested character not valid for encoding: {n}")))?;
    Ok(Value::Text(c.to_string()))
}

/// ascii(s): the code point of the first character; 0 for ''.
pub(super) fn ascii(s: &str) -> Value {
    Value::Int4(s.chars().next().map_or(0, |c| i32::try_from(u32::from(c)).unwrap_or(0)))
}

fn quoted_literal(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let mut out = String::new();
    quote_literal(text(vals, 0), &mut out);
    Ok(Value::Text(out))
}

/// quote_nullable: quote_literal, or the word NULL for NULL.
fn quote_nullable(vals: &[Value], ctx: &mut EvalCtx<'_>) -> Result<Value> {
    if vals[0].is_null() {
        return Ok(Value::Text("NULL".to_owned()));
    }
    quoted_literal(vals, ctx)
}

/// quote_literal: a string constant, E'' when it holds a backslash.
pub(super) fn quote_literal(s: &str, out: &mut String) {
    if s.contains('\\') {
        out.push('E');
    }
    out.push('\'');
    for c in s.chars() {
        if c == '\'' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
}

fn format_error(msg: impl Into<String>) -> SqlError {
    SqlError::new("22023", msg)
}

/// One conversion's position, flags and width (text_format_parse_format),
/// up to its type character.
struct FormatSpec {
    position: Option<usize>,
    width: Option<usize>,
    /// `*` (the next argument: Some(None)) or `*n$` (Some(Some(n))).
    width_from: Option<Option<usize>>,
    left: bool,
}

fn format_spec(chars: &[char], i: &mut usize) -> Result<FormatSpec> {
    let digits = |i: &mut usize| -> Result<Option<usize>> {
        let start = *i;
        while chars.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        if *i == start {
            return Ok(None);
        }
        let text: String = chars[start..*i].iter().collect();
        text.parse::<usize>()
            .ok()
            .filter(|n| i32::try_from(*n).is_ok())
            .map(Some)
            .ok_or_else(|| SqlError::new("22003", "number is out of range"))
    };
    let mut spec = FormatSpec { position: None, width: None, width_from: None, left: false };
    match digits(i)? {
        Some(n) if chars.get(*i) == Some(&'$') => {
            if n == 0 {
                return Err(format_error("format specifies argument 0, but arguments are numbered from 1"));
            }
            spec.position = Some(n);
            *i += 1;
        }
        Some(n) => {
            spec.width = Some(n);
            return Ok(spec);
        }
        None => {}
    }
    while chars.get(*i) == Some(&'-') {
        spec.left = true;
        *i += 1;
    }
    if chars.get(*i) != Some(&'*') {
        spec.width = digits(i)?;
        return Ok(spec);
    }
    *i += 1;
    spec.width_from = Some(match digits(i)? {
        Some(_) if chars.get(*i) != Some(&'$') => {
            return Err(format_error("width argument position must be ended by \"$\""));
        }
        Some(0) => return Err(format_error("format specifies argument 0, but arguments are numbered from 1")),
        Some(n) => {
            *i += 1;
            Some(n)
        }
        None => None,
    });
    Ok(spec)
}

/// A width taken from an argument: NULL is 0, smallint and integer as
/// they are, anything else through its text as an integer (22P02, 22003).
fn format_width(v: &Value) -> Result<i32> {
    match v {
        Value::Null => Ok(0),
        Value::Int2(n) => Ok(i32::from(*n)),
        Value::Int4(n) => Ok(*n),
        other => {
            let text = value::to_text(other);
            match text.trim().parse::<i64>() {
                Ok(n) => i32::try_from(n)
                    .map_err(|_| SqlError::new("22003", format!("value \"{text}\" is out of range for type integer"))),
                Err(_) => Err(SqlError::new("22P02", format!("invalid input syntax for type integer: \"{text}\""))),
            }
        }
    }
}

/// format(template, args...) (`vals[0]` the template): %s, %I, %L, %%,
/// positions `%n$`, the `-` flag and a width, given or taken from an
/// argument (`*`, `*n$`).
pub(super) fn format(vals: &[Value]) -> Result<Value> {
    let Some(Value::Text(template)) = vals.first() else { return Ok(Value::Null) };
    let args = &vals[1..];
    let chars: Vec<char> = template.chars().collect();
    let mut out = String::with_capacity(template.len());
    let mut next_arg = 0usize;
    let mut i = 0;
    let unterminated =
        || format_error("unterminated format() type specifier").with_hint("For a single \"%\" use \"%%\".");
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(&first) = chars.get(i) else { return Err(unterminated()) };
        if first == '%' {
            out.push('%');
            i += 1;
            continue;
        }
        let FormatSpec { position, mut width, width_from, mut left } = format_spec(&chars, &mut i)?;
        let Some(&kind) = chars.get(i) else { return Err(unterminated()) };
        i += 1;
        if !matches!(kind, 's' | 'I' | 'L') {
            return Err(format_error(format!("unrecognized format() type specifier \"{kind}\""))
                .with_hint("For a single \"%\" use \"%%\"."));
        }
        if let Some(from) = width_from {
            let index = from.map_or(next_arg, |p| p - 1);
            let Some(w) = args.get(index) else { return Err(format_error("too few arguments for format()")) };
            next_arg = index + 1;
            // A negative width aligns to the left (text_format_append_string).
            let w = format_width(w)?;
            left |= w < 0;
            width = Some(
                usize::try_from(w.checked_abs().ok_or_else(|| SqlError::new("22003", "number is out of range"))?)
                    .unwrap_or(0),
            );
        }
        let index = position.map_or(next_arg, |p| p - 1);
        let Some(arg) = args.get(index) else { return Err(format_error("too few arguments for format()")) };
        next_arg = index + 1;
        let mut piece = String::new();
        match (kind, arg) {
            ('I', Value::Null) => {
                return Err(SqlError::new("22004", "null values cannot be formatted as an SQL identifier"));
            }
            ('L', Value::Null) => piece.push_str("NULL"),
            (_, Value::Null) => {}
            ('s', v) => value::write_text(v, &mut piece),
            (k, v) => {
                let text = value::to_text(v);
                if k == 'I' { piece.push_str(&quote_ident(&text)) } else { quote_literal(&text, &mut piece) }
            }
        }
        let pad = width.unwrap_or(0).saturating_sub(piece.chars().count());
        if !left {
            out.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(&piece);
        if left {
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    Ok(Value::Text(out))
}
