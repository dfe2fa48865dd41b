//! `Cache::retune` (a configuration reload's `[cache]` keys) reaches the
//! threads that were started with the old values: a lowered memory budget
//! and a shorter aging interval make the running aging thread evict, with
//! no call to `age_now`; a bad tuning changes nothing.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use pgtier_cache::{Cache, CacheConfig, GroupKind, Tuning};
use pgtier_engine::{Database, EngineConfig, Value};

/// A key lookup as an application makes it (a miss loads the instance).
fn read(db: &Database, key: i32) {
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut txn = db.begin().unwrap();
    let found = txn.get_with(subscriber, &[Value::Int4(key)], |_| ()).unwrap();
    assert!(found.is_some(), "subscriber {key} is in PostgreSQL");
    txn.commit().unwrap();
}

fn instances(cache: &Cache) -> u64 {
    cache.stats().iter().find(|g| g.group == "tuned").unwrap().instances
}

#[test]
fn a_lowered_budget_and_interval_reach_the_running_aging_thread() {
    let url = common::fresh_tatp("cache_retune");
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(&dir.path().join("db"), EngineConfig::default()).unwrap();
    let params = pgtier_backend::BackendConfig { url: Some(url), ..Default::default() }.resolve().unwrap();
    // An hour between rounds: only a retune can make the thread look sooner.
    let mut config = CacheConfig {
        memory_budget: Some(u64::MAX / 2),
        aging_interval: Duration::from_secs(3600),
        ..CacheConfig::default()
    };
    config.awt.node = common::node_of(dir.path());
    let cache = Cache::open(db, Some(params), config).unwrap();
    cache.create_group(&common::tatp_group("tuned", GroupKind::ReadOnly, true)).unwrap();
    for key in 1..=600 {
        read(cache.database(), key);
    }
    cache.age_now().unwrap();
    assert_eq!(instances(&cache), 600, "nothing is evicted under the first budget");
    let group_bytes = cache.stats()[0].memory_bytes;

    // A bad tuning (low watermark above high) changes nothing.
    let before = cache.tuning();
    let broken = Tuning { memory_budget: Some(group_bytes / 2), low_watermark: 0.95, ..before.clone() };
    assert!(cache.retune(broken).is_err());
    assert_eq!(cache.tuning(), before);

    let lowered = Tuning { memory_budget: Some(group_bytes / 2), aging_interval: Duration::from_millis(50), ..before };
    cache.retune(lowered.clone()).unwrap();
    assert_eq!(cache.tuning(), lowered);
    let deadline = Instant::now() + Duration::from_secs(60);
    while instances(&cache) >= 300 {
        assert!(Instant::now() < deadline, "the aging thread kept {} instances past the new budget", instances(&cache));
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("after the retune the aging thread kept {} of 600 instances", instances(&cache));
    cache.shutdown();
}
