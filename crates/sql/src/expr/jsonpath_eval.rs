//! The SQL/JSON path language: evaluation (PostgreSQL 15's
//! jsonpath_exec.c, depth first in its order so that partial results and
//! the first match are its). Lax mode unwraps arrays one level and wraps
//! non-arrays for array accessors and ignores structural errors; strict
//! mode raises them (2203A, 2203C, 22039, 22033). Errors in a predicate's
//! operands make it unknown; `silent` suppresses every error but a missing
//! variable (42704) and pgtier's own refusals (0A000).

use std::cmp::Ordering;

use pgtier_engine::json::Json;
use pgtier_engine::{DataType, Value};

use super::jsonpath::{self, Cmp, JsonPath, Method, Node, Step};
use crate::error::{Result, SqlError};
use crate::value::json::PathFunc;
use crate::value::{self, ArithOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tri {
    True,
    False,
    Unknown,
}

impl Tri {
    fn of(b: bool) -> Tri {
        if b { Tri::True } else { Tri::False }
    }
}

/// Errors silent mode (and a predicate) cannot hide.
fn is_hard(e: &SqlError) -> bool {
    matches!(e.sqlstate, "42704" | "0A000" | "54001" | "57014" | "53200")
}

struct Ctx<'a> {
    root: &'a Json,
    vars: &'a [(String, Json)],
    strict: bool,
}

fn err(code: &'static str, msg: impl Into<String>) -> SqlError {
    SqlError::new(code, msg.into())
}

fn numeric(n: &str) -> Result<Value> {
    value::parse_input(n, value::NUMERIC_ANY).map_err(|_| SqlError::unsupported(format!("jsonpath on number {n}")))
}

fn number_json(v: &Value) -> Json {
    Json::Number(value::to_text(v))
}

/// The items of `seq`, arrays unwrapped one level in lax mode.
fn unwrapped(seq: Vec<Json>, strict: bool) -> Vec<Json> {
    if strict {
        return seq;
    }
    let mut out = Vec::with_capacity(seq.len());
    for j in seq {
        match j {
            Json::Array(items) => out.extend(items),
            other => out.push(other),
        }
    }
    out
}

impl Ctx<'_> {
    /// Every item `node` yields for the current item `cur` (`first`: stop
    /// at the first one, as an existence test does in lax mode).
    fn eval(&self, node: &Node, cur: &Json, last: i64, out: &mut Vec<Json>, first: bool) -> Result<()> {
        match node {
            Node::Root => out.push(self.root.clone()),
            Node::Current => out.push(cur.clone()),
            Node::Last => out.push(Json::Number(last.to_string())),
            Node::Lit(j) => out.push(j.clone()),
            Node::Var(name) => match self.vars.iter().rev().find(|(k, _)| k == name) {
                Some((_, v)) => out.push(v.clone()),
                None => return Err(err("42704", format!("could not find jsonpath variable \"{name}\""))),
            },
            Node::Chain(primary, steps) => {
                let mut items = Vec::new();
                self.eval(primary, cur, last, &mut items, false)?;
                for item in items {
                    self.steps(item, steps, false, cur, last, out, first)?;
                    if first && !out.is_empty() {
                        break;
                    }
                }
            }
            Node::Arith(op, l, r) => out.push(self.arith(*op, l, r, cur, last)?),
            Node::Unary(minus, inner) => {
                let mut items = Vec::new();
                self.eval(inner, cur, last, &mut items, false)?;
                for item in unwrapped(items, self.strict) {
                    // An existence test skips what is no number (executeUnaryArithmExpr).
                    if first && !matches!(item, Json::Number(_)) {
                        continue;
                    }
                    let Json::Number(n) = &item else {
                        return Err(err(
                            "2203B",
                            format!(
                                "operand of unary jsonpath operator {} is not a numeric value",
                                if *minus { "-" } else { "+" }
                            ),
                        ));
                    };
                    if *minus {
                        let v = value::arith(ArithOp::Sub, &Value::Int4(0), &numeric(n)?, value::NUMERIC_ANY)?;
                        out.push(number_json(&v));
                    } else {
                        out.push(item);
                    }
                    if first {
                        break;
                    }
                }
            }
            pred => {
                out.push(match self.pred(pred, cur, last)? {
                    Tri::True => Json::Bool(true),
                    Tri::False => Json::Bool(false),
                    Tri::Unknown => Json::Null,
                });
            }
        }
        Ok(())
    }

    fn arith(&self, op: ArithOp, l: &Node, r: &Node, cur: &Json, last: i64) -> Result<Json> {
        let mut operands = Vec::new();
        for (side, node) in [("left", l), ("right", r)] {
            let mut items = Vec::new();
            self.eval(node, cur, last, &mut items, false)?;
            operands.push((side, unwrapped(items, self.strict)));
        }
        let mut nums = Vec::new();
        for (side, items) in operands {
            match items.as_slice() {
                [Json::Number(n)] => nums.push(numeric(n)?),
                _ => {
                    return Err(err(
                        "22038",
                        format!("{side} operand of jsonpath operator {} is not a single numeric value", op.symbol()),
                    ));
                }
            }
        }
        let v = value::arith(op, &nums[0], &nums[1], value::NUMERIC_ANY)?;
        Ok(number_json(&v))
    }

    /// Applies `steps` to `item` (`ignore`: structural errors are not
    /// raised, after `.**`).
    #[allow(clippy::too_many_arguments)]
    fn steps(
        &self,
        item: Json,
        steps: &[Step],
        ignore: bool,
        cur: &Json,
        last: i64,
        out: &mut Vec<Json>,
        first: bool,
    ) -> Result<()> {
        let Some((step, rest)) = steps.split_first() else {
            out.push(item);
            return Ok(());
        };
        let strict = self.strict && !ignore;
        // Lax mode applies these to an array's elements (one level).
        let unwraps = matches!(step, Step::Key(_) | Step::AnyKey | Step::Filter(_))
            || matches!(step, Step::Method(m) if !matches!(m, Method::Type | Method::Size));
        if unwraps && !self.strict && matches!(item, Json::Array(_)) {
            let Json::Array(items) = item else { return Ok(()) };
            for el in items {
                self.one_step(el, step, rest, strict, ignore, cur, last, out, first)?;
                if first && !out.is_empty() {
                    break;
                }
            }
            return Ok(());
        }
        self.one_step(item, step, rest, strict, ignore, cur, last, out, first)
    }

    #[allow(clippy::too_many_arguments)]
    fn one_step(
        &self,
        item: Json,
        step: &Step,
        rest: &[Step],
        strict: bool,
        ignore: bool,
        cur: &Json,
        last: i64,
        out: &mut Vec<Json>,
        first: bool,
    ) -> Result<()> {
        let mut next = |j: Json, out: &mut Vec<Json>| -> Result<bool> {
            self.steps(j, rest, ignore, cur, last, out, first)?;
            Ok(first && !out.is_empty())
        };
        match (step, item) {
            (Step::Key(k), Json::Object(pairs)) => match pairs.into_iter().rev().find(|(pk, _)| pk == k) {
                Some((_, v)) => {
                    next(v, out)?;
                }
                None if strict => return Err(err("2203A", format!("JSON object does not contain key \"{k}\""))),
                None => {}
            },
            (Step::Key(_), _) if strict => {
                return Err(err("2203A", "jsonpath member accessor can only be applied to an object"));
            }
            (Step::Key(_), _) => {}
            (Step::AnyKey, Json::Object(pairs)) => {
                for (_, v) in pairs {
                    if next(v, out)? {
                        break;
                    }
                }
            }
            (Step::AnyKey, _) if strict => {
                return Err(err("2203C", "jsonpath wildcard member accessor can only be applied to an object"));
            }
            (Step::AnyKey, _) => {}
            (Step::AnyIndex, Json::Array(items)) => {
                for v in items {
                    if next(v, out)? {
                        break;
                    }
                }
            }
            (Step::AnyIndex, _) if strict => {
                return Err(err("22039", "jsonpath wildcard array accessor can only be applied to an array"));
            }
            (Step::AnyIndex, other) => {
                next(other, out)?;
            }
            (Step::Index(subs), item) => self.index(item, subs, strict, &mut next, out)?,
            (Step::AnyPath(lo, hi), item) => self.any_path(item, *lo, *hi, rest, cur, last, out, first)?,
            (Step::Filter(pred), item) => {
                if self.pred(pred, &item, last)? == Tri::True {
                    next(item, out)?;
                }
            }
            (Step::Method(m), item) => {
                if let Some(j) = self.method(*m, item, strict)? {
                    next(j, out)?;
                }
            }
        }
        Ok(())
    }

    /// One subscript's value: a single number, truncated to an int4.
    fn subscript(&self, node: &Node, item: &Json, last: i64) -> Result<i64> {
        let mut items = Vec::new();
        self.eval(node, item, last, &mut items, false)?;
        let not_single = || err("22033", "jsonpath array subscript is not a single numeric value");
        let [Json::Number(n)] = items.as_slice() else { return Err(not_single()) };
        let v = numeric(n)?;
        let t = value::cast(v, DataType::Float8, true)?;
        let f = match t {
            Value::Float8(f) => f.trunc(),
            _ => return Err(not_single()),
        };
        if !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&f) {
            return Err(err("22033", "jsonpath array subscript is out of integer range"));
        }
        // The float is integral and in range.
        Ok(f as i64)
    }

    fn index(
        &self,
        item: Json,
        subs: &[(Node, Option<Node>)],
        strict: bool,
        next: &mut dyn FnMut(Json, &mut Vec<Json>) -> Result<bool>,
        out: &mut Vec<Json>,
    ) -> Result<()> {
        let items = match item {
            Json::Array(items) => items,
            other if !self.strict => vec![other],
            _ if strict => return Err(err("22039", "jsonpath array accessor can only be applied to an array")),
            _ => return Ok(()),
        };
        let size = i64::try_from(items.len()).unwrap_or(i64::MAX);
        let array = Json::Array(items);
        let Json::Array(items) = &array else { return Ok(()) };
        for (from, to) in subs {
            let lo = self.subscript(from, &array, size - 1)?;
            let hi = match to {
                Some(to) => self.subscript(to, &array, size - 1)?,
                None => lo,
            };
            if strict && (lo < 0 || lo > hi || hi >= size) {
                return Err(err("22033", "jsonpath array subscript is out of bounds"));
            }
            let (lo, hi) = (lo.max(0), hi.min(size - 1));
            let mut k = lo;
            while k <= hi {
                let el = usize::try_from(k).ok().and_then(|k| items.get(k)).cloned().unwrap_or(Json::Null);
                if next(el, out)? {
                    return Ok(());
                }
                k += 1;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn any_path(
        &self,
        item: Json,
        lo: u32,
        hi: u32,
        rest: &[Step],
        cur: &Json,
        last: i64,
        out: &mut Vec<Json>,
        first: bool,
    ) -> Result<()> {
        if lo == 0 {
            self.steps(item.clone(), rest, true, cur, last, out, first)?;
            if first && !out.is_empty() {
                return Ok(());
            }
        }
        self.any_level(&item, 1, lo, hi, rest, cur, last, out, first)
    }

    /// executeAnyItem: the children of `j` at `level` and below.
    #[allow(clippy::too_many_arguments)]
    fn any_level(
        &self,
        j: &Json,
        level: u32,
        lo: u32,
        hi: u32,
        rest: &[Step],
        cur: &Json,
        last: i64,
        out: &mut Vec<Json>,
        first: bool,
    ) -> Result<()> {
        if level > hi {
            return Ok(());
        }
        let children: Vec<&Json> = match j {
            Json::Object(pairs) => pairs.iter().map(|(_, v)| v).collect(),
            Json::Array(items) => items.iter().collect(),
            _ => return Ok(()),
        };
        for v in children {
            let container = matches!(v, Json::Array(_) | Json::Object(_));
            if level >= lo || (lo == u32::MAX && hi == u32::MAX && !container) {
                match v {
                    Json::Array(items) if !self.strict && !rest.is_empty() => {
                        for el in items {
                            self.steps(el.clone(), rest, true, cur, last, out, first)?;
                        }
                    }
                    _ => self.steps(v.clone(), rest, true, cur, last, out, first)?,
                }
                if first && !out.is_empty() {
                    return Ok(());
                }
            }
            if level < hi && container {
                self.any_level(v, level + 1, lo, hi, rest, cur, last, out, first)?;
                if first && !out.is_empty() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn method(&self, m: Method, item: Json, strict: bool) -> Result<Option<Json>> {
        let name = m.name();
        Ok(Some(match (m, item) {
            (Method::Type, j) => Json::String(j.type_name().to_owned()),
            (Method::Size, Json::Array(items)) => Json::Number(items.len().to_string()),
            (Method::Size, _) if strict => {
                return Err(err("22039", "jsonpath item method .size() can only be applied to an array"));
            }
            (Method::Size, _) => Json::Number("1".to_owned()),
            (Method::Double, Json::Number(n)) => {
                let f = n.trim().parse::<f64>().unwrap_or(f64::INFINITY);
                if !f.is_finite() {
                    return Err(err(
                        "22036",
                        "numeric argument of jsonpath item method .double() is out of range for type double precision",
                    ));
                }
                Json::Number(n)
            }
            (Method::Double, Json::String(s)) => {
                let bad = || {
                    err(
                        "22036",
                        "string argument of jsonpath item method .double() is not a valid representation of a double precision number",
                    )
                };
                let f = match value::parse_input(&s, DataType::Float8) {
                    Ok(Value::Float8(f)) if f.is_finite() => f,
                    _ => return Err(bad()),
                };
                number_json(&value::cast(Value::Float8(f), value::NUMERIC_ANY, true)?)
            }
            (Method::Double, _) => {
                return Err(err(
                    "22036",
                    "jsonpath item method .double() can only be applied to a string or numeric value",
                ));
            }
            (Method::Ceiling | Method::Floor | Method::Abs, Json::Number(n)) => {
                number_json(&crate::expr::functions::numeric_method(name, numeric(&n)?)?)
            }
            (_, _) => {
                return Err(err(
                    "22036",
                    format!("jsonpath item method .{name}() can only be applied to a numeric value"),
                ));
            }
        }))
    }

    /// A predicate's truth.
    fn pred(&self, node: &Node, cur: &Json, last: i64) -> Result<Tri> {
        Ok(match node {
            Node::And(l, r) => match self.pred(l, cur, last)? {
                Tri::False => Tri::False,
                lt => match self.pred(r, cur, last)? {
                    Tri::True => lt,
                    rt => rt,
                },
            },
            Node::Or(l, r) => match self.pred(l, cur, last)? {
                Tri::True => Tri::True,
                lt => match self.pred(r, cur, last)? {
                    Tri::False => lt,
                    rt => rt,
                },
            },
            Node::Not(inner) => match self.pred(inner, cur, last)? {
                Tri::True => Tri::False,
                Tri::False => Tri::True,
                Tri::Unknown => Tri::Unknown,
            },
            Node::IsUnknown(inner) => Tri::of(self.pred(inner, cur, last)? == Tri::Unknown),
            Node::Exists(inner) => {
                let mut items = Vec::new();
                match self.eval(inner, cur, last, &mut items, !self.strict) {
                    Ok(()) => Tri::of(!items.is_empty()),
                    Err(e) if is_hard(&e) => return Err(e),
                    Err(_) => Tri::Unknown,
                }
            }
            Node::Cmp(op, l, r) => self.binary_pred(l, Some(r), true, cur, last, &|a, b| compare(*op, a, b))?,
            Node::StartsWith(l, r) => self.binary_pred(l, Some(r), false, cur, last, &|a, b| {
                Ok(match (a, b) {
                    (Json::String(s), Some(Json::String(p))) => Tri::of(s.starts_with(p.as_str())),
                    _ => Tri::Unknown,
                })
            })?,
            Node::LikeRegex(l, pattern, flags) => self.binary_pred(l, None, false, cur, last, &|a, _| {
                Ok(match a {
                    Json::String(s) => Tri::of(like_regex(s, pattern, flags)?),
                    _ => Tri::Unknown,
                })
            })?,
            other => {
                // Not a predicate: the parser lets none through.
                let _ = other;
                Tri::Unknown
            }
        })
    }

    /// executePredicate: the operands' items (errors make it unknown), the
    /// test over every pair; lax mode answers at the first true pair,
    /// strict mode looks at all of them for an error first.
    fn binary_pred(
        &self,
        l: &Node,
        r: Option<&Node>,
        unwrap_right: bool,
        cur: &Json,
        last: i64,
        test: &dyn Fn(&Json, Option<&Json>) -> Result<Tri>,
    ) -> Result<Tri> {
        let operand = |n: &Node, unwrap: bool| -> Result<Option<Vec<Json>>> {
            let mut items = Vec::new();
            match self.eval(n, cur, last, &mut items, false) {
                Ok(()) => Ok(Some(if unwrap { unwrapped(items, self.strict) } else { items })),
                Err(e) if is_hard(&e) => Err(e),
                Err(_) => Ok(None),
            }
        };
        let Some(left) = operand(l, true)? else { return Ok(Tri::Unknown) };
        let right = match r {
            Some(r) => match operand(r, unwrap_right)? {
                Some(items) => Some(items),
                None => return Ok(Tri::Unknown),
            },
            None => None,
        };
        let (mut found, mut error) = (false, false);
        for a in &left {
            let results: Vec<Tri> = match &right {
                Some(items) => items.iter().map(|b| test(a, Some(b))).collect::<Result<_>>()?,
                None => vec![test(a, None)?],
            };
            for res in results {
                match res {
                    Tri::Unknown if self.strict => return Ok(Tri::Unknown),
                    Tri::Unknown => error = true,
                    Tri::True if !self.strict => return Ok(Tri::True),
                    Tri::True => found = true,
                    Tri::False => {}
                }
            }
        }
        Ok(if found {
            Tri::True
        } else if error {
            Tri::Unknown
        } else {
            Tri::False
        })
    }
}

/// like_regex: XQuery flags over PostgreSQL's regular expressions. `q`
/// is a substring test; `s` is the `~` operator's mode. Without `s`, `.`
/// and bracket expressions do not match a newline (REG_NLSTOP) and `m`
/// anchors at newlines: where that could change the answer (a newline in
/// the string and `.`, `[` or `\` in the pattern, or `m`), 0A000.
fn like_regex(s: &str, pattern: &str, flags: &str) -> Result<bool> {
    let ci = flags.contains('i');
    if flags.contains('q') {
        if !ci {
            return Ok(s.contains(pattern));
        }
        if !s.is_ascii() || !pattern.is_ascii() {
            return Err(SqlError::unsupported("like_regex flag \"iq\" on non-ASCII text"));
        }
        return Ok(s.to_ascii_lowercase().contains(&pattern.to_ascii_lowercase()));
    }
    if s.contains('\n') && !flags.contains('s') && (flags.contains('m') || pattern.contains(['.', '[', '\\'])) {
        return Err(SqlError::unsupported(
            "like_regex without flag \"s\" on a string with a newline (newline-sensitive matching)",
        ));
    }
    if s.contains('\n') && flags.contains('m') {
        return Err(SqlError::unsupported("like_regex flag \"m\" on a string with a newline"));
    }
    crate::expr::functions::regex_is_match(s, pattern, ci)
}

/// compareItems: null against a non-null is false (true for `!=`), other
/// mixed kinds and containers are unknown, strings compare by code point.
fn compare(op: Cmp, a: &Json, b: Option<&Json>) -> Result<Tri> {
    let Some(b) = b else { return Ok(Tri::Unknown) };
    let kind = |j: &Json| match j {
        Json::Null => 0,
        Json::Bool(_) => 1,
        Json::Number(_) => 2,
        Json::String(_) => 3,
        Json::Array(_) | Json::Object(_) => 4,
    };
    if kind(a) != kind(b) {
        if matches!(a, Json::Null) || matches!(b, Json::Null) {
            return Ok(Tri::of(op == Cmp::Ne));
        }
        return Ok(Tri::Unknown);
    }
    let ord = match (a, b) {
        (Json::Null, Json::Null) => Ordering::Equal,
        (Json::Bool(x), Json::Bool(y)) => x.cmp(y),
        (Json::Number(x), Json::Number(y)) => value::compare(&numeric(x)?, &numeric(y)?).unwrap_or(Ordering::Equal),
        (Json::String(x), Json::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        _ => return Ok(Tri::Unknown),
    };
    Ok(Tri::of(match op {
        Cmp::Eq => ord == Ordering::Equal,
        Cmp::Ne => ord != Ordering::Equal,
        Cmp::Lt => ord == Ordering::Less,
        Cmp::Le => ord != Ordering::Greater,
        Cmp::Gt => ord == Ordering::Greater,
        Cmp::Ge => ord != Ordering::Less,
    }))
}

/// Runs `path` over `target`: the items in order, and the error that
/// stopped the evaluation (the items before it are kept, as PostgreSQL
/// keeps them in silent mode).
fn run(path: &JsonPath, target: &Json, vars: &[(String, Json)], first: bool) -> (Vec<Json>, Option<SqlError>) {
    let cx = Ctx { root: target, vars, strict: path.strict };
    let mut out = Vec::new();
    let e = cx.eval(&path.expr, target, -1, &mut out, first).err();
    (out, e)
}

/// The jsonpath functions and the `@?` / `@@` operators on their
/// arguments (target, path text, [vars, [silent]]); NULL in, NULL out.
pub fn eval(f: PathFunc, vals: &[Value]) -> Result<Value> {
    if vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let target = crate::value::json::tree(&vals[0])?;
    let path = jsonpath::parse(vals.get(1).and_then(Value::as_str).unwrap_or(""))?;
    let vars = match vals.get(2) {
        Some(v) => match crate::value::json::tree(v)? {
            Json::Object(pairs) => pairs,
            _ => {
                return Err(err("22023", "\"vars\" argument is not an object")
                    .with_detail("Jsonpath parameters should be encoded as key-value pairs of \"vars\" object."));
            }
        },
        None => Vec::new(),
    };
    let silent = matches!(f, PathFunc::ExistsOp | PathFunc::MatchOp) || matches!(vals.get(3), Some(Value::Bool(true)));
    let first = matches!(f, PathFunc::Exists | PathFunc::ExistsOp) && !path.strict;
    let (items, error) = run(&path, &target, &vars, first);
    let jsonb = |j: &Json| Value::Jsonb(j.clone().into_jsonb().to_jsonb_text());
    // A silenced error: jsonb_path_exists answers NULL; the others answer
    // from the items found before it, as PostgreSQL does.
    if let Some(e) = error {
        if !silent || is_hard(&e) {
            return Err(e);
        }
        if matches!(f, PathFunc::Exists | PathFunc::ExistsOp) {
            return Ok(Value::Null);
        }
    }
    Ok(match f {
        PathFunc::Exists | PathFunc::ExistsOp => Value::Bool(!items.is_empty()),
        PathFunc::Match | PathFunc::MatchOp => match items.as_slice() {
            [Json::Bool(b)] => Value::Bool(*b),
            [Json::Null] => Value::Null,
            _ if silent => Value::Null,
            _ => return Err(err("22038", "single boolean result is expected")),
        },
        PathFunc::QueryArray => Value::Jsonb(Json::Array(items).into_jsonb().to_jsonb_text()),
        PathFunc::QueryFirst => items.first().map_or(Value::Null, jsonb),
        PathFunc::Query => return Err(SqlError::unsupported("jsonb_path_query in this position")),
    })
}

/// The rows of jsonb_path_query (one jsonb per item).
pub fn query_rows(vals: &[Value]) -> Result<Vec<Vec<Value>>> {
    if vals.iter().any(Value::is_null) {
        return Ok(Vec::new());
    }
    let target = crate::value::json::tree(&vals[0])?;
    let path = jsonpath::parse(vals.get(1).and_then(Value::as_str).unwrap_or(""))?;
    let vars = match vals.get(2) {
        Some(v) => match crate::value::json::tree(v)? {
            Json::Object(pairs) => pairs,
            _ => {
                return Err(err("22023", "\"vars\" argument is not an object")
                    .with_detail("Jsonpath parameters should be encoded as key-value pairs of \"vars\" object."));
            }
        },
        None => Vec::new(),
    };
    let silent = matches!(vals.get(3), Some(Value::Bool(true)));
    let (items, error) = run(&path, &target, &vars, false);
    if let Some(e) = error
        && (!silent || is_hard(&e))
    {
        return Err(e);
    }
    Ok(items.into_iter().map(|j| vec![Value::Jsonb(j.into_jsonb().to_jsonb_text())]).collect())
}
