//! The lease of an active/standby pair (`lease.rs`), against a real
//! PostgreSQL: one holder at a time, taken only after expiry by
//! PostgreSQL's clock, the holder's own deadline before that expiry, and
//! the member that lost the lease fenced in PostgreSQL: its write-through
//! transactions are refused from the moment the other holds it, even with
//! the same data directory identity (a standby is a copy of the active's
//! directory).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fresh_tatp, msc_sum, postgres_msc_sum, tatp_group};
use pgtier_backend::connect::connect;
use pgtier_backend::{BackendConfig, ConnectParams};
use pgtier_cache::lease::{self, LeaseConfig, LeaseKeeper};
use pgtier_cache::{Cache, CacheConfig, GroupKind, LoadOptions};
use pgtier_engine::{Database, EngineConfig, Value};

fn params(url: &str) -> ConnectParams {
    BackendConfig { url: Some(url.to_owned()), ..BackendConfig::default() }.resolve().unwrap()
}

fn config(node: &str, member: &str, ms: u64) -> LeaseConfig {
    LeaseConfig { node: node.into(), member: member.into(), duration: Duration::from_millis(ms) }
}

fn open(dir: &Path, url: &str, node: &str, epoch: i64) -> Arc<Cache> {
    let db = Database::open(dir, EngineConfig::default()).unwrap();
    let mut config = CacheConfig::default();
    config.awt.node = node.to_owned();
    config.lease_epoch = epoch;
    Cache::open(db, Some(params(url)), config).unwrap()
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

fn copy_dir(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp").arg("-a").arg(format!("{}/.", from.display())).arg(to).status();
    assert!(status.unwrap().success());
}

#[test]
fn one_holder_at_a_time_and_taken_only_after_expiry() {
    let url = fresh_tatp("lease_holders");
    let mut client = connect(&url).unwrap();
    let a = lease::try_acquire(&mut client, &config("pair", "a", 1500)).unwrap().unwrap();
    // Its own again: same epoch. The other member: refused while it lasts.
    assert_eq!(lease::try_acquire(&mut client, &config("pair", "a", 1500)).unwrap().unwrap().epoch, a.epoch);
    assert_eq!(lease::try_acquire(&mut client, &config("pair", "b", 1500)).unwrap(), None);
    // The holder's deadline passes while PostgreSQL still counts it held.
    std::thread::sleep(a.valid_until.saturating_duration_since(Instant::now()));
    let row = lease::read(&mut client, "pair").unwrap().unwrap();
    assert_eq!((row.holder.as_str(), row.epoch), ("a", a.epoch));
    assert!(row.remaining_ms > 0, "the holder must stop before PostgreSQL's expiry: {row:?}");
    assert_eq!(lease::try_acquire(&mut client, &config("pair", "b", 1500)).unwrap(), None);
    // Expired by PostgreSQL's clock: b takes it under a new epoch, a cannot renew.
    std::thread::sleep(Duration::from_millis(row.remaining_ms as u64 + 20));
    let b = lease::try_acquire(&mut client, &config("pair", "b", 1500)).unwrap().unwrap();
    assert_eq!(b.epoch, a.epoch + 1);
    assert_eq!(lease::renew(&mut client, &config("pair", "a", 1500), a.epoch).unwrap(), None);
    // A switchover: b gives it up, a takes it back at once.
    assert!(lease::release(&mut client, &config("pair", "b", 1500), b.epoch).unwrap());
    assert_eq!(lease::try_acquire(&mut client, &config("pair", "a", 1500)).unwrap().unwrap().epoch, b.epoch + 1);
    // Unusable settings.
    let error = lease::try_acquire(&mut client, &config("pair", "a", 100)).unwrap_err();
    assert_eq!(error.sqlstate(), "22023", "{error}");
}

/// A holder that goes on without its standby bars it from the lease, even
/// expired, until it says the standby caught up; only the holder at its
/// epoch may say either; the holder itself re-takes it regardless, and a
/// new holder starts with its standby allowed.
#[test]
fn a_standby_the_holder_dropped_cannot_take_the_lease() {
    let url = fresh_tatp("lease_standby_ok");
    let mut client = connect(&url).unwrap();
    let (a_cfg, b_cfg) = (config("pairok", "a", 1500), config("pairok", "b", 1500));
    let a = lease::try_acquire(&mut client, &a_cfg).unwrap().unwrap();
    assert!(lease::read(&mut client, "pairok").unwrap().unwrap().standby_ok);
    assert!(!lease::set_standby_ok(&mut client, &b_cfg, a.epoch, false).unwrap(), "only the holder says");
    assert!(!lease::set_standby_ok(&mut client, &a_cfg, a.epoch + 1, false).unwrap(), "only at its epoch");
    assert!(lease::set_standby_ok(&mut client, &a_cfg, a.epoch, false).unwrap());
    assert!(!lease::read(&mut client, "pairok").unwrap().unwrap().standby_ok);
    // Expired by PostgreSQL's clock, and still not b's.
    std::thread::sleep(Duration::from_millis(1600));
    assert!(lease::read(&mut client, "pairok").unwrap().unwrap().remaining_ms < 0);
    assert_eq!(lease::try_acquire(&mut client, &b_cfg).unwrap(), None);
    // The holder re-takes its own at the same epoch, standby still barred.
    let again = lease::try_acquire(&mut client, &a_cfg).unwrap().unwrap();
    assert_eq!(again.epoch, a.epoch);
    assert!(!lease::read(&mut client, "pairok").unwrap().unwrap().standby_ok);
    // Allowed again: b takes it once expired, and is not barred by a's word.
    assert!(lease::set_standby_ok(&mut client, &a_cfg, a.epoch, true).unwrap());
    std::thread::sleep(Duration::from_millis(1600));
    let b = lease::try_acquire(&mut client, &b_cfg).unwrap().unwrap();
    assert_eq!(b.epoch, a.epoch + 1);
    let row = lease::read(&mut client, "pairok").unwrap().unwrap();
    assert_eq!((row.holder.as_str(), row.standby_ok), ("b", true));
}

#[test]
fn a_keeper_renews_fences_by_time_and_notices_a_takeover() {
    let url = fresh_tatp("lease_keeper");
    let mut client = connect(&url).unwrap();
    let cfg = config("kept", "a", 900);
    let grant = lease::try_acquire(&mut client, &cfg).unwrap().unwrap();
    let keeper = LeaseKeeper::start(params(&url), cfg.clone(), grant);
    // Renewed past several durations.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(keeper.is_valid());
    assert_eq!(lease::try_acquire(&mut client, &config("kept", "b", 900)).unwrap(), None);
    // Taken behind its back (as an operator's forced failover would): the next renewal notices.
    client.execute("UPDATE pgtier.leases SET holder = 'b', epoch = epoch + 1 WHERE node = 'kept'", &[]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !keeper.lost() {
        assert!(Instant::now() < deadline, "the keeper never noticed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!keeper.is_valid());
    drop(keeper);
    // A keeper that cannot reach PostgreSQL stops counting itself valid at its deadline.
    client.execute("DELETE FROM pgtier.leases WHERE node = 'kept'", &[]).unwrap();
    let grant = lease::try_acquire(&mut client, &cfg).unwrap().unwrap();
    let unreachable = params("postgresql://nobody@127.0.0.1:9/none?connect_timeout=1");
    let keeper = LeaseKeeper::start(unreachable, cfg, grant);
    assert!(keeper.is_valid());
    std::thread::sleep(grant.valid_until.saturating_duration_since(Instant::now()) + Duration::from_millis(10));
    assert!(!keeper.is_valid(), "past its deadline without a renewal");
    assert!(!keeper.lost());
}

/// A session of the member that lost the lease, stuck in a transaction
/// holding the node's lock (cut off mid-write), does not hold the new
/// holder back: acquiring ends it.
#[test]
fn taking_the_lease_ends_sessions_of_the_old_epoch() {
    let url = fresh_tatp("lease_stuck");
    let mut client = connect(&url).unwrap();
    let a = lease::try_acquire(&mut client, &config("stuck", "a", 700)).unwrap().unwrap();
    let mut old = connect(&url).unwrap();
    old.batch_execute("BEGIN; SELECT pg_advisory_xact_lock_shared(hashtext('pgtier node stuck'))").unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let started = Instant::now();
    let b = lease::try_acquire(&mut client, &config("stuck", "b", 700)).unwrap().unwrap();
    assert_eq!(b.epoch, a.epoch + 1);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(old.batch_execute("SELECT 1").is_err(), "the old epoch's session was ended");
}

/// The pair's data directories share an identity (the standby is a copy
/// of the active's); the lease decides which one's write-through
/// PostgreSQL accepts. After the standby takes the lease, the old active's
/// transactions are refused in PostgreSQL; the new one's all arrive.
#[test]
fn the_member_that_lost_the_lease_cannot_write_through() {
    let url = fresh_tatp("lease_fence");
    let mut client = connect(&url).unwrap();
    let before = postgres_msc_sum(&mut client, "s_id <= 100");
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let grant_a = lease::try_acquire(&mut client, &config("fence", "a", 1000)).unwrap().unwrap();
    {
        let cache = open(first.path(), &url, "fence", grant_a.epoch);
        cache.create_group(&tatp_group("tatp", GroupKind::Awt, false)).unwrap();
        cache.load("tatp", &LoadOptions { predicate: Some("s_id <= 100".into()), ..LoadOptions::default() }).unwrap();
        increments(&cache, 200);
        assert!(cache.wait_propagated(Duration::from_secs(60)), "{:?}", cache.propagation_info());
    }
    assert_eq!(postgres_msc_sum(&mut client, "s_id <= 100"), before + 200);
    // The standby: a copy of the directory, same incarnation.
    copy_dir(first.path(), second.path());
    let active = open(first.path(), &url, "fence", grant_a.epoch);
    // Renewed now (the load above may outlast a 1 s lease on a busy
    // machine): the standby cannot take it while it lasts.
    let renewed = lease::try_acquire(&mut client, &config("fence", "a", 1000)).unwrap().unwrap();
    assert_eq!(renewed.epoch, grant_a.epoch);
    assert_eq!(lease::try_acquire(&mut client, &config("fence", "b", 1000)).unwrap(), None);
    // The active stops renewing (it hangs, or is cut off); the standby
    // takes the lease once PostgreSQL counts it expired.
    let grant_b = loop {
        if let Some(grant) = lease::try_acquire(&mut client, &config("fence", "b", 1000)).unwrap() {
            break grant;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(grant_b.epoch, grant_a.epoch + 1);
    let standby = open(second.path(), &url, "fence", grant_b.epoch);
    assert_eq!(standby.identity().incarnation, active.identity().incarnation);
    // The old active commits locally; PostgreSQL refuses to take them.
    // Once its write-through has heard the refusal (the standby's takeover
    // ended its session, which may come before these commits), it refuses
    // them itself: either way none reaches PostgreSQL.
    let db = active.database();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    for i in 0..50 {
        let mut txn = db.begin().unwrap();
        let outcome = txn.update(subscriber, &[Value::Int4(1 + i % 100)], &[(5, Value::Int4(-1))]);
        let outcome = outcome.and_then(|_| txn.commit());
        if let Err(error) = outcome {
            assert_eq!(error.sqlstate(), "55000", "{error}");
            assert!(error.to_string().contains("fence"), "{error}");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = active.propagation_info().unwrap();
        if info.state == "refused" {
            assert!(info.last_error.as_deref().unwrap_or("").contains("fence"), "{info:?}");
            break;
        }
        assert!(Instant::now() < deadline, "{info:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The new holder's commits all arrive, and only they.
    increments(&standby, 300);
    assert!(standby.wait_propagated(Duration::from_secs(60)), "{:?}", standby.propagation_info());
    assert_eq!(postgres_msc_sum(&mut client, "s_id <= 100"), before + 500);
    assert_eq!(msc_sum(standby.database()), before + 500);
}

/// SWT commits in PostgreSQL first: the member that lost the lease has its
/// next commit refused there, so the client sees an error, never a success
/// PostgreSQL does not hold.
#[test]
fn the_member_that_lost_the_lease_cannot_commit_synchronously() {
    let url = fresh_tatp("lease_swt");
    let mut client = connect(&url).unwrap();
    let before = postgres_msc_sum(&mut client, "s_id <= 100");
    let dir = tempfile::tempdir().unwrap();
    let grant_a = lease::try_acquire(&mut client, &config("swtpair", "a", 700)).unwrap().unwrap();
    let active = open(dir.path(), &url, "swtpair", grant_a.epoch);
    active.create_group(&tatp_group("swt", GroupKind::Swt, false)).unwrap();
    active.load("swt", &LoadOptions { predicate: Some("s_id <= 100".into()), ..LoadOptions::default() }).unwrap();
    increments(&active, 20);
    assert_eq!(postgres_msc_sum(&mut client, "s_id <= 100"), before + 20);
    let grant_b = loop {
        if let Some(grant) = lease::try_acquire(&mut client, &config("swtpair", "b", 700)).unwrap() {
            break grant;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(grant_b.epoch, grant_a.epoch + 1);
    let db = active.database();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut txn = db.begin().unwrap();
    txn.update(subscriber, &[Value::Int4(1)], &[(5, Value::Int4(-1))]).unwrap();
    let error = txn.commit().unwrap_err();
    assert_eq!(error.sqlstate(), "55000", "{error}");
    assert!(error.to_string().contains("swtpair"), "{error}");
    assert_eq!(postgres_msc_sum(&mut client, "s_id <= 100"), before + 20);
}
