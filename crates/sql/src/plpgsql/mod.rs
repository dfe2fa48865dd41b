//! PL/pgSQL source text to its statement tree, by hand, as PostgreSQL's
//! pl_gram.y does: the block structure, the control statements and their
//! keywords are PL/pgSQL's; every expression and embedded SQL statement is
//! kept as the text slice it was written as, for the binder to parse as
//! SQL (`SELECT expr`) and bind with the variables as parameters.
//!
//! Errors are PostgreSQL's at CREATE FUNCTION: 42601 for a syntax error,
//! 0A000 naming a construct pgtier does not run (dynamic EXECUTE, cursors,
//! FOREACH, RETURN NEXT / QUERY, ...). Nothing here knows about values or
//! catalogs.

pub mod errcodes;

use crate::error::{Result, SqlError};

/// A token: its kind and where it is in the source (byte offsets).
#[derive(Clone, Debug, PartialEq)]
struct Tok {
    kind: Kind,
    start: usize,
    end: usize,
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    /// An identifier or keyword, lower-cased unless quoted.
    Word(String, bool),
    Str,
    Num,
    /// An operator (a run of operator characters), `:=`, `::` or `..`.
    Op(String),
    /// `(`, `)`, `,`, `;`, `.`, `[`, `]`.
    Punct(char),
}

fn lex(src: &str) -> Result<Vec<Tok>> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if let Some(end) = comment_end(b, i)? {
            i = end;
            continue;
        }
        let kind = if c == b'\'' || ((c == b'E' || c == b'e') && b.get(i + 1) == Some(&b'\'')) {
            let escapes = c != b'\'';
            i += if escapes { 2 } else { 1 };
            loop {
                match b.get(i) {
                    None => return Err(SqlError::syntax("unterminated quoted string")),
                    Some(b'\\') if escapes => i += 2,
                    Some(b'\'') if b.get(i + 1) == Some(&b'\'') => i += 2,
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(_) => i += 1,
                }
            }
            Kind::Str
        } else if c == b'"' {
            let (name, end) = quoted_ident(src, i)?;
            i = end;
            Kind::Word(name, true)
        } else if c == b'$'
            && let Some(end) = dollar_quote_end(src, i)
        {
            i = end;
            Kind::Str
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if b.get(i) == Some(&b'.') && b.get(i + 1) != Some(&b'.') {
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if matches!(b.get(i), Some(b'e' | b'E'))
                && (b.get(i + 1).is_some_and(u8::is_ascii_digit)
                    || (matches!(b.get(i + 1), Some(b'+' | b'-')) && b.get(i + 2).is_some_and(u8::is_ascii_digit)))
            {
                i += 2;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            Kind::Num
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80) {
                i += 1;
            }
            Kind::Word(src[start..i].to_lowercase(), false)
        } else if c == b'$' {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            Kind::Word(src[start..i].to_owned(), false)
        } else if c == b'.' && b.get(i + 1) == Some(&b'.') {
            i += 2;
            Kind::Op("..".into())
        } else if c == b':' && matches!(b.get(i + 1), Some(b'=' | b':')) {
            i += 2;
            Kind::Op(src[start..i].to_owned())
        } else if b"(),;.[]:".contains(&c) {
            i += 1;
            Kind::Punct(c as char)
        } else if b"+-*/<>=~!@#%^&|`?".contains(&c) {
            while i < b.len() && b"+-*/<>=~!@#%^&|`?".contains(&b[i]) {
                if (b[i] == b'-' && b.get(i + 1) == Some(&b'-')) || (b[i] == b'/' && b.get(i + 1) == Some(&b'*')) {
                    break;
                }
                i += 1;
            }
            Kind::Op(src[start..i].to_owned())
        } else {
            return Err(SqlError::syntax(format!("syntax error at or near \"{}\"", c as char)));
        };
        out.push(Tok { kind, start, end: i });
    }
    Ok(out)
}

/// The end of the comment starting at `i`, if one does.
fn comment_end(b: &[u8], mut i: usize) -> Result<Option<usize>> {
    if b[i] == b'-' && b.get(i + 1) == Some(&b'-') {
        while i < b.len() && b[i] != b'\n' {
            i += 1;
        }
        return Ok(Some(i));
    }
    if b[i] != b'/' || b.get(i + 1) != Some(&b'*') {
        return Ok(None);
    }
    let mut depth = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return Ok(Some(i));
            }
        } else {
            i += 1;
        }
    }
    Err(SqlError::syntax("unterminated /* comment"))
}

/// A quoted identifier starting at `i`: its name and where it ends.
fn quoted_ident(src: &str, mut i: usize) -> Result<(String, usize)> {
    let b = src.as_bytes();
    i += 1;
    let mut name = String::new();
    loop {
        match b.get(i) {
            None => return Err(SqlError::syntax("unterminated quoted identifier")),
            Some(b'"') if b.get(i + 1) == Some(&b'"') => {
                name.push('"');
                i += 2;
            }
            Some(b'"') => return Ok((name, i + 1)),
            Some(_) => {
                let n = match b[i] {
                    0xc0..=0xdf => 2,
                    0xe0..=0xef => 3,
                    0xf0..=0xf7 => 4,
                    _ => 1,
                };
                name.push_str(src.get(i..i + n).unwrap_or(""));
                i += n;
            }
        }
    }
}

/// The end of a dollar-quoted string starting at `i` (`$tag$...$tag$`).
fn dollar_quote_end(src: &str, i: usize) -> Option<usize> {
    let rest = &src[i + 1..];
    let tag_len = rest.find('$')?;
    let tag = &rest[..tag_len];
    if !tag.chars().all(|c| c.is_alphanumeric() || c == '_') || tag.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let delim = format!("${tag}$");
    let body = i + delim.len();
    let close = src[body..].find(&delim)?;
    Some(body + close + delim.len())
}

/// A variable declared in a DECLARE section.
#[derive(Clone, Debug, PartialEq)]
pub struct Decl {
    pub name: String,
    /// The type as written (`numeric(10,2)`, `record`).
    pub ty: String,
    pub constant: bool,
    pub not_null: bool,
    pub default: Option<String>,
}

/// `[<<label>>] [DECLARE ...] BEGIN ... [EXCEPTION ...] END`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Block {
    pub label: Option<String>,
    pub decls: Vec<Decl>,
    pub body: Vec<Stmt>,
    pub handlers: Vec<Handler>,
}

/// `WHEN cond [OR cond] THEN stmts` of an EXCEPTION section.
#[derive(Clone, Debug, PartialEq)]
pub struct Handler {
    /// Condition names (lower case) or `sqlstate:XXXXX`.
    pub conditions: Vec<String>,
    pub body: Vec<Stmt>,
}

/// A loop's kind.
#[derive(Clone, Debug, PartialEq)]
pub enum LoopKind {
    Plain,
    While(String),
    /// `FOR var IN [REVERSE] lo .. hi [BY step]`.
    Range {
        var: String,
        reverse: bool,
        lo: String,
        hi: String,
        step: Option<String>,
    },
    /// `FOR target IN query`.
    Query {
        targets: Vec<String>,
        query: String,
    },
}

/// `RAISE`'s parts.
#[derive(Clone, Debug, PartialEq)]
pub struct Raise {
    /// debug, log, info, notice, warning, exception.
    pub level: String,
    /// The format string (its SQL literal text), or None.
    pub format: Option<String>,
    pub args: Vec<String>,
    /// A condition name or `sqlstate:XXXXX` given instead of a format.
    pub condition: Option<String>,
    /// `USING option = expr`, option lower-cased.
    pub options: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `target := expr` (target a variable or `rec.field`).
    Assign {
        target: String,
        expr: String,
    },
    If {
        arms: Vec<(String, Vec<Stmt>)>,
        otherwise: Option<Vec<Stmt>>,
    },
    /// `CASE [subject] WHEN exprs THEN ... [ELSE ...] END CASE`.
    Case {
        subject: Option<String>,
        arms: Vec<(String, Vec<Stmt>)>,
        otherwise: Option<Vec<Stmt>>,
    },
    Loop {
        label: Option<String>,
        kind: LoopKind,
        body: Vec<Stmt>,
    },
    /// EXIT (`cont` false) or CONTINUE.
    Exit {
        cont: bool,
        label: Option<String>,
        when: Option<String>,
    },
    Return(Option<String>),
    Raise(Raise),
    /// An SQL statement: SELECT / INSERT / UPDATE / DELETE / WITH text,
    /// with the INTO clause taken out of it.
    Sql {
        text: String,
        into: Option<Into>,
    },
    /// `PERFORM query`: the query text with PERFORM replaced by SELECT.
    Perform(String),
    /// `GET DIAGNOSTICS var = ROW_COUNT, ...` (variable, item).
    GetDiagnostics(Vec<(String, String)>),
    Block(Block),
    Null,
}

/// `INTO [STRICT] targets` of a SQL statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Into {
    pub strict: bool,
    pub targets: Vec<String>,
}

struct Parser<'s> {
    src: &'s str,
    toks: Vec<Tok>,
    pos: usize,
}

/// Parses a PL/pgSQL function body.
pub fn parse_body(src: &str) -> Result<Block> {
    let mut p = Parser { src, toks: lex(src)?, pos: 0 };
    let block = p.block(None)?;
    p.accept_punct(';');
    if let Some(t) = p.toks.get(p.pos) {
        return Err(p.syntax_at(t.start));
    }
    Ok(block)
}

fn unsupported(what: &str) -> SqlError {
    SqlError::unsupported(format!("{what} in PL/pgSQL"))
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Kind> {
        self.toks.get(self.pos).map(|t| &t.kind)
    }

    fn peek_at(&self, k: usize) -> Option<&Kind> {
        self.toks.get(self.pos + k).map(|t| &t.kind)
    }

    /// The next token's keyword (an unquoted word), if it is one.
    fn word(&self) -> Option<&str> {
        self.word_at(0)
    }

    fn word_at(&self, k: usize) -> Option<&str> {
        match self.peek_at(k) {
            Some(Kind::Word(w, false)) => Some(w),
            _ => None,
        }
    }

    fn is(&self, kw: &str) -> bool {
        self.word() == Some(kw)
    }

    fn accept(&mut self, kw: &str) -> bool {
        let hit = self.is(kw);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn accept_punct(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(&Kind::Punct(c));
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn syntax_at(&self, at: usize) -> SqlError {
        let near: String = self.src[at..].split_whitespace().next().unwrap_or("").chars().take(40).collect();
        if near.is_empty() {
            return SqlError::syntax("syntax error at end of input");
        }
        SqlError::syntax(format!("syntax error at or near \"{near}\""))
    }

    fn error_here(&self) -> SqlError {
        match self.toks.get(self.pos) {
            Some(t) => self.syntax_at(t.start),
            None => SqlError::syntax("syntax error at end of input"),
        }
    }

    fn expect(&mut self, kw: &str) -> Result<()> {
        if self.accept(kw) { Ok(()) } else { Err(self.error_here()) }
    }

    fn expect_punct(&mut self, c: char) -> Result<()> {
        if self.accept_punct(c) { Ok(()) } else { Err(self.error_here()) }
    }

    /// An identifier (any word, quoted or not).
    fn ident(&mut self) -> Result<String> {
        match self.peek() {
            Some(Kind::Word(w, _)) => {
                let w = w.clone();
                self.pos += 1;
                Ok(w)
            }
            _ => Err(self.error_here()),
        }
    }

    /// The source text of the tokens up to (not including) the first one
    /// at parenthesis depth 0 for which `stop` holds; at least one token.
    fn text_until(&mut self, stop: impl Fn(&Parser<'_>) -> bool) -> Result<String> {
        let first = self.pos;
        let mut depth = 0usize;
        while let Some(t) = self.toks.get(self.pos) {
            if depth == 0 && stop(self) {
                break;
            }
            match t.kind {
                Kind::Punct('(' | '[') => depth += 1,
                Kind::Punct(')' | ']') => depth = depth.saturating_sub(1),
                Kind::Punct(';') if depth == 0 => break,
                _ => {}
            }
            self.pos += 1;
        }
        if self.pos == first {
            return Err(self.error_here());
        }
        Ok(self.src[self.toks[first].start..self.toks[self.pos - 1].end].to_owned())
    }

    /// An expression ending before keyword `kw` (or `;`).
    fn expr_until(&mut self, kw: &str) -> Result<String> {
        self.text_until(|p| p.is(kw))
    }

    fn label(&mut self) -> Result<Option<String>> {
        if self.peek() != Some(&Kind::Op("<<".into())) {
            return Ok(None);
        }
        self.pos += 1;
        let name = self.ident()?;
        if self.peek() != Some(&Kind::Op(">>".into())) {
            return Err(self.error_here());
        }
        self.pos += 1;
        Ok(Some(name))
    }

    fn block(&mut self, label: Option<String>) -> Result<Block> {
        let label = match label {
            Some(l) => Some(l),
            None => self.label()?,
        };
        let mut decls = Vec::new();
        while self.accept("declare") {
            while !self.is("begin") && !self.is("declare") {
                if self.peek().is_none() {
                    return Err(self.error_here());
                }
                decls.push(self.decl()?);
            }
        }
        self.expect("begin")?;
        let body = self.stmts(&["end", "exception"])?;
        let mut handlers = Vec::new();
        if self.accept("exception") {
            while self.accept("when") {
                let mut conditions = vec![self.condition()?];
                while self.accept("or") {
                    conditions.push(self.condition()?);
                }
                self.expect("then")?;
                let body = self.stmts(&["when", "end"])?;
                handlers.push(Handler { conditions, body });
            }
            if handlers.is_empty() {
                return Err(self.error_here());
            }
        }
        self.expect("end")?;
        self.end_label(&label)?;
        Ok(Block { label, decls, body, handlers })
    }

    /// An optional label after END / END LOOP, which must match.
    fn end_label(&mut self, label: &Option<String>) -> Result<()> {
        if let Some(Kind::Word(w, _)) = self.peek() {
            let w = w.clone();
            if label.as_deref() != Some(w.as_str()) {
                return Err(match label {
                    None => SqlError::syntax(format!("end label \"{w}\" specified for unlabeled block")),
                    Some(l) => SqlError::syntax(format!("end label \"{w}\" differs from block's label \"{l}\"")),
                });
            }
            self.pos += 1;
        }
        Ok(())
    }

    fn condition(&mut self) -> Result<String> {
        if self.accept("sqlstate") {
            let t = self.toks.get(self.pos).cloned().ok_or_else(|| self.error_here())?;
            if t.kind != Kind::Str {
                return Err(self.error_here());
            }
            self.pos += 1;
            let code = self.src[t.start + 1..t.end - 1].to_owned();
            return Ok(format!("sqlstate:{code}"));
        }
        let name = self.ident()?;
        Ok(name)
    }

    fn decl(&mut self) -> Result<Decl> {
        if self.label()?.is_some() {
            return Err(unsupported("a label in DECLARE"));
        }
        let name = self.ident()?;
        let constant = self.accept("constant");
        if self.is("alias") {
            return Err(unsupported("ALIAS FOR"));
        }
        if self.is("cursor") || (self.is("no") && self.word_at(1) == Some("scroll")) || self.is("scroll") {
            return Err(unsupported("cursor variables"));
        }
        let ty = self.text_until(|p| {
            p.is("not")
                || p.is("default")
                || p.is("collate")
                || matches!(p.peek(), Some(Kind::Op(o)) if o == ":=" || o == "=")
        })?;
        if ty.contains('%') {
            return Err(unsupported("variables declared with %TYPE or %ROWTYPE"));
        }
        if self.is("collate") {
            return Err(unsupported("COLLATE in a variable declaration"));
        }
        let not_null = if self.accept("not") {
            self.expect("null")?;
            true
        } else {
            false
        };
        let default = if self.accept("default") || self.accept_op(":=") || self.accept_op("=") {
            Some(self.text_until(|_| false)?)
        } else {
            None
        };
        self.expect_punct(';')?;
        if (constant || not_null) && default.is_none() {
            let what = if constant { "constant" } else { "NOT NULL" };
            return Err(SqlError::syntax(format!(
                "variable \"{name}\" must have a default value, since it's declared {what}"
            )));
        }
        Ok(Decl { name, ty, constant, not_null, default })
    }

    fn accept_op(&mut self, op: &str) -> bool {
        let hit = matches!(self.peek(), Some(Kind::Op(o)) if o == op);
        if hit {
            self.pos += 1;
        }
        hit
    }

    /// Statements up to one of the keywords `ends` (not consumed).
    fn stmts(&mut self, ends: &[&str]) -> Result<Vec<Stmt>> {
        let mut out = Vec::new();
        loop {
            match self.word() {
                Some(w) if ends.contains(&w) => return Ok(out),
                _ => {}
            }
            if self.peek().is_none() {
                return Err(self.error_here());
            }
            out.push(self.stmt()?);
        }
    }

    fn stmt(&mut self) -> Result<Stmt> {
        let label = self.label()?;
        if label.is_some() && !(self.is("declare") || self.is("begin") || self.is_loop_start()) {
            return Err(self.error_here());
        }
        let Some(word) = self.word().map(str::to_owned) else {
            return match self.peek() {
                Some(Kind::Word(..)) => self.assignment(),
                _ => Err(self.error_here()),
            };
        };
        // A word followed by `:=`, `=`, `.` or `[` is an assignment's target.
        if matches!(self.peek_at(1), Some(Kind::Op(o)) if o.starts_with(":=") || o.starts_with('='))
            || matches!(self.peek_at(1), Some(Kind::Punct('.' | '[')))
        {
            return self.assignment();
        }
        let stmt = match word.as_str() {
            "declare" | "begin" => Stmt::Block(self.block(label)?),
            "if" => self.if_stmt()?,
            "case" => self.case_stmt()?,
            "loop" | "while" | "for" => self.loop_stmt(label)?,
            "foreach" => return Err(unsupported("FOREACH")),
            "exit" | "continue" => self.exit_stmt()?,
            "return" => self.return_stmt()?,
            "raise" => Stmt::Raise(self.raise_stmt()?),
            "perform" => {
                let at = self.toks[self.pos].end;
                self.pos += 1;
                self.text_until(|_| false)?;
                let end = self.toks[self.pos - 1].end;
                Stmt::Perform(format!("SELECT {}", &self.src[at..end]))
            }
            "get" => self.get_diagnostics()?,
            "null" => {
                self.pos += 1;
                Stmt::Null
            }
            "select" | "insert" | "update" | "delete" | "with" | "values" | "table" => self.sql_stmt()?,
            "execute" => return Err(unsupported("EXECUTE (dynamic SQL)")),
            "open" | "fetch" | "move" | "close" => return Err(unsupported("cursors")),
            "call" | "do" => return Err(unsupported(&word.to_uppercase())),
            "commit" | "rollback" => return Err(unsupported("transaction control")),
            "assert" => return Err(unsupported("ASSERT")),
            "elsif" | "elseif" | "else" | "end" | "when" | "then" | "exception" => {
                return Err(self.error_here());
            }
            other => return Err(unsupported(&format!("the statement {}", other.to_uppercase()))),
        };
        self.expect_punct(';')?;
        Ok(stmt)
    }

    fn is_loop_start(&self) -> bool {
        self.is("loop") || self.is("while") || self.is("for") || self.is("foreach")
    }

    fn assignment(&mut self) -> Result<Stmt> {
        let mut target = self.ident()?;
        while self.accept_punct('.') {
            target.push('.');
            target.push_str(&self.ident()?);
        }
        if self.peek() == Some(&Kind::Punct('[')) {
            return Err(unsupported("assignment to an array element"));
        }
        // `x=-1` lexes as one operator `=-`: the expression starts after `=`.
        let (start, skip) = match self.toks.get(self.pos) {
            Some(Tok { kind: Kind::Op(o), start, .. }) if o.starts_with(":=") => (*start, 2),
            Some(Tok { kind: Kind::Op(o), start, .. }) if o.starts_with('=') => (*start, 1),
            _ => return Err(self.error_here()),
        };
        let op_len = match &self.toks[self.pos].kind {
            Kind::Op(o) => o.len(),
            _ => 0,
        };
        let expr = if op_len > skip {
            self.pos += 1;
            let rest = self.text_until(|_| false).unwrap_or_default();
            let end = if rest.is_empty() { start + op_len } else { self.toks[self.pos - 1].end };
            self.src[start + skip..end].to_owned()
        } else {
            self.pos += 1;
            self.text_until(|_| false)?
        };
        self.expect_punct(';')?;
        Ok(Stmt::Assign { target, expr })
    }

    fn if_stmt(&mut self) -> Result<Stmt> {
        self.expect("if")?;
        let mut arms = Vec::new();
        let cond = self.expr_until("then")?;
        self.expect("then")?;
        arms.push((cond, self.stmts(&["elsif", "elseif", "else", "end"])?));
        let mut otherwise = None;
        loop {
            if self.accept("elsif") || self.accept("elseif") {
                let cond = self.expr_until("then")?;
                self.expect("then")?;
                arms.push((cond, self.stmts(&["elsif", "elseif", "else", "end"])?));
            } else if self.accept("else") {
                otherwise = Some(self.stmts(&["end"])?);
            } else {
                break;
            }
        }
        self.expect("end")?;
        self.expect("if")?;
        Ok(Stmt::If { arms, otherwise })
    }

    fn case_stmt(&mut self) -> Result<Stmt> {
        self.expect("case")?;
        let subject = if self.is("when") { None } else { Some(self.expr_until("when")?) };
        let mut arms = Vec::new();
        while self.accept("when") {
            let e = self.expr_until("then")?;
            self.expect("then")?;
            arms.push((e, self.stmts(&["when", "else", "end"])?));
        }
        if arms.is_empty() {
            return Err(self.error_here());
        }
        let otherwise = if self.accept("else") { Some(self.stmts(&["end"])?) } else { None };
        self.expect("end")?;
        self.expect("case")?;
        Ok(Stmt::Case { subject, arms, otherwise })
    }

    fn loop_stmt(&mut self, label: Option<String>) -> Result<Stmt> {
        let kind = if self.accept("while") {
            let cond = self.expr_until("loop")?;
            LoopKind::While(cond)
        } else if self.accept("for") {
            self.for_head()?
        } else {
            LoopKind::Plain
        };
        self.expect("loop")?;
        let body = self.stmts(&["end"])?;
        self.expect("end")?;
        self.expect("loop")?;
        self.end_label(&label)?;
        Ok(Stmt::Loop { label, kind, body })
    }

    fn for_head(&mut self) -> Result<LoopKind> {
        let mut targets = vec![self.ident()?];
        while self.accept_punct(',') {
            targets.push(self.ident()?);
        }
        self.expect("in")?;
        if self.is("execute") {
            return Err(unsupported("FOR ... IN EXECUTE"));
        }
        if matches!(self.word(), Some("select" | "with" | "values" | "table")) {
            let query = self.expr_until("loop")?;
            return Ok(LoopKind::Query { targets, query });
        }
        if matches!(self.peek_at(1), Some(Kind::Punct('('))) && !self.is("reverse") {
            // `FOR r IN cursor_name(args) LOOP` or a function call range:
            // a range's lower bound may start with a call, so keep going.
        }
        let reverse = self.accept("reverse");
        if targets.len() != 1 {
            return Err(self.error_here());
        }
        let lo = self.text_until(|p| matches!(p.peek(), Some(Kind::Op(o)) if o == "..") || p.is("loop"))?;
        if !self.accept_op("..") {
            return Err(unsupported("FOR over a cursor"));
        }
        let hi = self.text_until(|p| p.is("by") || p.is("loop"))?;
        let step = if self.accept("by") { Some(self.expr_until("loop")?) } else { None };
        Ok(LoopKind::Range { var: targets.remove(0), reverse, lo, hi, step })
    }

    fn exit_stmt(&mut self) -> Result<Stmt> {
        let cont = self.is("continue");
        self.pos += 1;
        let label = match self.peek() {
            Some(Kind::Word(w, quoted)) if *quoted || w != "when" => {
                let w = w.clone();
                self.pos += 1;
                Some(w)
            }
            _ => None,
        };
        let when = if self.accept("when") { Some(self.text_until(|_| false)?) } else { None };
        Ok(Stmt::Exit { cont, label, when })
    }

    fn return_stmt(&mut self) -> Result<Stmt> {
        self.expect("return")?;
        if self.is("next") || self.is("query") {
            return Err(unsupported("RETURN NEXT and RETURN QUERY (RETURNS SETOF is not supported)"));
        }
        if self.peek() == Some(&Kind::Punct(';')) {
            return Ok(Stmt::Return(None));
        }
        Ok(Stmt::Return(Some(self.text_until(|_| false)?)))
    }

    fn raise_stmt(&mut self) -> Result<Raise> {
        self.expect("raise")?;
        let level = match self.word() {
            Some(l @ ("debug" | "log" | "info" | "notice" | "warning" | "exception")) => {
                let l = l.to_owned();
                self.pos += 1;
                l
            }
            _ => "exception".to_owned(),
        };
        let mut r = Raise { level, format: None, args: Vec::new(), condition: None, options: Vec::new() };
        if self.peek() == Some(&Kind::Punct(';')) {
            return Err(unsupported("RAISE without parameters (re-raise)"));
        }
        match self.toks.get(self.pos).cloned() {
            Some(Tok { kind: Kind::Str, start, end }) => {
                r.format = Some(self.src[start..end].to_owned());
                self.pos += 1;
                while self.accept_punct(',') {
                    r.args.push(self.text_until(|p| p.peek() == Some(&Kind::Punct(',')) || p.is("using"))?);
                }
            }
            Some(Tok { kind: Kind::Word(..), .. }) if !self.is("using") => {
                r.condition = Some(self.condition()?);
            }
            _ => {}
        }
        if self.accept("using") {
            loop {
                let opt = self.ident()?;
                if !(self.accept_op("=") || self.accept_op(":=")) {
                    return Err(self.error_here());
                }
                let e = self.text_until(|p| p.peek() == Some(&Kind::Punct(',')))?;
                r.options.push((opt, e));
                if !self.accept_punct(',') {
                    break;
                }
            }
        }
        if self.peek() != Some(&Kind::Punct(';')) {
            return Err(self.error_here());
        }
        if let Some(f) = &r.format {
            let placeholders = count_placeholders(f);
            if placeholders > r.args.len() {
                return Err(SqlError::syntax("too few parameters specified for RAISE"));
            }
            if placeholders < r.args.len() {
                return Err(SqlError::syntax("too many parameters specified for RAISE"));
            }
        }
        Ok(r)
    }

    fn get_diagnostics(&mut self) -> Result<Stmt> {
        self.expect("get")?;
        if self.accept("stacked") {
            return Err(unsupported("GET STACKED DIAGNOSTICS"));
        }
        self.accept("current");
        self.expect("diagnostics")?;
        let mut items = Vec::new();
        loop {
            let var = self.ident()?;
            if !(self.accept_op("=") || self.accept_op(":=")) {
                return Err(self.error_here());
            }
            let item = self.ident()?;
            if item != "row_count" {
                return Err(unsupported(&format!("GET DIAGNOSTICS {}", item.to_uppercase())));
            }
            items.push((var, item));
            if !self.accept_punct(',') {
                break;
            }
        }
        Ok(Stmt::GetDiagnostics(items))
    }

    /// An SQL statement; its `INTO [STRICT] targets` (at depth 0, not
    /// INSERT INTO) is taken out of the text.
    fn sql_stmt(&mut self) -> Result<Stmt> {
        let first = self.pos;
        let mut depth = 0usize;
        let mut into: Option<(usize, usize, Into)> = None;
        while let Some(t) = self.toks.get(self.pos) {
            match &t.kind {
                Kind::Punct('(' | '[') => depth += 1,
                Kind::Punct(')' | ']') => depth = depth.saturating_sub(1),
                Kind::Punct(';') if depth == 0 => break,
                Kind::Word(w, false)
                    if w == "into"
                        && depth == 0
                        && !matches!(self.toks.get(self.pos.wrapping_sub(1)).map(|t| &t.kind), Some(Kind::Word(p, false)) if p == "insert" || p == "merge") =>
                {
                    if into.is_some() {
                        return Err(SqlError::syntax("INTO specified more than once"));
                    }
                    let at = self.pos;
                    self.pos += 1;
                    let strict = self.accept("strict");
                    let mut targets = Vec::new();
                    loop {
                        let mut name = self.ident()?;
                        while self.accept_punct('.') {
                            name.push('.');
                            name.push_str(&self.ident()?);
                        }
                        targets.push(name);
                        if !self.accept_punct(',') {
                            break;
                        }
                    }
                    into = Some((at, self.pos, Into { strict, targets }));
                    continue;
                }
                _ => {}
            }
            self.pos += 1;
        }
        if self.pos == first {
            return Err(self.error_here());
        }
        let start = self.toks[first].start;
        let end = self.toks[self.pos - 1].end;
        Ok(match into {
            None => Stmt::Sql { text: self.src[start..end].to_owned(), into: None },
            Some((a, b, into)) => {
                let head = &self.src[start..self.toks[a].start];
                let tail = if b < self.pos { &self.src[self.toks[b].start..end] } else { "" };
                Stmt::Sql { text: format!("{head} {tail}").trim().to_owned(), into: Some(into) }
            }
        })
    }
}

/// `%` placeholders of a RAISE format literal (`%%` is a literal `%`).
fn count_placeholders(literal: &str) -> usize {
    let mut n = 0;
    let mut chars = literal.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            if chars.peek() == Some(&'%') {
                chars.next();
            } else {
                n += 1;
            }
        }
    }
    n
}

/// The SQLSTATEs a condition name (or `sqlstate:XXXXX`) stands for; a
/// category's code ends in `000` and matches its class. Err 42704 for an
/// unknown name, as PostgreSQL at CREATE.
pub fn condition_codes(cond: &str) -> Result<Vec<&'static str>> {
    if let Some(code) = cond.strip_prefix("sqlstate:") {
        return match errcodes::ERRCODES.iter().find(|(c, _)| *c == code) {
            Some((c, _)) => Ok(vec![*c]),
            None if code.len() == 5 && code.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) => {
                Err(SqlError::unsupported(format!("SQLSTATE '{code}', which is not one of PostgreSQL's, in PL/pgSQL")))
            }
            None => Err(SqlError::new("42601", format!("invalid SQLSTATE code \"{code}\""))),
        };
    }
    if cond == "others" {
        return Ok(vec!["others"]);
    }
    let codes: Vec<&'static str> =
        errcodes::ERRCODES.iter().filter(|(_, name)| *name == cond).map(|(c, _)| *c).collect();
    if codes.is_empty() {
        return Err(SqlError::new("42704", format!("unrecognized exception condition \"{cond}\"")));
    }
    Ok(codes)
}

/// A SQLSTATE of PostgreSQL's as the static string errors carry.
pub fn known_code(code: &str) -> Option<&'static str> {
    errcodes::ERRCODES.iter().find(|(c, _)| *c == code).map(|(c, _)| *c)
}

/// The condition name of a SQLSTATE (for SQLERRM's neighbours and
/// messages), "" for one without a name.
pub fn code_matches(codes: &[&str], sqlstate: &str) -> bool {
    codes.iter().any(|c| {
        *c == "others" && sqlstate != "57014" && sqlstate != "P0004"
            || *c == sqlstate
            || (c.ends_with("000") && sqlstate.get(..2) == c.get(..2))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_common_shapes() {
        let b = parse_body(
            "DECLARE i int := 0; s text DEFAULT 'x'; BEGIN
               FOR k IN REVERSE 10..1 BY 2 LOOP i := i + k; END LOOP;
               IF i > 3 THEN RAISE NOTICE 'i=%', i; ELSIF i = 0 THEN NULL; ELSE i=-1; END IF;
               SELECT count(*) INTO STRICT i FROM t WHERE a = s;
               INSERT INTO t VALUES (i) RETURNING a INTO s;
               RETURN i;
             EXCEPTION WHEN division_by_zero OR SQLSTATE '22003' THEN RETURN -1; END",
        )
        .unwrap();
        assert_eq!(b.decls.len(), 2);
        assert_eq!(b.body.len(), 5);
        assert!(
            matches!(&b.body[0], Stmt::Loop { kind: LoopKind::Range { reverse: true, lo, hi, .. }, .. } if lo == "10" && hi == "1")
        );
        match &b.body[1] {
            Stmt::If { arms, otherwise: Some(e) } => {
                assert_eq!(arms.len(), 2);
                assert_eq!(e[0], Stmt::Assign { target: "i".into(), expr: "-1".into() });
            }
            other => panic!("{other:?}"),
        }
        match &b.body[2] {
            Stmt::Sql { text, into: Some(i) } => {
                assert!(i.strict);
                assert_eq!(text, "SELECT count(*)  FROM t WHERE a = s");
            }
            other => panic!("{other:?}"),
        }
        match &b.body[3] {
            Stmt::Sql { text, into: Some(i) } => {
                assert_eq!(text, "INSERT INTO t VALUES (i) RETURNING a");
                assert_eq!(i.targets, vec!["s".to_owned()]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(b.handlers[0].conditions, vec!["division_by_zero".to_owned(), "sqlstate:22003".to_owned()]);
    }

    #[test]
    fn refuses_and_rejects() {
        assert_eq!(parse_body("BEGIN EXECUTE 'x'; END").unwrap_err().sqlstate, "0A000");
        assert_eq!(parse_body("BEGIN RETURN NEXT 1; END").unwrap_err().sqlstate, "0A000");
        assert_eq!(parse_body("BEGIN IF x THEN END").unwrap_err().sqlstate, "42601");
        assert_eq!(parse_body("BEGIN RAISE NOTICE '% %', 1; END").unwrap_err().sqlstate, "42601");
        assert_eq!(parse_body("DECLARE x int NOT NULL; BEGIN END").unwrap_err().sqlstate, "42601");
    }
}
