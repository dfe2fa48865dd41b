//! SQL text to statements: sqlparser (PostgreSQL dialect), plus the one
//! place PostgreSQL's grammar is wider than sqlparser's.
//!
//! Sequence options (CREATE SEQUENCE, `GENERATED ... AS IDENTITY (...)`)
//! may come in any order in PostgreSQL; sqlparser accepts only INCREMENT,
//! MINVALUE, MAXVALUE, START, CACHE, CYCLE in that order, and pg_dump writes
//! START before INCREMENT. When parsing fails and the text holds sequence
//! options, they are put in sqlparser's order (tokens moved, none changed)
//! and the text is parsed once more; if that fails too, the first error is
//! the one reported.
//!
//! Window frames are where PostgreSQL's grammar is wider too: parse_window.rs
//! adjusts their tokens before sqlparser reads them. parse_sort.rs rewrites
//! `ORDER BY x USING <` and `FROM t*` in a text that failed to parse.

use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;

use crate::dialect::PgDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Span, Token, Tokenizer};

/// Statements of `sql`; `RecursionLimitExceeded` (54001) when an
/// expression would be deeper than `depth::depth_limit()` (see depth.rs),
/// decided on the tokens so that such a tree is never built.
pub fn parse_sql(sql: &str) -> Result<Vec<Statement>, ParserError> {
    if let Some(fetch) = parse_fetch(sql) {
        return fetch.map(|s| vec![s]);
    }
    let first = parse_bounded(sql).and_then(no_fetch_into);
    if first.is_ok() {
        return first;
    }
    let fixed = reorder_sequence_options(sql)
        .or_else(|| rewrite_subscripted_insert(sql).map(|s| rewrite_subscripted_update(&s).unwrap_or(s)))
        .or_else(|| rewrite_subscripted_update(sql))
        .or_else(|| crate::parse_sort::rewrite_sort_forms(sql));
    match fixed {
        Some(fixed) => parse_bounded(&fixed).or(first),
        None => first,
    }
}

fn parse_bounded(sql: &str) -> Result<Vec<Statement>, ParserError> {
    let dialect = PgDialect::default();
    let mut tokens = Tokenizer::new(&dialect, sql).tokenize_with_location()?;
    if crate::depth::estimated_depth(tokens.iter().map(|t| &t.token)) > crate::depth::depth_limit() {
        return Err(ParserError::RecursionLimitExceeded);
    }
    crate::parse_window::frame_tokens(&mut tokens);
    Parser::new(&dialect).with_tokens_with_locations(tokens).parse_statements()
}

/// What a text that failed to parse is, when PostgreSQL 15 takes it and
/// pgtier lacks it: its name for a 0A000 refusal instead of sqlparser's
/// syntax error (42601 says the text is wrong, which it is not). CREATE
/// [OR REPLACE] RULE dialect.rs does not read (ON SELECT), DROP RULE,
/// and UPDATE's subscripted assignment
/// (`SET a[2] = ...`, `SET j['k'] = ...`). Only a text of one statement.
pub fn unsupported_form(sql: &str) -> Option<&'static str> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let tokens: Vec<&Token> = tokens.iter().filter(|t| !matches!(t, Token::Whitespace(_))).collect();
    let body = match tokens.split_last() {
        Some((Token::SemiColon, body)) => body,
        _ => &tokens[..],
    };
    if body.iter().any(|t| matches!(t, Token::SemiColon)) {
        return None;
    }
    let kw = |k: usize| match body.get(k) {
        Some(Token::Word(w)) => w.keyword,
        _ => Keyword::NoKeyword,
    };
    let rule = |k: usize| matches!(body.get(k), Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("rule"));
    match kw(0) {
        Keyword::CREATE if rule(1) || (kw(1) == Keyword::OR && kw(2) == Keyword::REPLACE && rule(3)) => {
            Some("CREATE RULE")
        }
        Keyword::DROP if rule(1) => Some("DROP RULE"),
        Keyword::VACUUM
            if body.iter().any(|t| matches!(t, Token::LParen | Token::Comma))
                || (1..=4).any(|k| kw(k) == Keyword::VERBOSE) =>
        {
            Some("VACUUM VERBOSE, with options, or of several tables")
        }
        Keyword::UPDATE if subscripted_target(body) => Some("subscripted assignment (UPDATE ... SET column[...])"),
        // What rewrite_subscripted_insert leaves: a field target
        // (`f.x[1]`), DEFAULT for an array element.
        Keyword::INSERT
            if insert_column_list(body)
                .is_some_and(|(t, _, _)| t.iter().any(|t| t.field || !t.subscripts.is_empty())) =>
        {
            Some("this INSERT target (a field, or DEFAULT for an array element)")
        }
        _ => None,
    }
}

/// A text of one FETCH or MOVE statement, read by PostgreSQL's grammar
/// (gram.y's fetch_args): sqlparser requires FROM/IN and a direction and
/// takes no signed counts (`ABSOLUTE -1`), and has no MOVE. The result is
/// sqlparser's `Statement::Fetch`, counts kept signed in the number's
/// text; a MOVE is the one with `into` set (SQL's FETCH has no INTO, so
/// no FETCH text gives one). None when the text is not one FETCH/MOVE.
fn parse_fetch(sql: &str) -> Option<Result<Statement, ParserError>> {
    let tokens = Tokenizer::new(&PgDialect::default(), sql).tokenize().ok()?;
    let tokens: Vec<Token> = tokens.into_iter().filter(|t| !matches!(t, Token::Whitespace(_))).collect();
    let body = match tokens.split_last() {
        Some((Token::SemiColon, body)) => body,
        _ => &tokens[..],
    };
    let is_move = match body.first() {
        Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("move") => true,
        Some(Token::Word(w)) if w.keyword == Keyword::FETCH => false,
        _ => return None,
    };
    if body.iter().any(|t| matches!(t, Token::SemiColon)) {
        return None;
    }
    Some(fetch_args(&body[1..], is_move))
}

/// sqlparser's FETCH ... INTO (not SQL's FETCH, which has no INTO) would
/// read as a MOVE (see `parse_fetch`): a syntax error, as PostgreSQL's.
fn no_fetch_into(stmts: Vec<Statement>) -> Result<Vec<Statement>, ParserError> {
    if stmts.iter().any(|s| matches!(s, Statement::Fetch { into: Some(_), .. })) {
        return Err(ParserError::ParserError("syntax error at or near \"INTO\"".into()));
    }
    Ok(stmts)
}

fn fetch_args(t: &[Token], is_move: bool) -> Result<Statement, ParserError> {
    use sqlparser::ast::{FetchDirection as D, FetchPosition, Ident, ObjectName, Value};
    let syntax = || ParserError::ParserError("syntax error in FETCH/MOVE".into());
    let kw = |i: usize| match t.get(i) {
        Some(Token::Word(w)) if w.quote_style.is_none() => w.keyword,
        _ => Keyword::NoKeyword,
    };
    // A signed integer at i: its text and the tokens it took.
    let signed = |i: usize| -> Option<(String, usize)> {
        let (sign, k) = match t.get(i) {
            Some(Token::Minus) => ("-", i + 1),
            Some(Token::Plus) => ("", i + 1),
            _ => ("", i),
        };
        match t.get(k) {
            Some(Token::Number(n, false)) if n.bytes().all(|b| b.is_ascii_digit()) => {
                Some((format!("{sign}{n}"), k + 1 - i))
            }
            _ => None,
        }
    };
    let num = |s: String| Value::Number(s, false).with_empty_span();
    let (direction, mut i) = match kw(0) {
        Keyword::NEXT => (D::Next, 1),
        Keyword::PRIOR => (D::Prior, 1),
        Keyword::FIRST => (D::First, 1),
        Keyword::LAST => (D::Last, 1),
        Keyword::ALL => (D::All, 1),
        Keyword::ABSOLUTE | Keyword::RELATIVE => {
            let (n, used) = signed(1).ok_or_else(syntax)?;
            let limit = num(n);
            (if kw(0) == Keyword::ABSOLUTE { D::Absolute { limit } } else { D::Relative { limit } }, 1 + used)
        }
        Keyword::FORWARD | Keyword::BACKWARD => {
            let forward = kw(0) == Keyword::FORWARD;
            match (kw(1), signed(1)) {
                (Keyword::ALL, _) => (if forward { D::ForwardAll } else { D::BackwardAll }, 2),
                (_, Some((n, used))) => {
                    let limit = Some(num(n));
                    (if forward { D::Forward { limit } } else { D::Backward { limit } }, 1 + used)
                }
                _ => (if forward { D::Forward { limit: None } } else { D::Backward { limit: None } }, 1),
            }
        }
        _ => match signed(0) {
            Some((n, used)) => (D::Count { limit: num(n) }, used),
            None => (D::Next, 0),
        },
    };
    let position = match kw(i) {
        Keyword::IN => FetchPosition::In,
        _ => FetchPosition::From,
    };
    if matches!(kw(i), Keyword::FROM | Keyword::IN) {
        i += 1;
    }
    let name = match t.get(i) {
        Some(Token::Word(w)) if i + 1 == t.len() => {
            Ident { value: w.value.clone(), quote_style: w.quote_style, span: Span::empty() }
        }
        _ => return Err(syntax()),
    };
    let into = is_move.then(|| ObjectName::from(vec![Ident::new("move")]));
    Ok(Statement::Fetch { name, direction, position, into })
}

/// Whether an UPDATE's SET list has a target followed by `[`: a column
/// (maybe qualified) where a target begins, after SET or a top-level comma.
fn subscripted_target(body: &[&Token]) -> bool {
    let Some(set) = body.iter().position(|t| matches!(t, Token::Word(w) if w.keyword == Keyword::SET)) else {
        return false;
    };
    let mut depth = 0usize;
    let mut at_target = true;
    let mut k = set + 1;
    while let Some(t) = body.get(k) {
        match t {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                at_target = true;
                k += 1;
                continue;
            }
            Token::Word(w)
                if depth == 0 && matches!(w.keyword, Keyword::FROM | Keyword::WHERE | Keyword::RETURNING) =>
            {
                return false;
            }
            Token::Word(_) if depth == 0 && at_target => {
                let mut next = k + 1;
                while matches!(body.get(next), Some(Token::Period))
                    && matches!(body.get(next + 1), Some(Token::Word(_)))
                {
                    next += 2;
                }
                if matches!(body.get(next), Some(Token::LBracket)) {
                    return true;
                }
            }
            _ => {}
        }
        at_target = false;
        k += 1;
    }
    false
}

/// The function UPDATE's subscripted assignment becomes (see
/// [`rewrite_subscripted_update`]); the binder knows it by this name.
pub const SUBSCRIPT_ASSIGN: &str = "pgtier_subscript_assign";

/// One `target = value` of an UPDATE's SET list, as text.
struct SetItem {
    column: String,
    /// Each subscript: `i` or, for a slice, its lower and upper bound text
    /// (None: omitted).
    subscripts: Vec<Subscript>,
    value: String,
    /// The item's text as written (a target that is not a plain or
    /// subscripted column: kept).
    text: String,
}

#[derive(Clone)]
enum Subscript {
    Index(String),
    Slice(Option<String>, Option<String>),
}

/// `UPDATE t SET a[i] = v, a[j:k] = w, b = x ...` as
/// `UPDATE t SET a = pgtier_subscript_assign(pgtier_subscript_assign(a, (v), 'i', i), (w), 's11', j, k), b = x ...`:
/// sqlparser has no subscripted target, PostgreSQL applies a column's
/// assignments in order; so is `INSERT ... ON CONFLICT ... DO UPDATE SET`.
/// None when the text is no such statement.
pub fn rewrite_subscripted_update(sql: &str) -> Option<String> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let is_kw = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
    let sig: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i], Token::Whitespace(_))).collect();
    let first = &tokens[*sig.first()?];
    let set = if is_kw(first, Keyword::UPDATE) {
        tokens.iter().position(|t| is_kw(t, Keyword::SET))?
    } else if is_kw(first, Keyword::INSERT) {
        // INSERT ... ON CONFLICT ... DO UPDATE SET
        sig.windows(3).find(|w| {
            is_kw(&tokens[w[0]], Keyword::DO)
                && is_kw(&tokens[w[1]], Keyword::UPDATE)
                && is_kw(&tokens[w[2]], Keyword::SET)
        })?[2]
    } else {
        return None;
    };
    let (items, end) = set_items(&tokens[set + 1..]);
    if !items.iter().any(|i| !i.subscripts.is_empty()) {
        return None;
    }
    // The column's current value, qualified: ON CONFLICT's EXCLUDED and
    // UPDATE's FROM items may have a column of the same name.
    let qualifier = target_name(&sig.iter().map(|&i| &tokens[i]).collect::<Vec<_>>())?;
    let mut out: Vec<String> = Vec::new();
    let mut done: Vec<&str> = Vec::new();
    for item in &items {
        // A column assigned whole too stays two assignments: the binder's
        // 42601 "multiple assignments to same column".
        if item.subscripts.is_empty() {
            out.push(item.text.clone());
            continue;
        }
        if done.contains(&item.column.as_str()) {
            continue;
        }
        done.push(&item.column);
        let mut expr = format!("{qualifier}.{}", item.column);
        for i in items.iter().filter(|o| o.column == item.column) {
            expr = assign_call(&expr, i, "");
        }
        out.push(format!("{} = {expr}", item.column));
    }
    let head: String = tokens[..=set].iter().map(ToString::to_string).collect();
    let tail: String = tokens[set + 1 + end..].iter().map(ToString::to_string).collect();
    Some(format!("{head} {} {tail}", out.join(", ")))
}

/// The target table's alias, or its name, of `UPDATE [ONLY] name [[AS]
/// alias] SET` or `INSERT INTO name [AS alias]`.
fn target_name(sig: &[&Token]) -> Option<String> {
    let is_kw = |t: Option<&&Token>, k: Keyword| matches!(t, Some(Token::Word(w)) if w.keyword == k);
    let mut k = 1;
    if is_kw(sig.first(), Keyword::INSERT) {
        if !is_kw(sig.get(1), Keyword::INTO) {
            return None;
        }
        k = 2;
    } else if is_kw(sig.get(1), Keyword::ONLY) {
        k = 2;
    }
    let Some(Token::Word(_)) = sig.get(k) else { return None };
    let mut name = sig[k].to_string();
    k += 1;
    while matches!(sig.get(k), Some(Token::Period)) && matches!(sig.get(k + 1), Some(Token::Word(_))) {
        name = format!("{name}.{}", sig[k + 1]);
        k += 2;
    }
    if is_kw(sig.get(k), Keyword::AS) {
        k += 1;
    }
    match sig.get(k) {
        Some(Token::Word(w))
            if w.keyword != Keyword::SET && w.keyword != Keyword::VALUES && w.keyword != Keyword::DEFAULT =>
        {
            Some(sig[k].to_string())
        }
        _ => Some(name),
    }
}

/// `marker`: `@column` for an INSERT's NULL base (see [`rewrite_subscripted_insert`]).
fn assign_call(target: &str, item: &SetItem, marker: &str) -> String {
    let mut spec = String::new();
    let mut args = Vec::new();
    let is_slice = item.subscripts.iter().any(|s| matches!(s, Subscript::Slice(..)));
    for s in &item.subscripts {
        match s {
            Subscript::Index(i) if is_slice => {
                spec.push_str("s11");
                args.push("1".to_owned());
                args.push(format!("({i})"));
            }
            Subscript::Index(i) => {
                spec.push('i');
                args.push(format!("({i})"));
            }
            Subscript::Slice(lo, hi) => {
                spec.push('s');
                for b in [lo, hi] {
                    spec.push(if b.is_some() { '1' } else { '0' });
                    args.extend(b.iter().map(|b| format!("({b})")));
                }
            }
        }
    }
    let args: String = args.iter().map(|a| format!(", {a}")).collect();
    format!("{SUBSCRIPT_ASSIGN}({target}, ({}), '{spec}{marker}'{args})", item.value)
}

/// One target of an INSERT's column list.
struct InsertTarget {
    /// The column as written (quoted if it was).
    column: String,
    /// Its name as stored (an unquoted name folded to lower case).
    name: String,
    subscripts: Vec<Subscript>,
    /// A field of a composite column (`f.x`, `f[1].x`): never rewritten.
    field: bool,
}

/// The column list of `INSERT INTO name [[AS] alias] (targets)` in the
/// significant tokens, the index of its `(` and the index after its `)`.
fn insert_column_list(sig: &[&Token]) -> Option<(Vec<InsertTarget>, usize, usize)> {
    let is_kw = |k: usize, kw: Keyword| matches!(sig.get(k), Some(Token::Word(w)) if w.keyword == kw);
    if !is_kw(0, Keyword::INSERT) || !is_kw(1, Keyword::INTO) {
        return None;
    }
    let mut k = 2;
    while let Some(Token::Word(w)) = sig.get(k) {
        if matches!(w.keyword, Keyword::VALUES | Keyword::SELECT | Keyword::DEFAULT | Keyword::WITH) {
            return None;
        }
        k += 1;
        if matches!(sig.get(k), Some(Token::Period)) {
            k += 1;
        }
    }
    if !matches!(sig.get(k), Some(Token::LParen)) {
        return None;
    }
    let open = k;
    k += 1;
    let mut targets = Vec::new();
    loop {
        let Some(Token::Word(col)) = sig.get(k) else { return None };
        let name = if col.quote_style.is_some() { col.value.clone() } else { col.value.to_lowercase() };
        let mut t = InsertTarget { column: sig[k].to_string(), name, subscripts: Vec::new(), field: false };
        k += 1;
        loop {
            match sig.get(k)? {
                Token::LBracket => {
                    let (sub, next) = subscript(sig, k + 1)?;
                    t.subscripts.push(sub);
                    k = next;
                }
                Token::Period => {
                    t.field = true;
                    k += 1;
                }
                Token::Word(_) if t.field => k += 1,
                Token::Comma | Token::RParen => break,
                _ => return None,
            }
        }
        targets.push(t);
        k += 1;
        if matches!(sig[k - 1], Token::RParen) {
            return Some((targets, open, k));
        }
    }
}

/// `INSERT INTO t (a[1:2], b, a[3]) VALUES (x, y, z), ...` as
/// `INSERT INTO t (a, b) VALUES (pgtier_subscript_assign(pgtier_subscript_assign(NULL, (x), 's11@a', (1), (2)), (z), 'i@a', (3)), (y)), ...`,
/// and with a query for source `INSERT INTO t (a, b) SELECT <the same of
/// c1, c2, c3> FROM (query) AS pgtier_insert_source (c1, c2, c3)`: an
/// INSERT assigns into a NULL of the column's type (PostgreSQL's
/// transformAssignedExpr, never the column's default), whose type the
/// binder takes from the column `@a` names; the UPDATE path's
/// assignments do the rest. None when no target is subscripted, or a
/// target is a field or a subscripted one gets DEFAULT.
pub fn rewrite_subscripted_insert(sql: &str) -> Option<String> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let at: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i], Token::Whitespace(_))).collect();
    let sig: Vec<&Token> = at.iter().map(|&i| &tokens[i]).collect();
    let (targets, open, after) = insert_column_list(&sig)?;
    if targets.iter().any(|t| t.field) || targets.iter().all(|t| t.subscripts.is_empty()) {
        return None;
    }
    let pos = |k: usize| at.get(k).copied().unwrap_or(tokens.len());
    let text =
        |from: usize, to: usize| -> String { tokens[pos(from)..pos(to)].iter().map(ToString::to_string).collect() };
    let is_kw = |k: usize, kw: Keyword| matches!(sig.get(k), Some(Token::Word(w)) if w.keyword == kw);
    let mut columns: Vec<&InsertTarget> = Vec::new();
    for t in &targets {
        if !columns.iter().any(|c| c.name == t.name) || t.subscripts.is_empty() {
            columns.push(t);
        }
    }
    let list: Vec<&str> = columns.iter().map(|c| c.column.as_str()).collect();
    let head = format!("{}({})", text(0, open), list.join(", "));
    let mut k = after;
    let (source, tail) = if is_kw(k, Keyword::VALUES) {
        let mut rows = Vec::new();
        k += 1;
        loop {
            if !matches!(sig.get(k), Some(Token::LParen)) {
                return None;
            }
            let (items, next) = split_items(&sig, k + 1)?;
            // A row of the wrong length stays wrong for the column list
            // (the binder's 42601): rows of one and two values, one of
            // which has the wrong length for any list.
            if items.len() != targets.len() {
                rows.push("(NULL), (NULL, NULL)".to_owned());
                k = next;
                if !matches!(sig.get(k), Some(Token::Comma)) {
                    break;
                }
                k += 1;
                continue;
            }
            let values: Vec<String> = items.iter().map(|&(a, b)| text(a, b)).collect();
            if targets
                .iter()
                .zip(&items)
                .any(|(t, &(a, b))| !t.subscripts.is_empty() && b == a + 1 && is_kw(a, Keyword::DEFAULT))
            {
                return None;
            }
            rows.push(format!("({})", insert_values(&targets, &columns, &values).join(", ")));
            k = next;
            if !matches!(sig.get(k), Some(Token::Comma)) {
                break;
            }
            k += 1;
        }
        (format!(" VALUES {}", rows.join(", ")), k)
    } else {
        let end = source_end(&sig, k);
        let names: Vec<String> = (1..=targets.len()).map(|n| format!("c{n}")).collect();
        let values: Vec<String> = names.iter().map(|n| format!("pgtier_insert_source.{n}")).collect();
        let query = text(k, end);
        let exprs = insert_values(&targets, &columns, &values).join(", ");
        (format!(" SELECT {exprs} FROM ({query}) AS pgtier_insert_source ({})", names.join(", ")), end)
    };
    let rest: String = tokens[pos(tail)..].iter().map(ToString::to_string).collect();
    Some(format!("{head}{source} {rest}"))
}

/// The items of a parenthesized list whose first token is `sig[k]`, as
/// token ranges, and the index after its `)`.
fn split_items(sig: &[&Token], mut k: usize) -> Option<(Vec<(usize, usize)>, usize)> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = k;
    loop {
        match sig.get(k)? {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen if depth == 0 => {
                items.push((start, k));
                return Some((items, k + 1));
            }
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                items.push((start, k));
                start = k + 1;
            }
            _ => {}
        }
        k += 1;
    }
}

/// Where an INSERT's query source ends: ON CONFLICT, RETURNING or `;` at depth 0.
fn source_end(sig: &[&Token], mut k: usize) -> usize {
    let mut depth = 0usize;
    while let Some(t) = sig.get(k) {
        match t {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            Token::SemiColon if depth == 0 => return k,
            Token::Word(w) if depth == 0 && w.keyword == Keyword::RETURNING => return k,
            Token::Word(w)
                if depth == 0
                    && w.keyword == Keyword::ON
                    && matches!(sig.get(k + 1), Some(Token::Word(c)) if c.keyword == Keyword::CONFLICT) =>
            {
                return k;
            }
            _ => {}
        }
        k += 1;
    }
    k
}

/// Per column of `columns`, its value: a plain target's value, or a
/// subscripted column's assignments in order, into NULL.
fn insert_values(targets: &[InsertTarget], columns: &[&InsertTarget], values: &[String]) -> Vec<String> {
    columns
        .iter()
        .map(|c| {
            if c.subscripts.is_empty() {
                let k = targets.iter().position(|t| std::ptr::eq(t, *c)).unwrap_or(0);
                return format!("({})", values[k]);
            }
            let marker = format!("@{}", c.name.replace('\'', "''"));
            let mut expr = "NULL".to_owned();
            for (t, v) in targets.iter().zip(values) {
                if t.name == c.name && !t.subscripts.is_empty() {
                    let item = SetItem {
                        column: String::new(),
                        subscripts: t.subscripts.clone(),
                        value: v.clone(),
                        text: String::new(),
                    };
                    expr = assign_call(&expr, &item, &marker);
                }
            }
            expr
        })
        .collect()
}

/// The SET list's items and how many tokens it spans (up to FROM, WHERE,
/// RETURNING, `;` or the end, at depth 0).
fn set_items(tokens: &[Token]) -> (Vec<SetItem>, usize) {
    let mut items = Vec::new();
    let mut k = 0;
    let mut depth = 0usize;
    let mut start = 0;
    let ends = |t: &Token| {
        matches!(t, Token::SemiColon)
            || matches!(t, Token::Word(w) if matches!(w.keyword, Keyword::FROM | Keyword::WHERE | Keyword::RETURNING))
    };
    while k <= tokens.len() {
        let t = tokens.get(k);
        let boundary = match t {
            None => true,
            Some(t) if depth == 0 && (ends(t) || matches!(t, Token::Comma)) => true,
            Some(Token::LParen | Token::LBracket) => {
                depth += 1;
                false
            }
            Some(Token::RParen | Token::RBracket) => {
                depth = depth.saturating_sub(1);
                false
            }
            _ => false,
        };
        if boundary {
            items.push(set_item(&tokens[start..k]));
            if t.is_none_or(|t| !matches!(t, Token::Comma)) {
                return (items, k);
            }
            start = k + 1;
        }
        k += 1;
    }
    (items, tokens.len())
}

/// One item: `column [subscripts] = value`, or kept as written.
fn set_item(tokens: &[Token]) -> SetItem {
    let text: String = tokens.iter().map(ToString::to_string).collect();
    let kept = || SetItem { column: String::new(), subscripts: Vec::new(), value: String::new(), text: text.clone() };
    let sig: Vec<&Token> = tokens.iter().filter(|t| !matches!(t, Token::Whitespace(_))).collect();
    let Some(Token::Word(col)) = sig.first() else { return kept() };
    let mut k = 1;
    let mut subscripts = Vec::new();
    while matches!(sig.get(k), Some(Token::LBracket)) {
        let Some((sub, next)) = subscript(&sig, k + 1) else { return kept() };
        subscripts.push(sub);
        k = next;
    }
    if !matches!(sig.get(k), Some(Token::Eq)) {
        return kept();
    }
    let value: String = sig[k + 1..].iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" ");
    SetItem { column: Token::Word(col.clone()).to_string(), subscripts, value, text }
}

/// The subscript whose `[` is before `sig[k]`, and the index after its `]`.
fn subscript(sig: &[&Token], mut k: usize) -> Option<(Subscript, usize)> {
    let mut depth = 0usize;
    let mut parts: Vec<Vec<String>> = vec![Vec::new()];
    loop {
        let t = sig.get(k)?;
        k += 1;
        match t {
            Token::RBracket if depth == 0 => break,
            Token::Colon if depth == 0 => parts.push(Vec::new()),
            // `[1:n]`: the tokenizer may read `:n` as a placeholder.
            Token::Placeholder(p) if depth == 0 && p.starts_with(':') => {
                parts.push(vec![p[1..].to_owned()]);
            }
            Token::LParen | Token::LBracket => {
                depth += 1;
                parts.last_mut()?.push(t.to_string());
            }
            Token::RParen | Token::RBracket => {
                depth = depth.saturating_sub(1);
                parts.last_mut()?.push(t.to_string());
            }
            _ => parts.last_mut()?.push(t.to_string()),
        }
    }
    let text = |p: &Vec<String>| (!p.is_empty()).then(|| p.join(" "));
    match parts.as_slice() {
        [i] => Some((Subscript::Index(text(i)?), k)),
        [lo, hi] => Some((Subscript::Slice(text(lo), text(hi)), k)),
        _ => None,
    }
}

/// The order sqlparser parses sequence options in.
fn rank(clause: &[Token]) -> Option<usize> {
    let words: Vec<Keyword> =
        clause.iter().filter_map(|t| if let Token::Word(w) = t { Some(w.keyword) } else { None }).take(2).collect();
    Some(match words.as_slice() {
        [Keyword::INCREMENT, ..] => 0,
        [Keyword::MINVALUE, ..] | [Keyword::NO, Keyword::MINVALUE] => 1,
        [Keyword::MAXVALUE, ..] | [Keyword::NO, Keyword::MAXVALUE] => 2,
        [Keyword::START, ..] => 3,
        [Keyword::CACHE, ..] => 4,
        [Keyword::CYCLE, ..] | [Keyword::NO, Keyword::CYCLE] => 5,
        _ => return None,
    })
}

/// Whether `t` begins an option clause.
fn starts_clause(t: &Token) -> bool {
    matches!(t, Token::Word(w) if matches!(w.keyword, Keyword::INCREMENT | Keyword::MINVALUE | Keyword::MAXVALUE | Keyword::START | Keyword::CACHE | Keyword::CYCLE | Keyword::NO))
}

/// The text with every run of sequence options sorted into sqlparser's
/// order; None when there is nothing to move.
fn reorder_sequence_options(sql: &str) -> Option<String> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let significant = |t: &Token| !matches!(t, Token::Whitespace(_));
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut changed = false;
    let mut i = 0;
    while i < tokens.len() {
        let run_start = i;
        // A run: clauses, each a clause keyword and everything up to the
        // next clause keyword, `;`, `)` or OWNED.
        let mut clauses: Vec<Vec<Token>> = Vec::new();
        while i < tokens.len() && starts_clause(&tokens[i]) && in_sequence_context(&out, &clauses) {
            let mut clause = vec![tokens[i].clone()];
            i += 1;
            while i < tokens.len() {
                let t = &tokens[i];
                let ends = matches!(t, Token::SemiColon | Token::RParen)
                    || matches!(t, Token::Word(w) if w.keyword == Keyword::OWNED);
                // A clause keyword starts the next clause, except right
                // after a lone NO, which it completes (NO MINVALUE).
                let next_clause =
                    starts_clause(t) && !(clause.iter().filter(|c| significant(c)).count() == 1 && is_no(&clause[0]));
                if ends || next_clause {
                    break;
                }
                clause.push(t.clone());
                i += 1;
            }
            clauses.push(clause);
        }
        if clauses.is_empty() {
            out.push(tokens[i].clone());
            i = run_start + 1;
            continue;
        }
        let ranks: Option<Vec<usize>> = clauses.iter().map(|c| rank(c)).collect();
        match ranks {
            Some(r) if r.windows(2).any(|w| w[0] > w[1]) => {
                let mut order: Vec<usize> = (0..clauses.len()).collect();
                order.sort_by_key(|&k| r[k]);
                for k in order {
                    let mut c = clauses[k].clone();
                    // Keep the clauses apart once moved.
                    if !matches!(c.last(), Some(Token::Whitespace(_))) {
                        c.push(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
                    }
                    out.extend(c);
                }
                changed = true;
            }
            _ => clauses.into_iter().for_each(|c| out.extend(c)),
        }
    }
    changed.then(|| out.iter().map(ToString::to_string).collect())
}

fn is_no(t: &Token) -> bool {
    matches!(t, Token::Word(w) if w.keyword == Keyword::NO)
}

/// Sequence options follow `SEQUENCE name [AS type]` or `IDENTITY (`, or
/// another option of the same run.
fn in_sequence_context(before: &[Token], clauses: &[Vec<Token>]) -> bool {
    if !clauses.is_empty() {
        return true;
    }
    let words: Vec<&Token> = before.iter().rev().filter(|t| !matches!(t, Token::Whitespace(_))).take(12).collect();
    let is_kw = |t: &&Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
    // `IDENTITY (`
    if words.len() >= 2 && matches!(words[0], Token::LParen) && is_kw(&words[1], Keyword::IDENTITY) {
        return true;
    }
    // `SEQUENCE [IF NOT EXISTS] name [AS type]`: SEQUENCE within the last
    // few words, with no clause boundary after it.
    words
        .iter()
        .position(|t| is_kw(t, Keyword::SEQUENCE))
        .is_some_and(|p| !words[..p].iter().any(|t| matches!(t, Token::SemiColon | Token::LParen | Token::RParen)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_and_move_read_as_postgresql_does() {
        let one = |sql: &str| parse_sql(sql).map(|mut v| v.remove(0).to_string());
        assert_eq!(one("FETCH ABSOLUTE -1 FROM c").unwrap(), "FETCH ABSOLUTE -1 FROM c");
        assert_eq!(one("fetch \"C\";").unwrap(), "FETCH NEXT FROM \"C\"");
        assert_eq!(one("MOVE BACKWARD IN c").unwrap(), "FETCH BACKWARD IN c INTO move");
        assert_eq!(one("FETCH -2 c").unwrap(), "FETCH -2 FROM c");
        assert!(one("FETCH NEXT FROM c d").is_err());
        assert!(parse_sql("FETCH NEXT FROM c INTO x; SELECT 1").is_err());
    }

    #[test]
    fn pg_dump_order_parses() {
        let sql =
            "CREATE SEQUENCE public.t_id_seq AS integer START WITH 1 INCREMENT BY 1 NO MINVALUE NO MAXVALUE CACHE 1;";
        assert!(
            Parser::parse_sql(&PostgreSqlDialect {}, sql).is_err(),
            "sqlparser learned any order: drop this module's rewrite"
        );
        let stmts = parse_sql(sql).unwrap();
        assert_eq!(
            stmts[0].to_string(),
            "CREATE SEQUENCE public.t_id_seq AS INTEGER INCREMENT BY 1 NO MINVALUE NO MAXVALUE START WITH 1 CACHE 1"
        );
        let ident = "CREATE TABLE t (id bigint GENERATED BY DEFAULT AS IDENTITY (START WITH 100 INCREMENT BY 10 CYCLE), v text)";
        assert!(parse_sql(ident).unwrap()[0].to_string().contains("INCREMENT BY 10 START WITH 100 CYCLE"));
        // A string that merely looks like options is not touched.
        assert!(reorder_sequence_options("SELECT 'START 1 INCREMENT 2'").is_none());
        // Real syntax errors stay the errors they were.
        assert!(parse_sql("CREATE SEQUENCE s START 1 INCREMENT").is_err());
    }

    #[test]
    fn subscripted_targets_become_assign_calls() {
        let sql = "UPDATE t SET a[1:2] = '{7,8}', b = 1, a[3] = b[1] + 1, c[:n][2] = x FROM u WHERE id = 1";
        let out = rewrite_subscripted_update(sql).unwrap();
        assert!(out.contains(
            "a = pgtier_subscript_assign(pgtier_subscript_assign(t.a, ('{7,8}'), 's11', (1), (2)), (b [ 1 ] + 1), 'i', (3))"
        ), "{out}");
        assert!(out.contains("c = pgtier_subscript_assign(t.c, (x), 's01s11', (n), 1, (2))"), "{out}");
        let upsert = "INSERT INTO s.t AS z VALUES (1) ON CONFLICT (k) DO UPDATE SET a[1] = 2";
        assert!(
            rewrite_subscripted_update(upsert).unwrap().contains("a = pgtier_subscript_assign(z.a, (2), 'i', (1))")
        );
        let only = rewrite_subscripted_update("UPDATE ONLY s.t SET a[1] = 2").unwrap();
        assert!(only.contains("pgtier_subscript_assign(s.t.a,"), "{only}");
        assert!(out.contains("b = 1") && out.ends_with("FROM u WHERE id = 1"), "{out}");
        assert!(parse_sql(sql).is_ok());
        assert_eq!(rewrite_subscripted_update("UPDATE t SET a = b[1]"), None);
        assert_eq!(rewrite_subscripted_update("SELECT a[1] FROM t"), None);
    }

    #[test]
    fn subscripted_insert_targets_assign_into_null() {
        let out =
            rewrite_subscripted_insert("INSERT INTO t (a[1:2], b, a[3]) VALUES (x, y, z), ('{1}', 2, 3) RETURNING a")
                .unwrap();
        assert_eq!(
            out,
            "INSERT INTO t (a, b) VALUES (pgtier_subscript_assign(pgtier_subscript_assign(NULL, (x), 's11@a', (1), (2)), (z), 'i@a', (3)), (y)), (pgtier_subscript_assign(pgtier_subscript_assign(NULL, ('{1}'), 's11@a', (1), (2)), (3), 'i@a', (3)), (2)) RETURNING a"
        );
        let query =
            rewrite_subscripted_insert("insert into s.t (\"A\"[1], k) select 1, 2 on conflict (k) do nothing").unwrap();
        assert!(query.contains("(\"A\", k) SELECT pgtier_subscript_assign(NULL, (pgtier_insert_source.c1), 'i@A', (1)), (pgtier_insert_source.c2) FROM (select 1, 2 ) AS pgtier_insert_source (c1, c2) on conflict"), "{query}");
        for short in ["INSERT INTO t (k, a[1], a[2]) VALUES (3, 1)", "INSERT INTO t (k, a[1]) VALUES (3, 1, 2)"] {
            let out = rewrite_subscripted_insert(short).unwrap();
            assert!(parse_sql(&out).is_ok(), "{out}");
        }
        assert_eq!(rewrite_subscripted_insert("INSERT INTO t (a[1], a[2]) VALUES (1, DEFAULT)"), None);
        assert_eq!(rewrite_subscripted_insert("INSERT INTO t (f.x[1]) VALUES (1)"), None);
        assert_eq!(rewrite_subscripted_insert("INSERT INTO t (a, b) VALUES (1, 2)"), None);
    }

    #[test]
    fn unsupported_forms_are_named() {
        for (sql, form) in [
            ("CREATE RULE r AS ON INSERT TO t DO INSTEAD NOTHING;", Some("CREATE RULE")),
            ("create or replace rule r as on insert to t do also nothing", Some("CREATE RULE")),
            ("DROP RULE IF EXISTS r ON t", Some("DROP RULE")),
            (
                "UPDATE t SET a = 1, s.j['k'][0] = '1' WHERE id = 1",
                Some("subscripted assignment (UPDATE ... SET column[...])"),
            ),
            // A subscript in a value, or after WHERE, is no target: the syntax error stands.
            ("UPDATE t SET a = b[1] c", None),
            ("UPDATE t SET a = ARRAY[1] WHERE x[1] = 2 q", None),
            ("UPDATE t SET (a, b) = (1, 2) garbage", None),
            ("SELECT 1; CREATE RULE r AS ON INSERT TO t DO INSTEAD NOTHING", None),
            ("CREATE RULES", None),
            ("VACUUM VERBOSE t", Some("VACUUM VERBOSE, with options, or of several tables")),
            ("vacuum (analyze) t", Some("VACUUM VERBOSE, with options, or of several tables")),
        ] {
            assert_eq!(unsupported_form(sql), form, "{sql}");
        }
    }
}
