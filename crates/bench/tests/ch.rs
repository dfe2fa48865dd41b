//! CH-benCHmark at the test-only scale (1 warehouse of 1,000 items and
//! 300 customers per district) on a private PostgreSQL and the embedded
//! engine: population, the 22 answers compared, then the three phases of a
//! few seconds each (crates/bench/src/ch). Every answer must be compared,
//! and identical wherever the engine answers; OLTP must commit New-Orders
//! in both its phases, the analytic streams must finish queries in theirs,
//! and TPC-C's consistency must hold after the last.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::ch::{self, ChOptions, NoProgress, PhaseKind, Side, SideKind, Status};
use pgtier_bench::target::Target;
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::targets::postgres::{CopyFormat, PgTarget};
use pgtier_bench::tpcc::Scale;
use pgtier_engine::CommitMode;

#[test]
fn ch_benchmark_runs_all_phases_and_compares_every_answer() {
    let started = Instant::now();
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let pg = PgTarget::open(&cluster.url()).unwrap().with_copy_format(CopyFormat::Text);
    let dir = tempfile::tempdir().unwrap();
    let embedded = EmbeddedTarget::open(&dir.path().join("embedded"), CommitMode::Async).unwrap();
    let sides = [
        Side { kind: SideKind::Postgresql, target: &pg as &dyn Target },
        Side { kind: SideKind::Embedded, target: &embedded },
    ];
    let options = ChOptions {
        scale: Scale::small(1),
        clients: 2,
        analytic_streams: 1,
        rampup: Duration::from_secs(1),
        measure: Duration::from_secs(4),
        query_timeout: Duration::from_secs(5),
        load_streams: 2,
        seed: 2011,
        analytics: false,
    };
    let report = ch::run(&options, &sides, &mut NoProgress).unwrap();
    print!("{}", ch::output::summary(&report));
    println!("took {:.1} s", started.elapsed().as_secs_f64());

    // Both targets loaded the same rows, CH-benCHmark's three tables included.
    let rows = |i: usize| {
        let l = &report.sides[i].load;
        l.tpcc.rows.iter().chain(&l.ch_rows).cloned().collect::<Vec<_>>()
    };
    assert_eq!(rows(0), rows(1));
    assert!(rows(0).contains(&("supplier".to_owned(), 10_000)) && rows(0).contains(&("nation".to_owned(), 62)));

    // All 22 answers compared; where the engine answers, identically.
    assert_eq!(report.answers.len(), 22);
    for q in &report.answers {
        assert_eq!(q.side(SideKind::Postgresql).map(|s| &s.status), Some(&Status::Reference), "Q{}", q.query);
        let e = &q.side(SideKind::Embedded).unwrap().status;
        assert!(
            matches!(e, Status::Identical | Status::Refused { .. } | Status::Timeout { .. }),
            "Q{}: {}",
            q.query,
            e.describe()
        );
        if !matches!(e, Status::Identical) {
            println!("Q{} on the engine: {}", q.query, e.describe());
        }
    }
    // A query with rows to compare: the check is not vacuous.
    let q1 = &report.answers[0];
    assert!(q1.side(SideKind::Postgresql).and_then(|s| s.rows).unwrap() >= 5, "Q1 groups by ol_number");

    for s in &report.sides {
        for kind in [PhaseKind::OltpAlone, PhaseKind::Together, PhaseKind::OltpAloneAgain] {
            assert!(s.nopm(kind).is_some_and(|n| n > 0.0), "{:?} {kind:?}: {:?}", s.side, s.phase(kind));
        }
        for kind in [PhaseKind::OlapAlone, PhaseKind::OlapAloneAgain] {
            let olap = s.phase(kind).and_then(|p| p.analytic.as_ref()).unwrap();
            assert!(olap.completed > 0 || olap.outside_window > 0, "{:?} {kind:?}: no query ran: {olap:?}", s.side);
        }
        assert_eq!(s.phases.iter().map(|p| p.kind).collect::<Vec<_>>(), PhaseKind::ALL, "{:?}", s.side);
        assert!(s.phase(PhaseKind::Together).and_then(|p| p.analytic.as_ref()).is_some());
        assert!(s.nopm_kept_pct().is_some() && s.nopm_alone_drift_pct().is_some(), "{:?}", s.side);
        assert!(s.checks_passed(), "{:?}: {:#?}", s.side, s.checks);
        // The OLTP stream of phase a added order lines before phase b.
        let lines = |k| s.phase(k).and_then(|p| p.order_lines_before).unwrap();
        assert!(lines(PhaseKind::OlapAlone) > lines(PhaseKind::OltpAlone), "{:?}", s.side);
        // ... and c's before d: d reads the tables as c left them.
        assert!(lines(PhaseKind::OlapAloneAgain) > lines(PhaseKind::Together), "{:?}", s.side);
        // Where a query was timed in b, c and d, its alone figure is the mean of b's and d's.
        let timed = (1..=22u8).find(|&q| {
            [PhaseKind::OlapAlone, PhaseKind::Together, PhaseKind::OlapAloneAgain]
                .iter()
                .all(|&k| s.median_ms(k, q).is_some())
        });
        if let Some(q) = timed {
            let (b, d) =
                (s.median_ms(PhaseKind::OlapAlone, q).unwrap(), s.median_ms(PhaseKind::OlapAloneAgain, q).unwrap());
            assert_eq!(s.alone_median_ms(q), Some((b + d) / 2.0), "{:?} Q{q}", s.side);
        }
    }
    assert!(report.failures().is_empty(), "{:#?}", report.failures());
    let md = ch::output::markdown(&report);
    for line in md.lines().filter(|l| l.starts_with("- Q") || l.starts_with("| embedded")) {
        println!("{line}");
    }
    for section in ["## Phases", "## Per query", "## Answers compared", "pgtier's analytic executor ran with cpu_share"]
    {
        assert!(md.contains(section), "{section}: {md}");
    }
}
