//! Era suffixes of date and timestamp input: `0044-03-15 BC` is
//! astronomical year -43 (PostgreSQL has no year 0).

/// Input without its era suffix (` BC` / ` AD`); true for BC.
pub(super) fn split_era(t: &str) -> (&str, bool) {
    let t = t.trim_end();
    let cut = t.len().saturating_sub(3);
    match (t.get(cut..), t.get(..cut)) {
        (Some(era), Some(rest)) if era.eq_ignore_ascii_case(" bc") => (rest.trim_end(), true),
        (Some(era), Some(rest)) if era.eq_ignore_ascii_case(" ad") => (rest.trim_end(), false),
        _ => (t, false),
    }
}

/// The same month and day in year `1 - y` (year y BC is astronomical 1 - y),
/// for a date parsed as AD; None where that day does not exist (29 February).
pub(super) fn bc_date(days: i32) -> Option<i32> {
    let (y, m, d) = pgtier_engine::civil_from_days(i64::from(days));
    let year = 1 - y;
    // PostgreSQL's oldest date: 4714-11-24 BC.
    if d > super::days_in_month(year, m) || year < -4713 || (year == -4713 && (m, d) < (11, 24)) {
        return None;
    }
    i32::try_from(pgtier_engine::days_from_civil(year, m, d)).ok()
}
