//! AWT write-through against a real PostgreSQL with TATP: application
//! transactions committed in the cache reach PostgreSQL in commit order,
//! exactly once (counter increments add up), across a restart of the cache;
//! a transaction PostgreSQL refuses for good lands in `pgtier.awt_errors`
//! while later ones propagate; a table changed in PostgreSQL holds its
//! group; loads and evictions never go back.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{TABLES, cache_dump, fresh_tatp, postgres_dump};
use pgtier_backend::connect::connect;
use pgtier_cache::{Cache, CacheGroup, CreateGroup, GroupKind, LoadOptions};
use pgtier_engine::{Database, Value};
use postgres::Client;
use rand::{Rng, SeedableRng};

fn awt_group() -> CreateGroup {
    common::tatp_group("awt", GroupKind::Awt, false)
}

fn check_group(client: &mut Client) -> CacheGroup {
    pgtier_cache::define_group(client, &common::tatp_spec()).unwrap()
}

fn assert_same(cache: &Cache, client: &mut Client, predicate: &str) {
    assert!(cache.wait_propagated(Duration::from_secs(60)), "propagation did not drain: {:?}", cache.propagation());
    let group = check_group(client);
    for table in TABLES {
        let expected = postgres_dump(client, &group, table, predicate);
        let cached = cache_dump(cache.database(), table);
        assert_eq!(cached.len(), expected.len(), "{table}");
        assert_eq!(cached.iter().zip(&expected).find(|(c, e)| c != e), None, "{table}");
    }
}

/// `n` transactions: counter increments on random subscribers, call
/// forwarding rows inserted and deleted, access_info rows updated.
fn workload(db: &Database, seed: u64, n: usize, keys: i32) {
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let access = catalog.table_by_name("access_info").unwrap();
    let forwarding = catalog.table_by_name("call_forwarding").unwrap();
    let special = catalog.table_by_name("special_facility").unwrap();
    let msc = subscriber.column_index("msc_location").unwrap();
    let data1 = access.column_index("data1").unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for i in 0..n {
        let mut txn = db.begin().unwrap();
        let s = rng.random_range(1..=keys);
        txn.update_with(subscriber.id, &[Value::Int4(s)], |row| {
            Ok(Some(vec![(msc, Value::Int4(row.get_i64(msc).unwrap_or(0) as i32 + 1))]))
        })
        .unwrap();
        match i % 3 {
            0 => {
                txn.update(access.id, &[Value::Int4(s), Value::Int2(1)], &[(data1, Value::Int2((i % 200) as i16))])
                    .unwrap();
            }
            1 => {
                // A call_forwarding row under one of s's special facilities (if any), start time 20.
                let mut facility = None;
                txn.scan_prefix(special.primary_index, &[Value::Int4(s)], |row| {
                    facility = Some(row.get(1).to_owned_value());
                    Ok(false)
                })
                .unwrap();
                if let Some(sf_type) = facility {
                    let key = [Value::Int4(s), sf_type.clone(), Value::Int2(20)];
                    if !txn.delete(forwarding.id, &key).unwrap() {
                        txn.insert(
                            forwarding.id,
                            &[Value::Int4(s), sf_type, Value::Int2(20), Value::Int2(23), Value::Text(format!("n{i}"))],
                        )
                        .unwrap();
                    }
                }
            }
            // A second instance in the same transaction (may span apply lanes).
            _ => {
                let other = rng.random_range(1..=keys);
                txn.update_with(subscriber.id, &[Value::Int4(other)], |row| {
                    Ok(Some(vec![(msc, Value::Int4(row.get_i64(msc).unwrap_or(0) as i32 + 1))]))
                })
                .unwrap();
            }
        }
        txn.commit().unwrap();
    }
}

fn counters(client: &mut Client) -> i64 {
    client.query_one("SELECT sum(msc_location)::bigint FROM subscriber", &[]).unwrap().get(0)
}

#[test]
fn application_commits_reach_postgres_exactly_once_in_order() {
    let url = fresh_tatp("cache_awt");
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let before = counters(&mut client);
    {
        let cache = common::open_cache(dir.path(), &url);
        cache.create_group(&awt_group()).unwrap();
        cache.load("awt", &LoadOptions { predicate: Some("s_id <= 2000".into()), ..LoadOptions::default() }).unwrap();
        // Loading propagated nothing.
        assert!(cache.wait_propagated(Duration::from_secs(30)));
        assert_eq!(cache.propagation().unwrap().applied_txns.load(std::sync::atomic::Ordering::Relaxed), 0);
        workload(cache.database(), 1, 600, 2000);
        assert_same(&cache, &mut client, "s_id <= 2000");
        let status = cache.propagation().unwrap();
        assert_eq!(status.applied_txns.load(std::sync::atomic::Ordering::Relaxed), 600);
        assert_eq!(status.errors.load(std::sync::atomic::Ordering::Relaxed), 0);
        // Unloading is not a delete in PostgreSQL.
        cache.unload("awt", None).unwrap();
        assert!(cache.wait_propagated(Duration::from_secs(30)));
        assert_eq!(
            client.query_one("SELECT count(*) FROM subscriber WHERE s_id <= 2000", &[]).unwrap().get::<_, i64>(0),
            2000
        );
        cache.load("awt", &LoadOptions { predicate: Some("s_id <= 2000".into()), ..LoadOptions::default() }).unwrap();
        workload(cache.database(), 2, 300, 2000);
        // Dropped with transactions possibly not yet propagated: the next open resumes.
    }
    let cache = common::open_cache(dir.path(), &url);
    workload(cache.database(), 3, 300, 2000);
    assert_same(&cache, &mut client, "s_id <= 2000");
    // 1,200 transactions, a third of them incrementing two subscribers.
    assert_eq!(counters(&mut client), before + 1600, "every increment applied exactly once");
    assert!(cache.propagation().unwrap().spanning.load(std::sync::atomic::Ordering::Relaxed) > 0);
    let verified = cache.verify("awt").unwrap();
    assert!(verified.is_clean(), "{verified:?}");
    assert_eq!((verified.compared, verified.not_cached), (2000, u64::from(common::SUBSCRIBERS) - 2000));
    // verify sees changes made behind the cache's back.
    let forwarding_of_6 = cache_dump(cache.database(), "call_forwarding").iter().any(|line| line.starts_with("6|"));
    client.batch_execute("UPDATE access_info SET data2 = data2 + 1 WHERE s_id = 5 AND ai_type = 1; DELETE FROM call_forwarding WHERE s_id = 6;").unwrap();
    client.batch_execute("DELETE FROM call_forwarding WHERE s_id = 9; DELETE FROM special_facility WHERE s_id = 9; DELETE FROM access_info WHERE s_id = 9; DELETE FROM subscriber WHERE s_id = 9;").unwrap();
    let verified = cache.verify("awt").unwrap();
    assert_eq!(verified.differing, u64::from(forwarding_of_6) + 1, "{verified:?}");
    assert!(
        verified.differences.iter().any(|(key, table, _)| key.contains("Int4(5)") && table == "access_info"),
        "{verified:?}"
    );
    assert_eq!(verified.only_in_cache, vec!["[Int4(9)]".to_owned()]);
}

#[test]
fn a_refused_transaction_goes_to_the_error_table_and_the_rest_propagates() {
    let url = fresh_tatp("cache_awt_poison");
    let mut client = connect(&url).unwrap();
    client
        .batch_execute("ALTER TABLE subscriber ADD CONSTRAINT vlr_not_negative CHECK (vlr_location >= 0) NOT VALID")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    cache.create_group(&awt_group()).unwrap();
    cache.load("awt", &LoadOptions { predicate: Some("s_id <= 600".into()), ..LoadOptions::default() }).unwrap();
    let db = cache.database().clone();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let vlr = subscriber.column_index("vlr_location").unwrap();
    workload(&db, 4, 50, 500);
    let mut txn = db.begin().unwrap();
    // Outside the workload's keys: any later update of the row would carry -5 again.
    txn.update(subscriber.id, &[Value::Int4(550)], &[(vlr, Value::Int4(-5))]).unwrap();
    txn.commit().unwrap();
    workload(&db, 5, 50, 500);
    assert!(cache.wait_propagated(Duration::from_secs(60)));
    let status = cache.propagation().unwrap();
    assert_eq!(status.errors.load(std::sync::atomic::Ordering::Relaxed), 1);
    let verified = cache.verify("awt").unwrap();
    assert_eq!((verified.compared, verified.differing), (600, 1), "{verified:?}");
    let row = client.query_one("SELECT sqlstate, statements FROM pgtier.awt_errors", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), "23514");
    assert!(row.get::<_, String>(1).contains("'-5'"), "{}", row.get::<_, String>(1));
    // Everything else is PostgreSQL's: subscriber 550 differs only by the refused change.
    let group = check_group(&mut client);
    for table in TABLES {
        let expected = postgres_dump(&mut client, &group, table, "s_id <= 600");
        let cached = cache_dump(&db, table);
        let differing: Vec<_> = cached.iter().zip(&expected).filter(|(c, e)| c != e).collect();
        if table == "subscriber" {
            assert_eq!(differing.len(), 1, "{differing:?}");
            assert!(differing[0].0.starts_with("550|"));
        } else {
            assert!(differing.is_empty(), "{table}: {differing:?}");
        }
    }
}

/// A table changed in PostgreSQL behind the cache's back (two columns
/// swapped by rename: every statement stays valid, and would write the
/// values into the wrong columns): its group is held — nothing applied
/// across the change, nothing sent to the error table, the backlog kept —
/// while another group goes on; swapped back, it resumes and PostgreSQL
/// gets every transaction. A change of what the cache does not mirror (a
/// CHECK added) is held too, until accepted; a new column cannot be.
#[test]
fn a_table_changed_in_postgres_holds_its_group_until_it_is_back() {
    let url = pgtier_backend::harness::shared_cluster().unwrap().create_database("cache_awt_changed").unwrap();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            "CREATE TABLE kv (k int PRIMARY KEY, v int, w int); INSERT INTO kv SELECT g, g, g FROM generate_series(1, 10) g;
             CREATE TABLE other (k int PRIMARY KEY, v int); INSERT INTO other SELECT g, g FROM generate_series(1, 10) g;",
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = pgtier_cache::CacheConfig::default();
    config.awt.definition_check_interval = Duration::from_millis(300);
    let cache = common::open_cache_with(dir.path(), &url, config);
    cache.create_group(&CreateGroup { root: "kv".into(), children: Vec::new(), ..awt_group() }).unwrap();
    cache
        .create_group(&CreateGroup { name: "awt2".into(), root: "other".into(), children: Vec::new(), ..awt_group() })
        .unwrap();
    cache.load("awt", &LoadOptions::default()).unwrap();
    cache.load("awt2", &LoadOptions::default()).unwrap();
    let db = cache.database().clone();
    let set = |table: &str, k: i32, v: i32| {
        let id = db.catalog().table_by_name(table).unwrap().id;
        let mut txn = db.begin().unwrap();
        txn.update(id, &[Value::Int4(k)], &[(1, Value::Int4(v))]).unwrap();
        txn.commit().unwrap();
    };
    let row = |client: &mut Client, table: &str, k: i32| -> Vec<Option<i32>> {
        let r = client.query_one(&format!("SELECT * FROM {table} WHERE k = $1"), &[&k]).unwrap();
        (1..r.len()).map(|i| r.get(i)).collect()
    };
    let held = |cache: &Cache| {
        cache.propagation_info().unwrap().held_groups.iter().map(|(g, _)| g.clone()).collect::<Vec<_>>()
    };
    let wait_for = |what: &str, done: &mut dyn FnMut() -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}: {:?}",
                cache.propagation_info()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    set("kv", 1, 100);
    assert!(cache.wait_propagated(Duration::from_secs(30)));
    client
        .batch_execute("ALTER TABLE kv RENAME v TO tmp; ALTER TABLE kv RENAME w TO v; ALTER TABLE kv RENAME tmp TO w")
        .unwrap();
    set("kv", 2, 200);
    set("other", 2, 200);
    wait_for("group awt to be held", &mut || held(&cache) == ["awt"]);
    wait_for("group awt2 to propagate", &mut || row(&mut client, "other", 2) == [Some(200)]);
    set("kv", 3, 300);
    assert!(!cache.wait_propagated(Duration::from_secs(2)), "the held group's transactions wait in the log");
    assert_eq!(row(&mut client, "kv", 2), [Some(2), Some(2)], "nothing applied across the change");
    let info = cache.propagation_info().unwrap();
    assert!(info.held_groups[0].1.contains("kv"), "{info:?}");
    assert_eq!(info.errors, 0);
    assert_eq!(client.query_one("SELECT count(*) FROM pgtier.awt_errors", &[]).unwrap().get::<_, i64>(0), 0);
    // Swapped back: the group resumes by itself, every transaction arrives.
    client
        .batch_execute("ALTER TABLE kv RENAME v TO tmp; ALTER TABLE kv RENAME w TO v; ALTER TABLE kv RENAME tmp TO w")
        .unwrap();
    assert!(cache.wait_propagated(Duration::from_secs(30)), "{:?}", cache.propagation_info());
    assert!(held(&cache).is_empty());
    // (The rename round trip leaves the columns as they were: k, v, w.)
    assert_eq!(row(&mut client, "kv", 2), [Some(200), Some(2)]);
    assert_eq!(row(&mut client, "kv", 3), [Some(300), Some(3)]);
    // A CHECK added: held until accepted (the columns the cache holds are the same).
    client.batch_execute("ALTER TABLE kv ADD CONSTRAINT v_positive CHECK (v > 0)").unwrap();
    set("kv", 4, 400);
    wait_for("group awt to be held for its CHECK", &mut || held(&cache) == ["awt"]);
    assert_eq!(cache.accept_definition("awt").unwrap(), vec!["public.kv".to_owned()]);
    assert!(cache.wait_propagated(Duration::from_secs(30)), "{:?}", cache.propagation_info());
    assert_eq!(row(&mut client, "kv", 4), [Some(400), Some(4)]);
    // A new column is not the cache's table any more: not accepted.
    client.batch_execute("ALTER TABLE kv ADD COLUMN extra int").unwrap();
    let error = cache.accept_definition("awt").unwrap_err();
    assert_eq!(error.sqlstate(), "55000");
    assert!(error.to_string().contains("extra"), "{error}");
    assert_eq!(client.query_one("SELECT count(*) FROM pgtier.awt_errors", &[]).unwrap().get::<_, i64>(0), 0);
}

/// Rows written in PostgreSQL behind the cache, then write-through traffic
/// on the same instances: the root row PostgreSQL changed is overwritten by
/// the cache's (the two agree again), but a child row only PostgreSQL has
/// stays a difference that verify must report.
#[test]
fn verify_reports_rows_written_behind_the_cache_after_write_through_traffic() {
    let url = fresh_tatp("cache_awt_behind");
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    cache.create_group(&awt_group()).unwrap();
    cache.load("awt", &LoadOptions { predicate: Some("s_id <= 200".into()), ..LoadOptions::default() }).unwrap();
    // Subscribers with a special facility, so a call_forwarding row can be added under it.
    let targets: Vec<(i32, i16)> = client
        .query(
            "SELECT s_id, min(sf_type) FROM special_facility WHERE s_id <= 200 GROUP BY s_id ORDER BY s_id LIMIT 5",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(targets.len(), 5);
    for (s, sf) in &targets {
        client
            .execute("INSERT INTO call_forwarding VALUES ($1, $2, 23, 24, 'behind') ON CONFLICT DO NOTHING", &[s, sf])
            .unwrap();
        client.execute("UPDATE subscriber SET msc_location = -1 WHERE s_id = $1", &[s]).unwrap();
    }
    // The cache writes the same subscriber rows (and others); they propagate.
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().clone();
    let msc = subscriber.column_index("msc_location").unwrap();
    for s in 1..=200 {
        let mut txn = db.begin().unwrap();
        txn.update(subscriber.id, &[Value::Int4(s)], &[(msc, Value::Int8(i64::from(s) * 1000))]).unwrap();
        txn.commit().unwrap();
    }
    assert!(cache.wait_propagated(Duration::from_secs(60)), "{:?}", cache.propagation());
    let behind: i64 = client.query_one("SELECT count(*) FROM subscriber WHERE msc_location = -1", &[]).unwrap().get(0);
    assert_eq!(behind, 0, "write-through overwrote the subscriber rows changed behind the cache");
    let verified = cache.verify("awt").unwrap();
    assert_eq!(verified.differing, 5, "only the PostgreSQL-only call_forwarding rows differ: {verified:?}");
    for (s, _) in &targets {
        let key = format!("Int4({s})");
        assert!(
            verified.differences.iter().any(|(k, table, _)| k.contains(&key) && table == "call_forwarding"),
            "{s}: {verified:?}"
        );
    }
}

/// A lane blocked in PostgreSQL (a row another session holds) is reported
/// within the stall timeout — counted, with what PostgreSQL says blocks it —
/// cancelled and reconnected, again while the blocker stays; once the
/// blocker goes, everything drains.
#[test]
fn a_stalled_lane_is_reported_with_its_cause_and_reconnected() {
    let url = pgtier_backend::harness::shared_cluster().unwrap().create_database("cache_awt_stall").unwrap();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            "CREATE TABLE kv (k int PRIMARY KEY, v int); INSERT INTO kv SELECT g, g FROM generate_series(1, 10) g;",
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = pgtier_cache::CacheConfig::default();
    config.awt.stall_timeout = Duration::from_secs(2);
    let cache = common::open_cache_with(dir.path(), &url, config);
    cache.create_group(&CreateGroup { root: "kv".into(), children: Vec::new(), ..awt_group() }).unwrap();
    cache.load("awt", &LoadOptions::default()).unwrap();
    // Another session holds row 1.
    let mut blocker = connect(&url).unwrap();
    let blocker_pid: i32 = blocker.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    blocker.batch_execute("BEGIN; SELECT * FROM kv WHERE k = 1 FOR UPDATE").unwrap();
    let db = cache.database().clone();
    let kv = db.catalog().table_by_name("kv").unwrap().id;
    let mut txn = db.begin().unwrap();
    txn.update(kv, &[Value::Int4(1)], &[(1, Value::Int4(100))]).unwrap();
    txn.commit().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let info = loop {
        let info = cache.propagation_info().unwrap();
        if info.stalls >= 2 {
            break info;
        }
        assert!(std::time::Instant::now() < deadline, "no stall reported: {info:?} {:?}", cache.lanes());
        std::thread::sleep(Duration::from_millis(100));
    };
    let reported = info.last_error.clone().unwrap_or_default();
    assert!(
        reported.contains("waiting") && reported.contains(&blocker_pid.to_string()),
        "the cause names the blocker: {reported}"
    );
    assert!(!cache.wait_propagated(Duration::from_millis(200)));
    // The blocker goes: the reconnected lane applies.
    blocker.batch_execute("ROLLBACK").unwrap();
    assert!(cache.wait_propagated(Duration::from_secs(30)), "{:?}", cache.propagation_info());
    assert_eq!(client.query_one("SELECT v FROM kv WHERE k = 1", &[]).unwrap().get::<_, i32>(0), 100);
    assert_eq!(cache.propagation_info().unwrap().errors, 0, "a stall is not the transaction's refusal");
}

/// PostgreSQL tracks replication origins in max_replication_slots slots,
/// cluster-wide, and keeps them while the origins exist (a node that is
/// gone keeps its own). With them used up, write-through says so (PostgreSQL's
/// message, 53400, a hint naming the setting and the cleanup), keeps the
/// transactions, and applies them once slots are free again.
#[test]
fn used_up_origin_slots_are_reported_and_write_through_resumes_when_freed() {
    let options = pgtier_backend::harness::ClusterOptions {
        settings: vec![("max_replication_slots".into(), "2".into())],
        ..Default::default()
    };
    let cluster = pgtier_backend::harness::PrivateCluster::start(options).unwrap();
    let url = cluster.create_database("awt_origin_slots").unwrap();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            "CREATE TABLE kv (k int PRIMARY KEY, v int); INSERT INTO kv SELECT g, g FROM generate_series(1, 10) g;",
        )
        .unwrap();
    // Two origins of another (gone) node hold both slots.
    for filler in ["pgtier_gone_0", "pgtier_gone_x"] {
        client
            .batch_execute(&format!(
                "SELECT pg_replication_origin_create('{filler}'); SELECT pg_replication_origin_session_setup('{filler}'); SELECT pg_replication_origin_session_reset();"
            ))
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let mut config = pgtier_cache::CacheConfig::default();
    config.awt.apply_connections = 1;
    let cache = common::open_cache_with(dir.path(), &url, config);
    cache.create_group(&CreateGroup { root: "kv".into(), children: Vec::new(), ..awt_group() }).unwrap();
    // (LOAD waits for write-through to read: 55000 meanwhile; a new instance needs none.)
    let db = cache.database().clone();
    let kv = db.catalog().table_by_name("kv").unwrap().id;
    let mut txn = db.begin().unwrap();
    txn.insert(kv, &[Value::Int4(11), Value::Int4(100)]).unwrap();
    txn.commit().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let info = cache.propagation_info().unwrap();
        if info.last_error.as_deref().is_some_and(|e| e.contains("free replication state slot")) {
            assert!(!info.connected, "{info:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "used-up origin slots never reported: {info:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!cache.wait_propagated(Duration::from_millis(300)));
    assert_eq!(client.query_one("SELECT count(*) FROM kv WHERE k = 11", &[]).unwrap().get::<_, i64>(0), 0);
    // The gone node's origins are dropped, as the hint says: the transaction goes through.
    common::drop_node_origins(&mut client, "gone");
    assert!(cache.wait_propagated(Duration::from_secs(30)), "{:?}", cache.propagation_info());
    assert_eq!(client.query_one("SELECT v FROM kv WHERE k = 11", &[]).unwrap().get::<_, i32>(0), 100);
    cache.shutdown();
}

/// `pgtier_cache_propagation.backlog_bytes` of 0 means PostgreSQL has every
/// acknowledged commit. An asynchronous commit is acknowledged (and visible
/// to VERIFY) before it is durable, and write-through reads only durable
/// WAL: counted up to the durable end, the backlog read 0 for that moment,
/// and a soak that waited for 0 before VERIFY found the cache ahead of
/// PostgreSQL (CI, once in many runs). A long flush interval widens the
/// moment to seconds here.
#[test]
fn the_backlog_counts_an_asynchronous_commit_before_it_is_durable() {
    let url = fresh_tatp("cache_awt_async_backlog");
    let dir = tempfile::tempdir().unwrap();
    let mut engine =
        pgtier_engine::EngineConfig { commit_mode: pgtier_engine::CommitMode::Async, ..Default::default() };
    engine.wal.async_flush_interval = Duration::from_secs(3);
    let db = Database::open(dir.path(), engine).unwrap();
    let params = pgtier_backend::BackendConfig { url: Some(url.clone()), ..Default::default() }.resolve().unwrap();
    let mut config = pgtier_cache::CacheConfig::default();
    config.awt.node = common::node_of(dir.path());
    let cache = Cache::open(db, Some(params), config).unwrap();
    cache.create_group(&awt_group()).unwrap();
    cache.load("awt", &LoadOptions { predicate: Some("s_id <= 10".into()), ..LoadOptions::default() }).unwrap();
    assert!(cache.wait_propagated(Duration::from_secs(30)));
    assert_eq!(cache.propagation_info().unwrap().backlog_bytes, 0);
    let db = cache.database().clone();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let vlr = subscriber.column_index("vlr_location").unwrap();
    let mut txn = db.begin().unwrap();
    txn.update(subscriber.id, &[Value::Int4(3)], &[(vlr, Value::Int4(777))]).unwrap();
    txn.commit().unwrap();
    let info = cache.propagation_info().unwrap();
    assert!(info.backlog_bytes > 0, "an acknowledged commit PostgreSQL lacks is backlog: {info:?}");
    let mut client = connect(&url).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while cache.propagation_info().unwrap().backlog_bytes > 0 {
        assert!(std::time::Instant::now() < deadline, "{:?}", cache.propagation_info());
        std::thread::sleep(Duration::from_millis(20));
    }
    let vlr_in_postgres: i32 =
        client.query_one("SELECT vlr_location::int4 FROM subscriber WHERE s_id = 3", &[]).unwrap().get(0);
    assert_eq!(vlr_in_postgres, 777, "a backlog of 0 came before PostgreSQL had the commit");
}
