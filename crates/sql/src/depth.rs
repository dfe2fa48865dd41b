//! The bound on how deep a statement's expression trees may be, checked on
//! the tokens before sqlparser builds the tree.
//!
//! Why on the tokens: binding, planning, evaluating and dropping a tree all
//! recurse over it, and a stack overflow aborts the process (it is not a
//! panic; nothing can catch it). sqlparser bounds its own nesting (50
//! levels of parentheses, CASE, NOT, unary minus, function calls and
//! subqueries: `RecursionLimitExceeded`) but parses a chain of binary
//! operators in a loop, so `1 + 1 + ... + 1` becomes a left-deep tree as
//! deep as the chain is long. Refusing such a tree after it is built would
//! still have to drop it, recursively; refusing it from the tokens means a
//! tree too deep is never built.
//!
//! The estimate is an upper bound of the tree's depth: every operator
//! token (`+`, `||`, `::`, AND, NOT, IS, ...) counts one level and every
//! parenthesis, bracket or CASE one more for what is inside it; commas and
//! the words that separate clauses and CASE branches start a new count.
//! An IN list or VALUES of any length is therefore shallow.
//!
//! The limit follows the stack left to the calling thread (as PostgreSQL's
//! `max_stack_depth` does), so direct mode on a small thread is as safe as
//! a server session.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

/// Stack one level of expression depth may take across bind, plan,
/// evaluation and drop. Before this bound a 1,000-term `+` chain
/// overflowed a 4 MiB thread in the test profile (opt-level 1): more than
/// 4 KiB a level; twice that is budgeted.
const BYTES_PER_LEVEL: usize = 8 << 10;

/// Stack kept free for everything that is not proportional to depth.
const RESERVED_BYTES: usize = 512 << 10;

/// Never deeper than this whatever the stack: PostgreSQL 15 with its
/// default 2 MB `max_stack_depth` refuses `+` chains of this length too.
pub const MAX_EXPR_DEPTH: usize = 10_000;

/// Nested calls (`f(f(...))`, a word before `(`) allowed: sqlparser
/// backtracks over a function's arguments (`try_parse`), re-parsing each
/// nested call twice, so parse time doubles with every level (40 levels
/// did not finish in minutes). 16 levels parse in milliseconds.
pub const MAX_CALL_NESTING: usize = 16;

/// The deepest expression tree a statement may have on this thread now.
pub fn depth_limit() -> usize {
    let remaining = stacker::remaining_stack().unwrap_or(2 << 20);
    (remaining.saturating_sub(RESERVED_BYTES) / BYTES_PER_LEVEL).min(MAX_EXPR_DEPTH)
}

struct Frame {
    /// Depth of the deepest segment closed so far.
    max: usize,
    /// Operators in the current segment.
    ops: usize,
    /// Depth of the deepest nested frame in the current segment.
    child: usize,
    /// Opened by a word and `(`: a function call (or IN, VALUES, ...).
    call: bool,
}

impl Frame {
    const fn new() -> Frame {
        Frame { max: 0, ops: 0, child: 0, call: false }
    }

    fn end_segment(&mut self) {
        self.max = self.max.max(self.ops + self.child);
        self.ops = 0;
        self.child = 0;
    }

    fn depth(mut self) -> usize {
        self.end_segment();
        self.max + 1
    }
}

/// An upper bound of the expression depth of the statements `tokens`
/// spell, computed with an explicit stack; `usize::MAX` beyond
/// `MAX_CALL_NESTING` nested calls.
pub fn estimated_depth<'a>(tokens: impl IntoIterator<Item = &'a Token>) -> usize {
    let mut stack: Vec<Frame> = vec![Frame::new()];
    let mut previous_word = false;
    let mut calls = 0;
    for t in tokens {
        if matches!(t, Token::Whitespace(_)) {
            continue;
        }
        let after_word = std::mem::replace(&mut previous_word, matches!(t, Token::Word(_)));
        let closes =
            matches!(t, Token::RParen | Token::RBracket) || matches!(t, Token::Word(w) if w.keyword == Keyword::END);
        if closes && stack.last().is_some_and(|f| f.call) {
            calls -= 1;
        }
        match t {
            // `ARRAY[` backtracks in sqlparser as a call's `(` does: 60
            // nested levels did not parse in minutes (found by tests/fuzz.rs).
            Token::LParen | Token::LBracket if after_word => {
                calls += 1;
                if calls > MAX_CALL_NESTING {
                    return usize::MAX;
                }
                stack.push(Frame { call: true, ..Frame::new() });
            }
            Token::LParen | Token::LBracket | Token::LBrace => stack.push(Frame::new()),
            // CASE too: with a syntax error inside, sqlparser's backtracking
            // over 60 nested CASEs ran for minutes (found by tests/fuzz.rs).
            Token::Word(w) if w.keyword == Keyword::CASE => {
                calls += 1;
                if calls > MAX_CALL_NESTING {
                    return usize::MAX;
                }
                stack.push(Frame { call: true, ..Frame::new() });
            }
            Token::RParen | Token::RBracket | Token::RBrace => close(&mut stack),
            Token::Word(w) if w.keyword == Keyword::END => close(&mut stack),
            Token::Comma | Token::SemiColon => top(&mut stack).end_segment(),
            Token::Word(w) => match w.keyword {
                Keyword::WHEN
                | Keyword::THEN
                | Keyword::ELSE
                | Keyword::SELECT
                | Keyword::FROM
                | Keyword::WHERE
                | Keyword::GROUP
                | Keyword::HAVING
                | Keyword::ORDER
                | Keyword::LIMIT
                | Keyword::OFFSET
                | Keyword::ON
                | Keyword::VALUES
                | Keyword::SET
                | Keyword::RETURNING => {
                    top(&mut stack).end_segment();
                }
                Keyword::AND
                | Keyword::OR
                | Keyword::NOT
                | Keyword::IS
                | Keyword::NOTNULL
                | Keyword::LIKE
                | Keyword::ILIKE
                | Keyword::SIMILAR
                | Keyword::BETWEEN
                | Keyword::IN
                | Keyword::COLLATE
                | Keyword::AT
                | Keyword::OVERLAPS
                | Keyword::ESCAPE
                | Keyword::ANY
                | Keyword::ALL
                | Keyword::SOME
                | Keyword::EXISTS => {
                    top(&mut stack).ops += 1;
                }
                _ => {}
            },
            Token::Whitespace(_) | Token::Number(..) | Token::Placeholder(_) | Token::Period | Token::EOF => {}
            t if is_literal(t) => {}
            _ => top(&mut stack).ops += 1,
        }
    }
    // Unbalanced input is a syntax error the parser reports; count what is open.
    let mut depth = 0;
    while let Some(mut f) = stack.pop() {
        f.child = f.child.max(depth);
        depth = f.depth();
    }
    depth
}

fn top(stack: &mut Vec<Frame>) -> &mut Frame {
    if stack.is_empty() {
        stack.push(Frame::new());
    }
    let last = stack.len() - 1;
    &mut stack[last]
}

/// Closes the innermost frame into its parent (an unmatched closer only
/// ends the outermost frame's segment: the parser rejects it anyway).
fn close(stack: &mut Vec<Frame>) {
    if stack.len() > 1 {
        if let Some(f) = stack.pop() {
            let d = f.depth();
            let parent = top(stack);
            parent.child = parent.child.max(d);
        }
    } else {
        top(stack).end_segment();
    }
}

fn is_literal(t: &Token) -> bool {
    matches!(
        t,
        Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::DollarQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::UnicodeStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::DoubleQuotedByteStringLiteral(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::tokenizer::Tokenizer;

    fn depth(sql: &str) -> usize {
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().unwrap();
        estimated_depth(&tokens)
    }

    #[test]
    fn chains_count_their_operators_and_lists_do_not() {
        assert_eq!(depth("SELECT 1"), 1);
        assert_eq!(depth("SELECT 1 + 1 + 1"), 3);
        assert_eq!(depth("SELECT ((1))"), 3);
        assert_eq!(depth("SELECT x IN (1, 2, 3, 4, 5, 6)"), 3);
        assert_eq!(depth("SELECT CASE WHEN a = 1 THEN b + 1 ELSE c END"), 3);
        assert!(depth(&format!("SELECT {}1", "- ".repeat(100))) > 100);
        assert!(depth(&format!("SELECT 1{}", " || 'a'".repeat(5000))) > 5000);
        assert_eq!(depth("SELECT (1))) + 1 END"), 2);
        assert_eq!(depth(&format!("SELECT {}1{}", "abs(".repeat(16), ")".repeat(16))), 17);
        assert_eq!(depth(&format!("SELECT {}1{}", "abs(".repeat(17), ")".repeat(17))), usize::MAX);
        assert_eq!(depth(&format!("SELECT {}", "abs(1) + ".repeat(100))), 102);
    }
}
