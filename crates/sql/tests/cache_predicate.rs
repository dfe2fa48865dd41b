//! A cache group's WHERE evaluated on rows by the SQL layer (what
//! autorefresh asks of it), compared with the same WHERE run as a query
//! over the same rows in a table: both must agree on every row, NULLs included.
#![allow(clippy::unwrap_used)]

use pgtier_cache::PredicateCompiler;
use pgtier_engine::{Database, EngineConfig, Value};
use pgtier_sql::Connection;
use pgtier_sql::cache_predicate::SqlPredicates;

#[test]
fn a_compiled_where_matches_the_rows_a_query_selects() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut conn = Connection::new(db.clone());
    conn.execute_sql("CREATE TABLE subscriber (s_id int PRIMARY KEY, sub_nbr varchar(15), bits smallint, msc text)")
        .unwrap();
    let mut rows = Vec::new();
    for i in 0..60i32 {
        let nbr = if i % 7 == 0 { Value::Null } else { Value::Text(format!("{:015}", i * 13)) };
        let bits = if i % 5 == 0 { Value::Null } else { Value::Int2((i % 4) as i16) };
        let msc = Value::Text(format!("m{}", i % 3));
        conn.execute_sql(&format!(
            "INSERT INTO subscriber VALUES ({i}, {}, {}, '{}')",
            match &nbr {
                Value::Text(t) => format!("'{t}'"),
                _ => "NULL".into(),
            },
            match &bits {
                Value::Int2(b) => b.to_string(),
                _ => "NULL".into(),
            },
            match &msc {
                Value::Text(t) => t.clone(),
                _ => unreachable!(),
            },
        ))
        .unwrap();
        rows.push(vec![Value::Int4(i), nbr, bits, msc]);
    }
    let compiler = SqlPredicates::new(db);
    for predicate in [
        "s_id < 30",
        "subscriber.s_id % 2 = 0 AND bits IS NOT NULL",
        "sub_nbr > '000000000000300' OR msc = 'm1'",
        "bits = 1",
        "NOT (bits = 1)",
        "coalesce(bits, 9) > 2",
    ] {
        let mut test = compiler.compile("subscriber", predicate).unwrap();
        let selected = conn.execute_sql(&format!("SELECT s_id FROM subscriber WHERE {predicate}")).unwrap();
        let selected: Vec<i32> = selected
            .rows
            .unwrap()
            .iter()
            .map(|r| match r.get(0) {
                Some(Value::Int4(v)) => *v,
                v => panic!("{v:?}"),
            })
            .collect();
        let matched: Vec<i32> = rows
            .iter()
            .filter(|row| test.matches(row).unwrap())
            .map(|row| match row[0] {
                Value::Int4(v) => v,
                _ => unreachable!(),
            })
            .collect();
        let mut selected = selected;
        selected.sort();
        assert_eq!(matched, selected, "{predicate}");
        assert!(
            !matched.is_empty() && matched.len() < rows.len(),
            "{predicate}: the data must tell matches from non-matches"
        );
    }
    // A WHERE that does not bind is refused at compile time.
    assert!(compiler.compile("subscriber", "nosuch > 1").is_err());
    // An evaluation error is an error, and the next row is evaluated again.
    let mut dividing = compiler.compile("subscriber", "10 / bits > 1").unwrap();
    let zero = vec![Value::Int4(1), Value::Null, Value::Int2(0), Value::Text("m".into())];
    assert!(dividing.matches(&zero).is_err());
    let four = vec![Value::Int4(1), Value::Null, Value::Int2(4), Value::Text("m".into())];
    assert!(dividing.matches(&four).unwrap());
}
