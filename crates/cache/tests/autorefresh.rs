//! Autorefresh of READONLY groups from the private PostgreSQL by logical
//! replication: changes made directly in PostgreSQL reach the cache (and
//! only the instances it holds), the slot's lifecycle (drop, schema change,
//! invalidation, restart), and write-through never echoing back.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{assert_tables_equal, fresh_tatp, open_cache, populate_tatp, tatp_group};
use pgtier_backend::connect::connect;
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_cache::{AutorefreshStatus, Cache, GroupKind, LoadOptions};
use pgtier_engine::Value;
use postgres::Client;

const WAIT: Duration = Duration::from_secs(60);

/// The TATP group, READONLY with autorefresh (the statement's default).
fn ar_group(name: &str, dynamic: bool) -> pgtier_cache::CreateGroup {
    pgtier_cache::CreateGroup { autorefresh: true, ..tatp_group(name, GroupKind::ReadOnly, dynamic) }
}

fn status(cache: &Cache, group: &str) -> std::sync::Arc<AutorefreshStatus> {
    cache
        .autorefresh_status()
        .into_iter()
        .find(|s| s.group == group)
        .unwrap_or_else(|| panic!("no autorefresh for {group}"))
}

fn slots(client: &mut Client) -> Vec<String> {
    client
        .query("SELECT slot_name::text FROM pg_replication_slots ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Inserts, updates (a key change among them), deletes of whole instances
/// and of children, and NULLs, made directly in PostgreSQL: one
/// transaction per element.
const CHANGES: [&str; 8] = [
    "UPDATE subscriber SET msc_location = msc_location + 1, vlr_location = NULL WHERE s_id % 97 = 0",
    "BEGIN;
     INSERT INTO subscriber (s_id, sub_nbr, bit_1, hex_1, byte2_1, msc_location, vlr_location) VALUES (30001, '000000000030001', 1, 2, 3, 4, 5);
     INSERT INTO access_info VALUES (30001, 1, 1, 2, 'abc', 'de');
     INSERT INTO special_facility VALUES (30001, 2, 1, 0, 7, 'y');
     INSERT INTO call_forwarding VALUES (30001, 2, 8, 16, 'n30001');
     COMMIT",
    "DELETE FROM call_forwarding WHERE s_id BETWEEN 20 AND 60",
    "BEGIN;
     DELETE FROM call_forwarding WHERE s_id = 10;
     DELETE FROM special_facility WHERE s_id = 10;
     DELETE FROM access_info WHERE s_id = 10;
     DELETE FROM subscriber WHERE s_id = 10;
     COMMIT",
    "UPDATE access_info SET ai_type = ai_type + 10, data3 = NULL WHERE s_id = 5",
    "UPDATE special_facility SET data_b = 'z' WHERE s_id % 11 = 0",
    "UPDATE subscriber SET sub_nbr = 'renamed' WHERE s_id = 11",
    "TRUNCATE call_forwarding",
];

#[test]
fn changes_made_in_postgres_reach_the_cache() {
    let url = fresh_tatp("ar_basic");
    let dir = tempfile::tempdir().unwrap();
    let cache = open_cache(dir.path(), &url);
    cache.create_group(&ar_group("tatp", false)).unwrap();
    let loaded = cache.load("tatp", &LoadOptions::default()).unwrap();
    assert_eq!(loaded.instances, u64::from(common::SUBSCRIBERS));
    let mut client = connect(&url).unwrap();
    let slot = format!("pgtier_{}_ar_basic_tatp", common::node_of(dir.path()));
    assert!(slots(&mut client).contains(&slot), "{:?}", slots(&mut client));
    for change in CHANGES {
        client.batch_execute(change).unwrap();
    }
    assert!(cache.wait_autorefreshed("tatp", WAIT).unwrap());
    assert_tables_equal(cache.database(), &mut client, "true");
    let tally = cache.verify("tatp").unwrap();
    assert!(tally.is_clean(), "{tally:?}");
    let s = status(&cache, "tatp");
    assert_eq!(*s.state.lock(), "streaming");
    assert_eq!(s.applied_txns.load(Ordering::Relaxed), CHANGES.len() as u64, "{s:?}");
    assert_eq!(s.lag.count(), CHANGES.len() as u64);

    // Applications cannot write a READONLY group's tables: 25006.
    let db = cache.database();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut txn = db.begin().unwrap();
    let error = txn.delete(subscriber, &[Value::Int4(1)]).unwrap_err();
    assert_eq!(error.sqlstate(), "25006", "{error}");
    txn.rollback();

    // A second LOAD (the group already follows PostgreSQL) neither makes a
    // second slot nor loses anything.
    client.batch_execute("UPDATE subscriber SET msc_location = 77 WHERE s_id = 3").unwrap();
    cache.load("tatp", &LoadOptions::default()).unwrap();
    assert!(cache.wait_autorefreshed("tatp", WAIT).unwrap());
    assert_eq!(slots(&mut client).iter().filter(|s| s.contains("ar_basic_tatp")).count(), 1);
    assert_tables_equal(cache.database(), &mut client, "true");

    // DROP CACHE GROUP drops the slot and the publication.
    cache.drop_group("tatp", false).unwrap();
    assert!(!slots(&mut client).iter().any(|s| s.contains("ar_basic_tatp")), "{:?}", slots(&mut client));
    let publications: i64 =
        client.query_one("SELECT count(*) FROM pg_publication WHERE pubname LIKE 'pgtier_%'", &[]).unwrap().get(0);
    assert_eq!(publications, 0);
}

#[test]
fn a_dynamic_group_follows_only_the_instances_it_holds() {
    let url = fresh_tatp("ar_dynamic");
    let dir = tempfile::tempdir().unwrap();
    let cache = open_cache(dir.path(), &url);
    cache.create_group(&ar_group("dyn", true)).unwrap();
    wait_until("the dynamic group to stream", || *status(&cache, "dyn").state.lock() == "streaming");
    for s in 1..=10 {
        assert!(cache.ensure_instance("dyn", &[Value::Int4(s)]).unwrap());
    }
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            "UPDATE subscriber SET msc_location = -s_id WHERE s_id <= 20;
             UPDATE access_info SET data3 = 99 WHERE s_id <= 20;
             INSERT INTO subscriber (s_id, sub_nbr, bit_1, hex_1, byte2_1, msc_location, vlr_location) VALUES (30002, 'n', 0, 0, 0, 0, 0);
             DELETE FROM call_forwarding WHERE s_id IN (3, 15);",
        )
        .unwrap();
    assert!(cache.wait_autorefreshed("dyn", WAIT).unwrap());
    // Exactly the ten cached instances, each equal to PostgreSQL's.
    assert_tables_equal(cache.database(), &mut client, "s_id <= 10");
    assert!(status(&cache, "dyn").skipped_changes.load(Ordering::Relaxed) >= 10);
    assert!(cache.verify("dyn").unwrap().is_clean());
}

#[test]
fn a_table_changed_in_postgres_stops_its_group_and_frees_the_slot() {
    let url = fresh_tatp("ar_schema");
    let dir = tempfile::tempdir().unwrap();
    let cache = open_cache(dir.path(), &url);
    cache.create_group(&ar_group("tatp", false)).unwrap();
    cache.load("tatp", &LoadOptions { predicate: Some("s_id <= 100".into()), ..LoadOptions::default() }).unwrap();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute("ALTER TABLE access_info ADD COLUMN extra int; UPDATE access_info SET extra = 1 WHERE s_id = 1")
        .unwrap();
    let s = status(&cache, "tatp");
    wait_until("the group to stop", || *s.state.lock() == "stopped");
    let error = s.last_error.lock().clone().unwrap();
    assert!(
        error.contains("access_info")
            && error.contains("55000")
            && error.contains("DROP CACHE GROUP tatp, then CREATE"),
        "{error}"
    );
    wait_until("the slot to be dropped", || !slots(&mut client).iter().any(|n| n.contains("ar_schema_tatp")));
}

/// Changes made while pgtier is down arrive after it opens again, from
/// the same slot; a transaction made by pgtier's own write-through (its
/// replication origin) is not applied back.
#[test]
fn reopening_continues_from_the_slot_and_own_changes_never_come_back() {
    let url = fresh_tatp("ar_reopen");
    let dir = tempfile::tempdir().unwrap();
    let mut client = connect(&url).unwrap();
    {
        let cache = open_cache(dir.path(), &url);
        cache.create_group(&ar_group("tatp", false)).unwrap();
        cache.load("tatp", &LoadOptions { predicate: Some("s_id <= 2000".into()), ..LoadOptions::default() }).unwrap();
    }
    client
        .batch_execute(
            "UPDATE subscriber SET msc_location = 5 WHERE s_id <= 100; DELETE FROM call_forwarding WHERE s_id <= 100",
        )
        .unwrap();
    // What pgtier's own write-through session would send (origin pgtier_<node>_*).
    // (Separate transactions: the origin a commit carries is the session's at commit time.)
    let probe = format!("pgtier_{}_probe", common::node_of(dir.path()));
    client.execute("SELECT pg_replication_origin_create($1)", &[&probe]).unwrap();
    client.execute("SELECT pg_replication_origin_session_setup($1)", &[&probe]).unwrap();
    client.batch_execute("UPDATE subscriber SET msc_location = 123456 WHERE s_id = 1").unwrap();
    client.batch_execute("SELECT pg_replication_origin_session_reset()").unwrap();
    let cache = open_cache(dir.path(), &url);
    assert!(cache.wait_autorefreshed("tatp", WAIT).unwrap());
    let s = status(&cache, "tatp");
    assert_eq!(s.own_txns_skipped.load(Ordering::Relaxed), 1);
    assert_eq!(s.resnapshots.load(Ordering::Relaxed), 0);
    // Everything but the own transaction's row equals PostgreSQL.
    client.batch_execute("UPDATE subscriber SET msc_location = 1 * 7 WHERE s_id = 1").unwrap();
    assert!(cache.wait_autorefreshed("tatp", WAIT).unwrap());
    assert_tables_equal(cache.database(), &mut client, "s_id <= 2000");
    assert_eq!(slots(&mut client).iter().filter(|n| n.contains("ar_reopen_tatp")).count(), 1);
}

/// An AWT group and a READONLY group on one backend: the AWT group's writes
/// reach PostgreSQL and do not come back to the READONLY group's stream.
#[test]
fn write_through_of_an_awt_group_never_comes_back_as_a_refresh() {
    let url = fresh_tatp("ar_awt");
    let mut client = connect(&url).unwrap();
    client.batch_execute("CREATE TABLE account (id int PRIMARY KEY, balance bigint NOT NULL); INSERT INTO account SELECT g, 0 FROM generate_series(1, 100) g").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = open_cache(dir.path(), &url);
    cache.create_group(&ar_group("ro", false)).unwrap();
    cache.load("ro", &LoadOptions { predicate: Some("s_id <= 500".into()), ..LoadOptions::default() }).unwrap();
    let awt = pgtier_cache::CreateGroup {
        children: Vec::new(),
        root: "account".into(),
        ..tatp_group("acc", GroupKind::Awt, false)
    };
    cache.create_group(&awt).unwrap();
    cache.load("acc", &LoadOptions::default()).unwrap();
    let db = cache.database();
    let account = db.catalog().table_by_name("account").unwrap().id;
    for i in 1..=100 {
        let mut txn = db.begin().unwrap();
        txn.update(account, &[Value::Int4(i)], &[(1, Value::Int8(i64::from(i) * 10))]).unwrap();
        txn.commit().unwrap();
    }
    assert!(cache.wait_propagated(WAIT));
    let sum: i64 = client.query_one("SELECT sum(balance)::int8 FROM account", &[]).unwrap().get(0);
    assert_eq!(sum, (1..=100).map(|i| i * 10).sum::<i64>());
    client.batch_execute("UPDATE subscriber SET msc_location = 0 WHERE s_id = 7").unwrap();
    assert!(cache.wait_autorefreshed("ro", WAIT).unwrap());
    let s = status(&cache, "ro");
    // Only the one transaction made directly in PostgreSQL was applied.
    assert_eq!(s.applied_txns.load(Ordering::Relaxed), 1, "{s:?}");
    assert_tables_equal(cache.database(), &mut client, "s_id <= 500");
}

/// `max_slot_wal_keep_size` small and pgtier stopped while PostgreSQL
/// writes: the slot is invalidated; at the next open the group loads again
/// from a new slot, once, and equals PostgreSQL.
#[test]
fn an_invalidated_slot_makes_the_group_load_again_once() {
    let settings = vec![
        ("max_slot_wal_keep_size".to_owned(), "1MB".to_owned()),
        ("max_wal_size".to_owned(), "32MB".to_owned()),
        ("min_wal_size".to_owned(), "32MB".to_owned()),
    ];
    let cluster = PrivateCluster::start(ClusterOptions { settings, ..ClusterOptions::default() }).unwrap();
    let url = cluster.create_database("ar_lost").unwrap();
    populate_tatp(&url);
    let dir = tempfile::tempdir().unwrap();
    {
        let cache = open_cache(dir.path(), &url);
        cache.create_group(&ar_group("tatp", false)).unwrap();
        cache.load("tatp", &LoadOptions { predicate: Some("s_id <= 1000".into()), ..LoadOptions::default() }).unwrap();
    }
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            "UPDATE subscriber SET msc_location = 42 WHERE s_id <= 300; DELETE FROM call_forwarding WHERE s_id <= 300",
        )
        .unwrap();
    client.batch_execute("CREATE TABLE filler (id int, pad text)").unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let slot = format!("pgtier_{}_ar_lost_tatp", common::node_of(dir.path()));
        let status: Option<String> = client
            .query_one("SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", &[&slot])
            .unwrap()
            .get(0);
        if status.as_deref() == Some("lost") {
            break;
        }
        assert!(Instant::now() < deadline, "the slot was not invalidated ({status:?})");
        client.batch_execute("INSERT INTO filler SELECT g, repeat('x', 500) FROM generate_series(1, 20000) g; SELECT pg_switch_wal(); CHECKPOINT").unwrap();
    }
    let cache = open_cache(dir.path(), &url);
    let s = status(&cache, "tatp");
    wait_until("the re-snapshot", || s.resnapshots.load(Ordering::Relaxed) == 1 && *s.state.lock() == "streaming");
    client.batch_execute("UPDATE subscriber SET msc_location = 43 WHERE s_id = 1").unwrap();
    assert!(cache.wait_autorefreshed("tatp", WAIT).unwrap());
    assert_eq!(s.resnapshots.load(Ordering::Relaxed), 1);
    // A re-snapshot reloads the whole group (its WHERE, none here).
    assert_tables_equal(cache.database(), &mut client, "true");
}

/// An idle group while another database on the same server writes: the
/// keepalives are acknowledged, so the slot does not pin that WAL. CI
/// writes for a few seconds; the full run (`PGTIER_AR_IDLE_SECS=600`) is
/// the ten minutes.
#[test]
fn an_idle_group_does_not_pin_wal_while_other_databases_write() {
    let seconds: u64 = std::env::var("PGTIER_AR_IDLE_SECS").map_or(5, |v| v.parse().unwrap());
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.create_database("ar_idle").unwrap();
    populate_tatp(&url);
    let other_url = cluster.create_database("ar_other").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = open_cache(dir.path(), &url);
    cache.create_group(&ar_group("tatp", false)).unwrap();
    cache.load("tatp", &LoadOptions { predicate: Some("s_id <= 100".into()), ..LoadOptions::default() }).unwrap();
    let mut other = connect(&other_url).unwrap();
    other.batch_execute("CREATE TABLE busy (id int, pad text)").unwrap();
    let mut client = connect(&url).unwrap();
    // One change of the group before it idles: its commit time must not become its lag.
    client.batch_execute("UPDATE subscriber SET msc_location = 1 WHERE s_id = 1").unwrap();
    assert!(cache.wait_autorefreshed("tatp", WAIT).unwrap());
    let started = Instant::now();
    let (mut written, mut worst, mut worst_lag_ms) = (0u64, 0i64, 0f64);
    while started.elapsed() < Duration::from_secs(seconds) {
        other.batch_execute("INSERT INTO busy SELECT g, repeat('y', 200) FROM generate_series(1, 5000) g").unwrap();
        written += 5000 * 230;
        // Checkpoints log the running transactions, which lets the slot's restart position move.
        other.batch_execute("CHECKPOINT").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let retained: i64 = client.query_one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1", &[&format!("pgtier_{}_ar_idle_tatp", common::node_of(dir.path()))]).unwrap().get(0);
        worst = worst.max(retained);
        worst_lag_ms = worst_lag_ms.max(status(&cache, "tatp").lag_ms());
    }
    let retained: i64 = client.query_one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1", &[&format!("pgtier_{}_ar_idle_tatp", common::node_of(dir.path()))]).unwrap().get(0);
    println!(
        "idle slot for {seconds} s while {} MB were written elsewhere: retained WAL now {} kB, at most {} kB",
        written >> 20,
        retained >> 10,
        worst >> 10
    );
    // Retained WAL stays bounded by a few checkpoints' worth, not by what was written.
    assert!(retained < 8 << 20, "an idle slot pins {retained} bytes");
    assert!(status(&cache, "tatp").retained_wal_bytes.load(Ordering::Relaxed) < 64 << 20);
    // Nothing of this group changed: it is never far behind, whatever the other database wrote.
    assert!(worst_lag_ms < 2_000.0, "an idle group reported {worst_lag_ms} ms of lag");
}

/// A PostgreSQL that cannot decode its WAL: the first LOAD says how to fix
/// it, and a group with AUTOREFRESH OFF loads as before.
#[test]
fn wal_level_other_than_logical_is_refused_with_the_fix() {
    let settings = vec![("wal_level".to_owned(), "replica".to_owned())];
    let cluster = PrivateCluster::start(ClusterOptions { settings, ..ClusterOptions::default() }).unwrap();
    let url = cluster.create_database("ar_replica").unwrap();
    populate_tatp(&url);
    let dir = tempfile::tempdir().unwrap();
    let cache = open_cache(dir.path(), &url);
    cache.create_group(&ar_group("tatp", false)).unwrap();
    let error = cache
        .load("tatp", &LoadOptions { predicate: Some("s_id <= 10".into()), ..LoadOptions::default() })
        .unwrap_err();
    assert_eq!(error.sqlstate(), "55000", "{error}");
    assert!(error.to_string().contains("wal_level = logical"), "{error}");
    assert!(error.hint().unwrap().contains("ALTER SYSTEM SET wal_level = logical"), "{error:?}");
    assert!(cache.autorefresh_status().is_empty());
    drop(cache);
    // The same tables in a group without autorefresh (a fresh cache: a table is in one group).
    let dir = tempfile::tempdir().unwrap();
    let cache = open_cache(dir.path(), &url);
    cache.create_group(&tatp_group("manual", GroupKind::ReadOnly, false)).unwrap();
    assert_eq!(
        cache
            .load("manual", &LoadOptions { predicate: Some("s_id <= 10".into()), ..LoadOptions::default() })
            .unwrap()
            .instances,
        10
    );
    assert!(cache.autorefresh_status().is_empty());
}

/// A value PostgreSQL holds and the cache cannot (a numeric NaN) stops the
/// group with the reason instead of retrying the same transaction forever.
#[test]
fn a_value_the_cache_cannot_hold_stops_the_group() {
    let url = fresh_tatp("ar_nan");
    let mut client = connect(&url).unwrap();
    client.batch_execute("CREATE TABLE price (id int PRIMARY KEY, amount numeric(10,2), grid numeric(8,2)[]); INSERT INTO price SELECT g, g * 1.5 FROM generate_series(1, 10) g").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = open_cache(dir.path(), &url);
    cache
        .create_group(&pgtier_cache::CreateGroup {
            root: "price".into(),
            children: Vec::new(),
            ..ar_group("prices", false)
        })
        .unwrap();
    cache.load("prices", &LoadOptions::default()).unwrap();
    // NaN and wide values are numerics the cache holds (they once stopped it).
    client
        .batch_execute(
            "UPDATE price SET amount = 'NaN' WHERE id = 3; UPDATE price SET amount = -99999999.99 WHERE id = 4",
        )
        .unwrap();
    assert!(cache.wait_autorefreshed("prices", WAIT).unwrap());
    let rows = common::cache_dump(cache.database(), "price");
    assert!(rows.contains(&"3|NaN|null".to_owned()) && rows.contains(&"4|-99999999.99|null".to_owned()), "{rows:?}");
    // A two-dimensional array is not: pgtier's arrays have one dimension.
    client.batch_execute("UPDATE price SET grid = '{{1,2},{3,4}}' WHERE id = 5").unwrap();
    let s = status(&cache, "prices");
    wait_until("the group to stop", || *s.state.lock() == "stopped");
    let error = s.last_error.lock().clone().unwrap();
    assert!(error.contains("grid") && error.contains("one dimension"), "{error}");
    assert_eq!(s.errors.load(Ordering::Relaxed), 1, "stopped at once, not retried");
    wait_until("the slot to be dropped", || !slots(&mut client).iter().any(|n| n.contains("ar_nan_prices")));
}
