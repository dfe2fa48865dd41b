//! `pgtier demo htap`'s pieces (crates/bench/src/htap_demo): the
//! freshness proof on its own, then the whole demo at its smallest
//! settings against a private PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::ch;
use pgtier_bench::htap_demo::{self, HtapControl, HtapOptions, HtapReport, freshness};
use pgtier_bench::target::Target;
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::targets::postgres::PgTarget;
use pgtier_bench::tpch;
use pgtier_engine::CommitMode;

/// TPC-H loaded into the embedded engine with the copies on, then the
/// proof: every count must include the row committed just before it. In a
/// build without the analytic executor the reader runs on the row path
/// (its recorded path says so) and must still count every row.
#[test]
fn freshness_counts_every_committed_row() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = EmbeddedTarget::open(&dir.path().join("e"), CommitMode::Async).unwrap();
    tpch::schema::populate(&embedded, 0.001, 2, &mut |_, _| {}).unwrap();
    tpch::compression::measure(&embedded, true).unwrap();
    let mut calls = 0;
    let f = freshness::run(&embedded, 120, &mut |done, of| {
        assert!(done < of);
        calls += 1;
        true
    })
    .unwrap();
    println!("{f:?}");
    assert_eq!(calls, 3, "progress every 50 queries");
    assert_eq!((f.asked, f.queries, f.fresh, f.stale, f.failed), (120, 120, 120, 0, 0), "{f:?}");
    assert!(f.first_problem.is_none());
    assert!(f.query.starts_with("SELECT count(*) FROM orders WHERE o_orderkey > "), "{}", f.query);
    assert!(f.columnar() || f.path.contains("no analytic executor"), "{}", f.path);
    assert!(f.query_p50_ms > 0.0 && f.query_p99_ms >= f.query_p50_ms && f.insert_p50_ms > 0.0, "{f:?}");
    // The 120 orders are there: the proof counted real commits.
    let mut s = embedded.connect().unwrap();
    let n = s.simple_query("SELECT count(*) FROM orders WHERE o_comment LIKE 'pgtier freshness %'").unwrap();
    assert_eq!(n[0][0].as_deref(), Some("120"));
    // Stopped by its progress callback: the figures cover what ran.
    let f = freshness::run(&embedded, 200, &mut |done, _| done < 50).unwrap();
    assert_eq!((f.asked, f.queries, f.fresh), (200, 50, 50), "{f:?}");
    pgtier_sql::stop_analytics(embedded.database());
}

/// The whole demo at its smallest settings (about a minute and a half in
/// a test build on the 2-core VM): every section written, the charts
/// drawn, nothing failed.
#[test]
fn demo_htap_end_to_end_at_the_smallest_settings() {
    let started = Instant::now();
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let work = tempfile::tempdir().unwrap();
    let options = HtapOptions {
        tpch_scale: 0.001,
        tpch_runs: 1,
        tpch_timeout: Duration::from_secs(60),
        ch_warehouses: 1,
        ch_test_scale: true,
        ch_clients: 1,
        ch_streams: 1,
        ch_rampup: Duration::ZERO,
        ch_measure: Duration::from_secs(2),
        ch_query_timeout: Duration::from_secs(10),
        freshness_queries: 30,
        duckdb: true,
        duckdb_threads: None,
        load_streams: 2,
        seed: 2004,
        work_dir: work.path().join("work"),
        out_dir: work.path().join("out"),
    };
    let interrupt = AtomicBool::new(false);
    let control = HtapControl {
        tpch_url: cluster.create_database("tpch").unwrap(),
        ch_url: cluster.create_database("ch").unwrap(),
        interrupt: &interrupt,
        progress: false,
    };
    let mut report = HtapReport::default();
    htap_demo::run(&options, &control, &mut report).unwrap();
    let (path, text) = htap_demo::write_report(&report, &options.out_dir).unwrap();
    println!("{text}\ntook {:.1} s", started.elapsed().as_secs_f64());
    assert!(report.finished && report.stopped_by.is_none());
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    for section in htap_demo::SECTIONS {
        assert!(text.contains(section), "{section} missing");
    }
    assert_eq!(report.tpch.as_ref().unwrap().queries.len(), 22);
    assert_eq!(report.freshness.as_ref().unwrap().fresh, 30);
    let ch = report.ch.as_ref().unwrap();
    assert!(ch.analytics && ch.sides.len() == 2, "{:?}", ch.sides.len());
    assert!(ch.sides[1].copies.as_ref().is_some_and(|c| c.refused.is_empty()), "{:?}", ch.sides[1].copies);
    // The executor's presence is told, either way, and the report says so.
    let present = report.executor.present.expect("EXPLAIN told");
    // Each embedded phase says how its analytic SELECTs ran and what the
    // copies' upkeep did; with the executor, phase b's all ran columnar.
    let route = |k| ch.sides[1].phase(k).and_then(|p| p.route.clone()).expect("the embedded engine reports its route");
    let (alone, together) = (route(ch::PhaseKind::OlapAlone), route(ch::PhaseKind::Together));
    assert!(route(ch::PhaseKind::OltpAlone).merges > 0, "the OLTP stream's changes were merged");
    if present {
        assert!(alone.columnar > 0 && together.columnar > 0, "{alone:?} {together:?}");
        assert_eq!((alone.fallbacks, together.fallbacks), (0, 0), "{alone:?} {together:?}");
    }
    assert!(ch.sides[0].phases.iter().all(|p| p.route.is_none()), "PostgreSQL keeps no such counters");
    assert_eq!(text.contains("NO ANALYTIC EXECUTOR"), !present);
    assert_eq!(report.duckdb.as_ref().unwrap().skipped.is_none(), htap_demo::duckdb::available());
    // DuckDB, when it ran, answered with PostgreSQL's row counts: a time
    // over other rows (char padding kept, say) is no reference.
    if let Some(d) = report.duckdb.as_ref().filter(|d| d.skipped.is_none()) {
        // On as many threads as pgtier's analytic executor, unless told otherwise.
        let pgtier_threads = d.pgtier_threads.expect("the executor's threads are recorded");
        assert_eq!(d.threads.as_deref(), Some(pgtier_threads.to_string().as_str()), "DuckDB's threads");
        // The export goes page by page (more lineitems than a page) and loses none.
        let pg = PgTarget::open(&control.tpch_url).unwrap();
        let count = pg.connect().unwrap().simple_query("SELECT count(*) FROM lineitem").unwrap()[0][0].clone().unwrap();
        let exported = work.path().join("exported");
        htap_demo::duckdb::export(&pg, &exported).unwrap();
        let csv = std::fs::read_to_string(exported.join("lineitem.csv")).unwrap();
        assert!(count.parse::<usize>().unwrap() > htap_demo::duckdb::EXPORT_PAGE_ROWS, "{count}");
        assert_eq!(csv.lines().count().to_string(), count);
        for q in &report.tpch.as_ref().unwrap().queries {
            let pg = q.side(tpch::SideKind::Postgresql).and_then(|s| s.rows);
            assert_eq!(d.query(q.query).and_then(|dq| dq.rows), pg, "Q{} on DuckDB", q.query);
        }
    }
    let dir = path.parent().unwrap();
    for file in ["htap.json", "htap-tpch-times.png", "htap-tpch-times.svg", "htap-ch.png", "htap-ch.svg"] {
        assert!(dir.join(file).exists(), "{file} missing");
    }
    // The work directory is the demo's: nothing left in it.
    assert!(std::fs::read_dir(&options.work_dir).map_or(true, |mut d| d.next().is_none()));
}

/// Ctrl-C before the first phase: nothing measured, the report says where
/// it stopped.
#[test]
fn an_interrupted_demo_says_where_it_stopped() {
    let work = tempfile::tempdir().unwrap();
    let options = HtapOptions {
        tpch_scale: 0.001,
        tpch_runs: 0,
        tpch_timeout: Duration::from_secs(1),
        ch_warehouses: 1,
        ch_test_scale: true,
        ch_clients: 1,
        ch_streams: 1,
        ch_rampup: Duration::ZERO,
        ch_measure: Duration::from_secs(1),
        ch_query_timeout: Duration::from_secs(1),
        freshness_queries: 0,
        duckdb: false,
        duckdb_threads: None,
        load_streams: 1,
        seed: 1,
        work_dir: work.path().join("work"),
        out_dir: work.path().join("out"),
    };
    let interrupt = AtomicBool::new(true);
    let control = HtapControl {
        tpch_url: "postgresql://nobody@127.0.0.1:1/none".into(),
        ch_url: "postgresql://nobody@127.0.0.1:1/none".into(),
        interrupt: &interrupt,
        progress: false,
    };
    let mut report = HtapReport::default();
    let outcome = htap_demo::run(&options, &control, &mut report);
    assert!(matches!(outcome, Err(htap_demo::HtapError::Interrupted { .. })), "{outcome:?}");
    let (_, text) = htap_demo::write_report(&report, &options.out_dir).unwrap();
    assert!(text.contains("**Stopped early: interrupted during TPC-H"), "{text}");
}
