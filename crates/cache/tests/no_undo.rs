//! Loads never undo commits (`fence.rs`): a LOAD or REFRESH reads one
//! PostgreSQL snapshot and reaches an instance later; a commit to that
//! instance made in the cache after the snapshot and propagated before the
//! load reaches it (so no longer marked as unpropagated) must not be
//! overwritten by the snapshot's older image (REFRESH), nor a deleted
//! instance brought back (LOAD). The instance is the last of a large group,
//! so the load reaches it long after the commit has propagated; the test
//! checks that this ordering happened, so it cannot pass by luck.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgtier_backend::connect::connect;
use pgtier_cache::{Cache, CreateGroup, GroupKind, LoadOptions};
use pgtier_engine::Value;

const ROWS: i32 = 200_000;

/// An AWT group over `kv` (ROWS instances), all loaded.
fn setup(name: &str) -> (String, tempfile::TempDir, Arc<Cache>) {
    let url = pgtier_backend::harness::shared_cluster().unwrap().create_database(name).unwrap();
    connect(&url)
        .unwrap()
        .batch_execute(&format!(
            "CREATE TABLE kv (k int PRIMARY KEY, v int); INSERT INTO kv SELECT g, g FROM generate_series(1, {ROWS}) g"
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    let group =
        CreateGroup { root: "kv".into(), children: Vec::new(), ..common::tatp_group("kv", GroupKind::Awt, false) };
    cache.create_group(&group).unwrap();
    cache.load("kv", &LoadOptions::default()).unwrap();
    (url, dir, cache)
}

/// Runs `load` in a thread; once its snapshot is taken (its COPY runs in
/// PostgreSQL), commits `change` and waits until PostgreSQL has it; returns
/// when both are done, with whether the commit reached PostgreSQL before the
/// load ended.
fn beside(
    cache: &Arc<Cache>,
    url: &str,
    load: impl FnOnce(&Cache) + Send + 'static,
    change: impl FnOnce(&Cache),
) -> bool {
    let loader = cache.clone();
    let started = Instant::now();
    let handle = std::thread::spawn(move || {
        load(&loader);
        Instant::now()
    });
    let mut client = connect(url).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let copying: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'COPY (SELECT%'",
                &[],
            )
            .unwrap()
            .get(0);
        if copying > 0 {
            break;
        }
        assert!(Instant::now() < deadline && !handle.is_finished(), "the load's COPY was never seen running");
        std::thread::sleep(Duration::from_millis(2));
    }
    change(cache);
    assert!(cache.wait_propagated(Duration::from_secs(30)));
    let propagated = Instant::now();
    let ended = handle.join().unwrap();
    println!(
        "commit propagated {:?} after the load began, load ended after {:?}",
        propagated - started,
        ended - started
    );
    propagated < ended
}

fn write(cache: &Cache, f: impl FnOnce(&mut pgtier_engine::Transaction, pgtier_engine::TableId)) {
    let db = cache.database();
    let kv = db.catalog().table_by_name("kv").unwrap().id;
    let mut txn = db.begin().unwrap();
    f(&mut txn, kv);
    txn.commit().unwrap();
}

fn cached_v(cache: &Cache, k: i32) -> Option<Value> {
    let db = cache.database();
    let kv = db.catalog().table_by_name("kv").unwrap().id;
    let mut txn = db.begin().unwrap();
    let v = txn.get_with(kv, &[Value::Int4(k)], |row| row.values()[1].clone()).unwrap();
    txn.commit().unwrap();
    v
}

#[test]
fn refresh_does_not_undo_an_update_it_did_not_see() {
    let (url, _dir, cache) = setup("no_undo_refresh");
    let ordered = beside(
        &cache,
        &url,
        |cache| {
            let keys: Vec<Vec<Value>> = (1..=ROWS).map(|k| vec![Value::Int4(k)]).collect();
            cache.refresh("kv", &keys, &LoadOptions::default()).unwrap();
        },
        |cache| write(cache, |txn, kv| assert!(txn.update(kv, &[Value::Int4(ROWS)], &[(1, Value::Int4(-1))]).unwrap())),
    );
    assert!(
        ordered,
        "the commit must reach PostgreSQL while REFRESH still runs (make ROWS larger on a faster machine)"
    );
    let remote: i32 = connect(&url).unwrap().query_one("SELECT v FROM kv WHERE k = $1", &[&ROWS]).unwrap().get(0);
    assert_eq!(remote, -1);
    assert_eq!(cached_v(&cache, ROWS), Some(Value::Int4(-1)), "REFRESH put the snapshot's older row back");
    assert!(cache.verify("kv").unwrap().is_clean());
}

#[test]
fn load_does_not_bring_back_an_instance_deleted_after_its_snapshot() {
    let (url, _dir, cache) = setup("no_undo_load");
    // Most instances leave, so LOAD has work before it reaches the last one.
    let keys: Vec<Vec<Value>> = (1..ROWS).map(|k| vec![Value::Int4(k)]).collect();
    cache.unload("kv", Some(&keys)).unwrap();
    let ordered = beside(
        &cache,
        &url,
        |cache| {
            cache.load("kv", &LoadOptions::default()).unwrap();
        },
        |cache| write(cache, |txn, kv| assert!(txn.delete(kv, &[Value::Int4(ROWS)]).unwrap())),
    );
    assert!(ordered, "the delete must reach PostgreSQL while LOAD still runs (make ROWS larger on a faster machine)");
    let remote: i64 =
        connect(&url).unwrap().query_one("SELECT count(*) FROM kv WHERE k = $1", &[&ROWS]).unwrap().get(0);
    assert_eq!(remote, 0);
    assert_eq!(cached_v(&cache, ROWS), None, "LOAD brought back an instance deleted in the cache");
    assert!(cache.verify("kv").unwrap().is_clean());
}
