//! DYNAMIC groups against a real PostgreSQL with TATP: application lookups
//! that miss (by the root key, by a child's key prefix, by a child's full
//! key) load the whole instance inside the statement; absent keys answer no
//! row; concurrent misses on one key load it once. Every answer and the
//! final cache are compared with PostgreSQL.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{SUBSCRIBERS, TABLES, cache_dump, check_whole_instances, postgres_dump, tatp_url};
use pgtier_backend::BackendConfig;
use pgtier_backend::connect::connect;
use pgtier_cache::{Cache, CacheConfig, GroupKind};
use pgtier_engine::{Database, EngineConfig, Origin, Value};
use rand::{Rng, SeedableRng};

fn dynamic_cache(dir: &std::path::Path, url: &str) -> Arc<Cache> {
    let db = Database::open(dir, EngineConfig::default()).unwrap();
    let params = BackendConfig { url: Some(url.to_owned()), ..BackendConfig::default() }.resolve().unwrap();
    let mut config = CacheConfig::default();
    config.awt.node = common::node_of(dir);
    let cache = Cache::open(db, Some(params), config).unwrap();
    cache.create_group(&common::tatp_group("dyn", GroupKind::Awt, true)).unwrap();
    cache
}

fn row_text(values: &[Value]) -> String {
    values.iter().map(ToString::to_string).collect::<Vec<_>>().join("|")
}

#[test]
fn misses_load_whole_instances_and_answer_as_postgres() {
    let url = tatp_url();
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = dynamic_cache(dir.path(), &url);
    let db = cache.database().clone();
    let catalog = db.catalog();
    let id = |name: &str| catalog.table_by_name(name).unwrap().id;
    let (subscriber, access_info) = (id("subscriber"), id("access_info"));
    let access_pk = catalog.table_by_name("access_info").unwrap().primary_index;
    let group = pgtier_cache::define_group(&mut client, &common::tatp_spec()).unwrap();

    let mut rng = rand::rngs::StdRng::seed_from_u64(14);
    let mut present = Vec::new();
    for round in 0..600 {
        // Keys beyond SUBSCRIBERS are absent in PostgreSQL too.
        let key = rng.random_range(1..=SUBSCRIBERS as i32 + SUBSCRIBERS as i32 / 4);
        let mut txn = db.begin().unwrap();
        let expected_root = postgres_dump(&mut client, &group, "subscriber", &format!("s_id = {key}"));
        let expected_access = postgres_dump(&mut client, &group, "access_info", &format!("s_id = {key}"));
        match round % 3 {
            // By the root key.
            0 => {
                let got = txn.get_with(subscriber, &[Value::Int4(key)], |row| row_text(&row.values())).unwrap();
                assert_eq!(got.into_iter().collect::<Vec<_>>(), expected_root, "subscriber {key}");
            }
            // By a child's key prefix (all access_info rows of the subscriber).
            1 => {
                let mut got = Vec::new();
                txn.scan_prefix(access_pk, &[Value::Int4(key)], |row| {
                    got.push(row_text(&row.values()));
                    Ok(true)
                })
                .unwrap();
                got.sort();
                assert_eq!(got, expected_access, "access_info of {key}");
            }
            // By a child's full key (int8 for an int4 column: normalized).
            _ => {
                let got = txn
                    .get_with(access_info, &[Value::Int4(key), Value::Int2(1)], |row| row_text(&row.values()))
                    .unwrap();
                let expected: Vec<String> =
                    expected_access.iter().filter(|line| line.split('|').nth(1) == Some("1")).cloned().collect();
                assert_eq!(got.into_iter().collect::<Vec<_>>(), expected, "access_info ({key}, 1)");
            }
        }
        txn.commit().unwrap();
        if !expected_root.is_empty() {
            present.push(key);
        }
    }
    present.sort_unstable();
    present.dedup();
    // The cache holds exactly the instances looked up that PostgreSQL has, whole.
    let list = present.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    for table in TABLES {
        assert_eq!(
            cache_dump(&db, table),
            postgres_dump(&mut client, &group, table, &format!("s_id IN ({list})")),
            "{table}"
        );
    }
    check_whole_instances(&db, &url);
    let stats = &cache.stats()[0];
    assert_eq!(stats.dynamic_loads, present.len() as u64);
    assert!(stats.dynamic_absent > 0);
    assert!(stats.miss_latency_avg_us > 0.0);
}

#[test]
fn concurrent_misses_on_one_key_load_once() {
    let url = tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let cache = dynamic_cache(dir.path(), &url);
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    for key in [11, 12, 13] {
        std::thread::scope(|scope| {
            for _ in 0..4 {
                let db = db.clone();
                scope.spawn(move || {
                    let mut txn = db.begin().unwrap();
                    assert!(txn.get_with(subscriber, &[Value::Int4(key)], |_| ()).unwrap().is_some());
                    txn.commit().unwrap();
                });
            }
        });
    }
    assert_eq!(cache.stats()[0].dynamic_loads, 3);
    assert_eq!(cache_dump(&db, "subscriber").len(), 3);
}

/// The race behind a flaky "absent" (3 of 4 concurrent missers got no
/// row once): a statement whose snapshot predates another session's load
/// of the instance finds the loaded row newer than its snapshot. PostgreSQL
/// had it all along, so the miss path retries at a fresh snapshot.
#[test]
fn a_statement_begun_before_another_sessions_load_finds_the_row() {
    let url = tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let cache = dynamic_cache(dir.path(), &url);
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut early = db.begin().unwrap();
    early.begin_statement().unwrap();
    let mut loader = db.begin().unwrap();
    assert!(loader.get_with(subscriber, &[Value::Int4(31)], |_| ()).unwrap().is_some());
    loader.commit().unwrap();
    assert!(
        early.get_with(subscriber, &[Value::Int4(31)], |_| ()).unwrap().is_some(),
        "loaded after this statement's snapshot, but PostgreSQL has it"
    );
    early.end_statement();
    early.commit().unwrap();
    assert_eq!(cache.stats()[0].dynamic_loads, 1);
}

/// A miss on an instance another load is writing (held, uncommitted) must
/// not answer "no row": it is a serialization failure until that load ends,
/// then the row.
#[test]
fn a_miss_on_an_instance_being_loaded_is_retryable_never_absent() {
    let url = tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let cache = dynamic_cache(dir.path(), &url);
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    // The root row of subscriber 41 as PostgreSQL has it, read by a
    // throwaway cache, written by a transaction of load origin left open
    // (a LOAD batch under way).
    let row: Vec<Value> = {
        let other = tempfile::tempdir().unwrap();
        let reader = dynamic_cache(other.path(), &url);
        let mut txn = reader.database().begin().unwrap();
        let row = txn.get_with(subscriber, &[Value::Int4(41)], |row| row.values()).unwrap().unwrap();
        txn.commit().unwrap();
        row
    };
    let mut batch = db.begin_with_origin(db.default_commit_mode(), Origin::Load).unwrap();
    batch.insert(subscriber, &row).unwrap();
    let mut app = db.begin().unwrap();
    let error = app.get_with(subscriber, &[Value::Int4(41)], |_| ()).unwrap_err();
    assert_eq!(error.sqlstate(), "40001", "{error}");
    app.rollback();
    batch.commit().unwrap();
    let mut app = db.begin().unwrap();
    assert!(app.get_with(subscriber, &[Value::Int4(41)], |_| ()).unwrap().is_some());
    app.commit().unwrap();
}

#[test]
fn cached_root_without_the_child_is_a_plain_miss() {
    let url = tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let cache = dynamic_cache(dir.path(), &url);
    let db = cache.database().clone();
    let access_info = db.catalog().table_by_name("access_info").unwrap().id;
    // Subscriber 7 has access_info types 1..=4 at most (t <= s % 4 + 1 = 4); type 9 never exists.
    let mut txn = db.begin().unwrap();
    assert!(txn.get_with(access_info, &[Value::Int4(7), Value::Int2(9)], |_| ()).unwrap().is_none());
    assert!(txn.get_with(access_info, &[Value::Int4(7), Value::Int2(9)], |_| ()).unwrap().is_none());
    txn.commit().unwrap();
    let stats = &cache.stats()[0];
    assert_eq!(
        (stats.dynamic_loads, stats.instances),
        (1, 1),
        "the first miss loads subscriber 7, the second finds it cached"
    );
}

#[test]
fn writes_that_miss_load_the_instance_first() {
    let url = common::fresh_tatp("cache_dynamic_writes");
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = dynamic_cache(dir.path(), &url);
    let db = cache.database().clone();
    let catalog = db.catalog();
    let (subscriber, access_info) =
        (catalog.table_by_name("subscriber").unwrap().id, catalog.table_by_name("access_info").unwrap().id);
    let msc = catalog.table_by_name("subscriber").unwrap().column_index("msc_location").unwrap();
    let mut txn = db.begin().unwrap();
    // An UPDATE by key of an instance not cached: loaded, then updated.
    assert!(txn.update(subscriber, &[Value::Int4(21)], &[(msc, Value::Int4(-1))]).unwrap());
    // An INSERT of a child whose parent is not cached: the foreign key check loads the parent's instance.
    txn.insert(
        access_info,
        &[
            Value::Int4(22),
            Value::Int2(9),
            Value::Int2(1),
            Value::Int2(2),
            Value::Text("x".into()),
            Value::Text("y".into()),
        ],
    )
    .unwrap();
    txn.commit().unwrap();
    let stats = &cache.stats()[0];
    assert_eq!(stats.dynamic_loads, 2);
    let group = pgtier_cache::define_group(&mut client, &common::tatp_spec()).unwrap();
    // The group is AWT: both writes reach PostgreSQL, and the cache holds
    // exactly PostgreSQL's two instances.
    assert!(cache.wait_propagated(std::time::Duration::from_secs(30)));
    for table in TABLES {
        assert_eq!(cache_dump(&db, table), postgres_dump(&mut client, &group, table, "s_id IN (21, 22)"), "{table}");
    }
    assert!(cache_dump(&db, "access_info").contains(&"22|9|1|2|x  |y    ".to_owned())); // char(3), char(5)
    let subscriber_21 = cache_dump(&db, "subscriber").into_iter().find(|l| l.starts_with("21|")).unwrap();
    assert!(subscriber_21.contains("|-1|"), "{subscriber_21}");

    // An INSERT of a child whose key PostgreSQL already holds, its instance
    // not cached: 23505, PostgreSQL's answer. The instance loads before the
    // row goes in; loaded after it, it met the insert's own lock and the
    // statement failed with 40001 once the load's retries ran out.
    let existing = postgres_dump(&mut client, &group, "access_info", "s_id = 23");
    let ai_type: i16 = existing[0].split('|').nth(1).unwrap().parse().unwrap();
    let mut txn = db.begin().unwrap();
    let started = std::time::Instant::now();
    let duplicate = txn.insert(
        access_info,
        &[
            Value::Int4(23),
            Value::Int2(ai_type),
            Value::Int2(1),
            Value::Int2(2),
            Value::Text("x".into()),
            Value::Text("y".into()),
        ],
    );
    assert_eq!(duplicate.unwrap_err().sqlstate(), "23505", "after {:?}", started.elapsed());
    txn.rollback();
    assert_eq!(
        cache_dump(&db, "access_info"),
        postgres_dump(&mut client, &group, "access_info", "s_id IN (21, 22, 23)")
    );
}

#[test]
fn refresh_of_a_dynamic_group_reloads_only_cached_instances() {
    let url = common::fresh_tatp("cache_dynamic_refresh");
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = dynamic_cache(dir.path(), &url);
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut txn = db.begin().unwrap();
    for key in 1..=50 {
        assert!(txn.get_with(subscriber, &[Value::Int4(key)], |_| ()).unwrap().is_some());
    }
    txn.commit().unwrap();
    client.batch_execute("UPDATE subscriber SET vlr_location = -s_id WHERE s_id <= 100; UPDATE access_info SET data3 = 'r' WHERE s_id <= 100").unwrap();
    let keys: Vec<Vec<Value>> = (1..=50).map(|k| vec![Value::Int4(k)]).collect();
    let report = cache.refresh("dyn", &keys, &pgtier_cache::LoadOptions::default()).unwrap();
    assert_eq!((report.reloaded, report.removed), (50, 0));
    let group = pgtier_cache::define_group(&mut client, &common::tatp_spec()).unwrap();
    for table in TABLES {
        assert_eq!(cache_dump(&db, table), postgres_dump(&mut client, &group, table, "s_id <= 50"), "{table}");
    }
}

#[test]
fn a_deleted_instance_is_not_loaded_back_before_postgres_has_the_delete() {
    let url = common::fresh_tatp("cache_dynamic_deleted");
    let dir = tempfile::tempdir().unwrap();
    // Asynchronous commits: the delete reaches the WAL's durable end (and
    // write-through) only at the next flush, the widest window there is.
    let db = Database::open(
        dir.path(),
        EngineConfig { commit_mode: pgtier_engine::CommitMode::Async, ..EngineConfig::default() },
    )
    .unwrap();
    let params = BackendConfig { url: Some(url.clone()), ..BackendConfig::default() }.resolve().unwrap();
    let mut config = CacheConfig::default();
    config.awt.node = common::node_of(dir.path());
    let cache = Cache::open(db, Some(params), config).unwrap();
    cache.create_group(&common::tatp_group("dyn", GroupKind::Awt, true)).unwrap();
    let db = cache.database().clone();
    let catalog = db.catalog();
    let ids: Vec<_> = TABLES.iter().map(|t| catalog.table_by_name(t).unwrap()).collect();
    for key in 100..140 {
        // Read (loads the instance), delete it whole, read again at once.
        let mut txn = db.begin().unwrap();
        assert!(txn.get_with(ids[0].id, &[Value::Int4(key)], |_| ()).unwrap().is_some());
        for table in ids.iter().rev() {
            let mut keys = Vec::new();
            let index = table.primary_index;
            txn.scan_prefix(index, &[Value::Int4(key)], |row| {
                keys.push(table.primary_key.iter().map(|&c| row.get(c).to_owned_value()).collect::<Vec<_>>());
                Ok(true)
            })
            .unwrap();
            for k in keys {
                assert!(txn.delete(table.id, &k).unwrap());
            }
        }
        txn.commit().unwrap();
        let mut txn = db.begin().unwrap();
        assert!(
            txn.get_with(ids[0].id, &[Value::Int4(key)], |_| ()).unwrap().is_none(),
            "subscriber {key} came back from PostgreSQL"
        );
        txn.commit().unwrap();
    }
    assert!(cache.wait_propagated(std::time::Duration::from_secs(30)));
    let mut client = connect(&url).unwrap();
    let left: i64 =
        client.query_one("SELECT count(*) FROM subscriber WHERE s_id BETWEEN 100 AND 139", &[]).unwrap().get(0);
    assert_eq!(left, 0, "the deletes reached PostgreSQL");
    // Once PostgreSQL has the delete, a miss asks it and finds nothing.
    let mut txn = db.begin().unwrap();
    assert!(txn.get_with(ids[0].id, &[Value::Int4(120)], |_| ()).unwrap().is_none());
    txn.commit().unwrap();
}

/// A subscriber's row with `s_id` and `sub_nbr`, the other columns as TATP fills them.
fn subscriber_row(db: &Database, s_id: i32, number: &str) -> Vec<Value> {
    let schema = db.catalog().table_by_name("subscriber").unwrap().clone();
    schema
        .columns
        .iter()
        .enumerate()
        .map(|(i, column)| match i {
            0 => Value::Int4(s_id),
            1 => Value::Text(number.to_owned()),
            _ => pgtier_engine::coerce(Value::Int4(1), column.ty, &column.name).unwrap(),
        })
        .collect()
}

#[test]
fn an_insert_or_update_that_takes_a_key_postgresql_holds_fails_as_in_postgresql() {
    let url = common::fresh_tatp("cache_dynamic_unique_writes");
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = dynamic_cache(dir.path(), &url);
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let number = |s_id: i32| format!("{s_id:015}");

    // A subscriber whose s_id PostgreSQL holds (its instance not cached).
    let mut txn = db.begin().unwrap();
    let taken_key = txn.insert(subscriber, &subscriber_row(&db, 30, "new-30"));
    assert_eq!(taken_key.map_err(|e| e.sqlstate().to_owned()), Err("23505".to_owned()), "s_id 30");
    txn.rollback();
    // A new subscriber with another's number.
    let mut txn = db.begin().unwrap();
    let taken_number = txn.insert(subscriber, &subscriber_row(&db, 900_000, &number(31)));
    assert_eq!(taken_number.map_err(|e| e.sqlstate().to_owned()), Err("23505".to_owned()), "sub_nbr of 31");
    txn.rollback();
    // A subscriber given another's number.
    let mut txn = db.begin().unwrap();
    let moved = txn.update(subscriber, &[Value::Int4(21)], &[(1, Value::Text(number(32)))]);
    assert_eq!(moved.map_err(|e| e.sqlstate().to_owned()), Err("23505".to_owned()), "21 takes 32's number");
    txn.rollback();
    // What is new to both goes in.
    let mut txn = db.begin().unwrap();
    txn.insert(subscriber, &subscriber_row(&db, 900_001, "new-900001")).unwrap();
    txn.commit().unwrap();
    assert!(cache.wait_propagated(std::time::Duration::from_secs(30)), "write-through did not drain");
    let group = pgtier_cache::define_group(&mut client, &common::tatp_spec()).unwrap();
    let in_postgres = postgres_dump(&mut client, &group, "subscriber", "s_id IN (21, 30, 31, 32, 900001)");
    let cached = cache_dump(&db, "subscriber");
    assert!(cached.iter().all(|row| in_postgres.contains(row)), "{cached:?} vs {in_postgres:?}");
    assert!(cached.iter().any(|row| row.starts_with("900001|new-900001")), "{cached:?}");
    assert_eq!(in_postgres.len(), 5, "{in_postgres:?}");
}
