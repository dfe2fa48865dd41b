//! Window frame clauses as PostgreSQL's grammar has them, in tokens
//! sqlparser can read.
//!
//! - `EXCLUDE CURRENT ROW | GROUP | TIES | NO OTHERS` ends a frame in
//!   PostgreSQL; sqlparser's window specification has no place for it. The
//!   clause is taken out of the tokens and its kind carried in the
//!   specification's existing-window name (quoted, behind [`EXCLUSION_MARK`],
//!   which no PostgreSQL identifier can hold; an unquoted name is folded to
//!   lower case first, as PostgreSQL folds it). [`window_name_parts`] splits
//!   the name again.
//! - A string literal starting a frame bound (`'1 day' PRECEDING`) is an
//!   untyped literal in PostgreSQL; sqlparser reads it as an INTERVAL
//!   literal and then cannot read a cast after it (`'1 year'::interval
//!   PRECEDING`). It is put in parentheses, which keeps it untyped.
//!
//! Only tokens directly inside the parentheses of an `OVER (...)` or a
//! `WINDOW w AS (...)` are touched; a statement without EXCLUDE, ROWS,
//! RANGE or GROUPS is not looked at twice.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan, Word};

/// What separates a window's name from its frame exclusion.
const EXCLUSION_MARK: char = '\0';

/// A window specification's name as parsed: the existing window it names,
/// if any, and its frame's EXCLUDE clause (`current row`, `group`, `ties`,
/// `no others`), if any. The name is already folded when an exclusion was
/// carried in it; otherwise `None` for the second part and the caller folds.
pub(crate) fn window_name_parts(name: &str) -> (Option<&str>, Option<&str>) {
    match name.split_once(EXCLUSION_MARK) {
        Some((n, kind)) => ((!n.is_empty()).then_some(n), Some(kind)),
        None => (Some(name), None),
    }
}

pub(crate) fn frame_tokens(tokens: &mut Vec<TokenWithSpan>) {
    let framed = tokens.iter().any(|t| matches!(&t.token, Token::Word(w) if matches!(w.keyword, Keyword::EXCLUDE | Keyword::ROWS | Keyword::RANGE | Keyword::GROUPS)));
    if framed {
        parenthesize_bound_literals(tokens);
        move_exclusions(tokens);
    }
}

fn significant(tokens: &[TokenWithSpan], from: usize) -> Option<usize> {
    (from..tokens.len()).find(|&k| !matches!(tokens[k].token, Token::Whitespace(_)))
}

fn significant_before(tokens: &[TokenWithSpan], at: usize) -> Option<usize> {
    (0..at).rev().find(|&k| !matches!(tokens[k].token, Token::Whitespace(_)))
}

fn keyword(t: &Token) -> Keyword {
    match t {
        Token::Word(w) if w.quote_style.is_none() => w.keyword,
        _ => Keyword::NoKeyword,
    }
}

fn word(t: &Token, text: &str) -> bool {
    matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(text))
}

/// The `(` the token at `at` is directly inside, when it opens a window
/// specification (follows OVER, or AS of a WINDOW clause entry).
fn window_paren(tokens: &[TokenWithSpan], at: usize) -> Option<usize> {
    let mut depth = 0usize;
    let open = (0..at).rev().find(|&k| match tokens[k].token {
        Token::RParen => {
            depth += 1;
            false
        }
        Token::LParen if depth == 0 => true,
        Token::LParen => {
            depth -= 1;
            false
        }
        _ => false,
    })?;
    let before = significant_before(tokens, open)?;
    matches!(keyword(&tokens[before].token), Keyword::OVER | Keyword::AS).then_some(open)
}

fn parenthesize_bound_literals(tokens: &mut Vec<TokenWithSpan>) {
    let mut i = 0;
    while i < tokens.len() {
        if !matches!(tokens[i].token, Token::SingleQuotedString(_)) {
            i += 1;
            continue;
        }
        let starts_bound = significant_before(tokens, i).is_some_and(|p| match keyword(&tokens[p].token) {
            Keyword::ROWS | Keyword::RANGE | Keyword::GROUPS => true,
            // BETWEEN and AND of the frame, not of an expression in it.
            Keyword::BETWEEN | Keyword::AND => window_paren(tokens, i).is_some_and(|open| {
                let units = (open + 1..p)
                    .find(|&k| matches!(keyword(&tokens[k].token), Keyword::ROWS | Keyword::RANGE | Keyword::GROUPS));
                units.is_some_and(|u| {
                    let between = significant(tokens, u + 1).filter(|&b| keyword(&tokens[b].token) == Keyword::BETWEEN);
                    between == Some(p)
                        || (between.is_some() && keyword(&tokens[p].token) == Keyword::AND && between_and(tokens, u, p))
                })
            }),
            _ => false,
        }) && window_paren(tokens, i).is_some();
        if starts_bound {
            let span = tokens[i].span;
            tokens.insert(i + 1, TokenWithSpan { token: Token::RParen, span });
            tokens.insert(i, TokenWithSpan { token: Token::LParen, span });
            i += 3;
        } else {
            i += 1;
        }
    }
}

/// Whether the AND at `and` is the one of `units BETWEEN ... AND`: the
/// first AND after BETWEEN outside parentheses and not of a nested BETWEEN.
fn between_and(tokens: &[TokenWithSpan], units: usize, and: usize) -> bool {
    let mut depth = 0i32;
    let mut open_betweens = 0i32;
    for t in &tokens[units + 1..and] {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            tok if depth == 0 && keyword(tok) == Keyword::BETWEEN => open_betweens += 1,
            tok if depth == 0 && keyword(tok) == Keyword::AND => open_betweens -= 1,
            _ => {}
        }
    }
    open_betweens == 1
}

fn move_exclusions(tokens: &mut Vec<TokenWithSpan>) {
    let mut i = 0;
    while i < tokens.len() {
        if keyword(&tokens[i].token) != Keyword::EXCLUDE {
            i += 1;
            continue;
        }
        let a = significant(tokens, i + 1);
        let b = a.and_then(|a| significant(tokens, a + 1));
        let at = |k: Option<usize>| k.map(|k| &tokens[k].token);
        let (kind, last) = match (at(a), at(b)) {
            (Some(x), Some(y)) if word(x, "current") && word(y, "row") => ("current row", b),
            (Some(x), _) if word(x, "group") => ("group", a),
            (Some(x), _) if word(x, "ties") => ("ties", a),
            (Some(x), Some(y)) if word(x, "no") && word(y, "others") => ("no others", b),
            _ => ("", None),
        };
        let (Some(last), Some(open)) = (last, window_paren(tokens, i)) else {
            i += 1;
            continue;
        };
        tokens.drain(i..=last);
        let first = significant(tokens, open + 1);
        match first.map(|k| &mut tokens[k].token) {
            Some(Token::Word(w)) if w.keyword == Keyword::NoKeyword => {
                let name = if w.quote_style.is_some() { std::mem::take(&mut w.value) } else { w.value.to_lowercase() };
                *w = Word {
                    value: format!("{name}{EXCLUSION_MARK}{kind}"),
                    quote_style: Some('"'),
                    keyword: Keyword::NoKeyword,
                };
            }
            _ => {
                let span = tokens[open].span;
                let mark = Word {
                    value: format!("{EXCLUSION_MARK}{kind}"),
                    quote_style: Some('"'),
                    keyword: Keyword::NoKeyword,
                };
                tokens.insert(open + 1, TokenWithSpan { token: Token::Word(mark), span });
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::dialect::PgDialect;
    use sqlparser::tokenizer::Tokenizer;

    fn rewritten(sql: &str) -> String {
        let mut tokens = Tokenizer::new(&PgDialect::default(), sql).tokenize_with_location().unwrap();
        frame_tokens(&mut tokens);
        tokens.iter().map(|t| t.token.to_string()).collect::<String>().replace('\0', "|")
    }

    #[test]
    fn exclusion_moves_into_the_name() {
        assert_eq!(
            rewritten("sum(x) OVER (ORDER BY x ROWS 1 PRECEDING EXCLUDE TIES)"),
            "sum(x) OVER (\"|ties\"ORDER BY x ROWS 1 PRECEDING )"
        );
        assert_eq!(
            rewritten("sum(x) OVER (W ROWS CURRENT ROW EXCLUDE CURRENT ROW)"),
            "sum(x) OVER (\"w|current row\" ROWS CURRENT ROW )"
        );
        assert_eq!(
            rewritten("WINDOW w AS (ROWS CURRENT ROW EXCLUDE NO OTHERS)"),
            "WINDOW w AS (\"|no others\"ROWS CURRENT ROW )"
        );
        // Not a frame: left alone.
        assert_eq!(rewritten("SELECT * EXCLUDE (a) FROM t"), "SELECT * EXCLUDE (a) FROM t");
        assert_eq!(rewritten("CREATE TABLE t (c int, EXCLUDE GROUP)"), "CREATE TABLE t (c int, EXCLUDE GROUP)");
    }

    #[test]
    fn bound_literals_stay_untyped() {
        assert_eq!(
            rewritten("OVER (ORDER BY d RANGE BETWEEN '1 day'::interval PRECEDING AND '2 days' FOLLOWING)"),
            "OVER (ORDER BY d RANGE BETWEEN ('1 day')::interval PRECEDING AND ('2 days') FOLLOWING)"
        );
        assert_eq!(rewritten("OVER (ORDER BY d RANGE 'inf' PRECEDING)"), "OVER (ORDER BY d RANGE ('inf') PRECEDING)");
        // An expression's BETWEEN ... AND inside an offset, and outside a window.
        assert_eq!(
            rewritten("OVER (ROWS BETWEEN CASE WHEN 'a' BETWEEN 'a' AND 'b' THEN 1 END PRECEDING AND 'x' FOLLOWING)"),
            "OVER (ROWS BETWEEN CASE WHEN 'a' BETWEEN 'a' AND 'b' THEN 1 END PRECEDING AND ('x') FOLLOWING)"
        );
        assert_eq!(
            rewritten("SELECT x FROM t WHERE x BETWEEN 'a' AND 'b' LIMIT 1"),
            "SELECT x FROM t WHERE x BETWEEN 'a' AND 'b' LIMIT 1"
        );
    }
}
