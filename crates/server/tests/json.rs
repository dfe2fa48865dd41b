//! json and jsonb through a real client, against PostgreSQL: the same rows
//! stored on both read back byte-identical in text form (simple protocol)
//! and binary form (extended protocol: jsonb is a version byte and its
//! text), with the same type OIDs; PostgreSQL's binary values sent back as
//! binary parameters, text parameters, and COPY in binary and text store
//! the same values on both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Raw, binary_rows, text_rows};

const DDL: &str = "CREATE TABLE js (id int PRIMARY KEY, j json, b jsonb, k jsonb UNIQUE)";

const ROWS: &str = r#"INSERT INTO js VALUES
    (1, '{"b": [1,  2], "a" : "x"}', '{"b": [1,  2], "a" : "x", "a": "y"}', '{"k": 1}'),
    (2, '[1.50, 1e2, -0, "\u00e9\n"]', '[1.50, 1e2, -0, "\u00e9\n", 123456789012345678901234567890.5]', '[1, 2]'),
    (3, NULL, NULL, NULL),
    (4, '"s"', 'null', '"k"'),
    (5, ' 7 ', '{}', '1.0')"#;

const SELECT: &str = "SELECT * FROM js ORDER BY id";
const INSERT: &str = "INSERT INTO js VALUES ($1, $2, $3, $4)";

fn both(name: &str) -> (common::TestServer, postgres::Client, postgres::Client) {
    common::both(name, &[DDL, ROWS])
}

#[test]
fn results_match_postgres_in_text_and_binary() {
    let (_srv, mut tier, mut pg) = both("js_results");
    assert_eq!(text_rows(&mut tier, SELECT), text_rows(&mut pg, SELECT), "text form");
    assert_eq!(binary_rows(&mut tier, SELECT), binary_rows(&mut pg, SELECT), "binary form");
    let types = |s: &postgres::Statement| s.columns().iter().map(|c| c.type_().oid()).collect::<Vec<_>>();
    assert_eq!(types(&tier.prepare(SELECT).unwrap()), types(&pg.prepare(SELECT).unwrap()));
    assert_eq!(types(&tier.prepare(SELECT).unwrap())[1..], [114, 3802, 3802]);
    let derived = "SELECT id, j -> 0 AS j0, b -> 'b' AS bb, b ->> 'a' AS ba, b @> '{\"a\": \"y\"}' AS has, jsonb_typeof(b) AS t, \
        jsonb_build_object('id', id, 'b', b) AS o, to_jsonb(id) AS tj FROM js ORDER BY k NULLS FIRST, id";
    assert_eq!(text_rows(&mut tier, derived), text_rows(&mut pg, derived));
    assert_eq!(binary_rows(&mut tier, derived), binary_rows(&mut pg, derived));
    let agg = "SELECT jsonb_agg(b ORDER BY id), json_agg(j ORDER BY id) FROM js";
    assert_eq!(binary_rows(&mut tier, agg), binary_rows(&mut pg, agg));
}

#[test]
fn binary_and_text_parameters_store_what_postgres_stores() {
    let (_srv, mut tier, mut pg) = both("js_params");
    let originals = binary_rows(&mut pg, SELECT);
    for c in [&mut tier, &mut pg] {
        let stmt = c.prepare(INSERT).unwrap();
        for (n, row) in originals.iter().enumerate() {
            let id = Raw((100 + n as i32).to_be_bytes().to_vec());
            // k is UNIQUE: the copies wrap it in an array (jsonb binary: version byte, text).
            let k = row[3].as_ref().map(|r| {
                let mut b = vec![1u8, b'['];
                b.extend_from_slice(&r.0[1..]);
                b.push(b']');
                Raw(b)
            });
            c.execute(&stmt, &[&id, &row[1], &row[2], &k]).unwrap();
        }
        // A jsonb key given as a binary parameter finds its row through the
        // unique index, equal by value (1.0 = 1.00).
        let found = c.query("SELECT id FROM js WHERE k = $1 ORDER BY id", &[&Raw(b"\x011.00".to_vec())]).unwrap();
        assert_eq!(found.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>(), [5]);
        // Text parameters take jsonb_in's forms; a bad one is 22P02.
        let typed =
            c.prepare_typed("SELECT $1::jsonb = b FROM js WHERE id = 1", &[postgres_types::Type::TEXT]).unwrap();
        assert!(c.query_one(&typed, &[&r#"{"a":"y","b":[1,2]}"#]).unwrap().get::<_, bool>(0));
        let e = c.query_one(&typed, &[&"{"]).unwrap_err();
        assert_eq!(e.code().unwrap().code(), "22P02");
        // A jsonb binary parameter of another version is refused.
        let none = None::<Raw>;
        let e = c
            .execute(&stmt, &[&Raw(500i32.to_be_bytes().to_vec()), &none, &Raw(b"\x02{}".to_vec()), &none])
            .unwrap_err();
        assert_eq!(e.code().unwrap().code(), "XX000");
    }
    let copies = "SELECT * FROM js WHERE id >= 100 ORDER BY id";
    assert_eq!(binary_rows(&mut tier, copies), binary_rows(&mut pg, copies));
    assert_eq!(text_rows(&mut tier, copies), text_rows(&mut pg, copies));
}

#[test]
fn copy_binary_and_text_round_trip_like_postgres() {
    let (_srv, mut tier, mut pg) = both("js_copy");
    common::copy_round_trip(&mut tier, &mut pg, "js", 5);
}
