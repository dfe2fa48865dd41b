//! Arrays through a real client, against PostgreSQL: the same rows read
//! back identical in text form (simple protocol) and binary form (extended
//! protocol, array_send), with the same type OIDs; `= ANY($1)` with a
//! binary int4[] / int8[] / text[] parameter (what drivers send for "id in
//! list") and its parameter type; PostgreSQL's binary arrays sent back as
//! parameters, and COPY in binary and text, store the same values on both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Raw, binary_rows, text_rows};
use postgres_types::Type;

const DDL: &str = "CREATE TABLE arr (id int PRIMARY KEY, big bigint, name text, i2 int2[], i4 int4[], i8 int8[], n numeric(10,2)[], \
    r float4[], d float8[], t text[], v varchar(5)[], c char(2)[], b bool[], dt date[], ts timestamp[], tz timestamptz[], tm time[], \
    iv interval[], u uuid[], by bytea[])";

const ROWS: &str = "INSERT INTO arr VALUES \
    (1, 10, 'one', '{1,-2}', '{1,2,NULL}', '{9223372036854775807}', '{1.5,NULL,-0.25}', '{1.5,0.1}', '{0.1,-1e300}', \
        '{a,\"b c\",\"\",\"NULL\",NULL,\"q\\\"q\",\"back\\\\slash\"}', '{ab,\"c d\"}', '{x,yz}', '{t,f,NULL}', '{2024-02-29,1999-12-31}', \
        '{\"2024-01-31 10:00:00.5\"}', '{\"2024-01-31 10:00:00+00\"}', '{10:00,23:59:59.999}', '{\"1 day\",\"-2 hours\"}', \
        '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}', '{\"\\\\x0102\",\"\\\\x\"}'), \
    (2, 20, 'two', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}'), \
    (3, 30, 'three', NULL, '{7}', NULL, NULL, NULL, NULL, '{z}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)";

const SELECT: &str = "SELECT * FROM arr ORDER BY id";

fn both(name: &str) -> (common::TestServer, postgres::Client, postgres::Client) {
    let srv = common::start();
    let mut tier = srv.client();
    let mut pg = common::postgres(name);
    for c in [&mut tier, &mut pg] {
        c.batch_execute(DDL).unwrap();
        c.batch_execute(ROWS).unwrap();
    }
    (srv, tier, pg)
}

#[test]
fn results_match_postgres_in_text_and_binary() {
    let (_srv, mut tier, mut pg) = both("arr_results");
    assert_eq!(text_rows(&mut tier, SELECT), text_rows(&mut pg, SELECT), "text form");
    assert_eq!(binary_rows(&mut tier, SELECT), binary_rows(&mut pg, SELECT), "binary form");
    let types = |s: &postgres::Statement| s.columns().iter().map(|c| c.type_().oid()).collect::<Vec<_>>();
    assert_eq!(types(&tier.prepare(SELECT).unwrap()), types(&pg.prepare(SELECT).unwrap()));
    assert_eq!(
        types(&tier.prepare(SELECT).unwrap())[3..],
        [1005, 1007, 1016, 1231, 1021, 1022, 1009, 1015, 1014, 1000, 1182, 1115, 1185, 1183, 1187, 2951, 1001]
    );
    let modifiers = "SELECT attname, atttypid, atttypmod, attndims FROM pg_attribute WHERE attrelid = 'arr'::regclass AND attnum > 0 ORDER BY attnum";
    assert_eq!(text_rows(&mut tier, modifiers), text_rows(&mut pg, modifiers));
    let computed = "SELECT ARRAY[id, big::int], array_agg(name) OVER (ORDER BY id), i4 || 5, v[1:2], t[2:3], ARRAY[]::text[], cardinality(i4) FROM arr ORDER BY id";
    assert_eq!(text_rows(&mut tier, computed), text_rows(&mut pg, computed));
    // array_send's has-null flag says whether a null bitmap exists: a
    // slice of an array with NULLs keeps PostgreSQL's even when the slice
    // has none (t[2:3]); pgtier's says whether a NULL is present. The
    // elements are the same.
    let flagless = |rows: Vec<Vec<Option<Raw>>>| {
        rows.into_iter()
            .map(|r| {
                r.into_iter()
                    .enumerate()
                    .map(|(k, v)| {
                        if k == 4 {
                            v.map(|Raw(mut b)| {
                                b[7] = 0;
                                Raw(b)
                            })
                        } else {
                            v
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(flagless(binary_rows(&mut tier, computed)), flagless(binary_rows(&mut pg, computed)));
    // The driver's own decoding: Vec<Option<i32>> and Vec<String>.
    for c in [&mut tier, &mut pg] {
        let row = c.query_one("SELECT i4, t FROM arr WHERE id = 1", &[]).unwrap();
        assert_eq!(row.get::<_, Vec<Option<i32>>>(0), [Some(1), Some(2), None]);
        assert_eq!(row.get::<_, Vec<Option<String>>>(1)[1].as_deref(), Some("b c"));
    }
}

#[test]
fn any_takes_binary_array_parameters() {
    let (_srv, mut tier, mut pg) = both("arr_any");
    let mut answers = Vec::new();
    for c in [&mut tier, &mut pg] {
        let by_id = c.prepare("SELECT id FROM arr WHERE id = ANY($1) ORDER BY id").unwrap();
        assert_eq!(by_id.params(), [Type::INT4_ARRAY]);
        let by_big = c.prepare("SELECT id FROM arr WHERE big = ANY($1) ORDER BY id").unwrap();
        assert_eq!(by_big.params(), [Type::INT8_ARRAY]);
        let by_name = c.prepare("SELECT id FROM arr WHERE name = ANY($1) ORDER BY id").unwrap();
        assert_eq!(by_name.params(), [Type::TEXT_ARRAY]);
        let cast = c.prepare("SELECT $1::int[] @> ARRAY[2], cardinality($1::int[])").unwrap();
        assert_eq!(cast.params(), [Type::INT4_ARRAY]);
        let ids = |rows: Vec<postgres::Row>| rows.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>();
        let mut got = vec![
            ids(c.query(&by_id, &[&vec![3i32, 1, 99]]).unwrap()),
            ids(c.query(&by_id, &[&Vec::<i32>::new()]).unwrap()),
            ids(c.query(&by_id, &[&vec![Some(2i32), None]]).unwrap()),
            ids(c.query(&by_big, &[&vec![20i64, 30]]).unwrap()),
            ids(c.query(&by_name, &[&vec!["one", "three", "x"]]).unwrap()),
        ];
        let row = c.query_one(&cast, &[&vec![1i32, 2]]).unwrap();
        got.push(vec![i32::from(row.get::<_, bool>(0)), row.get::<_, i32>(1)]);
        // An array parameter stored into an array column, read back.
        c.execute("UPDATE arr SET i4 = $1, t = $2 WHERE id = 2", &[&vec![Some(4i32), None], &vec!["p q", ""]]).unwrap();
        let row = c.query_one("SELECT i4::text, t::text FROM arr WHERE id = 2", &[]).unwrap();
        got.push(vec![row.get::<_, String>(0).len() as i32, row.get::<_, String>(1).len() as i32]);
        answers.push((got, text_rows(c, "SELECT i4, t FROM arr WHERE id = 2")));
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0].0[0], [1, 3]);
    assert_eq!(answers[0].0[4], [1, 3]);
}

#[test]
fn binary_array_parameters_store_what_postgres_stores() {
    let (_srv, mut tier, mut pg) = both("arr_params");
    let originals = binary_rows(&mut pg, SELECT);
    let insert =
        format!("INSERT INTO arr VALUES ({})", (1..=20).map(|k| format!("${k}")).collect::<Vec<_>>().join(", "));
    for c in [&mut tier, &mut pg] {
        let stmt = c.prepare(&insert).unwrap();
        for (n, row) in originals.iter().enumerate() {
            let id = Some(Raw((100 + n as i32).to_be_bytes().to_vec()));
            let mut params: Vec<&(dyn postgres_types::ToSql + Sync)> = vec![&id];
            params.extend(row[1..].iter().map(|v| v as &(dyn postgres_types::ToSql + Sync)));
            c.execute(&stmt, &params).unwrap();
        }
    }
    // A two-dimensional binary array PostgreSQL takes is refused, not flattened.
    let two_dims: Vec<u8> = [2i32, 0, 23, 1, 1, 1, 1, 4, 7].iter().flat_map(|w| w.to_be_bytes()).collect();
    assert!(pg.query("SELECT $1::int[]", &[&Raw(two_dims.clone())]).is_ok());
    let e = tier.query("SELECT $1::int[]", &[&Raw(two_dims)]).unwrap_err();
    assert_eq!(e.code().unwrap().code(), "0A000");
    let copies = "SELECT * FROM arr WHERE id >= 100 ORDER BY id";
    assert_eq!(binary_rows(&mut tier, copies), binary_rows(&mut pg, copies));
    assert_eq!(text_rows(&mut tier, copies), text_rows(&mut pg, copies));
}

#[test]
fn copy_binary_and_text_round_trip_like_postgres() {
    let (_srv, mut tier, mut pg) = both("arr_copy");
    common::copy_round_trip(&mut tier, &mut pg, "arr", 3);
}
