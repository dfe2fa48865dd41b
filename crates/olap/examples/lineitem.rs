//! A LINEITEM-shaped table (TPC-H's column types and value domains, values
//! drawn at random rather than by dbgen) copied into the columnar form:
//! prints enable throughput, per-column and table compression, and the
//! cost of reading the copy at a snapshot.
//!
//! cargo run -p pgtier-olap --profile test --example lineitem -- 600000
//! cargo run -p pgtier-olap --profile test --features datafusion --example lineitem   # + Q1 timing
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use pgtier_engine::{ColumnDef, CommitMode, DataType, Database, EngineConfig, Numeric, TableDef, Value};
use pgtier_olap::{OlapConfig, OlapEngine};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const INSTRUCT: [&str; 4] = ["DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"];
const MODES: [&str; 7] = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"];
const WORDS: [&str; 24] = [
    "furiously",
    "sly",
    "careful",
    "blithely",
    "quickly",
    "fluffily",
    "slyly",
    "ironic",
    "final",
    "regular",
    "express",
    "pending",
    "bold",
    "even",
    "special",
    "unusual",
    "deposits",
    "requests",
    "accounts",
    "packages",
    "theodolites",
    "pinto",
    "beans",
    "foxes",
];

fn main() {
    let rows: i64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(600_000);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig { checkpoint_interval: None, ..EngineConfig::default() }).unwrap();
    let dec = DataType::Numeric { precision: 15, scale: 2 };
    let mut t = db.begin().unwrap();
    let table = t
        .create_table(&TableDef::new(
            "lineitem",
            vec![
                ColumnDef::new("l_orderkey", DataType::Int8).not_null(),
                ColumnDef::new("l_partkey", DataType::Int8).not_null(),
                ColumnDef::new("l_suppkey", DataType::Int8).not_null(),
                ColumnDef::new("l_linenumber", DataType::Int4).not_null(),
                ColumnDef::new("l_quantity", dec).not_null(),
                ColumnDef::new("l_extendedprice", dec).not_null(),
                ColumnDef::new("l_discount", dec).not_null(),
                ColumnDef::new("l_tax", dec).not_null(),
                ColumnDef::new("l_returnflag", DataType::Char(1)).not_null(),
                ColumnDef::new("l_linestatus", DataType::Char(1)).not_null(),
                ColumnDef::new("l_shipdate", DataType::Date).not_null(),
                ColumnDef::new("l_commitdate", DataType::Date).not_null(),
                ColumnDef::new("l_receiptdate", DataType::Date).not_null(),
                ColumnDef::new("l_shipinstruct", DataType::Char(25)).not_null(),
                ColumnDef::new("l_shipmode", DataType::Char(10)).not_null(),
                ColumnDef::new("l_comment", DataType::Varchar(44)).not_null(),
            ],
            &["l_orderkey", "l_linenumber"],
        ))
        .unwrap();
    t.commit().unwrap();
    let mut rng = StdRng::seed_from_u64(1);
    let started = Instant::now();
    let mut t = db.begin_with(CommitMode::Async).unwrap();
    let (mut order, mut line, mut n) = (1i64, 1i32, 0i64);
    while n < rows {
        let ship = rng.random_range(-2557..-2557 + 2405); // 1992-01-02 .. 1998-08-02, days since 2000
        let pad = |s: &str, w: usize| format!("{s:<w$}");
        let comment: Vec<&str> = (0..rng.random_range(2..6)).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect();
        let mut comment = comment.join(" ");
        comment.truncate(44);
        let q = rng.random_range(1..=50i128);
        t.insert(
            table,
            &[
                Value::Int8(order),
                Value::Int8(rng.random_range(1..200_000)),
                Value::Int8(rng.random_range(1..10_000)),
                Value::Int4(line),
                Value::Numeric(Numeric::new(q * 100, 2)),
                Value::Numeric(Numeric::new(q * rng.random_range(90_000..200_000), 2)),
                Value::Numeric(Numeric::new(rng.random_range(0..=10), 2)),
                Value::Numeric(Numeric::new(rng.random_range(0..=8), 2)),
                Value::Text(["R", "A", "N"][rng.random_range(0..3)].into()),
                Value::Text(["O", "F"][rng.random_range(0..2)].into()),
                Value::Date(ship),
                Value::Date(ship + rng.random_range(-60..60)),
                Value::Date(ship + rng.random_range(1..30)),
                Value::Text(pad(INSTRUCT[rng.random_range(0..4)], 25)),
                Value::Text(pad(MODES[rng.random_range(0..7)], 10)),
                Value::Text(comment),
            ],
        )
        .unwrap();
        n += 1;
        line += 1;
        if line > rng.random_range(1..=7) {
            order += 1;
            line = 1;
        }
        if n % 50_000 == 0 {
            t.commit().unwrap();
            t = db.begin_with(CommitMode::Async).unwrap();
        }
    }
    t.commit().unwrap();
    println!("loaded {rows} rows in {:?}", started.elapsed());
    let olap = OlapEngine::start(&db, OlapConfig::default()).unwrap();
    let started = Instant::now();
    olap.enable(table, |_, _| {}).unwrap();
    let took = started.elapsed();
    println!("enable: {rows} rows in {took:?} ({:.0} rows/s)", rows as f64 / took.as_secs_f64());
    println!("{:<16} {:<10} {:>12} {:>12} {:>6}", "column", "encoding", "plain B", "arrow B", "ratio");
    for r in olap.compression() {
        println!(
            "{:<16} {:<10} {:>12} {:>12} {:>6.2}",
            r.column.as_deref().unwrap_or("(table)"),
            r.encoding,
            r.plain_bytes,
            r.arrow_bytes,
            r.ratio()
        );
    }
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let started = Instant::now();
    let mut scanned = 0u64;
    t.scan_table(table, |_| {
        scanned += 1;
        Ok(true)
    })
    .unwrap();
    let row_scan = started.elapsed();
    let started = Instant::now();
    let view = olap.view(table, t.snapshot_ts()).unwrap();
    let batches = view.batches().unwrap();
    let col_read = started.elapsed();
    let total: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(total as u64, scanned);
    println!("row-store scan of {scanned} rows: {row_scan:?}; columnar view + batches: {col_read:?}");
    #[cfg(feature = "datafusion")]
    for _ in 0..3 {
        let q1 = "SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice), \
                  sum(l_extendedprice * (1 - l_discount)), avg(l_discount), count(*) FROM lineitem \
                  WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus \
                  ORDER BY l_returnflag, l_linestatus";
        let started = Instant::now();
        let out = olap.query(q1, t.snapshot_ts()).unwrap();
        let rows: usize = out.iter().map(|b| b.num_rows()).sum();
        println!(
            "TPC-H Q1 shape via DataFusion ({} threads): {rows} groups in {:?}",
            olap.config().threads,
            started.elapsed()
        );
    }
    t.commit().unwrap();
}
