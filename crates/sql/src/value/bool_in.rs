//! boolin's words: the spellings `boolean` input and boolean settings
//! accept.

/// guc.c's parse_bool (also boolin's, after trimming): on/off, true/false,
/// yes/no, 1/0 and unique prefixes.
pub(crate) fn parse_bool(value: &str) -> Option<bool> {
    let v = value.trim().to_lowercase();
    if v.is_empty() {
        return None;
    }
    let prefix_of = |word: &str| word.starts_with(v.as_str());
    match v.as_str() {
        "1" => Some(true),
        "0" => Some(false),
        "o" => None,
        _ if v.len() >= 2 && prefix_of("on") => Some(true),
        _ if v.len() >= 2 && prefix_of("off") => Some(false),
        _ if prefix_of("true") || prefix_of("yes") => Some(true),
        _ if prefix_of("false") || prefix_of("no") => Some(false),
        _ => None,
    }
}
