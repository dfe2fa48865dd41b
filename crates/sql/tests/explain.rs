//! EXPLAIN prints the plan the executor runs: the access path of each
//! table, the join strategy, aggregation, sorting and limits. The checks
//! compare whole plans, and a plan that changes with the schema (an index
//! created, a join key without one) shows the change.

#![allow(clippy::unwrap_used)]

use pgtier_engine::{Database, EngineConfig};
use pgtier_sql::Connection;

fn plan(c: &mut Connection, sql: &str) -> Vec<String> {
    let r = c.execute_sql(&format!("EXPLAIN {sql}")).unwrap();
    assert_eq!(r.tag, "EXPLAIN");
    let rows = r.rows.unwrap();
    assert_eq!(rows.columns()[0].name, "QUERY PLAN");
    (0..rows.len()).map(|k| rows.get(k).unwrap().text(0).unwrap()).collect()
}

fn setup() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut c = Connection::new(db);
    c.execute_sql("CREATE TABLE a (id int PRIMARY KEY, k int, v text)").unwrap();
    c.execute_sql("CREATE TABLE b (id int PRIMARY KEY, a_id int, w int)").unwrap();
    (dir, c)
}

#[test]
fn access_paths_follow_the_schema() {
    let (_dir, mut c) = setup();
    assert_eq!(plan(&mut c, "SELECT v FROM a WHERE id = 1"), ["Primary Key Lookup on a"]);
    assert_eq!(plan(&mut c, "SELECT v FROM a WHERE k = 1"), ["Seq Scan on a", "  Filter: 1 conditions"]);
    c.execute_sql("CREATE INDEX a_k ON a (k)").unwrap();
    assert_eq!(plan(&mut c, "SELECT v FROM a WHERE k = 1"), ["Index Scan using a_k on a (equality on 1 columns)"]);
    assert_eq!(
        plan(&mut c, "SELECT v FROM a WHERE k > 1"),
        ["Index Scan using a_k on a (equality on 0 columns and a range)", "  Filter: 1 conditions"]
    );
    // A constant LIKE prefix is a range of a text index (Django's `_like`
    // index); the LIKE still filters. A leading wildcard, ILIKE or an
    // escape leaves the index unused.
    c.execute_sql("CREATE INDEX a_v_like ON a (v varchar_pattern_ops)").unwrap();
    assert_eq!(
        plan(&mut c, "SELECT id FROM a WHERE v LIKE 'ab%'"),
        ["Index Scan using a_v_like on a (equality on 0 columns and a range)", "  Filter: 1 conditions"]
    );
    for sql in [
        "SELECT id FROM a WHERE v LIKE '%b'",
        "SELECT id FROM a WHERE v ILIKE 'ab%'",
        r"SELECT id FROM a WHERE v LIKE 'a\%%'",
    ] {
        assert_eq!(plan(&mut c, sql), ["Seq Scan on a", "  Filter: 1 conditions"], "{sql}");
    }
}

#[test]
fn joins_aggregates_sorts_and_limits() {
    let (_dir, mut c) = setup();
    // b.a_id has no index: the inner side is read once into a hash table
    // (the join condition is still checked on each match).
    assert_eq!(
        plan(&mut c, "SELECT a.v, b.w FROM a JOIN b ON b.a_id = a.id"),
        [
            "Hash Join",
            "  Hash Keys: 1",
            "  Past pgtier.statement_mem: sorted by key in a temporary file",
            "  ->  Seq Scan on a",
            "  ->  Seq Scan on b",
            "        Filter: 1 conditions"
        ]
    );
    // Its primary key: a lookup per outer row.
    assert_eq!(
        plan(&mut c, "SELECT a.v, b.w FROM b LEFT JOIN a ON a.id = b.a_id"),
        ["Nested Loop Left Join", "  ->  Seq Scan on b", "  ->  Primary Key Lookup on a"]
    );
    assert_eq!(
        plan(&mut c, "SELECT k, count(*) FROM a GROUP BY k ORDER BY 2 DESC LIMIT 3"),
        [
            "Limit",
            "  ->  Sort",
            "        Sort Keys: 1",
            "        ->  HashAggregate",
            "              Group Keys: 1",
            "              Aggregates: 1",
            "              ->  Seq Scan on a"
        ]
    );
    assert_eq!(
        plan(&mut c, "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT n FROM t"),
        [
            "CTE Scan on t",
            "  ->  Recursive Union All",
            "        ->  Result",
            "        ->  WorkTable Scan on t",
            "              Filter: 1 conditions",
        ]
    );
}

#[test]
fn writes_and_refusals() {
    let (_dir, mut c) = setup();
    assert_eq!(
        plan(&mut c, "INSERT INTO a VALUES (1, 2, 'x'), (2, 3, 'y')"),
        ["Insert on a", "  ->  Values Scan (2 rows)"]
    );
    assert_eq!(plan(&mut c, "UPDATE a SET v = 'z' WHERE id = 1"), ["Update on a", "  ->  Primary Key Lookup on a"]);
    assert_eq!(
        plan(&mut c, "DELETE FROM b WHERE w > 5"),
        ["Delete on b", "  ->  Seq Scan on b", "        Filter: 1 conditions"]
    );
    // Joined writes show their join; the target here is the outer level.
    assert_eq!(
        plan(&mut c, "UPDATE a SET v = 'z' FROM b WHERE b.a_id = a.id"),
        [
            "Update on a",
            "  ->  Hash Join",
            "        Hash Keys: 1",
            "        Past pgtier.statement_mem: sorted by key in a temporary file",
            "        ->  Seq Scan on a",
            "        ->  Seq Scan on b",
            "              Filter: 1 conditions"
        ]
    );
    assert_eq!(
        plan(&mut c, "MERGE INTO a USING b ON a.id = b.a_id WHEN MATCHED THEN DELETE")[..2],
        ["Merge on a", "  WHEN MATCHED clauses: 1, WHEN NOT MATCHED clauses: 0"]
    );
    // EXPLAIN does not run the statement.
    assert_eq!(
        c.execute_sql("SELECT count(*) FROM a").unwrap().rows.unwrap().get(0).unwrap().text(0).as_deref(),
        Some("0")
    );
    for refused in
        ["EXPLAIN ANALYZE SELECT 1", "EXPLAIN (FORMAT JSON) SELECT 1", "EXPLAIN CREATE TABLE c (id int PRIMARY KEY)"]
    {
        assert_eq!(c.execute_sql(refused).unwrap_err().sqlstate, "0A000", "{refused}");
    }
    assert_eq!(plan(&mut c, "SELECT 1")[0], "Result");
}

/// TPC-H Q19's shape (the join key inside each arm of an OR) and Q13's (a
/// LEFT JOIN whose ON adds a filter to its key) hash on the key: factored
/// out of the OR, or taken from the ON's AND-ed parts. Before, both were
/// nested loops with every row pair through the whole condition.
#[test]
fn or_arms_and_filtered_outer_joins_hash() {
    let (_dir, mut c) = setup();
    c.execute_sql("CREATE TABLE l (id int PRIMARY KEY, pk int, q int, mode text)").unwrap();
    c.execute_sql("CREATE TABLE p (id int PRIMARY KEY, pk int, brand text, size int)").unwrap();
    let q19 = "SELECT sum(l.q) FROM l, p WHERE \
        (p.pk = l.pk AND p.brand = 'b1' AND l.q < 5 AND l.mode IN ('AIR', 'RAIL')) \
        OR (p.pk = l.pk AND p.brand = 'b2' AND l.q >= 5 AND l.mode IN ('AIR', 'RAIL')) \
        OR (p.pk = l.pk AND p.size IS NULL AND l.mode IN ('AIR', 'RAIL'))";
    assert_eq!(
        plan(&mut c, q19),
        [
            "Aggregate",
            "  Aggregates: 1",
            "  ->  Hash Join",
            "        Hash Keys: 1",
            "        Past pgtier.statement_mem: sorted by key in a temporary file",
            "        ->  Seq Scan on l",
            // The factored `l.mode IN (...)`.
            "              Filter: 1 conditions",
            "        ->  Seq Scan on p",
            // The key's equality and the rest of the OR.
            "              Filter: 2 conditions",
        ]
    );
    // The same OR in a LEFT JOIN's ON.
    assert_eq!(
        plan(
            &mut c,
            "SELECT l.id, p.id FROM l LEFT JOIN p ON (p.pk = l.pk AND p.size > 3) OR (p.pk = l.pk AND l.q = 1)"
        )[0],
        "Hash Join Left Join"
    );
    // Q13: the ON's filter on the nullable side stays a filter of that side.
    let q13 = "SELECT p.id, count(l.id) FROM p LEFT OUTER JOIN l ON p.pk = l.pk AND l.mode NOT LIKE '%special%requests%' \
        GROUP BY p.id";
    assert_eq!(
        plan(&mut c, q13),
        [
            "HashAggregate",
            "  Group Keys: 1",
            "  Aggregates: 1",
            "  ->  Hash Join Left Join",
            "        Hash Keys: 1",
            "        Past pgtier.statement_mem: sorted by key in a temporary file",
            "        ->  Seq Scan on p",
            "        ->  Seq Scan on l",
            "              Filter: 2 conditions",
        ]
    );
    // Every outer join kind, the filter on either side.
    for (sql, kind) in [
        ("SELECT 1 FROM p LEFT JOIN l ON p.pk = l.pk AND p.size > 1", "Hash Join Left Join"),
        ("SELECT 1 FROM p RIGHT JOIN l ON p.pk = l.pk AND p.size > 1", "Hash Join Left Join"),
        ("SELECT 1 FROM p FULL JOIN l ON p.pk = l.pk AND l.q > 1", "Hash Join Full Join"),
        ("SELECT 1 FROM p JOIN l ON p.pk = l.pk AND l.q > 1 AND p.size > 1", "Hash Join"),
    ] {
        assert_eq!(plan(&mut c, sql)[0], kind, "{sql}");
    }
    // No key common to every arm: still a nested loop.
    assert_eq!(
        plan(&mut c, "SELECT 1 FROM l, p WHERE (p.pk = l.pk AND l.q = 1) OR (p.size = l.q AND l.q = 2)")[..3],
        ["Nested Loop", "  ->  Seq Scan on l", "  ->  Seq Scan on p"]
    );
}

#[test]
fn window_frames_show_when_not_the_default() {
    let (_dir, mut c) = setup();
    // The default frame (RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) is not shown.
    assert_eq!(
        plan(
            &mut c,
            "SELECT sum(k) OVER (ORDER BY id), rank() OVER w FROM a WINDOW w AS (ORDER BY k RANGE UNBOUNDED PRECEDING)"
        ),
        ["WindowAgg", "  Window Functions: 2", "  ->  Seq Scan on a"]
    );
    // Each distinct frame once, in the calls' order; offsets as written constants.
    assert_eq!(
        plan(
            &mut c,
            "SELECT sum(k) OVER w, max(k) OVER w, first_value(v) OVER (ORDER BY k RANGE BETWEEN 2 PRECEDING AND '3' FOLLOWING EXCLUDE TIES), \
             count(*) OVER (ORDER BY k GROUPS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING EXCLUDE GROUP) \
             FROM a WINDOW w AS (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) ORDER BY 1"
        ),
        [
            "Sort",
            "  Sort Keys: 1",
            "  ->  WindowAgg",
            "        Window Functions: 4",
            "        Frame: ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW",
            "        Frame: RANGE BETWEEN 2 PRECEDING AND 3 FOLLOWING EXCLUDE TIES",
            "        Frame: GROUPS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING EXCLUDE GROUP",
            "        ->  Seq Scan on a",
        ]
    );
    assert_eq!(
        plan(
            &mut c,
            "SELECT count(*) OVER (ORDER BY (id::text || ' days')::interval RANGE BETWEEN '1 day' PRECEDING AND (SELECT interval '1 hour') FOLLOWING) FROM a"
        )[2],
        "  Frame: RANGE BETWEEN '1 day'::interval PRECEDING AND (expression) FOLLOWING"
    );
}

/// Inner joins of tables with rows are read in the order of least
/// estimated work: the small, filtered relation first, then along the
/// join keys (TPC-H Q7, Q21); the order written when the tables are tiny,
/// or when a join is an outer one.
#[test]
fn inner_joins_are_ordered_by_estimated_size() {
    let (_dir, mut c) = setup();
    c.execute_sql("CREATE TABLE region (r_id int PRIMARY KEY, name text)").unwrap();
    let sql = "SELECT count(*) FROM b, a, region WHERE b.a_id = a.id AND a.k = region.r_id AND region.name = 'x'";
    let written = [
        "Aggregate",
        "  Aggregates: 1",
        "  ->  Nested Loop",
        "        ->  Nested Loop",
        "              ->  Seq Scan on b",
        "              ->  Primary Key Lookup on a",
        "        ->  Primary Key Lookup on region",
        "              Filter: 1 conditions",
    ];
    // Empty tables: as written.
    assert_eq!(plan(&mut c, sql), written);
    c.execute_sql("INSERT INTO region SELECT g, 'r' || g FROM generate_series(1, 5) g").unwrap();
    c.execute_sql("INSERT INTO a SELECT g, g % 5 + 1, 'v' FROM generate_series(1, 1000) g").unwrap();
    c.execute_sql("INSERT INTO b SELECT g, g % 1000 + 1, g FROM generate_series(1, 20000) g").unwrap();
    // region (5 rows, a filter) first, then a by its key into region,
    // then b by its key into a, each hashed.
    assert_eq!(
        plan(&mut c, sql),
        [
            "Aggregate",
            "  Aggregates: 1",
            "  ->  Hash Join",
            "        Hash Keys: 1",
            "        Past pgtier.statement_mem: sorted by key in a temporary file",
            "        ->  Hash Join",
            "              Hash Keys: 1",
            "              Past pgtier.statement_mem: sorted by key in a temporary file",
            "              ->  Seq Scan on region",
            "                    Filter: 1 conditions",
            "              ->  Seq Scan on a",
            "                    Filter: 1 conditions",
            "        ->  Seq Scan on b",
            "              Filter: 1 conditions",
        ]
    );
    // The same answer either way.
    let count = |c: &mut Connection, sql: &str| {
        c.execute_sql(sql).unwrap().rows.unwrap().get(0).unwrap().text(0).unwrap().to_owned()
    };
    assert_eq!(count(&mut c, sql), "0");
    assert_eq!(count(&mut c, &sql.replace("region.name = 'x'", "region.name = 'r2'")), "4000");
    // Written with JOIN ... ON: the same order.
    let on = "SELECT count(*) FROM b JOIN a ON b.a_id = a.id JOIN region ON a.k = region.r_id WHERE region.name = 'x'";
    assert_eq!(plan(&mut c, on)[8], "              ->  Seq Scan on region");
    // An outer join keeps the order written.
    let left = "SELECT count(*) FROM b JOIN a ON b.a_id = a.id LEFT JOIN region ON a.k = region.r_id WHERE b.w > 0";
    assert_eq!(plan(&mut c, left)[4], "              ->  Seq Scan on b");
}

/// TPC-H Q10's shape: a join on the leading column of a relation's primary
/// key is an index probe, not a scan of all of it, so the estimate must not
/// start from a scan of the largest table (li) to avoid one.
#[test]
fn a_join_on_a_key_prefix_is_costed_as_probes() {
    let (_dir, mut c) = setup();
    for sql in [
        "CREATE TABLE cu (id int PRIMARY KEY, name text)",
        "CREATE TABLE ord (id int PRIMARY KEY, cu_id int, d int)",
        "CREATE TABLE li (o_id int, n int, flag text, PRIMARY KEY (o_id, n))",
        "INSERT INTO cu SELECT g, 'c' || g FROM generate_series(1, 1500) g",
        "INSERT INTO ord SELECT g, g % 1500 + 1, g % 100 FROM generate_series(1, 15000) g",
        "INSERT INTO li SELECT g / 4 + 1, g % 4, CASE WHEN g % 3 = 0 THEN 'R' ELSE 'N' END FROM generate_series(0, 59999) g",
    ] {
        c.execute_sql(sql).unwrap();
    }
    let sql = "SELECT count(*) FROM cu, ord, li \
               WHERE cu.id = ord.cu_id AND li.o_id = ord.id AND ord.d >= 10 AND ord.d < 14 AND li.flag = 'R'";
    let lines = plan(&mut c, sql);
    let first_leaf = lines.iter().find(|l| l.contains(" on ")).unwrap();
    assert!(!first_leaf.contains(" on li"), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("Index Scan using li_pkey on li")), "{lines:?}");
    let n = c.execute_sql(sql).unwrap().rows.unwrap().get(0).unwrap().text(0).unwrap().to_owned();
    assert_eq!(n, "800");
}

/// A WITH query read twice is materialized, as PostgreSQL does: one run
/// per statement (TPC-H Q15's revenue0); read once, or NOT MATERIALIZED,
/// it stays a subquery.
#[test]
fn a_with_query_read_twice_runs_once() {
    let (_dir, mut c) = setup();
    let twice = "WITH t AS (SELECT k, count(*) AS n FROM a GROUP BY k) \
                 SELECT b.id FROM b, t WHERE b.a_id = t.k AND t.n = (SELECT max(n) FROM t)";
    assert!(
        plan(&mut c, twice).iter().any(|l| l.trim_start().starts_with("->  CTE Scan on t")),
        "{:?}",
        plan(&mut c, twice)
    );
    let once = "WITH t AS (SELECT k, count(*) AS n FROM a GROUP BY k) SELECT b.id FROM b, t AS u WHERE b.a_id = u.k";
    assert!(plan(&mut c, once).iter().any(|l| l.contains("Subquery Scan on t")), "{:?}", plan(&mut c, once));
    let not_mat = twice.replace("t AS (", "t AS NOT MATERIALIZED (");
    assert!(!plan(&mut c, &not_mat).iter().any(|l| l.contains("CTE Scan")), "{:?}", plan(&mut c, &not_mat));
}

/// CH-benCHmark Q2's shape: a subquery in FROM (computed once per
/// statement) no longer pins the order written, where supplier came second
/// with nothing joining it to item: a cross join of every item kept with
/// every supplier. Reordered, supplier is probed by its key through the
/// expression `mod(s_w * s_i, 1000) = su_id` once stock is read.
#[test]
fn a_subquery_in_from_joins_in_the_estimated_order() {
    let (_dir, mut c) = setup();
    for sql in [
        "CREATE TABLE item (i_id int PRIMARY KEY, data text)",
        "CREATE TABLE supplier (su_id int PRIMARY KEY, name text)",
        "CREATE TABLE stock (s_w int, s_i int, q int, PRIMARY KEY (s_w, s_i))",
        "INSERT INTO item SELECT g, CASE WHEN g % 5 = 0 THEN 'xb' ELSE 'xa' END FROM generate_series(1, 2000) g",
        "INSERT INTO supplier SELECT g, 's' || g FROM generate_series(0, 999) g",
        "INSERT INTO stock SELECT w, g, (g * 7 + w) % 13 FROM generate_series(1, 2000) g, generate_series(1, 2) w",
    ] {
        c.execute_sql(sql).unwrap();
    }
    let sql = "SELECT count(*) FROM item, supplier, stock, \
               (SELECT s_i AS m_i, min(q) AS m_q FROM stock GROUP BY s_i) m \
               WHERE i_id = s_i AND mod(s_w * s_i, 1000) = su_id AND i_id = m_i AND q = m_q AND data LIKE '%b'";
    let lines = plan(&mut c, sql);
    assert!(lines.iter().any(|l| l.contains("Primary Key Lookup on supplier")), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("Seq Scan on supplier")), "{lines:?}");
    let count = |c: &mut Connection, sql: &str| {
        c.execute_sql(sql).unwrap().rows.unwrap().get(0).unwrap().text(0).unwrap().to_owned()
    };
    let reordered = count(&mut c, sql);
    let correlated = "SELECT count(*) FROM stock s, item, supplier \
                      WHERE i_id = s.s_i AND mod(s.s_w * s.s_i, 1000) = su_id AND data LIKE '%b' \
                      AND s.q = (SELECT min(q) FROM stock t WHERE t.s_i = s.s_i)";
    assert_eq!(reordered, count(&mut c, correlated));
    assert_ne!(reordered, "0");
}
