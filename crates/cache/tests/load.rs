//! LOAD against a real PostgreSQL with TATP: the cache holds exactly
//! PostgreSQL's rows for the predicate, at PARALLEL 1 and 3; a cancel
//! leaves whole instances only; instances already cached are left alone.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TABLES, cache_dump, check_whole_instances, engine_with_group, postgres_dump, tatp_url};
use pgtier_backend::connect::connect;
use pgtier_cache::{LoadOptions, LoadProgress, load_group};

fn load_and_compare(parallel: usize) {
    let url = tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let (db, group) = engine_with_group(dir.path(), &url);
    let predicate = "s_id <= 1500";
    let options =
        LoadOptions { predicate: Some(predicate.into()), parallel, batch_instances_max: 200, ..LoadOptions::default() };
    let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
    assert_eq!(report.instances, 1500);
    let mut client = connect(&url).unwrap();
    for (index, table) in TABLES.into_iter().enumerate() {
        let expected = postgres_dump(&mut client, &group, table, predicate);
        let cached = cache_dump(&db, table);
        assert_eq!(cached.len(), expected.len(), "{table}");
        let first_difference = cached.iter().zip(&expected).find(|(c, e)| c != e);
        assert_eq!(first_difference, None, "{table}");
        assert_eq!(report.rows[index], (table.to_owned(), expected.len() as u64));
    }
    assert_eq!(options.progress.instances(), 1500);
    db.verify().unwrap();

    // Instances already cached are left as they are; the others are added whole.
    let options =
        LoadOptions { predicate: Some("s_id BETWEEN 1401 AND 1600".into()), parallel, ..LoadOptions::default() };
    let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
    assert_eq!((report.instances, report.skipped), (100, 100));
    for table in TABLES {
        assert_eq!(cache_dump(&db, table), postgres_dump(&mut client, &group, table, "s_id <= 1600"), "{table}");
    }
    check_whole_instances(&db, &url);
}

#[test]
fn load_parallel_1_equals_postgres() {
    load_and_compare(1);
}

#[test]
fn load_parallel_3_equals_postgres() {
    load_and_compare(3);
}

#[test]
fn cancel_leaves_whole_instances() {
    let url = tatp_url();
    for parallel in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (db, group) = engine_with_group(dir.path(), &url);
        let progress = Arc::new(LoadProgress::default());
        let options =
            LoadOptions { parallel, batch_instances_max: 37, progress: progress.clone(), ..LoadOptions::default() };
        let cancel = options.cancel.clone();
        let canceller = std::thread::spawn(move || {
            while progress.instances() < 300 {
                std::thread::sleep(Duration::from_micros(200));
            }
            cancel.cancel();
        });
        let error = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap_err();
        canceller.join().unwrap();
        assert_eq!(error.sqlstate(), "57014", "{error}");
        let loaded = cache_dump(&db, "subscriber").len();
        assert!((300..common::SUBSCRIBERS as usize).contains(&loaded), "{loaded}");
        check_whole_instances(&db, &url);
    }
}

/// PARALLEL splits an integer root key into ranges (each part reads its
/// range through the indexes), any other key by a hash: both give exactly
/// PostgreSQL's rows.
#[test]
fn parallel_parts_by_range_and_by_hash_equal_postgres() {
    let url = pgtier_backend::harness::shared_cluster().unwrap().create_database("cache_load_split").unwrap();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            "CREATE TABLE tkey (k text PRIMARY KEY, n int);
             CREATE TABLE tchild (k text REFERENCES tkey, i int, PRIMARY KEY (k, i));
             INSERT INTO tkey SELECT 'key' || g, g FROM generate_series(1, 3000) g;
             INSERT INTO tchild SELECT 'key' || g, i FROM generate_series(1, 3000) g, generate_series(1, 3) i WHERE i <= g % 4;",
        )
        .unwrap();
    {
        let (root, child, expected_rows) = ("tkey", "tchild", 3000u64);
        for parallel in [1, 2, 3] {
            let dir = tempfile::tempdir().unwrap();
            let db = pgtier_engine::Database::open(dir.path(), pgtier_engine::EngineConfig::default()).unwrap();
            let spec = pgtier_cache::GroupSpec {
                name: "g".into(),
                root: root.into(),
                children: vec![child.into()],
                kind: pgtier_cache::GroupKind::ReadOnly,
            };
            let group = pgtier_cache::define_group(&mut client, &spec).unwrap();
            pgtier_cache::create_group_tables(&db, &group).unwrap();
            let options = LoadOptions { parallel, ..LoadOptions::default() };
            let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
            assert_eq!(report.instances, expected_rows, "PARALLEL {parallel}");
            let children: i64 = client.query_one("SELECT count(*) FROM tchild", &[]).unwrap().get(0);
            assert_eq!(report.rows[1].1, children as u64, "PARALLEL {parallel}");
        }
    }
    // An integer key with a predicate whose range is narrow and uneven.
    let tatp = tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let (db, group) = engine_with_group(dir.path(), &tatp);
    let predicate = "s_id BETWEEN 17 AND 29 OR s_id > 19990";
    let options = LoadOptions { predicate: Some(predicate.into()), parallel: 4, ..LoadOptions::default() };
    load_group(&db, || connect(&tatp).map_err(|e| panic!("{e}")), &group, &options).unwrap();
    let mut tatp_client = connect(&tatp).unwrap();
    for table in TABLES {
        assert_eq!(cache_dump(&db, table), postgres_dump(&mut tatp_client, &group, table, predicate), "{table}");
    }
}
