//! Every engine type, text and binary, compared with PostgreSQL: the same
//! table and rows on a private PostgreSQL and on the server; results read
//! in text form (simple protocol) and binary form (extended protocol) must
//! be byte-identical, with the same type OIDs and modifiers; binary
//! parameters taken from PostgreSQL's output must store the same values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Raw, binary_rows, text_rows};

const DDL: &str = "CREATE TABLE all_types (id int PRIMARY KEY, c_int2 smallint, c_int4 integer, c_int8 bigint, \
    c_num numeric(12,4), c_real real, c_double double precision, c_text text, c_varchar varchar(10), c_char char(5), \
    c_bool boolean, c_date date, c_ts timestamp, c_bytea bytea)";

const ROWS: &str = "INSERT INTO all_types VALUES \
    (1, 1, 2, 3, 1.5, 1.5, 2.25, 'text', 'varchar', 'ch', true, '2024-02-29', '2024-02-29 12:34:56.789', '\\x00ff10'), \
    (2, -32768, -2147483648, -9223372036854775808, -12345678.1234, -0.1, '1e-300', '', 'x', 'abcde', false, '1999-12-31', '2000-01-01 00:00:00', '\\x'), \
    (3, 32767, 2147483647, 9223372036854775807, 0, '3.4e38', '1.7976931348623157e308', 'tab\there \"q\" \\ é', 'ünï', 'a b', NULL, '0001-01-01', '1970-01-01 00:00:00.000001', NULL), \
    (4, NULL, NULL, NULL, 0.0001, 'NaN', '-Infinity', NULL, NULL, NULL, NULL, NULL, NULL, NULL), \
    (5, 0, 0, 0, 99999999.9999, '1e-7', 123456789012345.6, 'x', 'y', 'z', true, '2262-04-11', '2262-04-11 23:47:16.854775', '\\xdeadbeef')";

const SELECT: &str = "SELECT * FROM all_types ORDER BY id";

#[test]
fn text_and_binary_results_match_postgres() {
    let srv = common::start();
    let mut tier = srv.client();
    let mut pg = common::postgres("types_results");
    for c in [&mut tier, &mut pg] {
        c.batch_execute(DDL).unwrap();
        c.batch_execute(ROWS).unwrap();
    }
    assert_eq!(text_rows(&mut tier, SELECT), text_rows(&mut pg, SELECT), "text form");
    assert_eq!(binary_rows(&mut tier, SELECT), binary_rows(&mut pg, SELECT), "binary form");
    // Same column types (OID) in RowDescription.
    let t = tier.prepare(SELECT).unwrap();
    let p = pg.prepare(SELECT).unwrap();
    let types = |s: &postgres::Statement| {
        s.columns().iter().map(|c| (c.name().to_owned(), c.type_().oid())).collect::<Vec<_>>()
    };
    assert_eq!(types(&t), types(&p));
    // Expressions over every type, too (computed values, not stored ones).
    let expr = "SELECT c_int2 + 1, c_int4 * 2, c_int8 - 1, c_num * 2, c_double / 2, upper(c_text), c_date, length(c_char) FROM all_types WHERE id IN (1, 5) ORDER BY id";
    assert_eq!(text_rows(&mut tier, expr), text_rows(&mut pg, expr));
    assert_eq!(binary_rows(&mut tier, expr), binary_rows(&mut pg, expr));
}

#[test]
fn binary_parameters_store_what_postgres_stores() {
    let srv = common::start();
    let mut tier = srv.client();
    let mut pg = common::postgres("types_params");
    for c in [&mut tier, &mut pg] {
        c.batch_execute(DDL).unwrap();
        c.batch_execute(ROWS).unwrap();
    }
    // PostgreSQL's binary values go back in as binary parameters (numeric,
    // date, timestamp and bytea in their send formats) to both servers.
    let originals = binary_rows(&mut pg, SELECT);
    let insert = "INSERT INTO all_types VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";
    for c in [&mut tier, &mut pg] {
        let stmt = c.prepare(insert).unwrap();
        for (n, row) in originals.iter().enumerate() {
            let id = Raw((100 + n as i32).to_be_bytes().to_vec());
            let mut params: Vec<&(dyn postgres_types::ToSql + Sync)> = vec![&id];
            params.extend(row[1..].iter().map(|v| v as &(dyn postgres_types::ToSql + Sync)));
            c.execute(&stmt, &params).unwrap();
        }
    }
    let copies = "SELECT * FROM all_types WHERE id >= 100 ORDER BY id";
    assert_eq!(binary_rows(&mut tier, copies), binary_rows(&mut pg, copies));
    assert_eq!(text_rows(&mut tier, copies), text_rows(&mut pg, copies));
}

#[test]
fn typed_parameters_are_cast_to_the_inferred_type() {
    let srv = common::start();
    let mut tier = srv.client();
    tier.batch_execute("CREATE TABLE k (id int PRIMARY KEY, v bigint)").unwrap();
    // The client declares int8 for an int4 column: decoded as int8, cast.
    let stmt = tier
        .prepare_typed("INSERT INTO k VALUES ($1, $2)", &[postgres_types::Type::INT8, postgres_types::Type::INT2])
        .unwrap();
    tier.execute(&stmt, &[&7i64, &5i16]).unwrap();
    let e = tier.execute(&stmt, &[&(i64::from(i32::MAX) + 1), &5i16]).unwrap_err();
    assert_eq!(e.code().unwrap().code(), "22003");
    let row = tier.query_one("SELECT id, v FROM k", &[]).unwrap();
    assert_eq!((row.get::<_, i32>(0), row.get::<_, i64>(1)), (7, 5));
}
