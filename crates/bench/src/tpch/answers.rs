//! Comparing a target's answer with PostgreSQL's, value for value in text
//! form.
//!
//! The order of rows counts only where the query's ORDER BY decides it:
//! the sequence of ORDER BY values (the query's `order_columns`) must be
//! the same row for row, and within each run of tied rows (equal ORDER BY
//! values) the rows are compared as multisets. A query of one row has no
//! order to check. At a LIMIT cut, the rows tied with the last row may be
//! any of the tied rows of the full result, so when an answer has exactly
//! LIMIT rows its last tie group is compared on the ORDER BY values only.

use std::fmt::Write;

use crate::target::TextRow;

/// Longest text of one row in a difference report (bounds the report).
const ROW_TEXT_MAX: usize = 300;

/// PostgreSQL's `psql`-like rendering of a row: values joined by `|`,
/// NULL as `NULL`, cut to [`ROW_TEXT_MAX`] characters.
pub fn row_text(row: &TextRow) -> String {
    let mut out = String::new();
    for (i, v) in row.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        match v {
            Some(s) => out.push_str(s),
            None => out.push_str("NULL"),
        }
    }
    if out.chars().count() > ROW_TEXT_MAX {
        out = out.chars().take(ROW_TEXT_MAX).collect();
        out.push('…');
    }
    out
}

fn key<'a>(row: &'a TextRow, order_columns: &[usize]) -> Vec<Option<&'a str>> {
    order_columns.iter().map(|&i| row.get(i).and_then(|v| v.as_deref())).collect()
}

/// `None` when `got` is the same answer as `reference`; otherwise one line
/// naming the first difference (row number counted from 1 in the answer's
/// order, PostgreSQL's row and the target's).
pub fn compare(
    reference: &[TextRow],
    got: &[TextRow],
    order_columns: &[usize],
    limit: Option<usize>,
) -> Option<String> {
    if let Some(i) = reference.iter().zip(got).position(|(r, g)| r.len() != g.len()) {
        return Some(format!(
            "row {}: {} columns, PostgreSQL has {}: {} vs PostgreSQL {}",
            i + 1,
            got[i].len(),
            reference[i].len(),
            row_text(&got[i]),
            row_text(&reference[i])
        ));
    }
    // The ORDER BY values, row for row.
    for (i, (r, g)) in reference.iter().zip(got).enumerate() {
        if key(r, order_columns) != key(g, order_columns) {
            return Some(format!(
                "row {} (ORDER BY values differ): {} vs PostgreSQL {}",
                i + 1,
                row_text(g),
                row_text(r)
            ));
        }
    }
    if reference.len() != got.len() {
        let n = reference.len().min(got.len());
        let (extra, whose) = if got.len() > n { (&got[n], "the target") } else { (&reference[n], "PostgreSQL") };
        return Some(format!(
            "{} rows, PostgreSQL has {}; first row only {whose} has (row {}): {}",
            got.len(),
            reference.len(),
            n + 1,
            row_text(extra)
        ));
    }
    // Tie groups: the same ORDER BY values, any order within.
    let cut = limit.is_some_and(|l| got.len() == l);
    let mut start = 0;
    while start < got.len() {
        let k = key(&reference[start], order_columns);
        let end = start + reference[start..].iter().take_while(|r| key(r, order_columns) == k).count();
        let last_group_at_cut = cut && end == got.len();
        if !last_group_at_cut && let Some(d) = compare_group(&reference[start..end], &got[start..end], start) {
            return Some(d);
        }
        start = end;
    }
    None
}

/// Rows `start+1..` of both answers as multisets.
fn compare_group(reference: &[TextRow], got: &[TextRow], start: usize) -> Option<String> {
    if reference == got {
        return None;
    }
    let mut r: Vec<&TextRow> = reference.iter().collect();
    let mut g: Vec<&TextRow> = got.iter().collect();
    r.sort();
    g.sort();
    let i = r.iter().zip(&g).position(|(a, b)| a != b)?;
    // The first row (in the target's order) PostgreSQL does not have.
    let missing = got.iter().position(|row| !reference.contains(row)).map_or(g[i], |p| &got[p]);
    let row = got.iter().position(|row| row == missing).map_or(start + 1, |p| start + p + 1);
    let mut line = format!("row {row}: {}; PostgreSQL has instead", row_text(missing));
    let absent = reference.iter().find(|row| !got.contains(row)).unwrap_or(r[i]);
    let _ = write!(line, " {}", row_text(absent));
    if reference.len() > 1 {
        let _ =
            write!(line, " (rows {}-{} tie on ORDER BY, compared in any order)", start + 1, start + reference.len());
    }
    Some(line)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rows(rows: &[&[&str]]) -> Vec<TextRow> {
        rows.iter()
            .map(|r| r.iter().map(|v| if *v == "NULL" { None } else { Some((*v).to_owned()) }).collect())
            .collect()
    }

    #[test]
    fn identical_answers() {
        let a = rows(&[&["A", "1.00"], &["B", "2.50"]]);
        assert_eq!(compare(&a, &a.clone(), &[0], None), None);
        assert_eq!(compare(&[], &[], &[], None), None);
    }

    #[test]
    fn text_is_compared_exactly() {
        let a = rows(&[&["1.50"]]);
        let b = rows(&[&["1.5"]]);
        let d = compare(&a, &b, &[], None).unwrap();
        assert!(d.contains("row 1") && d.contains("1.5") && d.contains("1.50"), "{d}");
        assert!(compare(&rows(&[&["NULL"]]), &rows(&[&[""]]), &[], None).is_some(), "NULL is not ''");
    }

    #[test]
    fn order_is_checked_where_the_order_by_decides() {
        let a = rows(&[&["1", "x"], &["2", "y"]]);
        let b = rows(&[&["2", "y"], &["1", "x"]]);
        let d = compare(&a, &b, &[0], None).unwrap();
        assert!(d.starts_with("row 1 (ORDER BY"), "{d}");
        // No ORDER BY column: a multiset.
        assert_eq!(compare(&a, &b, &[], None), None);
    }

    #[test]
    fn ties_compare_in_any_order_but_not_any_content() {
        let a = rows(&[&["9", "a"], &["5", "b"], &["5", "c"], &["1", "d"]]);
        let b = rows(&[&["9", "a"], &["5", "c"], &["5", "b"], &["1", "d"]]);
        assert_eq!(compare(&a, &b, &[0], None), None);
        let c = rows(&[&["9", "a"], &["5", "c"], &["5", "x"], &["1", "d"]]);
        let d = compare(&a, &c, &[0], None).unwrap();
        assert!(d.contains("row 3: 5|x") && d.contains("5|b"), "{d}");
    }

    #[test]
    fn row_counts_differ() {
        let a = rows(&[&["1"], &["2"]]);
        let b = rows(&[&["1"]]);
        let d = compare(&a, &b, &[0], None).unwrap();
        assert!(d.contains("1 rows, PostgreSQL has 2") && d.contains("(row 2): 2"), "{d}");
        let d = compare(&b, &a, &[0], None).unwrap();
        assert!(d.contains("only the target has"), "{d}");
    }

    #[test]
    fn a_tie_at_the_limit_cut_compares_order_values_only() {
        let a = rows(&[&["9", "a"], &["5", "b"]]);
        let b = rows(&[&["9", "a"], &["5", "z"]]);
        assert_eq!(compare(&a, &b, &[0], Some(2)), None);
        assert!(compare(&a, &b, &[0], Some(3)).is_some(), "not at the cut: a real difference");
        assert!(compare(&a, &b, &[0], None).is_some());
    }
}
