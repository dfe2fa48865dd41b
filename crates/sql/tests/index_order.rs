//! ORDER BY served by an index's key order (`SelectPlan::index_ordered`):
//! a single IndexScan level whose rows come in the ORDER BY's order is not
//! sorted, and a LIMIT stops the scan (TPC-C Delivery's `ORDER BY no_o_id
//! LIMIT 1` within a district). Each answer is checked against the same
//! query with the sort forced (`+ 0` hides the column from the rule), on
//! data inserted out of key order, with deletes, and inside a transaction
//! that wrote into the range itself.

#![allow(clippy::unwrap_used)]

use pgtier_engine::{Database, EngineConfig};
use pgtier_sql::Connection;

fn rows(c: &mut Connection, sql: &str) -> Vec<String> {
    let r = c.execute_sql(sql).unwrap_or_else(|e| panic!("{sql}: {} {}", e.sqlstate, e.message));
    let rows = r.rows.unwrap();
    (0..rows.len())
        .map(|i| {
            let row = rows.get(i).unwrap();
            (0..row.len()).map(|k| row.text(k).unwrap_or_else(|| "NULL".into())).collect::<Vec<_>>().join("|")
        })
        .collect()
}

fn setup() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut c = Connection::new(db);
    c.execute_sql("CREATE TABLE q (w int, d int, o int, v text, n int, PRIMARY KEY (w, d, o))").unwrap();
    c.execute_sql("CREATE INDEX q_n ON q (n)").unwrap();
    // Keys inserted in a scrambled order, so insertion order is not key order.
    for i in 0..600i64 {
        let o = (i * 373) % 600;
        let n = if i % 7 == 0 { "NULL".to_owned() } else { ((i * 11) % 50).to_string() };
        c.execute_sql(&format!("INSERT INTO q VALUES ({}, {}, {o}, 'v{i}', {n})", 1 + i % 2, i % 3)).unwrap();
    }
    c.execute_sql("DELETE FROM q WHERE o % 5 = 0").unwrap();
    (dir, c)
}

/// Queries the rule takes, each with its forced-sort twin.
const ORDERED: &[(&str, &str)] = &[
    (
        "SELECT o FROM q WHERE w = 1 AND d = 2 ORDER BY o LIMIT 1",
        "SELECT o FROM q WHERE w = 1 AND d = 2 ORDER BY o + 0 LIMIT 1",
    ),
    (
        "SELECT o, v FROM q WHERE w = 2 AND d = 0 ORDER BY o LIMIT 7 OFFSET 3",
        "SELECT o, v FROM q WHERE w = 2 AND d = 0 ORDER BY o + 0 LIMIT 7 OFFSET 3",
    ),
    (
        "SELECT w, d, o FROM q WHERE w = 1 AND d = 1 AND o > 200 ORDER BY w, d, o LIMIT 5",
        "SELECT w, d, o FROM q WHERE w = 1 AND d = 1 AND o > 200 ORDER BY w + 0, d + 0, o + 0 LIMIT 5",
    ),
    (
        "SELECT d, o FROM q WHERE w = 2 ORDER BY d, o LIMIT 12",
        "SELECT d, o FROM q WHERE w = 2 ORDER BY d + 0, o + 0 LIMIT 12",
    ),
    (
        "SELECT o FROM q WHERE w = 1 AND d = 0 AND v LIKE 'v1%' ORDER BY o",
        "SELECT o FROM q WHERE w = 1 AND d = 0 AND v LIKE 'v1%' ORDER BY o + 0",
    ),
];

/// Queries it refuses: their plans keep the Sort.
const SORTED: &[&str] = &[
    "SELECT o FROM q WHERE w = 1 AND d = 2 ORDER BY o DESC LIMIT 1",
    "SELECT o FROM q WHERE w = 1 AND d = 2 ORDER BY o NULLS FIRST LIMIT 1",
    "SELECT o FROM q WHERE w = 1 ORDER BY o LIMIT 3",
    "SELECT n FROM q WHERE n > 10 ORDER BY n LIMIT 3",
    "SELECT o FROM q WHERE w = 1 AND d = 2 ORDER BY v LIMIT 1",
    "SELECT DISTINCT o FROM q WHERE w = 1 AND d = 2 ORDER BY o LIMIT 1",
    "SELECT o FROM q WHERE w = 1 AND d = 2 ORDER BY o FETCH FIRST 1 ROWS WITH TIES",
];

fn has_sort(c: &mut Connection, sql: &str) -> bool {
    rows(c, &format!("EXPLAIN {sql}")).iter().any(|l| l.trim_start().trim_start_matches("->").trim() == "Sort")
}

fn check(c: &mut Connection) {
    for (sql, forced) in ORDERED {
        assert!(!has_sort(c, sql), "{sql}: sorted");
        assert!(has_sort(c, forced), "{forced}: not sorted");
        let (got, want) = (rows(c, sql), rows(c, forced));
        assert!(!want.is_empty(), "{forced}: no rows, nothing compared");
        assert_eq!(got, want, "{sql}");
    }
    for sql in SORTED {
        assert!(has_sort(c, sql), "{sql}: not sorted");
    }
}

#[test]
fn an_index_in_order_by_order_is_not_sorted_and_answers_as_a_sort() {
    let (_dir, mut c) = setup();
    check(&mut c);
    // The transaction's own writes in the range, below and among the
    // committed keys, and a delete of the lowest: the scan still goes in
    // key order.
    c.execute_sql("BEGIN").unwrap();
    c.execute_sql("INSERT INTO q VALUES (1, 2, -5, 'own', 1), (1, 2, 5, 'own', 1), (2, 0, 1000, 'own', 1)").unwrap();
    c.execute_sql("DELETE FROM q WHERE w = 2 AND d = 0 AND o = (SELECT min(o) FROM q WHERE w = 2 AND d = 0)").unwrap();
    c.execute_sql("UPDATE q SET v = 'moved' WHERE w = 1 AND d = 1 AND o > 300").unwrap();
    assert_eq!(rows(&mut c, ORDERED[0].0), ["-5"]);
    check(&mut c);
    c.execute_sql("ROLLBACK").unwrap();
    check(&mut c);
}

/// The scan stops at the LIMIT: the select list is evaluated for the rows
/// returned only, as under PostgreSQL's Limit over an Index Scan (a
/// sequence advanced once, not once per row of the district).
#[test]
fn a_limit_stops_the_index_scan() {
    let (_dir, mut c) = setup();
    c.execute_sql("CREATE SEQUENCE s").unwrap();
    let oldest = rows(&mut c, "SELECT min(o) FROM q WHERE w = 1 AND d = 2").remove(0);
    assert_eq!(
        rows(&mut c, "SELECT o, nextval('s') FROM q WHERE w = 1 AND d = 2 ORDER BY o LIMIT 1"),
        [format!("{oldest}|1")]
    );
    assert_eq!(rows(&mut c, "SELECT currval('s')"), ["1"]);
    // The same query sorted evaluates it for every row it sorts.
    rows(&mut c, "SELECT o, nextval('s') FROM q WHERE w = 1 AND d = 2 ORDER BY o + 0 LIMIT 1");
    let advanced: i64 = rows(&mut c, "SELECT currval('s')")[0].parse().unwrap();
    assert!(advanced > 50, "{advanced}");
}
