//! PostgreSQL's regular expressions (Tcl's ARE) on a Rust engine, for the
//! subset where both mean the same: `~` `~*` `!~` `!~*`, and the
//! regexp_* functions and substring(s FROM pattern) declared in [`DEFS`].
//!
//! A pattern is translated, not passed through: the two syntaxes overlap
//! but differ in places (`\b` is backspace in an ARE and a word boundary
//! in Rust, `.` crosses newlines in an ARE, `&&` inside brackets is an
//! intersection in Rust, classes and case folding are ASCII-only under
//! pgtier's C locale and Unicode-aware in Rust). What has no exact
//! translation is refused with 0A000 naming the construct: backreferences,
//! lookaround, non-greedy quantifiers, embedded options and directors,
//! collating elements, the escapes pgtier does not map.
//!
//! Match extent: an ARE whose quantifiers are all greedy matches the
//! longest text at the leftmost position (POSIX), where Rust's engines
//! prefer the first alternative. The leftmost start is the same in both;
//! the end is taken from a lazy DFA in `MatchKind::All` (the longest).
//! Captures are Rust's; they are reported only for patterns without
//! alternation or quantified groups, and only when Rust's match has the
//! longest extent (else 0A000), so they agree with PostgreSQL's.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;

use regex_automata::hybrid::dfa::{Cache as DfaCache, DFA};
use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, MatchKind};

use pgtier_engine::{DataType, Value};

use super::registry::{ArgBinder, Call, EvalCtx, FunctionDef, Ty, Volatility::Immutable, int, text, text_fn};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::value::types::{Elem, array_text};
use DataType::{Int4, Text};

fn invalid(msg: impl std::fmt::Display) -> SqlError {
    SqlError::new("2201B", format!("invalid regular expression: {msg}"))
}

/// What the translation learned about a pattern.
struct Translated {
    rust: String,
    groups: usize,
    /// Alternation or a quantified group: Rust's captures could differ from PostgreSQL's.
    captures_unsafe: bool,
}

/// The kind of the last thing emitted, for where a quantifier may go.
#[derive(Clone, Copy, PartialEq)]
enum Last {
    /// Start of the pattern, `(` or `|`: a quantifier here is PostgreSQL's error.
    Nothing,
    /// An anchor or word boundary: quantifying it is refused.
    Anchor,
    Atom,
    /// A group just closed: quantifying it makes its captures engine-dependent.
    Group,
    Quantifier,
}

const POSIX_CLASSES: [&str; 12] =
    ["alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper", "xdigit"];

/// A character as a Rust regex literal (also inside a class).
fn push_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() || !c.is_ascii() {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:02X}}}", u32::from(c));
    }
}

/// A literal, with its other ASCII case when matching case-insensitively
/// (PostgreSQL's C locale folds ASCII letters only).
fn push_char(out: &mut String, c: char, ci: bool) {
    if ci && c.is_ascii_alphabetic() {
        out.push('[');
        out.push(c.to_ascii_lowercase());
        out.push(c.to_ascii_uppercase());
        out.push(']');
    } else {
        push_literal(out, c);
    }
}

/// The escapes that stand for one character, outside and inside brackets.
fn char_escape(c: char) -> Option<char> {
    Some(match c {
        'a' => '\u{7}',
        'b' => '\u{8}',
        'e' => '\u{1B}',
        'f' => '\u{C}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'v' => '\u{B}',
        c if !c.is_ascii_alphanumeric() => c,
        _ => return None,
    })
}

/// Class shorthands as bracket contents (ASCII: the C locale's classes).
fn class_escape(c: char) -> Option<&'static str> {
    Some(match c.to_ascii_lowercase() {
        'd' => "0-9",
        's' => "\\t\\n\\x0B\\x0C\\r ",
        'w' => "0-9A-Za-z_",
        _ => return None,
    })
}

fn translate(pattern: &str, ci: bool) -> Result<Translated> {
    if pattern.starts_with("***") {
        return Err(SqlError::unsupported("regular expression director \"***\""));
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut t = Translated { rust: String::new(), groups: 0, captures_unsafe: false };
    let mut last = Last::Nothing;
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '\\' => {
                let Some(&e) = chars.get(i) else { return Err(invalid("invalid escape \\ sequence")) };
                i += 1;
                if let Some(set) = class_escape(e) {
                    let neg = if e.is_ascii_uppercase() { "^" } else { "" };
                    let _ = write!(out, "[{neg}{set}]");
                    last = Last::Atom;
                } else if e == 'A' || e == 'Z' || e == 'y' {
                    out.push_str(match e {
                        'A' => "\\A",
                        'Z' => "\\z",
                        _ => "(?-u:\\b)",
                    });
                    last = Last::Anchor;
                } else if e.is_ascii_digit() {
                    return Err(SqlError::unsupported("backreferences in regular expressions"));
                } else if let Some(ch) = char_escape(e) {
                    push_char(&mut out, ch, ci);
                    last = Last::Atom;
                } else {
                    return Err(SqlError::unsupported(format!("regular expression escape \\{e}")));
                }
            }
            '(' => {
                if chars.get(i) == Some(&'?') {
                    match chars.get(i + 1) {
                        Some(':') => {
                            out.push_str("(?:");
                            i += 2;
                        }
                        Some('=' | '!' | '<') => {
                            return Err(SqlError::unsupported("lookaround constraints in regular expressions"));
                        }
                        _ => return Err(SqlError::unsupported("embedded options in regular expressions")),
                    }
                } else {
                    out.push('(');
                    t.groups += 1;
                }
                depth += 1;
                last = Last::Nothing;
            }
            ')' => {
                if depth == 0 {
                    return Err(invalid("parentheses () not balanced"));
                }
                depth -= 1;
                out.push(')');
                last = Last::Group;
            }
            '|' => {
                t.captures_unsafe = true;
                out.push('|');
                last = Last::Nothing;
            }
            '*' | '+' | '?' | '{' => {
                let bound = if c == '{' {
                    let (text, next) = bound(&chars, i)?;
                    i = next;
                    text
                } else {
                    c.to_string()
                };
                match last {
                    Last::Nothing | Last::Quantifier => return Err(invalid("quantifier operand invalid")),
                    Last::Anchor => return Err(SqlError::unsupported("a quantified anchor in a regular expression")),
                    Last::Group => t.captures_unsafe = true,
                    Last::Atom => {}
                }
                if chars.get(i) == Some(&'?') {
                    return Err(SqlError::unsupported("non-greedy quantifiers in regular expressions"));
                }
                out.push_str(&bound);
                last = Last::Quantifier;
            }
            '[' => {
                i = bracket(&chars, i, ci, &mut out)?;
                last = Last::Atom;
            }
            '^' | '$' => {
                out.push(c);
                last = Last::Anchor;
            }
            '.' => {
                out.push('.');
                last = Last::Atom;
            }
            '}' => return Err(SqlError::unsupported("\"}\" outside a bound in a regular expression")),
            other => {
                push_char(&mut out, other, ci);
                last = Last::Atom;
            }
        }
    }
    if depth != 0 {
        return Err(invalid("parentheses () not balanced"));
    }
    // An ARE's `.` and negated brackets match a newline (no 'n' flag).
    t.rust = format!("(?s:{out})");
    Ok(t)
}

/// A bound `{m}`, `{m,}`, `{m,n}` starting after its `{` at `i`:
/// (Rust's text, the index after `}`).
fn bound(chars: &[char], mut i: usize) -> Result<(String, usize)> {
    let start = i;
    while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == ',') {
        i += 1;
    }
    if chars.get(i) != Some(&'}') || i == start || !chars[start].is_ascii_digit() {
        return Err(SqlError::unsupported("\"{\" not starting a bound {m,n} in a regular expression"));
    }
    let body: String = chars[start..i].iter().collect();
    let mut parts = body.splitn(2, ',');
    let parse = |s: Option<&str>| -> Result<Option<u32>> {
        match s {
            None | Some("") => Ok(None),
            Some(s) => s.parse::<u32>().map(Some).map_err(|_| invalid("invalid repetition count(s)")),
        }
    };
    let lo = parse(parts.next())?.unwrap_or(0);
    let hi = parse(parts.next())?;
    // PostgreSQL's limit (DUPMAX) is 255.
    if lo > 255 || hi.is_some_and(|h| h > 255 || h < lo) || body.matches(',').count() > 1 {
        return Err(invalid("invalid repetition count(s)"));
    }
    Ok((format!("{{{body}}}"), i + 1))
}

/// A bracket expression starting after its `[` at `i`: written to `out`
/// as a Rust class; the index after its `]`.
fn bracket(chars: &[char], mut i: usize, ci: bool, out: &mut String) -> Result<usize> {
    let unbalanced = || invalid("brackets [] not balanced");
    out.push('[');
    if chars.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    let mut first = true;
    loop {
        let Some(&c) = chars.get(i) else { return Err(unbalanced()) };
        i += 1;
        if c == ']' && !first {
            break;
        }
        first = false;
        let lo = match c {
            '[' if matches!(chars.get(i), Some(':')) => {
                let rest: String = chars[i + 1..].iter().collect();
                let Some(end) = rest.find(":]") else { return Err(invalid("invalid character class")) };
                let name = &rest[..end];
                if !POSIX_CLASSES.contains(&name) {
                    return Err(invalid("invalid character class"));
                }
                if ci && (name == "upper" || name == "lower") {
                    return Err(SqlError::unsupported(format!("[:{name}:] in a case-insensitive regular expression")));
                }
                let _ = write!(out, "[:{name}:]");
                i += 1 + name.chars().count() + 2;
                continue;
            }
            '[' if matches!(chars.get(i), Some('.' | '=')) => {
                return Err(SqlError::unsupported("collating elements and equivalence classes in regular expressions"));
            }
            '\\' => {
                let Some(&e) = chars.get(i) else { return Err(unbalanced()) };
                i += 1;
                if let Some(set) = class_escape(e) {
                    if e.is_ascii_uppercase() {
                        return Err(SqlError::unsupported(format!("\\{e} inside brackets in a regular expression")));
                    }
                    out.push_str(set);
                    continue;
                }
                char_escape(e).ok_or_else(|| SqlError::unsupported(format!("regular expression escape \\{e}")))?
            }
            c => c,
        };
        // A range lo-hi; a '-' first or last is itself.
        if chars.get(i) == Some(&'-') && chars.get(i + 1).is_some_and(|&n| n != ']') {
            let hi = match chars[i + 1] {
                '\\' => chars
                    .get(i + 2)
                    .copied()
                    .and_then(char_escape)
                    .ok_or_else(|| SqlError::unsupported("escape as a range end in a regular expression"))?,
                '[' => return Err(SqlError::unsupported("a class as a range end in a regular expression")),
                h => h,
            };
            i += if chars[i + 1] == '\\' { 3 } else { 2 };
            if hi < lo {
                return Err(invalid("invalid character range"));
            }
            push_literal(out, lo);
            out.push('-');
            push_literal(out, hi);
            if ci {
                for (a, z, shift) in [('a', 'z', -32i32), ('A', 'Z', 32)] {
                    let (from, to) = (lo.max(a), hi.min(z));
                    if from <= to {
                        let moved = |ch: char| {
                            char::from_u32(
                                u32::try_from(i32::try_from(u32::from(ch)).unwrap_or(0) + shift).unwrap_or(0),
                            )
                            .unwrap_or(ch)
                        };
                        push_literal(out, moved(from));
                        out.push('-');
                        push_literal(out, moved(to));
                    }
                }
            }
            continue;
        }
        push_literal(out, lo);
        if ci && lo.is_ascii_alphabetic() {
            push_literal(out, if lo.is_ascii_lowercase() { lo.to_ascii_uppercase() } else { lo.to_ascii_lowercase() });
        }
    }
    out.push(']');
    Ok(i)
}

/// Byte ranges of a match's groups (group 0 the whole match); None for a
/// group that did not take part.
type Spans = Vec<Option<(usize, usize)>>;

/// A compiled pattern: the leftmost-first engine (start, captures) and the
/// lazy DFA finding the longest end.
pub(super) struct Compiled {
    re: Regex,
    rust: String,
    /// Built on first use: `~` never needs it.
    longest: std::cell::OnceCell<(DFA, RefCell<DfaCache>)>,
    groups: usize,
    captures_unsafe: bool,
}

fn syntax_config() -> syntax::Config {
    syntax::Config::new().unicode(true).utf8(true)
}

impl Compiled {
    fn new(pattern: &str, ci: bool) -> Result<Compiled> {
        let t = translate(pattern, ci)?;
        let re = Regex::builder().syntax(syntax_config()).build(&t.rust).map_err(invalid)?;
        Ok(Compiled {
            re,
            rust: t.rust,
            longest: std::cell::OnceCell::new(),
            groups: t.groups,
            captures_unsafe: t.captures_unsafe,
        })
    }

    /// The first match at or after byte `from`: (start, end) with
    /// PostgreSQL's extent.
    fn find(&self, s: &str, from: usize) -> Result<Option<(usize, usize)>> {
        let Some(m) = self.re.search(&Input::new(s).range(from..)) else { return Ok(None) };
        let end = self.longest_end(s, m.start())?;
        Ok(Some((m.start(), end.max(m.end()))))
    }

    fn longest_end(&self, s: &str, start: usize) -> Result<usize> {
        if self.longest.get().is_none() {
            let dfa = DFA::builder()
                .configure(DFA::config().match_kind(MatchKind::All))
                .syntax(syntax_config())
                .build(&self.rust)
                .map_err(invalid)?;
            let cache = RefCell::new(dfa.create_cache());
            let _ = self.longest.set((dfa, cache));
        }
        let Some((dfa, cache)) = self.longest.get() else {
            return Err(SqlError::new("XX000", "regular expression not compiled"));
        };
        let mut cache = cache.borrow_mut();
        let input = Input::new(s).range(start..).anchored(Anchored::Yes);
        match dfa.try_search_fwd(&mut cache, &input) {
            Ok(Some(h)) => Ok(h.offset()),
            Ok(None) => Err(SqlError::new("XX000", "regular expression engines disagree on a match")),
            Err(_) => Err(SqlError::unsupported("a regular expression this complex")),
        }
    }

    /// The captures of the match starting at or after `from` (group 0 the
    /// whole match), each None when its group did not take part.
    fn captures(&self, s: &str, from: usize) -> Result<Option<Spans>> {
        if self.groups > 0 && self.captures_unsafe {
            return Err(SqlError::unsupported(
                "capture groups with alternation or a quantified group in a regular expression",
            ));
        }
        let mut caps = self.re.create_captures();
        self.re.search_captures(&Input::new(s).range(from..), &mut caps);
        let Some(m) = caps.get_match() else { return Ok(None) };
        if self.longest_end(s, m.start())? != m.end() {
            return Err(SqlError::unsupported(
                "a regular expression whose first match is not its longest, with capture groups",
            ));
        }
        Ok(Some((0..=self.groups).map(|g| caps.get_group(g).map(|sp| (sp.start, sp.end))).collect()))
    }
}

thread_local! {
    /// Recently compiled patterns: a query matches a few patterns against many rows.
    static COMPILED: RefCell<Vec<(String, bool, Rc<Compiled>)>> = const { RefCell::new(Vec::new()) };
}

const COMPILED_KEPT: usize = 8;

fn compiled(pattern: &str, ci: bool) -> Result<Rc<Compiled>> {
    COMPILED.with(|cell| {
        let mut list = cell.borrow_mut();
        if let Some(k) = list.iter().position(|(p, c, _)| p == pattern && *c == ci) {
            let hit = list.remove(k);
            let re = Rc::clone(&hit.2);
            list.push(hit);
            return Ok(re);
        }
        let re = Rc::new(Compiled::new(pattern, ci)?);
        if list.len() >= COMPILED_KEPT {
            list.remove(0);
        }
        list.push((pattern.to_owned(), ci, Rc::clone(&re)));
        Ok(re)
    })
}

/// `s ~ pattern` (`~*`: case-insensitive).
pub fn is_match(s: &str, pattern: &str, ci: bool) -> Result<bool> {
    Ok(compiled(pattern, ci)?.re.is_match(s))
}

/// The flags of regexp_replace / regexp_match: (global, case-insensitive).
/// PostgreSQL's other valid flags are 0A000, unknown letters 22023.
fn flags(text: &str) -> Result<(bool, bool)> {
    let (mut global, mut ci) = (false, false);
    for f in text.chars() {
        match f {
            'g' => global = true,
            'i' => ci = true,
            'c' => ci = false,
            'b' | 'e' | 'm' | 'n' | 'p' | 'q' | 's' | 't' | 'w' | 'x' => {
                return Err(SqlError::unsupported(format!("regular expression option \"{f}\"")));
            }
            _ => return Err(SqlError::new("22023", format!("invalid regular expression option: \"{f}\""))),
        }
    }
    Ok((global, ci))
}

/// regexp_replace(s, pattern, replacement [, flags]): `\1`..`\9` and `\&`
/// in the replacement insert captures, `\\` a backslash.
pub fn regexp_replace(s: &str, pattern: &str, replacement: &str, flag_text: &str) -> Result<String> {
    let (global, _) = flags(flag_text)?;
    replace_from(s, pattern, replacement, 0, if global { 0 } else { 1 }, flag_text)
}

/// regexp_replace(s, pattern, replacement, start [, n [, flags]]): from
/// character `start` on, match `n` only (0: every match); without `n`, the
/// 'g' flag decides (textregexreplace_extended).
pub fn regexp_replace_at(
    s: &str,
    pattern: &str,
    replacement: &str,
    start: i64,
    n: Option<i64>,
    flag_text: &str,
) -> Result<String> {
    if start <= 0 {
        return Err(SqlError::new("22023", format!("invalid value for parameter \"start\": {start}")));
    }
    if let Some(n) = n.filter(|n| *n < 0) {
        return Err(SqlError::new("22023", format!("invalid value for parameter \"n\": {n}")));
    }
    let (global, _) = flags(flag_text)?;
    let n = n.unwrap_or(if global { 0 } else { 1 });
    let skip = usize::try_from(start - 1).unwrap_or(usize::MAX);
    match s.char_indices().map(|(i, _)| i).chain(std::iter::once(s.len())).nth(skip) {
        Some(from) => replace_from(s, pattern, replacement, from, n, flag_text),
        None => Ok(s.to_owned()),
    }
}

/// replace_text_regexp: from byte `from`, replace match `n` (0: all).
fn replace_from(s: &str, pattern: &str, replacement: &str, mut from: usize, n: i64, flag_text: &str) -> Result<String> {
    let (_, ci) = flags(flag_text)?;
    let re = compiled(pattern, ci)?;
    let uses_groups = replacement.as_bytes().windows(2).any(|w| w[0] == b'\\' && (b'1'..=b'9').contains(&w[1]));
    let mut out = String::with_capacity(s.len());
    let (mut copied, mut seen) = (0, 0);
    while from <= s.len() {
        let spans = if uses_groups {
            match re.captures(s, from)? {
                Some(spans) => spans,
                None => break,
            }
        } else {
            match re.find(s, from)? {
                Some(m) => vec![Some(m)],
                None => break,
            }
        };
        let Some(Some((start, end))) = spans.first().copied() else { break };
        seen += 1;
        if n == 0 || seen == n {
            out.push_str(&s[copied..start]);
            substitute(s, replacement, &spans, &mut out);
            copied = end;
            if n > 0 {
                break;
            }
        }
        from = end;
        if start == end {
            // An empty match: the next search starts one character later.
            match s[end..].chars().next() {
                Some(c) => from += c.len_utf8(),
                None => break,
            }
        }
    }
    out.push_str(&s[copied..]);
    Ok(out)
}

fn substitute(s: &str, replacement: &str, spans: &[Option<(usize, usize)>], out: &mut String) {
    let mut it = replacement.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let group = match it.peek() {
            Some(&d) if ('1'..='9').contains(&d) => d.to_digit(10).and_then(|n| usize::try_from(n).ok()),
            Some('&') => Some(0),
            Some('\\') => {
                it.next();
                out.push('\\');
                continue;
            }
            _ => None,
        };
        let Some(g) = group else {
            out.push('\\');
            continue;
        };
        it.next();
        if let Some(Some((a, b))) = spans.get(g) {
            out.push_str(&s[*a..*b]);
        }
    }
}

/// regexp_like(s, pattern [, flags]): `~` with flags ('g' is 22023).
pub fn regexp_like(s: &str, pattern: &str, flag_text: &str) -> Result<bool> {
    let (global, ci) = flags(flag_text)?;
    if global {
        return Err(SqlError::new("22023", "regexp_like() does not support the \"global\" option"));
    }
    is_match(s, pattern, ci)
}

/// substring(s FROM pattern): the text the first parenthesized group
/// matched (None if it took no part), or the whole match without groups;
/// None without a match.
pub fn substring(s: &str, pattern: &str) -> Result<Option<String>> {
    let re = compiled(pattern, false)?;
    if re.groups == 0 {
        return Ok(re.find(s, 0)?.map(|(a, b)| s[a..b].to_owned()));
    }
    Ok(re.captures(s, 0)?.and_then(|spans| spans.get(1).copied().flatten()).map(|(a, b)| s[a..b].to_owned()))
}

/// regexp_match(s, pattern [, flags]): the first match's captures (or the
/// whole match without groups) as text[] items; None without a match.
pub fn regexp_match(s: &str, pattern: &str, flag_text: &str) -> Result<Option<Vec<Option<String>>>> {
    let (global, ci) = flags(flag_text)?;
    if global {
        return Err(SqlError::new("22023", "regexp_match() does not support the \"global\" option")
            .with_hint("Use the regexp_matches function instead."));
    }
    let re = compiled(pattern, ci)?;
    if re.groups == 0 {
        return Ok(re.find(s, 0)?.map(|(a, b)| vec![Some(s[a..b].to_owned())]));
    }
    Ok(re.captures(s, 0)?.map(|spans| spans[1..].iter().map(|sp| sp.map(|(a, b)| s[a..b].to_owned())).collect()))
}

/// The matches regexp_count/instr/substr see (setup_regexp_matches with
/// 'g' implied): from character `start` (1-based; 22023 below 1), each
/// match's whole span, or with `groups` its groups' spans; an empty match
/// moves the next search one character on. Also the spans per match.
fn positional_matches(
    fname: &str,
    s: &str,
    pattern: &str,
    start: i64,
    flag_text: &str,
    groups: bool,
) -> Result<(Spans, usize)> {
    if start <= 0 {
        return Err(SqlError::new("22023", format!("invalid value for parameter \"start\": {start}")));
    }
    let (global, ci) = flags(flag_text)?;
    if global {
        return Err(SqlError::new("22023", format!("{fname}() does not support the \"global\" option")));
    }
    let re = compiled(pattern, ci)?;
    let groups = groups && re.groups > 0;
    let per_match = if groups { re.groups } else { 1 };
    let mut spans = Vec::new();
    let skip = usize::try_from(start - 1).unwrap_or(usize::MAX);
    let Some(mut from) = s.char_indices().map(|(i, _)| i).chain(std::iter::once(s.len())).nth(skip) else {
        return Ok((spans, per_match));
    };
    loop {
        let found = if groups { re.captures(s, from)? } else { re.find(s, from)?.map(|m| vec![Some(m)]) };
        let Some(found) = found else { break };
        let Some((so, eo)) = found.first().copied().flatten() else { break };
        if groups {
            spans.extend_from_slice(&found[1..])
        } else {
            spans.push(Some((so, eo)))
        }
        from = eo;
        if so == eo {
            match s[eo..].chars().next() {
                Some(c) => from += c.len_utf8(),
                None => break,
            }
        }
    }
    Ok((spans, per_match))
}

fn check_n(name: &str, n: i64, negative_only: bool) -> Result<()> {
    if n < 0 || (n == 0 && !negative_only) {
        return Err(SqlError::new("22023", format!("invalid value for parameter \"{name}\": {n}")));
    }
    Ok(())
}

/// The span regexp_instr / regexp_substr select: match `n`, group `subexpr` (0: the whole match).
fn select(spans: &[Option<(usize, usize)>], per_match: usize, n: i64, subexpr: i64) -> Option<(usize, usize)> {
    let n = usize::try_from(n - 1).ok()?;
    let sub = usize::try_from(subexpr).ok()?;
    if sub > per_match {
        return None;
    }
    spans.get(n.checked_mul(per_match)? + sub.saturating_sub(1)).copied().flatten()
}

/// regexp_split_to_array(s, pattern [, flags]): the text between matches
/// (setup_regexp_matches ignoring degenerate ones: an empty match at the
/// end, or one ending where the previous match ended, does not split).
pub fn regexp_split(s: &str, pattern: &str, flag_text: &str) -> Result<Vec<String>> {
    let (global, ci) = flags(flag_text)?;
    if global {
        return Err(SqlError::new("22023", "regexp_split_to_array() does not support the \"global\" option"));
    }
    let re = compiled(pattern, ci)?;
    let (mut pieces, mut piece_start, mut prev_end, mut from) = (Vec::new(), 0, 0, 0);
    while from <= s.len() {
        let Some((so, eo)) = re.find(s, from)? else { break };
        if so < s.len() && eo > prev_end {
            pieces.push(s[piece_start..so].to_owned());
            piece_start = eo;
        }
        prev_end = eo;
        from = eo;
        if so == eo {
            match s[eo..].chars().next() {
                Some(c) => from += c.len_utf8(),
                None => break,
            }
        }
    }
    pieces.push(s[piece_start..].to_owned());
    Ok(pieces)
}

/// regexp_count(s, pattern [, start [, flags]]).
pub fn regexp_count(s: &str, pattern: &str, start: i64, flag_text: &str) -> Result<i64> {
    let (spans, _) = positional_matches("regexp_count", s, pattern, start, flag_text, false)?;
    Ok(i64::try_from(spans.len()).unwrap_or(i64::MAX))
}

/// regexp_instr(s, pattern [, start [, n [, endoption [, flags [, subexpr]]]]]):
/// the character position (1-based) where match `n` (or its group) starts,
/// or just after it ends (endoption 1); 0 when there is none.
pub fn regexp_instr(
    s: &str,
    pattern: &str,
    start: i64,
    n: i64,
    endoption: i64,
    flag_text: &str,
    subexpr: i64,
) -> Result<i64> {
    if start <= 0 {
        return Err(SqlError::new("22023", format!("invalid value for parameter \"start\": {start}")));
    }
    check_n("n", n, false)?;
    if endoption != 0 && endoption != 1 {
        return Err(SqlError::new("22023", format!("invalid value for parameter \"endoption\": {endoption}")));
    }
    check_n("subexpr", subexpr, true)?;
    let (spans, per_match) = positional_matches("regexp_instr", s, pattern, start, flag_text, subexpr > 0)?;
    Ok(match select(&spans, per_match, n, subexpr) {
        Some((so, eo)) => {
            let at = if endoption == 1 { eo } else { so };
            i64::try_from(s[..at].chars().count()).unwrap_or(i64::MAX) + 1
        }
        None => 0,
    })
}

/// regexp_substr(s, pattern [, start [, n [, flags [, subexpr]]]]): the
/// text of match `n` (or its group), None when there is none.
pub fn regexp_substr(
    s: &str,
    pattern: &str,
    start: i64,
    n: i64,
    flag_text: &str,
    subexpr: i64,
) -> Result<Option<String>> {
    if start <= 0 {
        return Err(SqlError::new("22023", format!("invalid value for parameter \"start\": {start}")));
    }
    check_n("n", n, false)?;
    check_n("subexpr", subexpr, true)?;
    let (spans, per_match) = positional_matches("regexp_substr", s, pattern, start, flag_text, subexpr > 0)?;
    Ok(select(&spans, per_match, n, subexpr).map(|(so, eo)| s[so..eo].to_owned()))
}

/// similar_escape_internal (regexp.c): a SQL regular expression (SIMILAR
/// TO's pattern) as the ARE PostgreSQL matches it with `~`, anchored and
/// wrapped in a non-capturing group; `escape` None is the default
/// backslash, "" no escape character.
pub fn similar_to_escape(pattern: &str, escape: Option<&str>) -> Result<String> {
    let parts = similar_parts(pattern, escape)?;
    let mut out = String::with_capacity(pattern.len() * 3 + 23);
    out.push_str("^(?:");
    for (k, part) in parts.iter().enumerate() {
        out.push_str(match k {
            0 => "",
            1 => "){1,1}?(",
            _ => "){1,1}(?:",
        });
        out.push_str(part);
    }
    out.push_str(")$");
    Ok(out)
}

/// A SQL regular expression translated to ARE syntax, cut at its
/// escape-double-quote separators (one to three parts).
fn similar_parts(pattern: &str, escape: Option<&str>) -> Result<Vec<String>> {
    let escape = match escape {
        None => Some('\\'),
        Some(e) => {
            let mut chars = e.chars();
            match (chars.next(), chars.next()) {
                (None, _) => None,
                (Some(c), None) => Some(c),
                _ => {
                    return Err(SqlError::new("22025", "invalid escape string")
                        .with_hint("Escape string must be empty or one character."));
                }
            }
        }
    };
    let mut parts = Vec::with_capacity(3);
    let mut out = String::with_capacity(pattern.len() * 3);
    let mut after_escape = false;
    // Square-bracket nesting, and the position inside a class: 1 right
    // after `[`, 2 after `[^`, 3 past the first element (where `]` ends it).
    let (mut bracket_depth, mut class_pos) = (0usize, 0usize);
    for c in pattern.chars() {
        if after_escape {
            if c == '"' && bracket_depth < 1 {
                if parts.len() == 2 {
                    return Err(SqlError::new(
                        "2200C",
                        "SQL regular expression may not contain more than two escape-double-quote separators",
                    ));
                }
                parts.push(std::mem::take(&mut out));
            } else {
                out.push('\\');
                out.push(c);
                class_pos = 3;
            }
            after_escape = false;
        } else if Some(c) == escape {
            after_escape = true;
        } else if bracket_depth > 0 {
            if c == '\\' {
                out.push('\\');
            }
            out.push(c);
            if c == ']' && class_pos > 2 {
                bracket_depth -= 1;
            } else if c == '[' {
                bracket_depth += 1;
                class_pos = 3;
            } else if c == '^' {
                class_pos += 1;
            } else {
                class_pos = 3;
            }
        } else {
            match c {
                '[' => {
                    out.push('[');
                    bracket_depth = 1;
                    class_pos = 1;
                }
                '%' => out.push_str(".*"),
                '_' => out.push('.'),
                '(' => out.push_str("(?:"),
                '\\' | '.' | '^' | '$' => {
                    out.push('\\');
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
    }
    parts.push(out);
    Ok(parts)
}

/// The longest string substring(s SIMILAR ...) searches: its answer is
/// found by trying every split of `s` (quadratic), see
/// similar_substring.
const SIMILAR_SUBSTRING_CHARS_MAX: usize = 2_000;

/// substring(s SIMILAR pattern ESCAPE escape): PostgreSQL matches
/// `^(?:A){1,1}?(B){1,1}(?:C)$` (similar_to_escape) and answers B's span.
/// The regex engine's dissection of that concatenation prefers the
/// shortest A (its non-greedy bound), then the longest B; only the split
/// points matter, since each part must match its whole span. The regex
/// library here has Perl's preferences (a greedy `a*` in A would take
/// what PostgreSQL gives to B), so the split is searched directly: the
/// shortest prefix A matches whole, then the longest B after it that
/// leaves C a whole match.
fn similar_substring(s: &str, pattern: &str, escape: &str) -> Result<Option<String>> {
    let parts = similar_parts(pattern, Some(escape))?;
    let whole = |part: &str| compiled(&format!("^(?:{part})$"), false);
    if parts.len() == 1 {
        return Ok(whole(&parts[0])?.find(s, 0)?.map(|_| s.to_owned()));
    }
    if s.chars().count() > SIMILAR_SUBSTRING_CHARS_MAX {
        return Err(SqlError::unsupported(format!(
            "substring(... SIMILAR ...) of a string over {SIMILAR_SUBSTRING_CHARS_MAX} characters"
        )));
    }
    let (a, b) = (whole(&parts[0])?, whole(&parts[1])?);
    let c = parts.get(2).map(|p| whole(p)).transpose()?;
    let ends: Vec<usize> = s.char_indices().map(|(k, _)| k).chain(std::iter::once(s.len())).collect();
    for (n, &i) in ends.iter().enumerate() {
        if a.find(&s[..i], 0)?.is_none() {
            continue;
        }
        for &j in ends[n..].iter().rev() {
            let rest_matches = match &c {
                Some(c) => c.find(&s[j..], 0)?.is_some(),
                None => j == s.len(),
            };
            if rest_matches && b.find(&s[i..j], 0)?.is_some() {
                return Ok(Some(s[i..j].to_owned()));
            }
        }
    }
    Ok(None)
}

fn eval_similar_to_escape(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let escape = if vals.len() > 1 { Some(text(vals, 1)) } else { None };
    Ok(Value::Text(similar_to_escape(text(vals, 0), escape)?))
}

/// The regular-expression functions.
pub(super) const DEFS: &[FunctionDef] = &[
    FunctionDef { names: &["regexp_replace"], volatility: Immutable, resolve: resolve_replace },
    FunctionDef {
        names: &["regexp_match"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, eval_match, (2, 3), &[Text; 3], Elem::Text.data_type()),
    },
    FunctionDef {
        names: &["regexp_like"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, eval_like, (2, 3), &[Text; 3], DataType::Bool),
    },
    FunctionDef {
        names: &["regexp_split_to_array"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, eval_split, (2, 3), &[Text; 3], Elem::Text.data_type()),
    },
    FunctionDef {
        names: &["regexp_count"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, eval_count, (2, 4), &[Text, Text, Int4, Text], Int4),
    },
    FunctionDef {
        names: &["regexp_instr"],
        volatility: Immutable,
        resolve: |def, b, call| {
            text_fn(def, b, call, eval_instr, (2, 7), &[Text, Text, Int4, Int4, Int4, Text, Int4], Int4)
        },
    },
    FunctionDef {
        names: &["regexp_substr"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, eval_substr, (2, 6), &[Text, Text, Int4, Int4, Text, Int4], Text),
    },
    FunctionDef {
        names: &["similar_to_escape"],
        volatility: Immutable,
        resolve: |def, b, call| text_fn(def, b, call, eval_similar_to_escape, (1, 2), &[Text; 2], Text),
    },
    FunctionDef {
        names: &["regexp_matches", "regexp_split_to_table"],
        volatility: Immutable,
        resolve: |_, _, call| Err(SqlError::unsupported(format!("set-returning function {}()", call.name))),
    },
];

fn resolve_replace(def: &'static FunctionDef, b: &mut dyn ArgBinder, call: Call<'_>) -> Result<(Expr, Ty)> {
    // PostgreSQL 15's forms with a start position (and an occurrence).
    let n = call.len();
    if n > 4 || (n == 4 && call.args[3].1.is_some_and(crate::value::is_integer)) {
        return text_fn(def, b, call, eval_replace_at, (4, 6), &[Text, Text, Text, Int4, Int4, Text], Text);
    }
    text_fn(def, b, call, eval_replace, (3, 4), &[Text; 4], Text)
}

/// regexp_replace(s, pattern, replacement [, flags]).
fn eval_replace(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Text(regexp_replace(text(vals, 0), text(vals, 1), text(vals, 2), text(vals, 3))?))
}

/// regexp_replace(s, pattern, replacement, start [, n [, flags]]).
fn eval_replace_at(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let n = vals.get(4).and_then(Value::as_i64);
    Ok(Value::Text(regexp_replace_at(text(vals, 0), text(vals, 1), text(vals, 2), int(vals, 3), n, text(vals, 5))?))
}

/// regexp_match(s, pattern [, flags]): text[].
fn eval_match(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(match regexp_match(text(vals, 0), text(vals, 1), text(vals, 2))? {
        Some(items) => {
            let items: Vec<Value> = items.into_iter().map(|i| i.map_or(Value::Null, Value::Text)).collect();
            Value::Text(array_text(Elem::Text, &items))
        }
        None => Value::Null,
    })
}

/// substring(s FROM pattern): the first group's match, or the whole match.
pub(super) fn eval_substring(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(substring(text(vals, 0), text(vals, 1))?.map_or(Value::Null, Value::Text))
}

/// substring(s SIMILAR pattern ESCAPE escape), substring(s, pattern,
/// escape).
pub(super) fn eval_similar_substring(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(similar_substring(text(vals, 0), text(vals, 1), text(vals, 2))?.map_or(Value::Null, Value::Text))
}

/// regexp_split_to_array(s, pattern [, flags]): text[].
fn eval_split(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let items: Vec<Value> =
        regexp_split(text(vals, 0), text(vals, 1), text(vals, 2))?.into_iter().map(Value::Text).collect();
    Ok(Value::Text(array_text(Elem::Text, &items)))
}

fn eval_like(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(Value::Bool(regexp_like(text(vals, 0), text(vals, 1), text(vals, 2))?))
}

/// An optional integer argument.
fn int_or(vals: &[Value], k: usize, default: i64) -> i64 {
    vals.get(k).and_then(Value::as_i64).unwrap_or(default)
}

fn int4(n: i64) -> Value {
    Value::Int4(i32::try_from(n).unwrap_or(i32::MAX))
}

/// regexp_count(s, pattern [, start [, flags]]).
fn eval_count(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    Ok(int4(regexp_count(text(vals, 0), text(vals, 1), int_or(vals, 2, 1), text(vals, 3))?))
}

/// regexp_instr(s, pattern [, start [, n [, endoption [, flags [, subexpr]]]]]).
fn eval_instr(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let (s, pattern) = (text(vals, 0), text(vals, 1));
    let (start, n, end) = (int_or(vals, 2, 1), int_or(vals, 3, 1), int_or(vals, 4, 0));
    Ok(int4(regexp_instr(s, pattern, start, n, end, text(vals, 5), int_or(vals, 6, 0))?))
}

/// regexp_substr(s, pattern [, start [, n [, flags [, subexpr]]]]).
fn eval_substr(vals: &[Value], _: &mut EvalCtx<'_>) -> Result<Value> {
    let (s, pattern, start, n) = (text(vals, 0), text(vals, 1), int_or(vals, 2, 1), int_or(vals, 3, 1));
    Ok(regexp_substr(s, pattern, start, n, text(vals, 4), int_or(vals, 5, 0))?.map_or(Value::Null, Value::Text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_extent_not_first_alternative() {
        assert_eq!(regexp_replace("abcd", "a|ab", "X", "").unwrap(), "Xcd");
        assert_eq!(regexp_replace("xyz", "y*", "-", "g").unwrap(), "-x--z-");
        assert_eq!(regexp_replace("AAA", "^|$", "Z", "g").unwrap(), "ZAAAZ");
    }

    #[test]
    fn refusals() {
        for p in ["(a)\\1", "a(?=b)", "a*?", "(?i)a", "***=a", "[[.a.]]", "\\m"] {
            assert_eq!(compiled(p, false).err().map(|e| e.sqlstate), Some("0A000"), "{p}");
        }
        for p in ["(a", "a{3,1}", "*a", "[a"] {
            assert_eq!(compiled(p, false).err().map(|e| e.sqlstate), Some("2201B"), "{p}");
        }
    }

    #[test]
    fn ascii_only_case_folding_and_classes() {
        assert!(is_match("ABC", "abc", true).unwrap());
        assert!(!is_match("É", "é", true).unwrap());
        assert!(!is_match("é", "\\w", false).unwrap());
        assert!(is_match("a\nb", "a.b", false).unwrap());
        assert!(is_match("\u{8}", "\\b", false).unwrap());
        assert!(is_match("a&b", "[&]", false).unwrap());
    }
}
