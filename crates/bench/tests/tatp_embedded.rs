//! TATP in direct mode on the embedded engine: population, a closed-loop
//! run with its success ratios and a consistent final state, and a
//! differential run: the same seeded sequence of transactions on PostgreSQL
//! and on the engine must leave identical tables.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use pgtier_backend::harness::shared_cluster;
use pgtier_bench::driver::{LiveCounters, LoadSpec, WorkloadClient, run_repetition};
use pgtier_bench::target::{Session, Target, Value};
use pgtier_bench::targets::embedded::EmbeddedTarget;
use pgtier_bench::targets::postgres::PgTarget;
use pgtier_bench::tatp::population::{PopulateOptions, populate};
use pgtier_bench::tatp::random::SubscriberKeys;
use pgtier_bench::tatp::transactions::{TatpClient, TxnType};
use pgtier_bench::tatp::{TatpWorkload, check_population};
use pgtier_engine::CommitMode;

const SUBSCRIBERS: u64 = 1_000;

fn query(s: &mut dyn Session, sql: &str) -> Vec<Value> {
    let stmt = s.prepare(sql).unwrap();
    let mut out = Vec::new();
    s.query(stmt, &[], &mut out).unwrap();
    out
}

fn count(s: &mut dyn Session, sql: &str) -> i64 {
    match query(s, sql).as_slice() {
        [Value::Int(n)] => *n,
        other => panic!("{sql}: {other:?}"),
    }
}

/// Orphans and key-rule violations; all must be zero in a consistent state.
const INTEGRITY: [&str; 4] = [
    "SELECT count(*) FROM access_info a LEFT JOIN subscriber s ON s.s_id = a.s_id WHERE s.s_id IS NULL",
    "SELECT count(*) FROM special_facility f LEFT JOIN subscriber s ON s.s_id = f.s_id WHERE s.s_id IS NULL",
    "SELECT count(*) FROM call_forwarding c LEFT JOIN special_facility f \
     ON f.s_id = c.s_id AND f.sf_type = c.sf_type WHERE f.s_id IS NULL",
    "SELECT count(*) FROM subscriber WHERE sub_nbr <> lpad(s_id::text, 15, '0')",
];

#[test]
fn population_run_and_consistent_state() {
    let dir = tempfile::tempdir().unwrap();
    let target = EmbeddedTarget::open(dir.path(), CommitMode::Async).unwrap();
    assert!(check_population(&target).is_err(), "no tables yet");
    let report =
        populate(&target, &PopulateOptions { subscribers: SUBSCRIBERS, streams: 3, seed: 9, progress: false }).unwrap();
    let mut s = target.connect().unwrap();
    for t in &report.tables {
        let stored = count(s.as_mut(), &format!("SELECT count(*) FROM {}", t.table));
        assert_eq!(stored as u64, t.rows, "{}: reported vs stored rows", t.table);
        assert!(t.deviation_percent().abs() < 10.0, "{}: {} rows vs {} expected", t.table, t.rows, t.expected_rows);
    }
    assert_eq!(check_population(&target).unwrap(), SUBSCRIBERS);
    for sql in INTEGRITY {
        assert_eq!(count(s.as_mut(), sql), 0, "{sql}");
    }
    // Keys exist: the engine enforces them.
    let fk = s.prepare("INSERT INTO call_forwarding VALUES (1, 9, 0, 1, 'x')").unwrap();
    assert_eq!(s.execute(fk, &[]).unwrap_err().sqlstate.as_deref(), Some("23503"));
    let dup = s.prepare("UPDATE subscriber SET sub_nbr = '000000000000002' WHERE s_id = 1").unwrap();
    assert_eq!(s.execute(dup, &[]).unwrap_err().sqlstate.as_deref(), Some("23505"));

    let workload = TatpWorkload { keys: SubscriberKeys::new(1, SUBSCRIBERS, false) };
    let spec = LoadSpec {
        threads: 2,
        rate_per_s: None,
        ramp_up: Duration::from_millis(100),
        measure: Duration::from_millis(1500),
        ramp_down: Duration::from_millis(50),
        seed: 5,
    };
    let tally = run_repetition(&target, &workload, &spec, &LiveCounters::default(), &mut |_, _| {}).unwrap();
    let by = |t: TxnType| &tally.txns[t as usize];
    for t in TxnType::ALL {
        assert!(by(t).executed + by(t).acceptable_errors > 0, "{} never ran", t.name());
    }
    let ratio = |t: TxnType| by(t).found as f64 / (by(t).executed + by(t).acceptable_errors) as f64;
    assert_eq!(ratio(TxnType::GetSubscriberData), 1.0);
    assert_eq!(ratio(TxnType::UpdateLocation), 1.0);
    for (t, lo, hi) in [
        (TxnType::GetAccessData, 0.55, 0.70),
        (TxnType::UpdateSubscriberData, 0.5, 0.75),
        (TxnType::GetNewDestination, 0.10, 0.35),
        (TxnType::InsertCallForwarding, 0.15, 0.50),
        (TxnType::DeleteCallForwarding, 0.15, 0.50),
    ] {
        let r = ratio(t);
        assert!((lo..=hi).contains(&r), "{} success {r} outside {lo}..{hi}", t.name());
    }
    assert!(by(TxnType::InsertCallForwarding).acceptable_errors > 0, "ICF hits FK/PK violations");
    let backend = tally.backend.clone().expect("engine figures");
    assert!(backend.source.starts_with("pgtier engine"), "{backend:?}");
    assert!(backend.commits > 0 && backend.wal_bytes > 0, "{backend:?}");
    assert!(backend.cpu_percent.is_some_and(|c| c > 0.0), "{backend:?}");

    assert_eq!(count(s.as_mut(), "SELECT count(*) FROM subscriber"), SUBSCRIBERS as i64);
    for sql in INTEGRITY {
        assert_eq!(count(s.as_mut(), sql), 0, "{sql}");
    }
    target.database().verify().unwrap();
}

/// Full contents of the four tables, ordered by primary key.
fn contents(s: &mut dyn Session) -> Vec<(String, Vec<Value>)> {
    [
        ("subscriber", "s_id"),
        ("access_info", "s_id, ai_type"),
        ("special_facility", "s_id, sf_type"),
        ("call_forwarding", "s_id, sf_type, start_time"),
    ]
    .iter()
    .map(|(t, key)| (t.to_string(), query(s, &format!("SELECT * FROM {t} ORDER BY {key}"))))
    .collect()
}

fn run_sequence(target: &dyn Target, seed: u64, n: usize) -> Vec<usize> {
    let keys = SubscriberKeys::new(1, SUBSCRIBERS, false);
    let mut client = TatpClient::new(target.connect().unwrap(), keys, seed).unwrap();
    let mut kinds = vec![0usize; 7];
    for _ in 0..n {
        let (kind, _) = client.run_next().unwrap();
        kinds[kind] += 1;
    }
    kinds
}

#[test]
fn same_transactions_leave_the_same_tables_as_postgresql() {
    let cluster = shared_cluster().unwrap();
    let pg = PgTarget::open(&cluster.url()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedded = EmbeddedTarget::open(dir.path(), CommitMode::Sync).unwrap();
    let options = PopulateOptions { subscribers: SUBSCRIBERS, streams: 2, seed: 77, progress: false };
    populate(&pg, &options).unwrap();
    populate(&embedded, &options).unwrap();
    let mut pg_session = pg.connect().unwrap();
    let mut em_session = embedded.connect().unwrap();
    assert!(contents(pg_session.as_mut()) == contents(em_session.as_mut()), "populations differ");

    // NURand over 1,000 subscribers: hot rows are written many times over,
    // and inserts and deletes of call forwardings meet each other.
    let n = 20_000;
    let on_pg = run_sequence(&pg, 1234, n);
    let on_embedded = run_sequence(&embedded, 1234, n);
    assert_eq!(on_pg, on_embedded, "same transaction types drawn");
    assert!(on_pg.iter().all(|&k| k > 0), "{on_pg:?}");
    let a = contents(pg_session.as_mut());
    let b = contents(em_session.as_mut());
    for ((table, rows_pg), (_, rows_em)) in a.iter().zip(&b) {
        assert_eq!(rows_pg.len(), rows_em.len(), "{table}: value counts differ");
        if let Some(i) = rows_pg.iter().zip(rows_em).position(|(x, y)| x != y) {
            panic!("{table}: first difference at value {i}: postgres {:?} vs embedded {:?}", rows_pg[i], rows_em[i]);
        }
    }
}
