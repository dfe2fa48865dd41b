//! The freshness proof (study 004: analytic reads are never stale): on a
//! pgtier target whose `orders` has a columnar copy (TPC-H loaded, `SET
//! ANALYTICS ON`), a writer session inserts one order at a time, each
//! committed on its own (autocommit), and right after each commit a reader
//! session with `pgtier.analytics = on` counts the orders above the
//! largest key the load left. Query i must count i rows: fewer is a stale
//! answer (the commit not yet in the copy), more a wrong one. The path the
//! reader's EXPLAIN names is recorded: a proof on the row path would prove
//! nothing about the copy, and the report says so.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::stats::LatencyHistogram;
use crate::target::{DbError, Target, TextRow};

/// What the proof found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FreshnessFigures {
    /// Queries asked for, and run (fewer when interrupted).
    pub asked: u32,
    pub queries: u32,
    /// Answers that counted exactly the rows committed before them.
    pub fresh: u32,
    /// Answers counting fewer (a committed row missing).
    pub stale: u32,
    /// Answers counting more, or unreadable; errors of either session.
    pub failed: u32,
    /// The first stale or failed answer, described.
    pub first_problem: Option<String>,
    /// The reader's query and the path its EXPLAIN names.
    pub query: String,
    pub path: String,
    pub query_p50_ms: f64,
    pub query_p99_ms: f64,
    pub query_max_ms: f64,
    pub insert_p50_ms: f64,
    pub insert_p99_ms: f64,
}

impl FreshnessFigures {
    /// EXPLAIN named the columnar path for the reader's query.
    pub fn columnar(&self) -> bool {
        crate::tpch::is_columnar_path(&self.path)
    }
}

fn number(rows: &[TextRow]) -> Option<i64> {
    rows.first()?.first()?.as_deref()?.parse().ok()
}

/// Runs `queries` insert-then-count pairs on `target` (TPC-H's `orders`
/// with a columnar copy). `progress(done, of)` is called every 50 pairs;
/// false stops the proof there (its figures cover the pairs done).
pub fn run(
    target: &dyn Target,
    queries: u32,
    progress: &mut dyn FnMut(u32, u32) -> bool,
) -> Result<FreshnessFigures, DbError> {
    let mut writer = target.connect()?;
    let mut reader = target.connect()?;
    reader.simple_query("SET pgtier.analytics = on")?;
    let base = number(&reader.simple_query("SELECT max(o_orderkey) FROM orders")?).unwrap_or(0);
    let query = format!("SELECT count(*) FROM orders WHERE o_orderkey > {base}");
    let path = crate::tpch::explained_path(&reader.simple_query(&format!("EXPLAIN {query}"))?);
    let mut figures = FreshnessFigures { asked: queries, query: query.clone(), path, ..FreshnessFigures::default() };
    let (mut query_times, mut insert_times) = (LatencyHistogram::new(), LatencyHistogram::new());
    let problem = |figures: &mut FreshnessFigures, text: String| {
        figures.first_problem.get_or_insert(text);
    };
    for i in 1..=i64::from(queries) {
        if i % 50 == 1 && !progress(figures.queries, queries) {
            break;
        }
        let started = Instant::now();
        let inserted = writer.simple_query(&format!(
            "INSERT INTO orders VALUES ({key}, 1, 'O', {i}.00, DATE '1998-08-02', '1-URGENT', 'Clerk#000000001', 0, \
             'pgtier freshness {i}')",
            key = base + i
        ));
        insert_times.record(started.elapsed());
        figures.queries += 1;
        if let Err(e) = inserted {
            figures.failed += 1;
            problem(&mut figures, format!("insert {i}: {e}"));
            continue;
        }
        let started = Instant::now();
        let answer = reader.simple_query(&query);
        query_times.record(started.elapsed());
        match answer.map(|rows| number(&rows)) {
            Ok(Some(n)) if n == i => figures.fresh += 1,
            Ok(Some(n)) if n < i => {
                figures.stale += 1;
                problem(&mut figures, format!("query {i} counted {n} rows, {i} were committed before it"));
            }
            Ok(other) => {
                figures.failed += 1;
                problem(&mut figures, format!("query {i} answered {other:?}, {i} rows were committed before it"));
            }
            Err(e) => {
                figures.failed += 1;
                problem(&mut figures, format!("query {i}: {e}"));
            }
        }
    }
    let ms = |h: &LatencyHistogram, q: f64| if h.is_empty() { 0.0 } else { h.quantile_us(q) / 1000.0 };
    figures.query_p50_ms = ms(&query_times, 0.5);
    figures.query_p99_ms = ms(&query_times, 0.99);
    figures.query_max_ms = if query_times.is_empty() { 0.0 } else { query_times.max_us() / 1000.0 };
    figures.insert_p50_ms = ms(&insert_times, 0.5);
    figures.insert_p99_ms = ms(&insert_times, 0.99);
    Ok(figures)
}
