//! `pgtier.analytics`: a SELECT over tables with a columnar copy runs on
//! the analytic executor (exec/columnar) and answers exactly as the row
//! path does. Differential: every query runs with the setting off (the row
//! path, itself checked against PostgreSQL by the slt corpus) and on, on
//! the same data, part of it merged into the copy's chunks and part still
//! in its delta; the answers must be equal as text, row for row.
//!
//! With the `analytics` feature the routed queries must really take the
//! columnar path (EXPLAIN says so and the session's counter moves): a
//! translation that refused everything would otherwise pass. Without it,
//! EXPLAIN names the missing executor and every answer is the row path's.
#![allow(clippy::unwrap_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

fn open(dir: &std::path::Path) -> Connection {
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    Connection::new(Database::open(dir, config).unwrap())
}

fn rows(conn: &mut Connection, sql: &str) -> Vec<String> {
    let res = conn.execute_sql(sql).unwrap_or_else(|e| panic!("{sql}: {} {}", e.sqlstate, e.message));
    let rows = res.rows.unwrap();
    (0..rows.len())
        .map(|i| {
            let r = rows.get(i).unwrap();
            (0..r.len()).map(|c| r.text(c).unwrap_or_else(|| "NULL".into())).collect::<Vec<_>>().join("|")
        })
        .collect()
}

fn explain_first_line(conn: &mut Connection, sql: &str) -> String {
    rows(conn, &format!("EXPLAIN {sql}")).into_iter().next().unwrap_or_default()
}

/// A small TPC-H-like pair of tables with NULLs, char(n), dates, numerics.
fn populate(conn: &mut Connection) {
    for sql in [
        "CREATE TABLE cust (c_id int PRIMARY KEY, c_name varchar(20), c_seg char(10), c_bal numeric(12,2), c_nation int)",
        "CREATE TABLE ord (o_id bigint PRIMARY KEY, o_cust int NOT NULL, o_status char(1), o_total numeric(15,2), \
         o_date date, o_prio text, o_flag boolean, o_qty smallint)",
        "CREATE INDEX ord_cust ON ord (o_cust)",
    ] {
        conn.execute_sql(sql).unwrap();
    }
    let segments = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"];
    for c in 0..300i64 {
        let name = if c % 23 == 0 { "NULL".to_owned() } else { format!("'Customer#{c:05}'") };
        let nation = if c % 17 == 0 { "NULL".to_owned() } else { (c % 25).to_string() };
        conn.execute_sql(&format!(
            "INSERT INTO cust VALUES ({c}, {name}, '{}', {}.{:02}, {nation})",
            segments[(c % 5) as usize],
            (c * 37) % 9000 - 1000,
            (c * 13) % 100
        ))
        .unwrap();
    }
    for o in 0..3000i64 {
        let status = ["F", "O", "P"][(o % 3) as usize];
        let total = if o % 41 == 0 { "NULL".to_owned() } else { format!("{}.{:02}", (o * 7919) % 500_000, o % 100) };
        let date = format!("DATE '1992-01-01' + {}", (o * 17) % 2400);
        let prio = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"][(o % 5) as usize];
        let flag = if o % 7 == 0 {
            "NULL"
        } else if o % 2 == 0 {
            "true"
        } else {
            "false"
        };
        conn.execute_sql(&format!(
            "INSERT INTO ord VALUES ({o}, {}, '{status}', {total}, {date}, '{prio}', {flag}, {})",
            (o * 31) % 320,
            o % 50
        ))
        .unwrap();
    }
}

/// Queries the translation takes (each must run on the columnar path with
/// the feature), all ordered so the answers compare row for row.
const ROUTED: &[&str] = &[
    "SELECT count(*) FROM ord",
    "SELECT o_status, count(*), sum(o_total), avg(o_total), min(o_date), max(o_prio), sum(o_qty), avg(o_qty) \
     FROM ord GROUP BY o_status ORDER BY o_status",
    "SELECT o_prio, sum(o_total * (1 - 0.05)), count(DISTINCT o_cust) FROM ord \
     WHERE o_date >= DATE '1994-01-01' AND o_date < DATE '1995-01-01' GROUP BY o_prio ORDER BY 1",
    "SELECT c_seg, count(*), sum(o_total) FROM cust, ord WHERE c_id = o_cust AND o_flag \
     GROUP BY c_seg HAVING count(*) > 10 ORDER BY 3 DESC NULLS LAST, 1",
    "SELECT c_name, o_id, o_total FROM cust JOIN ord ON c_id = o_cust \
     WHERE c_seg = 'BUILDING' AND o_total > 400000 ORDER BY o_id",
    "SELECT c_id, count(o_id) FROM cust LEFT JOIN ord ON c_id = o_cust AND o_prio LIKE '%URGENT' \
     GROUP BY c_id ORDER BY 2 DESC, 1 LIMIT 15",
    "SELECT cnt, count(*) FROM (SELECT c_id, count(o_id) AS cnt FROM cust LEFT JOIN ord ON c_id = o_cust \
     GROUP BY c_id) AS x GROUP BY cnt ORDER BY 2 DESC, 1",
    "SELECT sum(CASE WHEN o_status = 'F' THEN 1 ELSE 0 END), sum(CASE WHEN o_prio IN ('1-URGENT', '2-HIGH') \
     THEN o_qty END) FROM ord",
    "SELECT o_cust, sum(o_total) FROM ord WHERE o_cust IN (SELECT c_id FROM cust WHERE c_nation = 3) \
     GROUP BY o_cust ORDER BY 1",
    "SELECT count(*) FROM cust WHERE c_bal > (SELECT avg(c_bal) FROM cust)",
    "SELECT c_nation, min(c_name), max(c_bal), count(c_name) FROM cust WHERE c_name NOT LIKE '%7%' \
     GROUP BY c_nation ORDER BY c_nation NULLS FIRST",
    "SELECT o_id FROM ord WHERE o_total IS NULL OR o_flag IS NOT TRUE AND o_qty BETWEEN 10 AND 12 ORDER BY o_id",
    "SELECT coalesce(c_nation, -1) AS n, sum(c_bal) FILTER (WHERE c_bal > 0) FROM cust GROUP BY 1 ORDER BY 1",
    "SELECT DISTINCT o_status, o_flag FROM ord ORDER BY 1, 2",
    "SELECT o_qty * 2 + o_cust, sum(o_total * 2 + 1), count(*) FROM ord \
     WHERE o_date + 30 < DATE '1993-01-01' GROUP BY 1 ORDER BY 1",
    "SELECT extract(year FROM o_date) AS y, substring(o_prio FROM 1 FOR 1), count(*), sum(o_total) FROM ord \
     GROUP BY 1, 2 ORDER BY 1, 2",
    // CASE branches of different numeric scales: each sum takes the
    // largest scale its rows had (0 where no row took the scale-4 branch).
    "SELECT o_status, sum(CASE WHEN o_prio = '1-URGENT' THEN o_total * (1 - 0.05) ELSE 0 END), \
     sum(CASE WHEN o_qty > 1000 THEN o_total ELSE 0 END), avg(CASE WHEN o_flag THEN o_total ELSE 1 END), \
     sum(coalesce(o_total * 2, 0)) FROM ord GROUP BY 1 ORDER BY 1",
    // Correlated subqueries DataFusion decorrelates.
    "SELECT c_id FROM cust WHERE EXISTS (SELECT 1 FROM ord WHERE o_cust = c_id AND o_qty > 45) ORDER BY 1",
    "SELECT c_seg, count(*) FROM cust WHERE NOT EXISTS (SELECT 1 FROM ord WHERE o_cust = c_id AND o_status = 'F' AND o_qty = 7) \
     GROUP BY 1 ORDER BY 1",
    "SELECT o_id FROM ord o WHERE o_total > (SELECT sum(o2.o_total) * 0.1 FROM ord o2 WHERE o2.o_cust = o.o_cust) \
     ORDER BY 1",
    "SELECT c_id, c_bal FROM cust WHERE c_bal < (SELECT min(o_total) FROM ord WHERE o_cust = c_id) - 390000 ORDER BY 1",
    "SELECT c_id FROM cust WHERE c_nation IN (SELECT o_qty FROM ord WHERE o_cust = c_id) ORDER BY 1",
    // Correlated aggregates DataFusion does not compute as pgtier (avg's
    // division): computed per key by pgtier (correlated.rs), TPC-H Q17's shape.
    "SELECT sum(o_total) / 7.0, count(*) FROM ord, cust WHERE c_id = o_cust AND c_seg = 'BUILDING' \
     AND o_total < (SELECT 0.9 * avg(o2.o_total) FROM ord o2 WHERE o2.o_cust = c_id)",
    "SELECT o_id FROM ord o WHERE o_qty < (SELECT 0.2 * avg(o2.o_qty) FROM ord o2 WHERE o2.o_cust = o.o_cust) \
     ORDER BY 1",
    "SELECT o_id, o_total FROM ord o WHERE o_total > (SELECT avg(o2.o_total) + 1 FROM ord o2 \
     WHERE o2.o_cust = o.o_cust AND o2.o_status = o.o_status AND o2.o_flag) ORDER BY 1",
    "SELECT c_id FROM cust WHERE (SELECT avg(o_total) FROM ord WHERE o_cust = c_id AND o_qty = 7) IS NULL ORDER BY 1",
    "SELECT o_id FROM ord o WHERE o_date > (SELECT max(o2.o_date) - 400 FROM ord o2 WHERE o2.o_prio = o.o_prio \
     AND o2.o_cust = o.o_cust) AND o_total * 3 > (SELECT avg(o2.o_total) FROM ord o2 WHERE o2.o_cust = o.o_cust) \
     ORDER BY 1",
    // Integer division and modulo truncate toward zero (CH-benCHmark's
    // mod(s_w_id * s_i_id, 10000)), negative operands and NULLs included.
    "SELECT o_qty % 7, count(*), sum((o_cust - 150) / 7), sum((o_cust - 150) % 7), min(o_qty / 2), \
     sum(mod(o_id, -4)) FROM ord GROUP BY 1 ORDER BY 1",
    "SELECT count(*) FROM ord, cust WHERE c_nation = mod(o_cust * 7, 25) AND o_id / 1000 = 1",
    // A subquery in FROM whose average DataFusion does not compute as
    // pgtier: run first, its rows joined as a side table (side.rs); CH's
    // Q17, then its values (numerics of varying scale) read back.
    "SELECT sum(o_total) / 2.0, count(*) FROM ord, (SELECT o_cust AS k, avg(o_qty) AS a FROM ord GROUP BY o_cust) t \
     WHERE o_cust = t.k AND o_qty < t.a",
    "SELECT c_id, t.a, t.n, t.a * 2, t.b FROM cust, (SELECT o_cust, avg(o_qty) AS a, count(*) AS n, \
     max(o_date) AS d, avg(CASE WHEN o_cust % 3 = 0 THEN o_total ELSE o_qty END) AS b FROM ord WHERE o_flag \
     GROUP BY o_cust) t WHERE c_id = t.o_cust AND t.d > DATE '1993-01-01' ORDER BY 1",
    // HAVING filters the groups inside the analytic query (TPC-H Q11's
    // and Q18's shapes); over an average pgtier finishes, it cannot.
    "SELECT o_cust, sum(o_total) AS v FROM ord GROUP BY o_cust \
     HAVING sum(o_total) > (SELECT sum(o_total) * 0.004 FROM ord) ORDER BY v DESC, 1",
    "SELECT o_cust, count(*), sum(o_qty) FROM ord WHERE o_id IN \
     (SELECT o_id FROM ord GROUP BY o_id HAVING sum(o_qty) > 45) GROUP BY o_cust ORDER BY 1",
    "SELECT o_status, avg(o_total), count(*) FROM ord GROUP BY o_status HAVING avg(o_total) > 240000 \
     AND max(o_qty) > 10 ORDER BY 1",
    // ascii: the first character's code, 0 for '' (CH-benCHmark's ascii(substr(c_state, 1, 1))).
    "SELECT ascii(substr(c_seg, 1, 1)), ascii(c_name), ascii(substr(c_name, 30, 2)), count(*) FROM cust \
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
];

/// Queries the translation refuses: they run on the row path whatever the setting.
const REFUSED: &[(&str, &str)] = &[
    (
        "SELECT c_id FROM cust WHERE c_nation NOT IN (SELECT o_qty FROM ord WHERE o_cust = c_id) ORDER BY 1",
        "correlated",
    ),
    ("SELECT c_id FROM cust WHERE (SELECT count(*) FROM ord WHERE o_cust = c_id) = 0 ORDER BY 1", "correlated"),
    (
        "SELECT c_id FROM cust WHERE (SELECT coalesce(avg(o_total), 0) FROM ord WHERE o_cust = c_id) > 1000 ORDER BY 1",
        "not NULL",
    ),
    (
        "SELECT c_id FROM cust WHERE c_bal < (SELECT avg(o_total) FROM ord WHERE o_cust < c_id) ORDER BY 1",
        "other than equality",
    ),
    ("SELECT count(*) FROM ord FULL JOIN cust ON o_cust = c_id", "FULL JOIN"),
    ("SELECT sum(o_total / 3) FROM ord", "division"),
    ("SELECT sum(o_total % 7) FROM ord", "numeric division"),
    ("SELECT count(*) FROM cust WHERE upper(c_name) LIKE 'C%'", "function upper"),
];

#[test]
fn columnar_answers_equal_the_row_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(dir.path());
    populate(&mut conn);
    conn.execute_sql("ALTER TABLE cust SET ANALYTICS ON").unwrap();
    conn.execute_sql("ALTER TABLE ord SET ANALYTICS ON").unwrap();
    // Changes after the copy was built: some merged by now, some in the delta.
    conn.execute_sql("UPDATE ord SET o_total = o_total + 1.5 WHERE o_id % 10 = 0").unwrap();
    conn.execute_sql("DELETE FROM ord WHERE o_id % 97 = 0").unwrap();
    conn.execute_sql("INSERT INTO cust VALUES (1000, 'late', 'BUILDING', 5.00, NULL)").unwrap();
    conn.execute_sql("INSERT INTO ord VALUES (90000, 1000, 'F', 450000.10, DATE '1994-06-01', '1-URGENT', true, 3)")
        .unwrap();

    let executor = pgtier_olap::OlapEngine::has_executor();
    let (before, _) = conn.columnar_statements();
    for sql in ROUTED {
        conn.execute_sql("SET pgtier.analytics = off").unwrap();
        let row_path = rows(&mut conn, sql);
        assert!(!row_path.is_empty(), "{sql}: no rows, nothing compared");
        conn.execute_sql("SET pgtier.analytics = on").unwrap();
        let plan = explain_first_line(&mut conn, sql);
        if executor {
            assert!(plan.starts_with("Analytics: columnar copy of"), "{sql}: {plan}");
        } else {
            assert!(plan.contains("no analytic executor"), "{sql}: {plan}");
        }
        let columnar = rows(&mut conn, sql);
        assert_eq!(row_path, columnar, "{sql}");
    }
    let (after, fallbacks) = conn.columnar_statements();
    if executor {
        // EXPLAIN names each per-key subquery's values and their query.
        let plan = rows(
            &mut conn,
            "EXPLAIN SELECT o_id FROM ord o WHERE o_qty < (SELECT avg(o2.o_qty) FROM ord o2 WHERE o2.o_cust = o.o_cust) \
             AND o_total > (SELECT avg(o3.o_total) FROM ord o3 WHERE o3.o_status = o.o_status)",
        );
        for side in ["pgtier_side_0", "pgtier_side_1"] {
            assert!(plan.iter().any(|l| l.starts_with(&format!("  Values per key ({side}): SELECT"))), "{plan:?}");
        }
        // A per-key query groups only the keys the enclosing level's own
        // conditions leave (TPC-H Q17: one brand and container's parts).
        let plan = rows(
            &mut conn,
            "EXPLAIN SELECT count(*) FROM ord, cust WHERE c_id = o_cust AND c_seg = 'BUILDING' \
             AND o_total < (SELECT 0.9 * avg(o2.o_total) FROM ord o2 WHERE o2.o_cust = c_id)",
        );
        let per_key = plan.iter().find(|l| l.starts_with("  Values per key")).unwrap();
        assert!(per_key.contains(" IN (SELECT ") && per_key.contains("c_seg"), "{plan:?}");
        let plan = rows(&mut conn, "EXPLAIN SELECT o_id FROM ord GROUP BY o_id HAVING sum(o_qty) > 45");
        assert!(plan[1].contains(" GROUP BY k0 HAVING (CAST(sum(v0) AS BIGINT) > "), "{plan:?}");
        let plan = rows(
            &mut conn,
            "EXPLAIN SELECT count(*) FROM ord, (SELECT o_cust AS k, avg(o_qty) AS a FROM ord GROUP BY o_cust) t \
             WHERE o_cust = t.k AND o_qty < t.a",
        );
        assert!(
            plan.iter()
                .any(|l| l.starts_with("  Rows of a subquery in FROM (pgtier_side_0), its own analytic query: SELECT")),
            "{plan:?}"
        );
        // At least one per query: an uncorrelated subquery runs (and may be routed) on its own.
        assert!((after - before) as usize >= ROUTED.len(), "every routed query answered by the columnar path");
        assert_eq!(fallbacks, 0, "no analytic query failed: {:?}", conn.columnar_last_fallback());
        // A zero divisor fails the analytic query; the row path then
        // raises PostgreSQL's error.
        let zero = "SELECT sum(o_id / (o_qty - o_qty)) FROM ord";
        assert!(explain_first_line(&mut conn, zero).starts_with("Analytics: columnar copy of"));
        let e = conn.execute_sql(zero).map(|_| ()).unwrap_err();
        assert_eq!((e.sqlstate, conn.columnar_statements().1), ("22012", 1), "{}", e.message);
    }
    for (sql, why) in REFUSED {
        let plan = explain_first_line(&mut conn, sql);
        assert!(plan.starts_with("Analytics: row path") && plan.contains(why), "{sql}: {plan}");
        conn.execute_sql("SET pgtier.analytics = off").unwrap();
        let row_path = rows(&mut conn, sql);
        conn.execute_sql("SET pgtier.analytics = on").unwrap();
        assert_eq!(row_path, rows(&mut conn, sql), "{sql}");
    }
    assert_eq!(conn.columnar_statements().0, after, "refused queries stayed on the row path");
}

#[test]
fn auto_routes_only_whole_table_reads_and_never_a_writing_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(dir.path());
    populate(&mut conn);
    conn.execute_sql("ALTER TABLE ord SET ANALYTICS ON").unwrap();
    assert_eq!(rows(&mut conn, "SHOW pgtier.analytics"), ["auto"]);
    let scan = "SELECT o_status, count(*) FROM ord GROUP BY 1 ORDER BY 1";
    // 3,000 rows: below auto's 10,000, the row path scans them.
    assert!(explain_first_line(&mut conn, scan).contains("no table of 10000 rows or more is read whole"));
    conn.execute_sql(
        "INSERT INTO ord SELECT 200000 + g, 1, 'N', 1.00, DATE '2001-01-01', 'x', false, 1 \
         FROM generate_series(1, 8000) AS g",
    )
    .unwrap();
    // auto counts the rows merged into the copy's chunks: the merger folds
    // the delta in within about a second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while explain_first_line(&mut conn, scan).contains("rows or more") {
        assert!(std::time::Instant::now() < deadline, "the 11,000 rows never reached the copy's chunks");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let lookup = "SELECT o_total FROM ord WHERE o_id = 42";
    let executor = pgtier_olap::OlapEngine::has_executor();
    if executor {
        assert!(explain_first_line(&mut conn, scan).starts_with("Analytics: columnar copy of ord"));
    }
    assert!(explain_first_line(&mut conn, lookup).contains("is read whole"));
    // A table without a copy keeps the statement on the row path.
    let join = "SELECT count(*) FROM ord, cust WHERE o_cust = c_id";
    assert!(explain_first_line(&mut conn, join).contains("relation \"cust\" has no columnar copy"));
    conn.execute_sql("SET pgtier.analytics = off").unwrap();
    assert!(explain_first_line(&mut conn, scan).contains("pgtier.analytics is off"));
    conn.execute_sql("SET pgtier.analytics = auto").unwrap();

    // A transaction that wrote reads its own change: the row path.
    let (before, _) = conn.columnar_statements();
    conn.execute_sql("BEGIN").unwrap();
    conn.execute_sql("INSERT INTO ord VALUES (77777, 1, 'Z', 1.00, DATE '2000-01-01', 'x', true, 1)").unwrap();
    assert_eq!(rows(&mut conn, "SELECT count(*) FROM ord WHERE o_status = 'Z'"), ["1"]);
    conn.execute_sql("ROLLBACK").unwrap();
    assert_eq!(conn.columnar_statements().0, before, "the writing transaction's SELECT took the row path");
    assert_eq!(rows(&mut conn, "SELECT count(*) FROM ord WHERE o_status = 'Z'"), ["0"]);
    if executor {
        assert_eq!(conn.columnar_statements().0, before + 1, "a read outside it took the columnar path");
    }

    let e = conn.execute_sql("SET pgtier.analytics = sometimes").unwrap_err();
    assert_eq!(e.sqlstate, "22023");
}

/// Every commit is seen by the next analytic query (never stale).
#[test]
fn each_commit_is_counted_by_the_next_analytic_query() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(dir.path());
    populate(&mut conn);
    conn.execute_sql("ALTER TABLE ord SET ANALYTICS ON").unwrap();
    conn.execute_sql("SET pgtier.analytics = on").unwrap();
    let count = "SELECT count(*), sum(o_qty) FROM ord";
    let mut expected: Vec<String> = rows(&mut conn, count);
    let (before, _) = conn.columnar_statements();
    for i in 0..200i64 {
        conn.execute_sql(&format!(
            "INSERT INTO ord VALUES ({}, 1, 'N', 1.00, DATE '2001-01-01', 'x', false, 2)",
            100_000 + i
        ))
        .unwrap();
        let got = rows(&mut conn, count);
        let (n, q): (i64, i64) = {
            let mut parts = expected[0].split('|').map(|x| x.parse::<i64>().unwrap());
            (parts.next().unwrap(), parts.next().unwrap())
        };
        expected = vec![format!("{}|{}", n + 1, q + 2)];
        assert_eq!(got, expected, "after insert {i}");
    }
    if pgtier_olap::OlapEngine::has_executor() {
        assert_eq!(conn.columnar_statements().0, before + 200);
    }
}
