//! uuid, time, timestamp(p) and interval through a real client, against PostgreSQL: the same rows
//! stored on both must read back byte-identical in text form (simple
//! protocol) and binary form (extended protocol), with the same type OIDs;
//! PostgreSQL's binary values sent back as binary parameters, and COPY in
//! binary and text, must store the same values on both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Raw, binary_rows, text_rows};

const DDL: &str = "CREATE TABLE nt (id int PRIMARY KEY, u uuid, k uuid UNIQUE, t time, tp time(2), ts timestamp(3), tz timestamptz(0), iv interval)";

const ROWS: &str = "INSERT INTO nt VALUES \
    (1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{00000000-0000-0000-0000-000000000001}', '04:05:06.789', '04:05:06.789', \
        '2024-02-29 12:34:56.78951', '2024-02-29 12:34:56.5+00', '1 year 2 mons -3 days 04:05:06.789'), \
    (2, 'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF', '80000000-0000-0000-0000-000000000000', '24:00:00', '23:59:59.999', \
        '1999-12-31 23:59:59.9995', '1999-12-31 23:59:59.5+00', '-1 days +02:00'), \
    (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL), \
    (4, '00000000-0000-0000-0000-000000000000', '7fffffff-ffff-ffff-ffff-ffffffffffff', '00:00', '00:00:00.001', \
        '2000-01-01 00:00:00', '2000-01-01 00:00:00.4+00', '00:00')";

const SELECT: &str = "SELECT * FROM nt ORDER BY id";
const INSERT: &str = "INSERT INTO nt VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

fn both(name: &str) -> (common::TestServer, postgres::Client, postgres::Client) {
    common::both(name, &[DDL, ROWS])
}

#[test]
fn results_match_postgres_in_text_and_binary() {
    let (_srv, mut tier, mut pg) = both("nt_results");
    assert_eq!(text_rows(&mut tier, SELECT), text_rows(&mut pg, SELECT), "text form");
    assert_eq!(binary_rows(&mut tier, SELECT), binary_rows(&mut pg, SELECT), "binary form");
    let types = |s: &postgres::Statement| s.columns().iter().map(|c| c.type_().oid()).collect::<Vec<_>>();
    assert_eq!(types(&tier.prepare(SELECT).unwrap()), types(&pg.prepare(SELECT).unwrap()));
    assert_eq!(types(&tier.prepare(SELECT).unwrap())[1..], [2950, 2950, 1083, 1083, 1114, 1184, 1186]);
    // RowDescription's type modifiers are the columns' precisions.
    let modifiers =
        "SELECT attname, atttypmod FROM pg_attribute WHERE attrelid = 'nt'::regclass AND attnum > 0 ORDER BY attnum";
    assert_eq!(text_rows(&mut tier, modifiers), text_rows(&mut pg, modifiers));
    let ordered = "SELECT u, k, t FROM nt ORDER BY k NULLS FIRST";
    assert_eq!(binary_rows(&mut tier, ordered), binary_rows(&mut pg, ordered));
    let ordered = "SELECT t, tp, t::time(0) AS t0, ts::time AS tt, date '2024-01-01' + t AS dt FROM nt ORDER BY t, id";
    assert_eq!(binary_rows(&mut tier, ordered), binary_rows(&mut pg, ordered));
    let ordered = "SELECT iv, -iv AS neg, ts + iv AS later, ts - timestamp '2000-01-01' AS since, t - time '01:00' AS dt FROM nt ORDER BY iv, id";
    assert_eq!(text_rows(&mut tier, ordered), text_rows(&mut pg, ordered));
    assert_eq!(binary_rows(&mut tier, ordered), binary_rows(&mut pg, ordered));
}

#[test]
fn binary_and_text_parameters_store_what_postgres_stores() {
    let (_srv, mut tier, mut pg) = both("nt_params");
    let originals = binary_rows(&mut pg, SELECT);
    for c in [&mut tier, &mut pg] {
        let stmt = c.prepare(INSERT).unwrap();
        for (n, row) in originals.iter().enumerate() {
            let id = Raw((100 + n as i32).to_be_bytes().to_vec());
            // k is UNIQUE: the copies get another key, given in binary too.
            let k = row[2].as_ref().map(|r| Raw(r.0.iter().map(|b| b ^ 0x5a).collect()));
            c.execute(&stmt, &[&id, &row[1], &k, &row[3], &row[4], &row[5], &row[6], &row[7]]).unwrap();
        }
        // A key given as a binary parameter finds the row (index lookup).
        let found = c.query("SELECT id FROM nt WHERE u = $1 ORDER BY id", &[&originals[0][1]]).unwrap();
        assert_eq!(found.len(), 2);
        // Text-format parameters take uuid_in's forms; a bad one is 22P02.
        let typed = c.prepare_typed("SELECT $1::uuid = u FROM nt WHERE id = 1", &[postgres_types::Type::TEXT]).unwrap();
        assert!(c.query_one(&typed, &[&"{A0EEBC99-9C0B4EF8-BB6D6BB9-BD380A11}"]).unwrap().get::<_, bool>(0));
        let e = c.query_one(&typed, &[&"a0eebc99"]).unwrap_err();
        assert_eq!(e.code().unwrap().code(), "22P02");
        // A binary uuid parameter with bytes left over is 22P03 (uuid_recv).
        let none = None::<Raw>;
        let e = c
            .execute(
                &stmt,
                &[&Raw(500i32.to_be_bytes().to_vec()), &Raw(vec![1; 17]), &none, &none, &none, &none, &none, &none],
            )
            .unwrap_err();
        assert_eq!(e.code().unwrap().code(), "22P03");
        // A time in binary: microseconds since midnight; text takes time_in's forms.
        let noon = Raw((12i64 * 3_600_000_000).to_be_bytes().to_vec());
        let found = c.query("SELECT id FROM nt WHERE t < $1 ORDER BY id", &[&noon]).unwrap();
        assert_eq!(found.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>(), [1, 4, 100, 103]);
        let typed = c.prepare_typed("SELECT $1::time(1)", &[postgres_types::Type::TEXT]).unwrap();
        let row = c.query_one(&typed, &[&"04:05:06.75 PM"]).unwrap();
        assert_eq!(
            row.get::<_, Raw>(0),
            Raw((((16i64 * 60 + 5) * 60 + 6) * 1_000_000 + 800_000).to_be_bytes().to_vec())
        );
    }
    let copies = "SELECT * FROM nt WHERE id >= 100 ORDER BY id";
    assert_eq!(binary_rows(&mut tier, copies), binary_rows(&mut pg, copies));
    assert_eq!(text_rows(&mut tier, copies), text_rows(&mut pg, copies));
}

#[test]
fn copy_binary_and_text_round_trip_like_postgres() {
    let (_srv, mut tier, mut pg) = both("nt_copy");
    common::copy_round_trip(&mut tier, &mut pg, "nt", 4);
}
