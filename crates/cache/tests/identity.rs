//! Write-through identity (`node.rs`): a node name in PostgreSQL belongs to
//! one data directory. A directory that replaced a lost one under the same
//! name is refused until it takes the name over, then propagates every
//! commit from clean positions (it used to skip them all as "already
//! applied" by the lost directory's positions); a directory taken over stops
//! writing through; rows written before incarnation ids are adopted by the
//! directory they belong to and migrated.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{assert_tables_equal, fresh_tatp, msc_sum, postgres_msc_sum, tatp_group};
use pgtier_backend::BackendConfig;
use pgtier_backend::connect::connect;
use pgtier_cache::{Cache, CacheConfig, Claim, GroupKind, LoadOptions};
use pgtier_engine::{Database, EngineConfig, Value};

/// A cache over `dir` under node name `node`.
fn open(dir: &Path, url: &str, node: &str) -> std::sync::Arc<Cache> {
    let db = Database::open(dir, EngineConfig::default()).unwrap();
    let params = BackendConfig { url: Some(url.to_owned()), ..BackendConfig::default() }.resolve().unwrap();
    let mut config = CacheConfig::default();
    config.awt.node = node.to_owned();
    Cache::open(db, Some(params), config).unwrap()
}

/// `n` committed increments of `msc_location` over subscribers 1..=100.
fn increments(cache: &Cache, n: i32) {
    let db = cache.database();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let msc = subscriber.column_index("msc_location").unwrap();
    for i in 0..n {
        let mut txn = db.begin().unwrap();
        txn.update_with(subscriber.id, &[Value::Int4(1 + i % 100)], |row| {
            Ok(Some(vec![(msc, Value::Int4(row.get_i64(msc).unwrap_or(0) as i32 + 1))]))
        })
        .unwrap();
        txn.commit().unwrap();
    }
}

fn awt(cache: &Cache) {
    cache.create_group(&tatp_group("tatp", GroupKind::Awt, false)).unwrap();
    cache.load("tatp", &LoadOptions { predicate: Some("s_id <= 100".into()), ..LoadOptions::default() }).unwrap();
}

#[test]
fn a_replaced_data_directory_is_refused_until_it_takes_the_name_over() {
    let url = fresh_tatp("identity_lost");
    let mut client = connect(&url).unwrap();
    let before = postgres_msc_sum(&mut client, "s_id <= 100");
    let first = tempfile::tempdir().unwrap();
    let lost_incarnation = {
        let cache = open(first.path(), &url, "app");
        awt(&cache);
        increments(&cache, 3000);
        assert!(cache.wait_propagated(Duration::from_secs(60)));
        cache.identity().incarnation.clone()
    };
    assert_eq!(postgres_msc_sum(&mut client, "s_id <= 100"), before + 3000);
    // The data directory is lost (a replaced disk); a new one, same config.
    drop(first);
    let second = tempfile::tempdir().unwrap();
    let cache = open(second.path(), &url, "app");
    assert_ne!(cache.identity().incarnation, lost_incarnation);
    let error = cache.create_group(&tatp_group("tatp", GroupKind::Awt, false)).unwrap_err();
    assert_eq!(error.sqlstate(), "55000", "{error}");
    assert!(error.to_string().contains(&lost_incarnation), "{error}");
    assert!(error.hint().unwrap().contains("TAKEOVER CACHE NODE"), "{:?}", error.hint());
    assert!(cache.groups().is_empty(), "nothing to write to, nothing acknowledged");
    // Taken over: clean positions, and every commit reaches PostgreSQL.
    assert_eq!(cache.takeover().unwrap(), Claim::TakenOver { previous: lost_incarnation.clone() });
    awt(&cache);
    increments(&cache, 300);
    assert!(cache.wait_propagated(Duration::from_secs(60)), "{:?}", cache.propagation_info());
    assert_eq!(postgres_msc_sum(&mut client, "s_id <= 100"), before + 3300);
    assert_eq!(msc_sum(cache.database()), postgres_msc_sum(&mut client, "s_id <= 100"));
    assert_tables_equal(cache.database(), &mut client, "s_id <= 100");
    // The lost directory's rows stay for inspection, under its incarnation.
    let kept: i64 = client
        .query_one(
            "SELECT count(*) FROM pgtier.awt_progress WHERE node = 'app' AND incarnation = $1",
            &[&lost_incarnation],
        )
        .unwrap()
        .get(0);
    assert!(kept > 0);
    let previous: Option<String> =
        client.query_one("SELECT previous FROM pgtier.nodes WHERE node = 'app'", &[]).unwrap().get(0);
    assert_eq!(previous.as_deref(), Some(lost_incarnation.as_str()));
}

/// Two live directories under one name: the one taken over stops writing
/// through at its next transaction and refuses writes to its AWT groups.
#[test]
fn a_directory_taken_over_stops_writing_through() {
    let url = fresh_tatp("identity_two");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = open(a.path(), &url, "twin");
    awt(&old);
    increments(&old, 10);
    assert!(old.wait_propagated(Duration::from_secs(60)));
    let new = open(b.path(), &url, "twin");
    assert!(matches!(new.takeover().unwrap(), Claim::TakenOver { .. }));
    // The next transaction of the old directory is refused by PostgreSQL;
    // from then on its AWT writes fail instead of being acknowledged.
    increments(&old, 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let info = old.propagation_info().unwrap();
        if info.state == "refused" {
            break info;
        }
        assert!(std::time::Instant::now() < deadline, "{info:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(refused.last_error.as_deref().unwrap_or("").contains("twin"), "{refused:?}");
    let db = old.database();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut txn = db.begin().unwrap();
    let error = txn.update(subscriber, &[Value::Int4(1)], &[(5, Value::Int4(1))]).unwrap_err();
    assert_eq!(error.sqlstate(), "55000", "{error}");
}

/// PostgreSQL holds rows of the layout before incarnation ids: a directory
/// that existed then adopts them (they are its own); a new one is refused.
#[test]
fn rows_from_before_ids_are_adopted_by_their_own_directory_only() {
    let url = fresh_tatp("identity_legacy");
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            "CREATE SCHEMA pgtier;
             CREATE TABLE pgtier.awt_progress (node text NOT NULL, stream int NOT NULL, next_lsn bigint NOT NULL, commit_time_us bigint,
                 applied_at timestamptz NOT NULL, PRIMARY KEY (node, stream));
             CREATE TABLE pgtier.awt_errors (id bigserial PRIMARY KEY, node text NOT NULL, lsn bigint NOT NULL, commit_time_us bigint NOT NULL,
                 sqlstate text NOT NULL, message text NOT NULL, statements text NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now());
             CREATE TABLE pgtier.swt_log (node text NOT NULL, slot int NOT NULL, txn_id bigint NOT NULL, changes text NOT NULL,
                 committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (node, slot, txn_id));
             INSERT INTO pgtier.awt_progress VALUES ('old', 0, 0, NULL, now()), ('old', 1, 0, NULL, now());",
        )
        .unwrap();
    // A new directory: the rows are not its own.
    let fresh = tempfile::tempdir().unwrap();
    let error = open(fresh.path(), &url, "old").create_group(&tatp_group("tatp", GroupKind::Awt, false)).unwrap_err();
    assert_eq!(error.sqlstate(), "55000", "{error}");
    // A directory with data written before ids (its id file missing) adopts them.
    let existing = tempfile::tempdir().unwrap();
    drop(Database::open(existing.path(), EngineConfig::default()).unwrap());
    std::fs::remove_file(existing.path().join("incarnation")).unwrap();
    let cache = open(existing.path(), &url, "old");
    assert!(cache.database().incarnation().adopted);
    awt(&cache);
    let mine = cache.identity().incarnation.clone();
    let owners: Vec<String> = client
        .query("SELECT DISTINCT incarnation FROM pgtier.awt_progress WHERE node = 'old'", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(owners, vec![mine.clone()], "the layout was migrated and the rows adopted");
    let owner: String =
        client.query_one("SELECT incarnation FROM pgtier.nodes WHERE node = 'old'", &[]).unwrap().get(0);
    assert_eq!(owner, mine);
    increments(&cache, 50);
    assert!(cache.wait_propagated(Duration::from_secs(60)), "{:?}", cache.propagation_info());
    assert_tables_equal(cache.database(), &mut client, "s_id <= 100");
}
