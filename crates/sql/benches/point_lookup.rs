//! Latency of a prepared primary-key lookup through SQL versus the engine's
//! own `get`, and of a TATP-style mix, in direct (embedded) mode. Run with
//! `cargo bench -p pgtier-sql --bench point_lookup`; prints ns/operation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use pgtier_engine::{CommitMode, Database, EngineConfig, RowBuf, Value};
use pgtier_sql::Connection;

const ROWS: i32 = 100_000;
const OPS: u64 = 2_000_000;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, ..EngineConfig::default() };
    let db = Database::open(dir.path(), config).unwrap();
    let mut conn = Connection::new(db.clone());
    conn.execute_sql("CREATE TABLE subscriber (s_id integer PRIMARY KEY, sub_nbr varchar(15) NOT NULL UNIQUE, bit_1 smallint, hex_1 smallint, byte2_1 smallint, msc_location bigint, vlr_location bigint)").unwrap();
    conn.execute_sql("CREATE TABLE access_info (s_id integer NOT NULL, ai_type smallint NOT NULL, data1 smallint, data2 smallint, data3 char(3), data4 char(5), PRIMARY KEY (s_id, ai_type))").unwrap();
    let ins = conn.prepare("INSERT INTO subscriber VALUES ($1, $2, $3, $4, $5, $6, $7)").unwrap();
    let ins_ai = conn.prepare("INSERT INTO access_info VALUES ($1, $2, $3, $4, $5, $6)").unwrap();
    conn.begin().unwrap();
    for i in 0..ROWS {
        conn.execute(
            &ins,
            &[
                Value::Int4(i),
                Value::Text(format!("{i:015}")),
                Value::Int2(1),
                Value::Int2(2),
                Value::Int2(3),
                Value::Int8(4),
                Value::Int8(5),
            ],
        )
        .unwrap();
        conn.execute(
            &ins_ai,
            &[
                Value::Int4(i),
                Value::Int2(1),
                Value::Int2(1),
                Value::Int2(2),
                Value::Text("abc".into()),
                Value::Text("abcde".into()),
            ],
        )
        .unwrap();
    }
    conn.commit().unwrap();

    let table = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut buf = RowBuf::new();
    let mut key = [Value::Int4(0)];
    let engine_ns = time(OPS, |i| {
        key[0] = Value::Int4((i % ROWS as u64) as i32);
        let mut t = db.begin().unwrap();
        assert!(t.get(table, &key, &mut buf).unwrap());
        t.commit().unwrap();
    });
    println!("engine begin+get+commit:               {engine_ns:7.0} ns/op");

    let sel = conn
        .prepare(
            "SELECT s_id, sub_nbr, bit_1, hex_1, byte2_1, msc_location, vlr_location FROM subscriber WHERE s_id = $1",
        )
        .unwrap();
    let mut params = [Value::Int4(0)];
    let sql_ns = time(OPS, |i| {
        params[0] = Value::Int4((i % ROWS as u64) as i32);
        assert_eq!(conn.query_with(&sel, &params, |_, _| 1).unwrap(), 1);
    });
    println!(
        "SQL prepared PK SELECT (autocommit):   {sql_ns:7.0} ns/op  ({:+.0} ns over the engine)",
        sql_ns - engine_ns
    );

    let acc =
        conn.prepare("SELECT data1, data2, data3, data4 FROM access_info WHERE s_id = $1 AND ai_type = $2").unwrap();
    let upd = conn.prepare("UPDATE subscriber SET bit_1 = $1 WHERE s_id = $2").unwrap();
    let loc = conn.prepare("UPDATE subscriber SET vlr_location = $1 WHERE sub_nbr = $2").unwrap();
    let mut p2 = [Value::Int4(0), Value::Int2(1)];
    let acc_ns = time(OPS, |i| {
        p2[0] = Value::Int4((i % ROWS as u64) as i32);
        conn.query_with(&acc, &p2, |_, _| ()).unwrap();
    });
    println!("SQL GET_ACCESS_DATA (composite PK):    {acc_ns:7.0} ns/op");
    let upd_ns = time(OPS / 4, |i| {
        conn.execute(&upd, &[Value::Int2((i % 2) as i16), Value::Int4((i % ROWS as u64) as i32)]).unwrap();
    });
    println!("SQL UPDATE_SUBSCRIBER bit (PK, async): {upd_ns:7.0} ns/op");
    let loc_ns = time(OPS / 10, |i| {
        conn.execute(&loc, &[Value::Int8(i as i64), Value::Text(format!("{:015}", i % ROWS as u64))]).unwrap();
    });
    println!("SQL UPDATE_LOCATION (unique index):    {loc_ns:7.0} ns/op");
    // TATP mix: 35% subscriber, 35% access (composite PK), ~10% new-destination-ish reads
    // approximated by access reads, 2% bit update, 14% location update.
    let mix_ns = (0.35 * sql_ns + 0.45 * acc_ns + 0.02 * upd_ns + 0.14 * loc_ns) / 0.96;
    println!("approximate TATP-mix transaction:      {mix_ns:7.0} ns/txn (weighted by the mix above)");
}

fn time(n: u64, mut f: impl FnMut(u64)) -> f64 {
    for i in 0..n / 10 {
        f(i);
    }
    let start = Instant::now();
    for i in 0..n {
        f(i);
    }
    start.elapsed().as_nanos() as f64 / n as f64
}
