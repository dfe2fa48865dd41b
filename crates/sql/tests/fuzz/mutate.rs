//! Byte-level mutations of generated statements, for the never-crash
//! property of the entry points that take SQL text. The grammar's
//! statements reach deep into the binder and executor; mutating them finds
//! the edges of the parser and of every later stage that assumes its input
//! is well formed (a truncated CASE, an unbalanced quote, a NUL in a name).

use super::grammar::Rng;

/// Tokens worth splicing in: openers without closers, quote characters,
/// comment starters, parameters, casts, keywords that change a clause.
const TOKENS: [&str; 34] = [
    "(",
    ")",
    "'",
    "\"",
    ",",
    ";",
    "--",
    "/*",
    "*/",
    "\\",
    "$1",
    "$0",
    "$99999",
    "::int",
    "::text[]",
    "[",
    "]",
    "NULL",
    "SELECT",
    "FROM",
    "WHERE",
    "CASE",
    "END",
    "E'\\x",
    "ARRAY[",
    "1e999",
    "-",
    "||",
    "IN (",
    "OVER (",
    "\u{0}",
    "\u{fffd}",
    "\u{1F600}",
    " ",
];

/// Zero to four mutations of `sql` (mostly one: more leave little but
/// syntax errors); the result is valid UTF-8 (the entry points take
/// `&str`): byte edits that break UTF-8 are repaired with U+FFFD, as a
/// server decoding a client's bytes would.
pub fn mutate(rng: &mut Rng, sql: &str) -> String {
    let mut s = sql.to_owned();
    let n = match rng.below(10) {
        0 => 0,
        1..=6 => 1,
        _ => 2 + rng.below(3),
    };
    for _ in 0..n {
        s = once(rng, &s);
    }
    s
}

fn once(rng: &mut Rng, s: &str) -> String {
    let mut bytes = s.as_bytes().to_vec();
    let at = |rng: &mut Rng, len: usize| rng.below(len + 1);
    match rng.below(11) {
        // Truncation.
        0 => bytes.truncate(at(rng, bytes.len())),
        // A token spliced in.
        1 | 2 => {
            let i = at(rng, bytes.len());
            let t = rng.pick(&TOKENS).as_bytes().to_vec();
            bytes.splice(i..i, t);
        }
        // Random bytes (any value, so invalid UTF-8 and NULs too).
        3 => {
            let i = at(rng, bytes.len());
            let n = 1 + rng.below(4);
            let junk: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            bytes.splice(i..i, junk);
        }
        // A byte flipped.
        4 if !bytes.is_empty() => {
            let i = rng.below(bytes.len());
            bytes[i] ^= 1 << rng.below(8);
        }
        // A range deleted.
        5 if !bytes.is_empty() => {
            let i = rng.below(bytes.len());
            let j = (i + 1 + rng.below(20)).min(bytes.len());
            bytes.drain(i..j);
        }
        // A range duplicated.
        6 if !bytes.is_empty() => {
            let i = rng.below(bytes.len());
            let j = (i + 1 + rng.below(40)).min(bytes.len());
            let dup = bytes[i..j].to_vec();
            bytes.splice(j..j, dup);
        }
        // Deep nesting around a literal somewhere: every recursive stage
        // must answer or give 54001.
        7 => {
            let depth = *rng.pick(&[10, 60, 300, 2_000, 20_000]);
            let (open, close) = *rng.pick(&[
                ("(", ")"),
                ("-(", ")"),
                ("NOT (", ")"),
                ("abs(", ")"),
                ("CASE WHEN true THEN ", " END"),
                ("(SELECT ", ")"),
                ("ARRAY[", "]"),
            ]);
            let nested = format!("{}1{}", open.repeat(depth), close.repeat(depth));
            return splice_str(rng, s, &nested);
        }
        // A long operator chain.
        8 => {
            let n = *rng.pick(&[100, 1_000, 20_000]);
            let op = rng.pick(&[" + 1", " || 'a'", " AND true", " * 2", " = 1"]);
            let chain = format!("1{}", op.repeat(n));
            return splice_str(rng, s, &chain);
        }
        // Huge literals.
        9 => {
            let lit = match rng.below(4) {
                0 => "9".repeat(*rng.pick(&[40, 1_000, 100_000])),
                1 => format!("'{}'", "z".repeat(*rng.pick(&[10_000, 1_000_000]))),
                2 => format!("0.{}1", "0".repeat(*rng.pick(&[500, 20_000]))),
                _ => format!("1e{}", rng.pick(&["308", "309", "-400", "99999999999"])),
            };
            return splice_str(rng, s, &lit);
        }
        // NUL bytes.
        _ => {
            let i = at(rng, bytes.len());
            bytes.insert(i, 0);
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Inserts `piece` at a char boundary of `s`.
fn splice_str(rng: &mut Rng, s: &str, piece: &str) -> String {
    let mut i = rng.below(s.len() + 1);
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    format!("{}{piece}{}", &s[..i], &s[i..])
}
