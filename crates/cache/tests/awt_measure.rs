//! AWT propagation figures, run by hand in release:
//! `cargo test --release -p pgtier-cache --test awt_measure -- --ignored --nocapture`.
//! PostgreSQL is a private cluster with the benchmark settings (fsync on).
//! For 1, 2, 4 and 8 apply connections: the maximum propagation rate (a
//! burst of single-subscriber updates committed faster than PostgreSQL can
//! take them, timed until drained; with `PGTIER_AWT_SPAN_EVERY=n`, every
//! n-th transaction updates two subscribers, which may span apply lanes),
//! then the commit-to-PostgreSQL lag p50
//! and p99 at a steady offered rate (`PGTIER_AWT_RATE`, default 4,000 write
//! transactions/s: the write share of TATP at 20,000 txn/s) of synchronous
//! commits (asynchronous ones reach the stream only at the WAL's next flush,
//! up to `async_flush_interval` = 10 ms later).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::populate_tatp;
use pgtier_backend::BackendConfig;
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_cache::{AwtConfig, Cache, CacheConfig, GroupKind, LoadOptions};
use pgtier_engine::{CommitMode, Database, EngineConfig, Value};
use rand::{Rng, SeedableRng};

#[test]
#[ignore = "a minute or more; run by hand in release"]
fn measure_awt_rate_and_lag() {
    let burst = common::env_u64("PGTIER_AWT_BURST", 40_000);
    let rate = common::env_u64("PGTIER_AWT_RATE", 4_000);
    let steady_s = common::env_u64("PGTIER_AWT_STEADY_S", 10);
    let span_every = common::env_u64("PGTIER_AWT_SPAN_EVERY", 0);
    let cluster = PrivateCluster::start(ClusterOptions::for_benchmark()).unwrap();
    let url = cluster.create_database("awt_measure").unwrap();
    populate_tatp(&url);
    println!("lanes | max rate (txn/s) | steady {rate}/s: lag p50 ms | p99 ms | applied");
    for lanes in [1usize, 2, 4, 8] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), EngineConfig { commit_mode: CommitMode::Async, ..EngineConfig::default() })
            .unwrap();
        let params = BackendConfig { url: Some(url.clone()), ..BackendConfig::default() }.resolve().unwrap();
        let config = CacheConfig {
            awt: AwtConfig { node: format!("measure{lanes}"), apply_connections: lanes, ..AwtConfig::default() },
            ..CacheConfig::default()
        };
        let cache = Cache::open(db, Some(params), config).unwrap();
        cache.create_group(&common::tatp_group("awt", GroupKind::Awt, false)).unwrap();
        cache.load("awt", &LoadOptions::default()).unwrap();
        let db = cache.database().clone();
        let catalog = db.catalog();
        let subscriber = catalog.table_by_name("subscriber").unwrap();
        let vlr = subscriber.column_index("vlr_location").unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(lanes as u64);
        let keys = i32::try_from(common::SUBSCRIBERS).unwrap();
        let update = |rng: &mut rand::rngs::StdRng, mode: CommitMode, subscribers: usize| {
            let mut txn = db.begin_with(mode).unwrap();
            for _ in 0..subscribers {
                txn.update(
                    subscriber.id,
                    &[Value::Int4(rng.random_range(1..=keys))],
                    &[(vlr, Value::Int4(rng.random_range(0..1_000_000)))],
                )
                .unwrap();
            }
            txn.commit().unwrap();
        };
        // Burst.
        let started = Instant::now();
        // Committed asynchronously: faster than any propagation, so the rate is propagation's.
        for i in 0..burst {
            update(&mut rng, CommitMode::Async, if span_every > 0 && i % span_every == 0 { 2 } else { 1 });
        }
        assert!(cache.wait_propagated(Duration::from_secs(600)));
        let max_rate = burst as f64 / started.elapsed().as_secs_f64();
        // Steady rate.
        let status = cache.propagation().unwrap();
        status.lag.reset();
        let applied_before = status.applied_txns.load(std::sync::atomic::Ordering::Relaxed);
        let interval = Duration::from_secs_f64(1.0 / rate as f64);
        let started = Instant::now();
        let mut next = started;
        // Committed durably: a transaction is readable from the stream at its commit.
        while started.elapsed() < Duration::from_secs(steady_s) {
            update(&mut rng, CommitMode::Sync, 1);
            next += interval;
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        assert!(cache.wait_propagated(Duration::from_secs(600)));
        let info = cache.propagation_info().unwrap();
        let applied = status.applied_txns.load(std::sync::atomic::Ordering::Relaxed) - applied_before;
        println!("{lanes:>5} | {max_rate:>16.0} | {:>25.2} | {:>6.2} | {applied}", info.lag_p50_ms, info.lag_p99_ms);
        let verified = cache.verify("awt").unwrap();
        assert!(verified.is_clean(), "{verified:?}");
        // The next lane count is another node: this one's origins would use
        // up the benchmark cluster's max_replication_slots (10).
        cache.shutdown();
        drop(cache);
        common::drop_node_origins(&mut pgtier_backend::connect::connect(&url).unwrap(), &format!("measure{lanes}"));
    }
}
