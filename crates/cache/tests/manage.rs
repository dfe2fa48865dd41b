//! The `Cache` manager against a real PostgreSQL with TATP: LOAD by WHERE,
//! UNLOAD (cache only; PostgreSQL untouched), REFRESH after PostgreSQL
//! changed (changed rows, a deleted instance, a new one), DROP; each state
//! compared table by table with PostgreSQL's rows for the same predicate.
#![allow(clippy::unwrap_used)]

mod common;

use common::{TABLES, cache_dump, check_whole_instances, fresh_tatp, postgres_dump};
use pgtier_backend::connect::connect;
use pgtier_cache::{Aging, Cache, CreateGroup, GroupKind, LoadOptions};
use pgtier_engine::Value;
use postgres::Client;

fn tatp_group(name: &str, dynamic: bool, root_predicate: Option<&str>) -> CreateGroup {
    CreateGroup {
        root: "public.subscriber".into(),
        root_predicate: root_predicate.map(str::to_owned),
        aging: Aging::Off,
        ..common::tatp_group(name, GroupKind::ReadOnly, dynamic)
    }
}

fn assert_cache_equals(cache: &Cache, client: &mut Client, predicate: &str) {
    let group = pgtier_cache::define_group(client, &common::tatp_spec()).unwrap();
    for table in TABLES {
        let expected = postgres_dump(client, &group, table, predicate);
        let cached = cache_dump(cache.database(), table);
        assert_eq!(cached.len(), expected.len(), "{table} where {predicate}");
        assert_eq!(cached.iter().zip(&expected).find(|(c, e)| c != e), None, "{table} where {predicate}");
    }
}

fn keys(range: std::ops::RangeInclusive<i32>) -> Vec<Vec<Value>> {
    range.map(|s| vec![Value::Int4(s)]).collect()
}

fn postgres_counts(client: &mut Client) -> Vec<i64> {
    TABLES.iter().map(|t| client.query_one(&format!("SELECT count(*) FROM {t}"), &[]).unwrap().get(0)).collect()
}

#[test]
fn load_unload_refresh_drop_round_trip() {
    let url = fresh_tatp("cache_manage");
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    cache.create_group(&tatp_group("g", false, None)).unwrap();
    assert_eq!(cache.create_group(&tatp_group("g", false, None)).unwrap_err().sqlstate(), "42P07");

    let report = cache
        .load("g", &LoadOptions { predicate: Some("s_id <= 3000".into()), parallel: 2, ..LoadOptions::default() })
        .unwrap();
    assert_eq!(report.instances, 3000);
    assert_cache_equals(&cache, &mut client, "s_id <= 3000");

    // UNLOAD of some keys (and some never cached): cache only.
    let before = postgres_counts(&mut client);
    let unloaded =
        cache.unload("g", Some(&keys(1..=500).into_iter().chain(keys(9000..=9010)).collect::<Vec<_>>())).unwrap();
    assert_eq!(unloaded.instances, 500);
    assert!(unloaded.rows > 500);
    assert_cache_equals(&cache, &mut client, "s_id BETWEEN 501 AND 3000");
    assert_eq!(postgres_counts(&mut client), before, "UNLOAD must not touch PostgreSQL");
    check_whole_instances(cache.database(), &url);

    // PostgreSQL changes: rows updated, an instance deleted, children added.
    client
        .batch_execute(
            "UPDATE subscriber SET msc_location = msc_location + 1 WHERE s_id BETWEEN 600 AND 700;
             DELETE FROM call_forwarding WHERE s_id = 1000; DELETE FROM special_facility WHERE s_id = 1000;
             DELETE FROM access_info WHERE s_id = 1000; DELETE FROM subscriber WHERE s_id = 1000;
             INSERT INTO access_info SELECT s_id, 9, 1, 2, 'new', 'new' FROM subscriber WHERE s_id BETWEEN 800 AND 810;",
        )
        .unwrap();
    let stats = cache.stats();
    assert_eq!(stats[0].instances, 2500);
    // REFRESH WHERE: the cached keys matching it (as the SQL layer evaluates them) and PostgreSQL's rows.
    let refreshed = cache
        .refresh(
            "g",
            &keys(501..=3000),
            &LoadOptions { predicate: Some("s_id BETWEEN 501 AND 3000".into()), ..LoadOptions::default() },
        )
        .unwrap();
    assert_eq!((refreshed.reloaded, refreshed.removed), (2499, 1));
    assert_cache_equals(&cache, &mut client, "s_id BETWEEN 501 AND 3000");
    check_whole_instances(cache.database(), &url);

    // UNLOAD everything, then LOAD again: the same rows.
    let all = cache.unload("g", None).unwrap();
    assert_eq!(all.instances, 2499);
    assert!(cache_dump(cache.database(), "access_info").is_empty());
    cache.load("g", &LoadOptions { predicate: Some("s_id <= 2000".into()), ..LoadOptions::default() }).unwrap();
    assert_cache_equals(&cache, &mut client, "s_id <= 2000");
    cache.database().verify().unwrap();

    cache.drop_group("g", false).unwrap();
    assert!(cache.database().catalog().table_by_name("subscriber").is_none());
    assert_eq!(cache.drop_group("g", false).unwrap_err().sqlstate(), "42704");
    cache.drop_group("g", true).unwrap();
}

#[test]
fn group_predicate_limits_every_load() {
    let url = fresh_tatp("cache_predicate");
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    cache.create_group(&tatp_group("even", false, Some("s_id % 2 = 0"))).unwrap();
    cache.load("even", &LoadOptions { predicate: Some("s_id <= 1000".into()), ..LoadOptions::default() }).unwrap();
    assert_cache_equals(&cache, &mut client, "s_id <= 1000 AND s_id % 2 = 0");
    assert_eq!(cache.groups()[0].root_predicate.as_deref(), Some("s_id % 2 = 0"));
    let tables = cache.tables();
    assert_eq!(tables.len(), 4);
    assert_eq!(tables[0].rows, 500);
    assert!(tables.iter().all(|t| t.memory_bytes > 0));
}

#[test]
fn definitions_survive_restart() {
    let url = fresh_tatp("cache_restart");
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    {
        let cache = common::open_cache(dir.path(), &url);
        cache.create_group(&tatp_group("g", false, Some("s_id % 3 = 0"))).unwrap();
        cache.load("g", &LoadOptions { predicate: Some("s_id <= 600".into()), ..LoadOptions::default() }).unwrap();
        // A table already cached by another group.
        let error = cache.create_group(&tatp_group("other", false, None)).unwrap_err();
        assert_eq!(error.sqlstate(), "42P07", "{error}");
        assert!(error.hint().unwrap().contains("\"g\""));
    }
    // Reopened without a checkpoint (WAL replay), then after a checkpoint.
    for round in 0..2 {
        let cache = common::open_cache(dir.path(), &url);
        let groups = cache.groups();
        assert_eq!(groups.len(), 1, "round {round}");
        assert_eq!(groups[0].root_predicate.as_deref(), Some("s_id % 3 = 0"));
        assert_cache_equals(&cache, &mut client, "s_id <= 600 AND s_id % 3 = 0");
        cache.database().checkpoint().unwrap();
    }
    let cache = common::open_cache(dir.path(), &url);
    cache.load("g", &LoadOptions { predicate: Some("s_id <= 900".into()), ..LoadOptions::default() }).unwrap();
    assert_cache_equals(&cache, &mut client, "s_id <= 900 AND s_id % 3 = 0");
    cache.drop_group("g", false).unwrap();
    drop(cache);
    let cache = common::open_cache(dir.path(), &url);
    assert!(cache.groups().is_empty());
}

#[test]
fn unload_leaves_instances_an_application_transaction_holds() {
    let url = common::tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    cache.create_group(&CreateGroup { kind: GroupKind::Awt, ..tatp_group("g", false, None) }).unwrap();
    cache.load("g", &LoadOptions { predicate: Some("s_id <= 600".into()), ..LoadOptions::default() }).unwrap();
    let db = cache.database().clone();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let msc = subscriber.column_index("msc_location").unwrap();
    let mut holder = db.begin().unwrap();
    assert!(holder.update(subscriber.id, &[Value::Int4(5)], &[(msc, Value::Int4(1))]).unwrap());
    // Evictions never wait for the application: the held instance stays, the rest go.
    let report = cache.unload("g", None).unwrap();
    assert_eq!((report.instances, report.skipped_locked), (599, 1), "{report:?}");
    holder.commit().unwrap();
    assert_eq!(cache_dump(&db, "subscriber").len(), 1);
    // Subscriber 5 has a change PostgreSQL has not confirmed yet, or had: once propagated it can go.
    assert!(cache.wait_propagated(std::time::Duration::from_secs(30)));
    assert_eq!(cache.unload("g", None).unwrap().instances, 1);
}

#[test]
fn readonly_groups_refuse_application_writes() {
    let url = common::tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    cache.create_group(&tatp_group("ro", false, None)).unwrap();
    cache.load("ro", &LoadOptions { predicate: Some("s_id <= 10".into()), ..LoadOptions::default() }).unwrap();
    let db = cache.database().clone();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let msc = subscriber.column_index("msc_location").unwrap();
    let mut txn = db.begin().unwrap();
    let error = txn.update(subscriber.id, &[Value::Int4(5)], &[(msc, Value::Int4(1))]).unwrap_err();
    assert_eq!(error.sqlstate(), "25006", "{error}");
    assert!(error.to_string().contains("READONLY cache group \"ro\""), "{error}");
    assert!(error.hint().is_some());
    txn.rollback();
    // Unloading and loading still work (they are not application writes).
    assert_eq!(cache.unload("ro", None).unwrap().instances, 10);
}
