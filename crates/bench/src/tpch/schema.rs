//! The eight TPC-H tables (spec 1.4.1) and their population from the
//! `tpchgen` crate (dbgen's generators in Rust), streamed into each
//! target's bulk loader.
//!
//! Every column is sent as the text dbgen prints (its `.tbl` fields), and
//! the target's input functions make typed values of it: COPY text format
//! on PostgreSQL and the pgtier server, the column type's input function in
//! the embedded loader. No table is ever held in memory: a row is
//! generated, handed over and dropped.

use std::fmt::{Display, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator, PartSupp, PartSuppGenerator,
    RegionGenerator, SupplierGenerator,
};

use crate::target::{DbError, RowSource, Target, Value};

/// Largest scale factor: order keys (up to 6,000,000 × SF) must fit the
/// spec's `integer` identifier columns (TPC-H's own rule is a type of at
/// least 2^31 values; SF 100 keeps every key below 2^30).
pub const SCALE_MAX: f64 = 100.0;
/// Smallest scale factor: below it dbgen's tables get too few rows for
/// several queries to return any (one supplier, twenty parts).
pub const SCALE_MIN: f64 = 0.0001;

/// The tables, parents first (the order of the spec's 1.4.1).
pub const TABLES: [&str; 8] = ["region", "nation", "part", "supplier", "partsupp", "customer", "orders", "lineitem"];

/// `CREATE TABLE` of each table: the spec's columns, types and primary
/// keys, the same text on every target. The spec's foreign keys are
/// optional (1.4.2.3) and left out: the engine would need parents loaded
/// first, and no query depends on them.
pub const DDL: [(&str, &str); 8] = [
    (
        "region",
        "CREATE TABLE region (
    r_regionkey integer NOT NULL PRIMARY KEY,
    r_name char(25) NOT NULL,
    r_comment varchar(152) NOT NULL)",
    ),
    (
        "nation",
        "CREATE TABLE nation (
    n_nationkey integer NOT NULL PRIMARY KEY,
    n_name char(25) NOT NULL,
    n_regionkey integer NOT NULL,
    n_comment varchar(152) NOT NULL)",
    ),
    (
        "part",
        "CREATE TABLE part (
    p_partkey integer NOT NULL PRIMARY KEY,
    p_name varchar(55) NOT NULL,
    p_mfgr char(25) NOT NULL,
    p_brand char(10) NOT NULL,
    p_type varchar(25) NOT NULL,
    p_size integer NOT NULL,
    p_container char(10) NOT NULL,
    p_retailprice numeric(15,2) NOT NULL,
    p_comment varchar(23) NOT NULL)",
    ),
    (
        "supplier",
        "CREATE TABLE supplier (
    s_suppkey integer NOT NULL PRIMARY KEY,
    s_name char(25) NOT NULL,
    s_address varchar(40) NOT NULL,
    s_nationkey integer NOT NULL,
    s_phone char(15) NOT NULL,
    s_acctbal numeric(15,2) NOT NULL,
    s_comment varchar(101) NOT NULL)",
    ),
    (
        "partsupp",
        "CREATE TABLE partsupp (
    ps_partkey integer NOT NULL,
    ps_suppkey integer NOT NULL,
    ps_availqty integer NOT NULL,
    ps_supplycost numeric(15,2) NOT NULL,
    ps_comment varchar(199) NOT NULL,
    PRIMARY KEY (ps_partkey, ps_suppkey))",
    ),
    (
        "customer",
        "CREATE TABLE customer (
    c_custkey integer NOT NULL PRIMARY KEY,
    c_name varchar(25) NOT NULL,
    c_address varchar(40) NOT NULL,
    c_nationkey integer NOT NULL,
    c_phone char(15) NOT NULL,
    c_acctbal numeric(15,2) NOT NULL,
    c_mktsegment char(10) NOT NULL,
    c_comment varchar(117) NOT NULL)",
    ),
    (
        "orders",
        "CREATE TABLE orders (
    o_orderkey integer NOT NULL PRIMARY KEY,
    o_custkey integer NOT NULL,
    o_orderstatus char(1) NOT NULL,
    o_totalprice numeric(15,2) NOT NULL,
    o_orderdate date NOT NULL,
    o_orderpriority char(15) NOT NULL,
    o_clerk char(15) NOT NULL,
    o_shippriority integer NOT NULL,
    o_comment varchar(79) NOT NULL)",
    ),
    (
        "lineitem",
        "CREATE TABLE lineitem (
    l_orderkey integer NOT NULL,
    l_partkey integer NOT NULL,
    l_suppkey integer NOT NULL,
    l_linenumber integer NOT NULL,
    l_quantity numeric(15,2) NOT NULL,
    l_extendedprice numeric(15,2) NOT NULL,
    l_discount numeric(15,2) NOT NULL,
    l_tax numeric(15,2) NOT NULL,
    l_returnflag char(1) NOT NULL,
    l_linestatus char(1) NOT NULL,
    l_shipdate date NOT NULL,
    l_commitdate date NOT NULL,
    l_receiptdate date NOT NULL,
    l_shipinstruct char(25) NOT NULL,
    l_shipmode char(10) NOT NULL,
    l_comment varchar(44) NOT NULL,
    PRIMARY KEY (l_orderkey, l_linenumber))",
    ),
];

/// Column names of a table, in the order dbgen prints them (the DDL's).
pub fn columns(table: &str) -> Vec<&'static str> {
    let Some((_, ddl)) = DDL.iter().find(|(t, _)| *t == table) else { return Vec::new() };
    ddl.lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.starts_with("PRIMARY KEY"))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

/// Rows dbgen makes of `table` at `scale` (lineitem: an estimate, four
/// lines per order on average), for progress.
pub fn expected_rows(table: &str, scale: f64) -> u64 {
    let n = match table {
        "region" => 5,
        "nation" => 25,
        "part" => PartGenerator::calculate_row_count(scale, 1, 1),
        "supplier" => SupplierGenerator::calculate_row_count(scale, 1, 1),
        "partsupp" => 4 * PartSuppGenerator::calculate_row_count(scale, 1, 1),
        "customer" => CustomerGenerator::calculate_row_count(scale, 1, 1),
        "orders" => OrderGenerator::calculate_row_count(scale, 1, 1),
        "lineitem" => 4 * OrderGenerator::calculate_row_count(scale, 1, 1),
        _ => 0,
    };
    u64::try_from(n).unwrap_or(0)
}

/// A `.tbl` row stream as [`RowSource`]: each `|`-terminated field becomes
/// a text value; `loaded` counts rows handed over.
struct TblRows<'a, I> {
    rows: I,
    line: String,
    loaded: &'a AtomicU64,
}

impl<I, T> RowSource for TblRows<'_, I>
where
    I: Iterator<Item = T> + Send,
    T: Display,
{
    fn next_row(&mut self, row: &mut Vec<Value>) -> bool {
        let Some(r) = self.rows.next() else { return false };
        self.line.clear();
        let _ = write!(self.line, "{r}");
        // dbgen ends every field with '|' and never writes one inside a
        // field, nor a tab, newline or backslash.
        debug_assert!(self.line.ends_with('|') && !self.line.contains(['\t', '\n', '\\']));
        let line = self.line.strip_suffix('|').unwrap_or(&self.line);
        row.extend(line.split('|').map(|f| Value::Text(f.to_owned())));
        self.loaded.fetch_add(1, Ordering::Relaxed);
        true
    }
}

/// A filter over partsupp rows that drops a part's repeated supplier.
/// dbgen picks a part's 4 suppliers as `(partkey + i * (S/4 + (partkey-1)/S))
/// % S + 1`, which below about SF 0.01 (S < 100 suppliers) can name one
/// supplier twice for a part: a duplicate primary key, which PostgreSQL
/// refuses. The repeat is dropped (its lineitems still find the first row).
/// A part's rows come one after another, so this remembers 4 keys at most.
fn first_supplier_of_part() -> impl FnMut(&PartSupp<'_>) -> bool {
    let mut part = -1;
    let mut seen: Vec<i64> = Vec::with_capacity(4);
    move |ps| {
        if ps.ps_partkey != part {
            part = ps.ps_partkey;
            seen.clear();
        }
        if seen.contains(&ps.ps_suppkey) {
            return false;
        }
        seen.push(ps.ps_suppkey);
        true
    }
}

/// One piece of the load: a table, or one of `parts` slices of it (dbgen's
/// own partitioning: part `part` of `parts` makes that slice's rows).
#[derive(Clone, Copy, Debug)]
struct Job {
    table: &'static str,
    part: i32,
    parts: i32,
}

fn load_job(target: &dyn Target, scale: f64, job: Job, loaded: &AtomicU64) -> Result<u64, DbError> {
    let cols = columns(job.table);
    let (part, parts) = (job.part, job.parts);
    fn source<I: Iterator + Send>(rows: I, loaded: &AtomicU64) -> TblRows<'_, I> {
        TblRows { rows, line: String::with_capacity(256), loaded }
    }
    match job.table {
        "region" => target.bulk_load(
            job.table,
            &cols,
            &mut source(RegionGenerator::new(scale, part, parts).into_iter(), loaded),
        ),
        "nation" => target.bulk_load(
            job.table,
            &cols,
            &mut source(NationGenerator::new(scale, part, parts).into_iter(), loaded),
        ),
        "part" => {
            target.bulk_load(job.table, &cols, &mut source(PartGenerator::new(scale, part, parts).into_iter(), loaded))
        }
        "supplier" => target.bulk_load(
            job.table,
            &cols,
            &mut source(SupplierGenerator::new(scale, part, parts).into_iter(), loaded),
        ),
        "partsupp" => {
            let rows = PartSuppGenerator::new(scale, part, parts).into_iter().filter(first_supplier_of_part());
            target.bulk_load(job.table, &cols, &mut source(rows, loaded))
        }
        "customer" => target.bulk_load(
            job.table,
            &cols,
            &mut source(CustomerGenerator::new(scale, part, parts).into_iter(), loaded),
        ),
        "orders" => {
            target.bulk_load(job.table, &cols, &mut source(OrderGenerator::new(scale, part, parts).into_iter(), loaded))
        }
        "lineitem" => target.bulk_load(
            job.table,
            &cols,
            &mut source(LineItemGenerator::new(scale, part, parts).into_iter(), loaded),
        ),
        other => Err(DbError::new(None, format!("no generator for table {other}"))),
    }
}

/// What populating one target took.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadReport {
    /// Rows per table, in [`TABLES`] order.
    pub rows: Vec<(String, u64)>,
    pub load_s: f64,
    /// `ANALYZE` after the load: "ok", or why the target refused it.
    pub analyze: String,
    pub analyze_s: f64,
}

/// Drops and recreates the tables on `target`, loads them at `scale` with
/// `streams` parallel bulk loads (the two large tables split into dbgen
/// parts), then runs `ANALYZE` where the target accepts it. `tick` is
/// called about every 200 ms with rows loaded and rows expected.
pub fn populate(
    target: &dyn Target,
    scale: f64,
    streams: usize,
    tick: &mut dyn FnMut(u64, u64),
) -> Result<LoadReport, DbError> {
    assert!((SCALE_MIN..=SCALE_MAX).contains(&scale), "scale {scale} out of range");
    let streams = streams.clamp(1, 64);
    for table in TABLES.iter().rev() {
        target.execute_batch(&format!("DROP TABLE IF EXISTS {table}"))?;
    }
    for (_, ddl) in DDL {
        target.execute_batch(ddl)?;
    }
    let split = i32::try_from(streams).unwrap_or(1);
    let mut jobs = Vec::new();
    // Largest first, so the small tables fill the gaps at the end.
    for table in ["lineitem", "orders", "partsupp", "customer", "part", "supplier", "nation", "region"] {
        let parts = if matches!(table, "lineitem" | "orders" | "partsupp") { split } else { 1 };
        jobs.extend((1..=parts).map(|part| Job { table, part, parts }));
    }
    let total: u64 = TABLES.iter().map(|t| expected_rows(t, scale)).sum();
    let loaded = AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    let outcome: Result<Vec<(&str, u64)>, DbError> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..streams.min(jobs.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&job) = jobs.get(i) else { return Ok(done) };
                        let n = load_job(target, scale, job, &loaded)?;
                        done.push((job.table, n));
                    }
                })
            })
            .collect();
        while !workers.iter().all(|w| w.is_finished()) {
            tick(loaded.load(Ordering::Relaxed), total);
            std::thread::sleep(Duration::from_millis(200));
        }
        let mut all = Vec::new();
        for w in workers {
            let done: Result<Vec<(&str, u64)>, DbError> =
                w.join().map_err(|_| DbError::new(None, "a load thread panicked"))?;
            all.extend(done?);
        }
        Ok(all)
    });
    let done = outcome?;
    tick(loaded.load(Ordering::Relaxed), total);
    let load_s = started.elapsed().as_secs_f64();
    let rows =
        TABLES.iter().map(|t| ((*t).to_owned(), done.iter().filter(|(d, _)| d == t).map(|(_, n)| n).sum())).collect();
    let started = Instant::now();
    let analyze = match target.execute_batch("ANALYZE") {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("refused: {}{}", e.sqlstate.as_deref().map_or(String::new(), |c| format!("{c} ")), e.message),
    };
    Ok(LoadReport { rows, load_s, analyze, analyze_s: started.elapsed().as_secs_f64() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_follow_the_ddl() {
        assert_eq!(columns("region"), ["r_regionkey", "r_name", "r_comment"]);
        assert_eq!(columns("partsupp").len(), 5);
        assert_eq!(columns("lineitem").len(), 16);
        assert_eq!(columns("lineitem")[15], "l_comment");
        for t in TABLES {
            assert!(DDL.iter().any(|(d, _)| *d == t), "{t}");
        }
    }

    #[test]
    fn repeated_suppliers_of_a_part_are_dropped() {
        // SF 0.002: 20 suppliers; part 101's stride is 10, so dbgen names
        // supplier 2 for it twice.
        let all: Vec<(i64, i64)> =
            PartSuppGenerator::new(0.002, 1, 1).into_iter().map(|p| (p.ps_partkey, p.ps_suppkey)).collect();
        assert!(all.iter().filter(|k| **k == (101, 2)).count() > 1, "dbgen repeats it");
        let kept: Vec<(i64, i64)> = PartSuppGenerator::new(0.002, 1, 1)
            .into_iter()
            .filter(first_supplier_of_part())
            .map(|p| (p.ps_partkey, p.ps_suppkey))
            .collect();
        let mut unique = kept.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), kept.len());
        assert!(kept.contains(&(101, 2)));
        // At SF 0.01 nothing is dropped.
        let n = PartSuppGenerator::new(0.01, 1, 1).into_iter().count();
        assert_eq!(PartSuppGenerator::new(0.01, 1, 1).into_iter().filter(first_supplier_of_part()).count(), n);
    }

    #[test]
    fn a_tbl_row_becomes_text_values() {
        let loaded = AtomicU64::new(0);
        let mut rows =
            TblRows { rows: NationGenerator::new(0.01, 1, 1).into_iter(), line: String::new(), loaded: &loaded };
        let mut row = Vec::new();
        assert!(rows.next_row(&mut row));
        assert_eq!(row.len(), columns("nation").len());
        assert_eq!(row[0], Value::Text("0".to_owned()));
        assert_eq!(row[1], Value::Text("ALGERIA".to_owned()));
        let mut n = 1;
        loop {
            row.clear();
            if !rows.next_row(&mut row) {
                break;
            }
            n += 1;
        }
        assert_eq!(n, 25);
        assert_eq!(loaded.load(Ordering::Relaxed), 25);
    }
}
