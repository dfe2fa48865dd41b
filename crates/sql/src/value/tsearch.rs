//! Full-text search documents (PostgreSQL's tsearch): the default
//! parser's tokens, the `simple` and `english` configurations and
//! `tsvector`'s text form. Queries are `tsquery.rs`.
//!
//! Only the token kinds whose tokenization pgtier reproduces exactly are
//! parsed: ASCII words, unsigned integers, words with digits, and blanks
//! of whitespace and punctuation that never starts another kind of token.
//! Any other input (URLs, e-mail addresses, hosts, file paths, hyphenated
//! words, signed or decimal numbers, XML tags and entities, non-ASCII
//! letters) is refused (0A000): a different tokenization would be a
//! different answer.

use std::collections::BTreeMap;

use crate::error::{Result, SqlError};

/// A text search configuration pgtier implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    /// `simple`: every word lowercased, no stop words.
    Simple,
    /// `english`: numbers as `simple`, words through english_stem (the
    /// Snowball English stemmer after PostgreSQL's english.stop).
    English,
}

/// PostgreSQL's built-in configurations other than simple and english:
/// they exist there (so the name is not an error), pgtier refuses them.
const OTHER_CONFIGS: [&str; 27] = [
    "arabic",
    "armenian",
    "basque",
    "catalan",
    "danish",
    "dutch",
    "finnish",
    "french",
    "german",
    "greek",
    "hindi",
    "hungarian",
    "indonesian",
    "irish",
    "italian",
    "lithuanian",
    "nepali",
    "norwegian",
    "portuguese",
    "romanian",
    "russian",
    "serbian",
    "spanish",
    "swedish",
    "tamil",
    "turkish",
    "yiddish",
];

impl Config {
    /// regconfigin of `name`: an unquoted name is folded to lower case and
    /// may be qualified by pg_catalog.
    pub fn named(name: &str) -> Result<Config> {
        if name.contains('"') {
            return Err(SqlError::unsupported("a quoted text search configuration name"));
        }
        let folded = name.trim().to_ascii_lowercase();
        let bare = folded.strip_prefix("pg_catalog.").unwrap_or(&folded);
        match bare {
            "simple" => Ok(Config::Simple),
            "english" => Ok(Config::English),
            other if OTHER_CONFIGS.contains(&other) => {
                Err(SqlError::unsupported(format!("text search configuration {other}")))
            }
            _ => Err(SqlError::new("42704", format!("text search configuration \"{name}\" does not exist"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Config::Simple => "simple",
            Config::English => "english",
        }
    }

    /// The lexeme of a word token; None for a stop word.
    fn lexeme(self, token: &Token<'_>) -> Option<String> {
        let lower = token.text.to_ascii_lowercase();
        match (self, token.kind) {
            (Config::English, TokenKind::Word) => {
                if ENGLISH_STOP.contains(&lower.as_str()) {
                    return None;
                }
                Some(stemmer().stem(&lower).into_owned())
            }
            _ => Some(lower),
        }
    }
}

fn stemmer() -> &'static rust_stemmers::Stemmer {
    static STEMMER: std::sync::OnceLock<rust_stemmers::Stemmer> = std::sync::OnceLock::new();
    STEMMER.get_or_init(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English))
}

/// PostgreSQL 15's tsearch_data/english.stop, the english_stem dictionary's stop words.
const ENGLISH_STOP: [&str; 127] = [
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "against",
    "between",
    "into",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "to",
    "from",
    "up",
    "down",
    "in",
    "out",
    "on",
    "off",
    "over",
    "under",
    "again",
    "further",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "such",
    "no",
    "nor",
    "not",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "s",
    "t",
    "can",
    "will",
    "just",
    "don",
    "should",
    "now",
];

/// The default parser's token kinds pgtier produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// asciiword: letters only.
    Word,
    /// numword: letters and digits.
    NumWord,
    /// uint: digits only.
    UInt,
    /// blank: whitespace and punctuation, not indexed.
    Blank,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    pub kind: TokenKind,
    pub text: &'a str,
}

/// PostgreSQL's MAXSTRLEN: a longer word is skipped with a NOTICE.
const WORD_LEN_MAX: usize = 2047;
/// MAXENTRYPOS - 1: positions above are clamped by PostgreSQL.
pub const POS_MAX: u32 = 16383;
/// MAXNUMPOS: positions kept per lexeme.
const POSITIONS_MAX: usize = 256;

/// Punctuation that is a blank token wherever it stands.
fn plain_blank(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b',' | b';' | b'!' | b'?' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'"')
}

/// The default parser's tokens of `text`, or 0A000 naming a token kind
/// pgtier does not reproduce.
pub fn tokens(text: &str) -> Result<Vec<Token<'_>>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let c = bytes[i];
        if c.is_ascii_alphanumeric() {
            while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let word = &bytes[start..i];
            // Digits then an exponent letter read as a scientific number (sfloat).
            if word[0].is_ascii_digit() && word.iter().any(|b| matches!(b, b'e' | b'E')) {
                return Err(SqlError::unsupported("text search parsing of numbers with exponents"));
            }
            let kind = if word.iter().all(u8::is_ascii_digit) {
                TokenKind::UInt
            } else if word.iter().all(u8::is_ascii_alphabetic) {
                TokenKind::Word
            } else {
                TokenKind::NumWord
            };
            if word.len() >= WORD_LEN_MAX {
                return Err(SqlError::unsupported("a text search word of 2047 characters or more"));
            }
            out.push(Token { kind, text: &text[start..i] });
            continue;
        }
        while i < bytes.len() && !bytes[i].is_ascii_alphanumeric() {
            let b = bytes[i];
            let prev_word = i > 0 && bytes[i - 1].is_ascii_alphabetic();
            let next_blank = bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace());
            // A period ending a word ("word. next") is a blank; between
            // characters it may start a host, a file name or a number.
            if plain_blank(b) || (b == b'.' && prev_word && next_blank) {
                i += 1;
                continue;
            }
            return Err(unsupported_char(b));
        }
        out.push(Token { kind: TokenKind::Blank, text: &text[start..i] });
    }
    Ok(out)
}

fn unsupported_char(b: u8) -> SqlError {
    let what = match b {
        0x80.. => "non-ASCII text".to_owned(),
        b'<' | b'&' => "XML tags and entities".to_owned(),
        b'-' | b'+' => "hyphenated words and signed numbers".to_owned(),
        b'.' | b'/' | b'@' | b':' | b'~' => "URLs, hosts, e-mail addresses, file paths and decimal numbers".to_owned(),
        _ => format!("the character {:?}", char::from(b)),
    };
    SqlError::unsupported(format!("text search parsing of {what}"))
}

/// A lexeme's positions: (position, weight 0..=3 for D..A).
pub type Positions = Vec<(u32, u8)>;

/// A tsvector: lexemes in PostgreSQL's order (bytewise, shorter first on
/// a tie) with their sorted positions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TsVector {
    pub lexemes: BTreeMap<String, Positions>,
}

/// parsetext's words: (lexeme, position), numbering positions on from
/// `pos` (the last position used), which it leaves at the last position.
pub fn parse_words(config: Config, text: &str, pos: &mut u32) -> Result<Vec<(String, u32)>> {
    let mut out = Vec::new();
    for token in tokens(text)? {
        if token.kind == TokenKind::Blank {
            continue;
        }
        *pos += 1;
        if *pos > POS_MAX {
            return Err(SqlError::unsupported("a text search position above 16383"));
        }
        if let Some(lexeme) = config.lexeme(&token) {
            out.push((lexeme, *pos));
        }
    }
    Ok(out)
}

/// The lexeme a query operand or headline word normalizes to (None: a stop word).
pub fn word_lexeme(config: Config, token: &Token<'_>) -> Option<String> {
    config.lexeme(token)
}

impl TsVector {
    /// make_tsvector of parsed words.
    pub fn from_words(words: Vec<(String, u32)>) -> Result<TsVector> {
        let mut v = TsVector::default();
        for (lexeme, pos) in words {
            let positions = v.lexemes.entry(lexeme).or_default();
            if !positions.iter().any(|p| p.0 == pos) {
                positions.push((pos, 0));
            }
            if positions.len() > POSITIONS_MAX {
                return Err(SqlError::unsupported("more than 256 positions of one lexeme"));
            }
        }
        for positions in v.lexemes.values_mut() {
            positions.sort_unstable();
        }
        Ok(v)
    }

    /// tsvectorout.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (lexeme, positions) in &self.lexemes {
            if !out.is_empty() {
                out.push(' ');
            }
            quote_lexeme(lexeme, &mut out);
            for (k, (pos, weight)) in positions.iter().enumerate() {
                out.push(if k == 0 { ':' } else { ',' });
                out.push_str(&pos.to_string());
                if *weight > 0 {
                    out.push(char::from(b'D' - weight));
                }
            }
        }
        out
    }

    /// tsvectorin of the forms pgtier writes and their plain variants:
    /// lexemes (quoted or not, without backslashes) with optional
    /// positions and weights.
    pub fn parse(text: &str) -> Result<TsVector> {
        let mut v = TsVector::default();
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            let (lexeme, after) = take_lexeme(rest, |c| c.is_ascii_whitespace() || c == ':')?;
            let mut positions = Vec::new();
            rest = after;
            if let Some(list) = rest.strip_prefix(':') {
                let end = list.find(|c: char| c.is_ascii_whitespace()).unwrap_or(list.len());
                for item in list[..end].split(',') {
                    positions.push(parse_position(item)?);
                }
                rest = &list[end..];
            }
            let entry = v.lexemes.entry(lexeme).or_default();
            entry.extend(positions);
            // A position given twice keeps its heaviest weight (uniquePos).
            entry.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            entry.dedup_by_key(|p| p.0);
            rest = rest.trim_start();
        }
        Ok(v)
    }
}

fn parse_position(item: &str) -> Result<(u32, u8)> {
    let digits = item.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let weight = match &item[digits.len()..] {
        "" | "D" | "d" => 0,
        "C" | "c" => 1,
        "B" | "b" => 2,
        "A" | "a" => 3,
        _ => return Err(SqlError::unsupported(format!("tsvector position {item:?}"))),
    };
    match digits.parse::<u32>() {
        Ok(p) if (1..=POS_MAX).contains(&p) => Ok((p, weight)),
        _ => Err(SqlError::unsupported(format!("tsvector position {item:?}"))),
    }
}

/// A lexeme or query operand of the text forms: `'quoted'` (a doubled
/// quote inside is one) or bare up to `stop`; backslashes are refused.
pub fn take_lexeme(s: &str, stop: impl Fn(char) -> bool) -> Result<(String, &str)> {
    if s.contains('\\') {
        return Err(SqlError::unsupported("backslash escapes in tsvector or tsquery text"));
    }
    if let Some(body) = s.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = body.char_indices().peekable();
        while let Some((k, c)) = chars.next() {
            if c == '\'' {
                if chars.peek().map(|p| p.1) == Some('\'') {
                    chars.next();
                    out.push('\'');
                    continue;
                }
                if out.is_empty() {
                    return Err(SqlError::unsupported("an empty lexeme"));
                }
                return Ok((out, &body[k + 1..]));
            }
            out.push(c);
        }
        return Err(SqlError::unsupported("an unterminated quoted lexeme"));
    }
    let end = s.find(|c: char| stop(c) || c == '\'').unwrap_or(s.len());
    if end == 0 {
        return Err(SqlError::unsupported(format!("tsvector or tsquery text {s:?}")));
    }
    Ok((s[..end].to_owned(), &s[end..]))
}

/// A lexeme as tsvectorout and tsqueryout quote it.
pub fn quote_lexeme(lexeme: &str, out: &mut String) {
    out.push('\'');
    for c in lexeme.chars() {
        if c == '\'' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_drops_stop_words_and_stems() {
        let mut pos = 0;
        let words = parse_words(Config::English, "aaa in bbb. False", &mut pos).unwrap();
        let v = TsVector::from_words(words).unwrap();
        assert_eq!(v.to_text(), "'aaa':1 'bbb':3 'fals':4");
        assert!(tokens("a-b").is_err());
        assert!(tokens("a.b").is_err());
        assert_eq!(TsVector::parse("'b':2 a:1A").unwrap().to_text(), "'a':1A 'b':2");
    }
}
