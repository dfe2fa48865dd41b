//! The SQL/JSON path language (PostgreSQL 15's jsonpath): the parser.
//! A path is read from its text each time it is used (pgtier has no
//! jsonpath type: a path is an untyped literal where PostgreSQL takes a
//! jsonpath); evaluation is expr/jsonpath_eval.rs. Syntax errors are 42601
//! as jsonpath_in's; the parts pgtier does not evaluate exactly
//! (`.datetime()`, `.keyvalue()`, like_regex flags other than `i`) are
//! 0A000 here, before anything runs.

use pgtier_engine::json::Json;

use crate::error::{Result, SqlError};
use crate::value::{self, ArithOp};

/// A parsed path: its mode and its expression.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonPath {
    pub strict: bool,
    pub expr: Node,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Type,
    Size,
    Double,
    Ceiling,
    Floor,
    Abs,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Type => "type",
            Method::Size => "size",
            Method::Double => "double",
            Method::Ceiling => "ceiling",
            Method::Floor => "floor",
            Method::Abs => "abs",
        }
    }
}

/// One accessor of a chain.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Key(String),
    AnyKey,
    AnyIndex,
    /// `[a, b to c]`.
    Index(Vec<(Node, Option<Node>)>),
    /// `.**{lo to hi}` (hi u32::MAX: `last`).
    AnyPath(u32, u32),
    Filter(Box<Node>),
    Method(Method),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Root,
    Current,
    Last,
    Var(String),
    Lit(Json),
    /// A primary (or a parenthesized expression) and its accessors.
    Chain(Box<Node>, Vec<Step>),
    Arith(ArithOp, Box<Node>, Box<Node>),
    /// Unary minus (true) or plus.
    Unary(bool, Box<Node>),
    Cmp(Cmp, Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    IsUnknown(Box<Node>),
    Exists(Box<Node>),
    StartsWith(Box<Node>, Box<Node>),
    /// like_regex pattern flag flags (checked: of `imsq`).
    LikeRegex(Box<Node>, String, String),
}

impl Node {
    /// Is this a predicate (a boolean-valued node)?
    pub fn is_predicate(&self) -> bool {
        matches!(
            self,
            Node::Cmp(..)
                | Node::And(..)
                | Node::Or(..)
                | Node::Not(_)
                | Node::IsUnknown(_)
                | Node::Exists(_)
                | Node::StartsWith(..)
                | Node::LikeRegex(..)
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Dollar,
    At,
    Var(String),
    Ident(String),
    Str(String),
    Num(String),
    Punct(&'static str),
}

fn syntax(near: Option<&Tok>) -> SqlError {
    match near {
        None => SqlError::new("42601", "syntax error at end of jsonpath input"),
        Some(t) => SqlError::new("42601", format!("syntax error at or near \"{}\" of jsonpath input", tok_text(t))),
    }
}

fn tok_text(t: &Tok) -> String {
    match t {
        Tok::Dollar => "$".to_owned(),
        Tok::At => "@".to_owned(),
        Tok::Var(v) => format!("${v}"),
        Tok::Ident(s) | Tok::Num(s) => s.clone(),
        Tok::Str(s) => format!("\"{s}\""),
        Tok::Punct(p) => (*p).to_owned(),
    }
}

const PUNCTS: [&str; 25] = [
    "**", "==", "!=", "<>", "<=", ">=", "&&", "||", "!", ".", ",", "[", "]", "(", ")", "{", "}", "?", "*", "+", "-",
    "/", "%", "<", ">",
];

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || !c.is_ascii()
}

/// The string after an opening quote; returns the text and the rest.
fn lex_string(s: &str) -> Result<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    let bad = || SqlError::new("42601", "unexpected end after backslash in jsonpath input");
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &s[i + 1..])),
            '\\' => {
                let (_, e) = chars.next().ok_or_else(bad)?;
                match e {
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'v' => out.push('\u{b}'),
                    'x' | 'u' => return Err(SqlError::unsupported("\\x and \\u escapes in jsonpath strings")),
                    other => out.push(other),
                }
            }
            other => out.push(other),
        }
    }
    Err(SqlError::new("42601", "unexpected end of quoted string in jsonpath input"))
}

fn lex(text: &str) -> Result<Vec<Tok>> {
    let mut out = Vec::new();
    let mut s = text;
    loop {
        s = s.trim_start_matches([' ', '\t', '\n', '\r', '\u{c}']);
        let Some(c) = s.chars().next() else { return Ok(out) };
        if c == '"' {
            let (v, rest) = lex_string(&s[1..])?;
            out.push(Tok::Str(v));
            s = rest;
        } else if c == '$' {
            let rest = &s[1..];
            if let Some(r) = rest.strip_prefix('"') {
                let (v, rest) = lex_string(r)?;
                out.push(Tok::Var(v));
                s = rest;
            } else {
                let n = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
                out.push(if n == 0 { Tok::Dollar } else { Tok::Var(rest[..n].to_owned()) });
                s = &rest[n..];
            }
        } else if c == '@' {
            out.push(Tok::At);
            s = &s[1..];
        } else if c.is_ascii_digit() || (c == '.' && s[1..].starts_with(|c: char| c.is_ascii_digit())) {
            let (num, rest) = lex_number(s)?;
            out.push(Tok::Num(num));
            s = rest;
        } else if is_ident_char(c) {
            let n = s.find(|c: char| !is_ident_char(c)).unwrap_or(s.len());
            out.push(Tok::Ident(s[..n].to_owned()));
            s = &s[n..];
        } else if let Some(p) = PUNCTS.iter().find(|p| s.starts_with(**p)) {
            out.push(Tok::Punct(p));
            s = &s[p.len()..];
        } else {
            return Err(SqlError::new("42601", format!("syntax error at or near \"{c}\" of jsonpath input")));
        }
    }
}

/// A numeric literal: digits [. digits] [e [+-] digits]; what follows a
/// number directly (`1a`, `1.a`) is refused rather than guessed at.
fn lex_number(s: &str) -> Result<(String, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    i = digits(i);
    if i < b.len() && b[i] == b'.' && i + 1 < b.len() && b[i + 1].is_ascii_digit() {
        i = digits(i + 1);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            i = digits(j);
        }
    }
    // `1.type()`, `1a`, `1.`, `1e`: PostgreSQL 15's lexer has its own rules here.
    if i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.' || b[i] >= 0x80) {
        return Err(SqlError::unsupported(format!("jsonpath numeric literal followed by \"{}\"", &s[i..])));
    }
    Ok((s[..i].to_owned(), &s[i..]))
}

/// A jsonpath number literal as a jsonb number (numeric_in's value).
fn number(text: &str) -> Result<Json> {
    let v = value::parse_input(text, value::NUMERIC_ANY)
        .map_err(|_| SqlError::unsupported(format!("jsonpath number {text}")))?;
    Ok(Json::Number(value::to_text(&v)))
}

/// Parsing and evaluation recurse over the path: a bound on its length and
/// nesting keeps them far from the end of the stack (an overflow aborts the
/// process). PostgreSQL takes longer paths: 0A000.
const MAX_TOKENS: usize = 1_000;
const MAX_NESTING: usize = 64;

fn check_size(toks: &[Tok]) -> Result<()> {
    let too_big = || {
        SqlError::unsupported(format!("jsonpath longer than {MAX_TOKENS} tokens or nested deeper than {MAX_NESTING}"))
    };
    if toks.len() > MAX_TOKENS {
        return Err(too_big());
    }
    let mut depth = 0usize;
    for t in toks {
        match t {
            Tok::Punct("(" | "[" | "{") => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(too_big());
                }
            }
            Tok::Punct(")" | "]" | "}") => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// Depth of filters (`@` is allowed only inside one).
    filters: usize,
    /// Depth of array subscripts (`last` is allowed only inside one).
    subscripts: usize,
}

/// Parses a jsonpath's text (jsonpath_in).
pub fn parse(text: &str) -> Result<JsonPath> {
    let mut p = Parser { toks: lex(text)?, pos: 0, filters: 0, subscripts: 0 };
    if p.toks.is_empty() {
        return Err(SqlError::invalid_text("jsonpath", text));
    }
    check_size(&p.toks)?;
    let strict = if p.keyword("strict") {
        true
    } else {
        p.keyword("lax");
        false
    };
    if p.peek().is_none() {
        return Err(syntax(None));
    }
    let expr = p.or_expr()?;
    if let Some(t) = p.peek() {
        return Err(syntax(Some(t)));
    }
    Ok(JsonPath { strict, expr })
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.pos + k)
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }

    fn punct(&mut self, p: &str) -> bool {
        let hit = self.is_punct(p);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn expect(&mut self, p: &str) -> Result<()> {
        if self.punct(p) { Ok(()) } else { Err(syntax(self.peek())) }
    }

    fn is_keyword(&self, k: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(s)) if s.eq_ignore_ascii_case(k))
    }

    fn keyword(&mut self, k: &str) -> bool {
        let hit = self.is_keyword(k);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn or_expr(&mut self) -> Result<Node> {
        let mut left = self.and_expr()?;
        while self.punct("||") {
            let right = self.and_expr()?;
            if !left.is_predicate() || !right.is_predicate() {
                return Err(syntax(self.peek()));
            }
            left = Node::Or(left.into(), right.into());
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Node> {
        let mut left = self.not_expr()?;
        while self.punct("&&") {
            let right = self.not_expr()?;
            if !left.is_predicate() || !right.is_predicate() {
                return Err(syntax(self.peek()));
            }
            left = Node::And(left.into(), right.into());
        }
        Ok(left)
    }

    fn not_expr(&mut self) -> Result<Node> {
        if self.is_punct("!") {
            self.pos += 1;
            let inner = self.delimited_predicate()?;
            return Ok(Node::Not(inner.into()));
        }
        self.comparison()
    }

    /// `( predicate )` or `exists ( expr )` (what `!` applies to).
    fn delimited_predicate(&mut self) -> Result<Node> {
        if self.is_keyword("exists") && matches!(self.peek_at(1), Some(Tok::Punct("("))) {
            self.pos += 2;
            let inner = self.or_expr()?;
            self.expect(")")?;
            return Ok(Node::Exists(inner.into()));
        }
        self.expect("(")?;
        let inner = self.or_expr()?;
        self.expect(")")?;
        if !inner.is_predicate() {
            return Err(syntax(self.peek()));
        }
        if self.is_keyword("is") {
            return self.is_unknown(inner);
        }
        Ok(inner)
    }

    fn is_unknown(&mut self, inner: Node) -> Result<Node> {
        self.pos += 1;
        if !self.keyword("unknown") {
            return Err(syntax(self.peek()));
        }
        Ok(Node::IsUnknown(inner.into()))
    }

    fn comparison(&mut self) -> Result<Node> {
        let left = self.additive()?;
        let op = match self.peek() {
            Some(Tok::Punct("==")) => Some(Cmp::Eq),
            Some(Tok::Punct("!=" | "<>")) => Some(Cmp::Ne),
            Some(Tok::Punct("<")) => Some(Cmp::Lt),
            Some(Tok::Punct("<=")) => Some(Cmp::Le),
            Some(Tok::Punct(">")) => Some(Cmp::Gt),
            Some(Tok::Punct(">=")) => Some(Cmp::Ge),
            _ => None,
        };
        if let Some(op) = op {
            self.pos += 1;
            let right = self.additive()?;
            return Ok(Node::Cmp(op, left.into(), right.into()));
        }
        if self.is_keyword("starts") {
            self.pos += 1;
            if !self.keyword("with") {
                return Err(syntax(self.peek()));
            }
            let right = match self.peek().cloned() {
                Some(Tok::Str(s)) => Node::Lit(Json::String(s)),
                Some(Tok::Var(v)) => Node::Var(v),
                other => return Err(syntax(other.as_ref())),
            };
            self.pos += 1;
            return Ok(Node::StartsWith(left.into(), right.into()));
        }
        if self.is_keyword("like_regex") {
            return self.like_regex(left);
        }
        Ok(left)
    }

    fn like_regex(&mut self, left: Node) -> Result<Node> {
        self.pos += 1;
        let Some(Tok::Str(pattern)) = self.peek().cloned() else { return Err(syntax(self.peek())) };
        self.pos += 1;
        let mut flags = String::new();
        if self.keyword("flag") {
            let Some(Tok::Str(f)) = self.peek().cloned() else { return Err(syntax(self.peek())) };
            self.pos += 1;
            flags = f;
            for f in flags.chars() {
                match f {
                    'i' | 's' | 'm' | 'q' => {}
                    // PostgreSQL 15 refuses it too.
                    'x' => {
                        return Err(SqlError::unsupported(
                            "XQuery \"x\" flag (expanded regular expressions) is not implemented",
                        ));
                    }
                    _ => {
                        return Err(SqlError::new(
                            "42601",
                            format!(
                                "invalid input syntax for type jsonpath: unrecognized flag character \"{f}\" in LIKE_REGEX predicate"
                            ),
                        ));
                    }
                }
            }
        }
        Ok(Node::LikeRegex(left.into(), pattern, flags))
    }

    fn additive(&mut self) -> Result<Node> {
        let mut left = self.multiplicative()?;
        loop {
            let op = if self.is_punct("+") {
                ArithOp::Add
            } else if self.is_punct("-") {
                ArithOp::Sub
            } else {
                return Ok(left);
            };
            self.pos += 1;
            let right = self.multiplicative()?;
            left = Node::Arith(op, left.into(), right.into());
        }
    }

    fn multiplicative(&mut self) -> Result<Node> {
        let mut left = self.unary()?;
        loop {
            let op = if self.is_punct("*") {
                ArithOp::Mul
            } else if self.is_punct("/") {
                ArithOp::Div
            } else if self.is_punct("%") {
                ArithOp::Mod
            } else {
                return Ok(left);
            };
            self.pos += 1;
            let right = self.unary()?;
            left = Node::Arith(op, left.into(), right.into());
        }
    }

    fn unary(&mut self) -> Result<Node> {
        if self.punct("-") {
            return Ok(Node::Unary(true, self.unary()?.into()));
        }
        if self.punct("+") {
            return Ok(Node::Unary(false, self.unary()?.into()));
        }
        self.accessor_expr()
    }

    fn primary(&mut self) -> Result<Node> {
        let Some(t) = self.peek().cloned() else { return Err(syntax(None)) };
        self.pos += 1;
        Ok(match t {
            Tok::Dollar => Node::Root,
            Tok::At if self.filters > 0 => Node::Current,
            Tok::At => return Err(SqlError::new("42601", "@ is not allowed in root expressions")),
            Tok::Var(v) => Node::Var(v),
            Tok::Str(s) => Node::Lit(Json::String(s)),
            Tok::Num(n) => Node::Lit(number(&n)?),
            Tok::Ident(k) if k.eq_ignore_ascii_case("true") => Node::Lit(Json::Bool(true)),
            Tok::Ident(k) if k.eq_ignore_ascii_case("false") => Node::Lit(Json::Bool(false)),
            Tok::Ident(k) if k.eq_ignore_ascii_case("null") => Node::Lit(Json::Null),
            Tok::Ident(k) if k.eq_ignore_ascii_case("last") && self.subscripts > 0 => Node::Last,
            Tok::Ident(k) if k.eq_ignore_ascii_case("last") => {
                return Err(SqlError::new("42601", "LAST is allowed only in array subscripts"));
            }
            Tok::Punct("(") => {
                let inner = self.or_expr()?;
                self.expect(")")?;
                if inner.is_predicate() && self.is_keyword("is") {
                    return self.is_unknown(inner);
                }
                inner
            }
            other => return Err(syntax(Some(&other))),
        })
    }

    fn accessor_expr(&mut self) -> Result<Node> {
        if self.is_keyword("exists") && matches!(self.peek_at(1), Some(Tok::Punct("("))) {
            return self.delimited_predicate();
        }
        let primary = self.primary()?;
        let mut steps = Vec::new();
        while let Some(step) = self.step()? {
            steps.push(step);
        }
        Ok(if steps.is_empty() { primary } else { Node::Chain(primary.into(), steps) })
    }

    fn step(&mut self) -> Result<Option<Step>> {
        if self.punct("[") {
            return self.subscripts().map(Some);
        }
        if self.punct("?") {
            self.expect("(")?;
            self.filters += 1;
            let pred = self.or_expr();
            self.filters -= 1;
            let pred = pred?;
            self.expect(")")?;
            if !pred.is_predicate() {
                return Err(syntax(self.peek()));
            }
            return Ok(Some(Step::Filter(pred.into())));
        }
        if !self.punct(".") {
            return Ok(None);
        }
        if self.punct("*") {
            return Ok(Some(Step::AnyKey));
        }
        if self.punct("**") {
            return self.any_path().map(Some);
        }
        let key = match self.peek().cloned() {
            Some(Tok::Ident(k)) => k,
            Some(Tok::Str(k)) => {
                self.pos += 1;
                return Ok(Some(Step::Key(k)));
            }
            other => return Err(syntax(other.as_ref())),
        };
        self.pos += 1;
        if !self.is_punct("(") {
            return Ok(Some(Step::Key(key)));
        }
        self.pos += 1;
        let method = match key.as_str() {
            "type" => Method::Type,
            "size" => Method::Size,
            "double" => Method::Double,
            "ceiling" => Method::Ceiling,
            "floor" => Method::Floor,
            "abs" => Method::Abs,
            "datetime" | "keyvalue" => return Err(SqlError::unsupported(format!("jsonpath item method .{key}()"))),
            _ => return Err(syntax(self.peek())),
        };
        self.expect(")")?;
        Ok(Some(Step::Method(method)))
    }

    fn subscripts(&mut self) -> Result<Step> {
        if self.punct("*") {
            self.expect("]")?;
            return Ok(Step::AnyIndex);
        }
        self.subscripts += 1;
        let mut out = Vec::new();
        let r = self.subscript_list(&mut out);
        self.subscripts -= 1;
        r?;
        Ok(Step::Index(out))
    }

    fn subscript_list(&mut self, out: &mut Vec<(Node, Option<Node>)>) -> Result<()> {
        loop {
            let from = self.or_expr()?;
            let to = if self.keyword("to") { Some(self.or_expr()?) } else { None };
            out.push((from, to));
            if self.punct("]") {
                return Ok(());
            }
            self.expect(",")?;
        }
    }

    fn any_level(&mut self) -> Result<u32> {
        match self.peek().cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                n.parse::<u32>().map_err(|_| syntax(Some(&Tok::Num(n))))
            }
            Some(Tok::Ident(k)) if k.eq_ignore_ascii_case("last") => {
                self.pos += 1;
                Ok(u32::MAX)
            }
            other => Err(syntax(other.as_ref())),
        }
    }

    fn any_path(&mut self) -> Result<Step> {
        if !self.punct("{") {
            return Ok(Step::AnyPath(0, u32::MAX));
        }
        let lo = self.any_level()?;
        let hi = if self.keyword("to") { self.any_level()? } else { lo };
        self.expect("}")?;
        Ok(Step::AnyPath(lo, hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_or_long_paths_are_refused_before_parsing() {
        let deep = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
        assert_eq!(parse(&deep).unwrap_err().sqlstate, "0A000");
        let long = format!("${}", ".a".repeat(100_000));
        assert_eq!(parse(&long).unwrap_err().sqlstate, "0A000");
        let chain = format!("1{}", " + 1".repeat(100_000));
        assert_eq!(parse(&chain).unwrap_err().sqlstate, "0A000");
        assert!(parse(&format!("{}1{}", "(".repeat(60), ")".repeat(60))).is_ok());
    }

    #[test]
    fn modes_and_predicates() {
        let p = parse("strict $.a[*] ? (@ > 1 && !(@ == 3))").unwrap();
        assert!(p.strict);
        assert!(!parse("lax $").unwrap().strict);
        assert_eq!(parse("$ && $").unwrap_err().sqlstate, "42601");
        assert_eq!(parse("@").unwrap_err().sqlstate, "42601");
        assert_eq!(parse("  ").unwrap_err().sqlstate, "22P02");
        assert_eq!(parse("$.keyvalue()").unwrap_err().sqlstate, "0A000");
    }
}
