//! The cache-group statements, parsed from SQL text: sqlparser does not know
//! them, so the SQL layer asks [`parse_cache_statement`] first and hands
//! what it returns to [`crate::Cache`]. Predicates stay SQL text: LOAD
//! sends them to PostgreSQL as given; UNLOAD and REFRESH evaluate them on the
//! cache (the SQL layer does that, see `Cache::root_key`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::CacheError;
use crate::group::GroupKind;
use crate::shard::{NodeShard, ShardMap};

/// One cache-group statement.
#[derive(Clone, Debug, PartialEq)]
pub enum CacheStatement {
    Create(CreateGroup),
    /// `DROP CACHE GROUP [IF EXISTS] name`: drops the group's tables in the cache (PostgreSQL untouched).
    Drop {
        name: String,
        if_exists: bool,
    },
    /// `LOAD CACHE GROUP name [WHERE predicate] [PARALLEL n]`.
    Load {
        name: String,
        predicate: Option<String>,
        parallel: Option<usize>,
    },
    /// `UNLOAD CACHE GROUP name [WHERE predicate]`.
    Unload {
        name: String,
        predicate: Option<String>,
    },
    /// `REFRESH CACHE GROUP name [WHERE predicate] [PARALLEL n]`.
    Refresh {
        name: String,
        predicate: Option<String>,
        parallel: Option<usize>,
    },
    /// `VERIFY CACHE GROUP name`: every cached instance compared with PostgreSQL's.
    Verify {
        name: String,
    },
    /// `TAKEOVER CACHE NODE`: the node name becomes this data directory's in
    /// PostgreSQL, whoever owned it (`node.rs`).
    Takeover,
    /// `ALTER CACHE GROUP name ACCEPT DEFINITION`: PostgreSQL's current
    /// definitions of the group's tables become the ones it checks against,
    /// when what the cache mirrors of them is unchanged (`drift.rs`).
    AcceptDefinition {
        name: String,
    },
    /// `ALTER CACHE TIER {ENABLE | DISABLE | RESIZE 'size'}`: the flash tier, online.
    Tier(TierCommand),
    /// `ALTER CACHE GROUP name PARTITION BY RANGE (column) NODES (node 'host:port'
    /// [FROM lo] [TO hi], ...)`: the node partition map, written into
    /// PostgreSQL (`shard.rs`). A node's range starts where the previous
    /// one's ends unless FROM says; the last one's TO may be left out.
    Partition(ShardMap),
}

/// What `ALTER CACHE TIER` does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TierCommand {
    /// Starts filling the configured flash tier (empty).
    Enable,
    /// Drops what flash holds (PostgreSQL has all of it) and stops using it.
    Disable,
    /// A new size in bytes, online.
    Resize(u64),
}

/// `CREATE [DYNAMIC] {AWT|SWT|READONLY} CACHE GROUP name FROM root [WHERE predicate], child, ...
///  [AGING LRU | AGING USE column LIFETIME n {SECONDS|MINUTES|HOURS|DAYS}] [AGING OFF] [KEEP] [MEMORY 'size']
///  [AUTOREFRESH {ON|OFF}] [FLASH {KEEP|NONE|DEFAULT}]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateGroup {
    pub name: String,
    pub kind: GroupKind,
    pub dynamic: bool,
    /// `[schema.]table` as written (identifiers unquoted and folded as PostgreSQL does).
    pub root: String,
    /// The condition on root rows every instance of the group satisfies (SQL text).
    pub root_predicate: Option<String>,
    pub children: Vec<String>,
    pub aging: Aging,
    /// Never evicted by the memory budget (time-based aging still applies).
    pub keep: bool,
    /// This group's own memory budget in bytes (the global one applies too).
    pub memory_budget: Option<u64>,
    /// READONLY: kept current from PostgreSQL by logical replication (the
    /// default); OFF: changes only by LOAD and REFRESH, and PostgreSQL needs
    /// no `wal_level = logical`.
    #[serde(default = "autorefresh_default")]
    pub autorefresh: bool,
    /// Whether instances aging evicts from memory go to the flash tier
    /// (study 001's per-object KEEP / NONE / DEFAULT).
    #[serde(default)]
    pub flash: FlashPolicy,
}

/// `FLASH {KEEP|NONE|DEFAULT}` of a cache group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlashPolicy {
    /// Evicted instances go to flash, and leave it in FIFO order.
    #[default]
    Default,
    /// Preferred on flash: rewritten rather than dropped when their region is reclaimed.
    Keep,
    /// Never on flash: evicted instances go away (reload from PostgreSQL).
    None,
}

impl FlashPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            FlashPolicy::Default => "DEFAULT",
            FlashPolicy::Keep => "KEEP",
            FlashPolicy::None => "NONE",
        }
    }
}

/// Groups stored before the AUTOREFRESH option existed follow PostgreSQL.
fn autorefresh_default() -> bool {
    true
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Aging {
    /// Instances stay until unloaded (default for explicitly loaded groups).
    Off,
    /// Least recently used instances go when memory passes the high watermark (default for DYNAMIC groups).
    Lru,
    /// Instances whose root `column` (a date/timestamp) is older than `lifetime` go.
    Time { column: String, lifetime: Duration },
}

/// Recognises a cache-group statement. `None`: the text is not one (the
/// caller parses it as ordinary SQL). `Some(Err)`: it is one, but malformed
/// (42601 with the position's context).
///
/// A text is a cache-group statement when its first words are `CREATE
/// [DYNAMIC] {AWT|SWT|READONLY}`, `CREATE DYNAMIC`, `CREATE CACHE`, `DROP
/// CACHE`, `LOAD CACHE`, `UNLOAD CACHE` or `REFRESH CACHE`: none of these
/// starts a PostgreSQL statement, so claiming them never hides one.
pub fn parse_cache_statement(sql: &str) -> Option<Result<CacheStatement, CacheError>> {
    let tokens = match tokenize(sql) {
        Ok(tokens) => tokens,
        // Only a text that starts like one of ours gets our error.
        Err(error) => return starts_like_cache_statement(sql).then_some(Err(error)),
    };
    let mut p = Parser { sql, tokens: &tokens, at: 0 };
    if !p.claims() {
        return None;
    }
    Some(p.statement())
}

impl CacheStatement {
    /// The statements of `sql`, split at top-level `;` (quotes, dollar
    /// quotes and comments respected); pieces holding only whitespace and
    /// comments are left out. A text that does not tokenize is one piece.
    /// The SQL layer uses it to find a cache-group statement among others.
    pub fn split_statements(sql: &str) -> Vec<&str> {
        let Ok(tokens) = tokenize(sql) else { return vec![sql] };
        let mut pieces = Vec::new();
        let mut start: Option<usize> = None;
        let mut end = 0;
        for token in &tokens {
            if token.kind == Kind::Punct(';') {
                if let Some(s) = start.take() {
                    pieces.push(&sql[s..end]);
                }
                continue;
            }
            start.get_or_insert(token.start);
            end = token.end;
        }
        if let Some(s) = start {
            pieces.push(&sql[s..end]);
        }
        pieces
    }

    /// The statement's name as PostgreSQL would name it in messages and
    /// command tags (`LOAD CACHE GROUP`).
    pub fn command(&self) -> &'static str {
        match self {
            CacheStatement::Create(_) => "CREATE CACHE GROUP",
            CacheStatement::Drop { .. } => "DROP CACHE GROUP",
            CacheStatement::Load { .. } => "LOAD CACHE GROUP",
            CacheStatement::Unload { .. } => "UNLOAD CACHE GROUP",
            CacheStatement::Refresh { .. } => "REFRESH CACHE GROUP",
            CacheStatement::Verify { .. } => "VERIFY CACHE GROUP",
            CacheStatement::Takeover => "TAKEOVER CACHE NODE",
            CacheStatement::AcceptDefinition { .. } | CacheStatement::Partition(_) => "ALTER CACHE GROUP",
            CacheStatement::Tier(_) => "ALTER CACHE TIER",
        }
    }

    /// The group the statement is about ("" for TAKEOVER CACHE NODE and ALTER CACHE TIER).
    pub fn group(&self) -> &str {
        match self {
            CacheStatement::Takeover | CacheStatement::Tier(_) => "",
            CacheStatement::Create(create) => &create.name,
            CacheStatement::Drop { name, .. }
            | CacheStatement::Load { name, .. }
            | CacheStatement::Unload { name, .. }
            | CacheStatement::Refresh { name, .. }
            | CacheStatement::Verify { name }
            | CacheStatement::AcceptDefinition { name } => name,
            CacheStatement::Partition(map) => &map.group,
        }
    }
}

impl CreateGroup {
    /// A memory size in PostgreSQL's units (`64MB`, `500kB`, `1GB`, `8TB`,
    /// `1024B`; `KiB`/`MiB`/`GiB`/`TiB` too, units case-insensitive, 1kB =
    /// 1024 bytes; a bare number is bytes) in bytes.
    pub fn parse_memory_size(text: &str) -> Result<u64, String> {
        let text = text.trim();
        let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let (number, unit) = text.split_at(digits_end);
        let invalid = || format!("invalid memory size \"{text}\"; valid units are B, kB, MB, GB and TB");
        let number: u64 = number.parse().map_err(|_| invalid())?;
        let shift = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 0,
            "kb" | "kib" => 10,
            "mb" | "mib" => 20,
            "gb" | "gib" => 30,
            "tb" | "tib" => 40,
            _ => return Err(invalid()),
        };
        number.checked_mul(1u64 << shift).ok_or_else(|| format!("memory size \"{text}\" is out of range"))
    }
}

// ------------------------------------------------------------------------
// Tokens: just enough of PostgreSQL's lexer to find where a predicate ends
// without looking inside strings, quoted identifiers or comments.

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    /// An unquoted word, folded to lower case.
    Word(String),
    /// A double-quoted identifier, unescaped.
    Quoted(String),
    /// A string constant (any form); its text is only ever sliced raw.
    Str(String),
    Number(String),
    /// `$1`: only ever part of a predicate.
    Param,
    Punct(char),
}

#[derive(Clone, Debug)]
struct Token {
    kind: Kind,
    /// Byte range in the statement text.
    start: usize,
    end: usize,
}

fn syntax(reason: impl Into<String>) -> CacheError {
    CacheError::Syntax { reason: reason.into() }
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || !c.is_ascii()
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || !c.is_ascii()
}

fn tokenize(sql: &str) -> Result<Vec<Token>, CacheError> {
    let bytes = sql.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < sql.len() {
        let rest = &sql[i..];
        let Some(c) = rest.chars().next() else { break };
        let start = i;
        if c.is_whitespace() {
            i += c.len_utf8();
            continue;
        }
        if rest.starts_with("--") {
            i += rest.find('\n').unwrap_or(rest.len());
            continue;
        }
        if rest.starts_with("/*") {
            i += block_comment_len(rest)?;
            continue;
        }
        let kind = if c == '\'' {
            let len = quoted_len(rest, '\'', false).ok_or_else(|| syntax("unterminated quoted string"))?;
            i += len;
            Kind::Str(sql[start..i].to_owned())
        } else if (c == 'e' || c == 'E') && bytes.get(i + 1) == Some(&b'\'') {
            let len = quoted_len(&rest[1..], '\'', true).ok_or_else(|| syntax("unterminated quoted string"))?;
            i += 1 + len;
            Kind::Str(sql[start..i].to_owned())
        } else if c == '"' {
            let len = quoted_len(rest, '"', false).ok_or_else(|| syntax("unterminated quoted identifier"))?;
            i += len;
            let name = sql[start + 1..i - 1].replace("\"\"", "\"");
            if name.is_empty() {
                return Err(syntax("zero-length delimited identifier"));
            }
            Kind::Quoted(name)
        } else if c == '$' && rest[1..].starts_with(|d: char| d.is_ascii_digit()) {
            i += 1 + rest[1..].find(|d: char| !d.is_ascii_digit()).unwrap_or(rest.len() - 1);
            Kind::Param
        } else if c == '$' {
            let len = dollar_quoted_len(rest).ok_or_else(|| syntax("unterminated dollar-quoted string"))?;
            i += len;
            Kind::Str(sql[start..i].to_owned())
        } else if is_ident_start(c) {
            i += rest.find(|d: char| !is_ident_char(d)).unwrap_or(rest.len());
            Kind::Word(sql[start..i].to_lowercase())
        } else if c.is_ascii_digit() || (c == '.' && rest[1..].starts_with(|d: char| d.is_ascii_digit())) {
            i += number_len(rest);
            Kind::Number(sql[start..i].to_owned())
        } else {
            i += c.len_utf8();
            Kind::Punct(c)
        };
        tokens.push(Token { kind, start, end: i });
    }
    Ok(tokens)
}

/// Length of a `/* */` comment at the start of `text`; they nest, as in PostgreSQL.
fn block_comment_len(text: &str) -> Result<usize, CacheError> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with("/*") {
            depth += 1;
            i += 2;
        } else if text[i..].starts_with("*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return Ok(i);
            }
        } else {
            i += text[i..].chars().next().map_or(1, char::len_utf8);
        }
    }
    Err(syntax("unterminated /* comment"))
}

/// Length of the quoted text at the start of `text` (opening and closing
/// quote included); a doubled quote is part of it, and with `backslash` (an
/// E'' string) so is a backslash-escaped one.
fn quoted_len(text: &str, quote: char, backslash: bool) -> Option<usize> {
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        if backslash && c == '\\' {
            chars.next();
        } else if c == quote {
            if text[i + 1..].starts_with(quote) {
                chars.next();
            } else {
                return Some(i + 1);
            }
        }
    }
    None
}

/// Length of a `$tag$ ... $tag$` string at the start of `text`.
fn dollar_quoted_len(text: &str) -> Option<usize> {
    let tag_end = 1 + text[1..].find('$')?;
    let tag = &text[1..tag_end];
    if !tag.chars().all(|c| is_ident_char(c) && c != '$') || tag.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let delimiter = &text[..=tag_end];
    let body = &text[tag_end + 1..];
    body.find(delimiter).map(|at| tag_end + 1 + at + delimiter.len())
}

fn number_len(text: &str) -> usize {
    let mut len = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let exponent = &text[len..];
    if exponent.starts_with(['e', 'E']) {
        let sign = usize::from(exponent[1..].starts_with(['+', '-']));
        let digits = exponent[1 + sign..].find(|c: char| !c.is_ascii_digit()).unwrap_or(exponent.len() - 1 - sign);
        if digits > 0 {
            len += 1 + sign + digits;
        }
    }
    len
}

/// The first words of a cache statement other than CREATE (followed by
/// `CACHE GROUP`, or `CACHE NODE` for TAKEOVER); callers may use them (with
/// "create") as a cheap filter.
pub const CACHE_VERBS: [&str; 7] = ["drop", "load", "unload", "refresh", "verify", "takeover", "alter"];

/// For a text that does not tokenize: does it start with one of our
/// statements' words (so its error is ours to report)?
fn starts_like_cache_statement(sql: &str) -> bool {
    let words: Vec<String> = sql.split_whitespace().take(3).map(str::to_lowercase).collect();
    let word = |i: usize| words.get(i).map_or("", String::as_str);
    match word(0) {
        "create" => matches!(word(1), "dynamic" | "awt" | "swt" | "readonly" | "cache"),
        verb if CACHE_VERBS.contains(&verb) => word(1) == "cache",
        _ => false,
    }
}

// ------------------------------------------------------------------------
// The grammar.

struct Parser<'a> {
    sql: &'a str,
    tokens: &'a [Token],
    at: usize,
}

const CREATE_OPTIONS: [&str; 5] = ["aging", "keep", "memory", "autorefresh", "flash"];

impl Parser<'_> {
    fn peek(&self) -> Option<&Kind> {
        self.tokens.get(self.at).map(|t| &t.kind)
    }

    fn peek_word(&self, offset: usize) -> Option<&str> {
        match self.tokens.get(self.at + offset).map(|t| &t.kind) {
            Some(Kind::Word(w)) => Some(w),
            _ => None,
        }
    }

    /// Whether the statement is ours (see [`parse_cache_statement`]).
    fn claims(&self) -> bool {
        matches!(
            (self.peek_word(0), self.peek_word(1)),
            (Some("create"), Some("dynamic" | "awt" | "swt" | "readonly" | "cache"))
        ) || matches!((self.peek_word(0), self.peek_word(1)), (Some(verb), Some("cache")) if CACHE_VERBS.contains(&verb)
        )
    }

    /// What the next token is, for an error message.
    fn near(&self) -> String {
        match self.tokens.get(self.at) {
            Some(token) => format!("at or near \"{}\"", &self.sql[token.start..token.end]),
            None => "at end of input".to_owned(),
        }
    }

    fn expected(&self, what: &str) -> CacheError {
        syntax(format!("expected {what} {}", self.near()))
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if self.peek_word(0) == Some(word) {
            self.at += 1;
            return true;
        }
        false
    }

    fn expect_word(&mut self, word: &str) -> Result<(), CacheError> {
        if self.eat_word(word) { Ok(()) } else { Err(self.expected(&word.to_uppercase())) }
    }

    fn identifier(&mut self, what: &str) -> Result<String, CacheError> {
        let name = match self.peek() {
            Some(Kind::Word(w)) => w.clone(),
            Some(Kind::Quoted(q)) => q.clone(),
            _ => return Err(self.expected(what)),
        };
        self.at += 1;
        Ok(name)
    }

    /// `[schema.]table`, each part written so `QualifiedName::parse` reads
    /// it back as it was meant: quoted where folding would change it.
    fn table_name(&mut self) -> Result<String, CacheError> {
        let mut name = quote_if_needed(&self.identifier("a table name")?);
        if self.peek() == Some(&Kind::Punct('.')) {
            self.at += 1;
            name.push('.');
            name.push_str(&quote_if_needed(&self.identifier("a table name")?));
        }
        Ok(name)
    }

    fn count(&mut self, what: &str) -> Result<u64, CacheError> {
        let Some(Kind::Number(text)) = self.peek() else { return Err(self.expected(what)) };
        let n = text.parse::<u64>().map_err(|_| self.expected(what))?;
        self.at += 1;
        Ok(n)
    }

    /// The end of the statement: nothing, or one `;`.
    fn end(&mut self) -> Result<(), CacheError> {
        if self.peek() == Some(&Kind::Punct(';')) {
            self.at += 1;
        }
        match self.tokens.get(self.at) {
            None => Ok(()),
            Some(_) => Err(syntax(format!("unexpected text {}", self.near()))),
        }
    }

    fn statement(&mut self) -> Result<CacheStatement, CacheError> {
        let Some(verb) = self.peek_word(0).map(str::to_owned) else { return Err(self.expected("a statement")) };
        self.at += 1;
        if verb == "create" {
            return self.create().map(CacheStatement::Create);
        }
        self.expect_word("cache")?;
        if verb == "takeover" {
            self.expect_word("node")?;
            return self.end().map(|()| CacheStatement::Takeover);
        }
        if verb == "alter" && self.eat_word("tier") {
            return self.tier_command();
        }
        self.expect_word("group")?;
        let statement = match verb.as_str() {
            "drop" => {
                let if_exists = self.eat_word("if");
                if if_exists {
                    self.expect_word("exists")?;
                }
                CacheStatement::Drop { name: self.identifier("a cache group name")?, if_exists }
            }
            "verify" => CacheStatement::Verify { name: self.identifier("a cache group name")? },
            "alter" => {
                let name = self.identifier("a cache group name")?;
                if self.eat_word("partition") {
                    let map = self.partition_map(name)?;
                    self.end()?;
                    return Ok(CacheStatement::Partition(map));
                }
                self.expect_word("accept")?;
                self.expect_word("definition")?;
                CacheStatement::AcceptDefinition { name }
            }
            "unload" => {
                let name = self.identifier("a cache group name")?;
                let (predicate, parallel) = self.tail_predicate()?;
                if parallel.is_some() {
                    return Err(syntax("UNLOAD CACHE GROUP takes no PARALLEL: it reads nothing from PostgreSQL"));
                }
                CacheStatement::Unload { name, predicate }
            }
            _ => {
                let name = self.identifier("a cache group name")?;
                let (predicate, parallel) = self.tail_predicate()?;
                if verb == "load" {
                    CacheStatement::Load { name, predicate, parallel }
                } else {
                    CacheStatement::Refresh { name, predicate, parallel }
                }
            }
        };
        self.end()?;
        Ok(statement)
    }

    /// `BY RANGE (column) NODES (node 'host:port' [FROM lo] [TO hi], ...)`.
    fn partition_map(&mut self, group: String) -> Result<ShardMap, CacheError> {
        self.expect_word("by")?;
        self.expect_word("range")?;
        self.punct('(')?;
        let column = self.identifier("a column name")?;
        self.punct(')')?;
        self.expect_word("nodes")?;
        self.punct('(')?;
        let mut shards: Vec<NodeShard> = Vec::new();
        loop {
            let node = self.identifier("a node name")?;
            let addr = match self.peek() {
                Some(Kind::Str(text)) if text.starts_with('\'') => text[1..text.len() - 1].replace("''", "'"),
                _ => return Err(self.expected("the node's address as 'host:port'")),
            };
            self.at += 1;
            let previous_hi = shards.last().and_then(|s| s.hi);
            let lo = if self.eat_word("from") { Some(self.signed("a range bound")?) } else { previous_hi };
            let hi = if self.eat_word("to") { Some(self.signed("a range bound")?) } else { None };
            shards.push(NodeShard { node, addr, lo, hi });
            if self.peek() == Some(&Kind::Punct(',')) {
                self.at += 1;
                continue;
            }
            self.punct(')')?;
            break;
        }
        let map = ShardMap { group, column, shards };
        map.validate()?;
        Ok(map)
    }

    fn punct(&mut self, c: char) -> Result<(), CacheError> {
        if self.peek() == Some(&Kind::Punct(c)) {
            self.at += 1;
            return Ok(());
        }
        Err(self.expected(&format!("\"{c}\"")))
    }

    /// An integer, optionally negative.
    fn signed(&mut self, what: &str) -> Result<i64, CacheError> {
        let negative = self.peek() == Some(&Kind::Punct('-'));
        if negative {
            self.at += 1;
        }
        let Some(Kind::Number(text)) = self.peek() else { return Err(self.expected(what)) };
        let n = text.parse::<i64>().map_err(|_| self.expected(what))?;
        self.at += 1;
        Ok(if negative { -n } else { n })
    }

    /// `[WHERE predicate] [PARALLEL n]` at the end of LOAD/REFRESH/UNLOAD:
    /// the predicate runs to the end, except a top-level `PARALLEL n` last.
    fn tail_predicate(&mut self) -> Result<(Option<String>, Option<usize>), CacheError> {
        let has_where = self.eat_word("where");
        let mut end = self.tokens.len();
        if self.tokens.last().map(|t| &t.kind) == Some(&Kind::Punct(';')) {
            end -= 1;
        }
        let mut parallel = None;
        if end >= self.at + 2 {
            let last_two = (&self.tokens[end - 2].kind, &self.tokens[end - 1].kind);
            if let (Kind::Word(w), Kind::Number(n)) = last_two
                && w == "parallel"
            {
                let n: usize = n
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| syntax(format!("PARALLEL must be a positive integer, not {n}")))?;
                parallel = Some(n);
                end -= 2;
            }
        }
        let predicate = if has_where {
            let predicate = self.predicate_until(|_, index| index >= end)?;
            Some(predicate)
        } else {
            None
        };
        if parallel.is_some() {
            self.at = end + 2;
        }
        Ok((predicate, parallel))
    }

    /// The raw text of a predicate from the current token up to (not
    /// including) the first top-level token `stop` accepts.
    fn predicate_until(&mut self, stop: impl Fn(&Kind, usize) -> bool) -> Result<String, CacheError> {
        let first = self.at;
        let mut depth = 0usize;
        while let Some(token) = self.tokens.get(self.at) {
            if depth == 0 && stop(&token.kind, self.at) {
                break;
            }
            match token.kind {
                Kind::Punct('(') => depth += 1,
                Kind::Punct(')') => {
                    depth =
                        depth.checked_sub(1).ok_or_else(|| syntax(format!("unbalanced parentheses {}", self.near())))?
                }
                Kind::Punct(';') if depth == 0 => break,
                _ => {}
            }
            self.at += 1;
        }
        if depth > 0 {
            return Err(syntax("unbalanced parentheses in WHERE condition"));
        }
        if self.at == first {
            return Err(syntax(format!("expected a condition after WHERE {}", self.near())));
        }
        Ok(self.sql[self.tokens[first].start..self.tokens[self.at - 1].end].to_owned())
    }

    fn create(&mut self) -> Result<CreateGroup, CacheError> {
        let dynamic = self.eat_word("dynamic");
        let kind = match self.peek_word(0) {
            Some("awt") => GroupKind::Awt,
            Some("swt") => GroupKind::Swt,
            Some("readonly") => GroupKind::ReadOnly,
            _ => return Err(self.expected("AWT, SWT or READONLY")),
        };
        self.at += 1;
        self.expect_word("cache")?;
        self.expect_word("group")?;
        let name = self.identifier("a cache group name")?;
        self.expect_word("from")?;
        let root = self.table_name()?;
        let stop = |kind: &Kind, _| match kind {
            Kind::Punct(',') => true,
            Kind::Word(w) => CREATE_OPTIONS.contains(&w.as_str()),
            _ => false,
        };
        let root_predicate = if self.eat_word("where") { Some(self.predicate_until(stop)?) } else { None };
        let mut children = Vec::new();
        while self.peek() == Some(&Kind::Punct(',')) {
            self.at += 1;
            let child = self.table_name()?;
            if self.peek_word(0) == Some("where") {
                return Err(CacheError::PredicateNotOnRoot { table: child });
            }
            children.push(child);
        }
        let mut create = CreateGroup {
            name,
            kind,
            dynamic,
            root,
            root_predicate,
            children,
            aging: if dynamic { Aging::Lru } else { Aging::Off },
            keep: false,
            memory_budget: None,
            autorefresh: kind == GroupKind::ReadOnly,
            flash: FlashPolicy::Default,
        };
        self.create_options(&mut create)?;
        self.end()?;
        Ok(create)
    }

    /// `[AGING ...] [KEEP] [MEMORY 'size'] [AUTOREFRESH {ON|OFF}] [FLASH {KEEP|NONE|DEFAULT}]`, in any
    /// order, each at most once.
    fn create_options(&mut self, create: &mut CreateGroup) -> Result<(), CacheError> {
        let mut seen: Vec<String> = Vec::new();
        while let Some(option) = self.peek_word(0).filter(|w| CREATE_OPTIONS.contains(w)).map(str::to_owned) {
            if seen.contains(&option) {
                return Err(syntax(format!("{} is given more than once", option.to_uppercase())));
            }
            self.at += 1;
            match option.as_str() {
                "aging" => create.aging = self.aging()?,
                "keep" => create.keep = true,
                "flash" => {
                    create.flash = if self.eat_word("keep") {
                        FlashPolicy::Keep
                    } else if self.eat_word("none") {
                        FlashPolicy::None
                    } else if self.eat_word("default") {
                        FlashPolicy::Default
                    } else {
                        return Err(self.expected("KEEP, NONE or DEFAULT after FLASH"));
                    };
                }
                "autorefresh" => {
                    if create.kind != GroupKind::ReadOnly {
                        return Err(syntax(
                            "AUTOREFRESH applies to READONLY cache groups (AWT and SWT groups change through pgtier)",
                        ));
                    }
                    create.autorefresh = if self.eat_word("on") {
                        true
                    } else if self.eat_word("off") {
                        false
                    } else {
                        return Err(self.expected("ON or OFF after AUTOREFRESH"));
                    };
                }
                _ => {
                    let Some(Kind::Str(text)) = self.peek() else {
                        return Err(self.expected("a quoted size such as '64MB'"));
                    };
                    let size = unquote(text).ok_or_else(|| self.expected("a quoted size such as '64MB'"))?;
                    create.memory_budget = Some(CreateGroup::parse_memory_size(&size).map_err(syntax)?);
                    self.at += 1;
                }
            }
            seen.push(option);
        }
        if self.tokens.get(self.at).is_some() && self.peek() != Some(&Kind::Punct(';')) {
            return Err(self.expected("AGING, KEEP, MEMORY, AUTOREFRESH, FLASH or the end of the statement"));
        }
        Ok(())
    }

    /// After `ALTER CACHE TIER`: `ENABLE`, `DISABLE` or `RESIZE 'size'`.
    fn tier_command(&mut self) -> Result<CacheStatement, CacheError> {
        let command = if self.eat_word("enable") {
            TierCommand::Enable
        } else if self.eat_word("disable") {
            TierCommand::Disable
        } else if self.eat_word("resize") {
            let Some(Kind::Str(text)) = self.peek() else {
                return Err(self.expected("a quoted size such as '8GB'"));
            };
            let size = unquote(text).ok_or_else(|| self.expected("a quoted size such as '8GB'"))?;
            let bytes = CreateGroup::parse_memory_size(&size).map_err(syntax)?;
            self.at += 1;
            TierCommand::Resize(bytes)
        } else {
            return Err(self.expected("ENABLE, DISABLE or RESIZE after ALTER CACHE TIER"));
        };
        self.end()?;
        Ok(CacheStatement::Tier(command))
    }

    fn aging(&mut self) -> Result<Aging, CacheError> {
        if self.eat_word("lru") {
            return Ok(Aging::Lru);
        }
        if self.eat_word("off") {
            return Ok(Aging::Off);
        }
        if !self.eat_word("use") {
            return Err(self.expected("LRU, USE or OFF after AGING"));
        }
        let column = self.identifier("a column name")?;
        self.expect_word("lifetime")?;
        let n = self.count("a whole number of time units")?;
        let seconds = match self.peek_word(0) {
            Some("second" | "seconds") => 1,
            Some("minute" | "minutes") => 60,
            Some("hour" | "hours") => 3_600,
            Some("day" | "days") => 86_400,
            _ => return Err(self.expected("SECONDS, MINUTES, HOURS or DAYS")),
        };
        self.at += 1;
        let lifetime = n.checked_mul(seconds).ok_or_else(|| syntax("LIFETIME is out of range"))?;
        Ok(Aging::Time { column, lifetime: Duration::from_secs(lifetime) })
    }
}

fn quote_if_needed(name: &str) -> String {
    let plain = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$');
    if plain { name.to_owned() } else { format!("\"{}\"", name.replace('"', "\"\"")) }
}

/// The value of a plain `'...'` string constant (not E'' or dollar-quoted).
fn unquote(text: &str) -> Option<String> {
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    Some(inner.replace("''", "'"))
}
