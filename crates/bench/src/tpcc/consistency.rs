//! The consistency conditions of TPC-C 3.3.2, checked on a target after a
//! run (and after population): 3.3.2.1 to 3.3.2.4 as the spec states them,
//! and 3.3.2.8 / 3.3.2.9 (W_YTD and D_YTD equal the history's payments),
//! which hold from population on because D_YTD starts as one 10.00
//! payment per customer.
//!
//! The aggregates are computed by the target in plain GROUP BY queries
//! (text results, exact decimals) and compared here, so a target that
//! sums wrongly fails a check rather than hides it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::random::parse_decimal;
use crate::target::{DbError, Target, TextRow};

/// One condition on one target: passed, or every violation found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// "3.3.2.1" ...
    pub clause: String,
    pub condition: String,
    /// Warehouses or districts examined.
    pub examined: usize,
    /// What was wrong, one line per warehouse or district (empty: passed).
    pub violations: Vec<String>,
}

impl Check {
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.examined > 0
    }
}

/// Violations listed per check at most (the count is always given).
const VIOLATIONS_SHOWN: usize = 10;

type Key = (i64, i64);

fn parse_int(v: &Option<String>) -> Result<i64, DbError> {
    v.as_deref()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| DbError::new(None, format!("expected an integer, got {v:?}")))
}

fn parse_cents(v: &Option<String>) -> Result<i64, DbError> {
    v.as_deref()
        .and_then(|s| parse_decimal(s, 2))
        .ok_or_else(|| DbError::new(None, format!("expected a decimal of scale 2, got {v:?}")))
}

fn col(row: &TextRow, i: usize) -> &Option<String> {
    static NONE: Option<String> = None;
    row.get(i).unwrap_or(&NONE)
}

/// Rows of `sql` keyed by (warehouse, district) from the first two columns
/// (district 0 when `per_district` is false), values parsed by `f`.
fn keyed<T>(
    session: &mut dyn crate::target::Session,
    sql: &str,
    per_district: bool,
    f: impl Fn(&TextRow, usize) -> Result<T, DbError>,
) -> Result<BTreeMap<Key, T>, DbError> {
    let mut out = BTreeMap::new();
    for row in session.simple_query(sql)? {
        let w = parse_int(col(&row, 0))?;
        let (d, rest) = if per_district { (parse_int(col(&row, 1))?, 2) } else { (0, 1) };
        out.insert((w, d), f(&row, rest)?);
    }
    Ok(out)
}

fn check(clause: &str, condition: &str, examined: usize, mut violations: Vec<String>) -> Check {
    let n = violations.len();
    if n > VIOLATIONS_SHOWN {
        violations.truncate(VIOLATIONS_SHOWN);
        violations.push(format!("... {} more", n - VIOLATIONS_SHOWN));
    }
    Check { clause: clause.to_owned(), condition: condition.to_owned(), examined, violations }
}

fn cents(c: i64) -> String {
    super::random::decimal(c, 2)
}

/// Runs the checks on `target`; an error only when a query fails.
pub fn run_checks(target: &dyn Target) -> Result<Vec<Check>, DbError> {
    let mut s = target.connect()?;
    let s = s.as_mut();
    let w_ytd = keyed(s, "SELECT w_id, w_ytd FROM warehouse", false, |r, i| parse_cents(col(r, i)))?;
    let d_sum =
        keyed(s, "SELECT d_w_id, sum(d_ytd) FROM district GROUP BY d_w_id", false, |r, i| parse_cents(col(r, i)))?;
    let district = keyed(s, "SELECT d_w_id, d_id, d_next_o_id, d_ytd FROM district", true, |r, i| {
        Ok((parse_int(col(r, i))?, parse_cents(col(r, i + 1))?))
    })?;
    let orders = keyed(
        s,
        "SELECT o_w_id, o_d_id, max(o_id), sum(o_ol_cnt) FROM orders GROUP BY o_w_id, o_d_id",
        true,
        |r, i| Ok((parse_int(col(r, i))?, parse_int(col(r, i + 1))?)),
    )?;
    let new_order = keyed(
        s,
        "SELECT no_w_id, no_d_id, max(no_o_id), min(no_o_id), count(*) FROM new_order GROUP BY no_w_id, no_d_id",
        true,
        |r, i| Ok((parse_int(col(r, i))?, parse_int(col(r, i + 1))?, parse_int(col(r, i + 2))?)),
    )?;
    let lines =
        keyed(s, "SELECT ol_w_id, ol_d_id, count(*) FROM order_line GROUP BY ol_w_id, ol_d_id", true, |r, i| {
            parse_int(col(r, i))
        })?;
    let h_w =
        keyed(s, "SELECT h_w_id, sum(h_amount) FROM history GROUP BY h_w_id", false, |r, i| parse_cents(col(r, i)))?;
    let h_d = keyed(s, "SELECT h_w_id, h_d_id, sum(h_amount) FROM history GROUP BY h_w_id, h_d_id", true, |r, i| {
        parse_cents(col(r, i))
    })?;

    let mut checks = Vec::new();
    let mut v = Vec::new();
    for (&(w, _), &ytd) in &w_ytd {
        match d_sum.get(&(w, 0)) {
            Some(&sum) if sum == ytd => {}
            sum => v.push(format!(
                "warehouse {w}: W_YTD {} <> sum(D_YTD) {}",
                cents(ytd),
                sum.map_or("none".into(), |s| cents(*s))
            )),
        }
    }
    checks.push(check("3.3.2.1", "W_YTD = sum(D_YTD) per warehouse", w_ytd.len(), v));

    let mut v = Vec::new();
    for (&(w, d), &(next, _)) in &district {
        let max_o = orders.get(&(w, d)).map(|o| o.0);
        let max_no = new_order.get(&(w, d)).map(|n| n.0);
        if max_o != Some(next - 1) || max_no.is_some_and(|m| m != next - 1) {
            v.push(format!(
                "warehouse {w} district {d}: D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o:?}, max(NO_O_ID) = {max_no:?}",
                next - 1
            ));
        }
    }
    checks.push(check("3.3.2.2", "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) per district", district.len(), v));

    let mut v = Vec::new();
    for (&(w, d), &(max, min, count)) in &new_order {
        if max - min + 1 != count {
            v.push(format!(
                "warehouse {w} district {d}: max(NO_O_ID) - min(NO_O_ID) + 1 = {} but {count} rows",
                max - min + 1
            ));
        }
    }
    checks.push(check(
        "3.3.2.3",
        "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in new_order per district",
        new_order.len(),
        v,
    ));

    let mut v = Vec::new();
    for (&(w, d), &(_, ol_cnt)) in &orders {
        let count = lines.get(&(w, d)).copied().unwrap_or(0);
        if ol_cnt != count {
            v.push(format!("warehouse {w} district {d}: sum(O_OL_CNT) = {ol_cnt} but {count} order lines"));
        }
    }
    checks.push(check("3.3.2.4", "sum(O_OL_CNT) = rows in order_line per district", orders.len(), v));

    let mut v = Vec::new();
    for (&(w, _), &ytd) in &w_ytd {
        let paid = h_w.get(&(w, 0)).copied().unwrap_or(0);
        if paid != ytd {
            v.push(format!("warehouse {w}: W_YTD {} <> sum(H_AMOUNT) {}", cents(ytd), cents(paid)));
        }
    }
    checks.push(check("3.3.2.8", "W_YTD = sum(H_AMOUNT) per warehouse", w_ytd.len(), v));

    let mut v = Vec::new();
    for (&(w, d), &(_, ytd)) in &district {
        let paid = h_d.get(&(w, d)).copied().unwrap_or(0);
        if paid != ytd {
            v.push(format!("warehouse {w} district {d}: D_YTD {} <> sum(H_AMOUNT) {}", cents(ytd), cents(paid)));
        }
    }
    checks.push(check("3.3.2.9", "D_YTD = sum(H_AMOUNT) per district", district.len(), v));
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_with_nothing_examined_fails() {
        assert!(!check("x", "y", 0, Vec::new()).passed());
        assert!(check("x", "y", 1, Vec::new()).passed());
        let many = check("x", "y", 20, (0..15).map(|i| i.to_string()).collect());
        assert!(!many.passed());
        assert_eq!(many.violations.len(), VIOLATIONS_SHOWN + 1);
        assert_eq!(many.violations[VIOLATIONS_SHOWN], "... 5 more");
    }
}
