//! Simple and extended query protocol through the `postgres` crate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[test]
fn simple_and_extended_round_trip() {
    let srv = common::start();
    let mut c = srv.client();
    c.batch_execute("CREATE TABLE t (id int PRIMARY KEY, name text, score numeric(10,2)); INSERT INTO t VALUES (1, 'a', 1.5), (2, 'b', NULL)").unwrap();
    let rows = c.simple_query("SELECT id, name FROM t ORDER BY id").unwrap();
    let texts: Vec<String> = rows
        .iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => Some(format!("{}:{}", r.get(0).unwrap(), r.get(1).unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["1:a", "2:b"]);
    let stmt = c.prepare("SELECT name FROM t WHERE id = $1").unwrap();
    let row = c.query_one(&stmt, &[&2i32]).unwrap();
    assert_eq!(row.get::<_, String>(0), "b");
    let n = c.execute("UPDATE t SET name = $1 WHERE id = $2", &[&"z", &1i32]).unwrap();
    assert_eq!(n, 1);
    let row = c.query_one("SELECT name, id FROM t WHERE id = 1", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), "z");
    assert_eq!(row.get::<_, i32>(1), 1);
}

#[test]
fn errors_carry_sqlstate_and_aborted_block() {
    let srv = common::start();
    let mut c = srv.client();
    c.batch_execute("CREATE TABLE u (id int PRIMARY KEY)").unwrap();
    c.batch_execute("INSERT INTO u VALUES (1)").unwrap();
    let e = c.batch_execute("INSERT INTO u VALUES (1)").unwrap_err();
    assert_eq!(e.code().unwrap().code(), "23505");
    let mut tx = c.transaction().unwrap();
    let e = tx.execute("SELECT * FROM nope", &[]).unwrap_err();
    assert_eq!(e.code().unwrap().code(), "42P01");
    let e = tx.execute("SELECT 1", &[]).unwrap_err();
    assert_eq!(e.code().unwrap().code(), "25P02");
    tx.rollback().unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM u", &[]).unwrap().get::<_, i64>(0), 1);
}
