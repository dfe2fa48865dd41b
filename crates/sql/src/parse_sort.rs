//! Two old PostgreSQL forms sqlparser has no grammar for, rewritten in
//! tokens it reads, both exact in pgtier:
//!
//! - `ORDER BY x USING <` / `USING >`: a sort by an operator. For `<` and
//!   `>` of the built-in types the operator is the type's btree less-than
//!   or greater-than, which is exactly ASC or DESC, and PostgreSQL's NULLS
//!   default follows the direction as it does for ASC/DESC (nulls first for
//!   a greater-than operator). `USING` followed by `<` or `>` occurs nowhere
//!   else in PostgreSQL's grammar (JOIN ... USING takes a parenthesis,
//!   DELETE/MERGE ... USING a table, CREATE INDEX ... USING a method), so the
//!   pair is replaced wherever it stands. Other operators (`USING <=`) are
//!   left to fail as a syntax error (42601): PostgreSQL refuses them too
//!   (42809, not an ordering operator) unless they order a user-defined
//!   type, which pgtier has not.
//! - `FROM person* p`: the inheritance star, "this table and its children".
//!   pgtier has no table inheritance (INHERITS is refused), so every table
//!   is its own whole hierarchy and the star is dropped. A name right after
//!   FROM or JOIN (maybe schema-qualified, maybe after ONLY) followed by `*`
//!   is PostgreSQL's relation_expr, except a FROM of `IS [NOT] DISTINCT
//!   FROM` or inside a function's parentheses (`substring(s FROM n * 2)`):
//!   only a FROM with SELECT, DELETE or UPDATE before it at its own
//!   parenthesis depth counts.
//!
//! Applied only to a text sqlparser could not read (parse.rs), so a text it
//! reads is never changed.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer, Word};

/// The text with both forms rewritten; None when it has neither.
pub(crate) fn rewrite_sort_forms(sql: &str) -> Option<String> {
    let mut tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let before = tokens.len();
    sort_tokens(&mut tokens);
    (tokens.len() != before).then(|| tokens.iter().map(ToString::to_string).collect())
}

fn sort_tokens(tokens: &mut Vec<Token>) {
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::USING => {
                if let Some(op) = next_significant(tokens, i + 1) {
                    let direction = match tokens[op] {
                        Token::Lt => Some(Keyword::ASC),
                        Token::Gt => Some(Keyword::DESC),
                        _ => None,
                    };
                    if let Some(direction) = direction {
                        let value = if direction == Keyword::ASC { "ASC" } else { "DESC" };
                        tokens[i] =
                            Token::Word(Word { value: value.to_owned(), quote_style: None, keyword: direction });
                        tokens.remove(op);
                    }
                }
            }
            Token::Word(w) if w.quote_style.is_none() && matches!(w.keyword, Keyword::FROM | Keyword::JOIN) => {
                let from_clause = w.keyword == Keyword::JOIN || starts_from_clause(tokens, i);
                if let Some(star) = relation_star(tokens, i).filter(|_| from_clause) {
                    tokens.remove(star);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

fn next_significant(tokens: &[Token], from: usize) -> Option<usize> {
    (from..tokens.len()).find(|&k| !matches!(tokens[k], Token::Whitespace(_)))
}

fn keyword(t: &Token) -> Keyword {
    match t {
        Token::Word(w) if w.quote_style.is_none() => w.keyword,
        _ => Keyword::NoKeyword,
    }
}

/// Whether the FROM at `at` begins a FROM clause: not DISTINCT's, and
/// SELECT, DELETE or UPDATE comes before it within its parentheses.
fn starts_from_clause(tokens: &[Token], at: usize) -> bool {
    let previous = (0..at).rev().find(|&k| !matches!(tokens[k], Token::Whitespace(_)));
    if previous.is_some_and(|p| keyword(&tokens[p]) == Keyword::DISTINCT) {
        return false;
    }
    let mut depth = 0usize;
    for k in (0..at).rev() {
        match &tokens[k] {
            Token::RParen => depth += 1,
            Token::LParen if depth == 0 => return false,
            Token::LParen => depth -= 1,
            t if depth == 0 && matches!(keyword(t), Keyword::SELECT | Keyword::DELETE | Keyword::UPDATE) => {
                return true;
            }
            _ => {}
        }
    }
    false
}

/// The `*` of `FROM [ONLY] name[.name...] *` after the keyword at `at`.
fn relation_star(tokens: &[Token], at: usize) -> Option<usize> {
    let mut k = next_significant(tokens, at + 1)?;
    if keyword(&tokens[k]) == Keyword::ONLY {
        k = next_significant(tokens, k + 1)?;
    }
    loop {
        if !matches!(tokens[k], Token::Word(_)) {
            return None;
        }
        let after = next_significant(tokens, k + 1)?;
        match tokens[after] {
            Token::Period => k = next_significant(tokens, after + 1)?,
            Token::Mul => return Some(after),
            _ => return None,
        }
    }
}
