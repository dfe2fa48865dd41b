//! The flash tier in clean mode against a real PostgreSQL: instances aging
//! evicts from memory go to flash and come back on a key lookup equal to
//! PostgreSQL's rows; a change made after a promotion is what a later
//! promotion returns; a deleted instance never comes back; UNLOAD forgets
//! flash too; a clean close keeps flash for the next open, and a database
//! that moved on since (what a crash looks like) does not reuse it. In
//! write-back mode, instances whose changes PostgreSQL does not have yet go
//! to flash durably and come back with those changes.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{postgres_dump, tatp_spec};
use pgtier_cache::{Aging, Cache, CacheConfig, GroupKind, TierInfo, TierMode};
use pgtier_engine::{ColumnDef, DataType, Database, EngineConfig, TableDef, Value};
use postgres::Client;

const GROUP: &str = "flashed";

fn open(dir: &Path, url: &str, budget: u64) -> Arc<Cache> {
    open_with(dir, url, budget, |_| {})
}

fn open_with(dir: &Path, url: &str, budget: u64, adjust: impl FnOnce(&mut CacheConfig)) -> Arc<Cache> {
    let db = Database::open(&dir.join("db"), EngineConfig::default()).unwrap();
    let params = pgtier_backend::BackendConfig { url: Some(url.to_owned()), ..Default::default() }.resolve().unwrap();
    // The test drives the rounds (age_now); the thread stays out of the way.
    let mut config = CacheConfig {
        memory_budget: Some(budget),
        aging_interval: Duration::from_secs(3600),
        tier: Some(common::small_tier(dir)),
        ..CacheConfig::default()
    };
    config.awt.node = common::node_of(dir);
    adjust(&mut config);
    Cache::open(db, Some(params), config).unwrap()
}

fn group_row(cache: &Cache) -> TierInfo {
    cache.tier_stats().into_iter().find(|row| row.group.as_deref() == Some(GROUP)).unwrap()
}

/// Reads subscriber `key` through an application lookup (a miss promotes
/// it from flash or loads it from PostgreSQL); its row as text, if any.
fn read(db: &Database, key: i32) -> Option<String> {
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut txn = db.begin().unwrap();
    let row = txn
        .get_with(subscriber, &[Value::Int4(key)], |row| {
            row.values().iter().map(ToString::to_string).collect::<Vec<_>>().join("|")
        })
        .unwrap();
    txn.commit().unwrap();
    row
}

/// Reads `keys`, aging after every hundred so memory stays at the budget.
fn sweep(cache: &Cache, keys: impl IntoIterator<Item = i32>) {
    for (n, key) in keys.into_iter().enumerate() {
        read(cache.database(), key);
        if n % 100 == 99 {
            cache.age_now().unwrap();
        }
    }
    cache.age_now().unwrap();
}

fn postgres_subscriber(client: &mut Client, key: i32) -> Vec<String> {
    let group = pgtier_cache::define_group(client, &tatp_spec()).unwrap();
    postgres_dump(client, &group, "subscriber", &format!("s_id = {key}"))
}

/// Bytes one average TATP instance takes, measured on a scratch cache.
fn instance_bytes(url: &str) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), url, u64::MAX / 2);
    cache.create_group(&common::tatp_group("probe", GroupKind::ReadOnly, false)).unwrap();
    let options = pgtier_cache::LoadOptions { predicate: Some("s_id <= 1000".into()), ..Default::default() };
    cache.load("probe", &options).unwrap();
    cache.stats()[0].memory_bytes / 1000
}

fn create_group(cache: &Cache) {
    let def = pgtier_cache::CreateGroup { aging: Aging::Lru, ..common::tatp_group(GROUP, GroupKind::Awt, true) };
    cache.create_group(&def).unwrap();
}

#[test]
fn evicted_instances_come_back_from_flash_as_postgresql_has_them() {
    let url = common::fresh_tatp("cache_flash_rows");
    let mut client = pgtier_backend::connect::connect(&url).unwrap();
    let budget = instance_bytes(&url) * 300;
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, budget);
    create_group(&cache);
    let db = cache.database().clone();

    // 1,000 instances through a budget of 300: most go to flash.
    sweep(&cache, 1..=1000);
    let first = group_row(&cache);
    assert_eq!(first.backend_loads, 1000, "{first:?}");
    assert!(first.demotions >= 600, "{first:?}");
    assert_eq!(first.flash_hits, 0);

    // Again: what flash holds comes from there, equal to PostgreSQL's rows.
    for key in 1..=1000 {
        let cached = read(&db, key);
        if key % 7 == 0 {
            assert_eq!(cached.into_iter().collect::<Vec<_>>(), postgres_subscriber(&mut client, key), "s_id {key}");
        }
        if key % 100 == 0 {
            cache.age_now().unwrap();
        }
    }
    let second = group_row(&cache);
    assert!(second.flash_hits >= 600, "{second:?}");
    // Every instance evicted went to flash (all admitted, room for all):
    // none had to come from PostgreSQL again.
    assert_eq!(second.rejections, 0, "{second:?}");
    assert_eq!(second.backend_loads, first.backend_loads, "{second:?}");
    // Temperatures: every row in memory counted once; the keys read since
    // the last round are hot, those read ten rounds ago no longer.
    let rows_in_memory = cache.stats().iter().find(|g| g.group == GROUP).unwrap().rows;
    assert_eq!(second.hot_rows + second.warm_rows + second.cold_rows, rows_in_memory, "{second:?}");
    assert!(second.hot_rows > 0 && second.hot_rows < rows_in_memory, "{second:?}");

    // A change made after a promotion is what comes back the next time.
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    for key in 1..=50 {
        read(&db, key);
        let mut txn = db.begin().unwrap();
        assert!(txn.update(subscriber, &[Value::Int4(key)], &[(5, Value::Int4(-key))]).unwrap());
        txn.commit().unwrap();
    }
    // Its whole instance deleted: it must never come back from flash.
    let deleted = 60;
    read(&db, deleted);
    {
        let mut txn = db.begin().unwrap();
        for table in ["call_forwarding", "special_facility", "access_info"] {
            let id = db.catalog().table_by_name(table).unwrap().id;
            let keys: Vec<Vec<Value>> = {
                // The foreign key's child index leads with s_id.
                let index = db.catalog().foreign_keys_of(id)[0].child_index;
                let pk = db.catalog().table(id).unwrap().primary_key.clone();
                let mut found = Vec::new();
                txn.scan_prefix(index, &[Value::Int4(deleted)], |row| {
                    found.push(pk.iter().map(|&c| row.get(c).to_owned_value()).collect());
                    Ok(true)
                })
                .unwrap();
                found
            };
            for key in keys {
                txn.delete(id, &key).unwrap();
            }
        }
        assert!(txn.delete(subscriber, &[Value::Int4(deleted)]).unwrap());
        txn.commit().unwrap();
    }
    assert!(cache.wait_propagated(Duration::from_secs(60)), "write-through did not drain");
    // Everything out to flash again (the changed ones too, now clean).
    sweep(&cache, 2001..=2600);
    for key in 1..=50 {
        let cached = read(&db, key).unwrap();
        assert_eq!(vec![cached.clone()], postgres_subscriber(&mut client, key), "s_id {key}");
        assert!(cached.contains(&format!("|{}|", -key)), "the change to {key} is what came back: {cached}");
    }
    assert_eq!(read(&db, deleted), None, "a deleted instance came back");
    assert!(postgres_subscriber(&mut client, deleted).is_empty());
    let tally = cache.verify(GROUP).unwrap();
    assert!(tally.is_clean(), "{tally:?}");

    // UNLOAD forgets flash too: the next miss asks PostgreSQL.
    cache.unload(GROUP, None).unwrap();
    let before = group_row(&cache);
    read(&db, 500);
    let after = group_row(&cache);
    assert_eq!((after.flash_hits, after.backend_loads), (before.flash_hits, before.backend_loads + 1));
    let store = &cache.tier_stats()[0];
    assert!(store.index_bytes.unwrap() > 0 && store.flash_records.unwrap() > 0, "{store:?}");
}

/// Instance `key`, every table, read in one statement as an application
/// reads (point read of the subscriber, prefix scans of the children by
/// s_id): per table its rows as text, sorted.
fn read_instance(db: &Database, key: i32) -> Vec<Vec<String>> {
    let catalog = db.catalog();
    let mut txn = db.begin().unwrap();
    txn.begin_statement().unwrap();
    let text =
        |row: pgtier_engine::RowRef<'_>| row.values().iter().map(ToString::to_string).collect::<Vec<_>>().join("|");
    let mut tables = Vec::new();
    for table in common::TABLES {
        let id = catalog.table_by_name(table).unwrap().id;
        let mut rows = Vec::new();
        if table == "subscriber" {
            rows.extend(txn.get_with(id, &[Value::Int4(key)], text).unwrap());
        } else {
            let index = catalog.foreign_keys_of(id)[0].child_index;
            txn.scan_prefix(index, &[Value::Int4(key)], |row| {
                rows.push(text(row));
                Ok(true)
            })
            .unwrap();
        }
        rows.sort();
        tables.push(rows);
    }
    txn.end_statement();
    txn.commit().unwrap();
    tables
}

/// A read that misses in memory is answered from the flash record, which
/// stays: equal to PostgreSQL's rows, nothing promoted, nothing evicted to
/// make room. A second read soon after promotes (a hot instance belongs in
/// memory), and so does a write, whose change PostgreSQL then gets.
#[test]
fn reads_are_answered_from_flash_without_moving_the_instance() {
    let url = common::fresh_tatp("cache_flash_answers");
    let mut client = pgtier_backend::connect::connect(&url).unwrap();
    let group = pgtier_cache::define_group(&mut client, &tatp_spec()).unwrap();
    let budget = instance_bytes(&url) * 300;
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, budget);
    create_group(&cache);
    let db = cache.database().clone();
    sweep(&cache, 1..=1000);
    let on_flash: Vec<i32> =
        (1..=1000).filter(|&key| !cache.instance_cached(GROUP, &[Value::Int4(key)]).unwrap()).collect();
    assert!(on_flash.len() >= 600, "{} of 1000 left memory", on_flash.len());

    let before = group_row(&cache);
    let memory_before = cache.stats()[0].instances;
    for &key in on_flash.iter().take(200) {
        let cached = read_instance(&db, key);
        let postgres: Vec<Vec<String>> = common::TABLES
            .iter()
            .map(|table| postgres_dump(&mut client, &group, table, &format!("s_id = {key}")))
            .collect();
        assert_eq!(cached, postgres, "instance {key}");
        assert!(!cache.instance_cached(GROUP, &[Value::Int4(key)]).unwrap(), "{key} moved into memory");
    }
    let after = group_row(&cache);
    assert_eq!(after.flash_hits - before.flash_hits, 200, "{after:?}");
    assert_eq!(after.promotions, before.promotions, "{after:?}");
    assert_eq!(after.backend_loads, before.backend_loads, "{after:?}");
    assert_eq!(cache.stats()[0].instances, memory_before);

    // Read again soon after: promoted, and in memory from then on.
    let hot = on_flash[0];
    read(&db, hot);
    assert!(cache.instance_cached(GROUP, &[Value::Int4(hot)]).unwrap());
    assert_eq!(group_row(&cache).promotions, after.promotions + 1);

    // A write to an instance on flash, in the statement that read it:
    // promoted first, and PostgreSQL gets the change.
    let written = on_flash[300];
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    let mut txn = db.begin().unwrap();
    txn.begin_statement().unwrap();
    let msc = txn.get_with(subscriber, &[Value::Int4(written)], |row| row.get(5).to_owned_value()).unwrap().unwrap();
    assert!(!cache.instance_cached(GROUP, &[Value::Int4(written)]).unwrap());
    assert!(txn.update(subscriber, &[Value::Int4(written)], &[(5, Value::Int4(-written))]).unwrap());
    assert_eq!(
        txn.get_with(subscriber, &[Value::Int4(written)], |row| row.get(5).to_owned_value().to_string()).unwrap(),
        Some((-written).to_string()),
        "the statement reads its own change, not the answer it had before ({msc:?})"
    );
    txn.end_statement();
    txn.commit().unwrap();
    assert!(cache.wait_propagated(Duration::from_secs(60)), "write-through did not drain");
    let postgres = postgres_subscriber(&mut client, written);
    assert!(postgres[0].contains(&format!("|{}|", -written)), "{postgres:?}");
    assert_eq!(read_instance(&db, written)[0], postgres);
    let tally = cache.verify(GROUP).unwrap();
    assert!(tally.is_clean(), "{tally:?}");
}

#[test]
fn a_clean_close_keeps_flash_and_a_database_moved_on_since_does_not() {
    let url = common::tatp_url();
    let budget = instance_bytes(&url) * 200;
    let dir = tempfile::tempdir().unwrap();
    {
        let cache = open(dir.path(), &url, budget);
        create_group(&cache);
        sweep(&cache, 1..=800);
        assert!(group_row(&cache).demotions >= 500);
    }
    // Reopened as it was closed: flash answers.
    {
        let cache = open(dir.path(), &url, budget);
        sweep(&cache, 1..=800);
        let row = group_row(&cache);
        assert!(row.flash_hits >= 500, "flash was not reused after a clean close: {row:?}");
    }
    // The database changed behind the flash tier's back (as after a crash
    // whose log went past the last clean close): nothing on flash is trusted.
    {
        let db = Database::open(&dir.path().join("db"), EngineConfig::default()).unwrap();
        let mut txn = db.begin().unwrap();
        txn.create_table(&TableDef::new("elsewhere", vec![ColumnDef::new("id", DataType::Int4)], &["id"])).unwrap();
        txn.commit().unwrap();
        db.close().unwrap();
    }
    let cache = open(dir.path(), &url, budget);
    sweep(&cache, 1..=300);
    let row = group_row(&cache);
    assert_eq!(row.flash_hits, 0, "flash reused although the database moved on: {row:?}");
    assert_eq!(row.backend_loads, 300);
}

#[test]
fn flash_keep_on_a_group_that_cannot_use_flash_is_refused() {
    let url = common::tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, 1 << 30);
    let def = pgtier_cache::CreateGroup {
        flash: pgtier_cache::FlashPolicy::Keep,
        ..common::tatp_group("fixed", GroupKind::Awt, false)
    };
    let error = cache.create_group(&def).unwrap_err();
    assert_eq!(error.sqlstate(), "0A000", "{error}");
    assert!(error.to_string().contains("DYNAMIC"), "{error}");
}

/// A write-back cache on a budget of 300 instances, the group created and
/// 400 instances swept through it; write-through waits `batch_delay`
/// before each batch, so changes stay pending while aging runs and the
/// instances it evicts are dirty. Also the subscriber table's id.
fn write_back_cache(dir: &Path, url: &str, batch_delay: Duration) -> (Arc<Cache>, pgtier_engine::TableId) {
    let budget = instance_bytes(url) * 300;
    let cache = open_with(dir, url, budget, |config| {
        config.tier_mode = TierMode::WriteBack;
        config.awt.batch_delay = batch_delay;
    });
    create_group(&cache);
    let subscriber = cache.database().catalog().table_by_name("subscriber").unwrap().id;
    sweep(&cache, 1..=400);
    (cache, subscriber)
}

#[test]
fn write_back_moves_changed_instances_to_flash_and_brings_their_changes_back() {
    let url = common::fresh_tatp("cache_flash_write_back");
    let mut client = pgtier_backend::connect::connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cache, subscriber) = write_back_cache(dir.path(), &url, Duration::from_secs(4));
    let db = cache.database().clone();
    // Every instance leaves memory durably in write-back mode; evictions go
    // in batches with one sync each (a sync per instance wrote a 4 KiB
    // block per record of a few hundred bytes: about 10x).
    let store = cache.tier_stats()[0].clone();
    let amplification = store.write_amplification.unwrap();
    assert!(amplification < 2.0, "write amplification {amplification} while evicting: {store:?}");
    // Change 200 instances, then push them out of memory at once.
    for key in 1..=200 {
        read(&db, key);
        let mut txn = db.begin().unwrap();
        assert!(txn.update(subscriber, &[Value::Int4(key)], &[(5, Value::Int4(-7 * key))]).unwrap());
        txn.commit().unwrap();
    }
    sweep(&cache, 1001..=1400);
    let row = group_row(&cache);
    assert!(row.dirty_demotions >= 100, "{row:?}");
    let store = cache.tier_stats()[0].clone();
    assert!(store.durable_records.unwrap() >= 100, "{store:?}");
    // They come back with their changes, before and after PostgreSQL has them.
    for key in (1..=200).step_by(3) {
        let cached = read(&db, key).unwrap();
        assert!(cached.contains(&format!("|{}|", -7 * key)), "the change to {key} came back: {cached}");
    }
    assert!(cache.wait_propagated(Duration::from_secs(60)), "write-through did not drain");
    for key in (2..=200).step_by(3) {
        let cached = read(&db, key).unwrap();
        assert_eq!(vec![cached], postgres_subscriber(&mut client, key), "s_id {key}");
    }
    let tally = cache.verify(GROUP).unwrap();
    assert!(tally.is_clean(), "{tally:?}");
}

#[test]
fn enable_disable_and_resize_while_readers_run_fail_no_reader() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let url = common::tatp_url();
    let mut client = pgtier_backend::connect::connect(&url).unwrap();
    let budget = instance_bytes(&url) * 200;
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, budget);
    create_group(&cache);
    const KEYS: i32 = 1500;
    let expected: Vec<String> =
        (1..=KEYS).map(|key| postgres_subscriber(&mut client, key).pop().unwrap_or_default()).collect();
    let expected = Arc::new(expected);
    let stop = Arc::new(AtomicBool::new(false));
    let (reads, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let readers: Vec<_> = (0..2u64)
        .map(|me| {
            let (db, expected, stop, reads, errors) =
                (cache.database().clone(), expected.clone(), stop.clone(), reads.clone(), errors.clone());
            std::thread::spawn(move || {
                let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ me;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let key = (x % KEYS as u64) as i32 + 1;
                    let got = db.begin().and_then(|mut txn| {
                        let row = txn.get_with(subscriber, &[Value::Int4(key)], |row| {
                            row.values().iter().map(ToString::to_string).collect::<Vec<_>>().join("|")
                        })?;
                        txn.commit()?;
                        Ok(row)
                    });
                    match got {
                        Ok(Some(row)) if row == expected[key as usize - 1] => {}
                        Ok(other) => panic!("s_id {key}: {other:?}, PostgreSQL has {}", expected[key as usize - 1]),
                        Err(error) => {
                            eprintln!("s_id {key}: {error}");
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let ager = {
        let (cache, stop) = (cache.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                cache.age_now().unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // Paced by the readers, not the clock: each command only after they
    // made progress since the last one (on a loaded machine, a debug build
    // may read little in 150 ms).
    let progressed = |at_least: u64| {
        let from = reads.load(Ordering::Relaxed);
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while reads.load(Ordering::Relaxed) < from + at_least {
            assert!(std::time::Instant::now() < deadline, "the readers stalled at {from} reads");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let mut hits_while_enabled = 0;
    for round in 0..10u64 {
        progressed(100);
        cache.tier_command(pgtier_cache::TierCommand::Disable).unwrap();
        progressed(50);
        cache.tier_command(pgtier_cache::TierCommand::Enable).unwrap();
        progressed(100);
        let size = if round % 2 == 0 { 24 << 20 } else { 40 << 20 };
        cache.tier_command(pgtier_cache::TierCommand::Resize(size)).unwrap();
        assert_eq!(cache.tier_stats()[0].flash_capacity_bytes, Some(size), "round {round}");
        hits_while_enabled = group_row(&cache).flash_hits;
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.join().unwrap();
    }
    ager.join().unwrap();
    assert_eq!(errors.load(Ordering::Relaxed), 0, "of {} reads", reads.load(Ordering::Relaxed));
    assert!(reads.load(Ordering::Relaxed) > 1000);
    assert!(hits_while_enabled > 0, "flash never answered: {:?}", group_row(&cache));
}

/// Misses past the budget run aging themselves: with the aging thread
/// asleep (an hour between its rounds) memory still stays near the
/// budget while 2,000 instances pass through a budget of 300.
#[test]
fn misses_past_the_budget_help_aging() {
    let url = common::tatp_url();
    let per_instance = instance_bytes(&url);
    let budget = per_instance * 300;
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, budget);
    create_group(&cache);
    let mut peak = 0;
    for key in 1..=2000 {
        assert!(read(cache.database(), key).is_some(), "s_id {key}");
        if key % 50 == 0 {
            std::thread::sleep(Duration::from_millis(60));
            peak = peak.max(cache.stats()[0].memory_bytes);
        }
    }
    let row = group_row(&cache);
    assert!(row.demotions > 1000, "{row:?}");
    // A round starts past the budget and ends at the low watermark; what
    // arrives between two helping rounds (50 ms) rides above it.
    assert!(peak < budget * 3 / 2, "memory peaked at {peak} with a budget of {budget}: {row:?}");
}

/// VERIFY CACHE GROUP only reads: what flash holds of the group is still
/// found afterwards (it once moved the group to a new generation, making
/// every clean record unreachable, and in write-back mode pulled the
/// durable ones into memory).
#[test]
fn verify_leaves_flash_alone() {
    let url = common::fresh_tatp("cache_flash_verify");
    let budget = instance_bytes(&url) * 300;
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, budget);
    create_group(&cache);
    sweep(&cache, 1..=1000);
    let before = group_row(&cache);
    assert!(before.demotions >= 600, "{before:?}");
    let tally = cache.verify(GROUP).unwrap();
    assert!(tally.is_clean(), "{tally:?}");
    // The instances not in memory now: flash has them still.
    sweep(&cache, 1..=1000);
    let after = group_row(&cache);
    assert!(after.flash_hits - before.flash_hits >= 500, "VERIFY lost flash: before {before:?} after {after:?}");
}

/// The s_ids of the subscribers whose sub_nbr is `number`, through the
/// engine's UNIQUE index on sub_nbr: a miss there names a row by a unique
/// key that does not carry the root key (TATP's UPDATE_LOCATION).
fn s_ids_by_number(db: &Database, number: &str) -> Vec<i32> {
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap().id;
    let index = catalog.indexes_of(subscriber).into_iter().find(|index| index.unique && index.columns == [1]).unwrap();
    let mut txn = db.begin().unwrap();
    let mut found = Vec::new();
    txn.scan_prefix(index.id, &[Value::Text(number.to_owned())], |row| {
        match row.get(0).to_owned_value() {
            Value::Int4(s_id) => found.push(s_id),
            other => panic!("s_id {other:?}"),
        }
        Ok(true)
    })
    .unwrap();
    txn.commit().unwrap();
    found
}

fn number(s_id: i32) -> String {
    format!("{s_id:015}")
}

#[test]
fn a_miss_by_a_unique_key_finds_its_instance_on_flash_and_checks_it() {
    let url = common::fresh_tatp("cache_flash_unique");
    let mut client = pgtier_backend::connect::connect(&url).unwrap();
    let budget = instance_bytes(&url) * 300;
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), &url, budget);
    create_group(&cache);
    let db = cache.database().clone();
    let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
    sweep(&cache, 1..=1000);
    let before = group_row(&cache);
    assert!(before.demotions >= 600, "{before:?}");

    // By sub_nbr, the instances on flash are found there: PostgreSQL is
    // not asked whose row it is.
    for key in 1..=1000 {
        assert_eq!(s_ids_by_number(&db, &number(key)), [key], "sub_nbr {}", number(key));
        if key % 100 == 0 {
            cache.age_now().unwrap();
        }
    }
    let after = group_row(&cache);
    let on_flash = after.unique_on_flash - before.unique_on_flash;
    let asked = after.unique_asked - before.unique_asked;
    assert!(on_flash >= 600 && asked <= on_flash / 20, "{on_flash} on flash, {asked} asked: {after:?}");
    assert_eq!(after.backend_loads, before.backend_loads, "{after:?}");

    // A key record outlived by a change. Subscriber 7's number moves to
    // another value in the cache and reaches PostgreSQL; 7 goes back to
    // flash with its old number's key record still there. PostgreSQL
    // alone then gives the old number to subscriber 5,000, which the cache
    // never held: the record names 7, whose row no longer holds it, so
    // PostgreSQL is asked and names 5,000.
    assert_eq!(s_ids_by_number(&db, &number(7)), [7]);
    let mut txn = db.begin().unwrap();
    assert!(txn.update(subscriber, &[Value::Int4(7)], &[(1, Value::Text("moved".into()))]).unwrap());
    txn.commit().unwrap();
    assert!(cache.wait_propagated(Duration::from_secs(60)), "write-through did not drain");
    sweep(&cache, 1001..=1400);
    let asked_before = group_row(&cache).unique_asked;
    client.execute("UPDATE subscriber SET sub_nbr = $1 WHERE s_id = 5000", &[&number(7)]).unwrap();
    assert_eq!(s_ids_by_number(&db, &number(7)), [5000], "the old number of 7, now 5,000's in PostgreSQL");
    assert_eq!(group_row(&cache).unique_asked, asked_before + 1);
    assert_eq!(s_ids_by_number(&db, "moved"), [7]);
    let tally = cache.verify(GROUP).unwrap();
    assert!(tally.is_clean(), "{tally:?}");
}

#[test]
fn write_back_finds_a_changed_unique_key_postgresql_does_not_have_yet() {
    let url = common::fresh_tatp("cache_flash_unique_write_back");
    let dir = tempfile::tempdir().unwrap();
    // PostgreSQL gets nothing while the test looks.
    let (cache, subscriber) = write_back_cache(dir.path(), &url, Duration::from_secs(30));
    let db = cache.database().clone();
    // Subscriber 5 gets a new number, then leaves memory with it (durably,
    // before PostgreSQL has it).
    read(&db, 5);
    let mut txn = db.begin().unwrap();
    assert!(txn.update(subscriber, &[Value::Int4(5)], &[(1, Value::Text("fresh".into()))]).unwrap());
    txn.commit().unwrap();
    sweep(&cache, 1001..=1400);
    assert!(group_row(&cache).dirty_demotions >= 1, "{:?}", group_row(&cache));
    assert_eq!(s_ids_by_number(&db, "fresh"), [5], "the number only the cache has");
    assert!(s_ids_by_number(&db, &number(5)).is_empty(), "5's old number");
    assert!(cache.wait_propagated(Duration::from_secs(90)), "write-through did not drain");
    let tally = cache.verify(GROUP).unwrap();
    assert!(tally.is_clean(), "{tally:?}");
}
