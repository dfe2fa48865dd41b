//! `json` and `jsonb` values: reading JSON text as PostgreSQL's json_in
//! reads it (RFC 8259, PostgreSQL's error details), jsonb's canonical text
//! (what jsonb_out prints) and jsonb_cmp's order as bytes.
//!
//! The engine stores both as text: json exactly as it was written (after
//! validation), jsonb in its canonical form. jsonb's comparison is
//! PostgreSQL's compareJsonbContainers: a top-level scalar is a one-element
//! "raw scalar" array; containers compare by element/pair count first
//! (so an empty top-level array sorts before any scalar), then element by
//! element (objects: key, value in jsonb's key order: shorter keys first,
//! then bytewise); scalars of different types order null < string <
//! number < boolean < array < object; numbers compare by value (1.0 = 1);
//! strings bytewise (the `C` collation, the private cluster's). [`sort_key`]
//! turns a canonical text into bytes whose memcmp order is that order, so
//! keys, hashing and comparison share one definition.

use std::cmp::Ordering;
use std::fmt::Write as _;

/// Largest absolute decimal exponent numeric_in accepts (NUMERIC_MAX_PRECISION).
const EXPONENT_MAX: i64 = 1000;
/// Nesting PostgreSQL's parser allows before "stack depth limit exceeded";
/// a bound here keeps the recursive parser off the end of the stack.
pub const DEPTH_MAX: usize = 1000;

/// A parsed JSON value. Objects keep their pairs in input order with
/// duplicates (json); [`Json::into_jsonb`] sorts and deduplicates them.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// numeric's text (numeric_out of numeric_in of the token: `1e2` is `100`).
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// Why a text is not JSON: SQLSTATE, PostgreSQL's message tail and detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// 22P02 syntax, 22P05 an escape jsonb cannot hold, 54001 too deep.
    pub sqlstate: &'static str,
    pub detail: String,
}

impl JsonError {
    fn syntax(detail: impl Into<String>) -> JsonError {
        JsonError { sqlstate: "22P02", detail: detail.into() }
    }
}

/// The shape of a json text one level down, each child as its own text
/// (json's operators return children exactly as written).
#[derive(Debug, PartialEq)]
pub enum Shallow<'a> {
    Scalar(Json),
    Array(Vec<&'a str>),
    Object(Vec<(String, &'a str)>),
}

/// Parses JSON text; `jsonb` also refuses `\u0000` (22P05) and numbers
/// numeric_in refuses.
pub fn parse(text: &str, jsonb: bool) -> Result<Json, JsonError> {
    let mut p = Parser { s: text.as_bytes(), text, pos: 0, jsonb, depth: 0 };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.pos < p.s.len() {
        return Err(p.unexpected());
    }
    Ok(v)
}

/// The children of a json text (already validated) as slices of it.
pub fn shallow(text: &str) -> Result<Shallow<'_>, JsonError> {
    let mut p = Parser { s: text.as_bytes(), text, pos: 0, jsonb: false, depth: 0 };
    p.ws();
    let out = match p.peek() {
        Some(b'[') => {
            p.pos += 1;
            let mut items = Vec::new();
            p.ws();
            // The text was validated: a `]` here closes an empty array.
            if p.peek() != Some(b']') {
                loop {
                    p.ws();
                    let start = p.pos;
                    p.value()?;
                    items.push(&text[start..p.pos]);
                    p.ws();
                    if !p.expect_either(b',', b']')? {
                        break;
                    }
                }
            }
            Shallow::Array(items)
        }
        Some(b'{') => {
            p.pos += 1;
            let mut pairs = Vec::new();
            p.ws();
            if p.peek() != Some(b'}') {
                loop {
                    p.ws();
                    let key = p.key()?;
                    p.ws();
                    let start = p.pos;
                    p.value()?;
                    pairs.push((key, &text[start..p.pos]));
                    p.ws();
                    if !p.expect_either(b',', b'}')? {
                        break;
                    }
                }
            }
            Shallow::Object(pairs)
        }
        _ => Shallow::Scalar(p.value()?),
    };
    Ok(out)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
    jsonb: bool,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let b = self.peek();
        if b.is_some() {
            self.pos += 1;
        }
        b
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// PostgreSQL's "Token "x" is invalid." / "The input string ended
    /// unexpectedly." for whatever starts at the current position.
    fn unexpected(&self) -> JsonError {
        if self.pos >= self.s.len() {
            return JsonError::syntax("The input string ended unexpectedly.");
        }
        JsonError::syntax(format!("Token \"{}\" is invalid.", self.token_at(self.pos)))
    }

    /// Consumes `want` or fails on what is there instead.
    fn expect_either(&mut self, more: u8, end: u8) -> Result<bool, JsonError> {
        match self.peek() {
            Some(b) if b == more => {
                self.pos += 1;
                Ok(true)
            }
            Some(b) if b == end => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(self.unexpected()),
        }
    }

    /// The lexer's token at `at`: one punctuation character or a run of
    /// anything else up to a delimiter.
    fn token_at(&self, at: usize) -> &str {
        let rest = &self.text[at..];
        let first = rest.chars().next().map_or(0, char::len_utf8);
        if matches!(rest.as_bytes().first(), Some(b'{' | b'}' | b'[' | b']' | b',' | b':')) {
            return &rest[..first];
        }
        let end = rest
            .char_indices()
            .find(|&(i, c)| i > 0 && matches!(c, ' ' | '\t' | '\n' | '\r' | '{' | '}' | '[' | ']' | ',' | ':' | '"'))
            .map_or(rest.len(), |(i, _)| i);
        &rest[..end.max(first)]
    }

    fn value(&mut self) -> Result<Json, JsonError> {
        match self.peek() {
            Some(b'{') => self.nested(|p| p.object()),
            Some(b'[') => self.nested(|p| p.array()),
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => {
                let tok = self.token_at(self.pos);
                let v = match tok {
                    "true" => Json::Bool(true),
                    "false" => Json::Bool(false),
                    "null" => Json::Null,
                    _ => return Err(self.unexpected()),
                };
                self.pos += tok.len();
                Ok(v)
            }
            None => Err(self.unexpected()),
        }
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Result<Json, JsonError>) -> Result<Json, JsonError> {
        self.depth += 1;
        if self.depth > DEPTH_MAX {
            return Err(JsonError { sqlstate: "54001", detail: "stack depth limit exceeded".into() });
        }
        let v = f(self);
        self.depth -= 1;
        v
    }

    fn array(&mut self) -> Result<Json, JsonError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            if !self.expect_either(b',', b']')? {
                return Ok(Json::Array(items));
            }
        }
    }

    fn key(&mut self) -> Result<String, JsonError> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected());
        }
        let k = self.string()?;
        self.ws();
        if self.peek() != Some(b':') {
            return Err(self.unexpected());
        }
        self.pos += 1;
        Ok(k)
    }

    fn object(&mut self) -> Result<Json, JsonError> {
        self.pos += 1;
        let mut pairs = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(pairs));
        }
        loop {
            self.ws();
            let k = self.key()?;
            self.ws();
            pairs.push((k, self.value()?));
            self.ws();
            if !self.expect_either(b',', b'}')? {
                return Ok(Json::Object(pairs));
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let start = self.pos;
        let digits = self.s.get(start..start + 4).filter(|d| d.iter().all(u8::is_ascii_hexdigit));
        let Some(digits) = digits else {
            let end = (start..self.s.len().min(start + 4))
                .take_while(|&i| self.s[i].is_ascii_hexdigit())
                .last()
                .map_or(start, |i| i + 1);
            let shown = self.text.get(start.saturating_sub(2)..=end.min(self.s.len().saturating_sub(1))).unwrap_or("");
            return Err(JsonError::syntax(format!("\"\\u\" must be followed by four hexadecimal digits. ({shown})")));
        };
        self.pos += 4;
        Ok(digits.iter().fold(0u32, |acc, &d| acc * 16 + char::from(d).to_digit(16).unwrap_or(0)))
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1;
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            let Some(b) = self.peek() else { return Err(JsonError::syntax("The input string ended unexpectedly.")) };
            match b {
                b'"' => {
                    out.push_str(&self.text[run..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.text[run..self.pos]);
                    self.pos += 1;
                    self.escape(&mut out)?;
                    run = self.pos;
                }
                0..=0x1f => {
                    return Err(JsonError::syntax(format!("Character with value 0x{b:02x} must be escaped.")));
                }
                _ => self.pos += 1,
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), JsonError> {
        let Some(c) = self.bump() else { return Err(JsonError::syntax("The input string ended unexpectedly.")) };
        match c {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                let hi = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&hi) {
                    let low = if self.s.get(self.pos..self.pos + 2) == Some(b"\\u") {
                        self.pos += 2;
                        self.hex4()?
                    } else {
                        return Err(JsonError::syntax("Unicode high surrogate must not follow a high surrogate."));
                    };
                    if !(0xDC00..0xE000).contains(&low) {
                        return Err(JsonError::syntax("Unicode low surrogate must follow a high surrogate."));
                    }
                    0x10000 + ((hi - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..0xE000).contains(&hi) {
                    return Err(JsonError::syntax("Unicode low surrogate must follow a high surrogate."));
                } else {
                    hi
                };
                if code == 0 {
                    if self.jsonb {
                        return Err(JsonError {
                            sqlstate: "22P05",
                            detail: "\\u0000 cannot be converted to text.".into(),
                        });
                    }
                    // json keeps its text; the value is only looked at by
                    // operators, which refuse it as PostgreSQL's do.
                    out.push('\0');
                } else {
                    out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                }
            }
            _ => {
                let start = self.pos - 1;
                let end = self.text[start..].chars().next().map_or(start, |ch| start + ch.len_utf8());
                return Err(JsonError::syntax(format!("Escape sequence \"\\{}\" is invalid.", &self.text[start..end])));
            }
        }
        Ok(())
    }

    fn number(&mut self) -> Result<Json, JsonError> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.pos += 1;
            }
            p.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        let int_len = digits(self);
        let mut ok = int_len > 0 && !(int_len > 1 && self.s[int_start] == b'0');
        if ok && self.peek() == Some(b'.') {
            self.pos += 1;
            ok = digits(self) > 0;
        }
        if ok && matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            ok = digits(self) > 0;
        }
        // "1a", "01", "1.": the lexer's token runs to the next delimiter.
        if !ok
            || self.peek().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
            || self.peek().is_some_and(|b| b >= 0x80)
        {
            self.pos = start;
            return Err(self.unexpected());
        }
        let token = &self.text[start..self.pos];
        match numeric_text(token) {
            Some(n) => Ok(Json::Number(n)),
            None if self.jsonb => Err(JsonError::syntax(format!("invalid input syntax for type numeric: \"{token}\""))),
            None => Ok(Json::Number(token.to_owned())),
        }
    }
}

/// numeric_out(numeric_in(token)) for a JSON number token; None when
/// numeric_in refuses it (an exponent beyond ±1000).
pub fn numeric_text(token: &str) -> Option<String> {
    let (neg, rest) = token.strip_prefix('-').map_or((false, token), |r| (true, r));
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    if exp.abs() > EXPONENT_MAX {
        return None;
    }
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = format!("{int}{frac}");
    // value = digits * 10^(exp - frac.len()); display scale as numeric_in.
    let frac_len = i64::try_from(frac.len()).ok()?;
    let dscale = usize::try_from((frac_len - exp).max(0)).ok()?;
    let shift = exp - frac_len; // power of ten applied to `digits`
    let mut whole = digits.trim_start_matches('0').to_owned();
    // Digits of the value with exactly `dscale` fraction digits.
    let total_shift = shift + i64::try_from(dscale).ok()?;
    if total_shift >= 0 {
        whole.push_str(&"0".repeat(usize::try_from(total_shift).ok()?));
    } else {
        let cut = usize::try_from(-total_shift).ok()?;
        // Only zeros are cut: dscale >= the digits after the point.
        whole.truncate(whole.len().saturating_sub(cut));
    }
    let (ip, fp) = if whole.len() > dscale { whole.split_at(whole.len() - dscale) } else { ("", whole.as_str()) };
    let mut out = String::new();
    let is_zero = whole.bytes().all(|b| b == b'0');
    if neg && !is_zero {
        out.push('-');
    }
    out.push_str(if ip.is_empty() { "0" } else { ip });
    if dscale > 0 {
        out.push('.');
        out.push_str(&"0".repeat(dscale - fp.len()));
        out.push_str(fp);
    }
    Some(out)
}

impl Json {
    /// jsonb's form: object keys sorted shorter first then bytewise, the
    /// last of duplicate keys kept (PostgreSQL's uniqueifyJsonbObject).
    pub fn into_jsonb(self) -> Json {
        match self {
            Json::Array(items) => Json::Array(items.into_iter().map(Json::into_jsonb).collect()),
            Json::Object(pairs) => {
                let mut pairs: Vec<(String, Json)> = pairs.into_iter().map(|(k, v)| (k, v.into_jsonb())).collect();
                // Stable: among equal keys the input order stays, the last wins.
                pairs.sort_by(|a, b| key_order(&a.0, &b.0));
                let mut out: Vec<(String, Json)> = Vec::with_capacity(pairs.len());
                for (k, v) in pairs {
                    match out.last_mut() {
                        Some(last) if last.0 == k => last.1 = v,
                        _ => out.push((k, v)),
                    }
                }
                Json::Object(out)
            }
            other => other,
        }
    }

    /// jsonb_out's text: `{"a": 1, "b": [1, 2]}`.
    pub fn to_jsonb_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, None, 0);
        out
    }

    /// jsonb_pretty's text (four spaces per level).
    pub fn to_pretty_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, Some(4), 0);
        out
    }

    fn write(&self, out: &mut String, indent: Option<usize>, level: usize) {
        let newline = |out: &mut String, level: usize| {
            if let Some(n) = indent {
                out.push('\n');
                out.push_str(&" ".repeat(n * level));
            }
        };
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(n),
            Json::String(s) => escape_string(out, s),
            Json::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(if indent.is_some() { "," } else { ", " });
                    }
                    newline(out, level + 1);
                    v.write(out, indent, level + 1);
                }
                newline(out, level);
                out.push(']');
            }
            Json::Object(pairs) => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(if indent.is_some() { "," } else { ", " });
                    }
                    newline(out, level + 1);
                    escape_string(out, k);
                    out.push_str(": ");
                    v.write(out, indent, level + 1);
                }
                newline(out, level);
                out.push('}');
            }
        }
    }

    /// jsonb_typeof's answer.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }

    /// A key's value in an object (the last one of duplicates, as json's
    /// operators find it).
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(pairs) => pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// An array element; negative counts from the end.
    pub fn index(&self, i: i64) -> Option<&Json> {
        match self {
            Json::Array(items) => {
                let len = i64::try_from(items.len()).ok()?;
                let at = if i < 0 { len + i } else { i };
                usize::try_from(at).ok().and_then(|at| items.get(at))
            }
            _ => None,
        }
    }

    /// `->>`'s text of a value: a string unquoted, null as SQL NULL,
    /// anything else as jsonb text.
    pub fn to_text(&self) -> Option<String> {
        match self {
            Json::Null => None,
            Json::String(s) => Some(s.clone()),
            other => Some(other.to_jsonb_text()),
        }
    }
}

/// jsonb's key order: shorter first, then bytewise (lengthCompareJsonbStringValue).
pub fn key_order(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// escape_json: a JSON string literal of `s`.
pub fn escape_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Canonical jsonb text of any JSON text (None: not JSON).
pub fn canonical(text: &str) -> Result<String, JsonError> {
    Ok(parse(text, true)?.into_jsonb().to_jsonb_text())
}

// ------------------------------------------------------------ sort keys

const T_NULL: u8 = 0x10;
const T_STRING: u8 = 0x11;
const T_NUMBER: u8 = 0x12;
const T_BOOL: u8 = 0x13;
const T_ARRAY: u8 = 0x20;
const T_OBJECT: u8 = 0x21;

/// Bytes whose memcmp order is jsonb_cmp's order of jsonb values (equal
/// exactly when PostgreSQL finds the values equal), prefix-free. For a
/// stored (canonical) text; a text that does not parse keys as its bytes.
pub fn sort_key(canonical_text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(canonical_text.len() + 8);
    match parse(canonical_text, false) {
        Ok(v) => top_key(&v.into_jsonb(), &mut out),
        Err(_) => out.extend_from_slice(canonical_text.as_bytes()),
    }
    out
}

/// Sort key of a parsed jsonb value (already in jsonb form).
pub fn value_sort_key(v: &Json) -> Vec<u8> {
    let mut out = Vec::new();
    top_key(v, &mut out);
    out
}

fn top_key(v: &Json, out: &mut Vec<u8>) {
    match v {
        Json::Array(_) | Json::Object(_) => element_key(v, out),
        // A raw scalar: a one-element array that sorts before a real
        // one-element array (rawScalar), after an empty one (nElems).
        scalar => {
            out.push(T_ARRAY);
            out.extend_from_slice(&1u32.to_be_bytes());
            out.push(0);
            element_key(scalar, out);
        }
    }
}

fn count(n: usize) -> [u8; 4] {
    u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes()
}

fn element_key(v: &Json, out: &mut Vec<u8>) {
    match v {
        Json::Null => out.push(T_NULL),
        Json::Bool(b) => {
            out.push(T_BOOL);
            out.push(u8::from(*b));
        }
        Json::String(s) => {
            out.push(T_STRING);
            string_key(s, out);
        }
        Json::Number(n) => {
            out.push(T_NUMBER);
            number_key(n, out);
        }
        Json::Array(items) => {
            out.push(T_ARRAY);
            out.extend_from_slice(&count(items.len()));
            out.push(1);
            for item in items {
                element_key(item, out);
            }
        }
        Json::Object(pairs) => {
            out.push(T_OBJECT);
            out.extend_from_slice(&count(pairs.len()));
            for (k, v) in pairs {
                string_key(k, out);
                element_key(v, out);
            }
        }
    }
}

/// Bytes then 0x00 (jsonb strings never hold NUL: `\u0000` is refused).
fn string_key(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// A decimal as sign class, exponent and significant digits: equal values
/// (1.0, 1) encode alike, order is numeric order.
fn number_key(n: &str, out: &mut Vec<u8>) {
    let (neg, body) = n.strip_prefix('-').map_or((false, n), |r| (true, r));
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let all: Vec<u8> = int.bytes().chain(frac.bytes()).filter(u8::is_ascii_digit).collect();
    let lead = all.iter().take_while(|&&d| d == b'0').count();
    let sig = &all[lead..];
    let sig = &sig[..sig.len() - sig.iter().rev().take_while(|&&d| d == b'0').count()];
    if sig.is_empty() {
        out.push(2);
        return;
    }
    // value = 0.sig * 10^exp
    let exp = i32::try_from(int.len()).unwrap_or(i32::MAX).saturating_sub(i32::try_from(lead).unwrap_or(i32::MAX));
    let exp_bits = exp.cast_unsigned() ^ 0x8000_0000;
    if neg {
        out.push(1);
        out.extend_from_slice(&(!exp_bits).to_be_bytes());
        out.extend(sig.iter().map(|d| 0xFF - (d - b'0' + 1)));
        out.push(0xFF);
    } else {
        out.push(3);
        out.extend_from_slice(&exp_bits.to_be_bytes());
        out.extend(sig.iter().map(|d| d - b'0' + 1));
        out.push(0);
    }
}

/// jsonb_cmp of two canonical jsonb texts.
pub fn compare(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    sort_key(a).cmp(&sort_key(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        canonical(s).unwrap()
    }

    #[test]
    fn canonical_text_is_jsonb_out() {
        assert_eq!(canon(r#"{"b":[1,2], "a" : 1}"#), r#"{"a": 1, "b": [1, 2]}"#);
        assert_eq!(canon(r#"{"aa":1,"b":2,"a":3,"a":4}"#), r#"{"a": 4, "b": 2, "aa": 1}"#);
        assert_eq!(canon("1e2"), "100");
        assert_eq!(canon("1.50"), "1.50");
        assert_eq!(canon("-0"), "0");
        assert_eq!(canon("1E-2"), "0.01");
        assert_eq!(canon("1.5e1"), "15");
        assert_eq!(canon("1.25e1"), "12.5");
        assert_eq!(canon("0.00"), "0.00");
        assert_eq!(
            canon("123456789012345678901234567890123456789012345"),
            "123456789012345678901234567890123456789012345"
        );
        assert_eq!(canon(r#""a\nb\u00e9\ud83d\ude00""#), "\"a\\nb\u{e9}\u{1f600}\"");
        assert_eq!(canon(" [ ] "), "[]");
        assert!(parse("1e1001", true).is_err());
        assert!(parse("\"\\u0000\"", true).is_err());
        assert!(parse("\"\\u0000\"", false).is_ok());
    }

    #[test]
    fn invalid_json_is_refused_with_postgres_details() {
        for bad in [
            "",
            "{",
            "[1,]",
            "01",
            "1.",
            ".1",
            "+1",
            "tru",
            "{\"a\" 1}",
            "{1:2}",
            "\"\n\"",
            "[1 2]",
            "\"\\x\"",
            "nul",
            "1 2",
        ] {
            assert!(parse(bad, false).is_err(), "{bad:?}");
        }
        assert_eq!(parse("[1", false).unwrap_err().detail, "The input string ended unexpectedly.");
        assert_eq!(parse("trues", false).unwrap_err().detail, "Token \"trues\" is invalid.");
    }

    #[test]
    fn order_is_jsonb_cmp() {
        let ordered = [
            "[]",
            "null",
            "\"\"",
            "\"a\"",
            "\"ab\"",
            "\"b\"",
            "-10",
            "-1.5",
            "-1",
            "0",
            "0.5",
            "1",
            "2",
            "10",
            "false",
            "true",
            "[1]",
            "[[]]",
            "[1, 2]",
            "{}",
            r#"{"a": 1}"#,
            r#"{"a": 2}"#,
            r#"{"b": 1}"#,
            r#"{"a": 1, "b": 1}"#,
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(compare(&canon(a), &canon(b)), i.cmp(&j), "{a} vs {b}");
            }
        }
        assert_eq!(compare(&canon("1.0"), &canon("1")), Ordering::Equal);
        assert_eq!(compare(&canon("[1.00]"), &canon("[1]")), Ordering::Equal);
    }

    #[test]
    fn shallow_keeps_children_as_written() {
        let Ok(Shallow::Object(pairs)) = shallow(r#"{"a": [1,  2], "b":{"c" : 3}}"#) else { panic!() };
        assert_eq!(pairs, vec![("a".to_owned(), "[1,  2]"), ("b".to_owned(), r#"{"c" : 3}"#)]);
    }
}
