//! TATP against a real private PostgreSQL: population (counts, keys, foreign
//! keys), the transaction mix and its error rules, backend sampling, and a
//! fatal error stopping the run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::driver::{DriverError, LiveCounters, LoadSpec, run_repetition};
use pgtier_bench::target::{Target, Value};
use pgtier_bench::targets::postgres::{ClientKind, CopyFormat, PgTarget};
use pgtier_bench::tatp::population::{PopulateOptions, populate};
use pgtier_bench::tatp::random::SubscriberKeys;
use pgtier_bench::tatp::transactions::TxnType;
use pgtier_bench::tatp::{CheckError, TatpWorkload, check_population};

const SUBSCRIBERS: u64 = 4_000;

fn count(client: &mut postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).unwrap().get(0)
}

fn spec(threads: u32, measure: Duration) -> LoadSpec {
    LoadSpec {
        threads,
        rate_per_s: None,
        ramp_up: Duration::from_millis(200),
        measure,
        ramp_down: Duration::from_millis(100),
        seed: 3,
    }
}

#[test]
fn population_workload_and_sampling() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.url();
    let target = PgTarget::open(&url).unwrap();

    // Before population: a clear "tables missing" error.
    match check_population(&target) {
        Err(e @ CheckError::TablesMissing { .. }) => assert!(e.to_string().contains("--populate"), "{e}"),
        other => panic!("expected TablesMissing, got {other:?}"),
    }

    // Text COPY here (the CLI defaults to binary), so both encoders are
    // exercised against the server; the second run replaces the first.
    let text = target_with(&url, CopyFormat::Text);
    populate(&text, &PopulateOptions { subscribers: 500, streams: 2, seed: 9, progress: false }).unwrap();
    let report =
        populate(&target, &PopulateOptions { subscribers: SUBSCRIBERS, streams: 3, seed: 9, progress: false }).unwrap();
    let mut client = pgtier_backend::connect(&url).unwrap();
    for t in &report.tables {
        let in_db = count(&mut client, &format!("SELECT count(*) FROM {}", t.table));
        assert_eq!(in_db as u64, t.rows, "{}: reported vs stored rows", t.table);
        assert!(t.deviation_percent().abs() < 6.0, "{}: {} rows vs {} expected", t.table, t.rows, t.expected_rows);
    }
    assert_eq!(check_population(&target).unwrap(), SUBSCRIBERS);
    assert_eq!(
        count(&mut client, "SELECT count(*) FROM subscriber WHERE sub_nbr = lpad(s_id::text, 15, '0')"),
        SUBSCRIBERS as i64
    );
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND contype = 'f' AND convalidated"
        ),
        3
    );
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND contype IN ('p', 'u')"
        ),
        5
    );
    let fk = client.batch_execute("INSERT INTO call_forwarding VALUES (1, 9, 0, 1, 'x')").unwrap_err();
    assert_eq!(fk.code().unwrap().code(), "23503");
    let dup = client.batch_execute("UPDATE subscriber SET sub_nbr = '000000000000002' WHERE s_id = 1").unwrap_err();
    assert_eq!(dup.code().unwrap().code(), "23505");

    // The mix: every type runs, success ratios follow the population rules,
    // acceptable errors are counted apart.
    let workload = TatpWorkload { keys: SubscriberKeys::new(1, SUBSCRIBERS, false) };
    let live = LiveCounters::default();
    let tally = run_repetition(&target, &workload, &spec(3, Duration::from_secs(3)), &live, &mut |_, _| {}).unwrap();
    let by = |t: TxnType| &tally.txns[t as usize];
    for t in TxnType::ALL {
        assert!(by(t).executed + by(t).acceptable_errors > 0, "{} never ran", t.name());
    }
    let gsd = by(TxnType::GetSubscriberData);
    assert_eq!(gsd.found, gsd.executed, "GET_SUBSCRIBER_DATA always finds its row");
    let ul = by(TxnType::UpdateLocation);
    assert_eq!(ul.found, ul.executed, "UPDATE_LOCATION always finds its row");
    let gad = by(TxnType::GetAccessData);
    let ratio = gad.found as f64 / gad.executed as f64;
    assert!((0.5..0.75).contains(&ratio), "GET_ACCESS_DATA success {ratio}");
    let icf = by(TxnType::InsertCallForwarding);
    assert!(icf.acceptable_errors > 0, "INSERT_CALL_FORWARDING hits FK/PK violations");
    assert_eq!(icf.found, icf.executed, "an executed insert inserted its row");
    assert_eq!(icf.latency.count(), icf.executed, "acceptable errors are not in the latency");
    assert!(tally.mqth() > 0.0);
    assert!(tally.attempts_per_s() > tally.mqth());

    let backend = tally.backend.clone().expect("backend figures");
    assert!(backend.samples > 50, "{backend:?}");
    assert!(backend.commits > 0 && backend.wal_bytes > 0, "{backend:?}");
    let cpu = backend.cpu_percent.expect("local server: CPU is measured");
    assert!(cpu > 0.0 && cpu < 100.0 * 64.0, "{backend:?}");
    // (The WAL-wait figures are checked against synchronous_commit in
    // `wal_waits_follow_synchronous_commit`, on a cluster that fsyncs.)
    assert!((0.0..=1.0).contains(&backend.wal_wait_share));
    // The commit counter agrees with what the clients did: every transaction
    // is one commit, except rolled-back acceptable errors.
    let expected_commits = tally.mqth() * backend.window_s;
    assert!(
        (backend.commits_per_s * backend.window_s) > 0.5 * expected_commits,
        "{backend:?} vs ~{expected_commits} txns"
    );
}

/// The WAL-wait share is PostgreSQL's commit wait, the study's "log file
/// sync": the same write mix on a cluster that fsyncs waits on the WAL with
/// synchronous_commit=on (every commit waits for its flush) and hardly at
/// all with it off (the WAL writer flushes in the background), even when
/// the sessions spend a second waiting on a table lock instead. A sampler
/// that counted other waits, or the wrong sessions, or nothing, fails here.
#[test]
fn wal_waits_follow_synchronous_commit() {
    let cluster = PrivateCluster::start(ClusterOptions { fsync: true, ..ClusterOptions::default() }).unwrap();
    let url = cluster.url();
    let target = PgTarget::open(&url).unwrap();
    populate(&target, &PopulateOptions { subscribers: 1_000, streams: 2, seed: 4, progress: false }).unwrap();
    let workload = TatpWorkload { keys: SubscriberKeys::new(1, 1_000, false) };
    let live = LiveCounters::default();
    let measure = |setting: &str, lock_wait: bool| {
        // New sessions (the driver connects per run) take the database's setting.
        target.execute_batch(&format!("ALTER DATABASE postgres SET synchronous_commit = {setting}")).unwrap();
        let locker = lock_wait.then(|| {
            let url = url.clone();
            std::thread::spawn(move || {
                // Into the measure window, then every transaction of the mix waits a second on a lock.
                std::thread::sleep(Duration::from_millis(700));
                let mut client = pgtier_backend::connect(&url).unwrap();
                client
                    .batch_execute("BEGIN; LOCK TABLE subscriber, access_info, special_facility, call_forwarding IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(1); COMMIT")
                    .unwrap();
            })
        });
        let tally =
            run_repetition(&target, &workload, &spec(4, Duration::from_secs(2)), &live, &mut |_, _| {}).unwrap();
        if let Some(locker) = locker {
            locker.join().unwrap();
        }
        let backend = tally.backend.clone().expect("backend figures");
        eprintln!("synchronous_commit={setting}, lock wait {lock_wait}: {:.0} txn/s, {backend:?}", tally.mqth());
        assert!(backend.samples > 50 && backend.commits > 100, "{setting}: {backend:?}");
        backend
    };
    let on = measure("on", false);
    let off = measure("off", true);
    // The lock kept the sessions active and waiting for about half the window.
    assert!(off.active_sessions > 1.0, "the lock wait did not show: {off:?}");
    assert!(
        on.wal_wait_share > 0.2 && on.wal_wait_sessions > 0.1,
        "commits waiting for their flush were not seen: {on:?}"
    );
    assert!(
        on.wal_wait_share > 3.0 * off.wal_wait_share,
        "share on {} vs off {}",
        on.wal_wait_share,
        off.wal_wait_share
    );
    assert!(
        on.wal_wait_sessions > 3.0 * off.wal_wait_sessions,
        "sessions on {} vs off {}",
        on.wal_wait_sessions,
        off.wal_wait_sessions
    );
}

fn target_with(url: &str, format: CopyFormat) -> PgTarget {
    PgTarget::open(url).unwrap().with_copy_format(format)
}

#[test]
fn any_other_error_stops_the_run_with_the_error() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.url();
    let target = PgTarget::open(&url).unwrap();
    populate(&target, &PopulateOptions { subscribers: 500, streams: 2, seed: 1, progress: false }).unwrap();
    target
        .execute_batch(
            "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'boom from the test' USING ERRCODE = 'P0001'; END $$; \
             CREATE TRIGGER boom BEFORE UPDATE ON subscriber FOR EACH ROW EXECUTE FUNCTION boom()",
        )
        .unwrap();
    let workload = TatpWorkload { keys: SubscriberKeys::new(1, 500, false) };
    let live = LiveCounters::default();
    let started = std::time::Instant::now();
    let err = run_repetition(&target, &workload, &spec(2, Duration::from_secs(20)), &live, &mut |_, _| {})
        .expect_err("UPDATE_LOCATION fails on every call");
    assert!(matches!(err, DriverError::Transaction { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("boom from the test") && text.contains("P0001"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10), "the run stopped early");

    // A schema the statements cannot be prepared against fails before the run.
    target.execute_batch("ALTER TABLE subscriber RENAME COLUMN vlr_location TO vlr").unwrap();
    let err = run_repetition(&target, &workload, &spec(2, Duration::from_secs(1)), &live, &mut |_, _| {})
        .expect_err("statements cannot be prepared");
    assert!(matches!(err, DriverError::Prepare { .. }), "{err:?}");
    assert!(err.to_string().contains("vlr_location"), "{err}");
}

#[test]
fn sessions_convert_values_by_parameter_type() {
    // Both clients, and a password (SCRAM) for the native one's handshake.
    let cluster =
        PrivateCluster::start(ClusterOptions { password: Some("s3cret".into()), ..ClusterOptions::default() }).unwrap();
    for kind in [ClientKind::Native, ClientKind::PostgresCrate] {
        let target = PgTarget::open(&cluster.url()).unwrap().with_client(kind);
        session_round_trips(target.connect().unwrap());
    }
    let wrong = format!("postgres://postgres:nope@127.0.0.1:{}/postgres", cluster.port());
    let err = pgtier_bench::targets::pgwire::WireSession::connect(&wrong).err().expect("wrong password fails");
    assert_eq!(err.sqlstate.as_deref(), Some("28P01"), "{err}");
}

fn session_round_trips(mut s: Box<dyn pgtier_bench::target::Session>) {
    let stmt = s.prepare("SELECT $1::int2 + 1, $2::int4, $3::int8, $4::text || '!', NULL::int4, $5::varchar").unwrap();
    let mut out = Vec::new();
    let params = [Value::Int(41), Value::Int(-7), Value::Int(1 << 40), Value::Text("hi".into()), Value::Null];
    let rows = s.query(stmt, &params, &mut out).unwrap();
    assert_eq!(rows, 1);
    assert_eq!(
        out,
        vec![Value::Int(42), Value::Int(-7), Value::Int(1 << 40), Value::Text("hi!".into()), Value::Null, Value::Null]
    );
    // Out of range for smallint: an error, not a silent wrap.
    out.clear();
    let err = s.query(stmt, &[Value::Int(70_000), Value::Int(0), Value::Int(0), Value::Null, Value::Null], &mut out);
    assert!(err.is_err());
    // Errors keep their SQLSTATE; rollback recovers the session.
    s.begin().unwrap();
    let bad = s.prepare("SELECT 1/0").unwrap();
    let e = s.query(bad, &[], &mut out).unwrap_err();
    assert_eq!(e.sqlstate.as_deref(), Some("22012"));
    s.rollback().unwrap();
    out.clear();
    assert_eq!(s.query(stmt, &params, &mut out).unwrap(), 1);
    // Rows affected, several rows, and a unique violation keeping its SQLSTATE.
    let create = s.prepare("CREATE TEMP TABLE t (k int PRIMARY KEY, v text)").unwrap();
    s.execute(create, &[]).unwrap();
    let insert = s.prepare("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, $1::int) g").unwrap();
    assert_eq!(s.execute(insert, &[Value::Int(3)]).unwrap(), 3);
    let e = s.execute(insert, &[Value::Int(1)]).unwrap_err();
    assert_eq!(e.sqlstate.as_deref(), Some("23505"), "{e}");
    let all = s.prepare("SELECT k, v FROM t ORDER BY k").unwrap();
    out.clear();
    assert_eq!(s.query(all, &[], &mut out).unwrap(), 3);
    assert_eq!(out[4..], [Value::Int(3), Value::Text("v3".into())]);
    let update = s.prepare("UPDATE t SET v = $1 WHERE k > $2").unwrap();
    assert_eq!(s.execute(update, &[Value::Text("x".into()), Value::Int(1)]).unwrap(), 2);
    s.begin().unwrap();
    s.execute(update, &[Value::Text("y".into()), Value::Int(0)]).unwrap();
    s.commit().unwrap();
}
