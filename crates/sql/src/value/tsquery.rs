//! `tsquery`: its text form (tsqueryin / tsqueryout), to_tsquery and
//! plainto_tsquery's normalization, `@@` against a tsvector, and
//! ts_headline of a short text. Phrase operators (`<->`), prefix and
//! weight restrictions (`:*`, `:AB`) are refused (0A000).

use super::tsearch::{self, Config, TokenKind, TsVector, quote_lexeme, take_lexeme};
use crate::error::{Result, SqlError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TsQuery {
    Val(String),
    Not(Box<TsQuery>),
    And(Box<TsQuery>, Box<TsQuery>),
    Or(Box<TsQuery>, Box<TsQuery>),
}

/// PostgreSQL's operator priorities (tsquery.h): ! 4, <-> 3, & 2, | 1.
fn priority(q: &TsQuery) -> u8 {
    match q {
        TsQuery::Val(_) => 5,
        TsQuery::Not(_) => 4,
        TsQuery::And(..) => 2,
        TsQuery::Or(..) => 1,
    }
}

fn syntax_error(text: &str) -> SqlError {
    SqlError::syntax(format!("syntax error in tsquery: \"{text}\""))
}

struct Parser<'a> {
    text: &'a str,
    rest: &'a str,
}

impl Parser<'_> {
    fn peek(&mut self) -> Option<char> {
        self.rest = self.rest.trim_start();
        self.rest.chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.rest = &self.rest[1..];
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<TsQuery> {
        let mut left = self.and()?;
        while self.eat('|') {
            left = TsQuery::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<TsQuery> {
        let mut left = self.not()?;
        while self.eat('&') {
            left = TsQuery::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<TsQuery> {
        if self.eat('!') {
            return Ok(TsQuery::Not(Box::new(self.not()?)));
        }
        if self.eat('(') {
            let inner = self.or()?;
            if !self.eat(')') {
                return Err(syntax_error(self.text));
            }
            return Ok(inner);
        }
        match self.peek() {
            None | Some('&' | '|' | ')') => Err(syntax_error(self.text)),
            Some('<') => Err(SqlError::unsupported("tsquery phrase operators")),
            Some(_) => {
                let (operand, after) = take_lexeme(self.rest, |c| c.is_ascii_whitespace() || "!&|()<:".contains(c))?;
                if after.starts_with(':') {
                    return Err(SqlError::unsupported("tsquery prefix and weight restrictions"));
                }
                self.rest = after;
                Ok(TsQuery::Val(operand))
            }
        }
    }
}

impl TsQuery {
    /// tsqueryin (an empty query is refused: PostgreSQL's is a NOTICE
    /// and a query that matches nothing).
    pub fn parse(text: &str) -> Result<TsQuery> {
        let mut p = Parser { text, rest: text };
        if p.peek().is_none() {
            return Err(SqlError::unsupported("a tsquery without lexemes"));
        }
        let q = p.or()?;
        if p.peek().is_some() {
            return Err(syntax_error(text));
        }
        Ok(q)
    }

    /// to_tsquery: the query syntax, each operand normalized by `config`
    /// (one word to one lexeme; stop words and operands of several words
    /// are refused, PostgreSQL rewrites the query around them).
    pub fn normalized(config: Config, text: &str) -> Result<TsQuery> {
        TsQuery::parse(text)?.map_operands(&|operand| {
            let tokens = tsearch::tokens(operand)?;
            match tokens.as_slice() {
                [t] if t.kind != TokenKind::Blank => {
                    tsearch::word_lexeme(config, t).ok_or_else(|| SqlError::unsupported("a stop word in to_tsquery"))
                }
                _ => Err(SqlError::unsupported(format!("to_tsquery of the operand {operand:?}"))),
            }
        })
    }

    fn map_operands(self, f: &dyn Fn(&str) -> Result<String>) -> Result<TsQuery> {
        Ok(match self {
            TsQuery::Val(s) => TsQuery::Val(f(&s)?),
            TsQuery::Not(x) => TsQuery::Not(Box::new(x.map_operands(f)?)),
            TsQuery::And(x, y) => TsQuery::And(Box::new(x.map_operands(f)?), Box::new(y.map_operands(f)?)),
            TsQuery::Or(x, y) => TsQuery::Or(Box::new(x.map_operands(f)?), Box::new(y.map_operands(f)?)),
        })
    }

    /// plainto_tsquery: the text's lexemes joined by `&`.
    pub fn plain(config: Config, text: &str) -> Result<TsQuery> {
        let mut pos = 0;
        let words = tsearch::parse_words(config, text, &mut pos)?;
        let mut lexemes = words.into_iter().map(|(lexeme, _)| TsQuery::Val(lexeme));
        let first = lexemes.next().ok_or_else(|| SqlError::unsupported("a tsquery without lexemes"))?;
        Ok(lexemes.fold(first, |acc, v| TsQuery::And(Box::new(acc), Box::new(v))))
    }

    /// tsqueryout.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.infix(0, &mut out);
        out
    }

    fn infix(&self, parent: u8, out: &mut String) {
        match self {
            TsQuery::Val(s) => quote_lexeme(s, out),
            TsQuery::Not(x) => {
                out.push('!');
                x.infix(priority(self), out);
            }
            TsQuery::And(x, y) | TsQuery::Or(x, y) => {
                let own = priority(self);
                let paren = own < parent;
                if paren {
                    out.push_str("( ");
                }
                x.infix(own, out);
                out.push_str(if matches!(self, TsQuery::And(..)) { " & " } else { " | " });
                y.infix(own, out);
                if paren {
                    out.push_str(" )");
                }
            }
        }
    }

    /// `tsvector @@ tsquery` (ts_match_vq).
    pub fn matches(&self, doc: &TsVector) -> bool {
        match self {
            TsQuery::Val(s) => doc.lexemes.contains_key(s),
            TsQuery::Not(x) => !x.matches(doc),
            TsQuery::And(x, y) => x.matches(doc) && y.matches(doc),
            TsQuery::Or(x, y) => x.matches(doc) || y.matches(doc),
        }
    }

    fn has_operand(&self, lexeme: &str) -> bool {
        match self {
            TsQuery::Val(s) => s == lexeme,
            TsQuery::Not(x) => x.has_operand(lexeme),
            TsQuery::And(x, y) | TsQuery::Or(x, y) => x.has_operand(lexeme) || y.has_operand(lexeme),
        }
    }
}

/// MinWords' default: a text of fewer words is its whole headline.
const MIN_WORDS: usize = 15;

/// ts_headline's options pgtier takes: StartSel and StopSel.
pub struct HeadlineOptions {
    start: String,
    stop: String,
}

impl HeadlineOptions {
    /// deserialize_deflist of `name = value, ...` with unquoted values;
    /// the options that shape the fragments are refused.
    pub fn parse(text: Option<&str>) -> Result<HeadlineOptions> {
        let mut opts = HeadlineOptions { start: "<b>".to_owned(), stop: "</b>".to_owned() };
        let Some(text) = text else { return Ok(opts) };
        if text.contains('"') || text.contains('\'') {
            return Err(SqlError::unsupported("quoted ts_headline option values"));
        }
        for item in text.split(',').filter(|i| !i.trim().is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| SqlError::unsupported("this ts_headline option"))?;
            let value = value.trim();
            if value.is_empty() || value.contains(|c: char| c.is_whitespace() || c == '=') {
                return Err(SqlError::unsupported("this ts_headline option value"));
            }
            match name.trim().to_ascii_lowercase().as_str() {
                "startsel" => opts.start = value.to_owned(),
                "stopsel" => opts.stop = value.to_owned(),
                other => return Err(SqlError::unsupported(format!("ts_headline option {other}"))),
            }
        }
        Ok(opts)
    }
}

/// prsd_headline of a text of fewer than MinWords words, where the
/// headline is the whole text with the query's words marked; a longer
/// text (where PostgreSQL picks a cover and fragments) is refused.
pub fn headline(config: Config, text: &str, query: &TsQuery, opts: &HeadlineOptions) -> Result<String> {
    let tokens = tsearch::tokens(text)?;
    if tokens.iter().filter(|t| t.kind != TokenKind::Blank).count() >= MIN_WORDS {
        return Err(SqlError::unsupported("ts_headline of a text of 15 words or more"));
    }
    let mut out = String::with_capacity(text.len());
    for t in &tokens {
        let hit = t.kind != TokenKind::Blank && tsearch::word_lexeme(config, t).is_some_and(|l| query.has_operand(&l));
        if hit {
            out.push_str(&opts.start);
        }
        out.push_str(t.text);
        if hit {
            out.push_str(&opts.stop);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_tsqueryout() {
        let q = TsQuery::parse("a & (b | c) & !d").unwrap();
        assert_eq!(q.to_text(), "'a' & ( 'b' | 'c' ) & !'d'");
        assert_eq!(TsQuery::parse("!(a & b)").unwrap().to_text(), "!( 'a' & 'b' )");
        let opts = HeadlineOptions::parse(Some("StartSel = <, StopSel = >")).unwrap();
        assert_eq!(headline(Config::English, "ccc ddd fff", &q.clone(), &opts).unwrap(), "ccc ddd fff");
        let q = TsQuery::parse("bbb & ddd").unwrap();
        assert_eq!(headline(Config::English, "ccc ddd fff", &q, &opts).unwrap(), "ccc <ddd> fff");
    }
}
