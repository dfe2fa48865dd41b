//! The text search functions: to_tsvector (of text, json and jsonb),
//! json_to_tsvector / jsonb_to_tsvector, to_tsquery, plainto_tsquery,
//! ts_headline (of text, json and jsonb), the function-style casts
//! tsvector(x) / tsquery(x), and the `@@` operator's bindings. The
//! configuration argument is resolved when binding (a literal naming
//! simple or english) and passed to the evaluation as a constant.

use pgtier_engine::json::{self as ej, Json};
use pgtier_engine::{DataType, Value};

use super::registry::{ArgBinder, Call, EvalFn, FunctionDef, Ty, Volatility, text};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value::tsearch::{self, Config, TsVector};
use crate::value::tsquery::{self, HeadlineOptions, TsQuery};
use crate::value::types::{TSQUERY, TSVECTOR};
use crate::value::{Category, category};

pub(super) const DEFS: &[FunctionDef] = &[
    FunctionDef { names: &["to_tsvector"], volatility: Volatility::Immutable, resolve: resolve_to_tsvector },
    FunctionDef { names: &["json_to_tsvector"], volatility: Volatility::Immutable, resolve: resolve_json_to_tsvector },
    FunctionDef { names: &["jsonb_to_tsvector"], volatility: Volatility::Immutable, resolve: resolve_json_to_tsvector },
    FunctionDef { names: &["to_tsquery"], volatility: Volatility::Immutable, resolve: resolve_to_tsquery },
    FunctionDef { names: &["plainto_tsquery"], volatility: Volatility::Immutable, resolve: resolve_to_tsquery },
    FunctionDef { names: &["ts_headline"], volatility: Volatility::Immutable, resolve: resolve_headline },
    FunctionDef { names: &["tsvector", "tsquery"], volatility: Volatility::Immutable, resolve: resolve_cast_call },
];

/// PostgreSQL's default_text_search_config of the regression database
/// (pgtier's setting cannot name another, see settings/mod.rs).
const DEFAULT_CONFIG: Config = Config::English;

fn is_stringy(t: Ty) -> bool {
    t.is_none_or(|t| category(t) == Category::String)
}

/// The regconfig argument: an unknown literal naming a configuration.
fn config_arg(e: &Expr, t: Ty) -> Result<Expr> {
    match (e, t) {
        (Expr::Const(Value::Text(name)), None) => Ok(Expr::Const(Value::Text(Config::named(name)?.name().to_owned()))),
        (Expr::Const(Value::Null), _) => Ok(Expr::Const(Value::Null)),
        _ => Err(SqlError::unsupported("a text search configuration other than a literal")),
    }
}

fn config_of(vals: &[Value]) -> Result<Config> {
    Config::named(text(vals, 0))
}

/// The leading optional configuration: with it when there are `full`
/// arguments. Returns the configuration expression and the rest.
fn split_config(call: Call<'_>, full: usize) -> Result<(Expr, Vec<(Expr, Ty)>)> {
    let mut args = call.args;
    if args.len() == full {
        let (e, t) = args.remove(0);
        return Ok((config_arg(&e, t)?, args));
    }
    Ok((Expr::Const(Value::Text(DEFAULT_CONFIG.name().to_owned())), args))
}

fn resolve_to_tsvector(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    call.arity(1, 2)?;
    let undefined = call.undefined();
    let (config, mut args) = split_config(call, 2)?;
    let (doc, t) = args.remove(0);
    let (doc, eval): (Expr, EvalFn) = match t {
        Some(DataType::Json) => (doc, |v, _| json_tsvector(v, false)),
        Some(DataType::Jsonb) => (doc, |v, _| json_tsvector(v, true)),
        t if is_stringy(t) => (b.text_arg(doc, t, "to_tsvector")?, eval_to_tsvector),
        _ => return Err(undefined),
    };
    Ok((def.expr(eval, vec![config, doc]), Some(TSVECTOR)))
}

fn eval_to_tsvector(vals: &[Value], _: &mut super::registry::EvalCtx<'_>) -> Result<Value> {
    let mut pos = 0;
    let words = tsearch::parse_words(config_of(vals)?, text(vals, 1), &mut pos)?;
    Ok(Value::Text(TsVector::from_words(words)?.to_text()))
}

fn resolve_json_to_tsvector(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    call.arity(2, 3)?;
    let undefined = call.undefined();
    let jsonb = call.name == "jsonb_to_tsvector";
    let (config, mut args) = split_config(call, 3)?;
    let (filter, ft) = args.pop().ok_or_else(|| undefined.clone())?;
    let (doc, t) = args.pop().ok_or_else(|| undefined.clone())?;
    let want = if jsonb { DataType::Jsonb } else { DataType::Json };
    let doc = match t {
        Some(t) if t == want => doc,
        None => b.coerce(doc, None, want, call_name(jsonb))?,
        _ => return Err(undefined),
    };
    let filter = match ft {
        Some(DataType::Jsonb) => filter,
        None => b.coerce(filter, None, DataType::Jsonb, call_name(jsonb))?,
        _ => return Err(undefined),
    };
    let eval: EvalFn = if jsonb { |v, _| json_tsvector(v, true) } else { |v, _| json_tsvector(v, false) };
    Ok((def.expr(eval, vec![config, doc, filter]), Some(TSVECTOR)))
}

fn call_name(jsonb: bool) -> &'static str {
    if jsonb { "jsonb_to_tsvector" } else { "json_to_tsvector" }
}

/// What json[b]_to_tsvector indexes (parse_jsonb_index_flags).
#[derive(Clone, Copy, Default)]
struct Flags {
    string: bool,
    numeric: bool,
    boolean: bool,
    key: bool,
}

const FLAGS_HINT: &str = "Possible values are: \"string\", \"numeric\", \"boolean\", \"key\", and \"all\".";

fn parse_flags(filter: &str) -> Result<Flags> {
    let items = match ej::parse(filter, true) {
        Ok(Json::Array(items)) => items,
        Ok(Json::Object(_)) => {
            return Err(SqlError::new("22023", "wrong flag type, only arrays and scalars are allowed"));
        }
        Ok(scalar) => vec![scalar],
        Err(_) => return Err(SqlError::new("XX000", "invalid jsonb flag filter")),
    };
    let mut f = Flags::default();
    for item in items {
        let Json::String(s) = item else {
            return Err(SqlError::new("22023", "flag array element is not a string").with_hint(FLAGS_HINT));
        };
        match s.to_ascii_lowercase().as_str() {
            "all" => f = Flags { string: true, numeric: true, boolean: true, key: true },
            "key" => f.key = true,
            "string" => f.string = true,
            "numeric" => f.numeric = true,
            "boolean" => f.boolean = true,
            _ => {
                return Err(SqlError::new("22023", format!("wrong flag in flag array: \"{s}\"")).with_hint(FLAGS_HINT));
            }
        }
    }
    Ok(f)
}

/// A json text's numbers print as written there, jsonb's as numeric_out;
/// pgtier's parse keeps numeric_out, which differs from the written
/// token for exponents and negative zero: such json texts are refused.
fn json_numbers_verbatim(doc: &str) -> Result<()> {
    let b = doc.as_bytes();
    let exponent = b.windows(2).any(|w| w[0].is_ascii_digit() && matches!(w[1], b'e' | b'E'));
    if exponent || doc.contains("-0") {
        return Err(SqlError::unsupported("text search of json numbers written with exponents or as -0"));
    }
    Ok(())
}

/// to_tsvector / json[b]_to_tsvector of a document: each indexed item
/// parsed in document order, a position skipped after each that gave words.
fn json_tsvector(vals: &[Value], jsonb: bool) -> Result<Value> {
    let config = config_of(vals)?;
    let doc = match vals.get(1) {
        Some(Value::Json(s) | Value::Jsonb(s) | Value::Text(s)) => s.as_str(),
        _ => "",
    };
    let flags = match vals.get(2) {
        Some(Value::Jsonb(f) | Value::Text(f)) => parse_flags(f)?,
        _ => Flags { string: true, ..Flags::default() },
    };
    if !jsonb && flags.numeric {
        json_numbers_verbatim(doc)?;
    }
    let tree = ej::parse(doc, jsonb).map_err(|e| SqlError::new(e.sqlstate, e.detail))?;
    let mut items = Vec::new();
    collect_items(&tree, flags, &mut items);
    let mut pos = 0;
    let mut words = Vec::new();
    for item in items {
        let found = tsearch::parse_words(config, &item, &mut pos)?;
        if !found.is_empty() {
            pos += 1;
        }
        words.extend(found);
    }
    Ok(Value::Text(TsVector::from_words(words)?.to_text()))
}

fn collect_items(v: &Json, flags: Flags, out: &mut Vec<String>) {
    match v {
        Json::String(s) if flags.string => out.push(s.clone()),
        Json::Number(n) if flags.numeric => out.push(n.clone()),
        Json::Bool(b) if flags.boolean => out.push(b.to_string()),
        Json::Array(items) => items.iter().for_each(|i| collect_items(i, flags, out)),
        Json::Object(pairs) => {
            for (k, item) in pairs {
                if flags.key {
                    out.push(k.clone());
                }
                collect_items(item, flags, out);
            }
        }
        _ => {}
    }
}

fn resolve_to_tsquery(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    call.arity(1, 2)?;
    let undefined = call.undefined();
    let plain = call.name == "plainto_tsquery";
    let (config, mut args) = split_config(call, 2)?;
    let (q, t) = args.remove(0);
    if !is_stringy(t) {
        return Err(undefined);
    }
    let q = b.text_arg(q, t, "to_tsquery")?;
    let eval: EvalFn = if plain {
        |v, _| Ok(Value::Text(TsQuery::plain(config_of(v)?, text(v, 1))?.to_text()))
    } else {
        |v, _| Ok(Value::Text(TsQuery::normalized(config_of(v)?, text(v, 1))?.to_text()))
    };
    Ok((def.expr(eval, vec![config, q]), Some(TSQUERY)))
}

/// A tsquery argument: a tsquery, or an unknown literal read as one.
fn query_arg(e: Expr, t: Ty, undefined: SqlError) -> Result<Expr> {
    match (e, t) {
        (e, Some(TSQUERY)) => Ok(e),
        (Expr::Const(Value::Text(s)), None) => Ok(Expr::Const(Value::Text(TsQuery::parse(&s)?.to_text()))),
        (Expr::Const(Value::Null), None) => Ok(Expr::Const(Value::Null)),
        (_, None) => Err(SqlError::unsupported("a tsquery parameter")),
        _ => Err(undefined),
    }
}

fn resolve_headline(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    call.arity(2, 4)?;
    let undefined = call.undefined();
    // (config, doc, query[, options]) when the second argument is not a tsquery.
    let types = call.types();
    let with_config = match types.as_slice() {
        [_, _, _, _] => true,
        [_, _, Some(TSQUERY)] => true,
        [_, Some(TSQUERY), _] | [_, _] => false,
        _ => return Err(SqlError::unsupported("ts_headline with three arguments and no tsquery among them")),
    };
    let (config, args) = split_config(call, if with_config { types.len() } else { usize::MAX })?;
    let mut it = args.into_iter();
    let (doc, dt) = it.next().ok_or_else(|| undefined.clone())?;
    let (q, qt) = it.next().ok_or_else(|| undefined.clone())?;
    let query = query_arg(q, qt, undefined.clone())?;
    let mut exprs = vec![config, doc, query];
    if let Some((o, ot)) = it.next() {
        if !is_stringy(ot) {
            return Err(undefined);
        }
        exprs.push(b.text_arg(o, ot, "ts_headline")?);
    }
    let (eval, ty): (EvalFn, DataType) = match dt {
        Some(DataType::Json) => (|v, _| json_headline(v, false), DataType::Json),
        Some(DataType::Jsonb) => (|v, _| json_headline(v, true), DataType::Jsonb),
        t if is_stringy(t) => {
            exprs[1] = b.text_arg(exprs[1].clone(), t, "ts_headline")?;
            (text_headline, DataType::Text)
        }
        _ => return Err(undefined),
    };
    Ok((def.expr(eval, exprs), Some(ty)))
}

fn headline_parts(vals: &[Value]) -> Result<(Config, TsQuery, HeadlineOptions)> {
    let opts = match vals.get(3) {
        Some(Value::Text(o)) => Some(o.as_str()),
        _ => None,
    };
    Ok((config_of(vals)?, TsQuery::parse(text(vals, 2))?, HeadlineOptions::parse(opts)?))
}

fn text_headline(vals: &[Value], _: &mut super::registry::EvalCtx<'_>) -> Result<Value> {
    let (config, query, opts) = headline_parts(vals)?;
    Ok(Value::Text(tsquery::headline(config, text(vals, 1), &query, &opts)?))
}

/// ts_headline of a json[b] document: each string value replaced by its
/// headline; json comes back without whitespace, jsonb as jsonb.
fn json_headline(vals: &[Value], jsonb: bool) -> Result<Value> {
    let (config, query, opts) = headline_parts(vals)?;
    let doc = match vals.get(1) {
        Some(Value::Json(s) | Value::Jsonb(s) | Value::Text(s)) => s.as_str(),
        _ => "",
    };
    if !jsonb {
        json_numbers_verbatim(doc)?;
    }
    let tree = ej::parse(doc, jsonb).map_err(|e| SqlError::new(e.sqlstate, e.detail))?;
    let marked = mark_strings(tree, &|s| tsquery::headline(config, s, &query, &opts))?;
    if jsonb {
        return Ok(Value::Jsonb(marked.to_jsonb_text()));
    }
    let mut out = String::new();
    write_compact(&marked, &mut out);
    Ok(Value::Json(out))
}

fn mark_strings(v: Json, f: &dyn Fn(&str) -> Result<String>) -> Result<Json> {
    Ok(match v {
        Json::String(s) => Json::String(f(&s)?),
        Json::Array(items) => Json::Array(items.into_iter().map(|i| mark_strings(i, f)).collect::<Result<_>>()?),
        Json::Object(pairs) => {
            Json::Object(pairs.into_iter().map(|(k, i)| Ok((k, mark_strings(i, f)?))).collect::<Result<Vec<_>>>()?)
        }
        other => other,
    })
}

/// transform_json_string_values' output: the tokens without whitespace.
fn write_compact(v: &Json, out: &mut String) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n),
        Json::String(s) => ej::escape_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (k, i) in items.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                write_compact(i, out);
            }
            out.push(']');
        }
        Json::Object(pairs) => {
            out.push('{');
            for (k, (key, i)) in pairs.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                ej::escape_string(out, key);
                out.push(':');
                write_compact(i, out);
            }
            out.push('}');
        }
    }
}

/// `tsquery('...')` and `tsvector('...')`: the function-style casts.
fn resolve_cast_call(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    call.arity(1, 1)?;
    let vector = call.name == "tsvector";
    let undefined = call.undefined();
    let (e, t) = call.single()?;
    cast_from_text(def, b, e, t, vector)
        .map_err(|err| if t.is_some_and(|t| category(t) != Category::String) { undefined } else { err })
}

/// text (or an unknown literal) to tsvector or tsquery: tsvectorin / tsqueryin.
pub fn cast_from_text(
    def: &'static FunctionDef,
    b: &mut dyn ArgBinder,
    e: Expr,
    t: Ty,
    vector: bool,
) -> Result<(Expr, Ty)> {
    let ty = if vector { TSVECTOR } else { TSQUERY };
    match (&e, t) {
        (_, Some(t)) if t == ty => Ok((e, Some(ty))),
        (Expr::Const(Value::Null), _) => Ok((e, Some(ty))),
        (_, t) if is_stringy(t) => {
            let e = b.text_arg(e, t, if vector { "tsvector" } else { "tsquery" })?;
            let eval: EvalFn = if vector {
                |v, _| Ok(Value::Text(TsVector::parse(text(v, 0))?.to_text()))
            } else {
                |v, _| Ok(Value::Text(TsQuery::parse(text(v, 0))?.to_text()))
            };
            Ok((def.expr(eval, vec![e]), Some(ty)))
        }
        _ => Err(SqlError::unsupported("this cast to a text search type")),
    }
}

/// The definition the casts evaluate through (for `::tsvector` and `::tsquery`).
pub fn cast_def() -> &'static FunctionDef {
    &DEFS[DEFS.len() - 1]
}

/// `x @@ y` over the text search types: tsvector @@ tsquery, tsquery @@
/// tsvector, text @@ tsquery and text @@ text (against plainto_tsquery).
pub fn bind_match(b: &mut dyn ArgBinder, (x, xt): (Expr, Ty), (y, yt): (Expr, Ty)) -> Result<(Expr, Ty)> {
    let def = cast_def();
    let undefined = || SqlError::undefined_operator(&format!("{} @@ {}", name(xt), name(yt)));
    let (doc, query, eval): (Expr, Expr, EvalFn) = match (xt, yt) {
        (Some(TSVECTOR), _) => (x, query_arg(y, yt, undefined())?, eval_match),
        (Some(TSQUERY), Some(TSVECTOR)) => (y, x, eval_match),
        (Some(TSQUERY), None) => (cast_from_text(def, b, y, None, true)?.0, x, eval_match),
        (Some(t), Some(TSQUERY)) if category(t) == Category::String => (b.text_arg(x, xt, "@@")?, y, eval_text_match),
        (Some(t), _) if category(t) == Category::String && is_stringy(yt) => {
            (b.text_arg(x, xt, "@@")?, b.text_arg(y, yt, "@@")?, eval_text_plain_match)
        }
        (None, _) => return Err(SqlError::unsupported("@@ with an untyped left operand")),
        _ => return Err(undefined()),
    };
    Ok((def.expr(eval, vec![doc, query]), Some(DataType::Bool)))
}

fn name(t: Ty) -> &'static str {
    t.map_or("unknown", crate::value::type_name)
}

fn eval_match(vals: &[Value], _: &mut super::registry::EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Bool(TsQuery::parse(text(vals, 1))?.matches(&TsVector::parse(text(vals, 0))?)))
}

fn doc_of(text: &str) -> Result<TsVector> {
    let mut pos = 0;
    TsVector::from_words(tsearch::parse_words(DEFAULT_CONFIG, text, &mut pos)?)
}

fn eval_text_match(vals: &[Value], _: &mut super::registry::EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Bool(TsQuery::parse(text(vals, 1))?.matches(&doc_of(text(vals, 0))?)))
}

fn eval_text_plain_match(vals: &[Value], _: &mut super::registry::EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Bool(TsQuery::plain(DEFAULT_CONFIG, text(vals, 1))?.matches(&doc_of(text(vals, 0))?)))
}
