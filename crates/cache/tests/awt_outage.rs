//! PostgreSQL down under AWT: local commits go on, the backlog grows up to
//! the retained-WAL bound, past which writes to AWT groups fail loudly
//! (53400 with a hint); PostgreSQL back, propagation resumes by itself,
//! drains, writes work again, and nothing acknowledged is lost or repeated.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::populate_tatp;
use pgtier_backend::BackendConfig;
use pgtier_backend::connect::connect;
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_cache::{AwtConfig, Cache, CacheConfig, GroupKind, LoadOptions};
use pgtier_engine::{Database, EngineConfig, Value};

#[test]
fn writes_stop_at_the_bound_and_everything_arrives_after_the_outage() {
    let mut cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.create_database("awt_outage").unwrap();
    populate_tatp(&url);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let params = BackendConfig { url: Some(url.clone()), ..BackendConfig::default() }.resolve().unwrap();
    let config = CacheConfig {
        awt: AwtConfig { retained_wal_max: 256 << 10, ..AwtConfig::default() },
        ..CacheConfig::default()
    };
    let cache = Cache::open(db, Some(params), config).unwrap();
    cache.create_group(&common::tatp_group("awt", GroupKind::Awt, false)).unwrap();
    cache.load("awt", &LoadOptions { predicate: Some("s_id <= 1000".into()), ..LoadOptions::default() }).unwrap();
    assert!(cache.wait_propagated(Duration::from_secs(30)));
    let db = cache.database().clone();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let msc = subscriber.column_index("msc_location").unwrap();
    let sum = |client: &mut postgres::Client| -> i64 {
        client.query_one("SELECT sum(msc_location)::bigint FROM subscriber WHERE s_id <= 1000", &[]).unwrap().get(0)
    };
    let before = sum(&mut connect(&url).unwrap());

    cluster.stop_immediate().unwrap();
    let mut acknowledged = 0i64;
    let refusal = loop {
        let mut txn = db.begin().unwrap();
        let key = [Value::Int4((acknowledged % 1000) as i32 + 1)];
        match txn.update_with(subscriber.id, &key, |row| {
            Ok(Some(vec![(msc, Value::Int4(row.get_i64(msc).unwrap() as i32 + 1))]))
        }) {
            Ok(_) => {
                txn.commit().unwrap();
                acknowledged += 1;
            }
            Err(error) => break error,
        }
        assert!(acknowledged < 100_000, "the bound never stopped writes");
    };
    assert_eq!(refusal.sqlstate(), "53400", "{refusal}");
    assert!(refusal.to_string().contains("behind"), "{refusal}");
    assert!(refusal.hint().unwrap().contains("awt_retained_wal_max"), "{:?}", refusal.hint());
    assert!(acknowledged > 100, "local commits went on during the outage: {acknowledged}");
    // The outage is seen by write-through as well; on a fast disk the bound
    // can be reached before a lane's first write to the dead connection
    // fails, so it is waited for rather than expected at once.
    let seen = std::time::Instant::now() + Duration::from_secs(10);
    while cache.propagation().unwrap().connected.load(std::sync::atomic::Ordering::Relaxed) {
        assert!(std::time::Instant::now() < seen, "write-through never saw PostgreSQL go");
        std::thread::sleep(Duration::from_millis(10));
    }

    cluster.restart().unwrap();
    assert!(cache.wait_propagated(Duration::from_secs(60)), "{:?}", cache.propagation_info());
    let mut txn = db.begin().unwrap();
    txn.update(subscriber.id, &[Value::Int4(1)], &[(msc, Value::Int4(0))]).unwrap();
    txn.rollback();
    let mut client = connect(&url).unwrap();
    assert_eq!(sum(&mut client), before + acknowledged, "every acknowledged commit arrived once");
    let verified = cache.verify("awt").unwrap();
    assert!(verified.is_clean(), "{verified:?}");
    // Nothing is left marked as unpropagated (what the failed sessions had
    // queued was unmarked and marked again when read anew): all can go.
    let unloaded = cache.unload("awt", None).unwrap();
    assert_eq!((unloaded.instances, unloaded.skipped_dirty), (1000, 0), "{unloaded:?}");
    println!(
        "{acknowledged} commits during the outage before the bound; retries {}",
        cache.propagation_info().unwrap().retries
    );
    drop(cache);
    drop(client);
    cluster.stop().unwrap();
}
