//! TPC-H at a small scale on a private PostgreSQL, an in-process pgtier
//! server and the embedded engine: all 22 queries, every answer compared
//! with PostgreSQL's (crates/bench/src/tpch).
//!
//! Fails when an answer changes from what [`KNOWN`] says: a query not in
//! the list must be `identical` on both pgtier targets, and a query in it
//! must still fail exactly as listed, so a fix forces the list to shrink.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::target::Target;
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::targets::postgres::{CopyFormat, PgTarget};
use pgtier_bench::tpch::{self, NoProgress, Side, SideKind, Status, TpchOptions};
use pgtier_engine::CommitMode;
use pgtier_server::ServerConfig;

/// Small enough that the test build runs the 22 queries on three targets in
/// under a minute (about 45 s on the shared 2-core VM, most of it Q19 on
/// pgtier), large enough that all but [`EMPTY_AT_SCALE`] return rows.
const SCALE: f64 = 0.003;
/// Far above any query's time at SCALE: a timeout here is a hang.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Queries whose answer is empty at [`SCALE`] on PostgreSQL too (still
/// compared, empty with empty): with 30 suppliers, France/Germany (Q7) and
/// Saudi Arabia (Q21) have too few of them, and Q11's FRACTION (0.0001/SF
/// = 0.033) is above any German part's share. SF 0.01 fills them, but
/// takes minutes on pgtier today (Q19, Q13).
const EMPTY_AT_SCALE: &[u8] = &[7, 11, 21];

/// What pgtier answers wrongly or refuses today, per target: (query,
/// target, expected status word, a piece of the detail). Each entry is
/// asserted to still fail this way; remove it when it is fixed.
const KNOWN: &[(u8, SideKind, &str, &str)] = &[];

#[test]
fn tpch_answers_match_postgresql() {
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
    assert!(served.is_pgtier(), "the server says it is pgtier");
    let embedded = EmbeddedTarget::open(&dir.path().join("embedded"), CommitMode::Async).unwrap();

    let sides = [
        Side { kind: SideKind::Postgresql, target: &pg },
        Side { kind: SideKind::PgtierServer, target: &served },
        Side { kind: SideKind::Embedded, target: &embedded },
    ];
    let options = TpchOptions {
        scale: SCALE,
        // Answers only: one run per query and target.
        runs: 0,
        timeout: TIMEOUT,
        load_streams: 2,
        queries: (1..=22).collect(),
        skip_load: false,
        analytics: false,
    };
    let report = tpch::run(&options, &sides, &mut NoProgress).unwrap();
    println!("{}", tpch::output::summary(&report));
    for q in &report.queries {
        for s in &q.sides {
            if !matches!(s.status, Status::Reference | Status::Identical) {
                println!("Q{} {:?}: {}", q.query, s.side, s.status.describe());
            }
        }
    }
    println!("took {:.1} s", started.elapsed().as_secs_f64());

    // The data is the same everywhere: PostgreSQL's row counts on all sides.
    let pg_rows = report.sides[0].load.as_ref().unwrap().rows.clone();
    assert!(pg_rows.iter().all(|(_, n)| *n > 0), "{pg_rows:?}");
    for s in &report.sides[1..] {
        assert_eq!(s.load.as_ref().unwrap().rows, pg_rows, "{:?} loaded other rows", s.side);
    }
    assert_eq!(report.sides[0].load.as_ref().unwrap().analyze, "ok");
    // Every target bounds its queries itself; the client-side cut-off is
    // only a safety net.
    assert!(report.sides.iter().all(|s| s.timeout_method == "statement_timeout"), "{:?}", report.sides);

    // PostgreSQL answers every query, with rows where the scale allows.
    for q in &report.queries {
        let pg = q.side(SideKind::Postgresql).unwrap();
        assert_eq!(pg.status, Status::Reference, "Q{}: PostgreSQL: {}", q.query, pg.status.describe());
        let empty = pg.rows.unwrap() == 0;
        assert_eq!(empty, EMPTY_AT_SCALE.contains(&q.query), "Q{}: {:?} rows at SF {SCALE}", q.query, pg.rows);
    }

    let mut unexpected = Vec::new();
    for q in &report.queries {
        for s in q.sides.iter().filter(|s| s.side != SideKind::Postgresql) {
            let known = KNOWN.iter().find(|(n, side, _, _)| *n == q.query && *side == s.side);
            match (known, &s.status) {
                (None, Status::Identical) => {}
                (None, other) => unexpected.push(format!("Q{} {:?}: {}", q.query, s.side, other.describe())),
                (Some((_, _, word, detail)), status) => {
                    if status.short() != *word || !status.describe().contains(detail) {
                        unexpected.push(format!(
                            "Q{} {:?}: listed as known ({word}: {detail}) but now: {}",
                            q.query,
                            s.side,
                            status.describe()
                        ));
                    }
                }
            }
        }
    }
    assert!(unexpected.is_empty(), "answers changed:\n{}", unexpected.join("\n"));

    // The comparison can fail: one lineitem's quantity changed on the
    // embedded engine alone makes its Q1 (sum_qty, avg_qty) DIFFERENT, and
    // the report names the row; the server's answer stays identical.
    embedded
        .execute_batch("UPDATE lineitem SET l_quantity = l_quantity + 1 WHERE l_orderkey = 1 AND l_linenumber = 1")
        .unwrap();
    // With --analytics: the columnar copy of the embedded target's 8
    // tables, every row copied (the load's counts, Q1's change included)
    // and the compression section filled.
    let changed = TpchOptions { queries: vec![1], skip_load: true, analytics: true, ..options };
    let report = tpch::run(&changed, &sides, &mut NoProgress).unwrap();
    let compression = report.compression.as_ref().expect("--analytics fills the compression section");
    println!("{}", tpch::compression::markdown(compression));
    assert_eq!(compression.tables.len(), 8);
    for t in &compression.tables {
        let (_, loaded) = pg_rows.iter().find(|(name, _)| *name == t.table).unwrap();
        assert_eq!(t.rows, *loaded, "{}: rows in the copy", t.table);
        assert!(t.plain_bytes > 0 && t.columnar_bytes > 0 && t.ratio > 0.0 && t.rows_per_s > 0.0, "{t:?}");
    }
    assert!(compression.ratio > 0.0 && compression.study_004_lineitem == 1.84);
    assert!(tpch::output::markdown(&report).contains("## Compression"));
    assert!(tpch::output::summary(&report).contains("columnar copy (embedded)"));
    let q1 = &report.queries[0];
    assert_eq!(q1.side(SideKind::PgtierServer).unwrap().status, Status::Identical);
    let status = &q1.side(SideKind::Embedded).unwrap().status;
    let Status::Different { first_difference } = status else { panic!("Q1 on the changed engine: {status:?}") };
    println!("Q1 on the changed engine: {}", status.describe());
    assert!(first_difference.starts_with("row ") && first_difference.contains("PostgreSQL has instead"), "{status:?}");
    let options = TpchOptions { analytics: false, ..changed };

    // The timeout path, on the tables already loaded: with 1 ms of
    // statement_timeout, Q1 (an aggregate over all 18,000 lineitems) and Q9
    // (a six-way join) both stop on pgtier with 57014. A timeout is a
    // result: the run goes on, and the second query gets its own timeout,
    // not a broken session.
    let options = TpchOptions { timeout: Duration::from_millis(1), queries: vec![1, 9], skip_load: true, ..options };
    let report = tpch::run(&options, &sides, &mut NoProgress).unwrap();
    println!("{}", tpch::output::summary(&report));
    assert!(report.sides.iter().all(|s| s.load.is_none()), "--skip-load loads nothing");
    for q in &report.queries {
        for s in q.sides.iter().filter(|s| s.side != SideKind::Postgresql) {
            assert_eq!(s.status, Status::Timeout { after_s: 0.001 }, "Q{} on {:?}", q.query, s.side);
            assert_eq!(s.status.describe(), "timeout > 0.001 s");
            assert!(s.timing.is_none() && s.warmup_ms.is_none());
        }
    }
    server.shutdown();
}

/// The compression section's figures at a larger scale, on the embedded
/// engine alone (no PostgreSQL: nothing is compared): TPC-H loaded at
/// `PGTIER_TPCH_SCALE` (default 0.1), then [`tpch::compression::measure`].
/// `cargo test -p pgtier-bench --test tpch compression_at_scale -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: minutes at SF 0.1"]
fn compression_at_scale() {
    let scale: f64 = std::env::var("PGTIER_TPCH_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(0.1);
    let dir = tempfile::tempdir().unwrap();
    let embedded = EmbeddedTarget::open(&dir.path().join("embedded"), CommitMode::Async).unwrap();
    let started = Instant::now();
    let load = tpch::schema::populate(&embedded, scale, 2, &mut |_, _| {}).unwrap();
    println!("SF {scale}: loaded in {:.1} s: {:?}", started.elapsed().as_secs_f64(), load.rows);
    let compression = tpch::compression::measure(&embedded, false).unwrap();
    println!("{}", tpch::compression::markdown(&compression));
    for t in &compression.tables {
        let (_, loaded) = load.rows.iter().find(|(name, _)| *name == t.table).unwrap();
        assert_eq!(t.rows, *loaded, "{}", t.table);
    }
    pgtier_sql::stop_analytics(embedded.database());
}

/// The columnar side (`--analytics`): the embedded target's tables with
/// their copies, read by sessions with `pgtier.analytics = on`, beside the
/// embedded side (`off`, the row path). Every answer must equal
/// PostgreSQL's, and every query's path is recorded: in a build with the
/// analytic executor (`--features pgtier-sql/analytics`) some queries run
/// columnar; without it every path says the executor is missing, and the
/// columnar side's answers are the row path's.
#[test]
fn columnar_side_answers_as_postgresql_and_names_its_path() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let pg = PgTarget::open(&cluster.url()).unwrap().with_copy_format(CopyFormat::Text);
    let dir = tempfile::tempdir().unwrap();
    let embedded = EmbeddedTarget::open(&dir.path().join("embedded"), CommitMode::Async).unwrap();
    let sides = [
        Side { kind: SideKind::Postgresql, target: &pg },
        Side { kind: SideKind::Embedded, target: &embedded },
        Side { kind: SideKind::Columnar, target: &embedded },
    ];
    let options = TpchOptions {
        scale: 0.002,
        runs: 1,
        timeout: TIMEOUT,
        load_streams: 2,
        queries: (1..=22).collect(),
        skip_load: false,
        analytics: true,
    };
    let report = tpch::run(&options, &sides, &mut NoProgress).unwrap();
    let summary = tpch::output::summary(&report);
    println!("{summary}");
    // The copies stayed on for the columnar side: all 8 still listed.
    let mut s = embedded.connect().unwrap();
    let copies = s.simple_query("SELECT count(*) FROM pgtier_analytics_tables").unwrap();
    assert_eq!(copies[0][0].as_deref(), Some("8"));
    assert!(report.sides[2].load.is_none(), "the columnar side loads nothing: its tables are the embedded side's");
    assert!(report.compression.is_some());

    let mut paths = Vec::new();
    for q in &report.queries {
        for s in q.sides.iter().filter(|s| s.side != SideKind::Postgresql) {
            assert_eq!(s.status, Status::Identical, "Q{} on {:?}: {}", q.query, s.side, s.status.describe());
        }
        assert!(q.side(SideKind::Embedded).unwrap().path.is_none(), "only the columnar side is explained");
        let path = q.side(SideKind::Columnar).unwrap().path.clone().expect("the columnar side's path");
        println!("Q{}: {path}", q.query);
        paths.push(path);
    }
    let (columnar, of) = report.columnar_paths();
    assert_eq!(of, 22);
    if paths.iter().any(|p| tpch::lacks_executor(p)) {
        // Queries the translation refuses name their own reason; none is columnar.
        assert!(paths.iter().all(|p| p.starts_with("row path (")), "{paths:?}");
        assert_eq!(columnar, 0);
        assert!(summary.contains("NO ANALYTIC EXECUTOR"), "{summary}");
    } else {
        // With the executor, Q1 and Q6 (one table, filters, aggregates) go
        // columnar, and Q17, whose correlated avg is computed per key.
        for q in [1, 6, 17] {
            assert!(tpch::is_columnar_path(&paths[q - 1]), "Q{q}: {}", paths[q - 1]);
        }
        assert!(!summary.contains("NO ANALYTIC EXECUTOR"), "{summary}");
    }
    assert!(summary.contains("PostgreSQL / pgtier columnar"), "{summary}");
    assert!(summary.contains(&format!("columnar path on {columnar} of 22")), "{summary}");
    assert!(tpch::output::markdown(&report).contains("columnar side's path (EXPLAIN)"));
    // The embedded side's sessions ran with the copies off: its EXPLAIN
    // says so (a session opened as the run opened it).
    let mut row = embedded.connect().unwrap();
    row.simple_query("SET pgtier.analytics = off").unwrap();
    let explain = row.simple_query(&format!("EXPLAIN {}", tpch::queries::all(0.002)[0].sql)).unwrap();
    assert_eq!(tpch::explained_path(&explain), "row path (pgtier.analytics is off)");
    pgtier_sql::stop_analytics(embedded.database());
}
