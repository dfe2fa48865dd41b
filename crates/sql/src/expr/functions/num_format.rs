//! Number templates: `to_char(number, template)` and `to_number(text,
//! template)` as PostgreSQL 15's formatting.c reads and writes them
//! (parse_format and NUMDesc_prepare for the template, NUM_processor in
//! both directions, the per-type preparation of numeric_to_char,
//! int4_to_char and int8_to_char, numeric_to_number), in the C locale of
//! the private cluster: `D` is `.`, `G` is `,`, `L` is a blank, `S` is `-`
//! or `+`.
//!
//! The processor works on bytes with positions where formatting.c works on
//! pointers: quirks of the original (a `SG` in a Roman numeral template
//! writes a NUL and so ends the text there; the digits of a `9` past the
//! end of a number likewise) are kept on purpose, because the answer must
//! be PostgreSQL's.

use pgtier_engine::Value;

use crate::error::{Result, SqlError};
use crate::expr::utf8_len;
use crate::value;

/// A template keyword (NUM_keywords).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Comma,
    Dec,
    Zero,
    Nine,
    B,
    C,
    D,
    Eeee,
    Fm,
    G,
    L,
    Mi,
    Pl,
    Pr,
    RnUpper,
    RnLower,
    Sg,
    Sp,
    S,
    ThUpper,
    ThLower,
    V,
}

/// NUM_keywords in its order: a keyword is looked for among those that
/// start with the template's next byte, in this order (`SG` before `S`).
const KEYWORDS: &[(&str, Key)] = &[
    (",", Key::Comma),
    (".", Key::Dec),
    ("0", Key::Zero),
    ("9", Key::Nine),
    ("B", Key::B),
    ("C", Key::C),
    ("D", Key::D),
    ("EEEE", Key::Eeee),
    ("FM", Key::Fm),
    ("G", Key::G),
    ("L", Key::L),
    ("MI", Key::Mi),
    ("PL", Key::Pl),
    ("PR", Key::Pr),
    ("RN", Key::RnUpper),
    ("SG", Key::Sg),
    ("SP", Key::Sp),
    ("S", Key::S),
    ("TH", Key::ThUpper),
    ("V", Key::V),
    ("b", Key::B),
    ("c", Key::C),
    ("d", Key::D),
    ("eeee", Key::Eeee),
    ("fm", Key::Fm),
    ("g", Key::G),
    ("l", Key::L),
    ("mi", Key::Mi),
    ("pl", Key::Pl),
    ("pr", Key::Pr),
    ("rn", Key::RnLower),
    ("sg", Key::Sg),
    ("sp", Key::Sp),
    ("s", Key::S),
    ("th", Key::ThLower),
    ("v", Key::V),
];

/// One node of a parsed template: a keyword, or a character copied to the
/// output (to_char) or skipped in the input (to_number).
#[derive(Debug)]
enum Node {
    Key(Key),
    Char(String),
}

const F_DECIMAL: u32 = 1 << 1;
const F_LDECIMAL: u32 = 1 << 2;
const F_ZERO: u32 = 1 << 3;
const F_BLANK: u32 = 1 << 4;
const F_FILLMODE: u32 = 1 << 5;
const F_LSIGN: u32 = 1 << 6;
const F_BRACKET: u32 = 1 << 7;
const F_MINUS: u32 = 1 << 8;
const F_PLUS: u32 = 1 << 9;
const F_ROMAN: u32 = 1 << 10;
const F_MULTI: u32 = 1 << 11;
const F_PLUS_POST: u32 = 1 << 12;
const F_MINUS_POST: u32 = 1 << 13;
const F_EEEE: u32 = 1 << 14;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum LSign {
    #[default]
    None,
    Pre,
    Post,
}

/// NUMDesc: what the template says of the number.
#[derive(Clone, Debug, Default)]
struct Desc {
    pre: i32,
    post: i32,
    lsign: LSign,
    flag: u32,
    pre_lsign_num: i32,
    multi: i32,
    zero_start: i32,
    zero_end: i32,
}

impl Desc {
    fn is(&self, f: u32) -> bool {
        self.flag & f != 0
    }
}

fn syntax(message: &str) -> SqlError {
    SqlError::new("42601", message)
}

/// NUMDesc_prepare for one keyword node.
fn prepare(num: &mut Desc, key: Key) -> Result<()> {
    if num.is(F_EEEE) && key != Key::Eeee {
        return Err(syntax("\"EEEE\" must be the last pattern used"));
    }
    match key {
        Key::Nine => {
            if num.is(F_BRACKET) {
                return Err(syntax("\"9\" must be ahead of \"PR\""));
            }
            if num.is(F_MULTI) {
                num.multi += 1;
            } else if num.is(F_DECIMAL) {
                num.post += 1;
            } else {
                num.pre += 1;
            }
        }
        Key::Zero => {
            if num.is(F_BRACKET) {
                return Err(syntax("\"0\" must be ahead of \"PR\""));
            }
            if !num.is(F_ZERO) && !num.is(F_DECIMAL) {
                num.flag |= F_ZERO;
                num.zero_start = num.pre + 1;
            }
            if num.is(F_DECIMAL) {
                num.post += 1;
            } else {
                num.pre += 1;
            }
            num.zero_end = num.pre + num.post;
        }
        Key::B => {
            if num.pre == 0 && num.post == 0 && !num.is(F_ZERO) {
                num.flag |= F_BLANK;
            }
        }
        Key::D | Key::Dec => {
            if key == Key::D {
                num.flag |= F_LDECIMAL;
            }
            if num.is(F_DECIMAL) {
                return Err(syntax("multiple decimal points"));
            }
            if num.is(F_MULTI) {
                return Err(syntax("cannot use \"V\" and decimal point together"));
            }
            num.flag |= F_DECIMAL;
        }
        Key::Fm => num.flag |= F_FILLMODE,
        Key::S => {
            if num.is(F_LSIGN) {
                return Err(syntax("cannot use \"S\" twice"));
            }
            if num.is(F_PLUS) || num.is(F_MINUS) || num.is(F_BRACKET) {
                return Err(syntax("cannot use \"S\" and \"PL\"/\"MI\"/\"SG\"/\"PR\" together"));
            }
            if !num.is(F_DECIMAL) {
                num.lsign = LSign::Pre;
                num.pre_lsign_num = num.pre;
                num.flag |= F_LSIGN;
            } else if num.lsign == LSign::None {
                num.lsign = LSign::Post;
                num.flag |= F_LSIGN;
            }
        }
        Key::Mi => {
            if num.is(F_LSIGN) {
                return Err(syntax("cannot use \"S\" and \"MI\" together"));
            }
            num.flag |= F_MINUS;
            if num.is(F_DECIMAL) {
                num.flag |= F_MINUS_POST;
            }
        }
        Key::Pl => {
            if num.is(F_LSIGN) {
                return Err(syntax("cannot use \"S\" and \"PL\" together"));
            }
            num.flag |= F_PLUS;
            if num.is(F_DECIMAL) {
                num.flag |= F_PLUS_POST;
            }
        }
        Key::Sg => {
            if num.is(F_LSIGN) {
                return Err(syntax("cannot use \"S\" and \"SG\" together"));
            }
            num.flag |= F_MINUS | F_PLUS;
        }
        Key::Pr => {
            if num.is(F_LSIGN) || num.is(F_PLUS) || num.is(F_MINUS) {
                return Err(syntax("cannot use \"PR\" and \"S\"/\"PL\"/\"MI\"/\"SG\" together"));
            }
            num.flag |= F_BRACKET;
        }
        Key::RnUpper | Key::RnLower => num.flag |= F_ROMAN,
        Key::V => {
            if num.is(F_DECIMAL) {
                return Err(syntax("cannot use \"V\" and decimal point together"));
            }
            num.flag |= F_MULTI;
        }
        Key::Eeee => {
            if num.is(F_EEEE) {
                return Err(syntax("cannot use \"EEEE\" twice"));
            }
            let others = F_BLANK | F_FILLMODE | F_LSIGN | F_BRACKET | F_MINUS | F_PLUS | F_ROMAN | F_MULTI;
            if num.flag & others != 0 {
                return Err(syntax("\"EEEE\" is incompatible with other formats")
                    .with_detail("\"EEEE\" may only be used together with digit and decimal point patterns."));
            }
            num.flag |= F_EEEE;
        }
        Key::Comma | Key::C | Key::G | Key::L | Key::Sp | Key::ThUpper | Key::ThLower => {}
    }
    Ok(())
}

/// The keyword at the start of `s` (index_seq_search).
fn keyword_at(s: &[u8]) -> Option<(Key, usize)> {
    let first = *s.first()?;
    if first <= b' ' || first >= b'~' {
        return None;
    }
    let start = KEYWORDS.iter().position(|(name, _)| name.as_bytes()[0] == first)?;
    KEYWORDS[start..]
        .iter()
        .take_while(|(name, _)| name.as_bytes()[0] == first)
        .find(|(name, _)| s.starts_with(name.as_bytes()))
        .map(|&(name, key)| (key, name.len()))
}

/// parse_format for a number template.
fn parse(fmt: &str) -> Result<(Vec<Node>, Desc)> {
    let mut nodes = Vec::new();
    let mut num = Desc::default();
    let mut rest = fmt;
    while let Some(c) = rest.chars().next() {
        if let Some((key, len)) = keyword_at(rest.as_bytes()) {
            prepare(&mut num, key)?;
            nodes.push(Node::Key(key));
            rest = &rest[len..];
        } else if c == '"' {
            // A quoted literal; a backslash quotes the next character.
            let mut chars = rest[1..].chars();
            let mut consumed = 1;
            while let Some(ch) = chars.next() {
                consumed += ch.len_utf8();
                if ch == '"' {
                    break;
                }
                let ch = match (ch, chars.clone().next()) {
                    ('\\', Some(next)) => {
                        chars.next();
                        consumed += next.len_utf8();
                        next
                    }
                    _ => ch,
                };
                nodes.push(Node::Char(ch.to_string()));
            }
            rest = &rest[consumed..];
        } else {
            // Outside quotes a backslash only escapes a double quote.
            let skip = usize::from(c == '\\' && rest[1..].starts_with('"'));
            let ch = rest[skip..].chars().next().unwrap_or(c);
            nodes.push(Node::Char(ch.to_string()));
            rest = &rest[skip + ch.len_utf8()..];
        }
    }
    Ok((nodes, num))
}

// ------------------------------------------------------------ to_char

/// NUM_processor's state in the to_char direction.
struct Writer<'a> {
    num: Desc,
    number: &'a [u8],
    number_p: usize,
    out: Vec<u8>,
    sign: u8,
    sign_wrote: bool,
    num_count: i32,
    num_in: bool,
    num_curr: i32,
    out_pre_spaces: i32,
    last_relevant: Option<usize>,
}

impl Writer<'_> {
    fn at(&self, i: usize) -> u8 {
        self.number.get(i).copied().unwrap_or(0)
    }

    fn relevant_is_point(&self) -> bool {
        self.last_relevant.is_some_and(|r| self.at(r) == b'.')
    }

    /// IS_PREDEC_SPACE: "0.1" with 9.9 is " .1".
    fn predec_space(&self) -> bool {
        !self.num.is(F_ZERO) && self.number_p == 0 && self.at(0) == b'0' && self.num.post != 0
    }

    fn locale_sign(&mut self) {
        self.out.push(if self.sign == b'-' { b'-' } else { b'+' });
    }

    /// NUM_numpart_to_char.
    fn numpart(&mut self, key: Key) {
        if self.num.is(F_ROMAN) {
            return;
        }
        self.num_in = false;
        let predec = self.predec_space();
        if !self.sign_wrote
            && (self.num_curr >= self.out_pre_spaces || (self.num.is(F_ZERO) && self.num.zero_start == self.num_curr))
            && (!predec || self.relevant_is_point())
        {
            if self.num.is(F_LSIGN) {
                if self.num.lsign == LSign::Pre {
                    self.locale_sign();
                    self.sign_wrote = true;
                }
            } else if self.num.is(F_BRACKET) {
                self.out.push(if self.sign == b'+' { b' ' } else { b'<' });
                self.sign_wrote = true;
            } else if self.sign == b'+' {
                if !self.num.is(F_FILLMODE) {
                    self.out.push(b' ');
                }
                self.sign_wrote = true;
            } else if self.sign == b'-' {
                self.out.push(b'-');
                self.sign_wrote = true;
            }
        }
        if self.num_curr < self.out_pre_spaces && (self.num.zero_start > self.num_curr || !self.num.is(F_ZERO)) {
            if !self.num.is(F_FILLMODE) {
                self.out.push(b' ');
            }
        } else if self.num.is(F_ZERO) && self.num_curr < self.out_pre_spaces && self.num.zero_start <= self.num_curr {
            self.out.push(b'0');
            self.num_in = true;
        } else {
            let c = self.at(self.number_p);
            if c == b'.' {
                if !self.relevant_is_point() || self.num.is(F_FILLMODE) {
                    self.out.push(b'.');
                }
            } else if self.last_relevant.is_some_and(|r| self.number_p > r) && key != Key::Zero {
            } else if self.predec_space() {
                if !self.num.is(F_FILLMODE) {
                    self.out.push(b' ');
                } else if self.relevant_is_point() {
                    self.out.push(b'0');
                }
            } else {
                self.out.push(c);
                self.num_in = true;
            }
            if c != 0 {
                self.number_p += 1;
            }
        }
        let mut end = self.num_count + i32::from(self.out_pre_spaces != 0) + i32::from(self.num.is(F_DECIMAL));
        if self.last_relevant.is_some_and(|r| r == self.number_p) {
            end = self.num_curr;
        }
        if self.num_curr + 1 == end {
            if self.sign_wrote && self.num.is(F_BRACKET) {
                self.out.push(if self.sign == b'+' { b' ' } else { b'>' });
            } else if self.num.is(F_LSIGN) && self.num.lsign == LSign::Post {
                self.locale_sign();
            }
        }
        self.num_curr += 1;
    }
}

/// get_th: the ordinal suffix of the number's last digit.
fn ordinal(number: &[u8], upper: bool) -> Result<&'static str> {
    let Some(&last) = number.last().filter(|c| c.is_ascii_digit()) else {
        return Err(SqlError::new("22P02", format!("\"{}\" is not a number", String::from_utf8_lossy(number))));
    };
    let teen = number.len() > 1 && number[number.len() - 2] == b'1';
    let suffix = match (teen, last) {
        (false, b'1') => "st",
        (false, b'2') => "nd",
        (false, b'3') => "rd",
        _ => "th",
    };
    Ok(match (upper, suffix) {
        (false, s) => s,
        (true, "st") => "ST",
        (true, "nd") => "ND",
        (true, "rd") => "RD",
        (true, _) => "TH",
    })
}

/// NUM_processor writing `number` (the digits the type's preparation
/// made) under the template.
fn write(nodes: &[Node], mut num: Desc, number: &[u8], out_pre_spaces: i32, sign: u8) -> Result<String> {
    if num.zero_start > 0 {
        num.zero_start -= 1;
    }
    if num.is(F_EEEE) {
        return Ok(String::from_utf8_lossy(number).into_owned());
    }
    let mut sign = sign;
    if num.is(F_ROMAN) {
        num.lsign = LSign::None;
        num.pre_lsign_num = 0;
        num.post = 0;
        num.pre = 0;
        sign = 0;
        num.flag = F_ROMAN | (num.flag & F_FILLMODE);
    }
    let sign_wrote = if num.is(F_PLUS) || num.is(F_MINUS) {
        // PL alone leaves the sign to be written with the digits.
        !num.is(F_PLUS) || num.is(F_MINUS)
    } else {
        if sign != b'-' && num.is(F_BRACKET) && num.is(F_FILLMODE) {
            num.flag &= !F_BRACKET;
        }
        let wrote = sign == b'+' && num.is(F_FILLMODE) && !num.is(F_LSIGN);
        if num.lsign == LSign::Pre && num.pre == num.pre_lsign_num {
            num.lsign = LSign::Post;
        }
        wrote
    };
    let mut w = Writer {
        number,
        number_p: 0,
        out: Vec::new(),
        sign,
        sign_wrote,
        num_count: num.post + num.pre - 1,
        num_in: false,
        num_curr: 0,
        out_pre_spaces,
        last_relevant: None,
        num,
    };
    if w.num.is(F_FILLMODE) && w.num.is(F_DECIMAL) {
        // get_last_relevant_decnum: the last non-zero digit after the point, or the point.
        w.last_relevant = number
            .iter()
            .position(|&c| c == b'.')
            .map(|point| number[point + 1..].iter().rposition(|&c| c != b'0').map_or(point, |i| point + 1 + i));
        if let Some(relevant) = w.last_relevant
            && w.num.zero_end > out_pre_spaces
        {
            let last_zero = (number.len() - 1).min(usize::try_from(w.num.zero_end - out_pre_spaces).unwrap_or(0));
            w.last_relevant = Some(relevant.max(last_zero));
        }
    }
    if !w.sign_wrote && out_pre_spaces == 0 {
        w.num_count += 1;
    }
    for node in nodes {
        let key = match node {
            Node::Char(s) => {
                w.out.extend_from_slice(s.as_bytes());
                continue;
            }
            Node::Key(key) => *key,
        };
        match key {
            Key::Nine | Key::Zero | Key::Dec | Key::D => w.numpart(key),
            Key::Comma | Key::G => {
                if w.num_in {
                    w.out.push(b',');
                } else if !w.num.is(F_FILLMODE) {
                    w.out.push(b' ');
                }
            }
            Key::L => w.out.push(b' '),
            Key::RnUpper | Key::RnLower => {
                let rest = String::from_utf8_lossy(&number[w.number_p.min(number.len())..]).into_owned();
                let rest = if key == Key::RnLower { rest.to_ascii_lowercase() } else { rest };
                let text = if w.num.is(F_FILLMODE) { rest } else { format!("{rest:>15}") };
                w.out.extend_from_slice(text.as_bytes());
            }
            Key::ThUpper | Key::ThLower => {
                if w.num.is(F_ROMAN) || number.first() == Some(&b'#') || w.sign == b'-' || w.num.is(F_DECIMAL) {
                    continue;
                }
                w.out.extend_from_slice(ordinal(number, key == Key::ThUpper)?.as_bytes());
            }
            Key::Mi => {
                if w.sign == b'-' {
                    w.out.push(b'-');
                } else if !w.num.is(F_FILLMODE) {
                    w.out.push(b' ');
                }
            }
            Key::Pl => {
                if w.sign == b'+' {
                    w.out.push(b'+');
                } else if !w.num.is(F_FILLMODE) {
                    w.out.push(b' ');
                }
            }
            Key::Sg => w.out.push(w.sign),
            Key::B | Key::C | Key::Eeee | Key::Fm | Key::Pr | Key::Sp | Key::S | Key::V => {}
        }
    }
    // A NUL written (the digit past the number's end, a Roman numeral's
    // SG) ends the C string there.
    let end = w.out.iter().position(|&c| c == 0).unwrap_or(w.out.len());
    Ok(String::from_utf8_lossy(&w.out[..end]).into_owned())
}

/// int_to_roman: 1..3999 in Roman numerals, else 15 `#`.
fn roman(n: i64) -> String {
    if !(1..=3999).contains(&n) {
        return "#".repeat(15);
    }
    const ONES: [&str; 9] = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX"];
    const TENS: [&str; 9] = ["X", "XX", "XXX", "XL", "L", "LX", "LXX", "LXXX", "XC"];
    const HUNDREDS: [&str; 9] = ["C", "CC", "CCC", "CD", "D", "DC", "DCC", "DCCC", "CM"];
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.bytes().enumerate() {
        let place = digits.len() - i;
        let Some(k) = usize::from(d - b'0').checked_sub(1) else { continue };
        match place {
            4 => out.push_str(&"M".repeat(k + 1)),
            3 => out.push_str(HUNDREDS[k]),
            2 => out.push_str(TENS[k]),
            _ => out.push_str(ONES[k]),
        }
    }
    out
}

/// `pre.post` `#`s: a number too wide for the template.
fn overflow_mark(num: &Desc) -> Vec<u8> {
    let pre = usize::try_from(num.pre).unwrap_or(0);
    let post = usize::try_from(num.post).unwrap_or(0);
    let mut s = vec![b'#'; pre + post + 1];
    s[pre] = b'.';
    s
}

/// The number's sign and digits, the padding the template's integer
/// digits leave, or the overflow mark (the tail of every *_to_char).
fn fit(num: &Desc, text: &str) -> (u8, Vec<u8>, i32) {
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => (b'-', rest),
        None => (b'+', text),
    };
    let pre_len = i32::try_from(digits.find('.').unwrap_or(digits.len())).unwrap_or(i32::MAX);
    if pre_len < num.pre {
        (sign, digits.as_bytes().to_vec(), num.pre - pre_len)
    } else if pre_len > num.pre {
        (sign, overflow_mark(num), 0)
    } else {
        (sign, digits.as_bytes().to_vec(), 0)
    }
}

/// An integer's digits with `post` zeros after a point.
fn with_zero_decimals(int_text: String, post: i32) -> String {
    if post <= 0 {
        return int_text;
    }
    format!("{int_text}.{}", "0".repeat(usize::try_from(post).unwrap_or(0)))
}

/// numeric_out_sci of a decimal text: one digit before the point,
/// `scale` after it (rounded half away from zero), `e`, a signed exponent of
/// at least two digits; NaN and the infinities as their names.
fn sci(text: &str, scale: i32) -> String {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if !body.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return text.to_owned();
    }
    let point = body.find('.').unwrap_or(body.len());
    let digits: Vec<u8> = body.bytes().filter(u8::is_ascii_digit).collect();
    let scale = usize::try_from(scale).unwrap_or(0);
    let (exponent, significant) = match digits.iter().position(|&d| d != b'0') {
        None => (0i64, vec![b'0']),
        Some(first) => {
            (i64::try_from(point).unwrap_or(0) - i64::try_from(first).unwrap_or(0) - 1, digits[first..].to_vec())
        }
    };
    // significant[0] . significant[1..], rounded to `scale` places.
    let mut kept: Vec<u8> = (0..=scale).map(|i| significant.get(i).copied().unwrap_or(b'0')).collect();
    if significant.get(scale + 1).is_some_and(|&d| d >= b'5') {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, b'1');
                break;
            }
            i -= 1;
            if kept[i] == b'9' {
                kept[i] = b'0';
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    let int_len = kept.len() - scale;
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.push_str(std::str::from_utf8(&kept[..int_len]).unwrap_or("0"));
    if scale > 0 {
        out.push('.');
        out.push_str(std::str::from_utf8(&kept[int_len..]).unwrap_or(""));
    }
    out.push_str(&format!("e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs()));
    out
}

/// C's `%+.*e` of a double (int4_to_char's EEEE), its `+` a blank.
fn c_sci(x: f64, post: i32) -> String {
    let formatted = format!("{:.*e}", usize::try_from(post).unwrap_or(0), x);
    let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if mantissa.starts_with('-') { "" } else { " " };
    format!("{sign}{mantissa}e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs())
}

/// Moves a decimal text's point `places` to the right (exact: multiplies
/// by 10^places), keeping at least one integer digit.
fn shift_point(text: &str, places: usize) -> String {
    let (sign, body) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text),
    };
    if !body.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return text.to_owned();
    }
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let mut frac = frac.to_owned();
    while frac.len() < places {
        frac.push('0');
    }
    let moved = format!("{int}{}", &frac[..places]);
    let moved = moved.trim_start_matches('0');
    let rest = &frac[places..];
    let int = if moved.is_empty() { "0" } else { moved };
    if rest.is_empty() { format!("{sign}{int}") } else { format!("{sign}{int}.{rest}") }
}

fn int_out_of_range() -> SqlError {
    SqlError::new("22003", "integer out of range")
}

fn bigint_out_of_range() -> SqlError {
    SqlError::new("22003", "bigint out of range")
}

/// to_char(integer | bigint | numeric, template).
pub(super) fn to_char(v: &Value, fmt: &str, mut round: impl FnMut(&Value, i32) -> Result<Value>) -> Result<String> {
    if fmt.is_empty() {
        return Ok(String::new());
    }
    let (nodes, mut num) = parse(fmt)?;
    let (number, out_pre_spaces, sign): (Vec<u8>, i32, u8) = match v {
        Value::Int2(_) | Value::Int4(_) => {
            let x = match v {
                Value::Int2(x) => i32::from(*x),
                Value::Int4(x) => *x,
                _ => unreachable!("matched above"),
            };
            if num.is(F_ROMAN) {
                (roman(i64::from(x)).into_bytes(), 0, 0)
            } else if num.is(F_EEEE) {
                (c_sci(f64::from(x), num.post).into_bytes(), 0, 0)
            } else {
                let x = if num.is(F_MULTI) {
                    // Checked int32 arithmetic, as PostgreSQL since 15.20:
                    // a factor or product past int32 is 22003 (15.18 and
                    // older wrapped silently and printed a wrong number).
                    let factor =
                        10i32.checked_pow(u32::try_from(num.multi).unwrap_or(u32::MAX)).ok_or_else(int_out_of_range)?;
                    num.pre += num.multi;
                    x.checked_mul(factor).ok_or_else(int_out_of_range)?
                } else {
                    x
                };
                let (sign, digits, pad) = fit(&num, &with_zero_decimals(x.to_string(), num.post));
                (digits, pad, sign)
            }
        }
        Value::Int8(x) => {
            if num.is(F_ROMAN) {
                let x = i32::try_from(*x).map_err(|_| int_out_of_range())?;
                (roman(i64::from(x)).into_bytes(), 0, 0)
            } else if num.is(F_EEEE) {
                (sci_with_blank(&x.to_string(), num.post), 0, 0)
            } else {
                let x = if num.is(F_MULTI) {
                    let factor = 10i64
                        .checked_pow(u32::try_from(num.multi).unwrap_or(u32::MAX))
                        .ok_or_else(bigint_out_of_range)?;
                    num.pre += num.multi;
                    x.checked_mul(factor).ok_or_else(bigint_out_of_range)?
                } else {
                    *x
                };
                let (sign, digits, pad) = fit(&num, &with_zero_decimals(x.to_string(), num.post));
                (digits, pad, sign)
            }
        }
        _ => {
            if num.is(F_ROMAN) {
                let rounded = round(v, 0)?;
                let text = value::to_text(&rounded);
                let n = match text.as_str() {
                    "NaN" => return Err(SqlError::new("0A000", "cannot convert NaN to integer")),
                    "Infinity" | "-Infinity" => {
                        return Err(SqlError::new("0A000", "cannot convert infinity to integer"));
                    }
                    t => t.parse::<i32>().map_err(|_| int_out_of_range())?,
                };
                (roman(i64::from(n)).into_bytes(), 0, 0)
            } else if num.is(F_EEEE) {
                let text = value::to_text(v);
                if matches!(text.as_str(), "NaN" | "Infinity" | "-Infinity") {
                    let pre = usize::try_from(num.pre).unwrap_or(0);
                    let mut s = vec![b'#'; pre + usize::try_from(num.post).unwrap_or(0) + 6];
                    s[0] = b' ';
                    s[pre + 1] = b'.';
                    (s, 0, 0)
                } else {
                    (sci_with_blank(&text, num.post), 0, 0)
                }
            } else {
                let text = if num.is(F_MULTI) {
                    let shifted = round(v, num.post + num.multi)?;
                    num.pre += num.multi;
                    shift_point(&value::to_text(&shifted), usize::try_from(num.multi).unwrap_or(0))
                } else {
                    value::to_text(&round(v, num.post)?)
                };
                let (sign, digits, pad) = fit(&num, &text);
                (digits, pad, sign)
            }
        }
    };
    write(&nodes, num, &number, out_pre_spaces, sign)
}

/// numeric_out_sci with a blank where a positive number has no sign.
fn sci_with_blank(text: &str, post: i32) -> Vec<u8> {
    let s = sci(text, post);
    if s.starts_with('-') { s.into_bytes() } else { format!(" {s}").into_bytes() }
}

// ------------------------------------------------------------ to_number

/// NUM_processor's state in the to_number direction.
struct Reader<'a> {
    num: &'a Desc,
    input: &'a [u8],
    p: usize,
    /// The number read: a sign byte, then digits and the point.
    number: Vec<u8>,
    read_pre: i32,
    read_post: i32,
    read_dec: bool,
}

impl Reader<'_> {
    fn at_end(&self) -> bool {
        self.p >= self.input.len()
    }

    fn byte(&self) -> u8 {
        self.input.get(self.p).copied().unwrap_or(0)
    }

    /// NUM_eat_non_data_chars.
    fn eat_non_data(&mut self, mut n: usize) {
        while n > 0 && !self.at_end() && !b"0123456789.,+-".contains(&self.byte()) {
            self.p += utf8_len(self.byte());
            n -= 1;
        }
    }

    /// NUM_numpart_from_char.
    fn numpart(&mut self, key: Key) {
        if self.at_end() {
            return;
        }
        if self.byte() == b' ' {
            self.p += 1;
        }
        if self.at_end() {
            return;
        }
        let digit_key = matches!(key, Key::Zero | Key::Nine);
        if self.number[0] == b' ' && digit_key && self.read_pre + self.read_post == 0 {
            // With S before the digits, the C locale's signs are - and +,
            // the same bytes the plain signs read.
            let c = self.byte();
            if c == b'-' || (!self.num.is(F_LSIGN) && self.num.is(F_BRACKET) && c == b'<') {
                self.number[0] = b'-';
                self.p += 1;
            } else if c == b'+' {
                self.number[0] = b'+';
                self.p += 1;
            }
        }
        if self.at_end() {
            return;
        }
        let mut read = false;
        let c = self.byte();
        if c.is_ascii_digit() {
            if self.read_dec && self.read_post == self.num.post {
                return;
            }
            self.number.push(c);
            if self.read_dec {
                self.read_post += 1;
            } else {
                self.read_pre += 1;
            }
            read = true;
        } else if self.num.is(F_DECIMAL) && !self.read_dec && c == b'.' {
            self.number.push(b'.');
            self.read_dec = true;
            read = true;
        }
        if self.at_end() {
            return;
        }
        if self.number[0] == b' ' && self.read_pre + self.read_post > 0 {
            if self.num.is(F_LSIGN) && read && self.p + 1 < self.input.len() && !self.input[self.p + 1].is_ascii_digit()
            {
                let next = self.input[self.p + 1];
                if next == b'-' || next == b'+' {
                    self.p += 1;
                    self.number[0] = next;
                }
            } else if !read && !self.num.is(F_LSIGN) && (self.num.is(F_PLUS) || self.num.is(F_MINUS)) {
                let c = self.byte();
                if c == b'-' || c == b'+' {
                    self.number[0] = c;
                }
            }
        }
    }
}

/// to_number(text, template): numeric_to_number. None: an empty template
/// (NULL, as PostgreSQL answers).
pub(super) fn to_number(input: &str, fmt: &str) -> Result<Option<Value>> {
    if fmt.is_empty() {
        return Ok(None);
    }
    let (nodes, num) = parse(fmt)?;
    if num.is(F_EEEE) {
        return Err(SqlError::new("0A000", "\"EEEE\" not supported for input"));
    }
    if num.is(F_ROMAN) {
        return Err(SqlError::new("0A000", "\"RN\" not supported for input"));
    }
    if num.is(F_MULTI) {
        // PostgreSQL scales by a power of ten whose display scale pgtier
        // does not reproduce yet: refused rather than printed differently.
        return Err(SqlError::unsupported("to_number with \"V\""));
    }
    let mut r = Reader {
        num: &num,
        input: input.as_bytes(),
        p: 0,
        number: vec![b' '],
        read_pre: 0,
        read_post: 0,
        read_dec: false,
    };
    for node in &nodes {
        if r.at_end() {
            break;
        }
        let key = match node {
            Node::Char(_) => {
                r.p += utf8_len(r.byte());
                continue;
            }
            Node::Key(key) => *key,
        };
        match key {
            Key::Nine | Key::Zero | Key::Dec | Key::D => r.numpart(key),
            Key::Comma | Key::G => {
                if num.is(F_FILLMODE) || r.byte() != b',' {
                    continue;
                }
            }
            Key::L => {
                r.eat_non_data(1);
                continue;
            }
            Key::ThUpper | Key::ThLower => {
                if num.is(F_DECIMAL) {
                    continue;
                }
                r.eat_non_data(2);
                continue;
            }
            Key::Mi | Key::Pl | Key::Sg => {
                let c = r.byte();
                let wanted = match key {
                    Key::Mi => c == b'-',
                    Key::Pl => c == b'+',
                    _ => c == b'-' || c == b'+',
                };
                if wanted {
                    r.number[0] = c;
                } else {
                    r.eat_non_data(1);
                    continue;
                }
            }
            Key::B
            | Key::C
            | Key::Eeee
            | Key::Fm
            | Key::Pr
            | Key::RnUpper
            | Key::RnLower
            | Key::Sp
            | Key::S
            | Key::V => {
                continue;
            }
        }
        r.p += 1;
    }
    if r.number.last() == Some(&b'.') {
        r.number.pop();
    }
    let text = String::from_utf8_lossy(&r.number).into_owned();
    let scale = r.read_post;
    let precision = num.pre + num.multi + scale;
    let parsed = value::parse_input(&text, pgtier_engine::NUMERIC_UNCONSTRAINED)?;
    let (Ok(precision), Ok(scale)) = (u16::try_from(precision), i16::try_from(scale)) else {
        return Err(SqlError::new("22003", "numeric field overflow"));
    };
    if precision == 0 {
        // numeric(0,0) in PostgreSQL's apply_typmod: only what rounds to 0
        // fits (pgtier's precision 0 means unconstrained).
        let rounded = value::numeric_typmod_value(parsed, 1, 0)?;
        if value::to_text(&rounded) != "0" {
            return Err(SqlError::new("22003", "numeric field overflow")
                .with_detail("A field with precision 0, scale 0 must round to an absolute value less than 1."));
        }
        return Ok(Some(rounded));
    }
    value::numeric_typmod_value(parsed, precision, scale).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn romans_and_ordinals() {
        assert_eq!(roman(1994), "MCMXCIV");
        assert_eq!(roman(3999), "MMMCMXCIX");
        assert_eq!(roman(0), "###############");
        assert_eq!(ordinal(b"11", true).unwrap(), "TH");
        assert_eq!(ordinal(b"22", false).unwrap(), "nd");
    }

    #[test]
    fn scientific_forms() {
        assert_eq!(sci("-123.456", 2), "-1.23e+02");
        assert_eq!(sci("0.000995", 1), "10.0e-04");
        assert_eq!(sci("9.99", 1), "10.0e+00");
        assert_eq!(sci("0", 3), "0.000e+00");
        assert_eq!(c_sci(12345.0, 2), " 1.23e+04");
        assert_eq!(shift_point("-1.2345", 2), "-123.45");
        assert_eq!(shift_point("0.05", 2), "5");
    }
}
