//! SWT commit latency against PostgreSQL alone for the same statements, run
//! by hand in release:
//! `cargo test --release -p pgtier-cache --test swt_measure -- --ignored --nocapture`.
//! PostgreSQL is a private cluster with the benchmark settings (fsync on,
//! synchronous commit). Two transactions of TATP: UPDATE_LOCATION (one
//! subscriber row) and UPDATE_SUBSCRIBER_DATA (a subscriber row and a
//! special_facility row). "PostgreSQL alone" runs them with prepared
//! statements on one connection (autocommit for the single statement,
//! BEGIN/COMMIT around the pair); "SWT" runs them on the embedded engine
//! (direct mode) in an SWT group, each commit going through PostgreSQL.
//! The two alternate transaction by transaction, so drift on this shared
//! machine hits both alike. `PGTIER_SWT_TXNS` (default 3000) per kind.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::populate_tatp;
use pgtier_backend::BackendConfig;
use pgtier_backend::connect::connect;
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_cache::{Cache, CacheConfig, GroupKind, LoadOptions};
use pgtier_engine::{Database, EngineConfig, Value};
use rand::{Rng, SeedableRng};

fn summary(label: &str, mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)].as_secs_f64() * 1e6;
    let avg = samples.iter().map(Duration::as_secs_f64).sum::<f64>() / samples.len() as f64 * 1e6;
    println!("{label:<44} | {avg:>8.0} | {:>8.0} | {:>8.0} | {:>8.0}", at(0.5), at(0.9), at(0.99));
    avg
}

#[test]
#[ignore = "a minute; run by hand in release"]
fn measure_swt_latency_against_postgres_alone() {
    let txns: usize = std::env::var("PGTIER_SWT_TXNS").map_or(3000, |v| v.parse().unwrap());
    let cluster = PrivateCluster::start(ClusterOptions::for_benchmark()).unwrap();
    let url = cluster.create_database("swt_measure").unwrap();
    populate_tatp(&url);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let params = BackendConfig { url: Some(url.clone()), ..BackendConfig::default() }.resolve().unwrap();
    let cache = Cache::open(db, Some(params), CacheConfig::default()).unwrap();
    cache.create_group(&common::tatp_group("swt", GroupKind::Swt, false)).unwrap();
    cache.load("swt", &LoadOptions::default()).unwrap();
    assert!(cache.wait_swt_resolved(Duration::from_secs(30)));
    let db = cache.database().clone();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let special = catalog.table_by_name("special_facility").unwrap();
    let (vlr, bit_1) = (subscriber.column_index("vlr_location").unwrap(), subscriber.column_index("bit_1").unwrap());
    let data_a = special.column_index("data_a").unwrap();
    // Subscribers with special facility 1 (s % 4 >= 1 and s % 7 != 0), so both sides update two rows.
    let keys: Vec<i32> =
        (1..=i32::try_from(common::SUBSCRIBERS).unwrap()).filter(|s| s % 4 >= 1 && s % 7 != 0).collect();

    let mut pg = connect(&url).unwrap();
    let update_location = pg.prepare("UPDATE subscriber SET vlr_location = $1 WHERE s_id = $2").unwrap();
    let update_bit = pg.prepare("UPDATE subscriber SET bit_1 = $1 WHERE s_id = $2").unwrap();
    let update_data = pg.prepare("UPDATE special_facility SET data_a = $1 WHERE s_id = $2 AND sf_type = $3").unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(20);
    let (mut pg_one, mut swt_one, mut pg_two, mut swt_two) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..txns * 2 {
        let s = keys[rng.random_range(0..keys.len())];
        let value: i32 = rng.random_range(0..1_000_000);
        let small: i16 = rng.random_range(0..256);
        if i % 2 == 0 {
            let started = Instant::now();
            assert_eq!(pg.execute(&update_location, &[&i64::from(value), &s]).unwrap(), 1);
            pg_one.push(started.elapsed());
            let started = Instant::now();
            let mut txn = db.begin().unwrap();
            assert!(txn.update(subscriber.id, &[Value::Int4(s)], &[(vlr, Value::Int8(i64::from(value)))]).unwrap());
            txn.commit().unwrap();
            swt_one.push(started.elapsed());
        } else {
            let started = Instant::now();
            let mut t = pg.transaction().unwrap();
            assert_eq!(t.execute(&update_bit, &[&(small % 2), &s]).unwrap(), 1);
            assert_eq!(t.execute(&update_data, &[&small, &s, &1i16]).unwrap(), 1);
            t.commit().unwrap();
            pg_two.push(started.elapsed());
            let started = Instant::now();
            let mut txn = db.begin().unwrap();
            assert!(txn.update(subscriber.id, &[Value::Int4(s)], &[(bit_1, Value::Int2(small % 2))]).unwrap());
            assert!(
                txn.update(special.id, &[Value::Int4(s), Value::Int2(1)], &[(data_a, Value::Int2(small))]).unwrap()
            );
            txn.commit().unwrap();
            swt_two.push(started.elapsed());
        }
    }
    println!("{txns} transactions of each kind, µs               |      avg |      p50 |      p90 |      p99");
    let a = summary("UPDATE_LOCATION, PostgreSQL alone", pg_one);
    let b = summary("UPDATE_LOCATION, SWT (direct mode)", swt_one);
    let c = summary("UPDATE_SUBSCRIBER_DATA, PostgreSQL alone", pg_two);
    let d = summary("UPDATE_SUBSCRIBER_DATA, SWT (direct mode)", swt_two);
    println!("SWT / PostgreSQL average: UPDATE_LOCATION {:.2}, UPDATE_SUBSCRIBER_DATA {:.2}", b / a, d / c);
    let status = cache.swt_status().unwrap();
    println!(
        "SWT commits {}, refused {}",
        status.commits.load(std::sync::atomic::Ordering::Relaxed),
        status.refused.load(std::sync::atomic::Ordering::Relaxed)
    );
    // Both sides agree after it all.
    let mut client = connect(&url).unwrap();
    common::assert_tables_equal(&db, &mut client, "true");
}
