//! TPC-C at the test-only scale (2 warehouses of 1,000 items and 300
//! customers per district) on a private PostgreSQL, an in-process pgtier
//! server and the embedded engine: population, a few seconds of the mix
//! on 2 clients, and the spec's consistency conditions on every target,
//! after the load and after the run (crates/bench/src/tpcc).
//!
//! Then the checks are shown to fail: each condition is broken on purpose
//! with one statement, on the embedded engine and on PostgreSQL, and must
//! fail there, and only that condition.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::target::Target;
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::targets::postgres::{CopyFormat, PgTarget};
use pgtier_bench::tpcc::consistency::run_checks;
use pgtier_bench::tpcc::{self, NoProgress, Scale, Side, SideKind, TpccOptions};
use pgtier_engine::CommitMode;
use pgtier_server::ServerConfig;

/// The clauses of the checks that fail on `target`.
fn failing(target: &dyn Target) -> Vec<String> {
    run_checks(target).unwrap().into_iter().filter(|c| !c.passed()).map(|c| c.clause).collect()
}

#[test]
fn tpcc_runs_consistently_on_every_target() {
    let started = Instant::now();
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let pg = PgTarget::open(&cluster.url()).unwrap().with_copy_format(CopyFormat::Text);
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\ncommit_mode = \"async\"\n[auth]\nmethod = \"trust\"\n",
        dir.path().join("server").display().to_string()
    );
    let server = pgtier_server::start(ServerConfig::from_toml_str(&toml).unwrap()).unwrap();
    let addr = server.local_addr();
    let served = PgTarget::open(&format!("postgres://app@{}:{}/app", addr.ip(), addr.port()))
        .unwrap()
        .with_copy_format(CopyFormat::Text);
    assert!(served.is_pgtier());
    let embedded = EmbeddedTarget::open(&dir.path().join("embedded"), CommitMode::Async).unwrap();
    let sides = [
        Side { kind: SideKind::Postgresql, target: &pg as &dyn Target },
        Side { kind: SideKind::PgtierServer, target: &served },
        Side { kind: SideKind::Embedded, target: &embedded },
    ];
    let options = TpccOptions {
        scale: Scale::small(2),
        clients: 2,
        rampup: Duration::from_secs(1),
        measure: Duration::from_secs(4),
        load_streams: 2,
        seed: 34,
    };
    let report = tpcc::run(&options, &sides, &mut NoProgress).unwrap();
    print!("{}", tpcc::output::summary(&report));
    println!("took {:.1} s", started.elapsed().as_secs_f64());
    assert!(report.failures().is_empty(), "{:#?}", report.failures());

    // The same seed loads the same rows everywhere.
    let pg_rows = report.sides[0].load.as_ref().unwrap().rows.clone();
    assert_eq!(pg_rows.iter().find(|(t, _)| t == "stock").unwrap().1, 2_000);
    assert_eq!(pg_rows.iter().find(|(t, _)| t == "customer").unwrap().1, 6_000);
    assert_eq!(pg_rows.iter().find(|(t, _)| t == "new_order").unwrap().1, 1_800);
    for s in &report.sides[1..] {
        assert_eq!(s.load.as_ref().unwrap().rows, pg_rows, "{:?} loaded other rows", s.side);
    }
    for s in &report.sides {
        assert!(s.error.is_none(), "{:?}: {:?}", s.side, s.error);
        assert_eq!(s.checks.len(), 6, "{:?}", s.checks);
        assert!(s.checks_passed(), "{:?}: {:#?}", s.side, s.checks);
        let committed: u64 = s.transactions.iter().map(|t| t.committed).sum();
        assert!(s.nopm > 0.0 && s.tpm > s.nopm, "{:?}: NOPM {} TPM {}", s.side, s.nopm, s.tpm);
        // Enough transactions that every type of the mix came up.
        if committed > 300 {
            for t in &s.transactions {
                assert!(t.committed > 0, "{:?}: no {} committed", s.side, t.name);
                assert!(t.p50_us > 0.0 && t.p99_us >= t.p50_us, "{:?} {}: {t:?}", s.side, t.name);
            }
        }
    }
    let md = tpcc::output::markdown(&report);
    assert!(md.contains("## Differences between the sides") && md.contains("Delivery runs in-line"), "{md}");

    // Each condition broken on purpose fails alone, on the engine...
    // (3.3.2.3: a hole below the newest undelivered order of a district;
    // the run delivered and added orders, so ask which one that is.)
    let mut session = embedded.connect().unwrap();
    let rows =
        session.simple_query("SELECT max(no_o_id), count(*) FROM new_order WHERE no_w_id = 2 AND no_d_id = 4").unwrap();
    let newest: i64 = rows[0][0].as_deref().unwrap().parse().unwrap();
    assert!(rows[0][1].as_deref().unwrap().parse::<i64>().unwrap() >= 3, "{rows:?}");
    // (sql, the statement undoing it, the clauses that must fail in between)
    let newest_hole = format!("DELETE FROM new_order WHERE no_w_id = 2 AND no_d_id = 4 AND no_o_id = {}", newest - 1);
    let breaks: [(&str, Option<&str>, &[&str]); 5] = [
        (
            "UPDATE district SET d_ytd = d_ytd + 1 WHERE d_w_id = 1 AND d_id = 1",
            Some("UPDATE district SET d_ytd = d_ytd - 1 WHERE d_w_id = 1 AND d_id = 1"),
            &["3.3.2.1", "3.3.2.9"],
        ),
        (
            "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = 1 AND d_id = 2",
            Some("UPDATE district SET d_next_o_id = d_next_o_id - 1 WHERE d_w_id = 1 AND d_id = 2"),
            &["3.3.2.2"],
        ),
        (
            "UPDATE history SET h_amount = h_amount + 1 WHERE h_w_id = 2 AND h_d_id = 6 AND h_c_id = 1",
            Some("UPDATE history SET h_amount = h_amount - 1 WHERE h_w_id = 2 AND h_d_id = 6 AND h_c_id = 1"),
            &["3.3.2.8", "3.3.2.9"],
        ),
        (&newest_hole, None, &["3.3.2.3"]),
        (
            "DELETE FROM order_line WHERE ol_w_id = 2 AND ol_d_id = 5 AND ol_o_id = 1 AND ol_number = 1",
            None,
            &["3.3.2.4"],
        ),
    ];
    for (sql, undo, expected) in breaks {
        let before = failing(&embedded);
        embedded.execute_batch(sql).unwrap();
        let after: Vec<String> = failing(&embedded).into_iter().filter(|c| !before.contains(c)).collect();
        assert_eq!(after, expected, "{sql}");
        if let Some(undo) = undo {
            embedded.execute_batch(undo).unwrap();
            assert_eq!(failing(&embedded), before, "{undo}");
        }
    }
    // ... and on PostgreSQL, where the report says what is wrong.
    pg.execute_batch("UPDATE district SET d_ytd = d_ytd + 0.01 WHERE d_w_id = 2 AND d_id = 7").unwrap();
    let checks = run_checks(&pg).unwrap();
    let broken: Vec<_> = checks.iter().filter(|c| !c.passed()).collect();
    assert_eq!(broken.iter().map(|c| c.clause.as_str()).collect::<Vec<_>>(), ["3.3.2.1", "3.3.2.9"]);
    assert!(broken[0].violations[0].starts_with("warehouse 2: W_YTD "), "{:?}", broken[0]);
    server.shutdown();
}
