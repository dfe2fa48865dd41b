//! Function calls PostgreSQL answers and pgtier refuses: each must be
//! 0A000 naming what is not implemented (never a different answer), and
//! PostgreSQL must really answer it (else the case belongs in the
//! differential corpus, tests/slt). Run against the private PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

/// (statement, words the refusal names)
const REFUSED: &[(&str, &str)] = &[
    // Regular expressions: ARE constructs without an exact Rust counterpart.
    (r"SELECT 'aa' ~ '(a)\1'", "backreferences"),
    ("SELECT 'ab' ~ 'a(?=b)'", "lookaround"),
    ("SELECT 'ab' ~ 'a(?!c)'", "lookaround"),
    ("SELECT 'ab' ~ 'a+?'", "non-greedy"),
    ("SELECT 'ab' ~ 'a{1,2}?'", "non-greedy"),
    ("SELECT 'ab' ~ '(?i)A'", "embedded options"),
    ("SELECT 'ab' ~ '***=a'", "director"),
    ("SELECT 'ab' ~ '***:a'", "director"),
    (r"SELECT 'x' ~ '\x78'", r"escape \x"),
    (r"SELECT 'x y' ~ '\mx'", r"escape \m"),
    ("SELECT 'a' ~ '[[.a.]]'", "collating elements"),
    ("SELECT 'a' ~ '[[=a=]]'", "collating elements"),
    ("SELECT 'a' ~* '[[:upper:]]'", "[:upper:]"),
    ("SELECT 'a{' ~ 'a{'", "bound"),
    ("SELECT regexp_replace('foo', 'o', 'x', 'n')", "option \"n\""),
    ("SELECT regexp_replace('foo', 'o', 'x', 'x')", "option \"x\""),
    (r"SELECT regexp_replace('foo', '(o)\1', 'x')", "backreferences"),
    // Rust's first alternative and PostgreSQL's longest match would capture differently.
    (r"SELECT regexp_replace('abcd', '(a|ab)(c|bcd)', '\1')", "alternation"),
    ("SELECT regexp_match('abc', '(x)?b')", "quantified group"),
    ("SELECT regexp_match('abcd', '(a|ab)(c|bcd)')", "alternation"),
    ("SELECT regexp_matches('abc', 'b')", "regexp_matches"),
    // regexp_count/instr/substr, regexp_split_to_array and regexp_replace's
    // start position are implemented now (tests/slt/64_regress_regexp*.slt); with captures
    // under a quantified group they still refuse.
    ("SELECT regexp_instr('foo', 'foo(bar)?', 1, 1, 0, '', 1)", "quantified group"),
    ("SELECT substring('a' FROM '((a))+')", "quantified group"),
    // to_char / to_timestamp templates beyond the common ones.
    // (to_char's other patterns are answered: tests/slt/99_to_char_datetime.slt.)
    ("SELECT to_char(timestamp '2024-01-01', 'TMMonth')", "\"TM\""),
    ("SELECT to_timestamp('2020 12', 'YYYY DDD')", "\"DDD\" in to_timestamp"),
    ("SELECT to_timestamp('2020 1st', 'YYYY DDth')", "suffix \"TH\" in to_timestamp"),
    // to_char of a float, and to_number scaled by V (its display scale).
    ("SELECT to_number('12', '9V9')", "\"V\""),
    ("SELECT to_char(1.5::float8, '9.9')", "floating-point"),
    ("SELECT to_timestamp('2005 527', 'IYYY IDDD')", "\"IYYY\""),
    ("SELECT to_timestamp('1997 AD 11 16', 'YYYY BC MM DD')", "\"BC\""),
    ("SELECT to_date('1 4 1902', 'Q MM YYYY')", "\"Q\""),
    ("SELECT to_timestamp('97/Feb/16', 'FXYY:Mon:DD')", "\"FX\""),
    // json functions pgtier does not have, and set-returning json
    // functions in a select list with FROM.
    ("SELECT jsonb_path_query_first('{\"a\":1}', '$.keyvalue()')", ".keyvalue()"),
    ("SELECT jsonb_path_query_first('\"2020-01-01\"', '$.datetime()')", ".datetime()"),
    ("SELECT jsonb_path_query_first('[\"a\\nb\"]', '$[*] ? (@ like_regex \"a.b\")')", "newline"),
    ("SELECT jsonb_path_exists('{}', '$.a ? (@ == 1)'::jsonpath)", "jsonpath"),
    ("SELECT jsonb_path_query(j, '$[*]') FROM (SELECT '[1,2]'::jsonb AS j) t", "jsonb_path_query"),
    ("SELECT array_to_json('{1,2}'::int[], true)", "array_to_json with pretty line feeds"),
    ("SELECT jsonb_delete('{\"a\": 1, \"b\": 2}', 'a', 'b')", "jsonb_delete of several keys"),
    ("SELECT jsonb_array_elements(j) FROM (SELECT '[1,2]'::jsonb AS j) t", "jsonb_array_elements"),
];

#[test]
fn refused_functions_name_themselves_and_postgres_answers() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("function_refusals_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let mut conn = Connection::new(Database::open(dir.path(), config).unwrap());
    for (sql, names) in REFUSED {
        if let Err(e) = pg.simple_query(sql) {
            panic!("PostgreSQL refuses {sql} ({e}): it belongs in tests/slt");
        }
        let e = conn.execute_sql(sql).expect_err(sql);
        assert_eq!(e.sqlstate, "0A000", "{sql}: {e:?}");
        assert!(e.message.contains(names), "{sql}: {}", e.message);
    }
}
