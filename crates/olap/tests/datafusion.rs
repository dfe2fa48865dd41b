//! DataFusion over the columnar copies: aggregate and join queries whose
//! answers must equal those computed in plain Rust from the row store's
//! scan at the same snapshot, with changes both merged and still in the
//! delta.
#![cfg(feature = "datafusion")]
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::*;
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Decimal128Type, Int64Type};
use pgtier_engine::{ColumnDef, DataType, Database, Numeric, TableDef, TableId, Transaction, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

struct Tpch {
    customer: TableId,
    orders: TableId,
    lineitem: TableId,
}

fn create(db: &Database) -> Tpch {
    let mut t = db.begin().unwrap();
    let dec = |p, s| DataType::Numeric { precision: p, scale: s };
    let customer = t
        .create_table(&TableDef::new(
            "customer",
            vec![
                ColumnDef::new("c_custkey", DataType::Int8).not_null(),
                ColumnDef::new("c_name", DataType::Varchar(25)),
                ColumnDef::new("c_nationkey", DataType::Int4),
                ColumnDef::new("c_mktsegment", DataType::Char(10)),
            ],
            &["c_custkey"],
        ))
        .unwrap();
    let orders = t
        .create_table(&TableDef::new(
            "orders",
            vec![
                ColumnDef::new("o_orderkey", DataType::Int8).not_null(),
                ColumnDef::new("o_custkey", DataType::Int8).not_null(),
                ColumnDef::new("o_orderstatus", DataType::Char(1)),
                ColumnDef::new("o_totalprice", dec(15, 2)),
                ColumnDef::new("o_orderdate", DataType::Date),
            ],
            &["o_orderkey"],
        ))
        .unwrap();
    let lineitem = t
        .create_table(&TableDef::new(
            "lineitem",
            vec![
                ColumnDef::new("l_orderkey", DataType::Int8).not_null(),
                ColumnDef::new("l_linenumber", DataType::Int4).not_null(),
                ColumnDef::new("l_quantity", dec(15, 2)),
                ColumnDef::new("l_extendedprice", dec(15, 2)),
                ColumnDef::new("l_discount", dec(15, 2)),
                ColumnDef::new("l_returnflag", DataType::Char(1)),
                ColumnDef::new("l_shipdate", DataType::Date),
            ],
            &["l_orderkey", "l_linenumber"],
        ))
        .unwrap();
    t.commit().unwrap();
    Tpch { customer, orders, lineitem }
}

const SEGMENTS: [&str; 5] = ["AUTOMOBILE", "BUILDING  ", "FURNITURE ", "HOUSEHOLD ", "MACHINERY "];

fn populate(db: &Database, s: &Tpch, rng: &mut StdRng) {
    let mut t = db.begin().unwrap();
    for c in 0..200i64 {
        let nation = if c % 17 == 0 { Value::Null } else { Value::Int4(rng.random_range(0..25)) };
        t.insert(
            s.customer,
            &[
                Value::Int8(c),
                Value::Text(format!("Customer#{c:09}")),
                nation,
                Value::Text(SEGMENTS[rng.random_range(0..5)].into()),
            ],
        )
        .unwrap();
    }
    for o in 0..1500i64 {
        let status = ["F", "O", "P"][rng.random_range(0..3)];
        t.insert(
            s.orders,
            &[
                Value::Int8(o),
                Value::Int8(rng.random_range(0..200)),
                Value::Text(status.into()),
                Value::Numeric(Numeric::new(rng.random_range(100..50_000_000), 2)),
                Value::Date(rng.random_range(-2000..9000)),
            ],
        )
        .unwrap();
        for l in 1..=rng.random_range(1..=5) {
            t.insert(s.lineitem, &lineitem_row(rng, o, l)).unwrap();
        }
    }
    t.commit().unwrap();
}

fn lineitem_row(rng: &mut StdRng, o: i64, l: i32) -> Vec<Value> {
    vec![
        Value::Int8(o),
        Value::Int4(l),
        Value::Numeric(Numeric::new(rng.random_range(100..5000), 2)),
        Value::Numeric(Numeric::new(rng.random_range(100..10_000_000), 2)),
        Value::Numeric(Numeric::new(rng.random_range(0..11), 2)),
        Value::Text(["A", "N", "R"][rng.random_range(0..3)].into()),
        Value::Date(rng.random_range(-2000..9000)),
    ]
}

/// Updates, deletes and inserts on all three tables.
fn churn(db: &Database, s: &Tpch, rng: &mut StdRng) {
    let mut t = db.begin().unwrap();
    for _ in 0..200 {
        let o = rng.random_range(0..1500i64);
        match rng.random_range(0..4) {
            0 => {
                t.update(
                    s.orders,
                    &[Value::Int8(o)],
                    &[(3, Value::Numeric(Numeric::new(rng.random_range(1..9_000_000), 2)))],
                )
                .unwrap();
            }
            1 => {
                t.delete(s.lineitem, &[Value::Int8(o), Value::Int4(1)]).unwrap();
            }
            2 => {
                let l = rng.random_range(6..1000);
                let _ = t.delete(s.lineitem, &[Value::Int8(o), Value::Int4(l)]).unwrap();
                t.insert(s.lineitem, &lineitem_row(rng, o, l)).unwrap();
            }
            _ => {
                let c = rng.random_range(0..200i64);
                t.update(s.customer, &[Value::Int8(c)], &[(3, Value::Text(SEGMENTS[rng.random_range(0..5)].into()))])
                    .unwrap();
            }
        }
    }
    t.commit().unwrap();
}

fn scan(t: &mut Transaction, table: TableId) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    t.scan_table(table, |r| {
        rows.push(r.values());
        Ok(true)
    })
    .unwrap();
    rows
}

fn num(v: &Value) -> i128 {
    match v {
        Value::Numeric(n) => {
            assert_eq!(n.scale, 2);
            n.mantissa
        }
        other => panic!("{other:?}"),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Text(s) => s.clone(),
        other => panic!("{other:?}"),
    }
}

fn dec(b: &RecordBatch, col: usize, row: usize) -> i128 {
    let a = b.column(col).as_primitive::<Decimal128Type>();
    match a.data_type() {
        datafusion::arrow::datatypes::DataType::Decimal128(_, 2) => a.value(row),
        other => panic!("sum is {other}, expected scale 2"),
    }
}

fn int(b: &RecordBatch, col: usize, row: usize) -> i64 {
    b.column(col).as_primitive::<Int64Type>().value(row)
}

fn string(b: &RecordBatch, col: usize, row: usize) -> String {
    datafusion::arrow::util::display::array_value_to_string(b.column(col), row).unwrap()
}

fn each_row(batches: &[RecordBatch], mut f: impl FnMut(&RecordBatch, usize)) -> usize {
    let mut n = 0;
    for b in batches {
        for r in 0..b.num_rows() {
            f(b, r);
            n += 1;
        }
    }
    n
}

/// Days since 2000-01-01 of `2020-06-01`.
const CUTOFF_DAYS: i32 = 7457;

fn check_all(db: &Database, olap: &pgtier_olap::OlapEngine, s: &Tpch) {
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let snapshot = t.snapshot_ts();
    let customer = scan(&mut t, s.customer);
    let orders = scan(&mut t, s.orders);
    let lineitem = scan(&mut t, s.lineitem);

    // Q1-like: per return flag over a date range.
    let mut want: BTreeMap<String, (i64, i128, i128)> = BTreeMap::new();
    for l in &lineitem {
        let Value::Date(d) = l[6] else { panic!() };
        if d <= CUTOFF_DAYS {
            let e = want.entry(text(&l[5])).or_default();
            e.0 += 1;
            e.1 += num(&l[2]);
            e.2 += num(&l[3]);
        }
    }
    let got = olap
        .query(
            "SELECT l_returnflag, count(*) AS n, sum(l_quantity) AS q, sum(l_extendedprice) AS p \
             FROM lineitem WHERE l_shipdate <= DATE '2020-06-01' GROUP BY l_returnflag ORDER BY l_returnflag",
            snapshot,
        )
        .unwrap();
    let mut seen = BTreeMap::new();
    each_row(&got, |b, r| {
        seen.insert(string(b, 0, r), (int(b, 1, r), dec(b, 2, r), dec(b, 3, r)));
    });
    assert_eq!(seen, want, "Q1-like");

    // Join + group: order totals per market segment of finished orders.
    let segment: BTreeMap<i64, String> =
        customer.iter().map(|c| (c[0].clone(), c[3].clone())).map(|(k, v)| (int_of(&k), text(&v))).collect();
    let mut want: BTreeMap<String, (i64, i128)> = BTreeMap::new();
    for o in &orders {
        if text(&o[2]) == "F"
            && let Some(seg) = segment.get(&int_of(&o[1]))
        {
            let e = want.entry(seg.clone()).or_default();
            e.0 += 1;
            e.1 += num(&o[3]);
        }
    }
    let got = olap
        .query(
            "SELECT c.c_mktsegment, count(*) AS n, sum(o.o_totalprice) AS total \
             FROM customer c JOIN orders o ON c.c_custkey = o.o_custkey \
             WHERE o.o_orderstatus = 'F' GROUP BY c.c_mktsegment ORDER BY c.c_mktsegment",
            snapshot,
        )
        .unwrap();
    let mut seen = BTreeMap::new();
    each_row(&got, |b, r| {
        seen.insert(string(b, 0, r), (int(b, 1, r), dec(b, 2, r)));
    });
    assert_eq!(seen, want, "join per segment");

    // Three tables: revenue per nation of customers with discounted lines.
    let nation: BTreeMap<i64, Value> = customer.iter().map(|c| (int_of(&c[0]), c[2].clone())).collect();
    let cust_of: BTreeMap<i64, i64> = orders.iter().map(|o| (int_of(&o[0]), int_of(&o[1]))).collect();
    let mut want: BTreeMap<i32, (i64, i128)> = BTreeMap::new();
    for l in &lineitem {
        if num(&l[4]) < 5 {
            continue;
        }
        let Some(c) = cust_of.get(&int_of(&l[0])) else { continue };
        let Some(Value::Int4(n)) = nation.get(c) else { continue };
        let e = want.entry(*n).or_default();
        e.0 += 1;
        e.1 += num(&l[3]);
    }
    let got = olap
        .query(
            "SELECT c.c_nationkey, count(*) AS n, sum(l.l_extendedprice) AS rev \
             FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey \
             JOIN customer c ON o.o_custkey = c.c_custkey \
             WHERE l.l_discount >= 0.05 AND c.c_nationkey IS NOT NULL \
             GROUP BY c.c_nationkey ORDER BY c.c_nationkey",
            snapshot,
        )
        .unwrap();
    let mut seen = BTreeMap::new();
    each_row(&got, |b, r| {
        let n = b.column(0).as_primitive::<datafusion::arrow::datatypes::Int32Type>().value(r);
        seen.insert(n, (int(b, 1, r), dec(b, 2, r)));
    });
    assert_eq!(seen, want, "three-table join per nation");

    // Grouped by the key's leading column (Q18's subquery): streamed when
    // the copy is in key order, hashed when not; the same answer.
    let mut want: BTreeMap<i64, (i64, i128)> = BTreeMap::new();
    for l in &lineitem {
        let e = want.entry(int_of(&l[0])).or_default();
        e.0 += 1;
        e.1 += num(&l[2]);
    }
    want.retain(|_, (n, _)| *n >= 3);
    let got = olap
        .query(
            "SELECT l_orderkey, count(*) AS n, sum(l_quantity) AS q FROM lineitem \
             GROUP BY l_orderkey HAVING count(*) >= 3",
            snapshot,
        )
        .unwrap();
    let mut seen = BTreeMap::new();
    let rows = each_row(&got, |b, r| {
        assert!(seen.insert(int(b, 0, r), (int(b, 1, r), dec(b, 2, r))).is_none(), "a group twice");
    });
    assert_eq!(rows, seen.len());
    assert_eq!(seen, want, "per order key");

    // NULLs and text order: counts, min and max.
    let nations = customer.iter().filter(|c| !matches!(c[2], Value::Null)).count() as i64;
    let names: Vec<String> = customer.iter().map(|c| text(&c[1])).collect();
    let got =
        olap.query("SELECT count(*), count(c_nationkey), min(c_name), max(c_name) FROM customer", snapshot).unwrap();
    let rows = each_row(&got, |b, r| {
        assert_eq!(int(b, 0, r), customer.len() as i64);
        assert_eq!(int(b, 1, r), nations);
        assert_eq!(string(b, 2, r), *names.iter().min().unwrap());
        assert_eq!(string(b, 3, r), *names.iter().max().unwrap());
    });
    assert_eq!(rows, 1);
    t.commit().unwrap();
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int8(x) => *x,
        other => panic!("{other:?}"),
    }
}

#[test]
fn aggregate_and_join_queries_equal_the_row_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let s = create(&db);
    let mut rng = StdRng::seed_from_u64(42);
    populate(&db, &s, &mut rng);
    let olap = start(&db);
    for table in [s.customer, s.orders, s.lineitem] {
        olap.enable(table, |_, _| {}).unwrap();
    }
    // Enabled in key order (the scan gives none): DataFusion streams the
    // GROUP BY on l_orderkey.
    let per_key = "SELECT l_orderkey, count(*) FROM lineitem GROUP BY l_orderkey";
    assert!(plan(&db, &olap, per_key).contains("ordering_mode=Sorted"), "{}", plan(&db, &olap, per_key));
    check_all(&db, &olap, &s);
    // Changes still in the delta...
    churn(&db, &s, &mut rng);
    assert!(!plan(&db, &olap, per_key).contains("ordering_mode=Sorted"), "delta rows come last");
    check_all(&db, &olap, &s);
    // ...and merged into the chunks.
    olap.merge_now().unwrap();
    assert!(!plan(&db, &olap, per_key).contains("ordering_mode=Sorted"), "merged rows go to the end");
    churn(&db, &s, &mut rng);
    check_all(&db, &olap, &s);
    olap.merge_now().unwrap();
    check_all(&db, &olap, &s);
}

/// DataFusion's physical plan of `sql` at a fresh snapshot.
fn plan(db: &Database, olap: &pgtier_olap::OlapEngine, sql: &str) -> String {
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let got = olap.query(&format!("EXPLAIN {sql}"), t.snapshot_ts()).unwrap();
    t.commit().unwrap();
    let mut text = String::new();
    each_row(&got, |b, r| {
        text.push_str(&string(b, 1, r));
        text.push('\n');
    });
    text
}

#[test]
fn query_of_a_table_not_enabled_fails() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let s = create(&db);
    let olap = start(&db);
    olap.enable(s.orders, |_, _| {}).unwrap();
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let e = olap.query("SELECT count(*) FROM lineitem", t.snapshot_ts()).unwrap_err();
    assert!(e.to_string().contains("lineitem"), "{e}");
    let got = olap.query("SELECT count(*) FROM orders", t.snapshot_ts()).unwrap();
    assert_eq!(int(&got[0], 0, 0), 0);
}
