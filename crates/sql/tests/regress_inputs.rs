//! Findings of scripts/regress_diff.py over PostgreSQL 15's regression
//! inputs that the differential corpus cannot hold, because PostgreSQL
//! answers them: what pgtier now refuses (0A000, naming the construct)
//! instead of answering differently or panicking, and the command tag of
//! RESET (the corpus compares rows, not tags).
#![allow(clippy::unwrap_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

fn connection(dir: &tempfile::TempDir) -> Connection {
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    Connection::new(Database::open(dir.path(), config).unwrap())
}

#[test]
fn refused_instead_of_answered_differently() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connection(&dir);
    conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY, v int)").unwrap();
    for (sql, names) in [
        // aggregates.sql: PostgreSQL aggregates over the outer rows, once (one row of 2).
        (
            "select (select count(*) filter (where outer_c <> 0) from (values (1)) t0(inner_c)) from (values (2),(3)) t1(outer_c)",
            "outer query's columns",
        ),
        (
            "select (select sum(outer_c) from (values (1), (2)) t0(inner_c)) from (values (2),(3)) t1(outer_c)",
            "outer query's columns",
        ),
        // union.sql: rows of no columns (pgtier panicked).
        ("select from generate_series(1,5) union all select from generate_series(1,3)", "no columns"),
        ("select from generate_series(1,5) except all select from generate_series(1,3)", "no columns"),
        ("select * from (select from generate_series(1,3)) s", "no columns"),
        // numeric.sql's NaN, infinities and wide values are answered now (tests/slt/67_numeric_big.slt).
        // arrays.sql: an ARRAY() of int2vector is int2vector[] (pgtier said text[]).
        ("select pg_typeof(array(select '1 2'::int2vector))", "int2vector"),
        ("select array(select indkey from pg_index)", "int2vector"),
        // An ARRAY() of a catalog array column is two-dimensional.
        ("select array(select '{1,2}'::oid[])", "multidimensional"),
        // A cost PostgreSQL would show as %g with an exponent.
        ("SET jit_above_cost = 1e10", "shown differently"),
    ] {
        let e = conn.execute_sql(sql).unwrap_err();
        assert_eq!(e.sqlstate, "0A000", "{sql}: {e:?}");
        assert!(e.message.contains(names), "{sql}: {}", e.message);
    }
    // Still invalid input, as PostgreSQL says.
    for bad in ["'1e'", "'abc'", "'1.2.3'", "''", "'- 1'"] {
        let e = conn.execute_sql(&format!("SELECT {bad}::numeric")).unwrap_err();
        assert_eq!(e.sqlstate, "22P02", "{bad}: {e:?}");
    }
}

#[test]
fn reset_is_tagged_reset() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connection(&dir);
    assert_eq!(conn.execute_sql("SET extra_float_digits = 0").unwrap().tag, "SET");
    assert_eq!(conn.execute_sql("RESET extra_float_digits").unwrap().tag, "RESET");
    assert_eq!(conn.execute_sql("SET enable_hashagg TO DEFAULT").unwrap().tag, "SET");
    assert_eq!(conn.execute_sql("RESET enable_hashagg").unwrap().tag, "RESET");
    // The identity settings too (insert.sql and update.sql's RESET ROLE).
    conn.execute_sql("CREATE ROLE tag_reader").unwrap();
    assert_eq!(conn.execute_sql("SET ROLE tag_reader").unwrap().tag, "SET");
    assert_eq!(conn.execute_sql("RESET ROLE").unwrap().tag, "RESET");
    assert_eq!(conn.execute_sql("SET SESSION AUTHORIZATION tag_reader").unwrap().tag, "SET");
    assert_eq!(conn.execute_sql("RESET SESSION AUTHORIZATION").unwrap().tag, "RESET");
    assert_eq!(conn.execute_sql("SET SESSION AUTHORIZATION DEFAULT").unwrap().tag, "SET");
}
