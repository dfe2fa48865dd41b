//! Autorefresh under a steady stream of PostgreSQL changes (issue 16's
//! figures): random INSERT/UPDATE/DELETE at a fixed rate of row changes per
//! second on a durable PostgreSQL (the benchmark settings), a reader
//! querying the cache meanwhile; then the lag from PostgreSQL's commit to
//! the cache's, and how long after the writer stops the cache equals
//! PostgreSQL. A measurement, not a check of speed:
//! `cargo test --release -p pgtier-cache --test autorefresh_measure -- --ignored --nocapture`
//! (`PGTIER_AR_MEASURE_SECS`, default 120; `PGTIER_AR_MEASURE_RATE` row changes/s, default 2000).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{assert_tables_equal, populate_tatp, tatp_group};
use pgtier_backend::connect::connect;
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_cache::{CreateGroup, GroupKind, LoadOptions};
use pgtier_engine::Value;
use rand::{Rng, SeedableRng};

#[test]
#[ignore = "a measurement (minutes): run with --ignored --nocapture"]
fn steady_changes_reach_the_cache_with_low_lag() {
    let seconds: u64 = std::env::var("PGTIER_AR_MEASURE_SECS").map_or(120, |v| v.parse().unwrap());
    let rate: u64 = std::env::var("PGTIER_AR_MEASURE_RATE").map_or(2000, |v| v.parse().unwrap());
    let cluster = PrivateCluster::start(ClusterOptions::for_benchmark()).unwrap();
    let url = cluster.create_database("ar_measure").unwrap();
    populate_tatp(&url);
    let dir = tempfile::tempdir().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    cache.create_group(&CreateGroup { autorefresh: true, ..tatp_group("tatp", GroupKind::ReadOnly, false) }).unwrap();
    cache.load("tatp", &LoadOptions::default()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = {
        let (db, stop, reads) = (cache.database().clone(), stop.clone(), reads.clone());
        std::thread::spawn(move || {
            let subscriber = db.catalog().table_by_name("subscriber").unwrap().id;
            let mut rng = rand::rngs::StdRng::seed_from_u64(3);
            let mut buf = pgtier_engine::RowBuf::new();
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..200 {
                    let mut txn = db.begin().unwrap();
                    txn.get(subscriber, &[Value::Int4(rng.random_range(1..=common::SUBSCRIBERS as i32))], &mut buf)
                        .unwrap();
                    txn.commit().unwrap();
                }
                reads.fetch_add(200, Ordering::Relaxed);
                // A reader among others, not a CPU hog on two cores.
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    // Open loop: transactions of 1-3 row changes, paced to `rate` changes a second.
    let mut client = connect(&url).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let started = Instant::now();
    let (mut changes, mut next_id) = (0u64, common::SUBSCRIBERS as i32 + 1);
    let mut behind_max = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(seconds) {
        let due = started + Duration::from_micros(changes * 1_000_000 / rate);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        } else {
            behind_max = behind_max.max(now - due);
        }
        let mut txn = client.transaction().unwrap();
        for _ in 0..rng.random_range(1..=3) {
            let s = rng.random_range(1..=common::SUBSCRIBERS as i32);
            let value = rng.random_range(0..1_000_000i64);
            changes += match rng.random_range(0..10) {
                0..=5 => txn.execute("UPDATE subscriber SET msc_location = $2 WHERE s_id = $1", &[&s, &value]).unwrap(),
                6 => txn.execute("UPDATE access_info SET data1 = ($2::int8 % 256)::smallint WHERE s_id = $1", &[&s, &value]).unwrap(),
                7 => {
                    let start = (value % 3 * 8) as i16;
                    txn.execute("INSERT INTO call_forwarding SELECT s_id, sf_type, $2::int2, ($2::int2 + 8)::int2, 'w' FROM special_facility WHERE s_id = $1 ON CONFLICT DO NOTHING", &[&s, &start]).unwrap()
                }
                8 => txn.execute("DELETE FROM call_forwarding WHERE s_id = $1", &[&s]).unwrap(),
                _ => {
                    next_id += 1;
                    txn.execute("INSERT INTO subscriber (s_id, sub_nbr, bit_1, hex_1, byte2_1, msc_location, vlr_location) VALUES ($1, lpad(($1::int4)::text, 15, '0'), 1, 1, 1, $2, NULL)", &[&next_id, &value]).unwrap()
                        + txn.execute("INSERT INTO access_info VALUES ($1, 1, 1, 1, 'x', 'y')", &[&next_id]).unwrap()
                }
            }
            .max(1);
        }
        txn.commit().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let stopped = Instant::now();
    assert!(cache.wait_autorefreshed("tatp", Duration::from_secs(60)).unwrap());
    let caught_up = stopped.elapsed();
    assert_tables_equal(cache.database(), &mut client, "true");
    let equal_after = stopped.elapsed();
    let tally = cache.verify("tatp").unwrap();
    assert!(tally.is_clean(), "{tally:?}");
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let status = cache.autorefresh_status().into_iter().next().unwrap();
    println!(
        "{seconds} s of PostgreSQL changes at {:.0} row changes/s ({} transactions applied, {} changes; the writer fell behind its schedule by at most {} ms), {:.0} cache reads/s meanwhile",
        changes as f64 / elapsed,
        status.applied_txns.load(Ordering::Relaxed),
        status.applied_changes.load(Ordering::Relaxed),
        behind_max.as_millis(),
        reads.load(Ordering::Relaxed) as f64 / elapsed,
    );
    println!(
        "refresh lag (PostgreSQL commit to cache commit): p50 {:.2} ms, p99 {:.2} ms; caught up {} ms after the writer stopped; tables compared equal {} ms after; verify clean; re-snapshots {}",
        status.lag.quantile_us(0.5) / 1000.0,
        status.lag.quantile_us(0.99) / 1000.0,
        caught_up.as_millis(),
        equal_after.as_millis(),
        status.resnapshots.load(Ordering::Relaxed),
    );
    assert!(caught_up < Duration::from_secs(1), "the cache must equal PostgreSQL within 1 s of the writer stopping");
}
