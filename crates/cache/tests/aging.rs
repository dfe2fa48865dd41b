//! Aging against a real PostgreSQL: LRU eviction keeps a dynamic group's
//! memory under the budget while lookups keep answering as PostgreSQL does
//! and recently used instances stay; KEEP groups are never evicted for
//! memory; time-based aging drops instances whose root timestamp is older
//! than the lifetime.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{cache_dump, check_whole_instances, postgres_dump, tatp_url};
use pgtier_backend::BackendConfig;
use pgtier_backend::connect::connect;
use pgtier_backend::harness::shared_cluster;
use pgtier_cache::{Aging, Cache, CacheConfig, CreateGroup, GroupKind, LoadOptions};
use pgtier_engine::{Database, EngineConfig, Value};

fn open(dir: &std::path::Path, url: &str, budget: Option<u64>) -> Arc<Cache> {
    let db = Database::open(dir, EngineConfig::default()).unwrap();
    let params = BackendConfig { url: Some(url.to_owned()), ..BackendConfig::default() }.resolve().unwrap();
    // The test drives the rounds (age_now); the thread stays out of the way.
    let mut config =
        CacheConfig { memory_budget: budget, aging_interval: Duration::from_secs(3600), ..CacheConfig::default() };
    config.awt.node = common::node_of(dir);
    Cache::open(db, Some(params), config).unwrap()
}

fn tatp_group(name: &str, dynamic: bool, keep: bool) -> CreateGroup {
    CreateGroup { aging: Aging::Lru, keep, ..common::tatp_group(name, GroupKind::ReadOnly, dynamic) }
}

/// Bytes one average TATP instance takes, measured on a scratch cache.
fn instance_bytes(url: &str) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), url, None);
    cache.create_group(&tatp_group("probe", false, false)).unwrap();
    cache.load("probe", &LoadOptions { predicate: Some("s_id <= 1000".into()), ..LoadOptions::default() }).unwrap();
    cache.stats()[0].memory_bytes / 1000
}

#[test]
fn lru_keeps_memory_under_the_budget_and_the_hot_set_cached() {
    let url = tatp_url();
    let per_instance = instance_bytes(&url);
    let budget = per_instance * 400;
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, Some(budget));
    cache.create_group(&tatp_group("dyn", true, false)).unwrap();
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut client = connect(&url).unwrap();
    let group = pgtier_cache::define_group(&mut client, &common::tatp_spec()).unwrap();
    let hot: Vec<i32> = (1..=20).collect();
    let mut peak = 0u64;
    // 2,000 distinct cold keys: five times what the budget holds.
    for cold_start in (1000..3000).step_by(100) {
        let mut txn = db.begin().unwrap();
        for key in hot.iter().copied().chain(cold_start..cold_start + 100) {
            let got = txn
                .get_with(subscriber, &[Value::Int4(key)], |row| {
                    row.values().iter().map(ToString::to_string).collect::<Vec<_>>().join("|")
                })
                .unwrap();
            if key % 50 == 0 {
                assert_eq!(
                    got.into_iter().collect::<Vec<_>>(),
                    postgres_dump(&mut client, &group, "subscriber", &format!("s_id = {key}")),
                    "{key}"
                );
            }
        }
        txn.commit().unwrap();
        let before = cache.stats()[0].memory_bytes;
        peak = peak.max(before);
        let report = cache.age_now().unwrap();
        let after = cache.stats()[0].memory_bytes;
        if before as f64 > 0.9 * budget as f64 {
            assert!(report.evicted > 0, "{before} > 90% of {budget} and nothing evicted");
        }
        assert!(after <= budget, "memory {after} over the budget {budget} after a round ({report:?})");
    }
    // The hot instances were read in every batch: never evicted, loaded once each.
    let cached: Vec<String> = cache_dump(&db, "subscriber");
    for key in &hot {
        assert!(
            cached.iter().any(|line| line.split('|').next() == Some(&key.to_string())),
            "hot subscriber {key} evicted"
        );
    }
    let stats = &cache.stats()[0];
    assert!(stats.evicted_instances > 1000, "{stats:?}");
    assert_eq!(stats.dynamic_loads, 20 + 2000, "hot keys must load once: {stats:?}");
    check_whole_instances(&db, &url);
    assert!(peak > budget / 2);
}

/// A round reads about twice what it evicts (its clock hand's window), not
/// every cached instance, and within the window the least recently used go.
#[test]
fn a_round_examines_a_window_and_spares_its_recently_used() {
    let url = tatp_url();
    let per_instance = instance_bytes(&url);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, Some(per_instance * 1000));
    cache.create_group(&tatp_group("lru", false, false)).unwrap();
    cache.load("lru", &LoadOptions { predicate: Some("s_id <= 1100".into()), ..LoadOptions::default() }).unwrap();
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    // Loaded rows carry the load's tick; the recently used ones a newer one.
    db.advance_access_tick();
    let recent: Vec<i32> = (1..=100).collect();
    let mut txn = db.begin().unwrap();
    for &key in &recent {
        assert!(txn.get_with(subscriber, &[Value::Int4(key)], |_| ()).unwrap().is_some(), "{key}");
    }
    txn.commit().unwrap();
    let before = cache.stats()[0].instances;
    assert_eq!(before, 1100);
    let report = cache.age_now().unwrap();
    let after = cache.stats()[0].clone();
    // Above 90% of the budget: down to 80%, about 300 instances.
    assert!(report.evicted >= 250, "{report:?}");
    assert!(after.memory_bytes <= per_instance * 1000, "{report:?} {after:?}");
    assert!(report.examined >= report.evicted, "{report:?}");
    assert!(report.examined < before * 3 / 4, "a round read {} of {before} instances: {report:?}", report.examined);
    let cached: Vec<String> = cache_dump(&db, "subscriber");
    for key in &recent {
        assert!(
            cached.iter().any(|line| line.split('|').next() == Some(&key.to_string())),
            "recently used subscriber {key} evicted ({report:?})"
        );
    }
    // The hand moved on: the next round examines other shards, and over
    // rounds the cache stays within its budget.
    for _ in 0..3 {
        cache.load("lru", &LoadOptions { predicate: Some("s_id <= 1500".into()), ..LoadOptions::default() }).unwrap();
        let report = cache.age_now().unwrap();
        assert!(report.evicted > 0, "{report:?}");
        assert!(cache.stats()[0].memory_bytes <= per_instance * 1000, "{report:?}");
    }
    check_whole_instances(&db, &url);
}

#[test]
fn keep_groups_stay_and_only_lru_groups_go() {
    let url = tatp_url();
    let per_instance = instance_bytes(&url);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, Some(per_instance * 100));
    let mut kept = tatp_group("kept", false, true);
    kept.aging = Aging::Lru;
    cache.create_group(&kept).unwrap();
    cache.load("kept", &LoadOptions { predicate: Some("s_id <= 300".into()), ..LoadOptions::default() }).unwrap();
    let report = cache.age_now().unwrap();
    assert_eq!(report.evicted, 0);
    assert_eq!(cache.stats()[0].instances, 300);
}

#[test]
fn time_aging_drops_old_instances() {
    let url = shared_cluster().unwrap().create_database("cache_time_aging").unwrap();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            "CREATE TABLE orders (id int PRIMARY KEY, created timestamptz NOT NULL, note text);
             CREATE TABLE order_lines (order_id int REFERENCES orders, line int, qty int, PRIMARY KEY (order_id, line));
             INSERT INTO orders SELECT g, now() - (g || ' hours')::interval - interval '30 minutes', 'o' || g FROM generate_series(1, 48) g;
             INSERT INTO order_lines SELECT o, l, o * l FROM generate_series(1, 48) o, generate_series(1, 3) l;",
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, None);
    let mut def = CreateGroup {
        name: "recent".into(),
        kind: GroupKind::ReadOnly,
        dynamic: false,
        root: "orders".into(),
        root_predicate: None,
        children: vec!["order_lines".into()],
        aging: Aging::Time { column: "note".into(), lifetime: Duration::from_secs(10 * 3600) },
        keep: false,
        memory_budget: None,
        autorefresh: false,
        flash: pgtier_cache::FlashPolicy::Default,
    };
    assert_eq!(cache.create_group(&def).unwrap_err().sqlstate(), "42804");
    def.aging = Aging::Time { column: "nope".into(), lifetime: Duration::from_secs(10 * 3600) };
    assert_eq!(cache.create_group(&def).unwrap_err().sqlstate(), "42703");
    def.aging = Aging::Time { column: "created".into(), lifetime: Duration::from_secs(10 * 3600) };
    cache.create_group(&def).unwrap();
    cache.load("recent", &LoadOptions::default()).unwrap();
    assert_eq!(cache.stats()[0].instances, 48);
    let report = cache.age_now().unwrap();
    assert_eq!(report.expired, 39, "orders 10..=48 are older than 10 hours");
    let expected: Vec<String> = client
        .query("SELECT id FROM orders WHERE created >= now() - interval '10 hours' ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|row| row.get::<_, i32>(0).to_string())
        .collect();
    let mut cached: Vec<String> =
        cache_dump(cache.database(), "orders").iter().map(|l| l.split('|').next().unwrap().to_owned()).collect();
    cached.sort_by_key(|id| id.parse::<i32>().unwrap());
    assert_eq!(cached, expected);
    assert_eq!(cache_dump(cache.database(), "order_lines").len(), 27);
}

/// A round frees at most a bounded amount (ROUND_BYTES_MAX, 4 MiB) and says
/// there is more: a round sized by a large excess ran for seconds while
/// promotions went on, and memory overshot the budget by 60 % at 8 sessions.
/// Repeated rounds still bring memory under the budget.
#[test]
fn rounds_are_bounded_and_repeat_until_under_the_budget() {
    const ROUND_BYTES_MAX: u64 = 4 << 20;
    let url = tatp_url();
    let per_instance = instance_bytes(&url);
    let dir = tempfile::tempdir().unwrap();
    let budget = per_instance * 1000;
    let cache = open(dir.path(), &url, Some(budget));
    cache.create_group(&tatp_group("big", false, false)).unwrap();
    cache.load("big", &LoadOptions::default()).unwrap();
    let loaded = cache.stats()[0].memory_bytes;
    assert!(loaded > budget + 2 * ROUND_BYTES_MAX, "the test needs an excess of several rounds: {loaded}");
    let first = cache.age_now().unwrap();
    assert!(first.more, "{first:?}");
    // The last instance chosen may pass the bound by its own size.
    let bound = ROUND_BYTES_MAX + 10 * per_instance;
    assert!(first.freed_bytes <= bound && first.freed_bytes > ROUND_BYTES_MAX / 2, "{first:?}");
    let mut rounds = 1;
    loop {
        let report = cache.age_now().unwrap();
        rounds += 1;
        assert!(report.freed_bytes <= bound, "{report:?}");
        if !report.more {
            break;
        }
        assert!(rounds < 100, "aging never caught up: {report:?}");
    }
    let after = cache.stats()[0].memory_bytes;
    assert!(after <= budget, "memory {after} over the budget {budget} after {rounds} rounds");
    assert!(rounds as u64 >= (loaded - budget) / ROUND_BYTES_MAX, "{rounds} rounds for {loaded} bytes");
    check_whole_instances(cache.database(), &url);
}

/// An instance a transaction's miss loaded stays cached until that
/// transaction ends, however old its stamp: the engine retries the lookup
/// that missed once, and an eviction between the load and that retry (a
/// round on another thread, or one a later miss runs) answered "no row" —
/// or updated nothing — for a row PostgreSQL has. Once the transaction
/// ends, the instance is as evictable as any.
#[test]
fn an_instance_a_transaction_missed_on_stays_until_it_ends() {
    let url = tatp_url();
    let per_instance = instance_bytes(&url);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, Some(per_instance * 100));
    cache.create_group(&tatp_group("pin", true, false)).unwrap();
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let cached =
        |key: i32| cache_dump(&db, "subscriber").iter().any(|line| line.split('|').next() == Some(&key.to_string()));
    let read_all = |keys: std::ops::RangeInclusive<i32>| {
        db.advance_access_tick();
        let mut txn = db.begin().unwrap();
        for key in keys {
            assert!(txn.get_with(subscriber, &[Value::Int4(key)], |_| ()).unwrap().is_some(), "{key}");
        }
        txn.commit().unwrap();
    };
    let pinned_key = 2999;
    let mut holder = db.begin().unwrap();
    assert!(holder.get_with(subscriber, &[Value::Int4(pinned_key)], |_| ()).unwrap().is_some());
    // Three budgets' worth of newer instances: rounds (the misses' and
    // one of the aging thread's) evict the oldest, and it is the oldest.
    read_all(1..=300);
    let report = cache.age_now().unwrap();
    assert!(report.evicted > 0, "{report:?}");
    assert!(cached(pinned_key), "evicted under the transaction that missed on it: {report:?}");
    let loads = cache.stats()[0].dynamic_loads;
    assert!(holder.get_with(subscriber, &[Value::Int4(pinned_key)], |_| ()).unwrap().is_some());
    assert_eq!(cache.stats()[0].dynamic_loads, loads, "read again without a load");
    holder.commit().unwrap();
    read_all(301..=400);
    cache.age_now().unwrap();
    assert!(!cached(pinned_key), "still cached after its transaction ended, older than everything else");
    assert!(cache.stats()[0].memory_bytes <= per_instance * 100);
}

/// Write-through's backpressure: instances PostgreSQL does not have yet
/// cannot be evicted, so with write-through stuck (a PostgreSQL session
/// holds a row it must update) an AWT group's memory passes its budget;
/// the next miss then waits instead of loading, until write-through has
/// sent the changes and a round has evicted them.
#[test]
fn a_miss_waits_while_write_through_holds_memory_past_the_budget() {
    loads_wait_for_write_through("cache_aging_backpressure", false);
}

/// The same with the group's own budget (`MEMORY`) instead of the cache's.
#[test]
fn a_miss_waits_while_write_through_holds_memory_past_the_group_budget() {
    loads_wait_for_write_through("cache_aging_backpressure_group", true);
}

fn loads_wait_for_write_through(database: &str, group_budget: bool) {
    let url = common::fresh_tatp(database);
    let per_instance = instance_bytes(&url);
    let budget = per_instance * 50;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let params = BackendConfig { url: Some(url.clone()), ..BackendConfig::default() }.resolve().unwrap();
    let mut config = CacheConfig {
        memory_budget: (!group_budget).then_some(budget),
        aging_interval: Duration::from_secs(3600),
        ..CacheConfig::default()
    };
    config.awt.node = common::node_of(dir.path());
    // One lane: the stuck transaction holds back every later one.
    config.awt.apply_connections = 1;
    let cache = Cache::open(db.clone(), Some(params), config).unwrap();
    cache
        .create_group(&CreateGroup {
            aging: Aging::Lru,
            memory_budget: group_budget.then_some(budget),
            ..common::tatp_group("dyn", GroupKind::Awt, true)
        })
        .unwrap();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let msc = db.catalog().table_by_name("subscriber").unwrap().column_index("msc_location").unwrap();
    let update = |key: i32| {
        let mut txn = db.begin().unwrap();
        assert!(txn.update(subscriber, &[Value::Int4(key)], &[(msc, Value::Int8(-i64::from(key)))]).unwrap());
        txn.commit().unwrap();
    };

    // Twice the budget of instances, loaded (not by misses, which would
    // wait as the one below does), then each changed while write-through
    // is stuck: none may be evicted.
    cache.load("dyn", &LoadOptions { predicate: Some("s_id <= 100".into()), ..LoadOptions::default() }).unwrap();
    let mut blocker = connect(&url).unwrap();
    let mut held = blocker.transaction().unwrap();
    held.execute("SELECT 1 FROM subscriber WHERE s_id = 1 FOR UPDATE", &[]).unwrap();
    for key in 1..=100 {
        update(key);
    }
    let report = cache.age_now().unwrap();
    assert_eq!(report.evicted, 0, "every instance has changes PostgreSQL does not have");
    let stats = cache.stats()[0].clone();
    assert!(stats.memory_bytes as f64 > 1.25 * budget as f64, "{} of {budget}", stats.memory_bytes);
    assert_eq!(stats.loads_held, 0);

    // The next miss waits: write-through is stuck, so nothing can go.
    let waiter = {
        let (db, cache) = (db.clone(), cache.clone());
        std::thread::spawn(move || {
            let _cache = cache;
            let mut txn = db.begin().unwrap();
            assert!(txn.update(subscriber, &[Value::Int4(500)], &[(msc, Value::Int8(-500))]).unwrap());
            txn.commit().unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_finished(), "the miss loaded while memory was past the budget with write-through stuck");
    // PostgreSQL lets write-through go: the changes arrive, the waiter's
    // rounds evict them, and the miss loads.
    held.rollback().unwrap();
    waiter.join().unwrap();
    let stats = cache.stats()[0].clone();
    assert_eq!(stats.loads_held, 1);
    assert!(stats.load_hold_us >= 300_000, "held {} µs", stats.load_hold_us);
    assert!(cache.wait_propagated(Duration::from_secs(30)));
    cache.age_now().unwrap();
    assert!(cache.stats()[0].memory_bytes <= budget, "{} of {budget}", cache.stats()[0].memory_bytes);
    let mut client = connect(&url).unwrap();
    let changed: i64 =
        client.query_one("SELECT count(*) FROM subscriber WHERE msc_location = -s_id", &[]).unwrap().get(0);
    assert_eq!(changed, 101, "every change reached PostgreSQL");
}
