//! Window frames beyond what the differential corpus (tests/slt/68_window_frames.slt)
//! can hold: the refusals of answers that depend on how PostgreSQL's sort
//! orders tied rows (PostgreSQL answers them), the cost of sliding frames
//! (linear where it can be, bounded by statement_timeout where not), and
//! EXPLAIN's frame line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

fn open() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let conn = Connection::new(Database::open(dir.path(), config).unwrap());
    (dir, conn)
}

fn rows(c: &mut Connection, sql: &str) -> Vec<Vec<Option<String>>> {
    let r = c.execute_sql(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    let set = r.rows.expect(sql);
    (0..set.len()).map(|k| (0..set.columns().len()).map(|i| set.get(k).unwrap().text(i)).collect()).collect()
}

const SETUP: &[&str] = &[
    "CREATE TABLE emp (id int PRIMARY KEY, dept text, salary int)",
    "INSERT INTO emp VALUES (1, 'a', 100), (2, 'a', 100), (3, 'a', 200), (4, 'b', 300), (5, 'b', 300), (6, 'b', 300)",
];

/// Statements whose answer depends on the order of peers PostgreSQL's sort
/// leaves them in: pgtier refuses them.
const ORDER_DEPENDENT: &[&str] = &[
    // A ROWS frame over peers that differ (no ORDER BY: all rows are peers).
    "SELECT id, sum(id) OVER (ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM emp",
    "SELECT id, count(*) OVER (ORDER BY salary ROWS 1 PRECEDING) FROM emp",
    "SELECT id, max(id) OVER (PARTITION BY dept ORDER BY salary ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING EXCLUDE CURRENT ROW) FROM emp",
    // first/last/nth_value choosing among peers with different values.
    "SELECT id, first_value(id) OVER (ORDER BY salary RANGE BETWEEN 50 PRECEDING AND UNBOUNDED FOLLOWING) FROM emp",
    "SELECT id, last_value(id) OVER (ORDER BY salary) FROM emp",
    "SELECT id, nth_value(id, 2) OVER (PARTITION BY dept) FROM emp",
    "SELECT id, first_value(id) OVER (ORDER BY salary GROUPS BETWEEN CURRENT ROW AND 1 FOLLOWING EXCLUDE CURRENT ROW) FROM emp",
];

#[test]
fn order_dependent_frames_are_refused_and_postgres_answers() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("window_frames_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    let (_dir, mut c) = open();
    for sql in SETUP {
        pg.simple_query(sql).unwrap();
        c.execute_sql(sql).unwrap();
    }
    for sql in ORDER_DEPENDENT {
        if let Err(e) = pg.simple_query(sql) {
            panic!("PostgreSQL refuses {sql} ({e})");
        }
        let e = c.execute_sql(sql).expect_err(sql);
        assert_eq!(e.sqlstate, "0A000", "{sql}: {e:?}");
        assert!(e.message.contains("order of rows its window's ORDER BY leaves tied"), "{sql}: {}", e.message);
    }
    // Answered: peer-closed frames, peers holding the value chosen, whole-row duplicates.
    for sql in [
        "SELECT id, sum(id) OVER (ORDER BY salary RANGE BETWEEN 100 PRECEDING AND CURRENT ROW EXCLUDE TIES) FROM emp ORDER BY id",
        "SELECT id, first_value(salary) OVER (ORDER BY salary ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), last_value(salary) OVER (ORDER BY salary) FROM emp ORDER BY id",
        "SELECT salary, sum(salary) OVER (ORDER BY salary ROWS 1 PRECEDING) FROM (SELECT salary FROM emp) s ORDER BY 1, 2",
    ] {
        let ours = rows(&mut c, sql);
        let theirs: Vec<Vec<Option<String>>> = pg
            .simple_query(sql)
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
                }
                _ => None,
            })
            .collect();
        assert_eq!(ours, theirs, "{sql}");
    }
}

/// count, sum, min and max over sliding ROWS frames of 200,000 rows: a
/// quadratic evaluation (2e10 steps) would not end within the timeout.
#[test]
fn sliding_frames_are_linear() {
    let (_dir, mut c) = open();
    c.execute_sql("SET statement_timeout = '60s'").unwrap();
    let n: i64 = 200_000;
    let got = rows(
        &mut c,
        &format!(
            "SELECT sum(c), sum(s), sum(lo), sum(hi), sum(a) FROM (SELECT count(*) OVER w AS c, sum(i) OVER w AS s, min(i % 1000) OVER w AS lo, max(i) OVER w AS hi, \
             avg(i) OVER w AS a FROM generate_series(1, {n}) i WINDOW w AS (ORDER BY i ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)) x"
        ),
    );
    // Row i's frame is i..=n.
    let (mut c_sum, mut s_sum, mut lo_sum, mut a_sum) = (0i128, 0i128, 0i128, 0i128);
    for i in 1..=i128::from(n) {
        let len = i128::from(n) - i + 1;
        c_sum += len;
        s_sum += (i + i128::from(n)) * len / 2;
        lo_sum += if len >= 1000 { 0 } else { (i..=i128::from(n)).map(|k| k % 1000).min().unwrap() };
        a_sum += i + i128::from(n);
    }
    let hi_sum = i128::from(n) * i128::from(n);
    let expect = [c_sum.to_string(), s_sum.to_string(), lo_sum.to_string(), hi_sum.to_string()];
    assert_eq!(got[0][..4].iter().map(|v| v.clone().unwrap()).collect::<Vec<_>>(), expect);
    // avg over i..=n is (i + n) / 2: their sum, exactly.
    let avg: f64 = got[0][4].clone().unwrap().parse().unwrap();
    #[allow(clippy::cast_precision_loss)]
    let want = a_sum as f64 / 2.0;
    assert!((avg - want).abs() < 1e-3, "{avg} vs {want}");
    let got = rows(
        &mut c,
        &format!(
            "SELECT sum(s), max(m) FROM (SELECT sum(i::int8) OVER w AS s, max(-i) OVER w AS m FROM generate_series(1, {n}) i WINDOW w AS (ORDER BY i ROWS BETWEEN 100 PRECEDING AND 100 FOLLOWING)) x"
        ),
    );
    let mut total = 0i128;
    for i in 1..=i128::from(n) {
        let (lo, hi) = ((i - 100).max(1), (i + 100).min(i128::from(n)));
        total += (lo + hi) * (hi - lo + 1) / 2;
    }
    assert_eq!(got[0], [Some(total.to_string()), Some("-1".to_owned())]);
}

/// Where the aggregate has no inverse (a float sum restarts from the
/// frame's new head, in PostgreSQL's order), the statement is bounded by
/// statement_timeout like any long loop.
#[test]
fn restarting_aggregates_stop_at_the_timeout() {
    let (_dir, mut c) = open();
    c.execute_sql("SET statement_timeout = '300ms'").unwrap();
    let e = c
        .execute_sql("SELECT sum(s) FROM (SELECT sum(i::float8) OVER (ORDER BY i ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS s FROM generate_series(1, 200000) i) x")
        .expect_err("2e10 additions");
    assert_eq!(e.sqlstate, "57014", "{e:?}");
}

/// The checks that an answer does not depend on the order of peers are
/// linear too: one partition of 200,000 peers holding one value.
#[test]
fn peer_checks_are_linear() {
    let (_dir, mut c) = open();
    c.execute_sql("SET statement_timeout = '60s'").unwrap();
    let got = rows(
        &mut c,
        "SELECT count(*), min(f), max(l) FROM (SELECT first_value(i / 1000000) OVER () AS f, last_value(0) OVER (ORDER BY i / 1000000 RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW) AS l FROM (SELECT i FROM generate_series(1, 200000) i) s) x",
    );
    assert_eq!(got[0], [Some("200000".to_owned()), Some("0".to_owned()), Some("0".to_owned())]);
}
