//! numeric input pgtier refuses rather than calls invalid: the text is
//! valid for PostgreSQL's numeric_in, but pgtier's numeric cannot hold it.

use crate::error::SqlError;

/// Why PostgreSQL's numeric_in takes text parse_numeric does not: NaN, the
/// infinities, or more digits than pgtier's 38 (refused, 0A000, instead of
/// being called invalid input). None: the text is invalid for PostgreSQL too.
pub(super) fn refusal(t: &str) -> Option<SqlError> {
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.strip_prefix(['+', '-']).unwrap_or(&lower);
    if lower == "nan" || unsigned == "infinity" || unsigned == "inf" {
        return Some(SqlError::unsupported("NaN or infinity in numeric"));
    }
    let (mantissa, exp) = unsigned.split_once('e').unwrap_or((unsigned, "0"));
    let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let well_formed = !(int_part.is_empty() && frac.is_empty()) && digits(int_part) && digits(frac) && !exp.is_empty() && digits(exp);
    well_formed.then(|| SqlError::unsupported(format!("numeric value {t} (more than 38 digits)")))
}
