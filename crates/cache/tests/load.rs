//! LOAD against a real PostgreSQL with TATP: the cache holds exactly
//! PostgreSQL's rows for the predicate, at PARALLEL 1 and 3; a cancel
//! leaves whole instances only; a key already cached fails with 23505.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use common::{TABLES, cache_dump, engine_with_group, postgres_dump, tatp_url};
use pgtier_backend::connect::connect;
use pgtier_cache::{LoadOptions, LoadProgress, load_group};
use pgtier_engine::Database;

fn load_and_compare(parallel: usize) {
    let url = tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let (db, group) = engine_with_group(dir.path(), &url);
    let predicate = "s_id <= 1500";
    let options = LoadOptions { predicate: Some(predicate.into()), parallel, batch_instances_max: 200, ..LoadOptions::default() };
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

    // Loading an instance already cached is refused; no partial instance is added.
    let options = LoadOptions { predicate: Some("s_id BETWEEN 1400 AND 1600".into()), parallel, ..LoadOptions::default() };
    let error = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap_err();
    assert_eq!(error.sqlstate(), "23505", "{error}");
    assert!(error.hint().is_some());
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

/// Every cached row's instance is whole: its subscriber is cached, and every
/// cached subscriber has exactly PostgreSQL's children.
fn check_whole_instances(db: &Database, url: &str) {
    let key = |line: &String| line.split('|').next().unwrap().parse::<i32>().unwrap();
    let subscribers: HashSet<i32> = cache_dump(db, "subscriber").iter().map(key).collect();
    let mut client = connect(url).unwrap();
    for table in &TABLES[1..] {
        let mut cached: HashMap<i32, usize> = HashMap::new();
        for line in cache_dump(db, table) {
            *cached.entry(key(&line)).or_default() += 1;
        }
        assert!(cached.keys().all(|s| subscribers.contains(s)), "{table} row without its subscriber");
        let expected: HashMap<i32, usize> = client
            .query(&format!("SELECT s_id, count(*) FROM {table} GROUP BY s_id"), &[])
            .unwrap()
            .iter()
            .map(|row| (row.get::<_, i32>(0), row.get::<_, i64>(1) as usize))
            .collect();
        for s in &subscribers {
            assert_eq!(cached.get(s), expected.get(s), "{table} rows of subscriber {s}");
        }
    }
    // call_forwarding rows have their special_facility.
    let facilities: HashSet<String> = cache_dump(db, "special_facility").iter().map(|l| l.split('|').take(2).collect::<Vec<_>>().join("|")).collect();
    for line in cache_dump(db, "call_forwarding") {
        assert!(facilities.contains(&line.split('|').take(2).collect::<Vec<_>>().join("|")), "{line}");
    }
}

#[test]
fn cancel_leaves_whole_instances() {
    let url = tatp_url();
    for parallel in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (db, group) = engine_with_group(dir.path(), &url);
        let progress = Arc::new(LoadProgress::default());
        let options = LoadOptions { parallel, batch_instances_max: 37, progress: progress.clone(), ..LoadOptions::default() };
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
